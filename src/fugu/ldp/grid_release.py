"""What TDG and HDG publish: :class:`GridRelease`, which answers λ-D range queries.

The release holds the post-processed grids (and HDG's response matrices) and answers a query
restricting λ attributes from the 1-D and 2-D grids (Phase 3 of Yang et al., PVLDB 2020): λ ≤ 2
from one grid (cut cells by ``interpolation``), λ ≥ 3 from the in/out tables of every attribute
pair (``estimator``: "full", "in-in", or "auto", which weighs them by :func:`auto_weight` of the
grids' predicted noise and the method). Everything here is post-processing of the aggregated
(already ε-LDP) reports: the estimators, their weights and any number of answers read only the
released grids and public parameters, so they cost no privacy.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Mapping, Sequence
from itertools import combinations
from typing import Any

import numpy as np
from numpy.typing import NDArray

from ..domain import Domain
from ..errors import InvalidParameterError
from ..inference.ldp_post import (
    INTERPOLATIONS,
    GridEstimate,
    cell_values,
    estimate_from_pairs,
    refined_margin,
)
from ..queries import PrefixSums, RangeQuery
from ..release import Guarantee, Release
from ..release_state import Custom, Meta
from .grid_matrices import _spread

__all__ = [
    "AUTO_CUT",
    "AUTO_DEPENDENCE",
    "AUTO_NOISE",
    "ESTIMATORS",
    "GridRelease",
    "auto_weight",
    "cut_error",
]

ESTIMATORS = ("auto", "full", "in-in")
# "auto": weight on "full" falls from 1 to 0 (linear in log noise) as the predicted noise of a
# 2-D cell (fraction of n) rises from AUTO_NOISE[m][1] to AUTO_NOISE[m][0], per method m.
# Measured (issue 15.3) on correlated Gaussian (rho 0, 0.5) and Laplace data, lambda 3, 4, at
# n = 6·10^4 (d = 4, c = 32, eps 0.5-4), 2·10^5 and 10^6 (d = 6, c = 64, eps 0.2-2). TDG's only
# 1-D information is its coarse 2-D grids' margins, so "full" (which fits them) needs much less
# noise before it wins than with HDG's fine 1-D grids: "in-in" wins at 0.7 % of n and above,
# "full" at 0.33 % and below. HDG's ramp runs from 3.5 % to 1 % of n: at n = 6·10^4 and 2·10^5
# "full" was the better estimator in all 18 cells with cut error <= 0.012 and noise <= 1.1 %,
# and over 12 releases at n = 10^6 (noise 0.88 %) on independent and correlated Gaussian data;
# the end at 0.8 % used before left weight 0.94 there (1.006-1.014x the better estimator). The
# top stays at 3.5 %: a ramp from 1.7 % (tuned on the n = 10^6 table, where "in-in" wins every
# cell at eps = 0.5) gave "in-in" 73 % of the weight on strongly dependent data at 1.5 % noise
# (tests/ldp/test_hdg.py, y ~ 4x, n = 2·10^4, eps = 2), where "full" is 5x more accurate.
# TDG with its default log-smooth margins ("tdg-logsmooth"): "full" below 1.5 % of n, an even
# blend at about 3.9 %, "in-in" from 10 %. Measured over 12 releases per cell (n = 6·10^4,
# 2·10^5, 10^6; d = 6, c = 64; the three data sets; 52 cells): at 3-4 % of n (n = 10^6 at
# eps = 0.2, 2·10^5 at eps = 0.5, 6·10^4 at eps = 1) the blend of the two beats both on the
# Gaussian data (0.95-0.99x the better one) and "full" alone was up to 1.06x; at 6-9 % "in-in"
# is best (full 1.06-1.18x); at 1.5 % and below "full" is. The bias-dominated Laplace cells at
# low noise (in-in better by 1.06-1.15x) are not changed by any weight that also serves the
# Gaussian data there ("full" better by 2-3x).
AUTO_NOISE = {"hdg": (0.035, 0.010), "tdg": (0.006, 0.0035), "tdg-logsmooth": (0.10, 0.015)}
# HDG's weight on "full" is further multiplied by a factor falling from 1 to 0 (linear in log)
# as the cut-cell error of the release (:func:`cut_error`, share of n) rises from AUTO_CUT[1] to
# AUTO_CUT[0]. Measured on HDG releases (n = 6·10^4, 2·10^5 and 10^6, eps 0.2-4): 0.003 (g2 = 8)
# and 0.007-0.010 (g2 = 4) on correlated Gaussian data, 0.008 (g2 = 8) and 0.032-0.035 (g2 = 4)
# on the Laplace data, 0.09-0.16 on correlated data at g2 = 2, <= 0.003 on independent data at
# eps >= 1. At n = 6·10^4 and 2·10^5 "in-in" was the better estimator in all 32 (data, eps,
# lambda) cells with cut error >= 0.028 and "full" in all 18 with cut error <= 0.012 and noise
# <= 1.1 % of n. AUTO_DEPENDENCE maps a pair's dependence beyond noise (:func:`_dependence`).
AUTO_CUT = (0.028, 0.012)
AUTO_DEPENDENCE = (0.05, 0.15)


def _log_ramp(x: float, hi: float, lo: float) -> float:
    """1 at ``x <= lo``, 0 at ``x >= hi`` (also ``inf``: no 2-D grid, or none with a report),
    linear in ``log x`` between."""
    if not x > 0:
        return 1.0
    if x >= hi:
        return 0.0
    return float(min(1.0, max(0.0, math.log(hi / x) / math.log(hi / lo))))


def auto_weight(
    noise: float,
    method: str = "hdg",
    cut: float | None = None,
    boxes: int | None = None,
    interpolation: str | None = None,
) -> float:
    """Weight of the "full" estimate in ``estimator="auto"`` (the rest goes to "in-in").

    From the predicted noise standard deviation of one 2-D cell as a fraction of n (public: ε
    and the group sizes) and the method (``"hdg"`` or ``"tdg"``, thresholds
    :data:`AUTO_NOISE`); for HDG also from the release's cut-cell error ``cut``
    (:func:`cut_error`, read from the released grids; thresholds :data:`AUTO_CUT`), which
    multiplies the weight. ``cut=None`` (or TDG, which has no 1-D grids) leaves the noise rule
    alone. ``boxes``: the most boxes per attribute of the 2-D grids (public); TDG with 2 × 2
    boxes gets weight 1 whatever the noise. There both estimators are close to the uniform guess
    (MAE 0.19–0.47 of n at ω = 0.5) and "full", which also fits the 1-D in-fractions of the
    two-box margins, was as good or better in all 24 such cells measured (n = 6·10^4: 12 cells,
    0.0–2.0 % better; n = 10^6, twelve releases: 12 cells, 0.0–2.0 %).

    ``interpolation``: TDG with ``"logsmooth"`` margins (its default) has its own ramp
    (``AUTO_NOISE["tdg-logsmooth"]``: weight 1 up to 1.5 % of n, 0.5 at about 3.9 %, 0 from
    10 %). The ramp ``AUTO_NOISE["tdg"]`` was set with PCHIP margins, whose low bias inside cut
    cells "full" multiplies; with the log-smooth spread that bias is mostly gone and "in-in"
    keeps a bias of its own (it ignores the 1-D in-fractions). Measured on the same releases
    (n = 10^6, d = 6, c = 64, λ = 3 / 4, four releases), "full" / "in-in": at ε = 1 0.35 /
    0.31 on independent Gaussian data, 0.45 / 0.41 on correlated Gaussian data (ρ = 0.5) and
    1.13 / 1.07 on the Laplace data; at ε = 2 0.36 / 0.35, 0.48 / 0.36 and 1.05 / 0.80.
    "in-in" wins at such noise only on the heavy-tailed data, and there the log-smooth
    default's MAE is 0.57–0.64× what the PCHIP default's was. With much more noise (3 % of n
    and above) the two estimators' errors are partly independent and an average beats both:
    0.95–0.99× the better one on the Gaussian data over twelve releases.

    >>> [round(auto_weight(s), 2) for s in (0.05, 0.035, 0.0187, 0.010, 0.002)]
    [0.0, 0.0, 0.5, 1.0, 1.0]
    >>> [round(auto_weight(s, "tdg"), 2) for s in (0.007, 0.00458, 0.003)]
    [0.0, 0.5, 1.0]
    >>> auto_weight(0.04, "tdg", boxes=2), auto_weight(0.04, "tdg", boxes=4)
    (1.0, 0.0)
    >>> [round(auto_weight(s, "tdg", boxes=3, interpolation="logsmooth"), 2)
    ...  for s in (0.2, 0.1, 0.0387, 0.015, 0.004)]
    [0.0, 0.0, 0.5, 1.0, 1.0]
    >>> [round(auto_weight(0.004, "hdg", cut=k), 2) for k in (0.009, 0.0183, 0.033)]
    [1.0, 0.5, 0.0]
    """
    m = method.lower()
    if m == "tdg" and boxes is not None and boxes <= 2:
        return 1.0
    if m == "tdg" and interpolation == "logsmooth":
        m = "tdg-logsmooth"
    hi, lo = AUTO_NOISE.get(m, AUTO_NOISE["hdg"])
    w = _log_ramp(noise, hi, lo)
    if cut is not None and m != "tdg":
        w *= _log_ramp(cut, *AUTO_CUT)
    return w


def _dependence(g: GridEstimate, n: float) -> float:
    """0 for a 2-D grid consistent with independence, 1 for a clearly dependent one.

    The total-variation distance of the grid (as shares of n) from the product of its margins,
    less what noise alone gives (``sqrt(2/π) · g_x g_y · sqrt((1 − 1/g_x)(1 − 1/g_y)) · σ``,
    σ the noise of one cell as a share of n), mapped linearly from :data:`AUTO_DEPENDENCE`
    (0.05 → 0, 0.15 → 1; correlated pairs with ρ = 0.5 measure 0.2–0.3)."""
    p = g.counts / n
    tv = float(np.abs(p - np.outer(p.sum(axis=1), p.sum(axis=0))).sum())
    gx, gy = p.shape
    sigma = math.sqrt(g.variance) / n if g.variance < 1e29 else math.inf
    noise = math.sqrt(2 / math.pi) * gx * gy * math.sqrt((1 - 1 / gx) * (1 - 1 / gy)) * sigma
    lo, hi = AUTO_DEPENDENCE
    return float(min(1.0, max(0.0, (tv - noise - lo) / (hi - lo))))


def cut_error(grids: Sequence[GridEstimate], n: float) -> float | None:
    """How much of the data's dependence the 2-D grids' cut cells cannot resolve (share of n).

    For every 2-D grid and each of its two attributes that has a 1-D grid (HDG), the 1-D grid
    is spread over its values (PCHIP, :func:`~fugu.inference.ldp_post.cell_values`), summed
    over the 2-D grid's coarser cells of that attribute, and spread again from those sums; the
    mean over values of the absolute difference of the two cumulative counts is the
    interpolation error of a cut 2-D cell, measured where it can be: on the finer 1-D grid. It
    is multiplied by the pair's dependence beyond noise (0 for a grid consistent with
    independence, where the response matrix — the product of the fine margins inside a box —
    loses nothing; 1 for a clearly dependent pair) and averaged over all (grid, attribute)
    pairs. Large when the 2-D cells are too coarse for the shape of dependent data (heavy-tailed
    scale mixtures with a sharp mode, or g2 = 2): there the 2-D answers inside cut cells
    underestimate the concentration of the data and "full", which multiplies that bias through
    the pair tables, loses to "in-in". ``None`` without 1-D grids (TDG). Reads only released
    grids and their public noise: post-processing.

    >>> e1 = np.arange(0, 17, 2); e2 = np.array([0, 8, 16])
    >>> peak = GridEstimate(("a",), (e1,), np.array([0, 0, 5, 35, 35, 5, 0, 0.0]))
    >>> flat = GridEstimate(("a",), (e1,), np.full(8, 10.0))
    >>> dep = GridEstimate(("a", "b"), (e2, e2), np.array([[35.0, 5.0], [5.0, 35.0]]))
    >>> indep = GridEstimate(("a", "b"), (e2, e2), np.full((2, 2), 20.0))
    >>> cut_error([flat, dep], 80.0)   # a flat attribute: nothing is lost in the coarse cells
    0.0
    >>> round(cut_error([peak, dep], 80.0), 3)   # a sharp mode inside 2 x 2 dependent boxes
    0.179
    >>> cut_error([peak, indep], 80.0)   # independent: the product inside a box is exact
    0.0
    """
    one = {g.attributes[0]: g for g in grids if len(g.attributes) == 1}
    errs = []
    for g in grids:
        if len(g.attributes) != 2 or n <= 0:
            continue
        dep = None
        for ax, a in enumerate(g.attributes):
            g1 = one.get(a)
            if g1 is None:
                continue
            if dep is None:
                dep = _dependence(g, n)
            fine = cell_values(g1.edges[0], np.maximum(g1.counts, 0.0))
            cum = np.concatenate([[0.0], np.cumsum(fine)])
            e2 = g.edges[ax]
            coarse = cell_values(e2, np.diff(cum[e2]))
            errs.append(dep * float(np.mean(np.abs(cum[1:] - np.cumsum(coarse)))) / n)
    return float(np.mean(errs)) if errs else None


def _overlap_weights(
    edges: NDArray[np.int64], lo: NDArray[np.int64], hi: NDArray[np.int64]
) -> NDArray[np.float64]:
    """Per query, the fraction of every cell inside ``[lo, hi)`` (uniform guess)."""
    a = np.maximum(edges[None, :-1], lo[:, None])
    b = np.minimum(edges[None, 1:], hi[:, None])
    return np.clip(b - a, 0, None) / np.diff(edges)[None, :]


def _full_cells(
    edges: NDArray[np.int64], lo: NDArray[np.int64], hi: NDArray[np.int64]
) -> tuple[NDArray[np.int64], NDArray[np.int64]]:
    """First and one-past-last index of the cells fully inside ``[lo, hi)`` (empty: a >= b)."""
    first = np.searchsorted(edges, lo, side="left")
    last = np.searchsorted(edges, hi, side="right") - 1
    return first, np.maximum(last, first)


def _box(ps: PrefixSums, x0: Any, x1: Any, y0: Any, y1: Any) -> NDArray[np.float64]:
    b = np.stack([np.stack([x0, x1], -1), np.stack([y0, y1], -1)], axis=1).astype(np.int64)
    return ps.answer(b)


def _grids_state(rel: Any) -> tuple[dict[str, np.ndarray], dict[str, Any]]:
    """Each grid's counts and edges as arrays, its attributes and variance in ``meta``."""
    arrays: dict[str, np.ndarray] = {}
    meta = []
    for i, g in enumerate(rel.grids):
        arrays[f"grid{i}"] = g.counts
        for j, e in enumerate(g.edges):
            arrays[f"edges{i}_{j}"] = e
        meta.append({"attributes": [str(a) for a in g.attributes], "variance": g.variance})
    return arrays, {"grids": meta}


