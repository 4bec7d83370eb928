"""Karwa, Raskhodnikova, Smith, Yaroslavtsev (PVLDB 2011): k-star and k-triangle counts, edge DP.

These are the "local sensitivity" baselines of the Recursive Mechanism paper's Figure 4 (Chen and
Zhou 2013, spec ``recursive_mechanism.md`` section 6) for 2-stars and 2-triangles. Privacy model:
edge differential privacy — neighbours add or remove one edge; the node set (hence n) is public.

**k-stars (pure ε-DP, smooth sensitivity).** The count is ``Σ_v C(d_v, k)``. Flipping the edge ij
changes it by ``C(d_i − x_ij, k−1) + C(d_j − x_ij, k−1)`` (``x_ij`` = 1 when ij is an edge: the
degrees without that edge). At edit distance s the largest local sensitivity is, exactly,

    LS^(s) = max_{i≠j} C(min(x + s1, n−2), k−1) + C(min(y + s2, n−2), k−1)

with ``x ≥ y`` the two degrees without ij, and the s edits spent on the larger one first
(``s1 = min(s, n−2−x)``, ``s2 = min(s − s1, n−2−y)``): an edit either raises one of the two
degrees by one or does nothing for this pair, C(·, k−1) is convex, so filling the larger first
majorises every other split. Only pairs on the Pareto frontier of (x, y) matter; for every node
its best partner is its highest-degree neighbour or its highest-degree non-neighbour, so the
frontier comes from one scan. ``S*_β = max_s e^(−βs) LS^(s)`` is the β-smooth sensitivity
(checked against the exact maximum over all graphs within distance s on every 5-node graph).
Noise: NRS's power-tail density ``1/(1 + |z|^γ)``, as :func:`fugu.graph.smooth_triangle_count`
(α = ε/(4γ), β = ε/γ, γ = 4; privacy-loss bound 0.89ε with every grid slack).

**k-triangles ((ε, δ)-DP, a smooth upper bound and Laplace noise).** The count is
``Σ_{edges uv} C(a_uv, k)`` (a = common neighbours). Flipping ij changes it by

    δ_ij = C(a_ij, k) + Σ_{l ∈ A_ij} [C(a_il − x_ij, k−1) + C(a_jl − x_ij, k−1)],

so LS = max_ij δ_ij (computed exactly from sparse products). Its smooth sensitivity is not known
to be efficiently computable; Karwa et al. bound how fast LS can grow instead: one edge flip
changes LS by at most ``D(a_max) = 3·C(a_max, k−1) + a_max·C(a_max, k−2)`` (a_max = the largest
number of common neighbours of any pair, which itself moves by at most 1). Hence

    U(G, s) = min(LS(G) + Σ_{t<s} D(min(a_max + t, n−2)), GS)

satisfies ``U(G, s) ≤ U(G', s+1)`` for neighbours, and ``S(G) = max_s e^(−βs) U(G, s)`` is a
β-smooth upper bound on LS (NRS Def. 2.1). fugu checks ``LS(G) ≤ LS(G') + D(a_max(G'))`` on every
pair of neighbouring graphs with 6 nodes (k = 1, 2, 3) in its tests. The release is
``T(G) + Lap(S(G)/α)`` with α = ε/2, β = ε/(2 ln(2/δ)) (NRS Lemma 2.5's Laplace admissibility),
which is why this count is only (ε, δ)-DP.

Noise and the privacy bound [ours, for the exact sampler]: the noise is fugu's exact discrete
Laplace on the integers with the data-dependent scale σ = S/α (rounded up by < 2^-20). With
``P_σ(k) = tanh(1/2σ) e^(−|k|/σ)``, the privacy-loss of output y between neighbours (x1, σ1) and
(x2, σ2) is at most ``|x1 − x2|/σ2 + ln(σ2/σ1)`` when σ2 ≥ σ1 (tanh(a)/a is decreasing), and at
most ``|x1 − x2|/σ2 + (σ1/σ2 − 1)·|y − x1|/σ1`` when σ2 < σ1. The shift term is ≤ α
(|x1 − x2| ≤ LS(G2) ≤ S(G2) = α σ2) and |σ1/σ2| ≤ e^λ, λ = β + 2^-19; ``|y − x1|/σ1 > t``
has probability at most ``e^(−t)(1 + 1/(2σ_min))``. So with ``t = ln((1 + 1/(2σ_min))/δ)`` the
loss is at most ``α + max(λ, (e^λ − 1) t) ≤ ε`` except with probability δ, which gives (ε, δ)-DP.
σ_min is a public lower bound (U with LS = a_max = 0). The bound is checked for every call; when
NRS's β does not fit (large δ), β is lowered to the largest value that does, and recorded.

Source: Karwa, Raskhodnikova, Smith, Yaroslavtsev, "Private analysis of graph structure",
PVLDB 4(11), 2011 (ACM TODS 39(3), 2014); Nissim, Raskhodnikova, Smith, STOC 2007 (smooth
sensitivity, admissible noise). The k-triangle growth bound D is the one the ladder-function
paper (Zhang et al., SIGMOD 2015) also uses for k-triangles.
"""

