"""Benchmarks of fugu.ldp: OLH aggregation, client throughput, MAE of the range-query methods.

    python bench/bench_ldp.py            # full size (n = 10^6; a few minutes on 2 cores)
    python bench/bench_ldp.py --quick    # n = 10^5
    python bench/bench_ldp.py --part aggregation|clients|mae

Prints what it measured and ratios against baselines run in the same process:
* OLH support counting (10^6 users, c = 4,096): numpy path, numba fast path, a Python loop
  calling python-xxhash per (user, value) (extrapolated from a sample), and a GRR bincount.
* Client perturbation (10^7 users): GRR, OLH (c = 4,096), SW, against an *insecure* numpy
  Generator doing the same GRR draws (the price of the CSPRNG and exact Bernoulli draws).
* MAE of HIO, LHIO, CALM, MSW, Uni (and TDG, HDG) on seeded correlated Gaussian data
  (n = 10^6, d = 6, c = 64, ρ = 0.5), λ ∈ {2, 4}, ω = 0.5, ε ∈ {0.5, 1, 2}.
"""

from __future__ import annotations

import argparse
import math
import time

import numpy as np

import fugu
from fugu.ldp import _fast
from fugu.ldp.oracles import grr_perturb, grr_support, olh_g, olh_perturb, olh_support
from fugu.ldp.square_wave import sw_perturb

_CPU: list[float] = []


def _t(fn, *a, **k):
    """Run fn; return (result, wall seconds); the CPU seconds go to _CPU[-1]."""
    t, c = time.perf_counter(), time.process_time()
    out = fn(*a, **k)
    _CPU.append(time.process_time() - c)
    return out, time.perf_counter() - t


