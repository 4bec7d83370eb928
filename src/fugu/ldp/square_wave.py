"""Square Wave (SW): distribution of one numeric attribute under local DP, with EM / EMS.

Privacy model: ε-local differential privacy; neighbours: any two values of one user.
Source: Li, Wang, Lopuhaä-Zwakenberg, Li, Škorić, "Estimating Numerical Distributions under
Local Differential Privacy", SIGMOD 2020 (checked against T. Wang's ``LDP_Protocols/sw.py``;
spec ``ldp_range.md`` §3).

Client. The value is mapped to ``x ∈ [0, 1]``: an integer ordinal's code ``k`` of ``c`` to the bin
centre ``(k + 0.5)/c``; a binned ordinal (``Ordinal(edges=…)``) by its raw value, bin ``i`` onto
``[i/c, (i+1)/c]`` (linearly inside the bin, so bins of any widths get equal shares). The report
is ``ỹ ∈ [−b, 1 + b]`` with density ``p = e^ε/(2b e^ε + 1)`` on ``|ỹ − x| ≤ b`` and
``q = 1/(2b e^ε + 1)`` elsewhere, so every output's density ratio between two inputs is at most
``p/q = e^ε``. The half-width maximises mutual
information: ``b = (ε e^ε − e^ε + 1) / (2 e^ε (e^ε − 1 − ε))`` (0.358 at ε = 0.5, 0.256 at ε = 1,
0.129 at ε = 2). Sampling, on a public grid of ``2^-20`` so that every report's probability is
exact: reports are ``j/2^20`` for integers ``j ∈ [−w, 2^20 + w]``, ``w = ⌊b·2^20⌋``; with
probability ``P = W e^ε/(W e^ε + F)`` (lowered by a relative 2^-50) a uniform one of the
``W = 2w + 1`` points nearest ``x`` (its *window*), otherwise a uniform one of the other
``F = 2^20`` points (:func:`sw_perturb`; integer draws only). Each window point is exactly
``e^ε`` times as likely as each other point, for every input, so the ratio of any report's
probabilities under two inputs is at most ``e^ε``. (Before, reports were drawn from 53-bit
uniform floats and rounded to the grid; a grid point held about 2^33 floats, give or take
one, and the exact ratio exceeded ``e^ε`` by a relative 2.1e-10 at ε = 1.) The server reads
the reports as the continuous square wave of the half-width the grid realises,
``(w + 1/2)/2^20`` (:func:`sw_report_half_width`; each report stands for its grid cell), which
is exactly their distribution: with the paper's ``b`` instead, the model's near mass was 0.9375
where the client's is 0.8945 at ε = 16 (``w = 0``).

Server. Reports are counted into ``m`` equal output bins over ``[−b, 1 + b]`` (the mergeable
state). The distribution is rebuilt on ``d' = r·c`` fine input bins, ``r = ⌈resolution/c⌉``
(default resolution 128), and summed back to the ``c`` bins; default ``m = ⌈(1 + 2b)·d'⌉`` so
output bins are as wide as the fine input bins. (On the c = 16 Gaussian marginal with 50,000
reports, the L1 error of EMS on 16 / 64 / 128 / 256 fine bins was 0.37 / 0.066 / 0.051 / 0.092
at ε = 1 and 0.61 / 0.18 / 0.065 / 0.12 at ε = 0.5: smoothing a coarse grid blurs it, a very
fine one under-smooths.) With the ``m × d'`` transition matrix ``M`` (probability that an input
uniform in fine bin ``j`` lands in output bin ``i``):

* **EM**: ``θ⁰`` uniform; ``θ ← θ ⊙ Mᵀ(h / Mθ) / N``.
* **EMS** (default): after every EM step, smooth ``θ`` with the binomial kernel ``(1, 2, 1)/4``
  and renormalise. fugu smooths **both edges symmetrically** with ``(2, 1)/3`` (``sw.py`` leaves
  its last bin unsmoothed, an asymmetry).
* **Stopping** (as ``sw.py``): stop when the log-likelihood ``Σ h log(Mθ)`` improves by less
  than ``tol`` (default ``1e-3``, absolute, checked from the third iteration), when
  ``‖θ − θ_old‖₁ ≤ 1/N``, or after ``max_iter`` (default 10,000) iterations.

The reconstruction is post-processing: the estimate is non-negative and sums to the number of
reports but is biased (EM/EMS are maximum-likelihood / smoothed estimators, not unbiased).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

import numpy as np
from numpy.typing import ArrayLike, NDArray

from ..domain import Domain, Ordinal
from ..errors import InvalidParameterError, InvalidTypeError, check_positive_int
from ..noise import RandomSource
from ..release import CubeRelease, Release
from .protocol import ColumnSpec, LDPProtocol, check_ldp_epsilon

__all__ = [
    "SW",
    "sw_half_width",
    "sw_report_half_width",
    "sw_densities",
    "sw_perturb",
    "sw_grid",
    "sw_near_probability",
    "sw_transition",
    "sw_histogram",
    "em_reconstruct",
    "reconstruct",
    "unit_values",
]

SOURCE = (
    "Li, Wang, Lopuhaä-Zwakenberg, Li, Škorić, 'Estimating Numerical Distributions under Local "
    "Differential Privacy', SIGMOD 2020 (Square Wave, EM/EMS)"
)


_GRID = float(2**20)


def check_tol(tol: object) -> float:
    """The EM stopping tolerance as a float after checking it is a finite number >= 0 (NaN or a
    negative value would silently disable the log-likelihood stop)."""
    if isinstance(tol, bool) or not isinstance(tol, int | float | np.integer | np.floating):
        raise InvalidTypeError(
            f"tol must be a number >= 0 (the EM log-likelihood stop), got {tol!r}; e.g. tol=1e-3"
        )
    t = float(tol)
    if not math.isfinite(t) or t < 0:
        raise InvalidParameterError(
            f"tol must be a finite number >= 0 (the EM log-likelihood stop), got {t!r}; e.g. "
            f"tol=1e-3 (the default), or max_iter to bound the rounds"
        )
    return t


def sw_half_width(epsilon: float) -> float:
    """The mutual-information-optimal half-width ``b`` of the square wave.

    >>> round(sw_half_width(1.0), 3)
    0.256
    """
    eps = check_ldp_epsilon(epsilon, "Square Wave")
    e = math.exp(eps)
    if eps >= 0.05:
        return (eps * e - e + 1) / (2 * e * (e - 1 - eps))
    # Small ε: numerator and denominator are O(ε²) differences of O(1) terms; their series
    # (εe^ε − e^ε + 1 = Σ_{k≥2} (k−1)ε^k/k!, e^ε − 1 − ε = Σ_{k≥2} ε^k/k!) keep every digit.
    num = den = 0.0
    term = 0.5  # ε^(k−2)/k! at k = 2
    for k in range(2, 20):
        num += (k - 1) * term
        den += term
        term *= eps / (k + 1)
    return num / (2 * e * den)


def sw_densities(epsilon: float, b: float | None = None) -> tuple[float, float]:
    """``(p, q)``: the report density near and far from the input."""
    bb = sw_half_width(epsilon) if b is None else b
    e = math.exp(epsilon)
    return e / (2 * bb * e + 1), 1.0 / (2 * bb * e + 1)


def sw_grid(b: float) -> tuple[int, int, int]:
    """The integer output grid of :func:`sw_perturb` for half-width ``b``: ``(w, W, F)``.

    Reports are ``j / 2^20`` for integers ``j`` in ``[−w, 2^20 + w]`` with ``w = ⌊b·2^20⌋``; an
    input ``x`` has its ``W = 2w + 1`` *near* points ``j_x − w … j_x + w`` (``j_x`` = ``x·2^20``
    rounded) and ``F = 2^20`` *far* points (all the others), whatever ``x`` is.

    >>> sw_grid(sw_half_width(1.0))
    (268522, 537045, 1048576)
    """
    w = int(math.floor(b * _GRID))
    return w, 2 * w + 1, int(_GRID)


def sw_report_half_width(epsilon: float) -> float:
    """The half-width of the square wave :func:`sw_perturb` realises: ``(w + 1/2)/2^20``.

    Each report ``j/2^20`` stands for its grid cell of width ``2^-20``, so the ``W = 2w + 1``
    near points cover ``x ± (w + 1/2)/2^20`` and the reports are exactly the continuous wave
    of this half-width (near mass ``W e^ε/(W e^ε + F)``). It is :func:`sw_half_width` to within
    half a grid step (relative 2^-19 at ε = 1), but at large ε ``b·2^20`` is small (0.89 at
    ε = 16: one near point) and only this one describes the reports. Passing it as ``b`` to
    :func:`sw_perturb` gives the same grid, so the same reports.

    >>> sw_grid(sw_report_half_width(1.0)) == sw_grid(sw_half_width(1.0))
    True
    """
    _, W, _ = sw_grid(sw_half_width(epsilon))
    return W / (2 * _GRID)


def sw_near_probability(epsilon: float, b: float) -> float:
    """P(near) of :func:`sw_perturb`: ``W e^ε / (W e^ε + F)`` (so each near point is exactly
    ``e^ε`` times as likely as each far point), lowered by a relative 2^-50 so that neither the
    double arithmetic nor the sampler's rounding can raise the ratio above ``e^ε``."""
    _, W, F = sw_grid(b)
    e = math.exp(epsilon)
    return W * e / (W * e + F) * (1.0 - 2.0**-50)


