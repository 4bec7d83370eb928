"""Hierarchical mechanism: accuracy against Laplace and theory, inference, multi-D, bad input."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

import fugu
from fugu.central import HierarchicalRelease, hierarchical
from fugu.central.hierarchical import axis_trees, hierarchical_variance, plan_trees
from fugu.datasets import adult_histogram
from fugu.errors import InvalidParameterError
from fugu.queries import random_workload


def _rng(seed: int = 0) -> fugu.RandomSource:
    return fugu.RandomSource(seed=seed)


def _var(rel: fugu.Release, bounds: np.ndarray) -> np.ndarray:
    assert isinstance(rel, HierarchicalRelease)
    v = rel.expected_variance_many(bounds)
    assert v is not None
    return v


DOM_1D = fugu.Domain([fugu.Ordinal("x", 0, 4095)])
COUNTS_1D = np.random.default_rng(7).poisson(40, size=4096)


def test_guarantee_and_branching() -> None:
    hist = fugu.Histogram(COUNTS_1D, DOM_1D)
    rule = hierarchical(hist, 1.0, budget="uniform", rng=_rng())
    g = rule.guarantee
    assert g.parameters["branching"] == [16] and g.parameters["height"] == [3]
    assert g.parameters["level_shares"][0][0] == 0.0  # the root is never measured
    assert g.sensitivity == 2 * 3  # replace-one: 2 per level, 3 measured levels (H_b)
    assert g.parameters["plan"]["choice"] == "rule"
    assert "least-squares consistency (Hay et al.)" in g.post_processing
    ar = hierarchical(hist, 1.0, budget="uniform", neighbours="add-remove", rng=_rng())
    assert ar.guarantee.sensitivity == 3
    opt = hierarchical(hist, 1.0, rng=_rng())
    plan = opt.guarantee.parameters["plan"]
    assert plan["choice"] == "optimised" and plan["objective"] < plan["rule_objective"]
    assert opt.guarantee.parameters["level_shares"][0][0] == 0.0
    rel5 = hierarchical(
        fugu.Histogram(COUNTS_1D[:1000], fugu.Domain([fugu.Ordinal("x", 0, 999)])),
        1.0,
        branching=5,
        rng=_rng(),
    )
    assert rel5.counts.shape == (1000,) and rel5.guarantee.parameters["padding"] == {"x": 3125}


def test_root_is_not_noised_and_total_is_public_under_replace() -> None:
    """The root level carries no noise and no data; under replace-one the estimate sums to n."""
    hist = fugu.Histogram(COUNTS_1D, DOM_1D)
    n = int(COUNTS_1D.sum())
    nc = hierarchical(hist, 1.0, consistency=False, rng=_rng(3))
    assert nc.tree is not None and nc.tree[0] == 0.0  # the root slot holds no count at all
    rel = hierarchical(hist, 1.0, rng=_rng(3))
    assert rel.counts.sum() == pytest.approx(n, abs=1e-6)
    assert rel.expected_error({"x": (0, 4095)}) == 0.0
    assert "public total n" in " ".join(rel.guarantee.post_processing)
    ar = hierarchical(hist, 1.0, neighbours="add-remove", rng=_rng(3))
    assert abs(ar.counts.sum() - n) > 1e-3  # n is not public under add/remove
    assert ar.expected_error({"x": (0, 4095)}) > 1.0


def test_beats_laplace_by_the_predicted_factor_on_long_ranges() -> None:
    """4,096 cells, 10,000 random ranges, ε = 1, 40 releases of each mechanism.

    Theory (spec §C.1): without inference a range costs at most 2(b−1)(ℓ−1) nodes of variance
    2(2ℓ/ε)², i.e. MSE ≤ 16(b−1)(ℓ−1)ℓ²/ε²; least squares can only lower it. Laplace costs
    |R|·2(2/ε)². For ranges of at least half the domain the predicted factor is the ratio of the
    two; the measured factor must reach it (the measured MSEs have relative SD < 5% here, and
    the bound is loose by more than 2x, so a false failure is essentially impossible). The
    measured consistent MSE must also be within 15% of the exact analytic value.
    """
    hist = fugu.Histogram(COUNTS_1D, DOM_1D)
    w = random_workload(DOM_1D, 10_000, seed=1)
    b = w.bounds(DOM_1D)
    truth = w.answer(COUNTS_1D, DOM_1D)
    length = b[:, 0, 1] - b[:, 0, 0]
    long = length >= 2048
    se_h, se_l = np.zeros(len(w)), np.zeros(len(w))
    reps = 40
    rel = None
    for s in range(reps):
        rel = hierarchical(hist, 1.0, rng=_rng(s))
        se_h += (rel.answer_many(w) - truth) ** 2 / reps
        se_l += (
            fugu.central.laplace(hist, 1.0, rng=_rng(1000 + s)).answer_many(w) - truth
        ) ** 2 / reps
    assert rel is not None
    bf, levels = 16, 4  # the bound of the old plan (root measured); the new one is better
    bound_h = 16 * (bf - 1) * (levels - 1) * levels**2
    predicted = np.mean(8.0 * length[long]) / bound_h
    measured = se_l[long].mean() / se_h[long].mean()
    assert measured >= predicted, (measured, predicted)
    analytic = _var(rel, b)
    assert se_h.mean() == pytest.approx(analytic.mean(), rel=0.15)
    assert se_h[long].mean() == pytest.approx(analytic[long].mean(), rel=0.15)


def test_consistency_never_worse_and_optimised_budget_helps() -> None:
    w = random_workload(DOM_1D, 3000, seed=3)
    b = w.bounds(DOM_1D)
    v_c = hierarchical_variance(DOM_1D, b, 1.0, budget="uniform", neighbours="add-remove")
    v_nc = hierarchical_variance(
        DOM_1D, b, 1.0, budget="uniform", consistency=False, neighbours="add-remove"
    )
    v_geo = hierarchical_variance(DOM_1D, b, 1.0, budget="geometric", neighbours="add-remove")
    v_opt = hierarchical_variance(DOM_1D, b, 1.0, neighbours="add-remove")
    assert np.all(v_c <= v_nc * (1 + 1e-9))  # BLUE: never worse than the canonical sum
    # without a measured root, the geometric split no longer helps (it did with the root)
    assert v_opt.mean() < min(v_geo.mean(), v_c.mean())


def test_non_consistent_release_answers_from_canonical_nodes() -> None:
    hist = fugu.Histogram(COUNTS_1D, DOM_1D)
    w = random_workload(DOM_1D, 2000, seed=5)
    truth = w.answer(COUNTS_1D, DOM_1D)
    se = np.zeros(len(w))
    rel = None
    for s in range(60):
        rel = hierarchical(hist, 1.0, consistency=False, rng=_rng(s))
        se += (rel.answer_many(w) - truth) ** 2 / 60
    assert rel is not None and rel.tree is not None
    assert se.mean() == pytest.approx(_var(rel, w.bounds(DOM_1D)).mean(), rel=0.15)
    # the canonical answer differs from summing the noisy leaves
    assert not np.allclose(
        rel.answer_many(w), fugu.queries.PrefixSums(rel.counts).answer(w.bounds(DOM_1D))
    )


def _dense_product_ls(
    noisy_layout: np.ndarray, trees: list, node_var: np.ndarray, total: float | None
) -> tuple[np.ndarray, np.ndarray]:
    """Dense weighted least squares on the product of the per-axis tree matrices, unmeasured
    rows dropped, optionally with the exact constraint Σ cells = total (KKT); tiny cubes only.
    Returns the estimate and its covariance."""
    mats = [_tree_matrix(t) for t in trees]
    A = mats[0]
    for m in mats[1:]:
        A = np.kron(A, m)
    keep = np.isfinite(node_var)
    A, y, v = A[keep], noisy_layout.reshape(-1)[keep], node_var[keep]
    P = A.T @ (A / v[:, None])
    rhs = A.T @ (y / v)
    n = A.shape[1]
    if total is None:
        cov = np.linalg.inv(P)
        x = cov @ rhs
        return x.reshape([t.leaves for t in trees]), cov
    K = np.zeros((n + 1, n + 1))
    K[:n, :n] = P
    K[:n, n] = K[n, :n] = 1.0
    sol = np.linalg.solve(K, np.r_[rhs, total])
    Kinv = np.linalg.inv(K)
    cov = Kinv[:n, :n]  # covariance of the constrained estimator: K⁻¹ block (P⁻¹ − rank one)
    return sol[:n].reshape([t.leaves for t in trees]), cov


def _node_var(rel: HierarchicalRelease) -> np.ndarray:
    v = np.full([1] * len(rel.trees), rel.const)
    for ax, (t, f) in enumerate(zip(rel.trees, rel.factors, strict=True)):
        per = np.concatenate([np.full(t.b**k, f[k]) for k in range(t.h + 1)])
        shape = [1] * len(rel.trees)
        shape[ax] = per.size
        v = v * per.reshape(shape)
    return v.reshape(-1)


@pytest.mark.parametrize("neighbours", ["replace", "add-remove"])
def test_multidimensional_inference_equals_dense_least_squares(neighbours: str) -> None:
    """Axis-by-axis two-pass + even spreading of the total = dense (constrained) least squares,
    and the closed-form variance = the dense covariance, for every 2-D box."""
    dom = fugu.Domain([fugu.Ordinal("a", 0, 3), fugu.Ordinal("b", 0, 8)])
    counts = np.random.default_rng(0).integers(0, 20, size=dom.shape)
    hist = fugu.Histogram(counts, dom)
    kw = {"branching": [2, 3], "neighbours": neighbours}
    nc = hierarchical(hist, 1.0, consistency=False, rng=_rng(9), **kw)  # type: ignore[arg-type]
    c = hierarchical(hist, 1.0, consistency=True, rng=_rng(9), **kw)  # type: ignore[arg-type]
    assert isinstance(c, HierarchicalRelease) and nc.tree is not None
    total = float(counts.sum()) if neighbours == "replace" else None
    dense, cov = _dense_product_ls(nc.tree, c.trees, _node_var(c), total)
    np.testing.assert_allclose(c.counts, dense[:4, :9], atol=1e-8)
    boxes = np.array(
        [
            [[a0, a1], [b0, b1]]
            for a0, a1 in itertools.combinations(range(5), 2)
            for b0, b1 in [(0, 9), (2, 5), (4, 5)]
        ]
    )
    pred = _var(c, boxes)
    for box, p in zip(boxes, pred, strict=True):
        grid = np.zeros((c.trees[0].leaves, c.trees[1].leaves))
        grid[box[0, 0] : box[0, 1], box[1, 0] : box[1, 1]] = 1
        wv = grid.reshape(-1)
        assert p == pytest.approx(wv @ cov @ wv, rel=1e-9, abs=1e-9)


def _tree_matrix(t) -> np.ndarray:  # type: ignore[no-untyped-def]
    rows = []
    for k in range(t.h + 1):
        w = t.b ** (t.h - k)
        for j in range(t.b**k):
            r = np.zeros(t.leaves)
            r[j * w : (j + 1) * w] = 1
            rows.append(r)
    return np.array(rows)


def test_nominal_attribute_and_flat_attribute() -> None:
    hist = adult_histogram(["age", "sex", "occupation"])
    rel = hierarchical(hist, 1.0, flat=["sex"], rng=_rng())
    assert rel.guarantee.parameters["flat"] == ["sex"]
    occ = hist.domain.attribute("occupation")
    assert isinstance(occ, fugu.Nominal)
    q = fugu.RangeQuery({"age": (30, 39), "occupation": occ.hierarchy.nodes[1].name})
    err = rel.expected_error(q)
    assert err is not None and err > 0
    assert abs(rel.answer(q) - q.answer(hist.counts, hist.domain)) < 6 * err


def test_nonnegative_is_separate_and_recorded(tmp_path) -> None:  # type: ignore[no-untyped-def]
    dom = fugu.Domain([fugu.Ordinal("x", 0, 63)])
    hist = fugu.Histogram(np.zeros(64, dtype=int), dom)
    rel = hierarchical(hist, 0.5, nonnegative=True, rng=_rng())
    assert rel.counts.min() >= 0
    assert "clamp negative cells to 0 (biased)" in rel.guarantee.post_processing
    assert rel.expected_error({"x": (0, 10)}) is None
    plain = hierarchical(hist, 0.5, rng=_rng())
    assert plain.counts.min() < 0  # unbiased by default
    back = fugu.Release.load(rel.save(tmp_path / "h.npz"))
    np.testing.assert_array_equal(back.counts, rel.counts)


def test_save_load_both_modes(tmp_path) -> None:  # type: ignore[no-untyped-def]
    hist = adult_histogram(["age", "sex"])
    w = random_workload(hist.domain, 50, seed=0)
    for consistency, budget in ((True, "geometric"), (False, "uniform")):
        rel = hierarchical(hist, 1.0, consistency=consistency, budget=budget, rng=_rng())
        back = fugu.Release.load(rel.save(tmp_path / f"h{consistency}.npz"))
        assert type(back).__name__ == "HierarchicalRelease"
        np.testing.assert_allclose(back.answer_many(w), rel.answer_many(w))
        np.testing.assert_allclose(
            _var(back, w.bounds(hist.domain)),
            _var(rel, w.bounds(hist.domain)),
        )


def test_bad_input() -> None:
    hist = fugu.Histogram(COUNTS_1D, DOM_1D)
    for b in (1, 0, -3, 2.5, True):
        with pytest.raises(InvalidParameterError, match="branching"):
            hierarchical(hist, 1.0, branching=b)  # type: ignore[arg-type]
    with pytest.raises(InvalidParameterError, match="budget"):
        hierarchical(hist, 1.0, budget="best")
    with pytest.raises(InvalidParameterError, match="budget shares"):
        hierarchical(hist, 1.0, branching=16, budget=[1, 2])
    with pytest.raises(InvalidParameterError, match="root is never measured"):
        hierarchical(hist, 1.0, branching=16, budget=[1, 1, 1, 5])
    with pytest.raises(InvalidParameterError, match="workload"):
        hierarchical(hist, 1.0, workload=np.zeros((3, 2, 2), dtype=np.int64))
    with pytest.raises(InvalidParameterError, match="consistency"):
        hierarchical(hist, 1.0, nonnegative=True, consistency=False)
    with pytest.raises(InvalidParameterError, match="unknown attribute"):
        hierarchical(hist, 1.0, flat=["y"])
    for eps in (0, -0.5, float("inf"), float("nan")):
        with pytest.raises(InvalidParameterError, match="epsilon"):
            hierarchical(hist, eps)
    with pytest.raises(fugu.errors.FuguError):
        hierarchical(COUNTS_1D, 1.0)  # type: ignore[arg-type]
    acct = fugu.Accountant(1.0)
    with pytest.raises(InvalidParameterError, match="branching"):
        hierarchical(hist, 1.0, branching=1, accountant=acct)
    assert acct.spent == 0  # validation happens before the budget is charged


def test_axis_trees_custom_shares() -> None:
    trees = axis_trees(DOM_1D, branching=16, budget=[1, 1, 2])
    assert trees[0].p == pytest.approx((0.0, 0.25, 0.25, 0.5))


def test_geometric_budget_measured_matches_analytic() -> None:
    """40 releases, 3,000 ranges: measured MSE within 15% of the analytic value (the relative
    SD of the measured mean is about 4%, so a false failure needs a 3.6-SD deviation)."""
    hist = fugu.Histogram(COUNTS_1D, DOM_1D)
    w = random_workload(DOM_1D, 3000, seed=1)
    truth = w.answer(COUNTS_1D, DOM_1D)
    mse = []
    rel = None
    for s in range(40):
        rel = hierarchical(hist, 1.0, budget="geometric", rng=_rng(s))
        mse.append(np.mean((rel.answer_many(w) - truth) ** 2))
    assert rel is not None and rel.guarantee.sensitivity is None
    shares = rel.guarantee.parameters["level_shares"][0]
    assert shares[0] == 0.0
    assert shares[-1] / shares[1] == pytest.approx(2.0 ** (2 / 3), rel=1e-9)  # 3 levels
    assert np.mean(mse) == pytest.approx(_var(rel, w.bounds(DOM_1D)).mean(), rel=0.15)


DOMAIN_GRID = [2, 3, 16, 50, 74, 100, 256, 1000, 1024, 4096, 16384, 65536]


@pytest.mark.parametrize("neighbours", ["replace", "add-remove"])
def test_choice_never_worse_than_the_rule_or_laplace(neighbours: str) -> None:
    """On a grid of domain sizes the chosen plan's exact expected MSE (random ranges) is never
    above the rule's (Qardaji's b, uniform shares) nor Laplace's. Deterministic (no noise)."""
    for n in DOMAIN_GRID:
        dom = fugu.Domain([fugu.Ordinal("x", 0, n - 1)])
        w = random_workload(dom, 400, seed=n)
        b = w.bounds(dom)
        opt = hierarchical_variance(dom, b, 1.0, neighbours=neighbours).mean()
        rule = hierarchical_variance(dom, b, 1.0, budget="uniform", neighbours=neighbours).mean()
        delta = 2 if neighbours == "replace" else 1
        lap = (b[:, 0, 1] - b[:, 0, 0]).mean() * float(
            fugu.noise.discrete_laplace_variance(delta / 1.0)
        )
        # the plan minimises the *expected* error over random ranges; on a 400-query sample it
        # may lose to the rule by sampling noise only: allow 2%
        assert opt <= rule * 1.02, (n, opt, rule)
        assert opt <= lap * 1.0001, (n, opt, lap)
        _, info = plan_trees(dom, neighbours=neighbours)
        assert info["objective"] <= info["rule_objective"] * (1 + 1e-12), (n, info)