def bench_aggregation(n: int, c: int = 4096) -> None:
    print(f"\n## OLH aggregation: {n:,} users, c = {c:,}, epsilon = 1 (g = {olh_g(1.0)})")
    rng = fugu.RandomSource(seed=1)
    vals = rng.integers(c, n)
    g = olh_g(1.0)
    seeds, y = olh_perturb(vals, g, 1.0, rng)
    _, t_grr = _t(grr_support, grr_perturb(vals, c, 1.0, rng), c)
    rows = [("GRR bincount (baseline: no hashing)", t_grr, _CPU[-1])]
    if _fast.numba_available():
        olh_support(seeds[:1000], y[:1000], c, g, backend="numba")  # compile / load cache
        fast, t_fast = _t(olh_support, seeds, y, c, g, backend="numba")
        rows.append(("OLH numba fast path", t_fast, _CPU[-1]))
    else:
        fast, t_fast = None, float("nan")
        print("numba not installed: no fast path")
    m = max(1, n // 10) if n >= 10**6 else n
    ref, t_np = _t(olh_support, seeds[:m], y[:m], c, g, backend="numpy")
    t_np *= n / m
    label = f"OLH numpy path{' (extrapolated from ' + f'{m:,} users)' if m < n else ''}"
    rows.append((label, t_np, _CPU[-1] * n / m))
    if fast is not None:
        assert np.array_equal(olh_support(seeds[:m], y[:m], c, g, backend="numba"), ref)
        print("numba and numpy support counts identical: yes")
    try:
        import xxhash

        k = 20_000
        t = time.perf_counter()
        for i in range(k):
            v = i % c
            (xxhash.xxh32_intdigest(v.to_bytes(4, "little"), seed=int(seeds[i % n])) * g) >> 32
        per = (time.perf_counter() - t) / k
        rows.append(("python-xxhash loop per (user, value), extrapolated", per * n * c, math.nan))
    except ImportError:
        pass
    print(f"  {'':60s} {'wall':>9s}    {'CPU':>8s}")
    for name, secs, cpu in rows:
        ratio = f"{secs / t_fast:8.1f}x vs fast path" if fast is not None else ""
        print(f"  {name:60s} {secs:9.2f} s  {cpu:8.2f} s  {ratio}")


def bench_clients(n: int) -> None:
    print(f"\n## Client perturbation throughput, {n:,} users (secure OS randomness)")
    rng = fugu.RandomSource()
    vals = fugu.RandomSource(seed=2).integers(4096, n)
    gen = np.random.default_rng(0)

    def insecure_grr(v: np.ndarray, c: int, eps: float) -> np.ndarray:
        p = np.exp(eps) / (np.exp(eps) + c - 1)
        keep = gen.random(v.size) < p
        return np.where(keep, v, (v + gen.integers(1, c, v.size)) % c)

    _, t_base = _t(insecure_grr, vals, 4096, 1.0)
    rows = [("GRR, numpy Generator (insecure baseline)", t_base)]
    rows.append(("GRR (c = 4,096)", _t(grr_perturb, vals, 4096, 1.0, rng)[1]))
    rows.append(("OLH (c = 4,096, g = 4)", _t(olh_perturb, vals, 4, 1.0, rng)[1]))
    rows.append(("SW (x in [0, 1])", _t(sw_perturb, (vals + 0.5) / 4096, 1.0, rng)[1]))
    for name, secs in rows:
        print(
            f"  {name:45s} {secs:7.2f} s  {n / secs / 1e6:7.2f} M users/s  "
            f"{secs / t_base:5.1f}x baseline"
        )


def _exact(codes: np.ndarray, bounds: np.ndarray) -> np.ndarray:
    out = np.zeros(bounds.shape[0])
    for lo in range(0, codes.shape[0], 100_000):
        x = codes[lo : lo + 100_000]
        inside = np.ones((bounds.shape[0], x.shape[0]), dtype=bool)
        for j in range(codes.shape[1]):
            inside &= (x[None, :, j] >= bounds[:, j, 0:1]) & (x[None, :, j] < bounds[:, j, 1:2])
        out += inside.sum(axis=1)
    return out


def bench_mae(n: int, n_queries: int, methods: list[str], epsilons: list[float]) -> None:
    d, c = 6, 64
    print(
        f"\n## MAE (fraction of n): correlated Gaussian, n = {n:,}, d = {d}, c = {c}, rho = 0.5, "
        f"omega = 0.5, {n_queries} queries per lambda"
    )
    dom = fugu.datasets.synthetic_domain(d, c)
    recs = fugu.datasets.correlated_gaussian(n, d, c, rho=0.5, seed=0)
    codes = dom.encode_columns(recs)
    wls = {
        lam: fugu.random_workload(dom, n_queries, n_predicates=lam, volume=0.5, seed=lam)
        for lam in (2, 4)
    }
    truth = {lam: _exact(codes, w.bounds(dom)) for lam, w in wls.items()}
    header = (
        f"  {'method':8s} {'eps':>4s} {'MAE l=2':>9s} {'MAE l=4':>9s} {'seconds':>8s} "
        f"{'vs Uni (l=2)':>13s}"
    )
    print(header)
    for eps in epsilons:
        uni = None
        for name in methods:
            cls = fugu.ldp.METHODS[name]
            proto = cls(dom, eps)
            t = time.perf_counter()
            rel = proto.simulate(codes, rng=fugu.RandomSource(seed=int(eps * 100)))
            maes = {
                lam: float(np.mean(np.abs(rel.answer_many(w) - truth[lam])) / n)
                for lam, w in wls.items()
            }
            secs = time.perf_counter() - t
            if name == "uni":
                uni = maes[2]
            ratio = f"{maes[2] / uni:12.2f}x" if uni else ""
            print(
                f"  {name:8s} {eps:4g} {maes[2]:9.4f} {maes[4]:9.4f} {secs:8.1f} {ratio}",
                flush=True,
            )


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--part", choices=["aggregation", "clients", "mae", "all"], default="all")
    ap.add_argument("--queries", type=int, default=50)
    args = ap.parse_args()
    n_agg = 10**5 if args.quick else 10**6
    n_cli = 10**6 if args.quick else 10**7
    n_mae = 10**5 if args.quick else 10**6
    if args.part in ("aggregation", "all"):
        bench_aggregation(n_agg)
    if args.part in ("clients", "all"):
        bench_clients(n_cli)
    if args.part in ("mae", "all"):
        bench_mae(
            n_mae,
            args.queries,
            ["uni", "msw", "hio", "lhio", "calm", "tdg", "hdg"],
            [0.5, 1.0, 2.0],
        )


if __name__ == "__main__":
    main()
