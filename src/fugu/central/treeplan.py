"""Choosing the hierarchical mechanism's trees by the exact expected error of a workload.

No private data enters here: the plan depends on the public domain, the (public) workload, ε and
the neighbour relation only, so choosing it costs no budget.

Model. Along axis i a complete b-ary tree of height h over the (padded) cells; the root is never
measured; level k ≥ 1 gets the budget share p_i(k) (Σ_k p_i(k) = 1). A node combination
(k_1, …, k_d) is noised with scale δ/(ε Π_i p_i(k_i)), so its variance is modelled as
C·Π_i r_i(k_i) with r_i(k) = 1/p_i(k)² and C = 2δ²/ε² (the continuous Laplace variance; the
release itself uses the exact discrete Laplace variance wherever that keeps the Kronecker
structure). After least squares, a box query q has variance

    C·Π_i f_i(q_i)  −  [replace-one only]  C·Π_i |q_i|² f_i(all)/M_i²,

where f_i is :func:`fugu.inference.tree.range_variance` on axis i (an affine function of the
query's per-level statistics ``level_square_sums``), M_i the padded axis length, and the second
term is the exact gain of the public total n used as a zero-variance constraint (for complete
trees the covariance of the least-squares leaves applied to the all-ones vector is constant, so
the constraint spreads the discrepancy evenly over all cells; see :mod:`fugu.central.hierarchical`).
For padded trees this term is that of the total spread over the padded cells; the release
constrains the real cells' total and the padding's (zeros) instead, whose error is lower for
every range (so the planner's objective is an upper bound there, exact without padding).

Search. For every axis, candidate fan-outs b (for every height h the smallest b with b^h ≥ n and
the next two, plus Qardaji et al.'s b), and for each the per-level shares minimising the
workload's mean variance (gradient descent on a softmax parametrisation, started from the
uniform and the geometric split). Several axes: coordinate descent (each axis re-optimised with
the other axes' factors as per-query weights), which is exact because the objective is linear
in each axis's per-query statistics. The rule (Qardaji et al.'s b, uniform shares over the
levels below the root) is always evaluated too, and the better of the two is used.

Default workload (``workload=None``): the per-axis distribution of
:func:`fugu.queries.random_workload` — on an ordinal axis an interval between two independent
uniform cells, on a nominal axis a uniformly chosen non-root hierarchy node — with the axes
independent. Its expected statistics are computed exactly (O(n) per level), not sampled.
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import NDArray

from ..domain import Attribute, Nominal
from ..inference.tree import _gains, level_gains, level_square_sums, tree_height

__all__ = ["AxisStats", "axis_objective", "optimise_shares", "candidate_fanouts", "PlanChoice"]

FloatArray = NDArray[np.float64]


def _rule_branching(n: int) -> int:
    """Qardaji et al.'s fan-out: b minimising (b − 1)h³ − 2(b + 1)h²/3, h = ⌈log_b n⌉."""
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
class AxisStats:
    """Per-query statistics of one axis for one (b, h): ``s[q, k]`` = ``level_square_sums``.

    ``length2[q]`` is |q_i|². With the default workload there is one pseudo-query holding the
    exact expectations.
    """

    b: int
    h: int
    padded: int
    s: FloatArray  # (m, h + 1)
    length2: FloatArray  # (m,)


