"""The counting interface on the embedded engines (numpy, DuckDB): identical results however the
data is partitioned, known answers, and errors.

All tests are deterministic (fixed seeds, exact integer comparisons): false-failure rate 0.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from _engines_data import (
    C_VALUES,
    CENTRES,
    domain,
    hashed_key,
    kmeans_partial,
    nearest_centre,
    olh_like_support,
    records,
)
from hypothesis import given, settings
from hypothesis import strategies as st

import fugu
from fugu.engines import (
    DomainKey,
    add_partials,
    histogram_counts,
    partial_counts,
    partial_sums,
)

DATA = records()
DOM = domain()
HIST_COLS = ["age", "job", "gain"]


def _reference_histogram() -> np.ndarray:
    """Per-row encoding by hand (no engine): the answer every engine must reproduce."""
    out = np.zeros(DOM.shape, dtype=np.int64)
    jobs = ["clerk", "exec", "craft", "farm"]
    edges = [0, 0.5, 10, 1e3, 1e5]
    for a, j, g in zip(DATA["age"], DATA["job"], DATA["gain"], strict=True):
        b = next(i for i in range(4) if g < edges[i + 1] or i == 3)
        out[a - 17, jobs.index(j), b] += 1
    return out.ravel()


REF = _reference_histogram()


def _batches(cols: dict[str, np.ndarray], cuts: list[int]) -> list[dict[str, np.ndarray]]:
    """Split the rows at ``cuts`` (repeated cuts make empty partitions)."""
    bounds = [0, *cuts, len(next(iter(cols.values())))]
    return [{k: v[s:e] for k, v in cols.items()} for s, e in zip(bounds, bounds[1:], strict=False)]


PARTITIONINGS = {
    "single": [],
    "skewed+empty": [0, 0, 3, 3, 19_990],
    "many": list(range(1000, 20_000, 1000)),
}


@pytest.fixture(scope="module")
def files(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    d = tmp_path_factory.mktemp("engines")
    table = pa.table(DATA)
    pq.write_table(table, d / "data.parquet", row_group_size=3000)
    table.to_pandas().to_csv(d / "data.csv", index=False)
    return {"parquet": d / "data.parquet", "csv": d / "data.csv"}


# -- histograms -----------------------------------------------------------------------------------
@pytest.mark.parametrize("engine", ["numpy", "duckdb"])
def test_histogram_identical_in_memory(engine: str) -> None:
    assert np.array_equal(histogram_counts(DATA, DOM, engine=engine), REF)
    h = fugu.Histogram.from_records(pa.table(DATA), DOM, engine=engine)
    assert np.array_equal(h.counts.ravel(), REF)


@pytest.mark.parametrize("engine", ["numpy", "duckdb"])
@pytest.mark.parametrize("fmt", ["parquet", "csv"])
def test_histogram_identical_from_files(files: dict[str, Path], engine: str, fmt: str) -> None:
    h = fugu.Histogram.from_file(files[fmt], DOM, engine=engine)
    assert np.array_equal(h.counts.ravel(), REF)
    assert h.data_options["engine"] == engine


@pytest.mark.parametrize("name", list(PARTITIONINGS))
def test_histogram_identical_over_partitionings(name: str) -> None:
    parts = _batches(DATA, PARTITIONINGS[name])
    assert np.array_equal(histogram_counts(parts, DOM), REF)


@pytest.mark.parametrize("rows", [97, 1 << 20])
@pytest.mark.parametrize("engine", ["numpy", "duckdb"])
def test_histogram_identical_over_batch_sizes(engine: str, rows: int) -> None:
    got = partial_counts(DATA, DomainKey(DOM), DOM.size, batch_rows=rows, engine=engine)
    assert np.array_equal(got, REF)


def test_histogram_from_sql_public_filter(files: dict[str, Path]) -> None:
    sql = f"SELECT * FROM read_parquet('{files['parquet']}') WHERE job <> 'farm'"
    h = fugu.Histogram.from_file(None, DOM, sql=sql)
    keep = DATA["job"] != "farm"
    expect = histogram_counts({k: v[keep] for k, v in DATA.items()}, DOM)
    assert np.array_equal(h.counts.ravel(), expect)
    assert h.data_options["public_filter_sql"] == sql


@pytest.mark.parametrize("policy", ["clip", "drop"])
@pytest.mark.parametrize("engine", ["numpy", "duckdb"])
def test_out_of_domain_policies_agree(engine: str, policy: str) -> None:
    bad = {k: v.copy() for k, v in DATA.items()}
    bad["age"][[3, 50, 51]] = [5, 200, 95]
    bad["gain"][[7, 8]] = [-1.0, 2e5]
    ref = histogram_counts(bad, DOM, out_of_domain=policy)  # numpy, in memory
    assert np.array_equal(histogram_counts(bad, DOM, engine=engine, out_of_domain=policy), ref)
    assert ref.sum() == (len(DATA["age"]) if policy == "clip" else len(DATA["age"]) - 5)


@settings(max_examples=25, deadline=None)
@given(
    st.lists(
        st.tuples(st.integers(0, 9), st.sampled_from(["p", "q", "r"]), st.floats(-1, 11)),
        min_size=1,
        max_size=60,
    ),
    st.lists(st.integers(0, 60), max_size=4),
)
def test_histogram_property_numpy_vs_duckdb(
    rows: list[tuple[int, str, float]], cuts: list[int]
) -> None:
    """Random small tables, clipped: the numpy engine over random partitions equals DuckDB."""
    dom = fugu.Domain(
        [
            fugu.Ordinal("i", 0, 9),
            fugu.Nominal("s", ["p", "q", "r"]),
            fugu.Ordinal("f", edges=[0, 2.5, 5, 10]),
        ]
    )
    cols = {
        "i": np.array([r[0] for r in rows], dtype=np.int64),
        "s": np.array([r[1] for r in rows], dtype=object),
        "f": np.array([r[2] for r in rows], dtype=np.float64),
    }
    cuts = sorted(min(c, len(rows)) for c in cuts)
    a = histogram_counts(_batches(cols, cuts), dom, out_of_domain="clip")
    b = histogram_counts(cols, dom, engine="duckdb", out_of_domain="clip")
    assert np.array_equal(a, b)
    assert a.sum() == len(rows)


# -- LDP-like support counts and k-means-like sums ------------------------------------------------
def _olh_reference() -> np.ndarray:
    return olh_like_support(DATA)["support"]


@pytest.mark.parametrize("name", list(PARTITIONINGS))
@pytest.mark.parametrize("engine", ["numpy", "duckdb"])
def test_olh_like_support_identical(engine: str, name: str) -> None:
    data: Any = _batches(DATA, PARTITIONINGS[name]) if engine == "numpy" else DATA
    got = partial_sums(
        data, olh_like_support, columns=["seed", "y"], engine=engine, batch_rows=4096
    )
    assert np.array_equal(got["support"], _olh_reference())
    assert got["n"].tolist() == [len(DATA["y"])]


@pytest.mark.parametrize("engine", ["numpy", "duckdb"])
def test_hashed_key_counts_identical(engine: str) -> None:
    ref = np.bincount(hashed_key(DATA), minlength=C_VALUES)
    got = partial_counts(
        DATA, hashed_key, C_VALUES, columns=["seed", "v"], engine=engine, batch_rows=999
    )
    assert np.array_equal(got, ref)
    grouped = partial_counts(
        DATA, hashed_key, C_VALUES, columns=["seed", "v"], engine="duckdb", group=True
    )
    assert np.array_equal(grouped, ref)


def test_real_ldp_support_identical() -> None:
    """The LDP oracles' own ``support`` run through the interface, per engine and partitioning."""
    ldp = pytest.importorskip("fugu.ldp")
    dom = fugu.Domain([fugu.Ordinal("v", 0, C_VALUES - 1)])
    for proto in (ldp.OLH(dom, 1.0), ldp.GRR(dom, 1.0)):
        reports = proto.client(fugu.RandomSource(seed=3)).perturb({"v": DATA["v"][:5000]})
        cols = dict(reports.columns)
        ref = proto.support(cols)["support"]
        for engine in ("numpy", "duckdb"):
            got = partial_sums(
                cols, proto.support, columns=list(cols), engine=engine, batch_rows=1234
            )
            assert np.array_equal(got["support"], ref), (proto.name, engine)


