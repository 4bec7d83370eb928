"""The hat tree: a multi-resolution strategy of overlapping triangular sums for 1-D ranges.

Privacy model: central ε-differential privacy. Neighbours: replace one record (default) or
add/remove one record (``neighbours="add-remove"``).

Strategy. Over n ordered cells, measure every cell (the identity level, stride w₀ = 1) and, for
each level k = 1 … L with stride w_k = b^k < n, the **hat sums**
y_{k,j} = Σ_x (w_k − |x − j·w_k|)₊ · x_cells, j = 0 … ⌈(n − 1)/w_k⌉: linear B-spline
("hat") weights of half-width w_k centred on the level's grid, scaled by w_k so every weight is
an integer. The hierarchical mechanism measures box (indicator) sums on a nested partition;
replacing the boxes above the leaves by hats that overlap their neighbours by half lets a range
whose end falls inside a node be read from two overlapping ramps instead of many finer nodes
(the strategy the HDMM p-Identity optimisation finds on small domains: smooth bumps, about one
stride apart; McKenna, Miklau, Hay, Machanavajjhala, "Optimizing Error of High-Dimensional
Statistical Queries Under Differential Privacy", VLDB 2018). Level k gets the budget share s_k
(Σ_k s_k = 1, s₀ > 0).

Sensitivity. The hats of one level form a partition of unity: at every cell x the two hats
that cover it weigh (w − r) and r (r = x mod w), summing to w. A record therefore changes the
integer vector y_k by exactly w_k in L1 under add/remove and by at most δ·w_k = 2w_k under
replace-one (δ = 1 or 2; the maximum column L1 norm of the level's matrix, checked by brute force
in the tests). Level k gets exact discrete Laplace noise of scale δ·w_k/(ε s_k) on its integer
sums (:func:`fugu.noise.discrete_laplace`); the losses add up to ε·Σ_k s_k = ε (sequential
composition). The identity level is the plain Laplace histogram with share s₀.

Graded plan (GRADED_MIN … GRADED_MAX = 16 … 1,024 cells). A second candidate measures every
cell j with its own budget share d_j and p ≤ 12 rows of a non-negative integer matrix R with one
noise scale: cell j gets exact discrete Laplace of scale δ/(ε d_j) (an array of scales to
:func:`fugu.noise.discrete_laplace`), the integer row sums R x of scale δ·B/ε. Sensitivity: a
record in cell j changes the cell by 1 and the rows by the column R_·j (L1 Σ_r R_rj), so its
privacy loss is Σ_rows |A_rj|·(ε-share of the row) = ε(Σ_r R_rj/B + d_j); the plan sets
d_j = (1 − Σ_r R_rj/B)(1 − 2⁻³⁰), so every column's loss is at most ε under add/remove (δ = 1).
Under replace-one a record moves between two cells a, b: the loss is at most half of each of
the two columns' losses at δ = 2, i.e. ≤ ε (checked by brute force in the tests). The rows are
derived from public inputs only (n and the workload), deterministically: the continuous
relaxation (free cell weights and p free non-negative rows, every column's loss exactly ε, the
cells' exact discrete-Laplace precision 2·sinh²(d/2) at ε = 1) minimises the exact expected
error tr(G X⁻¹) of the workload's Gram matrix G = E[w wᵀ] by L-BFGS-B from a fixed start (hats
on uniform knots; p ≈ n/21 rows, 12 at 256 cells, at most 24; the objective in O(n²p) by
Woodbury; BLAS limited to one thread if threadpoolctl is installed), then R = round(1024·Θ) and
B from a fixed grid. For random ranges over 256 cells it finds narrow hats at the ends and wide
ones in the middle, cells' budgets ≈ 0.98 at the ends and ≈ 0.51 in the middle (after the HDMM
p-Identity strategy, McKenna et al., VLDB 2018; here with per-cell budgets and integer rows).
Inference for it is dense (n × n).

Inference. Weighted least squares (the BLUE: every level's rows are weighted by the inverse of
their exact discrete-Laplace variance). With U the stacked hat rows (divided by w_k) and
M = I/σ₀² + Uᵀ Λ U the normal matrix, Woodbury gives
M⁻¹ = σ₀² [I − Uᵀ C⁻¹ U] with the small sparse C = σ₀² Λ⁻¹ + U Uᵀ (one row per hat, ≈ n/(b − 1)
of them), factorised once (sparse LU). Under replace-one neighbours the number of records n is
public and is used as an exact (zero-variance) constraint: x̂ ← x̂ + g (n − 1ᵀx̂)/(1ᵀg),
g = M⁻¹1. Post-processing; the estimate stays unbiased.

Error. Exact per query: Var(wᵀx̂) = σ₀² (|w| − vᵀC⁻¹v) − [replace-one] (wᵀg)²/(1ᵀg), v = U w
(closed form from the hats' cumulative sums). ``expected_error`` returns its square root.

Plan. The fan-out b (the ratio of consecutive strides) and the shares s_k are public and are
chosen by the exact expected error of the workload: the mean of the exact per-query variances
over a fixed public sample of the workload (default: 1,000 ranges drawn, with a fixed seed, from
the distribution of :func:`fugu.queries.random_workload` — two independent uniform cells). For
each b in :data:`~fugu.central.hatplan.FANOUTS` (8, 12, 16, 20, 24, 32; above 8,192 cells b = 16 and
the best of 16, 20, 24 with equal shares) a Nelder–Mead search over the shares runs on
the sample's first 250 ranges; the candidates, the fixed rule (b = 16, equal shares) and the
cells alone (the Laplace histogram) are then compared on the whole sample and the best is used
(``guarantee.parameters["plan"]``: "optimal", "rule" or "identity"), so the plan is never worse
than the rule or than Laplace on that sample. On small domains the graded candidate then
replaces it when its exact expected error (discrete Laplace at ε = 1, the neighbour relation's
δ, the public total when it is used) on the same sample is lower (``"plan": "graded"``). The
plan depends on n, the neighbour relation and the workload only, so it is cached; it is derived
without the data and spends no budget.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping, Sequence
from typing import Any, ClassVar

import numpy as np
from numpy.typing import NDArray

from ..budget import Accountant
from ..domain import Domain
from ..errors import InvalidParameterError
from ..histogram import Histogram, require_histogram
from ..mechanism import check_epsilon, guarantee, histogram_sensitivity, start, total_is_public
from ..noise import SHARE_SLACK, RandomSource, discrete_laplace, noise_scale, noise_scales
from ..queries import RangeQuery, Workload, workload_bounds
from ..release import CubeRelease, Guarantee
from ..release_state import Array, Meta, StateField
from .hatplan import (
    HatPlan,
    _DenseSystem,
    _level_variances,
    _measured,
    _sample,
    _System,
    _system_for,
    hat_matrix,
    plan_hat_tree,
)
from .hierarchical import hierarchical, hierarchical_variance

__all__ = [
    "hat_tree",
    "HatTreeRelease",
    "HatPlan",
    "plan_hat_tree",
    "hat_matrix",
    "hat_tree_variance",
]

FloatArray = NDArray[np.float64]

SOURCE = (
    "hat (linear B-spline) levels with least squares; strategy shape after McKenna et al., "
    "VLDB 2018 (HDMM p-Identity); plan by the exact expected error of the workload (fugu)"
)


def _check_domain(domain: Domain) -> int:
    if domain.ndim != 1:
        raise InvalidParameterError(
            f"hat_tree releases one attribute (a 1-D histogram); this domain has {domain.ndim} "
            f"attributes {list(domain.names)}: use fugu.central.hierarchical for cubes"
        )
    return int(domain.size)


def measure(
    counts: NDArray[Any], plan: HatPlan, eps: float, delta: int, source: RandomSource
) -> list[FloatArray]:
    """The noisy levels of a batch of histograms ``counts`` (B, n), divided by their strides.

    Level k's integer sums ``hat_matrix(n, w_k) @ x`` (identity for w = 1) get exact discrete
    Laplace noise of scale δ·w_k/(ε·s_k): their L1 sensitivity is δ·w_k. A graded plan returns
    [noisy cells (scale δ/(ε d_j) each), noisy integer rows R x (scale δB/ε)], unnormalised.
    This is the only place where private data meets noise; everything after it is
    post-processing.
    """
    x = np.asarray(counts, dtype=np.int64)
    if plan.cell_budget is not None:
        # graded plan: cell j with budget d_j (scale δ/(ε d_j)), the integer rows R with one
        # scale δB/ε; column j's loss ε(Σ_r R_rj/B + d_j) ≤ ε (replace-one: two columns, δ = 2)
        d = np.asarray(plan.cell_budget, dtype=np.float64)
        cell_scale = np.broadcast_to(noise_scales(delta, eps, [d, [SHARE_SLACK]])[:, 0], x.shape)
        cells = x + discrete_laplace(cell_scale, rng=source)
        r = plan.row_matrix()
        # exact integer products (Python integers where int64 could overflow)
        if float(np.abs(x).sum(axis=-1).max(initial=0)) * float(r.max(initial=1)) < 2.0**62:
            y = x @ r.T
        else:
            y = x.astype(object) @ r.T.astype(object)
        rows = y + discrete_laplace(
            noise_scale(delta * plan.row_divisor, eps, SHARE_SLACK), size=y.shape, rng=source
        )
        return [cells.astype(np.float64), rows.astype(np.float64)]
    out = []
    for w, s in zip(plan.strides, plan.shares, strict=True):
        y = x if w == 1 else _hat_sums(x, plan.n, w)
        noise = discrete_laplace(
            noise_scale(delta * w, eps, (s, SHARE_SLACK)), size=y.shape, rng=source
        )
        out.append((y + noise).astype(np.float64) / float(w))
    return out


def _hat_sums(x: NDArray[np.int64], n: int, w: int) -> NDArray[Any]:
    """The exact integer hat sums ``hat_matrix(n, w) @ x`` of a batch ``x`` (B, n).

    int64 products when every sum stays below 2^62 (each is at most w times the batch row's
    total); beyond that Python integers (an object array). Before, the product was taken in
    float64: a hat sum above 2^53 was rounded, so one record could move a level by more than
    its sensitivity w (add/remove, 2^48 + 1 records in every third of 64 cells, stride 16:
    a loss of 1.17 epsilon)."""
    m = hat_matrix(n, w)
    weights = np.rint(m.data).astype(np.int64)
    bound = float(np.abs(x).sum(axis=-1).max(initial=0)) * float(w)
    if bound < 2.0**62:
        mi = m.copy()
        mi.data = weights
        mi = mi.astype(np.int64)
        return np.asarray((mi @ x.T).T, dtype=np.int64)
    terms = x[:, m.indices].astype(object) * weights.astype(object)[None, :]
    out = np.zeros((x.shape[0], m.shape[0]), dtype=object)
    nonempty = np.diff(m.indptr) > 0
    out[:, nonempty] = np.add.reduceat(terms, m.indptr[:-1][nonempty], axis=1)
    return out


def _largest_scale(plan: HatPlan, delta: int) -> float:
    """The largest noise scale :func:`measure` draws at ε = 1 (scales are proportional to
    1/ε), slightly enlarged: an ε the epsilon check lets through keeps every scale within the
    sampler's limit, so a too-small ε is refused before the budget is spent."""
    if plan.cell_budget is not None:
        cells = noise_scales(delta, 1.0, [np.asarray(plan.cell_budget), [SHARE_SLACK]])
        top = max(float(np.max(cells)), noise_scale(delta * plan.row_divisor, 1.0, SHARE_SLACK))
    else:
        top = max(
            noise_scale(delta * w, 1.0, (s, SHARE_SLACK))
            for w, s in zip(plan.strides, plan.shares, strict=True)
        )
    return top * (1.0 + 2.0**-40)


