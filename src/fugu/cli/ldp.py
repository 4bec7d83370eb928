"""``fugu ldp``: local-DP experiments and a two-party (client / server) run from files.

fugu ldp methods
fugu ldp simulate --data synthetic --method hdg,tdg,hio,lhio,calm,msw,uni --epsilon 1 --lambda 2
fugu ldp perturb --method olh --epsilon 1 --data users.csv -a 'age:0..99' --out reports.jsonl
fugu ldp aggregate reports.jsonl --out release.npz
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import click
import numpy as np

from ._common import (
    cells_table,
    check_option_keys,
    domain_options,
    emit,
    has_cells,
    head_given,
    ledger_line,
    ledger_option,
    load_domain,
    open_ledger,
    quiet_requested,
    refuse_overwriting,
    refuse_unlisted_json,
    refuse_unused,
    replaceable,
    seed_source,
    table,
)

DEFAULT_METHODS = "hdg,tdg,hio,lhio,calm,msw,uni"


def _methods() -> dict[str, Any]:
    from ..ldp import METHODS

    return METHODS


def _parse_options(items: tuple[str, ...]) -> dict[str, Any]:
    return _parse_options_given(items)[0]


def _parse_options_given(items: tuple[str, ...]) -> tuple[dict[str, Any], dict[str, str]]:
    """``-o key=value`` items as (options, how each key was written)."""
    from ..errors import InvalidParameterError

    out: dict[str, Any] = {}
    given: dict[str, str] = {}
    for item in items:
        key, sep, val = item.partition("=")
        if not sep:
            raise InvalidParameterError(f"--option {item!r}: write key=value, e.g. branching=4")
        v: Any = val
        for conv in (int, float):
            try:
                v = conv(val)
                break
            except ValueError:
                continue
        if isinstance(v, str) and "," in val:  # one integer per attribute: g2=4,4,2
            try:
                v = [int(part) for part in val.split(",")]
            except ValueError:
                v = val
        k = key.strip().replace("-", "_")
        out[k], given[k] = v, f"-o {item}"
    return out, given


def _check_method_options(method: str, given: dict[str, str]) -> None:
    """Refuse -o keys the method's constructor does not take (before anything is spent)."""
    import inspect

    cls = _methods().get(method.lower())
    if cls is None:
        return  # _make names the valid methods
    keys = [p for p in inspect.signature(cls).parameters if p not in ("domain", "epsilon")]
    check_option_keys(f"LDP method {method!r}", given, {k: f"-o {k}=..." for k in keys})


def _make(method: str, domain: Any, epsilon: float, options: dict[str, Any]) -> Any:
    from ..errors import InvalidParameterError

    methods = _methods()
    cls = methods.get(method.lower())
    if cls is None:
        raise InvalidParameterError(f"unknown LDP method {method!r}; choose from {sorted(methods)}")
    try:
        return cls(domain, epsilon, **options)
    except TypeError as exc:
        raise InvalidParameterError(f"method {method!r}: {exc}") from None


def _check_reports_path(out: str, data: str | None, ledger: str | None = None) -> None:
    """The reports file is checked before the users' ε is charged: a suffix
    :meth:`fugu.ldp.Reports.save` cannot write (the spend was made, then the save failed), or
    the data file itself (its records were overwritten by their reports)."""
    suffixes = (".jsonl", ".json", ".ndjson", ".parquet", ".arrow", ".feather")
    if Path(out).suffix.lower() not in suffixes:
        raise click.BadParameter(
            f"reports file {out!r}: use a .jsonl, .parquet or .arrow suffix", param_hint="'--out'"
        )
    refuse_overwriting(
        out, "--out", [("the data file (--data)", data), ("the budget ledger (--ledger)", ledger)]
    )
    if not replaceable(Path(out), _is_reports_file):  # Reports.save replaced any file silently
        raise click.BadParameter(
            f"{out!r} exists and is not a fugu reports file; refusing to overwrite it: choose "
            f"another path, or delete it first (nothing was read or spent)",
            param_hint="'--out'",
        )


