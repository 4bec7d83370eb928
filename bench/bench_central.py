"""Benchmarks for central DP cubes: Laplace ("Basic"), hierarchical, Privelet / Privelet+.

Run ``python bench/bench_central.py`` (full) or ``python bench/bench_central.py --quick``.

(a) 1-D: 10^6 records, 4,096 cells, ε = 1 — release time and range RMSE over 10,000 random
    ranges for laplace, hierarchical (uniform / geometric budget), privelet; ratios to laplace.
(b) 4-D census cube age 101 × sex 2 × occupation 512 (32 groups of 16) × income 200
    (≈2·10^7 cells) from 10^7 seeded records: Privelet+ release time as a ratio to the histogram
    build time measured in the same run, and peak memory (tracemalloc) of each step.
(c) The accuracy table of (a) for ε in 0.1 … 2, with the analytic (predicted) RMSE next to the
    measured one.
(d) The Privelet paper's experiment on Adult: square and relative error by query-coverage
    quintile for Basic, Privelet, Privelet+ (age and sex plain) and hierarchical.
(e) The same comparison on the census domain of (b), from the exact analytic errors (no data).
(f) Issue 15: fugu's hierarchical plan vs Ektelo's H_b (Qardaji et al.'s branching, uniform
    budget below the root, least squares) and vs fugu's Laplace, add/remove neighbours, ε = 1,
    random 1-D ranges, at 256 … 65,536 cells and on Adult's 74 ages; plus fugu's hat tree
    (``fugu.central.hat_tree``: exact prediction, measured RMSE, seconds per release + answers)
    and the best of fugu's two exact predictions (what ``hat_tree(strategy="auto")`` uses).
    Ektelo runs in /work/peers-venv (an optional peer, never a fugu dependency; a one-line
    shim replaces its numpy-1 ``np.abs(matrix)`` call, and an Identity plan skips the solver);
    without it the H_b column falls back to fugu's implementation of the published plan
    (``budget="uniform"``), labelled as such.
(g) Issue 16: a 4-D cube of ~1.6 M cells from 2 M records — Privelet+ and hierarchical release
    times as ratios to the histogram build, with a profile of where the time goes.
(h) ``--only pidentity``: an experiment (not a fugu mechanism) showing how far a HDMM-style
    p-Identity strategy gets below H_b on random ranges.
(i) ``--only hb2d``: 2-D cubes (16x16 … 1024x1024, 74x16, 100x40), random rectangles, ε = 1:
    fugu's hierarchical vs Ektelo's 2-D H_b vs fugu's Laplace, exact expected RMSE (H_b's by
    Woodbury, checked against Ektelo's strategy matrix on the smaller grids).
"""

from __future__ import annotations

import argparse
import resource
import time
from collections.abc import Callable
from typing import Any

import numpy as np

import fugu
from fugu.central.recommend import predict_errors
from fugu.datasets import adult_histogram
from fugu.queries import random_workload

MECHS: dict[str, Callable[..., Any]] = {
    "laplace": lambda h, e, s: fugu.central.laplace(h, e, rng=s),
    "hierarchical": lambda h, e, s: fugu.central.hierarchical(h, e, rng=s),
    "hierarchical-geometric": lambda h, e, s: fugu.central.hierarchical(
        h, e, budget="geometric", rng=s
    ),
    "hierarchical-no-inference": lambda h, e, s: fugu.central.hierarchical(
        h, e, consistency=False, rng=s
    ),
    "privelet": lambda h, e, s: fugu.central.privelet(h, e, plain=None, rng=s),
}


def one_d_data(n_records: int, cells: int, seed: int = 0) -> fugu.Histogram:
    rng = np.random.default_rng(seed)
    centres = rng.uniform(0, cells, size=8)
    comp = rng.integers(0, 8, size=n_records)
    x = np.clip(np.rint(rng.normal(centres[comp], cells / 40)), 0, cells - 1).astype(np.int64)
    dom = fugu.Domain([fugu.Ordinal("x", 0, cells - 1)])
    return fugu.Histogram.from_records({"x": x}, dom)


def bench_1d(n_records: int, cells: int, n_queries: int, epsilons: list[float], reps: int) -> None:
    t0 = time.perf_counter()
    hist = one_d_data(n_records, cells)
    t_build = time.perf_counter() - t0
    dom = hist.domain
    w = random_workload(dom, n_queries, seed=1)
    truth = w.answer(hist.counts, dom)
    print(
        f"\n(a)/(c) 1-D: {n_records:,} records, {cells:,} cells, {n_queries:,} random ranges, "
        f"{reps} releases per cell of the table; histogram build {t_build:.3f} s"
    )
    preds: dict[float, dict[str, float]] = {}
    for eps in epsilons:
        pv = predict_errors(dom, w, eps)
        preds[eps] = {k: float(np.sqrt(v.mean())) for k, v in pv.items()}
    header = (
        f"{'epsilon':>7}  {'mechanism':<26} {'time s':>8} {'RMSE':>10} {'predicted':>10} "
        f"{'laplace/x':>9}"
    )
    print(header)
    print("-" * len(header))
    for eps in epsilons:
        base = None
        for name, run in MECHS.items():
            times, mse = [], []
            for r in range(reps):
                src = fugu.RandomSource(seed=1000 * r + 7)
                t = time.perf_counter()
                rel = run(hist, eps, src)
                times.append(time.perf_counter() - t)
                mse.append(np.mean((rel.answer_many(w) - truth) ** 2))
            rmse = float(np.sqrt(np.mean(mse)))
            if name == "laplace":
                base = rmse
            pred = preds[eps].get(name)
            if pred is None and hasattr(rel, "expected_variance_many"):
                v = rel.expected_variance_many(w.bounds(dom))
                pred = float(np.sqrt(np.mean(v))) if v is not None else float("nan")
            assert base is not None
            print(
                f"{eps:>7g}  {name:<26} {np.median(times):>8.4f} {rmse:>10.2f} "
                f"{pred if pred is not None else float('nan'):>10.2f} {base / rmse:>9.2f}"
            )