def hat_tree_variance(
    domain: Domain,
    bounds: NDArray[np.int64],
    epsilon: float,
    *,
    fanout: int | None = None,
    shares: Sequence[float] | None = None,
    neighbours: str = "replace",
    plan_for_queries: bool = False,
) -> FloatArray:
    """Exact noise variance of each query (bounds (m, 1, 2)) under the hat tree, without data.

    The plan is the one :func:`hat_tree` would use: for random ranges by default, or for these
    very queries with ``plan_for_queries=True`` (as ``hat_tree(..., workload=bounds)``).

    >>> import fugu
    >>> dom = fugu.Domain([fugu.Ordinal("x", 0, 255)])
    >>> v = hat_tree_variance(dom, np.array([[[0, 256]]]), 1.0)
    >>> abs(float(v[0])) < 1e-9   # replace-one: the whole domain is the public total
    True
    """
    n = _check_domain(domain)
    delta = histogram_sensitivity(neighbours)
    b = np.asarray(bounds, dtype=np.int64)
    wl = (b[:, 0, 0], b[:, 0, 1]) if plan_for_queries else None
    plan = _measured(
        plan_hat_tree(n, fanout=fanout, shares=shares, neighbours=neighbours, workload=wl)
    )
    eps = check_epsilon(epsilon)
    sysm = _system_for(plan, _level_variances(plan, eps, delta))
    return sysm.variance(b[:, 0, 0], b[:, 0, 1], delta == 2)


