"""The per-iteration queries of private k-means: their sensitivities, their budget, their release.

Each Lloyd iteration asks two queries of the data: the cluster sizes q_size and the per-cluster
coordinate sums q_sum, centred at the box centre. This module holds, in reading order:

* their sensitivities under a policy's secret graph (:func:`qsize_sensitivity`,
  :func:`qsum_sensitivity`; closed forms on the grid, ``mode="safe"`` or the paper's values);
* the public plan of the fit: how many iterations and each one's q_size share (:func:`su_plan`,
  Su et al. 2016), and each iteration's ε split (:class:`IterationPlan`);
* the noisy release of one iteration (:func:`release_iteration`: geometric noise on the sizes,
  grid Laplace on the sums, both from :mod:`fugu.noise`).

The privacy model, neighbour relation and sources are stated in :mod:`fugu.blowfish.kmeans`.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import ArrayLike, NDArray

from ..domain import Domain
from ..errors import (
    InvalidParameterError,
    PolicyError,
)
from ..noise import (
    GRID_EXACT_UNITS,
    RandomSource,
    geometric_mechanism,
    grid_capacity,
    grid_exact_cap,
    grid_granularity,
    grid_laplace,
)
from .kmeans_grid import (
    KMeansGrid,
    SecretGraph,
    _attr_block_ids,
    _bottom_reach,
    _has_edges,
    secret_graph,
)

__all__ = [
    "MODES",
    "qsize_sensitivity",
    "qsum_sensitivity",
    "kmeans_sensitivities",
    "IterationPlan",
    "release_iteration",
    "KMeansPlan",
    "su_plan",
    "check_sum_range",
    "sum_cap",
    "sum_grid",
]


MODES = ("safe", "paper")


def _uniform(c: NDArray[np.float64]) -> bool:
    return c.size < 3 or bool(np.allclose(np.diff(c), c[1] - c[0]))


def _gap(c: NDArray[np.float64]) -> NDArray[np.float64]:
    """gap[s] = max_j c[j+s] − c[j]: the largest coordinate change of an s-cell move."""
    m = c.size
    if _uniform(c):
        return np.arange(m) * (c[1] - c[0] if m > 1 else 0.0)
    return np.array([float(np.max(c[s:] - c[: m - s])) for s in range(m)])


def _pair(c: NDArray[np.float64], o: float) -> NDArray[np.float64]:
    """pair[s] = max_j |c[j] − o| + |c[j+s] − o|: the cross-cluster change of an s-cell move."""
    g = np.abs(c - o)
    m = c.size
    if _uniform(c):
        s = np.arange(m)
        # g(j) + g(j+s) is convex in j on a uniform grid: the maximum is at an end.
        return np.maximum(g[0] + g[s], g[m - 1 - s] + g[m - 1])
    return np.array([float(np.max(g[: m - s] + g[s:])) for s in range(m)])


def _best_moves(
    values: Sequence[NDArray[np.float64]], costs: Sequence[NDArray[np.float64]], budget: float
) -> float:
    """max Σ_A values[A][s_A] subject to Σ_A costs[A][s_A] <= budget and some s_A >= 1.

    Exact: a Pareto (cost, value) dynamic programme over the attributes, tracking whether some
    attribute has moved yet. ``costs[A][0]`` is 0.
    """
    tol = 1e-9 * max(1.0, budget)
    # frontiers: (cost array, value array) for "nothing moved" and "something moved"
    still = (np.zeros(1), np.zeros(1))
    moved = (np.zeros(0), np.zeros(0))
    for v, c in zip(values, costs, strict=True):
        ok = c <= budget + tol
        v, c = v[ok], c[ok]
        new_still = (still[0] + c[0], still[1] + v[0])
        parts_c = [moved[0][:, None] + c[None, :], still[0][:, None] + c[None, 1:]]
        parts_v = [moved[1][:, None] + v[None, :], still[1][:, None] + v[None, 1:]]
        mc = np.concatenate([p.reshape(-1) for p in parts_c])
        mv = np.concatenate([p.reshape(-1) for p in parts_v])
        keep = mc <= budget + tol
        moved = _pareto(mc[keep], mv[keep])
        still = new_still
    return float(np.max(moved[1])) if moved[1].size else 0.0


def _best_cross(
    values: Sequence[NDArray[np.float64]], costs: Sequence[NDArray[np.float64]], budget: float
) -> float:
    """:func:`_best_moves` for values whose maximum is at 0 steps (the cross-cluster term:
    pair[s] <= pair[0] = 2·max|c − o|): the best moves keep every attribute but one still, so
    one pass per attribute replaces the Pareto programme (θ² memory: 3.4 GB and 18 s for
    θ = 8000 on an 8000 × 8000 grid). The same float operations in the same order, and the same
    budget test, so the same value."""
    tol = 1e-9 * max(1.0, budget)
    best = None
    for j, (vj, cj) in enumerate(zip(values, costs, strict=True)):
        ok = cj[1:] <= budget + tol
        if not ok.any():
            continue
        top = float(np.max(vj[1:][ok]))
        total = 0.0
        for i, v in enumerate(values):
            total += top if i == j else float(v[0])
        best = total if best is None else max(best, total)
    return 0.0 if best is None else best


def _reach_bound(
    values: Sequence[NDArray[np.float64]], costs: Sequence[NDArray[np.float64]], budget: float
) -> float:
    """An upper bound of :func:`_best_moves` for values non-decreasing in the steps (the
    same-cluster gaps): every attribute at its largest affordable move, summed in the same
    order (float addition is monotone, so it bounds the programme's value too)."""
    tol = 1e-9 * max(1.0, budget)
    total = 0.0
    for v, c in zip(values, costs, strict=True):
        total += float(np.max(v[c <= budget + tol]))
    return total


def _pareto(
    cost: NDArray[np.float64], value: NDArray[np.float64]
) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
    if cost.size == 0:
        return cost, value
    order = np.lexsort((-value, cost))
    cost, value = cost[order], value[order]
    best = np.maximum.accumulate(value)
    keep = np.ones(cost.size, bool)
    keep[1:] = value[1:] > best[:-1]
    return cost[keep], value[keep]


def _block_diameter(graph: SecretGraph, grid: KMeansGrid) -> float:
    """Largest L1 diameter of a partition block (in coordinate units)."""
    if graph.cell_blocks is None:
        # product blocks: the widest block of every attribute can be combined
        total = 0.0
        for c, ids in zip(grid.coords, _attr_block_ids(graph, grid), strict=True):
            nb = int(ids.max()) + 1
            hi = np.full(nb, -np.inf)
            lo = np.full(nb, np.inf)
            np.maximum.at(hi, ids, c)
            np.minimum.at(lo, ids, c)
            total += float(np.max(hi - lo))
        return total
    ids = graph.cell_blocks
    pts = grid.all_points()
    nb = int(ids.max()) + 1
    best = 0.0
    # L1 diameter of a point set = max over sign vectors σ of (max σ·x − min σ·x)
    for signs in itertools.product([1.0, -1.0], repeat=grid.dim):
        proj = pts @ np.asarray(signs)
        hi = np.full(nb, -np.inf)
        lo = np.full(nb, np.inf)
        np.maximum.at(hi, ids, proj)
        np.minimum.at(lo, ids, proj)
        best = max(best, float(np.max(hi - lo)))
    return best


def _edge_maxima(graph: SecretGraph, grid: KMeansGrid, mode: str = "paper") -> tuple[float, float]:
    """(max ‖x − y‖₁, max ‖x − o‖₁ + ‖y − o‖₁) over the graph's cell–cell edges. In ``safe``
    mode, where only the larger counts, the first may be an upper bound that is still at most
    the second (‖x − y‖₁ <= ‖x − o‖₁ + ‖y − o‖₁)."""
    if not _has_edges(graph, grid):
        return 0.0, 0.0
    gaps = [_gap(c) for c in grid.coords]
    pairs = [_pair(c, float(o)) for c, o in zip(grid.coords, grid.centre, strict=True)]
    steps = [np.arange(m, dtype=np.float64) for m in grid.sizes]
    if graph.kind == "full":
        # opposite corners: both terms reach d(T) (same as the knapsack with an unlimited budget)
        return grid.diameter, grid.diameter
    if graph.kind == "attribute":
        movable = [j for j, m in enumerate(grid.sizes) if m > 1]
        same = max(float(gaps[j][-1]) for j in movable)
        base = sum(float(p[0]) for p in pairs)
        cross = max(base - float(pairs[j][0]) + float(np.max(pairs[j][1:])) for j in movable)
        return same, cross
    if graph.kind == "distance":
        theta = float(graph.theta or 0)
        w = graph.weights or (1.0,) * grid.dim
        costs = [s * wj for s, wj in zip(steps, w, strict=True)]
        if graph.metric == "l1":
            cross = _best_cross(pairs, costs, theta)
            if mode == "safe":
                bound = _reach_bound(gaps, costs, theta)
                if bound <= cross:  # the same-cluster programme cannot exceed cross
                    return bound, cross
            return _best_moves(gaps, costs, theta), cross
        # L∞: every attribute may move up to θ / w_A cells independently
        reach = [c <= theta + 1e-12 for c in costs]
        same = sum(float(np.max(g[r])) for g, r in zip(gaps, reach, strict=True))
        bases = [float(np.max(p[r])) for p, r in zip(pairs, reach, strict=True)]
        one = [
            float(np.max(p[1:][r[1:]])) if r[1:].any() else -np.inf
            for p, r in zip(pairs, reach, strict=True)
        ]
        cross = max(sum(bases) - b + o for b, o in zip(bases, one, strict=True))
        return same, cross
    if graph.kind == "explicit":
        assert graph.edges is not None
        e = graph.edges[graph.edges.min(axis=1) >= 0]
        a = grid.to_points(np.stack(np.unravel_index(e[:, 0], grid.sizes), axis=1))
        b = grid.to_points(np.stack(np.unravel_index(e[:, 1], grid.sizes), axis=1))
        o = grid.centre
        same = float(np.max(np.sum(np.abs(a - b), axis=1)))
        cross = float(np.max(np.sum(np.abs(a - o), axis=1) + np.sum(np.abs(b - o), axis=1)))
        return same, cross
    # partitions are handled by the callers (block diameter)
    raise PolicyError(f"no edge maxima for graph kind {graph.kind!r}")


def qsize_sensitivity(policy: Any, domain: Domain | KMeansGrid, mode: str = "safe") -> float:
    """S(q_size, P): L1 change of the vector of cluster sizes for one neighbouring pair.

    2 when a secret pair can straddle a cluster boundary (a record leaves one cluster and joins
    another); 0 when none can — a graph without edges, or a partition in ``safe`` mode (fugu
    assigns whole blocks to clusters); at least 1 when records may be added or removed (⊥).
    ``paper`` mode reports 2 for every policy with edges, as CACM (pg 68) does.

    >>> import fugu
    >>> dom = fugu.Domain([fugu.Ordinal("x", 0, 9)])
    >>> qsize_sensitivity("distance:theta=2", dom), qsize_sensitivity("partition:x=5", dom)
    (2.0, 0.0)
    """
    grid, graph, mode = _resolve(policy, domain, mode)
    edge = 0.0
    if _has_edges(graph, grid) and not (graph.kind == "partition" and mode == "safe"):
        edge = 2.0
    bottom = 1.0 if _bottom_reach(graph, grid) >= 0 else 0.0
    return max(edge, bottom)


def qsum_sensitivity(policy: Any, domain: Domain | KMeansGrid, mode: str = "safe") -> float:
    """S(q_sum, P): L1 change of the (k × d) per-cluster sums, centred at the box centre o.

    ``safe``: the max over the graph's edges (x, y) of ‖x − y‖₁ (both in one cluster) and
    ‖x − o‖₁ + ‖y − o‖₁ (a move that changes cluster); for partitions the largest block
    diameter (blocks are assigned whole, so never straddle clusters); ‖y − o‖₁ for a record y
    that may be added or removed (⊥). ``paper``: the same-cluster term only — θ for G^{d,θ}
    (one cell = one unit), max_A |A| for G^attr, the block diameter for G^P, d(T) for G^full.
    Exact on the grid (a Pareto knapsack over per-attribute moves of s cells).

    >>> import fugu
    >>> dom = fugu.Domain([fugu.Ordinal("x", 0, 100), fugu.Ordinal("y", 0, 100)])
    >>> qsum_sensitivity(None, dom), qsum_sensitivity("distance:theta=5", dom, mode="paper")
    (200.0, 5.0)
    >>> qsum_sensitivity("distance:theta=5", dom)   # a boundary-straddling move near a corner
    199.0
    """
    grid, graph, mode = _resolve(policy, domain, mode)
    if graph.kind == "partition":
        edge = _block_diameter(graph, grid) if _has_edges(graph, grid) else 0.0
    else:
        same, cross = _edge_maxima(graph, grid, mode)
        edge = same if mode == "paper" else max(same, cross)
    return max(edge, _bottom_reach(graph, grid), 0.0)


def kmeans_sensitivities(
    policy: Any, domain: Domain | KMeansGrid, mode: str = "safe"
) -> tuple[float, float]:
    """``(S(q_size, P), S(q_sum, P))`` for k-means on ``domain`` under ``policy``."""
    return qsize_sensitivity(policy, domain, mode), qsum_sensitivity(policy, domain, mode)


def _resolve(
    policy: Any, domain: Domain | KMeansGrid, mode: str
) -> tuple[KMeansGrid, SecretGraph, str]:
    if mode not in MODES:
        raise InvalidParameterError(f"sensitivity mode must be 'safe' or 'paper', got {mode!r}")
    grid = domain if isinstance(domain, KMeansGrid) else KMeansGrid.from_domain(domain)
    return grid, secret_graph(policy, grid), mode


@dataclass(frozen=True)
class IterationPlan:
    """Public calibration of one iteration: ε shares and sensitivities of q_size and q_sum."""

    eps_size: float
    eps_sum: float
    sens_size: float
    sens_sum: float

    @classmethod
    def split(
        cls, eps_iter: float, sens_size: float, sens_sum: float, size_fraction: float
    ) -> IterationPlan:
        if sens_size == 0:
            return cls(0.0, eps_iter, 0.0, sens_sum)
        if sens_sum == 0:
            return cls(eps_iter, 0.0, sens_size, 0.0)
        return cls(eps_iter * size_fraction, eps_iter * (1 - size_fraction), sens_size, sens_sum)


def release_iteration(
    sizes: ArrayLike,
    sums: ArrayLike,
    plan: IterationPlan,
    rng: RandomSource,
    repeats: int | None = None,
) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
    """Noisy (q_size, q_sum) of one iteration: the only place k-means touches noise.

    ``sizes`` (k,) are exact integer cluster sizes, ``sums`` (k, d) exact centred coordinate
    sums. q_size gets discrete Laplace noise of scale ``sens_size / eps_size``
    (:func:`fugu.noise.geometric_mechanism`); q_sum is rounded to a power-of-two grid and gets
    discrete Laplace noise of scale ``sens_sum / eps_sum`` (:func:`fugu.noise.grid_laplace`, at
    most 2d coordinates change per neighbour pair). A zero sensitivity releases the value
    exactly. ``repeats`` draws that many independent releases at once (shape (repeats, ...)),
    which the privacy audit uses.
    """
    s = np.asarray(sizes, dtype=np.int64)
    q = np.asarray(sums, dtype=np.float64)
    if repeats is not None:
        s = np.broadcast_to(s, (repeats, *s.shape))
        q = np.broadcast_to(q, (repeats, *q.shape))
    if plan.sens_size > 0:
        noisy_sizes = geometric_mechanism(s, plan.sens_size, plan.eps_size, rng).astype(np.float64)
    else:
        noisy_sizes = s.astype(np.float64)
    if plan.sens_sum > 0:
        d = q.shape[-1]
        noisy_sums, _ = grid_laplace(q, plan.sens_sum, plan.eps_sum, rng, max_changed=2 * d)
    else:
        noisy_sums = q.astype(np.float64).copy()
    return noisy_sizes, noisy_sums


def sum_grid(grid: KMeansGrid, k: int, sens_sum: float) -> float:
    """The noise grid step of q_sum (public): what :func:`release_iteration`'s
    ``grid_laplace(..., max_changed=2d)`` uses for k·d sums."""
    return float(grid_granularity(sens_sum, _sum_changed(grid, k)))


def _sum_changed(grid: KMeansGrid, k: int) -> int:
    """How many of the k·d sums one neighbour changes (a point leaves one cluster for another:
    2d), as :func:`release_iteration` tells :func:`~fugu.noise.grid_laplace`."""
    d = grid.dim
    return max(1, min(2 * d, k * d))


def check_sum_range(n: int, grid: KMeansGrid, k: int, sens_sum: float) -> None:
    """Refuse, before any budget is spent, data whose centred sums could leave the noise grid's
    range (:func:`fugu.noise.grid_laplace` accepts |value| <= 2^62 grid units and raised beyond
    it inside :func:`release_iteration`, after the charge, on the data: two neighbours whose
    sums straddle the limit were told apart with probability 1). Every centred sum of attribute
    j is at most ``n · max_v |coords_j[v] − o_j|`` = ``n · width_j / 2``, and the grid depends
    only on (sensitivity, changed coordinates), so the check uses only the number of points, as
    Privelet's does. Only for a public n (no ⊥): refusing on a private n tells neighbours apart
    (a record added at a ⊥ value crosses the bound); then the sums are clamped to
    :func:`sum_cap` instead."""
    if sens_sum <= 0:
        return
    # exact doubles on the grid (exact_centred_sums rounds the sums onto it)
    gamma, limit = grid_capacity(sens_sum, _sum_changed(grid, k), GRID_EXACT_UNITS)
    reach = float(np.max(np.abs(grid.high - grid.low))) / 2.0
    if float(n) * reach > limit:
        raise InvalidParameterError(
            f"X: the noise grid of the cluster sums ({gamma:g}, q_sum sensitivity {sens_sum:g}) "
            f"holds sums up to {limit:.6g}, and points reach {reach:g} from the box centre, so at "
            f"most {limit / reach:.6g} points fit and X has more; use a coarser policy (larger "
            f"blocks or theta), or rescale the attributes"
        )


def sum_cap(grid: KMeansGrid, k: int, sens_sum: float) -> float:
    """The largest |centred sum| q_sum's noise grid holds exactly (a multiple of its step,
    public): where n is private (⊥ in the policy, SQL rows) the exact sums are clamped to
    ``±sum_cap`` before the noise instead of refusing on n (:func:`check_sum_range`). Clamping
    is 1-Lipschitz in every coordinate, so the sensitivity still bounds the change; only sums
    of more points than the grid holds (``sum_cap / (width/2)`` of them) are changed."""
    return grid_exact_cap(sens_sum, _sum_changed(grid, k))


#: Su et al. (2016): the typical |centred coordinate| of a cluster centre as a fraction of its
#: attribute's width (their ρ = 0.225 on coordinates normalised to [−1, 1]).
SU_RHO = 0.225


#: Su et al.'s bounds on the number of noisy Lloyd updates.
SU_MIN_ITER, SU_MAX_ITER = 2, 7


@dataclass(frozen=True)
class KMeansPlan:
    """Public choice of the number of iterations and of each iteration's q_size share.

    ``eps_m`` is Su et al.'s per-iteration ε below which one more iteration costs more (noise)
    than it gains (convergence); ``rule`` says how each value was chosen.
    """

    n_iter: int
    size_fraction: float
    eps_m: float
    rule: str


def su_plan(
    n: int | None,
    k: int,
    widths: ArrayLike,
    epsilon: float,
    sens_size: float,
    sens_sum: float,
) -> KMeansPlan:
    """Iterations and q_size/q_sum split from n, d, k, ε and the sensitivities (Su, Cao, Li,
    Bertino, Jin, "Differentially private k-means clustering", CODASPY 2016 — the analysis
    behind DPLloyd and diffprivlib's KMeans), generalised to fugu's neighbours and policies.

    Coordinates are normalised to [−1, 1] (attribute j has width ``w_j``). A noisy centre
    ``(S + η)/(N + ν)`` has squared error about ``(‖η‖² + ‖μ‖²ν²)/N²``: with L1 noise of scale
    ``S_sum/ε_sum`` on every coordinate of the sums and ``S_size/ε_size`` on the sizes this is
    ``a/ε_sum² + b/ε_size²`` up to 2/N², with ``a = Σ_j (2·S_sum/w_j)²`` and
    ``b = d·(2ρ)²·S_size²`` (ρ = 0.225: Su et al.'s typical normalised centre coordinate).
    The best split gives the sizes ``b^{1/3}/(a^{1/3} + b^{1/3})`` of each iteration's ε and
    the error ``K/ε_it²`` with ``K = (a^{1/3} + b^{1/3})³``. Su et al. fix the number of
    updates ``T = ε/ε_m``, ``ε_m = sqrt(500·k³/n²·K)``, clipped to 2..7; their own setting
    (add/remove neighbours, centred sums) is ``a = d³``, ``b = 4dρ²`` — exactly the
    ``(d + ∛(4dρ²))³`` of diffprivlib's ``_calc_iters``. Under fugu's replace-one neighbours
    ``S_size = 2`` and ``S_sum = d(T)`` (a and b four times larger, so ε_m twice); under a
    Blowfish partition ``S_size = 0`` and all of ε goes to the sums. ``n=None`` (n is private:
    the policy adds or removes records) uses the minimum, 2 updates. Public computation only.
    """
    w = np.asarray(widths, dtype=np.float64).reshape(-1)
    d = w.size
    w = np.where(w > 0, w, 1.0)
    a = float(np.sum((2.0 * sens_sum / w) ** 2))
    b = float(d * (2.0 * SU_RHO) ** 2 * sens_size**2)
    if b == 0:
        frac, how_split = 0.0, "q_size released exactly: all of each iteration's ε to q_sum"
    elif a == 0:
        frac, how_split = 1.0, "q_sum released exactly: all of each iteration's ε to q_size"
    else:
        r = (b / a) ** (1 / 3)
        frac = r / (1 + r)
        how_split = "Su et al. 2016 split b^(1/3)/(a^(1/3)+b^(1/3))"
    big_k = (a ** (1 / 3) + b ** (1 / 3)) ** 3
    if n is None or n <= 0:
        return KMeansPlan(
            SU_MIN_ITER, frac, math.inf, f"{SU_MIN_ITER} updates (n is private); {how_split}"
        )
    eps_m = math.sqrt(500.0 * k**3 / float(n) ** 2 * big_k)
    iters = int(min(max(epsilon / eps_m, SU_MIN_ITER), SU_MAX_ITER))
    return KMeansPlan(
        iters,
        frac,
        eps_m,
        f"Su et al. 2016: T = ε/ε_m clipped to {SU_MIN_ITER}..{SU_MAX_ITER}, ε_m = "
        f"{eps_m:.3g}; {how_split}",
    )
