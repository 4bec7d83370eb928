"""The ``fugu`` command.

Each privacy model adds its commands from its own module (``cli/central.py``, ``cli/blowfish.py``,
``cli/graph.py``, ``cli/ldp.py``) through a ``register(group)`` function, and cube mechanisms add
themselves to :data:`fugu.cli._common.MECHANISMS` so ``fugu release`` and ``fugu demo`` reach them.
"""

from __future__ import annotations

import importlib
import json
import re
import sys
from pathlib import Path
from typing import Any

import click

from ._common import (
    MECHANISMS,
    cells_records,
    check_option_keys,
    cli_words,
    domain_options,
    emit,
    explicit,
    ledger_option,
    load_domain,
    load_histogram,
    mechanism_list,
    open_ledger,
    parse_where,
    quiet_requested,
    refuse_overwriting,
    refuse_unlisted_json,
    refuse_unused,
    release_text,
    seed_source,
)

MODEL_MODULES = (
    "fugu.cli.central",
    "fugu.cli.blowfish",
    "fugu.cli.kmeans",
    "fugu.cli.graph",
    "fugu.cli.ldp",
    "fugu.cli.report",
    "fugu.cli.engines",
)


@click.group(context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100})
@click.option("--debug", is_flag=True, help="Show tracebacks on errors.")
@click.version_option(package_name="fugu")
@click.pass_context
def cli(ctx: click.Context, debug: bool) -> None:
    """fugu: statistics about sensitive data under a privacy guarantee you choose.

    \b
    Central DP cubes     fugu release --mechanism laplace|hierarchical|privelet|privelet+
    Blowfish policies    fugu release --mechanism ordered --policy line ; fugu kmeans
    Graphs (node/edge)   fugu graph count --pattern triangle --unit node
    Local DP             fugu ldp simulate | perturb | aggregate
    Look at releases     fugu query, fugu info, fugu report
    Try everything       fugu demo
    """
    ctx.ensure_object(dict)
    ctx.obj["debug"] = debug


def _mechanism_names() -> list[str]:
    _load_models()
    return sorted(MECHANISMS)