def test_workload_argument_plans_for_the_given_queries() -> None:
    """Short ranges only: the plan for that workload beats the default plan on it."""
    rng = np.random.default_rng(0)
    lo = rng.integers(0, 4090, size=500)
    b = np.stack([lo, lo + rng.integers(1, 6, size=500)], axis=-1)[:, None, :]
    tailored = hierarchical_variance(DOM_1D, b, 1.0, workload=b).mean()
    default = hierarchical_variance(DOM_1D, b, 1.0).mean()
    assert tailored < 0.9 * default


@pytest.mark.parametrize("neighbours", ["replace", "add-remove"])
def test_predicted_error_equals_measured(neighbours: str) -> None:
    """The optimised plan's exact expected MSE equals the measured one: 300 releases, 3,000
    random ranges over 4,096 cells. One release's MSE over these overlapping ranges has a
    relative SD of about 26% (replace) / 52% (add/remove) (measured on other seeds), so the mean
    of 300 has 1.5% / 3%: the 12% tolerance is a 4-SD band or wider (false-failure rate below
    1e-4)."""
    hist = fugu.Histogram(COUNTS_1D, DOM_1D)
    w = random_workload(DOM_1D, 3000, seed=11)
    truth = w.answer(COUNTS_1D, DOM_1D)
    mse = []
    rel = None
    for s in range(300):
        rel = hierarchical(hist, 1.0, neighbours=neighbours, rng=_rng(500 + s))
        mse.append(np.mean((rel.answer_many(w) - truth) ** 2))
    assert rel is not None
    assert rel.guarantee.parameters["variance_model"] == "exact"
    assert np.mean(mse) == pytest.approx(_var(rel, w.bounds(DOM_1D)).mean(), rel=0.12)


