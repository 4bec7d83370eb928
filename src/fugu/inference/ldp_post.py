"""Post-processing of local-DP frequency estimates: Norm-Sub, consistency, weighted update.

Nothing private enters this module. Every function takes noisy estimates (counts on the scale
of the whole population, floats) plus public structure, and returns new estimates. Applying
any of them costs no privacy (post-processing), but all except :func:`consistency` (and
``method="norm"``) bias the estimates; record what you applied in the release's guarantee.

Shared by the LDP range-query methods (TDG/HDG in ``fugu.ldp.tdg``/``fugu.ldp.hdg``, CALM and
LHIO in ``fugu.ldp``). Sources: Wang, Lopuhaä-Zwakenberg, Li, Škorić, Li, *Locally
Differentially Private Frequency Estimation with Consistency*, NDSS 2020 (Norm-Sub family);
Qardaji, Yang, Li, *PriView*, SIGMOD 2014, and Zhang et al., *CALM*, CCS 2018 (weighted
consistency of shared marginals); Yang et al., *Answering Multi-Dimensional Range Queries under
LDP*, PVLDB 2020, Sections 4.2–4.4 (grids, response matrix = Algorithm 1, λ-D estimation =
Algorithm 2), spec ``ldp_range.md`` §5.3–5.7.

Contents
--------
Non-negativity (one vector or a stack of vectors along ``axis``; ``total`` = target sum):

* :func:`norm_sub` — Norm-Sub, computed exactly (not iterated): the fixed point of "set
  negatives to 0, spread the missing/excess mass equally over the positive entries". When the
  clamped sum exceeds ``total`` this is the Euclidean projection onto ``{x ≥ 0, Σx = total}``
  (threshold δ ≥ 0, ``out = max(x − δ, 0)``); when it falls short, the positive entries are
  raised equally and zeros stay 0. All entries ≤ 0 → uniform ``total/k``.
* :func:`normalise` — ``method`` one of ``"norm-sub"`` (default), ``"norm"`` (shift every entry
  equally so the sum is ``total``; unbiased, may stay negative), ``"norm-mul"`` (clamp, scale),
  ``"norm-cut"`` (clamp, then keep the largest entries whose running sum is ≤ ``total``),
  ``"base-pos"`` (clamp only).

Grids and consistency:

* :class:`GridEstimate` — counts over a product of per-attribute partitions. ``attributes``
  (hashable names/indices), ``edges`` (per axis, increasing int cell boundaries over the codes
  ``[0, c)``, first 0, last c), ``counts`` (shape ``len(e) − 1`` per axis) and ``variance`` (the
  noise variance of one cell; used only to weight grids against each other).
* :func:`consistency` — for each attribute set in ``on`` (default: every single attribute
  shared by two or more grids, in first-appearance order), the grids containing it are
  marginalised onto the coarsest common partition (intersection of their edges), the
  inverse-variance weighted mean ``T = Σ w_i T_i / Σ w_i`` with ``w_i = 1/(|S_i|·variance_i)``
  (|S_i| = number of the grid's cells adding up to the common cell) is formed, and each of the
  |S_i| cells gets ``+(T − T_i)/|S_i|``. Afterwards every pair of grids has identical marginals
  on the processed attribute sets (Qardaji et al.: a later attribute does not break an earlier
  one). Totals are preserved when all grids start with the same total.
* :func:`consistent_grids` — Phase 2 of TDG/HDG: Norm-Sub every grid, then alternate
  consistency and Norm-Sub until the largest absolute cell change in a round is below ``tol``
  counts (default 1, one user) or ``max_iter`` rounds; always ends with Norm-Sub, so every grid
  is non-negative and sums to ``total``, and marginals agree up to that last step.

Weighted update (multiplicative, IPF-style):

* :func:`weighted_update` — generic iterative proportional fitting of a non-negative array to a
  list of partition constraints ``(labels, targets)``: for each constraint in turn every block
  ``labels == k`` is rescaled to sum to ``targets[k]`` (blocks with zero mass are left alone),
  then the array is rescaled to ``total``. Stops when the L1 change of a full sweep is below
  ``tol`` or after ``max_iter`` sweeps. From a uniform start, IPF converges to the
  maximum-entropy array matching the constraints when they are consistent.
* :func:`cell_values` — 1-D cell counts spread over the cells' values: uniformly (the paper)
  or by the monotone cubic interpolant of the cumulative counts (PCHIP; less biased on smooth
  data, same cell totals).
* :func:`response_matrix` — Algorithm 1 of Yang et al.: the c_x × c_y matrix fitted by
  :func:`weighted_update` to the 1-D grid of x, the 1-D grid of y and the 2-D grid of (x, y)
  (1-D grids may be omitted, as for TDG), from the uniform start ``total/(c_x c_y)``.
* :func:`estimate_from_pairs` — Algorithm 2: λ-D answers from 2 × 2 (in/out) tables of every
  pair of query attributes, vectorised over many queries. ``variant="full"`` fits all four
  cells of every pair table (IPF on the 2^λ in/out table); ``variant="in-in"`` fits only the
  (in, in) cell and the total, as the authors' code does (spec §5.7: a 3–5× higher error floor).

Examples
--------
>>> import numpy as np
>>> from fugu.inference.ldp_post import norm_sub
>>> norm_sub(np.array([6.0, -2.0, 3.0, 4.0]), total=10.0)
array([5., 0., 2., 3.])
"""

from __future__ import annotations

import math
from collections.abc import Hashable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from itertools import combinations

import numpy as np
from numpy.typing import ArrayLike, NDArray

from ..errors import InvalidParameterError

__all__ = [
    "INTERPOLATIONS",
    "NORMALISATIONS",
    "GridEstimate",
    "cell_values",
    "consistency",
    "consistent_grids",
    "estimate_from_pairs",
    "max_marginal_gap",
    "norm_sub",
    "normalise",
    "response_matrix",
    "weighted_update",
]

FloatArray = NDArray[np.float64]
NORMALISATIONS = ("norm-sub", "norm", "norm-mul", "norm-cut", "base-pos")
INTERPOLATIONS = ("logsmooth", "pchip", "uniform")


# ----------------------------------------------------------------------------- non-negativity
def _rows(x: ArrayLike, axis: int) -> tuple[FloatArray, int]:
    a = np.asarray(x, dtype=np.float64)
    if a.ndim == 0:
        raise InvalidParameterError("estimates must be an array with at least one axis")
    if not np.all(np.isfinite(a)):
        raise InvalidParameterError("estimates contain NaN or infinite values")
    return np.moveaxis(a, axis, -1).copy(), axis


