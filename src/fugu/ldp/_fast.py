"""Optional numba kernel for OLH support counting (``pip install fugu[fast]``).

The kernel evaluates the same XXH32-on-4-bytes hash as :func:`fugu.ldp.oracles.xxh32_u32` and the
same bucket test, so its counts are identical to the numpy path (tested). Users are split into
blocks counted in parallel (``numba.prange``) into private rows, summed at the end.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from ..errors import InvalidParameterError

_KERNEL: Any = None
_TRIED = False

P2, P3, P4, P5 = 0x85EBCA77, 0xC2B2AE3D, 0x27D4EB2F, 0x165667B1


def olh_support_py(
    seeds: np.ndarray, lo: np.ndarray, width: np.ndarray, values: np.ndarray, nblk: int = 1
) -> np.ndarray:
    """The kernel's source as plain Python (compiled by numba when available; also runnable
    without it, slowly, which lets the tests check its logic everywhere)."""
    mask = np.uint64(0xFFFFFFFF)
    n = seeds.shape[0]
    c = values.shape[0]
    out = np.zeros((nblk, c), dtype=np.int64)
    bs = (n + nblk - 1) // nblk
    vin = np.empty(c, dtype=np.uint64)
    for v in range(c):
        vin[v] = (np.uint64(values[v]) * np.uint64(P3)) & mask
    for b in _prange(nblk):
        for i in range(b * bs, min(n, (b + 1) * bs)):
            acc = (np.uint64(seeds[i]) + np.uint64(P5 + 4)) & mask
            li = np.uint64(lo[i])
            wi = np.uint64(width[i])
            for v in range(c):
                h = (acc + vin[v]) & mask
                h = ((h << np.uint64(17)) | (h >> np.uint64(15))) & mask
                h = (h * np.uint64(P4)) & mask
                h ^= h >> np.uint64(15)
                h = (h * np.uint64(P2)) & mask
                h ^= h >> np.uint64(13)
                h = (h * np.uint64(P3)) & mask
                h ^= h >> np.uint64(16)
                if ((h - li) & mask) < wi:
                    out[b, v] += 1
    return out.sum(axis=0)


_prange: Callable[[int], Any] = range


def olh_kernel(required: bool = False) -> Callable[..., np.ndarray] | None:
    """The compiled kernel ``f(seeds, lo, width, values) -> support``, or None without numba."""
    global _KERNEL, _TRIED, _prange
    if _KERNEL is None and not _TRIED:
        _TRIED = True
        try:
            import numba
        except ImportError:
            numba = None
        if numba is not None:
            _prange = numba.prange
            try:
                jit = numba.njit(parallel=True, cache=True)(olh_support_py)
            except Exception:  # pragma: no cover - caching may be impossible on read-only installs
                jit = numba.njit(parallel=True)(olh_support_py)
            nthreads = max(1, int(numba.get_num_threads()))

            def run(seeds: np.ndarray, lo: np.ndarray, width: np.ndarray, values: np.ndarray) -> np.ndarray:
                nblk = max(1, min(4 * nthreads, seeds.shape[0]))
                return np.asarray(jit(seeds, lo, width, values, nblk), dtype=np.int64)

            _KERNEL = run
    if _KERNEL is None and required:
        raise InvalidParameterError(
            "backend='numba' needs numba: pip install 'fugu[fast]' (or use backend='numpy')"
        )
    return _KERNEL
