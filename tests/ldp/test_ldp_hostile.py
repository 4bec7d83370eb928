"""Hostile report sets (issue 14, items 8 and 11): every malformed report is rejected, never
wrapped; the release warns, records the counts by reason and can refuse; tiny or huge ε fails
clearly before anything is planned.

For every report kind (GRR, OLH, OUE, SW, Uni, HIO, LHIO, CALM, MSW, TDG, HDG) the same corrupted
columns go through every engine path — a Reports batch in memory, a mapping of columns on the numpy
and DuckDB engines, a Parquet file read by the numpy and DuckDB engines — and each path must reject
exactly the corrupted rows (same counts by reason) and give the state of the clean rows alone.
Before the fix the in-memory path wrapped OUE bytes of 300 to 44 and seeds of −1 to 2^32 − 1, and
a short or empty column was accepted (estimates of −88.7).

Deterministic (fixed seeds, exact comparisons): false-failure rate 0.
"""

from __future__ import annotations

import warnings
from collections import Counter
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import fugu
from fugu import ldp
from fugu.errors import InvalidParameterError, ReportError
from fugu.ldp.protocol import EPSILON_RANGE, RejectedReportsWarning
from fugu.ldp.wire import clean_batch

N = 400
DOM1 = fugu.Domain([fugu.Ordinal("v", 0, 11)])
DOM3 = fugu.datasets.synthetic_domain(3, 8)
DATA1 = {"v": (np.arange(N) * 5) % 12}
DATA3 = fugu.datasets.correlated_gaussian(N, 3, 8, seed=2)

METHODS: dict[str, Any] = {
    "grr": lambda: ldp.GRR(DOM1, 1.0),
    "olh": lambda: ldp.OLH(DOM1, 1.0),
    "oue": lambda: ldp.OUE(DOM1, 1.0),
    "sw": lambda: ldp.SW(DOM1, 1.0),
    "uni": lambda: ldp.Uni(DOM3, 1.0),
    "hio": lambda: ldp.HIO(DOM3, 1.0, branching=2),
    "lhio": lambda: ldp.LHIO(DOM3, 1.0, branching=2),
    "calm": lambda: ldp.CALM(DOM3, 1.0),
    "msw": lambda: ldp.MSW(DOM3, 1.0),
    "tdg": lambda: ldp.TDG(DOM3, 1.0),
    "hdg": lambda: ldp.HDG(DOM3, 1.0),
    "hdg-olh": lambda: ldp.HDG(DOM3, 1.0, oracle="olh"),
}
PATHS = ("memory", "numpy", "duckdb", "parquet-numpy", "parquet-duckdb")


def _reports(method: str) -> tuple[Any, ldp.Reports]:
    proto = METHODS[method]()
    data = DATA1 if proto.domain is DOM1 else DATA3
    return proto, proto.client(fugu.RandomSource(seed=7)).perturb(data)


def _corrupt(
    reports: ldp.Reports, typed: bool = False
) -> tuple[dict[str, np.ndarray], Counter[str], np.ndarray]:
    """Every column gets values its type cannot hold, on rows of its own; returns the columns,
    the expected rejections by reason and the mask of the untouched rows. ``typed``: columns a
    Parquet file can hold (no text in a float column)."""
    cols: dict[str, np.ndarray] = {}
    expected: Counter[str] = Counter()
    bad = np.zeros(reports.n, dtype=bool)
    for j, (name, col) in enumerate(reports.columns.items()):
        r0, r1 = 2 * j, 2 * j + 1
        if col.ndim == 2:  # packed bits: bytes of 300 and −1 must not wrap to 44 and 255
            c = col.astype(np.int64)
            c[r0, 0], c[r1, -1] = 300, -1
            expected["out of type range"] += 2
        elif col.dtype == np.uint32:  # OLH seeds: −1 and 2^32 must not wrap
            c = col.astype(np.int64)
            c[r0], c[r1] = -1, 2**32
            expected["out of type range"] += 2
        elif col.dtype == np.float64:  # SW values: text (or infinity) and a missing value
            c = col.astype(object)
            c[r0], c[r1] = (np.inf if typed else "0.5"), None
            expected["out of range" if typed else "wrong type"] += 1
            expected["malformed"] += 1
        else:  # int64 (groups, buckets): a fraction, and a value beyond int64
            c = col.astype(np.float64)
            c[r0], c[r1] = 0.5, 2.0**70
            expected["wrong type"] += 1
            expected["out of type range"] += 1
        cols[name] = c
        bad[[r0, r1]] = True
    return cols, expected, ~bad


