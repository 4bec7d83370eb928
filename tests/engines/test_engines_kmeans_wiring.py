"""Private k-means through the engine interface: the per-iteration exact (noise-free) inputs of
q_size and q_sum, and a full seeded fit, are identical for numpy, DuckDB and Spark.

Points come from a numpy array, a Parquet file (several row groups) and Spark DataFrames with an
empty/skewed layout (every row in one of four partitions), a single partition and uneven hash
partitions. One attribute is binned with non-dyadic midpoints, so the coordinate sums are not
exactly representable: equality holds because the engines return integer counts per (cluster,
code) and the sums are formed from them on the driver. Comparisons are exact (``array_equal``),
seeds fixed: false-failure rate 0.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import fugu
import fugu.blowfish.kmeans as km_mod
from fugu.blowfish.kmeans import (
    KMeans,
    KMeansGrid,
    _cell_rule,
    _cluster_stats,
    _make_assigner,
    cluster_stats,
    secret_graph,
)

pytestmark = pytest.mark.spark

DOM = fugu.Domain(
    [
        fugu.Ordinal("x", 0, 99),
        fugu.Ordinal("y", 0, 59),
        fugu.Ordinal("z", edges=[0.0, 0.3, 1.1, 2.9, 5.0, 7.7]),
    ]
)
GRID = KMeansGrid.from_domain(DOM)
N = 6_000
CENTRES = np.array([[10.0, 10.0, 1.0], [50.0, 30.0, 3.3], [90.0, 50.0, 6.1], [30.0, 55.0, 0.2]])


def _points(seed: int = 3) -> dict[str, np.ndarray]:
    """Skewed clustered points in the domain (most mass in one corner)."""
    gen = np.random.default_rng(seed)
    which = gen.choice(4, N, p=[0.7, 0.15, 0.1, 0.05])
    centre = CENTRES[which]
    x = np.clip(np.rint(centre[:, 0] + gen.normal(0, 8, N)), 0, 99)
    y = np.clip(np.rint(centre[:, 1] + gen.normal(0, 6, N)), 0, 59)
    z = np.clip(centre[:, 2] + gen.normal(0, 1.0, N), 0.0, 7.69)
    return {"x": x, "y": y, "z": z}


DATA = _points()
X = np.stack([DATA["x"], DATA["y"], DATA["z"]], axis=1)
X_TABLE = {a: DATA[a] for a in ("x", "y", "z")}
REAL_RELEASE = km_mod.release_iteration
N_ITER = 4


@pytest.fixture(scope="module")
def parquet(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("kmeans") / "points.parquet"
    pq.write_table(pa.table(DATA), path, row_group_size=1_000)
    return path


@pytest.fixture(scope="module")
def layouts(spark: Any) -> dict[str, Any]:
    """The same points in three Spark partition layouts."""
    from pyspark.sql import functions as F

    base = spark.createDataFrame(pa.table(DATA))
    return {
        "skewed+empty": base.repartition(4, F.lit(0)),  # all rows in one partition, 3 empty
        "single": base.coalesce(1),
        # hash partitions of a skewed key: very uneven sizes (and possibly empty ones)
        "uneven": base.repartition(5, (F.col("x") / 25).cast("int")),
    }


def test_layouts_are_what_they_claim(layouts: dict[str, Any]) -> None:
    def sizes(df: Any) -> list[int]:
        return sorted(df.rdd.mapPartitions(lambda rows: [sum(1 for _ in rows)]).collect())

    assert sizes(layouts["skewed+empty"]) == [0, 0, 0, N]
    assert sizes(layouts["single"]) == [N]
    uneven = [s for s in sizes(layouts["uneven"]) if s]
    assert sum(uneven) == N and len(uneven) >= 2 and max(uneven) > 2 * min(uneven)


@pytest.mark.parametrize("policy", [None, "partition:x=20,y=12,z=1", "distance:theta=5"])
def test_iteration_sums_identical_on_every_engine(
    policy: str | None, parquet: Path, layouts: dict[str, Any]
) -> None:
    rule = _cell_rule(secret_graph(policy, GRID), GRID)
    ref_sizes, ref_sums = cluster_stats(X_TABLE, GRID, CENTRES, rule)
    assert ref_sizes.sum() == N and ref_sums.shape == (4, 3)
    codes = GRID.encode(X, clip=False)
    coded = {a: codes[:, j] for j, a in enumerate(GRID.names)}
    runs = {
        "numpy codes": cluster_stats(coded, GRID, CENTRES, rule, encoded=True),
        "numpy small batches": cluster_stats(X_TABLE, GRID, CENTRES, rule, batch_rows=777),
        "numpy parquet": cluster_stats(str(parquet), GRID, CENTRES, rule),
        "duckdb parquet": cluster_stats(parquet, GRID, CENTRES, rule, engine="duckdb"),
        "duckdb memory": cluster_stats(coded, GRID, CENTRES, rule, encoded=True, engine="duckdb"),
    }
    for name, df in layouts.items():
        runs[f"spark {name}"] = cluster_stats(df, GRID, CENTRES, rule, engine="spark")
    for name, (sizes, sums) in runs.items():
        assert np.array_equal(sizes, ref_sizes), name
        assert np.array_equal(sums, ref_sums), name
    # the old in-memory path gives the same sizes and, up to float rounding, the same sums
    pts = GRID.to_points(codes)
    cols = np.ascontiguousarray(pts.T)
    labels = _make_assigner(secret_graph(policy, GRID), GRID, codes)(cols, CENTRES)
    old_sizes, old_sums = _cluster_stats(cols - GRID.centre[:, None], labels, 4)
    assert np.array_equal(old_sizes, ref_sizes)
    np.testing.assert_allclose(old_sums, ref_sums, rtol=0, atol=1e-9)


def test_integer_grid_sums_equal_the_old_numpy_path() -> None:
    """On an integer grid (every sum exact) the engine sums equal the old float bincount bit for
    bit, so the numpy path's results are unchanged."""
    dom = fugu.Domain([fugu.Ordinal("x", 0, 99), fugu.Ordinal("y", 0, 59)])
    grid = KMeansGrid.from_domain(dom)
    pts = X[:, :2]
    codes = grid.encode(pts, clip=False)
    cols = np.ascontiguousarray(grid.to_points(codes).T)
    for policy in (None, "partition:x=10,y=10"):
        graph = secret_graph(policy, grid)
        labels = _make_assigner(graph, grid, codes)(cols, CENTRES[:, :2])
        old = _cluster_stats(cols - grid.centre[:, None], labels, 4)
        new = cluster_stats(
            {"x": pts[:, 0], "y": pts[:, 1]}, grid, CENTRES[:, :2], _cell_rule(graph, grid)
        )
        assert np.array_equal(old[0], new[0]) and np.array_equal(old[1], new[1])


