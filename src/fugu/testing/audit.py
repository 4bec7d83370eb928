"""Empirical privacy audit and exact-distribution tests."""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import ArrayLike, NDArray
from scipy import stats

from ..errors import InvalidParameterError, check_epsilon
from ..noise import RandomSource

__all__ = ["AuditResult", "audit", "chi_square_pmf", "ks_cdf", "ldp_ratio"]


@dataclass(frozen=True)
class AuditResult:
    """Outcome of :func:`audit`.

    ``epsilon_lower_bound`` is the largest log-ratio of event probabilities that the data support
    at the stated confidence (Clopper–Pearson bounds, Bonferroni-corrected over all events).
    The audit fails when it exceeds the claimed ε.
    """

    passed: bool
    epsilon: float
    epsilon_lower_bound: float
    epsilon_point_estimate: float
    worst_event: str
    n_runs: int
    n_events: int
    alpha: float

    def __bool__(self) -> bool:
        return self.passed

    def __str__(self) -> str:
        verdict = "PASS" if self.passed else "FAIL"
        return (
            f"{verdict}: claimed epsilon {self.epsilon:g}; lower confidence bound "
            f"{self.epsilon_lower_bound:.3f} (point estimate {self.epsilon_point_estimate:.3f}) on "
            f"event {self.worst_event} over {self.n_runs} runs per input, {self.n_events} events, "
            f"false-alarm rate {self.alpha:g}"
        )


def _run(
    mechanism: Callable[..., Any], data: Any, rng: RandomSource, n: int, vectorised: bool
) -> NDArray[np.float64]:
    if vectorised:
        out = np.asarray(mechanism(data, rng, n), dtype=np.float64)
        if out.shape[0] != n:
            raise InvalidParameterError(
                f"a vectorised mechanism must return {n} outputs, got shape {out.shape}"
            )
        return out.reshape(n, -1)
    rows = [
        np.asarray(_as_output(mechanism(data, rng)), dtype=np.float64).reshape(-1) for _ in range(n)
    ]
    return np.stack(rows)


def _as_output(x: Any) -> Any:
    from ..release import Release

    if isinstance(x, Release):
        try:
            return x.counts
        except NotImplementedError:
            raise InvalidParameterError(
                "give a statistic= that maps this release to numbers"
            ) from None
    return x


def _cp_lower(k: NDArray[np.float64], n: int, a: float) -> NDArray[np.float64]:
    with np.errstate(all="ignore"):
        lo = stats.beta.ppf(a, k, n - k + 1)
    return np.where(k > 0, lo, 0.0)


def _cp_upper(k: NDArray[np.float64], n: int, a: float) -> NDArray[np.float64]:
    with np.errstate(all="ignore"):
        hi = stats.beta.ppf(1 - a, k + 1, n - k)
    return np.where(k < n, hi, 1.0)