def _save_reports_atomically(reports: Any, out: Path) -> Path:
    """``reports.save(out)`` through a temporary file in the same folder, renamed over ``out``
    when complete: an interrupted write (Ctrl-C, a full disk) left a truncated reports file
    that aggregate reads as a smaller batch, after the users' ε was charged."""
    import os

    tmp = out.with_name(f".{out.name}.{os.getpid()}.part{out.suffix}")  # same suffix: format
    try:
        reports.save(tmp)
        os.replace(tmp, out)
    finally:
        tmp.unlink(missing_ok=True)
    return out


def _is_reports_file(path: Path) -> bool:
    """A file written by :meth:`fugu.ldp.Reports.save` (its header on the first line of JSON
    lines, in the schema metadata of Parquet / Arrow)."""
    if path.suffix.lower() in _JSONL_SUFFIXES:
        from ..ldp.reports import _loads

        with open(path, "rb") as fh:
            header = _loads(fh.readline())
        return isinstance(header, dict) and header.get("format") == "fugu-ldp-reports"
    from ..engines.ldp import read_header

    return read_header(path) is not None


def _read_records(data: str, domain: Any) -> dict[str, np.ndarray]:
    from ..errors import InvalidParameterError

    p = Path(data)
    if not p.exists():
        raise InvalidParameterError(f"data file {data!r} does not exist")
    if p.suffix.lower() == ".parquet":
        import pyarrow.parquet as pq

        table_ = pq.read_table(p, columns=list(domain.names))
    elif p.suffix.lower() in (".csv", ".txt"):
        from ..engines.file_numpy import read_csv_table
        from ..engines.partial_core import nominal_names

        table_ = read_csv_table(p, nominal_names(domain)).select(list(domain.names))
    else:
        raise InvalidParameterError(f"data file {data!r}: use .csv or .parquet")
    return {n: table_.column(n).to_numpy() for n in domain.names}


