"""End-to-end privacy audits of the Blowfish mechanisms on neighbours along a secret edge (the
worst case for the policy), and audits that must FAIL when the noise is calibrated to a smaller
secret graph than the policy's.

Vectorised by replication: the real mechanism runs once on ``n`` copies of the small data laid
end to end (block-aligned), and each copy's outputs are one independent sample (the copies'
totals are the same in both inputs, so the offsets are public constants). The audit's
false-alarm rate for a correct mechanism is its ``alpha`` (1e-3, Bonferroni over events).
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pytest

import fugu
from fugu.blowfish import (
    CountConstraint,
    Policy,
    laplace,
    ordered,
    ordered_hierarchical,
    sensitivity,
)
from fugu.testing import audit

EPS = 1.0
RUNS = 60_000


def big(k: int, n: int) -> fugu.Domain:
    return fugu.Domain([fugu.Ordinal("x", 0, k * n - 1)])


def cumulative_batch(
    run: Callable[[fugu.Histogram, fugu.RandomSource], fugu.Release], k: int
) -> Callable:
    def mech(data: np.ndarray, rng: fugu.RandomSource, n: int) -> np.ndarray:
        h = fugu.Histogram(np.tile(data, n), big(k, n))
        rel = run(h, rng)
        c = rel.cumulative[1:].reshape(n, k)  # type: ignore[attr-defined]
        return c - np.arange(n)[:, None] * data.sum()

    return mech


def test_ordered_line_graph_passes_on_an_edge() -> None:
    d1 = np.array([1, 0, 1, 0, 0, 2])
    d2 = np.array([1, 0, 0, 1, 0, 2])  # one record moved 2 → 3: a line-graph edge
    mech = cumulative_batch(lambda h, r: ordered(h, EPS, Policy.line(h.domain), rng=r), 6)
    res = audit(mech, d1, d2, EPS, n_runs=RUNS, vectorised=True)
    assert res.passed, res


def test_ordered_distance_theta_passes_and_miscalibration_fails() -> None:
    d1 = np.array([1, 1, 0, 0, 0, 1])
    d2 = np.array([1, 0, 0, 0, 1, 1])  # moved 1 → 4: an edge of G^{d,3}, not of the line graph
    right = cumulative_batch(
        lambda h, r: ordered(h, EPS, Policy.distance_threshold(h.domain, 3), rng=r), 6
    )
    assert audit(right, d1, d2, EPS, n_runs=RUNS, vectorised=True).passed
    wrong = cumulative_batch(lambda h, r: ordered(h, EPS, Policy.line(h.domain), rng=r), 6)
    res = audit(wrong, d1, d2, EPS, n_runs=RUNS, vectorised=True)
    assert not res.passed and res.epsilon_lower_bound > 1.5, res


def test_ordered_hierarchical_passes_across_a_block_boundary() -> None:
    d1 = np.array([0, 0, 1, 0, 0, 0, 0, 1])
    d2 = np.array([0, 0, 0, 0, 0, 0, 1, 1])  # moved 2 → 6 (distance 4): two blocks, two paths

    def run(h: fugu.Histogram, r: fugu.RandomSource) -> fugu.Release:
        pol = Policy.distance_threshold(h.domain, 4)
        return ordered_hierarchical(
            h, EPS, pol, fanout=2, height=2, eps_split=0.5, consistency=False, rng=r
        )

    mech = cumulative_batch(run, 8)
    res = audit(mech, d1, d2, EPS, n_runs=RUNS, vectorised=True)
    assert res.passed, res
    # the sharpest event: the S-node at the crossed boundary (C_4)
    res = audit(mech, d1, d2, EPS, n_runs=RUNS, vectorised=True, statistic=lambda o: o[:, 3])
    assert res.passed, res


def test_ordered_hierarchical_calibrated_to_a_smaller_graph_fails() -> None:
    d1 = np.zeros(16, np.int64)
    d2 = np.zeros(16, np.int64)
    d1[1], d2[13] = 1, 1  # a move of distance 12 (an edge of G^{d,12}); noise set for θ = 4

    def run(h: fugu.Histogram, r: fugu.RandomSource) -> fugu.Release:
        pol = Policy.distance_threshold(h.domain, 4)
        return ordered_hierarchical(
            h, EPS, pol, fanout=2, height=2, eps_split=0.9, consistency=False, rng=r
        )

    # event statistic: the cumulative counts at the block ends (the S-nodes), where the move
    # of distance 12 changes three noisy counts calibrated for one
    def stat(out: np.ndarray) -> np.ndarray:
        return out[:, [3, 7, 11]].sum(axis=1)

    res = audit(
        cumulative_batch(run, 16), d1, d2, EPS, n_runs=RUNS, vectorised=True, statistic=stat
    )
    assert not res.passed, res


def laplace_batch(
    policy_of: Callable[[fugu.Domain], Policy], k: int, query: object = None
) -> Callable:
    def mech(data: np.ndarray, rng: fugu.RandomSource, n: int) -> np.ndarray:
        h = fugu.Histogram(np.tile(data, n), big(k, n))
        rel = laplace(h, EPS, policy_of(h.domain), query=query, rng=rng)
        vals = rel.counts if query is None else rel.values  # type: ignore[attr-defined]
        return np.asarray(vals).reshape(n, -1)

    return mech


def test_blowfish_laplace_partition_passes_within_a_block() -> None:
    d1 = np.array([0, 0, 1, 0, 1, 0])
    d2 = np.array([0, 0, 0, 1, 1, 0])  # moved 2 → 3 inside block {2, 3}
    mech = laplace_batch(lambda dom: Policy.partition(dom, {"x": 2}), 6)
    assert audit(mech, d1, d2, EPS, n_runs=RUNS, vectorised=True).passed


def test_exact_coarse_release_fails_when_the_true_policy_crosses_blocks() -> None:
    """Block counts are exact (sensitivity 0) under the partition policy; audited against the
    line graph's edge 1 → 2 (which crosses blocks) the audit must fail."""
    d1 = np.array([0, 1, 0, 0, 1, 0])
    d2 = np.array([0, 0, 1, 0, 1, 0])
    mech = laplace_batch(lambda dom: Policy.partition(dom, {"x": 2}), 6, query="blocks")
    res = audit(mech, d1, d2, EPS, n_runs=2_000, vectorised=True)
    assert not res.passed, res