def _totals(x: FloatArray, total: ArrayLike | None) -> FloatArray:
    if total is None:
        return np.asarray(x.sum(axis=-1), dtype=np.float64)
    t = np.broadcast_to(np.asarray(total, dtype=np.float64), x.shape[:-1])
    if not np.all(np.isfinite(t)) or np.any(t < 0):
        raise InvalidParameterError(f"total must be finite and >= 0, got {total!r}")
    return np.array(t, dtype=np.float64)


def norm_sub(x: ArrayLike, total: ArrayLike | None = None, *, axis: int = -1) -> FloatArray:
    """Norm-Sub (Wang et al., NDSS 2020): non-negative estimates summing to ``total``.

    Parameters
    ----------
    x : array
        Noisy estimates; the vectors run along ``axis`` (a stack is processed at once).
    total : float or array, optional
        Target sum of each vector (e.g. the number of users n). Default: the current sum.
    axis : int

    Returns
    -------
    array of the same shape, ``>= 0`` and summing to ``total`` along ``axis``.

    Examples
    --------
    >>> norm_sub([-1.0, -3.0], total=4.0)   # nothing positive: uniform
    array([2., 2.])
    >>> norm_sub([1.0, 1.0, -5.0], total=6.0)  # mass missing: raise the positive entries
    array([3., 3., 0.])
    """
    v, ax = _rows(x, axis)
    k = v.shape[-1]
    t = _totals(v, total)
    pos = np.maximum(v, 0.0)
    s = pos.sum(axis=-1)
    out = np.empty_like(v)
    # Case 1: clamped sum >= total -> projection with threshold delta >= 0.
    u = -np.sort(-v, axis=-1)
    cs = np.cumsum(u, axis=-1)
    j = np.arange(1, k + 1, dtype=np.float64)
    cond = u - (cs - t[..., None]) / j > 0
    rho = np.where(cond.any(axis=-1), k - 1 - np.argmax(cond[..., ::-1], axis=-1), 0)
    delta = (np.take_along_axis(cs, rho[..., None], axis=-1)[..., 0] - t) / (rho + 1)
    proj = np.maximum(v - delta[..., None], 0.0)
    # Case 2: clamped sum < total -> raise positive entries equally; all <= 0 -> uniform.
    npos = (v > 0).sum(axis=-1)
    raise_by = (t - s) / np.maximum(npos, 1)
    raised = np.where(v > 0, v + raise_by[..., None], 0.0)
    uniform = np.broadcast_to((t / k)[..., None], v.shape)
    big = (s >= t)[..., None]
    out = np.where(big, proj, np.where((npos > 0)[..., None], raised, uniform))
    out = np.where((t <= 0)[..., None], 0.0, out)
    return np.moveaxis(out, -1, ax)


def normalise(
    x: ArrayLike, total: ArrayLike | None = None, *, method: str = "norm-sub", axis: int = -1
) -> FloatArray:
    """One of the Norm-Sub family (Wang et al., NDSS 2020). See the module docstring.

    >>> normalise([4.0, -1.0, 1.0], total=7.0, method="norm")
    array([5., 0., 2.])
    >>> normalise([4.0, -1.0, 1.0], total=10.0, method="norm-mul")
    array([8., 0., 2.])
    >>> normalise([4.0, 3.0, 2.0, -1.0], total=7.5, method="norm-cut")
    array([4., 3., 0., 0.])
    """
    if method == "norm-sub":
        return norm_sub(x, total, axis=axis)
    if method not in NORMALISATIONS:
        raise InvalidParameterError(f"method must be one of {NORMALISATIONS}, got {method!r}")
    v, ax = _rows(x, axis)
    k = v.shape[-1]
    t = _totals(v, total)
    if method == "norm":
        out = v + ((t - v.sum(axis=-1)) / k)[..., None]
    else:
        pos = np.maximum(v, 0.0)
        if method == "base-pos":
            out = pos
        elif method == "norm-mul":
            s = pos.sum(axis=-1)
            safe = np.where(s > 0, s, 1.0)
            out = np.where((s > 0)[..., None], pos * (t / safe)[..., None], (t / k)[..., None])
        else:  # norm-cut
            order = np.argsort(-pos, axis=-1, kind="stable")
            srt = np.take_along_axis(pos, order, axis=-1)
            keep_sorted = np.cumsum(srt, axis=-1) <= t[..., None] + 1e-9
            keep = np.empty_like(keep_sorted)
            np.put_along_axis(keep, order, keep_sorted, axis=-1)
            out = np.where(keep, pos, 0.0)
    return np.moveaxis(out, -1, ax)


# ----------------------------------------------------------------------------- grids
@dataclass
class GridEstimate:
    """Estimated counts over a product of per-attribute partitions (one LDP grid or marginal).

    Parameters
    ----------
    attributes : tuple of hashable
        Names (or indices) of the attributes, one per axis of ``counts``.
    edges : tuple of int arrays
        Per axis, increasing cell boundaries over the codes ``[0, c)``: ``e[0] = 0``,
        ``e[-1] = c``; cell ``i`` covers codes ``[e[i], e[i+1])``.
    counts : float array, shape ``tuple(len(e) - 1 for e in edges)``
    variance : float
        Noise variance of one cell (only the ratios between grids matter).

    >>> g = GridEstimate(("a",), (np.array([0, 2, 4]),), np.array([3.0, 1.0]))
    >>> g.shape, g.domain_sizes
    ((2,), (4,))
    """

    attributes: tuple[Hashable, ...]
    edges: tuple[NDArray[np.int64], ...]
    counts: FloatArray
    variance: float = 1.0
    meta: dict[str, object] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.attributes = tuple(self.attributes)
        self.edges = tuple(np.asarray(e, dtype=np.int64) for e in self.edges)
        self.counts = np.asarray(self.counts, dtype=np.float64)
        if len(set(self.attributes)) != len(self.attributes):
            raise InvalidParameterError(f"grid attributes repeat: {self.attributes}")
        if len(self.edges) != len(self.attributes):
            raise InvalidParameterError("a grid needs one edges array per attribute")
        for a, e in zip(self.attributes, self.edges, strict=True):
            if e.ndim != 1 or len(e) < 2 or e[0] != 0 or np.any(np.diff(e) <= 0):
                raise InvalidParameterError(
                    f"edges of attribute {a!r} must increase strictly from 0, got {e.tolist()}"
                )
        if self.counts.shape != self.shape:
            raise InvalidParameterError(
                f"grid counts have shape {self.counts.shape}, the edges need {self.shape}"
            )
        if not (np.isfinite(self.variance) and self.variance > 0):
            raise InvalidParameterError(f"variance must be > 0, got {self.variance!r}")

    @property
    def shape(self) -> tuple[int, ...]:
        return tuple(len(e) - 1 for e in self.edges)

    @property
    def domain_sizes(self) -> tuple[int, ...]:
        return tuple(int(e[-1]) for e in self.edges)

    def copy(self, counts: FloatArray | None = None) -> GridEstimate:
        c = self.counts.copy() if counts is None else counts
        return GridEstimate(self.attributes, self.edges, c, self.variance, dict(self.meta))

    def axis(self, attribute: Hashable) -> int:
        return self.attributes.index(attribute)

    def marginal(self, attributes: Sequence[Hashable]) -> FloatArray:
        """Counts summed over every other axis, axes in the order of ``attributes``."""
        axes = [self.axis(a) for a in attributes]
        other = tuple(i for i in range(len(self.attributes)) if i not in axes)
        m = self.counts.sum(axis=other) if other else self.counts
        kept = [i for i in range(len(self.attributes)) if i in axes]
        return np.transpose(m, [kept.index(i) for i in axes])


