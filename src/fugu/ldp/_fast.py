"""Optional numba kernel for OLH support counting (``pip install fugu[fast]``).

The kernel evaluates the same XXH32-on-4-bytes hash as :func:`fugu.ldp.oracles.xxh32_u32` and the
same bucket test (``(h − lo_y) mod 2^32 < width_y``, equivalent to ``(h*g) >> 32 == y``), in
uint32 arithmetic that LLVM vectorises, so its counts are identical to the numpy path (tested).
Users are split into blocks counted in parallel (``numba.prange``) into private rows, summed at
the end. Measured here: 10^6 users × 4,096 values in about 1.5 s on two cores.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from ..errors import InvalidParameterError

_KERNEL: Any = None
_TRIED = False

P2, P3, P4, P5 = 0x85EBCA77, 0xC2B2AE3D, 0x27D4EB2F, 0x165667B1

_prange: Callable[[int], Any] = range


def olh_support_src(
    seeds: np.ndarray, lo: np.ndarray, width: np.ndarray, values: np.ndarray, nblk: int
) -> np.ndarray:
    """The kernel's source (compiled by numba; also runs as plain Python for tests).

    ``seeds``, ``lo``, ``width``: uint32 per report; ``values``: int64 values to count.
    """
    n = seeds.shape[0]
    c = values.shape[0]
    out = np.zeros((nblk, c), dtype=np.int64)
    bs = (n + nblk - 1) // nblk
    vin = np.empty(c, dtype=np.uint32)
    for v in range(c):
        vin[v] = np.uint32((np.uint64(values[v]) * np.uint64(P3)) & np.uint64(0xFFFFFFFF))
    p2 = np.uint32(P2)
    p3 = np.uint32(P3)
    p4 = np.uint32(P4)
    for b in _prange(nblk):
        row = np.zeros(c, dtype=np.int32)  # a block holds < 2**31 users
        for i in range(b * bs, min(n, (b + 1) * bs)):
            acc = np.uint32(np.uint32(seeds[i]) + np.uint32(P5 + 4))
            li = lo[i]
            wi = width[i]
            for v in range(c):
                h = np.uint32(acc + vin[v])
                h = np.uint32(np.uint32(h << np.uint32(17)) | np.uint32(h >> np.uint32(15)))
                h = np.uint32(h * p4)
                h = np.uint32(h ^ np.uint32(h >> np.uint32(15)))
                h = np.uint32(h * p2)
                h = np.uint32(h ^ np.uint32(h >> np.uint32(13)))
                h = np.uint32(h * p3)
                h = np.uint32(h ^ np.uint32(h >> np.uint32(16)))
                row[v] += np.int32(np.uint32(h - li) < wi)
        for v in range(c):
            out[b, v] = row[v]
    return out.sum(axis=0)


def olh_support_python(
    seeds: np.ndarray, lo: np.ndarray, width: np.ndarray, values: np.ndarray
) -> np.ndarray:
    """:func:`olh_support_src` run by the Python interpreter (slow; small inputs in tests)."""
    with np.errstate(over="ignore"):
        return olh_support_src(seeds, lo, width, values, 1)


def olh_kernel(required: bool = False) -> Callable[..., np.ndarray] | None:
    """The compiled kernel ``f(seeds, lo, width, values) -> support``, or None without numba."""
    global _KERNEL, _TRIED, _prange
    if _KERNEL is None and not _TRIED:
        _TRIED = True
        numba: Any = None
        try:
            import numba
        except ImportError:
            pass
        if numba is not None:
            _prange = numba.prange
            jit = numba.njit(parallel=True, cache=True)(olh_support_src)
            nthreads = max(1, int(numba.get_num_threads()))

            def run(
                seeds: np.ndarray, lo: np.ndarray, width: np.ndarray, values: np.ndarray
            ) -> np.ndarray:
                nblk = max(1, min(4 * nthreads, seeds.shape[0]), seeds.shape[0] // 2**30 + 1)
                s = np.ascontiguousarray(seeds, dtype=np.uint32)
                lo_ = np.ascontiguousarray(lo, dtype=np.uint32)
                w = np.ascontiguousarray(width, dtype=np.uint32)
                v = np.ascontiguousarray(values, dtype=np.int64)
                return np.asarray(jit(s, lo_, w, v, nblk), dtype=np.int64)

            _KERNEL = run
    if _KERNEL is None and required:
        raise InvalidParameterError(
            "backend='numba' needs numba: pip install 'fugu[fast]' (or use backend='numpy')"
        )
    return _KERNEL


def numba_available() -> bool:
    return olh_kernel() is not None
