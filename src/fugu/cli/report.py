"""``fugu report RELEASE(S)`` (an HTML report of saved releases) and ``fugu demo`` (all models)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import click

from ._common import (
    emit,
    is_tty,
    load_histogram,
    quiet_requested,
    refuse_overwriting,
    refuse_unused,
)

__all__ = ["register"]


def _truth_loader(data: str | None, engine: str | None, out_of_domain: str, sql: str | None) -> Any:
    if data is None and sql is None:
        return None
    cache: dict[str, Any] = {}

    def truth(domain: Any) -> Any:
        key = repr(domain.to_dict())
        if key not in cache:
            hist = load_histogram(data or "", domain, engine, out_of_domain, sql)
            cache[key] = hist.counts
        return cache[key]

    return truth


@click.command("report")
@click.argument("releases", nargs=-1, required=True, type=click.Path(dir_okay=False))
@click.option(
    "--out",
    "-o",
    "out",
    default="fugu-release-report.html",
    show_default=True,
    type=click.Path(dir_okay=False),
    help="The HTML file to write.",
)
@click.option(
    "--data",
    help="The true data ('adult' or a CSV/Parquet file) for true-vs-released "
    "comparisons; the report is then for the publisher only.",
)
@click.option(
    "--engine",
    type=click.Choice(["numpy", "duckdb", "spark"]),
    help="Counting engine for --data files.",
)
@click.option("--sql", help="Count the result of this DuckDB query as the true data.")
@click.option(
    "--out-of-domain",
    type=click.Choice(["error", "clip", "drop"]),
    default="error",
    show_default=True,
)
@click.option(
    "--queries",
    "n_queries",
    type=click.IntRange(min=1),
    default=500,
    show_default=True,
    help="Random range queries (public randomness) used to show the error.",
)
@click.option(
    "--seed",
    type=int,
    default=0,
    show_default=True,
    help="Seed of the query workload (public; the releases are not re-randomised).",
)
@click.option("--title", help="Report title.")
@click.option("--json", "as_json", is_flag=True, help="Machine-readable output.")
@click.pass_context
def report_cmd(
    ctx: click.Context,
    releases: tuple[str, ...],
    out: str,
    data: str | None,
    engine: str | None,
    sql: str | None,
    out_of_domain: str,
    n_queries: int,
    seed: int,
    title: str | None,
    as_json: bool,
) -> None:
    """Write one self-contained HTML report about saved RELEASES.

    \b
    The guarantee in plain words, expected error per query, error vs epsilon, heatmaps of
    2-D cubes and, with --data, released vs true answers (publisher only).
    Example: fugu report adult.npz --data adult --out adult-report.html
    """
    from ..release import Release
    from ..report.release_report import write_release_report

    if data is None and sql is None:
        refuse_unused(
            ctx,
            {"engine": "--engine", "out_of_domain": "--out-of-domain"},
            "without --data or --sql (they say how to read the true data)",
        )
    if data is not None and sql is not None:  # the query was counted and --data ignored
        raise click.UsageError(
            "give the true data as --data or as --sql (the query names its input), not both"
        )
    inputs = [("a release being reported", p) for p in releases]
    if data is not None and data != "adult":
        inputs.append(("the data file (--data)", data))
    refuse_overwriting(out, "--out", inputs)
    loaded = [(click.format_filename(p), Release.load(p)) for p in releases]
    path = write_release_report(
        loaded,
        out,
        truth=_truth_loader(data, engine, out_of_domain, sql),
        n_queries=n_queries,
        seed=seed,
        title=title,
        progress=is_tty(),
    )
    emit({"report": str(path), "releases": [p for p, _ in loaded]}, as_json, f"report: {path}")


@click.command("demo")
@click.option(
    "--epsilon",
    "-e",
    type=float,
    default=1.0,
    show_default=True,
    help="Privacy-loss bound of every release.",
)
@click.option(
    "--queries",
    "n_queries",
    type=click.IntRange(min=1),
    default=1000,
    show_default=True,
    help="Random range queries for the central cube.",
)
@click.option(
    "--attributes",
    "-a",
    default="age,sex,occupation,income",
    show_default=True,
    help="Adult attributes of the central cube.",
)
@click.option(
    "--models",
    "-m",
    default="central,ldp,blowfish,graph",
    show_default=True,
    help="Privacy models to run (comma list).",
)
@click.option("--quick", is_flag=True, help="Fewer repetitions and epsilons (a few seconds).")
@click.option("--seed", type=int, help="Reproducible, NOT private run.")
@click.option(
    "--report",
    "report_path",
    default="fugu-report.html",
    show_default=True,
    type=click.Path(dir_okay=False),
    help="HTML report to write.",
)
@click.option("--no-report", is_flag=True, help="Do not write the HTML report.")
@click.option(
    "--quiet", "-q", is_flag=True, help="Do not say what is running (stderr) or show progress."
)
@click.option("--json", "as_json", is_flag=True, help="Machine-readable output.")
def demo_cmd(
    epsilon: float,
    n_queries: int,
    attributes: str,
    models: str,
    quick: bool,
    seed: int | None,
    report_path: str,
    no_report: bool,
    quiet: bool,
    as_json: bool,
) -> None:
    """Try every privacy model on bundled data; print errors; write an HTML report.

    \b
    central   the Adult cube by every cube mechanism (Laplace, hierarchical, Privelet...)
    ldp       Adult's ordinal attributes under local DP (HDG and baselines)
    blowfish  private k-means of generated geo points under Blowfish policies
    graph     node- and edge-DP triangle counts of two small social graphs
    """
    from ..demo import run_demo

    ctx = click.get_current_context()
    if no_report:
        refuse_unused(ctx, {"report_path": "--report"}, "with --no-report (no report is written)")
    chosen = [m.strip() for m in models.split(",") if m.strip()]
    if "central" not in chosen:
        refuse_unused(
            ctx,
            {"attributes": "--attributes", "n_queries": "--queries"},
            "without 'central' in --models (they shape the central-DP cube)",
        )
    if not no_report:  # checked before the run (minutes), not when the report is saved
        from ..report import _refuse_other_file

        refuse_overwriting(report_path, "--report", [])
        _refuse_other_file(Path(report_path))
    if seed is not None:
        click.echo(f"warning: --seed {seed} makes the run reproducible and NOT private", err=True)
    result = run_demo(
        epsilon=epsilon,
        n_queries=n_queries,
        attributes=attributes.split(","),
        seed=seed,
        report_path=None if no_report else report_path,
        models=chosen,
        quick=quick,
        progress=not quiet_requested(quiet),
        log=None if quiet else (lambda line: click.echo(line, err=True)),
    )
    emit(result.to_dict(), as_json, result.text)


def register(cli: click.Group) -> None:
    """Add ``fugu report`` and replace ``fugu demo`` with the four-model version."""
    cli.add_command(report_cmd, "report")
    cli.add_command(demo_cmd, "demo")