def test_adult_ages_never_worse_than_laplace() -> None:
    """Adult's 74 ages: the old plan (a flat tree with a noised root) swung with the seed and
    could lose to Laplace. Now the plan is chosen by the exact error; it must beat Laplace in
    expectation (exact: by > 15% under both neighbour models) and in 400 measured releases of
    each (one release's MSE over 2,000 overlapping ranges has a relative SD of about 50% for
    the tree and 75% for Laplace, so the means have 2.5% and 3.9%: the smallest predicted gap,
    20% under add/remove, is 4.5 SD of the difference, and the 15% band around the prediction is
    5 SD; false-failure rate below 1e-4)."""
    hist = adult_histogram(["age"])
    dom = hist.domain
    w = random_workload(dom, 2000, seed=0)
    truth = w.answer(hist.counts, dom)
    b = w.bounds(dom)
    for neighbours in ("replace", "add-remove"):
        delta = 2 if neighbours == "replace" else 1
        lap = (b[:, 0, 1] - b[:, 0, 0]).mean() * float(
            fugu.noise.discrete_laplace_variance(delta / 1.0)
        )
        pred = hierarchical_variance(dom, b, 1.0, neighbours=neighbours).mean()
        assert pred < 0.85 * lap, (neighbours, pred, lap)
        se_h, se_l = [], []
        for s in range(400):
            rel = hierarchical(hist, 1.0, neighbours=neighbours, rng=_rng(s))
            se_h.append(np.mean((rel.answer_many(w) - truth) ** 2))
            lp = fugu.central.laplace(hist, 1.0, neighbours=neighbours, rng=_rng(1000 + s))
            se_l.append(np.mean((lp.answer_many(w) - truth) ** 2))
        assert np.mean(se_h) < np.mean(se_l), (neighbours, np.mean(se_h), np.mean(se_l))
        assert np.mean(se_h) == pytest.approx(pred, rel=0.15)