def _common_edges(grids: Sequence[GridEstimate], attribute: Hashable) -> NDArray[np.int64]:
    es = [g.edges[g.axis(attribute)] for g in grids]
    sizes = {int(e[-1]) for e in es}
    if len(sizes) != 1:
        raise InvalidParameterError(
            f"grids disagree on the domain size of attribute {attribute!r}: {sorted(sizes)}"
        )
    common = es[0]
    for e in es[1:]:
        common = np.intersect1d(common, e)
    return common


def _coarsen(
    m: FloatArray, grid_edges: Sequence[NDArray[np.int64]], common: Sequence[NDArray[np.int64]]
) -> tuple[FloatArray, list[NDArray[np.int64]]]:
    """Sum cells of ``m`` into the common cells; return also the cells-per-common-cell counts."""
    per = []
    for ax, (e, c) in enumerate(zip(grid_edges, common, strict=True)):
        pos = np.searchsorted(e, c)
        m = np.add.reduceat(m, pos[:-1], axis=ax)
        per.append(np.diff(pos))
    return m, per


def _nested(partitions: Sequence[NDArray[np.int64]]) -> bool:
    """Whether the distinct partitions are totally ordered by refinement."""
    distinct = sorted({e.tobytes(): e for e in partitions}.values(), key=len)
    return all(np.isin(a, b).all() for a, b in zip(distinct, distinct[1:], strict=False))


def _margin_system(
    members: Sequence[GridEstimate], attribute: Hashable, weighting: str
) -> tuple[NDArray[np.int64], list[tuple[FloatArray, FloatArray, float, int]]]:
    """The common refinement of ``attribute``'s partitions in ``members`` and, per member,
    ``(B, margin, weight, cells summed per margin cell)`` with ``B`` the 0/1 matrix summing
    refined cells into the member's cells."""
    es = [g.edges[g.axis(attribute)] for g in members]
    if len({int(e[-1]) for e in es}) != 1:
        raise InvalidParameterError(
            f"grids disagree on the domain size of attribute {attribute!r}: "
            f"{sorted({int(e[-1]) for e in es})}"
        )
    fine = np.unique(np.concatenate(es)).astype(np.int64)
    rows = []
    for g, e in zip(members, es, strict=True):
        m = g.marginal([attribute])
        other = g.counts.size // m.size
        pos = np.searchsorted(fine, e)
        b = np.zeros((len(e) - 1, len(fine) - 1))
        for i in range(len(e) - 1):
            b[i, pos[i] : pos[i + 1]] = 1.0
        w = 1.0 / (other * g.variance) if weighting == "variance" else 1.0
        rows.append((b, m, w, other))
    return fine, rows


def _wls(rows: Sequence[tuple[FloatArray, FloatArray, float, int]]) -> FloatArray:
    """Weighted least squares of the refined cells from every member's margin."""
    a = np.vstack([math.sqrt(w) * b for b, _, w, _ in rows])
    y = np.concatenate([math.sqrt(w) * m for _, m, w, _ in rows])
    return np.asarray(np.linalg.lstsq(a, y, rcond=None)[0], dtype=np.float64)


def refined_margin(
    grids: Sequence[GridEstimate], attribute: Hashable, *, weighting: str = "variance"
) -> GridEstimate:
    """One attribute's counts on the common refinement of its partitions in ``grids``.

    Every grid holding the attribute gives its margin, a noisy observation of sums of the
    refined cells (variance: the grid's cell variance times the number of cells summed);
    the estimate is their weighted least-squares fit (``weighting="mean"``: equal weights).
    With one partition it is the inverse-variance mean of the margins; with TDG's aligned and
    shifted partitions (``partitions="shifted"``) the refined cells, of half the width, are
    identified. ``variance`` of the result: the mean over cells of the fit's variance;
    ``meta["covariance"]``: the fit's covariance matrix (``weighting="variance"``).
    Post-processing of the grids.

    >>> e1, e2 = np.array([0, 2, 4]), np.array([0, 1, 3, 4])
    >>> a = GridEstimate(("x",), (e1,), np.array([3.0, 7.0]))
    >>> b = GridEstimate(("x",), (e2,), np.array([1.0, 6.0, 3.0]))
    >>> r = refined_margin([a, b], "x")
    >>> r.edges[0].tolist(), np.round(r.counts, 6).tolist()
    ([0, 1, 2, 3, 4], [1.0, 2.0, 4.0, 3.0])
    """
    if weighting not in ("variance", "mean"):
        raise InvalidParameterError(f"weighting must be 'variance' or 'mean', got {weighting!r}")
    members = [g for g in grids if attribute in g.attributes]
    if not members:
        raise InvalidParameterError(f"no grid holds attribute {attribute!r}")
    fine, rows = _margin_system(members, attribute, weighting)
    r = _wls(rows)
    if weighting != "variance":  # equal weights: no noise model, no covariance
        return GridEstimate((attribute,), (fine,), r, 1.0)
    cov = np.linalg.pinv(sum(w * b.T @ b for b, _, w, _ in rows))
    var = float(np.mean(np.diag(cov)))
    return GridEstimate((attribute,), (fine,), r, max(var, 1e-300), {"covariance": cov})