def _grids_from_state(
    arrays: Mapping[str, np.ndarray], meta: Mapping[str, Any], domain: Any
) -> list[GridEstimate]:
    out = []
    for i, gm in enumerate(meta["grids"]):
        edges = tuple(arrays[f"edges{i}_{j}"] for j in range(len(gm["attributes"])))
        out.append(GridEstimate(tuple(gm["attributes"]), edges, arrays[f"grid{i}"], gm["variance"]))
    return out


def _matrices_state(rel: Any) -> tuple[dict[str, np.ndarray], dict[str, Any]]:
    arrays = {f"matrix{i}": m for i, m in enumerate(rel.matrices.values())}
    return arrays, {"matrices": [list(k) for k in rel.matrices]}


def _matrices_from_state(
    arrays: Mapping[str, np.ndarray], meta: Mapping[str, Any], domain: Any
) -> dict[tuple[str, str], np.ndarray]:
    return {(str(k[0]), str(k[1])): arrays[f"matrix{i}"] for i, k in enumerate(meta["matrices"])}


class GridRelease(Release):
    """What TDG and HDG publish: post-processed grids (and HDG's response matrices).

    Answering (Phase 3 of Yang et al.), for a query restricting λ attributes:

    * λ = 0: n.
    * λ = 1: HDG — the attribute's 1-D grid; TDG — the mean of its 2-D grids' marginals (equal
      after consistency); cells cut by the interval contribute by ``interpolation`` (the
      uniform guess, or the share of the cut in the PCHIP or log-smooth spread of the cells).
    * λ = 2: the pair's 2-D grid; cells fully inside the query contribute their count, cut cells
      the sum of the response matrix over the cut (HDG; TDG with ``"logsmooth"`` or
      ``"pchip"``) or the uniform guess (TDG with ``"uniform"``, §4.1).
    * λ ≥ 3: the 2 × 2 in/out table of every attribute pair (from the 2-D answers of the pair's
      intervals and complements) feeds :func:`~fugu.inference.ldp_post.estimate_from_pairs`
      (Algorithm 2, variant ``estimator``).

    ``expected_error(q)`` (λ ≤ 2): the root of the noise + sampling variance of the spec's error
    analysis (Yang et al. §5.1; frequency-oracle variance of the covered cells, weighted by the
    covered fraction of cut cells, plus ``n²(m−1)/(n−1)·f(1−f)`` for sampling a group). It leaves
    out the non-uniformity error and the effect of post-processing (which usually lowers the
    variance); ``None`` for λ ≥ 3 (the estimation error depends on the data, no formula).
    """

    kind = "ldp-grids"
    _state_fields = (
        Custom("grids", _grids_state, _grids_from_state, arrays=("grid", "edges"), meta=("grids",)),
        Custom(
            "matrices",
            _matrices_state,
            _matrices_from_state,
            arrays=("matrix",),
            meta=("matrices",),
        ),
        Meta("n", float),
        Meta("estimator", str),
        Meta("method", str),
        Meta("n_groups", int),
        Meta("tol", float),
        Meta("max_iter", int),
        Meta("interpolation", str, default="uniform"),
    )

    def __init__(
        self,
        domain: Domain,
        guarantee: Guarantee,
        grids: Sequence[GridEstimate],
        n: float,
        *,
        matrices: Mapping[tuple[str, str], NDArray[np.float64]] | None = None,
        estimator: str = "full",
        method: str = "hdg",
        n_groups: int | None = None,
        tol: float = 1.0,
        max_iter: int = 100,
        interpolation: str = "uniform",
    ) -> None:
        super().__init__(domain, guarantee)
        if interpolation not in INTERPOLATIONS:
            raise InvalidParameterError(
                f"interpolation must be one of {INTERPOLATIONS}, got {interpolation!r}"
            )
        self.interpolation = interpolation
        if estimator not in ESTIMATORS:
            raise InvalidParameterError(f"estimator must be one of {ESTIMATORS}, got {estimator!r}")
        self.grids = list(grids)
        self.n = float(n)
        self.matrices = dict(matrices or {})
        self.estimator = estimator
        self.method = method
        self.n_groups = len(self.grids) if n_groups is None else int(n_groups)
        self.tol, self.max_iter = float(tol), int(max_iter)
        names = domain.names
        self._axis = {a: i for i, a in enumerate(names)}
        self._pair: dict[tuple[int, int], GridEstimate] = {}
        self._one: dict[int, GridEstimate] = {}
        sizes = dict(zip(names, domain.shape, strict=True))
        for g in self.grids:
            for a, e in zip(g.attributes, g.edges, strict=True):
                if str(a) not in sizes or int(e[-1]) != sizes[str(a)]:
                    raise InvalidParameterError(
                        f"a grid on {[str(b) for b in g.attributes]} does not fit the domain: "
                        f"attribute {str(a)!r} "
                        + (f"has {sizes[str(a)]} values, its edges end at {int(e[-1])}"
                           if str(a) in sizes else f"is not one of {list(names)}")
                    )  # fmt: skip
            ax = tuple(self._axis[str(a)] for a in g.attributes)
            if len(ax) == 1:
                self._one[ax[0]] = g
            elif len(ax) == 2:
                self._pair[(min(ax), max(ax))] = g
            else:
                raise InvalidParameterError("grids must be 1-D or 2-D")
        pairs = {tuple(str(a) for a in g.attributes) for g in self.grids if len(g.attributes) == 2}
        for (x, y), m in self.matrices.items():
            want = (sizes.get(str(x)), sizes.get(str(y)))
            if (str(x), str(y)) not in pairs or np.shape(m) != want:
                raise InvalidParameterError(
                    f"the response matrix of ({x}, {y}) has shape {np.shape(m)}; it must belong "
                    f"to a 2-D grid of the release and have one row and column per value {want}"
                )
        self._ps: dict[Any, PrefixSums] = {}
        self._cum: dict[int, NDArray[np.float64]] = {}
        self._fine: dict[int, GridEstimate | None] = {}

    # -- answering ---------------------------------------------------------------------------
    @property
    def cell_noise(self) -> float:
        """Predicted noise standard deviation of one 2-D grid cell, as a fraction of n (mean
        over the pairs; from ε and the group sizes only)."""
        sd = [math.sqrt(g.variance) for g in self._pair.values() if g.variance < 1e29]
        return float(np.mean(sd)) / self.n if sd and self.n > 0 else math.inf

    @functools.cached_property
    def cut_error(self) -> float | None:
        """:func:`cut_error` of the released grids (``None`` without 1-D grids, as for TDG)."""
        return cut_error(self.grids, self.n)

    @property
    def full_weight(self) -> float:
        """Weight of the "full" λ-D estimate in the answers (1 for ``estimator="full"``, 0 for
        ``"in-in"``, :func:`auto_weight` of :attr:`cell_noise` and :attr:`cut_error` for
        ``"auto"``)."""
        if self.estimator != "auto":
            return 1.0 if self.estimator == "full" else 0.0
        boxes = max((max(g.counts.shape) for g in self._pair.values()), default=None)
        return auto_weight(
            self.cell_noise, self.method, self.cut_error, boxes, interpolation=self.interpolation
        )

    def _prefix(self, key: Any, arr: NDArray[np.float64]) -> PrefixSums:
        if key not in self._ps:
            self._ps[key] = PrefixSums(arr)
        return self._ps[key]

    def _oriented(self, a: int, b: int) -> tuple[GridEstimate, bool]:
        g = self._pair.get((min(a, b), max(a, b)))
        if g is None:
            raise InvalidParameterError(
                f"no 2-D grid for attributes {self._name(a)!r}, {self._name(b)!r}"
            )
        return g, self._axis[str(g.attributes[0])] != a

    def _name(self, a: int) -> str:
        assert self.domain is not None
        return self.domain.names[a]

    def answer_pair(
        self,
        a: int,
        b: int,
        lo_a: NDArray[np.int64],
        hi_a: NDArray[np.int64],
        lo_b: NDArray[np.int64],
        hi_b: NDArray[np.int64],
    ) -> NDArray[np.float64]:
        """2-D answers on attribute axes ``a``, ``b`` for intervals ``[lo, hi)`` (vectorised)."""
        g, flip = self._oriented(a, b)
        if flip:
            a, b, lo_a, hi_a, lo_b, hi_b = b, a, lo_b, hi_b, lo_a, hi_a
        ex, ey = g.edges
        key = (str(g.attributes[0]), str(g.attributes[1]))
        m = self.matrices.get(key)
        if m is None:  # uniform guess inside cut cells
            wx, wy = _overlap_weights(ex, lo_a, hi_a), _overlap_weights(ey, lo_b, hi_b)
            return np.asarray(np.einsum("qi,ij,qj->q", wx, g.counts, wy), dtype=np.float64)
        ps_m = self._prefix(("M", key), m)
        ps_g = self._prefix(("G", key), g.counts)
        fx0, fx1 = _full_cells(ex, lo_a, hi_a)
        fy0, fy1 = _full_cells(ey, lo_b, hi_b)
        inside = _box(ps_m, lo_a, hi_a, lo_b, hi_b)
        full_m = _box(ps_m, ex[fx0], ex[fx1], ey[fy0], ey[fy1])
        full_g = _box(ps_g, fx0, fx1, fy0, fy1)
        return inside - full_m + full_g

    def _holding(self, a: int) -> list[tuple[GridEstimate, int]]:
        """The 2-D grids holding attribute axis ``a``, each with the axis of ``a`` in it."""
        return [(g, 0 if x == a else 1) for (x, y), g in self._pair.items() if a in (x, y)]

    def _refined(self, a: int) -> GridEstimate | None:
        """TDG's shifted partitions: attribute axis ``a``'s margin on the common refinement of
        its 2-D grids' partitions (:func:`refined_margin`, computed once); None when the grids
        cut it alike."""
        if a not in self._fine:
            holding = self._holding(a)
            edges = [g.edges[ax] for g, ax in holding]
            cut_alike = all(np.array_equal(e, edges[0]) for e in edges)
            self._fine[a] = (
                None
                if not holding or cut_alike
                else refined_margin(
                    [g for g, _ in holding], holding[0][0].attributes[holding[0][1]]
                )
            )
        return self._fine[a]

    def answer_single(
        self, a: int, lo: NDArray[np.int64], hi: NDArray[np.int64]
    ) -> NDArray[np.float64]:
        """1-D answers on attribute axis ``a`` (vectorised)."""
        g1 = self._one.get(a)
        if g1 is not None:
            edges, counts = g1.edges[0], g1.counts
        else:
            margins = [(g.edges[ax], g.counts.sum(axis=1 - ax)) for g, ax in self._holding(a)]
            if not margins:
                raise InvalidParameterError(f"no grid covers attribute {self._name(a)!r}")
            fine = self._refined(a)
            if fine is not None:  # TDG's shifted partitions: the margin on their refinement
                edges, counts = fine.edges[0], fine.counts
            elif self.interpolation == "uniform":
                return np.mean([_overlap_weights(e, lo, hi) @ m for e, m in margins], axis=0)
            else:
                edges, counts = margins[0][0], np.mean([m for _, m in margins], axis=0)
        if self.interpolation == "uniform":
            return _overlap_weights(edges, lo, hi) @ counts
        if a not in self._cum:
            v = _spread(edges, counts, self.interpolation)
            self._cum[a] = np.concatenate([[0.0], np.cumsum(v)])
        cum = self._cum[a]
        return np.asarray(cum[hi] - cum[lo], dtype=np.float64)

    def _answer_bounds(self, bounds: NDArray[np.int64]) -> NDArray[np.float64]:
        dom = self._require_domain()
        b = np.asarray(bounds, dtype=np.int64)
        sizes = np.asarray(dom.shape, dtype=np.int64)
        restricted = (b[:, :, 0] > 0) | (b[:, :, 1] < sizes[None, :])
        lam = restricted.sum(axis=1)
        out = np.full(b.shape[0], self.n)
        for a in range(dom.ndim):
            sel = np.flatnonzero((lam == 1) & restricted[:, a])
            if sel.size:
                out[sel] = self.answer_single(a, b[sel, a, 0], b[sel, a, 1])
        groups = self._lambda_tables(b, restricted, lam, out)
        for lv, (qs_l, stacked) in groups.items():
            w = self.full_weight
            est = np.zeros(len(qs_l))
            for variant, share in (("full", w), ("in-in", 1.0 - w)):
                if share > 0:
                    e, _ = estimate_from_pairs(
                        stacked, lv, self.n, variant=variant, max_iter=self.max_iter,
                        tol=self.tol,
                    )  # fmt: skip
                    est += share * e
            out[qs_l] = est
        return out

    def _lambda_tables(
        self,
        b: NDArray[np.int64],
        restricted: NDArray[np.bool_],
        lam: NDArray[np.int64],
        out: NDArray[np.float64],
    ) -> dict[int, tuple[NDArray[np.int64], dict[tuple[int, int], NDArray[np.float64]]]]:
        """λ = 2 answers into ``out``; for λ ≥ 3, per λ: the query rows and the 2 × 2 in/out
        tables (Q, 2, 2) of every pair of the queries' restricted positions."""
        sizes = np.asarray(self._require_domain().shape, dtype=np.int64)
        multi = np.flatnonzero(lam >= 2)
        if multi.size == 0:
            return {}
        # 2-D answers for every (query, attribute pair) needed: the (in, in) box, and for λ ≥ 3
        # the two one-sided strips that complete the 2x2 in/out table.
        rows: dict[tuple[int, int], list[tuple[int, int, int]]] = {}
        attrs = {int(q): np.flatnonzero(restricted[q]) for q in multi}
        for q, ax in attrs.items():
            for pj, pk in combinations(range(len(ax)), 2):
                rows.setdefault((int(ax[pj]), int(ax[pk])), []).append((q, pj, pk))
        tables: dict[int, dict[tuple[int, int], NDArray[np.float64]]] = {}
        for (a, c), lst in rows.items():
            qs = np.array([r[0] for r in lst])
            lo_a, hi_a, lo_c, hi_c = b[qs, a, 0], b[qs, a, 1], b[qs, c, 0], b[qs, c, 1]
            inin = self.answer_pair(a, c, lo_a, hi_a, lo_c, hi_c)
            lam_q = lam[qs]
            full_a = np.zeros_like(lo_a)
            need = lam_q >= 3
            ina = np.full(qs.size, np.nan)
            inc = np.full(qs.size, np.nan)
            if need.any():
                s = need
                ina[s] = self.answer_pair(
                    a, c, lo_a[s], hi_a[s], full_a[s], np.full(s.sum(), sizes[c])
                )
                inc[s] = self.answer_pair(
                    a, c, full_a[s], np.full(s.sum(), sizes[a]), lo_c[s], hi_c[s]
                )
            for i, (q, pj, pk) in enumerate(lst):
                if lam[q] == 2:
                    out[q] = inin[i]
                    continue
                ii, ia, ic = inin[i], ina[i], inc[i]
                t = np.array([[ii, ia - ii], [ic - ii, self.n - ia - ic + ii]])
                tables.setdefault(q, {})[(pj, pk)] = t
        by_lam: dict[int, list[int]] = {}
        for q in tables:
            by_lam.setdefault(int(lam[q]), []).append(q)
        groups = {}
        for lv, qs_l in by_lam.items():
            pairs = list(combinations(range(lv), 2))
            stacked = {p: np.stack([tables[q][p] for q in qs_l]) for p in pairs}
            groups[lv] = (np.array(qs_l), stacked)
        return groups

    # -- error -------------------------------------------------------------------------------
    def expected_error(self, query: RangeQuery | Mapping[str, Any]) -> float | None:
        q = query if isinstance(query, RangeQuery) else RangeQuery(dict(query))
        dom = self._require_domain()
        b = q.bounds(dom)
        sizes = np.asarray(dom.shape)
        ax = np.flatnonzero((b[:, 0] > 0) | (b[:, 1] < sizes))
        if ax.size == 0:
            return 0.0
        if ax.size > 2:
            return None
        lo, hi = b[ax, 0][:, None], b[ax, 1][:, None]
        if ax.size == 1:
            a = int(ax[0])
            g1 = self._one.get(a)
            if g1 is not None and g1.variance < 1e29:  # else its group had no report: the
                # consistent 1-D grid carries the 2-D margins' information (below)
                w = _overlap_weights(g1.edges[0], lo[0], hi[0])[0]
                noise = float(np.sum(w**2) * g1.variance)
            else:
                fine = self._refined(a)
                if fine is not None:
                    # shifted partitions: the variance of the refined margin's weighted fit
                    w = _overlap_weights(fine.edges[0], lo[0], hi[0])[0]
                    cov = np.asarray(fine.meta["covariance"], dtype=np.float64)
                    noise = float(w @ cov @ w)
                else:
                    # the margins are pooled with inverse-variance weights (Phase 2's
                    # consistency): 1/sum(1/v) (= sum(v)/k^2 for equal v); a grid without
                    # reports adds nothing
                    parts = [
                        np.sum(_overlap_weights(g.edges[ax], lo[0], hi[0])[0] ** 2)
                        * g.counts.shape[1 - ax]
                        * g.variance
                        for g, ax in self._holding(a)
                    ]
                    noise = float(1.0 / np.sum(1.0 / np.maximum(parts, 1e-300)))
        else:
            a, c = int(ax[0]), int(ax[1])
            g, flip = self._oriented(a, c)
            la, ha, lc, hc = lo[0], hi[0], lo[1], hi[1]
            if flip:
                la, ha, lc, hc = lc, hc, la, ha
            wx = _overlap_weights(g.edges[0], la, ha)[0]
            wy = _overlap_weights(g.edges[1], lc, hc)[0]
            noise = float(np.sum(wx**2) * np.sum(wy**2) * g.variance)
        f = min(max(self.answer(q) / self.n, 0.0), 1.0) if self.n > 0 else 0.0
        m = self.n_groups
        sampling = self.n**2 * (m - 1) / max(self.n - 1, 1) * f * (1 - f)
        return math.sqrt(noise + sampling)

    def with_estimator(self, estimator: str) -> GridRelease:
        """The same release answering λ ≥ 3 queries with another estimator (post-processing)."""
        return GridRelease(
            self._require_domain(), self.guarantee, self.grids, self.n, matrices=self.matrices,
            estimator=estimator, method=self.method, n_groups=self.n_groups, tol=self.tol,
            max_iter=self.max_iter, interpolation=self.interpolation,
        )  # fmt: skip

    def summary(self) -> dict[str, Any]:
        out = super().summary()
        out["grids"] = {"x".join(map(str, g.attributes)): list(g.shape) for g in self.grids}
        return out