def register(cli: click.Group) -> None:
    @cli.group("ldp")
    def ldp() -> None:
        """Local DP: frequency oracles, Square Wave, multi-dimensional range queries.

        \b
        fugu ldp methods                       list the methods
        fugu ldp simulate --method hio,calm    MAE of methods on data (both sides in one run)
        fugu ldp perturb  ... --out r.jsonl    client: records in, randomised reports out
        fugu ldp aggregate r.jsonl --out x.npz server: reports in, release out
        """

    @ldp.command("methods")
    @click.option("--json", "as_json", is_flag=True)
    def methods_cmd(as_json: bool) -> None:
        """List the LDP methods."""
        ms = _methods()
        emit(
            {k: v.summary for k, v in sorted(ms.items())},
            as_json,
            lambda: table([[k, v.summary] for k, v in sorted(ms.items())], ["method", "what"]),
        )

    @ldp.command("simulate")
    @domain_options(
        "'synthetic' (correlated Gaussian) or a CSV/Parquet file.",
        data_default="synthetic",
        attributes_help="For files: 'x:0..63,y:0..63'.",
    )
    @click.option(
        "--method",
        "-m",
        default=DEFAULT_METHODS,
        show_default=True,
        help="Comma list of methods (see 'fugu ldp methods').",
    )
    @click.option("--epsilon", "-e", type=float, default=1.0, show_default=True)
    @click.option(
        "--queries", "n_queries", type=click.IntRange(min=1), default=50, show_default=True
    )
    @click.option(
        "--lambda",
        "lam",
        type=click.IntRange(min=1),
        default=2,
        show_default=True,
        help="Attributes per query.",
    )
    @click.option(
        "--omega",
        type=click.FloatRange(0, 1, min_open=True),
        default=0.5,
        show_default=True,
        help="Query volume per attribute, in (0, 1].",
    )
    @click.option(
        "--n",
        "n_users",
        type=click.IntRange(min=1),
        default=100_000,
        show_default=True,
        help="Synthetic users.",
    )
    @click.option(
        "--d",
        "d",
        type=click.IntRange(min=1),
        default=6,
        show_default=True,
        help="Synthetic attributes.",
    )
    @click.option(
        "--c",
        "c",
        type=click.IntRange(min=2),
        default=64,
        show_default=True,
        help="Synthetic domain size.",
    )
    @click.option(
        "--rho", type=float, default=0.5, show_default=True, help="Synthetic correlation."
    )
    @click.option("--option", "-o", "extra", multiple=True, help="Method option key=value.")
    @click.option("--seed", type=int, help="Reproducible, NOT private run.")
    @click.option(
        "--report",
        "report_path",
        type=click.Path(dir_okay=False),
        help="Also write an HTML report: MAE vs ε for every method, true vs estimated heatmaps.",
    )
    @click.option(
        "--report-epsilons",
        default="0.2,0.5,1,2",
        show_default=True,
        help="The ε values the report sweeps.",
    )
    @click.option("--quiet", "-q", is_flag=True, help="No progress display on stderr.")
    @click.option("--json", "as_json", is_flag=True)
    @click.pass_context
    def simulate(
        ctx: click.Context,
        data: str,
        attributes: tuple[str, ...],
        domain_file: str | None,
        method: str,
        epsilon: float,
        n_queries: int,
        lam: int,
        omega: float,
        n_users: int,
        d: int,
        c: int,
        rho: float,
        extra: tuple[str, ...],
        seed: int | None,
        report_path: str | None,
        report_epsilons: str,
        quiet: bool,
        as_json: bool,
    ) -> None:
        """Run client and server of each method on DATA; print the MAE of λ-D range queries.

        An experiment for the data owner: it compares with the exact answers, so its output is
        not a private release (and charges no ledger); use perturb / aggregate for releases.
        """
        from ..datasets import correlated_gaussian, synthetic_domain
        from ..queries import random_workload

        synthetic_only = {"n_users": "--n", "d": "--d", "c": "--c", "rho": "--rho"}
        if data == "synthetic":
            refuse_unused(
                ctx,
                {"attributes": "--attributes", "domain_file": "--domain"},
                "with --data synthetic (its domain is --d attributes of --c values)",
            )
        else:
            refuse_unused(ctx, synthetic_only, "with a data file (they shape --data synthetic)")
        if not report_path:
            refuse_unused(ctx, {"report_epsilons": "--report-epsilons"}, "without --report")
        eps_list = _report_epsilons(report_epsilons) if report_path else []
        if report_path:  # checked before the comparison runs, not when the report is saved
            from ..report import _refuse_other_file

            refuse_overwriting(report_path, "--report", [("the data file (--data)", data)])
            _refuse_other_file(Path(report_path))
        names = [m.strip() for m in method.split(",") if m.strip()]
        options, given = _parse_options_given(extra)
        for name in names:
            _check_method_options(name, given)
        if data == "synthetic":
            domain = synthetic_domain(d, c)
            records = correlated_gaussian(n_users, d, c, rho=rho, seed=0 if seed is None else seed)
        else:
            domain = load_domain(data, attributes, domain_file)
            records = _read_records(data, domain)
        codes = domain.encode_columns(records)
        n = codes.shape[0]
        if lam > domain.ndim:
            raise click.BadParameter(
                f"{lam} attributes per query, but the domain has {domain.ndim}; give at most "
                f"--lambda {domain.ndim}",
                param_hint="'--lambda'",
            )
        wl = random_workload(domain, n_queries, n_predicates=lam, volume=omega, seed=seed)
        truth = _exact_answers(codes, wl.bounds(domain))
        rng = seed_source(seed)
        rows, out = [], {}
        protos = [_make(name, domain, epsilon, options) for name in names]
        bar = _progress(len(protos), "methods", quiet)
        for name, proto in zip(names, protos, strict=True):
            if bar is not None:
                bar.set_postfix_str(name)
            t = time.perf_counter()
            rel = proto.simulate(codes, rng=rng)
            est = rel.answer_many(wl)
            secs = time.perf_counter() - t
            mae = float(np.mean(np.abs(est - truth)) / n)
            out[name] = {"mae": mae, "seconds": secs}
            rows.append([name, f"{mae:.5f}", f"{secs:.2f}"])
            if bar is not None:
                bar.update(1)
        if bar is not None:
            bar.close()
        header = (
            f"n = {n:,}, d = {domain.ndim}, epsilon = {epsilon:g}, lambda = {lam}, "
            f"omega = {omega:g}, {n_queries} queries; MAE as a fraction of n"
        )
        written = None
        if report_path:
            from ..report.ldp_plots import range_report

            rep = range_report(
                domain,
                records,
                methods=names,
                epsilons=eps_list,
                lam=lam,
                volume=omega,
                n_queries=n_queries,
                seed=seed,
                options=options,  # the table's -o options hold for the report's runs too
            )
            written = str(rep.save(report_path))
        emit(
            {
                "n": n,
                "epsilon": epsilon,
                "lambda": lam,
                "omega": omega,
                "methods": out,
                "report": written,
            },
            as_json,
            lambda: (
                header
                + "\n"
                + table(rows, ["method", "MAE", "seconds"])
                + (f"\nreport: {written}" if written else "")
            ),
        )

    @ldp.command("perturb")
    @domain_options(
        "CSV or Parquet file of user records.",
        data_default=None,
        attributes_help="'age:0..99,sex:F|M' (the domain).",
    )
    @click.option("--method", "-m", required=True, help="LDP method (see 'fugu ldp methods').")
    @click.option("--epsilon", "-e", type=float, required=True)
    @click.option("--option", "-o", "extra", multiple=True, help="Method option key=value.")
    @click.option(
        "--out",
        required=True,
        type=click.Path(dir_okay=False),
        help="Reports file: .jsonl, .parquet or .arrow.",
    )
    @click.option("--seed", type=int, help="Reproducible, NOT private run.")
    @ledger_option
    def perturb(
        data: str,
        attributes: tuple[str, ...],
        domain_file: str | None,
        method: str,
        epsilon: float,
        extra: tuple[str, ...],
        out: str,
        seed: int | None,
        ledger: str | None,
    ) -> None:
        """Client side: randomise every record of DATA into a report file.

        With --ledger this is where the users' privacy is spent: ε per user, charged (model
        ldp) before any record is randomised.
        """
        options, given = _parse_options_given(extra)
        _check_method_options(method, given)
        _check_reports_path(out, data, ledger)
        domain = load_domain(data, attributes, domain_file)
        proto = _make(method, domain, epsilon, options)
        records = _read_records(data, domain)
        # every record is checked against the domain before the users' epsilon is charged: a
        # refusal after the charge would publish, outside the budget, that a record lies outside
        # the domain (and the message quotes such values)
        codes = proto.encode(records)
        if hasattr(proto, "for_users"):
            # grid methods (HDG, TDG) fix their granularities from the number of users when the
            # client is made, and check -o g1= / g2= then: before the charge, not after it
            proto = proto.for_users(max(1, int(codes.shape[0])))
        rng = seed_source(seed)
        model = _ldp_model(ledger)
        with open_ledger(ledger, model=model) as acct:
            if acct is not None:  # fugu.ldp clients take no accountant: charged here, first
                acct.spend(proto.epsilon, f"{proto.name} reports of {data}", model=model)
            reports = proto.client(rng).perturb(records)
        path = _save_reports_atomically(reports, Path(out))
        click.echo(
            f"wrote {reports.n:,} {proto.name} reports (epsilon = {proto.epsilon:g}) to {path}"
            + ("" if reports.private else "; NOT PRIVATE (--seed): do not send or publish them")
        )
        if ledger:
            click.echo(ledger_line(ledger))

    @ldp.command("aggregate")
    @click.argument("reports", nargs=-1, required=True, type=click.Path(dir_okay=False))
    @click.option("--out", type=click.Path(dir_okay=False), help="Write the release (.npz).")
    @click.option(
        "--engine",
        type=click.Choice(["numpy", "duckdb", "spark"]),
        help="Stream the report files through this engine instead of loading them whole.",
    )
    @click.option("--spark-master", help="Spark master URL for --engine spark.")
    @ledger_option
    @click.option(
        "--head",
        type=click.IntRange(min=0),
        default=20,
        show_default=True,
        help="How many estimated cells to print (0: all); with --out only when given.",
    )
    @click.option("--quiet", "-q", is_flag=True, help="No progress bar over the report files.")
    @click.option("--json", "as_json", is_flag=True)
    def aggregate(
        reports: tuple[str, ...],
        out: str | None,
        engine: str | None,
        spark_master: str | None,
        ledger: str | None,
        head: int,
        quiet: bool,
        as_json: bool,
    ) -> None:
        """Server side: validate and aggregate REPORTS files (one protocol) into a release.

        Without --out the estimates are printed (a release without cells, such as HDG's, TDG's
        or HIO's, needs --out). With --ledger the reports' ε (model ldp) is checked against
        the ledger before they are read and charged when the release is made: use it when the
        ledger tracks what the server publishes about these users, and put --ledger on perturb
        OR aggregate of one batch, not both.
        """
        if spark_master and engine != "spark":
            raise click.UsageError("--spark-master needs --engine spark")
        if as_json:
            refuse_unused(
                click.get_current_context(),
                {"head": "--head"},
                "with --json (JSON output lists every estimated cell; leave out --json for a "
                "table of the first --head cells)",
            )
        inputs = [("the budget ledger (--ledger)", ledger)]
        inputs += [("a reports file", r) for r in reports]
        refuse_overwriting(out, "--out", inputs, release=True)
        _refuse_repeated_files(reports)
        if as_json and not out:  # the domain is in the first file's header
            refuse_unlisted_json(_protocol_of(reports[0]).domain, "Nothing was spent.")
        from ..ldp.checks import _charge_model

        with open_ledger(ledger, model=_ldp_model(ledger)) as acct:
            if acct is not None:  # the spend must fit before any report is read
                first = _protocol_of(reports[0])
                _charge_model(acct, first.epsilon, first.name)
            proto, agg = _aggregate(reports, engine, spark_master, quiet or as_json)
            rel = agg.estimate()  # charged below, once it is known to be printed or saved
            if not out and not has_cells(rel):
                # a grid release (HDG, TDG, HIO, ...) has no cells to print: it was made,
                # charged and thrown away, with only its repr shown
                raise click.UsageError(
                    f"the {proto.name} release answers range queries but has no cells to print; "
                    f"add --out FILE.npz to save it, then answer queries with 'fugu query "
                    f"FILE.npz -w ...'. Nothing was spent."
                )
            if acct is not None:  # as agg.estimate(accountant=acct) charges, inside the lock
                model = _charge_model(acct, proto.epsilon, proto.name)
                acct.spend(
                    proto.epsilon,
                    f"{proto.name} release from {agg.n_accepted:,} reports",
                    model=model,
                )
        info = {**agg.summary(), "epsilon": proto.epsilon, "private": rel.guarantee.private}
        if out:
            info["release"] = str(rel.save(out))
        else:
            info["estimates"] = _estimates(rel, None)

        def text() -> str:
            rej = ", ".join(f"{k}: {v}" for k, v in sorted(agg.rejected.items())) or "none"
            lines = [
                f"{proto.name}: {agg.n_accepted:,} reports accepted, rejected: {rej}",
                rel.guarantee.describe(),
            ]
            if out:
                lines.append(f"release written to {info['release']}")
            if not out or head_given():  # --head with --out: print the first cells too
                lines.append(_estimates_text(rel, head, saved=bool(out)))
            if ledger:
                lines.append(ledger_line(ledger))
            return "\n".join(lines)

        emit(info, as_json, text)

    def _aggregate(
        reports: tuple[str, ...], engine: str | None, spark_master: str | None, quiet: bool
    ) -> tuple[Any, Any]:
        from ..ldp import Reports, protocol_from_header

        bar = _progress(len(reports), "files", quiet) if len(reports) > 1 else None
        if engine is None:
            batches = [Reports.load(p) for p in reports]
            proto = protocol_from_header(batches[0].header())
            agg = proto.aggregator()
            for p, b in zip(reports, batches, strict=True):
                agg.note_file(p)  # a file named twice would count its reports twice
                agg.add(b)
                if bar is not None:
                    bar.update(1)
        else:
            from ..engines.ldp import read_header
            from ..errors import ReportError

            for p in reports:  # a file without a header would be decoded as the first one's
                if read_header(p) is None and Path(p).suffix.lower() not in _JSONL_SUFFIXES:
                    raise ReportError(
                        f"report file {p!r} carries no fugu.ldp header (schema metadata), so "
                        f"nothing says which protocol, epsilon and domain made its reports; "
                        f"ask its client to write it with fugu.ldp.Reports.save (or to keep "
                        f"the metadata when copying it)"
                    )
            header = read_header(reports[0])
            if header is None:  # JSON lines carry their header on the first line
                header = Reports.load(reports[0]).header()
            proto = protocol_from_header(header)
            opts: dict[str, Any] = {"master": spark_master} if spark_master else {}
            agg = proto.aggregator()
            for p in reports:
                part = proto.aggregator_for(p, engine=engine, **opts)
                agg.merge(part)
                if bar is not None:
                    bar.update(1)
        if bar is not None:
            bar.close()
        return proto, agg