def consistency(
    grids: Sequence[GridEstimate],
    on: Iterable[Sequence[Hashable] | Hashable] | None = None,
    *,
    weighting: str = "variance",
) -> list[GridEstimate]:
    """Make the grids agree on shared (sets of) attributes by weighted averaging.

    Parameters
    ----------
    grids : sequence of GridEstimate
    on : attribute sets to make consistent, in order (a bare name means one attribute). Default:
        every single attribute found in two or more grids, in order of first appearance.
    weighting : ``"variance"`` (inverse variance of each grid's marginal cell, the optimum of
        Yang et al. §4.2 / CALM) or ``"mean"`` (plain average, the authors' TDG code).

    Returns
    -------
    list of new GridEstimate (inputs are not modified).

    >>> e = np.array([0, 1, 2])
    >>> g1 = GridEstimate(("a",), (e,), np.array([4.0, 6.0]))
    >>> g2 = GridEstimate(("a", "b"), (e, e), np.array([[1.0, 1.0], [4.0, 4.0]]))
    >>> [g.marginal(["a"]).tolist() for g in consistency([g1, g2], weighting="mean")]
    [[3.0, 7.0], [3.0, 7.0]]
    >>> consistency([g1, g2])[0].counts.round(3)  # g2's margin sums 2 cells: half the weight
    array([3.333, 6.667])
    """
    if weighting not in ("variance", "mean"):
        raise InvalidParameterError(f"weighting must be 'variance' or 'mean', got {weighting!r}")
    out = [g.copy() for g in grids]
    if on is None:
        seen: dict[Hashable, int] = {}
        for g in out:
            for a in g.attributes:
                seen[a] = seen.get(a, 0) + 1
        sets: list[tuple[Hashable, ...]] = [(a,) for a, k in seen.items() if k >= 2]
    else:
        sets = [tuple(s) if isinstance(s, list | tuple) else (s,) for s in on]
    for attrs in sets:
        members = [g for g in out if all(a in g.attributes for a in attrs)]
        if len(members) < 2:
            continue
        if len(attrs) == 1 and not _nested([g.edges[g.axis(attrs[0])] for g in members]):
            _refined_consistency(members, attrs[0], weighting)
            continue
        common = [_common_edges(members, a) for a in attrs]
        margins, sizes, weights = [], [], []
        for g in members:
            axes = [g.axis(a) for a in attrs]
            m, per = _coarsen(g.marginal(attrs), [g.edges[i] for i in axes], common)
            other = int(
                np.prod([n for i, n in enumerate(g.shape) if i not in axes], dtype=np.int64)
            )
            size = np.asarray(other, dtype=np.float64)
            for ax, p in enumerate(per):
                shp = [1] * len(attrs)
                shp[ax] = len(p)
                size = size * p.reshape(shp)
            size = np.broadcast_to(size, m.shape)
            margins.append(m)
            sizes.append(size)
            weights.append(
                1.0 / (size * g.variance) if weighting == "variance" else np.ones_like(size)
            )
        wsum = np.sum(weights, axis=0)
        target = np.sum([w * m for w, m in zip(weights, margins, strict=True)], axis=0) / wsum
        for g, m, size in zip(members, margins, sizes, strict=True):
            delta = (target - m) / size
            axes = [g.axis(a) for a in attrs]
            for ax, a in enumerate(attrs):
                e = g.edges[g.axis(a)]
                pos = np.searchsorted(e, common[ax])
                delta = np.repeat(delta, np.diff(pos), axis=ax)
            # delta has axes in `attrs` order; move them to the grid's axes and broadcast.
            order = np.argsort(axes)
            delta = np.transpose(delta, order)
            shp = [g.shape[i] if i in axes else 1 for i in range(len(g.shape))]
            g.counts = g.counts + delta.reshape(shp)
    return out


def max_marginal_gap(grids: Sequence[GridEstimate]) -> float:
    """Largest difference between two grids' counts on a shared attribute's common cells
    (the cells of each pair of grids' common partition: with TDG's shifted partitions, whose
    common cells with the other partition are the whole domain, grids cut alike are still
    compared cell by cell)."""
    gap = 0.0
    names: list[Hashable] = []
    for g in grids:
        names.extend(a for a in g.attributes if a not in names)
    for a in names:
        members = [g for g in grids if a in g.attributes]
        _common_edges(members, a)  # one domain size
        for g, h in combinations(members, 2):
            common = _common_edges([g, h], a)
            ms = [_coarsen(x.marginal([a]), [x.edges[x.axis(a)]], [common])[0] for x in (g, h)]
            gap = max(gap, float(np.max(np.abs(ms[0] - ms[1]))))
    return gap


def _refined_consistency(members: list[GridEstimate], attribute: Hashable, weighting: str) -> None:
    """Consistency of one attribute whose partitions are not nested (TDG's shifted grids):
    every member's margin is set to its partition's sums of :func:`refined_margin`, the
    difference spread evenly over the member's other cells (as for nested partitions)."""
    fine, rows = _margin_system(members, attribute, weighting)
    r = _wls(rows)
    for g, (b, m, _, other) in zip(members, rows, strict=True):
        delta = (b @ r - m) / other
        shp = [1] * len(g.shape)
        shp[g.axis(attribute)] = len(delta)
        g.counts = g.counts + delta.reshape(shp)


def consistent_grids(
    grids: Sequence[GridEstimate],
    total: float,
    *,
    max_iter: int = 100,
    tol: float = 1.0,
    weighting: str = "variance",
    on: Iterable[Sequence[Hashable] | Hashable] | None = None,
    method: str = "norm-sub",
) -> tuple[list[GridEstimate], int]:
    """Phase 2 of TDG/HDG: Norm-Sub, then alternate consistency and Norm-Sub.

    Stops when no cell moved by more than ``tol`` (counts) in a whole round, or after
    ``max_iter`` rounds (the authors' code runs exactly 100 rounds; the rule here gives the same
    grids to within ``tol`` and usually stops after a handful). Ends with ``method``.

    Returns
    -------
    (grids, rounds)
    """
    if max_iter < 0:
        raise InvalidParameterError(f"max_iter must be >= 0, got {max_iter}")
    cur = [
        g.copy(normalise(g.counts.ravel(), total, method=method).reshape(g.shape)) for g in grids
    ]
    rounds = 0
    for rounds in range(1, max_iter + 1):  # noqa: B007
        nxt = consistency(cur, on, weighting=weighting)
        nxt = [
            g.copy(normalise(g.counts.ravel(), total, method=method).reshape(g.shape)) for g in nxt
        ]
        change = max(
            float(np.max(np.abs(a.counts - b.counts))) for a, b in zip(nxt, cur, strict=True)
        )
        cur = nxt
        if change < tol:
            break
    return cur, rounds


