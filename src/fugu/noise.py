"""Secure noise: random sources and exact discrete samplers.

fugu never adds floating-point Laplace noise to private data (Mironov 2012 showed that the low bits
of ``x + Lap(b)`` computed in floating point reveal ``x``). Instead:

* integer-valued measurements (counts) get **exact discrete Laplace** (two-sided geometric)
  noise: every outcome is decided by comparing random words with exact integers, so the sampled
  distribution is the discrete Laplace distribution itself, not a floating-point approximation;
* real-valued measurements are rounded to a public power-of-two grid and get discrete Laplace
  noise on that grid, with the sensitivity increased by the rounding slack (the approach of
  Google's "Secure Noise Generation" note); see :func:`grid_laplace`.

Two exact samplers draw the same distribution: a **table sampler** (the default for groups of
256+ samples) inverts one 32-bit random word per table through a 2^16-cell lookup — |X| is 0 or
``1 + 2^e·T + L`` with T and the digits of L independent, each from its own table — and settles
the rare words that tie with a table entry (probability 2^-32 each) by drawing more bits and
comparing with the exact value to as many bits as needed; and the **reference sampler**
(Canonne, Kamath and Steinke, "The Discrete Gaussian for Differential Privacy", NeurIPS 2020,
Algorithms 1 and 2, vectorised) for small groups and many distinct scales. Tables are built once
per scale (0.5-50 ms) and cached. See ``docs/randomness.md``.

Random bits: AES-256-CTR keyed from the operating system's CSPRNG (``os.urandom``), one stream
per thread, re-keyed every 2^30 bytes and in every forked child; words are encrypted in bulk
straight into numpy arrays. A seeded :class:`RandomSource` (numpy's PCG64) exists for
reproducible tests and experiments; releases made with it are marked as not private.

Example
-------
>>> import fugu
>>> rng = fugu.RandomSource(seed=1)
>>> noise = fugu.noise.discrete_laplace(2.0, size=5, rng=rng)
>>> noise.dtype, noise.shape
(dtype('int64'), (5,))
"""

from __future__ import annotations

import functools
import math
import os
import threading
from collections.abc import Sequence
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

import numpy as np
from numpy.typing import ArrayLike, NDArray

from .errors import InvalidParameterError, check_epsilon

__all__ = [
    "RandomSource",
    "default_source",
    "discrete_laplace",
    "discrete_laplace_pmf",
    "discrete_laplace_variance",
    "geometric_mechanism",
    "grid_granularity",
    "grid_laplace",
    "grid_capacity",
    "grid_exact_cap",
    "GRID_EXACT_UNITS",
    "grid_scale",
    "GridNoise",
    "MAX_SCALE",
    "noise_scale",
    "SHARE_SLACK",
    "round_dyadic",
    "noise_scales",
    "PowerTailGrid",
    "grid_power_tail",
    "power_tail_integer",
    "power_tail_pmf",
    "power_tail_variance",
]

#: Largest noise scale (in units of the measurement grid) the samplers accept. Beyond it the
#: integer arithmetic could overflow; mechanisms that can produce such scales (e.g. the Recursive
#: Mechanism's Δ̂) must check against it.
MAX_SCALE = float(2**52)

#: Largest ``|value| / grid step`` that :func:`grid_laplace` accepts: 2**62. The grid value and
#: its noise are added exactly in int64 (the noise scale is at most ``MAX_SCALE = 2**52`` grid
#: units, so ``|noise| >= 2**62`` has probability about ``e**-1024``). Up to 2**53 grid units the
#: released double is that exact sum times the grid step; beyond, it is the exact sum rounded
#: once to a double — post-processing of the ε-DP integer, so privacy is unaffected.
GRID_MAX_UNITS = float(2**62)

_U64 = np.uint64
_BLOCK = 1 << 16  # small draws are served from a per-thread buffer of this many 64-bit words

#: Bumped in every forked child (``os.register_at_fork``): per-thread generators and buffers made
#: under an older value belong to the parent and are discarded before any further use.
_FORK_GENERATION = 0


def _after_fork_in_child() -> None:
    global _FORK_GENERATION
    _FORK_GENERATION += 1


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork_in_child)


def _generation() -> tuple[int, int]:
    """Who may use the per-thread streams and buffers: the fork generation and the process id.

    The process id catches forks that bypass ``os.register_at_fork`` (``fork()`` called from C,
    e.g. through ctypes or an extension module, runs no Python hooks): a child made that way
    would otherwise replay its parent's AES-CTR stream and buffered words.
    """
    return _FORK_GENERATION, os.getpid()


class _CtrDrbg:
    """AES-256 in counter mode keyed from the OS CSPRNG: a cryptographically secure bit stream
    (the construction of NIST SP 800-90A's CTR_DRBG, without its derivation function) that is
    several times faster than ``os.urandom`` for the millions of words the samplers consume.

    One instance per thread (never shared: the cipher object is not thread-safe); the key is
    re-drawn from ``os.urandom`` after every 2**30 bytes, and a forked child builds new instances
    (see :func:`_thread_drbg`), so no two threads or processes ever share a stream.
    """

    RESEED_BYTES = 1 << 30
    CHUNK = 1 << 20
    _ZEROS = memoryview(bytes(CHUNK))

    def __init__(self) -> None:
        self._encryptor: Any = None
        self._used = 0

    def _rekey(self) -> None:
        from cryptography.hazmat.primitives.ciphers import Cipher, algorithms, modes

        cipher = Cipher(algorithms.AES(os.urandom(32)), modes.CTR(os.urandom(16)))
        self._encryptor = cipher.encryptor()
        self._used = 0

    def words(self, n: int) -> NDArray[np.uint64]:
        """``n`` uniform 64-bit words, encrypted straight into a fresh array (no extra copy)."""
        nbytes = 8 * n
        out = np.empty(nbytes + 16, dtype=np.uint8)  # update_into wants 15 bytes of slack
        view = out.data
        off = 0
        while off < nbytes:
            size = min(self.CHUNK, nbytes - off)
            if self._encryptor is None or self._used + size > self.RESEED_BYTES:
                self._rekey()
            self._used += size
            self._encryptor.update_into(self._ZEROS[:size], view[off : off + size + 15])
            off += size
        return out[:nbytes].view(_U64)


def _urandom_words(n: int) -> NDArray[np.uint64]:
    return np.frombuffer(os.urandom(8 * n), dtype=_U64)


try:
    import cryptography.hazmat.primitives.ciphers  # noqa: F401

    _HAVE_AES = True
except ImportError:  # pragma: no cover - cryptography is a dependency; fall back regardless
    _HAVE_AES = False

_THREAD = threading.local()


def _thread_drbg() -> Any:
    """This thread's secure word generator (created on first use and after a fork)."""
    state = _THREAD
    gen = _generation()
    if getattr(state, "generation", None) != gen:
        state.words = _CtrDrbg().words if _HAVE_AES else _urandom_words
        state.generation = gen
    return state.words