from __future__ import annotations

import math
from typing import Any

import networkx as nx
import numpy as np
import scipy.sparse as sp
from numpy.typing import NDArray

from ..budget import Accountant
from ..errors import InvalidParameterError, check_epsilon
from ..mechanism import guarantee, start
from ..noise import RandomSource, discrete_laplace, grid_power_tail
from .baselines import global_sensitivity
from .count_release import (
    GRAPH_NEIGHBOURS,
    CountRelease,
    nonnegative_release,
    warn_if_empty_graph,
)
from .patterns import _normalise, check_graph
from .smooth import check_beta, check_scale_range, power_tail_parameters, smooth_max

__all__ = [
    "karwa_count",
    "kstar_count",
    "kstar_sensitivity_at_distance",
    "kstar_smooth_sensitivity",
    "ktriangle_count",
    "ktriangle_local_sensitivity",
    "ktriangle_smooth_bound",
]

NEIGHBOURS = GRAPH_NEIGHBOURS["edge-dp"]
SOURCE = (
    "Karwa, Raskhodnikova, Smith, Yaroslavtsev, PVLDB 2011 (k-stars: smooth sensitivity; "
    "k-triangles: smooth upper bound, (ε, δ)); Nissim, Raskhodnikova, Smith, STOC 2007; "
    "baselines of Chen and Zhou 2013, Fig. 4"
)
#: Relative slack on the realised scale (the sampler rounds it up by < 2^-20; floating point).
_LAMBDA_SLACK = 2.0**-19


def _adjacency(G: nx.Graph) -> sp.csr_array:
    return nx.to_scipy_sparse_array(G, nodelist=list(G), weight=None, dtype=np.int64, format="csr")


def _lookup(mat: sp.csr_array, i: NDArray[np.int64], j: NDArray[np.int64]) -> NDArray[np.float64]:
    """mat[i, j] for index arrays (0 where the entry is absent), by sorted-key search."""
    coo = mat.tocoo()
    n = np.int64(mat.shape[1])
    keys = coo.row.astype(np.int64) * n + coo.col.astype(np.int64)
    order = np.argsort(keys)
    keys, vals = keys[order], np.asarray(coo.data, dtype=np.float64)[order]
    want = np.asarray(i, dtype=np.int64) * n + np.asarray(j, dtype=np.int64)
    pos = np.minimum(np.searchsorted(keys, want), max(keys.size - 1, 0))
    hit = (keys[pos] == want) if keys.size else np.zeros(want.shape, bool)
    return np.where(hit, vals[pos] if keys.size else 0.0, 0.0)


def _comb(a: NDArray[np.int64], r: int) -> NDArray[np.float64]:
    """C(a, r) elementwise as floats (0 where a < r or a < 0; 1 for r = 0 and a >= 0)."""
    a = np.asarray(a, dtype=np.int64)
    if r < 0:
        return np.zeros(a.shape)
    out = np.ones(a.shape)
    for i in range(r):
        out = out * (a - i) / (i + 1)
    return np.where(a >= r, out, 0.0)