_JSONL_SUFFIXES = (".jsonl", ".json", ".ndjson")  # their header is their first line


def _refuse_repeated_files(reports: tuple[str, ...]) -> None:
    """A report file named twice (or under two spellings, or through a link) would count its
    reports twice: refused before any ledger or report is read."""
    import os

    seen: dict[str, str] = {}
    for r in reports:
        real = os.path.realpath(r)
        if real in seen:
            same = "" if seen[real] == r else f" (the same file as {seen[real]!r})"
            raise click.BadParameter(
                f"{r!r} is named twice{same}: its reports would count twice; name each file once",
                param_hint="REPORTS",
            )
        seen[real] = r


def _report_epsilons(text: str) -> list[float]:
    """``--report-epsilons 0.2,0.5,1``: at least one ε, each in the LDP range (checked before
    anything runs: the report is made after the whole comparison)."""
    from ..errors import FuguError
    from ..ldp.checks import check_ldp_epsilon

    items = [e.strip() for e in text.split(",") if e.strip()]
    if not items:
        raise click.BadParameter(
            f"{text!r} lists no epsilon; give e.g. 0.2,0.5,1,2", param_hint="'--report-epsilons'"
        )
    out = []
    for e in items:
        try:
            out.append(check_ldp_epsilon(float(e), "--report-epsilons"))
        except ValueError as exc:
            why = str(exc) if isinstance(exc, FuguError) else "not a number"
            raise click.BadParameter(
                f"{e!r} in {text!r}: {why}", param_hint="'--report-epsilons'"
            ) from None
    return out


