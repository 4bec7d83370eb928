"""Foundation benchmark: histogram + Laplace release vs the insecure numpy floor, and sampler speed.

Run: ``python bench/bench_foundation.py`` (``--quick`` for a smaller run).

Measured in one process, each figure the median of several repetitions:
  (1) 10^6 records over 4,096 cells (one ordinal attribute);
  (2) 10^6 records over a 4-D Adult cube (Adult rows resampled with a fixed seed);
compared with the insecure floor ``np.bincount`` on precomputed cell indices +
``numpy.random.laplace`` on every cell. Also: exact discrete-Laplace samples per second (secure
source and seeded source) against ``numpy.random.laplace``.
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Callable

import numpy as np

import fugu
from fugu.datasets import adult, adult_domain


def timeit(fn: Callable[[], object], repeat: int) -> float:
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def floor(flat: np.ndarray, size: int, eps: float) -> np.ndarray:
    counts = np.bincount(flat, minlength=size)
    return counts + np.random.default_rng().laplace(0, 2 / eps, size)


def report(title: str, t_floor: float, t_hist: float, t_noise: float, t_fugu: float) -> None:
    print(title)
    rows = [
        ("insecure floor: bincount on codes + numpy laplace", t_floor),
        ("fugu histogram (encoding + bincount)", t_hist),
        ("fugu secure Laplace release (noise only)", t_noise),
        ("fugu end to end", t_fugu),
    ]
    for label, t in rows:
        print(f"    {label:<50} {t * 1e3:8.1f} ms   ratio to floor {t / t_floor:6.2f}x")
    print()


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true")
    args = ap.parse_args()
    n = 10**5 if args.quick else 10**6
    repeat = 3 if args.quick else 7
    eps = 1.0
    rng = np.random.default_rng(0)
    print(f"fugu {fugu.__version__}; n = {n:,} records, epsilon = {eps}, median of {repeat} runs\n")

    # (1) one ordinal attribute, 4,096 cells
    dom = fugu.Domain([fugu.Ordinal("x", 0, 4095)])
    x = np.minimum(rng.geometric(1 / 500, n) - 1, 4095)
    cols = {"x": x}
    t_floor = timeit(lambda: floor(x, 4096, eps), repeat)
    t_hist = timeit(lambda: fugu.Histogram.from_records(cols, dom), repeat)
    hist = fugu.Histogram.from_records(cols, dom)
    t_noise = timeit(lambda: fugu.central.laplace(hist, eps), repeat)
    t_fugu = timeit(
        lambda: fugu.central.laplace(fugu.Histogram.from_records(cols, dom), eps), repeat
    )
    report("(1) 4,096 cells", t_floor, t_hist, t_noise, t_fugu)

    # (2) 4-D Adult cube
    names = ["age", "sex", "occupation", "native_country"]
    adom = adult_domain(names)
    base = adult()
    idx = rng.integers(0, len(base["age"]), n)
    acols = {k: base[k][idx] for k in names}
    codes = adom.encode(acols)
    t_floor = timeit(lambda: floor(codes, adom.size, eps), repeat)
    t_hist = timeit(lambda: fugu.Histogram.from_records(acols, adom), repeat)
    ahist = fugu.Histogram.from_records(acols, adom)
    t_noise = timeit(lambda: fugu.central.laplace(ahist, eps), repeat)
    t_fugu = timeit(
        lambda: fugu.central.laplace(fugu.Histogram.from_records(acols, adom), eps), repeat
    )
    report(
        f"(2) 4-D Adult cube {adom.shape} = {adom.size:,} cells (string columns)",
        t_floor,
        t_hist,
        t_noise,
        t_fugu,
    )

    # (3) sampler throughput (bench/bench_noise.py has the full comparison)
    m = 10**6 if args.quick else 10**7
    t_np = timeit(lambda: np.random.default_rng().laplace(0, 2.0, m), 3)
    print(f"\n(3) {m:,} samples at scale 2")
    print(f"    numpy.random.laplace (insecure floats):       {m / t_np / 1e6:6.2f} M samples/s")
    for label, src in (
        ("secure (AES-CTR from the OS CSPRNG)", None),
        ("seeded (PCG64, not private)", fugu.RandomSource(seed=1)),
    ):
        t = timeit(lambda src=src: fugu.noise.discrete_laplace(2.0, size=m, rng=src), 3)
        print(
            f"    exact discrete Laplace, {label}: {m / t / 1e6:6.2f} M samples/s, "
            f"{t / t_np:.2f}x numpy's time"
        )


if __name__ == "__main__":
    main()
