"""An input with no rows is counted (all-zero counts, a warning to the curator), never refused.

Under add/remove neighbours (central ``neighbours="add-remove"``, a Blowfish policy with ⊥, the
rows of an SQL query) the number of records n is private, and the empty data set and a
one-record data set are neighbours. The counting layer refused zero rows with EmptyDataError
("the input has no rows; there is nothing to count") and released one row, which told the two
apart with probability 1: ``Histogram.from_file(None, dom, sql="... WHERE zip='12345' AND
age > 90")`` errored exactly when nobody matched. Now every engine and entry point returns zero
counts (or zero k-means sums) with a :class:`UserWarning`; schema errors (a missing column, a
file without a header) stay errors. Every test here failed before the fix with EmptyDataError.
"""

from __future__ import annotations

import warnings
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import fugu
from fugu.blowfish import KMeans, Policy
from fugu.blowfish import laplace as blowfish_laplace
from fugu.central import laplace as central_laplace
from fugu.engines import histogram_counts, partial_counts, partial_sums

DOM = fugu.Domain([fugu.Ordinal("age", 0, 9), fugu.Nominal("sex", ["F", "M"])])
NO_ROWS = "no rows"


def _files(tmp_path: Path, rows: list[tuple[int, str]]) -> dict[str, Path]:
    """The same records as a CSV (header written even with no rows) and a Parquet file."""
    csv = tmp_path / f"r{len(rows)}.csv"
    csv.write_text("age,sex\n" + "".join(f"{a},{s}\n" for a, s in rows))
    parquet = tmp_path / f"r{len(rows)}.parquet"
    table = pa.table(
        {
            "age": pa.array([a for a, _ in rows], pa.int64()),
            "sex": pa.array([s for _, s in rows], pa.string()),
        }
    )
    pq.write_table(table, parquet)
    return {"csv": csv, "parquet": parquet}


def _empty_records() -> dict[str, np.ndarray]:
    return {"age": np.zeros(0, dtype=np.int64), "sex": np.zeros(0, dtype=object)}


# -- every engine: zero rows are zero counts, with a warning ------------------------------------
@pytest.mark.parametrize("engine", ["numpy", "duckdb"])
def test_in_memory_records_count_zero(engine: str) -> None:
    with pytest.warns(UserWarning, match=NO_ROWS):
        counts = histogram_counts(_empty_records(), DOM, engine=engine)
    assert counts.tolist() == [0] * DOM.size
    with pytest.warns(UserWarning, match=NO_ROWS):
        hist = fugu.Histogram.from_records(_empty_records(), DOM)
    assert hist.counts.shape == DOM.shape and hist.total() == 0
    import pandas as pd

    with pytest.warns(UserWarning, match=NO_ROWS):
        hist = fugu.Histogram.from_records(pd.DataFrame({"age": [], "sex": []}), DOM)
    assert hist.total() == 0


@pytest.mark.parametrize("engine", ["numpy", "duckdb"])
@pytest.mark.parametrize("kind", ["csv", "parquet"])
def test_files_with_no_rows_count_zero(tmp_path: Path, engine: str, kind: str) -> None:
    path = _files(tmp_path, [])[kind]
    with pytest.warns(UserWarning, match=NO_ROWS):
        hist = fugu.Histogram.from_file(path, DOM, engine=engine)
    assert hist.counts.tolist() == np.zeros(DOM.shape, dtype=int).tolist()
    # the warning goes to the curator only: nothing data-dependent in the recorded options
    assert "rows" not in str(hist.data_options)


def test_an_sql_query_that_matches_nobody_counts_zero(tmp_path: Path) -> None:
    """The example of the bug: a WHERE nobody matches errored, revealing the count 0."""
    path = _files(tmp_path, [(3, "F"), (5, "M")])["parquet"]
    sql = f"SELECT * FROM '{path}' WHERE age > 8"
    with pytest.warns(UserWarning, match=NO_ROWS):
        hist = fugu.Histogram.from_file(None, DOM, sql=sql)
    assert hist.total() == 0 and hist.counts_a_subset
    with pytest.warns(UserWarning, match=NO_ROWS):
        grouped = partial_counts(None, lambda b: b["age"], 10, columns=["age"], sql=sql, group=True)
    assert grouped.tolist() == [0] * 10


def test_partials_of_zero_rows_have_the_shapes_of_a_non_empty_input() -> None:
    def stats(batch: dict[str, Any]) -> dict[str, np.ndarray]:
        return {"n": np.array([len(batch["a"])]), "hist": np.bincount(batch["a"], minlength=4)}

    for engine in ("numpy", "duckdb"):
        with pytest.warns(UserWarning, match=NO_ROWS):
            out = partial_sums({"a": np.zeros(0, np.int64)}, stats, columns=["a"], engine=engine)
        assert {k: np.asarray(v).tolist() for k, v in out.items()} == {
            "n": [0],
            "hist": [0, 0, 0, 0],
        }
        with pytest.warns(UserWarning, match=NO_ROWS):
            w = partial_counts(
                {"a": np.zeros(0, np.int64)}, lambda b: b["a"], 3, columns=["a"],
                weights=["a", "a"], engine=engine,
            )  # fmt: skip
        assert w.shape == (3, 2) and not w.any()
    with pytest.warns(UserWarning, match=NO_ROWS):  # an iterable of empty tables
        counts = histogram_counts([_empty_records(), _empty_records()], DOM)
    assert not counts.any()