def _uniform_below(rng: RandomSource, bound: NDArray[np.int64]) -> NDArray[np.int64]:
    """Uniform integers in ``[0, bound)``, exactly, from the 53-bit words ``rng.random`` turns
    into floats: ``k = u // ⌊2^53/bound⌋``, drawn again when ``k >= bound`` (probability below
    ``bound/2^53``). A seeded source gives nearly the reports of the float sampler it replaced."""
    b = np.asarray(bound, dtype=np.uint64)
    step = np.uint64(2**53) // b
    k = (rng.bits64(b.size) >> np.uint64(11)) // step
    bad = np.flatnonzero(k >= b)
    while bad.size:
        k[bad] = (rng.bits64(bad.size) >> np.uint64(11)) // step[bad]
        bad = bad[k[bad] >= b[bad]]
    return k.astype(np.int64)


def sw_perturb(
    x: ArrayLike, epsilon: float, rng: RandomSource, b: float | None = None
) -> NDArray[np.float64]:
    """Square-wave randomiser of values ``x ∈ [0, 1]`` (vectorised), on the exact grid of
    :func:`sw_grid`: with probability :func:`sw_near_probability` a uniform near point, else a
    uniform far point (integer draws only: ``rng.bernoulli`` and exact uniform integers from
    random words). Every report's probability is ``P/W`` or ``(1 − P)/F`` for any input, so
    the ratio is at most ``e^ε`` exactly. (Uniform 53-bit floats rounded to the grid, as drawn
    before, gave grid points whose probability ratio exceeded ``e^ε`` by a relative 2.1e-10 at
    ε = 1: a grid point holds about 2^33 of the floats, ± 1.)
    """
    xx = np.asarray(x, dtype=np.float64).reshape(-1)
    if xx.size and (not np.all(np.isfinite(xx)) or xx.min() < 0.0 or xx.max() > 1.0):
        raise InvalidParameterError("Square Wave inputs must lie in [0, 1]")
    eps = check_ldp_epsilon(epsilon, "Square Wave")
    bb = sw_half_width(eps) if b is None else b
    if isinstance(bb, bool) or not isinstance(bb, int | float) or not 0 <= bb <= 1:
        raise InvalidParameterError(
            f"the square wave's half-width b must be a number in [0, 1], got {bb!r}; leave b "
            f"out for the paper's choice (sw_half_width(epsilon))"
        )
    w, W, F = sw_grid(bb)
    jx = np.rint(xx * _GRID).astype(np.int64)
    near = rng.bernoulli(sw_near_probability(eps, bb), size=xx.size)
    k = _uniform_below(rng, np.where(near, W, F))
    # near: j_x − w + k; far: the k-th point outside the window (−w … j_x − w − 1, then
    # j_x + w + 1 … 2^20 + w)
    j = np.where(near, jx - w + k, np.where(k < jx, k - w, k + w + 1))
    return j.astype(np.float64) / _GRID


