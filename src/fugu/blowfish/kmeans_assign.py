"""Assigning points to centres, and the exact per-cluster statistics of one Lloyd iteration.

Centres are public, so assigning points costs no privacy: every point goes to its nearest
centre, or, under a partition policy, every point of a block goes to the centre nearest the
block's centre (:func:`_cell_rule`), so no secret pair straddles two clusters. The noise-free
answers of the iteration's queries — cluster sizes q_size and centred coordinate sums q_sum —
are computed here, in memory (:func:`_cluster_stats`) or through the engine interface
(:func:`cluster_stats`, one :func:`fugu.engines.partial_sums` pass); their noisy release is in
:mod:`fugu.blowfish.kmeans_queries`.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import ArrayLike, NDArray

from ..errors import (
    DomainError,
    InvalidParameterError,
    InvalidTypeError,
)
from ..noise import round_dyadic
from .kmeans_grid import KMeansGrid, SecretGraph, _attr_block_ids

__all__ = [
    "cluster_stats",
    "kmeans_objective",
]


def _nearest(cols: NDArray[np.float64], centers: NDArray[np.float64]) -> NDArray[np.int64]:
    """Index of the nearest centre (squared Euclidean) for points given as columns (d, n)."""
    # ‖x − μ‖² = ‖x‖² − 2 x·μ + ‖μ‖²; ‖x‖² is common to every centre. Column-wise loops are
    # several times faster than an (n, d) @ (d, k) product for the small d and k of k-means.
    best = np.empty(0)
    labels = np.zeros(cols.shape[1], dtype=np.int64)
    for j, mu in enumerate(centers):
        score = cols[0] * (-2.0 * mu[0])
        for dim in range(1, cols.shape[0]):
            score += cols[dim] * (-2.0 * mu[dim])
        score += float(mu @ mu)
        if j == 0:
            best = score
        else:
            closer = score < best
            np.minimum(best, score, out=best)
            labels[closer] = j
    return labels


@dataclass
class _Assigner:
    """Public rule that maps points to clusters: nearest centre, or block by block (partitions)."""

    block_of: NDArray[np.int64] | None = None  # block id per point
    block_rep: NDArray[np.float64] | None = None  # representative point per block

    def __call__(
        self, cols: NDArray[np.float64], centers: NDArray[np.float64]
    ) -> NDArray[np.int64]:
        """Cluster of each point; points are given as columns (d, n)."""
        if self.block_of is None or self.block_rep is None:
            return _nearest(cols, centers)
        return _nearest(np.ascontiguousarray(self.block_rep.T), centers)[self.block_of]


@dataclass(frozen=True, eq=False)
class _CellRule:
    """The public assignment rule expressed from cell codes (picklable: runs on executors).

    ``block_rep`` is None for nearest-centre assignment. For partition graphs every cell maps to
    a block (``cell_blocks``: block id per flat cell; or ``attr_blocks``: block id per code of
    each attribute, combined over ``nblocks``) and every block to its centre point.
    """

    sizes: tuple[int, ...]
    cell_blocks: NDArray[np.int64] | None = None
    attr_blocks: tuple[NDArray[np.int64], ...] | None = None
    nblocks: tuple[int, ...] = ()
    block_rep: NDArray[np.float64] | None = None

    def block_ids(self, codes: Sequence[NDArray[np.int64]]) -> NDArray[np.int64]:
        """Block id of each point from its cell codes, one array per attribute."""
        if self.cell_blocks is not None:
            return self.cell_blocks[np.ravel_multi_index(tuple(codes), self.sizes)]
        assert self.attr_blocks is not None
        per = tuple(p[codes[j]] for j, p in enumerate(self.attr_blocks))
        return np.ravel_multi_index(per, self.nblocks).astype(np.int64)

    def labels(
        self,
        codes: Sequence[NDArray[np.int64]],
        cols: NDArray[np.float64],
        centers: NDArray[np.float64],
    ) -> NDArray[np.int64]:
        """Cluster of each point: its codes (per attribute) and its coordinates as columns."""
        if self.block_rep is None:
            return _nearest(cols, centers)
        return _nearest(np.ascontiguousarray(self.block_rep.T), centers)[self.block_ids(codes)]


def _cell_rule(graph: SecretGraph, grid: KMeansGrid) -> _CellRule:
    """Nearest-centre assignment, or block-by-block for partitions (block = its centre point)."""
    if graph.kind != "partition":
        return _CellRule(grid.sizes)
    if graph.cell_blocks is not None:
        ids = graph.cell_blocks
        nb = int(ids.max()) + 1
        pts = grid.all_points()
        hi = np.full((nb, grid.dim), -np.inf)
        lo = np.full((nb, grid.dim), np.inf)
        np.maximum.at(hi, ids, pts)
        np.minimum.at(lo, ids, pts)
        return _CellRule(grid.sizes, cell_blocks=ids, block_rep=(hi + lo) / 2)
    per = _attr_block_ids(graph, grid)
    nbs = tuple(int(p.max()) + 1 for p in per)
    reps = []
    for c, ids, nb in zip(grid.coords, per, nbs, strict=True):
        hi1 = np.full(nb, -np.inf)
        lo1 = np.full(nb, np.inf)
        np.maximum.at(hi1, ids, c)
        np.minimum.at(lo1, ids, c)
        reps.append((hi1 + lo1) / 2)
    rep = np.stack([m.reshape(-1) for m in np.meshgrid(*reps, indexing="ij")], axis=1)
    return _CellRule(grid.sizes, attr_blocks=tuple(per), nblocks=nbs, block_rep=rep)


def _make_assigner(graph: SecretGraph, grid: KMeansGrid, codes: NDArray[np.int64]) -> _Assigner:
    """The rule of :func:`_cell_rule` applied to in-memory points given by their codes (n, d)."""
    rule = _cell_rule(graph, grid)
    if rule.block_rep is None:
        return _Assigner()
    return _Assigner(rule.block_ids(tuple(codes.T)), rule.block_rep)


# -- the per-iteration sums through the engine interface (fugu.engines) ------------------------
def _batch_codes(
    batch: Mapping[str, Any], grid: KMeansGrid, encoded: bool, clip: bool
) -> list[NDArray[np.int64]]:
    """Cell codes of one batch, one array per attribute: columns holding codes, or coordinates."""
    if encoded:
        return [np.asarray(batch[a], dtype=np.int64) for a in grid.names]
    cols = []
    for a in grid.names:
        v = batch[a]
        if type(v).__module__.startswith("pyarrow"):
            v = v.to_numpy(zero_copy_only=False)
        try:
            cols.append(np.asarray(v, dtype=np.float64))
        except (TypeError, ValueError):
            raise InvalidTypeError(
                f"column {a!r} must hold numbers (point coordinates), got dtype "
                f"{np.asarray(v).dtype}"
            ) from None
    arr = np.stack(cols, axis=1)
    bad = ~np.isfinite(arr)
    if bad.any():
        rows = np.flatnonzero(bad.any(axis=1))
        col = grid.names[int(np.flatnonzero(bad[rows[0]])[0])]
        raise DomainError(
            f"{rows.size} points have NaN, missing or infinite coordinates (first in column "
            f"{col!r}); impute or remove them (fugu never drops them silently)"
        )
    return [np.ascontiguousarray(c) for c in grid.encode(arr, clip).T]


@dataclass(frozen=True, eq=False)
class _PointCount:
    """Partial of the input check: validates a batch (domain, NaN) and counts its points."""

    grid: KMeansGrid
    clip: bool
    encoded: bool = False

    def __call__(self, batch: Mapping[str, Any]) -> dict[str, NDArray[np.int64]]:
        codes = _batch_codes(batch, self.grid, self.encoded, self.clip)
        return {"n": np.array([codes[0].size], dtype=np.int64)}


@dataclass(frozen=True, eq=False)
class _LloydStats:
    """Partial of one Lloyd iteration: exact integer cluster sizes and per-cluster code counts.

    ``sizes = bincount(labels, k)`` and, per attribute j, ``c{j}[i, v]`` = number of points of
    cluster i whose j-th code is v. Integer partials: every engine returns identical arrays; the
    coordinate sums are formed from them on the driver (:func:`cluster_stats`).
    """

    grid: KMeansGrid
    centers: NDArray[np.float64]
    rule: _CellRule
    encoded: bool = False
    clip: bool = False

    def __call__(self, batch: Mapping[str, Any]) -> dict[str, NDArray[np.int64]]:
        codes = _batch_codes(batch, self.grid, self.encoded, self.clip)
        n = codes[0].size
        cols = np.empty((self.grid.dim, n))
        for j, c in enumerate(self.grid.coords):
            np.take(c, codes[j], out=cols[j])
        labels = self.rule.labels(codes, cols, self.centers)
        k = self.centers.shape[0]
        out = {"sizes": np.bincount(labels, minlength=k).astype(np.int64)}
        for j, m in enumerate(self.grid.sizes):
            flat = labels * m
            flat += codes[j]
            out[f"c{j}"] = np.bincount(flat, minlength=k * m).astype(np.int64).reshape(k, m)
        return out


@dataclass(frozen=True, eq=False)
class _Inertia:
    """Partial of the k-means objective of the final centres (a float: equal up to rounding)."""

    grid: KMeansGrid
    centers: NDArray[np.float64]
    encoded: bool = False
    clip: bool = False

    def __call__(self, batch: Mapping[str, Any]) -> NDArray[np.float64]:
        codes = _batch_codes(batch, self.grid, self.encoded, self.clip)
        pts = np.stack([c[codes[j]] for j, c in enumerate(self.grid.coords)], axis=1)
        return np.array([kmeans_objective(pts, self.centers)])


def cluster_stats(
    data: Any,
    grid: KMeansGrid,
    centers: ArrayLike,
    rule: _CellRule | None = None,
    *,
    encoded: bool = False,
    clip: bool = False,
    engine: str = "numpy",
    step: float | None = None,
    **engine_options: Any,
) -> tuple[NDArray[np.int64], NDArray[np.float64]]:
    """Exact sizes (k,) and centred coordinate sums (k, d) of one Lloyd iteration on any engine.

    ``data`` is anything :func:`fugu.engines.partial_sums` reads (a table, a CSV/Parquet path, a
    Spark DataFrame, ...) with one column per domain attribute holding coordinates, or holding
    cell codes when ``encoded``. The engines return integer counts (identical on every engine);
    the sums are ``sums[:, j] = counts_j @ (coords_j − o_j)`` on the driver, so they are
    identical too. These are the noise-free inputs of :func:`release_iteration`.
    """
    from ..engines import partial_sums

    c = np.asarray(centers, dtype=np.float64)
    fn = _LloydStats(grid, c, rule or _CellRule(grid.sizes), encoded, clip)
    out = partial_sums(data, fn, columns=list(grid.names), engine=engine, **engine_options)
    assert isinstance(out, dict)
    o = grid.centre
    sizes = np.asarray(out["sizes"], dtype=np.int64)
    if step is not None:
        exact = [
            exact_centred_sums(np.asarray(out[f"c{j}"], np.int64), coords, float(o[j]), step)
            for j, coords in enumerate(grid.coords)
        ]
        return sizes, np.stack(exact, axis=1).reshape(c.shape[0], grid.dim)
    sums = np.stack(
        [
            np.asarray(out[f"c{j}"], dtype=np.float64) @ (coords - o[j])
            for j, coords in enumerate(grid.coords)
        ],
        axis=1,
    ).reshape(c.shape[0], grid.dim)
    return np.asarray(out["sizes"], dtype=np.int64), sums


def exact_centred_sums(
    counts: NDArray[np.int64], coords: NDArray[np.float64], centre: float, step: float
) -> NDArray[np.float64]:
    """``Σ_v counts[i, v]·(coords[v] − centre)`` for every cluster i, computed exactly and
    rounded once (half to even) to a multiple of ``step`` (a power of two: the noise grid of
    q_sum). The result is an exact double while it stays below 2^53 steps (the fit checks that
    bound before spending). A float64 sum rounds at every operation, and at the cell values
    ``coords − centre`` too, by amounts the noise grid's slack does not cover."""
    g = int(math.frexp(step)[1]) - 1  # step = 2^g
    n = int(counts.sum())
    half_units = 2.0 * (coords - centre)
    scale = max(float(np.max(np.abs(coords), initial=0.0)), abs(centre))
    if (
        scale < 2.0**51
        and bool(np.all(np.rint(half_units) == half_units))
        and float(np.max(np.abs(half_units), initial=0.0)) * max(n, 1) < 2.0**62
    ):
        # integer grids: coords − centre are exact multiples of 1/2, summed exactly in int64
        t = counts @ half_units.astype(np.int64)
        terms = [(int(x), -1) for x in t]
    else:
        mant, ex = np.frexp(np.append(coords, centre))
        big = (mant * 2.0**53).astype(np.int64).astype(object)  # exact integer significands
        exps = ex.astype(np.int64) - 53
        terms = []
        for i in range(counts.shape[0]):
            n_i = int(counts[i].sum())
            used = np.append(counts[i] != 0, n_i != 0)
            if not used.any():
                terms.append((0, 0))
                continue
            e0 = int(exps[used].min())
            mult = np.append(counts[i], -n_i).astype(object)
            shifts = (exps[used] - e0).astype(object)
            terms.append((int(np.left_shift(big[used] * mult[used], shifts).sum()), e0))
    return np.array([round_dyadic(total, e0, g) for total, e0 in terms], dtype=np.float64)


