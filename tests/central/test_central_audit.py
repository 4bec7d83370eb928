"""Privacy audits of hierarchical, Privelet and Privelet+ on worst-case neighbours.

Each audit runs the real mechanism vectorised: a public "batch" attribute that gets no tree
(hierarchical ``flat``) or no transform (Privelet+ ``plain``) holds n independent copies of the
input, which is exactly n independent releases with the same noise calibration. The statistic is
the exact log-likelihood ratio of the noisy measurements (the tree nodes, or the wavelet
coefficients recovered from the cube), the most powerful test. A correct mechanism fails with
probability at most alpha = 1e-3 per audit; the mis-calibrated variants (noise calibrated to
add/remove neighbours, or Privelet without the generalized sensitivity's log factor) are shown
to fail on the same pair.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

import fugu
from fugu.central import wavelets
from fugu.inference.tree import build_tree
from fugu.testing import audit

DOM = fugu.Domain([fugu.Ordinal("x", 0, 3)])
D1 = fugu.Histogram(np.array([3, 0, 0, 0]), DOM)
D2 = fugu.Histogram(np.array([2, 0, 0, 1]), DOM)  # one record moved from the first to the last cell
N_RUNS = 60_000


def _audit(
    run: Callable[..., Any],
    statistic: Callable[[np.ndarray], np.ndarray] | None = None,
    h1: fugu.Histogram = D1,
    h2: fugu.Histogram = D2,
) -> Any:
    """The auditor at ε = 1 on the pair (h1, h2): N_RUNS vectorised runs of ``run``."""
    return audit(run, h1, h2, 1.0, n_runs=N_RUNS, vectorised=True, statistic=statistic)


def _batch(h: fugu.Histogram, n: int) -> fugu.Histogram:
    bdom = fugu.Domain([fugu.Ordinal("batch", 0, n - 1), *h.domain.attributes])
    return fugu.Histogram(np.broadcast_to(h.counts, (n, *h.domain.shape)).copy(), bdom)


def _tree_llr(
    h1: fugu.Histogram, h2: fugu.Histogram, shares: tuple[float, ...] = (0.0, 0.5, 0.5)
) -> Callable[[np.ndarray], np.ndarray]:
    """Exact log-likelihood ratio of the measured nodes (binary tree on 4 cells): each level's
    term is weighted by its budget share (noise scale δ/(ε p_k)); the root (share 0) is not
    measured and drops out."""
    t1 = np.concatenate(build_tree(h1.counts.astype(float), 2))
    t2 = np.concatenate(build_tree(h2.counts.astype(float), 2))
    w = np.concatenate([np.full(2**k, p) for k, p in enumerate(shares)])
    return lambda y: ((np.abs(y - t2) - np.abs(y - t1)) * w).sum(axis=1)


def _hier(neighbours: str, consistency: bool, budget: object = "uniform") -> Callable[..., Any]:
    def run(h: fugu.Histogram, rng: fugu.RandomSource, n: int) -> np.ndarray:
        rel = fugu.central.hierarchical(
            _batch(h, n),
            1.0,
            branching=2,
            budget=budget,  # type: ignore[arg-type]
            flat=["batch"],
            consistency=consistency,
            neighbours=neighbours,
            rng=rng,
        )
        return rel.tree if rel.tree is not None else rel.counts

    return run


def test_hierarchical_measurements_pass_audit() -> None:
    res = _audit(_hier("replace", False), _tree_llr(D1, D2))
    assert res.passed, str(res)


def test_hierarchical_unequal_shares_pass_audit() -> None:
    """A non-uniform split below the root (leaves get 3/4 of ε): scale δ/(ε p_k) per level."""
    shares = (0.0, 0.25, 0.75)
    res = _audit(_hier("replace", False, budget=[1, 3]), _tree_llr(D1, D2, shares))
    assert res.passed, str(res)


def test_hierarchical_optimised_plan_passes_audit() -> None:
    """The default plan (shares chosen by the expected error) on the same pair."""
    from fugu.central.hierarchical import plan_trees

    trees, info = plan_trees(
        _batch(D1, 10).domain, branching=[None, 2], flat=["batch"], neighbours="replace"
    )
    shares = trees[1].p
    assert shares[0] == 0.0 and len(shares) == 3

    def run(h: fugu.Histogram, rng: fugu.RandomSource, n: int) -> np.ndarray:
        rel = fugu.central.hierarchical(
            _batch(h, n), 1.0, branching=[2, 2], flat=["batch"], consistency=False, rng=rng
        )
        assert rel.guarantee.parameters["level_shares"][1] == list(shares)
        return rel.tree

    res = _audit(run, _tree_llr(D1, D2, shares))
    assert res.passed, str(res)


D3 = fugu.Histogram(np.array([3, 0, 0, 1]), DOM)  # D1 plus one record (add/remove neighbour)


def test_hierarchical_consistent_release_passes_audit() -> None:
    """The least-squares release under add/remove (no public total couples the batch rows)."""
    res = _audit(_hier("add-remove", True), h2=D3)
    assert res.passed, str(res)


def test_hierarchical_miscalibrated_fails_audit() -> None:
    """Noise for add/remove neighbours (half the sensitivity) on a replace pair: true ε = 2."""
    res = _audit(_hier("add-remove", False), _tree_llr(D1, D2))
    assert not res.passed, str(res)


def _coef_llr(
    h1: fugu.Histogram, h2: fugu.Histogram, t: wavelets.AxisTransform
) -> Callable[[np.ndarray], np.ndarray]:
    c1 = t.forward(h1.counts.astype(float))
    c2 = t.forward(h2.counts.astype(float))
    w = t.weights
    return lambda y: ((np.abs(t.forward(y, 1) - c2) - np.abs(t.forward(y, 1) - c1)) * w).sum(axis=1)


def _priv(neighbours: str) -> Callable[..., Any]:
    def run(h: fugu.Histogram, rng: fugu.RandomSource, n: int) -> np.ndarray:
        rel = fugu.central.privelet(
            _batch(h, n), 1.0, plain=["batch"], neighbours=neighbours, rng=rng
        )
        return rel.counts.reshape(n, -1)

    return run


def test_privelet_passes_audit() -> None:
    stat = _coef_llr(D1, D2, wavelets.HaarTransform(4))
    res = _audit(_priv("replace"), stat)
    assert res.passed, str(res)


def test_privelet_miscalibrated_fails_audit() -> None:
    stat = _coef_llr(D1, D2, wavelets.HaarTransform(4))
    res = _audit(_priv("add-remove"), stat)
    assert not res.passed, str(res)


def test_privelet_without_generalized_sensitivity_fails_audit(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Forgetting the (1 + log2 m) factor (ρ = 1) under-noises by 3x on 4 cells."""
    import importlib

    mod = importlib.import_module("fugu.central.privelet")
    monkeypatch.setattr(mod, "generalized_sensitivity", lambda ts: 1.0)
    stat = _coef_llr(D1, D2, wavelets.HaarTransform(4))
    res = _audit(_priv("replace"), stat)
    assert not res.passed, str(res)


