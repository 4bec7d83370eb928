"""Smooth-sensitivity triangle count (Nissim, Raskhodnikova, Smith 2007) under ε-edge DP.

Statistical tests use fixed seeds. The privacy audits have a false-failure rate of at most
1e-3 each (Clopper-Pearson, Bonferroni over events; see fugu.testing.audit).
"""

from __future__ import annotations

import itertools
import math
import time

import networkx as nx
import numpy as np
import pytest
from graph_helpers import book

import fugu
from fugu.errors import InvalidParameterError, InvalidTypeError
from fugu.graph.smooth import (
    _count_and_scale,
    _min_scale,
    triangle_sensitivity_at_distance,
    triangle_smooth_sensitivity,
)
from fugu.noise import grid_power_tail
from fugu.testing import audit


def triangles(G: nx.Graph) -> int:
    return sum(nx.triangles(G).values()) // 3


def local_sensitivity(G: nx.Graph) -> int:
    """max over pairs of common neighbours: flipping edge ij changes the count by a_ij."""
    return max(len(set(G[i]) & set(G[j])) for i, j in itertools.combinations(G, 2))


def brute_force_a(G: nx.Graph) -> np.ndarray:
    """NRS's formula evaluated over all pairs, O(n^2) per s."""
    n = G.number_of_nodes()
    out = []
    for s in range(2 * (n - 2) + 1):
        best = 0
        for i, j in itertools.combinations(G, 2):
            ni, nj = set(G[i]) - {j}, set(G[j]) - {i}
            a = len(ni & nj)
            b = len(ni ^ nj)
            best = max(best, min(a + (s + min(s, b)) // 2, n - 2))
        out.append(best)
    return np.array(out)


def random_graphs(count: int, seed: int):
    rng = np.random.default_rng(seed)
    for _ in range(count):
        n = int(rng.integers(3, 25))
        p = float(rng.choice([0.05, 0.15, 0.3, 0.6, 0.9]))
        yield nx.gnp_random_graph(n, p, seed=int(rng.integers(2**31)))


# -- the smooth sensitivity -----------------------------------------------------------------
def test_formula_is_the_exact_local_sensitivity_at_distance_on_all_5_node_graphs() -> None:
    """A(s) = max LS over all graphs within s edge flips, for every graph on 5 nodes."""
    n = 5
    pairs = list(itertools.combinations(range(n), 2))
    masks = np.arange(1 << len(pairs), dtype=np.uint16)

    def graph(mask: int) -> nx.Graph:
        G = nx.empty_graph(n)
        G.add_edges_from(p for k, p in enumerate(pairs) if mask >> k & 1)
        return G

    graphs = [graph(int(m)) for m in masks]
    ls = np.array([local_sensitivity(G) for G in graphs])
    xor = masks[:, None] ^ masks[None, :]
    dist = np.unpackbits(xor.view(np.uint8), axis=-1).reshape(masks.size, masks.size, -1).sum(-1)
    for m, G in enumerate(graphs):
        values = triangle_sensitivity_at_distance(G)
        exact = [int(ls[dist[m] <= s].max()) for s in range(values.size)]
        assert values.tolist() == exact, sorted(G.edges())


def test_vectorised_equals_brute_force_on_random_graphs() -> None:
    for G in random_graphs(150, seed=1):
        assert triangle_sensitivity_at_distance(G).tolist() == brute_force_a(G).tolist()


def test_row_blocks_give_the_same_profile(monkeypatch: pytest.MonkeyPatch) -> None:
    """A·A is formed in blocks of rows; tiny blocks (many per graph) change nothing."""
    import fugu.graph.smooth as smooth

    monkeypatch.setattr(smooth, "_BLOCK_WEDGES", 7)
    for G in itertools.chain(random_graphs(30, seed=3), [nx.star_graph(9), nx.complete_graph(7)]):
        values, count = smooth._profile(G)
        assert values.tolist() == brute_force_a(G).tolist()
        assert count == triangles(G)


def test_non_integer_node_labels_and_isolated_nodes() -> None:
    G = nx.relabel_nodes(nx.gnp_random_graph(12, 0.3, seed=4), lambda v: f"v{v}")
    G.add_nodes_from(["x", "y"])
    assert triangle_sensitivity_at_distance(G).tolist() == brute_force_a(G).tolist()


def test_smooth_sensitivity_bounds_and_smoothness() -> None:
    """S* >= LS, and S*(G) <= e^β S*(G') for every neighbour G' (the β-smooth property)."""
    betas = np.array([0.02, 0.125, 0.5, 2.0])

    def smooth(values: np.ndarray) -> np.ndarray:
        s = np.arange(values.size)
        return np.max(np.exp(-np.outer(betas, s)) * values, axis=1)

    for G in random_graphs(12, seed=2):
        s_star = smooth(triangle_sensitivity_at_distance(G))
        assert np.all(s_star >= local_sensitivity(G))
        assert np.all(s_star <= G.number_of_nodes() - 2)
        for i, j in itertools.combinations(G, 2):
            H = G.copy()
            if H.has_edge(i, j):
                H.remove_edge(i, j)
            else:
                H.add_edge(i, j)
            s_h = smooth(triangle_sensitivity_at_distance(H))
            assert np.all(s_star <= np.exp(betas) * s_h * (1 + 1e-12))
            assert abs(triangles(G) - triangles(H)) <= s_star.min()


def test_known_values() -> None:
    # K_n: every pair has n - 2 common neighbours, so A(s) = n - 2 for all s.
    assert triangle_smooth_sensitivity(nx.complete_graph(9), 0.3) == 7.0
    # Empty graph on n nodes: A(s) = min(floor(s/2), n - 2); with β = 0.1 the maximum of
    # e^(-2βm)·m is at m = 5: S* = 5/e.
    assert triangle_sensitivity_at_distance(nx.empty_graph(6)).tolist() == [
        0,
        0,
        1,
        1,
        2,
        2,
        3,
        3,
        4,
    ]
    assert triangle_smooth_sensitivity(nx.empty_graph(20), 0.1) == pytest.approx(5 / math.e)
    # Star K_{1,k}: two leaves share the centre (a = 1, b = 0); centre-leaf pairs have a = 0,
    # b = k - 1; so A(s) = max(1 + floor(s/2), s for s <= k - 1, ...).
    star = nx.star_graph(6)
    assert triangle_sensitivity_at_distance(star).tolist() == brute_force_a(star).tolist()
    assert triangle_sensitivity_at_distance(star)[:3].tolist() == [1, 1, 2]


def test_runs_fast_on_5000_nodes() -> None:
    """Not a benchmark: a guard against an accidental O(n^2) (measured: about 0.15 s)."""
    G = nx.gnm_random_graph(5000, 15000, seed=1)
    t = time.perf_counter()
    s_star = triangle_smooth_sensitivity(G, 0.125)
    elapsed = time.perf_counter() - t
    print(f"5000 nodes / 15000 edges: S* = {s_star:.3f} in {elapsed:.2f} s")
    assert elapsed < 10.0
    assert s_star >= 1.0


# -- the release ----------------------------------------------------------------------------
def test_release_and_guarantee() -> None:
    G = nx.karate_club_graph()
    acc = fugu.Accountant(fugu.Budget(2.0, model="edge-dp"))
    rel = fugu.graph.smooth_triangle_count(G, 0.5, rng=fugu.RandomSource(seed=3), accountant=acc)
    assert isinstance(rel, fugu.graph.CountRelease)
    g = rel.guarantee
    assert g.model == "edge-dp" and g.epsilon == 0.5 and not g.private
    assert "one edge" in g.neighbours and "public" in g.neighbours
    assert "Nissim" in g.source and "Lemma 2.7" in g.source
    assert g.parameters["sensitivity"].startswith("smooth sensitivity S*_beta (NRS 2007)")
    assert g.parameters["alpha"] == 0.5 / 16 and g.parameters["beta"] == 0.5 / 4
    assert g.parameters["privacy_loss_bound"] <= 0.5 * 0.9
    # Nothing data-dependent is published: no sensitivity number, no noise scale.
    assert g.sensitivity is None and rel.noise_std is None and rel.expected_error() is None
    assert rel.statistic == "triangle count" and rel.answer() == rel.value
    assert acc.spent == pytest.approx(0.5)
    assert (
        fugu.graph.smooth_triangle_count(G, 0.5, rng=fugu.RandomSource(seed=3)).value == rel.value
    )


def test_release_round_trip(tmp_path) -> None:
    rel = fugu.graph.smooth_triangle_count(nx.path_graph(5), 1.0, rng=fugu.RandomSource(seed=1))
    rel.save(tmp_path / "smooth.npz")
    back = fugu.Release.load(tmp_path / "smooth.npz")
    assert back.value == rel.value and back.guarantee == rel.guarantee


def test_library_path_equals_audit_path() -> None:
    """The audit below draws with _count_and_scale + grid_power_tail; so does the library."""
    G = nx.gnp_random_graph(30, 0.2, seed=5)
    for seed in range(3):
        rel = fugu.graph.smooth_triangle_count(G, 1.0, rng=fugu.RandomSource(seed=seed))
        assert rel.value == mechanism(G, fugu.RandomSource(seed=seed), 1)[0]


@pytest.mark.parametrize(
    ("args", "kwargs", "error", "word"),
    [
        ((nx.path_graph(4), 0.0), {}, InvalidParameterError, "epsilon"),
        ((nx.path_graph(4), -1.0), {}, InvalidParameterError, "epsilon"),
        ((nx.path_graph(4), float("inf")), {}, InvalidParameterError, "epsilon"),
        ((nx.DiGraph([(0, 1), (1, 2)]), 1.0), {}, InvalidParameterError, "directed"),
        ((nx.MultiGraph([(0, 1), (0, 1), (1, 2)]), 1.0), {}, InvalidParameterError, "multigraph"),
        (([(0, 1)], 1.0), {}, InvalidTypeError, "G must be a networkx graph"),
        ((nx.path_graph(2), 1.0), {}, InvalidParameterError, "at least 3 nodes"),
        ((nx.path_graph(4), 1.0), {"gamma": 7}, InvalidParameterError, "gamma"),
        ((nx.path_graph(4), 1.0), {"gamma": 4.5}, InvalidParameterError, "gamma"),
        ((nx.path_graph(4), 1.0), {"gamma": 1}, InvalidParameterError, "gamma"),
        ((nx.path_graph(4), 1.0), {"rng": 3}, InvalidTypeError, "rng"),
    ],
)
def test_bad_input(args: tuple, kwargs: dict, error: type, word: str) -> None:
    acc = fugu.Accountant(fugu.Budget(5.0, model="edge-dp"))
    with pytest.raises(error, match=word):
        fugu.graph.smooth_triangle_count(*args, accountant=acc, **kwargs)


def test_directed_graph_message_names_the_fix() -> None:
    with pytest.raises(InvalidParameterError, match=r"G is directed.*to_undirected"):
        fugu.graph.smooth_triangle_count(nx.DiGraph([(0, 1), (1, 2)]), 1.0)


# -- privacy audit --------------------------------------------------------------------------
EPS = 1.0
GAMMA = 4


def mechanism(G: nx.Graph, rng: fugu.RandomSource, size: int, divide: float = 1.0) -> np.ndarray:
    """The library's release, ``size`` times (the smooth sensitivity is computed once)."""
    alpha, beta = EPS / (4 * GAMMA), EPS / GAMMA
    count, scale = _count_and_scale(G, alpha, beta)
    low = _min_scale(alpha, beta) / divide
    draws = [grid_power_tail(count, scale / divide, GAMMA, rng, min_scale=low) for _ in range(size)]
    return np.array([value for value, _ in draws])


def dilation_pair() -> tuple[nx.Graph, nx.Graph]:
    """Found by scanning one-edge neighbours of random small graphs for the largest exact
    privacy loss of this mechanism at ε = 1 (0.81, of the bound 0.89): S* is 4 vs 3.12 (the
    full e^β ratio) and the count changes by 3."""
    edges = [(0, 1), (0, 2), (0, 4), (0, 5), (0, 6), (1, 2), (1, 3), (1, 6), (2, 5), (2, 6),
             (3, 6), (4, 5), (4, 6), (5, 6)]  # fmt: skip
    G = nx.Graph(edges)
    H = G.copy()
    H.remove_edge(0, 5)
    return G, H


def test_hard_pairs_are_hard() -> None:
    G, H = dilation_pair()
    beta = EPS / GAMMA
    assert triangle_smooth_sensitivity(G, beta) == pytest.approx(
        math.exp(beta) * triangle_smooth_sensitivity(H, beta)
    )
    assert (triangles(G), triangles(H)) == (11, 8)
    # Book with 12 pages ± spine: the count changes by 12 = LS = S* = n - 2 (the full shift).
    assert triangle_smooth_sensitivity(book(12, True), beta) == 12.0
    assert triangle_smooth_sensitivity(book(12, False), beta) == 12.0


@pytest.mark.parametrize("pair", ["dilation", "book"])
def test_audit_smooth_triangle_count(pair: str) -> None:
    d1, d2 = dilation_pair() if pair == "dilation" else (book(12, False), book(12, True))
    res = audit(mechanism, d1, d2, EPS, n_runs=30_000, vectorised=True)
    print(res)
    assert res.passed, str(res)


def grid_level(values: np.ndarray) -> np.ndarray:
    """Trailing zero bits of value * 2^45 (capped at 20): which power-of-two grid it lies on."""
    ints = [int(v * 2.0**45) for v in np.asarray(values).ravel()]
    return np.array([min(20, (x & -x).bit_length() - 1) if x else 20 for x in ints])


def test_audit_output_grid_does_not_depend_on_the_graph() -> None:
    """Neighbours with different noise scales (S* = 4 vs 3.12) must release on the same grid:
    a grid chosen from the data-dependent scale would put one graph's outputs on points the
    other never produces. Events: the grid level of the output (discrete)."""
    d1, d2 = dilation_pair()
    res = audit(
        mechanism, d1, d2, EPS, n_runs=5_000, vectorised=True, discrete=True, statistic=grid_level
    )
    print(res)
    assert res.passed, str(res)


@pytest.mark.parametrize(("pair", "divide"), [("dilation", 8.0), ("book", 16.0)])
def test_audit_fails_when_the_scale_is_too_small(pair: str, divide: float) -> None:
    """Mis-calibrated variants (exact losses 1.51 and 2.14 at ε = 1) fail the same audit.

    Dividing the scale by 4 is not detectable here: its exact loss on the worst pair found is
    1.09, too close to ε = 1 for 30k runs.
    """
    d1, d2 = dilation_pair() if pair == "dilation" else (book(12, False), book(12, True))

    def broken(G: nx.Graph, rng: fugu.RandomSource, size: int) -> np.ndarray:
        return mechanism(G, rng, size, divide=divide)

    res = audit(broken, d1, d2, EPS, n_runs=30_000, vectorised=True)
    print(res)
    assert not res.passed, str(res)


# -- accuracy at the paper's Figure 4 setting -----------------------------------------------
def test_accuracy_figure_4_setting() -> None:
    """G(n=200, p=10/199), ε = 0.5, 40 seeded runs (one graph per run).

    The paper's local-sensitivity baseline: median relative error ≈ 0.52. Measured here: 0.70
    over 200 runs (γ = 4: noise scale 16 S*/ε ≈ 180 for ≈ 167 triangles, median |Z| ≈ 0.57).
    The band [0.35, 1.1] is about ±4 standard deviations of a 40-run median around 0.70.
    """
    errors = []
    for seed in range(40):
        G = nx.gnp_random_graph(200, 10 / 199, seed=seed)
        true = triangles(G)
        rel = fugu.graph.smooth_triangle_count(G, 0.5, rng=fugu.RandomSource(seed=500 + seed))
        errors.append(abs(rel.value - true) / true)
    median = float(np.median(errors))
    print(f"Figure 4 (|V|=200, avg deg 10, eps=0.5): median relative error {median:.3f} "
          f"(paper: 0.52)")  # fmt: skip
    assert 0.35 <= median <= 1.1