def audit(
    mechanism: Callable[..., Any],
    d1: Any,
    d2: Any,
    epsilon: float,
    *,
    n_runs: int = 100_000,
    statistic: Callable[[NDArray[np.float64]], ArrayLike] | None = None,
    discrete: bool = False,
    n_thresholds: int = 30,
    alpha: float = 1e-3,
    seed: int | None = 20261129,
    vectorised: bool = False,
    n_atoms: int = 10,
) -> AuditResult:
    """Test ε-indistinguishability of ``mechanism`` on the neighbouring inputs ``d1``, ``d2``.

    Parameters
    ----------
    mechanism : callable
        ``mechanism(data, rng)`` → output (number, array or Release); with ``vectorised=True``,
        ``mechanism(data, rng, n)`` → ``n`` outputs stacked on axis 0.
    d1, d2 : neighbouring inputs, chosen to be hard (the worst-case pair for the sensitivity).
    epsilon : the claimed ε (for Blowfish: the policy's ε on this secret pair; for LDP: the
        client's ε on these two user values).
    statistic : callable, optional
        Maps the (n, k) output matrix to n scalars (or n integer labels with ``discrete=True``).
        Default: the projection on the direction in which the two inputs' mean outputs differ,
        estimated on a separate pilot sample.
    discrete : bool
        Each distinct statistic value is its own event (for categorical outputs).
    n_thresholds : int
        For continuous statistics, events are ``{S > c}`` and ``{S <= c}`` for this many pilot
        quantiles ``c`` (0.2 % to 99.8 %), plus cuts at the pilot's extreme order statistics
        (the 1st, 3rd, 10th and 30th smallest and largest), so that an output pushed into a tail
        that the bulk of the distribution never reaches is an event too.
    alpha : float
        Total false-alarm probability (a correct mechanism fails with at most this probability).
    seed : int or None
        Seed of the audit's reproducible source; ``None`` audits the production path, the
        operating system's CSPRNG (:class:`~fugu.noise.RandomSource` with no seed).
    n_atoms : int
        Rare-event ("atom") events: the whole output vectors that repeat in the pilot runs,
        at most this many, chosen by how differently often they occur under the two inputs.
        ``{output == v}`` catches a mechanism that, with small probability, publishes something
        exact (its input, an unnoised count): such an output repeats under one input and almost
        never under the other, though it sits in the middle of the statistic's distribution.
        ``0`` turns them off.

    Returns
    -------
    AuditResult

    Notes
    -----
    Every event is chosen on a pilot sample that is independent of the counted runs, so the
    Clopper–Pearson bounds hold for each; Bonferroni over all events keeps the total false-alarm
    rate at ``alpha``. Outputs need not be finite: ``{S is NaN}`` is always an event (an output
    with a NaN in any coordinate has a NaN projection), and ±inf fall in the tail events.

    Examples
    --------
    A counting mechanism that publishes its input with probability 1e-3 is caught by the atom
    events, though its noisy outputs look right:

    >>> import numpy as np, fugu
    >>> def leaky(x, rng, n):
    ...     out = x + fugu.noise.discrete_laplace(1.0, size=(n, 4), rng=rng)
    ...     leak = rng.integers(1000, size=n) == 0
    ...     out[leak] = x
    ...     return out
    >>> x1, x2 = np.array([5, 0, 0, 0]), np.array([4, 1, 0, 0])
    >>> audit(leaky, x1, x2, epsilon=1.0, n_runs=100_000, vectorised=True).passed
    False
    """
    eps = check_epsilon(epsilon)
    if n_runs < 100:
        raise InvalidParameterError(f"n_runs must be >= 100 for a meaningful audit, got {n_runs}")
    if n_atoms < 0:
        raise InvalidParameterError(f"n_atoms must be >= 0, got {n_atoms}")
    if not 0 < alpha < 1:
        raise InvalidParameterError(
            f"alpha (the false-alarm rate) must be in (0, 1), got {alpha!r}; e.g. 1e-3"
        )
    _check_can_fail(n_runs, alpha / 4, eps, alpha, 1)  # at least one event: refuse before running
    rng = RandomSource(seed=seed)
    n_pilot = max(50, n_runs // 5)
    pilot1 = _run(mechanism, d1, rng, n_pilot, vectorised)
    pilot2 = _run(mechanism, d2, rng, n_pilot, vectorised)
    stat_fn = statistic
    if stat_fn is None:
        # finite values only: one NaN or inf in the pilot made the direction (so every
        # statistic) NaN and blinded the audit; a non-finite output gives a non-finite S below
        direction = _finite_mean(pilot1) - _finite_mean(pilot2)
        if not np.any(direction):
            direction = np.zeros(pilot1.shape[1])
            direction[0] = 1.0

        def stat_fn(out: NDArray[np.float64]) -> ArrayLike:
            return out @ direction

    out1 = _run(mechanism, d1, rng, n_runs, vectorised)
    out2 = _run(mechanism, d2, rng, n_runs, vectorised)
    s1, s2 = _statistic(stat_fn, out1), _statistic(stat_fn, out2)
    if discrete:
        both = np.concatenate([s1, s2])
        labels = np.unique(both[~np.isnan(both)])  # NaN is its own event below (NaN != NaN)
        k1 = np.array([(s1 == v).sum() for v in labels], dtype=np.float64)
        k2 = np.array([(s2 == v).sum() for v in labels], dtype=np.float64)
        names = [f"S={v:g}" for v in labels]
    else:
        ps = np.concatenate(
            [
                _statistic(stat_fn, pilot1),
                _statistic(stat_fn, pilot2),
            ]
        )
        cuts = _cuts(ps, n_thresholds)
        s1s, s2s = np.sort(s1), np.sort(s2)
        le1 = np.searchsorted(s1s, cuts, side="right").astype(np.float64)
        le2 = np.searchsorted(s2s, cuts, side="right").astype(np.float64)
        k1 = np.concatenate([le1, n_runs - le1])
        k2 = np.concatenate([le2, n_runs - le2])
        names = [f"S<={c:g}" for c in cuts] + [f"S>{c:g}" for c in cuts]
    # {S is NaN}: fixed in advance, so always valid; the order events cannot see a NaN
    k1 = np.append(k1, np.count_nonzero(np.isnan(s1)))
    k2 = np.append(k2, np.count_nonzero(np.isnan(s2)))
    names = names + ["S is NaN"]
    if not discrete and n_atoms:
        a1, a2, atom_names = _atom_counts(pilot1, pilot2, out1, out2, n_atoms)
        k1, k2 = np.concatenate([k1, a1]), np.concatenate([k2, a2])
        names = names + atom_names
    n_tests = 2 * len(names)
    a = alpha / (2 * n_tests)  # each ratio uses two one-sided bounds
    _check_can_fail(n_runs, a, eps, alpha, len(names))
    lo1, hi1 = _cp_lower(k1, n_runs, a), _cp_upper(k1, n_runs, a)
    lo2, hi2 = _cp_lower(k2, n_runs, a), _cp_upper(k2, n_runs, a)
    with np.errstate(divide="ignore", invalid="ignore"):
        r12 = np.where(lo1 > 0, np.log(lo1 / hi2), -np.inf)
        r21 = np.where(lo2 > 0, np.log(lo2 / hi1), -np.inf)
        point = np.maximum(np.abs(np.log((k1 + 0.5) / (k2 + 0.5))), 0)
    lower = np.maximum(r12, r21)
    worst = int(np.argmax(lower))
    lb = float(lower[worst])
    return AuditResult(
        passed=bool(lb <= eps + 1e-9),
        epsilon=eps,
        epsilon_lower_bound=lb,
        epsilon_point_estimate=float(point[worst]),
        worst_event=names[worst],
        n_runs=n_runs,
        n_events=len(names),
        alpha=alpha,
    )


def _statistic(
    stat_fn: Callable[[NDArray[np.float64]], ArrayLike], out: NDArray[np.float64]
) -> NDArray[np.float64]:
    """One number per run, or an error: a statistic of another length (``o[0]``, the first run,
    for ``o[:, 0]``, the first column) made counts that are not out of the runs, and passed."""
    s = np.asarray(stat_fn(out), dtype=np.float64)
    if s.size != out.shape[0] or (s.ndim > 1 and s.shape[0] != out.shape[0]):
        raise InvalidParameterError(
            f"statistic must map the ({out.shape[0]}, k) outputs to {out.shape[0]} numbers, one "
            f"per run; it returned shape {s.shape} (a column is o[:, j], not o[j])"
        )
    return s.reshape(-1)


def _check_can_fail(n_runs: int, a: float, eps: float, alpha: float, n_events: int) -> None:
    """Refuse an audit that no outcome could fail.

    The strongest evidence ``n_runs`` runs can give is an event seen in every run under one
    input and in none under the other: Clopper-Pearson bounds ``a**(1/n)`` and
    ``1 - a**(1/n)``. When even their log-ratio is at most ε, a mechanism that publishes its
    input passes (as does every mechanism when ``alpha`` is tiny).
    """
    low = a ** (1.0 / n_runs)
    best = math.log(low / (1.0 - low)) if low < 1.0 else math.inf
    if best > eps:
        return
    need = math.floor(math.log(1.0 / a) / math.log1p(math.exp(-eps))) + 1
    raise InvalidParameterError(
        f"n_runs={n_runs} cannot fail an audit at epsilon {eps:g} with alpha {alpha:g} over "
        f"{n_events} event(s): even a mechanism that publishes its input would pass (the "
        f"largest lower bound {n_runs} runs can show is {best:.3g}); use n_runs >= {need} "
        "(more for a mechanism that is only somewhat too loud)"
    )


_TAIL_ORDER_STATISTICS = (1, 3, 10, 30)


def _finite_mean(x: NDArray[np.float64]) -> NDArray[np.float64]:
    """Column means over the finite entries (0 for a column with none)."""
    finite = np.isfinite(x)
    total = np.where(finite, x, 0.0).sum(axis=0)
    count = finite.sum(axis=0)
    return np.divide(total, count, out=np.zeros(x.shape[1]), where=count > 0)


def _cuts(pooled: NDArray[np.float64], n_thresholds: int) -> NDArray[np.float64]:
    """Pilot quantiles for the bulk plus extreme order statistics for the tails.

    NaNs are left out (``{S is NaN}`` is a separate event: one NaN made every quantile NaN and
    every event vanish); the bulk quantiles use the finite values, the tails may be ±inf.
    """
    srt = np.sort(pooled[~np.isnan(pooled)])
    if srt.size == 0:
        return srt
    ranks = [r - 1 for r in _TAIL_ORDER_STATISTICS if r <= srt.size]
    tails = np.concatenate([srt[ranks], srt[[srt.size - 1 - r for r in ranks]]])
    finite = srt[np.isfinite(srt)]
    bulk = np.quantile(finite, np.linspace(0.002, 0.998, n_thresholds)) if finite.size else finite
    # {S <= max} is the certain event: it carries no information, so it is dropped.
    cuts = np.unique(np.concatenate([bulk, tails]))
    return cuts[cuts < srt[-1]] if cuts.size > 1 else cuts


def _row_keys(rows: NDArray[np.float64], weights: NDArray[np.uint64]) -> NDArray[np.uint64]:
    """A 64-bit key per output row (a random linear hash of its bit patterns, mod 2^64)."""
    bits = np.ascontiguousarray(rows, dtype=np.float64).view(np.uint64)
    bits = bits ^ (bits >> np.uint64(29))
    with np.errstate(over="ignore"):
        return (bits * weights).sum(axis=1, dtype=np.uint64)


def _atom_counts(
    pilot1: NDArray[np.float64],
    pilot2: NDArray[np.float64],
    out1: NDArray[np.float64],
    out2: NDArray[np.float64],
    n_atoms: int,
) -> tuple[NDArray[np.float64], NDArray[np.float64], list[str]]:
    """Counts of the events ``{output == v}`` for the pilot's most telling repeated outputs."""
    odd = np.random.default_rng(0x5EED).integers(1, 2**62, size=pilot1.shape[1]) * 2 + 1
    weights = np.asarray(odd, dtype=np.uint64)
    p1, p2 = np.sort(_row_keys(pilot1, weights)), np.sort(_row_keys(pilot2, weights))
    rows = np.concatenate([pilot1, pilot2])
    keys, first, counts = np.unique(  # type: ignore[call-overload]
        _row_keys(rows, weights), return_index=True, return_counts=True
    )
    repeated = counts >= 3
    keys, first = keys[repeated], first[repeated]
    if keys.size == 0:
        return np.empty(0), np.empty(0), []

    def count(sorted_keys: NDArray[np.uint64], wanted: NDArray[np.uint64]) -> NDArray[np.float64]:
        hi = np.searchsorted(sorted_keys, wanted, side="right")
        return (hi - np.searchsorted(sorted_keys, wanted, side="left")).astype(np.float64)

    evidence = np.abs(np.log((count(p1, keys) + 0.5) / (count(p2, keys) + 0.5)))
    order = np.argsort(-evidence, kind="stable")[:n_atoms]
    chosen = keys[order]
    m1, m2 = np.sort(_row_keys(out1, weights)), np.sort(_row_keys(out2, weights))
    names = [f"output=={_short(rows[i])}" for i in first[order]]
    return count(m1, chosen), count(m2, chosen), names


def _short(row: NDArray[np.float64]) -> str:
    shown = ",".join(f"{v:g}" for v in row[:6])
    return f"[{shown}{',…' if row.size > 6 else ''}]"


def ldp_ratio(probabilities: ArrayLike) -> float:
    """The exact ε of a local randomiser given as a matrix P[x, y] = Pr[report y | value x].

    Returns ``max over y, x, x' of log(P[x, y] / P[x', y])`` (``inf`` when some report is possible
    for one value and impossible for another).

    >>> import math
    >>> e = math.exp(1.0)
    >>> round(ldp_ratio([[e / (e + 1), 1 / (e + 1)], [1 / (e + 1), e / (e + 1)]]), 6)
    1.0
    """
    p = np.asarray(probabilities, dtype=np.float64)
    if p.ndim != 2:
        raise InvalidParameterError("probabilities must be a matrix P[value, report]")
    if np.any(p < 0) or not np.allclose(p.sum(axis=1), 1.0, atol=1e-9):
        raise InvalidParameterError("each row of P must be a probability distribution")
    hi, lo = p.max(axis=0), p.min(axis=0)
    if np.any((lo == 0) & (hi > 0)):
        return math.inf
    mask = hi > 0
    return float(np.max(np.log(hi[mask] / lo[mask])))


def chi_square_pmf(
    samples: ArrayLike,
    pmf: Callable[[NDArray[np.int64]], NDArray[np.float64]],
    min_expected: float = 5.0,
) -> float:
    """p-value of a chi-square goodness-of-fit test of integer samples against an exact pmf.

    Support values with small expected counts are pooled into two tails so every bin expects at
    least ``min_expected`` samples.
    """
    x = np.asarray(samples, dtype=np.int64).reshape(-1)
    n = x.size
    lo, hi = int(x.min()), int(x.max())
    support = np.arange(lo - 1, hi + 2)
    probs = np.asarray(pmf(support), dtype=np.float64)
    # Tails beyond the observed range.
    left_tail = max(0.0, 1.0 - probs.sum()) / 2
    expected = probs * n
    observed = np.bincount(x - (lo - 1), minlength=support.size).astype(np.float64)
    exp_bins: list[float] = []
    obs_bins: list[float] = []
    acc_e, acc_o = left_tail * n, 0.0
    for e, o in zip(expected, observed, strict=True):
        acc_e += e
        acc_o += o
        if acc_e >= min_expected:
            exp_bins.append(acc_e)
            obs_bins.append(acc_o)
            acc_e, acc_o = 0.0, 0.0
    acc_e += left_tail * n
    if exp_bins:
        exp_bins[-1] += acc_e
        obs_bins[-1] += acc_o
    e_arr, o_arr = np.asarray(exp_bins), np.asarray(obs_bins)
    e_arr *= o_arr.sum() / e_arr.sum()
    return float(stats.chisquare(o_arr, e_arr).pvalue)


def ks_cdf(samples: ArrayLike, cdf: Callable[[NDArray[np.float64]], NDArray[np.float64]]) -> float:
    """p-value of a one-sample Kolmogorov–Smirnov test against a continuous CDF."""
    return float(stats.kstest(np.asarray(samples, dtype=np.float64).reshape(-1), cdf).pvalue)
