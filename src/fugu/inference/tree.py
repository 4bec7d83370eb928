"""Least-squares consistency on complete b-ary trees of noisy counts (post-processing only).

No private data enters here: every function takes noisy node counts (or public structure) and
returns estimates or variances.

Layout
------
A tree of height ``h`` (``h`` edges from the root to a leaf) with fan-out ``b`` is a list of
``h + 1`` arrays, **root first**::

    levels[0].shape == (..., 1)          # the root
    levels[k].shape == (..., b**k)       # depth k: node j covers leaves [j, j+1) * b**(h-k)
    levels[h].shape == (..., b**h)       # the leaves

Leading dimensions ``...`` are a batch: many independent trees are processed at once (this is how
multi-dimensional product trees are handled, one axis at a time). A leaf count that is not a
power of the fan-out is padded with zero-count leaves on the right (:func:`pad_leaves`); the
padding leaves are public zeros, so dropping them after inference is post-processing.

API
---
``tree_height(n, fanout)``
    Smallest ``h`` with ``fanout**h >= n``.
``pad_leaves(x, fanout, axis=-1)``
    Pad axis with zeros to ``fanout**h`` cells.
``build_tree(leaves, fanout)``
    Exact node counts of every level from a (padded) leaf vector (last axis): list root→leaves.
``consistent_tree(levels, fanout, level_variance=None)``
    The weighted least-squares estimate: minimise ``Σ_v (x̄[v] − x̃[v])² / σ²[level(v)]``
    subject to ``x̄[parent] = Σ x̄[children]``.  ``level_variance=None`` (or all equal) runs
    Hay et al.'s closed-form two-pass algorithm (VLDB 2010, Theorem 3; dpcomp ``h_tree.py``);
    otherwise the generalised two-pass algorithm (Gaussian belief propagation on the tree):

    * up:   ``z[leaf] = x̃[leaf]``, ``V[leaf] = σ²_h``; for an internal node with children C,
      ``S = Σ_C z[c]``, ``U = Σ_C V[c]``,
      ``z[v] = (x̃[v]/σ²_v + S/U) / (1/σ²_v + 1/U)``, ``V[v] = 1/(1/σ²_v + 1/U)``;
    * down: ``x̄[root] = z[root]``; ``x̄[c] = z[c] + V[c]/U · (x̄[parent] − S)``.

    Both are O(number of nodes) and exact (they equal dense least squares; see the tests).
    A level may have variance ``inf`` (not measured, e.g. an omitted root) but the leaves must be
    measured. Returns the consistent levels (same layout); ``levels[-1]`` are the leaf estimates.
``canonical_runs(lo, hi, fanout, height, top=0)``
    The canonical decomposition of half-open leaf ranges ``[lo, hi)`` (vectorised): for every
    depth k, a left run and a right run of whole nodes at that depth, as index intervals
    ``(start, stop)`` (empty when ``start == stop``).  At most ``2(b−1)`` nodes per depth.
    ``top=1`` never uses the root (for trees whose root is not measured).
``canonical_answer(levels, lo, hi, fanout)``
    Range sums from a (not necessarily consistent) tree by the canonical decomposition.
``canonical_variance(lo, hi, fanout, height, level_variance)``
    Variance of :func:`canonical_answer` when node noise is independent with the given per-level
    variances.
``consistent_variance(weights, fanout, level_variance)``
    Variance of ``weights · leaves`` after :func:`consistent_tree`, exactly:
    ``wᵀ (AᵀΣ⁻¹A)⁻¹ w`` computed with one run of the two-pass algorithm (the estimator maps
    a leaf-only measurement vector ``Σ_leaf · w`` to ``(AᵀΣ⁻¹A)⁻¹ w``). ``weights`` has shape
    ``(..., b**h)``; batch dimensions give many queries at once.
``level_square_sums(lo, hi, fanout, height)``
    ``S[k] = Σ_{nodes v at depth k} |leaves(v) ∩ [lo, hi)|²`` for every depth (vectorised, O(h)
    per range); ``S[height]`` is the range length and ``S[0]`` its square.
``range_variance(lo, hi, fanout, level_variance)``
    The exact variance of a range sum after :func:`consistent_tree` in closed form, O(h) per
    range (no leaf vectors): with ``V_h = σ²_h``, ``r_k = σ²_k / (σ²_k + b·V_{k+1})`` (1 for an
    unmeasured level), ``V_k = r_k·b·V_{k+1}``, ``g_h = σ²_h`` and ``g_k = r_k·g_{k+1}``,

    ``Var = g_h·|R| + Σ_{k<h} (g_k − g_{k+1})·S[k] / b^(h−k)``.

    (Derivation: with leaf measurements ``σ²_h·1_R`` the up pass gives ``z[v] = g_k·|v ∩ R|``;
    the down pass adds ``(g_k − g_{k+1})|p ∩ R| / b`` per level to every child of ``p``; summing
    the leaves of R gives the formula. It equals :func:`consistent_variance`; see the tests.)
``range_weights(lo, hi, n_leaves)``
    0/1 weight rows for ranges, for :func:`consistent_variance`.
``covariance_apply(weights, fanout, level_variance)``
    ``(AᵀΣ⁻¹A)⁻¹ w``: the least-squares leaves' covariance applied to ``w`` (one run of the
    two-pass algorithm). With ``w`` the indicator of the real (unpadded) leaves it is the
    direction in which an exact constraint on their total moves the estimate.

Example
-------
>>> import numpy as np
>>> levels = [np.array([0.0]), np.array([0.5, 0.5])]       # DPComp's docstring example
>>> [lv.round(4).tolist() for lv in consistent_tree(levels, fanout=2)]
[[0.3333], [0.1667, 0.1667]]
>>> t = build_tree(np.arange(8.0), 2)
>>> [lv.tolist() for lv in t[:2]]
[[28.0], [6.0, 22.0]]
>>> float(canonical_answer(t, np.array([1]), np.array([7]), 2)[0])
21.0
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
from numpy.typing import ArrayLike, NDArray

from ..errors import InvalidParameterError

__all__ = [
    "tree_height",
    "pad_leaves",
    "build_tree",
    "consistent_tree",
    "canonical_runs",
    "canonical_answer",
    "canonical_variance",
    "consistent_variance",
    "level_square_sums",
    "range_variance",
    "range_weights",
    "covariance_apply",
]

FloatArray = NDArray[np.float64]


def _check_fanout(fanout: int) -> int:
    if isinstance(fanout, bool) or not isinstance(fanout, int | np.integer) or fanout < 2:
        raise InvalidParameterError(
            f"fanout (branching) must be an integer >= 2, got {fanout!r}; use 2 for a binary tree "
            f"or leave it unset to choose it from the domain size"
        )
    return int(fanout)


def tree_height(n: int, fanout: int) -> int:
    """Smallest ``h >= 1`` with ``fanout**h >= n`` (a single leaf still gets a root above it).

    >>> tree_height(4096, 16), tree_height(100, 2), tree_height(1, 4)
    (3, 7, 1)
    """
    b = _check_fanout(fanout)
    if n < 1:
        raise InvalidParameterError(f"a tree needs at least one leaf, got n={n}")
    h, size = 1, b
    while size < n:
        h += 1
        size *= b
    return h


def pad_leaves(x: ArrayLike, fanout: int, axis: int = -1) -> FloatArray:
    """Pad ``axis`` with zero cells up to ``fanout**h`` (:func:`tree_height`)."""
    arr = np.asarray(x, dtype=np.float64)
    n = arr.shape[axis]
    size = _check_fanout(fanout) ** tree_height(n, fanout)
    if size == n:
        return arr
    widths = [(0, 0)] * arr.ndim
    widths[axis] = (0, size - n)
    return np.pad(arr, widths)


def build_tree(leaves: ArrayLike, fanout: int) -> list[FloatArray]:
    """Exact node counts of every level, root first, from leaves along the last axis.

    The leaf count must be a power of ``fanout`` (pad first with :func:`pad_leaves`).
    Integer input keeps its integer dtype (so the counts can get integer noise).
    """
    b = _check_fanout(fanout)
    arr = np.asarray(leaves)
    n = arr.shape[-1]
    h = tree_height(n, b)
    if b**h != n:
        raise InvalidParameterError(f"{n} leaves is not a power of fanout {b}; pad_leaves first")
    out = [arr]
    cur = arr
    for _ in range(h):
        cur = cur.reshape(*cur.shape[:-1], cur.shape[-1] // b, b).sum(axis=-1)
        out.append(cur)
    return out[::-1]


def _check_levels(levels: Sequence[ArrayLike], b: int) -> list[FloatArray]:
    lv = [np.asarray(x, dtype=np.float64) for x in levels]
    if not lv:
        raise InvalidParameterError("levels must hold at least the root")
    batch = lv[0].shape[:-1]
    for k, x in enumerate(lv):
        if x.shape != (*batch, b**k):
            raise InvalidParameterError(
                f"level {k} has shape {x.shape}; a fan-out {b} tree needs "
                f"{(*batch, b**k)} (root first)"
            )
    return lv


def _variances(
    level_variance: Sequence[float] | ArrayLike | None, n_levels: int
) -> FloatArray | None:
    if level_variance is None:
        return None
    v = np.asarray(level_variance, dtype=np.float64).reshape(-1)
    if v.size != n_levels:
        raise InvalidParameterError(
            f"level_variance needs one value per level ({n_levels}), got {v.size}"
        )
    if np.any(np.isnan(v)) or np.any(v <= 0):
        raise InvalidParameterError("level variances must be > 0 (inf for an unmeasured level)")
    if not np.isfinite(v[-1]):
        raise InvalidParameterError("the leaf level must be measured (finite variance)")
    return v


def consistent_tree(
    levels: Sequence[ArrayLike],
    fanout: int,
    level_variance: Sequence[float] | ArrayLike | None = None,
) -> list[FloatArray]:
    """Weighted least-squares consistent tree (see the module docstring for the recurrences).

    Parameters
    ----------
    levels : list of arrays, root first, ``levels[k].shape == (..., fanout**k)``
        Noisy node counts.
    fanout : int
        The tree's fan-out b >= 2.
    level_variance : sequence of floats, optional
        Noise variance of the nodes of each level (root first). None or all equal: Hay et al.'s
        closed form. ``inf`` marks an unmeasured level (not the leaves).

    Returns
    -------
    list of arrays
        Consistent node estimates in the same layout; each parent equals the sum of its children.
    """
    b = _check_fanout(fanout)
    lv = _check_levels(levels, b)
    v = _variances(level_variance, len(lv))
    if v is None or (np.all(np.isfinite(v)) and np.all(v == v[0])):
        return _hay(lv, b)
    return _weighted(lv, b, v)


def _child_sums(x: FloatArray, b: int) -> FloatArray:
    return x.reshape(*x.shape[:-1], x.shape[-1] // b, b).sum(axis=-1)


def _hay(lv: list[FloatArray], b: int) -> list[FloatArray]:
    """Hay et al.'s two passes for equal variances (heights counted from the leaves, leaf = 1)."""
    h = len(lv) - 1
    z: list[FloatArray] = [np.empty(0)] * (h + 1)
    z[h] = lv[h]
    for k in range(h - 1, -1, -1):
        u = h - k + 1  # height of level k
        a = float(b) ** (u - 1)
        s = _child_sums(z[k + 1], b)
        z[k] = ((b - 1) * a * lv[k] + (a - 1) * s) / (b * a - 1)
    out: list[FloatArray] = [np.empty(0)] * (h + 1)
    out[0] = z[0]
    for k in range(1, h + 1):
        out[k] = _add_to_children(z[k], out[k - 1], b)
    return out