def census_domain(occ_groups: int, occ_per_group: int, income: int) -> fugu.Domain:
    occ = fugu.Hierarchy.from_dict(
        {"any": {f"g{i}": [f"o{i}_{j}" for j in range(occ_per_group)] for i in range(occ_groups)}}
    )
    return fugu.Domain(
        [
            fugu.Ordinal("age", 0, 100),
            fugu.Nominal("sex", ["F", "M"]),
            fugu.Nominal("occupation", occ),
            fugu.Ordinal("income", 0, income - 1),
        ]
    )


def census_records(n: int, dom: fugu.Domain, seed: int = 0) -> dict[str, Any]:
    rng = np.random.default_rng(seed)
    age = np.clip(rng.normal(40, 15, size=n), 0, 100).astype(np.int64)
    sex = np.asarray(dom.attribute("sex").labels)[rng.integers(0, 2, size=n)]
    n_occ = dom.attribute("occupation").size
    occ_code = np.minimum(rng.zipf(1.3, size=n) - 1, n_occ - 1)
    occ = np.asarray(dom.attribute("occupation").labels)[occ_code]
    n_inc = dom.attribute("income").size
    income = np.clip(rng.lognormal(np.log(n_inc / 5), 0.8, size=n), 0, n_inc - 1).astype(np.int64)
    return {"age": age, "sex": sex, "occupation": occ, "income": income}


def _rss_mib() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # Linux: KiB


def _measure(fn: Callable[[], Any]) -> tuple[Any, float, float, float]:
    """Result, wall time, CPU time, and process peak RSS (MiB) after the step."""
    t, c = time.perf_counter(), time.process_time()
    out = fn()
    return out, time.perf_counter() - t, time.process_time() - c, _rss_mib()


def bench_census(n_records: int, occ_groups: int, occ_per_group: int, income: int) -> None:
    dom = census_domain(occ_groups, occ_per_group, income)
    recs = census_records(n_records, dom)
    cells_mb = dom.size * 8 / 2**20
    print(
        f"\n(b) census cube {dom.shape} = {dom.size:,} cells ({cells_mb:,.0f} MiB as float64), "
        f"{n_records:,} records; process peak RSS before: {_rss_mib():,.0f} MiB"
    )
    print("    (wall and CPU seconds; the machine is shared, so CPU time is the steadier figure)")
    hist, t_hist, c_hist, m = _measure(lambda: fugu.Histogram.from_records(recs, dom))
    print(
        f"histogram build (numpy engine, encode + bincount): {t_hist:.2f} s wall, "
        f"{c_hist:.2f} s CPU; peak RSS {m:,.0f} MiB"
    )
    plains: list[str | list[str]] = ["auto", ["age", "sex"]]
    for plain in plains:

        def run(plain: str | list[str] = plain) -> Any:
            return fugu.central.privelet(hist, 1.0, plain=plain)

        rel, dt, ct, m = _measure(run)
        kinds = rel.guarantee.parameters["transforms"]
        print(
            f"privelet+ plain={plain!r} {kinds}: {dt:.2f} s wall, {ct:.2f} s CPU = "
            f"{ct / c_hist:.2f}x histogram build (CPU; target <= 3x); peak RSS {m:,.0f} MiB"
        )
        del rel
    print("(Privelet+ runs first, so each peak RSS above is its own)")
    _, t_lap, c_lap, m = _measure(lambda: fugu.central.laplace(hist, 1.0))
    print(
        f"laplace (Basic) release: {t_lap:.2f} s wall, {c_lap:.2f} s CPU = {c_lap / c_hist:.2f}x "
        f"histogram build (CPU); peak RSS {m:,.0f} MiB"
    )


def bench_adult(reps: int, n_queries: int) -> None:
    """(d) The Privelet paper's experiment on Adult: error by query-coverage quintile."""
    attrs = ["age", "sex", "occupation", "hours_per_week"]
    hist = adult_histogram(attrs)
    dom = hist.domain
    n = float(hist.counts.sum())
    w = random_workload(dom, n_queries, n_predicates=(1, 4), seed=0)
    truth = w.answer(hist.counts, dom)
    quint = np.searchsorted(np.quantile(truth, [0.2, 0.4, 0.6, 0.8]), truth, side="right")
    print(
        f"\n(d) Adult {dom.shape} ({'x'.join(attrs)}), {int(n):,} people, eps = 1, {n_queries:,} "
        f"random 1-4 predicate queries, {reps} releases; by coverage quintile (1 = smallest)"
    )
    runs = {
        "basic": lambda s: fugu.central.laplace(hist, 1.0, rng=s),
        "privelet": lambda s: fugu.central.privelet(hist, 1.0, plain=None, rng=s),
        "privelet+ (age,sex plain)": lambda s: fugu.central.privelet(
            hist, 1.0, plain=["age", "sex"], rng=s
        ),
        "hierarchical": lambda s: fugu.central.hierarchical(hist, 1.0, rng=s),
    }
    print(f"{'mechanism':<27} {'square error per quintile':<52} relative error (bound 0.1% n)")
    for name, run in runs.items():
        se, re = np.zeros(len(w)), np.zeros(len(w))
        for r in range(reps):
            a = run(fugu.RandomSource(seed=r)).answer_many(w)
            se += (a - truth) ** 2 / reps
            re += fugu.queries.relative_error(a, truth, 0.001 * n) / reps
        sq = " ".join(f"{se[quint == k].mean():9.3g}" for k in range(5))
        rq = " ".join(f"{re[quint == k].mean():7.3f}" for k in range(5))
        print(f"{name:<27} {sq}   {rq}")


