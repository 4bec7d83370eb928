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
each b ∈ {8, 16, 32} (only 16 above 8,192 cells) a Nelder–Mead search over the shares runs on
the sample's first 250 ranges; the candidates, the fixed rule (b = 16, equal shares) and the
cells alone (the Laplace histogram) are then compared on the whole sample and the best is used
(``guarantee.parameters["plan"]``: "optimal", "rule" or "identity"), so the plan is never worse
than the rule or than Laplace on that sample. The plan depends on n and the workload only (ε and
δ scale every variance alike), so it is cached.
"""

from __future__ import annotations

import dataclasses
import functools
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar

import numpy as np
from numpy.typing import NDArray

if TYPE_CHECKING:  # scipy is imported where it is used: `import fugu` stays light
    import scipy.sparse as sp

from ..budget import Accountant
from ..domain import Domain
from ..errors import InvalidParameterError
from ..histogram import Histogram, require_histogram
from ..mechanism import check_epsilon, check_neighbours, guarantee, start, total_is_public
from ..noise import RandomSource, discrete_laplace, discrete_laplace_variance
from ..queries import RangeQuery, Workload
from ..release import CubeRelease, Guarantee
from ..release_state import Array, Meta, StateField
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

#: Fan-outs (stride ratios) the planner tries.
FANOUTS = (8, 16, 32)
#: Size of the fixed public sample of the default workload used to score plans (the share
#: search uses its first SEARCH_SAMPLE queries; the fan-outs are compared on all of them).
PLAN_SAMPLE = 1000
SEARCH_SAMPLE = 250
#: Above this many cells only b = 16 is tried (each score costs a sparse solve per query).
WIDE_SEARCH_MAX = 8192
#: A level whose optimised share falls below this is not measured.
MIN_SHARE = 1e-3


def _int_arg(name: str, value: object, low: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int | np.integer) or value < low:
        raise InvalidParameterError(f"{name} must be an integer >= {low}, got {value!r}")
    return int(value)


def strides_for(n: int, b: int) -> tuple[int, ...]:
    """The hat levels' strides b, b², … below n (the identity level, stride 1, not included).

    >>> strides_for(4096, 16)
    (16, 256)
    """
    out, w = [], b
    while w < n:
        out.append(w)
        w *= b
    return tuple(out)


def hat_matrix(n: int, w: int) -> sp.csr_matrix:
    """Integer hat sums of stride ``w`` over ``n`` cells, shape (⌈(n−1)/w⌉ + 1, n).

    Row j has weight w − |x − j·w| at the cells x within w of its centre j·w; every column sums
    to w (the two hats covering x weigh w − r and r, r = x mod w). ``w = 1`` is the identity.

    >>> hat_matrix(5, 2).toarray().astype(int)
    array([[2, 1, 0, 0, 0],
           [0, 1, 2, 1, 0],
           [0, 0, 0, 1, 2]])
    """
    import scipy.sparse as sp

    n = _int_arg("n", n, 1)
    w = _int_arg("w", w, 1)
    rows_n = (n - 1) // w + 1 + (1 if (n - 1) % w else 0)
    x = np.arange(n, dtype=np.int64)
    j, r = np.divmod(x, w)
    rows = np.concatenate([j, j[r > 0] + 1])
    cols = np.concatenate([x, x[r > 0]])
    vals = np.concatenate([w - r, r[r > 0]]).astype(np.float64)
    return sp.csr_matrix((vals, (rows, cols)), shape=(rows_n, n))


def _hat_cum(n_rows: int, w: int, t: NDArray[np.int64]) -> FloatArray:
    """F[i, j] = Σ_{x < t_i} (w − |x − j·w|)₊ / w: each hat's mass left of ``t`` (m × rows)."""
    d = t[:, None].astype(np.float64) - (np.arange(n_rows, dtype=np.float64) * w)[None, :]
    wf = float(w)
    neg = np.clip(d, -(wf - 1.0), 0.0)  # mass of the rising ramp left of d
    s1 = (wf + neg - 1.0) * (wf + neg) / (2.0 * wf)
    pos = np.clip(d, 0.0, wf)
    s2 = (pos * wf - pos * (pos - 1.0) / 2.0) / wf
    return s1 + s2


