"""Where private k-means starts: data-independent centres, or a private coarse-grid start.

Lloyd's iterations need starting centres. Without data (no ε): :func:`random_init` draws them
uniformly on the domain box (the Blowfish paper) and :func:`spread_init` spreads well-separated
centres with public randomness (the start DPLloyd uses). With data, in low dimension:
Su et al.'s EUGkM start releases a noisy histogram on a public coarse grid
(:func:`eugkm_grid`, :func:`release_grid`: geometric noise from :mod:`fugu.noise`, sensitivity
from the policy's graph) and runs a weighted k-means on it (:func:`weighted_kmeans`, no further
privacy cost: post-processing).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import ArrayLike, NDArray

from ..noise import RandomSource, geometric_mechanism
from .kmeans_assign import _batch_codes
from .kmeans_grid import KMeansGrid, SecretGraph, _attr_block_ids

__all__ = [
    "random_init",
    "spread_init",
    "GridSpec",
    "eugkm_grid",
    "release_grid",
    "weighted_kmeans",
]


def random_init(grid: KMeansGrid, k: int, rng: RandomSource) -> NDArray[np.float64]:
    """k centres uniform on the domain box, from public randomness (no data touched)."""
    gen = rng.numpy_generator()
    return grid.low + gen.random((k, grid.dim)) * (grid.high - grid.low)


def spread_init(grid: KMeansGrid, k: int, rng: RandomSource) -> NDArray[np.float64]:
    """k centres spread over the domain box, from public randomness (no data touched, no ε).

    Uniform draws inside the box shrunk by a margin ``m`` (half the smallest width to start),
    accepted when at least ``2m`` from every centre already placed; after 100 rejections in a
    row ``m`` is halved (the start DPLloyd uses: separated centres away from the faces, so the
    first noisy update splits the data into k comparable parts).
    """
    gen = rng.numpy_generator()
    low, high = grid.low, grid.high
    width = high - low
    margin = float(np.min(width)) / 2.0
    while margin > 1e-12 * max(1.0, float(np.max(width))):
        centres = np.empty((k, grid.dim))
        placed, misses = 0, 0
        while placed < k and misses < 100:
            c = low + margin + gen.random(grid.dim) * (width - 2 * margin)
            if placed == 0 or np.min(np.sqrt(((centres[:placed] - c) ** 2).sum(axis=1))) >= (
                2 * margin
            ):
                centres[placed] = c
                placed, misses = placed + 1, 0
            else:
                misses += 1
        if placed == k:
            return centres
        margin /= 2.0
    return random_init(grid, k, rng)


#: Share of ε the grid-histogram start takes when noisy Lloyd updates follow it.
GRID_INIT_SHARE = 0.2


#: Noisy updates follow the grid start when the rest of ε is at least this many ε_m (measured
#: on rgb, synthetic and blob data: below it the updates' noise outweighs their gain).
HYBRID_MIN_RATIO = 0.5


#: The grid start is used up to this many attributes (measured on 2, 3 and 4; Su et al. use
#: EUGkM in low dimension only: its grid has too few bins per attribute beyond).
MAX_GRID_DIM = 4


#: Most cells of the start's coarse histogram (the weighted k-means on it stays fast).
MAX_GRID_CELLS = 1 << 15


@dataclass(frozen=True)
class GridSpec:
    """The public coarse grid of the private start: per attribute, the bin of every code.

    ``sensitivity`` of its histogram under the secret graph: 2 (a move changes two bins), 0
    when the bins are unions of partition blocks (no secret pair crosses them: released exactly).
    """

    bins: tuple[NDArray[np.int64], ...]
    shape: tuple[int, ...]
    sensitivity: float
    rule: str

    @property
    def size(self) -> int:
        return int(np.prod(self.shape))

    def points(self, grid: KMeansGrid) -> NDArray[np.float64]:
        """Representative point of every bin (its coordinate range's midpoint), flat C order."""
        mids = []
        for c, b, m in zip(grid.coords, self.bins, self.shape, strict=True):
            lo = np.full(m, np.inf)
            hi = np.full(m, -np.inf)
            np.minimum.at(lo, b, c)
            np.maximum.at(hi, b, c)
            mids.append((lo + hi) / 2)
        mesh = np.meshgrid(*mids, indexing="ij")
        return np.stack([g.reshape(-1) for g in mesh], axis=1)


def _grid_start(init: Any, n_public: bool, grid: KMeansGrid, single: bool = False) -> bool:
    """``init="auto"`` uses the private grid start when n is public and d is small, and not
    for ``single`` (one cluster with automatic updates: where it starts changes nothing)."""
    return (
        isinstance(init, str)
        and init == "auto"
        and n_public
        and grid.dim <= MAX_GRID_DIM
        and not single
    )


def eugkm_grid(n: int, epsilon: float, grid: KMeansGrid, graph: SecretGraph) -> GridSpec:
    """The coarse grid of Su et al.'s EUGkM start: about ``(n·ε/10)^{2/(2+d)}`` equal bins per
    attribute (their M = (nε/10)^{2d/(2+d)} cells), at most the attribute's size and at most
    ``MAX_GRID_CELLS`` cells. Under a partition policy with per-attribute blocks, the blocks
    themselves (when there are few enough): their histogram has sensitivity 0 (released exactly,
    costing no ε). Public computation: n is public under replace-one neighbours."""
    d = grid.dim
    if graph.kind == "partition" and graph.cell_blocks is None:
        per = _attr_block_ids(graph, grid)
        bshape = tuple(int(p.max()) + 1 for p in per)
        if 1 < int(np.prod(bshape)) <= MAX_GRID_CELLS:
            return GridSpec(
                tuple(per), bshape, 0.0, "partition blocks (exact: no secret pair crosses them)"
            )
    m = max(2.0, (n * epsilon / 10.0) ** (2.0 / (2.0 + d)))
    m = min(m, MAX_GRID_CELLS ** (1.0 / d))
    bins: list[NDArray[np.int64]] = []
    shape: list[int] = []
    for size in grid.sizes:
        mj = int(max(1, min(size, math.floor(m))))
        bins.append((np.arange(size, dtype=np.int64) * mj) // size)
        shape.append(mj)
    return GridSpec(tuple(bins), tuple(shape), 2.0, f"{'x'.join(map(str, shape))} equal bins")


@dataclass(frozen=True, eq=False)
class _GridCounts:
    """Partial of the start: exact counts of the points in each bin of the coarse grid."""

    grid: KMeansGrid
    spec: GridSpec
    encoded: bool = False
    clip: bool = False

    def __call__(self, batch: Mapping[str, Any]) -> dict[str, NDArray[np.int64]]:
        codes = _batch_codes(batch, self.grid, self.encoded, self.clip)
        idx = tuple(b[c] for b, c in zip(self.spec.bins, codes, strict=True))
        flat = np.ravel_multi_index(idx, self.spec.shape)
        return {"h": np.bincount(flat, minlength=self.spec.size).astype(np.int64)}


def release_grid(
    counts: ArrayLike,
    spec: GridSpec,
    epsilon: float,
    rng: RandomSource,
    repeats: int | None = None,
) -> NDArray[np.float64]:
    """The start's noisy coarse histogram: discrete Laplace noise of scale ``S/ε`` per bin
    (S = ``spec.sensitivity``: 2 under replace-one moves; 0 = exact). ``repeats`` draws that
    many independent releases (for the privacy audit)."""
    h = np.asarray(counts, dtype=np.int64)
    if repeats is not None:
        h = np.broadcast_to(h, (repeats, *h.shape))
    if spec.sensitivity <= 0:
        return h.astype(np.float64)
    return geometric_mechanism(h, spec.sensitivity, epsilon, rng).astype(np.float64)


def weighted_kmeans(
    points: NDArray[np.float64],
    weights: NDArray[np.float64],
    k: int,
    rng: RandomSource,
    restarts: int = 5,
    iters: int = 30,
) -> NDArray[np.float64] | None:
    """Weighted k-means (k-means++ seeding, Lloyd) of public points — post-processing of the
    noisy histogram. None when fewer than k points have positive weight."""
    keep = weights > 0
    if int(keep.sum()) < k:
        return None
    # in units of a power of two at least the largest |coordinate| (public: bin midpoints):
    # exact, so the same arithmetic, but squared distances cannot overflow (a domain reaching
    # 1e300 made them inf and NaN probabilities, a ValueError after the charge)
    top = float(np.max(np.abs(points), initial=0.0))
    unit = math.ldexp(1.0, math.frexp(top)[1]) if top > 0 else 1.0
    pts, w = points[keep] / unit, weights[keep]
    gen = rng.numpy_generator()
    best, best_obj = None, math.inf
    for _ in range(restarts):
        centres = np.empty((k, pts.shape[1]))
        centres[0] = pts[gen.choice(len(pts), p=w / w.sum())]
        d2 = ((pts - centres[0]) ** 2).sum(axis=1)
        for j in range(1, k):
            p = w * d2
            tot = p.sum()
            centres[j] = pts[gen.choice(len(pts), p=p / tot)] if tot > 0 else pts[j % len(pts)]
            d2 = np.minimum(d2, ((pts - centres[j]) ** 2).sum(axis=1))
        for _ in range(iters):
            lab = np.argmin(((pts[:, None, :] - centres[None]) ** 2).sum(axis=2), axis=1)
            mass = np.bincount(lab, weights=w, minlength=k)
            sums = np.stack(
                [np.bincount(lab, weights=w * pts[:, j], minlength=k) for j in range(pts.shape[1])],
                axis=1,
            )
            ok = mass > 0
            centres[ok] = sums[ok] / mass[ok, None]
        obj = float((w * ((pts[:, None, :] - centres[None]) ** 2).sum(axis=2).min(axis=1)).sum())
        if obj < best_obj:
            best, best_obj = centres.copy(), obj
    return None if best is None else best * unit
