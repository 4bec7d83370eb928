"""Issue 15, 256 cells: how far below Ektelo's H_b can a linear strategy get? (an experiment)

Not a fugu mechanism: a dense search over data-independent linear strategies for random 1-D
ranges (two independent uniform cells, inclusive) over n = 256 cells, add/remove neighbours,
ε = 1, scored by the *exact* expected error of the whole workload distribution:

    mean variance = tr(G (AᵀΛ⁻¹A)⁻¹),  G = E[w wᵀ] over the workload's ranges w:
    n²·G_ab = 2 (min(a, b) + 1)(n − max(a, b)) − [a = b],

Λ the per-row noise variances. Every strategy is normalised so that each column's privacy loss
is exactly ε (column L1 norm 1 in units of the noise scale), which loses nothing: a column
with a smaller norm can always be topped up by measuring its cell once more.

Families (``python bench/bench_hat256_search.py``, under a minute on one core):

1. HDMM p-Identity / general non-negative A = [diag(c); Θ] (cells with free weights plus p free
   rows), continuous Laplace: L-BFGS-B with the analytic gradient from hats on uniform knots.
2. The same with the cells' *exact discrete Laplace* variance (fugu's release noise): a cell
   measured with budget d has precision 2·sinh²(d/2) instead of d²/2 (the rows Θ are integer
   rows with large entries after scaling, so their discrete gain is negligible; it is counted
   exactly after rounding in 3).
3. Family 2's optimum rounded to an integer matrix (scale K, round): the hats get discrete
   Laplace of scale K·α (α picked from a grid), every cell the budget left in its column.

Family 3 (from a fixed start: hats on 12 uniform knots, p = 12, K = 1024) is now fugu's
"graded" hat-tree plan for 16 … 1,024 cells (``fugu.central.hattree``); the last line printed is
that plan's ratio, as ``hat_tree`` uses it.

The ratio printed is RMSE / H_b's exact RMSE (Ektelo's plan: Qardaji's branching, root not
measured, continuous Laplace, least squares), on the full workload distribution and on the
samples of 1,000 and 2,000 ranges that ``bench_central.py --only hb`` uses.
"""

from __future__ import annotations

import time
from typing import Any

import numpy as np
from scipy.optimize import minimize

import fugu
from bench_central import hb_exact_mse, hb_intervals
from fugu.queries import random_workload

N = 256


def gram(n: int) -> Any:
    """E[w wᵀ] for ranges between two independent uniform cells (inclusive)."""
    i = np.arange(n)
    lo, hi = np.minimum.outer(i, i), np.maximum.outer(i, i)
    return (2.0 * (lo + 1) * (n - hi) - np.eye(n)) / n**2


def hb_mean_variance(n: int, g: Any) -> float:
    nodes = hb_intervals(n)
    b = np.zeros((len(nodes), n))
    for k, (lo, hi) in enumerate(nodes):
        b[k, lo:hi] = 1
    a = np.vstack([np.eye(n), b])
    sens = np.abs(a).sum(0).max()
    return float(2 * sens**2 * np.sum(g * np.linalg.inv(a.T @ a)))


def phi(d: Any, discrete: bool) -> Any:
    """Precision of one cell measured with budget d: 1/Var(noise of scale 1/d)."""
    return 2 * np.sinh(d / 2) ** 2 if discrete else d * d / 2


def dphi(d: Any, discrete: bool) -> Any:
    return np.sinh(d) if discrete else d


def objective(c: Any, t: Any, g: Any, discrete: bool) -> tuple[float, Any, Any]:
    """Mean variance of cells c (raw) + rows t (raw), columns normalised; value and gradient."""
    u = c + t.sum(0)
    d, tn = c / u, t / u
    x = np.diag(phi(d, discrete)) + tn.T @ tn / 2
    xi = np.linalg.inv(x)
    f = float(np.sum(g * xi))
    k = xi @ g @ xi
    g_tn = -tn @ k
    g_d = -np.diag(k) * dphi(d, discrete)
    g_u = np.sum(g_tn * (-t / u**2), 0) + g_d * (-c / u**2)
    return f, g_d / u + g_u, g_tn / u + g_u[None, :]


def optimise(c0: Any, t0: Any, g: Any, discrete: bool, iters: int = 2500) -> tuple[Any, Any, float]:
    n, p = c0.size, t0.shape[0]

    def fun(z: Any) -> tuple[float, Any]:
        f, gc, gt = objective(z[:n], z[n:].reshape(p, n), g, discrete)
        return f, np.concatenate([gc, gt.ravel()])

    res = minimize(
        fun,
        np.concatenate([c0, t0.ravel()]),
        jac=True,
        method="L-BFGS-B",
        bounds=[(1e-9, None)] * n + [(0, None)] * (p * n),
        options={"maxiter": iters, "maxfun": 2 * iters, "ftol": 1e-15, "gtol": 1e-12},
    )
    return res.x[:n], res.x[n:].reshape(p, n), float(res.fun)


