"""Tests of fugu.inference.ldp_post: Norm-Sub family, consistency, weighted update, Algorithm 2.

All tests are deterministic (fixed seeds or hypothesis with derandomised examples); none is
statistical, so the false-failure rate is 0.
"""

from __future__ import annotations

from itertools import combinations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp
from scipy.optimize import minimize

from fugu.errors import InvalidParameterError
from fugu.inference.ldp_post import (
    GridEstimate,
    consistency,
    consistent_grids,
    estimate_from_pairs,
    max_marginal_gap,
    norm_sub,
    normalise,
    response_matrix,
    weighted_update,
)


def _iterative_norm_sub(x: np.ndarray, n: float) -> np.ndarray:
    """The procedure as written in Wang et al. / the authors' code (reference)."""
    x = x.astype(float).copy()
    for _ in range(100_000):
        x[x < 0] = 0
        pos = x > 0
        if not pos.any():
            return np.full_like(x, n / len(x))
        x[pos] -= (x.sum() - n) / pos.sum()
        if (x >= -1e-12).all() and abs(x.sum() - n) < 1e-9:
            break
    return np.maximum(x, 0)


floats = st.floats(-50, 50, allow_nan=False)


@settings(max_examples=300, deadline=None, derandomize=True)
@given(hnp.arrays(np.float64, st.integers(1, 12), elements=floats), st.floats(0, 100))
def test_norm_sub_equals_iterative_procedure(x: np.ndarray, n: float) -> None:
    out = norm_sub(x, n)
    assert np.all(out >= 0)
    assert out.sum() == pytest.approx(n, abs=1e-7)
    np.testing.assert_allclose(out, _iterative_norm_sub(x, n), atol=1e-6)


def test_norm_sub_stack_and_axis() -> None:
    rng = np.random.default_rng(3)
    x = rng.normal(0, 10, (5, 7))
    per_row = np.stack([norm_sub(r, 20.0) for r in x])
    np.testing.assert_allclose(norm_sub(x, 20.0), per_row)
    np.testing.assert_allclose(norm_sub(x.T, 20.0, axis=0), per_row.T)


def test_norm_sub_known_answers() -> None:
    np.testing.assert_allclose(norm_sub([6.0, -2.0, 3.0, 4.0], 10.0), [5, 0, 2, 3])
    np.testing.assert_allclose(norm_sub([-1.0, -1.0], 4.0), [2, 2])
    np.testing.assert_allclose(norm_sub([3.0, -1.0], 5.0), [5, 0])  # short of mass: raise positives
    np.testing.assert_allclose(norm_sub([3.0, 1.0], 0.0), [0, 0])


def test_norm_sub_rejects_bad_input() -> None:
    with pytest.raises(InvalidParameterError):
        norm_sub([1.0, np.nan])
    with pytest.raises(InvalidParameterError):
        norm_sub([1.0, 2.0], total=-1)
    with pytest.raises(InvalidParameterError):
        normalise([1.0], method="nope")


@pytest.mark.parametrize("method", ["norm-sub", "norm-mul", "norm"])
def test_normalisations_hit_the_total(method: str) -> None:
    x = np.array([10.0, -3.0, 4.0, 0.5, -1.0])
    out = normalise(x, 30.0, method=method)
    assert out.sum() == pytest.approx(30.0)
    if method != "norm":
        assert np.all(out >= 0)


def test_norm_cut_and_base_pos() -> None:
    np.testing.assert_allclose(
        normalise([4.0, 3.0, 2.0, -1.0], 7.5, method="norm-cut"), [4, 3, 0, 0]
    )
    np.testing.assert_allclose(normalise([4.0, -3.0], method="base-pos"), [4, 0])


def _random_grids(
    rng: np.random.Generator, d: int, c: int, g1: int, g2: int, n: float, noise: float
):
    e1, e2 = np.linspace(0, c, g1 + 1).astype(int), np.linspace(0, c, g2 + 1).astype(int)
    grids = [GridEstimate((a,), (e1,), rng.normal(n / g1, noise, g1), 1.0) for a in range(d)]
    for a, b in combinations(range(d), 2):
        grids.append(GridEstimate((a, b), (e2, e2), rng.normal(n / g2**2, noise, (g2, g2)), 1.0))
    return grids