@cli.command()
@domain_options()
@click.option(
    "--mechanism",
    "-m",
    default="laplace",
    show_default=True,
    help="Cube mechanism; see 'fugu release --list'.",
)
@click.option("--epsilon", "-e", type=float, required=False, help="Privacy-loss bound ε > 0.")
@click.option(
    "--neighbours",
    type=click.Choice(["replace", "add-remove"]),
    default="replace",
    show_default=True,
)
@click.option(
    "--policy",
    help="Blowfish policy, e.g. 'line', 'distance:theta=5', 'attribute', 'partition:age=10'.",
)
@click.option(
    "--branching", type=int, help="Tree fan-out for hierarchical mechanisms (default: chosen)."
)
@click.option("--plain", help="Privelet+: attributes not transformed (comma list) or 'auto'.")
@click.option("--option", "-o", "extra", multiple=True, help="Other mechanism option as key=value.")
@click.option(
    "--engine", type=click.Choice(["numpy", "duckdb", "spark"]), help="Counting engine for files."
)
@click.option("--sql", help="Count the result of this DuckDB query (its WHERE is a public filter).")
@click.option("--spark-master", help="Spark master URL for --engine spark (default: local[*]).")
@click.option(
    "--progress",
    is_flag=True,
    help="Show a progress bar while scanning files even when stderr is not a terminal.",
)
@click.option("--quiet", "-q", is_flag=True, help="No progress bar (default off when piped).")
@click.option(
    "--out-of-domain",
    type=click.Choice(["error", "clip", "drop"]),
    default="error",
    show_default=True,
)
@click.option("--seed", type=int, help="Reproducible, NOT private run.")
@ledger_option
@click.option(
    "--out",
    type=click.Path(dir_okay=False),
    help="Write the release here (.npz); without it the released cells are printed.",
)
@click.option(
    "--head",
    type=click.IntRange(min=0),
    default=20,
    show_default=True,
    help="How many released cells to print (0: all); with --out only when given. Not with "
    "--json, which lists every cell.",
)
@click.option("--list", "list_only", is_flag=True, help="List the mechanisms and exit.")
@click.option("--json", "as_json", is_flag=True, help="Machine-readable output.")
def release(
    data: str,
    attributes: tuple[str, ...],
    domain_file: str | None,
    mechanism: str,
    epsilon: float | None,
    neighbours: str,
    policy: str | None,
    branching: int | None,
    plain: str | None,
    extra: tuple[str, ...],
    engine: str | None,
    sql: str | None,
    spark_master: str | None,
    progress: bool,
    quiet: bool,
    out_of_domain: str,
    seed: int | None,
    ledger: str | None,
    out: str | None,
    head: int,
    list_only: bool,
    as_json: bool,
) -> None:
    """Release a noisy data cube of DATA over the chosen attributes."""
    names = _mechanism_names()
    if list_only:
        emit(
            {n: MECHANISMS[n].summary for n in names},
            as_json,
            lambda: mechanism_list(names),
        )
        return
    if epsilon is None:
        raise click.UsageError("--epsilon is required (e.g. --epsilon 1.0)")
    if mechanism not in MECHANISMS:
        raise click.BadParameter(
            f"unknown mechanism {mechanism!r}; choose from {names}", param_hint="--mechanism"
        )
    entry = MECHANISMS[mechanism]
    options: dict[str, Any] = {"neighbours": neighbours}
    given: dict[str, str] = {}
    if policy is not None:
        options["policy"], given["policy"] = policy, "--policy"
    if branching is not None:
        options["branching"], given["branching"] = branching, "--branching"
    if plain is not None:
        options["plain"], given["plain"] = _plain_names(plain, f"--plain {plain!r}"), "--plain"
    if explicit(click.get_current_context(), "neighbours"):
        given["neighbours"] = f"--neighbours {neighbours}"
    flags = {"policy": policy, "branching": branching, "plain": plain, "neighbours": neighbours}
    for kv in extra:
        k, sep, v = kv.partition("=")
        if not sep:
            raise click.BadParameter(f"expected key=value, got {kv!r}", param_hint="--option")
        key = k.strip().replace("-", "_")
        if key in given:  # the later one silently won: refuse, naming both
            first = given[key]
            if first.startswith("--"):
                first = f"{_OPTION_FLAGS.get(key, '--' + key)} {flags.get(key)}"
            raise click.UsageError(
                f"{first} and -o {kv} both set {key}; give it once. Nothing was read or spent."
            )
        value = _plain_names(v.strip(), f"-o {kv}") if key == "plain" else _parse_value(v.strip())
        options[key], given[key] = value, f"-o {kv}"
    # Refuse what the mechanism would ignore, before any data is read or budget spent.
    check_option_keys(
        f"mechanism {mechanism!r}",
        given,
        {"neighbours": "--neighbours"}
        | {k: _OPTION_FLAGS.get(k, f"-o {k}=...") for k in entry.options},
    )
    ctx = click.get_current_context()
    if as_json:
        refuse_unused(
            ctx,
            {"head": "--head"},
            "with --json (JSON output lists every released cell; leave out --json for a table "
            "of the first --head cells)",
        )
    if sql:
        refuse_unused(ctx, {"data": "--data"}, "with --sql (the query names its input)")
    elif data == "adult":
        refuse_unused(
            ctx,
            {"engine": "--engine", "spark_master": "--spark-master", "progress": "--progress"},
            "with --data adult (the bundled data is counted in memory)",
        )
    engine_options: dict[str, Any] = {}
    if spark_master:
        if engine != "spark":
            raise click.UsageError("--spark-master needs --engine spark")
        engine_options["master"] = spark_master
    if sql and engine == "numpy":  # the library's refusal spoke of path=None and engine='duckdb'
        raise click.UsageError(
            "--sql runs its query on DuckDB (the default) or Spark: leave out --engine numpy, or "
            "give --engine duckdb or spark. Nothing was read or spent."
        )
    if (sql or data != "adult") and explicit(ctx, "progress"):
        from ..engines import default_file_engine

        counting = engine or default_file_engine(None if sql else data, sql)
        if counting != "numpy":  # only the numpy engine's reader shows a bar: it was ignored
            how = "--sql" if sql else (f"--engine {engine}" if engine else f"--data {data}")
            raise click.UsageError(
                f"--progress has no effect with {how} (the {counting} engine counts it; only the "
                f"numpy engine, which reads CSV files, shows a progress bar)"
            )
    refuse_overwriting(
        out,
        "--out",
        [("the budget ledger (--ledger)", ledger), ("the data file (--data)", data),
         ("the domain file (--domain)", domain_file)],
        release=True,
    )  # fmt: skip
    dom = load_domain(data, attributes, domain_file)
    if as_json and not out:
        refuse_unlisted_json(dom, "Nothing was read or spent.")
    pol = None
    if entry.model == "blowfish" and policy:
        from .blowfish import release_policy

        # a bad policy is refused before the ledger is touched; the ledger checks this one
        pol = release_policy(policy, dom, neighbours)
    progress = (progress or not quiet_requested(quiet)) and not quiet and not as_json
    if progress and data != "adult" and (engine or "numpy") == "numpy" and not sql:
        engine_options["progress"] = True
    if ledger and not Path(ledger).exists():
        raise click.UsageError(
            f"ledger {ledger!r} does not exist; create it with "
            f"'fugu ledger init {ledger} --total EPS --model {entry.model}'"
        )
    hist = load_histogram(data, dom, engine, out_of_domain, sql, **engine_options)
    rng = seed_source(seed)
    with open_ledger(ledger, model=entry.model, policy=pol) as acct:
        rel = entry.run(hist, epsilon, options, rng, accountant=acct)
    path = rel.save(out) if out else None
    summary = rel.summary() | {"file": str(path) if path else None}
    if path is None:
        summary["cells"] = cells_records(rel)
    emit(summary, as_json, lambda: release_text(rel, path, ledger, head=head))