@dataclass(frozen=True)
class HatPlan:
    """Strides (identity first: 1) and budget shares of a hat tree over ``n`` cells."""

    n: int
    strides: tuple[int, ...]
    shares: tuple[float, ...]
    fanout: int
    choice: str

    def to_dict(self) -> dict[str, Any]:
        return {
            "n": self.n,
            "strides": list(self.strides),
            "shares": list(self.shares),
            "fanout": self.fanout,
            "choice": self.choice,
        }

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> HatPlan:
        return cls(
            int(d["n"]),
            tuple(int(x) for x in d["strides"]),
            tuple(float(x) for x in d["shares"]),
            int(d["fanout"]),
            str(d["choice"]),
        )


class _System:
    """The least-squares system of a plan for given per-level noise variances (normalised)."""

    def __init__(self, n: int, strides: Sequence[int], level_var: Sequence[float]) -> None:
        import scipy.sparse as sp
        from scipy.sparse.linalg import splu

        self.n = n
        self.strides = tuple(strides)
        self.level_var = tuple(float(v) for v in level_var)
        self.var0 = self.level_var[0]
        mats, var_rows = [], []
        for w, v in zip(self.strides[1:], self.level_var[1:], strict=True):
            u = hat_matrix(n, w) / float(w)
            mats.append(u)
            var_rows.append(np.full(u.shape[0], v))
        self.rows = [m.shape[0] for m in mats]
        if mats:
            self.u = sp.vstack(mats).tocsr()
            lam = np.concatenate(var_rows)  # σ_k² of every hat row
            # M = I/σ₀² + Uᵀ Λ U, Λ = diag(1/σ_k²) ⇒ M⁻¹ = σ₀² [I − Uᵀ C⁻¹ U],
            # C = U Uᵀ + diag(σ_k²/σ₀²)
            c = (self.u @ self.u.T + sp.diags(lam / self.var0)).tocsc()
            self.lu = splu(c, permc_spec="MMD_AT_PLUS_A")  # C is symmetric: less fill-in
        else:
            self.u = None
            self.lu = None
        self._g: FloatArray | None = None

    def solve_normal(self, r: FloatArray) -> FloatArray:
        """M⁻¹ r."""
        if self.u is None or self.lu is None:
            return self.var0 * r
        return self.var0 * (r - self.u.T @ self.lu.solve(self.u @ r))

    def estimate(self, noisy: Sequence[FloatArray]) -> FloatArray:
        """Weighted least squares from the normalised noisy levels (identity first)."""
        r = noisy[0] / self.var0
        for y, w, v in zip(noisy[1:], self.strides[1:], self.level_var[1:], strict=True):
            r = r + (hat_matrix(self.n, w).T @ (y / v)) / float(w)
        return self.solve_normal(r)

    @property
    def g(self) -> FloatArray:
        """M⁻¹ 1 (for the public-total constraint)."""
        if self._g is None:
            self._g = self.solve_normal(np.ones(self.n))
        return self._g

    def variance(
        self, lo: NDArray[np.int64], hi: NDArray[np.int64], total_known: bool, batch: int = 2000
    ) -> FloatArray:
        """Exact variance of the least-squares answer to each range [lo, hi)."""
        out = np.empty(lo.size)
        for s in range(0, lo.size, batch):
            a, b = lo[s : s + batch], hi[s : s + batch]
            q = (b - a).astype(np.float64)
            if self.u is not None and self.lu is not None:
                v = np.hstack(
                    [
                        _hat_cum(k, w, b) - _hat_cum(k, w, a)
                        for k, w in zip(self.rows, self.strides[1:], strict=True)
                    ]
                )
                z = self.lu.solve(np.ascontiguousarray(v.T))
                q = q - np.einsum("ij,ji->i", v, z)
            out[s : s + batch] = self.var0 * q
        if total_known:
            cg = np.concatenate([[0.0], np.cumsum(self.g)])
            wg = cg[hi] - cg[lo]
            out -= wg**2 / float(cg[-1])
        return np.maximum(out, 0.0)