def _arrow(cols: dict[str, np.ndarray], header: dict[str, Any]) -> pa.Table:
    arrays = {}
    for k, v in cols.items():
        if v.ndim == 2:
            arrays[k] = pa.FixedSizeListArray.from_arrays(pa.array(v.reshape(-1)), v.shape[1])
        elif v.dtype == object:
            arrays[k] = pa.array(list(v), pa.float64())
        else:
            arrays[k] = pa.array(v)
    import json

    return pa.table(arrays).replace_schema_metadata({b"fugu.ldp": json.dumps(header).encode()})


def _aggregate(proto: Any, reports: ldp.Reports, cols: dict[str, Any], path: str, tmp: Path):
    hdr = reports.header()
    if path == "memory":
        hostile = ldp.Reports(reports.protocol, reports.version, reports.params, cols, reports.n)
        return proto.aggregator_for(hostile)
    if path in ("numpy", "duckdb"):
        return proto.aggregator_for(cols, engine=path, header=hdr, batch_rows=97)
    file = tmp / "hostile.parquet"
    pq.write_table(_arrow(cols, hdr), file, row_group_size=150)
    return proto.aggregator_for(file, engine=path.split("-")[1])


def _same_state(agg: Any, ref: Any) -> None:
    assert agg.n_accepted == ref.n_accepted
    if isinstance(agg.protocol, ldp.HIO):  # the state is the multiset of validated reports

        def rows(state: dict[str, np.ndarray]) -> np.ndarray:
            r = np.stack([state[k].astype(np.int64) for k in ("group", "seed", "y")], axis=1)
            return r[np.lexsort(r.T[::-1])]

        assert np.array_equal(rows(agg.state), rows(ref.state))
        return
    for k in ref.state:
        assert np.array_equal(agg.state[k], ref.state[k]), k


@pytest.mark.parametrize("path", PATHS)
@pytest.mark.parametrize("method", sorted(METHODS))
def test_values_outside_their_type_are_rejected_never_wrapped(
    method: str, path: str, tmp_path: Path
) -> None:
    proto, reports = _reports(method)
    cols, expected, keep = _corrupt(reports, typed=path.startswith("parquet"))
    agg = _aggregate(proto, reports, cols, path, tmp_path)
    assert dict(agg.rejected) == dict(expected), path
    ref = proto.aggregator_for(reports.take(keep))
    _same_state(agg, ref)


@pytest.mark.parametrize("method", sorted(METHODS))
def test_short_and_empty_columns_reject_the_batch(method: str) -> None:
    proto, reports = _reports(method)
    first = next(iter(reports.columns))
    for cut in (reports.n - 1, 0):
        cols = dict(reports.columns)
        cols[first] = cols[first][:cut]
        hostile = ldp.Reports(reports.protocol, reports.version, reports.params, cols, reports.n)
        agg = proto.aggregator_for(hostile)
        assert agg.n_accepted == 0
        assert dict(agg.rejected) == {"column lengths differ": reports.n}
        # a mapping declares no n: its columns must agree with each other
        for engine in ("numpy", "duckdb") if len(cols) > 1 else ():
            agg = proto.aggregator_for(cols, engine=engine, header=reports.header())
            assert agg.n_accepted == 0, engine
            assert dict(agg.rejected) == {"column lengths differ": reports.n}, engine
        with pytest.raises(fugu.EmptyDataError, match="column lengths differ"):
            proto.aggregate(hostile)
    # a declared n that disagrees with the columns
    lying = ldp.Reports(
        reports.protocol, reports.version, reports.params, dict(reports.columns), reports.n + 5
    )
    assert dict(proto.aggregator_for(lying).rejected) == {"column lengths differ": reports.n + 5}


