"""The hierarchical mechanism with constrained inference (Hay et al.; Qardaji et al.'s branching).

Privacy model: central ε-differential privacy. Neighbours: replace one record (default; every
tree level then changes by δ = 2 in L1) or add/remove one record (δ = 1).

Source: Hay, Rastogi, Miklau, Suciu, "Boosting the Accuracy of Differentially Private Histograms
Through Consistency", VLDB 2010 (hierarchical query H, Theorem 3's two-pass least squares);
Qardaji, Yang, Li, "Understanding Hierarchical Methods for Differentially Private Histograms",
VLDB 2013 (the branching rule, Eq. 3, and not measuring the root); geometric budgets from
Cormode, Procopiuc, Srivastava, Shen, Yu, "Differentially Private Spatial Decompositions", ICDE
2012. Restated in ``specs/blowfish_privelet_hierarchical.md`` §C.

Mechanism. Along each attribute, a complete b-ary tree over the attribute's codes (leaves padded
with zero cells up to b^h; nominal attributes use their code order, in which every hierarchy node
is an interval). A d-dimensional cube uses the **product hierarchy**: one node for every
combination of one tree node per axis (Qardaji et al.'s HB for d = 2, generalised), i.e. the
Kronecker product of the per-axis tree matrices. **The root level of every axis is never
measured** (a node combination with a root on some axis is a marginal that the finer levels
determine; measuring it spends budget for little information). Every measured node count is an
integer and gets exact discrete Laplace noise.

Sensitivity. Axis i's levels k = 1..h_i get budget shares p_i(k) with Σ_k p_i(k) = 1 (root:
p_i(0) = 0). A record lies in exactly one node of every combination of levels (k_1, …, k_d), so
a neighbouring pair changes each combination's counts by at most δ in L1; the combination is
noised with scale δ/(ε Π_i p_i(k_i)) and the privacy losses add up to ε·Π_i Σ_k p_i(k) = ε.
Equivalently: the level counts scaled by Π_i p_i(k_i) have L1 sensitivity δ and get noise of
scale δ/ε. Uniform shares: every node has scale δ·L/ε with L = Π_i h_i measured combinations
(``guarantee.sensitivity`` = δL); otherwise ``sensitivity`` is None and the shares are in
``guarantee.parameters["level_shares"]``.

Public total. Under replace-one neighbours the number of records n is the same in every
neighbouring data set, so it is public: the least-squares estimate uses it as an exact
(zero-variance) constraint, at no privacy cost. Under add/remove it is not used.

Plan. ``budget="optimal"`` (default) chooses every axis's fan-out and level shares by minimising
the exact expected squared error of the workload (:mod:`fugu.central.treeplan`); the rule
(Qardaji et al.'s fan-out, uniform shares below the root) is evaluated too and used when it is
not worse. ``guarantee.parameters["plan"]`` says which was used. The plan depends on public
inputs only (domain, workload, neighbour relation).

Kronecker structure (cubes). With two or more attributes with trees, ``strategy="auto"``
(default) also plans the **Kronecker product of per-axis strategies**: each axis i gets one
dense strategy — its cells, a b-ary tree, or the hat tree's 1-D plan
(:func:`fugu.central.hatplan.plan_hat_tree`, add/remove, random ranges: graded rows or hat
levels) — as non-negative integer rows A_i with ε-shares w_i (column loss Σ_r w_i[r]·A_i[r, j]
≤ 1 for every cell j, checked on the matrices used). The cube measures the integer sums
(A_1 ⊗ … ⊗ A_d)·x; combination r = (r_1, …, r_d) gets exact discrete Laplace noise of scale
δ/(ε Π_i w_i[r_i]). Sensitivity: a record in cell j changes combination r by Π_i A_i[r_i, j_i]
≥ 0, so the privacy losses add up to (ε/δ)·Π_i loss_i(j_i) ≤ ε/δ per cell touched: ε under
add/remove (δ = 1), at most ε/2 + ε/2 under replace-one (δ = 2). Least squares is applied
axis by axis (the noise model 2δ²/(ε Π w)² is a Kronecker product), then the public total
under replace-one; the error of every box is exact (discrete Laplace variance of every
combination). For random boxes the mean error of a Kronecker strategy is the product of the
per-axis errors, so the best 1-D plan per axis is the best factor. The structure with the lower
exact expected error of the workload (units of 2δ²/ε², the continuous model for both) is used;
``guarantee.parameters["plan"]`` records both objectives and ``["structure"]`` the choice.
Planned for cubes up to 2^20 cells whose tree axes have at most 1,024 cells each (dense per-axis
n × n inverses; planning takes seconds per new axis size, cached).

Inference. Weighted least squares under the tree constraints; because the measurement matrix
and the noise precisions are Kronecker products, the estimate is the 1-D two-pass algorithm
(:func:`fugu.inference.tree.consistent_tree`) applied along each axis in turn; under replace-one
the public total adds exact constraints: the real cells sum to n and, when some axis is
padded, the padding cells (public zeros) sum to 0. The constrained least squares moves the
estimate along Σ·1_real = ⊗_i u_i (u_i: the axis's least-squares covariance applied to the
indicator of its real cells, :func:`axis_direction`) and Σ·1 (constant: complete trees), with
the 2 × 2 system of :class:`_TotalSystem`. The released cube sums to n exactly. (Before review
24 the discrepancy was spread over the padded cells and the padding dropped: a padded cube did
not sum to n, e.g. 2991 of 2997 records on 1,000 cells, and every range's error was larger.)
Post-processing, unbiased, never increases the variance of any range query.

Error. Exact per query (``expected_error``): with consistency, Var = C·Π_i f_i(q_i) −
[replace] C·aᵀG⁻¹a (a: the query's covariance with the constraints; C·Π_i |q_i|²f_i(all)/M_i²
when nothing is padded), with f_i the closed form
:func:`fugu.inference.tree.range_variance` (O(h) per query); without, C·Π_i Σ_canonical nodes
r_i(level). When at most one attribute has a tree the node variances are the exact discrete
Laplace variances; with trees on several attributes the node variance is modelled as 2·scale²
(an upper bound on the discrete Laplace variance, within 1/(12·scale²) relative).
"""

from __future__ import annotations

import functools
import itertools
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import NDArray

from ..budget import Accountant
from ..domain import MAX_DENSE_CELLS, Domain, Nominal
from ..errors import DomainTooLargeError, InvalidParameterError
from ..histogram import Histogram, require_histogram
from ..inference.tree import (
    build_tree,
    canonical_runs,
    canonical_variance,
    consistent_tree,
    covariance_apply,
    range_variance,
    tree_height,
)
from ..mechanism import check_neighbours, guarantee, histogram_sensitivity, start, total_is_public
from ..noise import (
    SHARE_SLACK,
    RandomSource,
    discrete_laplace,
    discrete_laplace_variance,
    noise_scale,
    noise_scales,
)
from ..queries import PrefixSums, RangeQuery, workload_bounds
from ..release import CubeRelease, Guarantee
from ..release_state import Array, Custom, Meta
from . import treeplan

__all__ = [
    "hierarchical",
    "HierarchicalRelease",
    "qardaji_branching",
    "AxisTree",
    "axis_trees",
    "plan_trees",
    "hierarchical_variance",
]

SOURCE = (
    "Hay, Rastogi, Miklau, Suciu, VLDB 2010 (hierarchical query, Theorem 3 least squares); "
    "Qardaji, Yang, Li, VLDB 2013 (branching, no root); product hierarchy over the attributes; "
    "plan by the exact expected error of the workload (fugu)"
)

SOURCE_KRONECKER = (
    "Kronecker products of per-attribute strategies (McKenna, Miklau, Hay, Machanavajjhala, "
    "HDMM, VLDB 2018: the error of a Kronecker strategy on product workloads factorises); "
    "per-attribute plans: cells, b-ary trees (Hay et al., VLDB 2010; Qardaji et al., VLDB 2013) "
    "or fugu's hat tree; chosen by the exact expected error of the workload (fugu)"
)

#: Cormode et al.'s geometric ratio between consecutive levels' budgets (leaves get the most).
GEOMETRIC_RATIO = 2.0 ** (1.0 / 3.0)

