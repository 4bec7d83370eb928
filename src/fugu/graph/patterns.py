"""Pattern occurrences in a graph, annotated for node or edge privacy.

Each occurrence of a pattern (a subgraph of the input isomorphic to the pattern; counted once,
never once per automorphism) becomes one tuple of a sensitive K-relation:

* node privacy: annotated with the ∧ of its distinct nodes (triangle abc → a ∧ b ∧ c);
* edge privacy: the ∧ of its edges (triangle abc → e_ab ∧ e_ac ∧ e_bc); the node set is public.

(Chen and Zhou, Recursive Mechanism, Sec. 2.4 / Fig. 2(a); spec 1.5.) Occurrences are
*non-induced* subgraphs (a triangle contains three 2-paths). The common patterns have vectorised
enumerators (no general subgraph isomorphism): edges, triangles and k-cliques by degree-ordered
orientation, k-stars by neighbour combinations, k-triangles from the triangle list, paths and
cycles by vectorised walk extension. Any other small connected pattern (a networkx graph) goes
through networkx's VF2 matcher, deduplicated by edge set.

Constraints on nodes or edges (the paper's "constraints on nodes or edges of the subgraph"):
``node_predicate(attrs) -> bool`` / ``edge_predicate(attrs) -> bool`` restrict every node / edge
of an occurrence; for per-role constraints give a networkx pattern whose nodes/edges carry a
``"predicate"`` attribute (a callable on the data graph's attribute dict). Predicates may only look
at the node's or edge's own attributes, so a withdrawal never changes another occurrence.
"""

from __future__ import annotations

import itertools
import time
from collections.abc import Callable, Hashable
from dataclasses import dataclass
from typing import Any

import networkx as nx
import numpy as np
from numpy.typing import NDArray

from ..errors import InvalidParameterError, InvalidTypeError
from .krelation import Annotations, KRelation, concatenated_ranges

__all__ = [
    "PATTERNS",
    "Occurrences",
    "enumerate_pattern",
    "pattern_relation",
    "check_graph",
    "pattern_graph",
]

PATTERNS = ("edge", "triangle", "k-star", "k-triangle", "path", "cycle", "k-clique")
#: Other spellings of the pattern names (the CLI's checks read them too).
PATTERN_ALIASES = {
    "edges": "edge",
    "triangles": "triangle",
    "star": "k-star",
    "kstar": "k-star",
    "ktriangle": "k-triangle",
    "clique": "k-clique",
    "kclique": "k-clique",
}
_DEFAULT_K = {"k-star": 2, "k-triangle": 2, "path": 2, "cycle": 4, "k-clique": 4}


def check_graph(G: Any) -> None:
    """Refuse inputs fugu cannot count on, with the fix in the message."""
    if not isinstance(G, nx.Graph):
        raise InvalidTypeError(
            f"G must be a networkx graph, got {type(G).__name__}; read an edge list with "
            f"fugu.graph.read_edge_list(path)"
        )
    if G.is_directed():
        raise InvalidParameterError(
            "G is directed; fugu counts patterns in undirected simple graphs and does not convert "
            "silently (edge privacy would protect each direction separately). Pass "
            "nx.Graph(G.to_undirected()) if one undirected edge per pair is what you mean"
        )
    if G.is_multigraph():
        raise InvalidParameterError(
            "G is a multigraph; parallel edges are refused. Pass nx.Graph(G) to merge them "
            "(one participant per pair under edge privacy)"
        )
    loops = nx.number_of_selfloops(G)
    if loops:
        raise InvalidParameterError(
            f"G has {loops} self-loop(s); patterns are counted in simple graphs. Remove them with "
            f"G.remove_edges_from(list(nx.selfloop_edges(G)))"
        )


@dataclass
class Occurrences:
    """Occurrences as arrays over node indices 0..n−1 (``nodes`` maps indices back)."""

    nodes: list[Hashable]
    occ: NDArray[np.int64]  # (n_occ, k) node indices, in the pattern's role order
    occ_edges: NDArray[np.int64]  # (n_occ, l) edge ids (into edge_u/edge_v)
    edge_u: NDArray[np.int64]
    edge_v: NDArray[np.int64]
    seconds: float = 0.0

    def __len__(self) -> int:
        return int(self.occ.shape[0])