@functools.lru_cache(maxsize=4096)
def _expected_stats(n: int, b: int, h: int) -> tuple[tuple[float, ...], float]:
    """Exact E[S_k] and E[|R|²] for R = [min(u, v), max(u, v) + 1), u, v iid uniform on [0, n).

    P(cell v in R) = 1 − (v² + (n−1−v)²)/n²; P(u, v both in R) = 2(u + 1)(n − v)/n² for u < v.
    Summing the latter over the pairs inside one node [s, e) uses
    Σ_{u=s}^{v−1} (u + 1) = (v(v+1) − s(s+1))/2, and the sum over v is done per node in closed
    form, so a level costs O(number of nodes).
    """
    nf = float(n)
    v = np.arange(n, dtype=np.float64)
    base = float(np.sum(1.0 - (v**2 + (nf - 1 - v) ** 2) / nf**2))
    first = float(np.sum((nf - v) * v * (v + 1) / 2.0))  # Σ_v (n − v) v(v+1)/2
    out = []
    for k in range(h + 1):
        w = b ** (h - k)
        if w == 1:
            out.append(base)
            continue
        starts = np.arange(0, n, w, dtype=np.float64)
        ends = np.minimum(starts + w, nf)
        cnt = ends - starts
        tail = cnt * nf - cnt * (starts + ends - 1) / 2.0  # Σ_{v in node} (n − v)
        second = float(np.sum(starts * (starts + 1) / 2.0 * tail))
        out.append(base + 4.0 / nf**2 * (first - second))
    e_len2 = base + 4.0 / nf**2 * first
    return tuple(out), e_len2


def axis_stats(
    attr: Attribute, b: int, bounds: NDArray[np.int64] | None, weights: FloatArray | None = None
) -> AxisStats:
    """Statistics of the axis's queries (``bounds`` (m, 2)) or of the default distribution."""
    h = tree_height(attr.size, b)
    if bounds is None:
        if isinstance(attr, Nominal):
            nodes = attr.hierarchy.nodes[1:] or attr.hierarchy.nodes
            lohi = np.array([[nd.start, nd.stop] for nd in nodes], dtype=np.int64)
            s = level_square_sums(lohi[:, 0], lohi[:, 1], b, h).mean(axis=0, keepdims=True)
            l2 = np.array([float(np.mean((lohi[:, 1] - lohi[:, 0]).astype(float) ** 2))])
        else:
            e, l2v = _expected_stats(attr.size, b, h)
            s, l2 = np.asarray(e)[None, :], np.array([l2v])
    else:
        s = level_square_sums(bounds[:, 0], bounds[:, 1], b, h)
        l2 = (bounds[:, 1] - bounds[:, 0]).astype(np.float64) ** 2
    return AxisStats(b, h, int(b**h), s, l2)


def level_variances(shares: FloatArray) -> FloatArray:
    """Relative per-level variances 1/p² (root first; a zero share is an unmeasured level)."""
    p = np.asarray(shares, dtype=np.float64)
    with np.errstate(divide="ignore"):
        return np.where(p > 0, 1.0 / np.maximum(p, 1e-300) ** 2, np.inf)


def full_factor(b: int, h: int, v: FloatArray) -> float:
    """f(all padded cells): the variance factor of the whole padded axis."""
    m = b**h
    s = level_square_sums(np.array([0]), np.array([m]), b, h)[0]
    g = _gains(b, v)
    total = g[h] * s[h]
    for k in range(h):
        total += (g[k] - g[k + 1]) * s[k] / float(b) ** (h - k)
    return float(total)


def axis_factors(st: AxisStats, v: FloatArray) -> tuple[FloatArray, float]:
    """Per-query f(q) and the public-total coefficient f(all)/M² for level variances ``v``."""
    g = _gains(st.b, v)
    f = g[st.h] * st.s[:, st.h]
    for k in range(st.h):
        f = f + (g[k] - g[k + 1]) * st.s[:, k] / float(st.b) ** (st.h - k)
    return f, full_factor(st.b, st.h, v) / float(st.padded) ** 2


def axis_objective(st: AxisStats, v: FloatArray, w1: FloatArray, w2: FloatArray | None) -> float:
    """Σ_q w1_q f(q) − [replace] t·Σ_q w2_q |q|², the axis's share of the workload's variance."""
    f, t = axis_factors(st, v)
    val = float(np.dot(w1, f))
    if w2 is not None:
        val -= t * float(np.dot(w2, st.length2))
    return val