# -- count constraints (issue 14 item 1) -------------------------------------------------------
CHUNK = 2_000


def _tiled_constrained_policy(copies: int) -> Policy:
    """The reproducer's policy (line graph on 0..5, counts of {1}, {2}, {3} public) laid end to
    end: copy i owns cells 6i..6i+5 and its three one-value constraints. Each copy's component
    {1, 2, 3} is open on both sides, so the tiled policy has the same sensitivity as one copy."""
    dom = big(6, copies)
    cons = [CountConstraint(cells=[6 * i + v]) for i in range(copies) for v in (1, 2, 3)]
    return Policy.line(dom).with_constraints(*cons)


def constrained_ordered_batch() -> Callable:
    pol = _tiled_constrained_policy(CHUNK)

    def mech(data: np.ndarray, rng: fugu.RandomSource, n: int) -> np.ndarray:
        out = []
        for lo in range(0, n, CHUNK):
            c = min(CHUNK, n - lo)
            p = pol if c == CHUNK else _tiled_constrained_policy(c)
            h = fugu.Histogram(np.tile(data, c), p.domain)
            rel = ordered(h, EPS, p, rng=rng)
            cum = rel.cumulative[1:].reshape(c, 6)
            out.append(cum - np.arange(c)[:, None] * data.sum())
        return np.concatenate(out)

    return mech


# the hard pair: a path v+ → {1} → {2} → {3} → v− of four moves (0→1, 1→2, 2→3, 3→4) keeps
# every public count; it changes the four cumulative counts C_1..C_4 by one each
D1_CONSTRAINED = np.array([1, 1, 1, 1, 0, 1])
D2_CONSTRAINED = np.array([0, 1, 1, 1, 1, 1])


def test_ordered_with_constraints_passes_on_the_longest_path() -> None:
    pol = _tiled_constrained_policy(1)
    assert sensitivity("cumulative", pol) == 4
    res = audit(
        constrained_ordered_batch(),
        D1_CONSTRAINED,
        D2_CONSTRAINED,
        EPS,
        n_runs=20_000,
        vectorised=True,
        statistic=lambda o: o[:, :4].sum(axis=1),
    )
    assert res.passed, res


def test_ordered_with_constraints_fails_with_the_old_sensitivity(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The pre-fix rule (moves = S(h, P)/2 = 1 here) must fail the same audit."""
    import importlib

    sens_mod = importlib.import_module("fugu.blowfish.sensitivity")
    monkeypatch.setattr(sens_mod, "_safe_moves", lambda hist, policy: hist.value / 2)
    assert (
        ordered(
            fugu.Histogram(D1_CONSTRAINED, big(6, 1)), EPS, _tiled_constrained_policy(1)
        ).guarantee.sensitivity
        == 1
    )
    res = audit(
        constrained_ordered_batch(),
        D1_CONSTRAINED,
        D2_CONSTRAINED,
        EPS,
        n_runs=20_000,
        vectorised=True,
        statistic=lambda o: o[:, :4].sum(axis=1),
    )
    assert not res.passed and res.epsilon_lower_bound > 2, res
