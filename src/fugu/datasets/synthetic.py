"""Seeded synthetic tables with correlated ordinal attributes (for LDP and cube experiments)."""

from __future__ import annotations

import numpy as np
from numpy.typing import NDArray

from ..domain import Domain, Ordinal
from ..errors import InvalidParameterError, check_positive_int


def synthetic_domain(d: int, c: int, prefix: str = "a") -> Domain:
    """``d`` ordinal attributes ``a0 … a{d-1}`` with values ``0 … c-1``."""
    return Domain([Ordinal(f"{prefix}{j}", 0, c - 1) for j in range(d)])


def _correlation(d: int, rho: float) -> NDArray[np.float64]:
    """The equicorrelation matrix; ``rho`` must make it positive definite: -1/(d-1) < rho < 1
    (numpy's Cholesky failed with "Matrix is not positive definite", and a NaN rho made every
    value NaN, then garbage codes)."""
    low = -1.0 / (d - 1) if d > 1 else -1.0
    if isinstance(rho, bool) or not isinstance(rho, int | float) or not low < rho < 1:
        raise InvalidParameterError(
            f"rho must be a correlation in ({low:g}, 1) for d = {d} attributes (pairwise "
            f"correlation of an equicorrelated normal), got {rho!r}"
        )
    cov = np.full((d, d), float(rho))
    np.fill_diagonal(cov, 1.0)
    return cov


def _discretise(z: NDArray[np.float64], c: int, spread: float) -> NDArray[np.int64]:
    # Map [-spread, spread] (in standard deviations) onto 0..c-1, clamping the far tails.
    u = (z + spread) / (2 * spread)
    return np.clip(np.floor(u * c), 0, c - 1).astype(np.int64)


def correlated_gaussian(
    n: int, d: int, c: int, *, rho: float = 0.5, seed: int = 0
) -> dict[str, NDArray[np.int64]]:
    """n rows of d attributes in ``0..c-1``: a multivariate normal with pairwise correlation
    ``rho``, ±3σ mapped onto the c values (the far tails clamped to the end values).

    >>> cols = correlated_gaussian(1000, 3, 16, seed=1)
    >>> sorted(cols), bool(cols["a0"].min() >= 0), bool(cols["a0"].max() <= 15)
    (['a0', 'a1', 'a2'], True, True)
    """
    n, d, c = check_positive_int(n, "n"), check_positive_int(d, "d"), check_positive_int(c, "c", 2)
    rng = np.random.default_rng(seed)
    z = rng.multivariate_normal(np.zeros(d), _correlation(d, rho), size=n, method="cholesky")
    codes = _discretise(z, c, 3.0)
    return {f"a{j}": codes[:, j] for j in range(d)}


def correlated_laplace(
    n: int, d: int, c: int, *, rho: float = 0.5, seed: int = 0
) -> dict[str, NDArray[np.int64]]:
    """Like :func:`correlated_gaussian` with a multivariate Laplace (Gaussian scale mixture with
    exponential mixing): heavier tails, the same correlation structure; ±4σ mapped onto c values.
    """
    n, d, c = check_positive_int(n, "n"), check_positive_int(d, "d"), check_positive_int(c, "c", 2)
    rng = np.random.default_rng(seed)
    z = rng.multivariate_normal(np.zeros(d), _correlation(d, rho), size=n, method="cholesky")
    w = np.sqrt(rng.exponential(1.0, size=(n, 1)))
    codes = _discretise(z * w, c, 4.0)
    return {f"a{j}": codes[:, j] for j in range(d)}