def sw_histogram(y: ArrayLike, b: float, m: int) -> NDArray[np.int64]:
    """Counts of reports in ``m`` equal bins over ``[−b, 1 + b]`` (the mergeable state)."""
    yy = np.asarray(y, dtype=np.float64)
    idx = np.floor((yy + b) / (1 + 2 * b) * m).astype(np.int64)
    return np.bincount(np.clip(idx, 0, m - 1), minlength=m).astype(np.int64)


def sw_transition(
    epsilon: float, c: int, m: int, *, b: float | None = None, points: int = 1
) -> NDArray[np.float64]:
    """The ``m × c`` matrix ``M[i, j] = Pr[report in output bin i | input in bin j]``.

    ``points = 1``: the input is the bin centre (exact); ``points > 1``: the input is uniform in
    the bin, averaged over that many evenly spaced points.
    """
    bb = sw_half_width(epsilon) if b is None else b
    p, q = sw_densities(epsilon, bb)
    edges = np.linspace(-bb, 1 + bb, m + 1)
    lo, hi = edges[:-1, None], edges[1:, None]
    M = np.zeros((m, c))
    offs = (np.arange(points) + 0.5) / points
    for t in offs:
        x = (np.arange(c) + t) / c
        overlap = np.clip(
            np.minimum(hi, x[None, :] + bb) - np.maximum(lo, x[None, :] - bb), 0, None
        )
        M += q * (hi - lo) + (p - q) * overlap
    M /= points
    return M / M.sum(axis=0, keepdims=True)