def _level_var_model(shares: Sequence[float], strides: Sequence[int]) -> list[float]:
    """Relative continuous-Laplace variance per level in normalised units: 2/s_k² (ε = δ = 1)."""
    del strides
    return [2.0 / (s * s) for s in shares]


@functools.lru_cache(maxsize=64)
def _sample(n: int, m: int = PLAN_SAMPLE) -> tuple[NDArray[np.int64], NDArray[np.int64]]:
    """A fixed public sample of random ranges (two independent uniform cells, inclusive)."""
    rng = np.random.default_rng(20_181_015)
    uv = rng.integers(0, n, size=(m, 2))
    return uv.min(axis=1), uv.max(axis=1) + 1


def _score(
    n: int,
    strides: Sequence[int],
    shares: Sequence[float],
    lo: NDArray[np.int64],
    hi: NDArray[np.int64],
    total_known: bool,
) -> float:
    keep = [0] + [i for i in range(1, len(strides)) if shares[i] > 0]
    st = [strides[i] for i in keep]
    sh = [shares[i] for i in keep]
    sysm = _System(n, st, _level_var_model(sh, st))
    return float(np.mean(sysm.variance(lo, hi, total_known)))


def _optimise(
    n: int, strides: tuple[int, ...], lo: NDArray[np.int64], hi: NDArray[np.int64], tk: bool
) -> tuple[tuple[float, ...], float]:
    k = len(strides)

    def shares_of(z: NDArray[np.float64]) -> list[float]:
        e = np.exp(z - z.max())
        p = e / e.sum()
        p = np.where(p < MIN_SHARE, 0.0, p)
        p[0] = max(p[0], MIN_SHARE)
        return [float(x) for x in p / p.sum()]

    def fun(z: NDArray[np.float64]) -> float:
        return _score(n, strides, shares_of(z), lo, hi, tk)

    z0 = np.zeros(k)
    if k == 1:
        return (1.0,), fun(z0)
    from scipy.optimize import minimize

    res = minimize(
        fun,
        z0,
        method="Nelder-Mead",
        options={"maxfev": 12 * k, "xatol": 0.05, "fatol": 1e-3},
    )
    best = shares_of(res.x)
    return tuple(best), float(res.fun)


def _search(
    n: int, fans: Sequence[int], lo: NDArray[np.int64], hi: NDArray[np.int64], tk: bool
) -> tuple[HatPlan, float]:
    """Shares by Nelder–Mead on the first SEARCH_SAMPLE queries, fan-outs on all of them."""
    # the cells alone (fugu's Laplace histogram) are always a candidate: never worse than it
    best: tuple[HatPlan, float] | None = (
        HatPlan(n, (1,), (1.0,), fans[0], "identity"),
        _score(n, (1,), (1.0,), lo, hi, tk),
    )
    if 16 in fans:  # the fixed rule (b = 16, equal shares) is always a candidate
        st = (1, *strides_for(n, 16))
        rule = tuple(1.0 / len(st) for _ in st)
        val = _score(n, st, rule, lo, hi, tk)
        if best is None or val < best[1]:
            best = (HatPlan(n, st, rule, 16, "rule"), val)
    for b in fans:
        st = (1, *strides_for(n, b))
        sh, _ = _optimise(n, st, lo[:SEARCH_SAMPLE], hi[:SEARCH_SAMPLE], tk)
        val = _score(n, st, sh, lo, hi, tk)
        if best is None or val < best[1]:
            best = (HatPlan(n, st, sh, b, "optimal"), val)
    assert best is not None
    return best


@functools.lru_cache(maxsize=32)
def _plan_default(n: int, neighbours: str) -> tuple[HatPlan, float]:
    lo, hi = _sample(n)
    fans = FANOUTS if n <= WIDE_SEARCH_MAX else (16,)
    return _search(n, fans, lo, hi, neighbours == "replace")


