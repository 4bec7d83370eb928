"""Pattern enumeration (each occurrence once), predicates, bad graphs, edge lists, baselines."""

from __future__ import annotations

import math

import networkx as nx
import numpy as np
import pytest

import fugu
from fugu.errors import InvalidParameterError, InvalidTypeError
from fugu.graph import count, count_occurrences, enumerate_pattern, laplace_count, read_edge_list
from fugu.graph.baselines import global_sensitivity
from fugu.graph.patterns import pattern_graph

NAMED = [
    ("edge", None),
    ("triangle", None),
    ("k-star", 2),
    ("k-star", 3),
    ("k-triangle", 2),
    ("k-triangle", 3),
    ("path", 2),
    ("path", 3),
    ("cycle", 4),
    ("cycle", 5),
    ("k-clique", 4),
]


@pytest.mark.parametrize("seed", range(4))
def test_fast_enumerators_match_vf2_matcher(seed: int) -> None:
    G = nx.gnp_random_graph(11, 0.45, seed=seed)
    for name, k in NAMED:
        assert count_occurrences(G, name, k) == count_occurrences(G, pattern_graph(name, k)), (
            name,
            k,
        )


def test_known_counts() -> None:
    K = nx.karate_club_graph()
    assert count_occurrences(K, "triangle") == sum(nx.triangles(K).values()) // 3 == 45
    deg = np.array([d for _, d in K.degree])
    assert count_occurrences(K, "2-star") == int(sum(math.comb(int(d), 2) for d in deg))
    assert count_occurrences(K, "3-star") == int(sum(math.comb(int(d), 3) for d in deg))
    assert count_occurrences(nx.complete_graph(5), "4-clique") == 5
    assert count_occurrences(nx.complete_graph(5), "cycle", 4) == 15  # 5 node sets x 3 cycles
    assert count_occurrences(nx.complete_graph(4), "2-triangle") == 6  # one per edge
    assert count_occurrences(nx.cycle_graph(6), "path", 5) == 6
    assert count_occurrences(nx.path_graph(5), "triangle") == 0


def test_every_occurrence_once_on_all_small_graphs() -> None:
    """Exhaustive over networkx's graph atlas (graphs up to 6 nodes): fast == VF2 by edge set."""
    for G in nx.graph_atlas_g()[1:110]:
        for name, k in [("triangle", None), ("k-star", 2), ("k-triangle", 2), ("cycle", 4)]:
            assert count_occurrences(G, name, k) == count_occurrences(G, pattern_graph(name, k))


def test_annotations_node_and_edge() -> None:
    G = nx.Graph([("a", "b"), ("b", "c"), ("a", "c"), ("c", "d")])
    rel, _ = fugu.graph.pattern_relation(G, "triangle", "node")
    assert rel.dnf(("a", "b", "c")) or rel.tuples()
    t = rel.tuples()[0]
    assert rel.dnf(t) == frozenset({frozenset({"a", "b", "c"})})
    rel_e, _ = fugu.graph.pattern_relation(G, "triangle", "edge")
    (clause,) = rel_e.dnf(rel_e.tuples()[0])
    assert clause == frozenset({("a", "b"), ("a", "c"), ("b", "c")})
    star, _ = fugu.graph.pattern_relation(G, "2-star", "node")
    assert len(star) == 1 + 1 + 3  # centre a: 1, b: 1, c: 3


def test_predicates_constrain_occurrences() -> None:
    G = nx.complete_graph(5)
    nx.set_node_attributes(G, {v: {"kind": "x" if v < 3 else "y"} for v in G})
    assert count_occurrences(G, "triangle", node_predicate=lambda a: a["kind"] == "x") == 1
    nx.set_edge_attributes(G, {e: {"w": 1 if 4 not in e else 5} for e in G.edges})
    assert count_occurrences(G, "triangle", edge_predicate=lambda a: a["w"] == 1) == 4
    # per-role predicate: 2-stars whose centre is of kind y
    P = nx.star_graph(2)
    P.nodes[0]["predicate"] = lambda a: a["kind"] == "y"
    assert count_occurrences(G, P) == 2 * math.comb(4, 2)
    rel = count(G, P, 1.0, rng=fugu.RandomSource(seed=0))
    assert rel.statistic.startswith("pattern(")