_OPTION_FLAGS = {
    "policy": "--policy",
    "branching": "--branching",
    "plain": "--plain",
    "neighbours": "--neighbours",
}


def _plain_names(text: str, how: str) -> str | list[str]:
    """``auto`` or the comma list of attribute names of ``--plain`` / ``-o plain=``; an empty
    name (``--plain ,``, ``--plain age,,sex``) is refused: it silently meant "none" or dropped
    a typo."""
    if text == "auto":
        return "auto"
    names = [p.strip() for p in text.split(",")]
    if not all(names):
        kept = ",".join(p for p in names if p)
        flag = "--plain" if how.startswith("--") else "-o plain="
        fix = (
            f"write {flag}{' ' if flag == '--plain' else ''}{kept}"
            if kept
            else (f"leave {flag.rstrip('=')} out to transform every attribute")
        )
        raise click.BadParameter(
            f"{how} has an empty attribute name (a ',' at either end or two in a row); give "
            f"attribute names separated by single commas, or 'auto': {fix}",
            param_hint="--plain" if flag == "--plain" else "--option",
        )
    return names


def _parse_value(v: str) -> Any:
    for conv in (int, float):
        try:
            return conv(v)
        except ValueError:
            pass
    if v.lower() in ("true", "false"):
        return v.lower() == "true"
    return v


@cli.group()
def ledger() -> None:
    """A privacy-budget ledger file shared by several releases."""