def test_consistency_makes_shared_marginals_equal_and_keeps_totals() -> None:
    rng = np.random.default_rng(0)
    grids = _random_grids(rng, d=4, c=16, g1=8, g2=4, n=1000.0, noise=30.0)
    # give every grid the same total, as after Norm-Sub
    grids = [g.copy(g.counts * 1000.0 / g.counts.sum()) for g in grids]
    assert max_marginal_gap(grids) > 10
    out = consistency(grids)
    assert max_marginal_gap(out) < 1e-9
    for g in out:
        assert g.counts.sum() == pytest.approx(1000.0)
    # inputs untouched
    assert max_marginal_gap(grids) > 10


def test_consistency_inverse_variance_weights() -> None:
    e = np.array([0, 1, 2])
    g1 = GridEstimate(("a",), (e,), np.array([4.0, 6.0]), variance=1.0)
    g2 = GridEstimate(("a", "b"), (e, e), np.array([[1.0, 1.0], [4.0, 4.0]]), variance=1.0)
    out = consistency([g1, g2])
    # Var of g1's margin cell = 1, of g2's = 2: weights 1 and 1/2
    np.testing.assert_allclose(out[0].counts, [(4 + 0.5 * 2) / 1.5, (6 + 0.5 * 8) / 1.5])
    np.testing.assert_allclose(out[1].marginal(["a"]), out[0].counts)
    # the correction is spread equally over the contributing cells
    np.testing.assert_allclose(out[1].counts[0], [1 + (out[0].counts[0] - 2) / 2] * 2)


def test_consistency_on_uneven_partitions() -> None:
    """Domain 10 (not a power of two); partitions nest through the common edges."""
    e_fine, e_coarse = np.array([0, 2, 5, 7, 10]), np.array([0, 5, 10])
    g1 = GridEstimate(("x",), (e_fine,), np.array([1.0, 2.0, 3.0, 4.0]))
    g2 = GridEstimate(("y", "x"), (np.array([0, 3]), e_coarse), np.array([[7.0, 3.0]]))
    out = consistency([g1, g2])
    m1 = out[0].counts
    np.testing.assert_allclose([m1[:2].sum(), m1[2:].sum()], out[1].counts[0])


def test_consistency_rejects_mismatched_domains() -> None:
    g1 = GridEstimate(("x",), (np.array([0, 4]),), np.array([1.0]))
    g2 = GridEstimate(("x",), (np.array([0, 5]),), np.array([1.0]))
    with pytest.raises(InvalidParameterError, match="domain size"):
        consistency([g1, g2])


def test_consistent_grids_nonnegative_sum_n_and_agree() -> None:
    rng = np.random.default_rng(1)
    n = 5000.0
    grids = _random_grids(rng, d=5, c=32, g1=16, g2=4, n=n, noise=200.0)
    out, rounds = consistent_grids(grids, n, tol=1e-3, max_iter=500)
    assert rounds < 500
    for g in out:
        assert np.all(g.counts >= 0)
        assert g.counts.sum() == pytest.approx(n)
    # Consistency holds up to the final Norm-Sub; with tol=1e-3 the gap is tiny
    assert max_marginal_gap(out) < 0.05
    fixed, _ = consistent_grids(grids, n, tol=0.0, max_iter=100)
    for a, b in zip(out, fixed, strict=True):
        np.testing.assert_allclose(a.counts, b.counts, atol=0.05)


def test_grid_estimate_validation() -> None:
    with pytest.raises(InvalidParameterError):
        GridEstimate(("a", "a"), (np.array([0, 1]), np.array([0, 1])), np.zeros((1, 1)))
    with pytest.raises(InvalidParameterError):
        GridEstimate(("a",), (np.array([0, 2, 1]),), np.zeros(2))
    with pytest.raises(InvalidParameterError):
        GridEstimate(("a",), (np.array([0, 2]),), np.zeros(3))


