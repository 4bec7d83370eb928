"""Shared pieces of the command line: loading data and domains, the mechanism registry, output."""

from __future__ import annotations

import difflib
import json
import math
import os
import re
import sys
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
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
    ``options`` are the option keys ``run`` reads besides ``neighbours`` (which every cube
    mechanism takes): ``fugu release`` refuses any other key before reading data or spending.
    ``run`` also receives ``accountant=`` (a ledger's accountant, or None) to charge.
    """

    name: str
    run: Callable[..., Any]
    model: str
    summary: str
    demo_options: dict[str, Any] = field(default_factory=dict)
    in_demo: bool = True
    options: tuple[str, ...] = ()

    def __repr__(self) -> str:
        return f"MechanismEntry({self.name!r}, model={self.model!r}, options={self.options})"


MECHANISMS: dict[str, MechanismEntry] = {}


def register_mechanism(entry: MechanismEntry) -> None:
    MECHANISMS[entry.name] = entry


# -- options: refuse what a mechanism would ignore ------------------------------------------------
def check_option_keys(what: str, given: dict[str, str], valid: dict[str, str]) -> None:
    """Refuse option keys ``what`` does not read, listing the valid ones (before any spending).

    ``given`` maps each key to how the user wrote it (``-o branchng=4``, ``--policy``); ``valid``
    maps each valid key to how to write it.
    """
    bad = [k for k in given if k not in valid]
    if not bad:
        return
    lines = []
    for k in bad:
        close = difflib.get_close_matches(k, list(valid), n=1)
        lines.append(
            f"{what} does not take {given[k]}"
            + (f" (did you mean {valid[close[0]]}?)" if close else "")
        )
    listed = f"its options: {', '.join(valid.values())}" if valid else "it takes no options"
    raise click.UsageError("; ".join(lines) + f"; {listed}. Nothing was read or spent.")


def explicit(ctx: click.Context, *names: str) -> list[str]:
    """The parameters among ``names`` the user gave on the command line (not defaults)."""
    from click.core import ParameterSource

    out = []
    for n in names:
        src = ctx.get_parameter_source(n)
        if src is not None and src not in (ParameterSource.DEFAULT, ParameterSource.DEFAULT_MAP):
            out.append(n)
    return out


def refuse_unused(ctx: click.Context, unused: dict[str, str], why: str) -> None:
    """Refuse options given explicitly that this run would ignore (``unused``: name -> flag)."""
    given = explicit(ctx, *unused)
    if given:
        flags = ", ".join(unused[n] for n in given)
        raise click.UsageError(f"{flags} {'has' if len(given) == 1 else 'have'} no effect {why}")


# -- the budget ledger -----------------------------------------------------------------------------
def ledger_option(fn: Any) -> Any:
    """``--ledger FILE``: charge this release to a budget ledger (locked, refuses overspending)."""
    return click.option(
        "--ledger",
        type=click.Path(dir_okay=False),
        callback=_nonempty_ledger,
        help="Budget ledger JSON (fugu ledger init): charged under a file lock; refuses a "
        "release over its total or of another privacy model.",
    )(fn)


def _nonempty_ledger(ctx: click.Context, param: click.Parameter, value: str | None) -> str | None:
    # --ledger "$LEDGER" with the variable unset must not release uncharged
    if value is not None and not value.strip():
        raise click.BadParameter(
            "the ledger path is empty (an unset shell variable?); give the ledger file, or "
            "leave --ledger out to release without charging one. Nothing was read or spent.",
            ctx=ctx,
            param=param,
        )
    return value


@contextmanager
def open_ledger(path: str | None, *, model: str, policy: Any = None) -> Iterator[Any]:
    """The ledger's accountant under its exclusive lock (None without ``--ledger``).

    ``policy``: the ``fugu.blowfish.Policy`` the release will run under (None otherwise); the
    ledger refuses another policy, and a ledger made with ``fugu ledger init --policy SPEC``
    without a domain (or by an older fugu) is bound to this policy's identifier once the spec
    is checked to name it. The mechanism charges under the same identifier. Everything spent
    inside the block is written atomically when it exits; other processes using the same
    ledger wait, so concurrent commands never overspend.
    """
    if path is None:
        yield None
        return
    if not path.strip():  # the caller asked for a ledger: never release uncharged
        raise click.BadParameter("the ledger path is empty", param_hint="--ledger")
    from ..budget import ledger_file

    with ledger_file(path, model=model, policy=policy) as acct:
        yield acct


# -- conditions: CLI spelling, valid categories, intervals clipped to the domain -----------------
_DASH_RANGE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*-\s*(\d+(?:\.\d+)?)\s*$")


def parse_where(text: str, domain: Domain | None = None, *, option: str = "--where") -> Any:
    """``name=lo..hi`` or ``name=value`` as (name, condition), checked against ``domain``.

    * ``age=20-29`` is refused with the spelling ``age=20..29``;
    * an unknown attribute or category lists the valid ones;
    * an interval that leaves an integer ordinal domain is clipped to it with a notice on
      stderr: the domain holds every record (out-of-domain values are refused or clipped when
      the data is read), so the part outside counts 0 and clipping changes no answer. An
      interval entirely outside the domain is refused, since it names no cell at all.
    """
    from ..queries import parse_condition

    name, sep, value = text.partition("=")
    m = _DASH_RANGE.match(value) if sep else None
    if m:
        raise click.BadParameter(
            f"{text!r}: write a range with two dots, {name.strip()}={m[1]}..{m[2]}",
            param_hint=option,
        )
    try:
        key, cond = parse_condition(text)
    except InvalidParameterError as exc:
        raise click.BadParameter(str(exc), param_hint=option) from None
    if domain is None:
        return key, cond
    if key not in domain.names:
        close = difflib.get_close_matches(key, list(domain.names), n=1)
        raise click.BadParameter(
            f"{text!r}: no attribute {key!r}; the release has {', '.join(domain.names)}"
            + (f" (did you mean {close[0]}?)" if close else ""),
            param_hint=option,
        )
    attr = domain.attribute(key)
    if isinstance(attr, Nominal):
        if isinstance(cond, tuple):
            raise click.BadParameter(
                f"{text!r}: {key} is nominal; give one value or group, e.g. {key}={attr.values[0]}",
                param_hint=option,
            )
        h = attr.hierarchy
        names = [n.name for n in h.nodes]  # values and group names
        if str(cond) not in names:
            groups = [n for n in names if n not in attr.values and n != h.root.name]
            same_case = [n for n in names if n.lower() == str(cond).lower()]
            close = same_case or difflib.get_close_matches(str(cond), names, n=1)
            raise click.BadParameter(
                f"{text!r}: {key} has no value {cond!r}"
                + (f" (did you mean {close[0]}?)" if close else "")
                + f"; values: {', '.join(attr.values)}"
                + (f"; groups: {', '.join(groups)}" if groups else ""),
                param_hint=option,
            )
        return key, cond
    if isinstance(attr, Ordinal) and attr.edges is not None:
        return key, _whole_bins(text, key, attr, cond, option)
    if isinstance(attr, Ordinal) and attr.edges is None and attr.high is not None:
        if isinstance(cond, str) and re.fullmatch(r"-?\d+", cond.strip()):
            cond = int(cond)
        lo_any, hi_any = cond if isinstance(cond, tuple) else (cond, cond)
        if not (isinstance(lo_any, int | float) and isinstance(hi_any, int | float)):
            return key, cond  # the library explains bad bounds
        lo, hi = float(lo_any), float(hi_any)
        if hi < lo or math.isnan(lo) or math.isnan(hi):
            return key, cond
        if hi < attr.low or lo > attr.high:
            raise click.BadParameter(
                f"{text!r}: no value of {key} in {lo_any}..{hi_any} lies in the domain "
                f"{attr.low}..{attr.high}, so the interval names no cell",
                param_hint=option,
            )
        if lo >= attr.low and hi <= attr.high:
            return key, cond
        c_lo = lo_any if lo >= attr.low else attr.low
        c_hi = hi_any if hi <= attr.high else attr.high
        click.echo(
            f"notice: {key}={lo_any}..{hi_any} clipped to the domain: {key}={c_lo}..{c_hi} "
            f"(every record lies in {attr.low}..{attr.high}, so the answer is the same)",
            err=True,
        )
        return key, (c_lo, c_hi) if isinstance(cond, tuple) else c_lo
    return key, cond


def _whole_bins(text: str, key: str, attr: Ordinal, cond: Any, option: str) -> Any:
    """A numeric condition on a binned attribute, with a notice naming the bins it counts.

    The release holds bins, not values, so numbers select every bin from the one holding the
    low bound to the one holding the high bound (:class:`fugu.RangeQuery`); the answer is that
    of the whole bins, which the notice says (the printed query still shows the numbers).
    """
    from ..queries import RangeQuery

    if isinstance(cond, str):
        labels = attr.labels
        if cond in labels:
            return cond
        try:
            cond = float(cond) if "." in cond or "e" in cond.lower() else int(cond)
        except ValueError:
            raise click.BadParameter(
                f"{text!r}: {key} is binned; give a bin ({', '.join(labels[:4])}"
                f"{', ...' if len(labels) > 4 else ''}), a number or a range lo..hi",
                param_hint=option,
            ) from None
    bounds = cond if isinstance(cond, tuple) else (cond, cond)
    if all(isinstance(b, str) for b in bounds):
        return cond  # bin labels: whole bins by construction
    from ..errors import FuguError

    try:
        b = RangeQuery({key: cond}).bounds(Domain([attr]))[0]
    except FuguError as exc:
        raise click.BadParameter(str(exc), param_hint=option) from None
    first, last = attr.labels[int(b[0])], attr.labels[int(b[1]) - 1]
    bins = first if first == last else f"{first} to {last}"
    click.echo(
        f"notice: {key} is binned, so {text.strip()} counts whole bins: {bins} (a release of a "
        f"binned attribute holds bins, not values; name bins to make this explicit)",
        err=True,
    )
    return cond


_PY_TO_CLI = (
    (re.compile(r"out_of_domain='(\w+)'( \(ordinal only\))? or '(\w+)'"),
     r"--out-of-domain \1\2 or --out-of-domain \3"),
    (re.compile(r"out_of_domain='(\w+)'"), r"--out-of-domain \1"),
    (re.compile(r"pass clip=True \(fugu kmeans --clip\)"), "pass --clip"),
    (re.compile(r"neighbours='([\w-]+)'"), r"--neighbours \1"),
    (re.compile(r"pass e\.g\. epsilon=(\S+)"), r"pass e.g. --epsilon \1"),
)  # fmt: skip


def cli_words(message: str) -> str:
    """A library message with its Python argument names replaced by the CLI options."""
    for pat, rep in _PY_TO_CLI:
        message = pat.sub(rep, message)
    return message


@contextmanager
def cli_errors() -> Iterator[None]:
    """Re-raise fugu errors of the block in the command line's words (same class)."""
    from ..errors import FuguError

    try:
        yield
    except FuguError as exc:
        text = cli_words(str(exc))
        if text == str(exc):
            raise
        try:
            new = type(exc)(text)
        except Exception:  # noqa: BLE001 - an exotic constructor: keep the original
            raise exc from None
        raise new from None


# -- domains and data ----------------------------------------------------------------------------
def parse_attribute(spec: str, option: str | None = None) -> Ordinal | Nominal:
    """``name:lo..hi`` (integers), ``name:edges=0|10|20`` (bins) or ``name:a|b|c`` (nominal).

    ``option`` (``"--attributes"``) is named in the errors. A nominal spec with an empty value
    (``sex:F||M``, ``sex:F|M|``) is refused: an empty CSV field is a missing value in fugu
    (refused when the data is read), so an empty category could never hold a record, and
    dropping it silently would hide the typo.
    """
    where = f"{option} {spec!r}" if option else f"attribute spec {spec!r}"
    name, sep, rest = spec.partition(":")
    name = name.strip()
    if not sep:
        raise InvalidParameterError(
            f"{where} needs a domain: 'age:0..99', 'gain:edges=0|100|1000' or 'sex:F|M' "
            f"(or give --domain FILE.json); fugu never infers a domain from the data, since its "
            f"min and max are private"
        )
    rest = rest.strip()
    if rest.startswith("edges="):
        pieces = rest[6:].split("|")
        try:
            edges = [float(x) for x in pieces]
        except ValueError:
            bad = next(x for x in pieces if not _is_float(x))
            raise InvalidParameterError(
                f"{where}: bin edge {bad!r} is not a number; write the edges as increasing "
                f"numbers separated by single '|', e.g. {name}:edges=0|100|1000"
            ) from None
        return Ordinal(name, edges=edges)
    m = _DASH_RANGE.match(rest)
    if m:
        raise InvalidParameterError(
            f"{where}: write an integer range with two dots, {name}:{m[1]}..{m[2]} "
            f"(a single '-' would make a nominal value {rest!r})"
        )
    if ".." in rest:
        lo, _, hi = rest.partition("..")
        try:
            low, high = int(lo), int(hi)
        except ValueError:
            raise InvalidParameterError(
                f"{where}: bounds must be integers, e.g. {name}:0..99 (for other numbers "
                f"give bins: {name}:edges=0|2.5|10)"
            ) from None
        if high < low:
            raise InvalidParameterError(
                f"{where}: the low bound {low} is above the high bound {high}; write "
                f"{name}:{high}..{low}"
            )
        return Ordinal(name, low, high)
    values = rest.split("|")
    if not any(values):
        raise InvalidParameterError(
            f"{where}: {name} has no values; list them, e.g. {name}:F|M (or an integer range "
            f"{name}:0..99)"
        )
    if "" in values:
        kept = "|".join(v for v in values if v)
        raise InvalidParameterError(
            f"{where}: {name} has an empty value (a '|' at either end or two in a row); an "
            f"empty field in a data file is a missing value, never a category, so remove the "
            f"extra '|' ({name}:{kept}), or replace the empty fields in the data by a label "
            f"(e.g. 'unknown') and list it"
        )
    return Nominal(name, values)


def _is_float(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return False
    return True


def load_domain(data: str, attributes: tuple[str, ...], domain_file: str | None) -> Domain:
    """The domain of ``--domain FILE`` or of ``--attributes`` (one of the two; for ``--data
    adult`` the bundled domains of the named attributes, all of them without any)."""
    if domain_file:
        if any(a.strip() for a in attributes):
            # --attributes was ignored: a release over another domain than the one typed
            raise click.UsageError(
                f"give --attributes or --domain, not both (--attributes {','.join(attributes)!r} "
                f"would be ignored for the domain in {domain_file!r}). Nothing was read or spent."
            )
        return read_domain_file(domain_file)
    names = [a for item in attributes for a in item.split(",") if a] if attributes else []
    if data == "adult":
        from ..datasets.adult import adult_attribute, adult_domain

        if not names:
            return adult_domain()
        return Domain(
            [
                adult_attribute(n) if ":" not in n else parse_attribute(n, "--attributes")
                for n in names
            ]
        )
    if not names:
        raise InvalidParameterError(
            "give --attributes 'name:domain,...' or --domain FILE.json for a data file"
        )
    return Domain([parse_attribute(n, "--attributes") for n in _split_specs(attributes)])


def read_domain_file(path: str, option: str = "--domain") -> Domain:
    """The domain described by a JSON file, with errors that name ``option`` and the file
    (a missing file, bad JSON or a description without its keys were raw OSError,
    JSONDecodeError or KeyError messages, the last with a traceback)."""
    from ..errors import FuguError

    try:
        text = Path(path).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        why = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
        raise InvalidParameterError(f"{option} {path!r} cannot be read: {why}") from None
    try:
        desc = json.loads(text)
    except (ValueError, RecursionError) as exc:
        raise InvalidParameterError(
            f"{option} {path!r} is not valid JSON ({exc}); write it with "
            f"json.dumps(domain.to_dict()) or see 'Domain files' in docs/cli.md"
        ) from None
    try:
        return Domain.from_dict(desc)
    except FuguError as exc:
        raise type(exc)(f"{option} {path!r}: {exc}") from None


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
    with cli_errors():
        return _load_histogram(data, domain, engine, out_of_domain, sql, **options)


def _load_histogram(
    data: str,
    domain: Domain,
    engine: str | None,
    out_of_domain: str,
    sql: str | None = None,
    **options: Any,
) -> Any:
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
    *,
    data_default: str | None = "adult",
    attributes_help: str = "Attributes: names for adult, or 'age:0..99,sex:F|M' for files.",
) -> Callable[[Any], Any]:
    """The ``--data``, ``--attributes`` and ``--domain`` options every data command shares
    (``data_default=None``: ``--data`` is required)."""

    def decorate(fn: Any) -> Any:
        fn = click.option(
            "--domain", "domain_file", help="Domain JSON file (instead of --attributes)."
        )(fn)
        fn = click.option("--attributes", "-a", multiple=True, help=attributes_help)(fn)
        if data_default is None:
            return click.option("--data", required=True, help=data_help)(fn)
        return click.option("--data", default=data_default, show_default=True, help=data_help)(fn)

    return decorate


# -- output ----------------------------------------------------------------------------------------
def quiet_requested(quiet: bool = False) -> bool:
    """Progress bars only on a terminal: quiet when stderr is piped or with ``--quiet``."""
    return quiet or not is_tty()


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
    # every digit up to 2**53 (counts are at most that): '1.23e+06' hid four digits of a
    # released count of 1,234,567.89
    if isinstance(x, float):
        return f"{x:,.2f}" if abs(x) < 2.0**53 else f"{x:.6g}"
    return str(x)


def seed_source(seed: int | None) -> Any:
    from ..noise import RandomSource

    if seed is not None:
        click.echo(f"warning: --seed {seed} makes the run reproducible and NOT private", err=True)
    return RandomSource(seed=seed) if seed is not None else None


def is_tty() -> bool:
    return sys.stderr.isatty()


# -- releases: what a command prints when it does not save -----------------------------------------
def ledger_line(path: str | None) -> str:
    """``ledger L.json: spent 0.5 of 2, 1.5 remains`` (read after the locked block wrote it)."""
    if not path:
        return ""
    from ..budget import Accountant

    acct = Accountant.load(path)
    return (
        f"ledger {path}: spent {acct.spent:g} of {acct.budget.epsilon:g} "
        f"({acct.budget.model}), {acct.remaining:g} remains"
    )


def _cells(rel: Any, limit: int | None) -> tuple[list[str], list[list[Any]], int] | None:
    """(header, rows, number of cells) of a release's dense counts, or None if it has none."""
    import numpy as np

    dom = getattr(rel, "domain", None)
    try:
        counts = np.asarray(rel.counts, dtype=np.float64).ravel()
    except (NotImplementedError, AttributeError, TypeError):
        return None
    if dom is None or counts.size != dom.size:
        return None
    n = counts.size
    idx = np.arange(n if not limit else min(limit, n))
    codes = np.stack(np.unravel_index(idx, dom.shape), axis=1) if idx.size else np.zeros((0, 0))
    labels = [a.labels for a in dom.attributes]
    rows = [
        [*(labels[j][int(c[j])] for j in range(dom.ndim)), _number(float(counts[i]))]
        for i, c in zip(idx, codes, strict=True)
    ]
    return [*dom.names, "noisy count"], rows, n


def has_cells(rel: Any) -> bool:
    """Whether a release has dense cells to print or list (a grid or tree release of local DP
    answers range queries without them)."""
    return _cells(rel, 1) is not None


def _number(x: float) -> int | float:
    return int(x) if x.is_integer() and abs(x) < 2**53 else x


#: Above this many cells, JSON output leaves the cells out (save the release with --out).
MAX_JSON_CELLS = 1_000_000


def cells_records(rel: Any) -> list[dict[str, Any]] | None:
    """Every released cell as ``{attribute: label, ..., "count": value}`` (JSON output).

    None when the release has no dense cells or more than :data:`MAX_JSON_CELLS` of them.
    """
    dom = getattr(rel, "domain", None)
    if dom is not None and dom.size > MAX_JSON_CELLS:
        return None
    got = _cells(rel, None)
    if got is None:
        return None
    header, rows, _ = got
    return [dict(zip([*header[:-1], "count"], r, strict=True)) for r in rows]


def refuse_unlisted_json(domain: Any, nothing: str) -> None:
    """Refuse ``--json`` without ``--out`` for a release of more than :data:`MAX_JSON_CELLS`
    cells: the JSON leaves its cells out, so the release (and its budget) was thrown away."""
    size = getattr(domain, "size", 0)
    if size > MAX_JSON_CELLS:
        raise click.UsageError(
            f"--json without --out lists every released cell, and this domain has {size:,} "
            f"cells (over {MAX_JSON_CELLS:,}): add --out FILE.npz to save the release (and "
            f"answer queries from it with fugu query). {nothing}"
        )


def head_given() -> bool:
    """True when the running command's ``--head`` was given on the command line: with
    ``--out`` the cells are then printed as well (``--head`` was ignored there, review 14)."""
    ctx = click.get_current_context(silent=True)
    if ctx is None or "head" not in ctx.params:
        return False
    return bool(explicit(ctx, "head"))


def release_text(rel: Any, path: Any, ledger: str | None, *, head: int = 20) -> str:
    """What a release command prints: the guarantee, then where it went and/or the released
    cells (the first ``head``; with a saved release only when ``--head`` was given)."""
    lines = [rel.guarantee.describe()]
    if path:
        lines.append(f"written to {path}")
    if not path or head_given():  # --head with --out: the saved release's first cells too
        cells = cells_table(rel, head, saved=bool(path))
        lines += [f"released: {rel!r}"] if cells is None else ["", cells]
    if ledger:
        lines.append(ledger_line(ledger))
    return "\n".join(lines)


def cells_table(rel: Any, head: int, saved: bool) -> str | None:
    """The first ``head`` released cells (0: all) as a table, then how to see the others
    (``saved``: the release was written to a file); None when the release has no cells."""
    got = _cells(rel, head or None)
    if got is None:
        return None
    header, rows, n = got
    text = table(rows, header)
    if len(rows) < n:
        text += f"\n... {len(rows):,} of {n:,} cells shown: --head 0 shows all" + (
            "" if saved else "; --out FILE.npz saves the release"
        )
    return text


def mechanism_list(names: list[str], width: int = 100) -> str:
    """``fugu release --list``: mechanism, model and description, wrapped to ``width`` columns."""
    import textwrap

    first = max([len("mechanism"), *(len(n) for n in names)])
    second = max([len("model"), *(len(MECHANISMS[n].model) for n in names)])
    room = max(20, width - first - second - 4)
    out = [
        f"{'mechanism'.ljust(first)}  {'model'.ljust(second)}  what",
        f"{'-' * first}  {'-' * second}  {'-' * min(room, 40)}",
    ]
    for n in names:
        e = MECHANISMS[n]
        parts = textwrap.wrap(e.summary, room) or [""]
        out.append(f"{n.ljust(first)}  {e.model.ljust(second)}  {parts[0]}")
        out += [" " * (first + second + 4) + p for p in parts[1:]]
    return "\n".join(out)


def refuse_overwriting(
    out: str | None,
    option: str,
    inputs: Iterable[tuple[str, str | None]],
    *,
    release: bool = False,
) -> None:
    """Refuse an output path that is one of the command's inputs (``inputs``: (what it is, its
    path) pairs), before anything is read or charged: writing it would destroy that file (the
    private data itself, for ``--data``; the record of the budget spent, for ``--ledger``).
    Also refused: a path whose directory does not exist or is not writable (the write failed
    after the release was made and its ledger charged).
    ``release``: ``out`` is written by :meth:`fugu.Release.save`, which adds ``.npz``; an
    existing file there is replaced only if it is empty or a fugu release (an earlier run)."""
    if not out:
        return
    target = Path(out)
    if release and target.suffix != ".npz":  # the path Release.save writes
        target = target.with_suffix(target.suffix + ".npz")
    parent = target.parent
    if not parent.is_dir() or not os.access(parent, os.W_OK | os.X_OK):
        # the release would be computed (and a ledger charged) before the write failed
        why = "does not exist" if not parent.exists() else (
            "is not a directory" if not parent.is_dir() else "is not writable")  # fmt: skip
        raise click.BadParameter(
            f"{out!r}: the directory {str(parent)!r} {why}; create it or choose another path "
            f"(nothing was read or spent)",
            param_hint=f"'{option}'",
        )
    if target.is_dir():
        # Release.save's atomic rename onto a directory fails after the ledger was charged
        raise click.BadParameter(
            f"{out!r}: {str(target)!r} is a directory; choose a file path "
            f"(nothing was read or spent)",
            param_hint=f"'{option}'",
        )
    for what, path in inputs:
        if not path:
            continue
        same = os.path.abspath(target) == os.path.abspath(path)
        if not same and target.exists() and os.path.exists(path):
            same = os.path.samefile(target, path)
        if same:
            raise click.BadParameter(
                f"{out!r} is {what}: writing it would overwrite that file; choose another path",
                param_hint=f"'{option}'",
            )
    if release and not replaceable(target, _is_release_file):
        # Release.save replaced any file silently (an unrelated .npz of the user's)
        raise click.BadParameter(
            f"{out!r}: {str(target)!r} exists and is not a fugu release; refusing to overwrite "
            f"it: choose another path, or delete it first (nothing was read or spent)",
            param_hint=f"'{option}'",
        )


def replaceable(path: Path, is_kind: Callable[[Path], bool]) -> bool:
    """Whether an output may be written to ``path``: it does not exist, is empty, or is an
    earlier output of the same kind (``is_kind``), which a rerun replaces."""
    try:
        if not path.exists() or path.stat().st_size == 0:
            return True
    except OSError:
        return True  # the write itself will say why it fails
    try:
        return is_kind(path)
    except Exception:  # noqa: BLE001 - unreadable or foreign: not ours to replace
        return False


def _is_release_file(path: Path) -> bool:
    """A file written by :meth:`fugu.Release.save` (a zip holding its JSON header)."""
    import zipfile

    if not zipfile.is_zipfile(path):
        return False
    with zipfile.ZipFile(path) as zf:
        return "__header__.npy" in zf.namelist()


def bool_option(options: dict[str, Any], key: str, default: bool) -> bool:
    """The ``-o key=true|false`` option (``1`` / ``0`` too); any other value is refused, never
    read as true because it is not empty (``-o consistency=2``)."""
    v = options.get(key, default)
    if isinstance(v, str) and v.lower() in ("true", "false"):
        return v.lower() == "true"
    if isinstance(v, bool | int) and v in (0, 1):
        return bool(v)
    raise InvalidParameterError(f"option {key} must be true or false, got {v!r}")


def int_option(options: dict[str, Any], key: str, hint: str = "") -> int | None:
    """The integer option ``-o key=N`` (None when absent or empty). A fractional or non-number
    value is refused: ``int()`` would truncate ``-o fanout=2.9`` to 2 silently."""
    v = options.get(key)
    if v is None or v == "":
        return None
    if isinstance(v, float) and v.is_integer():
        v = int(v)
    if isinstance(v, bool) or not isinstance(v, int):
        raise InvalidParameterError(f"option {key} must be an integer, got {v!r}{hint}")
    return v


def float_option(options: dict[str, Any], key: str) -> float | None:
    """The number option ``-o key=x`` (None when absent); ``true`` / text are refused."""
    v = options.get(key)
    if v is None:
        return None
    if isinstance(v, bool) or not isinstance(v, int | float):
        raise InvalidParameterError(f"option {key} must be a number, got {v!r}")
    return float(v)


def parse_workload(spec: str, dom: Any, seed: int | None, option: str = "--workload") -> Any:
    """``random:N[:K1-K2]`` (seeded) or a JSON file of queries, for ``option``."""
    from ..queries import RangeQuery, Workload, random_workload

    if spec.startswith("random"):
        parts = spec.split(":")
        try:
            if parts[0] != "random" or len(parts) > 3:  # nothing is ignored
                raise ValueError(spec)
            n = int(parts[1]) if len(parts) > 1 and parts[1] else 1000
            if len(parts) > 2:
                lo, _, hi = parts[2].partition("-")
                k: int | tuple[int, int] = (int(lo), int(hi or lo))
            else:
                k = (1, dom.ndim)
        except ValueError:
            raise InvalidParameterError(
                f"{option} {spec!r}: write random:N or random:N:K1-K2 (predicates per query)"
            ) from None
        try:
            return random_workload(dom, n, n_predicates=k, seed=seed)
        except InvalidParameterError as exc:  # n_queries / n_predicates: say where they came from
            raise InvalidParameterError(
                f"{option} {spec!r}: {exc} (random:N:K1-K2 asks for N >= 1 queries of K1 to K2 "
                f"predicates, 1 <= K1 <= K2 <= {dom.ndim}, the number of attributes)"
            ) from None
    path = Path(spec)
    if not path.exists():
        raise InvalidParameterError(
            f"{option} {spec!r} is neither 'random:N[:K1-K2]' nor an existing JSON file of queries"
        )
    try:
        items = json.loads(path.read_text())
    except json.JSONDecodeError as exc:
        raise InvalidParameterError(f"{option} {spec!r} is not valid JSON ({exc})") from None
    if not isinstance(items, list) or not all(isinstance(q, dict) for q in items):
        raise InvalidParameterError(
            f"{option} {spec!r} must hold a JSON list of queries like "
            f'[{{"age": [20, 29], "sex": "Male"}}]'
        )
    return Workload(
        [
            RangeQuery({k: tuple(v) if isinstance(v, list) else v for k, v in q.items()})
            for q in items
        ]
    )