@ledger.command("init")
@click.argument("path", type=click.Path(dir_okay=False))
@click.option("--total", type=float, required=True, help="Total ε this ledger may spend.")
@click.option(
    "--model",
    type=click.Choice(["central-dp", "blowfish", "node-dp", "edge-dp", "participant-dp", "ldp"]),
    default="central-dp",
    show_default=True,
    help="Privacy model the releases share.",
)
@click.option(
    "--policy",
    help="Blowfish: the one policy the releases share, as given to their --policy (with "
    "'+bottom' for --neighbours add-remove). With the releases' domain (--attributes/--domain) "
    "the ledger records the policy's identifier at once; without it, the first release binds it.",
)
@domain_options(
    "The releases' data: 'adult' (bundled) names its attributes in --attributes; with --policy.",
    attributes_help="With --policy: the releases' attributes ('age' for adult, "
    "'age:0..99,sex:F|M' for files).",
)
@click.option(
    "--delta",
    type=float,
    default=0.0,
    show_default=True,
    help="Total δ that (ε, δ) releases may add up to (0: pure ε-DP releases only).",
)
def ledger_init(
    path: str,
    total: float,
    model: str,
    policy: str | None,
    data: str,
    attributes: tuple[str, ...],
    domain_file: str | None,
    delta: float,
) -> None:
    """Create a ledger with a declared total ε (sequential composition under one model)."""
    from ..budget import create_ledger
    from ..errors import FuguError

    if policy is not None and model != "blowfish":
        raise click.UsageError(f"--policy has no effect with --model {model} (Blowfish only)")
    ctx = click.get_current_context()
    if policy is None:
        refuse_unused(
            ctx,
            {"data": "--data", "attributes": "--attributes", "domain_file": "--domain"},
            "without --policy (only a Blowfish policy is tied to a domain)",
        )
    tie: Any = policy
    if policy is not None and (attributes or domain_file):
        from ..blowfish import parse_policy

        tie = parse_policy(policy, load_domain(data, attributes, domain_file))
    # never overwrites: re-initialising a ledger would forget the spends it records
    try:
        acct = create_ledger(path, total, model=model, policy=tie, delta=delta)
    except FuguError as exc:  # the library's words for the two numbers are its arguments'
        text = re.sub(r"^(total|delta) ", r"--\1 ", str(exc))
        text = re.sub(r"\b(total|delta)=(\S+?)(?=[;,.)]?(\s|$))", r"--\1 \2", text)
        if text == str(exc):
            raise
        raise type(exc)(text) from None
    note = ""
    if policy is not None:
        note = f", policy {acct.budget.policy}"
        if tie is policy:
            note += ": bound to the domain of its first release"
    click.echo(
        f"ledger {path}: total epsilon {total:g}{f', delta {delta:g}' if delta else ''} "
        f"({model}{note})"
    )


@ledger.command("show")
@click.argument("path", type=click.Path(exists=True, dir_okay=False))
def ledger_show(path: str) -> None:
    """Print what a ledger has spent."""
    from ..budget import Accountant

    click.echo(Accountant.load(path).report())


@cli.command()
@click.argument("release_file", type=click.Path(dir_okay=False))
@click.option(
    "--where",
    "-w",
    multiple=True,
    help="Condition 'age=20..29' or 'occupation=Professional'; repeat to AND.",
)
@click.option("--json", "as_json", is_flag=True)
def query(release_file: str, where: tuple[str, ...], as_json: bool) -> None:
    """Answer a range query from a saved release."""
    from ..queries import RangeQuery
    from ..release import Release

    rel = Release.load(release_file)
    if rel.domain is None:  # one number (a graph count): RangeQuery({}) was refused by it
        what = str(getattr(rel, "statistic", "") or rel.kind)
        if where:
            raise click.UsageError(
                f"{click.format_filename(release_file)} is one number ({what}), not a cube: "
                "leave out --where to print it"
            )
        scalar: Any = rel  # CountRelease: answer() and expected_error() take no query
        _print_answer(what, scalar.answer(), scalar.expected_error(), rel, as_json)
        return
    conds: dict[str, Any] = {}
    for w in where:
        k, v = parse_where(w, rel.domain)
        if k in conds:
            raise click.BadParameter(f"attribute {k!r} appears twice", param_hint="--where")
        conds[k] = v
    q = RangeQuery(conds)
    _print_answer(str(q), rel.answer(q), rel.expected_error(q), rel, as_json)


