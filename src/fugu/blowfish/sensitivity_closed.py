"""``S(f, P)`` without constraints: closed forms, and the maximum over edges family by family.

Neighbours move one record along one secret edge ``(x, y)``, so
``S(f, P) = max_{(x,y) ∈ E} ||W[:, x] − W[:, y]||_1`` (and ``max_x ||W[:, x]||_1`` for cells
joined to ⊥). :func:`_unconstrained` uses a closed form where the query's structure allows
(histogram, coarsening, cumulative histogram, attribute sums) and otherwise walks the policy's
edge families without listing ``|T|²`` pairs (distance and attribute graphs offset by offset,
partition graphs block by block, the complete graph by the L1 diameter of the columns).
Source: He, Machanavajjhala, Ding, Blowfish Privacy, SIGMOD 2014, §5.
"""

from __future__ import annotations

import itertools

import numpy as np
from numpy.typing import NDArray

from ..domain import Ordinal
from ..errors import InvalidParameterError, PolicyError
from .policy import Policy
from .policy_edges import EDGE_SLACK, max_steps
from .sensitivity_queries import (
    Coarsening,
    CumulativeHistogram,
    HistogramQuery,
    QueryLike,
    SensitivityResult,
    SumQuery,
    _Boxes,
    _Columns,
    _columns,
    _Dense,
    _values,
)

__all__: list[str] = []


#: Pairwise evaluation is refused beyond this many (edge × query) operations.
MAX_PAIR_WORK = 2_000_000_000


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
            wts = policy.weights
            if policy.metric == "linf":
                # each attribute moves up to max_steps: the very float test of is_edge
                # (g·w <= θ + 1e-12); (θ + 1e-9) // w undercounted when g·w rounds down and
                # 1e-9 is below θ's ulp (w = 15822325.102911225, θ = 3w: 2 steps, is_edge 3)
                best = float(
                    sum(
                        max_steps(policy.theta, wts[a], n - 1)
                        for a, n in zip(axes, sizes, strict=True)
                    )
                )
            else:
                # greedy knapsack (unit values: cheapest steps first is optimal) with a relative
                # slack above is_edge's θ + 1e-12 for the rounding of Σ g_A·w_A: never below
                budget = policy.theta + EDGE_SLACK + 1e-9 * max(1.0, abs(policy.theta))
                for ax, size in sorted(zip(axes, sizes, strict=True), key=lambda t: wts[t[0]]):
                    take = max_steps(budget - EDGE_SLACK, wts[ax], size - 1)
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
        return max_steps(policy.theta, policy.weights[axis], k - 1)
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
        from .policy_edges import _group_pairs

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