# -- plans for consistency=False are compared with the rule on canonical answers -------------
@pytest.mark.parametrize("neighbours", ["add-remove", "replace"])
def test_canonical_answers_plan_never_worse_than_the_rule(neighbours: str) -> None:
    """The optimised plan minimises the least-squares error; with consistency=False answers come
    from canonical nodes, where it was 1.24x the rule's RMSE (64 cells, add/remove: mean
    variance 63.1 against 40.9 at eps = 1) and 1.05x at 1000 cells. Now the better of the two is
    used (scored on other seeded ranges than the ones the choice used)."""
    from fugu.central.hierarchical import hierarchical_variance

    for c in (16, 64, 256, 1000, 4096):
        dom = fugu.Domain([fugu.Ordinal("a", 0, c - 1)])
        b = fugu.queries.random_workload(dom, 2000, seed=1).bounds(dom)
        kw = {"consistency": False, "neighbours": neighbours}
        default = hierarchical_variance(dom, b, 1.0, **kw).mean()
        rule = hierarchical_variance(dom, b, 1.0, budget="uniform", **kw).mean()
        assert default <= rule * 1.005, (c, default, rule)
    dom = fugu.Domain([fugu.Ordinal("a", 0, 63)])
    hist = fugu.Histogram(np.full(64, 10), dom)
    rel = fugu.central.hierarchical(
        hist, 1.0, consistency=False, neighbours="add-remove", rng=fugu.RandomSource(seed=1)
    )
    plan = rel.guarantee.parameters["plan"]
    assert plan["choice"] == "rule" and "canonical" in plan["reason"], plan
