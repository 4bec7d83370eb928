"""Blowfish benchmarks: release time on |T| = 2^20 and range-query accuracy vs θ.

Run ``python bench/bench_blowfish.py`` (``--quick`` for a smaller run). Prints

1. time of the Ordered and Ordered Hierarchical (OH) releases on a domain of 2^20 values, as a
   ratio to the central hierarchical mechanism (``fugu.central.hierarchical``) and to a numpy
   bincount of the same data, all in this process;
2. the Ordered Mechanism's range-query MSE under the line graph against its analytic value
   (2 · 2p/(1−p)², p = e^−ε ≈ 4/ε²) for several |T|;
3. range-query MSE vs θ for Ordered, OH and Hierarchical (the paper's Figure 2) on Adult age,
   Adult hours-per-week and a 400 × 300 location grid (bokeh_sampledata's world cities when
   installed, otherwise a seeded generator), flattened to an ordered domain of 120,000 values.
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable
from functools import partial

import numpy as np

import fugu
from fugu.blowfish import Policy, ordered, ordered_hierarchical
from fugu.central import hierarchical
from fugu.datasets import adult_histogram


def timed(fn: Callable[[], object], repeat: int) -> float:
    best = float("inf")
    for _ in range(repeat):
        t = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - t)
    return best


def bench_time(quick: bool) -> None:
    k = 2**20
    g = np.random.default_rng(0)
    n = 1_000_000
    x = np.clip(g.normal(k / 2, k / 8, n).astype(np.int64), 0, k - 1)
    dom = fugu.Domain([fugu.Ordinal("x", 0, k - 1)])
    hist = fugu.Histogram(np.bincount(x, minlength=k), dom)
    rep = 1 if quick else 3
    rng = fugu.RandomSource()
    t_count = timed(lambda: np.bincount(x, minlength=k), rep)
    t_hier = timed(lambda: hierarchical(hist, 1.0, rng=rng), rep)
    rows = [
        ("numpy bincount of the records (baseline)", t_count),
        ("hierarchical (central, Hay)", t_hier),
    ]
    rows.append(
        ("ordered, line", timed(lambda: ordered(hist, 1.0, Policy.line(dom), rng=rng), rep))
    )
    rows.append(
        (
            "ordered + isotonic, line",
            timed(lambda: ordered(hist, 1.0, Policy.line(dom), inference=True, rng=rng), rep),
        )
    )
    for theta in (16, 256):
        pol = Policy.distance_threshold(dom, theta)
        rows.append(
            (
                f"OH θ={theta} (least squares)",
                timed(partial(ordered_hierarchical, hist, 1.0, pol, rng=rng), rep),
            )
        )
        rows.append(
            (
                f"OH θ={theta} (no consistency)",
                timed(
                    partial(ordered_hierarchical, hist, 1.0, pol, consistency=False, rng=rng), rep
                ),
            )
        )
    print(f"\n1. Release time, |T| = 2^20 = {k:,} values, n = {n:,} records (best of {rep})")
    print(f"{'mechanism':40s} {'seconds':>9s} {'÷ hierarchical':>15s} {'÷ bincount':>11s}")
    for name, t in rows:
        print(f"{name:40s} {t:9.3f} {t / t_hier:15.2f} {t / t_count:11.1f}")


def workload_mse(rel: fugu.Release, w: fugu.Workload, truth: np.ndarray) -> float:
    return float(np.mean((rel.answer_many(w) - truth) ** 2))


def bench_line(quick: bool) -> None:
    print("\n2. Ordered Mechanism, line graph, ε = 1: range MSE vs analytic 2·2p/(1−p)², p = e^-1")
    p = np.exp(-1.0)
    analytic = 4 * p / (1 - p) ** 2
    runs = 5 if quick else 20
    print(f"{'|T|':>10s} {'MSE':>8s} {'analytic':>9s} {'ratio':>6s}")
    for k in (100, 10_000, 1_000_000):
        dom = fugu.Domain([fugu.Ordinal("x", 0, k - 1)])
        g = np.random.default_rng(1)
        hist = fugu.Histogram(np.bincount(g.integers(0, k, 50_000), minlength=k), dom)
        w = fugu.random_workload(dom, 2000, seed=2)
        truth = w.answer(hist.counts, dom)
        mse = np.mean(
            [
                workload_mse(
                    ordered(hist, 1.0, Policy.line(dom), rng=fugu.RandomSource(seed=s)), w, truth
                )
                for s in range(runs)
            ]
        )
        print(f"{k:10,d} {mse:8.3f} {analytic:9.3f} {mse / analytic:6.3f}")


def location_counts() -> tuple[np.ndarray, str]:
    try:
        from bokeh_sampledata.world_cities import data  # optional, bench only

        lat = np.asarray(data["lat"], dtype=float)
        lng = np.asarray(data["lng"], dtype=float)
        iy = np.clip(((lat + 90) / 180 * 300).astype(int), 0, 299)
        ix = np.clip(((lng + 180) / 360 * 400).astype(int), 0, 399)
        src = f"bokeh_sampledata world_cities ({lat.size:,} cities)"
    except ImportError:  # pragma: no cover - depends on the machine
        g = np.random.default_rng(7)
        centres = g.uniform([0, 0], [400, 300], size=(40, 2))
        pts = centres[g.integers(0, 40, 50_000)] + g.normal(0, 6, (50_000, 2))
        ix = np.clip(pts[:, 0].astype(int), 0, 399)
        iy = np.clip(pts[:, 1].astype(int), 0, 299)
        src = "seeded generator (40 clusters, 50,000 points)"
    return np.bincount(ix * 300 + iy, minlength=120_000), src


def bench_theta(quick: bool) -> None:
    runs = 3 if quick else 10
    sets = []
    for attr in ("age", "hours_per_week"):
        h = adult_histogram([attr])
        sets.append(
            (
                f"Adult {attr} (|T| = {h.domain.size}, n = {h.total():,})",
                h,
                [1, 2, 4, 8, 16, 32, 64],
            )
        )
    counts, src = location_counts()
    lon = counts.reshape(400, 300).sum(axis=1)
    lon_dom = fugu.Domain([fugu.Ordinal("lon_cell", 0, 399)])
    lon_ths = [1, 2, 4, 8, 16, 32, 64, 128, 256]
    sets.append(
        (
            f"location grid, longitude marginal (|T| = 400), {src}",
            fugu.Histogram(lon, lon_dom),
            lon_ths,
        )
    )
    dom = fugu.Domain([fugu.Ordinal("cell", 0, counts.size - 1)])
    thetas = [1, 4, 16, 64, 256, 1024, 4096, 16384] if not quick else [1, 16, 256, 4096]
    sets.append(
        (
            f"location 400×300 grid flattened (|T| = 120,000), {src}",
            fugu.Histogram(counts, dom),
            thetas,
        )
    )
    print(f"\n3. Range-query MSE vs θ (ε = 1, 2000 random ranges, {runs} runs; paper's Figure 2)")
    for name, hist, ths in sets:
        print(f"\n{name}")
        theta_table(hist, ths, runs)


def seeded(
    mech: Callable[..., fugu.Release], hist: fugu.Histogram, pol: Policy, base: int, **kw: object
) -> Callable[[int], fugu.Release]:
    def make(s: int) -> fugu.Release:
        return mech(hist, 1.0, pol, rng=fugu.RandomSource(seed=base + s), **kw)

    return make


def theta_table(hist: fugu.Histogram, ths: list[int], runs: int) -> None:
    dom = hist.domain
    w = fugu.random_workload(dom, 2000, seed=3)
    truth = w.answer(hist.counts, dom)

    def mse_of(make: Callable[[int], fugu.Release]) -> float:
        return float(np.mean([workload_mse(make(s), w, truth) for s in range(runs)]))

    hier = mse_of(lambda s: hierarchical(hist, 1.0, rng=fugu.RandomSource(seed=s)))
    print(f"  hierarchical (central DP, Hay + Qardaji branching): MSE {hier:,.1f}")
    head = ["θ", "Ordered", "Ordered+iso", "OH", "OH struct", "best"]
    print("  " + " ".join(f"{h:>12s}" for h in head))
    for th in ths:
        if th >= dom.size:
            continue
        pol = Policy.distance_threshold(dom, th)
        o = mse_of(seeded(ordered, hist, pol, 100))
        oi = mse_of(seeded(ordered, hist, pol, 100, inference=True))
        st = ordered_hierarchical(hist, 1.0, pol, rng=fugu.RandomSource(seed=0)).structure
        oh = mse_of(seeded(ordered_hierarchical, hist, pol, 200))
        cands = [("Ordered", o), ("Ordered+iso", oi), ("OH", oh), ("Hier", hier)]
        best = min(cands, key=lambda t: t[1])[0]
        cells = [
            f"{th:d}",
            f"{o:,.1f}",
            f"{oi:,.1f}",
            f"{oh:,.1f}",
            f"f={st.fanout},h={st.height}",
            best,
        ]
        print("  " + " ".join(f"{c:>12s}" for c in cells))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--quick", action="store_true")
    args = ap.parse_args()
    bench_time(args.quick)
    bench_line(args.quick)
    bench_theta(args.quick)


if __name__ == "__main__":
    main()