class _Graph:
    """CSR adjacency and sorted edge keys of a simple undirected graph."""

    def __init__(self, G: nx.Graph) -> None:
        self.nodes = list(G.nodes)
        n = len(self.nodes)
        self.n = n
        idx = {v: i for i, v in enumerate(self.nodes)}
        if G.number_of_edges():
            e = np.array([(idx[u], idx[v]) for u, v in G.edges], dtype=np.int64)
        else:
            e = np.zeros((0, 2), np.int64)
        u, v = np.minimum(e[:, 0], e[:, 1]), np.maximum(e[:, 0], e[:, 1])
        order = np.argsort(u * n + v)
        self.edge_u, self.edge_v = u[order], v[order]
        self.keys = self.edge_u * n + self.edge_v
        src = np.concatenate([self.edge_u, self.edge_v])
        dst = np.concatenate([self.edge_v, self.edge_u])
        o = np.lexsort((dst, src))
        self.indices = dst[o]
        self.indptr = np.concatenate([[0], np.cumsum(np.bincount(src, minlength=n))]).astype(
            np.int64
        )
        self.degree = np.diff(self.indptr)

    def edge_id(self, a: NDArray[np.int64], b: NDArray[np.int64]) -> NDArray[np.int64]:
        """Edge ids of pairs (a, b); -1 where there is no edge."""
        key = np.minimum(a, b) * self.n + np.maximum(a, b)
        pos = np.searchsorted(self.keys, key)
        pos = np.minimum(pos, max(0, self.keys.size - 1))
        ok = (
            (self.keys.size > 0) & (self.keys[pos] == key)
            if self.keys.size
            else np.zeros(key.shape, bool)
        )
        return np.where(ok, pos, -1)

    def neighbours_of(
        self,
        src: NDArray[np.int64],
        indptr: NDArray[np.int64] | None = None,
        indices: NDArray[np.int64] | None = None,
    ) -> tuple[NDArray[np.int64], NDArray[np.int64]]:
        """For each src[i], all its neighbours: (row i repeated, neighbour)."""
        ip = self.indptr if indptr is None else indptr
        ix = self.indices if indices is None else indices
        starts = ip[src]
        counts = ip[src + 1] - starts
        rows = np.repeat(np.arange(src.size), counts)
        return rows, ix[concatenated_ranges(starts, counts)]

    def oriented(self) -> tuple[NDArray[np.int64], NDArray[np.int64], NDArray[np.int64]]:
        """Out-CSR of the orientation low rank → high rank, rank = (degree, index)."""
        rank = np.empty(self.n, np.int64)
        rank[np.lexsort((np.arange(self.n), self.degree))] = np.arange(self.n)
        a, b = self.edge_u, self.edge_v
        fwd = rank[a] < rank[b]
        s = np.where(fwd, a, b)
        d = np.where(fwd, b, a)
        o = np.lexsort((d, s))
        indptr = np.concatenate([[0], np.cumsum(np.bincount(s, minlength=self.n))]).astype(np.int64)
        return indptr, d[o], rank


def _pairs(k: int) -> list[tuple[int, int]]:
    return [(a, b) for a in range(k) for b in range(a + 1, k)]


def _cliques(g: _Graph, k: int) -> NDArray[np.int64]:
    """All k-cliques (k ≥ 2), each once: members in increasing rank."""
    indptr, indices, _ = g.oriented()
    src = np.repeat(np.arange(g.n), np.diff(indptr))
    cl = np.stack([src, indices], axis=1) if indices.size else np.zeros((0, 2), np.int64)
    for _ in range(k - 2):
        if not cl.shape[0]:
            return np.zeros((0, k), np.int64)
        rows, w = g.neighbours_of(cl[:, -1], indptr, indices)
        keep = np.ones(rows.size, bool)
        for col in range(cl.shape[1] - 1):
            keep &= g.edge_id(cl[rows, col], w) >= 0
        cl = np.concatenate([cl[rows[keep]], w[keep, None]], axis=1)
    return cl.reshape(-1, k)


