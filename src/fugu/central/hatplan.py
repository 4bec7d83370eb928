"""The hat tree's plan: fan-out, level shares or the graded rows, chosen without the data.

:func:`plan_hat_tree` derives the plan :func:`fugu.central.hattree.hat_tree` releases with, from
public inputs only (n, the neighbour relation and the workload): it scores candidate plans by
their exact expected error (the least-squares systems :class:`_System` and
:class:`_DenseSystem`) and caches the result per n. It lives apart from the release so that the
cube mechanism (:mod:`fugu.central.hierarchical`, its Kronecker structure) can plan a per-axis
hat tree without importing the hat-tree release, which itself compares against
:func:`fugu.central.hierarchical` (``strategy="auto"``). See :mod:`fugu.central.hattree` for the
strategy, its privacy accounting and its error.
"""

from __future__ import annotations

import contextlib
import functools
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np
from numpy.typing import NDArray

if TYPE_CHECKING:  # scipy is imported where it is used: `import fugu` stays light
    import scipy.sparse as sp

from ..errors import InvalidParameterError
from ..mechanism import check_neighbours, histogram_sensitivity
from ..noise import discrete_laplace_variance

__all__ = ["HatPlan", "hat_matrix", "plan_hat_tree", "strides_for"]

FloatArray = NDArray[np.float64]

