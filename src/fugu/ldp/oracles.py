"""Frequency oracles under local DP: GRR, OLH, OUE, the adaptive choice, and grouped oracles.

Privacy model: ε-local differential privacy. Neighbours: any two values of one user. Each user
sends one report with the full ε. Source: Wang, Blocki, Li, Jha, "Locally Differentially Private
Protocols for Frequency Estimation", USENIX Security 2017 (GRR = "direct encoding", OUE
Section 4.4, OLH Section 4.4, the variance rule for choosing between them); restated in Yang et
al., VLDB 2021 (seed ``003_…``), Section 2.

Every oracle is described by two *support* probabilities: a user holding ``v`` "supports" ``v``
with probability ``p*``, a user holding another value supports ``v`` with probability ``q*``:

==========  ==========================  ===============  =========================
oracle      p*                          q*               a report "supports" v when
==========  ==========================  ===============  =========================
GRR         e^ε / (e^ε + c − 1)         1 / (e^ε + c − 1)  it equals v
OUE         1/2                         1 / (e^ε + 1)    its bit v is set
OLH         e^ε / (e^ε + g − 1)         1 / g            H_seed(v) equals its y
==========  ==========================  ===============  =========================

With ``S(v)`` the number of the ``N`` reports supporting ``v``, the unbiased count estimate is
``Ĉ(v) = (S(v) − N q*) / (p* − q*)`` and its exact variance (true count ``C(v)``)::

    Var Ĉ(v) = [N q*(1 − q*) + C(v) (p*(1 − p*) − q*(1 − q*))] / (p* − q*)^2

(the leading term ``N q*(1−q*)/(p*−q*)^2`` is the one the papers quote: GRR
``N(e^ε + c − 2)/(e^ε − 1)^2``, OUE ``N 4e^ε/(e^ε − 1)^2``). :func:`oracle_variance` computes it.
For OLH the formula is exact for a hash family with uniform, pairwise-independent buckets; for
XXH32 it holds to within the hash's bias (tested). OUE and OLH supports of different values are
uncorrelated, so a range of cells has the summed variance; GRR's are negatively correlated and a
set S of k cells has ``N kq*(1 − kq*)/(p* − q*)^2`` (leading term), which ``expected_error`` uses.

The adaptive choice (Wang et al. 2017): GRR when ``c < 3e^ε + 2``, else OLH (:func:`choose_oracle`).

OLH's hash (portable, fixed by this module — a client in another language must match it)
-----------------------------------------------------------------------------------------
* Each user draws a uniformly random 32-bit ``seed`` (public; sent in the report).
* The value is the cell index ``v`` (0 ≤ v < c, C-order flat index over the domain) encoded as
  4 bytes little-endian, hashed with **XXH32** (xxHash, 32-bit) with that seed:
  ``h = XXH32(v.to_bytes(4, "little"), seed)``. Only when the oracle's domain has more than
  2^32 values (HIO's finest layers over many attributes) is ``v`` encoded as 8 bytes.
* The bucket is ``y = (h * g) >> 32`` (Lemire's multiply-shift "fastrange", never ``h % g``).

In Python: ``(xxhash.xxh32_intdigest(v.to_bytes(4, "little"), seed=seed) * g) >> 32``. The
report is ``{"seed": seed, "y": y'}`` where ``y'`` is ``y`` kept with probability ``p*``, else
one of
the other ``g − 1`` buckets uniformly. fugu implements XXH32 for 4-byte inputs in numpy
(:func:`xxh32_u32`, no dependency) and, when numba is installed (``pip install fugu[fast]``), a
compiled support-counting kernel that returns bit-identical counts.

Building blocks for multi-dimensional methods
---------------------------------------------
:class:`GroupedOracle` runs one oracle per user group (group ``j`` over ``cells[j]`` values) with
report columns ``group, seed, y`` (or ``group, bits`` for OUE) and support state
``{"support": concatenated support counts, "n_group": users per group}``; HIO, LHIO, CALM (and
TDG/HDG) build on it. The pure counting functions :func:`grr_support`, :func:`olh_support`,
:func:`oue_support` are what an engine parallelises.

Example
-------
>>> import fugu
>>> dom = fugu.Domain([fugu.Ordinal("v", 0, 63)])
>>> olh = fugu.ldp.OLH(dom, epsilon=1.0)
>>> olh.g
4
>>> rel = olh.simulate({"v": [3] * 500 + [40] * 500}, rng=fugu.RandomSource(seed=2))
>>> rel.counts.shape
(64,)
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
from numpy.typing import ArrayLike, NDArray

from ..domain import Domain
from ..errors import InvalidParameterError, check_positive_int
from ..noise import RandomSource
from ..queries import RangeQuery
from ..release import CubeRelease, Guarantee, Release
from ..release_state import Array, Meta
from .protocol import ColumnSpec, LDPProtocol, check_ldp_epsilon

__all__ = [
    "GRR",
    "OLH",
    "OUE",
    "adaptive",
    "choose_oracle",
    "olh_g",
    "support_probabilities",
    "oracle_variance",
    "xxh32_u32",
    "xxh32_u64",
    "olh_hash",
    "grr_perturb",
    "olh_perturb",
    "oue_perturb",
    "grr_support",
    "olh_support",
    "oue_support",
    "estimate_counts",
    "FrequencyRelease",
    "GroupedOracle",
]

# -- XXH32 on one 32-bit little-endian word ---------------------------------------------------
P1, P2, P3, P4, P5 = 0x9E3779B1, 0x85EBCA77, 0xC2B2AE3D, 0x27D4EB2F, 0x165667B1
_U32 = np.uint32


def _avalanche(h: NDArray[np.uint32]) -> NDArray[np.uint32]:
    h ^= h >> _U32(15)
    h *= _U32(P2)
    h ^= h >> _U32(13)
    h *= _U32(P3)
    h ^= h >> _U32(16)
    return h


def xxh32_u32(values: ArrayLike, seeds: ArrayLike) -> NDArray[np.uint32]:
    """XXH32 of ``v.to_bytes(4, "little")`` with ``seed``, vectorised (broadcasts).

    Equal to ``xxhash.xxh32_intdigest(int(v).to_bytes(4, "little"), seed=int(seed))``.

    >>> int(xxh32_u32(0, 0))
    148298089
    """
    v = np.asarray(values, dtype=np.int64).astype(_U32)
    s = np.asarray(seeds, dtype=np.int64).astype(_U32)
    with np.errstate(over="ignore"):
        h = s + _U32((P5 + 4) & 0xFFFFFFFF)  # seed + PRIME5 + input length
        h = h + v * _U32(P3)
        h = ((h << _U32(17)) | (h >> _U32(15))) * _U32(P4)
        return _avalanche(np.asarray(h, dtype=_U32))


def xxh32_u64(values: ArrayLike, seeds: ArrayLike) -> NDArray[np.uint32]:
    """XXH32 of ``v.to_bytes(8, "little")`` with ``seed`` (oracle domains above 2^32 values).

    >>> import xxhash
    >>> v = 2**36 - 1
    >>> int(xxh32_u64(v, 77)) == xxhash.xxh32_intdigest(v.to_bytes(8, "little"), seed=77)
    True
    """
    v = np.asarray(values, dtype=np.int64).astype(np.uint64)
    s = np.asarray(seeds, dtype=np.int64).astype(_U32)
    with np.errstate(over="ignore"):
        h = s + _U32((P5 + 8) & 0xFFFFFFFF)
        for lane in ((v & np.uint64(0xFFFFFFFF)).astype(_U32), (v >> np.uint64(32)).astype(_U32)):
            h = h + lane * _U32(P3)
            h = ((h << _U32(17)) | (h >> _U32(15))) * _U32(P4)
        return _avalanche(np.asarray(h, dtype=_U32))


def olh_hash(values: ArrayLike, seeds: ArrayLike, g: int, wide: bool = False) -> NDArray[np.int64]:
    """OLH bucket ``(XXH32(v, seed) * g) >> 32`` in ``[0, g)`` (``wide``: 8-byte input)."""
    h = (xxh32_u64 if wide else xxh32_u32)(values, seeds).astype(np.uint64)
    return ((h * np.uint64(g)) >> np.uint64(32)).astype(np.int64)


# -- parameters and variances --------------------------------------------------------------------
#: The largest OLH hash range: buckets ``(h * g) >> 32`` and their bounds fit in 64 bits
#: (above 2^32 they wrapped, buckets were no longer uniform and the estimates were biased).
OLH_MAX_G = 2**31


def olh_g(epsilon: float) -> int:
    """The integer hash range minimising OLH's variance (≈ e^ε + 1; 4 at ε = 1, 8 at ε = 2)."""
    e = math.exp(check_ldp_epsilon(epsilon, "OLH"))
    best, best_var = 2, math.inf
    for g in {max(2, math.floor(e) + 1), max(2, math.ceil(e) + 1)}:
        p, q = e / (e + g - 1), 1.0 / g
        var = q * (1 - q) / (p - q) ** 2
        if var < best_var - 1e-15 or (abs(var - best_var) <= 1e-15 and g < best):
            best, best_var = g, var
    return best


