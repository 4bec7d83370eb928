"""Secure noise: random sources and exact discrete samplers.

fugu never adds floating-point Laplace noise to private data (Mironov 2012 showed that the low bits
of ``x + Lap(b)`` computed in floating point reveal ``x``). Instead:

* integer-valued measurements (counts) get **exact discrete Laplace** (two-sided geometric) noise
  sampled with integer arithmetic only, following Canonne, Kamath and Steinke, "The Discrete
  Gaussian for Differential Privacy" (NeurIPS 2020), Algorithms 1 and 2;
* real-valued measurements are rounded to a public power-of-two grid and get discrete Laplace
  noise on that grid, with the sensitivity increased by the rounding slack (the approach of
  Google's "Secure Noise Generation" note); see :func:`grid_laplace`.

Random bits come from the operating system's CSPRNG (``os.urandom``) in bulk. A seeded
:class:`RandomSource` exists for reproducible tests and experiments; releases made with it are
marked as not private.

Example
-------
>>> import fugu
>>> rng = fugu.RandomSource(seed=1)
>>> noise = fugu.noise.discrete_laplace(2.0, size=5, rng=rng)
>>> noise.dtype, noise.shape
(dtype('int64'), (5,))
"""

from __future__ import annotations

import math
import os
import threading
from dataclasses import dataclass
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
    "grid_laplace",
    "GridNoise",
    "MAX_SCALE",
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
        view = memoryview(out)
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
    if getattr(state, "generation", -1) != _FORK_GENERATION:
        state.words = _CtrDrbg().words if _HAVE_AES else _urandom_words
        state.generation = _FORK_GENERATION
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
        local = self._local
        buf = getattr(local, "buf", None)
        if buf is None or local.generation != _FORK_GENERATION or n > buf.size:
            # a forked child never reuses the parent's buffered words
            buf = _thread_drbg()(_BLOCK)
            local.generation = _FORK_GENERATION
        local.buf = buf[n:]
        return buf[:n]

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


def discrete_laplace(
    scale: ArrayLike, size: int | tuple[int, ...] | None = None, rng: RandomSource | None = None
) -> NDArray[np.int64]:
    """Exact samples of the discrete Laplace distribution, P(k) ∝ exp(-|k| / scale).

    The scale is first rounded *up* to a rational t/s (s a power of two, relative change below
    2**-20), so the realised noise is never smaller than asked. Sampling uses integer arithmetic
    only (Canonne, Kamath, Steinke 2020, Algorithm 2, vectorised over the array).

    Parameters
    ----------
    scale : float or array
        The scale b > 0 (noise for sensitivity Δ and privacy ε is scale Δ/ε).
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
    t, s = _rational_scale(scale_arr.reshape(-1))
    out = np.empty(t.size, dtype=np.int64)
    if t.size == 0:
        return out.reshape(shape)
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
        y = _geometric(rng, tg, sg, 2 * idx.size)
        out[idx] = y[: idx.size] - y[idx.size :]  # the difference of two geometrics
    return out.reshape(shape)


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
    noise = discrete_laplace(sensitivity / epsilon, size=arr.shape, rng=rng)
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
    ``λ / weights[i]`` (Privelet's weighted noise; plain Laplace when weights are 1).

    How: each value is rounded to a power-of-two grid ``γ_i`` so fine that the rounding can raise
    the weighted sensitivity by at most ``sensitivity * 2**-slack_bits``; then exact discrete
    Laplace noise on that grid with ``λ = effective_sensitivity / ε`` is added. The privacy loss of
    a neighbouring pair is ``Σ w_i |Δ round(x_i)| / λ <= ε``.

    Returns the noisy values and a :class:`GridNoise` record (use ``.variance()`` for the exact
    per-coordinate noise variance).

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
    # γ_i = 2^floor(log2(sensitivity / (m * w_i))) * 2^-slack_bits,
    # so Σ_changed w_i γ_i <= sensitivity * 2^-slack_bits.
    exps = np.floor(np.log2(sensitivity / (m * w))).astype(np.int64) - slack_bits
    gamma = np.ldexp(1.0, exps)
    slack = float(m * np.max(w * gamma)) if x.size else 0.0
    eff = sensitivity + slack
    lam = eff / epsilon
    scale_grid = lam / (w * gamma)  # in grid units
    ints = np.rint(x / gamma)
    if x.size and np.max(np.abs(ints)) > 2.0**62:
        raise InvalidParameterError("values are too large for the noise grid; rescale the data")
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
