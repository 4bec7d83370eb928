"""The hierarchical mechanism with constrained inference (Hay et al.; Qardaji et al.'s branching).

Privacy model: central ε-differential privacy. Neighbours: replace one record (default; every
tree level then changes by 2 in L1) or add/remove one record (1 per level).

Source: Hay, Rastogi, Miklau, Suciu, "Boosting the Accuracy of Differentially Private Histograms
Through Consistency", VLDB 2010 (hierarchical query H, Theorem 3's two-pass least squares);
Qardaji, Yang, Li, "Understanding Hierarchical Methods for Differentially Private Histograms",
VLDB 2013 (the branching rule, Eq. 3); geometric budgets from Cormode, Procopiuc, Srivastava,
Shen, Yu, "Differentially Private Spatial Decompositions", ICDE 2012. Restated in
``specs/blowfish_privelet_hierarchical.md`` §C.

Mechanism. Along each attribute, a complete b-ary tree over the attribute's codes (leaves padded
with zero cells up to b^h; nominal attributes use their code order, in which every hierarchy node
is an interval). A d-dimensional cube uses the **product hierarchy**: one node for every
combination of one tree node per axis (Qardaji et al.'s HB for d = 2, generalised), i.e. the
Kronecker product of the per-axis tree matrices. Every node count is an integer and gets exact
discrete Laplace noise.

Sensitivity. A record lies in exactly one node of every combination of levels (k_1, …, k_d), so
with budget shares p_i(k) per level (Σ_k p_i(k) = 1 on every axis) the node combination gets
ε·Π_i p_i(k_i) and noise scale δ/(ε Π_i p_i(k_i)) (δ = 2 replace, 1 add/remove): the privacy
losses add up to ε. Uniform shares: every node has scale δ·Π_i(h_i + 1)/ε.

Inference. Weighted least squares under the tree constraints; because the measurement matrix
and the noise variances are Kronecker products, the estimate is the 1-D two-pass algorithm
(:func:`fugu.inference.tree.consistent_tree`) applied along each axis in turn. It is
post-processing, unbiased, and never increases the variance of any range query.

Error. Exact per query (``expected_error``): with consistency, Var = C·Π_i wᵢᵀ(AᵢᵀΣᵢ⁻¹Aᵢ)⁻¹wᵢ;
without, C·Π_i Σ_canonical nodes of axis i r_i(level). Both are O(log^{3d} N / ε²) against
Basic's O(volume/ε²). For the geometric budget the node variance is modelled as 2·scale²
(an upper bound on the discrete Laplace variance, tight to ~2% at scale 2).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import NDArray

from ..budget import Accountant
from ..domain import Domain
from ..errors import InvalidParameterError
from ..histogram import Histogram, require_histogram
from ..inference.tree import (
    build_tree,
    canonical_runs,
    canonical_variance,
    consistent_tree,
    consistent_variance,
    tree_height,
)
from ..mechanism import check_neighbours, guarantee, start
from ..noise import RandomSource, discrete_laplace, discrete_laplace_variance, geometric_mechanism
from ..queries import PrefixSums, RangeQuery
from ..release import CubeRelease, Guarantee, Release

__all__ = [
    "hierarchical",
    "HierarchicalRelease",
    "qardaji_branching",
    "AxisTree",
    "hierarchical_variance",
]

SOURCE = (
    "Hay, Rastogi, Miklau, Suciu, VLDB 2010 (hierarchical query, Theorem 3 least squares); "
    "Qardaji, Yang, Li, VLDB 2013 (branching); product hierarchy over the attributes"
)

#: Cormode et al.'s geometric ratio between consecutive levels' budgets (leaves get the most).
GEOMETRIC_RATIO = 2.0 ** (1.0 / 3.0)


def qardaji_branching(n: int) -> int:
    """Qardaji et al.'s fan-out: b minimising (b − 1)h³ − 2(b + 1)h²/3, h = ⌈log_b n⌉.

    >>> [qardaji_branching(n) for n in (256, 1024, 4096, 65536)]
    [16, 32, 16, 16]
    """
    if n <= 2:
        return 2
    best, best_v = 2, math.inf
    for b in range(2, n + 1):
        h = tree_height(n, b)
        v = (b - 1) * h**3 - 2 * (b + 1) * h**2 / 3
        if v < best_v - 1e-12:
            best, best_v = b, v
    return best


@dataclass(frozen=True)
class AxisTree:
    """The tree along one axis: ``n`` cells, fan-out ``b``, height ``h``, budget shares ``p``."""

    n: int
    b: int
    h: int
    p: tuple[float, ...]

    @property
    def leaves(self) -> int:
        return int(self.b**self.h) if self.h > 0 else self.n

    @property
    def layout_size(self) -> int:
        return sum(self.b**k for k in range(self.h + 1)) if self.h > 0 else self.n

    @property
    def offsets(self) -> list[int]:
        out, acc = [], 0
        for k in range(self.h + 1):
            out.append(acc)
            acc += self.b**k
        return out

    @property
    def rel_variance(self) -> NDArray[np.float64]:
        """Relative node variance of each level, 1/p(k)²."""
        return 1.0 / np.asarray(self.p, dtype=np.float64) ** 2

    def to_dict(self) -> dict[str, Any]:
        return {"n": self.n, "b": self.b, "h": self.h, "p": list(self.p)}


def _check_branching(branching: object, n_axes: int) -> list[int | None]:
    if branching is None:
        return [None] * n_axes
    items = list(branching) if isinstance(branching, list | tuple) else [branching] * n_axes
    if len(items) != n_axes:
        raise InvalidParameterError(
            f"branching needs one fan-out per attribute ({n_axes}), got {len(items)}"
        )
    out: list[int | None] = []
    for b in items:
        if b is None:
            out.append(None)
            continue
        if isinstance(b, bool) or not isinstance(b, int | np.integer) or b < 2:
            raise InvalidParameterError(
                f"branching must be an integer >= 2 (the tree's fan-out), got {b!r}; "
                f"leave it unset "
                f"to use Qardaji et al.'s rule (about 16 for large domains)"
            )
        out.append(int(b))
    return out


def _shares(budget: object, h: int) -> tuple[float, ...]:
    if budget == "uniform":
        return tuple([1.0 / (h + 1)] * (h + 1))
    if budget == "geometric":
        w = GEOMETRIC_RATIO ** np.arange(h + 1)
        return tuple(float(x) for x in w / w.sum())
    if isinstance(budget, str):
        raise InvalidParameterError(
            f"budget must be 'uniform', 'geometric' or per-level shares, got {budget!r}"
        )
    try:
        w = np.asarray(budget, dtype=np.float64).reshape(-1)
    except (TypeError, ValueError):
        raise InvalidParameterError(
            f"budget must be 'uniform', 'geometric' or per-level shares, got {budget!r}"
        ) from None
    if w.size != h + 1 or np.any(~np.isfinite(w)) or np.any(w <= 0):
        raise InvalidParameterError(
            f"budget shares must be {h + 1} positive numbers (one per level, root first), "
            f"got {budget!r}"
        )
    return tuple(float(x) for x in w / w.sum())


def _check_flat(domain: Domain, flat: Sequence[str] | None) -> set[str]:
    names = [flat] if isinstance(flat, str) else list(flat or [])
    for f in names:
        if f not in domain.names:
            raise InvalidParameterError(
                f"flat names an unknown attribute {f!r}; the domain's attributes are "
                f"{list(domain.names)}"
            )
    return set(names)


def axis_trees(
    domain: Domain,
    branching: object = None,
    budget: object = "uniform",
    flat: Sequence[str] | None = None,
) -> list[AxisTree]:
    """The per-axis trees the mechanism would use (public: depends on the domain only).

    Attributes in ``flat`` get no tree (height 0: every value is its own sub-cube).
    """
    bs = _check_branching(branching, domain.ndim)
    flat_names = _check_flat(domain, flat)
    out = []
    for attr, b in zip(domain.attributes, bs, strict=True):
        if attr.name in flat_names:
            out.append(AxisTree(attr.size, 2, 0, (1.0,)))
            continue
        b_ = b if b is not None else qardaji_branching(attr.size)
        h = tree_height(attr.size, b_)
        out.append(AxisTree(attr.size, b_, h, _shares(budget, h)))
    return out


def _delta(neighbours: str) -> int:
    return 2 if check_neighbours(neighbours) == "replace" else 1


def _noise_constant(trees: list[AxisTree], epsilon: float, delta: int) -> tuple[float, bool]:
    """C such that node variance = C·Π_i r_i(k_i); True when exact (uniform shares)."""
    uniform = all(len(set(t.p)) == 1 for t in trees)
    if uniform:
        levels = float(np.prod([t.h + 1 for t in trees]))
        var = float(discrete_laplace_variance(delta * levels / epsilon))
        return var / levels**2, True
    return 2.0 * (delta / epsilon) ** 2, False


def _to_layout(x: NDArray[Any], axis: int, tree: AxisTree) -> NDArray[Any]:
    """Replace the (padded) leaf axis by the concatenated levels of its tree, root first."""
    if tree.h == 0:
        return x
    a = np.moveaxis(x, axis, -1)
    if a.shape[-1] != tree.leaves:
        widths = [(0, 0)] * (a.ndim - 1) + [(0, tree.leaves - a.shape[-1])]
        a = np.pad(a, widths)
    levels = build_tree(a, tree.b)
    return np.moveaxis(np.concatenate(levels, axis=-1), -1, axis)


def _split_layout(x: NDArray[np.float64], tree: AxisTree) -> list[NDArray[np.float64]]:
    return [x[..., o : o + tree.b**k] for k, o in enumerate(tree.offsets)]


def _axis_rows(bounds: NDArray[np.int64], axis: int) -> tuple[NDArray[np.int64], NDArray[np.int64]]:
    uniq, inv = np.unique(bounds[:, axis, :], axis=0, return_inverse=True)
    return uniq, inv.reshape(-1)


def _axis_factor(tree: AxisTree, lohi: NDArray[np.int64], consistent: bool) -> NDArray[np.float64]:
    if tree.h == 0:
        return (lohi[:, 1] - lohi[:, 0]).astype(np.float64) * tree.rel_variance[0]
    if not consistent:
        return canonical_variance(lohi[:, 0], lohi[:, 1], tree.b, tree.h, tree.rel_variance)
    out = np.empty(len(lohi))
    j = np.arange(tree.leaves)
    step = max(1, 2**22 // tree.leaves)
    for i in range(0, len(lohi), step):
        part = lohi[i : i + step]
        w = ((j >= part[:, :1]) & (j < part[:, 1:])).astype(np.float64)
        out[i : i + step] = consistent_variance(w, tree.b, tree.rel_variance)
    return out


def _variance(
    trees: list[AxisTree], const: float, bounds: NDArray[np.int64], consistent: bool
) -> NDArray[np.float64]:
    b = np.asarray(bounds, dtype=np.int64)
    total = np.full(b.shape[0], const)
    for ax, t in enumerate(trees):
        uniq, inv = _axis_rows(b, ax)
        total *= _axis_factor(t, uniq, consistent)[inv]
    return total


def hierarchical_variance(
    domain: Domain,
    bounds: NDArray[np.int64],
    epsilon: float,
    *,
    branching: object = None,
    budget: object = "uniform",
    consistency: bool = True,
    flat: Sequence[str] | None = None,
    neighbours: str = "replace",
) -> NDArray[np.float64]:
    """Noise variance of each query (bounds (m, d, 2)) under the mechanism, without any data."""
    trees = axis_trees(domain, branching, budget, flat)
    const, _ = _noise_constant(trees, epsilon, _delta(neighbours))
    return _variance(trees, const, bounds, consistency)


class HierarchicalRelease(CubeRelease):
    """A hierarchical-mechanism cube.

    With consistency (default) the cells are the least-squares leaves and answers are their
    sums. Without it the release keeps the whole noisy tree and answers each range from its
    canonical nodes; ``counts`` are then the noisy leaves.
    """

    kind = "hierarchical"

    def __init__(
        self,
        domain: Domain,
        guarantee: Guarantee,
        estimate: Any,
        *,
        trees: list[AxisTree],
        const: float,
        consistent: bool,
        tree: NDArray[np.float64] | None = None,
    ) -> None:
        super().__init__(domain, guarantee, estimate)
        self.trees = list(trees)
        self.const = float(const)
        self.consistent = bool(consistent)
        self.tree = tree
        self._tree_prefix: PrefixSums | None = None

    def _answer_bounds(self, bounds: NDArray[np.int64]) -> NDArray[np.float64]:
        if self.consistent or self.tree is None:
            return super()._answer_bounds(bounds)
        if self._tree_prefix is None:
            self._tree_prefix = PrefixSums(self.tree)
        b = np.asarray(bounds, dtype=np.int64)
        per_axis = []
        for ax, t in enumerate(self.trees):
            if t.h == 0:
                per_axis.append([(b[:, ax, 0], b[:, ax, 1])])
                continue
            runs = canonical_runs(b[:, ax, 0], b[:, ax, 1], t.b, t.h)
            ivals = []
            for off, (ls, le, rs, re) in zip(t.offsets, runs, strict=True):
                ivals.append((ls + off, le + off))
                ivals.append((rs + off, re + off))
            per_axis.append(ivals)
        total = np.zeros(b.shape[0])
        for combo in np.ndindex(*[len(p) for p in per_axis]):
            box = np.stack(
                [np.stack(per_axis[ax][c], axis=-1) for ax, c in enumerate(combo)], axis=1
            )
            nonempty = np.all(box[:, :, 1] > box[:, :, 0], axis=1)
            if np.any(nonempty):
                total[nonempty] += self._tree_prefix.answer(box[nonempty])
        return total

    def expected_variance_many(self, bounds: NDArray[np.int64]) -> NDArray[np.float64] | None:
        """Noise variance of many queries given as bounds (m, d, 2); None after clamping."""
        if any("clamp" in step for step in self.guarantee.post_processing):
            return None
        return _variance(self.trees, self.const, bounds, self.consistent)

    def expected_error(self, query: RangeQuery | Mapping[str, Any]) -> float | None:
        q = query if isinstance(query, RangeQuery) else RangeQuery(dict(query))
        assert self.domain is not None
        var = self.expected_variance_many(q.bounds(self.domain)[None])
        return None if var is None else float(math.sqrt(var[0]))

    def _state(self) -> tuple[dict[str, np.ndarray], dict[str, Any]]:
        arrays: dict[str, np.ndarray] = {"estimate": self.counts}
        if self.tree is not None:
            arrays["tree"] = self.tree
        meta = {
            "trees": [t.to_dict() for t in self.trees],
            "const": self.const,
            "consistent": self.consistent,
        }
        return arrays, meta

    @classmethod
    def _from_state(
        cls,
        domain: Domain | None,
        guarantee: Guarantee,
        arrays: Mapping[str, np.ndarray],
        meta: Mapping[str, Any],
    ) -> Release:
        assert domain is not None
        trees = [
            AxisTree(int(t["n"]), int(t["b"]), int(t["h"]), tuple(float(x) for x in t["p"]))
            for t in meta["trees"]
        ]
        return cls(
            domain,
            guarantee,
            arrays["estimate"],
            trees=trees,
            const=float(meta["const"]),
            consistent=bool(meta["consistent"]),
            tree=arrays.get("tree"),
        )


def hierarchical(
    hist: Histogram,
    epsilon: float,
    *,
    branching: int | Sequence[int | None] | None = None,
    budget: str | Sequence[float] = "uniform",
    consistency: bool = True,
    nonnegative: bool = False,
    flat: Sequence[str] | None = None,
    neighbours: str = "replace",
    rng: RandomSource | None = None,
    accountant: Accountant | None = None,
) -> HierarchicalRelease:
    """Release ``hist`` through noisy b-ary trees (a product hierarchy in several dimensions).

    Parameters
    ----------
    hist : Histogram
    epsilon : float
        Privacy-loss bound, > 0.
    branching : int, list of int, or None
        Fan-out b >= 2 (one for all attributes or one per attribute). None: Qardaji et al.'s
        rule per attribute (:func:`qardaji_branching`; 16 for 4,096 cells).
    budget : "uniform", "geometric" or shares
        Per-level split of ε along each axis, root first. "geometric": ε_k ∝ 2^(k/3) (Cormode
        et al.; leaves get the most). Shares are normalised to sum to 1.
    consistency : bool
        Hay et al.'s least-squares inference (post-processing; unbiased; default True).
    nonnegative : bool
        After inference, clamp negative cells to 0. Biased; recorded in the guarantee, and
        ``expected_error`` then returns None. Needs ``consistency=True``.
    flat : list of attribute names, optional
        Attributes that get no tree (each value its own sub-cube, like Privelet+'s
        untransformed attributes); useful for attributes with a handful of values.
    neighbours : {"replace", "add-remove"}
    rng : RandomSource, optional
    accountant : Accountant, optional

    Returns
    -------
    HierarchicalRelease

    Examples
    --------
    >>> import fugu
    >>> dom = fugu.Domain([fugu.Ordinal("x", 0, 15)])
    >>> hist = fugu.Histogram.from_records({"x": [1, 2, 2, 9, 15]}, dom)
    >>> rel = fugu.central.hierarchical(hist, 1.0, branching=4, rng=fugu.RandomSource(seed=1))
    >>> rel.guarantee.sensitivity   # replace-one: 2 per level, 3 levels (root, 4, 16)
    6.0
    >>> rel.expected_error({"x": (0, 15)}) < rel.expected_error({"x": (0, 14)})
    True
    """
    hist = require_histogram(hist)
    dom = hist.domain
    delta = _delta(neighbours)
    if not isinstance(consistency, bool) or not isinstance(nonnegative, bool):
        raise InvalidParameterError("consistency and nonnegative must be True or False")
    if nonnegative and not consistency:
        raise InvalidParameterError(
            "nonnegative=True clamps the consistent cells; it needs consistency=True"
        )
    trees = axis_trees(dom, branching, budget, flat)
    eps, source = start(epsilon, rng, accountant, "hierarchical cube")
    layout: NDArray[Any] = np.asarray(hist.counts, dtype=np.int64)
    for ax, t in enumerate(trees):
        layout = _to_layout(layout, ax, t)
    const, exact = _noise_constant(trees, eps, delta)
    uniform = exact
    levels_total = int(np.prod([t.h + 1 for t in trees]))
    if uniform:
        sens = float(delta * levels_total)
        noisy = geometric_mechanism(layout, sens, eps, source).astype(np.float64)
    else:
        share = np.ones([1] * dom.ndim)
        for ax, t in enumerate(trees):
            if t.h == 0:
                per_slot = np.ones(t.n)
            else:
                per_slot = np.concatenate([np.full(t.b**k, t.p[k]) for k in range(t.h + 1)])
            shape = [1] * dom.ndim
            shape[ax] = t.layout_size
            share = share * per_slot.reshape(shape)
        # one exact sampler call per distinct scale (at most Π(h_i + 1) of them)
        values, group = np.unique(np.broadcast_to(share, layout.shape), return_inverse=True)
        group = group.reshape(-1)
        noisy = layout.astype(np.float64).reshape(-1)
        for gi, v in enumerate(values):
            idx = np.flatnonzero(group == gi)
            noisy[idx] += discrete_laplace(delta / (eps * float(v)), size=idx.size, rng=source)
        noisy = noisy.reshape(layout.shape)
        sens = None
    del layout
    post: tuple[str, ...] = ()
    if consistency:
        est = noisy
        for ax, t in enumerate(trees):
            if t.h == 0:
                continue
            moved = np.moveaxis(est, ax, -1)
            leaves = consistent_tree(_split_layout(moved, t), t.b, t.rel_variance)[-1]
            est = np.moveaxis(leaves, -1, ax)
        tree_arr = None
        post = ("least-squares consistency (Hay et al.)",)
    else:
        leaf_slice = tuple(slice(t.offsets[-1], t.offsets[-1] + t.leaves) for t in trees)
        est = noisy[leaf_slice]
        tree_arr = noisy
    est = np.ascontiguousarray(est[tuple(slice(0, t.n) for t in trees)])
    if nonnegative:
        est = np.maximum(est, 0.0)
        post = (*post, "clamp negative cells to 0 (biased)")
    g = guarantee(
        model="central-dp",
        epsilon=eps,
        neighbours=neighbours,
        mechanism="hierarchical",
        rng=source,
        sensitivity=sens,
        source=SOURCE,
        parameters={
            "branching": [t.b for t in trees],
            "height": [t.h for t in trees],
            "flat": [a.name for a, t in zip(dom.attributes, trees, strict=True) if t.h == 0],
            "budget": budget if isinstance(budget, str) else [list(t.p) for t in trees],
            "level_shares": [list(t.p) for t in trees],
            "noise": "discrete Laplace on integer node counts",
            "node_scale": f"{delta}/(epsilon * prod(level shares))",
            "padding": {
                a.name: t.leaves
                for a, t in zip(dom.attributes, trees, strict=True)
                if t.leaves != t.n
            },
        },
        data_options=hist.data_options,
        post_processing=post,
    )
    return HierarchicalRelease(
        dom, g, est, trees=trees, const=const, consistent=consistency, tree=tree_arr
    )