def _max_entropy(a_eq: np.ndarray, b_eq: np.ndarray, size: int) -> np.ndarray:
    """Direct solve of max -Σ p log p s.t. A p = b through the convex dual.

    The maximiser is p = exp(Aᵀθ) with θ minimising Σ exp(Aᵀθ) − b·θ (redundant rows are fine:
    θ is not unique, p is).
    """

    def dual(theta: np.ndarray) -> tuple[float, np.ndarray]:
        p = np.exp(a_eq.T @ theta)
        return float(p.sum() - b_eq @ theta), a_eq @ p - b_eq

    res = minimize(dual, np.zeros(len(b_eq)), jac=True, method="BFGS", options={"gtol": 1e-12})
    p = np.exp(a_eq.T @ res.x)
    np.testing.assert_allclose(a_eq @ p, b_eq, atol=1e-7)
    assert p.size == size
    return p


def test_weighted_update_reaches_max_entropy() -> None:
    """Response-matrix style fit on a 4x4 domain; compare to a direct max-entropy solve."""
    rng = np.random.default_rng(2)
    truth = rng.dirichlet(np.ones(16)).reshape(4, 4)
    rows = np.repeat(np.arange(4), 4).reshape(4, 4)
    box = (np.arange(4)[:, None] // 2) * 2 + np.arange(4)[None, :] // 2
    cons = [(rows, truth.sum(1)), (box, np.bincount(box.ravel(), truth.ravel()))]
    fit, sweeps = weighted_update(np.full((4, 4), 1 / 16), cons, 1.0, tol=1e-13, max_iter=10_000)
    a_eq = np.vstack(
        [np.ones(16)] + [(lab.ravel() == k).astype(float) for lab, t in cons for k in range(len(t))]
    )
    b_eq = np.concatenate([[1.0]] + [np.asarray(t) for _, t in cons])
    direct = _max_entropy(a_eq, b_eq, 16).reshape(4, 4)
    np.testing.assert_allclose(fit, direct, atol=1e-5)
    for lab, t in cons:
        np.testing.assert_allclose(np.bincount(lab.ravel(), fit.ravel()), t, atol=1e-10)


def test_response_matrix_reproduces_grid_totals() -> None:
    rng = np.random.default_rng(4)
    cx, cy = 12, 10
    truth = rng.poisson(5.0, (cx, cy)).astype(float)
    n = truth.sum()
    ex1, ey1 = np.arange(0, 13, 3), np.array([0, 2, 5, 7, 10])
    ex2, ey2 = np.array([0, 6, 12]), np.array([0, 5, 10])
    gx = GridEstimate(("x",), (ex1,), np.add.reduceat(truth.sum(1), ex1[:-1]))
    gy = GridEstimate(("y",), (ey1,), np.add.reduceat(truth.sum(0), ey1[:-1]))
    box = np.add.reduceat(np.add.reduceat(truth, ex2[:-1], 0), ey2[:-1], 1)
    gxy = GridEstimate(("x", "y"), (ex2, ey2), box)
    m, _ = response_matrix(gxy, n, gx, gy, tol=1e-9, max_iter=2000)
    np.testing.assert_allclose(np.add.reduceat(np.add.reduceat(m, ex2[:-1], 0), ey2[:-1], 1), box)
    np.testing.assert_allclose(np.add.reduceat(m.sum(1), ex1[:-1]), gx.counts, rtol=1e-6)
    np.testing.assert_allclose(np.add.reduceat(m.sum(0), ey1[:-1]), gy.counts, rtol=1e-6)


def _pair_tables(p: np.ndarray, lam: int) -> dict[tuple[int, int], np.ndarray]:
    out = {}
    for j, k in combinations(range(lam), 2):
        other = tuple(i for i in range(lam) if i not in (j, k))
        out[(j, k)] = p.sum(axis=other)[None]
    return out


@pytest.mark.parametrize("lam", [3, 4])
def test_estimate_from_pairs_full_is_max_entropy(lam: int) -> None:
    rng = np.random.default_rng(lam)
    p = rng.dirichlet(np.ones(2**lam)).reshape((2,) * lam)
    est, _ = estimate_from_pairs(_pair_tables(p, lam), lam, 1.0, tol=1e-13, max_iter=20_000)
    size = 2**lam
    idx = np.array(np.unravel_index(np.arange(size), (2,) * lam)).T
    rows, rhs = [np.ones(size)], [1.0]
    for j, k in combinations(range(lam), 2):
        for a in (0, 1):
            for b in (0, 1):
                rows.append(((idx[:, j] == a) & (idx[:, k] == b)).astype(float))
                rhs.append(p.sum(axis=tuple(i for i in range(lam) if i not in (j, k)))[a, b])
    direct = _max_entropy(np.array(rows), np.array(rhs), size)
    assert est[0] == pytest.approx(direct[0], abs=1e-5)


def test_estimate_from_pairs_in_in_is_max_entropy() -> None:
    lam = 3
    rng = np.random.default_rng(9)
    p = rng.dirichlet(np.ones(8)).reshape(2, 2, 2)
    est, _ = estimate_from_pairs(
        _pair_tables(p, lam), lam, 1.0, variant="in-in", tol=1e-13, max_iter=50_000
    )
    idx = np.array(np.unravel_index(np.arange(8), (2,) * 3)).T
    rows, rhs = [np.ones(8)], [1.0]
    for j, k in combinations(range(3), 2):
        rows.append(((idx[:, j] == 0) & (idx[:, k] == 0)).astype(float))
        rhs.append(p.sum(axis=tuple(i for i in range(3) if i not in (j, k)))[0, 0])
    direct = _max_entropy(np.array(rows), np.array(rhs), 8)
    assert est[0] == pytest.approx(direct[0], abs=1e-5)


def test_estimate_from_pairs_exact_on_independent_data_and_vectorised() -> None:
    rng = np.random.default_rng(5)
    margins = rng.uniform(0.1, 0.9, (6, 4))  # 6 queries, λ = 4, independent attributes
    p = np.ones((6,) + (2,) * 4)
    for i in range(4):
        shp = [6] + [1] * 4
        shp[1 + i] = 2
        p = p * np.stack([margins[:, i], 1 - margins[:, i]], axis=1).reshape(shp)
    tabs = {}
    for j, k in combinations(range(4), 2):
        other = tuple(1 + i for i in range(4) if i not in (j, k))
        tabs[(j, k)] = p.sum(axis=other) * 100
    est, _ = estimate_from_pairs(tabs, 4, 100.0, tol=1e-10, max_iter=1000)
    np.testing.assert_allclose(est, 100 * margins.prod(axis=1), rtol=1e-6)


def test_estimate_from_pairs_bad_input() -> None:
    t = np.full((1, 2, 2), 0.25)
    with pytest.raises(InvalidParameterError):
        estimate_from_pairs({(0, 1): t}, 3, 1.0)
    with pytest.raises(InvalidParameterError):
        estimate_from_pairs({(0, 1): t}, 2, 1.0, variant="x")


def test_consistency_on_attribute_pairs_of_3d_marginals() -> None:
    """CALM-style 3-way marginals made consistent on a shared pair (and a single attribute)."""
    rng = np.random.default_rng(8)
    e4, e2 = np.arange(5), np.array([0, 2, 4])
    g1 = GridEstimate(("a", "b", "c"), (e4, e2, e4), rng.normal(10, 3, (4, 2, 4)), 1.0)
    g2 = GridEstimate(("b", "a", "d"), (e4, e4, e2), rng.normal(10, 3, (4, 4, 2)), 2.0)
    g3 = GridEstimate(("a", "e"), (e2, e4), rng.normal(40, 3, (2, 4)), 1.0)
    out = consistency([g1, g2, g3], on=[("a", "b"), "a"])
    m1 = out[0].marginal(["a", "b"])  # b has 2 cells in g1, 4 in g2: common partition of 2
    m2 = out[1].marginal(["a", "b"])
    np.testing.assert_allclose(m1, np.add.reduceat(m2, [0, 2], axis=1), atol=1e-9)
    ma = [o.marginal(["a"]) for o in out]
    np.testing.assert_allclose(np.add.reduceat(ma[0], [0, 2]), ma[2], atol=1e-9)
    np.testing.assert_allclose(ma[0], ma[1], atol=1e-9)
