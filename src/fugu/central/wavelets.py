"""Privelet's wavelet transforms: Haar (ordinal), nominal (hierarchy) and identity, per axis.

Source: Xiao, Wang, Gehrke, "Differential Privacy via Wavelet Transforms" (ICDE 2010 / TKDE 2011,
seed ``004_…``); formulas as restated in ``specs/blowfish_privelet_hierarchical.md`` §B.

Every transform works along one axis of an array, vectorised over the other axes, and exposes:

* ``forward(x, axis)``: entries (length ``n``) → coefficients (length ``n_coef``);
* ``inverse(c, axis)``: the exact inverse (``inverse(forward(x)) == x``);
* ``project(c, axis)``: the post-noise step before reconstruction (nominal: subtract the mean of
  every sibling group; identity elsewhere);
* ``adjoint(q)``: for query rows ``q`` (shape ``(m, n)``), the coefficient rows ``a`` with
  ``q · inverse(project(c)) == a · c`` — used for exact variances;
* ``weights`` (Privelet's W), ``P`` (generalized sensitivity factor), ``H`` (variance factor of
  the paper's bound), ``max_changed`` (coefficients a unit change of one entry can move);
* ``forward_exact(x, axis)``: the weighted coefficients W(c)·c of integer entries, exactly, as
  integer numerators over the public ``denominators`` (W(c)·c = numerator / denominator), for
  the noise step (:func:`hn_forward_exact`); ``growth`` bounds how much one record can move any
  integer it computes, relative to its input.

Haar (ordinal, ``n`` padded to ``m = 2^k`` with zero-count dummies): coefficient layout
``[c_0, level 1 (1 coef), level 2 (2 coefs), …, level k (m/2 coefs)]``; ``c_0`` is the mean of
all entries, a node's coefficient is (mean of its left half − mean of its right half)/2;
W(c_0) = m, W(c) = number of entries under c; generalized sensitivity P = 1 + log2 m.

Nominal (hierarchy, over-complete): slot 0 holds ``c_0 = v_root``; every other node N has one
slot, with ``c_N = v_N − v_parent / f_parent`` (``v`` = total under a node, ``f`` = fan-out);
slots are ordered so that sibling groups are contiguous (breadth first). W(c_0) = 1,
W(c_N) = f/(2f − 2); P = the number of levels on the longest root-to-leaf path that branch
(= the hierarchy height h when every internal node has ≥ 2 children). A node with a single child
has an identically zero coefficient; it carries no information and costs no budget.

>>> import numpy as np
>>> t = HaarTransform(5)
>>> c = t.forward(np.array([1.0, 2, 3, 4, 5]))
>>> c.shape, t.P, np.allclose(t.inverse(c), [1, 2, 3, 4, 5])
((8,), 4.0, True)
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
from numpy.typing import NDArray

from ..domain import Attribute, Hierarchy, Nominal
from ..errors import DomainError

__all__ = [
    "AxisTransform",
    "HaarTransform",
    "NominalTransform",
    "IdentityTransform",
    "transform_for",
    "hn_forward",
    "hn_inverse",
    "hn_project",
    "hn_weights",
    "hn_forward_exact",
    "generalized_sensitivity",
]

FloatArray = NDArray[np.float64]


class AxisTransform:
    """Base class: one linear transform along one axis."""

    kind = "identity"
    n: int
    n_coef: int
    weights: FloatArray
    P: float
    H: float
    max_changed: int
    #: W(c)·c = forward_exact(x)[c] / denominators[c] (positive integers)
    denominators: NDArray[np.int64]
    #: one record moves every integer forward_exact computes by at most ``growth`` times its
    #: largest move of the input
    growth: int = 1

    def forward_exact(self, x: NDArray[Any], axis: int = -1) -> NDArray[Any]:
        """Integer numerators of the weighted coefficients W(c)·c of integer entries ``x``
        (int64 or Python-int object arrays, kept in that dtype)."""
        raise NotImplementedError

    def forward(self, x: NDArray[np.float64], axis: int = -1) -> FloatArray:
        raise NotImplementedError

    def inverse(self, c: NDArray[np.float64], axis: int = -1) -> FloatArray:
        raise NotImplementedError

    def project(self, c: NDArray[np.float64], axis: int = -1) -> FloatArray:
        return np.asarray(c, dtype=np.float64)

    def adjoint(self, q: NDArray[np.float64]) -> FloatArray:
        raise NotImplementedError

    def noise_factor(self, q: NDArray[np.float64]) -> FloatArray:
        """Σ_c a_c² / W_c² per query row: the axis's factor of the answer's noise variance."""
        a = self.adjoint(np.atleast_2d(np.asarray(q, dtype=np.float64)))
        return np.asarray(np.sum((a / self.weights) ** 2, axis=-1), dtype=np.float64)


def _last(x: NDArray[np.float64], axis: int) -> FloatArray:
    return np.moveaxis(np.asarray(x, dtype=np.float64), axis, -1)


class IdentityTransform(AxisTransform):
    """No transform (Privelet+'s untransformed attributes): weight 1, P = 1, H = n."""

    kind = "identity"

    def __init__(self, n: int) -> None:
        self.n = self.n_coef = int(n)
        self.weights = np.ones(self.n)
        self.P = 1.0
        self.H = float(self.n)
        self.max_changed = 1
        self.denominators = np.ones(self.n, dtype=np.int64)

    def forward(self, x: NDArray[np.float64], axis: int = -1) -> FloatArray:
        return np.asarray(x, dtype=np.float64)

    def forward_exact(self, x: NDArray[Any], axis: int = -1) -> NDArray[Any]:
        return np.asarray(x)

    def inverse(self, c: NDArray[np.float64], axis: int = -1) -> FloatArray:
        return np.asarray(c, dtype=np.float64)

    def adjoint(self, q: NDArray[np.float64]) -> FloatArray:
        return np.asarray(q, dtype=np.float64)


class HaarTransform(AxisTransform):
    """1-D Haar wavelet transform of ``n`` entries, padded to ``m = 2^k`` (Privelet §4)."""

    kind = "haar"

    def __init__(self, n: int) -> None:
        self.n = int(n)
        self.k = max(0, math.ceil(math.log2(self.n))) if self.n > 1 else 0
        self.m = 1 << self.k
        self.n_coef = self.m
        w = np.empty(self.m)
        w[0] = self.m
        for j in range(self.k):
            w[1 << j : 2 << j] = self.m >> j
        self.weights = w
        self.P = 1.0 + self.k
        self.H = (2.0 + self.k) / 4.0
        self.max_changed = 1 + self.k
        # W(c)·c is an integer: the total (c_0) or sum(left half) − sum(right half)
        self.denominators = np.ones(self.m, dtype=np.int64)

    def _sums(self, a: NDArray[Any]) -> NDArray[Any]:
        """[total, then sum(left) − sum(right) per node] along the last axis, in a's dtype: the
        weighted coefficients W(c)·c (c_0 = total/m, W = m; c = (sum_L − sum_R)/s, W = s)."""
        cur = a
        if self.m != self.n:
            pad = np.zeros((*a.shape[:-1], self.m - self.n), dtype=a.dtype)
            cur = np.concatenate([a, pad], axis=-1)
        out = np.empty((*a.shape[:-1], self.m), dtype=a.dtype)
        size = self.m
        while size > 1:
            pairs = cur.reshape(*cur.shape[:-1], size // 2, 2)
            out[..., size // 2 : size] = pairs[..., 0] - pairs[..., 1]
            cur = pairs[..., 0] + pairs[..., 1]
            size //= 2
        out[..., 0] = cur[..., 0]
        return out

    def forward_exact(self, x: NDArray[Any], axis: int = -1) -> NDArray[Any]:
        a = np.moveaxis(np.asarray(x), axis, -1)
        if a.shape[-1] != self.n:
            raise DomainError(f"Haar transform of {self.n} entries got an axis of {a.shape[-1]}")
        return np.moveaxis(self._sums(a), -1, axis)

    def forward(self, x: NDArray[np.float64], axis: int = -1) -> FloatArray:
        a = _last(x, axis)
        if a.shape[-1] != self.n:
            raise DomainError(f"Haar transform of {self.n} entries got an axis of {a.shape[-1]}")
        cur = a
        if self.m != self.n:
            cur = np.concatenate([a, np.zeros((*a.shape[:-1], self.m - self.n))], axis=-1)
        out = np.empty((*a.shape[:-1], self.m))
        size = self.m
        while size > 1:
            pairs = cur.reshape(*cur.shape[:-1], size // 2, 2)
            left, right = pairs[..., 0], pairs[..., 1]
            out[..., size // 2 : size] = (left - right) * 0.5
            cur = (left + right) * 0.5
            size //= 2
        out[..., 0] = cur[..., 0]
        return np.moveaxis(out, -1, axis)

    def inverse(self, c: NDArray[np.float64], axis: int = -1) -> FloatArray:
        a = _last(c, axis)
        if a.shape[-1] != self.m:
            raise DomainError(f"inverse Haar needs {self.m} coefficients, got {a.shape[-1]}")
        cur = a[..., :1]
        size = 1
        while size < self.m:
            det = a[..., size : 2 * size]
            nxt = np.empty((*a.shape[:-1], size, 2))
            nxt[..., 0] = cur + det
            nxt[..., 1] = cur - det
            cur = nxt.reshape(*a.shape[:-1], 2 * size)
            size *= 2
        return np.moveaxis(cur[..., : self.n], -1, axis)

    def adjoint(self, q: NDArray[np.float64]) -> FloatArray:
        out: FloatArray = self._sums(np.asarray(q, dtype=np.float64))
        return out


class NominalTransform(AxisTransform):
    """Privelet's over-complete nominal wavelet transform over an attribute's hierarchy."""

    kind = "nominal"

    def __init__(self, hierarchy: Hierarchy, name: str = "attribute") -> None:
        h = hierarchy
        self.n = h.size
        kids = [h.children_index(i) for i in range(len(h.nodes))]
        if all(len(k) <= 1 for k in kids):
            raise DomainError(
                f"the hierarchy of {name!r} has a single child under every node (one value, "
                f"nothing to transform); leave it untransformed with plain=[{name!r}] or give it "
                f"real groups"
            )
        # slot order: root, then the children of each node in breadth-first order
        order = [0]
        parent_slot = [-1]
        group_starts: list[int] = []
        i = 0
        while i < len(order):
            node = order[i]
            if kids[node]:
                group_starts.append(len(order))
                for c in kids[node]:
                    order.append(c)
                    parent_slot.append(i)
            i += 1
        self.order = np.asarray(order, dtype=np.int64)
        self.parent_slot = np.asarray(parent_slot, dtype=np.int64)
        self.n_coef = len(order)
        fan = np.ones(self.n_coef)
        for s in range(1, self.n_coef):
            fan[s] = len(kids[order[self.parent_slot[s]]])
        self.fanout = fan  # fan-out of each slot's parent
        self.group_starts = np.asarray(group_starts, dtype=np.int64)
        self.group_sizes = np.diff(np.append(self.group_starts, self.n_coef))
        self.starts = np.asarray([h.nodes[o].start for o in order], dtype=np.int64)
        self.stops = np.asarray([h.nodes[o].stop for o in order], dtype=np.int64)
        depth = np.asarray([h.nodes[o].depth for o in order], dtype=np.int64)
        self.depth = depth
        # contiguous slot ranges per depth (breadth-first order is sorted by depth)
        self.depth_bounds = [
            (int(np.searchsorted(depth, d, "left")), int(np.searchsorted(depth, d, "right")))
            for d in range(int(depth.max()) + 1)
        ]
        is_leaf = np.asarray([not kids[o] for o in order])
        leaf_slots = np.flatnonzero(is_leaf)
        self.leaf_slot = leaf_slots[np.argsort(self.starts[leaf_slots])]  # code → slot
        w = np.ones(self.n_coef)
        branching = fan >= 2
        w[1:] = np.where(branching[1:], fan[1:] / np.maximum(2 * fan[1:] - 2, 1), 1.0)
        self.weights = w
        self.branching = branching
        # P: 1 (for c_0) + the number of branching edges on the longest root-to-leaf path
        br_depth = np.zeros(self.n_coef, dtype=np.int64)
        for s in range(1, self.n_coef):
            br_depth[s] = br_depth[self.parent_slot[s]] + int(branching[s])
        self.P = float(1 + br_depth[self.leaf_slot].max())
        self.H = 4.0
        changed = np.ones(self.n_coef, dtype=np.int64)
        for s in range(1, self.n_coef):
            extra = int(fan[s]) if branching[s] else 0
            changed[s] = changed[self.parent_slot[s]] + extra
        self.max_changed = int(changed[self.leaf_slot].max())
        # W(c_N)·c_N = (f·v_N − v_parent) / (2f − 2) (f ≥ 2); v_N − v_parent = 0 when f = 1
        self.multipliers = fan.astype(np.int64)
        self.denominators = np.where(branching, 2 * self.multipliers - 2, 1).astype(np.int64)
        self.denominators[0] = 1
        # f·v_N is the largest integer computed: at most f times the input's move
        self.growth = int(self.multipliers.max())

    def forward_exact(self, x: NDArray[Any], axis: int = -1) -> NDArray[Any]:
        a = np.moveaxis(np.asarray(x), axis, -1)
        if a.shape[-1] != self.n:
            raise DomainError(f"nominal transform of {self.n} entries got an axis of {a.shape[-1]}")
        zero = np.zeros((*a.shape[:-1], 1), dtype=a.dtype)
        cs = np.concatenate([zero, np.cumsum(a, axis=-1, dtype=a.dtype)], axis=-1)
        v = cs[..., self.stops] - cs[..., self.starts]
        c = v.copy()
        mult = self.multipliers[1:] if a.dtype != object else self.multipliers[1:].astype(object)
        c[..., 1:] = v[..., 1:] * mult - v[..., self.parent_slot[1:]]
        return np.moveaxis(c, -1, axis)

    def _group_sum(self, a: FloatArray) -> FloatArray:
        return np.add.reduceat(a, self.group_starts, axis=-1)

    def forward(self, x: NDArray[np.float64], axis: int = -1) -> FloatArray:
        a = _last(x, axis)
        if a.shape[-1] != self.n:
            raise DomainError(f"nominal transform of {self.n} entries got an axis of {a.shape[-1]}")
        cs = np.concatenate([np.zeros((*a.shape[:-1], 1)), np.cumsum(a, axis=-1)], axis=-1)
        v = cs[..., self.stops] - cs[..., self.starts]
        c = v.copy()
        c[..., 1:] = v[..., 1:] - v[..., self.parent_slot[1:]] / self.fanout[1:]
        return np.moveaxis(c, -1, axis)

    def inverse(self, c: NDArray[np.float64], axis: int = -1) -> FloatArray:
        a = _last(c, axis)
        if a.shape[-1] != self.n_coef:
            raise DomainError(f"inverse nominal transform needs {self.n_coef} coefficients")
        v = np.empty_like(a)
        v[..., 0] = a[..., 0]
        for lo, hi in self.depth_bounds[1:]:
            ps = self.parent_slot[lo:hi]
            v[..., lo:hi] = a[..., lo:hi] + v[..., ps] / self.fanout[lo:hi]
        return np.moveaxis(v[..., self.leaf_slot], -1, axis)

    def project(self, c: NDArray[np.float64], axis: int = -1) -> FloatArray:
        """Mean subtraction: every sibling group's coefficients are made to sum to zero."""
        a = _last(c, axis).copy()
        means = self._group_sum(a[..., :]) / self.group_sizes
        # reduceat over slot 0 is not in a group: group_starts begins at 1
        a[..., 1:] -= np.repeat(means, self.group_sizes, axis=-1)
        return np.moveaxis(a, -1, axis)

    def adjoint(self, q: NDArray[np.float64]) -> FloatArray:
        a = np.asarray(q, dtype=np.float64)
        u = np.zeros((*a.shape[:-1], self.n_coef))
        u[..., self.leaf_slot] = a
        # bottom-up: u[parent] = (1/f) Σ_children u[child], deepest groups first
        for lo, hi in self.depth_bounds[:0:-1]:
            ps = self.parent_slot[lo:hi]
            contrib = u[..., lo:hi] / self.fanout[lo:hi]
            # children of one parent are contiguous: sum them per group
            starts = np.flatnonzero(np.r_[True, ps[1:] != ps[:-1]])
            sums = np.add.reduceat(contrib, starts, axis=-1)
            u[..., ps[starts]] += sums
        return self.project(u)


def transform_for(attr: Attribute, plain: bool) -> AxisTransform:
    """The transform Privelet uses for an attribute: identity (plain), nominal or Haar."""
    if plain:
        return IdentityTransform(attr.size)
    if isinstance(attr, Nominal):
        return NominalTransform(attr.hierarchy, attr.name)
    return HaarTransform(attr.size)


def hn_forward(x: NDArray[np.float64], transforms: list[AxisTransform]) -> FloatArray:
    """The multi-dimensional HN transform: each axis's transform in turn."""
    out = np.asarray(x, dtype=np.float64)
    for ax, t in enumerate(transforms):
        if not isinstance(t, IdentityTransform):
            out = t.forward(out, ax)
    return out


#: int64 arithmetic is used while every integer stays below this; Python integers beyond.
INT64_SAFE = 2**62


def hn_forward_exact(
    counts: NDArray[np.integer[Any]], transforms: list[AxisTransform]
) -> tuple[NDArray[Any], NDArray[np.int64] | NDArray[Any] | None]:
    """The weighted HN coefficients W(c)·c of integer counts, exactly: ``(numerators,
    denominators)`` with W(c)·c = numerators / denominators, elementwise (denominators
    broadcast against the numerators; None when all are 1, e.g. Haar and untransformed axes).

    Integer arithmetic throughout (no float rounding: the noise step rounds once, to its grid):
    int64 while ``n · Π growth`` and the largest denominator stay below 2^62, Python integers
    (object arrays) beyond, which is slower but only needed for huge counts or fan-outs.

    >>> h = HaarTransform(4)
    >>> num, den = hn_forward_exact(np.array([3, 1, 0, 2]), [h])
    >>> num.tolist(), den is None
    ([6, 2, 2, -2], True)
    """
    x = np.asarray(counts)
    if x.dtype.kind not in "iu":
        raise DomainError(f"hn_forward_exact needs integer counts, got dtype {x.dtype}")
    # an upper bound on n = Σ|x| (the float sum errs by far less than the 2^-30 margin)
    n = float(np.abs(x).sum(dtype=np.float64)) * (1 + 2.0**-30) + 1 if x.size else 1.0
    growth = 1
    den_max = 1
    for t in transforms:
        growth *= int(t.growth)
        den_max *= int(np.max(t.denominators))
    small = n * growth < INT64_SAFE and den_max < INT64_SAFE
    out = x.astype(np.int64) if small else x.astype(object)
    den: NDArray[Any] | None = None
    d = len(transforms)
    for ax, t in enumerate(transforms):
        if not isinstance(t, IdentityTransform):
            out = t.forward_exact(out, ax)
        if np.any(t.denominators != 1):
            shape = [1] * d
            shape[ax] = t.n_coef
            per = t.denominators if small else t.denominators.astype(object)
            den = per.reshape(shape) if den is None else den * per.reshape(shape)
    return out, den


def hn_project(c: NDArray[np.float64], transforms: list[AxisTransform]) -> FloatArray:
    out = np.asarray(c, dtype=np.float64)
    for ax, t in enumerate(transforms):
        if isinstance(t, NominalTransform):
            out = t.project(out, ax)
    return out


def hn_inverse(c: NDArray[np.float64], transforms: list[AxisTransform]) -> FloatArray:
    out = np.asarray(c, dtype=np.float64)
    for ax, t in reversed(list(enumerate(transforms))):
        if not isinstance(t, IdentityTransform):
            out = t.inverse(out, ax)
    return out


def hn_weights(transforms: list[AxisTransform]) -> FloatArray:
    """Product weights W(c) = Π_i W_i(c_i), as one array of the coefficient cube's shape."""
    d = len(transforms)
    w: FloatArray = np.ones([1] * d)
    for ax, t in enumerate(transforms):
        shape = [1] * d
        shape[ax] = t.n_coef
        w = w * t.weights.reshape(shape)
    return w


def generalized_sensitivity(transforms: list[AxisTransform]) -> float:
    """Closed-form generalized sensitivity of the HN transform: Π_i P(A_i)."""
    return float(np.prod([t.P for t in transforms]))