@pytest.mark.parametrize("engine", ["numpy", "duckdb"])
def test_kmeans_like_sums_identical(engine: str) -> None:
    """Counts with weights = coordinates (half-integer grid: float sums exact in any order)."""
    lab = nearest_centre(DATA)
    k = CENTRES.shape[0]
    ref_sums = np.stack(
        [np.bincount(lab, weights=DATA[c], minlength=k) for c in ("x", "y2")], axis=1
    )
    ref_sizes = np.bincount(lab, minlength=k)
    for rows in (1000, 1 << 20):
        sums = partial_counts(
            DATA,
            nearest_centre,
            k,
            columns=["x", "y2"],
            weights=["x", "y2"],
            engine=engine,
            batch_rows=rows,
        )
        assert sums.shape == (k, 2) and np.array_equal(sums, ref_sums)
        sizes = partial_counts(
            DATA, nearest_centre, k, columns=["x", "y2"], engine=engine, batch_rows=rows
        )
        assert np.array_equal(sizes, ref_sizes)
        both = partial_sums(
            DATA, kmeans_partial, columns=["x", "y2"], engine=engine, batch_rows=rows
        )
        assert np.array_equal(both["sums"], ref_sums) and np.array_equal(both["sizes"], ref_sizes)


def test_known_answers_weights() -> None:
    data = {
        "k": np.array([0, 2, 2, 1]),
        "w": np.array([5, -1, 3, 2]),
        "f": np.array([0.5, 0.25, 0.25, 1.0]),
    }
    for engine in ("numpy", "duckdb"):
        assert partial_counts(data, lambda b: b["k"], 4, columns=["k"], engine=engine).tolist() == [
            1,
            1,
            2,
            0,
        ]
        got = partial_counts(data, lambda b: b["k"], 4, columns=["k"], weights="w", engine=engine)
        assert got.dtype == np.int64 and got.tolist() == [5, 2, 2, 0]
        got = partial_counts(
            data, lambda b: b["k"], 3, columns=["k"], weights=["w", "f"], engine=engine
        )
        assert got.tolist() == [[5.0, 0.5], [2.0, 1.0], [2.0, 0.5]]
    big = {"k": np.zeros(3, dtype=np.int64), "w": np.array([2**61, 2**61, 3], dtype=np.int64)}
    assert partial_counts(big, lambda b: b["k"], 1, columns=["k"], weights="w").tolist() == [
        2**62 + 3
    ]


