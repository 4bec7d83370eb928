"""Isotonic (monotone) least squares for noisy sorted or cumulative sequences (post-processing).

No private data enters here: the input is a noisy sequence whose true value is known (publicly)
to be non-decreasing, for example a released cumulative histogram.

Problem (Hay, Rastogi, Miklau, Suciu, VLDB 2010, "sorted query" constrained inference): given
noisy ``s̃[1..k]`` and optional weights ``w``, find ``s̄`` minimising ``Σ w_i (s̄_i − s̃_i)²``
subject to ``s̄_1 <= … <= s̄_k``. Closed form: with ``M[i, j]`` the (weighted) mean of
``s̃_i..s̃_j``, ``s̄_t = min_{j >= t} max_{i <= t} M[i, j]`` (:func:`minmax_isotonic`, O(k²),
the test oracle). The pool-adjacent-violators algorithm (PAVA) computes it in O(k); we call
SciPy's implementation (``scipy.optimize.isotonic_regression``, C code).

Box constraints ``lower <= s̄ <= upper`` (e.g. ``0 <= C_i <= n`` for a cumulative histogram
with public n): clipping the isotonic solution gives the box-constrained optimum, because the
clipped sequence stays monotone and the objective is separable per PAVA block.

Used by the Blowfish Ordered Mechanism (He et al. SIGMOD 2014, §7) and for unattributed
histograms. The projection never moves the estimate farther (in L2) from any monotone truth than
the noisy input was, but it is not linear: single answers can be biased (toward the middle of
flat runs), so fugu applies it only when asked and records it in the guarantee.

>>> import numpy as np
>>> isotonic_regression([3.0, 1.0, 2.0, 5.0, 4.0]).tolist()
[2.0, 2.0, 2.0, 4.5, 4.5]
>>> isotonic_regression([-1.0, 3.0, 2.0, 9.0], lower=0, upper=8).tolist()
[0.0, 2.5, 2.5, 8.0]
"""

from __future__ import annotations

import math

import numpy as np
from numpy.typing import ArrayLike, NDArray

from ..errors import InvalidParameterError

__all__ = ["isotonic_regression", "minmax_isotonic", "monotone_cumulative"]


def isotonic_regression(
    y: ArrayLike,
    weights: ArrayLike | None = None,
    *,
    increasing: bool = True,
    lower: float | None = None,
    upper: float | None = None,
) -> NDArray[np.float64]:
    """Weighted least-squares monotone fit of a 1-D sequence, optionally clipped to a box.

    Parameters
    ----------
    y : array (k,)
        Noisy values.
    weights : array (k,), optional
        Positive weights (1/variance); default all 1.
    increasing : bool
        Non-decreasing fit (default) or non-increasing.
    lower, upper : float, optional
        Public bounds on every value (applied after the fit; exact for a box).
    """
    arr = np.asarray(y, dtype=np.float64)
    if arr.ndim != 1:
        raise InvalidParameterError(f"isotonic_regression needs a 1-D sequence, got {arr.shape}")
    if not np.all(np.isfinite(arr)):
        raise InvalidParameterError("isotonic_regression: values must be finite")
    if arr.size == 0:
        return arr.copy()
    w = None
    if weights is not None:
        wa = np.asarray(weights, dtype=np.float64)
        if wa.ndim > 1 or wa.size not in (1, arr.size):
            raise InvalidParameterError(
                f"isotonic_regression: weights need one value per value of y ({arr.size}) or "
                f"one for all, got shape {wa.shape}"
            )
        w = np.broadcast_to(wa.reshape(-1) if wa.ndim else wa, arr.shape)
        if np.any(~np.isfinite(w)) or np.any(w <= 0):
            raise InvalidParameterError("isotonic_regression: weights must be finite and > 0")
    for name, bound in (("lower", lower), ("upper", upper)):
        if bound is not None and not float(bound) == float(bound):  # NaN clipped everything
            raise InvalidParameterError(
                f"isotonic_regression: {name} must be a number (a public bound) or None, got "
                f"{bound!r}"
            )
    if lower is not None and upper is not None and lower > upper:
        raise InvalidParameterError(f"lower={lower} > upper={upper}")
    from scipy.optimize import isotonic_regression as _pava

    out = np.asarray(_pava(arr, weights=w, increasing=increasing).x, dtype=np.float64)
    if lower is not None or upper is not None:
        out = np.clip(out, lower, upper)
    return out


def minmax_isotonic(y: ArrayLike, weights: ArrayLike | None = None) -> NDArray[np.float64]:
    """The min–max closed form ``s̄_t = min_{j>=t} max_{i<=t} M[i, j]`` (O(k²); a test oracle)."""
    arr = np.asarray(y, dtype=np.float64)
    k = arr.size
    w = np.ones(k) if weights is None else np.asarray(weights, dtype=np.float64)
    cw = np.concatenate([[0.0], np.cumsum(w)])
    cy = np.concatenate([[0.0], np.cumsum(w * arr)])
    i = np.arange(k)[:, None]
    j = np.arange(k)[None, :]
    with np.errstate(invalid="ignore", divide="ignore"):
        mean = (cy[j + 1] - cy[i]) / (cw[j + 1] - cw[i])  # M[i, j] for i <= j
    mean = np.where(i <= j, mean, np.nan)
    out = np.empty(k)
    for t in range(k):
        block = mean[: t + 1, t:]  # i <= t <= j
        out[t] = np.min(np.max(block, axis=0))
    return out


def monotone_cumulative(
    c: ArrayLike, *, total: float | None = None, nonnegative: bool = True
) -> NDArray[np.float64]:
    """Project a noisy cumulative histogram onto ``0 <= c_1 <= … <= c_k (= total)``.

    ``total`` (the public number of records n) pins the last value and caps every value;
    ``nonnegative`` enforces ``c_1 >= 0`` (so every implied cell count is >= 0).
    """
    arr = np.asarray(c, dtype=np.float64)
    if total is not None and not (math.isfinite(float(total)) and float(total) >= 0):
        raise InvalidParameterError(
            f"monotone_cumulative: total must be the public number of records (finite, >= 0), "
            f"got {total!r}"
        )
    if total is not None:
        fit = isotonic_regression(arr[:-1], lower=0.0 if nonnegative else None, upper=float(total))
        return np.concatenate([fit, [float(total)]])
    return isotonic_regression(arr, lower=0.0 if nonnegative else None)