def _combinations(
    groups: NDArray[np.int64], items: NDArray[np.int64], k: int
) -> tuple[NDArray[np.int64], NDArray[np.int64]]:
    """All k-subsets of the items of each group (groups sorted, items aligned).

    Returns (group of each subset, (m, k) items)."""
    if not groups.size:
        return np.zeros(0, np.int64), np.zeros((0, k), np.int64)
    bounds = np.flatnonzero(np.diff(groups)) + 1
    starts = np.concatenate([[0], bounds])
    sizes = np.diff(np.concatenate([starts, [groups.size]]))
    out_g: list[NDArray[np.int64]] = []
    out_i: list[NDArray[np.int64]] = []
    for d in np.unique(sizes):
        if d < k:
            continue
        sel = np.flatnonzero(sizes == d)
        mat = items[starts[sel, None] + np.arange(d)]  # (n_d, d)
        combo = np.array(list(itertools.combinations(range(int(d)), k)), dtype=np.int64)
        out_g.append(np.repeat(groups[starts[sel]], combo.shape[0]))
        out_i.append(mat[:, combo].reshape(-1, k))
    if not out_g:
        return np.zeros(0, np.int64), np.zeros((0, k), np.int64)
    return np.concatenate(out_g), np.concatenate(out_i)


def _paths(g: _Graph, n_nodes: int, increasing_from_first: bool = False) -> NDArray[np.int64]:
    """Ordered simple walks with n_nodes distinct nodes (optionally all > the first node)."""
    src = np.repeat(np.arange(g.n), g.degree)
    p = np.stack([src, g.indices], axis=1) if g.indices.size else np.zeros((0, 2), np.int64)
    if increasing_from_first:
        p = p[p[:, 1] > p[:, 0]]
    for _ in range(n_nodes - 2):
        if not p.shape[0]:
            break
        rows, w = g.neighbours_of(p[:, -1])
        keep = np.ones(rows.size, bool)
        for col in range(p.shape[1]):
            keep &= p[rows, col] != w
        if increasing_from_first:
            keep &= w > p[rows, 0]
        p = np.concatenate([p[rows[keep]], w[keep, None]], axis=1)
    return p.reshape(-1, n_nodes)


def _edges_of(g: _Graph, occ: NDArray[np.int64], pairs: list[tuple[int, int]]) -> NDArray[np.int64]:
    if not pairs:
        return np.zeros((occ.shape[0], 0), np.int64)
    ids = np.stack([g.edge_id(occ[:, a], occ[:, b]) for a, b in pairs], axis=1)
    return ids.reshape(occ.shape[0], len(pairs))


def pattern_graph(pattern: str, k: int | None = None) -> nx.Graph:
    """The pattern as a networkx graph (for the general matcher and for tests)."""
    name, k = _normalise(pattern, k)
    if name == "edge":
        return nx.path_graph(2)
    if name == "triangle":
        return nx.complete_graph(3)
    if name == "k-star":
        return nx.star_graph(k)
    if name == "k-triangle":
        h = nx.Graph([(0, 1)])
        for w in range(2, k + 2):
            h.add_edges_from([(0, w), (1, w)])
        return h
    if name == "path":
        return nx.path_graph(k + 1)
    if name == "cycle":
        return nx.cycle_graph(k)
    return nx.complete_graph(k)


def canonical_pattern(pattern: str) -> str:
    """The pattern's name with its alias resolved (``"Triangles"`` → ``"triangle"``).

    >>> canonical_pattern(" Triangles ")
    'triangle'
    """
    name = pattern.lower().strip()
    return PATTERN_ALIASES.get(name, name)