def _objective_scalar(
    b: int, h: int, q: list[float], full: list[float], e2: float, p: list[float]
) -> float:
    """Pure-float objective: Σ_q w1 f(q) − e2·f(all)/M², from reduced statistics.

    ``q[k] = Σ_q w1_q S_k(q)``, ``full[k] = S_k(all padded cells)``, ``e2 = Σ_q w2_q |q|²/M²``
    (0 without a public total), ``p`` the shares root first.
    """
    v = [1.0 / (x * x) if x > 0 else math.inf for x in p]
    if not math.isfinite(v[h]):
        return math.inf
    g = level_gains(b, v)
    f = g[h] * q[h]
    fa = g[h] * full[h]
    for k in range(h):
        scale = (g[k] - g[k + 1]) / float(b) ** (h - k)
        f += scale * q[k]
        fa += scale * full[k]
    return f - e2 * fa


def optimise_shares(
    st: AxisStats, w1: FloatArray, w2: FloatArray | None
) -> tuple[FloatArray, float]:
    """Shares (root first, root 0) minimising :func:`axis_objective`; returns (shares, value)."""
    h, b = st.h, st.b
    q = [float(x) for x in np.asarray(w1) @ st.s]
    full = [float(x) for x in level_square_sums(np.array([0]), np.array([st.padded]), b, h)[0]]
    e2 = 0.0 if w2 is None else float(np.dot(w2, st.length2)) / float(st.padded) ** 2

    def shares(theta: list[float]) -> list[float]:
        top = max(theta)
        e = [math.exp(t - top) for t in theta]
        tot = sum(e)
        return [0.0, *(x / tot for x in e)]

    def fun(theta: list[float]) -> float:
        return _objective_scalar(b, h, q, full, e2, shares(theta))

    best_p, best_v = shares([0.0] * h), fun([0.0] * h)
    if h > 1:
        for x0 in ([0.0] * h, [k * math.log(2.0) / 3.0 for k in range(h)]):
            theta = _descend(fun, x0)
            # levels with a negligible share are not measured at all (share exactly 0)
            p = [x if x >= MIN_SHARE else 0.0 for x in shares(theta)]
            tot = sum(p)
            p = [x / tot for x in p]
            val = _objective_scalar(b, h, q, full, e2, p)
            if math.isfinite(val) and val < best_v:
                best_p, best_v = p, val
    return np.asarray(best_p, dtype=np.float64), float(best_v)


def _descend(fun: Any, x0: list[float], iters: int = 300, tol: float = 1e-12) -> list[float]:
    """Gradient descent with central-difference gradients and backtracking (small h only)."""
    x = list(x0)
    fx = fun(x)
    step = 1.0
    eps = 1e-6
    for _ in range(iters):
        grad = []
        for i in range(len(x)):
            xp = list(x)
            xm = list(x)
            xp[i] += eps
            xm[i] -= eps
            grad.append((fun(xp) - fun(xm)) / (2 * eps))
        gn = math.sqrt(sum(g * g for g in grad))
        if not math.isfinite(gn) or gn == 0.0:
            break
        # scale-free step: relative to the objective's size
        while step > 1e-8:
            cand = [xi - step * gi / gn for xi, gi in zip(x, grad, strict=True)]
            cand = [min(20.0, max(-20.0, c)) for c in cand]
            fc = fun(cand)
            if math.isfinite(fc) and fc < fx:
                break
            step *= 0.5
        else:
            break
        improved = fx - fc
        x, fx = cand, fc
        step = min(step * 2.0, 4.0)
        if improved <= tol * abs(fx):
            break
    return x


#: Below this share a level is left unmeasured (its noise would be > 1,000x the leaves').
MIN_SHARE = 1e-3


def candidate_fanouts(n: int) -> list[int]:
    """For every height the smallest fan-out reaching n cells and the next two, and the rule's."""
    if n <= 2:
        return [2]
    out = {_rule_branching(n)}
    for h in range(1, max(1, math.ceil(math.log2(n))) + 1):
        b = max(2, math.ceil(n ** (1.0 / h) - 1e-9))
        while b**h < n:
            b += 1
        while b > 2 and (b - 1) ** h >= n:
            b -= 1
        for extra in range(3):
            if b + extra <= n and tree_height(n, b + extra) == h:
                out.add(b + extra)
    return sorted(out)