# ----------------------------------------------------------------------------- inside a cell
def _pchip_end(h0: float, h1: float, d0: float, d1: float) -> float:
    v = ((2 * h0 + h1) * d0 - h0 * d1) / (h0 + h1)
    if np.sign(v) != np.sign(d0):
        return 0.0
    if np.sign(d0) != np.sign(d1) and abs(v) > 3 * abs(d0):
        return 3 * d0
    return float(v)


# "logsmooth": at most this many Newton steps per run of positive cells (each a banded KKT
# solve), each changing the log-density by at most _LOG_SMOOTH_MAX_STEP; a run whose result is
# not a KKT point to _LOG_SMOOTH_TOL (cell sums relative, stationarity relative to the
# log-density's size) is spread by PCHIP instead.
_LOG_SMOOTH_STEPS = 60
_LOG_SMOOTH_MAX_STEP = 2.0
_LOG_SMOOTH_TOL = 1e-8
# Rounding in the fourth differences limits the log-density's accuracy to about
# eps·(cell width)^4 relative: measured on two cells of w values of exponential data, 1e-7 to
# 1.1e-6 at w = 1,000 (the sparse solver's rounding: 1.1e-6 with scipy 1.17.1), 1.5e-4 at
# 5,000, 2 % at 20,000. Runs with a cell wider than this are spread by PCHIP (and would take
# ~1 s per Newton step at 10^6 values).
_LOG_SMOOTH_MAX_WIDTH = 20_000


def _log_smooth_kkt(
    pen: tuple[FloatArray, FloatArray, FloatArray],
    h: FloatArray,
    a: FloatArray,
    first: NDArray[np.bool_],
    last: NDArray[np.bool_],
    rhs1: FloatArray,
    rhs2: FloatArray,
) -> tuple[FloatArray, FloatArray] | None:
    """Solve ``[[P + diag(h), Aᵀ], [A, 0]] [d; μ] = [rhs1; rhs2]`` (``A[k, j] = a_j`` for the
    values j of cell k, ``P`` pentadiagonal with diagonals ``pen``) as a banded system in
    ``(d_j, μ_j, s_j)`` per value: ``μ_j`` is the cell's multiplier copied along the cell,
    ``s_j`` the running sum of ``a d`` in the cell (so every row is local; bandwidth 6 each
    side, O(m) time and memory). Returns ``d`` and ``μ`` per value, or None if singular."""
    from scipy.linalg import lapack

    m = a.size
    r = 3 * np.arange(m)
    kl = 6
    ab = np.zeros((3 * kl + 1, 3 * m), order="F")
    o = 2 * kl  # A[i, j] is stored at ab[o + i - j, j]
    ab[o, r] = pen[0] + h  # row 3j: (P d)_j + h_j d_j + a_j μ_j = rhs1_j
    for dd in (1, 2):
        ab[o - 3 * dd, r[dd:]] = pen[dd]
        ab[o + 3 * dd, r[:-dd]] = pen[dd]
    ab[o - 1, r + 1] = a
    inner = ~last[:-1]  # row 3j+1: μ_j − μ_{j+1} = 0 inside a cell, s_j = rhs2 at its end
    ab[o, (r + 1)[~last]] = 1.0
    ab[o - 3, (r[:-1] + 4)[inner]] = -1.0
    ab[o - 1, (r + 2)[last]] = 1.0
    ab[o, r + 2] = 1.0  # row 3j+2: s_j − s_{j−1} (same cell) − a_j d_j = 0
    ab[o + 3, (r - 1)[~first]] = -1.0
    ab[o + 2, r] = -a
    b = np.zeros((3 * m, 1))
    b[r, 0] = rhs1
    b[(r + 1)[last], 0] = rhs2
    _, _, x, info = lapack.dgbsv(kl, kl, ab, b, overwrite_ab=1, overwrite_b=1)
    if info != 0 or not np.all(np.isfinite(x)):
        return None
    return x[r, 0], x[r + 1, 0]


def _log_smooth_run(tgt: FloatArray, w: NDArray[np.int64]) -> FloatArray | None:
    """The log-smooth values of one run of ``g ≥ 2`` positive cells with ``m > g`` values, or
    None if Newton's method did not reach a KKT point.

    Unknowns: the log-density η and one multiplier per cell. The cell sums are scaled to 1
    (``q_j = exp(η_j − log t_k)``, ``Σ_{j∈k} q_j = 1``), so counts of any size (1e-300 or
    1e300, denormal totals included) give the same well-scaled system. Newton's method on the
    KKT equations ``Pη + q·λ = 0``, ``Σ q − 1 = 0`` (the Lagrangian's Hessian ``P + diag(qλ)``
    is pentadiagonal), with steps backtracked until the residual's norm falls."""
    g, m = tgt.size, int(w.sum())
    k = np.repeat(np.arange(g), w)
    ends = np.cumsum(w)
    first = np.zeros(m, dtype=bool)
    first[ends - w] = True
    last = np.zeros(m, dtype=bool)
    last[ends - 1] = True
    ell = np.log(tgt)[k]
    c = (1.0, -2.0, 1.0)  # P = D2ᵀ D2 (second differences), as three diagonals
    pen = (np.zeros(m), np.zeros(m - 1), np.zeros(m - 2))
    i = np.arange(m - 2)
    for p in range(3):
        for s in range(p, 3):
            pen[s - p][i + p] += c[p] * c[s]

    def residual(
        eta: FloatArray, lam: FloatArray
    ) -> tuple[FloatArray, FloatArray, FloatArray, FloatArray]:
        # each cell first rescaled to its count (a second-order change near the solution;
        # keeps the cell sums exact however ill-conditioned the KKT solve of wide cells is)
        q = np.exp(eta - ell)
        s = np.bincount(k, weights=q, minlength=g)
        eta = eta - np.log(s)[k]
        q = q / s[k]
        f1 = pen[0] * eta
        for dd in (1, 2):
            f1[:-dd] += pen[dd] * eta[dd:]
            f1[dd:] += pen[dd] * eta[:-dd]
        f2 = np.asarray(np.bincount(k, weights=q, minlength=g), dtype=np.float64) - 1.0
        return eta, q, f1 + q * lam[k], f2

    eta = ell - np.log(w.astype(np.float64))[k]  # flat within each cell: feasible
    lam = np.zeros(g)
    with np.errstate(over="ignore", invalid="ignore"):
        eta, q, f1, f2 = residual(eta, lam)
        norm = float(np.hypot(np.linalg.norm(f1), np.linalg.norm(f2)))
        history = [norm]
        for step in range(_LOG_SMOOTH_STEPS):
            if step >= 10 and norm > 0.9 * history[step - 10]:  # stalled (rounding: KKT
                break  # solves too ill-conditioned for cells of ~10^5 values and more)
            sol = _log_smooth_kkt(pen, q * lam[k], q, first, last, -f1, -f2)
            if sol is None:
                break
            d, mu = sol
            dl = mu[last]  # the multipliers' Newton step
            size = float(np.max(np.abs(d)))
            t = min(1.0, _LOG_SMOOTH_MAX_STEP / max(size, 1e-300))
            while t > 1e-10:  # backtrack until the residual's norm falls
                trial = residual(eta + t * d, lam + t * dl)
                new = float(np.hypot(np.linalg.norm(trial[2]), np.linalg.norm(trial[3])))
                if np.isfinite(new) and new <= (1.0 - 1e-4 * t) * norm:
                    break
                t *= 0.5
            else:
                break
            lam, norm = lam + t * dl, new
            history.append(norm)
            eta, q, f1, f2 = trial
            if size * t < 1e-13 or norm == 0.0:
                break
        scale = 1.0 + float(np.max(np.abs(eta - ell)))
        if not (
            np.all(np.isfinite(eta))
            and float(np.max(np.abs(f2))) <= _LOG_SMOOTH_TOL
            and float(np.max(np.abs(f1))) <= _LOG_SMOOTH_TOL * scale
        ):
            return None
        v = np.exp(eta - ell)
        return np.asarray(tgt[k] * (v / np.bincount(k, weights=v, minlength=g)[k]))