def _normalise(pattern: str, k: int | None) -> tuple[str, int]:
    name = canonical_pattern(pattern)
    # "2-star", "3-clique", "4-cycle", "2-triangle", "3-path"
    if name not in PATTERNS and "-" in name:
        head, _, tail = name.partition("-")
        if head.isdigit() and f"k-{tail}" in PATTERNS:
            if k is not None and k != int(head):
                raise InvalidParameterError(f"pattern {pattern!r} and k={k} disagree")
            name, k = f"k-{tail}", int(head)
        elif head.isdigit() and tail in ("path", "cycle"):
            name, k = tail, int(head)
    if name not in PATTERNS:
        raise InvalidParameterError(
            f"unknown pattern {pattern!r}; use one of {PATTERNS} (with k=...), e.g. '2-star', "
            f"'4-cycle', or pass a connected networkx graph"
        )
    if name in ("edge", "triangle"):
        if k is not None:
            raise InvalidParameterError(
                f"k={k} has no effect on pattern {name!r} (k sizes k-star, k-triangle, path, "
                f"cycle and k-clique); leave k unset"
            )
        return name, {"edge": 2, "triangle": 3}[name]
    if k is None:
        k = _DEFAULT_K[name]
    if isinstance(k, bool) or not isinstance(k, int | np.integer):
        raise InvalidTypeError(f"k must be an integer, got {k!r}")
    k = int(k)
    minimum = {"k-star": 1, "k-triangle": 1, "path": 1, "cycle": 3, "k-clique": 2}[name]
    if k < minimum:
        raise InvalidParameterError(f"k must be >= {minimum} for pattern {name!r}, got {k}")
    if k > 12:
        raise InvalidParameterError(
            f"k = {k} is too large: occurrence enumeration grows like degree^k"
        )
    return name, k


def _filtered(
    G: nx.Graph,
    node_predicate: Callable[[dict[str, Any]], bool] | None,
    edge_predicate: Callable[[dict[str, Any]], bool] | None,
) -> nx.Graph:
    if node_predicate is None and edge_predicate is None:
        return G
    H = nx.Graph()
    H.add_nodes_from(G.nodes(data=True))
    if node_predicate is not None:
        H.remove_nodes_from([v for v, a in G.nodes(data=True) if not node_predicate(a)])
    keep = [
        (u, v, a)
        for u, v, a in G.edges(data=True)
        if u in H and v in H and (edge_predicate is None or edge_predicate(a))
    ]
    H.add_edges_from(keep)
    return H


def enumerate_pattern(
    G: nx.Graph,
    pattern: str | nx.Graph,
    k: int | None = None,
    *,
    node_predicate: Callable[[dict[str, Any]], bool] | None = None,
    edge_predicate: Callable[[dict[str, Any]], bool] | None = None,
    induced: bool = False,
) -> Occurrences:
    """Every occurrence of ``pattern`` in ``G`` once, as node and edge index arrays.

    The node order of the input graph is kept (``Occurrences.nodes``); predicates are applied
    first (occurrences may only use nodes/edges that satisfy them).
    """
    check_graph(G)
    t0 = time.perf_counter()
    H = _filtered(G, node_predicate, edge_predicate)
    full = _Graph(G)
    g = _Graph(H) if H is not G else full
    if isinstance(pattern, nx.Graph):
        occ, pairs_e = _general(g, H, pattern, induced)
        occ_edges = (
            np.stack([g.edge_id(occ[:, a], occ[:, b]) for a, b in pairs_e], axis=1)
            if occ.shape[0]
            else np.zeros((0, len(pairs_e)), np.int64)
        )
    else:
        if induced:
            raise InvalidParameterError("induced=True needs the pattern as a networkx graph")
        name, k = _normalise(pattern, k)
        occ, pairs = _named(g, name, k)
        occ_edges = _edges_of(g, occ, pairs)
    # map to the full graph's node and edge numbering (identical unless predicates dropped some)
    if g is not full:
        pos = {v: i for i, v in enumerate(full.nodes)}
        remap = np.array([pos[v] for v in g.nodes], dtype=np.int64)
        occ = remap[occ] if occ.size else occ.reshape(0, occ.shape[1])
        eu, ev = remap[g.edge_u], remap[g.edge_v]
        occ_edges = full.edge_id(eu[occ_edges], ev[occ_edges]) if occ_edges.size else occ_edges
    return Occurrences(
        full.nodes, occ, occ_edges, full.edge_u, full.edge_v, time.perf_counter() - t0
    )