@dataclass(frozen=True)
class PlanChoice:
    """The chosen fan-out and shares of one axis, with the objective value it reached."""

    b: int
    h: int
    shares: tuple[float, ...]
    value: float


# ---------------------------------------------------------------------------------------------
# Kronecker strategies: one dense strategy per axis (a tree, the hat tree's plan, or the cells)

#: Axes up to this many cells can take a dense per-axis strategy (n × n inverses).
KRON_MAX_AXIS = 1024
#: Cubes up to this many cells consider the Kronecker structure by default (planning cost).
KRON_MAX_CELLS = 1 << 20


@dataclass(frozen=True, eq=False)
class DenseAxis:
    """One axis's measurements as non-negative integer ``rows`` (R × n) with ε-shares.

    Row r's integer sums get noise of scale δ/(ε·w_r·(the other axes' shares)); in units of
    C = 2δ²/ε² its variance is 1/w_r² (times the other axes'). Column j's privacy loss is
    Σ_r w_r·rows[r, j] ≤ 1 (in units of ε, add/remove). ``kind`` is "tree", "hats", "graded"
    or "identity"; ``info`` describes it (public).
    """

    n: int
    kind: str
    rows: NDArray[np.int64]
    weights: FloatArray
    info: tuple[tuple[str, Any], ...] = ()

    def column_loss(self) -> FloatArray:
        return np.asarray(self.weights @ self.rows, dtype=np.float64)

    @functools.cached_property
    def precision(self) -> FloatArray:
        """Aᵀ diag(w²) A (n × n): the per-axis information in units of 1/C."""
        a = self.rows.astype(np.float64)
        return np.asarray((a * (self.weights**2)[:, None]).T @ a, dtype=np.float64)

    @functools.cached_property
    def cov(self) -> FloatArray:
        """(Aᵀ diag(w²) A)⁻¹: the least-squares cells' covariance on this axis (units of C)."""
        return np.asarray(np.linalg.inv(self.precision), dtype=np.float64)

    @functools.cached_property
    def solver(self) -> FloatArray:
        """The least-squares map (n × R): cells = solver @ rows' noisy sums."""
        return np.asarray(self.cov @ (self.rows.T * (self.weights**2)[None, :]), dtype=np.float64)

    @functools.cached_property
    def ones_cov(self) -> FloatArray:
        """u = cov · 1 (the public total's direction on this axis)."""
        return np.asarray(self.cov.sum(axis=1), dtype=np.float64)

    @functools.cached_property
    def _prefix(self) -> tuple[FloatArray, FloatArray]:
        c = np.zeros((self.n + 1, self.n + 1))
        c[1:, 1:] = self.cov.cumsum(0).cumsum(1)
        u = np.concatenate([[0.0], np.cumsum(self.ones_cov)])
        return c, u

    def range_terms(
        self, lo: NDArray[np.int64], hi: NDArray[np.int64]
    ) -> tuple[FloatArray, FloatArray]:
        """wᵀ cov w and wᵀ u for the 0/1 rows w of the ranges [lo, hi)."""
        c, u = self._prefix
        f = c[hi, hi] - c[lo, hi] - c[hi, lo] + c[lo, lo]
        return np.asarray(f, dtype=np.float64), np.asarray(u[hi] - u[lo], dtype=np.float64)

    def expected_terms(self, gram: FloatArray) -> tuple[float, float]:
        """E[wᵀ cov w] and E[(wᵀ u)²] for a workload with second moments ``gram`` = E[w wᵀ]."""
        u = self.ones_cov
        return float(np.sum(gram * self.cov)), float(u @ gram @ u)

    def to_dict(self) -> dict[str, Any]:
        return {
            "n": self.n,
            "kind": self.kind,
            "rows": self.rows.tolist(),
            "weights": [float(x) for x in self.weights],
            "info": {k: v for k, v in self.info},
        }

    @classmethod
    def from_dict(cls, d: Any) -> DenseAxis:
        n = int(d["n"])
        rows = np.asarray(d["rows"], dtype=np.int64).reshape(-1, n)
        w = np.asarray(d["weights"], dtype=np.float64).reshape(-1)
        if rows.shape[0] != w.size or np.any(rows < 0) or np.any(w <= 0):
            raise ValueError("a dense axis needs one positive weight per non-negative row")
        return cls(n, str(d["kind"]), rows, w, tuple(dict(d.get("info", {})).items()))