def support_probabilities(
    oracle: str, epsilon: float, c: int, g: int | None = None
) -> tuple[float, float]:
    """``(p*, q*)`` of an oracle over ``c`` values (see the module docstring)."""
    e = math.exp(check_ldp_epsilon(epsilon, f"the {oracle} oracle"))
    if oracle == "grr":
        return e / (e + c - 1), 1.0 / (e + c - 1)
    if oracle == "oue":
        return 0.5, 1.0 / (e + 1)
    if oracle == "olh":
        g = olh_g(epsilon) if g is None else g
        return e / (e + g - 1), 1.0 / g
    raise InvalidParameterError(f"oracle must be 'grr', 'olh' or 'oue', got {oracle!r}")


def oracle_variance(
    oracle: str, epsilon: float, c: int, n: ArrayLike, count: ArrayLike = 0.0, g: int | None = None
) -> NDArray[np.float64]:
    """Exact variance of the count estimate Ĉ(v) from ``n`` reports when ``count`` users hold v.

    >>> round(float(oracle_variance("grr", 1.0, 64, 1)), 2)  # the spec's table, ε = 1, c = 64
    21.92
    >>> round(float(oracle_variance("oue", 1.0, 64, 1)), 3)
    3.683
    """
    p, q = support_probabilities(oracle, epsilon, c, g)
    n_arr, c_arr = np.asarray(n, np.float64), np.asarray(count, np.float64)
    return (n_arr * q * (1 - q) + c_arr * (p * (1 - p) - q * (1 - q))) / (p - q) ** 2