def _log_smooth_values(
    e: NDArray[np.int64], cnt: FloatArray, width: NDArray[np.int64]
) -> FloatArray:
    """``cell_values(method="logsmooth")``: per run of positive cells, the per-value density
    whose cell sums are the counts and whose logarithm has the least sum of squared second
    differences (:func:`_log_smooth_run`; with two or more cells the straight lines the
    penalty leaves free are fixed by the sums, so the system is regular; a run of one cell,
    or of cells one value wide, is spread evenly). A run where Newton's method does not
    converge is spread by PCHIP instead (same cell totals)."""
    out = np.zeros(int(e[-1]))
    positive = cnt > 0
    # runs of consecutive positive cells: an empty cell has no mass, and the curve on either
    # side neither bends toward it nor depends on the other side
    starts = np.flatnonzero(positive & ~np.concatenate([[False], positive[:-1]]))
    ends = np.flatnonzero(positive & ~np.concatenate([positive[1:], [False]]))
    for first, last in zip(starts, ends, strict=True):
        lo, hi = int(e[first]), int(e[last + 1])
        tgt, w = cnt[first : last + 1], width[first : last + 1]
        if tgt.size == 1 or tgt.size == hi - lo:
            out[lo:hi] = np.repeat(tgt / w, w)
            continue
        v = _log_smooth_run(tgt, w) if int(w.max()) <= _LOG_SMOOTH_MAX_WIDTH else None
        if v is None:  # no convergence: PCHIP of this run's cumulative counts, and a cell
            # whose PCHIP sum is off (cancellation in the cumulative counts when they span
            # many orders of magnitude) evenly
            top = float(tgt.max())
            rel = tgt / top
            k = np.repeat(np.arange(tgt.size), w)
            with np.errstate(all="ignore"):
                p = cell_values(e[first : last + 2] - lo, rel, method="pchip")
            s = np.bincount(k, weights=p, minlength=tgt.size)
            good = (s > 1e-290) & (np.abs(s - rel) <= 1e-9 * rel)
            share = np.where(good[k], p / np.where(good, s, 1.0)[k], 1.0 / w[k])
            v = tgt[k] * share
        out[lo:hi] = v
    return out