def _exact_sum_comb(values: NDArray[np.int64], r: int) -> int:
    """Σ C(v, r) exactly (Python ints), over distinct values."""
    vals, counts = np.unique(np.asarray(values, dtype=np.int64), return_counts=True)
    return sum(math.comb(int(v), r) * int(c) for v, c in zip(vals, counts, strict=True) if v >= r)


# -- k-stars -------------------------------------------------------------------------------------
def _pareto_pairs(adj: sp.csr_array, deg: NDArray[np.int64]) -> NDArray[np.int64]:
    """(x, y), x ≥ y, for the pairs that can maximise a function increasing in both degrees
    without their shared edge: per node, its best adjacent and its best non-adjacent partner."""
    n = deg.size
    order = np.argsort(-deg, kind="stable").tolist()
    degree = deg.tolist()
    indptr, indices = adj.indptr, adj.indices
    pairs: list[tuple[int, int]] = []
    best_min = -1
    for i in order:
        di = degree[i]
        if di <= best_min:
            break  # every pair with i as its larger end is dominated by one found already
        nbrs = set(indices[indptr[i] : indptr[i + 1]].tolist())
        got_adj = got_non = False
        for j in order:
            if j == i:
                continue
            if j in nbrs and not got_adj:
                pairs.append((di - 1, degree[j] - 1))
                got_adj = True
            elif j not in nbrs and not got_non:
                pairs.append((di, degree[j]))
                got_non = True
            if got_adj and got_non:
                break
        if pairs:
            best_min = max(best_min, max(min(p) for p in pairs))
    if n < 2:
        return np.zeros((0, 2), np.int64)
    arr = np.array(pairs, dtype=np.int64)
    return np.sort(arr, axis=1)[:, ::-1]


def kstar_sensitivity_at_distance(G: nx.Graph, k: int = 2) -> NDArray[np.float64]:
    """LS^(s) of the k-star count for s = 0, 1, …, 2(n−2) (constant beyond).

    >>> import networkx as nx
    >>> kstar_sensitivity_at_distance(nx.empty_graph(4), 2).tolist()   # C(s1,1) + C(s2,1)
    [0.0, 1.0, 2.0, 3.0, 4.0]
    """
    check_graph(G)
    n = G.number_of_nodes()
    if n < 2:
        raise InvalidParameterError(f"G has {n} node(s); a k-star count needs at least 2")
    adj = _adjacency(G)
    deg = np.asarray(adj.sum(axis=1)).ravel().astype(np.int64)
    return _kstar_profile(_pareto_pairs(adj, deg), n, k)


def _kstar_profile(pairs: NDArray[np.int64], n: int, k: int) -> NDArray[np.float64]:
    cap = n - 2
    s = np.arange(2 * cap + 1, dtype=np.int64)[None, :]
    x, y = pairs[:, :1], pairs[:, 1:]
    s1 = np.minimum(s, cap - x)
    s2 = np.minimum(s - s1, cap - y)
    vals = _comb(x + s1, k - 1) + _comb(y + s2, k - 1)
    return np.asarray(vals.max(axis=0), dtype=np.float64)


def kstar_smooth_sensitivity(G: nx.Graph, beta: float, k: int = 2) -> float:
    """β-smooth sensitivity ``max_s e^(−βs) LS^(s)`` of the k-star count (edge flips)."""
    check_beta(beta)
    return smooth_max(kstar_sensitivity_at_distance(G, k), beta)


def kstar_count(G: nx.Graph, k: int = 2) -> int:
    """The exact number of k-stars, Σ_v C(d_v, k) (not private)."""
    deg = np.array([d for _, d in G.degree], dtype=np.int64)
    return _exact_sum_comb(deg, k)