def test_the_issue_cases_wrap_no_more() -> None:
    """OUE bits of 300 and negative OLH seeds (the issue's examples), and a short column whose
    estimates were −88.7."""
    oue = ldp.OUE(DOM1, 1.0)
    rep = oue.client(fugu.RandomSource(seed=1)).perturb(DATA1)
    bits = rep.columns["bits"].astype(np.int64)
    bits[0, 0] = 300  # 300 mod 256 = 44 would have been counted
    hostile = ldp.Reports("oue", 1, rep.params, {"bits": bits}, rep.n)
    agg = oue.aggregator_for(hostile)
    assert agg.rejected == {"out of type range": 1} and agg.n_accepted == N - 1
    olh = ldp.OLH(DOM1, 1.0)
    rep = olh.client(fugu.RandomSource(seed=1)).perturb(DATA1)
    seeds = rep.columns["seed"].astype(np.int64)
    seeds[:3] = -1
    hostile = ldp.Reports("olh", 1, rep.params, {"seed": seeds, "y": rep.columns["y"]}, rep.n)
    assert olh.aggregator_for(hostile).rejected == {"out of type range": 3}
    short = ldp.Reports("olh", 1, rep.params, {"seed": seeds[:10], "y": rep.columns["y"]}, rep.n)
    with pytest.raises(fugu.EmptyDataError):
        olh.aggregate(short)


def test_release_warns_records_and_can_refuse() -> None:
    proto, reports = _reports("hdg")
    cols, expected, _ = _corrupt(reports)
    hostile = ldp.Reports(reports.protocol, reports.version, reports.params, cols, reports.n)
    with pytest.warns(RejectedReportsWarning, match=r"4 of 400 hdg reports were rejected"):
        rel = proto.aggregate(hostile)
    assert rel.guarantee.data_options["rejected_reports"] == dict(expected)
    assert rel.guarantee.data_options["reports_accepted"] == N - 4
    assert rel.guarantee.parameters["n_reports"] == N - 4
    with pytest.raises(ReportError, match=r"4 of 400 hdg reports are invalid"):
        proto.aggregate(hostile, on_invalid="raise")
    with pytest.raises(InvalidParameterError, match="on_invalid"):
        proto.aggregate(reports, on_invalid="drop")
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # clean reports: no warning
        clean = proto.aggregate(reports, on_invalid="raise")
    assert clean.guarantee.data_options["rejected_reports"] == {}


def test_rejection_record_survives_save_and_load(tmp_path: Path) -> None:
    proto, reports = _reports("olh")
    cols, expected, _ = _corrupt(reports)
    hostile = ldp.Reports(reports.protocol, reports.version, reports.params, cols, reports.n)
    with pytest.warns(RejectedReportsWarning):
        rel = proto.aggregate(hostile)
    back = fugu.Release.load(rel.save(tmp_path / "r.fugu"))
    assert back.guarantee.data_options["rejected_reports"] == dict(expected)


def test_jsonl_rows_are_classified(tmp_path: Path) -> None:
    olh = ldp.OLH(DOM1, 1.0)
    rep = olh.client(fugu.RandomSource(seed=1)).perturb(DATA1)
    path = rep.save(tmp_path / "r.jsonl")
    with open(path, "a", encoding="utf-8") as fh:
        fh.write('{"seed": -1, "y": 0}\n')  # out of uint32: never 4294967295
        fh.write('{"seed": 4294967296, "y": 0}\n')
        fh.write('{"seed": 1.5, "y": 0}\n')  # a fraction
        fh.write('{"seed": "7", "y": 0}\n')  # text
        fh.write('{"seed": 7}\n')  # a missing column
        fh.write('{"seed": 7, "y": 0.0}\n')  # an integral float is an integer: accepted
    agg = olh.aggregator_for(path)
    assert agg.n_accepted == N + 1
    assert dict(agg.rejected) == {"out of type range": 2, "wrong type": 2, "malformed": 1}