def plan_hat_tree(
    n: int,
    *,
    fanout: int | None = None,
    shares: Sequence[float] | None = None,
    neighbours: str = "replace",
    workload: Any = None,
) -> HatPlan:
    """The hat tree's strides and shares for ``n`` cells (public inputs only; no budget).

    ``fanout`` fixes the stride ratio b; ``shares`` (identity first, one per level) fixes the
    split. Otherwise both are chosen by the exact expected error of ``workload`` — a pair of
    arrays (lo, hi) of half-open ranges; default: the random-range distribution, scored on a
    fixed public sample of it.
    """
    n = _int_arg("n", n, 1)
    neighbours = check_neighbours(neighbours)
    if fanout is not None:
        fanout = _int_arg("fanout", fanout, 2)
    tk = neighbours == "replace"
    if workload is not None:
        lo, hi = workload
    if shares is not None:
        b = fanout if fanout is not None else 16
        st = (1, *strides_for(n, b))
        p = np.asarray(shares, dtype=np.float64).reshape(-1)
        if p.size != len(st) or np.any(~np.isfinite(p)) or np.any(p < 0) or p[0] <= 0:
            raise InvalidParameterError(
                f"shares must be {len(st)} non-negative numbers (identity level first, > 0) for "
                f"strides {list(st)}, got {list(shares)!r}"
            )
        return HatPlan(n, st, tuple(float(x) for x in p / p.sum()), b, "given")
    if n == 1 or (fanout is not None and not strides_for(n, fanout)):
        return HatPlan(n, (1,), (1.0,), fanout or 16, "identity")
    if workload is None and fanout is None:
        return _plan_default(n, neighbours)[0]
    if workload is None:
        lo, hi = _sample(n)
    fans = (fanout,) if fanout is not None else (FANOUTS if n <= WIDE_SEARCH_MAX else (16,))
    return _search(n, fans, lo, hi, tk)[0]


def _delta(neighbours: str) -> int:
    return 2 if check_neighbours(neighbours) == "replace" else 1


def _level_variances(plan: HatPlan, eps: float, delta: int) -> list[float]:
    """Exact noise variance of each level's normalised sums (discrete Laplace / w²)."""
    out = []
    for w, s in zip(plan.strides, plan.shares, strict=True):
        scale = delta * w / (eps * s)
        out.append(float(discrete_laplace_variance(scale)) / float(w) ** 2)
    return out