def _named(g: _Graph, name: str, k: int) -> tuple[NDArray[np.int64], list[tuple[int, int]]]:
    if (
        name == "edge"
        or (name == "path" and k == 1)
        or (name == "k-star" and k == 1)
        or (name == "k-clique" and k == 2)
    ):
        return np.stack([g.edge_u, g.edge_v], axis=1), [(0, 1)]
    if name == "triangle" or (name == "k-triangle" and k == 1) or (name == "cycle" and k == 3):
        return _cliques(g, 3), _pairs(3)
    if name == "k-clique":
        return _cliques(g, k), _pairs(k)
    if name == "k-star":
        centre = np.repeat(np.arange(g.n), g.degree)
        c, leaves = _combinations(centre, g.indices, k)
        return np.concatenate([c[:, None], leaves], axis=1), [(0, i) for i in range(1, k + 1)]
    if name == "k-triangle":
        tri = _cliques(g, 3)
        # (edge, apex) pairs: each triangle gives its three edges their apex
        e = np.concatenate(
            [
                g.edge_id(tri[:, 0], tri[:, 1]),
                g.edge_id(tri[:, 0], tri[:, 2]),
                g.edge_id(tri[:, 1], tri[:, 2]),
            ]
        )
        apex = np.concatenate([tri[:, 2], tri[:, 1], tri[:, 0]])
        o = np.lexsort((apex, e))
        eid, ap = _combinations(e[o], apex[o], k)
        occ = np.concatenate([g.edge_u[eid, None], g.edge_v[eid, None], ap], axis=1)
        pairs = [(0, 1)] + [(a, w) for w in range(2, k + 2) for a in (0, 1)]
        return occ.reshape(-1, k + 2), pairs
    if name == "path":
        p = _paths(g, k + 1)
        p = p[p[:, 0] < p[:, -1]]  # each path once (not also reversed)
        return p, [(i, i + 1) for i in range(k)]
    # cycle of length k >= 4: start at the smallest node, fix the direction
    p = _paths(g, k, increasing_from_first=True)
    if p.shape[0]:
        p = p[(g.edge_id(p[:, -1], p[:, 0]) >= 0) & (p[:, 1] < p[:, -1])]
    return p, [(i, i + 1) for i in range(k - 1)] + [(k - 1, 0)]


def _general(
    g: _Graph, H: nx.Graph, pattern: nx.Graph, induced: bool
) -> tuple[NDArray[np.int64], list[tuple[int, int]]]:
    """VF2 occurrences of a small connected pattern, each edge set once."""
    check_pattern(pattern, induced, "node")
    pnodes = list(pattern.nodes)
    pidx = {v: i for i, v in enumerate(pnodes)}
    pairs = [(min(pidx[a], pidx[b]), max(pidx[a], pidx[b])) for a, b in pattern.edges]

    def node_match(data_attrs: dict[str, Any], pat_attrs: dict[str, Any]) -> bool:
        pred = pat_attrs.get("predicate")
        return True if pred is None else bool(pred(data_attrs))

    def edge_match(data_attrs: dict[str, Any], pat_attrs: dict[str, Any]) -> bool:
        pred = pat_attrs.get("predicate")
        return True if pred is None else bool(pred(data_attrs))

    gm = nx.algorithms.isomorphism.GraphMatcher(
        H, pattern, node_match=node_match, edge_match=edge_match
    )
    it = gm.subgraph_isomorphisms_iter() if induced else gm.subgraph_monomorphisms_iter()
    pos = {v: i for i, v in enumerate(g.nodes)}
    seen: set[frozenset[tuple[int, int]]] = set()
    rows: list[list[int]] = []
    for mapping in it:
        inv = {pv: pos[dv] for dv, pv in mapping.items()}
        row = [inv[v] for v in pnodes]
        key = frozenset((min(row[a], row[b]), max(row[a], row[b])) for a, b in pairs)
        if key in seen:
            continue
        seen.add(key)
        rows.append(row)
    occ = np.array(rows, dtype=np.int64).reshape(-1, len(pnodes))
    return occ, pairs