# -- ε range (issue 14 item 11) -------------------------------------------------------------------
CLASSES = [ldp.GRR, ldp.OLH, ldp.OUE, ldp.SW, ldp.Uni, ldp.HIO, ldp.LHIO, ldp.CALM, ldp.MSW,
           ldp.TDG, ldp.HDG]  # fmt: skip


@pytest.mark.parametrize("cls", CLASSES, ids=lambda c: c.__name__)
@pytest.mark.parametrize("eps", [1e-17, 1e-300, 5e-324, 9.9e-7, 20.01, 700.0])
def test_epsilon_outside_the_working_range_fails_clearly(cls: Any, eps: float) -> None:
    dom = DOM1 if cls in (ldp.GRR, ldp.OLH, ldp.OUE, ldp.SW) else DOM3
    # the core's check (ε below 2.2e-16 or above 1000) or the LDP range, each naming the range
    with pytest.raises(InvalidParameterError, match=r"epsilon (from 2.2e-16|<= 20)"):
        cls(dom, eps)


@pytest.mark.parametrize("cls", CLASSES, ids=lambda c: c.__name__)
@pytest.mark.parametrize("eps", EPSILON_RANGE)
def test_epsilon_at_the_ends_of_the_range_works(cls: Any, eps: float) -> None:
    dom, data = (DOM1, DATA1) if cls in (ldp.GRR, ldp.OLH, ldp.OUE, ldp.SW) else (DOM3, DATA3)
    rel = cls(dom, eps).simulate(data, rng=fugu.RandomSource(seed=1))
    assert np.isfinite(rel.answer({dom.names[0]: (0, 3)}))


def test_helper_functions_check_epsilon() -> None:
    from fugu.ldp.grids import guideline
    from fugu.ldp.oracles import GroupedOracle, olh_g, support_probabilities
    from fugu.ldp.square_wave import sw_half_width

    for call in (
        lambda: olh_g(1e-17),
        lambda: support_probabilities("grr", 1e-17, 4),
        lambda: sw_half_width(1e-17),
        lambda: guideline(1000, 1e-17, 3, hybrid=True),
        lambda: GroupedOracle(1e-17, [4, 4]),
        lambda: ldp.adaptive(DOM1, 1e-17),
    ):
        with pytest.raises(InvalidParameterError, match="epsilon"):
            call()
    # Square Wave's half-width is exact at small ε (the closed form lost every digit at 1e-6)
    assert sw_half_width(1e-6) == pytest.approx(0.5 - 1e-6 / 3, rel=1e-12)


# -- property: a kept value is exactly the value sent (never wrapped, rounded or clipped) -------


_INTS = st.integers(min_value=-(2**70), max_value=2**70)
_VALUES = st.one_of(
    _INTS,
    st.floats(allow_nan=True, allow_infinity=True),
    st.none(),
    st.text(max_size=3),
    st.booleans(),
    st.binary(max_size=4),
)
_DTYPES = [None, np.int8, np.int64, np.uint32, np.uint64, np.float32, np.float64]


def _as_array(values: list[Any], dtype: Any) -> np.ndarray:
    """A typed array when it holds exactly ``values`` (all integers that fit), else objects."""
    if dtype is not None:
        try:
            with np.errstate(all="ignore"):
                arr = np.asarray(values, dtype=dtype)
            if (
                all(isinstance(v, int) and not isinstance(v, bool) for v in values)
                and [int(x) for x in arr] == values
            ):
                return arr
        except (OverflowError, ValueError, TypeError):
            pass
    out = np.empty(len(values), dtype=object)
    out[:] = values
    return out