def _measured(plan: HatPlan) -> HatPlan:
    keep = [i for i, s in enumerate(plan.shares) if s > 0]
    return HatPlan(
        plan.n,
        tuple(plan.strides[i] for i in keep),
        tuple(plan.shares[i] for i in keep),
        plan.fanout,
        plan.choice,
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
    Laplace noise of scale δ·w_k/(ε·s_k): their L1 sensitivity is δ·w_k. This is the only place
    where private data meets noise; everything after it is post-processing.
    """
    x = np.asarray(counts, dtype=np.int64)
    out = []
    for w, s in zip(plan.strides, plan.shares, strict=True):
        if w == 1:
            y = x
        else:
            # float sparse product of integers < 2^53: exact
            y = np.rint(np.asarray(hat_matrix(plan.n, w) @ x.T).T).astype(np.int64)
        noise = discrete_laplace(delta * w / (eps * s), size=y.shape, rng=source)
        out.append((y + noise).astype(np.float64) / float(w))
    return out


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
    delta = _delta(neighbours)
    b = np.asarray(bounds, dtype=np.int64)
    wl = (b[:, 0, 0], b[:, 0, 1]) if plan_for_queries else None
    plan = _measured(
        plan_hat_tree(n, fanout=fanout, shares=shares, neighbours=neighbours, workload=wl)
    )
    eps = check_epsilon(epsilon)
    sysm = _System(n, plan.strides, _level_variances(plan, eps, delta))
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
        if len(level_variance) != len(plan.strides) or plan.n != domain.size:
            raise InvalidParameterError(
                f"a hat-tree plan over {plan.n} cells with {len(plan.strides)} levels does not fit "
                f"{len(level_variance)} level variances over {domain.size} cells"
            )
        self.plan = plan
        self.level_variance = [float(v) for v in level_variance]
        self.total_known = bool(total_known)
        self._system: _System | None = None

    def _sys(self) -> _System:
        if self._system is None:
            self._system = _System(self.plan.n, self.plan.strides, self.level_variance)
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
    delta = _delta(neighbours)
    bounds = None
    if workload is not None:
        if isinstance(workload, np.ndarray):
            bounds = np.asarray(workload, dtype=np.int64)
        else:
            wk = workload if isinstance(workload, Workload) else Workload(list(workload))
            bounds = wk.bounds(dom)
        if bounds.ndim != 3 or bounds.shape[1:] != (1, 2) or bounds.shape[0] == 0:
            raise InvalidParameterError(
                f"workload bounds must have shape (m, 1, 2) with m >= 1, got {bounds.shape}"
            )
    if strategy not in ("hats", "auto"):
        raise InvalidParameterError(f"strategy must be 'hats' or 'auto', got {strategy!r}")
    wl = None if bounds is None else (bounds[:, 0, 0], bounds[:, 0, 1])
    plan = _measured(
        plan_hat_tree(n, fanout=fanout, shares=shares, neighbours=neighbours, workload=wl)
    )
    choice: dict[str, Any] = {"used": "hats", "rule": "requested"}
    if strategy == "auto":
        e = check_epsilon(epsilon)
        lo, hi = wl if wl is not None else _sample(n)
        qb = np.stack([lo, hi], axis=1)[:, None, :]
        tree_mse = float(
            np.mean(hierarchical_variance(dom, qb, e, neighbours=neighbours, workload=workload))
        )
        sysm0 = _System(n, plan.strides, _level_variances(plan, e, delta))
        hat_mse = float(np.mean(sysm0.variance(lo, hi, total_is_public(neighbours, hist))))
        choice = {
            "used": "hats" if hat_mse < tree_mse else "tree",
            "rule": "lower exact expected error on the workload (sample)",
            "expected_rmse": {"hats": math.sqrt(hat_mse), "tree": math.sqrt(tree_mse)},
        }
        if choice["used"] == "tree":
            rel = hierarchical(
                hist, e, workload=workload, neighbours=neighbours, rng=rng, accountant=accountant
            )
            params = {**rel.guarantee.parameters, "strategy": choice}
            rel.guarantee = dataclasses.replace(rel.guarantee, parameters=params)
            return rel
    eps, source = start(
        epsilon, rng, accountant, "hat tree", neighbours=check_neighbours(neighbours)
    )
    noisy = [y[0] for y in measure(hist.counts.reshape(1, -1), plan, eps, delta, source)]
    level_var = _level_variances(plan, eps, delta)
    sysm = _System(n, plan.strides, level_var)
    est = sysm.estimate(noisy)
    total_known = total_is_public(neighbours, hist)
    post: tuple[str, ...] = ("weighted least squares (exact BLUE)",)
    if total_known:
        n_total = float(np.sum(hist.counts, dtype=np.int64))
        g = sysm.g
        est = est + g * (n_total - float(est.sum())) / float(g.sum())
        post = (*post, "public total n as an exact constraint (replace-one neighbours)")
    g_out = guarantee(
        model="central-dp",
        epsilon=eps,
        neighbours=neighbours,
        mechanism="hat-tree",
        rng=source,
        sensitivity=None,
        source=SOURCE,
        parameters={
            "strides": list(plan.strides),
            "shares": list(plan.shares),
            "fanout": plan.fanout,
            "plan": plan.choice,
            "level_sensitivity": [delta * w for w in plan.strides],
            "node_scale": f"{delta}*stride/(epsilon*share) on integer hat sums",
            "noise": "discrete Laplace on integer sums",
            "total": "public n used exactly (replace-one)" if total_known else "not used",
            "strategy": choice,
        },
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