def check_unit(unit: str, induced: bool = False) -> None:
    """Refuse a unit other than 'node' or 'edge', and induced counts under edge privacy."""
    if unit not in ("node", "edge"):
        raise InvalidParameterError(f"unit must be 'node' or 'edge', got {unit!r}")
    if induced and unit == "edge":
        raise InvalidParameterError(
            "induced counts are not monotone under edge privacy (adding an edge can destroy an "
            "induced occurrence); use unit='node' or non-induced counts"
        )


def check_pattern(pattern: str | nx.Graph, induced: bool, unit: str) -> None:
    """Refuse a pattern or option that cannot be counted (public: checked before any charge)."""
    check_unit(unit, induced)
    if not isinstance(pattern, nx.Graph):
        if induced:
            raise InvalidParameterError("induced=True needs the pattern as a networkx graph")
        return
    if pattern.is_directed() or pattern.is_multigraph():
        raise InvalidParameterError("the pattern must be an undirected simple networkx graph")
    if pattern.number_of_edges() == 0 or nx.number_of_selfloops(pattern):
        raise InvalidParameterError("the pattern needs at least one edge and no self-loops")
    if not nx.is_connected(pattern):
        raise InvalidParameterError(
            "the pattern is not connected; count each connected part separately (a disconnected "
            "pattern's occurrences are not monotone-friendly and blow up combinatorially)"
        )


def pattern_relation(
    G: nx.Graph,
    pattern: str | nx.Graph,
    unit: str = "node",
    k: int | None = None,
    **options: Any,
) -> tuple[KRelation, Occurrences]:
    """The sensitive K-relation of the occurrences, annotated for ``unit`` privacy."""
    check_unit(unit, bool(options.get("induced")))
    occ = enumerate_pattern(G, pattern, k, **options)
    ann = annotations_of(occ, unit)
    cols = tuple(f"v{i}" for i in range(occ.occ.shape[1]))
    nodes = np.empty(len(occ.nodes), dtype=object)
    nodes[:] = occ.nodes
    values = nodes[occ.occ] if occ.occ.size else np.zeros((0, len(cols)), dtype=object)
    return KRelation._from_conjunctions(cols, values, ann), occ


def annotations_of(occ: Occurrences, unit: str) -> Annotations:
    """One ∧-clause per occurrence: its distinct nodes (node privacy) or edges (edge privacy).

    Participants that occur in no occurrence are left out (spec 5.6: this changes neither j, Δ nor
    X, and keeps the private number of nodes out of every formula).
    """
    ids = occ.occ if unit == "node" else occ.occ_edges
    n_all = len(occ.nodes) if unit == "node" else occ.edge_u.size
    if ids.shape[0] == 0:
        return Annotations.conjunctions(np.zeros((0, max(1, ids.shape[1])), np.int64), None, 0, ())
    used = np.unique(ids)
    newid = np.full(n_all, -1, np.int64)
    newid[used] = np.arange(used.size)
    if unit == "node":
        labels: list[Hashable] = [occ.nodes[i] for i in used]
    else:
        labels = [(occ.nodes[occ.edge_u[e]], occ.nodes[occ.edge_v[e]]) for e in used]
    return Annotations.conjunctions(newid[ids], None, used.size, labels)


def count_occurrences(
    G: nx.Graph, pattern: str | nx.Graph, k: int | None = None, **options: Any
) -> int:
    """The exact (non-private) number of occurrences. Never publish it."""
    return len(enumerate_pattern(G, pattern, k, **options))