class HatTreeRelease(CubeRelease):
    """A hat-tree release: least-squares cells; exact per-query variances (correlated cells)."""

    kind = "hat-tree"
    _state_fields: ClassVar[tuple[StateField, ...]] = (
        Array("estimate", "counts", shape="domain"),
        Meta("plan", dict, convert=HatPlan.from_dict, to_json=HatPlan.to_dict),
        Meta("level_variance", "number-list"),
        Meta("total_known", bool),
    )

    def __init__(
        self,
        domain: Domain,
        guarantee: Guarantee,
        estimate: Any,
        *,
        plan: HatPlan,
        level_variance: Sequence[float],
        total_known: bool,
    ) -> None:
        super().__init__(domain, guarantee, estimate)
        _check_domain(domain)
        levels = plan.n + 1 if plan.graded else len(plan.strides)
        if len(level_variance) != levels or plan.n != domain.size:
            raise InvalidParameterError(
                f"a hat-tree plan over {plan.n} cells with {levels} noise variances does not fit "
                f"{len(level_variance)} level variances over {domain.size} cells"
            )
        self.plan = plan
        self.level_variance = [float(v) for v in level_variance]
        self.total_known = bool(total_known)
        self._system: _System | _DenseSystem | None = None

    def _sys(self) -> _System | _DenseSystem:
        if self._system is None:
            self._system = _system_for(self.plan, self.level_variance)
        return self._system

    def expected_variance_many(self, bounds: NDArray[np.int64]) -> FloatArray:
        """Exact noise variance of many queries given as bounds (m, 1, 2)."""
        b = np.asarray(bounds, dtype=np.int64)
        return self._sys().variance(b[:, 0, 0], b[:, 0, 1], self.total_known)

    def expected_error(self, query: RangeQuery | Mapping[str, Any]) -> float | None:
        q = query if isinstance(query, RangeQuery) else RangeQuery(dict(query))
        assert self.domain is not None
        return float(math.sqrt(self.expected_variance_many(q.bounds(self.domain)[None])[0]))