BUDGETS = ("optimal", "uniform", "geometric")


def qardaji_branching(n: int) -> int:
    """Qardaji et al.'s fan-out: b minimising (b − 1)h³ − 2(b + 1)h²/3, h = ⌈log_b n⌉.

    >>> [qardaji_branching(n) for n in (256, 1024, 4096, 65536)]
    [16, 32, 16, 16]
    """
    return treeplan._rule_branching(n)


@dataclass(frozen=True)
class AxisTree:
    """The tree along one axis: ``n`` cells, fan-out ``b``, height ``h``, budget shares ``p``.

    ``p`` has one share per level, root first; ``p[0] == 0`` (the root is not measured). A
    flat axis (no tree) has ``h == 0`` and ``p == (1.0,)``.
    """

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
    def top(self) -> int:
        """The first measured depth (1 when the root is not measured)."""
        return 1 if self.h > 0 and self.p[0] == 0 else 0

    @property
    def measured(self) -> list[bool]:
        """Which levels (root first) are measured: a share of 0 (the root, or a level the plan
        leaves out) is never noised nor used to answer."""
        return [x > 0 for x in self.p] if self.h > 0 else [True]

    @property
    def rel_variance(self) -> NDArray[np.float64]:
        """Relative node variance of each level, 1/p(k)² (inf: not measured)."""
        return treeplan.level_variances(np.asarray(self.p, dtype=np.float64))

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
                f"leave it unset to choose it by the expected error"
            )
        out.append(int(b))
    return out


def _check_budget(budget: object) -> object:
    if isinstance(budget, str):
        if budget not in BUDGETS:
            raise InvalidParameterError(
                f"budget must be one of {list(BUDGETS)} or per-level shares, got {budget!r}"
            )
        return budget
    try:
        w = np.asarray(budget, dtype=np.float64).reshape(-1)
    except (TypeError, ValueError):
        raise InvalidParameterError(
            f"budget must be one of {list(BUDGETS)} or per-level shares, got {budget!r}"
        ) from None
    if w.size == 0 or np.any(~np.isfinite(w)) or np.any(w <= 0):
        raise InvalidParameterError(
            f"budget shares must be positive numbers, one per level below the root, got {budget!r}"
        )
    return w


def _shares(budget: object, h: int) -> tuple[float, ...]:
    """Shares root first with the root at 0, for a fixed rule or user shares (h levels)."""
    w: NDArray[np.float64]
    if isinstance(budget, str) and budget in ("uniform", "optimal"):
        w = np.ones(h)
    elif isinstance(budget, str) and budget == "geometric":
        w = np.asarray(GEOMETRIC_RATIO ** np.arange(h), dtype=np.float64)
    else:
        w = np.asarray(budget, dtype=np.float64).reshape(-1)
        if w.size != h:
            raise InvalidParameterError(
                f"budget shares: give one positive share per level below the root ({h} here, top "
                f"first; the root is never measured), got {w.size}"
            )
    return (0.0, *(float(x) for x in w / w.sum()))


def _check_flat(domain: Domain, flat: Sequence[str] | None) -> set[str]:
    names = [flat] if isinstance(flat, str) else list(flat or [])
    for f in names:
        if f not in domain.names:
            raise InvalidParameterError(
                f"flat names an unknown attribute {f!r}; the domain's attributes are "
                f"{list(domain.names)}"
            )
    return set(names)


def _workload_bounds(domain: Domain, workload: Any) -> NDArray[np.int64] | None:
    return None if workload is None else workload_bounds(workload, domain)


def _flat_factors(
    bounds: NDArray[np.int64] | None, attr: Any
) -> tuple[NDArray[np.float64], NDArray[np.float64], float]:
    """A flat axis's per-query factor |q|, |q|² and its total coefficient 1/n."""
    if bounds is None:
        st = treeplan.axis_stats(attr, max(2, attr.size), None) if attr.size > 1 else None
        if st is None:
            return np.ones(1), np.ones(1), 1.0
        return st.s[:, -1], st.length2, 1.0 / attr.size
    length = (bounds[:, 1] - bounds[:, 0]).astype(np.float64)
    return length, length**2, 1.0 / attr.size


def _domain_key(domain: Domain) -> tuple[Any, ...]:
    """What the default plan depends on: each attribute's size and (nominal) node intervals."""
    key = []
    for a in domain.attributes:
        nodes = getattr(getattr(a, "hierarchy", None), "nodes", None)
        ivals = tuple((nd.start, nd.stop) for nd in nodes) if nodes is not None else None
        key.append((a.name, type(a).__name__, a.size, ivals))
    return tuple(key)


_PLAN_CACHE: dict[tuple[Any, ...], tuple[list[AxisTree], dict[str, Any]]] = {}


def plan_trees(
    domain: Domain,
    branching: object = None,
    budget: object = "optimal",
    flat: Sequence[str] | None = None,
    *,
    workload: Any = None,
    neighbours: str = "replace",
) -> tuple[list[AxisTree], dict[str, Any]]:
    """The per-axis trees the mechanism uses, and how they were chosen (public inputs only).

    ``budget="optimal"`` minimises the workload's exact expected error over fan-outs (unless
    ``branching`` fixes them) and level shares; the rule (Qardaji et al.'s b, uniform shares)
    is kept when it is not worse. Other budgets apply the rule (or the given fan-outs).
    Attributes in ``flat`` get no tree (height 0: every value is its own sub-cube).
    Plans for the default workload are cached per domain shape (they are deterministic).
    """
    if workload is not None:
        return _plan_trees(domain, branching, budget, flat, None, neighbours, workload)
    budget_key = budget if isinstance(budget, str) else tuple(np.asarray(budget, float).ravel())
    key = (
        _domain_key(domain),
        tuple(branching) if isinstance(branching, list | tuple) else branching,
        budget_key,
        tuple(sorted([flat] if isinstance(flat, str) else (flat or []))),
        neighbours,
    )
    try:
        hit = _PLAN_CACHE.get(key)
    except TypeError:  # unhashable input: validation below reports it
        hit, key = None, None  # type: ignore[assignment]
    if hit is not None:
        return list(hit[0]), dict(hit[1])
    out = _plan_trees(domain, branching, budget, flat, None, neighbours, None)
    if key is not None:
        if len(_PLAN_CACHE) > 256:
            _PLAN_CACHE.clear()
        _PLAN_CACHE[key] = out
    return list(out[0]), dict(out[1])