def bench_census_analytic(n_queries: int) -> None:
    """(e) Exact (analytic, data-free) MSE on the census domain by domain-coverage quintile."""
    from fugu.central.privelet import privelet_variance

    dom = census_domain(32, 16, 200)
    w = random_workload(dom, n_queries, n_predicates=(1, 4), seed=0)
    b = w.bounds(dom)
    vol = np.prod(b[:, :, 1] - b[:, :, 0], axis=1) / dom.size
    quint = np.searchsorted(np.quantile(vol, [0.2, 0.4, 0.6, 0.8]), vol, side="right")
    t = time.perf_counter()
    var = predict_errors(dom, b, 1.0)
    var["privelet+ (age,sex plain)"] = privelet_variance(dom, b, 1.0, plain=["age", "sex"])
    dt = time.perf_counter() - t
    print(
        f"\n(e) census domain {dom.shape}, eps = 1, {n_queries:,} random 1-4 predicate queries: "
        f"exact MSE by domain-coverage quintile (1 = smallest), computed without data in {dt:.2f} s"
    )
    print(f"{'mechanism':<27} {'Q1':>9} {'Q2':>9} {'Q3':>9} {'Q4':>9} {'Q5':>9} {'all':>9}")
    for name, v in var.items():
        row = " ".join(f"{v[quint == k].mean():9.3g}" for k in range(5))
        print(f"{name:<27} {row} {v.mean():9.3g}")
    print(f"(privelet+ = plain='auto' -> {fugu.central.choose_plain(dom)} untransformed)")


def bench_bigcube(n_records: int, occ_groups: int, income: int, reps: int) -> None:
    """(g) Issue 16 item 2: Privelet+ and hierarchical on a ~1.6 M-cell 4-D cube, as ratios to
    the histogram build measured in the same process, with a stage breakdown."""
    import importlib

    from fugu.central import wavelets

    hmod = importlib.import_module("fugu.central.hierarchical")
    pmod = importlib.import_module("fugu.central.privelet")

    dom = census_domain(occ_groups, 16, income)
    recs = census_records(n_records, dom)

    def cpu(fn: Callable[[], Any]) -> tuple[Any, float]:
        best, out = float("inf"), None
        for _ in range(reps):
            c = time.process_time()
            out = fn()
            best = min(best, time.process_time() - c)
        return out, best

    hist, c_hist = cpu(lambda: fugu.Histogram.from_records(recs, dom))
    print(
        f"\n(g) 4-D cube {dom.shape} = {dom.size:,} cells from {n_records:,} records, eps = 1; "
        f"CPU seconds, best of {reps} (shared machine)"
    )
    print(f"{'step':<58} {'CPU s':>7} {'x hist':>7}")
    print(f"{'histogram build (encode + bincount)':<58} {c_hist:>7.3f} {1.0:>7.2f}")
    rows: list[tuple[str, Callable[[], Any]]] = [
        ("laplace (one secure sample per cell)", lambda: fugu.central.laplace(hist, 1.0)),
        ("privelet+ plain='auto'", lambda: fugu.central.privelet(hist, 1.0, plain="auto")),
        (
            "privelet+ age, sex plain (occupation, income transformed)",
            lambda: fugu.central.privelet(hist, 1.0, plain=["age", "sex"]),
        ),
        ("privelet (everything transformed)", lambda: fugu.central.privelet(hist, 1.0, plain=None)),
    ]
    hmod._PLAN_CACHE.clear()
    _, c_plan = cpu(lambda: (hmod._PLAN_CACHE.clear(), hmod.plan_trees(dom)))
    rows.append(("hierarchical (plan cached)", lambda: fugu.central.hierarchical(hist, 1.0)))
    for name, fn in rows:
        _, c = cpu(fn)
        print(f"{name:<58} {c:>7.3f} {c / c_hist:>7.2f}")
    print(
        f"{'  hierarchical planning (once per domain; public)':<58} {c_plan:>7.3f} "
        f"{c_plan / c_hist:>7.2f}"
    )
    # stage breakdown (the same internals the releases call)
    src = fugu.RandomSource()
    ts = pmod.privelet_transforms(dom, ["age", "sex"])
    x = hist.counts.astype(np.float64)
    coef, c_fwd = cpu(lambda: np.ascontiguousarray(wavelets.hn_forward(x, ts)))
    w = wavelets.hn_weights(ts)
    sens = pmod.coefficient_sensitivity(ts, "replace")
    mc = pmod._max_changed(ts, 2)
    _, c_noise = cpu(lambda: pmod.noise_coefficients(coef * w, sens, 1.0, src, mc, []))
    _, c_inv = cpu(lambda: wavelets.hn_inverse(wavelets.hn_project(coef, ts), ts))
    print(
        "  privelet+ (age, sex plain) stages: "
        f"forward {c_fwd:.3f}, grid noise {c_noise:.3f}, project+inverse {c_inv:.3f} s"
    )
    trees = hmod.axis_trees(dom)
    layout_fn = lambda: _layout(hist, trees)  # noqa: E731
    lay, c_lay = cpu(layout_fn)
    noisy, c_hn = cpu(lambda: hmod._noise_layout(lay, trees, 1.0, 2, src))
    const, factors, _ = hmod._level_factors(trees, 1.0, 2)

    def ls() -> Any:
        est = noisy
        for ax, t in enumerate(trees):
            if t.h == 0:
                continue
            moved = np.moveaxis(est, ax, -1)
            leaves = hmod.consistent_tree(hmod._split_layout(moved, t), t.b, factors[ax])[-1]
            est = np.moveaxis(leaves, -1, ax)
        return est

    _, c_ls = cpu(ls)
    print(
        f"  hierarchical stages (trees {[(t.b, t.h) for t in trees]}, layout "
        f"{lay.size:,} nodes): layout {c_lay:.3f}, noise {c_hn:.3f}, least squares "
        f"{c_ls:.3f} s"
    )


def _layout(hist: fugu.Histogram, trees: Any) -> Any:
    import importlib

    hmod = importlib.import_module("fugu.central.hierarchical")
    layout = np.asarray(hist.counts, dtype=np.int64)
    for ax, t in enumerate(trees):
        layout = hmod._to_layout(layout, ax, t)
    return layout


