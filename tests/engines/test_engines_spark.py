"""The Spark engine against a local session: identical numbers to the numpy engine for histograms
(both Spark methods), LDP-like support counts and k-means-like sums, on skewed partitions with
empty ones, a single partition and many partitions; and executor-side errors that name the
partition and the column.

Deterministic (fixed seeds, exact comparisons): false-failure rate 0.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import _engines_data
import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from _engines_data import (
    C_VALUES,
    CENTRES,
    domain,
    failing_key,
    hashed_key,
    kmeans_partial,
    nearest_centre,
    olh_like_support,
    records,
)

import fugu
from fugu.engines import histogram_counts, partial_counts, partial_sums
from fugu.engines import spark as spark_engine

pytestmark = pytest.mark.spark

DATA = records()
DOM = domain()
REF = histogram_counts(DATA, DOM)


@pytest.fixture(scope="module")
def layouts(spark: Any) -> dict[str, Any]:
    """The same rows in three partition layouts."""
    from pyspark import cloudpickle
    from pyspark.sql import functions as F

    cloudpickle.register_pickle_by_value(_engines_data)  # toy functions travel by value
    base = spark.createDataFrame(pa.table(DATA))
    skewed = base.repartition(4, F.lit(0))  # every row in one partition, three empty ones
    return {"skewed+empty": skewed, "single": base.coalesce(1), "many": base.repartition(3)}


def test_layouts_are_what_they_claim(layouts: dict[str, Any]) -> None:
    from pyspark.sql import functions as F

    skewed = layouts["skewed+empty"]
    sizes = skewed.groupBy(F.spark_partition_id().alias("p")).count().collect()
    assert skewed.rdd.getNumPartitions() == 4
    assert [r["count"] for r in sizes] == [len(DATA["age"])]  # one full partition, three empty
    assert layouts["single"].rdd.getNumPartitions() == 1


@pytest.mark.parametrize("method", ["jvm", "arrow"])
@pytest.mark.parametrize("layout", ["skewed+empty", "single", "many"])
def test_histogram_identical(layouts: dict[str, Any], layout: str, method: str) -> None:
    got = spark_engine.histogram(layouts[layout], DOM, method=method)
    assert np.array_equal(got, REF)


def test_histogram_from_records_and_file(
    layouts: dict[str, Any], tmp_path: Path, spark: Any
) -> None:
    h = fugu.Histogram.from_records(layouts["many"], DOM)
    assert np.array_equal(h.counts.ravel(), REF) and h.data_options["engine"] == "spark"
    path = tmp_path / "d.parquet"
    pq.write_table(pa.table(DATA), path, row_group_size=4000)
    h = fugu.Histogram.from_file(path, DOM, engine="spark", method="arrow")
    assert np.array_equal(h.counts.ravel(), REF)
    rel = fugu.central.laplace(h, epsilon=1.0, rng=fugu.RandomSource(seed=1))
    assert rel.counts.shape == DOM.shape


def test_ldp_like_support_and_hashed_key_identical(layouts: dict[str, Any]) -> None:
    ref = olh_like_support(DATA)
    ref_keys = np.bincount(hashed_key(DATA), minlength=C_VALUES)
    for layout in ("skewed+empty", "many"):
        df = layouts[layout]
        got = partial_sums(df, olh_like_support, columns=["seed", "y"], engine="spark")
        assert np.array_equal(got["support"], ref["support"]) and got["n"].tolist() == [
            len(DATA["y"])
        ]
        keys = partial_counts(df, hashed_key, C_VALUES, columns=["seed", "v"], engine="spark")
        assert np.array_equal(keys, ref_keys)


def test_real_ldp_support_identical(spark: Any) -> None:
    ldp = pytest.importorskip("fugu.ldp")
    dom = fugu.Domain([fugu.Ordinal("v", 0, C_VALUES - 1)])
    proto = ldp.OLH(dom, 1.0)
    reports = proto.client(fugu.RandomSource(seed=3)).perturb({"v": DATA["v"][:5000]})
    cols = dict(reports.columns)
    df = spark_engine.to_dataframe(cols, spark, num_partitions=3)
    got = partial_sums(df, proto.support, columns=list(cols), engine="spark")
    assert np.array_equal(got["support"], proto.support(cols)["support"])


def test_kmeans_like_sums_identical(layouts: dict[str, Any]) -> None:
    lab = nearest_centre(DATA)
    k = CENTRES.shape[0]
    ref_sums = np.stack(
        [np.bincount(lab, weights=DATA[c], minlength=k) for c in ("x", "y2")], axis=1
    )
    df = layouts["skewed+empty"]
    sums = partial_counts(
        df, nearest_centre, k, columns=["x", "y2"], weights=["x", "y2"], engine="spark"
    )
    assert np.array_equal(sums, ref_sums)
    both = partial_sums(layouts["many"], kmeans_partial, columns=["x", "y2"], engine="spark")
    assert np.array_equal(both["sums"], ref_sums)
    assert np.array_equal(both["sizes"], np.bincount(lab, minlength=k))


# -- bad input ------------------------------------------------------------------------------------
def test_missing_column_and_wrong_type(layouts: dict[str, Any]) -> None:
    from pyspark.sql import functions as F

    df = layouts["many"]
    with pytest.raises(fugu.DomainError, match=r"lacks the column\(s\) \['age'\]"):
        spark_engine.histogram(df.drop("age"), DOM)
    with pytest.raises(fugu.DomainError, match=r"lacks the column\(s\) \['nope'\]"):
        partial_counts(df, hashed_key, 3, columns=["nope"], engine="spark")
    wrong = df.withColumn("age", F.concat(F.lit("x"), F.col("age").cast("string")))
    with pytest.raises(fugu.InvalidTypeError, match="column 'age' has Spark type string"):
        spark_engine.histogram(wrong, DOM)


def test_repeated_column_name_is_refused(layouts: dict[str, Any]) -> None:
    """A DataFrame with two columns named 'age' (or 'Age' and 'age': Spark matches names ignoring
    case) raised pyspark's AnalysisException [AMBIGUOUS_REFERENCE]; now the DomainError the
    numpy and DuckDB engines give."""
    df = layouts["many"]
    dup = df.select("age", "job", "gain", df["age"].alias("Age"))
    with pytest.raises(fugu.DomainError, match="column names of the Spark DataFrame repeat"):
        spark_engine.histogram(dup, DOM)


@pytest.mark.parametrize("method", ["jvm", "arrow"])
def test_out_of_domain_on_executor_names_partition_and_column(spark: Any, method: str) -> None:
    bad = {k: v.copy() for k, v in DATA.items()}
    bad["age"][15_000] = 200  # lands in the last of the 4 partitions below
    df = spark.createDataFrame(pa.table(bad)).coalesce(1).repartitionByRange(4, "seed")
    from pyspark.sql import functions as F

    where = df.withColumn("p", F.spark_partition_id()).where("age = 200").collect()[0]["p"]
    with pytest.raises(fugu.DomainError) as info:
        spark_engine.histogram(df, DOM, method=method)
    msg = str(info.value)
    assert f"partition {where}" in msg and "'age'" in msg and "200" in msg
    clipped = spark_engine.histogram(df, DOM, method=method, out_of_domain="clip")
    assert np.array_equal(clipped, histogram_counts(bad, DOM, out_of_domain="clip"))


def test_key_function_error_names_partition(layouts: dict[str, Any]) -> None:
    with pytest.raises(
        fugu.DomainError, match=r"on Spark partition \d+.*value 13 is not allowed in column 'v'"
    ):
        partial_counts(layouts["many"], failing_key, C_VALUES, columns=["v"], engine="spark")


def test_empty_dataframe(spark: Any, layouts: dict[str, Any]) -> None:
    """Zero rows are zero counts (with a warning), not an error: the number of rows a filter
    keeps may be private, and refusing zero would reveal it."""
    empty = layouts["many"].where("age < 0")
    for method in ("arrow", "jvm"):
        with pytest.warns(UserWarning, match="no rows"):
            counts = spark_engine.histogram(empty, DOM, method=method)
        assert counts.shape == (DOM.size,) and not counts.any()


def test_ldp_adapter_hdg_on_spark(spark: Any) -> None:
    """HDG reports (packed bit vectors) sent through Spark give the protocol's own state."""
    ldp = pytest.importorskip("fugu.ldp")
    from fugu.engines.ldp import aggregate_reports

    dom = fugu.datasets.synthetic_domain(3, 16)
    data = fugu.datasets.correlated_gaussian(6_000, 3, 16, seed=1)
    hdg = ldp.HDG(dom, epsilon=1.0)
    reports = hdg.client(fugu.RandomSource(seed=2)).perturb(data)
    proto = hdg._from_header(reports)
    ref_state, ref_n, _ = proto.partial(reports.columns)
    df = spark_engine.to_dataframe(reports.to_arrow(), spark, num_partitions=3)
    state, n_ok, rejected = aggregate_reports(proto, df, engine="spark")
    assert n_ok == ref_n and not rejected
    assert all(np.array_equal(state[k], ref_state[k]) for k in ref_state)


