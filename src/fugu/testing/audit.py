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
    seed: int = 20261129,
    vectorised: bool = False,
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
        quantiles ``c``.
    alpha : float
        Total false-alarm probability (a correct mechanism fails with at most this probability).

    Returns
    -------
    AuditResult
    """
    eps = check_epsilon(epsilon)
    if n_runs < 100:
        raise InvalidParameterError(f"n_runs must be >= 100 for a meaningful audit, got {n_runs}")
    rng = RandomSource(seed=seed)
    n_pilot = max(50, n_runs // 5)
    pilot1 = _run(mechanism, d1, rng, n_pilot, vectorised)
    pilot2 = _run(mechanism, d2, rng, n_pilot, vectorised)
    stat_fn = statistic
    if stat_fn is None:
        direction = pilot1.mean(axis=0) - pilot2.mean(axis=0)
        if not np.any(direction):
            direction = np.zeros(pilot1.shape[1])
            direction[0] = 1.0

        def stat_fn(out: NDArray[np.float64]) -> ArrayLike:
            return out @ direction

    s1 = np.asarray(
        stat_fn(_run(mechanism, d1, rng, n_runs, vectorised)), dtype=np.float64
    ).reshape(-1)
    s2 = np.asarray(
        stat_fn(_run(mechanism, d2, rng, n_runs, vectorised)), dtype=np.float64
    ).reshape(-1)
    if discrete:
        labels = np.unique(np.concatenate([s1, s2]))
        k1 = np.array([(s1 == v).sum() for v in labels], dtype=np.float64)
        k2 = np.array([(s2 == v).sum() for v in labels], dtype=np.float64)
        names = [f"S={v:g}" for v in labels]
    else:
        ps = np.concatenate(
            [
                np.asarray(stat_fn(pilot1), np.float64).reshape(-1),
                np.asarray(stat_fn(pilot2), np.float64).reshape(-1),
            ]
        )
        cuts = np.unique(np.quantile(ps, np.linspace(0.002, 0.998, n_thresholds)))
        s1s, s2s = np.sort(s1), np.sort(s2)
        le1 = np.searchsorted(s1s, cuts, side="right").astype(np.float64)
        le2 = np.searchsorted(s2s, cuts, side="right").astype(np.float64)
        k1 = np.concatenate([le1, n_runs - le1])
        k2 = np.concatenate([le2, n_runs - le2])
        names = [f"S<={c:g}" for c in cuts] + [f"S>{c:g}" for c in cuts]
    n_tests = 2 * len(names)
    a = alpha / (2 * n_tests)  # each ratio uses two one-sided bounds
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
