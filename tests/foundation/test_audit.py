"""The privacy auditor itself: it must catch rare leaks, not only mis-calibrated noise.

Each correct mechanism passes with probability at least 1 - alpha (alpha = 1e-3, the auditor's
stated false-alarm rate); each broken one below fails deterministically under its fixed seed (and
with overwhelming probability under any seed: the leak's expected count is 100 in 100,000 runs).
"""

from __future__ import annotations

import numpy as np
import pytest

import fugu
from fugu.testing import audit

# Sixteen cells, so that the noise alone almost never reproduces an input exactly
# (probability 0.24^16 per run): publishing the input is then a rare event of its own.
X1 = np.array([5] + [0] * 15)
X2 = np.array([4, 1] + [0] * 14)  # one record moved: L1 distance 2, sensitivity 2
EPS = 1.0
N_RUNS = 100_000


def _noisy(x: np.ndarray, rng: fugu.RandomSource, n: int) -> np.ndarray:
    # Replace-one neighbours move one record between two cells: L1 sensitivity 2.
    return x + fugu.noise.discrete_laplace(2.0 / EPS, size=(n, x.size), rng=rng)


def _leaky(x: np.ndarray, rng: fugu.RandomSource, n: int) -> np.ndarray:
    """Correct noise, except that with probability 1e-3 it publishes its input exactly."""
    out = _noisy(x, rng, n)
    leak = rng.integers(1000, size=n) == 0
    out[leak] = x
    return out


def _tail_leaky(x: np.ndarray, rng: fugu.RandomSource, n: int) -> np.ndarray:
    """Correct noise, except that with probability 1e-3 it encodes the input far in a tail."""
    out = _noisy(x, rng, n)
    leak = rng.integers(1000, size=n) == 0
    out[leak] = 1000 * x
    return out


def test_correct_vector_mechanism_passes() -> None:
    res = audit(_noisy, X1, X2, EPS, n_runs=N_RUNS, vectorised=True)
    assert res.passed, str(res)


def test_correct_scalar_mechanism_passes_with_atoms() -> None:
    # Integer outputs of one cell: every value is an atom; the atom events must not false-alarm.
    def count(x: int, rng: fugu.RandomSource, n: int) -> np.ndarray:
        return x + fugu.noise.discrete_laplace(1.0 / EPS, size=n, rng=rng)

    res = audit(count, 0, 1, EPS, n_runs=N_RUNS, vectorised=True)
    assert res.passed, str(res)


def test_rare_exact_publication_is_caught() -> None:
    res = audit(_leaky, X1, X2, EPS, n_runs=N_RUNS, vectorised=True)
    assert not res.passed, str(res)
    assert res.worst_event.startswith("output==")


def test_rare_exact_publication_passes_without_atom_events() -> None:
    # What the auditor looked at before rare events were added: the quantile cuts of the
    # projection. The leak sits in the middle of that distribution, so it goes unseen.
    res = audit(_leaky, X1, X2, EPS, n_runs=N_RUNS, vectorised=True, n_atoms=0)
    assert res.passed, str(res)


def test_rare_tail_publication_is_caught() -> None:
    res = audit(_tail_leaky, X1, X2, EPS, n_runs=N_RUNS, vectorised=True, n_atoms=0)
    assert not res.passed, str(res)


def test_non_vectorised_release_outputs_are_audited_for_atoms() -> None:
    def leaky_release(h: fugu.Histogram, rng: fugu.RandomSource) -> np.ndarray:
        if rng.integers(20, size=1)[0] == 0:  # a 5 % leak, so few runs suffice
            return h.counts.astype(float)
        return fugu.central.laplace(h, EPS, rng=rng).counts

    dom = fugu.Domain([fugu.Ordinal("x", 0, 15)])
    res = audit(
        leaky_release,
        fugu.Histogram(X1, dom),
        fugu.Histogram(X2, dom),
        EPS,
        n_runs=4_000,
    )
    assert not res.passed, str(res)


def test_bad_atom_count_is_refused() -> None:
    with pytest.raises(fugu.FuguError, match="n_atoms"):
        audit(_noisy, X1, X2, EPS, n_runs=1_000, vectorised=True, n_atoms=-1)


# The production path: one audit per privacy model with the unseeded source (the operating
# system's CSPRNG), exactly as releases are made. alpha = 1e-3 each, as above. The central and
# local audits are vectorised and strong; the Blowfish and graph ones call the mechanism once per
# run, so they use fewer runs (they would still catch noise missing or off by a factor of about 2;
# the strong audits of those mechanisms run seeded in tests/blowfish and tests/graph).


def _batch(h: fugu.Histogram, n: int) -> fugu.Histogram:
    bdom = fugu.Domain([fugu.Ordinal("batch", 0, n - 1), *h.domain.attributes])
    return fugu.Histogram(np.broadcast_to(h.counts, (n, *h.domain.shape)).copy(), bdom)


def test_production_source_central() -> None:
    dom = fugu.Domain([fugu.Ordinal("x", 0, 3)])
    h1, h2 = (
        fugu.Histogram(np.array([3, 0, 0, 0]), dom),
        fugu.Histogram(np.array([2, 1, 0, 0]), dom),
    )

    def mech(h: fugu.Histogram, rng: fugu.RandomSource, n: int) -> np.ndarray:
        assert rng.private
        return fugu.central.laplace(_batch(h, n), EPS, rng=rng).counts.reshape(n, -1)

    res = audit(mech, h1, h2, EPS, n_runs=50_000, vectorised=True, seed=None)
    assert res.passed, str(res)


def test_production_source_blowfish() -> None:
    dom = fugu.Domain([fugu.Ordinal("x", 0, 3)])
    pol = fugu.blowfish.Policy.line(dom)
    # Secret pair on the line graph: one record moves to an adjacent value.
    h1, h2 = (
        fugu.Histogram(np.array([0, 2, 0, 0]), dom),
        fugu.Histogram(np.array([0, 1, 1, 0]), dom),
    )

    def mech(h: fugu.Histogram, rng: fugu.RandomSource) -> np.ndarray:
        assert rng.private
        return np.asarray(fugu.blowfish.ordered(h, EPS, policy=pol, rng=rng).cumulative)

    res = audit(mech, h1, h2, EPS, n_runs=2_000, seed=None)
    assert res.passed, str(res)


def test_production_source_graph() -> None:
    import networkx as nx

    g1 = nx.complete_graph(5)
    g2 = g1.copy()
    g2.remove_edge(0, 1)  # edge neighbours: one edge withdrawn

    def mech(g: nx.Graph, rng: fugu.RandomSource) -> float:
        assert rng.private
        return fugu.graph.laplace_count(g, "triangle", EPS, unit="edge", rng=rng).value

    res = audit(mech, g1, g2, EPS, n_runs=2_000, seed=None)
    assert res.passed, str(res)


def test_production_source_local() -> None:
    grr = fugu.ldp.GRR(fugu.Domain([fugu.Ordinal("v", 0, 3)]), epsilon=EPS)

    def mech(v: int, rng: fugu.RandomSource, n: int) -> np.ndarray:
        assert rng.private
        return np.asarray(grr.client(rng=rng).perturb({"v": [v] * n}).columns["y"])

    res = audit(mech, 0, 1, EPS, n_runs=50_000, vectorised=True, discrete=True, seed=None)
    assert res.passed, str(res)