def test_privelet_plus_with_nominal_axis_passes_audit() -> None:
    """Privelet+ on a 2-D cube: a nominal (transformed) axis and a plain ordinal axis."""
    h = fugu.Hierarchy.from_dict({"any": {"a": ["a1", "a2"], "b": ["b1", "b2"]}})
    dom = fugu.Domain([fugu.Nominal("job", h), fugu.Ordinal("y", 0, 1)])
    c1 = np.zeros((4, 2), dtype=np.int64)
    c1[0, 0] = 2
    c2 = c1.copy()
    c2[0, 0] -= 1
    c2[3, 1] += 1  # moved across both attributes
    h1, h2 = fugu.Histogram(c1, dom), fugu.Histogram(c2, dom)

    def run(hh: fugu.Histogram, rng: fugu.RandomSource, n: int) -> np.ndarray:
        rel = fugu.central.privelet(_batch(hh, n), 1.0, plain=["batch", "y"], rng=rng)
        return rel.counts.reshape(n, -1)

    res = _audit(run, h1=h1, h2=h2)
    assert res.passed, str(res)


def _base_public(sens_factor: float) -> Callable[..., Any]:
    """Privelet's coefficient noise with the public base coefficient (replace-one, 1-D Haar on
    4 cells: ρ = 3, sensitivity 2(ρ − 1) = 4), vectorised: one row per release, through the
    same function privelet() uses."""
    from fugu.central.privelet import noise_coefficients

    t = wavelets.HaarTransform(4)

    def run(h: fugu.Histogram, rng: fugu.RandomSource, n: int) -> np.ndarray:
        coef = np.ascontiguousarray(
            np.broadcast_to(t.forward(h.counts.astype(float)) * t.weights, (n, 4))
        )
        base = np.arange(n) * 4  # each row's base coefficient: public, kept exact
        noise_coefficients(coef, sens_factor * 2 * (t.P - 1), 1.0, rng, 2 * t.max_changed, base)
        assert np.all(coef[:, 0] == coef[0, 0])
        return coef

    return run


def _weighted_llr(h1: fugu.Histogram, h2: fugu.Histogram) -> Callable[[np.ndarray], np.ndarray]:
    t = wavelets.HaarTransform(4)
    c1 = t.forward(h1.counts.astype(float)) * t.weights
    c2 = t.forward(h2.counts.astype(float)) * t.weights
    return lambda y: (np.abs(y - c2) - np.abs(y - c1)).sum(axis=1)


def test_privelet_public_base_passes_audit() -> None:
    """Replace-one: the base coefficient (n/m) is the same in D1 and D2 and is released
    exactly; the other coefficients with sensitivity 2(ρ − 1) = 4 (not 6) are ε-DP."""
    rel = fugu.central.privelet(D1, 1.0, plain=None, rng=fugu.RandomSource(seed=0))
    assert rel.guarantee.sensitivity == 4.0 and rel.counts.sum() == pytest.approx(3.0)
    res = _audit(_base_public(1.0), _weighted_llr(D1, D2))
    assert res.passed, str(res)


def test_privelet_public_base_underestimated_fails_audit() -> None:
    """Half that sensitivity (ρ − 1) on the same replace pair is caught: true ε = 2."""
    res = _audit(_base_public(0.5), _weighted_llr(D1, D2))
    assert not res.passed, str(res)