def test_bad_graphs_and_patterns() -> None:
    with pytest.raises(InvalidParameterError, match="directed"):
        count(nx.DiGraph([(0, 1)]), "triangle", 1.0)
    with pytest.raises(InvalidParameterError, match="multigraph"):
        count(nx.MultiGraph([(0, 1), (0, 1)]), "triangle", 1.0)
    G = nx.complete_graph(3)
    G.add_edge(0, 0)
    with pytest.raises(InvalidParameterError, match="self-loop"):
        count(G, "triangle", 1.0)
    with pytest.raises(InvalidParameterError, match="not connected"):
        count(nx.complete_graph(4), nx.Graph([(0, 1), (2, 3)]), 1.0)
    with pytest.raises(InvalidParameterError, match="unknown pattern"):
        count(nx.complete_graph(4), "hexagon", 1.0)
    with pytest.raises(InvalidParameterError, match="k must be"):
        count(nx.complete_graph(4), "cycle", 1.0, k=2)
    with pytest.raises(InvalidTypeError):
        count([(0, 1)], "triangle", 1.0)
    with pytest.raises(InvalidParameterError, match="induced"):
        fugu.graph.pattern_relation(nx.complete_graph(4), nx.path_graph(3), "edge", induced=True)
    assert count_occurrences(nx.complete_graph(4), nx.path_graph(3), induced=True) == 0
    assert count_occurrences(nx.path_graph(4), nx.path_graph(3), induced=True) == 2


def test_read_edge_list(tmp_path) -> None:
    p = tmp_path / "ca-toy.txt"
    p.write_text(
        "# Directed graph (each unordered pair of nodes is saved once)\n"
        "# FromNodeId\tToNodeId\n1\t2\n2\t1\n2\t3\n3\t1\n"
    )
    G = read_edge_list(p)
    assert G.number_of_edges() == 3 and set(G.nodes) == {1, 2, 3}
    q = tmp_path / "loops.txt"
    q.write_text("a b\nb b\nb c\n")
    with pytest.raises(InvalidParameterError, match="self-loop"):
        read_edge_list(q)
    assert read_edge_list(q, self_loops="drop").number_of_edges() == 2
    e = tmp_path / "empty.txt"
    e.write_text("# nothing\n")
    # no edge lines is data (the empty graph, a neighbour of a one-edge list), not an error
    with pytest.warns(UserWarning, match="has no edges: read as the empty graph"):
        assert read_edge_list(e).number_of_edges() == 0
    with pytest.raises(InvalidParameterError, match="does not exist"):
        read_edge_list(tmp_path / "nope.txt")


def test_edge_dp_global_sensitivity_is_tight() -> None:
    """GS = occurrences through one edge of K_n (Karwa et al.'s forms for stars, k-triangles)."""
    n = 7
    for name, k, closed in [
        ("triangle", None, n - 2),
        ("k-star", 2, 2 * math.comb(n - 2, 1)),
        ("k-star", 3, 2 * math.comb(n - 2, 2)),
        ("k-triangle", 2, math.comb(n - 2, 2) + 2 * (n - 2) * math.comb(n - 3, 1)),
    ]:
        gs = global_sensitivity(name, "edge", n=n, k=k)
        K = nx.complete_graph(n)
        H = K.copy()
        H.remove_edge(0, 1)
        brute = count_occurrences(K, name, k) - count_occurrences(H, name, k)
        assert gs == closed == brute, name


def test_node_dp_degree_bound_sensitivity_bounds_reality() -> None:
    for D in (3, 4):
        G = nx.random_regular_graph(D, 12, seed=D)
        for name, k in [("triangle", None), ("k-star", 2), ("k-triangle", 2), ("cycle", 4)]:
            gs = global_sensitivity(name, "node", degree_bound=D, k=k)
            occ = enumerate_pattern(G, name, k)
            per_node = np.bincount(occ.occ.reshape(-1), minlength=12) if len(occ) else np.zeros(1)
            assert per_node.max() <= gs


def test_laplace_baseline_models_and_errors() -> None:
    K = nx.karate_club_graph()
    rel = laplace_count(K, "triangle", 1.0, unit="edge", rng=fugu.RandomSource(seed=0))
    assert rel.guarantee.model == "edge-dp" and rel.guarantee.sensitivity == 32
    with pytest.raises(InvalidParameterError, match="degree bound"):
        laplace_count(K, "triangle", 1.0, unit="node")
    with pytest.raises(InvalidParameterError, match="breaks the promised"):
        laplace_count(K, "triangle", 1.0, unit="node", degree_bound=5)
    ok = laplace_count(
        K, "triangle", 1.0, unit="node", degree_bound=17, rng=fugu.RandomSource(seed=0)
    )
    assert ok.guarantee.model == "node-dp" and ok.guarantee.sensitivity == math.comb(17, 2)
    assert ok.expected_error() == pytest.approx(ok.noise_std)


def test_k_on_a_pattern_without_k_is_refused() -> None:
    # fugu.graph.count(G, "triangle", k=5) used to ignore k silently
    import networkx as nx
    import pytest

    import fugu

    with pytest.raises(fugu.FuguError, match="no effect"):
        fugu.graph.count(nx.karate_club_graph(), "triangle", 1.0, unit="edge", k=5)