def test_many_partitions_with_big_partials_fit_in_a_small_driver_heap(spark: Any) -> None:
    """Issue 16 item 5: each partition used to send its own domain-sized partial to the driver,
    all collected at once. 64 cached partitions x a 2^21-cell histogram (16 MiB each) = 1 GiB
    of payloads, more than this session's 1 GiB driver heap: the old code died with
    ``OutOfMemoryError``. Now partitions are coalesced to one task per core before counting,
    so two partials reach the driver, and the counts are exact."""
    dom = fugu.Domain(
        [fugu.Ordinal("a", 0, 255), fugu.Ordinal("b", 0, 255), fugu.Ordinal("c", 0, 31)]
    )
    n = 64_000
    df = (
        spark.range(0, n, numPartitions=64)
        .selectExpr("id % 256 AS a", "(id DIV 256) % 256 AS b", "(id DIV 65536) % 32 AS c")
        .cache()
    )
    assert df.count() == n and df.rdd.getNumPartitions() == 64
    ids = np.arange(n)
    ref = histogram_counts({"a": ids % 256, "b": (ids // 256) % 256, "c": ids // 65536}, dom)
    try:
        out = spark_engine.histogram(df, dom, method="arrow")
    finally:
        df.unpersist()
    assert np.array_equal(out, ref)


def test_to_dataframe_makes_one_partition_per_core(spark: Any) -> None:
    """Above spark.sql.execution.arrow.localRelationThreshold (48 MiB; lowered to 0 here so a
    small table shows it) createDataFrame makes one partition per 10,000-row Arrow batch;
    to_dataframe coalesces them to one per core."""
    key = "spark.sql.execution.arrow.localRelationThreshold"
    old = spark.conf.get(key)
    spark.conf.set(key, "0")
    try:
        cols = {"age": np.arange(30_000) % 100}
        assert spark.createDataFrame(pa.table(cols)).rdd.getNumPartitions() == 3
        df = spark_engine.to_dataframe(cols, spark)
        assert df.rdd.getNumPartitions() == spark.sparkContext.defaultParallelism
        assert np.array_equal(
            spark_engine.histogram(df, fugu.Domain([fugu.Ordinal("age", 0, 99)])), np.full(100, 300)
        )
    finally:
        spark.conf.set(key, old)


@pytest.mark.parametrize("engine", ["numpy", "duckdb", "spark"])
def test_empty_line_in_a_csv_is_refused_by_every_engine(
    spark: Any, tmp_path: Path, engine: str
) -> None:
    """In a one-column CSV an empty line is a record whose value is missing: every engine
    refuses the file instead of skipping the record (pyarrow and Spark skip empty lines by
    default; a dropped record would change the n that replace-one neighbours treat as public)."""
    path = tmp_path / "one.csv"
    path.write_text("x\n0\n\n4\n")
    dom = fugu.Domain([fugu.Ordinal("x", 0, 4)])
    with pytest.raises(fugu.errors.FuguError):
        fugu.Histogram.from_file(path, dom, engine=engine)
    path.write_text("x\n0\n3\n4\n")  # the same file without the gap is counted in full
    assert fugu.Histogram.from_file(path, dom, engine=engine).total() == 3


@pytest.mark.parametrize("line", ["1,b,v,9", "1,b"])
@pytest.mark.parametrize("engine", ["numpy", "spark"])
def test_a_line_with_more_or_fewer_fields_is_refused(
    spark: Any, tmp_path: Path, engine: str, line: str
) -> None:
    """A line with an extra or a missing field (here in column t, outside the domain) is
    refused as the numpy engine refuses it. Before the fix Spark counted it: its CSV reader
    drops extra fields and fills missing ones with null, and with column pruning it checks a
    line only against the columns the histogram reads (x, s), so the counts were [1, 0, 0, 1,
    0, 0, 0, 0, 1, 0] (three records) where numpy refused the file."""
    path = tmp_path / "ragged.csv"
    path.write_text(f"x,s,t\n0,a,u\n{line}\n4,a,u\n")
    dom = fugu.Domain([fugu.Ordinal("x", 0, 4), fugu.Nominal("s", ["a", "b"])])
    with pytest.raises(fugu.errors.FileFormatError):
        fugu.Histogram.from_file(path, dom, engine=engine)
    path.write_text('x,s,t\n0,a,u\n1,b,"v,9"\n4,a,u\n')  # a quoted separator is one field
    assert fugu.Histogram.from_file(path, dom, engine=engine).total() == 3
