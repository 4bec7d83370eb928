"""Noise benchmark: fugu's exact secure samplers against insecure numpy floats, in one process.

Run: ``python bench/bench_noise.py`` (``--quick``: 10^6 samples instead of 10^7).

Prints, each figure the best of ``--repeat`` runs, interleaved with its baseline so that machine
load hits both alike:

(1) secure exact discrete Laplace (table sampler, AES-CTR words) vs
    ``numpy.random.Generator.laplace`` (insecure floats), 10^7 samples, at several scales; and
    the reference sampler (Canonne-Kamath-Steinke, the default before the tables) at 10^6;
(2) a 1-D release from 10^6 raw records (``fugu.central.laplace(Histogram.from_records(...))``)
    vs ``np.bincount`` + numpy float Laplace on every cell;
(3) the single-thread cost of the thread-safe ``RandomSource``: small draws (4 words) served
    from the per-thread buffer vs the same buffer logic with no thread-local state, and bulk
    words (10^6) from the AES-CTR stream;
(4) 4 threads drawing at once (the old shared source raised ``RuntimeError: Already borrowed``);
(5) if numba is installed: the top-table lookup compiled, to show what a compiled kernel would
    add (the decision recorded in docs/randomness.md).
"""

from __future__ import annotations

import argparse
import os
import threading
import time
from collections.abc import Callable
from typing import Any

import numpy as np

import fugu
from fugu.noise import (
    RandomSource,
    _discrete_laplace_reference,
    _laplace_tables,
    _rational_scale,
    _thread_drbg,
    discrete_laplace,
)


def best(fn: Callable[[], Any], repeat: int) -> float:
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return min(times)


def paired(a: Callable[[], Any], b: Callable[[], Any], repeat: int) -> tuple[float, float]:
    """Best times of a and b, run alternately."""
    ta, tb = [], []
    for _ in range(repeat):
        t0 = time.perf_counter()
        a()
        ta.append(time.perf_counter() - t0)
        t0 = time.perf_counter()
        b()
        tb.append(time.perf_counter() - t0)
    return min(ta), min(tb)