def _smooth(theta: NDArray[np.float64]) -> NDArray[np.float64]:
    if theta.size < 3:
        return theta
    out = np.empty_like(theta)
    out[1:-1] = (theta[:-2] + 2 * theta[1:-1] + theta[2:]) / 4
    out[0] = (2 * theta[0] + theta[1]) / 3
    out[-1] = (2 * theta[-1] + theta[-2]) / 3
    return out


def em_reconstruct(
    h: ArrayLike,
    M: ArrayLike,
    *,
    smoothing: bool = True,
    max_iter: int = 10_000,
    tol: float = 1e-3,
) -> tuple[NDArray[np.float64], int]:
    """EM (``smoothing=False``) or EMS reconstruction of the input distribution.

    Returns ``(theta, iterations)`` with ``theta`` a probability vector over the input bins.
    """
    hh = np.asarray(h, dtype=np.float64)
    MM = np.asarray(M, dtype=np.float64)
    n = hh.sum()
    c = MM.shape[1]
    theta = np.full(c, 1.0 / c)
    if n <= 0:
        return theta, 0
    ll_old = -math.inf
    it = 0
    for it in range(1, max_iter + 1):  # noqa: B007
        old = theta
        mt = MM @ theta
        ratio = np.where(mt > 0, hh / np.where(mt > 0, mt, 1.0), 0.0)
        theta = theta * (MM.T @ ratio) / n
        theta = theta / theta.sum()
        if smoothing:
            theta = _smooth(theta)
            theta = theta / theta.sum()
        mt = MM @ theta
        ll = float(np.sum(hh[hh > 0] * np.log(np.maximum(mt[hh > 0], 1e-300))))
        if np.abs(theta - old).sum() <= 1.0 / n:
            break
        if it >= 3 and ll - ll_old < tol:
            break
        ll_old = ll
    return theta, it