# -- k-triangles ---------------------------------------------------------------------------------
def _growth(a: NDArray[np.int64], k: int) -> NDArray[np.float64]:
    """D(a) = 3·C(a, k−1) + a·C(a, k−2): how much one edge flip can raise LS (Karwa et al.)."""
    return 3 * _comb(a, k - 1) + a * _comb(a, k - 2)


def _ktriangle_stats(G: nx.Graph, k: int) -> tuple[int, float, int]:
    """(exact k-triangle count, LS, a_max)."""
    adj = _adjacency(G)
    n = adj.shape[0]
    common = (adj @ adj).tocsr()
    common.setdiag(0)
    common.eliminate_zeros()
    a_max = int(common.data.max(initial=0))
    # count: Σ over edges of C(a_uv, k)
    edges = sp.triu(adj, k=1).tocoo()
    a_edge = _lookup(common, edges.row, edges.col).astype(np.int64)
    count = _exact_sum_comb(a_edge, k)
    # F_x[i, l] = C(a_il − x, k−1) on the edges il
    ec = adj.tocoo()
    a_il = _lookup(common, ec.row, ec.col).astype(np.int64)
    f0 = sp.csr_array((_comb(a_il, k - 1), (ec.row, ec.col)), shape=(n, n))
    f1 = sp.csr_array((_comb(a_il - 1, k - 1), (ec.row, ec.col)), shape=(n, n))
    af = adj.astype(np.float64)
    s0 = (f0 @ af).tocsr()  # Σ_l F0[i,l] A[l,j]
    s1 = (f1 @ af).tocsr()
    cc = sp.triu(common, k=1).tocoo()  # pairs with a common neighbour (others have δ = 0)
    i, j = cc.row, cc.col
    a_ij = cc.data.astype(np.int64)
    x_ij = _lookup(adj, i, j) > 0
    part0 = _lookup(s0, i, j) + _lookup(s0, j, i)
    part1 = _lookup(s1, i, j) + _lookup(s1, j, i)
    delta = _comb(a_ij, k) + np.where(x_ij, part1, part0)
    ls = float(delta.max(initial=0.0))
    return count, ls, a_max


def ktriangle_count(G: nx.Graph, k: int = 2) -> int:
    """The exact number of k-triangles, Σ_{edges uv} C(a_uv, k) (not private)."""
    check_graph(G)
    return _ktriangle_stats(G, k)[0]


def ktriangle_local_sensitivity(G: nx.Graph, k: int = 2) -> float:
    """LS of the k-triangle count under one edge flip, exactly (max over pairs of δ_ij)."""
    check_graph(G)
    return _ktriangle_stats(G, k)[1]


def _upper_profile(ls: float, a_max: int, n: int, k: int, gs: float, beta: float) -> float:
    """max_s e^(−βs) U(G, s), U = min(LS + Σ_{t<s} D(min(a_max + t, n−2)), GS)."""
    cap = n - 2
    best = ls
    s_max = 64
    while True:
        t = np.arange(s_max, dtype=np.int64)
        steps = _growth(np.minimum(a_max + t, cap), k)
        u = np.minimum(ls + np.concatenate([[0.0], np.cumsum(steps)]), gs)
        s = np.arange(u.size, dtype=np.float64)
        best = max(best, float(np.max(np.exp(-beta * s) * u)))
        # beyond s_max, U <= GS: the terms e^(-βs)·GS can no longer beat best
        if u[-1] >= gs or math.exp(-beta * s_max) * gs <= best:
            return best
        s_max *= 2


def ktriangle_smooth_bound(G: nx.Graph, beta: float, k: int = 2) -> float:
    """The β-smooth upper bound ``max_s e^(−βs) U(G, s)`` on the k-triangle LS (see the module)."""
    check_graph(G)
    n = G.number_of_nodes()
    gs = float(global_sensitivity("k-triangle", "edge", n=max(n, 2), k=k))
    _, ls, a_max = _ktriangle_stats(G, k)
    return _upper_profile(ls, a_max, n, k, gs, beta)