def dense_identity(n: int) -> DenseAxis:
    """Every cell with the whole budget (Laplace on this axis)."""
    return DenseAxis(n, "identity", np.eye(n, dtype=np.int64), np.ones(n))


def dense_tree(n: int, b: int, h: int, shares: Any) -> DenseAxis:
    """A b-ary tree's measured levels over the n real cells (padding cells are known zeros).

    Level k's nodes are the intervals [j·b^(h−k), (j+1)·b^(h−k)) ∩ [0, n) with share p(k);
    nodes lying in the padding only are dropped (their count is a public 0).
    """
    p = np.asarray(shares, dtype=np.float64)
    rows, weights = [], []
    for k in range(h + 1):
        if p[k] <= 0:
            continue
        w = b ** (h - k)
        starts = np.arange(0, n, w)
        block = np.zeros((starts.size, n), dtype=np.int64)
        cells = np.arange(n)
        block[cells // w, cells] = 1
        rows.append(block)
        weights.append(np.full(starts.size, p[k]))
    return DenseAxis(
        n,
        "tree",
        np.vstack(rows),
        np.concatenate(weights),
        (("branching", int(b)), ("height", int(h)), ("level_shares", [float(x) for x in p])),
    )


def dense_hats(plan: Any) -> DenseAxis:
    """The hat tree's 1-D plan (:class:`fugu.central.hatplan.HatPlan`) as rows and shares:
    graded plans — every cell with its own share d_j, the integer rows R with 1/B each; hat
    levels — level k's integer hat sums (column L1 norm w_k) with share s_k/w_k each."""
    from .hatplan import hat_matrix

    n = int(plan.n)
    if plan.graded:
        r = plan.row_matrix()
        rows = np.vstack([np.eye(n, dtype=np.int64), r])
        weights = np.concatenate(
            [
                np.asarray(plan.cell_budget, dtype=np.float64),
                np.full(r.shape[0], 1.0 / plan.row_divisor),
            ]
        )
        info: tuple[tuple[str, Any], ...] = (("plan", "graded"), ("rows", int(r.shape[0])))
        return DenseAxis(n, "graded", rows, weights, info)
    mats, ws = [], []
    for w, s in zip(plan.strides, plan.shares, strict=True):
        if s <= 0:
            continue
        m = (
            np.eye(n, dtype=np.int64)
            if w == 1
            else np.rint(hat_matrix(n, w).toarray()).astype(np.int64)
        )
        mats.append(m)
        ws.append(np.full(m.shape[0], s / float(w)))
    info = (
        ("plan", "hats"),
        ("strides", [int(x) for x in plan.strides]),
        ("shares", [float(x) for x in plan.shares]),
    )
    return DenseAxis(n, "hats", np.vstack(mats), np.concatenate(ws), info)


@functools.lru_cache(maxsize=256)
def range_gram(n: int) -> FloatArray:
    """E[w wᵀ] for the random range [min(u, v), max(u, v)] of two iid uniform cells of [0, n)."""
    i = np.arange(n)
    lo, hi = np.minimum.outer(i, i), np.maximum.outer(i, i)
    g = 2.0 * (lo + 1) * (n - hi) / float(n) ** 2
    np.fill_diagonal(g, 1.0 - (i**2 + (n - 1 - i) ** 2) / float(n) ** 2)
    g.setflags(write=False)
    return g


def interval_gram(n: int, lohi: NDArray[np.int64]) -> FloatArray:
    """E[w wᵀ] for ranges drawn uniformly from the given half-open intervals (m, 2)."""
    w = np.zeros((lohi.shape[0], n))
    j = np.arange(n)
    w[(j >= lohi[:, :1]) & (j < lohi[:, 1:])] = 1.0
    return np.asarray(w.T @ w / lohi.shape[0], dtype=np.float64)