def _plan_trees(
    domain: Domain,
    branching: object,
    budget: object,
    flat: Sequence[str] | None,
    _unused: None,
    neighbours: str,
    workload: Any,
) -> tuple[list[AxisTree], dict[str, Any]]:
    bs = _check_branching(branching, domain.ndim)
    budget = _check_budget(budget)
    flat_names = _check_flat(domain, flat)
    replace = check_neighbours(neighbours) == "replace"
    bounds = _workload_bounds(domain, workload)
    attrs = domain.attributes
    is_flat = [a.name in flat_names for a in attrs]

    def rule_height(ax: int) -> tuple[int, int]:
        a = attrs[ax]
        given = bs[ax]
        b = given if given is not None else qardaji_branching(a.size)
        return b, tree_height(a.size, b)

    heights = {a.name: rule_height(ax) for ax, a in enumerate(attrs) if not is_flat[ax]}
    if not isinstance(budget, str):
        w = np.asarray(budget, dtype=np.float64).reshape(-1)
        wrong = {name: h for name, (_, h) in heights.items() if h != w.size}
        if wrong:
            hs = {h for _, h in heights.values()}
            fix = (
                f"give {hs.pop()} shares"
                if len(hs) == 1
                else "one list cannot fit trees of different heights: choose fan-outs that "
                "give equal heights or mark attributes flat=[...]"
            )
            raise InvalidParameterError(
                f"budget shares: {w.size} given, one per level below the root of every "
                f"attribute's tree (top first; the root is never measured), but the trees have "
                f"{', '.join(f'{k!r}: {h}' for k, (_, h) in heights.items())} levels (fan-outs "
                f"{[b for b, _ in heights.values()]}); {fix}, or use budget='optimal'"
            )
    trees_rule = [
        AxisTree(a.size, 2, 0, (1.0,))
        if is_flat[ax]
        else AxisTree(a.size, *heights[a.name], _shares(budget, heights[a.name][1]))
        for ax, a in enumerate(attrs)
    ]
    if not isinstance(budget, str) or budget != "optimal":
        info: dict[str, Any] = {
            "choice": "rule",
            "rule": "Qardaji et al. fan-out" if branching is None else "given fan-out",
        }
        return trees_rule, info

    # per-axis statistics for every candidate fan-out
    ax_bounds = [None if bounds is None else bounds[:, ax, :] for ax in range(domain.ndim)]
    cands: list[list[treeplan.AxisStats]] = []
    for ax, a in enumerate(attrs):
        if is_flat[ax]:
            cands.append([])
            continue
        given = bs[ax]
        fan = [given] if given is not None else treeplan.candidate_fanouts(a.size)
        cands.append([treeplan.axis_stats(a, int(b), ax_bounds[ax]) for b in fan])
    flat_f = {
        ax: _flat_factors(ax_bounds[ax], attrs[ax]) for ax in range(domain.ndim) if is_flat[ax]
    }
    m = 1 if bounds is None else bounds.shape[0]

    def factors(ax: int, st: treeplan.AxisStats | None, shares: Any) -> tuple[Any, Any]:
        if st is None:
            f, l2, t = flat_f[ax]
            return f, l2 * t
        f, t = treeplan.axis_factors(st, treeplan.level_variances(np.asarray(shares)))
        return f, st.length2 * t

    def total(choice: list[tuple[Any, Any]]) -> float:
        f1 = np.ones(m)
        f2 = np.ones(m)
        for ax in range(domain.ndim):
            a1, a2 = factors(ax, *choice[ax])
            f1 = f1 * a1
            f2 = f2 * a2
        val = f1 - f2 if replace else f1
        return float(np.mean(val))

    rule_choice: list[tuple[Any, Any]] = []
    for ax in range(domain.ndim):
        t = trees_rule[ax]
        if is_flat[ax]:
            rule_choice.append((None, None))
        else:
            st = treeplan.axis_stats(attrs[ax], t.b, ax_bounds[ax])
            rule_choice.append((st, np.asarray(t.p)))
    rule_value = total(rule_choice)

    choice = list(rule_choice)
    try:
        rounds = 1 if sum(not f for f in is_flat) <= 1 else 3
        for _ in range(rounds):
            for ax in range(domain.ndim):
                if is_flat[ax]:
                    continue
                w1 = np.ones(m) / m
                w2 = np.ones(m) / m
                for o in range(domain.ndim):
                    if o == ax:
                        continue
                    a1, a2 = factors(o, *choice[o])
                    w1 = w1 * a1
                    w2 = w2 * a2
                best = None
                for st in cands[ax]:
                    p, val = treeplan.optimise_shares(st, w1, w2 if replace else None)
                    if best is None or val < best[0]:
                        best = (val, st, p)
                assert best is not None
                choice[ax] = (best[1], best[2])
        opt_value = total(choice)
        failed = None
    except Exception as exc:  # pragma: no cover - the optimiser is guarded by the rule
        opt_value, failed = math.inf, f"{type(exc).__name__}: {exc}"
    if not (opt_value < rule_value * (1 - 1e-9)):
        info = {
            "choice": "rule",
            "reason": failed or "the optimised plan was not better than the rule",
            "objective": rule_value,
            "rule_objective": rule_value,
        }
        return trees_rule, info
    trees = []
    for ax, a in enumerate(attrs):
        st, p = choice[ax]
        if st is None:
            trees.append(AxisTree(a.size, 2, 0, (1.0,)))
        else:
            trees.append(AxisTree(a.size, st.b, st.h, tuple(float(x) for x in p)))
    info = {
        "choice": "optimised",
        "workload": "given" if bounds is not None else "random ranges (default)",
        "objective": opt_value,
        "rule_objective": rule_value,
    }
    return trees, info


STRATEGIES = ("auto", "trees", "kronecker")


def _check_strategy(strategy: object) -> str:
    if not isinstance(strategy, str) or strategy not in STRATEGIES:
        raise InvalidParameterError(
            f"strategy must be one of {list(STRATEGIES)}, got {strategy!r}: 'auto' compares the "
            f"product of trees with the Kronecker product of per-axis strategies by their exact "
            f"expected error, 'trees' or 'kronecker' forces one"
        )
    return strategy


def _axis_gram(attr: Any, is_flat: bool) -> NDArray[np.float64]:
    """E[w wᵀ] of the default workload on one axis (random interval / random non-root node)."""
    if isinstance(attr, Nominal):
        nodes = attr.hierarchy.nodes[1:] or attr.hierarchy.nodes
        lohi = np.array([[nd.start, nd.stop] for nd in nodes], dtype=np.int64)
        return treeplan.interval_gram(attr.size, lohi)
    return treeplan.range_gram(attr.size)


def _axis_candidates(
    attr: Any, is_flat: bool, tree: AxisTree, rule: AxisTree
) -> list[treeplan.DenseAxis]:
    """Per-axis dense strategies: the cells; the planned and the rule tree; for an ordered axis
    of 3 … KRON_MAX_AXIS cells the hat tree's plan for random ranges (add/remove: the per-axis
    error of a Kronecker strategy multiplies, so each axis's best 1-D plan is the best factor)."""
    from .hatplan import plan_hat_tree

    n = attr.size
    out = [treeplan.dense_identity(n)]
    if is_flat:
        return out
    for t in (tree, rule):
        if t.h > 0 and any(x > 0 for x in t.p[:-1]):  # a tree with more than its leaves
            out.append(treeplan.dense_tree(n, t.b, t.h, t.p))
    if not isinstance(attr, Nominal) and n >= 3:
        plan = plan_hat_tree(n, neighbours="add-remove")
        if plan.graded or len(plan.strides) > 1:
            out.append(treeplan.dense_hats(plan))
    return out


def _kron_value(terms: list[tuple[Any, Any, float]], replace: bool, given: bool) -> float:
    """The workload's mean variance in units of C for one choice of per-axis strategies.

    ``terms[i] = (f_i, g_i, s_i)``: per-query wᵀcov w and wᵀu (given bounds), or their
    expectations E[wᵀ cov w], E[(wᵀu)²] (default workload), and s_i = 1ᵀu."""
    f = np.ones(1)
    g = np.ones(1)
    s = 1.0
    for fi, gi, si in terms:
        f = f * fi
        g = g * (gi**2 if given else gi)
        s *= si
    val = f - g / s if replace else f
    return float(np.mean(val))


def _plan_kronecker(
    domain: Domain,
    trees: list[AxisTree],
    rule: list[AxisTree],
    is_flat: list[bool],
    bounds: NDArray[np.int64] | None,
    replace: bool,
) -> tuple[list[treeplan.DenseAxis], float]:
    """Coordinate descent over the per-axis candidates by the exact expected error."""
    attrs = domain.attributes
    cands = [_axis_candidates(a, is_flat[ax], trees[ax], rule[ax]) for ax, a in enumerate(attrs)]
    terms: list[list[tuple[Any, Any, float]]] = []
    for ax, a in enumerate(attrs):
        row = []
        gram = None if bounds is not None else _axis_gram(a, is_flat[ax])
        for c in cands[ax]:
            s_i = float(np.sum(c.ones_cov))
            if bounds is None:
                assert gram is not None
                ef, eg = c.expected_terms(gram)
                row.append((np.array([ef]), np.array([eg]), s_i))
            else:
                f, g = c.range_terms(bounds[:, ax, 0], bounds[:, ax, 1])
                row.append((f, g, s_i))
        terms.append(row)
    given = bounds is not None

    def value(idx: list[int]) -> float:
        return _kron_value([terms[ax][i] for ax, i in enumerate(idx)], replace, given)

    best_idx, best_val = None, math.inf
    starts = [[min(1, len(c) - 1) for c in cands], [len(c) - 1 for c in cands]]
    for first in starts:
        idx = list(first)
        val = value(idx)
        for _ in range(3):
            changed = False
            for ax in range(domain.ndim):
                for i in range(len(cands[ax])):
                    if i == idx[ax]:
                        continue
                    trial = list(idx)
                    trial[ax] = i
                    v = value(trial)
                    if v < val * (1 - 1e-12):
                        idx, val, changed = trial, v, True
            if not changed:
                break
        if val < best_val:
            best_idx, best_val = idx, val
    assert best_idx is not None
    return [cands[ax][i] for ax, i in enumerate(best_idx)], best_val


