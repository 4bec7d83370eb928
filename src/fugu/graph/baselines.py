"""Baselines for graph pattern counts: the Laplace mechanism with global sensitivity.

Privacy model and sensitivity (stated per unit):

* ``unit="edge"`` — ε-edge DP (neighbours: one edge added or removed; the node set, hence n,
  is public). Global sensitivity of the count of a pattern H with v_H nodes and e_H edges: the
  number of copies of H in the complete graph K_n that contain a fixed edge,
  ``GS = n^(v_H) / |Aut(H)| · e_H / C(n, 2)`` (falling factorial; tight for G = K_n minus one
  edge). This gives n−2 for triangles, 2·C(n−2, k−1) for k-stars, and
  C(n−2, k) + 2(n−2)·C(n−3, k−1) for k-triangles (Karwa et al., PVLDB 2011).
* ``unit="node"`` — ε-node DP **on the class of graphs with maximum degree ≤ D**, D public
  (neighbours: one node and its edges added or removed, both graphs in the class). GS is the
  most occurrences one node can be in: D for edges, C(D, 2) for triangles,
  C(D, k) + D·C(D−1, k−1) for k-stars, D·C(D−1, k) + C(D, 2)·C(D−2, k−1) for k-triangles, and
  v_H·D^(v_H−1)/|Aut(H)| for other patterns (spanning-tree count). A graph that breaks the
  promised bound is refused (that refusal is itself not private: choose D from public knowledge).

Noise: exact discrete Laplace of scale GS/ε on the integer count (unbiased; variance
2p/(1−p)², p = e^(−ε/GS)). Source: Dwork, McSherry, Nissim, Smith 2006; the node-DP version is
the "public degree bound" baseline discussed by Kasiviswanathan et al. (TCC 2013) and
Blocki et al. (ITCS 2013). The Recursive Mechanism's paper uses the edge-DP forms as baselines.
"""

from __future__ import annotations

import math

import networkx as nx
import numpy as np

from ..budget import Accountant
from ..errors import InvalidParameterError, check_epsilon
from ..mechanism import guarantee, start
from ..noise import MAX_SCALE, RandomSource, discrete_laplace_variance, geometric_mechanism
from .count_release import (
    GRAPH_NEIGHBOURS,
    CountRelease,
    nonnegative_release,
    pattern_name,
    warn_if_empty_graph,
)
from .patterns import (
    _normalise,
    check_graph,
    check_pattern,
    check_unit,
    enumerate_pattern,
    pattern_graph,
)

__all__ = ["laplace_count", "global_sensitivity"]

#: The released guarantee's source, per unit (as in the module docstring).
SOURCES = {
    "edge": "Dwork, McSherry, Nissim, Smith 2006; edge-DP sensitivities as in Karwa et al. "
    "(PVLDB 2011)",
    "node": "Dwork, McSherry, Nissim, Smith 2006; node DP on graphs of public maximum degree D "
    "(the degree-bound baseline of Kasiviswanathan et al., TCC 2013, and Blocki et al., ITCS "
    "2013); sensitivity = the most occurrences one node of degree <= D can be in",
}


def _automorphisms(h: nx.Graph, name: tuple[str, int] | None = None) -> int:
    """|Aut(h)|: closed forms for the named patterns, else VF2 (fine for small patterns).

    Enumerating them is factorial in k (a 12-star or a 12-clique has 12! = 479,001,600), which
    made ``laplace_count`` and the Karwa et al. counts of the larger named patterns run for
    hours before anything was released.
    """
    if name is not None:
        kind, k = name
        if kind == "edge" or (kind in ("path", "k-star", "k-clique") and k == 1):
            return 2
        if kind == "triangle" or (kind == "k-triangle" and k == 1):
            return 6
        if kind == "path":
            return 2
        if kind == "cycle":
            return 2 * k
        if kind == "k-star":
            return math.factorial(k)
        if kind == "k-triangle":
            return 2 * math.factorial(k)
        if kind == "k-clique":
            return math.factorial(k)
    gm = nx.algorithms.isomorphism.GraphMatcher(h, h)
    return sum(1 for _ in gm.isomorphisms_iter())