def _protocol_of(path: str) -> Any:
    """The protocol named by a report file's header, read without its reports when the header
    is in the schema metadata (Parquet, Arrow) or on the first line (JSON lines); any other
    file is read as ``fugu ldp aggregate`` reads it (with its errors)."""

    from ..engines.ldp import read_header
    from ..ldp import Reports, protocol_from_header
    from ..ldp.reports import _check_header, _loads

    p = Path(path)
    header = read_header(p) if p.exists() else None
    if header is None and p.suffix.lower() in (".jsonl", ".json", ".ndjson") and p.exists():
        with open(p, "rb") as fh:
            header = _loads(fh.readline())  # None when unreadable: Reports.load says why
    if not isinstance(header, dict) or header.get("format") is None:
        header = Reports.load(p).header()
    return protocol_from_header(_check_header(header))


def _ldp_model(ledger: str | None) -> str:
    """'ldp' or 'local-dp': the name the ledger uses for local DP (both are accepted)."""
    if ledger and Path(ledger).exists():
        from ..budget import Accountant

        try:
            model = Accountant.load(ledger).budget.model
        except Exception:  # noqa: BLE001 - ledger_file reports a corrupt ledger with its name
            return "ldp"
        if model in ("ldp", "local-dp"):
            return model
    return "ldp"


