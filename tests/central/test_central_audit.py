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


def _batch(h: fugu.Histogram, n: int) -> fugu.Histogram:
    bdom = fugu.Domain([fugu.Ordinal("batch", 0, n - 1), *h.domain.attributes])
    return fugu.Histogram(np.broadcast_to(h.counts, (n, *h.domain.shape)).copy(), bdom)


def _tree_llr(h1: fugu.Histogram, h2: fugu.Histogram) -> Callable[[np.ndarray], np.ndarray]:
    t1 = np.concatenate(build_tree(h1.counts.astype(float), 2))
    t2 = np.concatenate(build_tree(h2.counts.astype(float), 2))
    return lambda y: (np.abs(y - t2) - np.abs(y - t1)).sum(axis=1)


def _hier(neighbours: str, consistency: bool) -> Callable[..., Any]:
    def run(h: fugu.Histogram, rng: fugu.RandomSource, n: int) -> np.ndarray:
        rel = fugu.central.hierarchical(
            _batch(h, n),
            1.0,
            branching=2,
            flat=["batch"],
            consistency=consistency,
            neighbours=neighbours,
            rng=rng,
        )
        return rel.tree if rel.tree is not None else rel.counts

    return run


def test_hierarchical_measurements_pass_audit() -> None:
    res = audit(
        _hier("replace", False),
        D1,
        D2,
        1.0,
        n_runs=N_RUNS,
        vectorised=True,
        statistic=_tree_llr(D1, D2),
    )
    assert res.passed, str(res)


def test_hierarchical_consistent_release_passes_audit() -> None:
    res = audit(_hier("replace", True), D1, D2, 1.0, n_runs=N_RUNS, vectorised=True)
    assert res.passed, str(res)


def test_hierarchical_miscalibrated_fails_audit() -> None:
    """Noise for add/remove neighbours (half the sensitivity) on a replace pair: true ε = 2."""
    res = audit(
        _hier("add-remove", False),
        D1,
        D2,
        1.0,
        n_runs=N_RUNS,
        vectorised=True,
        statistic=_tree_llr(D1, D2),
    )
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
    res = audit(_priv("replace"), D1, D2, 1.0, n_runs=N_RUNS, vectorised=True, statistic=stat)
    assert res.passed, str(res)


def test_privelet_miscalibrated_fails_audit() -> None:
    stat = _coef_llr(D1, D2, wavelets.HaarTransform(4))
    res = audit(_priv("add-remove"), D1, D2, 1.0, n_runs=N_RUNS, vectorised=True, statistic=stat)
    assert not res.passed, str(res)


def test_privelet_without_generalized_sensitivity_fails_audit(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Forgetting the (1 + log2 m) factor (ρ = 1) under-noises by 3x on 4 cells."""
    import importlib

    mod = importlib.import_module("fugu.central.privelet")
    monkeypatch.setattr(mod, "generalized_sensitivity", lambda ts: 1.0)
    stat = _coef_llr(D1, D2, wavelets.HaarTransform(4))
    res = audit(_priv("replace"), D1, D2, 1.0, n_runs=N_RUNS, vectorised=True, statistic=stat)
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

    res = audit(run, h1, h2, 1.0, n_runs=N_RUNS, vectorised=True)
    assert res.passed, str(res)
