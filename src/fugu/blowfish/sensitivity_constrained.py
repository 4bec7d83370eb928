"""``S(f, P)`` under public count constraints: the policy graph ``G_P`` and its α and ξ.

With sparse count constraints (every move lifts at most one and lowers at most one constrained
count) the Blowfish paper (§8) builds the policy graph ``G_P`` and proves
``S(h, P) = 2·max(α(G_P), ξ(G_P))`` for the histogram (α: longest simple cycle, ξ: longest
simple ``v+ → v−`` path). This module builds ``G_P`` (:func:`policy_graph`), evaluates the
closed forms (one marginal, disjoint marginals, disjoint ranges on a line) or searches small
graphs exactly (:func:`constrained_histogram_sensitivity`), and gives the exact answer for
every linear query on the line graph with disjoint range constraints. Non-sparse constraints
are refused (:class:`~fugu.PolicyError`: the general problem is NP-hard).
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass, field

import numpy as np
from numpy.typing import NDArray

from ..errors import PolicyError
from .constraints import CountConstraint, MarginalConstraint
from .policy import Policy
from .policy_edges import max_steps
from .sensitivity_queries import (
    SensitivityResult,
    _Boxes,
    _Columns,
    _Dense,
)

__all__ = [
    "PolicyGraph",
    "constrained_histogram_sensitivity",
    "policy_graph",
]


#: Exact longest-cycle/path search on policy graphs up to this many constrained counts.
MAX_EXACT_QUERIES = 16


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
    if (
        policy.theta is None
        or policy.weights is None
        or max_steps(policy.theta, policy.weights[0], dom.size - 1) != 1
    ):
        return None  # not the line graph (the same test as is_edge: θ = 2 − 5e-13 joins x, x+2)
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


def _safe_moves(hist: SensitivityResult, policy: Policy) -> int:
    """The number of single moves one neighbour can make (see :func:`_constrained`)."""
    if hist.moves is not None:
        return int(hist.moves)
    masks, _ = _constraint_queries(policy)
    return len(masks) + 1  # a simple path of G_P has at most |Q| + 1 arcs, a cycle |Q|


def _without_constraints(policy: Policy) -> Policy:
    from dataclasses import replace

    return replace(policy, constraints=())