def _min_bound(n: int, k: int, gs: float, beta: float) -> float:
    """A public lower bound of the smooth upper bound over every graph on n nodes."""
    return _upper_profile(0.0, 0, n, k, gs, beta)


def ktriangle_parameters(
    epsilon: float, delta: float, n: int, k: int
) -> tuple[float, float, float, float]:
    """(α, β, σ_min, privacy-loss bound) of the (ε, δ) k-triangle release; checked before use."""
    eps = check_epsilon(epsilon)
    alpha = eps / 2
    gs = float(global_sensitivity("k-triangle", "edge", n=n, k=k))
    beta = eps / (2 * math.log(2 / delta))  # NRS / Karwa et al.
    sigma_min = _min_bound(n, k, gs, beta) / alpha
    t = math.log((1 + 1 / (2 * sigma_min)) / delta)

    def loss(b: float) -> float:
        lam = b + _LAMBDA_SLACK
        return alpha + max(lam, math.expm1(lam) * t)

    if loss(beta) > eps:
        # largest β with (e^λ − 1) t <= ε/2 (and λ <= ε/2): a smaller β only lowers the loss
        beta = min(math.log1p((eps - alpha) / t), eps - alpha) - 2 * _LAMBDA_SLACK
        if beta <= 0:
            raise InvalidParameterError(  # pragma: no cover - needs ε below ~1e-6
                f"epsilon = {eps:g} is too small for the (ε, δ) k-triangle count; use a larger "
                f"epsilon"
            )
        sigma_min = _min_bound(n, k, gs, beta) / alpha
    return alpha, beta, sigma_min, loss(beta)


# -- the release ---------------------------------------------------------------------------------
def karwa_count(
    G: nx.Graph,
    pattern: str,
    epsilon: float,
    *,
    k: int | None = None,
    delta: float | None = None,
    rng: RandomSource | None = None,
    accountant: Accountant | None = None,
    gamma: float = 4.0,
    nonnegative: bool = False,
) -> CountRelease:
    """Karwa et al.'s edge-DP k-star (ε-DP) or k-triangle ((ε, δ)-DP) count.

    Privacy model: ε-edge DP for ``"k-star"`` (``"2-star"``, …); (ε, δ)-edge DP for
    ``"k-triangle"`` (``"2-triangle"``, …; ``delta`` required). Neighbours add or remove one edge,
    the node set is public. Sensitivity: the β-smooth sensitivity of the k-star count (exact), or a
    β-smooth upper bound on the local sensitivity of the k-triangle count — both data-dependent and
    not published. See :mod:`fugu.graph.karwa` for the formulas and the privacy-loss bounds.
    Reachable as ``fugu.graph.count(G, pattern, epsilon, unit="edge", mechanism="karwa")``.

    Parameters
    ----------
    G : networkx.Graph
        Undirected simple graph; its node set is public.
    pattern : "k-star" or "k-triangle" (with ``k``), or a form like "2-star", "2-triangle"
    epsilon : float
    k : int >= 2, optional
        (k = 1 is refused: a 1-star is an edge, a 1-triangle a triangle; see ``mechanism=``.)
    delta : float in (0, 1)
        δ of the k-triangle count (the guarantee is then (ε, δ)); refused for k-stars.
    rng, accountant :
        Random source (secure by default); an accountant (model ``edge-dp``) charged ε (and, for
        the k-triangle count, δ) once before the graph is read.
    gamma : int-valued 2..6
        Tail exponent of the k-star noise (default 4).
    nonnegative : bool
        Clamp the release at 0 (post-processing, recorded in the guarantee).

    Examples
    --------
    >>> import networkx as nx, fugu
    >>> G = nx.karate_club_graph()
    >>> rel = fugu.graph.count(G, "2-star", 1.0, unit="edge", mechanism="karwa",
    ...                        rng=fugu.RandomSource(seed=0))
    >>> rel.guarantee.mechanism
    'Karwa et al. k-star (smooth sensitivity), power-tail noise'
    >>> rel = fugu.graph.count(G, "2-triangle", 1.0, unit="edge", mechanism="karwa",
    ...                        delta=1e-6, rng=fugu.RandomSource(seed=0))
    >>> rel.guarantee.parameters["delta"]
    1e-06
    """
    check_graph(G)
    if not isinstance(pattern, str):
        raise InvalidParameterError(
            f"mechanism='karwa' counts 'k-star' or 'k-triangle' patterns, got {pattern!r}"
        )
    name, kk = _normalise(pattern, k)
    n = G.number_of_nodes()
    if name in ("k-star", "k-triangle") and kk == 1:
        # Karwa et al.'s statistics at k = 1 are 2|E| (Σ_v d_v) and 3T (Σ_edges a_uv), not the
        # edge and triangle counts the other mechanisms answer, and the k-triangle bound's cap
        # (the pattern's GS, n − 2 for a triangle) is below 3T's (3(n − 2)): refused
        what, instead = {
            "k-star": ("an edge", "'edge' with mechanism='laplace'"),
            "k-triangle": (
                "a triangle",
                "'triangle' with mechanism='smooth' (Nissim et al.'s smooth sensitivity)",
            ),
        }[name]
        raise InvalidParameterError(
            f"mechanism='karwa' counts {name}s with k >= 2, got k=1: a 1-{name[2:]} is {what}; "
            f"count pattern {instead}"
        )
    if name == "k-star":
        if delta is not None:
            raise InvalidParameterError(
                "the Karwa et al. k-star count is pure ε-DP; drop delta= (only the k-triangle "
                "count takes it)"
            )
        return _kstar_release(G, kk, epsilon, rng, accountant, gamma, nonnegative)
    if name == "k-triangle":
        if delta is None:
            raise InvalidParameterError(
                "the Karwa et al. k-triangle count is (ε, δ)-DP: pass delta= (e.g. 1e-6; the "
                "Recursive Mechanism paper's Figure 4 uses 0.1)"
            )
        d = _check_delta(delta)
        return _ktriangle_release(G, kk, epsilon, d, rng, accountant, nonnegative, n)
    raise InvalidParameterError(
        f"mechanism='karwa' counts k-stars and k-triangles, got {pattern!r} (for triangles use "
        f"mechanism='smooth', for other patterns mechanism='recursive')"
    )