def choose_oracle(c: int, epsilon: float) -> str:
    """The variance rule of Wang et al. 2017: ``"grr"`` when ``c < 3e^ε + 2``, else ``"olh"``."""
    return "grr" if c < 3 * math.exp(check_ldp_epsilon(epsilon)) + 2 else "olh"


# -- randomisers (vectorised; every draw from the RandomSource) ---------------------------------
def _round_up(p: Any) -> Any:
    """A probability raised by a relative 2^-50 and one step of the sampler's 2^-64 grid (capped
    at 1), so neither the double arithmetic that computed ``p`` (exp, a sum and a quotient: up
    to about 2 ulps) nor ``RandomSource.bernoulli``'s rounding down draws it below the exact
    value. (One ulp was too little: GRR's ratio reached e^ε·(1 + 2.3e-16), OUE's
    e^ε·(1 + 5.4e-17).)"""
    return np.minimum(1.0, np.asarray(p, dtype=np.float64) * (1 + 2.0**-50) + 2.0**-64)


#: Randomised response over more than ``2^20·e^ε + 1`` values draws "keep, else uniform over all
#: k" (:func:`_randomised_response`); below, "change to one of the other k − 1".
_RR_LARGE = 2.0**20


def _randomised_response(
    values: NDArray[np.int64], k: ArrayLike, epsilon: float, rng: RandomSource
) -> NDArray[np.int64]:
    """k-ary randomised response of ``values`` (each in ``[0, k)``; ``k`` a scalar or one per
    value): the true value with probability e^ε/(e^ε + k − 1), each other one with
    1/(e^ε + k − 1). Both ratios are at most e^ε for the probabilities actually drawn:

    * ``k − 1 ≤ 2^20·e^ε``: the *change* event is drawn with (k − 1)/(e^ε + k − 1) computed
      directly and rounded up (:func:`_round_up`), then one of the other k − 1 values uniformly.
      (Drawing "keep" with a double near 1 lost the relative precision of its complement: the
      ratio was e^ε·(1 + 1.8e-8) at ε = 20, k = 2.)
    * larger k: the value is *kept* with α = (e^ε − 1)/(e^ε − 1 + k), rounded down, else a
      uniform value of all k is sent (the true one included). P(true)/P(other) = 1 + αk/(1 − α)
      ≤ e^ε whatever α's rounding, and P(other) ≤ P(true). Drawing the change event there, a
      double near 1, could not hold the other ratio: the admissible interval for it is about
      2ε/k wide, below the doubles' spacing 2^-53 from k ≈ 2^34 at ε = 1e-6 (GRR over 2^36
      values gave another value e^ε·(1 + 1.4e-5) times the true one's probability).
    """
    v = np.asarray(values, dtype=np.int64).reshape(-1)
    kk = np.broadcast_to(np.asarray(k, dtype=np.int64), v.shape)
    e = math.exp(epsilon)
    k_f = kk.astype(np.float64)
    large = k_f - 1 > _RR_LARGE * e
    if not large.any():
        change = _round_up((k_f - 1) / (e + k_f - 1))
        keep = ~rng.bernoulli(change)
        shift = rng.below(np.maximum(kk - 1, 1).astype(np.uint64)).astype(np.int64) + 1
        return np.where(keep | (kk == 1), v, (v + shift) % np.maximum(kk, 1))
    em1 = math.expm1(epsilon)
    with np.errstate(divide="ignore", invalid="ignore"):
        change = _round_up((k_f - 1) / (e + k_f - 1))
        alpha = em1 / (em1 + k_f) * (1 - 2.0**-48)  # rounded down (≤ 3 ulps of error)
    draw = rng.bernoulli(np.where(large, alpha, change))
    keep = np.where(large, draw, ~draw)
    bound = np.where(large, kk, np.maximum(kk - 1, 1)).astype(np.uint64)
    u = rng.below(bound).astype(np.int64)
    other = np.where(large, u, (v + u + 1) % np.maximum(kk, 1))
    return np.where(keep | (kk == 1), v, other)


def oue_zero_bit_probability(epsilon: float) -> float:
    """P(a 0-bit of OUE's one-hot vector is reported as 1): 1/(e^ε + 1), rounded up
    (:func:`_round_up`) so that the sampler's rounding down never makes the likelihood ratio
    (1 − q)/q exceed e^ε."""
    return float(_round_up(1.0 / (math.exp(epsilon) + 1.0)))