_CUBE_CACHE: dict[tuple[Any, ...], tuple[Any, ...]] = {}


def plan_cube(
    domain: Domain,
    branching: object = None,
    budget: object = "optimal",
    flat: Sequence[str] | None = None,
    *,
    workload: Any = None,
    neighbours: str = "replace",
    strategy: str = "auto",
    consistency: bool = True,
) -> tuple[list[AxisTree], dict[str, Any], list[treeplan.DenseAxis] | None]:
    """The trees, the plan's description, and the Kronecker axes when that structure is used.

    ``consistency=False`` (answers from canonical nodes, product of trees only): the optimised
    plan minimises the least-squares error, so it is kept only when its canonical-answer error
    on the workload (default: 2,000 seeded random ranges) is below the rule's
    (:func:`_canonical_choice`).

    The product of trees (:func:`plan_trees`) is always planned. With ``budget="optimal"``,
    no fixed ``branching``, at least two attributes with trees, every such attribute at most
    ``KRON_MAX_AXIS`` cells and the cube at most ``KRON_MAX_CELLS`` cells (or
    ``strategy="kronecker"``), the Kronecker candidate — one dense strategy per axis (the
    cells, a tree, or the hat tree's 1-D plan) — is planned too, and the structure with the
    lower exact expected error of the workload is used (``strategy="auto"``).
    """
    strategy = _check_strategy(strategy)
    trees, info = plan_trees(
        domain, branching, budget, flat, workload=workload, neighbours=neighbours
    )
    flat_names = _check_flat(domain, flat)
    is_flat = [a.name in flat_names for a in domain.attributes]
    n_tree_axes = sum(1 for t in trees if t.h > 0)
    fixed = branching is not None or not (isinstance(budget, str) and budget == "optimal")
    too_big = any(
        a.size > treeplan.KRON_MAX_AXIS
        for a, f in zip(domain.attributes, is_flat, strict=True)
        if not f
    )
    if not consistency:
        trees, info = _canonical_choice(domain, trees, info, branching, flat, workload, neighbours)
    if strategy == "trees" or n_tree_axes < 2 and strategy == "auto":
        return trees, dict(info, structure="product of trees"), None
    if fixed or too_big:
        if strategy == "kronecker":
            raise InvalidParameterError(
                f"strategy='kronecker' needs budget='optimal', no fixed branching and every "
                f"attribute with a tree at most {treeplan.KRON_MAX_AXIS} cells; got "
                f"budget={budget!r}, branching={branching!r}, shape {domain.shape}"
            )
        return trees, dict(info, structure="product of trees"), None
    if strategy == "auto" and domain.size > treeplan.KRON_MAX_CELLS:
        return trees, dict(info, structure="product of trees"), None
    replace = check_neighbours(neighbours) == "replace"
    bounds = _workload_bounds(domain, workload)
    key = (_domain_key(domain), tuple(sorted(flat_names)), neighbours) if bounds is None else None
    hit = _CUBE_CACHE.get(key) if key is not None else None
    if hit is None:
        rule = plan_trees(domain, None, "uniform", flat, neighbours=neighbours)[0]
        hit = _plan_kronecker(domain, trees, rule, is_flat, bounds, replace)
        if key is not None:
            if len(_CUBE_CACHE) > 64:
                _CUBE_CACHE.clear()
            _CUBE_CACHE[key] = hit
    dense, value = hit
    tree_value = float(info["objective"])
    out = dict(info)
    out["kronecker_objective"] = value
    out["trees_objective"] = tree_value
    # ties go to the Kronecker structure: its error is exact (discrete Laplace) and it knows
    # that padding cells are empty; e.g. a cube whose best trees measure the cells only
    if strategy == "kronecker" or value <= tree_value * (1 + 1e-9):
        out["structure"] = "kronecker"
        out["axes"] = [_describe(d) for d in dense]
        return trees, out, dense
    out["structure"] = "product of trees"
    return trees, out, None


def _describe(d: treeplan.DenseAxis) -> dict[str, Any]:
    return {"kind": d.kind, "measurements": int(d.rows.shape[0]), **{k: v for k, v in d.info}}


def axis_trees(
    domain: Domain,
    branching: object = None,
    budget: object = "optimal",
    flat: Sequence[str] | None = None,
    *,
    workload: Any = None,
    neighbours: str = "replace",
) -> list[AxisTree]:
    """The per-axis trees the mechanism would use (see :func:`plan_trees`)."""
    return plan_trees(domain, branching, budget, flat, workload=workload, neighbours=neighbours)[0]


def _level_factors(
    trees: list[AxisTree], epsilon: float, delta: int
) -> tuple[float, list[NDArray[np.float64]], bool]:
    """C and per-axis level factors with node variance C·Π_i r_i(k_i); True when exact.

    Exact when at most one axis has a tree (then r is the discrete Laplace variance of that
    level's scale); otherwise r = 1/p², C = 2δ²/ε² (the Laplace variance, an upper bound).
    """
    tree_axes = [i for i, t in enumerate(trees) if t.h > 0]
    if not tree_axes:
        return float(discrete_laplace_variance(delta / epsilon)), [np.ones(1) for _ in trees], True
    if len(tree_axes) == 1:
        out = []
        for t in trees:
            if t.h == 0:
                out.append(np.ones(1))
                continue
            p = np.asarray(t.p, dtype=np.float64)
            r = np.full(p.size, np.inf)
            meas = p > 0
            r[meas] = discrete_laplace_variance(delta / (epsilon * p[meas]))
            out.append(r)
        return 1.0, out, True
    return 2.0 * (delta / epsilon) ** 2, [t.rel_variance for t in trees], False


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


def _axis_factor(
    tree: AxisTree, r: NDArray[np.float64], lohi: NDArray[np.int64], consistent: bool
) -> NDArray[np.float64]:
    if tree.h == 0:
        return (lohi[:, 1] - lohi[:, 0]).astype(np.float64) * float(r[0])
    if not consistent:
        return canonical_variance(
            lohi[:, 0], lohi[:, 1], tree.b, tree.h, r, top=tree.top, measured=tree.measured
        )
    return range_variance(lohi[:, 0], lohi[:, 1], tree.b, r)


def _axis_total(tree: AxisTree, r: NDArray[np.float64]) -> float:
    """f(all padded cells) / M²: the public-total term of releases saved before the total
    constrained the real cells only (``total_cells="padded"``)."""
    m = tree.leaves
    if tree.h == 0:
        return float(r[0]) / m
    f = range_variance(np.array([0]), np.array([m]), tree.b, r)
    return float(f[0]) / float(m) ** 2


@functools.lru_cache(maxsize=64)
def _direction_cached(n: int, b: int, h: int, r: tuple[float, ...]) -> NDArray[np.float64]:
    if h == 0:
        return np.full(n, r[0])
    w = np.zeros(b**h)
    w[:n] = 1.0
    u = covariance_apply(w, b, np.asarray(r))[:n]
    u.setflags(write=False)
    return u


def axis_direction(tree: AxisTree, r: NDArray[np.float64]) -> NDArray[np.float64]:
    """u = Σ·1_real on the axis's real cells: the least-squares covariance (level variances
    ``r``) applied to the indicator of the n real leaves among the b^h padded ones; a flat
    axis has u = r·1. Public (no data)."""
    return _direction_cached(tree.n, tree.b, tree.h, tuple(float(x) for x in r))