def test_add_partials_rules() -> None:
    assert add_partials(None, None) is None
    with pytest.raises(fugu.InvalidParameterError, match="shape"):
        add_partials(np.zeros(2), np.zeros(3))
    with pytest.raises(fugu.InvalidParameterError, match="keys"):
        add_partials({"a": np.zeros(1)}, {"b": np.zeros(1)})
    with pytest.raises(fugu.InvalidTypeError):
        add_partials({"a": np.zeros(1)}, np.zeros(1))


# -- errors ---------------------------------------------------------------------------------------
@pytest.mark.parametrize("engine", ["numpy", "duckdb"])
def test_errors(engine: str, files: dict[str, Path]) -> None:
    with pytest.raises(fugu.DomainError, match=r"lacks the column\(s\) \['nope'\]"):
        partial_counts(DATA, lambda b: b["nope"], 3, columns=["nope"], engine=engine)
    with pytest.raises(fugu.DomainError, match=r"lacks the column\(s\) \['nope'\]"):
        partial_counts(files["parquet"], lambda b: b["nope"], 3, columns=["nope"], engine=engine)
    with pytest.raises(fugu.DomainError, match=r"outside \[0, 10\)"):
        partial_counts(DATA, lambda b: b["age"], 10, columns=["age"], engine=engine)
    with pytest.warns(UserWarning, match="no rows"):  # zero rows: zero counts, not an error
        empty = partial_counts(
            {"a": np.zeros(0, np.int64)}, lambda b: b["a"], 3, columns=["a"], engine=engine
        )
    assert empty.tolist() == [0, 0, 0]
    bad = {k: v.copy() for k, v in DATA.items()}
    bad["age"][[1, 2]] = 300
    with pytest.raises(fugu.DomainError, match="'age'") as info:
        histogram_counts(bad, DOM, engine=engine)
    assert "300" in str(info.value)
    with pytest.raises(fugu.InvalidParameterError, match="engine must be one of"):
        partial_counts(DATA, hashed_key, 3, columns=["v"], engine="dask")
    with pytest.raises(fugu.InvalidParameterError, match="columns"):
        partial_counts(DATA, hashed_key, 3)