#: Fan-outs (stride ratios) the planner tries. Which one wins depends on how the strides b, b²,
#: … fit n (a top stride just below n measures almost nothing): with only 8, 16 and 32 the hat
#: tree was 0.924x H_b at 4,500 cells and 0.910x at 6,000, with 20 it is 0.895 and 0.891.
FANOUTS = (8, 12, 16, 20, 24, 32)
#: Above WIDE_SEARCH_MAX cells these are compared with equal shares (one exact score each) and
#: only the best, with b = 16 (the fixed rule), gets its shares optimised: at 12,000 cells b = 16
#: alone gave 0.907x H_b, b = 24 gives 0.887x.
LARGE_FANOUTS = (16, 20, 24)
#: Size of the fixed public sample of the default workload used to score plans (the share
#: search uses its first SEARCH_SAMPLE queries; the fan-outs are compared on all of them).
PLAN_SAMPLE = 1000
SEARCH_SAMPLE = 250
#: Above this many cells only b = 16 and the best of LARGE_FANOUTS are optimised (each score
#: costs a sparse solve per query).
WIDE_SEARCH_MAX = 8192
#: A level whose optimised share falls below this is not measured.
MIN_SHARE = 1e-3
#: Graded plans (every cell with its own budget + a few integer rows, dense least squares) are
#: derived and compared for GRADED_MIN <= n <= GRADED_MAX cells (dense n × n algebra: the
#: derivation takes about 2 s at 256 cells and grows as n³).
GRADED_MIN = 16
GRADED_MAX = 1024
#: Free rows (HDMM p-Identity's p), started as hats on uniform knots: about n/21, at least
#: min(GRADED_ROWS, n/16), at most GRADED_ROWS_MAX.
GRADED_ROWS = 12
GRADED_ROWS_MAX = 24
#: The rows are rounded to integers at this scale (K): row r = round(K·Θ_r).
GRADED_SCALE = 1024
#: Lower bound of the cells' free weights (the rows start at 1/2 per column): keeps every cell's
#: budget above ~0.002, where the O(n²p) Woodbury form of the objective is accurate.
GRADED_CELL_MIN = 1e-3
#: Iteration cap of the L-BFGS-B derivation: it converges in a few hundred at 256 cells; above
#: GRADED_LONG_MAX cells the cap is GRADED_ITERS_LARGE (plan time).
GRADED_ITERS = 1500
GRADED_ITERS_LARGE = 400
GRADED_LONG_MAX = 512


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
    """Strides (identity first: 1) and budget shares of a hat tree over ``n`` cells.

    A ``choice="graded"`` plan measures instead every cell ``j`` with its own budget share
    ``cell_budget[j]`` and the rows of the non-negative integer matrix ``rows`` (p × n) with one
    noise scale δ·``row_divisor``/ε; ``strides`` is ``(1,)`` and ``shares`` ``(1.0,)`` there.
    Column j's privacy loss is ε·(Σ_r rows[r, j]/row_divisor + cell_budget[j]) ≤ ε.
    """

    n: int
    strides: tuple[int, ...]
    shares: tuple[float, ...]
    fanout: int
    choice: str
    rows: tuple[tuple[int, ...], ...] | None = None
    row_divisor: float = 0.0
    cell_budget: tuple[float, ...] | None = None

    @property
    def graded(self) -> bool:
        return self.rows is not None

    def row_matrix(self) -> NDArray[np.int64]:
        """The graded rows as an integer array (p × n); (0 × n) for hat plans."""
        if self.rows is None:
            return np.zeros((0, self.n), dtype=np.int64)
        return np.asarray(self.rows, dtype=np.int64).reshape(-1, self.n)

    def column_loss(self) -> FloatArray:
        """Each cell's privacy loss in units of ε (δ = 1): Σ_r |A_rj|·(ε-share of row r)."""
        if self.rows is None or self.cell_budget is None:
            out = np.zeros(self.n)
            for w, s in zip(self.strides, self.shares, strict=True):
                col = np.asarray(np.abs(hat_matrix(self.n, w)).sum(axis=0)).reshape(-1)
                out += col * s / float(w)
            return out
        col = np.abs(self.row_matrix()).sum(axis=0).astype(np.float64)
        return col / self.row_divisor + np.asarray(self.cell_budget, dtype=np.float64)

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "n": self.n,
            "strides": list(self.strides),
            "shares": list(self.shares),
            "fanout": self.fanout,
            "choice": self.choice,
        }
        if self.rows is not None and self.cell_budget is not None:
            out["rows"] = [list(r) for r in self.rows]
            out["row_divisor"] = self.row_divisor
            out["cell_budget"] = list(self.cell_budget)
        return out

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> HatPlan:
        n = int(d["n"])
        rows = cell = None
        div = 0.0
        if d.get("rows") is not None:  # a graded plan (absent in files saved before it)
            rows = tuple(tuple(int(v) for v in r) for r in d["rows"])
            cell = tuple(float(v) for v in d["cell_budget"])
            div = float(d["row_divisor"])
            if any(len(r) != n for r in rows) or len(cell) != n or not div > 0:
                raise ValueError(f"a graded hat plan over {n} cells has rows/budgets of bad size")
        return cls(
            n,
            tuple(int(x) for x in d["strides"]),
            tuple(float(x) for x in d["shares"]),
            int(d["fanout"]),
            str(d["choice"]),
            rows,
            div,
            cell,
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


class _DenseSystem:
    """The least-squares system of a graded plan (dense: only for small n).

    Rows: every cell (variance ``level_var[j]``) and the integer rows R (variance
    ``level_var[n]`` each). Normal matrix X = diag(1/v_cells) + RᵀR/v_rows, inverted once; the
    variance of a range is a 2-D prefix-sum lookup in X⁻¹.
    """

    def __init__(self, n: int, rows: NDArray[np.int64], level_var: Sequence[float]) -> None:
        self.n = n
        self.r = np.asarray(rows, dtype=np.float64).reshape(-1, n)
        lv = np.asarray(level_var, dtype=np.float64)
        if lv.size != n + 1:
            raise InvalidParameterError(
                f"a graded hat plan over {n} cells needs {n + 1} variances, got {lv.size}"
            )
        self.cell_var, self.row_var = lv[:n], float(lv[n])
        x = np.diag(1.0 / self.cell_var) + self.r.T @ self.r / self.row_var
        xi = np.linalg.inv(x)
        self.xinv = (xi + xi.T) / 2.0
        p = np.zeros((n + 1, n + 1))
        p[1:, 1:] = np.cumsum(np.cumsum(self.xinv, axis=0), axis=1)
        self._prefix = p
        self.g = self.xinv.sum(axis=1)

    def estimate(self, noisy: Sequence[FloatArray]) -> FloatArray:
        """Weighted least squares from the noisy cells and the noisy rows."""
        r = noisy[0] / self.cell_var + self.r.T @ (noisy[1] / self.row_var)
        return np.asarray(self.xinv @ r, dtype=np.float64)

    def variance(
        self, lo: NDArray[np.int64], hi: NDArray[np.int64], total_known: bool
    ) -> FloatArray:
        """Exact variance of the least-squares answer to each range [lo, hi)."""
        p = self._prefix
        out = p[hi, hi] - p[lo, hi] - p[hi, lo] + p[lo, lo]
        if total_known:
            cg = np.concatenate([[0.0], np.cumsum(self.g)])
            wg = cg[hi] - cg[lo]
            out = out - wg**2 / float(cg[-1])
        return np.asarray(np.maximum(out, 0.0), dtype=np.float64)


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


def _default_gram(n: int) -> FloatArray:
    """E[w wᵀ] of the default workload (two independent uniform cells, inclusive), exactly:
    n²·G_ab = 2 (min(a, b) + 1)(n − max(a, b)) − [a = b]."""
    i = np.arange(n)
    lo, hi = np.minimum.outer(i, i), np.maximum.outer(i, i)
    return np.asarray((2.0 * (lo + 1) * (n - hi) - np.eye(n)) / float(n) ** 2, dtype=np.float64)


def _workload_gram(n: int, lo: NDArray[np.int64], hi: NDArray[np.int64]) -> FloatArray:
    """(1/m) Σ_q w_q w_qᵀ of ranges [lo, hi): G_ab = share of ranges with lo ≤ a, b < hi."""
    c = np.zeros((n, n + 1))
    np.add.at(c, (np.asarray(lo, dtype=np.int64), np.asarray(hi, dtype=np.int64)), 1.0)
    s = np.cumsum(c, axis=0)[:, ::-1].cumsum(axis=1)[:, ::-1]  # S[l, h] = #{lo ≤ l, hi ≥ h}
    i = np.arange(n)
    a, b = np.minimum.outer(i, i), np.maximum.outer(i, i)
    return np.asarray(s[a, b + 1] / float(len(lo)), dtype=np.float64)


def _one_blas_thread() -> Any:
    """Limit BLAS to one thread while a graded plan is derived, when threadpoolctl is installed.

    The derivation makes thousands of small matrix products; on a busy machine a multi-threaded
    BLAS spends most of its time waiting for its threads (512 cells: 1.5 s on one thread, over a
    minute on two contended ones). One thread also makes the plan reproducible on a platform.
    """
    try:
        from threadpoolctl import threadpool_limits
    except ImportError:  # pragma: no cover - optional
        return contextlib.nullcontext()
    return threadpool_limits(limits=1, user_api="blas")


def _graded_p(n: int) -> int:
    """Number of free rows: about one per 21 cells (12 at 256 cells), 2 … GRADED_ROWS_MAX."""
    return max(2, min(n // 16, max(GRADED_ROWS, round(n / 21)), GRADED_ROWS_MAX))


def _graded_objective(z: FloatArray, n: int, p: int, gram: FloatArray) -> tuple[float, FloatArray]:
    """tr(G X⁻¹) and its gradient in (c, T); X = diag(φ(d)) + VVᵀ/2, V = (T/u)ᵀ (n × p).

    Woodbury (O(n²p)): X⁻¹ = D⁻¹ − U M⁻¹ Uᵀ with U = D⁻¹V, M = 2I + VᵀD⁻¹V. When a cell's
    precision φ(d) is tiny that form cancels badly, so then the dense inverse (O(n³)) is used.
    """
    c, t = z[:n], z[n:].reshape(p, n)
    u = c + t.sum(axis=0)
    d, tn = c / u, t / u
    phi = 2.0 * np.sinh(d / 2.0) ** 2
    if d.min() > 1e-5:
        dinv = 1.0 / phi
        uu = dinv[:, None] * tn.T
        mi = np.linalg.inv(2.0 * np.eye(p) + tn @ uu)
        um = uu @ mi
        gu = gram @ uu
        utgu = uu.T @ gu
        f = float(np.sum(np.diag(gram) * dinv) - np.sum(mi * utgu))
        a = tn * dinv[None, :] - (tn @ uu) @ um.T  # Vᵀ X⁻¹
        ag = a @ gram
        tk = ag * dinv[None, :] - (ag @ uu) @ um.T  # Vᵀ X⁻¹ G X⁻¹
        dk = (
            np.diag(gram) * dinv**2
            - 2.0 * dinv * np.sum(gu * um, axis=1)
            + np.sum((um @ utgu) * um, axis=1)
        )  # diag(X⁻¹ G X⁻¹)
    else:
        xi = np.linalg.inv(np.diag(phi) + tn.T @ tn / 2.0)
        f = float(np.sum(gram * xi))
        k = xi @ gram @ xi
        tk, dk = tn @ k, np.diag(k)
    g_tn = -tk
    g_d = -dk * np.sinh(d)
    g_u = np.sum(g_tn * (-t / u**2), axis=0) + g_d * (-c / u**2)
    return f, np.concatenate([g_d / u + g_u, (g_tn / u + g_u[None, :]).ravel()])


def _graded_rows(n: int, gram: FloatArray) -> tuple[FloatArray, FloatArray]:
    """Continuous relaxation: cells with free weights c and p free non-negative rows T.

    Columns normalised (column j's loss is exactly ε: cell budget d_j = c_j/u_j, rows T/u,
    u = c + Σ_r T_r); the cells' noise is counted as exact discrete Laplace (precision
    2·sinh²(d/2) at ε = 1), the rows' as continuous Laplace (variance 2: after rounding to large
    integers their discrete gain is negligible, and it is counted exactly afterwards).
    Objective tr(G X⁻¹), X = diag(2 sinh²(d/2)) + (T/u)ᵀ(T/u)/2, minimised by L-BFGS-B with its
    analytic gradient from a fixed start (hats on uniform knots; c = T = 1/2): deterministic.
    Returns the budgets d (n) and the normalised rows Θ = T/u (p × n).
    """
    from scipy.optimize import minimize

    p = _graded_p(n)
    knots = np.linspace(0.0, n - 1.0, p)
    x = np.arange(n, dtype=np.float64)
    t0 = 0.5 * np.array([np.interp(x, knots, np.eye(p)[i]) for i in range(p)])
    c0 = np.full(n, 0.5)
    iters = GRADED_ITERS if n <= GRADED_LONG_MAX else GRADED_ITERS_LARGE
    res = minimize(
        _graded_objective,
        np.concatenate([c0, t0.ravel()]),
        args=(n, p, gram),
        jac=True,
        method="L-BFGS-B",
        bounds=[(GRADED_CELL_MIN, None)] * n + [(0.0, None)] * (p * n),
        options={"maxiter": iters, "maxfun": 2 * iters, "ftol": 1e-15, "gtol": 1e-12},
    )
    c, t = res.x[:n], res.x[n:].reshape(p, n)
    u = c + t.sum(axis=0)
    return c / u, t / u


def _graded_trace(
    gram: FloatArray, rows: NDArray[np.int64], cell_var: FloatArray, row_var: float
) -> float:
    """tr(G X⁻¹), X = diag(1/v_cells) + RᵀR/v_rows, by Woodbury (O(n²p))."""
    r = rows.astype(np.float64)
    ru = r * cell_var[None, :]  # R A⁻¹
    m = row_var * np.eye(r.shape[0]) + ru @ r.T
    gr = gram @ ru.T
    return float(np.sum(np.diag(gram) * cell_var) - np.sum(np.linalg.inv(m) * (ru @ gr)))


def _graded_budgets(rows: NDArray[np.int64], divisor: float) -> FloatArray:
    """The cells' budget shares that fill every column's loss up to (just below) ε.

    d_j = (1 − Σ_r R_rj/B)(1 − 2⁻³⁰): the factor keeps the float sum Σ_r R_rj/B + d_j ≤ 1
    despite rounding (noise scales are rounded up by the sampler as well)."""
    col = rows.sum(axis=0).astype(np.float64)
    return np.asarray((1.0 - col / divisor) * (1.0 - 2.0**-30), dtype=np.float64)


def _graded_from_gram(n: int, gram: FloatArray) -> HatPlan | None:
    """The graded plan for a workload's Gram matrix (public inputs only, deterministic)."""
    _, theta = _graded_rows(n, gram)
    r = np.rint(GRADED_SCALE * theta).astype(np.int64)
    r = r[r.sum(axis=1) > 0]
    if r.shape[0] == 0:
        return None
    best: tuple[float, float] | None = None
    for alpha in np.linspace(0.9, 1.2, 31):  # one noise scale for the rows: B = K·α
        div = float(GRADED_SCALE * alpha)
        d = _graded_budgets(r, div)
        if d.min() <= 0:
            continue
        cv = np.asarray(discrete_laplace_variance(1.0 / d), dtype=np.float64)
        val = _graded_trace(gram, r, cv, float(discrete_laplace_variance(div)))
        if best is None or val < best[0]:
            best = (val, div)
    if best is None:
        return None
    div = best[1]
    return HatPlan(
        n,
        (1,),
        (1.0,),
        0,
        "graded",
        tuple(tuple(int(v) for v in row) for row in r),
        div,
        tuple(float(v) for v in _graded_budgets(r, div)),
    )


@functools.lru_cache(maxsize=8)
def _graded_default(n: int) -> HatPlan | None:
    with _one_blas_thread():
        return _graded_from_gram(n, _default_gram(n))


@functools.lru_cache(maxsize=8)
def _graded_workload(n: int, lo: bytes, hi: bytes) -> HatPlan | None:
    lo_a, hi_a = np.frombuffer(lo, dtype=np.int64), np.frombuffer(hi, dtype=np.int64)
    with _one_blas_thread():
        return _graded_from_gram(n, _workload_gram(n, lo_a, hi_a))


def _exact_score(
    plan: HatPlan, lo: NDArray[np.int64], hi: NDArray[np.int64], neighbours: str
) -> float:
    """Mean exact variance (discrete Laplace, ε = 1) of the plan on the ranges [lo, hi)."""
    delta = histogram_sensitivity(neighbours)
    p = _measured(plan)
    sysm = _system_for(p, _level_variances(p, 1.0, delta))
    return float(np.mean(sysm.variance(lo, hi, delta == 2)))


def _with_graded(
    hats: HatPlan,
    n: int,
    lo: NDArray[np.int64],
    hi: NDArray[np.int64],
    neighbours: str,
    default: bool,
) -> HatPlan:
    """The graded candidate replaces the hat plan when its exact expected error is lower."""
    if not GRADED_MIN <= n <= GRADED_MAX:
        return hats
    lo = np.ascontiguousarray(lo, dtype=np.int64)
    hi = np.ascontiguousarray(hi, dtype=np.int64)
    graded = _graded_default(n) if default else _graded_workload(n, lo.tobytes(), hi.tobytes())
    if graded is None:
        return hats
    with _one_blas_thread():
        better = _exact_score(graded, lo, hi, neighbours) < _exact_score(hats, lo, hi, neighbours)
    return graded if better else hats


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


def _fanouts(n: int, lo: NDArray[np.int64], hi: NDArray[np.int64], tk: bool) -> tuple[int, ...]:
    """The fan-outs whose shares are optimised: all of FANOUTS up to WIDE_SEARCH_MAX cells;
    above, b = 16 and the best of LARGE_FANOUTS scored with equal shares (public inputs only)."""
    if n <= WIDE_SEARCH_MAX:
        return FANOUTS
    scored = []
    for b in LARGE_FANOUTS:
        st = (1, *strides_for(n, b))
        scored.append((_score(n, st, tuple(1.0 / len(st) for _ in st), lo, hi, tk), b))
    best = min(scored)[1]
    return (16,) if best == 16 else (16, best)


@functools.lru_cache(maxsize=32)
def _plan_default(n: int, neighbours: str) -> HatPlan:
    lo, hi = _sample(n)
    tk = neighbours == "replace"
    hats = _search(n, _fanouts(n, lo, hi, tk), lo, hi, tk)[0]
    return _with_graded(hats, n, lo, hi, neighbours, True)


@functools.lru_cache(maxsize=32)
def _plan_fanout(n: int, fanout: int, neighbours: str) -> HatPlan:
    """The default workload's plan with a fixed fan-out (shares searched), cached like
    :func:`_plan_default`: it was searched again for every release (1.4 s at 300 cells)."""
    lo, hi = _sample(n)
    return _search(n, (fanout,), lo, hi, neighbours == "replace")[0]


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
    fixed public sample of it. On GRADED_MIN … GRADED_MAX cells (and without ``fanout`` or
    ``shares``) the graded plan is a candidate too.

    Examples
    --------
    >>> plan = plan_hat_tree(64, neighbours="add-remove")
    >>> plan.choice, len(plan.rows), bool(plan.column_loss().max() <= 1.0)
    ('graded', 4, True)
    >>> plan_hat_tree(100, fanout=8, shares=[1, 1, 1]).strides   # given: no search
    (1, 8, 64)
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
        return _plan_default(n, neighbours)
    if workload is None:
        assert fanout is not None
        return _plan_fanout(n, fanout, neighbours)
    fans = (fanout,) if fanout is not None else _fanouts(n, lo, hi, tk)
    hats = _search(n, fans, lo, hi, tk)[0]
    if fanout is not None:
        return hats
    return _with_graded(hats, n, lo, hi, neighbours, False)


def _level_variances(plan: HatPlan, eps: float, delta: int) -> list[float]:
    """Exact noise variance of each level's normalised sums (discrete Laplace / w²).

    Graded plans: the n cells' variances (scale δ/(ε d_j)), then the rows' (scale δB/ε)."""
    if plan.cell_budget is not None:
        d = np.asarray(plan.cell_budget, dtype=np.float64)
        cells = discrete_laplace_variance(delta / (eps * d))
        return [
            *(float(v) for v in cells),
            float(discrete_laplace_variance(delta * plan.row_divisor / eps)),
        ]
    out = []
    for w, s in zip(plan.strides, plan.shares, strict=True):
        scale = delta * w / (eps * s)
        out.append(float(discrete_laplace_variance(scale)) / float(w) ** 2)
    return out


def _system_for(plan: HatPlan, level_var: Sequence[float]) -> _System | _DenseSystem:
    if plan.graded:
        return _DenseSystem(plan.n, plan.row_matrix(), level_var)
    return _System(plan.n, plan.strides, level_var)


def _measured(plan: HatPlan) -> HatPlan:
    if plan.graded:
        return plan
    keep = [i for i, s in enumerate(plan.shares) if s > 0]
    return HatPlan(
        plan.n,
        tuple(plan.strides[i] for i in keep),
        tuple(plan.shares[i] for i in keep),
        plan.fanout,
        plan.choice,
    )
