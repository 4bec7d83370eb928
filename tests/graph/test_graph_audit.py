"""Empirical privacy audit of the Recursive Mechanism on hard neighbouring graphs.

The LP part of the mechanism is deterministic given the data, so the audit computes it once per
input with the library's own code (``find_j``, ``LPModel.h_value``) and then draws the two noises
vectorised with the same samplers (Z drawn at unit scale and multiplied by Δ̂);
``test_vectorised_equals_library_path`` checks that the
library's X-program path gives the same X as the full H sequence. False-failure rate of each
audit: at most alpha = 1e-3 (Clopper-Pearson, Bonferroni over events), fixed seeds.
"""

from __future__ import annotations

import math

import networkx as nx
import numpy as np
import pytest

import fugu
from fugu.graph import RecursiveParameters
from fugu.graph.lp import LPModel
from fugu.graph.patterns import annotations_of, enumerate_pattern
from fugu.graph.recursive import (
    LN_DELTA_HAT_BELOW_THETA,
    LN_DELTA_HAT_MAX,
    find_j,
    recursive_mechanism,
)
from fugu.noise import grid_laplace
from fugu.testing import audit

EPS = 1.0


def wheel(rim: int, with_hub: bool) -> nx.Graph:
    G = nx.cycle_graph(range(1, rim + 1))
    if with_hub:
        G.add_edges_from((0, v) for v in range(1, rim + 1))
    return G


def book(pages: int, with_spine: bool) -> nx.Graph:
    G = nx.Graph()
    for w in range(2, pages + 2):
        G.add_edges_from([(0, w), (1, w)])
    if with_spine:
        G.add_edge(0, 1)
    return G


def sequences(G: nx.Graph, unit: str, params: RecursiveParameters) -> tuple[int, np.ndarray]:
    ann = annotations_of(enumerate_pattern(G, "triangle"), unit)
    m = LPModel(ann)
    j, _ = find_j(m, params)
    h = np.array([m.h_value(i) for i in range(ann.n_participants + 1)])
    return j, h


def vectorised(params: RecursiveParameters, broken: str | None = None):
    def mech(G: nx.Graph, rng: fugu.RandomSource, size: int) -> np.ndarray:
        j, h = sequences(G, G.graph["unit"], params)
        n = h.size - 1
        ln_delta = math.log(params.theta) + j * params.beta
        noisy, _ = grid_laplace(
            np.full(size, ln_delta),
            sensitivity=params.beta,
            epsilon=params.epsilon1,
            rng=rng,
            max_changed=1,
        )
        ln_dh = np.clip(
            noisy + params.mu, math.log(params.theta) - LN_DELTA_HAT_BELOW_THETA, LN_DELTA_HAT_MAX
        )
        dh = np.exp(ln_dh)
        x = np.min(h[None, :] + (n - np.arange(n + 1))[None, :] * dh[:, None], axis=1)
        if broken == "true count":  # calibrate to Δ̂ but release the true count: not private
            x = np.full(size, h[-1])
        sens = dh * (1 + 2 * params.tolerance)
        # Z = sens · (unit-sensitivity grid Laplace): the library draws Lap(sens/ε2) on the grid
        # sens·2^-10 rounded to a power of two; the audit uses the grid sens·2^-10 itself (the
        # sampler with per-draw scales is slow, and the sampler is tested in the foundation).
        z, _ = grid_laplace(
            np.zeros(size), sensitivity=1.0, epsilon=params.epsilon2, rng=rng, max_changed=1
        )
        z = z * sens
        return np.stack([x + z, ln_dh], axis=1)

    return mech


def _pair(kind: str):
    if kind == "node":
        d1, d2 = wheel(16, False), wheel(16, True)
    else:
        d1, d2 = book(12, False), book(12, True)
    d1.graph["unit"] = d2.graph["unit"] = kind
    return d1, d2


@pytest.mark.parametrize("unit", ["node", "edge"])
def test_audit_recursive_mechanism(unit: str) -> None:
    params = RecursiveParameters.make(EPS, mu=1.0 if unit == "node" else 0.5)
    d1, d2 = _pair(unit)
    mech = vectorised(params)
    for col in (0, 1):
        res = audit(
            mech, d1, d2, EPS, n_runs=60_000, vectorised=True, statistic=lambda o, c=col: o[:, c]
        )
        assert res.passed, str(res)


def test_audit_fails_when_the_true_count_is_released() -> None:
    """Mis-calibrated variant: noise scaled by Δ̂ but X replaced by the true count (16 vs 0)."""
    params = RecursiveParameters.make(EPS)
    d1, d2 = _pair("node")
    res = audit(
        vectorised(params, broken="true count"),
        d1,
        d2,
        EPS,
        n_runs=60_000,
        vectorised=True,
        statistic=lambda o: o[:, 0],
    )
    assert not res.passed, str(res)


@pytest.mark.parametrize("unit", ["node", "edge"])
def test_vectorised_equals_library_path(unit: str) -> None:
    """The library's X-program + two H-programs give min_i H_i + (|P|-i)Δ̂ and the same j."""
    params = RecursiveParameters.make(EPS, mu=1.0 if unit == "node" else 0.5)
    for G in _pair(unit):
        j, h = sequences(G, unit, params)
        ann = annotations_of(enumerate_pattern(G, "triangle"), unit)
        for seed in range(4):
            _, dh, _, tr = recursive_mechanism(ann, params, fugu.RandomSource(seed=seed))
            n = h.size - 1
            assert tr.j == j
            assert tr.x == pytest.approx(
                float(np.min(h + (n - np.arange(n + 1)) * dh)), abs=params.tolerance * dh + 1e-9
            )
