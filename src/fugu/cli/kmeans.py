"""``fugu kmeans``: private k-means of points in a CSV or Parquet file (ε-DP or Blowfish)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import click
import numpy as np

from ._common import (
    cli_errors,
    emit,
    ledger_line,
    ledger_option,
    open_ledger,
    parse_attribute,
    quiet_requested,
    read_domain_file,
    refuse_overwriting,
    refuse_unused,
    seed_source,
    table,
)


class _AutoOr(click.ParamType):
    """A number, or the word ``auto`` (the library chooses)."""

    def __init__(self, kind: type) -> None:
        self.kind = kind
        self.name = f"{kind.__name__}|auto"

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        if isinstance(value, str) and value.strip().lower() == "auto":
            return "auto"
        try:
            return self.kind(value)
        except (TypeError, ValueError):
            self.fail(f"expected a {self.kind.__name__} or 'auto', got {value!r}", param, ctx)


_AUTO_INT = _AutoOr(int)
_AUTO_FLOAT = _AutoOr(float)


def _read_columns(path: str, names: list[str]) -> np.ndarray:
    """Read the named numeric columns of a CSV or Parquet file into an (n, d) array."""
    p = Path(path)
    if not p.exists():
        raise click.BadParameter(f"file {path!r} does not exist", param_hint="--data")
    if p.suffix.lower() in (".parquet", ".pq"):
        import pyarrow.parquet as pq

        tbl = pq.read_table(p)
    else:
        from ..engines.file_numpy import read_csv_table

        tbl = read_csv_table(p)
    missing = [n for n in names if n not in tbl.column_names]
    if missing:
        raise click.BadParameter(
            f"columns {missing} not in {path} (it has {tbl.column_names})", param_hint="--columns"
        )
    cols = []
    for n in names:
        col = tbl.column(n)
        try:
            cols.append(col.to_numpy(zero_copy_only=False).astype(np.float64))
        except (TypeError, ValueError):
            raise click.BadParameter(
                f"column {n!r} is not numeric", param_hint="--columns"
            ) from None
    return np.stack(cols, axis=1)


def _domain(columns: tuple[str, ...], domain_file: str | None) -> Any:
    from ..domain import Domain

    specs = [s.strip() for item in columns for s in item.split(",") if s.strip()]
    if domain_file:
        dom = read_domain_file(domain_file)
        bounded = [s for s in specs if ":" in s]
        if bounded:
            # the names were taken and the bounds dropped: 'x:0..3' ran on the file's 0..19
            raise click.UsageError(
                f"with --domain, --columns names columns only (their bounds come from the "
                f"domain file), got {bounded}; drop the bounds or drop --domain"
            )
        if specs:
            names = [s.partition(":")[0] for s in specs]
            if list(dom.names) != names:
                dom = Domain([dom.attributes[dom.axis(n)] for n in names])
        return dom
    if not specs:
        raise click.UsageError(
            "give --columns 'x:0..399,y:0..299' (name:low..high or name:edges=a|b|c per column) "
            "or --domain FILE.json; fugu never derives bounds from the data"
        )
    return Domain([parse_attribute(s, option="--columns") for s in specs])


def register(cli: click.Group) -> None:
    """Add ``fugu kmeans`` to the command group."""

    @cli.command("kmeans", short_help="Private k-means centres (ε-DP or a Blowfish policy).")
    @click.option("--data", required=True, help="CSV or Parquet file with one point per row.")
    @click.option(
        "--columns",
        "-c",
        multiple=True,
        help="Columns and their bounded domains: 'lat:0..399,lon:0..299' (or names with --domain).",
    )
    @click.option("--domain", "domain_file", help="Domain JSON file (ordinal attributes).")
    @click.option("--k", "k", type=int, default=4, show_default=True, help="Number of clusters.")
    @click.option("--epsilon", "-e", type=float, required=True, help="Total privacy-loss bound ε.")
    @click.option(
        "--policy",
        help="Blowfish policy: 'distance:theta=20', 'attribute', 'partition:lat=40,lon=30' "
        "(default: ε-DP).",
    )
    @click.option(
        "--iterations",
        type=_AUTO_INT,
        default="auto",
        show_default=True,
        help="Lloyd iterations (public); 'auto' chooses them from n, d, k and ε (Su et al. 2016).",
    )
    @click.option(
        "--size-fraction",
        type=_AUTO_FLOAT,
        default="auto",
        show_default=True,
        help="Share of each iteration's ε for the cluster sizes; 'auto' (Su et al. 2016's split).",
    )
    @click.option(
        "--init",
        type=click.Choice(["auto", "spread", "random"]),
        default="auto",
        show_default=True,
        help="Starting centres: 'auto' (a private coarse-grid start where it helps), or "
        "'spread' / 'random' (public randomness: no data, no ε).",
    )
    @click.option("--quiet", "-q", is_flag=True, help="No progress bar (default off when piped).")
    @click.option(
        "--sensitivity",
        type=click.Choice(["safe", "paper"]),
        default="safe",
        show_default=True,
        help="'paper' reproduces the paper's same-cluster sensitivities (not a valid guarantee).",
    )
    @click.option(
        "--clip", is_flag=True, help="Clip out-of-domain points instead of failing (recorded)."
    )
    @click.option(
        "--engine",
        type=click.Choice(["numpy", "duckdb", "spark"]),
        help="Counting engine for the per-iteration sums (default: numpy; the file is streamed).",
    )
    @click.option("--spark-master", help="Spark master URL for --engine spark.")
    @click.option("--seed", type=int, help="Reproducible, NOT private run.")
    @click.option(
        "--out", type=click.Path(dir_okay=False), help="Write the centres to .csv or .json."
    )
    @click.option(
        "--report",
        "report_path",
        type=click.Path(dir_okay=False),
        help="HTML report with the objective ratio vs ε (uses the raw data: for the data owner).",
    )
    @click.option(
        "--repetitions",
        type=int,
        default=10,
        show_default=True,
        help="Repetitions per ε in --report.",
    )
    @ledger_option
    @click.option("--json", "as_json", is_flag=True, help="Machine-readable output.")
    @click.pass_context
    def kmeans(
        ctx: click.Context,
        data: str,
        columns: tuple[str, ...],
        domain_file: str | None,
        k: int,
        epsilon: float,
        policy: str | None,
        iterations: int | str,
        size_fraction: float | str,
        init: str,
        quiet: bool,
        sensitivity: str,
        clip: bool,
        engine: str | None,
        spark_master: str | None,
        seed: int | None,
        out: str | None,
        report_path: str | None,
        repetitions: int,
        ledger: str | None,
        as_json: bool,
    ) -> None:
        """Private k-means centres of the points in DATA (ε-DP or a Blowfish policy)."""
        from ..blowfish.kmeans import KMeans

        if not report_path:
            refuse_unused(ctx, {"repetitions": "--repetitions"}, "without --report")
        inputs = [("the data file (--data)", data), ("the budget ledger (--ledger)", ledger)]
        refuse_overwriting(out, "--out", inputs)
        # the report is written after the fit: a bad path failed with the ledger charged
        refuse_overwriting(report_path, "--report", [*inputs, ("the centres (--out)", out)])
        dom = _domain(columns, domain_file)
        if spark_master and engine != "spark":
            raise click.UsageError("--spark-master needs --engine spark")
        engine_options = {"master": spark_master} if spark_master else {}
        # With an engine the file is counted partition by partition, never loaded whole; the
        # objective-ratio report needs the points themselves, so it reads them.
        X: Any = _read_columns(data, list(dom.names)) if engine is None or report_path else None
        model = "central-dp" if policy is None else "blowfish"
        rng = seed_source(seed)
        km = KMeans(
            k,
            epsilon,
            policy=policy,
            n_iter=iterations,
            init=init,
            progress=not quiet_requested(quiet) and not as_json,
            rng=rng,
            domain=dom,
            clip=clip,
            size_fraction=size_fraction,
            sensitivity=sensitivity,
        )
        # the report's experiment (raw data, for the data owner) runs before the fit: run after
        # it, its refusals (--repetitions 0, k above the number of points under a policy with
        # ⊥) came with the ledger charged and the centres lost
        exp = None
        if report_path:
            exp = _experiment(report_path, X, dom, policy, km, repetitions, seed)
        with open_ledger(ledger, model=model, policy=_ledger_policy(policy, dom)) as acct:
            km.set_params(accountant=acct)
            with cli_errors():
                if engine is None:
                    km.fit(X)
                else:
                    km.fit(data, engine=engine, **engine_options)
        centres = km.cluster_centers_
        names = list(dom.names)
        g = km.guarantee_
        result = {
            "centres": [dict(zip(names, map(float, c), strict=True)) for c in centres],
            "guarantee": g.to_dict(),
            "sensitivity": km.sensitivity_,
        }
        path = _write_centres(out, names, centres, result) if out else None
        if report_path:
            _report(report_path, exp, dom, km)

        def text() -> str:
            rows = [[i, *[round(float(v), 3) for v in c]] for i, c in enumerate(centres)]
            lines = [
                table(rows, ["cluster", *names]),
                "",
                g.describe(),
                f"sensitivities: q_size {km.sensitivity_['q_size']:g}, "
                f"q_sum {km.sensitivity_['q_sum']:g} ({km.sensitivity_['mode']})",
            ]
            if path:
                lines.append(f"centres written to {path}")
            if report_path:
                lines.append(f"report written to {report_path}")
            if ledger:
                lines.append(ledger_line(ledger))
            return "\n".join(lines)

        emit(result, as_json, text)


def _ledger_policy(policy: str | None, dom: Any) -> Any:
    """The policy k-means charges under (``KMeans`` parses ``--policy`` on this domain too)."""
    if policy is None:
        return None
    from ..blowfish import parse_policy

    with cli_errors():
        return parse_policy(policy, dom)


def _write_centres(out: str, names: list[str], centres: np.ndarray, result: dict[str, Any]) -> Path:
    p = Path(out)
    if p.suffix.lower() == ".json":
        p.write_text(json.dumps(result, indent=2, default=str))
    else:
        lines = ["cluster," + ",".join(names)]
        lines += [f"{i}," + ",".join(repr(float(v)) for v in c) for i, c in enumerate(centres)]
        p.write_text("\n".join(lines) + "\n")
    return p


def _experiment(
    path: str,
    X: np.ndarray,
    dom: Any,
    policy: str | None,
    km: Any,
    repetitions: int,
    seed: int | None,
) -> Any:
    """The objective-ratio experiment of ``--report`` (non-private: raw data, seeded noise)."""
    from ..report.kmeans_experiment import objective_ratio_experiment

    pols: list[Any] = [None] if policy is None else [None, policy]
    with cli_errors():
        return objective_ratio_experiment(
            X,
            dom,
            pols,
            n_clusters=km.n_clusters,
            n_iter=km.n_iter,
            repetitions=repetitions,
            sensitivity=km.sensitivity,
            size_fraction=km.size_fraction,
            seed=seed or 0,
            dataset=Path(str(path)).stem,
            clip=bool(km.clip),
        )


def _report(path: str, exp: Any, dom: Any, km: Any) -> None:
    from ..report import Report

    rep = Report("fugu k-means (experiment on raw data: not for release)")
    rep.add_text(
        "Not for release",
        "Besides the private centres, this report compares private k-means with non-private "
        "k-means on the raw data (objective ratios, the number of points): it is for the data "
        "owner. To publish, share the private centres and the guarantee only.",
        note=True,
    )
    rep.add_text("Guarantee", km.guarantee_.describe())
    rep.add_table(
        "Private centres",
        ["cluster", *dom.names],
        [[i, *[f"{v:.3f}" for v in c]] for i, c in enumerate(km.cluster_centers_)],
    )
    rep.add_text(
        "How good are private centres?",
        "The objective (sum of squared distances to the nearest centre) of private k-means "
        "divided by that of non-private Lloyd from the same data-independent start, over a grid "
        "of epsilon. "
        "This comparison uses the raw data: keep this report with the data owner.",
    )
    exp.add_to_report(rep)
    rep.save(path)