class _UnsafeBuffer:
    """The small-draw buffer without per-thread state (what the old, non-thread-safe source did)."""

    def __init__(self) -> None:
        self.buf = np.empty(0, dtype=np.uint64)
        self.pid = os.getpid()

    def bits64(self, n: int) -> np.ndarray:
        if self.pid != os.getpid():
            self.buf, self.pid = np.empty(0, dtype=np.uint64), os.getpid()
        if n > self.buf.size:
            self.buf = _thread_drbg()(1 << 16)
        out, self.buf = self.buf[:n], self.buf[n:]
        return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="10^6 samples instead of 10^7")
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args(argv)
    n = 10**6 if args.quick else 10**7
    rep = args.repeat
    gen = np.random.default_rng()
    print(
        f"fugu {fugu.__version__} noise benchmark; load average {os.getloadavg()[0]:.1f} on "
        f"{os.cpu_count()} CPUs (the machine may be shared: ratios are the steady figure)\n"
    )

    print(f"(1) exact secure discrete Laplace vs numpy float Laplace, {n:,} samples")
    print(f"    {'scale':>10} {'numpy M/s':>10} {'fugu M/s':>10} {'fugu/numpy time':>16}")
    for scale in (1.0, 100.0, 3000.0, 2.0**20, 2.0**40, 2.0**52):
        discrete_laplace(scale, size=1 << 14)  # build (and cache) the tables
        t_np, t_fu = paired(
            lambda s=scale: gen.laplace(0.0, s, n), lambda s=scale: discrete_laplace(s, size=n), rep
        )
        rates = f"{n / t_np / 1e6:>10.1f} {n / t_fu / 1e6:>10.1f}"
        print(f"    {scale:>10.4g} {rates} {t_fu / t_np:>15.2f}x")
    m = 10**6
    for scale in (1.0, 2.0**20):
        t, s = (int(v[0]) for v in _rational_scale(np.asarray([scale])))
        t_ref = best(lambda t=t, s=s: _discrete_laplace_reference(RandomSource(), t, s, m), rep)
        t_tab = best(lambda t=t, s=s: _laplace_tables(t, s).sample(RandomSource(), m), rep)
        print(
            f"    reference sampler (CKS 2020, the previous default) at scale {scale:g}: "
            f"{m / t_ref / 1e6:.2f} M/s; tables {m / t_tab / 1e6:.1f} M/s "
            f"({t_ref / t_tab:.0f}x faster)"
        )

    print("\n(2) 1-D release from 10^6 raw records vs np.bincount + numpy float Laplace")
    records = 10**6
    for cells in (1_000, 100_000):
        vals = np.random.default_rng(0).integers(0, cells, records)
        dom = fugu.Domain([fugu.Ordinal("x", 0, cells - 1)])
        cols = {"x": vals}

        def floor(vals: np.ndarray = vals, cells: int = cells) -> np.ndarray:
            return np.bincount(vals, minlength=cells) + gen.laplace(0.0, 2.0, cells)

        def release(cols: dict = cols, dom: fugu.Domain = dom) -> Any:
            return fugu.central.laplace(fugu.Histogram.from_records(cols, dom), 1.0)

        release()
        t_floor, t_rel = paired(floor, release, max(rep, 7))
        print(
            f"    {cells:>7,} cells: floor {t_floor * 1e3:7.2f} ms, fugu {t_rel * 1e3:7.2f} ms, "
            f"ratio {t_rel / t_floor:.2f}x"
        )

    print("\n(3) single-thread cost of the thread-safe secure RandomSource")
    src, unsafe = RandomSource(), _UnsafeBuffer()
    calls = 100_000

    def small_safe() -> None:
        for _ in range(calls):
            src.bits64(4)

    def small_unsafe() -> None:
        for _ in range(calls):
            unsafe.bits64(4)

    t_unsafe, t_safe = paired(small_unsafe, small_safe, rep)
    print(
        f"    bits64(4): {t_safe / calls * 1e9:.0f} ns/call thread-safe vs "
        f"{t_unsafe / calls * 1e9:.0f} ns/call without per-thread state "
        f"(ratio {t_safe / t_unsafe:.2f}x)"
    )
    t_bulk = best(lambda: src.bits64(10**6), rep * 3)
    print(f"    bits64(10^6): {t_bulk * 1e3:.2f} ms ({8e6 / t_bulk / 2**30:.2f} GiB/s of AES-CTR)")

    print("\n(4) 4 threads, each 20 x discrete_laplace(3.0, size=10^5) on the shared source")
    errors: list[BaseException] = []

    def work() -> None:
        try:
            for _ in range(20):
                discrete_laplace(3.0, size=10**5)
        except BaseException as exc:  # noqa: BLE001 - counted below
            errors.append(exc)

    t0 = time.perf_counter()
    threads = [threading.Thread(target=work) for _ in range(4)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    print(f"    {time.perf_counter() - t0:.2f} s, errors: {len(errors)}")

    print("\n(5) compiled kernel (numba, the [fast] extra) for the top-table lookup")
    try:
        import numba
    except ImportError:
        print("    numba not installed: skipped")
        return 0

    @numba.njit(cache=False)
    def lookup(entry: np.ndarray, words: np.ndarray, out: np.ndarray) -> None:  # pragma: no cover
        for i in range(words.size):
            w = words[i]
            e = entry[w >> 16]
            o = e >> 17
            if (w & 0xFFFF) > (e & 0x1FFFF):
                o += 1
            out[i] = o

    table = _laplace_tables(*(int(v[0]) for v in _rational_scale(np.asarray([2.0])))).top
    words = RandomSource().bits32(n)
    out = np.empty(n, dtype=np.uint32)
    lookup(table.entry, words[:10], out[:10])  # compile
    t_numpy, t_numba = paired(
        lambda: table.draw(RandomSource(), words), lambda: lookup(table.entry, words, out), rep
    )
    print(
        f"    {n:,} lookups: numpy {t_numpy * 1e3:.1f} ms, numba {t_numba * 1e3:.1f} ms "
        f"({t_numpy / t_numba:.1f}x); numba import + compile is paid once per process"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