def hats_on_knots(n: int, p: int) -> Any:
    """p piecewise-linear hats on uniform knots (a partition of unity)."""
    k = np.linspace(0, n - 1, p)
    x = np.arange(n)
    return np.array([np.interp(x, k, np.eye(p)[i]) for i in range(p)])


def dlap_var(scale: Any) -> Any:
    a = np.exp(-1.0 / np.asarray(scale, dtype=np.float64))
    return 2 * a / (1 - a) ** 2


def rounded_variance(tn: Any, k: int, g: Any) -> float:
    """Integer rows round(K·Θₙ) with discrete Laplace of scale K·α; cells take what is left."""
    r = np.rint(k * tn)
    best = np.inf
    for alpha in np.linspace(0.9, 1.2, 31):
        th = k * alpha
        d = 1 - r.sum(0) / th
        if d.min() <= 0:
            continue
        x = np.diag(1 / dlap_var(1 / d)) + r.T @ r / dlap_var(th)
        best = min(best, float(np.sum(g * np.linalg.inv(x))))
    return best


def sample_ratio(c: Any, t: Any, discrete: bool, n_queries: int) -> float:
    dom = fugu.Domain([fugu.Ordinal("x", 0, N - 1)])
    b = random_workload(dom, n_queries, seed=1).bounds(dom)[:, 0, :]
    w = (np.arange(N)[None, :] >= b[:, :1]) & (np.arange(N)[None, :] < b[:, 1:])
    u = c + t.sum(0)
    x = np.diag(phi(c / u, discrete)) + (t / u).T @ (t / u) / 2
    v = float(np.mean(np.sum((w @ np.linalg.inv(x)) * w, 1)))
    return float(np.sqrt(v / hb_exact_mse(N, b)))


def main() -> None:
    g = gram(N)
    hb = hb_mean_variance(N, g)
    print(f"n = {N}, eps = 1, add/remove: H_b exact RMSE {np.sqrt(hb):.4f} (full distribution)")
    print(f"target 0.899 x H_b = {0.899 * np.sqrt(hb):.4f}\n")
    print(f"{'family':<52} {'p':>3} {'RMSE/H_b':>9} {'1k smp':>7} {'2k smp':>7} {'s':>4}")
    for p in (12, 16):
        for discrete in (False, True):
            t0 = time.process_time()
            c, t, f = optimise(np.full(N, 0.5), 0.5 * hats_on_knots(N, p), g, discrete)
            name = (
                "cells (discrete Laplace) + free rows"
                if discrete
                else "p-Identity / free non-negative rows (continuous)"
            )
            print(
                f"{name:<52} {p:>3} {np.sqrt(f / hb):>9.4f} "
                f"{sample_ratio(c, t, discrete, 1000):>7.4f} "
                f"{sample_ratio(c, t, discrete, 2000):>7.4f} {time.process_time() - t0:>4.0f}"
            )
            if discrete and p == 12:
                tn = t / (c + t.sum(0))
                for k in (64, 256, 1024):
                    v = rounded_variance(tn, k, g)
                    print(f"{f'  rounded to integers, K = {k}':<52} {p:>3} {np.sqrt(v / hb):>9.4f}")
    print(
        f"{'fugu.central.hat_tree (graded plan, as released)':<52} {'':>3} "
        f"{fugu_plan_ratio(g, hb):>9.4f}"
    )


def fugu_plan_ratio(g: Any, hb: float) -> float:
    """Exact RMSE / H_b's of the plan ``hat_tree`` uses at N cells (add/remove, ε = 1)."""
    from fugu.central import hattree

    plan = hattree.plan_hat_tree(N, neighbours="add-remove")
    var = hattree.hat_tree_variance(
        fugu.Domain([fugu.Ordinal("x", 0, N - 1)]),
        np.stack(np.triu_indices(N), 1)[:, None, :] + np.array([0, 1]),
        1.0,
        neighbours="add-remove",
    )
    u, v = np.triu_indices(N)
    wt = np.where(u == v, 1.0, 2.0) / N**2
    print(f"fugu's plan at {N} cells: {plan.choice}, {len(plan.rows or ())} rows")
    return float(np.sqrt(np.sum(wt * var) / hb))


if __name__ == "__main__":
    main()