@dataclass(frozen=True)
class _TotalSystem:
    """The public-total constraints of a padded product of trees (units of C, public).

    W = [1_real, 1_all]: the real cells sum to n and the padding cells to 0 (public zeros),
    so the padded cells sum to n too. Σ·1_real = ⊗u_i on the real cells (u_i:
    :func:`axis_direction`), Σ·1_all = Π c_i (every axis's covariance maps 1 to c_i·1, a
    complete tree), and G = WᵀΣW. Unpadded cubes have 1_real = 1_all: one constraint."""

    us: list[NDArray[np.float64]]
    cs: list[float]
    gram: NDArray[np.float64] | None  # 2 × 2, None when no axis is padded


def _total_system(trees: list[AxisTree], factors: list[NDArray[np.float64]]) -> _TotalSystem:
    us = [axis_direction(t, r) for t, r in zip(trees, factors, strict=True)]
    cs = [_axis_total(t, r) * t.leaves for t, r in zip(trees, factors, strict=True)]
    if all(t.leaves == t.n for t in trees):
        return _TotalSystem(us, cs, None)
    g_rr = float(np.prod([u.sum() for u in us]))
    g_ra = float(np.prod([c * t.n for c, t in zip(cs, trees, strict=True)]))
    g_aa = float(np.prod([c * t.leaves for c, t in zip(cs, trees, strict=True)]))
    return _TotalSystem(us, cs, np.array([[g_rr, g_ra], [g_ra, g_aa]]))


def _apply_total(
    est: NDArray[np.float64], padded_sum: float, n_total: float, system: _TotalSystem
) -> NDArray[np.float64]:
    """The least-squares estimate of the real cells ``est`` (its padded cells summing to
    ``padded_sum``) under the exact constraints W (:class:`_TotalSystem`): it then sums to n."""
    if system.gram is None:  # nothing padded: u is constant (complete trees)
        return est + (n_total - float(est.sum())) / est.size
    u = np.ones(())
    for ui in system.us:
        u = np.multiply.outer(u, ui)
    resid = np.array([float(est.sum()) - n_total, padded_sum - n_total])
    coef = np.linalg.solve(system.gram, resid)
    return est - coef[0] * u - coef[1] * float(np.prod(system.cs))


def _variance(
    trees: list[AxisTree],
    const: float,
    factors: list[NDArray[np.float64]],
    bounds: NDArray[np.int64],
    consistent: bool,
    total_known: bool,
    total_cells: str = "real",
) -> NDArray[np.float64]:
    """Var = C·Π f_i(q_i) − [public total] C·aᵀG⁻¹a, a = (Π q_iᵀu_i, Π c_i|q_i|) the query's
    covariance with the constraints W of :class:`_TotalSystem`; when nothing is padded (one
    constraint) and for releases saved before review 24 (``total_cells="padded"``: the total
    was spread over the padded cells), C·Π |q_i|²·f_i(all)/M_i²."""
    b = np.asarray(bounds, dtype=np.int64)
    f1 = np.full(b.shape[0], const)
    for ax, t in enumerate(trees):
        uniq, inv = _axis_rows(b, ax)
        f1 *= _axis_factor(t, factors[ax], uniq, consistent)[inv]
    if not (total_known and consistent):
        return f1
    length = (b[:, :, 1] - b[:, :, 0]).astype(np.float64)
    if total_cells == "padded" or all(t.leaves == t.n for t in trees):
        # one constraint on every (padded) cell; u_i = f_i(all)/M_i·1: the closed form
        f2 = np.full(b.shape[0], const)
        for ax, t in enumerate(trees):
            f2 *= length[:, ax] ** 2 * _axis_total(t, factors[ax])
        return np.maximum(f1 - f2, 0.0)
    system = _total_system(trees, factors)
    assert system.gram is not None
    a0 = np.ones(b.shape[0])
    a1 = np.ones(b.shape[0])
    for ax, (u, c) in enumerate(zip(system.us, system.cs, strict=True)):
        cu = np.concatenate([[0.0], np.cumsum(u)])
        a0 *= cu[b[:, ax, 1]] - cu[b[:, ax, 0]]
        a1 *= c * length[:, ax]
    g = system.gram
    det = g[0, 0] * g[1, 1] - g[0, 1] ** 2
    f2 = (g[1, 1] * a0**2 - 2 * g[0, 1] * a0 * a1 + g[0, 0] * a1**2) / det
    out = np.maximum(f1 - const * f2, 0.0)
    sizes = np.asarray([t.n for t in trees], dtype=np.int64)
    out[np.all((b[:, :, 0] == 0) & (b[:, :, 1] == sizes), axis=1)] = 0.0  # the public total
    return out


def hierarchical_variance(
    domain: Domain,
    bounds: NDArray[np.int64],
    epsilon: float,
    *,
    branching: object = None,
    budget: object = "optimal",
    consistency: bool = True,
    flat: Sequence[str] | None = None,
    neighbours: str = "replace",
    workload: Any = None,
    strategy: str = "auto",
    total_known: bool | None = None,
) -> NDArray[np.float64]:
    """Noise variance of each query (bounds (m, d, 2)) under the mechanism, without any data.

    The plan is optimised for ``workload`` (default: the random-range distribution, not
    ``bounds``); pass ``workload=bounds`` to plan for the queries being scored. The structure
    (product of trees or Kronecker) is the one :func:`hierarchical` would use. ``total_known``:
    whether the release uses the exact total n (default: under replace-one neighbours; pass
    :func:`total_public` of the histogram, False when it dropped records or counts an SQL
    query's rows).
    """
    trees, _, dense = plan_cube(
        domain,
        branching,
        budget,
        flat,
        workload=workload,
        neighbours=neighbours,
        strategy=strategy if consistency else "trees",
        consistency=consistency,
    )
    delta = histogram_sensitivity(neighbours)
    known = delta == 2 if total_known is None else bool(total_known)
    if dense is not None:
        eps = float(epsilon)
        return kronecker_variance(dense, 2.0 * (delta / eps) ** 2, bounds, known)
    const, factors, _ = _level_factors(trees, epsilon, delta)
    return _variance(trees, const, factors, bounds, consistency, known)


def _canonical_choice(
    domain: Domain,
    trees: list[AxisTree],
    info: dict[str, Any],
    branching: object,
    flat: Sequence[str] | None,
    workload: Any,
    neighbours: str,
) -> tuple[list[AxisTree], dict[str, Any]]:
    """The optimised plan or the rule, whichever answers the workload from canonical nodes
    (``consistency=False``) with the lower mean variance (public inputs only).

    The optimiser minimises the least-squares error; read from canonical nodes its plan was
    up to 1.24× the rule's RMSE (64 cells under add/remove: 63.1 against 40.9 mean variance at
    ε = 1), while on 256-65,536 cells it was 0.95-0.99×.
    """
    if info.get("choice") == "rule":
        return trees, info
    rule, _ = plan_trees(domain, branching, "uniform", flat, neighbours=neighbours)
    bounds = _workload_bounds(domain, workload)
    if bounds is None:
        from ..queries import random_workload

        bounds = random_workload(domain, 2000, seed=0).bounds(domain)
    delta = histogram_sensitivity(neighbours)

    def mean_variance(ts: list[AxisTree]) -> float:
        const, factors, _ = _level_factors(ts, 1.0, delta)
        return float(np.mean(_variance(ts, const, factors, bounds, False, False)))

    opt, rule_value = mean_variance(trees), mean_variance(rule)
    if opt < rule_value * (1 - 1e-9):
        return trees, dict(info, canonical_objective=opt, canonical_rule_objective=rule_value)
    return rule, {
        "choice": "rule",
        "reason": "answers from canonical nodes (consistency=False): the optimised plan was "
        "not better than the rule for them",
        "canonical_objective": rule_value,
        "canonical_optimised_objective": opt,
    }


def _trees_from_json(trees: list[Any]) -> list[AxisTree]:
    """The ``trees`` of a saved release (``AxisTree.to_dict`` each) as axis trees."""
    return [
        AxisTree(int(t["n"]), int(t["b"]), int(t["h"]), tuple(float(x) for x in t["p"]))
        for t in trees
    ]