def test_schema_errors_stay_errors_where_zero_rows_count_zero(tmp_path: Path) -> None:
    """Only 'zero rows' changed: a file with no header (no schema) and a missing column are
    still refused, while the header-only file next to them is counted."""
    header_only = _files(tmp_path, [])["csv"]
    nothing = tmp_path / "nothing.csv"
    nothing.write_text("")
    for engine in ("numpy", "duckdb"):
        with pytest.warns(UserWarning, match=NO_ROWS):
            assert fugu.Histogram.from_file(header_only, DOM, engine=engine).total() == 0
        with pytest.raises(fugu.FuguError):
            fugu.Histogram.from_file(nothing, DOM, engine=engine)
        with pytest.raises(fugu.DomainError, match="sex"):
            histogram_counts({"age": np.zeros(0, np.int64)}, DOM, engine=engine)


# -- neighbours: the empty data set and one record both release ---------------------------------
def _release_both(tmp_path: Path, release: Any) -> None:
    """Count the empty data set and its one-record neighbour through each entry point and
    release both: each must give a finite release (before, the empty one raised)."""
    empty, one = _files(tmp_path, []), _files(tmp_path, [(4, "M")])
    for engine, kind in [("numpy", "csv"), ("duckdb", "parquet"), ("duckdb", "csv")]:
        for files in (empty, one):
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", UserWarning)
                hist = fugu.Histogram.from_file(files[kind], DOM, engine=engine)
            rel = release(hist)
            assert np.all(np.isfinite(np.asarray(rel.counts, dtype=float)))
    for rows in ([], [(4, "M")]):
        where = " OR ".join(f"(age = {a} AND sex = '{s}')" for a, s in rows) or "FALSE"
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", UserWarning)
            hist = fugu.Histogram.from_file(
                None, DOM, sql=f"SELECT * FROM '{empty['parquet']}' UNION ALL "
                f"SELECT * FROM '{one['parquet']}' WHERE {where}",
            )  # fmt: skip
        assert hist.total() == len(rows)
        rel = release(hist)
        assert np.all(np.isfinite(np.asarray(rel.counts, dtype=float)))


def test_neighbours_release_under_central_add_remove(tmp_path: Path) -> None:
    _release_both(
        tmp_path,
        lambda h: central_laplace(h, 1.0, neighbours="add-remove", rng=fugu.RandomSource(seed=1)),
    )


def test_neighbours_release_under_a_blowfish_policy_with_bottom(tmp_path: Path) -> None:
    policy = Policy.attribute(DOM, bottom=True)
    _release_both(
        tmp_path, lambda h: blowfish_laplace(h, 1.0, policy, rng=fugu.RandomSource(seed=1))
    )


# -- k-means: with ⊥ (n private) zero points release noise; without ⊥ n = 0 < k is refused ------
KDOM = fugu.Domain([fugu.Ordinal("x", 0, 99), fugu.Ordinal("y", 0, 99)])


def _kmeans_fit(X: Any, policy: str | None, **options: Any) -> KMeans:
    km = KMeans(2, 1.0, policy=policy, domain=KDOM, rng=fugu.RandomSource(seed=1))
    return km.fit(X, **options)


def test_kmeans_with_bottom_releases_on_zero_points(tmp_path: Path) -> None:
    csv = tmp_path / "points.csv"
    csv.write_text("x,y\n")
    one = tmp_path / "one.csv"
    one.write_text("x,y\n10,20\n")
    inputs: list[tuple[Any, dict[str, Any]]] = [
        (np.zeros((0, 2)), {}),
        ({"x": [], "y": []}, {}),
        (csv, {}),
        (csv, {"engine": "duckdb"}),
        (None, {"sql": f"SELECT * FROM read_csv('{one}') WHERE x > 50"}),
    ]
    for X, options in inputs:
        with pytest.warns(UserWarning, match=NO_ROWS):
            km = _kmeans_fit(X, "distance:theta=1+bottom", **options)
        assert km.cluster_centers_.shape == (2, 2)
        assert np.all(np.isfinite(km.cluster_centers_))
        assert km.n_iter_ >= 1 and km.noisy_sizes_.shape == (km.n_iter_, 2)
        assert km.guarantee_.epsilon == pytest.approx(1.0)
    # its one-point neighbour releases too
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        assert _kmeans_fit(one, "distance:theta=1+bottom").cluster_centers_.shape == (2, 2)


def test_kmeans_with_public_n_refuses_zero_points_as_k_above_n_before_the_charge(
    tmp_path: Path,
) -> None:
    """Without ⊥ (and not SQL) n is public: n = 0 < k is refused like any k > n, before the
    charge — no longer as 'X has no points' (EmptyDataError)."""
    csv = tmp_path / "points.csv"
    csv.write_text("x,y\n")
    acct = fugu.Accountant(fugu.Budget(2.0))
    for X in (np.zeros((0, 2)), csv):
        km = KMeans(2, 1.0, domain=KDOM, rng=fugu.RandomSource(seed=1), accountant=acct)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", UserWarning)
            with pytest.raises(fugu.InvalidParameterError, match="n_clusters=2 exceeds .* n=0"):
                km.fit(X)
    assert acct.spent == 0.0


# -- Spark (one test: slow) -----------------------------------------------------------------------
@pytest.mark.spark
def test_spark_counts_zero_rows(spark: Any, tmp_path: Path) -> None:
    from fugu.engines import spark as spark_engine

    df = spark.createDataFrame([(3, "F")], "age long, sex string").where("age > 8")
    for method in ("jvm", "arrow"):
        with pytest.warns(UserWarning, match=NO_ROWS):
            counts = spark_engine.histogram(df, DOM, method=method)
        assert counts.tolist() == [0] * DOM.size
    with pytest.warns(UserWarning, match=NO_ROWS):
        hist = fugu.Histogram.from_file(
            _files(tmp_path, [])["csv"], DOM, engine="spark", spark=spark
        )
    assert hist.total() == 0