def cell_values(edges: ArrayLike, counts: ArrayLike, *, method: str = "pchip") -> FloatArray:
    """Spread the counts of 1-D cells over the cells' values (``c = edges[-1]`` values).

    ``"uniform"``: every value of a cell gets an equal share (the paper's uniformity
    assumption). ``"pchip"`` (default): the cumulative counts at the cell edges are joined by
    the monotone piecewise-cubic Hermite interpolant of Fritsch and Carlson (SIAM J. Numer.
    Anal. 17(2), 1980; the "PCHIP" rule: interior slopes are weighted harmonic means of the
    neighbouring cell densities, 0 at a local extremum; one-sided three-point end slopes), and
    each value gets the interpolant's increase over it. Both keep every cell's total exactly
    and are non-negative for non-negative counts; PCHIP lets the density inside a cell lean
    toward its denser neighbour, which removes most of the uniform guess's bias on smooth
    data: for unimodal data every interval around the mode that cuts two cells is
    underestimated by the uniform guess. Measured (correlated Gaussian, c = 64, 500 random
    intervals of 32 values, exact cell counts), mean signed error / MAE of the interval's
    share: 4 cells −0.047 / 0.047 (uniform) vs −0.014 / 0.014 (PCHIP); 8 cells −0.011 / 0.011
    vs −0.0007 / 0.0012; Laplace data, 8 cells −0.026 vs −0.011.

    ``"logsmooth"``: of all per-value densities whose cell sums are the counts, the one whose
    logarithm is smoothest (least sum of squared second differences over the values; Newton
    steps on the linearised cell sums, a sparse system per run of positive cells). Its log is a
    straight line wherever the counts allow one, so geometric (exponential) data are recovered
    exactly, a sharp mode keeps its peak (PCHIP's density at a cell edge is at most the mean of
    the two cells beside it, so it flattens every peak), and Gaussian shapes come out close.
    It is the exact-fit limit of the penalised composite link model for ungrouping
    histograms (Rizzi, Gampe and Eilers, *Am. J. Epidemiol.* 182(2), 2015). Cells with a
    count ≤ 0 get 0, and the curve does not bend toward them (each run of positive cells is
    fitted on its own). Measured on the same data sets' first attribute (n = 2·10^5, c = 64,
    exact cell counts), MAE of the share of all 2,080 intervals, PCHIP → "logsmooth":
    correlated Laplace 4 cells 0.054 → 0.026, 8 cells 0.0118 → 0.0065; correlated Gaussian
    4 cells 0.0124 → 0.0057, 8 cells 0.0018 → 0.0005. About 1 ms for 64 values.

    Every method keeps each cell's total exactly. Pure post-processing (only the counts and the
    public edges are read).

    >>> cell_values([0, 2, 4], [2.0, 6.0], method="uniform").tolist()
    [1.0, 1.0, 3.0, 3.0]
    >>> v = cell_values([0, 4, 8, 12], [2.0, 8.0, 2.0])
    >>> [round(float(x), 2) for x in v[:6]]   # rises toward the dense middle cell
    [0.16, 0.44, 0.64, 0.76, 1.55, 2.45]
    >>> float(v[4:8].sum())
    8.0
    >>> g = 0.5 ** np.arange(8)                    # geometric counts, 2 cells of 4 values
    >>> np.allclose(cell_values([0, 4, 8], [g[:4].sum(), g[4:].sum()], method="logsmooth"), g)
    True
    """
    if method not in INTERPOLATIONS:
        raise InvalidParameterError(f"method must be one of {INTERPOLATIONS}, got {method!r}")
    e = np.asarray(edges, dtype=np.int64)
    cnt = np.asarray(counts, dtype=np.float64)
    if e.ndim != 1 or len(e) != cnt.size + 1 or e[0] != 0 or np.any(np.diff(e) <= 0):
        raise InvalidParameterError(
            f"edges must increase strictly from 0 with one more entry than counts ({cnt.size})"
        )
    if not np.all(np.isfinite(cnt)):
        bad = int(np.flatnonzero(~np.isfinite(cnt))[0])
        raise InvalidParameterError(
            f"counts must be finite; cell {bad} is {cnt[bad]!r} (replace NaN/inf estimates, "
            "e.g. by normalise(), before spreading them)"
        )
    width = np.diff(e)
    if method == "uniform" or cnt.size < 2 or np.all(width == 1):
        return np.repeat(cnt / width, width)
    if method == "logsmooth":
        return _log_smooth_values(e, np.maximum(cnt, 0.0), width)
    x = e.astype(np.float64)
    y = np.concatenate([[0.0], np.cumsum(cnt)])
    h = width.astype(np.float64)
    dl = cnt / h
    d = np.zeros(cnt.size + 1)
    w1, w2 = 2 * h[1:] + h[:-1], h[1:] + 2 * h[:-1]
    same = dl[:-1] * dl[1:] > 0
    safe0 = np.where(same, dl[:-1], 1.0)
    safe1 = np.where(same, dl[1:], 1.0)
    d[1:-1] = np.where(same, (w1 + w2) / (w1 / safe0 + w2 / safe1), 0.0)
    d[0] = _pchip_end(h[0], h[1], dl[0], dl[1])
    d[-1] = _pchip_end(h[-1], h[-2], dl[-1], dl[-2])
    xs = np.arange(int(e[-1]) + 1, dtype=np.float64)
    k = np.clip(np.searchsorted(e, xs, side="right") - 1, 0, cnt.size - 1)
    t = (xs - x[k]) / h[k]
    t2, t3 = t * t, t * t * t
    f = (
        y[k] * (2 * t3 - 3 * t2 + 1)
        + h[k] * d[k] * (t3 - 2 * t2 + t)
        + y[k + 1] * (3 * t2 - 2 * t3)
        + h[k] * d[k + 1] * (t3 - t2)
    )
    f[e] = y  # exact at the edges, so each cell keeps its count
    return np.maximum(np.diff(f), 0.0)


# ----------------------------------------------------------------------------- weighted update
def weighted_update(
    init: ArrayLike,
    constraints: Sequence[tuple[NDArray[np.int64], ArrayLike]],
    total: float,
    *,
    max_iter: int = 100,
    tol: float = 1.0,
) -> tuple[FloatArray, int]:
    """Iterative proportional fitting ("weighted update") of a non-negative array.

    Parameters
    ----------
    init : array (non-negative)
    constraints : sequence of ``(labels, targets)``; ``labels`` has ``init``'s shape with the
        block number of every entry (``-1`` = unconstrained), ``targets[k]`` the wanted sum of
        block ``k`` (non-negative).
    total : the sum the array is rescaled to after every constraint.
    max_iter, tol : stop when a sweep changes the array by less than ``tol`` in L1.

    Returns
    -------
    (fitted array, sweeps)

    >>> lab_r = np.array([[0, 0], [1, 1]]); lab_c = lab_r.T
    >>> M, _ = weighted_update(np.ones((2, 2)), [(lab_r, [3, 7]), (lab_c, [4, 6])], 10, tol=1e-9)
    >>> np.round(M, 6)   # independence: the maximum-entropy fit of the two margins
    array([[1.2, 1.8],
           [2.8, 4.2]])
    """
    m = np.array(init, dtype=np.float64)
    if np.any(m < 0) or not np.all(np.isfinite(m)):
        raise InvalidParameterError("init must be finite and non-negative")
    prepared = []
    for labels, targets in constraints:
        lab = np.asarray(labels, dtype=np.int64).ravel()
        tgt = np.asarray(targets, dtype=np.float64).ravel()
        if lab.size != m.size:
            raise InvalidParameterError("constraint labels must have the array's shape")
        if np.any(tgt < 0):
            raise InvalidParameterError("constraint targets must be non-negative (apply Norm-Sub)")
        valid = lab >= 0
        prepared.append((lab, valid, tgt))
    flat = m.ravel()
    sweeps = 0
    for sweeps in range(1, max_iter + 1):  # noqa: B007
        prev = flat.copy()
        for lab, valid, tgt in prepared:
            s = np.bincount(lab[valid], weights=flat[valid], minlength=tgt.size)[: tgt.size]
            factor = np.where(s > 0, tgt / np.where(s > 0, s, 1.0), 1.0)
            flat[valid] *= factor[lab[valid]]
            tot = flat.sum()
            if tot > 0:
                flat *= total / tot
        if np.abs(flat - prev).sum() < tol:
            break
    return flat.reshape(m.shape), sweeps


def _labels_1d(edges: NDArray[np.int64]) -> NDArray[np.int64]:
    return np.repeat(np.arange(len(edges) - 1), np.diff(edges))