def _fit(data: Any, monkeypatch: pytest.MonkeyPatch, policy: str | None = None, **kw: Any) -> Any:
    """A seeded fit; returns (estimator, exact inputs of every iteration's release)."""
    seen: list[tuple[np.ndarray, np.ndarray]] = []
    real = REAL_RELEASE

    def spy(sizes: Any, sums: Any, plan: Any, rng: Any, repeats: Any = None) -> Any:
        seen.append((np.array(sizes), np.array(sums)))
        return real(sizes, sums, plan, rng, repeats)

    monkeypatch.setattr(km_mod, "release_iteration", spy)
    est = KMeans(4, 2.0, policy=policy, domain=DOM, n_iter=N_ITER, rng=fugu.RandomSource(seed=11))
    est.fit(data, **kw)
    return est, seen


@pytest.mark.parametrize("policy", [None, "partition:x=20,y=12,z=1"])
def test_full_fit_identical_centres(
    policy: str | None, parquet: Path, layouts: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    ref, ref_seen = _fit(X, monkeypatch, policy)
    assert ref.engine_ == "numpy" and len(ref_seen) == N_ITER
    fits = {
        "numpy parquet (default engine)": _fit(str(parquet), monkeypatch, policy),
        "duckdb parquet": _fit(parquet, monkeypatch, policy, engine="duckdb"),
        "duckdb memory": _fit(X, monkeypatch, policy, engine="duckdb"),
        "spark skewed+empty": _fit(layouts["skewed+empty"], monkeypatch, policy),
    }
    if policy is None:
        fits["spark single"] = _fit(layouts["single"], monkeypatch, policy)
        fits["spark uneven"] = _fit(layouts["uneven"], monkeypatch, policy, engine="spark")
    for name, (est, seen) in fits.items():
        assert np.array_equal(est.cluster_centers_, ref.cluster_centers_), name
        assert np.array_equal(est.noisy_sizes_, ref.noisy_sizes_), name
        assert len(seen) == len(ref_seen), name
        for (s1, q1), (s0, q0) in zip(seen, ref_seen, strict=True):
            assert np.array_equal(s1, s0) and np.array_equal(q1, q0), name
        assert est.guarantee_.epsilon == ref.guarantee_.epsilon
    assert fits["numpy parquet (default engine)"][0].engine_ == "numpy"
    assert fits["duckdb parquet"][0].engine_ == "duckdb"
    assert fits["spark skewed+empty"][0].engine_ == "spark"
    # labels are not collected from files / clusters; the objective is summed per partition
    est = fits["duckdb parquet"][0]
    assert est.labels_ is None
    assert est.inertia_ == pytest.approx(ref.inertia_, rel=1e-12)


def test_constructor_engine_and_privacy_unchanged(parquet: Path) -> None:
    """engine= on the constructor; the guarantee (ε, sensitivities) does not depend on it. An
    SQL query's rows have a private n (the plan used it as public before: fails on the old code)."""
    a = KMeans(3, 1.0, domain=DOM, rng=fugu.RandomSource(seed=5), engine="duckdb").fit(X)
    b = KMeans(3, 1.0, domain=DOM, rng=fugu.RandomSource(seed=5)).fit(str(parquet))
    c = KMeans(3, 1.0, domain=DOM, rng=fugu.RandomSource(seed=5)).fit(
        None, sql=f"SELECT * FROM '{parquet}' WHERE x >= 0"
    )
    assert (a.engine_, b.engine_, c.engine_) == ("duckdb", "numpy", "duckdb")
    assert np.array_equal(a.cluster_centers_, b.cluster_centers_)
    # an SQL query's rows: a changed record can enter or leave them, so n is not public and
    # the plan may not use it (no grid start, "auto" takes 2 updates); same sensitivities
    assert "n is private" in c.guarantee_.parameters["n_iter_rule"]
    assert c.guarantee_.parameters["epsilon_init"] == 0.0
    assert "grid start" in a.guarantee_.parameters["n_iter_rule"]
    assert a.sensitivity_ == c.sensitivity_
    assert a.sensitivity_ == b.sensitivity_ and a.guarantee_.epsilon == b.guarantee_.epsilon
    assert "engine" in a.get_params() and a.get_params()["engine"] == "duckdb"


# -- bad input --------------------------------------------------------------------------------
def test_out_of_domain_on_executor_names_partition(spark: Any) -> None:
    bad = {a: v.copy() for a, v in X_TABLE.items()}
    bad["x"][N - 1] = 150.0
    df = spark.createDataFrame(pa.table(bad)).coalesce(1).repartitionByRange(3, "x")
    est = KMeans(4, 1.0, domain=DOM, rng=fugu.RandomSource(seed=1))
    with pytest.raises(fugu.DomainError, match=r"on Spark partition 2.*150.*clip=True"):
        est.fit(df)
    assert not hasattr(est, "cluster_centers_")
    ok = KMeans(4, 1.0, domain=DOM, rng=fugu.RandomSource(seed=1), clip=True).fit(df)
    ref = KMeans(4, 1.0, domain=DOM, rng=fugu.RandomSource(seed=1), clip=True).fit(bad)
    assert np.array_equal(ok.cluster_centers_, ref.cluster_centers_)
    assert ok.guarantee_.data_options["out_of_domain"] == "clip"


def test_missing_values_wrong_types_missing_column_empty(tmp_path: Path) -> None:
    est = KMeans(4, 1.0, domain=DOM, rng=fugu.RandomSource(seed=1))
    nan = {a: v.copy() for a, v in X_TABLE.items()}
    nan["z"][10] = np.nan
    pq.write_table(pa.table(nan), tmp_path / "nan.parquet")
    for engine in ("numpy", "duckdb"):
        with pytest.raises(fugu.DomainError, match=r"1 points have NaN.*'z'"):
            est.fit(tmp_path / "nan.parquet", engine=engine)
    text = {**X_TABLE, "y": np.array(["a"] * N, dtype=object)}
    pq.write_table(pa.table(text), tmp_path / "text.parquet")
    with pytest.raises(fugu.InvalidTypeError, match="'y' must hold numbers"):
        est.fit(tmp_path / "text.parquet")
    pq.write_table(pa.table({"x": DATA["x"], "y": DATA["y"]}), tmp_path / "two.parquet")
    with pytest.raises(fugu.DomainError, match="'z'"):
        est.fit(tmp_path / "two.parquet", engine="duckdb")
    # zero points are counted, not refused (with ⊥ n is private); here n is public (no policy)
    # and n = 0 < k is refused as any k > n, before the charge
    pq.write_table(pa.table({a: v[:0] for a, v in X_TABLE.items()}), tmp_path / "empty.parquet")
    with pytest.warns(UserWarning, match="no rows"):
        with pytest.raises(fugu.InvalidParameterError, match="n_clusters=4 exceeds .* n=0"):
            est.fit(tmp_path / "empty.parquet")
    pq.write_table(pa.table({a: v[:3] for a, v in X_TABLE.items()}), tmp_path / "three.parquet")
    with pytest.raises(fugu.InvalidParameterError, match="n_clusters=4 exceeds .* n=3"):
        est.fit(tmp_path / "three.parquet")
    with pytest.raises(fugu.InvalidParameterError, match="engine must be one of"):
        est.fit(X, engine="pandas")
    pq.write_table(pa.table(X_TABLE), tmp_path / "ok.parquet")
    with pytest.raises(fugu.InvalidTypeError, match="fit_predict needs in-memory points"):
        est.fit_predict(str(tmp_path / "ok.parquet"))


def test_sql_rows_under_a_policy_without_bottom_are_refused(parquet: Path) -> None:
    """A Blowfish policy without ⊥ treats the number of points as public; an SQL query's rows
    are not a fixed set (a moved record can leave them), so the fit is refused before anything
    is read or charged (it ran before, using the counted n as public)."""
    from fugu.blowfish import Policy

    pol = Policy.partition(DOM, {"x": 2})
    acc = fugu.Accountant(fugu.blowfish.blowfish_budget(10.0, pol))
    est = KMeans(3, 1.0, domain=DOM, policy=pol, accountant=acc, rng=fugu.RandomSource(seed=5))
    with pytest.raises(fugu.errors.PolicyError, match="SQL query"):
        est.fit(None, sql=f"SELECT * FROM '{parquet}' WHERE x >= 0")
    assert acc.spent == 0
    ok = KMeans(3, 1.0, domain=DOM, policy=pol.with_bottom(), rng=fugu.RandomSource(seed=5))
    ok.fit(None, sql=f"SELECT * FROM '{parquet}' WHERE x >= 0")
    assert ok.cluster_centers_.shape[0] == 3