def _add_to_children(zk: FloatArray, parent: FloatArray, b: int) -> FloatArray:
    """``zk + repeat((parent − Σ children of zk) / b, b)`` without materialising the repeat."""
    kids = zk.reshape(*zk.shape[:-1], zk.shape[-1] // b, b)
    resid = (parent - kids.sum(axis=-1)) / b
    return (kids + resid[..., None]).reshape(zk.shape)


def _weighted(lv: list[FloatArray], b: int, v: FloatArray) -> list[FloatArray]:
    """Generalised two passes for per-level variances (scalar per level, so siblings share V)."""
    h = len(lv) - 1
    z: list[FloatArray] = [np.empty(0)] * (h + 1)
    var = np.empty(h + 1)
    z[h] = lv[h]
    var[h] = v[h]
    for k in range(h - 1, -1, -1):
        s = _child_sums(z[k + 1], b)
        u = b * var[k + 1]
        if np.isfinite(v[k]):
            prec = 1.0 / v[k] + 1.0 / u
            z[k] = (lv[k] / v[k] + s / u) / prec
            var[k] = 1.0 / prec
        else:
            z[k] = s
            var[k] = u
    out: list[FloatArray] = [np.empty(0)] * (h + 1)
    out[0] = z[0]
    for k in range(1, h + 1):
        out[k] = _add_to_children(z[k], out[k - 1], b)  # V[c]/U = 1/b: siblings share V
    return out


def canonical_runs(
    lo: ArrayLike,
    hi: ArrayLike,
    fanout: int,
    height: int,
    top: int = 0,
    measured: Sequence[bool] | ArrayLike | None = None,
) -> list[tuple[NDArray[np.int64], NDArray[np.int64], NDArray[np.int64], NDArray[np.int64]]]:
    """Canonical decomposition of leaf ranges ``[lo, hi)``, per depth, root first.

    Returns ``height + 1`` tuples ``(left_start, left_stop, right_start, right_stop)`` of node
    indices at that depth (each array has the shape of ``lo``); a run is empty when
    ``start == stop``. The union of the runs' leaves is exactly ``[lo, hi)``, without overlap.
    Depths above ``top`` are never used (their runs are empty): ``top=1`` avoids the root.
    ``measured`` (one flag per depth, root first; the leaves must be measured) marks further
    depths that are never used: a range then climbs from a used depth straight to the next
    used one above it, so its runs at a depth below a skipped one hold up to
    ``b^(gap) − 1`` nodes per side.
    """
    b = _check_fanout(fanout)
    if not 0 <= top <= height:
        raise InvalidParameterError(f"top must lie in 0..{height}, got {top}")
    used = [depth >= top for depth in range(height + 1)]
    if measured is not None:
        flags = [bool(x) for x in np.asarray(measured).reshape(-1)]
        if len(flags) != height + 1 or not flags[height]:
            raise InvalidParameterError(
                f"measured needs one flag per depth ({height + 1}), the leaves measured; "
                f"got {flags}"
            )
        used = [u and f for u, f in zip(used, flags, strict=True)]
    a = np.asarray(lo, dtype=np.int64).copy()
    c = np.asarray(hi, dtype=np.int64).copy()
    active = c > a
    runs = []
    zero = np.zeros_like(a)
    for depth in range(height, -1, -1):
        if not used[depth]:
            runs.append((zero, zero, zero, zero))
            continue
        above = [k for k in range(depth) if used[k]]
        f = b ** (depth - above[-1]) if above else b
        up_lo = -(-a // f)  # ceil
        up_hi = c // f
        go_up = active & (up_lo < up_hi) & bool(above)
        # ranges that do not contain a whole used ancestor: take them entirely here
        stop_here = active & ~go_up
        ls = np.where(go_up, a, np.where(stop_here, a, 0))
        le = np.where(go_up, up_lo * f, np.where(stop_here, c, 0))
        rs = np.where(go_up, up_hi * f, 0)
        re = np.where(go_up, c, 0)
        runs.append((ls, le, rs, re))
        active = go_up
        a = np.where(go_up, up_lo, 0)
        c = np.where(go_up, up_hi, 0)
    return runs[::-1]


def canonical_answer(
    levels: Sequence[ArrayLike], lo: ArrayLike, hi: ArrayLike, fanout: int
) -> FloatArray:
    """Range sums over ``[lo, hi)`` from the canonical nodes of a 1-D tree (vectorised)."""
    b = _check_fanout(fanout)
    lv = _check_levels(levels, b)
    if lv[0].ndim != 1:
        raise InvalidParameterError("canonical_answer works on a single 1-D tree")
    runs = canonical_runs(lo, hi, b, len(lv) - 1)
    total = np.zeros(np.shape(lo), dtype=np.float64)
    for x, (ls, le, rs, re) in zip(lv, runs, strict=True):
        ps = np.concatenate([[0.0], np.cumsum(x)])
        total += ps[le] - ps[ls] + ps[re] - ps[rs]
    return total


def canonical_variance(
    lo: ArrayLike,
    hi: ArrayLike,
    fanout: int,
    height: int,
    level_variance: Sequence[float] | ArrayLike,
    top: int = 0,
    measured: Sequence[bool] | ArrayLike | None = None,
) -> FloatArray:
    """Variance of :func:`canonical_answer` with independent node noise of the given variances.

    ``top``: the first depth used (levels above it are not measured); ``measured``: flags of
    the depths that may be used (see :func:`canonical_runs`).
    """
    v = np.asarray(level_variance, dtype=np.float64).reshape(-1)
    if v.size != height + 1:
        raise InvalidParameterError(f"level_variance needs {height + 1} values, got {v.size}")
    runs = canonical_runs(lo, hi, fanout, height, top, measured)
    total = np.zeros(np.shape(lo), dtype=np.float64)
    for vk, (ls, le, rs, re) in zip(v, runs, strict=True):
        n = ((le - ls) + (re - rs)).astype(np.float64)
        if np.any(n > 0):
            total += np.multiply(n, vk, out=np.zeros_like(total), where=n > 0)
    return total


def level_square_sums(lo: ArrayLike, hi: ArrayLike, fanout: int, height: int) -> FloatArray:
    """``S[..., k] = Σ_{nodes v at depth k} |leaves(v) ∩ [lo, hi)|²``, root first (vectorised).

    Shape ``(*lo.shape, height + 1)``. A range meets at most two nodes of a depth partially, so
    each entry costs O(1): ``left² + right² + (#whole nodes)·W²`` with ``W = b^(h−k)``.

    >>> level_square_sums(np.array([1]), np.array([7]), 2, 3).tolist()   # 8 leaves, [1, 7)
    [[36.0, 18.0, 10.0, 6.0]]
    """
    b = _check_fanout(fanout)
    lo_a = np.asarray(lo, dtype=np.int64)
    hi_a = np.asarray(hi, dtype=np.int64)
    out = np.zeros((*lo_a.shape, height + 1), dtype=np.float64)
    nonempty = hi_a > lo_a
    last = np.maximum(hi_a - 1, lo_a)
    for k in range(height + 1):
        w = b ** (height - k)
        a = lo_a // w
        c = last // w
        same = a == c
        left = ((a + 1) * w - lo_a).astype(np.float64)
        right = (hi_a - c * w).astype(np.float64)
        full = np.maximum(c - a - 1, 0).astype(np.float64)
        length = (hi_a - lo_a).astype(np.float64)
        s = np.where(same, length**2, left**2 + right**2 + full * float(w) ** 2)
        out[..., k] = np.where(nonempty, s, 0.0)
    return out


def level_gains(fanout: int, v: Sequence[float]) -> list[float]:
    """``g_k`` of :func:`range_variance` for per-level variances ``v`` (root first; ``inf`` for
    an unmeasured level). Plain floats: the planner calls it inside its optimiser's loop."""
    h = len(v) - 1
    g = [0.0] * (h + 1)
    g[h] = float(v[h])
    big_v = g[h]
    for k in range(h - 1, -1, -1):
        u = fanout * big_v
        vk = float(v[k])
        if math.isfinite(vk):
            r = vk / (vk + u)
            big_v = r * u
        else:
            r = 1.0
            big_v = u
        g[k] = r * g[k + 1]
    return g


def _gains(fanout: int, v: FloatArray) -> FloatArray:
    """:func:`level_gains` as an array."""
    return np.asarray(level_gains(fanout, v.tolist()), dtype=np.float64)


def range_variance(
    lo: ArrayLike,
    hi: ArrayLike,
    fanout: int,
    level_variance: Sequence[float] | ArrayLike,
) -> FloatArray:
    """Exact variance of the range sums ``[lo, hi)`` after :func:`consistent_tree`, O(h) each.

    ``level_variance`` holds one noise variance per level, root first (``inf``: not measured;
    the leaves must be measured). The closed form is in the module docstring; it equals
    :func:`consistent_variance` on 0/1 range rows without building them.

    >>> v = range_variance(np.array([0, 3]), np.array([8, 5]), 2, [np.inf, 1.0, 1.0, 1.0])
    >>> [round(float(x), 4) for x in v]
    [1.1429, 1.2381]
    """
    b = _check_fanout(fanout)
    v = _variances(level_variance, np.asarray(level_variance).size)
    assert v is not None
    h = v.size - 1
    s = level_square_sums(lo, hi, b, h)
    g = _gains(b, v)
    total = g[h] * s[..., h]
    for k in range(h):
        total = total + (g[k] - g[k + 1]) * s[..., k] / float(b) ** (h - k)
    return np.asarray(total, dtype=np.float64)


def range_weights(lo: ArrayLike, hi: ArrayLike, n_leaves: int) -> FloatArray:
    """0/1 rows (shape ``(m, n_leaves)``) selecting the leaves of each range ``[lo, hi)``."""
    lo_a = np.atleast_1d(np.asarray(lo, dtype=np.int64))
    hi_a = np.atleast_1d(np.asarray(hi, dtype=np.int64))
    j = np.arange(n_leaves)
    return ((j >= lo_a[:, None]) & (j < hi_a[:, None])).astype(np.float64)


def covariance_apply(
    weights: ArrayLike, fanout: int, level_variance: Sequence[float] | ArrayLike
) -> FloatArray:
    """``(AᵀΣ⁻¹A)⁻¹ w``: the covariance of the leaves after :func:`consistent_tree` applied to
    ``weights`` (shape ``(..., fanout**h)``, padded leaves; same shape out), in the units of
    ``level_variance`` (root first; ``inf``: not measured).

    The least-squares map sends the measurement vector with ``σ²_leaf · w`` on the leaves and
    0 elsewhere to ``(AᵀΣ⁻¹A)⁻¹ w`` (unmeasured levels stay unmeasured), so this is one run of
    the two-pass algorithm. For ``w`` = 1 on every leaf of a complete tree the result is
    constant; for the indicator of the first n of b^h leaves (padding) it is not.

    >>> u = covariance_apply(np.array([1.0, 1, 1, 0]), 2, [np.inf, 1.0, 1.0])
    >>> [round(float(x), 4) for x in u]
    [0.3333, 0.3333, 0.6667, -0.3333]
    """
    b = _check_fanout(fanout)
    w = np.asarray(weights, dtype=np.float64)
    n = w.shape[-1]
    h = tree_height(n, b)
    if b**h != n:
        raise InvalidParameterError(f"weights have {n} leaves, not a power of fanout {b}")
    v = _variances(level_variance, h + 1)
    assert v is not None
    batch = w.shape[:-1]
    levels = [np.zeros((*batch, b**k)) for k in range(h)] + [w * v[-1]]
    return np.asarray(consistent_tree(levels, b, v)[-1], dtype=np.float64)


def consistent_variance(
    weights: ArrayLike, fanout: int, level_variance: Sequence[float] | ArrayLike
) -> FloatArray:
    """Exact variance of ``weights · x̄_leaves`` after :func:`consistent_tree`.

    ``weights`` has shape ``(..., fanout**h)`` (padded leaves); returns shape ``(...)``.
    Uses ``Var = wᵀ(AᵀΣ⁻¹A)⁻¹w`` (:func:`covariance_apply`).
    """
    w = np.asarray(weights, dtype=np.float64)
    est = covariance_apply(w, fanout, level_variance)
    return np.asarray(np.sum(est * w, axis=-1), dtype=np.float64)