def hb_intervals(n: int) -> list[tuple[int, int]]:
    """The internal nodes of H_b (root excluded) as half-open intervals, split the way the
    published plan and Ektelo do it: b parts per node (Qardaji's b for n), a node of length L
    split at ceil(L/b·(i+1)) when b does not divide L, singletons when b > L; leaves are
    measured separately (identity)."""
    b = fugu.central.qardaji_branching(n)
    out: list[tuple[int, int]] = []
    todo = [(0, n)]
    first = True
    while todo:
        lo, hi = todo.pop()
        length = hi - lo
        if not first and length > 1:
            out.append((lo, hi))
        first = False
        if length <= 1:
            continue
        if b >= length:
            continue  # children are single cells: the identity leaves
        if length % b:
            cuts = [0] + [int(np.ceil(length / b * (i + 1))) for i in range(b - 1)] + [length]
        else:
            cuts = [i * (length // b) for i in range(b + 1)]
        todo.extend((lo + c0, lo + c1) for c0, c1 in zip(cuts[:-1], cuts[1:], strict=True))
    return out


def hb_exact_mse(n: int, bounds: Any, epsilon: float = 1.0) -> float:
    """Exact mean squared error of H_b (continuous Laplace, add/remove, unweighted least squares)
    on ranges ``bounds`` (m, 2): Var(wᵀx̂) = σ² wᵀ(I + BBᵀ)⁻¹w by Woodbury, B the node
    indicators (n × K): wᵀw − (Bᵀw)ᵀ(I + BᵀB)⁻¹(Bᵀw)."""
    nodes = np.asarray(hb_intervals(n), dtype=np.int64).reshape(-1, 2)
    depth = np.ones(n)
    for lo, hi in nodes:
        depth[lo:hi] += 1
    sens = float(depth.max())
    sigma2 = 2.0 * (sens / epsilon) ** 2
    lo_n, hi_n = nodes[:, 0], nodes[:, 1]
    gram = np.maximum(
        0, np.minimum(hi_n[:, None], hi_n[None, :]) - np.maximum(lo_n[:, None], lo_n[None, :])
    ).astype(np.float64)
    inv = np.linalg.inv(np.eye(len(nodes)) + gram)
    q_lo, q_hi = bounds[:, 0], bounds[:, 1]
    bw = np.maximum(
        0, np.minimum(hi_n[None, :], q_hi[:, None]) - np.maximum(lo_n[None, :], q_lo[:, None])
    ).astype(np.float64)
    var = (q_hi - q_lo) - np.sum((bw @ inv) * bw, axis=1)
    return float(np.mean(var) * sigma2)


def bench_pidentity(n: int, p: int, iters: int) -> None:
    """(h) Experiment, not a fugu mechanism: the best HDMM-style p-Identity strategy for random
    ranges (McKenna et al., VLDB 2018), A = [I; Θ]·diag(1/(1 + colsum Θ)), Θ ≥ 0 (p × n),
    optimised by L-BFGS on the exact expected error 2/ε²·tr(G (AᵀA)⁻¹) with G = E[w wᵀ] for
    random_workload's ranges (add/remove, continuous Laplace, sensitivity 1). Dense: n ≤ ~2,048.
    """
    from scipy.optimize import minimize

    i = np.arange(n)
    lo, hi = np.minimum.outer(i, i), np.maximum.outer(i, i)
    gram = 2.0 * (lo + 1) * (n - hi) / n**2
    np.fill_diagonal(gram, 1 - (i**2 + (n - 1 - i) ** 2) / n**2)

    def objective(x: Any) -> tuple[float, Any]:
        theta = x.reshape(p, n)
        u = 1 + theta.sum(0)
        m_inv = np.linalg.inv(np.eye(n) + theta.T @ theta)
        h = gram * np.outer(u, u)
        k = m_inv @ h @ m_inv
        grad = -2 * theta @ k + (2 * ((gram * m_inv) @ u))[None, :]
        return float(np.sum(h * m_inv)), grad.ravel()

    t = time.process_time()
    x0 = np.random.default_rng(0).uniform(0, 1, p * n)
    res = minimize(
        objective,
        x0,
        jac=True,
        method="L-BFGS-B",
        bounds=[(0, None)] * (p * n),
        options={"maxiter": iters},
    )
    hb = float(np.sqrt(hb_exact_mse(n, _all_pairs_sample(n))))
    opt = float(np.sqrt(2 * res.fun))
    print(
        f"\n(h) p-Identity experiment, {n} cells, p = {p}: expected RMSE {opt:.2f} vs H_b "
        f"{hb:.2f} (sampled exact) -> {opt / hb:.3f}x; {time.process_time() - t:.0f} s CPU"
    )


def _all_pairs_sample(n: int) -> Any:
    """4,000 random_workload-style ranges (for H_b's exact error by Woodbury)."""
    rng = np.random.default_rng(5)
    a = rng.integers(0, n, size=(4000, 2))
    return np.stack([a.min(1), a.max(1) + 1], axis=1)


PEER_PY = "/work/peers-venv/bin/python"
EKTELO_SRC = "/work/peers-src/ektelo-repo"

_EKTELO_SCRIPT = r"""
import sys, numpy as np
from ektelo.client import selection, inference
from ektelo.private import measurement
# numpy >= 2 no longer dispatches np.abs to Ektelo's matrix class; same formula via abs()
measurement.Laplace.sensitivity_L1 = staticmethod(lambda A: float(abs(A).sum(axis=0).max()))
d = np.load(sys.argv[1])
x, bounds, truth, reps = d["x"].astype(float), d["bounds"], d["truth"], int(d["reps"])
M = selection.HB(x.shape).select()
sens = measurement.Laplace.sensitivity_L1(M)
mse = []
for r in range(reps):
    y = measurement.Laplace(M, 1.0).measure(x, np.random.RandomState(1000 + 7919 * x.size + r))
    # an Identity plan (one level, e.g. 74 cells) is its own least-squares solution; scipy >= 1.15
    # rejects Ektelo's Identity dtype, so skip the solver there
    xh = y if type(M).__name__ == "Identity" else inference.LeastSquares().infer(M, y)
    ps = np.concatenate([[0.0], np.cumsum(xh)])
    ans = ps[bounds[:, 1]] - ps[bounds[:, 0]]
    mse.append(float(np.mean((ans - truth) ** 2)))
print(sens, np.mean(mse), np.std(mse) / np.sqrt(reps))
"""


def _run_ektelo(script: str, what: str, **arrays: Any) -> list[float] | None:
    """Run ``script`` (reading one .npz of ``arrays``) in the peers venv with Ektelo on the path;
    the numbers it prints, or None when the peer is absent or the run fails."""
    import os
    import subprocess
    import tempfile

    if not (os.path.exists(PEER_PY) and os.path.isdir(EKTELO_SRC)):
        return None
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "in.npz")
        np.savez(path, **arrays)
        env = dict(os.environ, PYTHONPATH=EKTELO_SRC, OMP_NUM_THREADS="1")
        try:
            out = subprocess.run(
                [PEER_PY, "-c", script, path],
                capture_output=True,
                text=True,
                env=env,
                timeout=1800,
                check=True,
            ).stdout.split()
        except (subprocess.SubprocessError, OSError) as exc:
            print(f"  (Ektelo {what} run failed: {exc})")
            return None
    return [float(v) for v in out]


def _ektelo_hb(x: Any, bounds: Any, truth: Any, reps: int) -> tuple[float, float, float] | None:
    """Run Ektelo's H_b plan in the peers venv; (sensitivity, MSE, SE of the MSE) or None."""
    out = _run_ektelo(_EKTELO_SCRIPT, "1-D", x=x, bounds=bounds, truth=truth, reps=reps)
    return None if out is None else (out[0], out[1], out[2])


def bench_hb(sizes: list[int], reps: int, n_queries: int) -> None:
    """(f) fugu's hierarchical plan vs Ektelo's H_b vs Laplace: RMSE on random 1-D ranges."""
    from fugu.central.hierarchical import hierarchical_variance

    print(
        f"\n(f) random 1-D ranges ({n_queries:,} per size), eps = 1, add/remove neighbours; "
        f"measured RMSE over {reps} releases (+- its standard error) and fugu's exact "
        f"predicted RMSE"
    )
    header = (
        f"{'cells':>7} {'tree plan':<20} {'tree pred':>9} {'hat plan':<18} {'hat pred':>8} "
        f"{'hat meas':>14} {'H_b (Ektelo)':>14} {'H_b exact':>9} {'Laplace':>8} "
        f"{'tree/H_b':>8} {'hat/H_b':>8} {'best/H_b':>8} {'best/Lap':>8} {'hat s':>6}"
    )
    print(header)
    print("-" * len(header))
    cases: list[tuple[str, fugu.Histogram]] = [
        (str(n), one_d_data(200_000, n, seed=n)) for n in sizes
    ]
    cases.append(("adult age", adult_histogram(["age"])))
    for label, hist in cases:
        dom = hist.domain
        w = random_workload(dom, n_queries, seed=1)
        b = w.bounds(dom)
        truth = w.answer(hist.counts, dom)
        rel = fugu.central.hierarchical(
            hist, 1.0, neighbours="add-remove", rng=fugu.RandomSource(seed=0)
        )
        t = rel.trees[0]
        plan = f"b={t.b} h={t.h} {rel.guarantee.parameters['plan']['choice']}"
        pred = float(np.sqrt(np.mean(rel.expected_variance_many(b))))
        # the hat tree: plan once (cached, public), then timed releases + answers
        fugu.central.hattree.plan_hat_tree(dom.size, neighbours="add-remove")
        mse, times = [], []
        hrel = None
        for r in range(reps):
            t0 = time.perf_counter()
            hrel = fugu.central.hat_tree(
                hist, 1.0, neighbours="add-remove", rng=fugu.RandomSource(seed=r)
            )
            ans = hrel.answer_many(w)
            times.append(time.perf_counter() - t0)
            mse.append(np.mean((ans - truth) ** 2))
        assert hrel is not None
        hp = hrel.plan
        if hp.graded:
            hplan = f"p={len(hp.rows or ())} rows graded"
        else:
            hplan = f"b={hp.fanout} L={len(hp.strides) - 1} {hp.choice}"
        hpred = float(np.sqrt(np.mean(hrel.expected_variance_many(b))))
        hmeas = float(np.sqrt(np.mean(mse)))
        hmeas_se = float(np.std(mse) / np.sqrt(reps) / (2 * hmeas))
        # H_b's exact error: the published plan with continuous Laplace noise (Ektelo's)
        hb_exact = float(np.sqrt(hb_exact_mse(dom.size, b[:, 0, :])))
        ek = _ektelo_hb(hist.counts, b[:, 0, :], truth, reps)
        if ek is None:
            hb = float(
                np.sqrt(
                    np.mean(
                        hierarchical_variance(
                            dom, b, 1.0, budget="uniform", neighbours="add-remove"
                        )
                    )
                )
            )
            hb_txt = f"{hb:>8.2f} (fugu)"
        else:
            hb = float(np.sqrt(ek[1]))
            hb_txt = f"{hb:>7.2f}+-{ek[2] / (2 * hb):<5.2f}"
        lap_f = float(
            np.sqrt(
                np.mean(b[:, 0, 1] - b[:, 0, 0]) * float(fugu.noise.discrete_laplace_variance(1.0))
            )
        )
        best = min(pred, hpred, lap_f)
        ref = hb_exact
        print(
            f"{label:>7} {plan:<20} {pred:>9.2f} {hplan:<18} {hpred:>8.2f} "
            f"{hmeas:>7.2f}+-{hmeas_se:<5.2f} {hb_txt:>14} {hb_exact:>9.2f} {lap_f:>8.2f} "
            f"{pred / ref:>8.3f} {hpred / ref:>8.3f} {best / ref:>8.3f} {best / lap_f:>8.3f} "
            f"{np.median(times):>6.2f}"
        )
    print(
        "(x/H_b = fugu's exact prediction / H_b's exact error (Ektelo's tree, continuous "
        "Laplace, Woodbury) on the same queries; the measured columns check both. best = the "
        "lower of fugu's two exact predictions (and Laplace's). hat s = one hat-tree release "
        "plus the answers, median seconds (plan cached). Laplace: fugu's discrete Laplace.)"
    )


def _hb_split(length: int, b: int) -> list[tuple[int, int]]:
    """Ektelo's ``grid_split_range`` along one axis: b parts (cut at ceil(L/b·(i+1)) when b does
    not divide L), singletons when b > L; half-open, relative to the node's start."""
    if b > length:
        return [(i, i + 1) for i in range(length)]
    if length % b:
        cuts = [0] + [int(np.ceil(length / b * (i + 1))) for i in range(b - 1)] + [length]
    else:
        cuts = [i * (length // b) for i in range(b + 1)]
    return list(zip(cuts[:-1], cuts[1:], strict=True))


def hb_nd_nodes(shape: tuple[int, ...]) -> tuple[Any, int]:
    """H_b's internal nodes on a d-D grid as Ektelo builds them (``selection.HB``): one b from
    N = the number of cells (Qardaji's rule), every node split b ways along every axis (a grid),
    the root not measured, nodes of one cell left to the identity leaves. Returns the nodes as
    half-open boxes (K, d, 2) and the L1 sensitivity (the deepest cell's number of nodes + 1)."""
    b = fugu.central.qardaji_branching(int(np.prod(shape)))
    import itertools

    out: list[Any] = []
    todo = [tuple((0, n) for n in shape)]
    first = True
    while todo:
        box = todo.pop()
        area = int(np.prod([hi - lo for lo, hi in box]))
        if area <= 1:
            continue
        if not first:
            out.append(box)
        first = False
        splits = [[(lo + a, lo + c) for a, c in _hb_split(hi - lo, b)] for lo, hi in box]
        todo.extend(tuple(ch) for ch in itertools.product(*splits))
    nodes = np.asarray(out, dtype=np.int64).reshape(-1, len(shape), 2)
    depth = np.ones(shape, dtype=np.int64)
    for box in nodes:
        depth[tuple(slice(lo, hi) for lo, hi in box)] += 1
    return nodes, int(depth.max())


def _box_overlap(a: Any, c: Any) -> Any:
    """Cells shared by every box of ``a`` (m, d, 2) and every box of ``c`` (K, d, 2): (m, K)."""
    out = np.ones((a.shape[0], c.shape[0]))
    for ax in range(a.shape[1]):
        lo = np.maximum(a[:, None, ax, 0], c[None, :, ax, 0])
        hi = np.minimum(a[:, None, ax, 1], c[None, :, ax, 1])
        out *= np.maximum(0, hi - lo)
    return out


def hb_nd_exact_var(shape: tuple[int, ...], bounds: Any, epsilon: float = 1.0) -> Any:
    """Exact variance of every box query (bounds (m, d, 2)) under H_b on a d-D grid as Ektelo
    runs it (continuous Laplace of scale sensitivity/ε on every node and cell, add/remove,
    unweighted least squares): σ²·wᵀ(I + BBᵀ)⁻¹w = σ²(|q| − (Bᵀw)ᵀ(I + BᵀB)⁻¹(Bᵀw)) by Woodbury,
    B the node indicators. Dense in the number of nodes K (fine up to a few thousand)."""
    nodes, sens = hb_nd_nodes(shape)
    sigma2 = 2.0 * (sens / epsilon) ** 2
    area = np.prod(bounds[:, :, 1] - bounds[:, :, 0], axis=1).astype(np.float64)
    if nodes.shape[0] == 0:
        return sigma2 * area
    inv = np.linalg.inv(np.eye(nodes.shape[0]) + _box_overlap(nodes, nodes))
    out = np.empty(bounds.shape[0])
    for i in range(0, bounds.shape[0], 500):
        bw = _box_overlap(bounds[i : i + 500], nodes)
        out[i : i + 500] = area[i : i + 500] - np.sum((bw @ inv) * bw, axis=1)
    return sigma2 * out


def hb_nd_regular_var(shape: tuple[int, ...], bounds: Any, epsilon: float = 1.0) -> Any | None:
    """H_b's exact variance on a grid whose every split is even (all boxes of a level alike), in
    O(levels) per query: a regular tree (B_k children per depth-k box, L_k cells under it), equal
    node variances σ², root unmeasured; least squares gives (as ``range_variance``, with per-level
    fan-outs) Var = g_h|R| + Σ_k (g_k − g_{k+1})·S_k/L_k, S_k = Σ_boxes |box ∩ R|², which is the
    product over the axes of the 1-D sums. None when some split is uneven (use Woodbury)."""
    b = fugu.central.qardaji_branching(int(np.prod(shape)))
    sizes = []  # per axis: the box side at every depth
    for n in shape:
        side = [n]
        while side[-1] > 1:
            s = side[-1]
            if b >= s:
                side.append(1)
            elif s % b:
                return None
            else:
                side.append(s // b)
        sizes.append(side)
    h = max(len(x) for x in sizes) - 1
    sizes = [x + [1] * (h + 1 - len(x)) for x in sizes]
    lo, hi = bounds[:, :, 0].astype(np.int64), bounds[:, :, 1].astype(np.int64)
    s_k = np.ones((bounds.shape[0], h + 1))
    for ax in range(len(shape)):
        for k in range(h + 1):
            w = sizes[ax][k]
            a, c = lo[:, ax] // w, (hi[:, ax] - 1) // w
            left = ((a + 1) * w - lo[:, ax]).astype(float)
            right = (hi[:, ax] - c * w).astype(float)
            full = np.maximum(c - a - 1, 0).astype(float)
            length = (hi[:, ax] - lo[:, ax]).astype(float)
            s_k[:, k] *= np.where(a == c, length**2, left**2 + right**2 + full * float(w) ** 2)
    leaves = [float(np.prod([sizes[ax][k] for ax in range(len(shape))])) for k in range(h + 1)]
    fan = [leaves[k] / leaves[k + 1] for k in range(h)]
    v = [np.inf] + [1.0] * h
    g = [0.0] * (h + 1)
    g[h] = big = 1.0
    for k in range(h - 1, -1, -1):
        u = fan[k] * big
        r = 1.0 if not np.isfinite(v[k]) else v[k] / (v[k] + u)
        big = r * u
        g[k] = r * g[k + 1]
    var = g[h] * s_k[:, h]
    for k in range(h):
        var = var + (g[k] - g[k + 1]) * s_k[:, k] / leaves[k]
    return 2.0 * (h / epsilon) ** 2 * var


_EKTELO_ND_SCRIPT = r"""
import sys, numpy as np
from ektelo.client import selection, inference
from ektelo.private import measurement
measurement.Laplace.sensitivity_L1 = staticmethod(lambda A: float(abs(A).sum(axis=0).max()))
d = np.load(sys.argv[1])
x, bounds, truth, reps = d["x"].astype(float), d["bounds"], d["truth"], int(d["reps"])
shape = x.shape
M = selection.HB(shape).select()
sens = measurement.Laplace.sensitivity_L1(M)
xf = x.ravel()
# the query rows (C order, as Ektelo flattens the domain)
idx = np.arange(xf.size).reshape(shape)
def rows(b):
    w = np.zeros((b.shape[0], xf.size))
    for i, q in enumerate(b):
        w[i, idx[tuple(slice(lo, hi) for lo, hi in q)].ravel()] = 1.0
    return w
exact = float("nan")
if int(d["exact"]):
    # Ektelo's own strategy matrix: exact variance sigma^2 w^T (M^T M)^-1 w
    A = M.dense_matrix() if hasattr(M, "dense_matrix") else np.asarray(M.sparse_matrix().todense())
    A = np.asarray(A, dtype=float)
    W = rows(bounds)
    sol = np.linalg.solve(A.T @ A, W.T)
    exact = float(np.mean(np.sum(W.T * sol, axis=0)) * 2 * sens**2)
mse = []
W = None
for r in range(reps):
    y = measurement.Laplace(M, 1.0).measure(xf, np.random.RandomState(1000 + 7919 * xf.size + r))
    xh = y if type(M).__name__ == "Identity" else inference.LeastSquares().infer(M, y)
    c = np.asarray(xh, dtype=float).reshape(shape)
    ps = np.zeros(tuple(n + 1 for n in shape))
    ps[tuple(slice(1, None) for _ in shape)] = c.cumsum(0).cumsum(1)
    lo, hi = bounds[:, :, 0], bounds[:, :, 1]
    ans = (ps[hi[:, 0], hi[:, 1]] - ps[lo[:, 0], hi[:, 1]]
           - ps[hi[:, 0], lo[:, 1]] + ps[lo[:, 0], lo[:, 1]])
    mse.append(float(np.mean((ans - truth) ** 2)))
print(sens, exact, np.mean(mse) if mse else float("nan"),
      np.std(mse) / np.sqrt(reps) if mse else float("nan"))
"""


def _ektelo_hb_nd(
    x: Any, bounds: Any, truth: Any, reps: int, exact: bool
) -> tuple[float, float, float, float] | None:
    """Ektelo's H_b on a 2-D grid in the peers venv: (sensitivity, exact MSE from its strategy
    matrix (nan unless ``exact``), measured MSE over ``reps`` releases, its SE) or None."""
    out = _run_ektelo(
        _EKTELO_ND_SCRIPT, "2-D", x=x, bounds=bounds, truth=truth, reps=reps, exact=int(exact)
    )
    return None if out is None else (out[0], out[1], out[2], out[3])


def bench_hb2d(shapes: list[tuple[int, int]], n_queries: int, reps: int, ektelo_max: int) -> None:
    """(i) Cubes: fugu's hierarchical (product of trees or Kronecker product of per-axis plans,
    whichever has the lower exact expected error) vs Ektelo's H_b on 2-D grids (one b from the
    number of cells, b × b grid splits, no root, least squares) vs fugu's Laplace. Random
    rectangles (uniform intervals on both axes), ε = 1. Exact expected RMSE throughout: fugu's
    from its closed forms (``hierarchical_variance``), H_b's by Woodbury on its node boxes
    (``hb_nd_exact_var``, checked against Ektelo's own strategy matrix up to ``ektelo_max``
    cells, where Ektelo's measured RMSE over ``reps`` releases is printed too) or, on grids
    whose splits are all even, by the regular-tree closed form (``hb_nd_regular_var``, equal to
    Woodbury to 1e-14 where both run)."""
    from fugu.central.hierarchical import hierarchical_variance, plan_cube

    print(
        f"\n(i) 2-D cubes: {n_queries:,} random rectangles, eps = 1; exact expected RMSE. "
        f"add/remove unless marked 'replace' (fugu's default: the public total is used, the "
        f"sensitivity doubles); H_b is Ektelo's (add/remove, continuous Laplace) in every ratio"
    )
    header = (
        f"{'shape':>9} {'fugu structure (add/remove)':<30} {'fugu':>7} {'H_b':>7} {'Laplace':>7} "
        f"{'fugu/H_b':>8} {'fugu/Lap':>8} | {'fugu repl':>9} {'Lap repl':>8} {'repl/H_b':>8} "
        f"{'repl/Lap':>8} | {'Ektelo exact':>12} {'Ektelo meas':>14} {'fugu meas':>13} "
        f"{'plan s':>6}"
    )
    print(header)
    print("-" * len(header))
    for shape in shapes:
        dom = fugu.Domain([fugu.Ordinal("a", 0, shape[0] - 1), fugu.Ordinal("b", 0, shape[1] - 1)])
        w = random_workload(dom, n_queries, seed=1)
        b = w.bounds(dom)
        area = float(np.mean(np.prod(b[:, :, 1] - b[:, :, 0], axis=1)))
        t0 = time.process_time()
        _, info, dense = plan_cube(dom, neighbours="add-remove")
        plan_cube(dom, neighbours="replace")
        t_plan = time.process_time() - t0
        if dense is None:
            struct = "trees " + "x".join(
                f"b{t.b}h{t.h}" for t in plan_cube(dom, neighbours="add-remove")[0]
            )
        else:
            struct = "kron " + " x ".join(
                f"{d.kind}" + (f"+{dict(d.info).get('rows')}" if d.kind == "graded" else "")
                for d in dense
            )
        f_ar = float(np.sqrt(np.mean(hierarchical_variance(dom, b, 1.0, neighbours="add-remove"))))
        f_rp = float(np.sqrt(np.mean(hierarchical_variance(dom, b, 1.0, neighbours="replace"))))
        hb_var = hb_nd_regular_var(shape, b)  # even splits: O(levels) per query
        if hb_var is None:
            hb_var = hb_nd_exact_var(shape, b)  # Woodbury on the boxes
        hb = float(np.sqrt(np.mean(hb_var)))
        lap_ar = float(np.sqrt(area * float(fugu.noise.discrete_laplace_variance(1.0))))
        lap_rp = float(np.sqrt(area * float(fugu.noise.discrete_laplace_variance(2.0))))
        ek_txt, meas_txt = f"{'-':>12} {'-':>14}", f"{'-':>13}"
        if dom.size <= ektelo_max and reps > 0:
            rng = np.random.default_rng(dom.size)
            centre = rng.uniform(0, 1, size=(4, 2)) * np.array(shape)
            pts = centre[rng.integers(0, 4, size=100_000)] + rng.normal(
                0, np.array(shape) / 10, size=(100_000, 2)
            )
            pts = np.clip(np.rint(pts), 0, np.array(shape) - 1).astype(np.int64)
            x = np.zeros(shape, dtype=np.int64)
            np.add.at(x, (pts[:, 0], pts[:, 1]), 1)
            truth = w.answer(x, dom)
            ek = _ektelo_hb_nd(x, b, truth, reps, exact=True)
            if ek is not None:
                ek_txt = (
                    f"{np.sqrt(ek[1]):>12.2f} "
                    f"{np.sqrt(ek[2]):>8.2f}+-{ek[3] / (2 * np.sqrt(ek[2])):<4.2f}"
                )
            hist = fugu.Histogram(x, dom)
            mse = [
                np.mean(
                    (
                        fugu.central.hierarchical(
                            hist, 1.0, neighbours="add-remove", rng=fugu.RandomSource(seed=r)
                        ).answer_many(w)
                        - truth
                    )
                    ** 2
                )
                for r in range(reps)
            ]
            m = float(np.sqrt(np.mean(mse)))
            meas_txt = f"{m:>7.2f}+-{np.std(mse) / np.sqrt(reps) / (2 * m):<4.2f}"
        label = f"{shape[0]}x{shape[1]}"
        print(
            f"{label:>9} {struct:<30} {f_ar:>7.2f} {hb:>7.2f} {lap_ar:>7.2f} {f_ar / hb:>8.3f} "
            f"{f_ar / lap_ar:>8.3f} | {f_rp:>9.2f} {lap_rp:>8.2f} {f_rp / hb:>8.3f} "
            f"{f_rp / lap_rp:>8.3f} | {ek_txt} {meas_txt} {t_plan:>6.1f}"
        )
    print(
        "(H_b = Qardaji et al.'s b for the number of cells, b x b grid splits, no root, identity "
        "leaves, continuous Laplace of scale depth/eps, least squares, exact by Woodbury; "
        "'Ektelo exact' is the same from Ektelo's own strategy matrix, 'Ektelo meas' and 'fugu "
        "meas' the RMSE of releases on clustered synthetic data (+- SE). fugu's 'trees' rows use "
        "the 2*scale^2 model (an upper bound); its Kronecker rows are exact. Laplace: fugu's "
        "discrete Laplace. plan s: CPU seconds to plan both neighbour relations (cached).)"
    )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="smaller sizes (CI smoke run)")
    ap.add_argument(
        "--only",
        choices=["1d", "census", "adult", "analytic", "hb", "hb2d", "bigcube", "pidentity"],
        help="run one part only",
    )
    args = ap.parse_args()
    part = args.only
    if args.quick:
        if part in (None, "1d"):
            bench_1d(100_000, 4096, 2000, [0.1, 1.0], reps=2)
        if part in (None, "adult"):
            bench_adult(reps=2, n_queries=500)
        if part in (None, "analytic"):
            bench_census_analytic(500)
        if part in (None, "census"):
            bench_census(300_000, 8, 8, 50)
        if part in (None, "hb"):
            bench_hb([256, 1024, 4096], reps=4, n_queries=1000)
        if part in (None, "bigcube"):
            bench_bigcube(200_000, 2, 16, reps=1)
        if part == "pidentity":
            bench_pidentity(128, 8, 300)
        if part == "hb2d":
            bench_hb2d([(16, 16), (32, 32), (64, 64), (74, 16)], 500, 3, 1200)
    else:
        if part in (None, "1d"):
            bench_1d(1_000_000, 4096, 10_000, [0.1, 0.25, 0.5, 1.0, 2.0], reps=5)
        if part in (None, "adult"):
            bench_adult(reps=5, n_queries=2000)
        if part in (None, "analytic"):
            bench_census_analytic(2000)
        if part in (None, "census"):
            bench_census(10_000_000, 32, 16, 200)
        if part in (None, "hb"):
            bench_hb([256, 1024, 4096, 16384, 65536], reps=20, n_queries=2000)
        if part in (None, "bigcube"):
            bench_bigcube(2_000_000, 8, 64, reps=3)
        if part == "pidentity":  # minutes of CPU: only on request
            bench_pidentity(256, 16, 1500)
        if part == "hb2d":  # about 3 minutes of CPU (planning); only on request
            shapes = [(16, 16), (32, 32), (64, 64), (128, 128), (256, 256), (512, 512)]
            shapes += [(1024, 1024)]
            shapes += [(74, 16), (100, 40)]
            bench_hb2d(shapes, 2000, 10, 4096)


if __name__ == "__main__":
    main()