def _values_below(values: ArrayLike, bound: int, what: str) -> NDArray[np.int64]:
    """``values`` as int64 after checking that each is an integer in ``[0, bound)``. The
    message names the range, never a value (they are a user's private data)."""
    arr = np.asarray(values).reshape(-1)
    if arr.size == 0:
        return np.zeros(0, dtype=np.int64)
    if arr.dtype.kind == "f":
        with np.errstate(invalid="ignore"):
            bad = ~np.isfinite(arr) | (arr != np.floor(arr)) | (arr < 0) | (arr >= bound)
    elif arr.dtype.kind in "iu":
        bad = (arr < 0) | (arr >= bound)
    else:
        raise InvalidParameterError(
            f"{what}: values must be integer codes in [0, {bound}), got values of type "
            f"{arr.dtype}; encode records with Domain.encode_columns first"
        )
    if bad.any():
        raise InvalidParameterError(
            f"{what}: {int(bad.sum())} of {arr.size} values are not integer codes in "
            f"[0, {bound}) (NaN, fractions or out of range); encode records with "
            f"Domain.encode_columns first (it names the attribute and the fix)"
        )
    return arr.astype(np.int64)


def grr_perturb(values: ArrayLike, c: int, epsilon: float, rng: RandomSource) -> NDArray[np.int64]:
    """Generalised randomised response over ``[0, c)``: keep w.p. e^ε/(e^ε+c−1), else another
    value uniformly. ``values`` must be integer codes in ``[0, c)``."""
    eps = check_ldp_epsilon(epsilon, "grr_perturb")
    c = check_positive_int(c, "c", minimum=2)
    v = _values_below(values, c, "grr_perturb")
    return _randomised_response(v, c, eps, rng)


def olh_perturb(
    values: ArrayLike, g: int, epsilon: float, rng: RandomSource, wide: bool = False
) -> tuple[NDArray[np.uint32], NDArray[np.int64]]:
    """OLH: a fresh 32-bit seed per user, ``y = H_seed(v)`` kept w.p. e^ε/(e^ε+g−1), else
    another bucket uniformly. Returns ``(seeds, y)``. ``values`` must be integer codes below
    2^32 (below 2^63 with ``wide``: the 8-byte hash)."""
    eps = check_ldp_epsilon(epsilon, "olh_perturb")
    g = check_positive_int(g, "g", minimum=2)
    v = _values_below(values, 2**63 - 1 if wide else 2**32, "olh_perturb")
    seeds = rng.bits32(v.size).copy()
    h = olh_hash(v, seeds, g, wide)
    return seeds, _randomised_response(h, g, eps, rng)


