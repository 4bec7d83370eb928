"""Policy-specific sensitivity ``S(f, P)`` of linear queries, with and without constraints.

Definition (He, Machanavajjhala, Ding, Blowfish Privacy, SIGMOD 2014, seed ``000_…``, §5):
``S(f, P) = max over neighbouring databases (D1, D2) ∈ N(P) of ||f(D1) − f(D2)||_1``. Adding
Laplace noise of scale ``S(f, P)/ε`` to every output of ``f`` is ``(ε, P)``-Blowfish private
(the paper's Theorem 5.1); ``S(f, P) <= S(f)`` always, with equality for the complete graph.

Without constraints, neighbours move one record along one secret edge ``(x, y)``, so for a linear
query with matrix ``W`` (one column per cell) ``S(f, P) = max_{(x,y) ∈ E} ||W[:, x] − W[:, y]||_1``
(and ``max_x ||W[:, x]||_1`` over cells joined to ⊥). fugu evaluates this maximum

* in closed form where the structure allows (histogram: 2; histogram over a coarsening: 2 or 0;
  cumulative histogram: the largest rank gap of an edge — θ for ``G^{d,θ}``, 1 for the line
  graph; sums of attribute values: the largest L1 length of an edge);
* otherwise edge family by edge family without listing ``|T|²`` pairs: distance and attribute
  graphs offset by offset (a range workload costs ``O(|T| + m·2^d)`` per offset through
  coverage counts of shifted boxes), partition graphs block by block, the complete graph by the
  L1 diameter of the columns (exact by the sign-vector identity when ``m <= 12``);
* :func:`brute_force_sensitivity` enumerates every database of ``n`` records and every
  neighbouring pair (the definition itself, including constraints and minimality) — the test
  oracle for small domains.

With public count constraints (§8 of the paper) a neighbour may need several moves to keep the
constraints true. For *sparse* constraints (every move lifts at most one and lowers at most one
constrained count) the paper builds the policy graph ``G_P`` (a vertex per constrained count,
plus ``v+`` and ``v−``; a move ``x → y`` is an arc from the count it lowers — or ``v+`` — to the
count it lifts — or ``v−``) and proves ``S(h, P) = 2·max(α(G_P), ξ(G_P))`` for the histogram,
with ``α`` the longest simple cycle and ``ξ`` the longest simple ``v+ → v−`` path (in arcs).
Closed forms: one marginal under the complete graph ``2·size(C)``; disjoint marginals under the
attribute graph ``2·max_i size(C_i)``; disjoint ranges under the line graph
``2·(maxcomp(Q) + 1)``. Small graphs are searched exactly; otherwise fugu uses the safe upper
bound ``2·(|Q| + 1)``. Deciding the sensitivity under general constraints is NP-hard (the
paper's §8), so non-sparse constraints get a :class:`~fugu.PolicyError`. For other linear
queries under constraints fugu uses ``max(α, ξ)·S(f, P without constraints)`` (each neighbour is
at most that many single moves) — an upper bound, reported as such.

>>> import fugu
>>> from fugu.blowfish import Policy, sensitivity
>>> dom = fugu.Domain([fugu.Ordinal("age", 0, 99)])
>>> sensitivity("cumulative", Policy.line(dom)), sensitivity("cumulative", Policy.full(dom))
(1.0, 99.0)
>>> sensitivity("cumulative", Policy.distance_threshold(dom, 5))
5.0
>>> sensitivity("histogram", Policy.partition(dom, {"age": 10}))
2.0
>>> sensitivity(Coarsening({"age": 10}), Policy.partition(dom, {"age": 10}))
0.0
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from numpy.typing import ArrayLike, NDArray

from ..domain import Domain, Ordinal
from ..errors import DomainError, InvalidParameterError, InvalidTypeError, PolicyError
from ..queries import RangeQuery, Workload
from .constraints import CountConstraint, MarginalConstraint
from .policy import Policy

__all__ = [
    "Coarsening",
    "CumulativeHistogram",
    "HistogramQuery",
    "PolicyGraph",
    "SensitivityResult",
    "SumQuery",
    "brute_force_sensitivity",
    "constrained_histogram_sensitivity",
    "policy_graph",
    "query_matrix",
    "sensitivity",
]

#: Pairwise evaluation is refused beyond this many (edge × query) operations.
MAX_PAIR_WORK = 2_000_000_000
#: Exact longest-cycle/path search on policy graphs up to this many constrained counts.
MAX_EXACT_QUERIES = 16
#: Dense query matrices (outputs × cells) up to this many entries in the exact constrained paths.
MAX_DENSE_CELLS = 20_000_000


# ----------------------------------------------------------------------------------------------
# query descriptions
# ----------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class HistogramQuery:
    """The complete histogram (one count per cell)."""


@dataclass(frozen=True)
class Coarsening:
    """The histogram over a coarser binning of T.

    ``blocks`` as in :meth:`Policy.partition`: a per-attribute mapping (width, block ids, groups,
    ``"level<d>"``) or one bin id per cell.
    """

    blocks: Any

    def labels(self, domain: Domain) -> NDArray[np.int64]:
        from .policy import partition_block_ids

        return partition_block_ids(domain, self.blocks)


@dataclass(frozen=True)
class CumulativeHistogram:
    """``C_i = #{records whose attribute code <= i}`` for i = 1..k (k = the attribute's size).

    On a one-attribute domain ``attribute`` may be omitted. ``C_k = n`` is included; it does not
    change under replace-one neighbours, only when the policy has the ⊥ vertex.
    """

    attribute: str | None = None

    def axis(self, domain: Domain) -> int:
        if self.attribute is None:
            if domain.ndim != 1:
                raise InvalidParameterError(
                    f"a cumulative histogram on a {domain.ndim}-attribute domain needs "
                    f"attribute=one of {list(domain.names)}"
                )
            return 0
        return domain.axis(self.attribute)


@dataclass(frozen=True)
class SumQuery:
    """The vector of per-attribute sums ``Σ_records value_A`` (one output per attribute), each
    record weighted by a public factor at most ``max_weight`` (the paper's weighted sum).

    ``value_A`` is the integer value of an ordinal ``low..high`` attribute, the bin index of a
    binned one. Nominal attributes cannot be summed.
    """

    attributes: tuple[str, ...] | None = None
    max_weight: float = 1.0


@dataclass(frozen=True)
class SensitivityResult:
    """A sensitivity with how it was obtained: ``exact`` False means a safe upper bound."""

    value: float
    exact: bool
    method: str
    alpha: int | None = None
    xi: int | None = None
    #: Under constraints: the largest number of single secret moves whose net effect one
    #: neighbour can have (a safe multiplier for any linear query); None without constraints.
    moves: int | None = None

    def __float__(self) -> float:
        return self.value


QueryLike = Any


# ----------------------------------------------------------------------------------------------
# column providers: what one record in cell x contributes to the query's outputs
# ----------------------------------------------------------------------------------------------
class _Columns:
    m: int

    def pair_cost(self, src: NDArray[np.int64], dst: NDArray[np.int64]) -> NDArray[np.float64]:
        raise NotImplementedError

    def norms(self, cells: NDArray[np.int64]) -> NDArray[np.float64]:
        raise NotImplementedError

    def offset_cost(
        self, shape: tuple[int, ...], delta: NDArray[np.int64]
    ) -> NDArray[np.float64] | None:
        return None

    def dense(self, size: int) -> NDArray[np.float64]:
        raise NotImplementedError


class _Dense(_Columns):
    def __init__(self, w: Any, size: int) -> None:
        from scipy import sparse

        if sparse.issparse(w):
            self.w: Any = sparse.csc_matrix(w, dtype=np.float64)
            self.sparse = True
        else:
            arr = np.asarray(w, dtype=np.float64)
            if arr.ndim == 1:
                arr = arr[None, :]
            if arr.ndim != 2:
                raise InvalidParameterError(
                    f"a query matrix must be 2-D (m, |T|), got shape {arr.shape}"
                )
            if not np.all(np.isfinite(arr)):
                raise InvalidParameterError("a query matrix must be finite")
            self.w = arr
            self.sparse = False
        if self.w.shape[1] != size:
            raise DomainError(
                f"query matrix has {self.w.shape[1]} columns; the domain has {size} cells (one "
                f"column per cell, in the domain's flat C order)"
            )
        self.m = int(self.w.shape[0])

    def pair_cost(self, src: NDArray[np.int64], dst: NDArray[np.int64]) -> NDArray[np.float64]:
        if self.sparse:
            d = self.w[:, src] - self.w[:, dst]
            return np.asarray(abs(d).sum(axis=0)).reshape(-1)
        return np.abs(self.w[:, src] - self.w[:, dst]).sum(axis=0)

    def norms(self, cells: NDArray[np.int64]) -> NDArray[np.float64]:
        if self.sparse:
            return np.asarray(abs(self.w[:, cells]).sum(axis=0)).reshape(-1)
        return np.abs(self.w[:, cells]).sum(axis=0)

    def dense(self, size: int) -> NDArray[np.float64]:
        return np.asarray(self.w.todense()) if self.sparse else self.w


class _Boxes(_Columns):
    """A range workload: bounds (m, d, 2), half-open code intervals."""

    def __init__(self, bounds: NDArray[np.int64], shape: tuple[int, ...]) -> None:
        self.b = np.asarray(bounds, dtype=np.int64)
        self.shape = shape
        self.m = int(self.b.shape[0])
        self._cover: NDArray[np.float64] | None = None

    def coverage(
        self, lo: NDArray[np.int64] | None = None, hi: NDArray[np.int64] | None = None
    ) -> NDArray[np.float64]:
        """Number of boxes covering each cell (difference array + cumulative sums)."""
        lo = self.b[:, :, 0] if lo is None else lo
        hi = self.b[:, :, 1] if hi is None else hi
        keep = np.all(hi > lo, axis=1)
        lo, hi = lo[keep], hi[keep]
        d = len(self.shape)
        diff = np.zeros(tuple(n + 1 for n in self.shape), dtype=np.float64)
        for corner in itertools.product((0, 1), repeat=d):
            idx = tuple(np.where(c, hi[:, j], lo[:, j]) for j, c in enumerate(corner))
            np.add.at(diff, idx, (-1.0) ** sum(corner))
        for axis in range(d):
            diff = np.cumsum(diff, axis=axis)
        return diff[tuple(slice(0, n) for n in self.shape)]

    def cover(self) -> NDArray[np.float64]:
        if self._cover is None:
            self._cover = self.coverage()
        return self._cover

    def offset_cost(
        self, shape: tuple[int, ...], delta: NDArray[np.int64]
    ) -> NDArray[np.float64] | None:
        # queries holding both x and x+δ are the boxes [max(a, a−δ), min(b, b−δ))
        lo = np.maximum(self.b[:, :, 0], self.b[:, :, 0] - delta[None, :])
        hi = np.minimum(self.b[:, :, 1], self.b[:, :, 1] - delta[None, :])
        both = self.coverage(lo, hi)
        c = self.cover()
        src = tuple(
            slice(max(0, -int(k)), n - max(0, int(k))) for n, k in zip(shape, delta, strict=True)
        )
        dst = tuple(
            slice(max(0, int(k)), n - max(0, -int(k))) for n, k in zip(shape, delta, strict=True)
        )
        return (c[src] + c[dst] - 2 * both[src]).reshape(-1)

    def _members(self, cells: NDArray[np.int64]) -> NDArray[np.bool_]:
        codes = np.stack(np.unravel_index(cells, self.shape), axis=1)  # (c, d)
        lo = self.b[:, None, :, 0]
        hi = self.b[:, None, :, 1]
        return np.all((codes[None] >= lo) & (codes[None] < hi), axis=2)  # (m, c)

    def pair_cost(self, src: NDArray[np.int64], dst: NDArray[np.int64]) -> NDArray[np.float64]:
        return (self._members(src) != self._members(dst)).sum(axis=0).astype(np.float64)

    def norms(self, cells: NDArray[np.int64]) -> NDArray[np.float64]:
        return self.cover().reshape(-1)[cells]

    def dense(self, size: int) -> NDArray[np.float64]:
        return self._members(np.arange(size)).astype(np.float64)


def _values(domain: Domain, q: SumQuery) -> NDArray[np.float64]:
    names = q.attributes if q.attributes is not None else domain.names
    rows = []
    grids = np.indices(domain.shape).reshape(domain.ndim, -1)
    for n in names:
        a = domain.attribute(n)
        if not isinstance(a, Ordinal):
            raise InvalidParameterError(
                f"attribute {n!r} is nominal; only ordered attributes can be summed"
            )
        j = domain.axis(n)
        base = 0 if a.edges is not None else a.low
        rows.append((grids[j] + base).astype(np.float64) * float(q.max_weight))
    return np.stack(rows)


def _columns(query: QueryLike, domain: Domain) -> _Columns:
    if isinstance(query, SumQuery):
        return _Dense(_values(domain, query), domain.size)
    if isinstance(query, RangeQuery):
        return _Boxes(query.bounds(domain)[None], domain.shape)
    if isinstance(query, Workload):
        return _Boxes(query.bounds(domain), domain.shape)
    if isinstance(query, list | tuple) and query and all(isinstance(q, RangeQuery) for q in query):
        return _Boxes(Workload(list(query)).bounds(domain), domain.shape)
    if isinstance(query, HistogramQuery):
        return _Dense(np.eye(domain.size), domain.size)
    if isinstance(query, CumulativeHistogram):
        return _Dense(query_matrix(query, domain), domain.size)
    if isinstance(query, Coarsening):
        return _Dense(query_matrix(query, domain), domain.size)
    return _Dense(query, domain.size)


def query_matrix(query: QueryLike, domain: Domain) -> NDArray[np.float64]:
    """The dense matrix ``W`` (m × |T|) of a linear query (small domains; tests and brute force)."""
    query = _normalise(query)
    if isinstance(query, HistogramQuery):
        return np.eye(domain.size)
    if isinstance(query, Coarsening):
        lab = query.labels(domain)
        return (lab[None, :] == np.arange(int(lab.max()) + 1)[:, None]).astype(np.float64)
    if isinstance(query, CumulativeHistogram):
        axis = query.axis(domain)
        k = domain.shape[axis]
        codes = np.indices(domain.shape).reshape(domain.ndim, -1)[axis]
        return (codes[None, :] <= np.arange(k)[:, None]).astype(np.float64)
    return _columns(query, domain).dense(domain.size)


def _normalise(query: QueryLike) -> QueryLike:
    if isinstance(query, str):
        key = query.strip().lower()
        if key in ("histogram", "hist", "h"):
            return HistogramQuery()
        if key in ("cumulative", "cumulative_histogram", "cdf", "s"):
            return CumulativeHistogram()
        if key in ("sum", "sums"):
            return SumQuery()
        raise InvalidParameterError(
            f"unknown query {query!r}; use 'histogram', 'cumulative', 'sum', a RangeQuery, a "
            f"Workload, a Coarsening, or a query matrix"
        )
    return query


# ----------------------------------------------------------------------------------------------
# the public entry point
# ----------------------------------------------------------------------------------------------
def sensitivity(query: QueryLike, policy: Policy, *, detail: bool = False) -> Any:
    """Policy-specific L1 sensitivity ``S(f, P)`` of a linear query.

    Parameters
    ----------
    query : str, query object, RangeQuery, Workload, or array
        ``"histogram"``, ``"cumulative"``, ``"sum"``, ``"kmeans_qsize"``, ``"kmeans_qsum"``,
        ``"kmeans_qsum_paper"``, :class:`HistogramQuery`,
        :class:`Coarsening`, :class:`CumulativeHistogram`, :class:`SumQuery`, a
        :class:`~fugu.RangeQuery` or :class:`~fugu.Workload` (range-count queries), or a matrix
        ``W`` of shape (m, |T|) (dense or scipy sparse; columns in the domain's flat order).
    policy : Policy
    detail : bool
        Return a :class:`SensitivityResult` (value, whether exact, method) instead of a float.

    Returns
    -------
    float or SensitivityResult
        Exact where fugu can compute it; otherwise a safe upper bound (``detail=True`` says so).
    """
    if not isinstance(policy, Policy):
        raise InvalidTypeError(
            f"policy must be a fugu.blowfish.Policy, got {type(policy).__name__}"
        )
    if isinstance(query, str) and query.strip().lower().startswith("kmeans_"):
        return _kmeans(query.strip().lower(), policy, detail)
    q = _normalise(query)
    if policy.constraints:
        res = _constrained(q, policy)
    else:
        res = _unconstrained(q, policy)
    return res if detail else res.value


def _kmeans(key: str, policy: Policy, detail: bool) -> Any:
    """k-means queries (He et al. §6): ``kmeans_qsize`` (cluster sizes), ``kmeans_qsum`` (per-
    cluster coordinate sums, safe: moves that switch clusters included) and
    ``kmeans_qsum_paper`` (the paper's same-cluster values). Computed by
    :mod:`fugu.blowfish.kmeans_queries` on the policy's grid."""
    from . import kmeans_queries as km

    if policy.constraints:
        raise PolicyError("k-means sensitivities are defined for policies without constraints")
    if key == "kmeans_qsize":
        v, how = km.qsize_sensitivity(policy, policy.domain), "k-means q_size"
    elif key in ("kmeans_qsum", "kmeans_qsum_safe"):
        v, how = km.qsum_sensitivity(policy, policy.domain), "k-means q_sum (safe)"
    elif key == "kmeans_qsum_paper":
        v, how = km.qsum_sensitivity(policy, policy.domain, mode="paper"), "k-means q_sum (paper)"
    else:
        raise InvalidParameterError(
            f"unknown k-means query {key!r}; use kmeans_qsize, kmeans_qsum or kmeans_qsum_paper"
        )
    res = SensitivityResult(float(v), True, f"closed form: {how} (fugu.blowfish.kmeans)")
    return res if detail else res.value


def _unconstrained(q: QueryLike, policy: Policy) -> SensitivityResult:
    dom = policy.domain
    if isinstance(q, HistogramQuery):
        v = 2.0 if policy.has_edges() else 0.0
        if policy.has_bottom_edges():
            v = max(v, 1.0)
        return SensitivityResult(v, True, "closed form: histogram (2 per move, 1 per add/remove)")
    if isinstance(q, Coarsening):
        lab = q.labels(dom)
        v = 2.0 if policy.crosses(lab) else 0.0
        if policy.has_bottom_edges():
            v = max(v, 1.0)
        how = "an edge crosses bins" if v == 2 else "no edge crosses bins: released exactly"
        return SensitivityResult(v, True, f"closed form: coarsened histogram ({how})")
    if isinstance(q, CumulativeHistogram):
        axis = q.axis(dom)
        v = float(_max_gap(policy, axis))
        if policy.has_bottom_edges():
            codes = np.indices(dom.shape).reshape(dom.ndim, -1)[axis][policy.bottom_cells()]
            v = max(v, float(dom.shape[axis] - codes.min())) if codes.size else v
        return SensitivityResult(
            v, True, "closed form: cumulative histogram (largest rank gap of an edge)"
        )
    if isinstance(q, SumQuery):
        return _sum_sensitivity(q, policy)
    cols = _columns(q, dom)
    v, exact, how = _max_over_edges(cols, policy)
    if policy.has_bottom_edges():
        cells = policy.bottom_cells()
        if cells.size:
            v = max(v, float(cols.norms(cells).max()))
    return SensitivityResult(float(v), exact, how)


def _sum_sensitivity(q: SumQuery, policy: Policy) -> SensitivityResult:
    """Sum of attribute values: a move changes the sum vector by ``w·Σ_A |Δcode_A|`` over the
    summed attributes, so the sensitivity is the largest such L1 gap of an edge (closed forms
    per family; a bounded knapsack, solved greedily, for weighted distance graphs)."""
    dom = policy.domain
    names = q.attributes if q.attributes is not None else dom.names
    for n in names:
        if not isinstance(dom.attribute(n), Ordinal):
            raise InvalidParameterError(
                f"attribute {n!r} is nominal; only ordered attributes can be summed"
            )
    axes = [dom.axis(n) for n in names]
    sizes = [dom.shape[a] for a in axes]
    w = float(q.max_weight)
    best = 0.0
    how = "closed form: largest L1 gap of an edge on the summed attributes"
    if policy.has_edges():
        if policy.kind == "full":
            best = float(sum(n - 1 for n in sizes))
        elif policy.kind == "attribute":
            best = float(max(n - 1 for n in sizes))
        elif policy.kind == "distance":
            assert policy.weights is not None and policy.theta is not None
            theta = policy.theta + 1e-9
            if policy.metric == "linf":
                best = float(
                    sum(
                        min(n - 1, int(theta // policy.weights[a]))
                        for a, n in zip(axes, sizes, strict=True)
                    )
                )
            else:
                budget = theta
                wts = policy.weights
                for ax, size in sorted(zip(axes, sizes, strict=True), key=lambda t: wts[t[0]]):
                    take = min(size - 1, int(budget // wts[ax]))
                    best += take
                    budget -= take * wts[ax]
        elif policy.kind == "partition" and policy.attribute_blocks is not None:
            best = float(sum(_max_gap(policy, a) for a in axes))
        else:
            codes = np.indices(dom.shape).reshape(dom.ndim, -1)[axes]
            for src, dst in policy.iter_edges():
                if src.size:
                    best = max(best, float(np.abs(codes[:, src] - codes[:, dst]).sum(axis=0).max()))
            how = f"exact: every edge of the {policy.kind} graph"
    best *= w
    if policy.has_bottom_edges():
        cells = policy.bottom_cells()
        vals = _values(dom, SumQuery(tuple(names), 1.0))
        best = max(best, w * float(np.abs(vals[:, cells]).sum(axis=0).max()))
    return SensitivityResult(best, True, how)


def _max_gap(policy: Policy, axis: int) -> int:
    """max over edges of |code_axis(x) − code_axis(y)|."""
    dom = policy.domain
    k = dom.shape[axis]
    if not policy.has_edges() or k == 1:
        return 0
    if policy.kind in ("full", "attribute"):
        if policy.kind == "attribute" or k > 1:
            return k - 1
    if policy.kind == "distance":
        assert policy.weights is not None and policy.theta is not None
        return min(k - 1, int(math.floor(policy.theta / policy.weights[axis] + 1e-9)))
    if policy.kind == "partition" and policy.attribute_blocks is not None:
        b = policy.attribute_blocks[axis]
        if b is None:
            return k - 1
        return _ids_gap(np.asarray(b, np.int64))
    codes = np.indices(dom.shape).reshape(dom.ndim, -1)[axis]
    best = 0
    for s, d in policy.iter_edges():
        if s.size:
            best = max(best, int(np.abs(codes[s] - codes[d]).max()))
    return best


def _ids_gap(ids: NDArray[np.int64]) -> int:
    """Widest block (largest code gap inside one block) of per-value block ids."""
    k = ids.size
    codes = np.arange(k)
    lo = np.full(int(ids.max()) + 1, k)
    hi = np.full(int(ids.max()) + 1, -1)
    np.minimum.at(lo, ids, codes)
    np.maximum.at(hi, ids, codes)
    return int((hi - lo).max())


def _max_over_edges(cols: _Columns, policy: Policy) -> tuple[float, bool, str]:
    dom = policy.domain
    shape = dom.shape
    if policy.kind == "full":
        return _diameter(cols, dom.size)
    if policy.kind in ("distance", "attribute") and isinstance(cols, _Boxes):
        best = 0.0
        for d in policy.offsets():
            c = cols.offset_cost(shape, d)
            if c is not None and c.size:
                best = max(best, float(c.max()))
        return best, True, f"exact: {policy.kind} graph offset by offset (coverage counts)"
    if (
        policy.kind == "partition"
        and isinstance(cols, _Boxes)
        and policy.attribute_blocks is not None
    ):
        return _partition_boxes(cols, policy), True, "exact: partition blocks by offsets"
    work = policy.n_edges() * max(1, cols.m)
    if work > MAX_PAIR_WORK:
        raise PolicyError(
            f"computing this sensitivity exactly needs {work:.3g} operations ({policy.n_edges():,} "
            f"edges × {cols.m} outputs); use a closed-form query (histogram, cumulative, sum) or a "
            f"smaller domain"
        )
    best = 0.0
    for s, d in policy.iter_edges(chunk=max(1, 4_000_000 // max(1, cols.m))):
        if s.size:
            best = max(best, float(cols.pair_cost(s, d).max()))
    return best, True, f"exact: every edge of the {policy.kind} graph"


def _diameter(cols: _Columns, size: int) -> tuple[float, bool, str]:
    """L1 diameter of the column set (complete graph)."""
    if size < 2:
        return 0.0, True, "single cell"
    if isinstance(cols, _Dense) and not cols.sparse and cols.m <= 12:
        w = cols.w
        best = 0.0
        for signs in itertools.product((1.0, -1.0), repeat=cols.m - 1):
            s = np.asarray((1.0, *signs))
            proj = s @ w
            best = max(best, float(proj.max() - proj.min()))
        return best, True, "exact: L1 diameter by sign vectors"
    if size * (size - 1) // 2 * max(1, cols.m) <= MAX_PAIR_WORK:
        from .policy import _group_pairs

        best = 0.0
        for s, d in _group_pairs(np.zeros(size, np.int64), max(1, 4_000_000 // max(1, cols.m))):
            best = max(best, float(cols.pair_cost(s, d).max()))
        return best, True, "exact: every pair of cells"
    n = cols.norms(np.arange(size))
    top = np.sort(n)[-2:]
    return float(top.sum()), False, "upper bound: sum of the two largest column norms"


def _partition_boxes(cols: _Boxes, policy: Policy) -> float:
    dom = policy.domain
    assert policy.attribute_blocks is not None
    spans = []
    per = []
    for a, b in zip(dom.attributes, policy.attribute_blocks, strict=True):
        ids = np.zeros(a.size, np.int64) if b is None else np.asarray(b, np.int64)
        per.append(ids)
        spans.append(_ids_gap(ids))
    best = 0.0
    for delta in itertools.product(*[range(-s, s + 1) for s in spans]):
        arr = np.asarray(delta, np.int64)
        nz = np.flatnonzero(arr)
        if nz.size == 0 or arr[nz[0]] < 0:
            continue
        c = cols.offset_cost(dom.shape, arr)
        if c is None or c.size == 0:
            continue
        same = np.ones(1, bool)
        for ids, k, n in zip(per, arr, dom.shape, strict=True):
            lo, hi = max(0, -int(k)), n - max(0, int(k))
            eq = ids[lo:hi] == ids[lo + int(k) : hi + int(k)]
            same = (same[:, None] & eq[None, :]).reshape(-1)
        if same.any():
            best = max(best, float(c[same].max()))
    return best


# ----------------------------------------------------------------------------------------------
# constraints: the policy graph
# ----------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class PolicyGraph:
    """The policy graph ``G_P`` of sparse count constraints (He et al. §8).

    Vertices ``0..p-1`` are the constrained counts, ``p`` is ``v+`` and ``p + 1`` is ``v−``.
    ``arcs`` holds ``(from, to)``: a secret move that lowers count ``from`` (or none: ``v+``) and
    lifts count ``to`` (or none: ``v−``).
    """

    n_queries: int
    arcs: frozenset[tuple[int, int]]
    labels: tuple[str, ...] = field(default=(), compare=False)

    @property
    def plus(self) -> int:
        return self.n_queries

    @property
    def minus(self) -> int:
        return self.n_queries + 1

    def successors(self) -> list[list[int]]:
        out: list[list[int]] = [[] for _ in range(self.n_queries + 2)]
        for a, b in sorted(self.arcs):
            out[a].append(b)
        return out

    def alpha_xi(self, budget: int = 5_000_000) -> tuple[int, int, bool]:
        """(longest simple cycle, longest simple v+ → v− path, exact?) by depth-first search."""
        p = self.n_queries
        succ = self.successors()
        steps = 0
        exact = True
        alpha = 0
        # cycles: start at their smallest vertex
        for s in range(p):
            stack: list[tuple[int, int, int]] = [(s, 1 << s, 0)]
            while stack:
                v, seen, length = stack.pop()
                steps += 1
                if steps > budget:
                    exact = False
                    break
                for w in succ[v]:
                    if w == s and length + 1 >= 2:
                        alpha = max(alpha, length + 1)
                    elif s < w < p and not seen >> w & 1:
                        stack.append((w, seen | 1 << w, length + 1))
            if not exact:
                break
        xi = 0
        stack2: list[tuple[int, int, int]] = [(self.plus, 0, 0)]
        while stack2 and exact:
            v, seen, length = stack2.pop()
            steps += 1
            if steps > budget:
                exact = False
                break
            for w in succ[v]:
                if w == self.minus:
                    xi = max(xi, length + 1)
                elif w < p and not seen >> w & 1:
                    stack2.append((w, seen | 1 << w, length + 1))
        if not exact:
            return p, p + 1, False
        return alpha, xi, True


def _constraint_queries(policy: Policy) -> tuple[list[NDArray[np.bool_]], list[str]]:
    dom = policy.domain
    masks: list[NDArray[np.bool_]] = []
    labels: list[str] = []
    for c in policy.constraints:
        qs = c.queries(dom)
        masks.extend(qs)
        labels.extend(
            f"{c.description}[{i}]" if len(qs) > 1 else c.description for i in range(len(qs))
        )
    return masks, labels


def policy_graph(policy: Policy) -> PolicyGraph:
    """Build ``G_P`` for the policy's count constraints; raise when they are not sparse."""
    dom = policy.domain
    masks, labels = _constraint_queries(policy)
    p = len(masks)
    if p == 0:
        raise PolicyError("the policy has no constraints; its policy graph is empty")
    if dom.size * p > 200_000_000:
        raise PolicyError(
            f"{p} constrained counts over {dom.size:,} cells are too many to analyse; use a "
            f"closed-form case (one marginal, disjoint marginals, disjoint ranges)"
        )
    member = np.stack(masks, axis=1)  # (|T|, p)
    sigs, cls = np.unique(member, axis=0, return_inverse=True)
    cls = cls.reshape(-1).astype(np.int64)
    n_cls = sigs.shape[0]
    pairs: set[tuple[int, int]] = set()
    if policy.kind == "full":
        sizes = np.bincount(cls, minlength=n_cls)
        for a in range(n_cls):
            for b in range(n_cls):
                if a != b or sizes[a] >= 2:
                    pairs.add((a, b))
    else:
        for s, d in policy.iter_edges():
            if s.size:
                u = np.unique(np.stack([cls[s], cls[d]], axis=1), axis=0)
                for a, b in u.tolist():
                    pairs.add((a, b))
                    pairs.add((b, a))
    plus, minus = p, p + 1
    arcs: set[tuple[int, int]] = set()

    def arc(lowered: NDArray[np.bool_], lifted: NDArray[np.bool_], what: str) -> None:
        lo_idx, li_idx = np.flatnonzero(lowered), np.flatnonzero(lifted)
        if lo_idx.size > 1 or li_idx.size > 1:
            changed = [labels[i] for i in np.concatenate([lo_idx, li_idx])][:4]
            raise PolicyError(
                f"the constraints are not sparse for this policy: {what} changes several "
                f"constrained counts at once ({changed}). Computing the policy-specific "
                f"sensitivity under general count constraints is NP-hard (He et al., Blowfish, "
                f"SIGMOD 2014, Section 8); use disjoint constraints, a smaller secret graph "
                f"(e.g. 'attribute' instead of 'full' for several marginals), or fewer constraints"
            )
        arcs.add(
            (int(lo_idx[0]) if lo_idx.size else plus, int(li_idx[0]) if li_idx.size else minus)
        )

    for a, b in pairs:
        arc(sigs[a] & ~sigs[b], sigs[b] & ~sigs[a], "a secret move")
    if policy.has_bottom_edges():
        for c in np.unique(cls[policy.bottom_cells()]).tolist():
            none = np.zeros(p, bool)
            arc(sigs[c], none, "removing a record")
            arc(none, sigs[c], "adding a record")
    return PolicyGraph(p, frozenset(arcs), tuple(labels))


def constrained_histogram_sensitivity(policy: Policy) -> SensitivityResult:
    """``S(h, P) = 2·max(α(G_P), ξ(G_P))`` for the complete histogram under count constraints.

    Closed forms (He et al. §8): one marginal under the complete graph, ``2·size(C)``; disjoint
    marginals under the attribute graph, ``2·max_i size(C_i)``; disjoint ranges under the line
    graph, ``2·(maxcomp(Q) + 1)`` (with the domain-end cases). Otherwise an exact search of the
    policy graph when it has at most ``MAX_EXACT_QUERIES`` counts, else the upper bound
    ``2·(|Q| + 1)``. The theorem's value is exact when the moves realising the longest cycle or
    path can use distinct cells (enough records and cells); otherwise it is an upper bound.
    """
    cf = _closed_form(policy)
    if cf is not None:
        return cf
    g = policy_graph(policy)
    if g.n_queries > MAX_EXACT_QUERIES:
        bound = 2 * (g.n_queries + 1)
        return SensitivityResult(
            float(bound),
            False,
            "upper bound 2(|Q|+1): policy graph too large to search",
            moves=g.n_queries + 1,
        )
    alpha, xi, searched = g.alpha_xi()
    if not searched:
        return SensitivityResult(
            float(2 * (g.n_queries + 1)),
            False,
            "upper bound 2(|Q|+1): search budget exceeded",
            moves=g.n_queries + 1,
        )
    # 2·max(α, ξ) is attained when the moves can use distinct cells; on the complete graph that
    # holds when every constrained count covers at least two cells
    masks, _ = _constraint_queries(policy)
    covered = np.sum(masks, axis=0) if masks else np.zeros(policy.domain.size)
    free = int(np.sum(covered == 0))
    # attained when the moves can use distinct cells: on the complete graph with disjoint counts
    # of >= 2 cells each, and two free cells when the longest structure is a v+ → v− path
    exact = (
        policy.kind == "full"
        and not policy.has_bottom_edges()
        and bool(np.all(covered <= 1))
        and all(m.sum() >= 2 for m in masks)
        and (free >= 2 or xi <= alpha)
    )
    how = "policy graph, exact search: 2·max(α, ξ)" + (
        "" if exact else " (upper bound: moves may cancel)"
    )
    return SensitivityResult(float(2 * max(alpha, xi)), exact, how, alpha, xi, max(alpha, xi))


def _closed_form(policy: Policy) -> SensitivityResult | None:
    cons = policy.constraints
    dom = policy.domain
    if policy.has_bottom_edges() or not cons:
        return None
    marg = [c for c in cons if isinstance(c, MarginalConstraint)]
    if len(marg) == len(cons):
        for c in marg:
            c.check(dom)
        if len(marg) == 1 and policy.kind == "full":
            size = marg[0].size(dom)
            if size >= 2:
                exact = dom.size >= 2 * size  # every marginal cell has two cells: no cancellation
                return SensitivityResult(
                    float(2 * size),
                    exact,
                    "closed form: one marginal, complete graph: 2·size(C)",
                    size,
                    1,
                    size,
                )
        attrs = [set(c.attributes) for c in marg]
        disjoint = all(not (a & b) for a, b in itertools.combinations(attrs, 2))
        if disjoint and policy.kind == "attribute":
            size = max(c.size(dom) for c in marg)
            if size >= 2:
                exact = all(len(c.attributes) < dom.ndim for c in marg)
                return SensitivityResult(
                    float(2 * size),
                    exact,
                    "closed form: disjoint marginals, attribute graph: 2·max size(C_i)",
                    size,
                    1,
                    size,
                )
        return None
    iv = _line_intervals(policy)
    if iv is not None:
        return _ranges_on_line(iv, dom.size)
    return None


def _line_intervals(policy: Policy) -> list[tuple[int, int]] | None:
    """The constrained ranges as sorted disjoint half-open intervals when the policy is the
    line graph (one ordered attribute, edges between adjacent values, no ⊥) with count
    constraints that are disjoint ranges; None otherwise."""
    cons = policy.constraints
    dom = policy.domain
    if (
        not cons
        or policy.has_bottom_edges()
        or not all(isinstance(c, CountConstraint) for c in cons)
        or dom.ndim != 1
        or policy.kind != "distance"
    ):
        return None
    if policy.theta is None or policy.weights is None or policy.theta / policy.weights[0] >= 2:
        return None
    iv = []
    for cc in cons:
        assert isinstance(cc, CountConstraint)
        m = cc.mask(dom).reshape(-1)
        idx = np.flatnonzero(m)
        if idx.size == 0 or idx[-1] - idx[0] + 1 != idx.size:
            return None
        iv.append((int(idx[0]), int(idx[-1]) + 1))
    iv.sort()
    if any(b[0] < a[1] for a, b in itertools.pairwise(iv)):
        return None
    return iv


def _components(iv: list[tuple[int, int]]) -> list[list[tuple[int, int]]]:
    """Maximal runs of touching ranges."""
    comps: list[list[tuple[int, int]]] = []
    for r in iv:
        if comps and comps[-1][-1][1] == r[0]:
            comps[-1].append(r)
        else:
            comps.append([r])
    return comps


def _ranges_on_line(iv: list[tuple[int, int]], k: int) -> SensitivityResult:
    """Disjoint ranges under the line graph.

    The paper's bound is ``2·(maxcomp(Q) + 1)``: a path ``v+ → r_1 → … → r_m → v−`` through a
    component of touching ranges with free values on both sides. On the line graph two things
    make the exact value smaller, and fugu uses the exact value: a 2-cycle between touching ranges
    crosses the same boundary edge both ways (the two moves cancel in the histogram), and a range
    of one value is entered and left at the same cell (those two ±1 cancel). Exact (for n at least
    the number of moves): ``2·max(ξ0, max over components open on both sides of
    (|C| + 1 − #one-value ranges in C))`` with ``ξ0 = 1`` when some move touches no constraint.

    ``moves`` is the number of single moves whose net effect a neighbour can have:
    ``max(ξ0, max over components open on both sides of (|C| + 1))`` — the cancellations at
    one-value ranges are particular to the histogram (a cumulative count sees all ``|C| + 1``
    moves), so other queries are multiplied by ``moves``, never by the histogram's value / 2.
    """
    comps = _components(iv)
    alpha = 2 if any(len(c) >= 2 for c in comps) else 0
    free_pair = _free_adjacent(iv, k)
    inside = any(b - a >= 2 for a, b in iv)
    xi0 = 1 if (free_pair or inside) else 0
    best = xi0
    xi = xi0
    maxcomp = max(len(c) for c in comps)
    for c in comps:
        if c[0][0] > 0 and c[-1][1] < k:
            xi = max(xi, len(c) + 1)
            best = max(best, len(c) + 1 - sum(1 for a, b in c if b - a == 1))
    return SensitivityResult(
        float(2 * best),
        True,
        f"closed form: disjoint ranges, line graph (maxcomp={maxcomp}; the paper's bound "
        f"2(maxcomp+1) = {2 * (maxcomp + 1)} before cancellations)",
        alpha,
        xi,
        xi,
    )


def _line_ranges_exact(cols: _Columns, iv: list[tuple[int, int]], k: int) -> SensitivityResult:
    """Exact ``S(f, P)`` of any linear query on the line graph with disjoint range constraints.

    The neighbours (minimal sets of secret moves keeping every count, He et al. §8) are, on the
    line graph: (i) one move along an edge whose two ends are both free or both inside one
    range; (ii) a 2-cycle across the boundary of two touching ranges, or a path that enters and
    leaves a component through the same free side — both move records back where others came
    from, so the histogram (hence every linear query) does not change; (iii) for a component
    ``[a_1, b_1), [b_1, b_2), …, [b_{m-1}, b_m)`` with free values on both sides, the path of
    ``m + 1`` moves ``a_1 − 1 → a_1``, ``b_i − 1 → b_i`` (or all reversed), whose net histogram
    change is ``δ = Σ_i (e_{x_i+1} − e_{x_i})``. So ``S = max(max_(i) ||W(e_y − e_x)||_1,
    max_(iii) ||W δ||_1)``, attained once n is at least the number of moves.
    """
    covered = np.full(k, -1, np.int64)
    for j, (a, b) in enumerate(iv):
        covered[a:b] = j
    x = np.arange(k - 1, dtype=np.int64)
    single = covered[x] == covered[x + 1]  # both free (-1) or both in the same range
    best = 0.0
    if single.any():
        src = x[single]
        for lo in range(0, src.size, 100_000):
            s = src[lo : lo + 100_000]
            best = max(best, float(cols.pair_cost(s, s + 1).max()))
    n_paths = 0
    for c in _components(iv):
        if c[0][0] > 0 and c[-1][1] < k:
            starts = np.array([c[0][0] - 1] + [b - 1 for _, b in c], dtype=np.int64)
            cells = np.unique(np.concatenate([starts, starts + 1]))
            delta = np.zeros(cells.size)
            np.add.at(delta, np.searchsorted(cells, starts + 1), 1.0)
            np.add.at(delta, np.searchsorted(cells, starts), -1.0)
            w = _dense_columns(cols, cells)
            best = max(best, float(np.abs(w @ delta).sum()))
            n_paths += 1
    return SensitivityResult(
        best,
        True,
        f"exact: line graph with disjoint range constraints (single free/inside moves and "
        f"{n_paths} boundary-to-boundary paths)",
        moves=_ranges_on_line(iv, k).moves,
    )


def _dense_columns(cols: _Columns, cells: NDArray[np.int64]) -> NDArray[np.float64]:
    """The columns ``W[:, cells]`` as a dense (m, len(cells)) array."""
    if isinstance(cols, _Boxes):
        return cols._members(cells).astype(np.float64)
    assert isinstance(cols, _Dense)
    sub = cols.w[:, cells]
    return np.asarray(sub.todense()) if cols.sparse else np.asarray(sub, dtype=np.float64)


def _free_adjacent(iv: list[tuple[int, int]], k: int) -> bool:
    covered = np.zeros(k, bool)
    for a, b in iv:
        covered[a:b] = True
    free = ~covered
    return bool(np.any(free[1:] & free[:-1]))


def _constrained(q: QueryLike, policy: Policy) -> SensitivityResult:
    """``S(f, P)`` under count constraints.

    The histogram: :func:`constrained_histogram_sensitivity`. The line graph with disjoint range
    constraints: exact for every linear query (:func:`_line_ranges_exact`). Otherwise a neighbour
    is at most ``moves`` single secret moves (a simple cycle or ``v+ → v−`` path of the policy
    graph ``G_P``: ``moves = max(α, ξ)``, or ``|Q| + 1`` when ``G_P`` is too large to search),
    so ``S(f, P) <= moves · S(f, P without constraints)`` — a safe upper bound. (It is *not*
    ``S(h, P)/2``: the histogram's value is lowered by moves that cancel in the histogram, which
    other queries still see; e.g. a cumulative count changes once per move.)
    """
    hist = constrained_histogram_sensitivity(policy)
    if isinstance(q, HistogramQuery):
        return hist
    moves = _safe_moves(hist, policy)
    dom = policy.domain
    iv = _line_intervals(policy)
    if iv is not None:
        if isinstance(q, CumulativeHistogram):
            q.axis(dom)
            return SensitivityResult(
                float(moves),
                True,
                "exact: cumulative histogram, line graph with disjoint range constraints (each "
                "move changes one cumulative count; a neighbour makes at most "
                f"{moves} moves that do not cancel)",
                hist.alpha,
                hist.xi,
                moves,
            )
        small = not isinstance(q, Coarsening) or (
            (int(q.labels(dom).max()) + 1) * dom.size <= MAX_DENSE_CELLS
        )
        if small:
            res = _line_ranges_exact(_columns(q, dom), iv, dom.size)
            return SensitivityResult(res.value, True, res.method, hist.alpha, hist.xi, moves)
    base = _unconstrained(q, _without_constraints(policy))
    return SensitivityResult(
        moves * base.value,
        False,
        f"upper bound: {moves} moves per neighbour (longest cycle/path of the policy graph) × "
        f"single-move sensitivity ({base.method})",
        hist.alpha,
        hist.xi,
        moves,
    )


def _safe_moves(hist: SensitivityResult, policy: Policy) -> int:
    """The number of single moves one neighbour can make (see :func:`_constrained`)."""
    if hist.moves is not None:
        return int(hist.moves)
    masks, _ = _constraint_queries(policy)
    return len(masks) + 1  # a simple path of G_P has at most |Q| + 1 arcs, a cycle |Q|


def _without_constraints(policy: Policy) -> Policy:
    from dataclasses import replace

    return replace(policy, constraints=())


# ----------------------------------------------------------------------------------------------
# brute force: the definition itself (test oracle)
# ----------------------------------------------------------------------------------------------
def brute_force_sensitivity(
    f: QueryLike | Callable[[NDArray[np.int64]], ArrayLike],
    policy: Policy,
    n: int,
    *,
    moves: str = "secret",
    max_databases: int = 5_000,
) -> float:
    """``max ||f(D1) − f(D2)||_1`` over every pair of Blowfish neighbours with ``n`` individuals.

    Enumerates all databases (each of the ``n`` individuals takes a value of T, or ⊥ when the
    policy has the ⊥ vertex), keeps those satisfying the constraints (grouped by the public
    constraint answers: neighbours share them), and applies the neighbour definition of §4 of
    the paper: ``T(D1, D2)`` (secret pairs whose value changed along an edge) non-empty and
    minimal — no ``D3`` with ``∅ ≠ T(D1, D3) ⊊ T(D1, D2)``, nor ``T(D1, D3) = T(D1, D2)`` with a
    smaller symmetric difference. ``f`` maps a histogram cube to a vector, or is any query
    :func:`sensitivity` accepts. Small domains only (``(|T| + ⊥)^n <= max_databases``).

    ``moves="secret"`` (default, the neighbour relation fugu's guarantees use): every record that
    changes moves along a secret edge — neighbours are the minimal sets of *secret moves* that
    keep the constraints true (the reading under which the paper's Theorem 8.x holds: its proof
    decomposes the difference into arcs of ``G_P``). ``moves="any"``: the literal reading where
    records may also change along non-edges and only the edge changes count in ``T(D1, D2)``;
    under constraints it can exceed ``2·max(α, ξ)`` (collateral non-secret changes).
    """
    if moves not in ("secret", "any"):
        raise InvalidParameterError(f"moves must be 'secret' or 'any', got {moves!r}")
    dom = policy.domain
    size = dom.size
    has_bot = policy.has_bottom_edges()
    n_vals = size + (1 if has_bot else 0)
    total = n_vals**n
    if total > max_databases:
        raise InvalidParameterError(
            f"brute force over {total:,} databases exceeds max_databases={max_databases:,}"
        )
    if callable(f) and not isinstance(
        f, Coarsening | CumulativeHistogram | HistogramQuery | SumQuery
    ):
        fn = f
    else:
        w = query_matrix(f, dom)

        def fn(h: NDArray[np.int64]) -> ArrayLike:
            return w @ h.reshape(-1)

    dbs = np.asarray(list(itertools.product(range(n_vals), repeat=n)), dtype=np.int64)
    hists = np.zeros((dbs.shape[0], n_vals), np.int64)
    np.add.at(hists, (np.repeat(np.arange(dbs.shape[0]), n), dbs.reshape(-1)), 1)
    hists = hists[:, :size]
    outs = np.stack(
        [np.asarray(fn(h.reshape(dom.shape)), dtype=np.float64).reshape(-1) for h in hists]
    )
    adj = np.zeros((n_vals, n_vals), bool)
    for s, d in policy.iter_edges():
        adj[s, d] = adj[d, s] = True
    if has_bot:
        cells = policy.bottom_cells()
        adj[cells, size] = adj[size, cells] = True
    masks, _ = _constraint_queries(policy)
    if masks:
        answers = hists @ np.stack(masks, axis=1).astype(np.int64)
        _, group = np.unique(answers, axis=0, return_inverse=True)
        group = group.reshape(-1)
    else:
        group = np.zeros(dbs.shape[0], np.int64)
    best = 0.0
    for g in np.unique(group):
        members = np.flatnonzero(group == g)
        best = max(best, _group_best(dbs[members], outs[members], adj, moves == "secret"))
    return best


def _group_best(
    dbs: NDArray[np.int64], outs: NDArray[np.float64], adj: NDArray[np.bool_], secret_only: bool
) -> float:
    best = 0.0
    # records are exchangeable: D1 up to a permutation of the ids is enough
    reps = (
        np.flatnonzero(np.all(np.diff(dbs, axis=1) >= 0, axis=1))
        if dbs.shape[1] > 1
        else range(len(dbs))
    )
    for i in reps:
        d1 = dbs[i]
        diff = dbs != d1[None, :]  # (N, n)
        edge = diff & adj[d1[None, :], dbs]
        tvec = np.where(edge, dbs, -1)  # T(D1, D): new value on an edge change, else -1
        nonempty = edge.any(axis=1)
        if secret_only:
            nonempty &= np.all(edge == diff, axis=1)
        cand = np.flatnonzero(nonempty)
        if cand.size == 0:
            continue
        t2 = tvec[cand]  # (c, n)
        t3 = tvec[nonempty]  # (e, n) possible D3 (T non-empty)
        d3 = dbs[nonempty]
        # T3 ⊆ T2: every id of T3 is -1 or agrees with T2
        sub = np.all((t3[None, :, :] == -1) | (t3[None, :, :] == t2[:, None, :]), axis=2)  # (c, e)
        eq = np.all(t3[None, :, :] == t2[:, None, :], axis=2)
        strict = sub & ~eq
        # Δ(D1, D3) ⊊ Δ(D1, D2): D3 agrees with D1 or D2 on every id, and D3 != D2
        d2 = dbs[cand]
        within = np.all(
            (d3[None, :, :] == d1[None, None, :]) | (d3[None, :, :] == d2[:, None, :]), axis=2
        )
        same = np.all(d3[None, :, :] == d2[:, None, :], axis=2)
        smaller = eq & within & ~same
        minimal = ~(strict | smaller).any(axis=1)
        if minimal.any():
            nb = cand[minimal]
            best = max(best, float(np.abs(outs[nb] - outs[i][None, :]).sum(axis=1).max()))
    return best


def coarsening_from_policy(policy: Policy) -> Coarsening:
    """The coarsest histogram a partition policy releases exactly: the histogram of its blocks."""
    if policy.kind != "partition":
        raise PolicyError("only a partition policy has blocks to release exactly")
    return Coarsening(policy.block_ids())