class HierarchicalRelease(CubeRelease):
    """A hierarchical-mechanism cube.

    With consistency (default) the cells are the least-squares leaves and answers are their
    sums. Without it the release keeps the whole noisy tree (unmeasured root levels are 0) and
    answers each range from its canonical measured nodes; ``counts`` are then the noisy leaves.
    """

    kind = "hierarchical"
    _state_fields = (
        Array("estimate", "counts", shape="domain"),
        Array("tree", optional=True),
        Meta("trees", list, convert=_trees_from_json, to_json=lambda ts: [t.to_dict() for t in ts]),
        Meta("const", float),
        Meta("consistent", bool),
        Meta(
            "factors",
            list,
            nullable=True,
            default=None,
            convert=lambda fs: [np.asarray(f, dtype=np.float64) for f in fs] or None,
            to_json=lambda fs: [[float(x) for x in f] for f in fs],
        ),
        Meta("total_known", bool, default=False),
        # how the public total was applied: "real" (the real cells' total, since review 24) or
        # "padded" (spread over the padded cells: files saved before, which lack the key; they
        # are saved again without it, so their format is kept)
        Custom(
            "total_cells",
            save=lambda rel: (
                {},
                {} if rel.total_cells == "padded" else {"total_cells": rel.total_cells},
            ),
            restore=lambda arrays, meta, domain: str(meta.get("total_cells", "padded")),
            meta=("total_cells",),
        ),
        # Kronecker axes: written only for Kronecker releases, so tree releases keep the old
        # file format exactly
        Custom(
            "dense",
            save=lambda rel: (
                {},
                {} if rel.dense is None else {"dense": [d.to_dict() for d in rel.dense]},
            ),
            restore=lambda arrays, meta, domain: (
                None
                if meta.get("dense") is None
                else [treeplan.DenseAxis.from_dict(d) for d in meta["dense"]]
            ),
            meta=("dense",),
        ),
    )

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
        factors: list[NDArray[np.float64]] | None = None,
        total_known: bool = False,
        dense: list[treeplan.DenseAxis] | None = None,
        total_cells: str = "real",
    ) -> None:
        super().__init__(domain, guarantee, estimate)
        self.trees = list(trees)
        self.const = float(const)
        self.consistent = bool(consistent)
        self.tree = tree
        self.factors = (
            [np.asarray(f, dtype=np.float64) for f in factors]
            if factors is not None
            else [t.rel_variance for t in self.trees]
        )
        self.total_known = bool(total_known)
        if total_cells not in ("real", "padded"):
            raise InvalidParameterError(
                f"total_cells must be 'real' or 'padded', got {total_cells!r}"
            )
        self.total_cells = total_cells
        self.dense = dense
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
            runs = canonical_runs(b[:, ax, 0], b[:, ax, 1], t.b, t.h, t.top, t.measured)
            ivals = []
            for off, (ls, le, rs, re) in zip(t.offsets, runs, strict=True):
                ivals.append((ls + off, le + off))
                ivals.append((rs + off, re + off))
            per_axis.append(ivals)
        total = np.zeros(b.shape[0])
        for combo in itertools.product(*[range(len(p)) for p in per_axis]):
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
        if self.dense is not None:
            return kronecker_variance(self.dense, self.const, bounds, self.total_known)
        return _variance(
            self.trees,
            self.const,
            self.factors,
            bounds,
            self.consistent,
            self.total_known,
            self.total_cells,
        )

    def expected_error(self, query: RangeQuery | Mapping[str, Any]) -> float | None:
        q = query if isinstance(query, RangeQuery) else RangeQuery(dict(query))
        assert self.domain is not None
        var = self.expected_variance_many(q.bounds(self.domain)[None])
        return None if var is None else float(math.sqrt(var[0]))


def _level_blocks(trees: list[AxisTree]) -> list[tuple[tuple[slice, ...], float]]:
    """Every combination of levels: its slice of the layout and its budget share Π p_i(k_i)."""
    per_axis = []
    for t in trees:
        if t.h == 0:
            per_axis.append([(slice(0, t.n), 1.0)])
        else:
            per_axis.append([(slice(o, o + t.b**k), t.p[k]) for k, o in enumerate(t.offsets)])
    out = []
    for combo in itertools.product(*per_axis):
        out.append((tuple(c[0] for c in combo), float(np.prod([c[1] for c in combo]))))
    return out


def _noise_layout(
    layout: NDArray[np.int64], trees: list[AxisTree], eps: float, delta: int, source: RandomSource
) -> NDArray[np.float64]:
    """Exact discrete Laplace noise of scale δ/(ε·share) on every measured level combination.

    Unmeasured combinations (a root on some axis) are set to 0: their exact counts are never
    released. One sampler call per combination (at most Π_i (h_i + 1) of them). The count and
    its noise are added as integers and the sum rounded to double once (post-processing of the
    ε-DP integer). Adding them as doubles rounded a noise value above 2^53 (scales near the
    sampler's 2^52 limit) before the sum: noise 2^53 + 1 on counts 1, 2, 3 gave 2^53,
    2^53 + 2, 2^53 + 4, not the exact sums rounded (2^53 + 2, + 4, + 4).
    """
    out = np.zeros(layout.shape, dtype=np.float64)
    for sl, share in _level_blocks(trees):
        if share <= 0:
            continue
        block = layout[sl]
        noise = discrete_laplace(
            noise_scale(delta, eps, (share, SHARE_SLACK)), size=block.shape, rng=source
        )
        out[sl] = (block.astype(np.int64) + noise).astype(np.float64)
    return out


def _kron_scales(dense: list[treeplan.DenseAxis]) -> NDArray[np.float64]:
    """Π_i w_i[r_i] for every combination of rows (the combination's share of ε)."""
    out = np.ones(())
    for d in dense:
        out = np.multiply.outer(out, d.weights)
    return np.asarray(out, dtype=np.float64)


def _kron_products(counts: NDArray[Any], dense: list[treeplan.DenseAxis]) -> NDArray[Any]:
    """The exact integer sums (A_1 ⊗ … ⊗ A_d)·x: float64 BLAS products when every partial sum
    is an integer below 2^52 (bound: total count × the product of the rows' largest entries;
    all entries are non-negative), int64 products below 2^62, and beyond that (a graded axis
    has entries near 500, so three of them overflow int64 from about 8e10 records) the counts
    split into base-2^k digits whose products are exact in int64, recombined as Python integers
    (an object array). Before, the int64 products wrapped silently: 1e11 records in one cell
    of a 32³ cube released a total of −3.9e10, and one record could move a sum by 2^64."""
    x = np.asarray(counts, dtype=np.int64)

    def products(y: NDArray[Any], dtype: Any) -> NDArray[Any]:
        for ax, d in enumerate(dense):
            y = np.moveaxis(
                np.tensordot(d.rows.astype(dtype, copy=False), y, axes=([1], [ax])), 0, ax
            )
        return y

    pmax = float(np.prod([max(1, int(d.rows.max())) for d in dense]))
    bound = float(np.abs(x).sum()) * pmax
    if bound < 2.0**52:
        return np.rint(products(x.astype(np.float64), np.float64)).astype(np.int64)
    if bound < 2.0**62:
        return np.asarray(products(x, np.int64), dtype=np.int64)
    if np.any(x < 0):  # pragma: no cover - histograms hold non-negative counts
        raise InvalidParameterError("internal error: negative counts in a Kronecker product")
    # digits below 2^k: every digit product is at most size·(2^k − 1)·pmax < 2^62
    k = int(math.floor(62 - math.log2(max(1, x.size)) - math.log2(pmax))) - 1
    if k < 1:  # pragma: no cover - KRON_MAX_CELLS and the row entries keep k >= 1
        return products(x.astype(object), object)
    total: NDArray[Any] | None = None
    rest, shift = x.copy(), 0
    while np.any(rest):
        part = _kron_products(rest & ((1 << k) - 1), dense).astype(object) * (1 << shift)
        total = part if total is None else total + part
        rest >>= k
        shift += k
    assert total is not None
    return total