@settings(max_examples=300, deadline=None, derandomize=True)
@given(
    seeds=st.lists(_VALUES, min_size=1, max_size=12),
    dtype=st.sampled_from(_DTYPES),
    data=st.data(),
)
def test_kept_values_are_exactly_the_values_sent(seeds: list[Any], dtype: Any, data: Any) -> None:
    ys = data.draw(st.lists(_VALUES, min_size=len(seeds), max_size=len(seeds)))
    bits = data.draw(
        st.lists(
            st.one_of(st.binary(min_size=2, max_size=2), st.binary(max_size=3), st.none()),
            min_size=len(seeds),
            max_size=len(seeds),
        )
    )
    specs = {"seed": "uint32", "y": "int", "bits": ("bytes", 2)}
    batch = {
        "seed": _as_array(seeds, dtype),
        "y": _as_array(ys, None),
        "bits": _as_array(bits, None),
    }
    cols, rejected = clean_batch(specs, batch)
    kept = len(cols["seed"])
    assert kept + sum(rejected.values()) == len(seeds)
    # the kept rows are the rows whose every value is exactly representable, in order
    exact = []
    for s, y, b in zip(seeds, ys, bits, strict=True):
        ok_s = _exact_int(s, 0, 2**32 - 1)
        ok_y = _exact_int(y, -(2**63), 2**63 - 1)
        ok_b = isinstance(b, bytes) and len(b) == 2
        if ok_s is not None and ok_y is not None and ok_b:
            exact.append((ok_s, ok_y, b))
    got = [
        (int(a), int(b), bytes(c))
        for a, b, c in zip(cols["seed"], cols["y"], cols["bits"], strict=True)
    ]
    assert got == exact


def _exact_int(v: Any, lo: int, hi: int) -> int | None:
    if isinstance(v, bool) or v is None:
        return None
    if isinstance(v, int):
        return v if lo <= v <= hi else None
    if isinstance(v, float):
        if v != v or v in (float("inf"), float("-inf")) or v != int(v):
            return None
        return int(v) if lo <= int(v) <= hi else None
    return None


# -- review 14: one unreadable JSON line is one malformed report, never the end of the file -------
# A line holding an integer of over 4300 digits (ValueError from int()), arrays nested beyond the
# recursion limit (RecursionError) or bytes that are not UTF-8 (UnicodeDecodeError) aborted
# Reports.load, and with it the aggregation of every other report in the file: one hostile client
# could block a release. Each is now counted as malformed.
@pytest.mark.parametrize(
    "line",
    [
        b'{"seed": 1, "y": 1' + b"0" * 5000 + b"}",
        b"[" * 100_000 + b"]" * 100_000,
        b'{"seed": 1, "y": "\xff\xfe"}',
    ],
    ids=["huge-int", "deep-nesting", "not-utf8"],
)
def test_an_unreadable_jsonl_line_is_one_malformed_report(tmp_path: Path, line: bytes) -> None:
    olh = ldp.OLH(DOM1, 1.0)
    rep = olh.client(fugu.RandomSource(seed=1)).perturb(DATA1)
    path = rep.save(tmp_path / "r.jsonl")
    with open(path, "ab") as fh:
        fh.write(line + b"\n")
    agg = olh.aggregator_for(path)
    assert agg.n_accepted == N
    assert dict(agg.rejected) == {"malformed": 1}
    clean = olh.aggregator().add(rep)
    assert np.array_equal(agg.state["support"], clean.state["support"])


def test_an_unreadable_jsonl_header_is_a_report_error(tmp_path: Path) -> None:
    path = tmp_path / "r.jsonl"
    path.write_bytes(b'{"format": "\xff"}\n{"y": 1}\n')
    with pytest.raises(ReportError, match="does not start with a fugu-ldp-reports header"):
        ldp.Reports.load(path)