def _print_answer(query: str, ans: float, err: float | None, rel: Any, as_json: bool) -> None:
    """One answer of ``fugu query``, with its RMSE and, for a seeded release, NOT PRIVATE."""
    private = bool(rel.guarantee.private)
    # an answer from a seeded (--seed) release carries its NOT PRIVATE mark, like the release
    not_private = (
        ""
        if private
        else "\nNOT PRIVATE: from a release made with --seed (reproducible); do not publish."
    )
    emit(
        {"query": query, "answer": ans, "expected_error": err, "private": private},
        as_json,
        lambda: (
            f"{query}: {ans:,.1f}"
            + (f"  (± {err:,.1f} RMSE)" if err is not None else "")
            + not_private
        ),
    )


@cli.command()
@click.argument("release_file", type=click.Path(dir_okay=False))
@click.option("--json", "as_json", is_flag=True)
def info(release_file: str, as_json: bool) -> None:
    """Describe a saved release: its guarantee and domain."""
    from ..release import Release

    rel = Release.load(release_file)
    s = rel.summary()

    def text() -> str:
        lines = [f"kind: {s['kind']}", rel.guarantee.describe()]
        if "domain" in s:
            lines.append("domain: " + ", ".join(f"{k} {v}" for k, v in s["domain"].items()))
        params = rel.guarantee.parameters
        if params:
            lines.append("parameters: " + ", ".join(f"{k}={v}" for k, v in params.items()))
        return "\n".join(lines)

    emit(s, as_json, text)


def _load_models() -> None:
    for mod in MODEL_MODULES:
        try:
            module = importlib.import_module(mod)
        except ModuleNotFoundError as exc:
            if exc.name != mod:
                raise
            continue
        register = getattr(module, "register", None)
        if register is not None and not getattr(module, "_registered", False):
            register(cli)
            module._registered = True  # type: ignore[attr-defined]


def main(argv: list[str] | None = None) -> int:
    """Entry point: one readable line on error and a non-zero exit code; --debug for tracebacks."""
    from ..errors import FuguError

    args = list(sys.argv[1:] if argv is None else argv)
    debug = "--debug" in args
    _load_models()
    try:
        cli.main(args=args, prog_name="fugu", standalone_mode=False)
    except click.exceptions.Abort:
        click.echo("aborted", err=True)
        return 130
    except click.ClickException as exc:
        exc.show()
        return exc.exit_code
    except click.exceptions.Exit as exc:
        return int(exc.exit_code)
    except (FuguError, ValueError, TypeError, OSError, json.JSONDecodeError) as exc:
        if debug:
            raise
        # the library's Python spellings (epsilon=1.0, out_of_domain='clip') in the CLI's words
        click.echo(f"fugu: error: {cli_words(str(exc))}", err=True)
        return 2
    except MemoryError as exc:  # numpy's "Unable to allocate 74.5 GiB ..." was a traceback
        if debug:
            raise
        click.echo(
            f"fugu: error: out of memory ({exc or 'no detail'}); choose a smaller domain, "
            "fewer attributes or smaller parameters (--debug shows where it happened)",
            err=True,
        )
        return 2
    except Exception as exc:  # noqa: BLE001 - e.g. Spark's errors: one line, never a traceback
        if debug:
            raise
        click.echo(
            f"fugu: error: {type(exc).__name__}: {exc} (unexpected: rerun with --debug for the "
            "traceback, and please report it if fugu is at fault)",
            err=True,
        )
        return 1
    return 0


from . import _foundation  # noqa: E402,F401  (registers the Laplace baseline)
from ._common import register_mechanism  # noqa: E402  (re-export for model modules)

__all__ = ["cli", "main", "register_mechanism"]
