"""Shared helpers for the graph tests (small graphs only: CI time)."""

from __future__ import annotations

import itertools
import math

import networkx as nx
import numpy as np

import fugu
from fugu.graph import Annotations, RecursiveParameters
from fugu.graph.lp import LPModel
from fugu.graph.patterns import annotations_of, enumerate_pattern
from fugu.graph.recursive import LN_DELTA_HAT_BELOW_THETA, LN_DELTA_HAT_MAX, find_j
from fugu.noise import grid_laplace
from fugu.testing import audit


def node_annotations(
    G: nx.Graph, pattern: str = "triangle", k: int | None = None, universe: list | None = None
) -> Annotations:
    """Node-privacy annotations over a FIXED participant universe (default: all nodes of G)."""
    occ = enumerate_pattern(G, pattern, k)
    universe = list(G.nodes) if universe is None else universe
    pos = {v: i for i, v in enumerate(universe)}
    ids = np.array([[pos[occ.nodes[i]] for i in row] for row in occ.occ.tolist()], dtype=np.int64)
    return Annotations.conjunctions(
        ids.reshape(-1, occ.occ.shape[1]), None, len(universe), universe
    )


def random_graph(seed: int, n: int = 7, p: float = 0.5) -> nx.Graph:
    return nx.gnp_random_graph(n, p, seed=seed)


def t1_graph() -> nx.Graph:
    G = nx.Graph([(1, 2), (2, 3), (3, 4), (4, 5), (3, 5), (1, 5), (5, 6), (1, 6)])
    G.add_node(0)
    return G


def t2_graph() -> nx.Graph:
    G = t1_graph()
    G.add_edge(1, 3)
    return G


def all_pairs(n: int) -> list[tuple[int, int]]:
    return list(itertools.combinations(range(n), 2))


# -- the Recursive Mechanism's privacy audit (test_graph_audit.py, test_graph_g_factor.py) -----
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


#: H is evaluated at real budgets on this grid: fugu's default X is the minimum over real i, and
#: H is piecewise linear with breakpoints on it for these graphs (checked against the library's
#: one-program X at 60 values of Δ̂ in test_vectorised_equals_library_path).
GRID = 12


def sequences(G: nx.Graph, unit: str, params: RecursiveParameters) -> tuple[int, np.ndarray]:
    """j and H on the budgets 0, 1/GRID, ..., |P| (integers at every GRID-th entry)."""
    ann = annotations_of(enumerate_pattern(G, G.graph.get("pattern", "triangle")), unit)
    m = LPModel(ann, g_factor=params.g_factor)
    j, _ = find_j(m, params)
    xs = np.arange(ann.n_participants * GRID + 1) / GRID
    h = np.array([m.h_value(x) for x in xs])  # type: ignore[arg-type]
    return j, h


def x_of(h: np.ndarray, dh: np.ndarray, rule: str) -> np.ndarray:
    """X for each Δ̂: min over the budgets (real grid, or integers only for eq. 12)."""
    xs = np.arange(h.size) / GRID
    if rule == "integer":
        h, xs = h[::GRID], xs[::GRID]
    n = xs[-1]
    return np.min(h[None, :] + (n - xs)[None, :] * dh[:, None], axis=1)


def vectorised(params: RecursiveParameters, broken: str | None = None):
    def mech(G: nx.Graph, rng: fugu.RandomSource, size: int) -> np.ndarray:
        j, h = sequences(G, G.graph["unit"], params)
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
        x = x_of(h, dh, params.x_rule)
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


def audit_value_and_scale(mech, d1, d2, epsilon: float, n_runs: int) -> None:
    """Audit a vectorised Recursive Mechanism's two outputs one at a time: the released value
    (column 0) and the released ln Δ̂ (column 1); each must pass."""
    for col in (0, 1):
        res = audit(
            mech,
            d1,
            d2,
            epsilon,
            n_runs=n_runs,
            vectorised=True,
            statistic=lambda o, c=col: o[:, c],
        )
        assert res.passed, str(res)


def audit_pair(kind: str) -> tuple[nx.Graph, nx.Graph]:
    """The audit's hard neighbours: a hub in 16 triangles ± the hub (node), a hub centre of
    C(12, 2) 2-stars ± the hub (node-2-star), a spine edge closing 12 triangles ± it (edge)."""
    if kind == "node":
        d1, d2 = wheel(16, False), wheel(16, True)
    elif kind == "node-2-star":  # a hub that is the centre of C(12, 2) 2-stars, ± the hub
        d1, d2 = nx.cycle_graph(range(1, 13)), nx.wheel_graph(13)
        d1.graph["pattern"] = d2.graph["pattern"] = "2-star"
        kind = "node"
    else:
        d1, d2 = book(12, False), book(12, True)
    d1.graph["unit"] = d2.graph["unit"] = kind
    return d1, d2