def _progress(total: int, unit: str, quiet: bool) -> Any:
    """A tqdm bar on stderr when it is a terminal (None when piped or --quiet)."""
    if quiet_requested(quiet):
        return None
    from tqdm.auto import tqdm

    return tqdm(total=total, unit=unit, leave=False)


def _estimates(rel: Any, limit: int | None) -> list[dict[str, Any]] | None:
    from ._common import cells_records

    return cells_records(rel) if limit is None else None


def _estimates_text(rel: Any, head: int = 20, saved: bool = False) -> str:
    """The released estimates (the first ``head``; ``saved``: the release was written)."""
    cells = cells_table(rel, head, saved)
    if cells is None:
        return f"released: {rel!r}" + ("" if saved else " (use --out FILE.npz to save it)")
    return cells


def _exact_answers(codes: np.ndarray, bounds: np.ndarray) -> np.ndarray:
    """Exact range counts, vectorised over records in chunks (no dense cube needed)."""
    out = np.zeros(bounds.shape[0])
    for lo in range(0, codes.shape[0], 200_000):
        x = codes[lo : lo + 200_000]
        inside = np.ones((bounds.shape[0], x.shape[0]), dtype=bool)
        for j in range(codes.shape[1]):
            inside &= (x[None, :, j] >= bounds[:, j, 0:1]) & (x[None, :, j] < bounds[:, j, 1:2])
        out += inside.sum(axis=1)
    return out
