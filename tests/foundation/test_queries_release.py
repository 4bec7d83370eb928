"""Queries, prefix sums, the Laplace baseline, releases, the budget and the audit."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import fugu
from fugu import Domain, Histogram, Nominal, Ordinal, RandomSource, RangeQuery
from fugu.queries import PrefixSums, Workload, mae, random_workload, relative_error, rmse
from fugu.testing import audit


@settings(max_examples=50, deadline=None)
@given(st.lists(st.integers(1, 6), min_size=1, max_size=4), st.integers(0, 2**31 - 1))
def test_prefix_sums_equal_brute_force(shape: list[int], seed: int) -> None:
    rng = np.random.default_rng(seed)
    cube = rng.integers(-5, 20, size=shape).astype(float)
    m = 20
    lo = np.stack([rng.integers(0, s, m) for s in shape], axis=1)
    hi = np.stack([rng.integers(lo[:, j] + 1, s + 1) for j, s in enumerate(shape)], axis=1)
    bounds = np.stack([lo, hi], axis=2)
    fast = PrefixSums(cube).answer(bounds)
    slow = [cube[tuple(slice(a, b) for a, b in bq)].sum() for bq in bounds]
    assert np.allclose(fast, slow)


def dom2() -> Domain:
    h = fugu.Hierarchy.from_dict({"any": {"g1": ["a", "b"], "g2": ["c"]}})
    return Domain([Ordinal("age", 0, 9), Nominal("cat", h)])


def test_query_resolution() -> None:
    d = dom2()
    assert RangeQuery({"age": (2, 4), "cat": "g1"}).bounds(d).tolist() == [[2, 5], [0, 2]]
    assert RangeQuery(age=3).bounds(d).tolist() == [[3, 4], [0, 3]]


@pytest.mark.parametrize(
    ("cond", "match"),
    [
        ({"agee": (1, 2)}, "unknown attribute"),
        ({"age": (5, 2)}, "reversed interval"),
        ({"age": (0, 10)}, "leaves the domain"),
        ({"cat": "g3"}, "no hierarchy node called 'g3'"),
        ({"cat": (1, 2)}, "nominal"),
    ],
)
def test_bad_queries(cond: dict, match: str) -> None:
    with pytest.raises(fugu.DomainError, match=match):
        RangeQuery(cond).bounds(dom2())


def test_random_workload_shapes() -> None:
    d = dom2()
    w = random_workload(d, 100, n_predicates=1, seed=3)
    b = w.bounds(d)
    restricted = ((b[:, :, 0] > 0) | (b[:, :, 1] < np.array(d.shape))).sum(axis=1)
    assert b.shape == (100, 2, 2) and restricted.max() <= 1
    w2 = random_workload(d, 50, attributes=["age"], volume=0.5, seed=1)
    assert np.all(w2.bounds(d)[:, 0, 1] - w2.bounds(d)[:, 0, 0] == 5)
    assert str(w2[0]).startswith("age=")


def test_error_metrics() -> None:
    assert mae([1, 3], [2, 2]) == 1.0
    assert rmse([0, 4], [0, 0]) == pytest.approx(np.sqrt(8))
    assert relative_error([10, 110], [0, 100], sanity_bound=5).tolist() == [2.0, 0.1]


def hist1d(values: list[int]) -> Histogram:
    return Histogram(np.asarray(values), Domain([Ordinal("a", 0, len(values) - 1)]))


def test_laplace_is_unbiased_with_exact_expected_error() -> None:
    """Mean of 2,000 releases within 5 standard errors; empirical RMSE within 5% of the analytic."""
    hist = hist1d([50, 0, 7, 3, 9, 0, 0, 1])
    rng = RandomSource(seed=21)
    q = RangeQuery({"a": (1, 5)})
    answers = np.array([fugu.central.laplace(hist, 0.5, rng=rng).answer(q) for _ in range(2000)])
    rel = fugu.central.laplace(hist, 0.5, rng=rng)
    sd = rel.expected_error(q)
    assert sd == pytest.approx(np.sqrt(5 * 2 * (2 / 0.5) ** 2), rel=0.05)
    assert abs(answers.mean() - 19) < 5 * sd / np.sqrt(2000)
    assert np.sqrt(np.mean((answers - 19) ** 2)) == pytest.approx(sd, rel=0.05)


def test_laplace_add_remove_uses_sensitivity_one() -> None:
    rel = fugu.central.laplace(
        hist1d([1, 2]), 1.0, neighbours="add-remove", rng=RandomSource(seed=1)
    )
    assert rel.guarantee.sensitivity == 1.0
    assert "add or remove" in rel.guarantee.neighbours


def test_laplace_privacy_audit_on_worst_case_neighbours() -> None:
    """Replace one record: it moves from cell 0 to cell 1 (L1 change 2). ε = 1 passes; a
    variant calibrated to sensitivity 1 (the add/remove mistake) fails."""
    d1, d2 = hist1d([3, 0, 5]), hist1d([2, 1, 5])

    def mech(h: Histogram, rng: RandomSource) -> np.ndarray:
        return fugu.central.laplace(h, 1.0, rng=rng).counts

    assert audit(mech, d1, d2, 1.0, n_runs=5_000).passed

    def broken(h: Histogram, rng: RandomSource) -> np.ndarray:
        return fugu.central.laplace(h, 2.0, rng=rng).counts  # half the noise needed for ε = 1

    res = audit(broken, d1, d2, 1.0, n_runs=5_000)
    assert not res.passed, str(res)


def test_release_save_load_round_trip(tmp_path) -> None:  # type: ignore[no-untyped-def]
    d = dom2()
    hist = Histogram(np.arange(30).reshape(10, 3), d)
    rel = fugu.central.laplace(hist, 1.0, rng=RandomSource(seed=2))
    path = rel.save(tmp_path / "rel")
    assert path.suffix == ".npz"
    back = fugu.Release.load(path)
    assert back.domain == d
    assert back.guarantee == rel.guarantee
    assert np.array_equal(back.counts, rel.counts)
    q = RangeQuery({"cat": "g1", "age": (0, 4)})
    assert back.answer(q) == rel.answer(q) and back.expected_error(q) == rel.expected_error(q)
    # The file holds the noisy cube and metadata only.
    with np.load(path) as z:
        assert sorted(z.files) == ["__header__", "a_cell_variance", "a_estimate"]


def test_load_rejects_other_files(tmp_path) -> None:  # type: ignore[no-untyped-def]
    (tmp_path / "x.npz").write_bytes(b"not a zip")
    with pytest.raises(fugu.InvalidParameterError, match="not a fugu release"):
        fugu.Release.load(tmp_path / "x.npz")


def test_post_processing_is_recorded() -> None:
    rel = fugu.central.laplace(hist1d([0, 0, 0, 0]), 0.1, rng=RandomSource(seed=3))
    nn = rel.nonnegative()
    assert nn.counts.min() >= 0 and "clamp negative cells to 0" in nn.guarantee.post_processing
    assert nn.expected_error(RangeQuery(a=1)) is None
    assert "NOT PRIVATE" in rel.guarantee.describe()


def test_answer_many_matches_answer() -> None:
    d = dom2()
    rel = fugu.central.laplace(Histogram(np.ones((10, 3), int), d), 1.0, rng=RandomSource(seed=4))
    w = random_workload(d, 40, seed=2)
    assert np.allclose(rel.answer_many(w), [rel.answer(q) for q in w])
    assert np.allclose(Workload(list(w)).answer(rel.counts, d), rel.answer_many(w))


def test_accountant_ledger(tmp_path) -> None:  # type: ignore[no-untyped-def]
    acct = fugu.Accountant(1.0)
    hist = hist1d([1, 2, 3])
    fugu.central.laplace(hist, 0.4, accountant=acct, rng=RandomSource(seed=1))
    fugu.central.laplace(hist, 0.6, accountant=acct, rng=RandomSource(seed=1))
    assert acct.remaining == 0
    with pytest.raises(fugu.BudgetExceededError, match="only 0 of 1 remains"):
        fugu.central.laplace(hist, 0.1, accountant=acct)
    acct.save(tmp_path / "l.json")
    back = fugu.Accountant.load(tmp_path / "l.json")
    assert [e.epsilon for e in back.ledger] == [0.4, 0.6]
    par = fugu.Accountant(1.0)
    par.parallel(
        [0.5, 0.7], ["north", "south"], disjoint_by="region partition", neighbours="add-remove"
    )
    assert par.spent == 0.7
    with pytest.raises(fugu.InvalidParameterError, match="tracks 'central-dp'"):
        par.spend(0.1, "x", model="ldp")


@pytest.mark.parametrize("bad", [0, -0.5, float("nan"), float("inf"), "one"])
def test_laplace_bad_epsilon(bad: object) -> None:
    with pytest.raises(fugu.FuguError, match="epsilon"):
        fugu.central.laplace(hist1d([1, 2]), bad)  # type: ignore[arg-type]


def test_laplace_rejects_non_histogram() -> None:
    with pytest.raises(fugu.InvalidTypeError, match="fugu.Histogram"):
        fugu.central.laplace(np.array([1, 2]), 1.0)  # type: ignore[arg-type]


# tables (issue 17 item 5) and one-line reprs (item 6) ----------------------------------------
def _rel3(mech: str = "laplace") -> fugu.Release:
    dom = Domain(
        [
            Ordinal("age", 0, 4),
            Nominal("sex", ["F", "M"]),
            Ordinal("inc", 0, 100, edges=[0, 10, 50, 100]),
        ]
    )
    hist = Histogram(np.arange(30).reshape(dom.shape), dom)
    return getattr(fugu.central, mech)(hist, 1.0, rng=RandomSource(seed=4))


@pytest.mark.parametrize("mech", ["laplace", "hierarchical", "privelet"])
def test_to_arrow_one_row_per_cell_with_labels_and_errors(mech: str) -> None:
    rel = _rel3(mech)
    t = rel.to_arrow()
    assert t.column_names == ["age", "sex", "inc", "count", "expected_error"]
    assert t.num_rows == 30
    np.testing.assert_array_equal(t.column("count").to_numpy(), rel.counts.reshape(-1))
    assert t.column("age").to_pylist()[:7] == [0, 0, 0, 0, 0, 0, 1]
    assert t.column("sex").to_pylist()[:6] == ["F", "F", "F", "M", "M", "M"]
    assert t.column("inc").to_pylist()[:3] == ["[0, 10)", "[10, 50)", "[50, 100]"]
    # per-cell error equals expected_error of the one-cell query
    row = 3 * 6 + 3 + 1
    q = RangeQuery(age=(3, 3), sex="M", inc=("[10, 50)", "[10, 50)"))
    assert t.column("expected_error")[row].as_py() == pytest.approx(rel.expected_error(q))
    assert t.column("count")[row].as_py() == pytest.approx(rel.answer(q))


def test_to_pandas_and_polars_match_arrow() -> None:
    rel = _rel3()
    df = rel.to_pandas()
    assert list(df.columns) == ["age", "sex", "inc", "count", "expected_error"]
    assert str(df["sex"].dtype) == "category"
    np.testing.assert_array_equal(df["count"].to_numpy(), rel.counts.reshape(-1))
    pl_df = rel.to_polars()
    assert pl_df.columns == list(df.columns)
    np.testing.assert_array_equal(pl_df["count"].to_numpy(), rel.counts.reshape(-1))


def test_unknown_error_is_null_and_names_do_not_clash() -> None:
    dom = Domain([Ordinal("count", 0, 2)])
    rel = fugu.central.laplace(Histogram([1, 2, 3], dom), 1.0, rng=RandomSource(seed=0))
    t = rel.nonnegative().to_arrow()
    assert t.column_names == ["count", "count_", "expected_error"]
    assert t.column("expected_error").null_count == 3


def test_answer_many_frames_keep_the_array_default() -> None:
    rel = _rel3()
    qs = [RangeQuery(age=(0, 2)), RangeQuery(sex="F"), RangeQuery(inc=("[0, 10)", "[10, 50)"))]
    arr = rel.answer_many(qs)
    assert isinstance(arr, np.ndarray) and arr.shape == (3,)
    for output in ("pandas", "polars", "arrow"):
        t = rel.answer_many(qs, output=output)  # type: ignore[call-overload]
        cols = list(t.columns) if output != "arrow" else t.column_names
        assert cols == ["query", "answer", "expected_error"]
    df = rel.answer_many(qs, output="pandas")
    np.testing.assert_allclose(df["answer"].to_numpy(), arr)
    np.testing.assert_allclose(df["expected_error"].to_numpy(), [rel.expected_error(q) for q in qs])
    assert df["query"].tolist() == ["age=0..2", "sex=F", "inc=[0, 10)..[10, 50)"]
    with pytest.raises(fugu.InvalidParameterError, match="output must be one of"):
        rel.answer_many(qs, output="frame")  # type: ignore[call-overload]


def test_missing_pandas_or_polars_is_a_clear_error(monkeypatch: pytest.MonkeyPatch) -> None:
    import sys

    rel = _rel3()
    monkeypatch.setitem(sys.modules, "pandas", None)
    monkeypatch.setitem(sys.modules, "polars", None)
    with pytest.raises(fugu.errors.MissingDependencyError, match="pip install pandas"):
        rel.to_pandas()
    with pytest.raises(fugu.errors.MissingDependencyError, match="pip install polars"):
        rel.answer_many([RangeQuery(age=1)], output="polars")
    assert rel.to_arrow().num_rows == 30  # arrow needs nothing extra


def test_reprs_are_one_short_line() -> None:
    rel = _rel3()
    big = Workload([RangeQuery(age=(i % 5, i % 5)) for i in range(1000)])
    objs = [rel, rel.guarantee, big, PrefixSums(np.ones((50, 50))), fugu.Accountant(1.0)]
    objs += [rel.domain, Histogram(np.zeros((5, 2, 3), int), rel.domain)]  # type: ignore[arg-type]
    for o in objs:
        r = repr(o)
        assert "\n" not in r and len(r) <= 120, r


@pytest.mark.parametrize("method", ["Uni", "HDG", "CALM"])
def test_to_arrow_of_ldp_releases_without_dense_cells(method: str) -> None:
    """Releases that store no cell array answer each one-cell query (same as answer())."""
    dom = Domain([Ordinal("a", 0, 7), Ordinal("b", 0, 3)])
    recs = {"a": np.arange(4000) % 8, "b": (np.arange(4000) // 3) % 4}
    rel = getattr(fugu.ldp, method)(dom, epsilon=1.0).simulate(recs, rng=RandomSource(seed=0))
    t = rel.to_arrow()
    assert t.num_rows == 32 and t.column_names[:2] == ["a", "b"]
    for a, b in [(0, 0), (3, 2), (7, 3)]:
        got = t.column("count")[a * 4 + b].as_py()
        assert got == pytest.approx(rel.answer(RangeQuery(a=(a, a), b=(b, b))))


def test_graph_count_release_as_a_one_row_table() -> None:
    nx = pytest.importorskip("networkx")
    rel = fugu.graph.count(
        nx.karate_club_graph(),
        "triangle",
        1.0,
        unit="edge",
        mechanism="laplace",
        rng=RandomSource(seed=0),
    )
    df = rel.to_pandas()
    assert list(df.columns) == ["count", "expected_error"] and len(df) == 1
    assert df["count"][0] == rel.counts[0]
    assert df["expected_error"][0] == pytest.approx(rel.expected_error())