def _kron_measure(
    counts: NDArray[Any],
    dense: list[treeplan.DenseAxis],
    eps: float,
    delta: int,
    source: RandomSource,
) -> NDArray[np.float64]:
    """The noisy Kronecker measurements: the integer sums (A_1 ⊗ … ⊗ A_d)·x, each with exact
    discrete Laplace noise of scale δ/(ε Π_i w_i[r_i]).

    Privacy: a record in cell j changes combination r by Π_i A_i[r_i, j_i] ≥ 0, so the losses add
    up to (ε/δ)·Π_i (Σ_r w_i[r] A_i[r, j_i]) = (ε/δ)·Π_i loss_i(j_i) ≤ ε/δ per record touched
    (every axis's column loss is at most 1): ε under add/remove (δ = 1), and under replace-one
    (two cells, δ = 2) at most ε/2 + ε/2. The only place where private data meets noise.
    """
    y = _kron_products(counts, dense)
    # exact, rounded up; SHARE_SLACK covers float sums of the per-axis weights
    scale = noise_scales(delta, eps, [*(d.weights for d in dense), [SHARE_SLACK]])[..., 0]
    return (y + discrete_laplace(scale, rng=source)).astype(np.float64)


def _kron_estimate(
    noisy: NDArray[np.float64], dense: list[treeplan.DenseAxis], total: float | None
) -> NDArray[np.float64]:
    """Least squares, axis by axis (the noise model's covariance is a Kronecker product), then
    the public total as an exact constraint: add (n − Σ x̂)·(⊗u_i)/Π(1ᵀu_i), u_i = cov_i·1."""
    est = noisy
    for ax, d in enumerate(dense):
        est = np.moveaxis(np.tensordot(d.solver, est, axes=([1], [ax])), 0, ax)
    if total is not None:
        u = np.ones(())
        for d in dense:
            u = np.multiply.outer(u, d.ones_cov)
        est = est + (total - float(est.sum())) * u / float(u.sum())
    return np.asarray(est, dtype=np.float64)


def _contract(d_var: NDArray[np.float64], vecs: list[NDArray[np.float64]]) -> NDArray[np.float64]:
    """Σ_r D[r]·Π_i v_i[q, r_i] for every query q (v_i: (m, R_i))."""
    t = np.tensordot(vecs[0], d_var, axes=([1], [0]))  # (m, R_2, …)
    for v in vecs[1:]:
        t = np.einsum("qa,qa...->q...", v, t)
    return np.asarray(t, dtype=np.float64)


def kronecker_variance(
    dense: list[treeplan.DenseAxis], const: float, bounds: NDArray[np.int64], total_known: bool
) -> NDArray[np.float64]:
    """Exact variance of box queries (bounds (m, d, 2)) after :func:`_kron_estimate`.

    ``const`` = 2(δ/ε)²; combination r's noise is discrete Laplace of scale (δ/ε)/Π_i w_i[r_i]
    with its exact variance D[r]. The answer's coefficient on the measurements is
    ⊗_i a_i − α ⊗_i b_i (a_i = solver_iᵀ w_i, b_i = solver_iᵀ 1, α = Π(w_iᵀu_i)/Π(1ᵀu_i) with
    the public total, else 0), so Var = Σ_r D[r](⊗a − α⊗b)²[r], contracted axis by axis.
    """
    b = np.asarray(bounds, dtype=np.int64)
    d_var = np.asarray(
        discrete_laplace_variance(math.sqrt(const / 2.0) / _kron_scales(dense)), dtype=np.float64
    )
    out = np.empty(b.shape[0])
    for i in range(0, b.shape[0], 256):
        bb = b[i : i + 256]
        a_vecs, ab_vecs, b_vecs = [], [], []
        alpha = np.ones(bb.shape[0])
        for ax, d in enumerate(dense):
            pref = np.vstack([np.zeros((1, d.solver.shape[1])), np.cumsum(d.solver, axis=0)])
            a = pref[bb[:, ax, 1]] - pref[bb[:, ax, 0]]
            bvec = np.broadcast_to(pref[-1], a.shape)
            a_vecs.append(a * a)
            ab_vecs.append(a * bvec)
            b_vecs.append(bvec * bvec)
            _, g = d.range_terms(bb[:, ax, 0], bb[:, ax, 1])
            alpha *= g / float(np.sum(d.ones_cov))
        var = _contract(d_var, a_vecs)
        if total_known:
            var = var - 2 * alpha * _contract(d_var, ab_vecs) + alpha**2 * _contract(d_var, b_vecs)
        out[i : i + 256] = var
    return np.maximum(out, 0.0)


def _checked_axes(dense: list[treeplan.DenseAxis]) -> list[treeplan.DenseAxis]:
    """The Kronecker axes with every column loss at most 1 (the guarantee rests on this;
    checked on the matrices actually used, before any budget is spent)."""
    checked = []
    for d in dense:
        loss = float(d.column_loss().max())
        if np.any(d.rows < 0) or loss > 1.0 + 1e-9:
            raise AssertionError(f"a {d.kind} axis has a column loss {loss} above 1")
        if loss > 1.0:  # rounding in a plan's budgets: scale its shares down to exactly ≤ 1
            d = treeplan.DenseAxis(d.n, d.kind, d.rows, d.weights / loss, d.info)
        checked.append(d)
    return checked


def _largest_scale(
    trees: list[AxisTree], dense: list[treeplan.DenseAxis] | None, delta: int
) -> float:
    """The largest noise scale the release draws at ε = 1 (scales are exactly proportional to
    1/ε), slightly enlarged so that any ε the epsilon check lets through keeps every scale
    within the sampler's limit: refused before the budget is spent, not after."""
    if dense is not None:
        top = float(np.max(noise_scales(delta, 1.0, [*(d.weights for d in dense), [SHARE_SLACK]])))
    else:
        top = max(
            noise_scale(delta, 1.0, (share, SHARE_SLACK))
            for _, share in _level_blocks(trees)
            if share > 0
        )
    return top * (1.0 + 2.0**-40)


def _kronecker_release(
    hist: Histogram,
    dense: list[treeplan.DenseAxis],
    plan: dict[str, Any],
    eps: float,
    delta: int,
    source: RandomSource,
    nonnegative: bool,
    budget: object,
    flat: list[str],
) -> HierarchicalRelease:
    dom = hist.domain
    noisy = _kron_measure(hist.counts, dense, eps, delta, source)
    total_known = total_is_public("replace" if delta == 2 else "add-remove", hist)
    n_total = float(np.sum(hist.counts, dtype=np.int64)) if total_known else None
    est = _kron_estimate(noisy, dense, n_total)
    post: tuple[str, ...] = ("least squares (Kronecker, axis by axis)",)
    if total_known:
        post = (*post, "public total n as an exact constraint (replace-one neighbours)")
    if nonnegative:
        est = np.maximum(est, 0.0)
        post = (*post, "clamp negative cells to 0 (biased)")
    const = 2.0 * (delta / eps) ** 2
    g = guarantee(
        model="central-dp",
        epsilon=eps,
        neighbours="replace" if delta == 2 else "add-remove",
        mechanism="hierarchical",
        rng=source,
        sensitivity=None,
        source=SOURCE_KRONECKER,
        parameters={
            "structure": "kronecker",
            "axes": [_describe(d) for d in dense],
            "flat": flat,
            "budget": budget if isinstance(budget, str) else "given",
            "plan": plan,
            "total": "public n used exactly (replace-one)" if total_known else "not used",
            "noise": "discrete Laplace on the integer sums of every row combination",
            "node_scale": f"{delta}/(epsilon * prod(row shares))",
            "sensitivity_per_unit_share": delta,
            "max_column_loss": [float(d.column_loss().max()) for d in dense],
            "variance_model": "exact (discrete Laplace of every row combination)",
        },
        data_options=hist.data_options,
        post_processing=post,
    )
    return HierarchicalRelease(
        dom,
        g,
        np.ascontiguousarray(est),
        trees=[AxisTree(a.size, 2, 0, (1.0,)) for a in dom.attributes],
        const=const,
        consistent=True,
        total_known=total_known,
        dense=dense,
    )


#: The largest tree layout (every level combination of every axis, padded) the product of
#: trees builds: the limit Release.load accepts for an array (a consistency=False release
#: saves the whole layout).
MAX_LAYOUT_CELLS = 4 * MAX_DENSE_CELLS