def oue_perturb(values: ArrayLike, c: int, epsilon: float, rng: RandomSource) -> NDArray[np.uint8]:
    """OUE: the one-hot vector of v with the 1-bit kept w.p. 1/2 and each 0-bit set w.p.
    1/(e^ε+1). Returns packed bits, shape (n, ⌈c/8⌉), least-significant bit first. ``values``
    must be integer codes in ``[0, c)``."""
    check_ldp_epsilon(epsilon, "oue_perturb")
    c = check_positive_int(c, "c", minimum=1)
    v = _values_below(values, c, "oue_perturb")
    width = (c + 7) // 8
    out = np.zeros((v.size, width), dtype=np.uint8)
    q = oue_zero_bit_probability(epsilon)
    step = max(1, (1 << 22) // max(c, 1))
    for lo in range(0, v.size, step):
        vv = v[lo : lo + step]
        bits = rng.bernoulli(q, size=(vv.size, c))
        bits[np.arange(vv.size), vv] = rng.bernoulli(0.5, size=vv.size)
        out[lo : lo + step] = np.packbits(bits, axis=1, bitorder="little")
    return out


# -- support counting (the only O(reports) step; pure and vectorised) -----------------------------
def grr_support(y: ArrayLike, c: int) -> NDArray[np.int64]:
    """Support counts of GRR reports: how many reports equal each value."""
    return np.bincount(np.asarray(y, dtype=np.int64), minlength=c).astype(np.int64)


def oue_support(bits: ArrayLike, c: int) -> NDArray[np.int64]:
    """Support counts of OUE reports: how many reports have each bit set (chunked)."""
    b = np.asarray(bits, dtype=np.uint8)
    out = np.zeros(c, dtype=np.int64)
    step = max(1, (1 << 24) // max(c, 1))
    for lo in range(0, b.shape[0], step):
        out += np.unpackbits(b[lo : lo + step], axis=1, count=c, bitorder="little").sum(
            axis=0, dtype=np.int64
        )
    return out


def _bucket_bounds(y: NDArray[np.int64], g: int) -> tuple[NDArray[np.uint32], NDArray[np.uint32]]:
    """``(lo, width)`` with ``(h*g) >> 32 == y  ⟺  (h − lo) mod 2^32 < width`` (no multiply)."""
    yy = y.astype(np.uint64)
    g64 = np.uint64(g)
    lo = (yy * np.uint64(1 << 32) + g64 - np.uint64(1)) // g64
    hi = ((yy + np.uint64(1)) * np.uint64(1 << 32) + g64 - np.uint64(1)) // g64
    return lo.astype(np.uint32), (hi - lo).astype(np.uint32)


def _olh_support_numpy(
    seeds: NDArray[np.uint32], y: NDArray[np.int64], values: NDArray[np.int64], g: int
) -> NDArray[np.int64]:
    out = np.zeros(values.size, dtype=np.int64)
    if seeds.size == 0 or values.size == 0:
        return out
    lo, width = _bucket_bounds(y, g)
    acc0 = seeds.astype(_U32) + _U32((P5 + 4) & 0xFFFFFFFF)
    with np.errstate(over="ignore"):
        vin = values.astype(_U32) * _U32(P3)
    # Blocks of ub users × vb values, sized to stay in cache; every step in place.
    vb = min(values.size, 8192)
    ub = max(1, (1 << 16) // vb)
    buf = np.empty((ub, vb), dtype=_U32)
    tmp = np.empty((ub, vb), dtype=_U32)
    hit = np.empty((ub, vb), dtype=bool)
    for j in range(0, values.size, vb):
        k = min(vb, values.size - j)
        vj = vin[None, j : j + k]
        for i in range(0, seeds.size, ub):
            m = min(ub, seeds.size - i)
            h, t, mk = buf[:m, :k], tmp[:m, :k], hit[:m, :k]
            with np.errstate(over="ignore"):
                np.add(acc0[i : i + m, None], vj, out=h)
                np.right_shift(h, _U32(15), out=t)
                np.left_shift(h, _U32(17), out=h)
                np.bitwise_or(h, t, out=h)
                np.multiply(h, _U32(P4), out=h)
                np.right_shift(h, _U32(15), out=t)
                np.bitwise_xor(h, t, out=h)
                np.multiply(h, _U32(P2), out=h)
                np.right_shift(h, _U32(13), out=t)
                np.bitwise_xor(h, t, out=h)
                np.multiply(h, _U32(P3), out=h)
                np.right_shift(h, _U32(16), out=t)
                np.bitwise_xor(h, t, out=h)
                np.subtract(h, lo[i : i + m, None], out=h)
            np.less(h, width[i : i + m, None], out=mk)
            out[j : j + k] += mk.sum(axis=0, dtype=np.int64)
    return out


def olh_support(
    seeds: ArrayLike,
    y: ArrayLike,
    c: int | None = None,
    g: int = 2,
    *,
    values: ArrayLike | None = None,
    backend: str = "auto",
    wide: bool = False,
) -> NDArray[np.int64]:
    """Support counts of OLH reports: ``S(v) = #{i : H_{seed_i}(v) = y_i}`` for every ``v`` in
    ``values`` (default ``0 … c−1``).

    ``backend``: ``"numpy"`` (always available), ``"numba"`` (compiled, parallel; needs numba) or
    ``"auto"`` (numba when importable and the job is large). Both give identical counts.
    ``wide``: the oracle's domain exceeds 2^32 values and values are hashed as 8 bytes (numpy
    only).
    """
    s = np.ascontiguousarray(np.asarray(seeds, dtype=np.int64).astype(_U32))
    yy = np.ascontiguousarray(np.asarray(y, dtype=np.int64))
    if values is None:
        if c is None:
            raise InvalidParameterError("olh_support needs c or values")
        vals = np.arange(c, dtype=np.int64)
    else:
        vals = np.ascontiguousarray(np.asarray(values, dtype=np.int64).reshape(-1))
    if backend not in ("auto", "numpy", "numba"):
        raise InvalidParameterError(f"backend must be 'auto', 'numpy' or 'numba', got {backend!r}")
    if wide:
        out = np.zeros(vals.size, dtype=np.int64)
        step = max(1, (1 << 22) // max(vals.size, 1))
        for lo in range(0, s.size, step):
            h = olh_hash(vals[None, :], s[lo : lo + step, None], g, wide=True)
            out += np.count_nonzero(h == yy[lo : lo + step, None], axis=0)
        return out
    if backend == "numba" or (backend == "auto" and s.size * vals.size >= 1 << 22):
        from . import _fast

        kernel = _fast.olh_kernel(required=backend == "numba")
        if kernel is not None:
            lo_y, width_y = _bucket_bounds(yy, g)
            return kernel(s, lo_y, width_y, vals)
    return _olh_support_numpy(s, yy, vals, g)


def estimate_counts(support: ArrayLike, n: ArrayLike, p: float, q: float) -> NDArray[np.float64]:
    """Unbiased counts ``(S − n q*) / (p* − q*)`` from support counts of ``n`` reports."""
    return (np.asarray(support, np.float64) - np.asarray(n, np.float64) * q) / (p - q)


# -- the releases -------------------------------------------------------------------------------
class FrequencyRelease(CubeRelease):
    """Estimated counts of every cell of the domain from a frequency oracle (``model="ldp"``).

    Counts are unbiased (they may be negative; ``nonnegative()`` and Norm-Sub are explicit
    post-processing). ``expected_error(q)`` is the RMSE of a range answer from the exact variance
    formula, with the unknown true counts replaced by the clipped estimates.
    """

    kind = "ldp-frequency"
    _state_fields = (
        Array("estimate", "_estimate", shape="domain"),
        Meta("oracle", str),
        Meta("n_reports", int),
        Meta("p", float),
        Meta("q", float),
    )

    def __init__(
        self,
        domain: Domain,
        guarantee: Guarantee,
        estimate: ArrayLike,
        *,
        oracle: str,
        n_reports: int,
        p: float,
        q: float,
    ) -> None:
        super().__init__(domain, guarantee, estimate)
        self.oracle, self.n_reports, self.p, self.q = oracle, int(n_reports), float(p), float(q)

    def expected_error(self, query: RangeQuery | Mapping[str, Any]) -> float | None:
        qq = query if isinstance(query, RangeQuery) else RangeQuery(dict(query))
        assert self.domain is not None
        b = qq.bounds(self.domain)
        k = float(np.prod(b[:, 1] - b[:, 0]))
        inside = max(0.0, float(self._answer_bounds(b[None])[0]))
        inside = min(inside, float(self.n_reports))
        n, p, q = self.n_reports, self.p, self.q
        if self.oracle == "grr":  # supports of the k cells of one report are exclusive
            ps, qs = p + (k - 1) * q, k * q
            var = (n * qs * (1 - qs) + inside * (ps * (1 - ps) - qs * (1 - qs))) / (p - q) ** 2
        else:  # uncorrelated supports: sum of the per-cell variances
            var = (n * k * q * (1 - q) + inside * (p * (1 - p) - q * (1 - q))) / (p - q) ** 2
        return math.sqrt(max(var, 0.0))


# -- the protocols -----------------------------------------------------------------------------
class _FrequencyOracle(LDPProtocol):
    oracle = "grr"
    source = (
        "Wang, Blocki, Li, Jha, 'Locally Differentially Private Protocols for Frequency "
        "Estimation', USENIX Security 2017"
    )

    def __init__(self, domain: Domain, epsilon: float) -> None:
        super().__init__(domain, epsilon)
        domain.check_dense("a frequency oracle's estimate")
        self.c = check_positive_int(domain.size, "domain size (c)", minimum=2)

    @property
    def support_probabilities(self) -> tuple[float, float]:
        return support_probabilities(self.oracle, self.epsilon, self.c, getattr(self, "g", None))

    def variance(self, n: ArrayLike, count: ArrayLike = 0.0) -> NDArray[np.float64]:
        """Exact variance of one cell's count estimate from ``n`` reports (see module doc)."""
        return oracle_variance(
            self.oracle, self.epsilon, self.c, n, count, getattr(self, "g", None)
        )

    def _flat(self, codes: NDArray[np.int64]) -> NDArray[np.int64]:
        return self.domain.flatten(codes)

    def _estimate(self, state: Mapping[str, np.ndarray], n: int) -> Release:
        p, q = self.support_probabilities
        est = estimate_counts(state["support"], n, p, q).reshape(self.domain.shape)
        g = self.guarantee(private=True, n=n)
        return FrequencyRelease(self.domain, g, est, oracle=self.oracle, n_reports=n, p=p, q=q)


class GRR(_FrequencyOracle):
    """Generalised (k-ary) randomised response over the cells of ``domain``.

    Privacy: ε-LDP, p*/q* = e^ε exactly (Wang et al. 2017, "direct encoding"). Report: the cell
    index ``y``. Variance of a count: ``N(e^ε + c − 2)/(e^ε − 1)^2`` (leading term). Best for
    small domains (``c < 3e^ε + 2``).

    >>> import fugu
    >>> grr = fugu.ldp.GRR(fugu.Domain([fugu.Ordinal("v", 0, 3)]), epsilon=1.0)
    >>> rel = grr.simulate({"v": [0, 1, 1, 3] * 100}, rng=fugu.RandomSource(seed=0))
    >>> round(rel.counts.sum())
    400
    """

    name = "grr"
    oracle = "grr"
    summary = "generalised randomised response (small domains)"

    def report_columns(self) -> dict[str, ColumnSpec]:
        return {"y": "int"}

    def _perturb(
        self, codes: NDArray[np.int64], rng: RandomSource, groups: Any
    ) -> dict[str, np.ndarray]:
        return {"y": grr_perturb(self._flat(codes), self.c, self.epsilon, rng)}

    def _validate(self, columns: Mapping[str, np.ndarray]) -> NDArray[np.bool_]:
        y = columns["y"]
        return (y >= 0) & (y < self.c)

    def support(self, columns: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
        return {"support": grr_support(columns["y"], self.c)}


class OLH(_FrequencyOracle):
    """Optimised local hashing over the cells of ``domain`` with the portable XXH32 hash.

    Privacy: ε-LDP; given the (public, data-independent) seed, the report ``y`` is GRR over the
    ``g`` buckets, so p/q = e^ε exactly (Wang et al. 2017, Section 4.4). Report: ``seed``
    (uint32) and ``y`` in ``[0, g)``. ``g`` defaults to :func:`olh_g` (≈ e^ε + 1). Variance of a
    count ≈ ``N 4e^ε/(e^ε − 1)^2`` at the optimal g. Aggregation costs ``N·c`` hash evaluations
    (numba kernel when installed).
    """

    name = "olh"
    oracle = "olh"
    summary = "optimised local hashing (large domains)"

    def __init__(self, domain: Domain, epsilon: float, g: int | None = None) -> None:
        super().__init__(domain, epsilon)
        self.g = olh_g(self.epsilon) if g is None else check_positive_int(g, "g", minimum=2)
        if self.g > OLH_MAX_G:
            # the bucket (h * g) >> 32 and its bounds are computed in 64 bits
            raise InvalidParameterError(
                f"OLH needs g <= 2^31, got g={self.g}; the best g is about e^epsilon + 1 "
                f"({olh_g(self.epsilon)} here): leave g out to use it"
            )
        self.backend = "auto"

    def _params(self) -> dict[str, Any]:
        return {"g": self.g}

    def report_columns(self) -> dict[str, ColumnSpec]:
        return {"seed": "uint32", "y": "int"}

    def _perturb(
        self, codes: NDArray[np.int64], rng: RandomSource, groups: Any
    ) -> dict[str, np.ndarray]:
        seeds, y = olh_perturb(self._flat(codes), self.g, self.epsilon, rng)
        return {"seed": seeds, "y": y}

    def _validate(self, columns: Mapping[str, np.ndarray]) -> NDArray[np.bool_]:
        y = columns["y"]
        return (y >= 0) & (y < self.g)

    def support(self, columns: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
        return {
            "support": olh_support(
                columns["seed"], columns["y"], self.c, self.g, backend=self.backend
            )
        }


class OUE(_FrequencyOracle):
    """Optimised unary encoding over the cells of ``domain``.

    Privacy: ε-LDP; changing the value flips the distribution of two bits, with ratio
    (1/2)/(q) · (1−q)/(1/2) = e^ε (Wang et al. 2017, Section 4.4). Report: ``bits``, the packed
    c-bit vector. Variance of a count: ``N 4e^ε/(e^ε − 1)^2`` (leading term). Aggregation counts
    bits; reports cost c/8 bytes each.
    """

    name = "oue"
    oracle = "oue"
    summary = "optimised unary encoding (bit vectors)"

    def report_columns(self) -> dict[str, ColumnSpec]:
        return {"bits": ("bytes", (self.c + 7) // 8)}

    def _perturb(
        self, codes: NDArray[np.int64], rng: RandomSource, groups: Any
    ) -> dict[str, np.ndarray]:
        return {"bits": oue_perturb(self._flat(codes), self.c, self.epsilon, rng)}

    def _validate(self, columns: Mapping[str, np.ndarray]) -> NDArray[np.bool_]:
        pad = (-self.c) % 8
        if pad == 0:
            return np.ones(columns["bits"].shape[0], dtype=bool)
        mask = np.uint8((0xFF << (8 - pad)) & 0xFF)
        return (columns["bits"][:, -1] & mask) == 0

    def support(self, columns: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
        return {"support": oue_support(columns["bits"], self.c)}


def adaptive(domain: Domain, epsilon: float) -> GRR | OLH:
    """GRR or OLH, whichever has the smaller variance for this domain size (:func:`choose_oracle`).

    >>> import fugu
    >>> type(adaptive(fugu.Domain([fugu.Ordinal("v", 0, 3)]), 1.0)).__name__
    'GRR'
    """
    eps = check_ldp_epsilon(epsilon, "fugu.ldp.adaptive")
    return GRR(domain, eps) if choose_oracle(domain.size, eps) == "grr" else OLH(domain, eps)


# -- one oracle per user group -----------------------------------------------------------------
#: The most cells one group's oracle may have (cell indices and the samplers' bounds are int64).
MAX_GROUP_CELLS = 2**62


class GroupedOracle:
    """Frequency oracles for user groups: group ``j`` reports a value in ``[0, cells[j])``.

    Parameters
    ----------
    epsilon : float
    cells : sequence of int
        Domain size of each group's oracle.
    oracle : {"adaptive", "grr", "olh", "oue"}
        ``"adaptive"`` picks GRR or OLH per group by :func:`choose_oracle`.

    Report columns: ``group`` and ``seed``, ``y`` (GRR groups send ``seed = 0``), or
    ``group``, ``bits`` (packed to the widest group) for OUE. Support state (mergeable by sum):
    ``support`` — the groups' support counts concatenated (group ``j`` at
    ``offsets[j]:offsets[j+1]``) — and ``n_group``, the number of reports per group.
    :meth:`estimates` turns a state into unbiased per-group counts *of the group's users*;
    multiply by ``n / n_group[j]`` for the population.
    """

    def __init__(self, epsilon: float, cells: Sequence[int], oracle: str = "adaptive") -> None:
        self.epsilon = check_ldp_epsilon(epsilon, "a grouped frequency oracle")
        sizes = [check_positive_int(int(k), "cells", 1) for k in cells]
        too_big = [k for k in sizes if k > MAX_GROUP_CELLS]
        if too_big:
            raise InvalidParameterError(
                f"a group's oracle would have {max(too_big):,} cells, above the 2^62 a report "
                f"can index; measure fewer or coarser attributes per group"
            )
        self.cells = np.asarray(sizes, np.int64)
        if oracle not in ("adaptive", "grr", "olh", "oue"):
            raise InvalidParameterError(
                f"oracle must be 'adaptive', 'grr', 'olh' or 'oue', got {oracle!r}"
            )
        self.oracle = oracle
        self.kinds = [
            (choose_oracle(int(k), self.epsilon) if oracle == "adaptive" else oracle)
            for k in self.cells
        ]
        self.g = olh_g(self.epsilon)
        self.offsets = np.concatenate([[0], np.cumsum(self.cells)]).astype(np.int64)
        self.width = int((self.cells.max() + 7) // 8) if self.cells.size else 1
        self.backend = "auto"

    @property
    def m(self) -> int:
        return int(self.cells.size)

    def report_columns(self) -> dict[str, ColumnSpec]:
        if self.oracle == "oue":
            return {"group": "int", "bits": ("bytes", self.width)}
        return {"group": "int", "seed": "uint32", "y": "int"}

    def perturb(
        self, groups: NDArray[np.int64], values: NDArray[np.int64], rng: RandomSource
    ) -> dict[str, np.ndarray]:
        """Randomise each user's ``values[i]`` (in ``[0, cells[groups[i]])``) by their group's
        oracle (vectorised per oracle kind)."""
        n = groups.size
        if n and (np.any(values < 0) or np.any(values >= self.cells[groups])):
            raise InvalidParameterError("a value lies outside its group's oracle domain")
        if self.oracle == "oue":
            bits = np.zeros((n, self.width), dtype=np.uint8)
            for j in np.unique(groups):
                sel = np.flatnonzero(groups == j)
                b = oue_perturb(values[sel], int(self.cells[j]), self.epsilon, rng)
                bits[sel, : b.shape[1]] = b
            return {"group": groups, "bits": bits}
        seed = np.zeros(n, dtype=np.uint32)
        y = np.zeros(n, dtype=np.int64)
        kinds = np.array([k == "grr" for k in self.kinds], dtype=bool)
        is_grr = kinds[groups] if n else np.zeros(0, bool)
        sel = np.flatnonzero(is_grr)
        if sel.size:
            # GRR per group domain (vectorised over groups with per-user domain sizes)
            y[sel] = _randomised_response(values[sel], self.cells[groups[sel]], self.epsilon, rng)
        wide = self.cells[groups] > 2**32 if n else np.zeros(0, bool)
        for w in (False, True):
            sel = np.flatnonzero(~is_grr & (wide == w))
            if sel.size:
                s, yy = olh_perturb(values[sel], self.g, self.epsilon, rng, wide=w)
                seed[sel], y[sel] = s, yy
        return {"group": groups, "seed": seed, "y": y}

    def validate(self, columns: Mapping[str, np.ndarray]) -> NDArray[np.bool_]:
        grp = columns["group"]
        ok = (grp >= 0) & (grp < self.m)
        gi = np.where(ok, grp, 0)
        if self.oracle == "oue":
            # no bit beyond the group's domain may be set
            bits = columns["bits"]
            nbits = self.cells[gi]
            unpacked_len = self.width * 8
            for lo in range(0, grp.size, 1 << 16):
                u = np.unpackbits(bits[lo : lo + (1 << 16)], axis=1, bitorder="little")
                beyond = np.arange(unpacked_len)[None, :] >= nbits[lo : lo + (1 << 16), None]
                ok[lo : lo + (1 << 16)] &= ~(u.astype(bool) & beyond).any(axis=1)
            return ok
        y = columns["y"]
        bound = np.where(
            np.array([k == "grr" for k in self.kinds], bool)[gi], self.cells[gi], self.g
        )
        return ok & (y >= 0) & (y < bound)

    def support(
        self, columns: Mapping[str, np.ndarray], groups: Sequence[int] | None = None
    ) -> dict[str, np.ndarray]:
        """Support counts for every group (``groups`` restricts the work to some groups; the
        others get zeros)."""
        grp = np.asarray(columns["group"], dtype=np.int64)
        out = np.zeros(int(self.offsets[-1]), dtype=np.int64)
        n_group = np.bincount(grp, minlength=self.m).astype(np.int64)
        order = np.argsort(grp, kind="stable")
        starts = np.searchsorted(grp[order], np.arange(self.m + 1))
        todo = range(self.m) if groups is None else groups
        for j in todo:
            rows = order[starts[j] : starts[j + 1]]
            if rows.size == 0:
                continue
            k = int(self.cells[j])
            sl = slice(int(self.offsets[j]), int(self.offsets[j + 1]))
            kind = self.kinds[j]
            if kind == "oue":
                out[sl] = oue_support(columns["bits"][rows], k)
            elif kind == "grr":
                out[sl] = grr_support(columns["y"][rows], k)
            else:
                out[sl] = olh_support(
                    columns["seed"][rows], columns["y"][rows], k, self.g, backend=self.backend
                )
        return {"support": out, "n_group": n_group}

    def probabilities(self, j: int) -> tuple[float, float]:
        return support_probabilities(self.kinds[j], self.epsilon, int(self.cells[j]), self.g)

    def estimates(self, state: Mapping[str, np.ndarray]) -> list[NDArray[np.float64]]:
        """Unbiased count estimates of each group's values among that group's users."""
        out = []
        for j in range(self.m):
            p, q = self.probabilities(j)
            s = state["support"][self.offsets[j] : self.offsets[j + 1]]
            out.append(estimate_counts(s, state["n_group"][j], p, q))
        return out

    def cell_variance(self, j: int, n_group: float) -> float:
        """Leading-term variance of one count estimate of group ``j`` (its own users)."""
        return float(
            oracle_variance(self.kinds[j], self.epsilon, int(self.cells[j]), n_group, 0.0, self.g)
        )