def response_matrix(
    grid_xy: GridEstimate,
    total: float,
    grid_x: GridEstimate | None = None,
    grid_y: GridEstimate | None = None,
    *,
    max_iter: int = 100,
    tol: float = 1.0,
    interpolation: str = "uniform",
) -> tuple[FloatArray, int]:
    """Algorithm 1 of Yang et al. (HDG's response matrix) for the pair of ``grid_xy``.

    Weighted update of a ``c_x × c_y`` matrix, starting uniform at ``total/(c_x c_y)``, fitted
    in turn to the cells of ``grid_x`` (strips ``I × [c_y]``), ``grid_y`` (strips
    ``[c_x] × J``) and ``grid_xy`` (boxes ``I × J``). The 2-D grid goes last, so on exit the
    matrix's box sums equal ``grid_xy``'s (post-processed, non-negative) counts.

    ``interpolation="uniform"`` fits the 1-D grids cell by cell, as the paper and the authors'
    code do, so inside a 1-D cell the matrix stays flat; ``"pchip"`` first spreads each 1-D
    grid over its values with :func:`cell_values` and fits the matrix value by value (same cell
    totals; the values lean toward denser neighbouring cells). A 1-D "grid" may be any 1-D
    estimate of the attribute (TDG passes the consistent margin of its 2-D grids).

    Returns
    -------
    (matrix, sweeps)
    """
    ex, ey = grid_xy.edges
    cx, cy = int(ex[-1]), int(ey[-1])
    lx, ly = _labels_1d(ex), _labels_1d(ey)
    cons: list[tuple[NDArray[np.int64], ArrayLike]] = []
    for ax, g in ((0, grid_x), (1, grid_y)):
        if g is None:
            continue
        if interpolation == "uniform":
            lab1, tgt = _labels_1d(g.edges[0]), g.counts
        else:  # one constraint per value: the 1-D cells spread by `cell_values`
            tgt = cell_values(g.edges[0], g.counts, method=interpolation)
            lab1 = np.arange(tgt.size)
        shp = (cx, 1) if ax == 0 else (1, cy)
        cons.append((np.broadcast_to(lab1.reshape(shp), (cx, cy)), tgt))
    gy = len(ey) - 1
    cons.append((lx[:, None] * gy + ly[None, :], grid_xy.counts.ravel()))
    init = np.full((cx, cy), total / (cx * cy))
    return weighted_update(init, cons, total, max_iter=max_iter, tol=tol)


def estimate_from_pairs(
    tables: Mapping[tuple[int, int], ArrayLike],
    lam: int,
    total: float | ArrayLike,
    *,
    variant: str = "full",
    max_iter: int = 100,
    tol: float = 1.0,
) -> tuple[FloatArray, int]:
    """Algorithm 2 of Yang et al.: λ-D answers from pairwise in/out tables.

    Parameters
    ----------
    tables : ``{(j, k): array (Q, 2, 2)}`` for pairs ``j < k`` of query positions ``0..λ-1``;
        index 0 = inside the attribute's interval, 1 = outside. Entry ``[q, 0, 0]`` is the
        2-D answer of query q on attributes j, k.
    lam : λ ≥ 2.
    total : n (or one total per query).
    variant : ``"full"`` fits all four cells of every pair table (IPF on the 2^λ in/out table;
        the default, measured 3–5× more accurate); ``"in-in"`` fits only the ``(in, in)`` cell
        and renormalises to ``total`` (the authors' code).
    max_iter, tol : each query stops when a sweep changes its table by less than ``tol`` (L1),
        so an answer does not depend on the other queries of the batch.

    Returns
    -------
    (answers of shape (Q,), sweeps)

    >>> t = np.array([[[2.5, 2.5], [2.5, 2.5]]])       # every pair independent, halves
    >>> tabs = {(0, 1): t, (0, 2): t, (1, 2): t}
    >>> est, _ = estimate_from_pairs(tabs, 3, 10.0, tol=1e-9)
    >>> np.round(est, 6)
    array([1.25])
    """
    fit, sweeps = _fit_pairs(tables, lam, total, variant=variant, max_iter=max_iter, tol=tol)
    return fit.reshape(fit.shape[0], -1)[:, 0].copy(), sweeps


def _fit_pairs(
    tables: Mapping[tuple[int, int], ArrayLike],
    lam: int,
    total: float | ArrayLike,
    *,
    variant: str = "full",
    max_iter: int = 100,
    tol: float = 1.0,
) -> tuple[FloatArray, int]:
    """The fitted 2^λ in/out tables of :func:`estimate_from_pairs`, shape (Q, 2, ..., 2)."""
    if variant not in ("full", "in-in"):
        raise InvalidParameterError(f"variant must be 'full' or 'in-in', got {variant!r}")
    if lam < 2:
        raise InvalidParameterError(f"lam must be >= 2, got {lam}")
    pairs = list(combinations(range(lam), 2))
    missing = [p for p in pairs if p not in tables]
    if missing:
        raise InvalidParameterError(f"tables lack the pairs {missing}")
    tabs = {p: np.maximum(np.asarray(tables[p], dtype=np.float64), 0.0) for p in pairs}
    q = next(iter(tabs.values())).shape[0]
    tot = np.broadcast_to(np.asarray(total, dtype=np.float64), (q,)).astype(np.float64)
    z_all = np.broadcast_to((tot / 2**lam).reshape((q,) + (1,) * lam), (q,) + (2,) * lam).copy()
    active = np.arange(q)  # each query stops on its own, so answers do not depend on the batch
    sweeps = 0
    for sweeps in range(1, max_iter + 1):  # noqa: B007
        z, t_act, na = z_all[active], tot[active], active.size
        prev = z.copy()
        for j, k in pairs:
            other = tuple(1 + i for i in range(lam) if i not in (j, k))
            s = z.sum(axis=other) if other else z  # (na, 2, 2)
            f = tabs[(j, k)][active]
            if variant == "full":
                fac = np.where(s > 0, f / np.where(s > 0, s, 1.0), 1.0)
            else:
                fac = np.ones_like(s)
                s00 = s[:, 0, 0]
                fac[:, 0, 0] = np.where(s00 > 0, f[:, 0, 0] / np.where(s00 > 0, s00, 1.0), 1.0)
            shp = [na] + [1] * lam
            shp[1 + j], shp[1 + k] = 2, 2
            z = z * fac.reshape(shp)
            zs = z.reshape(na, -1).sum(axis=1)
            z = z * np.where(zs > 0, t_act / np.where(zs > 0, zs, 1.0), 1.0).reshape(
                (na,) + (1,) * lam
            )
        z_all[active] = z
        moving = np.abs(z - prev).reshape(na, -1).sum(axis=1) >= tol
        active = active[moving]
        if active.size == 0:
            break
    return z_all, sweeps