def _check_delta(delta: Any) -> float:
    if isinstance(delta, bool) or not isinstance(delta, int | float | np.floating):
        raise InvalidParameterError(f"delta must be a number in (0, 1), got {delta!r}")
    d = float(delta)
    if not (0 < d < 1) or not math.isfinite(d):
        raise InvalidParameterError(
            f"delta must be in (0, 1), got {delta!r}; typical values are below 1/(number of "
            f"edges), e.g. 1e-6"
        )
    return d


def _kstar_release(
    G: nx.Graph,
    k: int,
    epsilon: float,
    rng: RandomSource | None,
    accountant: Accountant | None,
    gamma: float,
    nonnegative: bool,
) -> CountRelease:
    gam, alpha, beta, loss = power_tail_parameters(epsilon, gamma)
    n = G.number_of_nodes()
    if n < k + 1:
        raise InvalidParameterError(
            f"G has {n} node(s); a {k}-star needs {k + 1}, so the count is 0 on every graph "
            f"with this node set (no privacy needed)"
        )
    gs = float(global_sensitivity("k-star", "edge", n=n, k=k))
    check_scale_range(gs / alpha, float(epsilon), f"the {k}-star count")
    warn_if_empty_graph(G, "edge")  # released like its neighbours (count 0 plus noise)
    eps, source = start(
        epsilon, rng, accountant, f"karwa: {k}-star count (ε-edge DP)", model="edge-dp"
    )
    true, scale = kstar_count_and_scale(G, k, alpha, beta)
    noisy, _ = grid_power_tail(true, scale, gam, source, min_scale=kstar_min_scale(k, alpha, beta))
    g = guarantee(
        model="edge-dp",
        epsilon=eps,
        neighbours=NEIGHBOURS,
        mechanism="Karwa et al. k-star (smooth sensitivity), power-tail noise",
        rng=source,
        sensitivity=None,
        source=SOURCE,
        parameters={
            "statistic": f"{k}-star count",
            "sensitivity": "smooth sensitivity S*_beta; data-dependent, not published",
            "noise": "h(z) ∝ 1/(1+|z|^gamma) on a power-of-two grid, scaled by S*_beta/alpha",
            "gamma": gam,
            "alpha": alpha,
            "beta": beta,
            "privacy_loss_bound": loss,
        },
    )
    rel = CountRelease(g, noisy, noise_std=None, statistic=f"{k}-star count")
    return nonnegative_release(rel) if nonnegative else rel


