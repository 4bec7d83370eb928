"""Shared helpers for the graph tests (small graphs only: CI time)."""

from __future__ import annotations

import itertools

import networkx as nx
import numpy as np

from fugu.graph import Annotations
from fugu.graph.patterns import enumerate_pattern


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