def test_duckdb_error_counts_rows(files: dict[str, Path]) -> None:
    bad = {k: v.copy() for k, v in DATA.items()}
    bad["job"][:7] = "pilot"
    with pytest.raises(fugu.DomainError, match="7 of 20,000 rows.*'job'.*pilot"):
        histogram_counts(bad, DOM, engine="duckdb")


def test_partial_shape_must_not_depend_on_batch() -> None:
    with pytest.raises(fugu.InvalidParameterError, match="shapes that do not depend"):
        partial_sums(DATA, lambda b: np.zeros(len(b["v"])), columns=["v"], batch_rows=3000)


# -- real LDP aggregation through the adapter ----------------------------------------------------
def _hdg_reports() -> tuple[Any, Any]:
    ldp = pytest.importorskip("fugu.ldp")
    dom = fugu.datasets.synthetic_domain(3, 16)
    data = fugu.datasets.correlated_gaussian(6_000, 3, 16, seed=1)
    hdg = ldp.HDG(dom, epsilon=1.0)
    reports = hdg.client(fugu.RandomSource(seed=2)).perturb(data)
    return hdg._from_header(reports), reports


@pytest.mark.parametrize("engine", ["numpy", "duckdb"])
def test_ldp_adapter_hdg_identical_and_counts_rejections(engine: str) -> None:
    """HDG (OUE bit vectors in groups) aggregated through the engine equals the protocol's own
    partial; an out-of-range report is rejected and counted, not used."""
    from fugu.engines.ldp import aggregate_reports

    proto, reports = _hdg_reports()
    ref_state, ref_n, _ = proto.partial(reports.columns)
    table = reports.to_arrow()
    state, n_ok, rejected = aggregate_reports(proto, table, engine=engine, batch_rows=1000)
    assert n_ok == ref_n == 6_000 and not rejected
    assert all(np.array_equal(state[k], ref_state[k]) for k in ref_state)
    cols = {k: np.array(v, copy=True) for k, v in reports.columns.items()}
    cols["group"][5] = 10**6  # no such group
    state, n_ok, rejected = aggregate_reports(proto, cols, engine=engine)
    assert n_ok == 5_999 and rejected == {"out of range": 1}
    rel = proto.aggregator().add_partial(state, n_ok, rejected).estimate()
    assert rel.guarantee.parameters["n_reports"] == 5_999


@pytest.mark.parametrize("dtype", [np.int8, np.int32, np.int64])
def test_one_pass_range_check_refuses_every_out_of_range_integer(dtype: Any) -> None:
    """The numpy engine's in-range fast path checks both ends with one max() of the shifted
    codes viewed as unsigned; values that wrap around (the dtype's extremes) are refused too,
    and in-range columns count exactly."""
    info = np.iinfo(dtype)
    for low, high in ((0, 9), (-5, 10), (3, 7)):
        dom = fugu.Domain([fugu.Ordinal("x", low, high)])
        good = np.arange(low, high + 1).astype(dtype)
        assert histogram_counts({"x": good}, dom).tolist() == [1] * (high - low + 1)
        for bad in (low - 1, high + 1, info.min, info.max, info.min + 1):
            col = np.array([low, bad, high], dtype=dtype)
            with pytest.raises(fugu.DomainError):
                histogram_counts({"x": col}, dom)