def _secure_bytes(nbytes: int) -> bytes:
    """Secure random bytes from this thread's AES-CTR stream (kept for callers of the old name)."""
    return _thread_drbg()((nbytes + 7) // 8).tobytes()[:nbytes]


class RandomSource:
    """Where fugu's randomness comes from.

    ``RandomSource()`` (the default everywhere) reads the operating system's CSPRNG and its
    releases are private. ``RandomSource(seed=...)`` is a reproducible pseudo-random source
    (numpy's PCG64) for tests and experiments: **its releases are not private** and are marked so
    in their guarantee.

    A secure source is safe to share between threads and across ``fork``: every thread draws
    from its own AES-CTR stream keyed by ``os.urandom`` (and its own small-draw buffer), and a
    forked child discards everything inherited and re-keys, so no two threads or processes ever
    see the same bits. A seeded source is thread-safe too (numpy's bit generator holds a lock),
    but which thread gets which numbers then depends on scheduling.

    Parameters
    ----------
    seed : int, optional
        Seed for a reproducible, non-private source.

    Examples
    --------
    >>> from fugu import RandomSource
    >>> RandomSource().private, RandomSource(seed=7).private
    (True, False)
    >>> a, b = RandomSource(seed=7), RandomSource(seed=7)
    >>> a.integers(10, size=3).tolist() == b.integers(10, size=3).tolist()
    True
    """

    def __init__(self, seed: int | None = None) -> None:
        if seed is not None and (isinstance(seed, bool) or not isinstance(seed, int | np.integer)):
            raise InvalidParameterError(f"seed must be an integer or None, got {seed!r}")
        if seed is not None and int(seed) < 0:
            raise InvalidParameterError(
                f"seed must be a non-negative integer (numpy's PCG64 takes seeds >= 0), got "
                f"{int(seed)}; leave it out for the secure source"
            )
        self.seed = None if seed is None else int(seed)
        self._gen: np.random.Generator | None = (
            None if seed is None else np.random.Generator(np.random.PCG64(self.seed))
        )
        self._local = threading.local()  # per-thread buffer of secure words

    def __getstate__(self) -> dict[str, Any]:
        state = dict(self.__dict__)
        del state["_local"]  # buffered secure words never travel
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        self._local = threading.local()

    @property
    def private(self) -> bool:
        """True when the bits come from the OS CSPRNG."""
        return self._gen is None

    def __repr__(self) -> str:
        return "RandomSource()" if self.private else f"RandomSource(seed={self.seed})"

    # -- raw bits ---------------------------------------------------------------------------
    def bits64(self, n: int) -> NDArray[np.uint64]:
        """Return ``n`` independent uniform 64-bit words."""
        if n <= 0:
            return np.empty(0, dtype=_U64)
        if self._gen is not None:
            return self._gen.bit_generator.random_raw(n).astype(_U64, copy=False)
        if n >= _BLOCK:
            return _thread_drbg()(n)
        try:
            state = self._local.state  # this thread's [buffer, next position, _generation()]
        except AttributeError:
            state = self._local.state = [None, _BLOCK, None]
        pos = state[1]
        gen = _generation()  # also catches a fork() from C, which runs no at-fork hook
        if state[2] != gen or pos + n > _BLOCK:
            # refill; a forked child never reuses the parent's buffered words
            state[0] = _thread_drbg()(_BLOCK)
            state[2] = gen
            pos = 0
        state[1] = pos + n
        words: NDArray[np.uint64] = state[0][pos : pos + n]
        return words

    # -- exact integer draws ----------------------------------------------------------------
    def bits32(self, n: int) -> NDArray[np.uint32]:
        """Return ``n`` independent uniform 32-bit words."""
        words = self.bits64((n + 1) // 2)
        return words.view(np.uint32)[:n]

    def below(self, bound: ArrayLike) -> NDArray[np.uint64]:
        """Uniform integers in ``[0, bound)``, exactly (rejection sampling), elementwise.

        ``bound`` is an array of positive integers below 2**63.
        """
        bound = np.asarray(bound, dtype=_U64)
        flat = bound.reshape(-1)
        if flat.size == 0:
            return np.empty(bound.shape, dtype=_U64)
        top = int(flat.max())
        if int(flat.min()) == 0:
            raise InvalidParameterError("bound must be positive")
        if top < 1 << 24:
            out = self._below_words(flat.astype(np.uint32), np.uint32, self.bits32).astype(_U64)
        else:
            out = self._below_words(flat, _U64, self.bits64)
        return out.reshape(bound.shape)

    def below_scalar(self, bound: int, n: int) -> NDArray[np.uint64]:
        """``n`` uniform integers in ``[0, bound)`` for one bound (exact rejection sampling)."""
        if bound < 1:
            raise InvalidParameterError("bound must be positive")
        if bound < 1 << 24:
            word: Any = np.uint32
            draw: Any = self.bits32
            width = 32
        else:
            word, draw, width = _U64, self.bits64, 64
        b = word(bound)
        reject_below = word((1 << width) % bound)
        r = draw(n)
        out = r % b
        bad = np.flatnonzero(r < reject_below)
        while bad.size:
            r = draw(bad.size)
            ok = r >= reject_below
            out[bad[ok]] = r[ok] % b
            bad = bad[~ok]
        return out.astype(_U64, copy=False)

    def fair_bits(self, n: int) -> NDArray[np.bool_]:
        """``n`` independent fair coin flips (8 per random byte)."""
        return np.unpackbits(self.bits64((n + 63) // 64).view(np.uint8))[:n].astype(bool)

    @staticmethod
    def _below_words(flat: np.ndarray, word: Any, draw: Any) -> np.ndarray:
        # Accept r when r >= 2**w mod b (computed in w-bit arithmetic as (2**w - b) mod b): the
        # accepted range holds a multiple of b values, so r mod b is exactly uniform.
        reject_below = (word(0) - flat) % flat
        r = draw(flat.size)
        out = r % flat
        bad = np.flatnonzero(r < reject_below)
        while bad.size:  # probability below b / 2**w per element
            r = draw(bad.size)
            ok = r >= reject_below[bad]
            out[bad[ok]] = r[ok] % flat[bad[ok]]
            bad = bad[~ok]
        return out

    def integers(self, high: int, size: int | tuple[int, ...] = ()) -> NDArray[np.int64]:
        """Uniform integers in ``[0, high)`` of the given shape."""
        if high < 1:
            raise InvalidParameterError(f"high must be >= 1, got {high}")
        shape = (size,) if isinstance(size, int) else tuple(size)
        n = int(np.prod(shape)) if shape else 1
        vals = self.below(np.full(n, high, dtype=_U64)).astype(np.int64)
        return vals.reshape(shape) if shape else vals.reshape(())

    def bernoulli_fraction(self, num: ArrayLike, den: ArrayLike) -> NDArray[np.bool_]:
        """Exact Bernoulli(num/den) for integer arrays with 0 <= num <= den."""
        num = np.asarray(num, dtype=_U64)
        return self.below(den) < num

    def random(self, size: int | tuple[int, ...] = ()) -> NDArray[np.float64]:
        """Uniform floats in [0, 1) with 53 random bits (for public randomness and LDP clients)."""
        shape = (size,) if isinstance(size, int) else tuple(size)
        n = int(np.prod(shape)) if shape else 1
        vals = (self.bits64(n) >> _U64(11)).astype(np.float64) * (1.0 / 2**53)
        return vals.reshape(shape) if shape else vals.reshape(())

    def bernoulli(
        self, p: ArrayLike, size: int | tuple[int, ...] | None = None
    ) -> NDArray[np.bool_]:
        """Bernoulli(p) with p given as a double: P(True) = floor(p * 2**64) / 2**64.

        The probability is exact for the double ``p``; the only inexactness is the double
        rounding of ``p`` itself (relative error below 1e-16).
        """
        p_arr = np.asarray(p, dtype=np.float64)
        if size is not None:
            p_arr = np.broadcast_to(p_arr, (size,) if isinstance(size, int) else size)
        if np.any(~np.isfinite(p_arr)) or np.any(p_arr < 0) or np.any(p_arr > 1):
            raise InvalidParameterError("probabilities must lie in [0, 1]")
        flat = p_arr.reshape(-1)
        # p * 2**64 as an exact integer threshold; p == 1 maps to "always".
        thresholds = np.minimum(np.ldexp(flat, 64), float(2**64 - 2048))
        always = flat >= 1.0
        thr = thresholds.astype(_U64)
        res = (self.bits64(flat.size) < thr) | always
        return res.reshape(p_arr.shape)

    def numpy_generator(self) -> np.random.Generator:
        """A numpy Generator for *public* randomness (workloads, initial centres, permutations).

        Seeded from this source, so a seeded source gives reproducible results. Never use it for
        privacy noise: it is not a cryptographic generator.
        """
        if self._gen is not None:
            return np.random.Generator(np.random.PCG64(self._gen.bit_generator.random_raw(1)[0]))
        return np.random.Generator(np.random.PCG64(int.from_bytes(os.urandom(16), "little")))

    def spawn(self) -> RandomSource:
        """An independent source of the same kind (seeded sources stay reproducible)."""
        if self._gen is None:
            return RandomSource()
        return RandomSource(seed=int(self._gen.bit_generator.random_raw(1)[0] >> _U64(1)))


#: The shared secure source (safe across threads and forks; see :class:`RandomSource`).
_DEFAULT = RandomSource()


def default_source(rng: RandomSource | None = None) -> RandomSource:
    """Return ``rng`` or, when it is None, the shared secure source."""
    if rng is not None:
        if not isinstance(rng, RandomSource):
            from .errors import InvalidTypeError

            raise InvalidTypeError(
                f"rng must be a fugu.RandomSource, got {type(rng).__name__}; use "
                f"fugu.RandomSource() (secure) or fugu.RandomSource(seed=...) (reproducible, "
                f"not private)"
            )
        return rng
    return _DEFAULT


# -- exact samplers (Canonne, Kamath, Steinke 2020) -----------------------------------------
def _bernoulli_exp_neg(
    rng: RandomSource, num: NDArray[np.uint64], den: int | NDArray[np.uint64]
) -> NDArray[np.bool_]:
    """Exact Bernoulli(exp(-num/den)) for 0 <= num <= den (CKS Algorithm 1, gamma in [0, 1]).

    Draw A_K ~ Bernoulli(gamma / K) for K = 1, 2, ... until the first failure; the result is 1
    when that K is odd (P = sum_j (-gamma)^j / j! = exp(-gamma)). ``den`` is one integer (the
    fast path: one rejection bound per round) or an array with one denominator per element.
    """
    if isinstance(den, np.ndarray):
        per_element = den

        def draw(todo: NDArray[np.intp], kk: int) -> NDArray[np.uint64]:
            return rng.below(per_element[todo] * _U64(kk))

    else:
        scalar = int(den)

        def draw(todo: NDArray[np.intp], kk: int) -> NDArray[np.uint64]:
            return rng.below_scalar(scalar * kk, todo.size)

    k = np.ones(num.size, dtype=_U64)
    todo = np.arange(num.size)
    kk = 0
    while todo.size:
        kk += 1
        k[todo] = kk
        a = draw(todo, kk) < num[todo]
        todo = todo[a]
    return (k & _U64(1)) == _U64(1)


def _bernoulli_exp_minus_one(rng: RandomSource, n: int) -> NDArray[np.bool_]:
    """Exact Bernoulli(exp(-1)): Algorithm 1 with gamma = 1, whose first trial always succeeds."""
    k = np.full(n, 2, dtype=_U64)
    todo = np.flatnonzero(rng.fair_bits(n))  # Bernoulli(1/2) at K = 2
    kk = 2
    while todo.size:
        kk += 1
        k[todo] = kk
        a = rng.below_scalar(kk, todo.size) == 0  # Bernoulli(1 / K)
        todo = todo[a]
    return (k & _U64(1)) == _U64(1)


def _rational_scale(scale: NDArray[np.float64]) -> tuple[NDArray[np.uint64], NDArray[np.uint64]]:
    """Write each scale as t/s >= scale with s a power of two and t carrying >= 20 bits."""
    if np.any(~np.isfinite(scale)) or np.any(scale <= 0):
        raise InvalidParameterError(f"noise scale must be finite and > 0, got {scale!r}")
    if np.any(scale > MAX_SCALE):
        raise InvalidParameterError(
            f"noise scale {float(np.max(scale)):.3g} exceeds the sampler's limit {MAX_SCALE:.3g}; "
            f"the release would be pure noise — raise epsilon or bound the sensitivity"
        )
    exp2 = np.floor(np.log2(scale)).astype(np.int64)
    k = np.clip(20 - exp2, 0, 60)
    s = np.ldexp(1.0, k)
    t = np.ceil(scale * s)  # exact: scale * 2**k is exact in binary floating point
    return t.astype(_U64), s.astype(_U64)


# -- fast exact sampler: table-driven inversion of 32-bit words ------------------------------
#
# Every random choice below is "which interval of [0, 1) holds a uniform U", with interval ends
# θ (transcendental numbers) known to any precision. U's first 32 bits come from one random
# word; the outcome is decided exactly by comparing them with floor(θ·2^32) — except when the
# word *equals* that integer (probability 2^-32 per end), and then further random words extend
# U and θ is recomputed to more bits until the comparison is decided. So the sampled
# distribution is the exact one: outcomes are decided by integer comparisons only (table
# entries first computed in float64 are certified by a rounding-error bound, or recomputed
# exactly with decimal interval arithmetic).

_Q = 128  # fixed-point bits of the interval arithmetic used to build tables
_CELL_BITS = 16  # a table looks up the top 16 bits of each word ...
_CELLS = 1 << _CELL_BITS
_LOW = np.uint32(_CELLS - 1)  # ... and compares the low 16 bits with at most one interval end
_NONE = np.uint32(_CELLS)  # "no interval end in this cell"
_THR_MASK = np.uint32((1 << (_CELL_BITS + 1)) - 1)
_DIGIT_BITS = 15  # the low part of a large-scale geometric is drawn 15 bits per word
_TOP_SCALE_BITS = 11  # the top table covers scales below 2^12 (in units of its step)
_TAIL_BITS = 33  # top-table ends are computed until the mass left is below 2^-33 (then cut)


def _exp_interval(num: int, den: int, q: int) -> tuple[int, int]:
    """Integers lo <= exp(-num/den)·2^q <= hi (decimal: exp is correctly rounded)."""
    import decimal

    prec = int(0.302 * q) + 40 + len(str(num))
    with decimal.localcontext() as ctx:
        ctx.prec = prec
        x = decimal.Decimal(num) / decimal.Decimal(den)
        val = (-x).exp() * (decimal.Decimal(2) ** q)
        # two correctly rounded steps (division, exp) of relative error 10^(1-prec) each, the
        # first amplified by x; widened 100-fold for the final multiplication's rounding.
        err = val * (x + 2) * decimal.Decimal(10) ** (3 - prec)
        lo = int((val - err).to_integral_value(rounding=decimal.ROUND_FLOOR))
        hi = int((val + err).to_integral_value(rounding=decimal.ROUND_CEILING))
    return max(lo, 0), hi


def _div_floor(a: int, b: int) -> int:
    return a // b


def _div_ceil(a: int, b: int) -> int:
    return -((-a) // b)


class _Inversion:
    """Sample the index of the interval of [0, 1) holding a uniform U, for increasing interval
    ends ``θ_0 < θ_1 < ... < θ_(m-1)`` (outcome ``o = #{i : θ_i <= U}`` in ``0..m``).

    Built from the exact integers ``floor(θ_i·2^32)``, at most one per 16-bit cell (callers
    ensure it). One gather per word: the table entry of the word's top 16 bits packs the
    outcome at the cell's start (bits 17 and up) and the low 16 bits of the cell's interval end
    (65536 when it has none). ``theta(i, q)`` returns integers ``lo <= θ_i·2^q <= hi`` at any
    precision ``q``, for the words that equal an end's 32 bits (probability 2^-32 each).
    """

    def __init__(self, floors: list[int], theta: Any) -> None:
        self.floors = np.asarray(floors, dtype=np.int64)
        self.theta = theta
        cells = (self.floors >> _CELL_BITS).astype(np.intp)
        if cells.size > 1 and np.any(cells[1:] == cells[:-1]):
            raise AssertionError("two interval ends in one cell")  # pragma: no cover
        if self.floors.size >= 1 << (32 - _CELL_BITS - 1):
            raise AssertionError("too many outcomes for a packed table")  # pragma: no cover
        starts = np.arange(_CELLS, dtype=np.int64) << _CELL_BITS
        base = np.searchsorted(self.floors, starts, side="left").astype(np.uint32)
        thr = np.full(_CELLS, _NONE, dtype=np.uint32)
        thr[cells] = (self.floors & int(_LOW)).astype(np.uint32)
        self.entry = (base << np.uint32(_CELL_BITS + 1)) | thr
        # Near-uniform tables (the digits): with 2^d outcomes and every end k within its own
        # slot, k·2^(32-d) <= floor(θ_k·2^32) < (k+1)·2^(32-d), the outcome is the word's top d
        # bits c, minus one when the low bits fall below end c: a gather from a 2^d table.
        m = self.floors.size + 1
        self.slot_bits = 0
        if m >= 2 and m & (m - 1) == 0:
            d = m.bit_length() - 1
            k = np.arange(1, m, dtype=np.int64)
            frac = self.floors - (k << (32 - d))
            if frac.min() >= 0 and frac.max() < 1 << (32 - d):
                self.slot_bits = 32 - d
                self.slot_end = np.concatenate([[0], frac + 1]).astype(np.uint32)

    def draw(self, rng: RandomSource, words: NDArray[np.uint32]) -> NDArray[np.uint32]:
        """Outcomes for the given uniform words (one word each; extra words only when undecided)."""
        if self.slot_bits:
            return self._draw_slots(rng, words)
        entry = self.entry[words >> np.uint32(_CELL_BITS)]
        low = words & _LOW
        thr = entry & _THR_MASK
        out = entry >> np.uint32(_CELL_BITS + 1)
        out += low > thr
        tied = np.flatnonzero(low == thr)  # U's 32 bits equal floor(θ_i·2^32)
        for j in tied:
            v = int(words[j])
            i = int(np.searchsorted(self.floors, v, side="left"))
            out[j] = i + self._resolve(rng, v, i, i + 1)
        return out

    def _draw_slots(self, rng: RandomSource, words: NDArray[np.uint32]) -> NDArray[np.uint32]:
        """The near-uniform form: slot c = top bits; end c (if c >= 1) sits in slot c at
        offset ``slot_end[c] - 1``; the outcome is c, or c - 1 below that offset."""
        slot = words >> np.uint32(self.slot_bits)
        low = words & np.uint32((1 << self.slot_bits) - 1)
        end = self.slot_end[slot]
        out = slot - (low < end)
        end -= low  # wraps unless low <= end; equals 1 exactly on a tie with end c
        for j in np.flatnonzero(end == 1):
            v, i = int(words[j]), int(slot[j]) - 1
            out[j] = i + self._resolve(rng, v, i, i + 1)
        return out

    def _resolve(self, rng: RandomSource, v: int, first: int, last: int) -> int:
        """How many θ_i (i in [first, last), all with floor(θ_i·2^32) = v) are <= U, where U
        starts with the 32 bits v: draw more bits of U until each comparison is decided."""
        prefix, q = v, 32
        count = 0
        for i in range(first, last):
            while True:
                lo, hi = self.theta(i, q)
                if prefix + 1 <= lo:  # U < prefix + 1 <= θ: U is below θ_i (and the rest)
                    return count
                if prefix >= hi:  # U >= θ_i
                    count += 1
                    break
                prefix = (prefix << 64) | int(rng.bits64(1)[0])
                q += 64
        return count


def _theta_top(t: int, s: int, e: int, q: int) -> Any:
    """Interval ends of the top table: θ_i = 1 - w·P^(i-1), w = 2p/(1+p), P = p^(2^e)."""

    @functools.lru_cache(maxsize=256)
    def theta(i: int, qq: int) -> tuple[int, int]:
        qe = qq + 8
        one = 1 << qe
        p_lo, p_hi = _exp_interval(s, t, qe)
        w_lo = _div_floor(2 * p_lo * one, one + p_hi)
        w_hi = _div_ceil(2 * p_hi * one, one + p_lo)
        pw_lo, pw_hi = _exp_interval(i * (s << e), t, qe)
        lo = one - _div_ceil(w_hi * pw_hi, one)
        hi = one - _div_floor(w_lo * pw_lo, one)
        return lo >> 8, _div_ceil(hi, 256)

    return theta


def _theta_digit(t: int, s: int, o: int, n: int) -> Any:
    """Interval ends of a digit table: θ_k = (1 - r^k)/(1 - r^n), r = p^(2^o), k = 1..n-1."""

    @functools.lru_cache(maxsize=256)
    def theta(i: int, qq: int) -> tuple[int, int]:
        k = i + 1
        qe = qq + 8 + 70  # 1 - r^k may cancel up to ~64 bits
        one = 1 << qe
        a_lo, a_hi = _exp_interval(k * (s << o), t, qe)
        b_lo, b_hi = _exp_interval(n * (s << o), t, qe)
        lo = _div_floor((one - a_hi) * one, one - b_lo)
        hi = _div_ceil((one - a_lo) * one, one - b_hi)
        shift = qe - qq
        return lo >> shift, _div_ceil(hi, 1 << shift)

    return theta


def _floor_exact(theta: Any, i: int) -> int:
    """floor(θ_i·2^32) from ever more precise bounds (θ_i is irrational: this ends)."""
    q = 2 * _Q
    while True:
        lo, hi = theta(i, q)
        if lo >> (q - 32) == hi >> (q - 32):
            return int(lo >> (q - 32))
        q *= 2


#: Relative error bound used when table ends are first computed in float64 (the true bound of
#: the computations below is under 2^-47; an end whose floor this much error could change is
#: recomputed exactly with :func:`_floor_exact`).
_FLOAT_SLACK = 2.0**-44


def _exp_float(num: int, den: int) -> float:
    """exp(-num/den) rounded to a double (decimal at 40 digits, then one correct rounding)."""
    import decimal

    with decimal.localcontext() as ctx:
        ctx.prec = 40
        return float((-(decimal.Decimal(num) / decimal.Decimal(den))).exp())


def _certain_floors(v: NDArray[np.float64], theta: Any, first: int = 0) -> NDArray[np.int64]:
    """floor(v) where v carries relative error below _FLOAT_SLACK; undecided ones exactly.

    ``theta(first + i, q)`` must bound the same quantity as ``v[i]`` (times 2^(q-32)).
    """
    lo = np.floor(v * (1 - _FLOAT_SLACK))
    hi = np.floor(v * (1 + _FLOAT_SLACK))
    out = lo.astype(np.int64)
    for i in np.flatnonzero(lo != hi):
        out[i] = _floor_exact(theta, first + int(i))
    return out


def _top_floors(t: int, s: int, e: int, theta: Any) -> NDArray[np.int64]:
    """floor(θ_i·2^32), θ_i = 1 - w·P^i, for i = 0..K_max (mass beyond below 2^-33).

    v_i = w·P^i·2^32 is a product of correctly rounded doubles — w and P^(2^j) (from 40-digit
    decimal) and at most 2·17 rounded multiplications — so its relative error is below
    40·2^-53 < 2^-47; floor(θ_i·2^32) = 2^32 - 1 - floor(v_i) since v_i is irrational.
    """
    k_max = max(1, math.ceil((_TAIL_BITS * math.log(2)) * t / (s << e)) + 1)
    import decimal

    with decimal.localcontext() as ctx:
        ctx.prec = 40
        p = (-(decimal.Decimal(s) / decimal.Decimal(t))).exp()
        w = float(2 * p / (1 + p))
    i = np.arange(k_max + 1, dtype=np.int64)
    v = np.full(i.size, w * 2.0**32)
    for j in range(int(k_max).bit_length()):
        base = _exp_float((s << e) << j, t)  # P^(2^j)
        sel = ((i >> j) & 1).astype(bool)
        v[sel] *= base
    # floor(θ·2^32) = 2^32 - ceil(v) = 2^32 - 1 - floor(v); theta bounds θ, so flip for v
    fl = _certain_floors(v, lambda k, q: _flip(theta, k, q))
    return np.int64(2**32 - 1) - fl


def _flip(theta: Any, i: int, q: int) -> tuple[int, int]:
    """Bounds of (1 - θ_i)·2^q from bounds of θ_i·2^q, shifted so floors line up with 2^32."""
    lo, hi = theta(i, q)
    one = 1 << q
    return one - hi, one - lo


def _digit_floors(t: int, s: int, o: int, d: int, theta: Any) -> NDArray[np.int64]:
    """floor(θ_k·2^32), θ_k = (1 - r^k)/(1 - r^n), r = exp(-x), x = s·2^o/t, for k = 1..n-1.

    With g(y) = (1 - e^-y)/y, θ_k = (k/n)·g(kx)/g(nx) and nx <= 2^-11, so θ_k exceeds k/n by
    δ_k = (k/n)(g(kx) - g(nx))/g(nx) > 0, and g(kx) - g(nx) = Σ_m (-x)^(m+1)·... is a series
    whose terms fall by 2^-11 each: δ_k·2^32 is computed with relative error below 2^-48, and
    floor(θ_k·2^32) = k·2^(32-d) + floor(δ_k·2^32).
    """
    n = 1 << d
    x = float(s << o) / float(t)
    k = np.arange(1, n, dtype=np.float64)
    nf = float(n)
    facts = [2.0, 6.0, 24.0, 120.0, 720.0, 5040.0]
    # D = Σ_{m=1..6} (-1)^(m+1) x^m (n^m - k^m)/(m+1)!, by Horner in x
    diff = [nf**m - k**m for m in range(1, 7)]
    acc = diff[5] / facts[5]
    for m in range(4, -1, -1):
        acc = diff[m] / facts[m] - x * acc
    big_d = x * acc
    y = nf * x
    g_n = 1.0 - y * (1 / 2 - y * (1 / 6 - y * (1 / 24 - y * (1 / 120 - y / 720))))
    scale = k * 2.0 ** (32 - d)
    delta = scale * big_d / g_n
    frac = _certain_floors(delta, lambda i, q: _minus_grid(theta, i, q, d))
    return scale.astype(np.int64) + frac


def _minus_grid(theta: Any, i: int, q: int, d: int) -> tuple[int, int]:
    """Bounds of (θ_k - k/n)·2^q from bounds of θ_k·2^q (k = i + 1, n = 2^d)."""
    lo, hi = theta(i, q)
    grid = (i + 1) << (q - d)
    return lo - grid, hi - grid


class _LaplaceTables:
    """Exact tables for discrete Laplace with p = exp(-s/t) (scale t/s).

    |X| is 0 with probability (1-p)/(1+p), otherwise 1 + G with G ~ Geometric(p) (P(G=g) ∝
    p^g); the sign is a fair bit. G = 2^e·T + L with T ~ Geometric(p^(2^e)) and L < 2^e: as
    p^(2^e·T + L) factors over T and over the digits of L, T and the digits are independent,
    digit D_j (bits o_j .. o_j + d_j of L) with P(d) ∝ (p^(2^o_j))^d on [0, 2^d_j). ``e`` makes
    T's scale lie in [2^11, 2^12) (e = 0 below scale 2^12: then one table does all).

    The top table's outcomes are 0 (|X| = 0), 1 + T for T < K, and K + 1 (T >= K). K is where
    two interval ends would share a 16-bit cell (tail mass below about 6 %); T >= K is
    resolved by memorylessness, T = K + T' with T' a fresh top draw conditioned on T' existing.
    """

    def __init__(self, t: int, s: int) -> None:
        log2_scale = t.bit_length() - s.bit_length()  # floor or floor+1 of log2(t/s)
        if (t >> max(log2_scale, 0)) < (s >> max(-log2_scale, 0)):
            log2_scale -= 1
        e = max(0, log2_scale - _TOP_SCALE_BITS)
        self.e = e
        # top table: θ_i = 1 - w·P^i for i = 0..K (θ_0 = (1-p)/(1+p) = P(|X| = 0)), cut
        # where two ends would share a 16-bit cell
        theta = _theta_top(t, s, e, _Q)
        floors = _top_floors(t, s, e, theta)
        cells = floors >> _CELL_BITS
        shared = np.flatnonzero(cells[1:] == cells[:-1])
        if shared.size:
            floors = floors[: shared[0] + 1]
        self.k_top = floors.size - 1
        self.top = _Inversion(floors.tolist(), theta)
        # digit tables for L (none when e == 0); digits of <= 15 bits put at most one end per
        # cell (their pmf varies by under 0.1 %, so ends are about two cells apart)
        self.digits: list[tuple[int, _Inversion]] = []
        n_dig = -(-e // _DIGIT_BITS)
        bounds = [e * j // n_dig for j in range(n_dig + 1)] if n_dig else [0]
        for o, o_next in zip(bounds[:-1], bounds[1:], strict=True):
            theta = _theta_digit(t, s, o, 1 << (o_next - o))
            floors = _digit_floors(t, s, o, o_next - o, theta)
            self.digits.append((o, _Inversion(floors.tolist(), theta)))

    def _low_part(self, rng: RandomSource, words: NDArray[np.uint32], n: int) -> NDArray[Any]:
        """L = Σ_j D_j·2^(o_j) from words[n:], one word per digit (uint32 below bit 32)."""
        low: NDArray[Any] | None = None
        wide: NDArray[np.int64] | None = None
        pos = n
        for j, (o, table) in enumerate(self.digits):
            digit: NDArray[Any] = table.draw(rng, words[pos : pos + n])
            pos += n
            top_bit = self.digits[j + 1][0] if j + 1 < len(self.digits) else self.e
            if top_bit > 32:
                digit = digit.astype(np.int64)
            if o:
                digit <<= o
            if top_bit > 32:
                wide = digit if wide is None else wide + digit
            else:
                low = digit if low is None else low + digit
        if wide is None:
            assert low is not None
            return low
        if low is not None:
            wide += low
        return wide

    @property
    def words_per_sample(self) -> int:
        """Random 32-bit words per sample (one per table, plus one sign bit)."""
        return 1 + len(self.digits)

    def sample(self, rng: RandomSource, n: int) -> NDArray[np.int64]:
        """``n`` exact discrete Laplace samples: ``1 + len(digits)`` words and one bit each."""
        n_sign = (n + 31) // 32
        words = rng.bits32(self.words_per_sample * n + n_sign)
        top = self.top.draw(rng, words[:n])
        k = self.k_top
        tail = np.flatnonzero(top > k)
        if tail.size:  # T >= K: T = K + T', T' fresh (memoryless)
            add = np.full(tail.size, k, dtype=np.int64)
            todo = np.arange(tail.size)
            while todo.size:
                redo = self.top.draw(rng, rng.bits32(todo.size)).astype(np.int64)
                mid = (redo >= 1) & (redo <= k)
                add[todo[mid]] += redo[mid] - 1
                add[todo[redo > k]] += k
                todo = todo[~mid]  # outcome 0 (|X| = 0) is no value of T': draw again
        mag = top.astype(np.int64)  # 1 + T, or 0 for |X| = 0
        if tail.size:
            mag[tail] = 1 + add
        if self.e:
            zero = np.flatnonzero(top == 0)
            low = self._low_part(rng, words, n)
            mag <<= self.e  # (1 + T)·2^e; |X| = 1 + T·2^e + L = mag + L + 1 - 2^e
            mag += low
            mag += 1 - (1 << self.e)
            mag[zero] = 0
        bits = np.unpackbits(words[-n_sign:].view(np.uint8), count=n, bitorder="little")
        sign = bits.view(np.int8)
        sign <<= 1
        np.subtract(1, sign, out=sign)  # +1 or -1, one byte each
        mag *= sign
        return mag


@functools.lru_cache(maxsize=16)
def _laplace_tables(t: int, s: int) -> _LaplaceTables:
    return _LaplaceTables(t, s)


def discrete_laplace(
    scale: ArrayLike, size: int | tuple[int, ...] | None = None, rng: RandomSource | None = None
) -> NDArray[np.int64]:
    """Exact samples of the discrete Laplace distribution, P(k) ∝ exp(-|k| / scale).

    The scale is first rounded *up* to a rational t/s (s a power of two, relative change below
    2**-20), so the realised noise is never smaller than asked. Sampling is exact: groups of at
    least 256 samples at one scale (8192 above scale 2^12) use the table sampler (one 32-bit
    random word per table and sample, outcomes decided against exact integer thresholds, ties
    settled with more random bits), smaller groups the reference sampler (Canonne, Kamath,
    Steinke 2020, Algorithm 2, vectorised). Both draw the same distribution; seeded, they give
    different numbers, and which one runs depends only on the scales and the group sizes.

    Parameters
    ----------
    scale : float or array
        The scale b > 0 (noise for sensitivity Δ and privacy ε is scale Δ/ε). Compute it with
        :func:`noise_scale` (``noise_scale(Δ, ε)``, rounded up): ``Δ / ε`` in floating point
        rounds to nearest and can land below the exact quotient (``1 / (1/3) == 3.0``), and
        the sampler only rounds up from the double it is given.
    size : int or tuple, optional
        Output shape when ``scale`` is a scalar.
    rng : RandomSource, optional
        Defaults to the secure source.

    Examples
    --------
    >>> from fugu import RandomSource
    >>> x = discrete_laplace(1.0, size=100_000, rng=RandomSource(seed=0))
    >>> bool(abs(x.mean()) < 0.02), bool(1.7 < x.var() < 2.0)   # variance 2p/(1-p)^2 ≈ 1.84
    (True, True)
    """
    rng = default_source(rng)
    scale_arr = np.asarray(scale, dtype=np.float64)
    if size is not None:
        scale_arr = np.broadcast_to(scale_arr, (size,) if isinstance(size, int) else size)
    shape = scale_arr.shape
    flat = scale_arr.reshape(-1)
    if flat.size == 0:
        _rational_scale(flat)
        return np.empty(shape, dtype=np.int64)
    lo_scale, hi_scale = flat.min(), flat.max()
    if lo_scale == hi_scale or not (lo_scale <= hi_scale):  # one scale (or a NaN, refused here)
        t1, s1 = _rational_scale(np.asarray([hi_scale if lo_scale == hi_scale else np.nan]))
        return _discrete_laplace_group(rng, int(t1[0]), int(s1[0]), flat.size).reshape(shape)
    t, s = _rational_scale(flat)
    out = np.empty(t.size, dtype=np.int64)
    if np.all(t == t[0]) and np.all(s == s[0]):
        groups = [(int(t[0]), int(s[0]), np.arange(t.size))]
    else:
        # One 1-D key per (t, s): s is a power of two 2**k with k < 64 and t < 2**53.
        key = (t << _U64(6)) | np.log2(s.astype(np.float64)).astype(_U64)
        order = np.argsort(key, kind="stable")
        sorted_key = key[order]
        starts = np.flatnonzero(np.r_[True, sorted_key[1:] != sorted_key[:-1]])
        ends = np.r_[starts[1:], key.size]
        if starts.size > _MAX_GROUPS:
            # Many distinct scales: one vectorised pass with per-element parameters.
            out[:] = _geometric_elementwise(rng, t, s) - _geometric_elementwise(rng, t, s)
            return out.reshape(shape)
        groups = [
            (int(t[order[a]]), int(s[order[a]]), order[a:b])
            for a, b in zip(starts, ends, strict=True)
        ]
    for tg, sg, idx in groups:
        out[idx] = _discrete_laplace_group(rng, tg, sg, idx.size)
    return out.reshape(shape)


def _discrete_laplace_group(rng: RandomSource, t: int, s: int, n: int) -> NDArray[np.int64]:
    """``n`` samples at the rational scale t/s: tables for big groups, CKS for small ones."""
    if n >= (_TABLE_MIN_SAMPLES if t < s << 12 else _TABLE_MIN_SAMPLES_LARGE):
        return _laplace_tables(t, s).sample(rng, n)
    return _discrete_laplace_reference(rng, t, s, n)


#: Groups of at least this many samples use the table sampler: below scale 2^12 (one table,
#: built in 0.5-15 ms) from 256 samples, above it (digit tables too, 15-50 ms) from 8192; tables
#: are cached per scale. Smaller groups use the reference sampler. The choice depends only on
#: the scale and the group's size, so seeded draws repeat.
_TABLE_MIN_SAMPLES = 256
_TABLE_MIN_SAMPLES_LARGE = 8192


def _discrete_laplace_reference(rng: RandomSource, t: int, s: int, n: int) -> NDArray[np.int64]:
    """The reference sampler: the difference of two CKS geometrics (:func:`_geometric`)."""
    y = _geometric(rng, t, s, 2 * n)
    return y[:n] - y[n:]


#: Above this many distinct scales, discrete_laplace samples with per-element parameters.
_MAX_GROUPS = 32


def _geometric_elementwise(
    rng: RandomSource, t: NDArray[np.uint64], s: NDArray[np.uint64]
) -> NDArray[np.int64]:
    """Geometric(1 - exp(-s_i/t_i)) for every element i, exactly (CKS 2020, Alg. 2).

    The same construction as :func:`_geometric` with per-element parameters: U_i is drawn by
    rejection until accepted, V_i counts the successes of Bernoulli(exp(-1)) before a failure.
    """
    m = t.size
    u = np.empty(m, dtype=_U64)
    todo = np.arange(m)
    while todo.size:
        cand = rng.below(t[todo])
        keep = _bernoulli_exp_neg(rng, cand, t[todo])
        u[todo[keep]] = cand[keep]
        todo = todo[~keep]
    v = np.zeros(m, dtype=_U64)
    live = np.arange(m)
    while live.size:
        a = _bernoulli_exp_minus_one(rng, live.size)
        v[live[a]] += _U64(1)
        live = live[a]
    return ((u + t * v) // s).astype(np.int64)


def _geometric(rng: RandomSource, t: int, s: int, m: int) -> NDArray[np.int64]:
    """m iid samples of Geometric(1 - exp(-s/t)) on {0, 1, ...}, exactly (CKS 2020, Alg. 2).

    X = U + t*V is Geometric(1 - exp(-1/t)) when U has P(u) ∝ exp(-u/t) on [0, t) (uniform
    proposals accepted with probability exp(-u/t)) and V is Geometric(1 - exp(-1)) (run lengths
    of a Bernoulli(exp(-1)) stream); then floor(X/s) is Geometric(1 - exp(-s/t)). Proposals and
    stream are drawn in bulk, so the number of numpy calls does not grow with m.
    """
    tt = np.uint64(t)
    u = np.empty(0, dtype=_U64)
    while u.size < m:
        need = m - u.size
        cand = rng.below_scalar(t, int(need * 1.7) + 64)
        keep = _bernoulli_exp_neg(rng, cand, t)
        u = np.concatenate([u, cand[keep]])
    u = u[:m]
    zeros = np.empty(0, dtype=np.int64)
    stream_len = 0
    while zeros.size < m + 1:
        need = m + 1 - zeros.size
        chunk = int(need * 1.75) + 64
        ones = _bernoulli_exp_minus_one(rng, chunk)
        zeros = np.concatenate([zeros, np.flatnonzero(~ones) + stream_len])
        stream_len += chunk
    v = np.diff(np.concatenate([[-1], zeros[:m]])) - 1
    x = u + tt * v.astype(_U64)
    return (x // np.uint64(s)).astype(np.int64)


def discrete_laplace_pmf(k: ArrayLike, scale: float) -> NDArray[np.float64]:
    """Exact probability mass of the discrete Laplace distribution with the given scale.

    P(k) = (1 - p) / (1 + p) * p**|k| with p = exp(-1/scale), for the rational scale the sampler
    actually uses (see :func:`discrete_laplace`).

    >>> float(discrete_laplace_pmf(0, 1.0).round(4))
    0.4621
    """
    t, s = _rational_scale(np.asarray([scale], dtype=np.float64))
    p = math.exp(-float(s[0]) / float(t[0]))
    k_arr = np.abs(np.asarray(k, dtype=np.float64))
    return (1 - p) / (1 + p) * np.power(p, k_arr)


def _exact(x: object) -> Fraction:
    """The exact rational value of a double or an integer (Python or numpy)."""
    if isinstance(x, int | np.integer):
        return Fraction(int(x))
    return Fraction(float(x))  # type: ignore[arg-type]


def _up(exact: Fraction) -> float:
    """The smallest double >= ``exact`` (inf beyond the largest double: the samplers refuse it
    by name)."""
    try:
        value = float(exact)  # correctly rounded to nearest
    except OverflowError:
        return math.inf
    while math.isfinite(value) and Fraction(value) < exact:
        value = math.nextafter(value, math.inf)
    return value


#: A divisor for noise scales whose budget shares were computed in floating point (levels of a
#: tree, rows of a plan, per-axis weights): such shares may add up to a few ulps more than 1
#: (at most about n·2^-53 relative for n shares). Dividing the scale by ``1 - 2^-40`` as well
#: (:func:`noise_scale`'s ``divisor``) raises it by that much more, so the total loss stays
#: at most ε for any plan of fewer than about 2^12 shares per record; no measurable cost.
SHARE_SLACK = 1.0 - 2.0**-40


def round_dyadic(total: int, exponent: int, grid_exponent: int) -> float:
    """The exact value ``total · 2^exponent`` rounded (half to even, like ``np.rint``) to a
    multiple of ``2^grid_exponent``, as a double: exact integer arithmetic, one rounding.

    Callers that sum data values exactly (as integers times a power of two) use it to put the
    sum on a :func:`grid_laplace` grid without the float rounding the grid's slack does not
    cover.

    >>> round_dyadic(5, -1, 0), round_dyadic(7, -1, 0), round_dyadic(3, 2, 1)
    (2.0, 4.0, 12.0)
    """
    if exponent >= grid_exponent:
        units = total << (exponent - grid_exponent)
    else:
        shift = grid_exponent - exponent
        q, r = divmod(total, 1 << shift)
        half = 1 << (shift - 1)
        units = q + 1 if r > half or (r == half and q % 2) else q
    return math.ldexp(float(units), grid_exponent)


def noise_scale(
    sensitivity: float, epsilon: float, divisor: float | Sequence[float] = 1.0
) -> float:
    """The smallest double >= ``sensitivity / (epsilon * divisor)`` computed exactly.

    ``sensitivity / epsilon`` in floating point rounds to nearest, so it can fall below the true
    quotient (``1 / (1/3)`` gives 3.0, below 1 / 0.333…3148 = 3.00000000000000017): discrete
    Laplace noise at that scale has a privacy loss above ``epsilon``. Pass the result to
    :func:`discrete_laplace` (which only rounds up from there). ``divisor`` may be a sequence
    of factors (a budget share that is a product of per-axis shares), multiplied exactly.

    >>> noise_scale(1, 1 / 3) > 3.0, noise_scale(1, 0.5), noise_scale(1, 1.0, (0.5, 0.25))
    (True, 2.0, 8.0)
    """
    factors = tuple(divisor) if isinstance(divisor, Sequence | np.ndarray) else (divisor,)
    values = (float(sensitivity), float(epsilon), *(float(f) for f in factors))
    if not (factors and all(math.isfinite(v) and v > 0 for v in values)):
        raise InvalidParameterError(
            f"noise_scale needs finite sensitivity, epsilon and divisor > 0, got "
            f"sensitivity={values[0]!r}, epsilon={values[1]!r}, divisor={divisor!r}"
        )
    den = _exact(epsilon)
    for f in factors:
        den *= _exact(f)
    return _up(_exact(sensitivity) / den)


def noise_scales(
    sensitivity: float, epsilon: float, divisors: Sequence[ArrayLike]
) -> NDArray[np.float64]:
    """:func:`noise_scale` for every combination of per-axis divisors (an outer product).

    ``divisors[i]`` holds axis i's budget shares; the result has one axis per entry and holds
    the smallest double >= ``sensitivity / (epsilon · Π_i divisors[i][r_i])``, each product
    exact (it is computed once per distinct combination of values).

    >>> noise_scales(1, 1.0, [[0.5, 0.5, 0.25]])
    array([2., 2., 4.])
    >>> noise_scales(2, 1.0, [[0.5, 1.0], [0.25]]).tolist()
    [[16.0], [8.0]]
    """
    axes = [np.asarray(d, dtype=np.float64).reshape(-1) for d in divisors]
    uniq = [np.unique(a, return_inverse=True) for a in axes]
    table = np.empty(tuple(u.size for u, _ in uniq), dtype=np.float64)
    for idx in np.ndindex(table.shape):
        shares = [float(u[i]) for (u, _), i in zip(uniq, idx, strict=True)]
        table[idx] = noise_scale(sensitivity, epsilon, shares)
    return np.asarray(table[np.ix_(*(inv.reshape(-1) for _, inv in uniq))], dtype=np.float64)


def geometric_mechanism(
    values: ArrayLike, sensitivity: float, epsilon: float, rng: RandomSource | None = None
) -> NDArray[np.int64]:
    """Add exact discrete Laplace noise of scale ``sensitivity / epsilon`` to integer values.

    This is ε-DP for any integer-valued query whose L1 sensitivity is ``sensitivity``
    (Ghosh, Roughgarden, Sundararajan 2009 — the two-sided geometric mechanism).

    >>> from fugu import RandomSource
    >>> geometric_mechanism([10, 20], sensitivity=1, epsilon=1.0, rng=RandomSource(seed=3)).shape
    (2,)
    """
    epsilon = check_epsilon(epsilon)
    arr = np.asarray(values)
    if arr.dtype.kind not in "iub":
        if arr.dtype.kind == "f" and np.all(np.isfinite(arr)) and np.all(arr == np.rint(arr)):
            arr = arr.astype(np.int64)
        else:
            raise InvalidParameterError(
                "geometric_mechanism needs integer values; use grid_laplace for real values"
            )
    if not (sensitivity > 0 and math.isfinite(sensitivity)):
        raise InvalidParameterError(f"sensitivity must be finite and > 0, got {sensitivity!r}")
    noise = discrete_laplace(noise_scale(sensitivity, epsilon), size=arr.shape, rng=rng)
    return arr.astype(np.int64) + noise


@dataclass(frozen=True)
class GridNoise:
    """What :func:`grid_laplace` did: the grid, the effective sensitivity and the noise scales."""

    granularity: NDArray[np.float64]
    sensitivity: float
    effective_sensitivity: float
    scale: NDArray[np.float64]  # noise scale in value units, per coordinate (= variance / 2 ** 0.5)

    def variance(self) -> NDArray[np.float64]:
        """Per-coordinate noise variance (discrete Laplace on the grid, exact)."""
        g = self.granularity
        p = np.exp(-g / self.scale)
        return np.asarray(2 * p / (1 - p) ** 2 * g**2, dtype=np.float64)

    def to_dict(self) -> dict[str, Any]:
        return {
            "granularity_min": float(np.min(self.granularity)) if self.granularity.size else None,
            "sensitivity": self.sensitivity,
            "effective_sensitivity": self.effective_sensitivity,
        }


def grid_granularity(
    sensitivity: float, max_changed: int, weights: ArrayLike = 1.0, slack_bits: int = 10
) -> NDArray[np.float64]:
    """The grid steps :func:`grid_laplace` uses: γ_i = 2^floor(log2(sensitivity / (m·w_i))) ·
    2^-slack_bits (m = ``max_changed``), so Σ_changed w_i γ_i ≤ sensitivity · 2^-slack_bits.

    Public (sensitivity, the number of changed values and the weights only): callers use it to
    check a public bound against the grid's range before spending budget.

    >>> float(grid_granularity(1.0, 1)), float(grid_granularity(3.0, 2))
    (0.0009765625, 0.0009765625)
    """
    w = np.asarray(weights, dtype=np.float64)
    # floor(log2 q) exactly from the binary exponent: np.log2 rounds 2^k·(1 - 2^-53) up to k
    # (k >= 3), which doubled the step and the slack just below every power of two
    exps = np.frexp(sensitivity / (max_changed * w))[1].astype(np.int64) - 1 - slack_bits
    return np.asarray(np.ldexp(1.0, exps), dtype=np.float64)


def grid_scale(
    sensitivity: float, epsilon: float, max_changed: int, max_step: float
) -> tuple[float, float]:
    """``(effective sensitivity, λ)`` of :func:`grid_laplace`: the sensitivity plus one grid step
    per changed value (``max_step`` the largest weighted step ``w_i·γ_i``), and that over ε,
    each rounded up, never to nearest: the privacy loss per grid unit is exact_eff / (λ / w_i)
    and must be at most ε.

    Callers that add grid noise themselves (:func:`fugu.graph.recursive.grid_laplace_scalar`)
    use it to draw exactly what :func:`grid_laplace` draws.

    >>> grid_scale(1.0, 1.0, 1, 2.0**-10) == (1 + 2.0**-10, 1 + 2.0**-10)
    True
    >>> grid_scale(1.0, 1 / 3, 1, 2.0**-10)[1] > 3 * (1 + 2.0**-10)
    True
    """
    if not math.isfinite(max_step):
        return math.inf, math.inf  # a grid beyond the double range: the sampler refuses it
    eff = _up(_exact(sensitivity) + Fraction(int(max_changed)) * Fraction(max_step))
    return eff, (noise_scale(eff, epsilon) if math.isfinite(eff) else math.inf)


#: Grid units below which a value on a power-of-two grid is an exact double (callers that round
#: exact sums onto the grid themselves, :func:`round_dyadic`, stay below it).
GRID_EXACT_UNITS = float(2**53)


def grid_capacity(
    sensitivity: float, max_changed: int, units: float = GRID_MAX_UNITS
) -> tuple[float, float]:
    """``(γ, limit)``: :func:`grid_laplace`'s grid step for (sensitivity, ``max_changed``) and
    the largest absolute value a caller may hand it, ``units`` grid units less a margin of 2^-20
    (``units``: :data:`GRID_MAX_UNITS`, or :data:`GRID_EXACT_UNITS` for values rounded exactly
    onto the grid). Public inputs only: mechanisms compare a public bound on their values
    (records × the largest weight) with it before spending budget.

    >>> gamma, limit = grid_capacity(1.0, 1)
    >>> gamma, limit == 2.0**62 * gamma * (1 - 2.0**-20)
    (0.0009765625, True)
    """
    gamma = float(grid_granularity(sensitivity, max(1, int(max_changed))))
    return gamma, units * gamma * (1.0 - 2.0**-20)


def grid_exact_cap(sensitivity: float, max_changed: int) -> float:
    """The largest absolute value that is a multiple of :func:`grid_capacity`'s step and within its
    exact range (:data:`GRID_EXACT_UNITS`): public. Where the number of records is private,
    mechanisms clamp exact values to ``±`` this instead of refusing on n (clamping is
    1-Lipschitz, so the sensitivity still bounds the change).

    >>> gamma, _ = grid_capacity(1.0, 1, GRID_EXACT_UNITS)
    >>> grid_exact_cap(1.0, 1) / gamma == 2**53 - 2**33   # the range less its 2^-20 margin
    True
    """
    gamma, limit = grid_capacity(sensitivity, max_changed, GRID_EXACT_UNITS)
    return math.floor(limit / gamma) * gamma


def grid_laplace(
    values: ArrayLike,
    sensitivity: float,
    epsilon: float,
    rng: RandomSource | None = None,
    *,
    weights: ArrayLike | None = None,
    max_changed: int | None = None,
    slack_bits: int = 10,
) -> tuple[NDArray[np.float64], GridNoise]:
    """ε-DP release of real values with weighted L1 sensitivity, without floating-point noise.

    Privacy contract: for neighbouring inputs, ``sum_i weights[i] * |x_i - x'_i| <= sensitivity``
    and at most ``max_changed`` coordinates differ. ``max_changed`` is capped at the number of
    values passed, and the grid depends on it: a caller that noises one vector in chunks must pass
    chunks of at least ``max_changed`` values (or the same grid results only for equal chunks).
    Coordinate ``i`` gets noise of scale
    ``λ / weights[i]`` (weighted noise as in Privelet; plain Laplace when weights are 1).

    How: each value is rounded to a power-of-two grid ``γ_i`` so fine that the rounding can raise
    the weighted sensitivity by at most ``sensitivity * 2**-slack_bits``; then exact discrete
    Laplace noise on that grid with ``λ = effective_sensitivity / ε`` is added. The privacy loss of
    a neighbouring pair is ``Σ w_i |Δ round(x_i)| / λ <= ε``.

    Returns the noisy values and a :class:`GridNoise` record (use ``.variance()`` for the exact
    per-coordinate noise variance).

    Magnitude: ``|value| / γ_i`` may be at most :data:`GRID_MAX_UNITS` = 2**62 (else an
    :class:`~fugu.errors.InvalidParameterError` naming the limit and the range allowed, never
    the value, which is private). The integer
    ``round(x_i/γ_i) + noise`` is exact in int64 at any accepted magnitude; it is returned as
    a double, exactly while it stays within 2**53 grid units, beyond that rounded once to the
    nearest double (post-processing of the ε-DP integer: the privacy argument is unchanged, but
    the released values are spaced by the double's ulp and their variance may exceed
    ``.variance()`` by up to ulp²/12). Callers reach that range legitimately: a total of 2**43
    records on a grid of step 2**-10 is 2**53 grid units (a histogram holds up to 2**53
    records, :data:`fugu.histogram.MAX_COUNT`). (Privelet draws the same noise from its exact
    integer coefficients, :func:`grid_scale`, without calling this function.)

    Examples
    --------
    >>> from fugu import RandomSource
    >>> rng = RandomSource(seed=0)
    >>> noisy, info = grid_laplace([0.5, 1.25], sensitivity=1.0, epsilon=1.0, rng=rng)
    >>> noisy.shape, info.effective_sensitivity < 1.001
    ((2,), True)
    """
    epsilon = check_epsilon(epsilon)
    x = np.asarray(values, dtype=np.float64)
    if not np.all(np.isfinite(x)):
        raise InvalidParameterError("values to be noised must be finite (found NaN or inf)")
    if not (sensitivity > 0 and math.isfinite(sensitivity)):
        raise InvalidParameterError(f"sensitivity must be finite and > 0, got {sensitivity!r}")
    w = (
        np.ones_like(x)
        if weights is None
        else np.broadcast_to(np.asarray(weights, np.float64), x.shape)
    )
    if np.any(~np.isfinite(w)) or np.any(w <= 0):
        raise InvalidParameterError("weights must be finite and > 0")
    m = x.size if max_changed is None else int(max_changed)
    m = max(1, min(m, max(1, x.size)))
    gamma = grid_granularity(sensitivity, m, w, slack_bits)
    step = w * gamma  # exact: gamma is a power of two
    max_step = float(np.max(step)) if x.size else 0.0
    eff, lam = grid_scale(sensitivity, epsilon, m, max_step)
    scale_grid = lam / step  # in grid units; exact when the weights are 1
    if weights is not None:
        scale_grid = np.nextafter(scale_grid, np.inf)  # >= lam / step whatever the rounding
    with np.errstate(over="ignore"):  # inf is refused below
        ints = np.rint(x / gamma)
    if x.size and not np.max(np.abs(ints)) <= GRID_MAX_UNITS:  # also inf (x / gamma overflowed)
        # the values are private (counts, sums): the message names only public facts — the
        # grid, the limit and the range allowed — never a value, its size or its position
        g = float(np.min(gamma))
        raise InvalidParameterError(
            f"values: a value to be noised is above the limit of 2**62 grid units of {g:.3g} "
            f"(the noise grid for sensitivity {float(sensitivity):g}; a grid value and its noise "
            f"are added exactly in int64): values must lie within ±{GRID_MAX_UNITS * g:.6g} "
            "(the value is not shown: it is private); rescale the data (e.g. count in "
            "thousands) or check a public bound before spending budget"
        )
    noise = discrete_laplace(scale_grid, rng=rng) if x.size else np.zeros(0, np.int64)
    noisy = (ints.astype(np.int64) + noise).astype(np.float64) * gamma
    # Effective scale in value units: the sampler rounds t/s up by < 2**-20; report the asked one.
    info = GridNoise(
        granularity=gamma.reshape(x.shape),
        sensitivity=float(sensitivity),
        effective_sensitivity=eff,
        scale=(lam / w).reshape(x.shape),
    )
    return noisy.reshape(x.shape), info


def discrete_laplace_variance(scale: ArrayLike) -> NDArray[np.float64]:
    """Exact variance of :func:`discrete_laplace` at this scale: 2p/(1-p)^2, p = exp(-1/scale').

    ``scale'`` is the rational scale the sampler really uses (never below ``scale``).

    >>> round(float(discrete_laplace_variance(1.0)), 4)
    1.8413
    """
    sc = np.asarray(scale, dtype=np.float64)
    t, s = _rational_scale(sc.reshape(-1))
    p = np.exp(-s.astype(np.float64) / t.astype(np.float64))
    return (2 * p / (1 - p) ** 2).reshape(sc.shape)


# -- heavy-tailed noise for smooth sensitivity (Nissim, Raskhodnikova, Smith 2007) ----------
def _below_int(rng: RandomSource, bound: int) -> int:
    """One uniform integer in ``[0, bound)`` for any positive Python int, exactly.

    Draws ``bound.bit_length()`` random bits (whole 64-bit words, top bits dropped) and rejects
    values ``>= bound`` (acceptance probability above 1/2), so no width limit applies.
    """
    if bound < 1:
        raise InvalidParameterError(f"bound must be positive, got {bound}")
    if bound == 1:
        return 0
    nbits = (bound - 1).bit_length()
    nwords = (nbits + 63) // 64
    drop = 64 * nwords - nbits
    while True:
        r = int.from_bytes(rng.bits64(nwords).tobytes(), "little") >> drop
        if r < bound:
            return r


def _check_power(gamma: object) -> int:
    if isinstance(gamma, bool) or not isinstance(gamma, int | float | np.integer | np.floating):
        raise InvalidParameterError(f"gamma must be an integer >= 2, got {gamma!r}")
    g = float(gamma)
    if not (math.isfinite(g) and g == int(g) and g >= 2):
        raise InvalidParameterError(
            f"gamma must be an integer >= 2, got {gamma!r} (the exact sampler needs the integer "
            f"power |k|**gamma; the density 1/(1+|z|**gamma) needs gamma > 1)"
        )
    return int(g)


def power_tail_integer(scale: int, gamma: int = 4, rng: RandomSource | None = None) -> int:
    """One exact sample K of the integer distribution ``P(K = k) ∝ 1 / (1 + |k / scale|**gamma)``.

    This is the heavy-tailed density ``h(z) ∝ 1/(1 + |z|^γ)`` of Nissim, Raskhodnikova and Smith
    (STOC 2007, Lemma 2.7) on the grid ``z = k / scale``, ``scale`` grid points per unit. The
    sampler uses integer arithmetic only (Python ints, no width limit) and fugu's random bits:

    * proposal on the magnitude ``m = |k|``: band 0 is ``[0, scale)`` with envelope 1, band
      ``i + 1`` is ``[scale·2^i, scale·2^(i+1))`` with envelope ``2^(-iγ)`` (an upper bound of the
      weight there). Band masses are ``scale, scale, scale/r, scale/r², …`` with ``r = 2^(γ-1)``,
      so band 0 is picked with probability ``(r-1)/(2r-1)``, otherwise band ``i+1`` with ``i``
      geometric, ``P(i) = (1 - 1/r) r^(-i)``; ``m`` is uniform in its band;
    * ``m`` is accepted with the exact probability ``weight/envelope =
      scale^γ 2^(iγ) / (scale^γ + m^γ)`` (an integer comparison);
    * a fair sign is attached; ``(-, 0)`` is rejected so that 0 is not counted twice.

    About half of the proposals are accepted. One draw takes tens of microseconds: this is for
    one noisy number per release, not for bulk noise.

    Parameters
    ----------
    scale : int
        Grid points per unit of z (a positive integer).
    gamma : int
        The tail exponent, an integer >= 2 (NRS suggest 4).
    rng : RandomSource, optional
        Defaults to the secure source.

    Examples
    --------
    >>> from fugu import RandomSource
    >>> rng = RandomSource(seed=0)
    >>> draws = [power_tail_integer(4, 4, rng) for _ in range(2000)]
    >>> bool(abs(sum(draws) / len(draws)) < 0.5)
    True
    """
    rng = default_source(rng)
    if isinstance(scale, bool) or not isinstance(scale, int | np.integer) or int(scale) < 1:
        raise InvalidParameterError(f"scale must be a positive integer, got {scale!r}")
    c, g = int(scale), _check_power(gamma)
    cg = c**g
    r = 1 << (g - 1)
    while True:
        if _below_int(rng, 2 * r - 1) < r - 1:
            i, lo, width = 0, 0, c  # band 0: [0, c), envelope 1
        else:
            i = 0
            while _below_int(rng, r) == 0:
                i += 1
            lo = width = c << i  # band i + 1: [c 2^i, c 2^(i+1)), envelope 2^(-i g)
        m = lo + _below_int(rng, width)
        if _below_int(rng, cg + m**g) >= cg << (i * g):
            continue
        negative = _below_int(rng, 2) == 1
        if m == 0 and negative:
            continue
        return -m if negative else m


def power_tail_pmf(k: ArrayLike, scale: int, gamma: int = 4) -> NDArray[np.float64]:
    """Probability mass of :func:`power_tail_integer`: ``(1 / (1 + |k/scale|^γ)) / N``.

    The normaliser ``N = Σ_k 1/(1 + |k/scale|^γ)`` is summed exactly over ``|k| <= 1000·scale``;
    the tail beyond is the midpoint-rule integral of ``(c/x)^γ - (c/x)^(2γ)`` (relative error of
    N below 1e-12 for γ >= 2).

    >>> round(float(power_tail_pmf(0, 1, 4)), 4)
    0.4636
    """
    c, g = int(scale), _check_power(gamma)
    big = 1000 * c
    kk = np.arange(1, big + 1, dtype=np.float64) / c
    total = 1.0 + 2.0 * float(np.sum(1.0 / (1.0 + kk**g)))
    x = (big + 0.5) / c  # Σ_{k > big} f(k) ≈ ∫_{big + 1/2}^∞ f, f(x) = 1/(1 + (x/c)^g)
    total += 2.0 * c * (x ** (1 - g) / (g - 1) - x ** (1 - 2 * g) / (2 * g - 1))
    z = np.abs(np.asarray(k, dtype=np.float64)) / c
    return np.asarray(1.0 / (1.0 + z**g) / total, dtype=np.float64)


def power_tail_variance(gamma: int) -> float:
    """Variance of the continuous density ``h(z) ∝ 1/(1+|z|^γ)``: ``sin(π/γ)/sin(3π/γ)``.

    Infinite for γ <= 3 (returned as ``inf``); 1 for γ = 4.

    >>> power_tail_variance(4)
    1.0
    """
    g = _check_power(gamma)
    if g <= 3:
        return math.inf
    return round(math.sin(math.pi / g) / math.sin(3 * math.pi / g), 15)


@dataclass(frozen=True)
class PowerTailGrid:
    """What :func:`grid_power_tail` did: grid step ``2^-m``, realised scale and grid resolution.

    The grid step depends only on the public ``min_scale``; ``scale`` and ``points_per_unit``
    depend on the scale asked for, and when that is data-dependent (smooth sensitivity) they
    must not be published.
    """

    granularity: float  # the output grid step, a power of two <= 1
    scale: float  # the realised scale: points_per_unit * granularity (>= the scale asked for)
    points_per_unit: int  # grid points per unit of z, >= 2**precision_bits
    gamma: int


def grid_power_tail(
    value: int,
    scale: float,
    gamma: int = 4,
    rng: RandomSource | None = None,
    *,
    min_scale: float,
    precision_bits: int = 40,
) -> tuple[float, PowerTailGrid]:
    """``value + scale·Z`` with Z from NRS's density ``h(z) ∝ 1/(1+|z|^γ)``, on an exact grid.

    The output lies on the power-of-two grid ``2^-m·ℤ`` with
    ``m = max(0, precision_bits - floor(log2 min_scale))``, so ``m >= 0`` (an integer ``value``
    is on the grid already and is not rounded). **The grid depends only on ``min_scale``, which
    must be public** (a bound the scale never goes below, for any input): when the scale is
    data-dependent, as with smooth sensitivity, a grid chosen from it would put neighbouring
    inputs' outputs on different lattices, and a single output could tell them apart.

    The noise is ``2^-m·K`` with K drawn exactly by :func:`power_tail_integer` at
    ``c = ceil(scale·2^m) >= 2^precision_bits`` points per unit of z. The realised scale
    ``c·2^-m`` is never below ``scale`` and exceeds it by a factor of at most
    ``1 + 2^-precision_bits``. The result is rounded to a double once, from the exact grid value
    (post-processing).

    Why the grid keeps NRS's admissibility (sliding and dilation): the output pmf is
    ``h((y - value)/σ)/N(σ)`` for grid points y, with ``N(σ) = Σ_k h(k 2^-m / σ)``. The pointwise
    ratios of h are those of the continuous density (sliding by δ changes ``ln h`` by at most
    ``c_γ·|δ|``, ``c_γ = (γ-1)^(1-1/γ)``; dilating by ``e^λ`` changes it by at most ``γ|λ|``).
    The normaliser replaces the Jacobian ``σ'/σ``: ``N`` lies within ``cI ± 1`` (I = ∫h, a
    monotone-sum bound), so ``ln N(σ') - ln N(σ)`` is ``ln(σ'/σ)`` up to
    ``2/(cI) <= 2^-precision_bits`` per side (I >= 2 for γ >= 2). A mechanism using this
    function adds these slacks (and the scale's rounding) to its privacy loss;
    :func:`fugu.graph.smooth_triangle_count` does.

    Parameters
    ----------
    value : int
        The exact integer to be noised.
    scale : float
        σ > 0, the multiplier of Z (NRS: ``S(x)/α``); at least ``min_scale``.
    gamma : int
        Tail exponent, integer >= 2.
    rng : RandomSource, optional
        Defaults to the secure source.
    min_scale : float
        A public lower bound on ``scale`` over all inputs; it alone fixes the grid.
    precision_bits : int
        Grid points per unit of z are at least ``2**precision_bits``.

    Returns
    -------
    (float, PowerTailGrid)

    Examples
    --------
    >>> from fugu import RandomSource
    >>> noisy, info = grid_power_tail(100, 8.0, 4, rng=RandomSource(seed=0), min_scale=1.5)
    >>> info.granularity == 2.0**-40, info.scale == 8.0
    (True, True)
    """
    rng = default_source(rng)
    if isinstance(value, bool) or not isinstance(value, int | np.integer):
        raise InvalidParameterError(f"value must be an integer, got {value!r}")
    sc, low = float(scale), float(min_scale)
    if not (math.isfinite(low) and low > 0):
        raise InvalidParameterError(f"min_scale must be finite and > 0, got {min_scale!r}")
    if not (math.isfinite(sc) and sc >= low):
        raise InvalidParameterError(
            f"noise scale must be finite and >= min_scale = {low:g}, got {scale!r}"
        )
    if sc > MAX_SCALE:
        raise InvalidParameterError(
            f"noise scale {sc:.3g} exceeds the sampler's limit {MAX_SCALE:.3g}; the release would "
            f"be pure noise — raise epsilon"
        )
    g = _check_power(gamma)
    # frexp: low = f·2^e with f in [0.5, 1), so floor(log2 low) = e - 1 and low·2^m >= 2^bits.
    m = max(0, int(precision_bits) - math.frexp(low)[1] + 1)
    c = math.ceil(math.ldexp(sc, m))  # exact: scaling by a power of two, then ceil
    k = power_tail_integer(c, g, rng)
    noisy = math.ldexp(float((int(value) << m) + k), -m)  # one correct rounding of the grid value
    info = PowerTailGrid(
        granularity=math.ldexp(1.0, -m), scale=math.ldexp(float(c), -m), points_per_unit=c, gamma=g
    )
    return noisy, info