def _cluster_stats(
    centred_cols: NDArray[np.float64], labels: NDArray[np.int64], k: int
) -> tuple[NDArray[np.int64], NDArray[np.float64]]:
    """Exact cluster sizes (k,) and centred coordinate sums (k, d); points as columns (d, n)."""
    sizes = np.bincount(labels, minlength=k).astype(np.int64)
    sums = np.stack([np.bincount(labels, weights=col, minlength=k) for col in centred_cols], axis=1)
    return sizes, sums.astype(np.float64)


def kmeans_objective(X: ArrayLike, centers: ArrayLike) -> float:
    """k-means objective: Σ_x min_i ‖x − μ_i‖² (squared Euclidean distance to the nearest centre).

    >>> kmeans_objective([[0, 0], [2, 0]], [[1, 0]])
    2.0
    """
    x = np.asarray(X, dtype=np.float64)
    c = np.asarray(centers, dtype=np.float64)
    if x.ndim != 2 or c.ndim != 2 or x.shape[1] != c.shape[1]:
        raise InvalidParameterError(
            f"X (n, d) and centers (k, d) must agree in d; got {x.shape} and {c.shape}"
        )
    cols = np.ascontiguousarray(x.T)
    best = np.full(cols.shape[1], np.inf)
    for mu in c:
        dist = (cols[0] - mu[0]) ** 2
        for dim in range(1, cols.shape[0]):
            dist += (cols[dim] - mu[dim]) ** 2
        np.minimum(best, dist, out=best)
    return float(np.sum(best))