def hat_tree(
    hist: Histogram,
    epsilon: float,
    *,
    fanout: int | None = None,
    shares: Sequence[float] | None = None,
    workload: Workload | Sequence[RangeQuery] | NDArray[np.int64] | None = None,
    neighbours: str = "replace",
    strategy: str = "hats",
    rng: RandomSource | None = None,
    accountant: Accountant | None = None,
) -> CubeRelease:
    """Release a 1-D histogram through identity + hat levels with least squares.

    Parameters
    ----------
    hist : Histogram
        One attribute (ordinal, or nominal in code order).
    epsilon : float
        Privacy-loss bound, > 0.
    fanout : int, optional
        Stride ratio b >= 2 (strides b, b², … below n). None: chosen by the expected error.
    shares : sequence of float, optional
        Budget shares, identity level first (> 0), one per level; normalised to sum to 1.
        None: chosen by the expected error of ``workload``.
    workload : Workload, list of RangeQuery, bounds (m, 1, 2), or None
        The (public) queries the plan is optimised for; None: random ranges.
    neighbours : {"replace", "add-remove"}
        δ = 2 or 1; a level of stride w has L1 sensitivity δ·w on its integer sums.
    strategy : {"hats", "auto"}
        "hats" (default): this mechanism. "auto": compare the exact expected error of the hat
        tree and of :func:`fugu.central.hierarchical` (its default plan) on the workload (its
        fixed public sample by default) and release with the better one; either way
        ``guarantee.parameters["strategy"]`` says which was used and both predicted RMSEs.
        Only one of the two spends the budget.
    rng : RandomSource, optional
    accountant : Accountant, optional

    Returns
    -------
    HatTreeRelease (or HierarchicalRelease when ``strategy="auto"`` picks the tree)

    Examples
    --------
    >>> import fugu
    >>> dom = fugu.Domain([fugu.Ordinal("x", 0, 63)])
    >>> hist = fugu.Histogram.from_records({"x": [1, 2, 2, 9, 40]}, dom)
    >>> rel = fugu.central.hat_tree(hist, 1.0, fanout=8, shares=[0.5, 0.5],
    ...                             rng=fugu.RandomSource(seed=1))
    >>> rel.guarantee.parameters["strides"]
    [1, 8]
    >>> round(float(rel.counts.sum()), 6)   # replace-one: the public total is exact
    5.0
    """
    hist = require_histogram(hist)
    dom = hist.domain
    n = _check_domain(dom)
    delta = histogram_sensitivity(neighbours)
    bounds = None if workload is None else workload_bounds(workload, dom)
    if strategy not in ("hats", "auto"):
        raise InvalidParameterError(f"strategy must be 'hats' or 'auto', got {strategy!r}")
    wl = None if bounds is None else (bounds[:, 0, 0], bounds[:, 0, 1])
    plan = _measured(
        plan_hat_tree(n, fanout=fanout, shares=shares, neighbours=neighbours, workload=wl)
    )
    choice: dict[str, Any] = {"used": "hats", "rule": "requested"}
    total_known = total_is_public(neighbours, hist)  # public facts only: neighbours, how counted
    if strategy == "auto":
        e = check_epsilon(epsilon)
        lo, hi = wl if wl is not None else _sample(n)
        qb = np.stack([lo, hi], axis=1)[:, None, :]
        tree_mse = float(
            np.mean(
                hierarchical_variance(
                    dom, qb, e, neighbours=neighbours, workload=workload, total_known=total_known
                )
            )
        )
        sysm0 = _system_for(plan, _level_variances(plan, e, delta))
        hat_mse = float(np.mean(sysm0.variance(lo, hi, total_known)))
        choice = {
            "used": "hats" if hat_mse < tree_mse else "tree",
            "rule": "lower exact expected error on the workload (sample)",
            "expected_rmse": {"hats": math.sqrt(hat_mse), "tree": math.sqrt(tree_mse)},
        }
        if choice["used"] == "tree":
            rel = hierarchical(
                hist, e, workload=workload, neighbours=neighbours, rng=rng, accountant=accountant
            )
            tree_params = {**rel.guarantee.parameters, "strategy": choice}
            rel.guarantee = dataclasses.replace(rel.guarantee, parameters=tree_params)
            return rel
    eps, source = start(
        epsilon,
        rng,
        accountant,
        "hat tree",
        neighbours=neighbours,
        sensitivity=_largest_scale(plan, delta),
    )
    noisy = [y[0] for y in measure(hist.counts.reshape(1, -1), plan, eps, delta, source)]
    level_var = _level_variances(plan, eps, delta)
    sysm = _system_for(plan, level_var)
    est = sysm.estimate(noisy)
    post: tuple[str, ...] = ("weighted least squares (exact BLUE)",)
    if total_known:
        n_total = float(np.sum(hist.counts, dtype=np.int64))
        g = sysm.g
        est = est + g * (n_total - float(est.sum())) / float(g.sum())
        post = (*post, "public total n as an exact constraint (replace-one neighbours)")
    params: dict[str, Any] = {
        "strides": list(plan.strides),
        "shares": list(plan.shares),
        "fanout": plan.fanout,
        "plan": plan.choice,
        "level_sensitivity": [delta * w for w in plan.strides],
        "node_scale": f"{delta}*stride/(epsilon*share) on integer hat sums",
        "noise": "discrete Laplace on integer sums",
        "total": "public n used exactly (replace-one)" if total_known else "not used",
        "strategy": choice,
    }
    if plan.cell_budget is not None:
        d = np.asarray(plan.cell_budget)
        params.update(
            strides=[],
            shares=[],
            level_sensitivity=[],
            rows=len(plan.rows or ()),
            row_divisor=plan.row_divisor,
            cell_budget_range=[float(d.min()), float(d.max())],
            node_scale=(
                f"cell j: {delta}/(epsilon*d_j); rows: {delta}*row_divisor/epsilon on integer "
                "row sums; column loss epsilon*(sum_r R_rj/row_divisor + d_j) <= epsilon"
            ),
        )
    g_out = guarantee(
        model="central-dp",
        epsilon=eps,
        neighbours=neighbours,
        mechanism="hat-tree",
        rng=source,
        sensitivity=None,
        source=SOURCE,
        parameters=params,
        data_options=hist.data_options,
        post_processing=post,
    )
    return HatTreeRelease(
        dom,
        g_out,
        est.reshape(dom.shape),
        plan=plan,
        level_variance=level_var,
        total_known=total_known,
    )