# -- review 14: a float report column (SW, MSW) holding an integer beyond the float range ---------
# JSON "y": 1000...0 (400 digits) raised OverflowError in wire._object_scalars and aborted the
# aggregation of every report; it is now one report "out of type range". (NaN and infinities
# reach the protocol, whose _validate counts them "out of range", as before.)
def test_float_columns_reject_integers_beyond_the_float_range(tmp_path: Path) -> None:
    sw = ldp.SW(DOM1, 1.0)
    rep = sw.client(fugu.RandomSource(seed=1)).perturb(DATA1)
    path = rep.save(tmp_path / "r.jsonl")
    with open(path, "a", encoding="utf-8") as fh:
        fh.write('{"y": 1' + "0" * 400 + "}\n")
        fh.write('{"y": NaN}\n{"y": Infinity}\n')
    agg = sw.aggregator_for(path)
    assert agg.n_accepted == N
    assert dict(agg.rejected) == {"out of type range": 1, "out of range": 2}
    cols, rejected = clean_batch({"y": "float"}, {"y": np.array([0.5, 10**400], dtype=object)})
    assert cols["y"].tolist() == [0.5]
    assert dict(rejected) == {"out of type range": 1}


# -- review 14: a report header with fields of the wrong type is a ReportError naming the field ---
# format_version / version "abc" raised a bare ValueError from int(), params [1] a TypeError,
# protocol ["x"] "unhashable type", params without epsilon a KeyError, an unknown parameter a
# TypeError from the constructor; "private": "false" was read as true (bool("false")), so
# reports a seeded client marked not private gave a release claiming to be private.
def _header_file(tmp_path: Path, change: Any) -> Path:
    grr = ldp.GRR(DOM1, 1.0)
    rep = grr.client(fugu.RandomSource(seed=1)).perturb(DATA1)
    path = rep.save(tmp_path / "r.jsonl")
    lines = path.read_text().splitlines()
    import json

    header = json.loads(lines[0])
    change(header)
    path.write_text("\n".join([json.dumps(header), *lines[1:]]) + "\n")
    return path


@pytest.mark.parametrize(
    ("change", "words"),
    [
        (lambda h: h.update(format_version="x"), "'format_version' must be an integer"),
        (lambda h: h.update(version="abc"), "'version' must be an integer"),
        (lambda h: h.update(version=True), "'version' must be an integer"),
        (lambda h: h.update(params=[1]), "'params' must be an object"),
        (lambda h: h.update(protocol=["x"]), "'protocol' must be a method name"),
        (lambda h: h.update(private="false"), "'private' must be true or false"),
        (lambda h: h["params"].pop("epsilon"), "params lack 'epsilon'"),
        (lambda h: h["params"].update(foo=1), "do not describe the grr protocol"),
        (lambda h: h["params"].update(epsilon=99), "params are not usable"),
    ],
)
def test_bad_header_fields_are_report_errors(tmp_path: Path, change: Any, words: str) -> None:
    path = _header_file(tmp_path, change)
    with pytest.raises(ReportError, match=words):
        ldp.GRR(DOM1, 1.0).aggregate(ldp.Reports.load(path))


def test_bad_header_fields_fail_the_cli_in_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from fugu.cli import main

    path = _header_file(tmp_path, lambda h: h.update(version="abc"))
    code = main(["ldp", "aggregate", str(path)])
    out, err = capsys.readouterr()
    assert code != 0 and "'version' must be an integer" in err and "Traceback" not in err


# -- review 14: the float 2^63 in an integer column is out of type range, never wrapped ----------
# The numpy path compared with "arr > 2^63 - 1", whose right side rounds to 2.0**63, so a report
# value of exactly 2.0**63 passed and the cast wrapped it to -2^63 (the object path was exact).
def test_two_to_the_63_as_a_float_is_not_wrapped() -> None:
    col = np.array([2.0**63, 3.0, -(2.0**63), 2.0**63 - 1024])
    cols, rejected = clean_batch({"y": "int"}, {"y": col})
    assert cols["y"].tolist() == [3, -(2**63), 2**63 - 1024]
    assert dict(rejected) == {"out of type range": 1}
    cols, rejected = clean_batch({"y": "int"}, {"y": col.astype(object)})  # same as objects
    assert cols["y"].tolist() == [3, -(2**63), 2**63 - 1024]