def reconstruct(
    hist: ArrayLike,
    epsilon: float,
    c: int,
    *,
    b: float | None = None,
    smoothing: bool = True,
    resolution: int = 128,
    max_iter: int = 10_000,
    tol: float = 1e-3,
) -> tuple[NDArray[np.float64], int]:
    """Input distribution over ``c`` bins from an output histogram over ``[−b, 1 + b]``.

    EM/EMS runs on ``r·c`` fine input bins (``r = ⌈resolution / c⌉``, inputs uniform inside a
    fine bin) and the result is summed back to the ``c`` bins: the smoothing kernel then acts on
    a fine grid as in the SW paper (``d' = 1024`` there) instead of blurring a coarse one.
    """
    h = np.asarray(hist, dtype=np.float64)
    r = max(1, -(-int(resolution) // int(c)))
    M = sw_transition(epsilon, c * r, h.size, b=b, points=4 if r > 1 else 1)
    theta, it = em_reconstruct(h, M, smoothing=smoothing, max_iter=max_iter, tol=tol)
    return theta.reshape(c, r).sum(axis=1), it


def default_bins(b: float, c: int, resolution: int = 128) -> int:
    """Output bins over ``[−b, 1 + b]`` as wide as the fine input bins of :func:`reconstruct`."""
    r = max(1, -(-int(resolution) // int(c)))
    return int(math.ceil((1 + 2 * b) * c * r))


def unit_values(attr: Ordinal | Any, values: ArrayLike) -> tuple[NDArray[np.float64], int]:
    """Map one attribute's values to ``x ∈ [0, 1]`` as the SW client does.

    Returns ``(x, points)`` where ``points`` is what :func:`sw_transition` needs (1 = bin centres,
    64 = raw values uniform inside their bins).
    """
    if not isinstance(attr, Ordinal):
        raise InvalidTypeError(
            f"Square Wave needs an ordinal attribute, {attr.name!r} is {type(attr).__name__}"
        )
    codes = attr.encode(values)
    if attr.edges is None:
        return (codes + 0.5) / attr.size, 1
    # bin i onto [i/c, (i+1)/c], linearly inside the bin: the server rebuilds c equal parts of
    # [0, 1] and reads part i as bin i (one linear map over all edges put unequal bins on
    # unequal parts, and their counts in other bins)
    e = np.asarray(attr.edges, dtype=np.float64)
    raw = np.asarray(values, dtype=np.float64).reshape(codes.shape)
    inside = (raw - e[codes]) / (e[codes + 1] - e[codes])
    return np.clip((codes + np.clip(inside, 0.0, 1.0)) / attr.size, 0.0, 1.0), 64


class SW(LDPProtocol):
    """Square Wave over the single ordinal attribute of ``domain`` (see the module docstring).

    Parameters
    ----------
    domain : Domain with one Ordinal attribute (integer range or bins)
    epsilon : float
    bins : int, optional
        Output bins ``m`` of the server's histogram (default ``⌈(1 + 2b)·c⌉``).
    reconstruction : {"ems", "em"}
    max_iter, tol : the EM stopping rule.

    Examples
    --------
    >>> import fugu, numpy as np
    >>> dom = fugu.Domain([fugu.Ordinal("score", 0, 31)])
    >>> sw = fugu.ldp.SW(dom, epsilon=1.0)
    >>> vals = np.random.default_rng(0).integers(8, 24, 5000)
    >>> rel = sw.simulate({"score": vals}, rng=fugu.RandomSource(seed=0))
    >>> round(rel.counts.sum())
    5000
    """

    name = "sw"
    summary = "Square Wave: distribution of one numeric attribute (EM/EMS)"
    source = SOURCE

    def __init__(
        self,
        domain: Domain,
        epsilon: float,
        bins: int | None = None,
        reconstruction: str = "ems",
        max_iter: int = 10_000,
        tol: float = 1e-3,
        resolution: int = 128,
    ) -> None:
        super().__init__(domain, epsilon)
        if domain.ndim != 1:
            raise InvalidParameterError(
                f"SW estimates one attribute; the domain has {domain.ndim}. Use MSW for several"
            )
        self.attr = domain.attributes[0]
        if not isinstance(self.attr, Ordinal):
            raise InvalidTypeError(f"SW needs an ordinal attribute, got {type(self.attr).__name__}")
        self.c = check_positive_int(self.attr.size, "c", minimum=2)
        self.b = sw_report_half_width(self.epsilon)
        self.resolution = check_positive_int(resolution, "resolution", 1)
        self.m = (
            check_positive_int(bins, "bins", 2)
            if bins is not None
            else default_bins(self.b, self.c, self.resolution)
        )
        if reconstruction not in ("ems", "em"):
            raise InvalidParameterError(
                f"reconstruction must be 'ems' or 'em', got {reconstruction!r}"
            )
        self.reconstruction = reconstruction
        self.max_iter = check_positive_int(max_iter, "max_iter")
        self.tol = check_tol(tol)

    def _params(self) -> dict[str, Any]:
        return {
            "bins": self.m,
            "reconstruction": self.reconstruction,
            "max_iter": self.max_iter,
            "tol": self.tol,
            "resolution": self.resolution,
        }

    def report_columns(self) -> dict[str, ColumnSpec]:
        return {"y": "float"}

    def encode(self, records: Any) -> NDArray[np.int64]:
        # SW's client input is the value mapped to [0, 1], not a code.
        if isinstance(records, np.ndarray):
            return super().encode(records)
        if hasattr(records, "to_pydict") and not isinstance(records, Mapping):
            records = records.to_pydict()
        try:
            column = records[self.attr.name]
        except (KeyError, IndexError, TypeError):
            return super().encode(records)  # the domain's encoder names what is missing
        x, _ = unit_values(self.attr, column)
        return x[:, None]  # type: ignore[return-value]

    def _perturb(self, codes: Any, rng: RandomSource, groups: Any) -> dict[str, np.ndarray]:
        arr = np.asarray(codes)
        x = arr[:, 0] if arr.dtype.kind == "f" else (arr[:, 0] + 0.5) / self.c
        return {"y": sw_perturb(x, self.epsilon, rng, self.b)}

    def _validate(self, columns: Mapping[str, np.ndarray]) -> NDArray[np.bool_]:
        y = columns["y"]
        return np.isfinite(y) & (y >= -self.b) & (y <= 1 + self.b)

    def support(self, columns: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
        return {"hist": sw_histogram(columns["y"], self.b, self.m)}

    def _estimate(self, state: Mapping[str, np.ndarray], n: int) -> Release:
        theta, iters = reconstruct(
            state["hist"],
            self.epsilon,
            self.c,
            b=self.b,
            smoothing=self.reconstruction == "ems",
            resolution=self.resolution,
            max_iter=self.max_iter,
            tol=self.tol,
        )
        g = self.guarantee(
            private=True,
            n=n,
            post_processing=(
                f"{self.reconstruction.upper()} reconstruction ({iters} iterations; "
                f"non-negative, sums to n, biased)",
            ),
        )
        return CubeRelease(self.domain, g, theta * n)
