"""LDP aggregation wired to the engine interface: ``protocol.aggregate(reports, engine=...)``.

For every LDP method, the same seeded reports aggregated in memory (numpy), by DuckDB (from an
Arrow table and from a Parquet report file) and by Spark (DataFrames with every row in one
partition and three empty ones, and with 90/10-skewed partitions; a Parquet path read by Spark) give
identical aggregator states (support counts) and identical releases — exact equality. Malformed
reports found on an executor (nulls, bit vectors of another length, seeds outside uint32,
values out of range) are counted as rejected, by reason, and never used.

Deterministic (fixed seeds, exact comparisons): false-failure rate 0.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pytest

import fugu
from fugu import ldp
from fugu.engines import spark as spark_engine

N = 3_000
DOM1 = fugu.Domain([fugu.Ordinal("v", 0, 19)])
DOM3 = fugu.datasets.synthetic_domain(3, 16)
DATA1 = {"v": (np.arange(N) * 7) % 20}
DATA3 = fugu.datasets.correlated_gaussian(N, 3, 16, seed=1)

METHODS: dict[str, Any] = {
    "grr": lambda: ldp.GRR(DOM1, 1.0),
    "olh": lambda: ldp.OLH(DOM1, 1.0),
    "oue": lambda: ldp.OUE(DOM1, 1.0),
    "sw": lambda: ldp.SW(DOM1, 1.0),
    "hio": lambda: ldp.HIO(DOM3, 1.0),
    "lhio": lambda: ldp.LHIO(DOM3, 1.0),
    "calm": lambda: ldp.CALM(DOM3, 1.0),
    "msw": lambda: ldp.MSW(DOM3, 1.0),
    "uni": lambda: ldp.Uni(DOM3, 1.0),
    "tdg": lambda: ldp.TDG(DOM3, 1.0),
    "hdg": lambda: ldp.HDG(DOM3, 1.0),
    "hdg-olh": lambda: ldp.HDG(DOM3, 1.0, oracle="olh"),
}
SPARK_METHODS = ["grr", "olh", "oue", "hdg"]


def _reports(method: str, seed: int = 3) -> tuple[Any, ldp.Reports]:
    proto = METHODS[method]()
    data = DATA1 if proto.domain is DOM1 else DATA3
    return proto, proto.client(fugu.RandomSource(seed=seed)).perturb(data)


def _same_state(a: Any, b: Any) -> None:
    assert a.n_accepted == b.n_accepted
    assert dict(a.rejected) == dict(b.rejected)
    assert a.state.keys() == b.state.keys()
    for k in a.state:
        assert np.array_equal(a.state[k], b.state[k]), k


def _same_release(r1: fugu.Release, r2: fugu.Release) -> None:
    arrays1, meta1 = r1._state()
    arrays2, meta2 = r2._state()
    assert arrays1.keys() == arrays2.keys()
    for k in arrays1:
        assert np.array_equal(np.asarray(arrays1[k]), np.asarray(arrays2[k])), k
    assert json.dumps(meta1, sort_keys=True, default=str) == json.dumps(
        meta2, sort_keys=True, default=str
    )
    assert r1.guarantee == r2.guarantee


# -- numpy / DuckDB, every method ---------------------------------------------------------------
@pytest.mark.parametrize("method", sorted(METHODS))
def test_every_method_identical_on_numpy_and_duckdb(method: str, tmp_path: Path) -> None:
    proto, reports = _reports(method)
    ref = proto.aggregator_for(reports)
    assert ref.n_accepted == N
    path = reports.save(tmp_path / "r.parquet")
    for src, engine, opts in [
        (reports.to_arrow(), "numpy", {"batch_rows": 700}),
        (reports.to_arrow(), "duckdb", {"batch_rows": 1000}),
        (path, "duckdb", {}),
        (path, "numpy", {}),
    ]:
        _same_state(ref, proto.aggregator_for(src, engine=engine, **opts))
    _same_release(proto.aggregate(reports), proto.aggregate(path, engine="duckdb"))


def test_simulate_on_an_engine_equals_in_memory() -> None:
    hdg = ldp.HDG(DOM3, 1.0)
    r1 = hdg.simulate(DATA3, fugu.RandomSource(seed=5))
    r2 = hdg.simulate(DATA3, fugu.RandomSource(seed=5), engine="duckdb", batch_rows=512)
    _same_release(r1, r2)


def test_jsonl_file_and_list_of_batches(tmp_path: Path) -> None:
    proto, reports = _reports("olh")
    path = reports.save(tmp_path / "r.jsonl")
    with open(path, "a", encoding="utf-8") as fh:
        fh.write('{"seed": 1, "y"\n')  # truncated last line
    agg = proto.aggregator_for(path, engine="duckdb")
    assert agg.n_accepted == N and agg.rejected == {"malformed": 1}
    halves = [reports.take(np.arange(N) < 1000), reports.take(np.arange(N) >= 1000)]
    _same_state(proto.aggregator_for(reports), proto.aggregator_for(halves, engine="duckdb"))


# -- headers --------------------------------------------------------------------------------------
def test_header_is_checked(tmp_path: Path) -> None:
    other = ldp.OLH(DOM1, 2.0)
    reports = other.client(fugu.RandomSource(seed=1)).perturb(DATA1)
    path = reports.save(tmp_path / "r.parquet")
    with pytest.raises(fugu.ReportError, match="epsilon"):
        ldp.OLH(DOM1, 1.0).aggregate(path, engine="duckdb")
    with pytest.raises(fugu.ReportError, match="protocol 'olh'"):
        ldp.GRR(DOM1, 2.0).aggregate(reports.to_arrow(), engine="duckdb")
    cols = dict(reports.columns)  # no header: header= is checked instead
    with pytest.raises(fugu.ReportError, match="epsilon"):
        ldp.OLH(DOM1, 1.0).aggregate(cols, engine="duckdb", header=reports.header())


def test_unresolved_grid_needs_a_header() -> None:
    proto, reports = _reports("hdg")
    cols = dict(reports.columns)
    with pytest.raises(fugu.InvalidParameterError, match="granularities"):
        proto.aggregate(cols, engine="duckdb")
    rel = proto.aggregate(cols, engine="duckdb", header=reports.header())
    _same_release(rel, proto.aggregate(reports))


def test_malformed_rows_counted_not_used_numpy_and_duckdb() -> None:
    proto, reports = _reports("olh")
    table = reports.to_arrow()
    seed = table.column("seed").to_pylist()
    y = table.column("y").to_pylist()
    seed[0], y[1] = None, None  # nulls
    bad = table.set_column(0, "seed", pa.array(seed, pa.uint32()))
    bad = bad.set_column(1, "y", pa.array(y, pa.int64())).replace_schema_metadata(
        table.schema.metadata
    )
    keep = np.arange(N) >= 2
    ref = proto.aggregator_for(reports.take(keep))
    for engine in ("numpy", "duckdb"):
        agg = proto.aggregator_for(bad, engine=engine)
        assert agg.n_accepted == N - 2 and agg.rejected == {"malformed": 2}
        assert all(np.array_equal(agg.state[k], ref.state[k]) for k in ref.state)


# -- Spark ------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def spark_reports(spark: Any) -> dict[str, Any]:
    """Per method: protocol, reports and the reports as Spark DataFrames in three layouts."""
    from pyspark.sql import functions as F

    out = {}
    for method in SPARK_METHODS:
        proto, reports = _reports(method)
        base = spark_engine.to_dataframe(reports.to_arrow(), spark)
        layouts = {
            "skewed+empty": base.repartition(4, F.lit(0)),  # one full partition, three empty
            "skewed": base.repartition(3, (F.rand(seed=1) < 0.9).cast("int")),
        }
        out[method] = (proto, reports, layouts)
    return out


@pytest.mark.spark
@pytest.mark.parametrize("method", SPARK_METHODS)
def test_spark_identical_support_and_release(
    method: str, spark_reports: dict[str, Any], spark: Any
) -> None:
    proto, reports, layouts = spark_reports[method]
    ref = proto.aggregator_for(reports)
    ref_rel = proto.aggregate(reports)
    duck = proto.aggregator_for(reports.to_arrow(), engine="duckdb")
    _same_state(ref, duck)
    for name, df in layouts.items():
        if method == "grr":  # the layouts are what they claim
            sizes = sorted(df.rdd.glom().map(len).collect())
            assert sizes == ([0, 0, 0, N] if name == "skewed+empty" else sizes)
            assert name == "skewed+empty" or (sizes[-2] > 0 and sizes[-1] > 0.8 * N), sizes
        agg = proto.aggregator_for(df, engine="spark", header=reports.header())
        _same_state(ref, agg)
        _same_release(ref_rel, agg.estimate())


@pytest.mark.spark
def test_spark_reads_a_parquet_report_file(tmp_path: Path, spark: Any) -> None:
    proto, reports = _reports("hdg")  # granularities from the file's header
    path = reports.save(tmp_path / "hdg.parquet")
    rel = proto.aggregate(str(path), engine="spark", spark=spark, num_partitions=3)
    _same_release(proto.aggregate(reports), rel)


@pytest.mark.spark
def test_spark_hio_state_is_not_a_sum(spark: Any) -> None:
    """HIO keeps its validated reports (merge by concatenation): read by Spark, merged on the
    driver, still identical."""
    proto, reports = _reports("hio")
    df = spark_engine.to_dataframe(reports.to_arrow(), spark, num_partitions=3)
    ref, agg = proto.aggregator_for(reports), proto.aggregator_for(df, engine="spark")
    assert agg.n_accepted == N and not agg.rejected

    def rows(state: dict[str, np.ndarray]) -> np.ndarray:  # the multiset of validated reports
        r = np.stack([state[k].astype(np.int64) for k in ("group", "seed", "y")], axis=1)
        return r[np.lexsort(r.T[::-1])]

    assert np.array_equal(rows(ref.state), rows(agg.state))


@pytest.mark.spark
def test_spark_malformed_reports_on_executors_are_rejected(spark: Any) -> None:
    """Nulls, a bit vector of another length, seeds outside uint32 and values out of range,
    spread over partitions: every one rejected and counted, the rest identical to in memory."""
    from pyspark.sql import functions as F

    # OLH: seed column int64 on Spark (uint32 on the wire)
    proto, reports = _reports("olh")
    df = spark_engine.to_dataframe(reports.to_arrow(), spark)
    df = df.withColumn("i", F.monotonically_increasing_id())
    df = (
        df.withColumn("seed", F.when(F.col("i") == 10, F.lit(-1)).otherwise(F.col("seed")))
        .withColumn("seed", F.when(F.col("i") == 11, F.lit(2**32 + 5)).otherwise(F.col("seed")))
        .withColumn("y", F.when(F.col("i") == 12, F.lit(None)).otherwise(F.col("y")))
        .withColumn("y", F.when(F.col("i") == 13, F.lit(10**6)).otherwise(F.col("y")))
        .repartition(3)
    )
    agg = proto.aggregator_for(df, engine="spark")
    assert agg.n_accepted == N - 4
    assert agg.rejected == {"malformed": 1, "out of type range": 2, "out of range": 1}
    keep = ~np.isin(np.arange(N), [10, 11, 12, 13])
    ref = proto.aggregator_for(reports.take(keep))
    assert all(np.array_equal(agg.state[k], ref.state[k]) for k in ref.state)

    # HDG (OUE bit vectors as binary): wrong length, null, a group that does not exist
    proto, reports = _reports("hdg")
    width = reports.columns["bits"].shape[1]
    df = spark_engine.to_dataframe(reports.to_arrow(), spark)
    df = df.withColumn("i", F.monotonically_increasing_id())
    df = (
        df.withColumn(
            "bits",
            F.when(F.col("i") == 20, F.lit(bytes(width + 1))).otherwise(F.col("bits")),
        )
        .withColumn("bits", F.when(F.col("i") == 21, F.lit(None)).otherwise(F.col("bits")))
        .withColumn("group", F.when(F.col("i") == 22, F.lit(99)).otherwise(F.col("group")))
        .repartition(4, (F.col("i") < 100).cast("int"))
    )
    agg = proto.aggregator_for(df, engine="spark", header=reports.header())
    assert agg.n_accepted == N - 3, dict(agg.rejected)
    assert agg.rejected == {"malformed": 1, "wrong type": 1, "out of range": 1}
    keep = ~np.isin(np.arange(N), [20, 21, 22])
    hdg = proto._from_header(reports)
    ref = hdg.aggregator_for(reports.take(keep))
    assert all(np.array_equal(agg.state[k], ref.state[k]) for k in ref.state)


# -- bit vectors cross the engine boundary as one buffer (issue 16 item 4) -----------------------
def test_fixed_size_bit_vectors_become_a_view_of_the_arrow_buffer() -> None:
    from fugu.engines.ldp import arrow_column

    bits = np.arange(40, dtype=np.uint8).reshape(10, 4)
    fixed = pa.Array.from_buffers(pa.binary(4), 10, [None, pa.py_buffer(bits.tobytes())])
    lists = pa.FixedSizeListArray.from_arrays(pa.array(bits.reshape(-1)), 4)
    variable = pa.array([bytes(r) for r in bits], pa.binary())  # what DuckDB / Spark hand over
    for arr in (fixed, lists, variable, fixed.slice(3, 5), variable.slice(2, 6)):
        out = arrow_column(arr)
        assert out.dtype == np.uint8 and out.ndim == 2 and not out.flags.owndata
        assert np.array_equal(out, np.asarray([list(b) for b in arr.to_pylist()], np.uint8))
    chunked = pa.chunked_array([fixed.slice(0, 4), fixed.slice(4, 6)])
    assert np.array_equal(arrow_column(chunked), bits)
    # nulls and values of another length stay visible: object arrays, checked row by row
    ragged = pa.array([b"\x00\x01", b"\x00", None], pa.binary())
    assert arrow_column(ragged).dtype == object


def test_hdg_from_parquet_reads_bits_without_python_bytes(tmp_path: Path, monkeypatch) -> None:
    """The file paths never build Python ``bytes`` per report (that cost 6-8x in issue 16)."""
    import fugu.ldp.wire as wire

    proto, reports = _reports("hdg")
    path = reports.save(tmp_path / "r.parquet")
    ref = proto.aggregator_for(reports)

    def no_objects(items: np.ndarray, width: int) -> Any:
        raise AssertionError("bit vectors reached the per-value path")

    monkeypatch.setattr(wire, "_object_bits", no_objects)
    for engine in ("numpy", "duckdb"):
        _same_state(ref, proto.aggregator_for(path, engine=engine))


@pytest.mark.spark
def test_spark_bytes_outside_uint8_are_rejected_not_wrapped(spark: Any) -> None:
    """Bit vectors sent as arrays of integers: a byte of 300 or −1 is rejected on the executor
    (``out of type range``), never taken modulo 256."""
    proto, reports = _reports("oue")
    bits = reports.columns["bits"].astype(np.int64)
    bits[5, 0], bits[6, -1] = 300, -1
    table = pa.table(
        {"bits": pa.FixedSizeListArray.from_arrays(pa.array(bits.reshape(-1)), bits.shape[1])}
    )
    df = spark_engine.to_dataframe(table, spark, num_partitions=3)
    agg = proto.aggregator_for(df, engine="spark", header=reports.header())
    assert agg.rejected == {"out of type range": 2} and agg.n_accepted == N - 2
    keep = ~np.isin(np.arange(N), [5, 6])
    ref = proto.aggregator_for(reports.take(keep))
    assert np.array_equal(agg.state["support"], ref.state["support"])