def _check_layout_size(trees: list[AxisTree], domain: Domain) -> None:
    """Refuse, before any budget is spent, a product of trees whose padded layout will not fit.

    The layout holds Π_i (1 + b_i + … + b_i^h_i) counts, far more than the domain when fan-outs
    pad small attributes: four 17-value attributes with branching=16 are 83,521 cells but a
    273⁴ = 5.6·10⁹-cell layout, which raised numpy's MemoryError after ε was charged."""
    size = math.prod(t.layout_size for t in trees)
    if size > MAX_LAYOUT_CELLS:
        raise DomainTooLargeError(
            f"the hierarchical mechanism's trees over this domain ({domain.size:,} cells, fan-outs "
            f"{[t.b for t in trees]}, padded to {[t.leaves for t in trees]} leaves) hold "
            f"{size:,} node counts ({size * 8 / 2**30:,.1f} GiB per array); the limit is "
            f"{MAX_LAYOUT_CELLS:,}. Leave branching unset (the planner pads less), mark small "
            f"attributes flat=[...], or use strategy='kronecker' or fugu.central.privelet"
        )


def hierarchical(
    hist: Histogram,
    epsilon: float,
    *,
    branching: int | Sequence[int | None] | None = None,
    budget: str | Sequence[float] = "optimal",
    workload: Any = None,
    consistency: bool = True,
    nonnegative: bool = False,
    flat: Sequence[str] | None = None,
    neighbours: str = "replace",
    strategy: str = "auto",
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
        Fan-out b >= 2 (one for all attributes or one per attribute). None: chosen by the
        expected error (``budget="optimal"``) or by Qardaji et al.'s rule (other budgets).
    budget : "optimal", "uniform", "geometric" or shares
        Per-level split of ε along each axis below the root (the root is never measured).
        "optimal" (default): the split (and fan-out) minimising the workload's exact expected
        error, or the rule when that is not better; "uniform": equal shares (with the rule's
        fan-out this is Qardaji et al.'s H_b); "geometric": ε_k ∝ 2^(k/3) (Cormode et al.;
        leaves get the most); or h positive shares, top level first, normalised to sum to 1.
    workload : Workload, list of RangeQuery, bounds (m, d, 2), or None
        The queries the plan is optimised for (public; no budget). None: random ranges on
        every attribute (the distribution of :func:`fugu.queries.random_workload`).
    consistency : bool
        Hay et al.'s least-squares inference (post-processing; unbiased; default True). Under
        replace-one neighbours it also uses the public total n as an exact constraint.
    nonnegative : bool
        After inference, clamp negative cells to 0. Biased; recorded in the guarantee, and
        ``expected_error`` then returns None. Needs ``consistency=True``.
    flat : list of attribute names, optional
        Attributes that get no tree (each value its own sub-cube, like Privelet+'s
        untransformed attributes).
    neighbours : {"replace", "add-remove"}
        δ = 2 or 1 per measured level.
    strategy : {"auto", "trees", "kronecker"}
        Cubes: "auto" (default) uses the product of trees or the Kronecker product of per-axis
        strategies (cells / tree / hat-tree plan), whichever has the lower exact expected
        error of the workload (needs ``budget="optimal"``, no fixed ``branching`` and
        ``consistency=True``; one attribute: always trees); "trees" or "kronecker" forces one.
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
    >>> rel = fugu.central.hierarchical(
    ...     hist, 1.0, branching=4, budget="uniform", rng=fugu.RandomSource(seed=1))
    >>> rel.guarantee.sensitivity   # replace-one: 2 per level, 2 levels below the root
    4.0
    >>> round(float(rel.counts.sum()), 6)   # replace-one: the public total is exact
    5.0
    >>> rel.expected_error({"x": (0, 15)})
    0.0
    >>> dom2 = fugu.Domain([fugu.Ordinal("a", 0, 39), fugu.Ordinal("b", 0, 23)])
    >>> hist2 = fugu.Histogram.from_records({"a": [1, 2, 30], "b": [0, 7, 3]}, dom2)
    >>> rel2 = fugu.central.hierarchical(hist2, 1.0, rng=fugu.RandomSource(seed=1))
    >>> par = rel2.guarantee.parameters
    >>> par["structure"], [a["kind"] for a in par["axes"]]
    ('kronecker', ['graded', 'identity'])
    """
    hist = require_histogram(hist)
    dom = hist.domain
    delta = histogram_sensitivity(neighbours)
    if not isinstance(consistency, bool) or not isinstance(nonnegative, bool):
        raise InvalidParameterError("consistency and nonnegative must be True or False")
    if nonnegative and not consistency:
        raise InvalidParameterError(
            "nonnegative=True clamps the consistent cells; it needs consistency=True"
        )
    strategy = _check_strategy(strategy)
    if not consistency and strategy == "kronecker":
        raise InvalidParameterError(
            "strategy='kronecker' answers from least-squares cells; it needs consistency=True"
        )
    trees, plan, dense = plan_cube(
        dom,
        branching,
        budget,
        flat,
        workload=workload,
        neighbours=neighbours,
        strategy=strategy if consistency else "trees",
        consistency=consistency,
    )
    if dense is not None:
        dense = _checked_axes(dense)
    else:
        _check_layout_size(trees, dom)
    eps, source = start(
        epsilon,
        rng,
        accountant,
        "hierarchical cube",
        neighbours=neighbours,
        sensitivity=_largest_scale(trees, dense, delta),
    )
    if dense is not None:
        flat_names = _check_flat(dom, flat)
        flat_list = [a.name for a in dom.attributes if a.name in flat_names]
        return _kronecker_release(
            hist, dense, plan, eps, delta, source, nonnegative, budget, flat_list
        )
    layout: NDArray[Any] = np.asarray(hist.counts, dtype=np.int64)
    for ax, t in enumerate(trees):
        layout = _to_layout(layout, ax, t)
    const, factors, exact = _level_factors(trees, eps, delta)
    shares = sorted({s for _, s in _level_blocks(trees) if s > 0})
    n_measured = sum(1 for _, s in _level_blocks(trees) if s > 0)
    sens = float(delta * n_measured) if len(shares) == 1 else None
    noisy = _noise_layout(layout, trees, eps, delta, source)
    del layout
    total_known = total_is_public(neighbours, hist) and consistency
    post: tuple[str, ...] = ()
    if consistency:
        est = noisy
        for ax, t in enumerate(trees):
            if t.h == 0:
                continue
            moved = np.moveaxis(est, ax, -1)
            leaves = consistent_tree(_split_layout(moved, t), t.b, factors[ax])[-1]
            est = np.moveaxis(leaves, -1, ax)
        post = ("least-squares consistency (Hay et al.)",)
        padded_sum = float(est.sum())
        est = np.ascontiguousarray(est[tuple(slice(0, t.n) for t in trees)])
        if total_known:
            # the real cells sum to n and the padding cells (public zeros) to 0: the
            # constrained least squares (_TotalSystem); the released cube sums to n
            n_total = float(np.sum(hist.counts, dtype=np.int64))
            est = _apply_total(est, padded_sum, n_total, _total_system(trees, factors))
            post = (*post, "public total n as an exact constraint (replace-one neighbours)")
        tree_arr = None
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
            "structure": "product of trees",
            "branching": [t.b for t in trees],
            "height": [t.h for t in trees],
            "flat": [a.name for a, t in zip(dom.attributes, trees, strict=True) if t.h == 0],
            "budget": budget if isinstance(budget, str) else [list(t.p) for t in trees],
            "level_shares": [list(t.p) for t in trees],
            "plan": plan,
            "root": "not measured (share 0)",
            "total": "public n used exactly (replace-one)" if total_known else "not used",
            "noise": "discrete Laplace on integer node counts",
            "node_scale": f"{delta}/(epsilon * prod(level shares))",
            "sensitivity_per_level_combination": delta,
            "variance_model": "exact" if exact else "2*scale^2 (upper bound)",
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
        dom,
        g,
        est,
        trees=trees,
        const=const,
        consistent=consistency,
        tree=tree_arr,
        factors=factors,
        total_known=total_known,
    )