def kstar_count_and_scale(G: nx.Graph, k: int, alpha: float, beta: float) -> tuple[int, float]:
    """The exact k-star count and the noise scale S*_β/α (raised by 2^-40). **Private.**"""
    smooth = kstar_smooth_sensitivity(G, beta, k)
    return kstar_count(G, k), smooth / alpha * (1 + 2.0**-40)


def kstar_min_scale(k: int, alpha: float, beta: float) -> float:
    """Public lower bound of S*_β/α (n ≥ k+1): LS^(k−1) ≥ C(k−1, k−1) = 1 on any graph."""
    return math.exp(-beta * (k - 1)) / alpha / 2


def _ktriangle_release(
    G: nx.Graph,
    k: int,
    epsilon: float,
    delta: float,
    rng: RandomSource | None,
    accountant: Accountant | None,
    nonnegative: bool,
    n: int,
) -> CountRelease:
    if n < k + 2:
        raise InvalidParameterError(
            f"G has {n} node(s); a {k}-triangle needs {k + 2}, so the count is 0 on every graph "
            f"with this node set (no privacy needed)"
        )
    alpha, beta, sigma_min, loss = ktriangle_parameters(epsilon, delta, n, k)
    gs = float(global_sensitivity("k-triangle", "edge", n=n, k=k))
    check_scale_range(gs / alpha * (1 + 2.0**-30), float(epsilon), f"the {k}-triangle count")
    warn_if_empty_graph(G, "edge")  # released like its neighbours (count 0 plus noise)
    eps, source = start(
        epsilon,
        rng,
        accountant,
        f"karwa: {k}-triangle count ((ε, δ)-edge DP, δ = {delta:g})",
        model="edge-dp",
        delta=delta,
    )
    true, scale = ktriangle_count_and_scale(G, k, alpha, beta, gs)
    noisy = true + int(discrete_laplace(np.array([scale]), rng=source)[0])
    g = guarantee(
        model="edge-dp",
        epsilon=eps,
        neighbours=NEIGHBOURS,
        mechanism=f"Karwa et al. k-triangle ((ε, δ)-DP, δ = {delta:g}), Laplace noise",
        rng=source,
        delta=delta,
        sensitivity=None,
        source=SOURCE,
        parameters={
            "statistic": f"{k}-triangle count",
            "delta": delta,
            "guarantee": f"(ε, δ)-edge DP with ε = {eps:g}, δ = {delta:g} (not pure ε-DP)",
            "sensitivity": "smooth upper bound on LS; data-dependent, not published",
            "noise": "exact discrete Laplace on the integers, scale S/alpha",
            "alpha": alpha,
            "beta": beta,
            "privacy_loss_bound": loss,
        },
    )
    rel = CountRelease(g, float(noisy), noise_std=None, statistic=f"{k}-triangle count")
    return nonnegative_release(rel) if nonnegative else rel


def ktriangle_count_and_scale(
    G: nx.Graph, k: int, alpha: float, beta: float, gs: float
) -> tuple[int, float]:
    """The exact k-triangle count and the noise scale S/α (raised by 2^-30). **Private.**"""
    count, ls, a_max = _ktriangle_stats(G, k)
    bound = _upper_profile(ls, a_max, G.number_of_nodes(), k, gs, beta)
    return count, bound / alpha * (1 + 2.0**-30)
