"""Shared pieces of the command line: loading data and domains, the mechanism registry, output."""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import click

from ..domain import Domain, Nominal, Ordinal
from ..errors import InvalidParameterError


# -- mechanism registry ------------------------------------------------------------------------
@dataclass(frozen=True)
class MechanismEntry:
    """A cube mechanism reachable from ``fugu release`` and ``fugu demo``.

    ``run(hist, epsilon, options, rng)`` returns a Release; ``options`` holds the CLI's
    mechanism options (``policy``, ``branching``, ``plain``, ``neighbours``, ...), already parsed.
    ``demo_options`` are used by ``fugu demo``; ``in_demo`` False keeps it out of the demo table.
    """

    name: str
    run: Callable[..., Any]
    model: str
    summary: str
    demo_options: dict[str, Any] = field(default_factory=dict)
    in_demo: bool = True


MECHANISMS: dict[str, MechanismEntry] = {}


def register_mechanism(entry: MechanismEntry) -> None:
    MECHANISMS[entry.name] = entry


# -- domains and data ----------------------------------------------------------------------------
def parse_attribute(spec: str) -> Ordinal | Nominal:
    """``name:lo..hi`` (integers), ``name:edges=0|10|20`` (bins) or ``name:a|b|c`` (nominal)."""
    name, sep, rest = spec.partition(":")
    name = name.strip()
    if not sep:
        raise InvalidParameterError(
            f"attribute {spec!r} needs a domain: 'age:0..99', 'gain:edges=0|100|1000' or 'sex:F|M' "
            f"(or give --domain FILE.json); fugu never infers a domain from the data, since its "
            f"min and max are private"
        )
    rest = rest.strip()
    if rest.startswith("edges="):
        return Ordinal(name, edges=[float(x) for x in rest[6:].split("|")])
    if ".." in rest:
        lo, _, hi = rest.partition("..")
        try:
            return Ordinal(name, int(lo), int(hi))
        except ValueError:
            raise InvalidParameterError(f"attribute {spec!r}: bounds must be integers") from None
    return Nominal(name, [v for v in rest.split("|") if v])


def load_domain(data: str, attributes: tuple[str, ...], domain_file: str | None) -> Domain:
    if domain_file:
        return Domain.from_dict(json.loads(Path(domain_file).read_text()))
    names = [a for item in attributes for a in item.split(",") if a] if attributes else []
    if data == "adult":
        from ..datasets.adult import adult_attribute, adult_domain

        if not names:
            return adult_domain()
        return Domain([adult_attribute(n) if ":" not in n else parse_attribute(n) for n in names])
    if not names:
        raise InvalidParameterError(
            "give --attributes 'name:domain,...' or --domain FILE.json for a data file"
        )
    return Domain([parse_attribute(n) for n in _split_specs(attributes)])


def _split_specs(attributes: tuple[str, ...]) -> list[str]:
    out: list[str] = []
    for item in attributes:
        out.extend(s for s in item.split(",") if s)
    return out


def load_histogram(
    data: str,
    domain: Domain,
    engine: str | None,
    out_of_domain: str,
    sql: str | None = None,
    **options: Any,
) -> Any:
    """The histogram of the bundled Adult data, a file, or a SQL query's result.

    ``engine=None`` lets :meth:`fugu.Histogram.from_file` pick the faster engine for the format.
    """
    from ..histogram import Histogram

    if sql:
        return Histogram.from_file(
            None,
            domain,
            engine=engine,
            sql=sql,
            out_of_domain=out_of_domain,  # type: ignore[arg-type]
            **options,
        )
    if data == "adult":
        from ..datasets import adult

        return Histogram.from_records(adult(), domain, out_of_domain=out_of_domain)  # type: ignore[arg-type]
    return Histogram.from_file(data, domain, engine=engine, out_of_domain=out_of_domain, **options)  # type: ignore[arg-type]


def domain_options(
    data_help: str = "'adult' (bundled) or a CSV/Parquet file.",
) -> Callable[[Any], Any]:
    """The ``--data``, ``--attributes`` and ``--domain`` options every data command shares."""

    def decorate(fn: Any) -> Any:
        fn = click.option(
            "--domain", "domain_file", help="Domain JSON file (instead of --attributes)."
        )(fn)
        fn = click.option(
            "--attributes",
            "-a",
            multiple=True,
            help="Attributes: names for adult, or 'age:0..99,sex:F|M' for files.",
        )(fn)
        return click.option("--data", default="adult", show_default=True, help=data_help)(fn)

    return decorate


# -- output ----------------------------------------------------------------------------------------
def emit(obj: Any, as_json: bool, text: str | Callable[[], str]) -> None:
    if as_json:
        click.echo(json.dumps(obj, indent=2, default=str))
    else:
        click.echo(text() if callable(text) else text)


def table(rows: list[list[Any]], header: list[str]) -> str:
    cells = [header] + [[_fmt(c) for c in r] for r in rows]
    widths = [max(len(r[i]) for r in cells) for i in range(len(header))]
    lines = [
        "  ".join(
            c.rjust(w) if i else c.ljust(w) for i, (c, w) in enumerate(zip(r, widths, strict=True))
        )
        for r in cells
    ]
    lines.insert(1, "  ".join("-" * w for w in widths))
    return "\n".join(lines)


def _fmt(x: Any) -> str:
    if isinstance(x, float):
        return f"{x:,.2f}" if abs(x) < 1e6 else f"{x:.3g}"
    return str(x)


def seed_source(seed: int | None) -> Any:
    from ..noise import RandomSource

    if seed is not None:
        click.echo(f"warning: --seed {seed} makes the run reproducible and NOT private", err=True)
    return RandomSource(seed=seed) if seed is not None else None


def is_tty() -> bool:
    return sys.stderr.isatty()