def global_sensitivity(
    pattern: str | nx.Graph,
    unit: str,
    *,
    n: int | None = None,
    degree_bound: int | None = None,
    k: int | None = None,
) -> int:
    """Global sensitivity of a pattern count (see the module docstring for the formulas)."""
    h = pattern if isinstance(pattern, nx.Graph) else pattern_graph(pattern, k)
    v, e = h.number_of_nodes(), h.number_of_edges()
    name = None if isinstance(pattern, nx.Graph) else _normalise(pattern, k)
    if unit == "edge":
        if n is None or n < 2:
            raise InvalidParameterError(
                "edge-DP global sensitivity needs the public number of nodes n >= 2"
            )
        if v > n:
            return 0  # no copy fits in n nodes: the count is 0 on every graph
        falling = math.perm(n, v)
        num = falling * e
        den = _automorphisms(h, name) * math.comb(n, 2)
        return max(1, -(-num // den))
    check_unit(unit)
    if degree_bound is None:
        raise InvalidParameterError(
            "node-DP global sensitivity is unbounded without a public degree bound; pass "
            "degree_bound=D (a promise that every node has at most D neighbours), or use the "
            "Recursive Mechanism (fugu.graph.count), which needs none"
        )
    if (
        isinstance(degree_bound, bool)
        or not isinstance(degree_bound, int | np.integer)
        or degree_bound < 1
    ):
        raise InvalidParameterError(
            f"degree_bound must be an integer >= 1 (the public maximum degree D), got "
            f"{degree_bound!r}"
        )
    d = int(degree_bound)
    if name is not None:
        kind, kk = name
        if (
            kind == "edge"
            or (kind in ("path", "k-star") and kk == 1)
            or (kind == "k-clique" and kk == 2)
        ):
            return d
        if (
            kind == "triangle"
            or (kind == "k-triangle" and kk == 1)
            or (kind == "cycle" and kk == 3)
        ):
            return max(1, math.comb(d, 2))
        if kind == "k-star":
            return max(1, math.comb(d, kk) + d * math.comb(d - 1, kk - 1))
        if kind == "k-triangle":
            return max(
                1, d * math.comb(d - 1, kk) + math.comb(d, 2) * math.comb(max(d - 2, 0), kk - 1)
            )
    return max(1, -(-(v * d ** (v - 1)) // _automorphisms(h, name)))


def laplace_count(
    G: nx.Graph,
    pattern: str | nx.Graph,
    epsilon: float,
    unit: str = "edge",
    rng: RandomSource | None = None,
    *,
    k: int | None = None,
    degree_bound: int | None = None,
    accountant: Accountant | None = None,
    nonnegative: bool = False,
) -> CountRelease:
    """Pattern count + discrete Laplace noise of scale GS/ε (the global-sensitivity baseline).

    Privacy model: ε-edge DP (``unit="edge"``, n public) or ε-node DP on graphs of maximum degree
    ≤ ``degree_bound`` (``unit="node"``). See :mod:`fugu.graph.baselines` for the sensitivities.
    ``accountant`` is charged ε once (model ``edge-dp`` / ``node-dp``) after the occurrences
    are counted (a refusal there, e.g. a pattern node's ``"predicate"`` failing on some node's
    attributes, charges nothing) and before the node-DP degree bound is checked;
    ``nonnegative=True`` clamps the release at 0 (post-processing, recorded in the guarantee).

    Examples
    --------
    >>> import networkx as nx, fugu
    >>> rel = fugu.graph.laplace_count(nx.karate_club_graph(), "triangle", 1.0, unit="edge",
    ...                                rng=fugu.RandomSource(seed=0))
    >>> rel.guarantee.sensitivity    # n - 2 with n = 34
    32.0
    """
    check_graph(G)
    model = "edge-dp" if unit == "edge" else "node-dp"
    check_pattern(pattern, False, unit)  # public: refused before anything is charged
    name = pattern_name(pattern, k)
    gs = global_sensitivity(pattern, unit, n=G.number_of_nodes(), degree_bound=degree_bound, k=k)
    eps = check_epsilon(epsilon)
    if gs == 0:  # public (n under edge DP): refused before anything is charged
        raise InvalidParameterError(
            f"the pattern has more nodes than the graph's public node count n = "
            f"{G.number_of_nodes()}, so its count is 0 on every graph with this node set (no "
            f"privacy needed, nothing to release)"
        )
    if gs / eps > MAX_SCALE:  # public (n under edge DP, D under node DP): checked before charging
        raise InvalidParameterError(
            f"epsilon = {eps!r} with the global sensitivity {gs:.3g} makes the noise scale "
            f"{gs / eps:.3g} exceed the sampler's limit {MAX_SCALE:.3g}: this baseline needs "
            f"epsilon >= {gs / MAX_SCALE:.3g} (and at most 1000); it is useless here anyway (use "
            f"fugu.graph.count)"
        )
    # The occurrences are enumerated before anything is charged: a refusal there (a pattern
    # node's "predicate" failing on some node's attributes) depends on the graph and must
    # spend nothing, as in fugu.graph.count.
    true = len(enumerate_pattern(G, pattern, k))
    warn_if_empty_graph(G, unit)  # released like its neighbours (count 0 plus the noise)
    eps, source = start(eps, rng, accountant, f"laplace baseline: {name} count", model=model)
    if unit == "node":
        dmax = max((deg for _, deg in G.degree), default=0)
        if dmax > int(degree_bound):  # type: ignore[arg-type]
            raise InvalidParameterError(
                f"the graph breaks the promised degree bound {degree_bound} (some node has more "
                f"neighbours); the bound must hold for node-DP with this baseline"
            )
    noisy = geometric_mechanism([true], gs, eps, source)
    neighbours = (
        GRAPH_NEIGHBOURS["edge-dp"]
        if unit == "edge"
        else f"add or remove one node with its edges (graphs of max degree <= {degree_bound})"
    )
    g = guarantee(
        model=model,
        epsilon=eps,
        neighbours=neighbours,
        mechanism="laplace (global sensitivity)",
        rng=source,
        sensitivity=float(gs),
        source=SOURCES[unit],
        parameters={
            "statistic": f"{name} count",
            "noise": "discrete Laplace",
            "scale": gs / eps,
            **({"degree_bound": degree_bound} if unit == "node" else {}),
        },
    )
    std = math.sqrt(float(discrete_laplace_variance(gs / eps)))
    rel = CountRelease(g, float(noisy[0]), noise_std=std, statistic=f"{name} count")
    return nonnegative_release(rel) if nonnegative else rel
