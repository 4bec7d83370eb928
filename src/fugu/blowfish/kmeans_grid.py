"""The geometry of private k-means: the domain grid and the policy's secret graph.

:class:`KMeansGrid` is the public box of integer cells the points live on (one
:class:`~fugu.domain.Ordinal` attribute per dimension). :class:`SecretGraph` is the Blowfish
policy's discriminative secret graph on that grid, in one of the shapes k-means knows
(complete, attribute, partition, distance-threshold, explicit edges); :func:`secret_graph`
builds it from what users pass. The graph facts the sensitivities and the assignment rule read
(has it any edge; the attribute blocks; how far ⊥ reaches) live here too. No data, no noise.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np
from numpy.typing import NDArray

from ..domain import Domain, Ordinal
from ..errors import (
    DomainError,
    DomainTooLargeError,
    InvalidTypeError,
    PolicyError,
)

__all__ = [
    "GRAPH_KINDS",
    "KMeansGrid",
    "SecretGraph",
    "secret_graph",
]


GRAPH_KINDS = ("full", "attribute", "partition", "distance", "explicit")


#: Most values one attribute of a k-means domain may take: the grid holds every value's
#: coordinate, and each Lloyd iteration counts k × (values) per attribute.
MAX_ATTRIBUTE_VALUES = 1 << 24


#: Largest |coordinate| of a k-means domain: squared distances and the noise plan square
#: differences of coordinates, which overflow to inf (then NaN) beyond about 1e154.
MAX_ABS_COORDINATE = 2.0**500


@dataclass(frozen=True)
class KMeansGrid:
    """The tuple domain T as a grid of points: attribute A takes the values ``coords[A]``.

    Integer ordinals ``low..high`` take their integer values; binned ordinals take their bin
    midpoints. ``centre`` is the box centre o that sums are taken relative to.
    """

    domain: Domain
    coords: tuple[NDArray[np.float64], ...]

    @classmethod
    def from_domain(cls, domain: Domain) -> KMeansGrid:
        if not isinstance(domain, Domain):
            raise InvalidTypeError(f"domain must be a fugu.Domain, got {type(domain).__name__}")
        coords = []
        for a in domain.attributes:
            if not isinstance(a, Ordinal):
                raise DomainError(
                    f"k-means needs ordinal (numeric) attributes; {a.name!r} is nominal. Drop it "
                    f"or encode it as an Ordinal"
                )
            if a.size > MAX_ATTRIBUTE_VALUES:
                # np.arange of its values came first: 8 GB for 0..10^9, then k times that per
                # iteration's counts
                raise DomainTooLargeError(
                    f"k-means keeps every value of every attribute (and k counts per value in "
                    f"each iteration): {a.name!r} has {a.size:,} values, the limit is "
                    f"{MAX_ATTRIBUTE_VALUES:,}. Bin it: fugu.Ordinal({a.name!r}, edges=[...]) "
                    f"with at most {MAX_ATTRIBUTE_VALUES:,} bins (points snap to bin midpoints)"
                )
            ends = np.abs(np.asarray(a.edges if a.edges is not None else (a.low, a.high), float))
            reach = float(max(ends[0], ends[-1]))
            if not reach <= MAX_ABS_COORDINATE:
                # midpoints of edges near 1.7e308 were inf, and squares of coordinates beyond
                # 1e154 inf: NaN distances assigned every point to the first centre
                raise DomainError(
                    f"k-means squares coordinates: attribute {a.name!r} reaches {reach:.3g}, "
                    f"beyond {MAX_ABS_COORDINATE:.3g} (2^500); rescale it (another unit) or "
                    f"shift it by a public offset"
                )
            if a.edges is not None:
                e = np.asarray(a.edges, dtype=np.float64)
                coords.append((e[:-1] + e[1:]) / 2)
            else:
                assert a.high is not None
                coords.append(np.arange(a.low, a.high + 1, dtype=np.float64))
        return cls(domain, tuple(coords))

    @property
    def names(self) -> tuple[str, ...]:
        return self.domain.names

    @property
    def dim(self) -> int:
        return len(self.coords)

    @property
    def sizes(self) -> tuple[int, ...]:
        return tuple(c.size for c in self.coords)

    @property
    def low(self) -> NDArray[np.float64]:
        return np.array([c[0] for c in self.coords])

    @property
    def high(self) -> NDArray[np.float64]:
        return np.array([c[-1] for c in self.coords])

    @property
    def centre(self) -> NDArray[np.float64]:
        return (self.low + self.high) / 2

    @property
    def diameter(self) -> float:
        """d(T): the L1 diameter of the domain."""
        return float(np.sum(self.high - self.low))

    def all_points(self) -> NDArray[np.float64]:
        """Coordinates of every cell, in flat (C) order."""
        cells = np.indices(self.sizes).reshape(self.dim, -1).T
        return self.to_points(cells)

    def to_points(self, codes: NDArray[np.int64]) -> NDArray[np.float64]:
        """Cell codes (n, d) → coordinates (n, d)."""
        return np.stack([c[codes[:, j]] for j, c in enumerate(self.coords)], axis=1)

    def encode(self, X: NDArray[np.float64], clip: bool) -> NDArray[np.int64]:
        """Coordinates (n, d) → cell codes (n, d), through the domain's own encoding."""
        mode = "clip" if clip else "error"
        cols = []
        for j, a in enumerate(self.domain.attributes):
            try:
                cols.append(a.encode(X[:, j], out_of_domain=mode))  # type: ignore[arg-type]
            except DomainError as exc:
                msg = str(exc).split("; fix the data")[0]
                raise DomainError(
                    f"{msg}; points must lie in the declared domain: fix the data or the domain, "
                    f"or pass clip=True (fugu kmeans --clip) to clip them to its box (recorded "
                    f"in the guarantee)"
                ) from None
        return np.stack(cols, axis=1)


@dataclass(frozen=True)
class SecretGraph:
    """The part of a Blowfish policy that k-means needs (an internal, policy-agnostic view).

    ``kind``: ``full`` (every pair; ε-DP), ``attribute`` (differ in exactly one attribute),
    ``partition`` (same block), ``distance`` (``Σ_A w_A |δ_A| ≤ θ`` for ``metric="l1"``, or
    ``max_A w_A |δ_A| ≤ θ`` for ``"linf"``, on cell codes) or ``explicit`` (an edge list).
    Partitions come as per-attribute block ids (``attr_blocks``; None = the attribute is one
    block) or per-cell block ids (``cell_blocks``). ``bottom`` adds the ⊥ vertex (a record may
    also be added or removed). Built from a ``fugu.blowfish.Policy`` by :func:`secret_graph`.
    """

    kind: str
    theta: float | None = None
    metric: str = "l1"
    weights: tuple[float, ...] | None = None
    attr_blocks: tuple[NDArray[np.int64] | None, ...] | None = field(
        default=None, compare=False, repr=False
    )
    cell_blocks: NDArray[np.int64] | None = field(default=None, compare=False, repr=False)
    edges: NDArray[np.int64] | None = field(default=None, compare=False, repr=False)
    bottom: bool = False
    description: str = ""

    def __post_init__(self) -> None:
        if self.kind not in GRAPH_KINDS:
            raise PolicyError(f"graph kind must be one of {GRAPH_KINDS}, got {self.kind!r}")
        if self.kind == "distance" and (self.theta is None or not self.theta > 0):
            raise PolicyError(f"distance-threshold graph needs theta > 0, got {self.theta!r}")
        if self.kind == "distance" and self.metric not in ("l1", "linf"):
            raise PolicyError(f"metric must be 'l1' or 'linf', got {self.metric!r}")
        if self.kind == "partition" and self.attr_blocks is None and self.cell_blocks is None:
            raise PolicyError("a partition graph needs attr_blocks or cell_blocks")
        if self.kind == "explicit" and self.edges is None:
            raise PolicyError("an explicit graph needs edges")

    @property
    def label(self) -> str:
        return self.description or self.kind


def secret_graph(policy: Any, grid: KMeansGrid) -> SecretGraph:
    """The secret graph of ``policy`` for k-means on ``grid``.

    ``policy`` is None (ε-DP: G^full), a ``fugu.blowfish.Policy`` on the same domain, a policy
    string (parsed by ``Policy.parse``: ``'full'``, ``'attribute'``, ``'distance:theta=5'``,
    ``'partition:lat=40,lon=30'``, ``'line'``, ``...+bottom``) or a :class:`SecretGraph`.
    """
    if policy is None:
        graph = SecretGraph("full", description="full (epsilon-DP)")
    elif isinstance(policy, SecretGraph):
        graph = policy
        _check_graph(graph, grid)
    else:
        if isinstance(policy, str):
            from .policy import Policy

            policy = Policy.parse(policy, grid.domain)
        graph = _from_policy(policy, grid)
    if not _has_edges(graph, grid) and _bottom_reach(graph, grid) < 0:
        raise PolicyError(
            f"the secret graph {graph.label!r} has no edge on this domain: no pair of values is "
            f"secret, so k-means under it would protect nothing and release exact centres. Use "
            f"a graph with at least one secret pair (policy=None for epsilon-DP, 'line', "
            f"'distance:theta=5', partition blocks of two or more values)"
        )
    return graph


def _check_graph(graph: SecretGraph, grid: KMeansGrid) -> None:
    """A :class:`SecretGraph` given directly must fit the grid: an (E, 3) edge array was read
    as its first two columns (edges (0, 1) of [[0, 1, 2]], silently), and weights, blocks or
    edges of the wrong length or range raised numpy errors deep in the sensitivities."""
    cells = int(np.prod(grid.sizes))
    if graph.kind == "distance":
        w = graph.weights
        t = float(graph.theta or 0)
        if not np.isfinite(t) or (
            w is not None and (len(w) != grid.dim or not all(np.isfinite(x) and x > 0 for x in w))
        ):
            raise PolicyError(
                f"SecretGraph('distance'): theta must be finite and weights one finite number "
                f"> 0 per attribute ({grid.dim}); got theta={graph.theta!r}, weights={w!r}"
            )
    if graph.kind == "partition":
        if graph.cell_blocks is not None:
            c = np.asarray(graph.cell_blocks)
            if c.shape != (cells,) or c.dtype.kind not in "iu" or (c.size and c.min() < 0):
                raise PolicyError(
                    f"SecretGraph('partition'): cell_blocks must hold one block id >= 0 per cell "
                    f"({cells}), got shape {c.shape}"
                )
        else:
            ab = graph.attr_blocks
            assert ab is not None
            if len(ab) != grid.dim or any(
                b is not None and (np.shape(b) != (m,) or np.min(b) < 0)
                for b, m in zip(ab, grid.sizes, strict=False)
            ):
                raise PolicyError(
                    f"SecretGraph('partition'): attr_blocks must give, per attribute "
                    f"({grid.dim}), None or one block id >= 0 per value ({list(grid.sizes)})"
                )
    if graph.kind == "explicit":
        e = np.asarray(graph.edges)
        if (
            e.ndim != 2
            or e.shape[1] != 2
            or e.dtype.kind not in "iu"
            or (e.size and (e.min() < -1 or e.max() >= cells))
            or bool(np.any(e[:, 0] == e[:, 1]))
        ):
            raise PolicyError(
                f"SecretGraph('explicit'): edges must be an (E, 2) integer array of distinct "
                f"cells 0..{cells - 1} (or -1 for ⊥), got shape {e.shape}"
            )


def _policy_id(policy: Any, grid: KMeansGrid, graph: SecretGraph) -> str | None:
    """The policy identifier an accountant is charged under: ``Policy.identifier`` (the
    canonical name every Blowfish mechanism uses) for a policy or policy string; the secret
    graph's label for a bare :class:`SecretGraph`; None for ε-DP (``policy=None``)."""
    if policy is None:
        return None
    if isinstance(policy, SecretGraph):
        # the identifier of the same graph as a Policy: the label alone ('distance') named
        # SecretGraph('distance', theta=1) and theta=50 alike, so one ledger summed their ε
        return _as_policy(graph, grid).identifier
    if isinstance(policy, str):
        from .policy import Policy

        policy = Policy.parse(policy, grid.domain)
    return str(getattr(policy, "identifier", graph.label))


def _as_policy(graph: SecretGraph, grid: KMeansGrid) -> Any:
    """The ``fugu.blowfish.Policy`` with this secret graph on the grid's domain."""
    from .policy import Policy

    blocks = None
    if graph.kind == "partition" and graph.cell_blocks is None:
        blocks = tuple(
            None if b is None else tuple(int(x) for x in np.asarray(b).reshape(-1))
            for b in graph.attr_blocks or ()
        )
    return Policy(
        grid.domain,
        graph.kind,
        theta=None if graph.kind != "distance" else float(graph.theta or 0.0),
        metric=graph.metric,
        weights=None
        if graph.kind != "distance"
        else tuple(float(w) for w in (graph.weights or (1.0,) * grid.dim)),
        attribute_blocks=blocks,
        cell_blocks=None
        if graph.kind != "partition" or graph.cell_blocks is None
        else np.asarray(graph.cell_blocks, np.int64),
        edges=None if graph.kind != "explicit" else np.asarray(graph.edges, np.int64),
        bottom=graph.bottom,
        label=graph.label,
    )


def _from_policy(policy: Any, grid: KMeansGrid) -> SecretGraph:
    """Adapter for ``fugu.blowfish.Policy`` (see its module docstring for the attributes read)."""
    dom = getattr(policy, "domain", None)
    kind = getattr(policy, "kind", None)
    if dom is None or kind is None:
        raise InvalidTypeError(
            f"policy must be None, a policy string like 'distance:theta=5' or a "
            f"fugu.blowfish.Policy, got {type(policy).__name__}"
        )
    if dom != grid.domain:
        raise PolicyError(
            f"the policy's domain {list(dom.names)} (shape {dom.shape}) does not match the data's "
            f"domain {list(grid.names)} (shape {grid.domain.shape}); build the policy on the "
            f"same domain"
        )
    if getattr(policy, "constraints", ()):
        raise PolicyError(
            "k-means under a policy with public constraints is not supported (its sensitivity "
            "needs the constraint graph); drop the constraints or use the histogram mechanisms"
        )
    desc = str(getattr(policy, "description", kind))
    bottom = bool(getattr(policy, "bottom", False))
    if kind in ("full", "attribute"):
        return SecretGraph(kind, bottom=bottom, description=desc)
    if kind == "distance":
        return SecretGraph(
            "distance",
            theta=float(policy.theta),
            metric=str(policy.metric),
            weights=tuple(float(w) for w in (policy.weights or [1.0] * grid.dim)),
            bottom=bottom,
            description=desc,
        )
    if kind == "partition":
        if getattr(policy, "cell_blocks", None) is not None:
            return SecretGraph(
                "partition",
                cell_blocks=np.asarray(policy.cell_blocks, np.int64),
                bottom=bottom,
                description=desc,
            )
        blocks = tuple(
            None if b is None else np.asarray(b, np.int64) for b in policy.attribute_blocks
        )
        return SecretGraph("partition", attr_blocks=blocks, bottom=bottom, description=desc)
    if kind == "explicit":
        return SecretGraph(
            "explicit", edges=np.asarray(policy.edges, np.int64), bottom=bottom, description=desc
        )
    raise PolicyError(f"k-means does not support the policy kind {kind!r} ({desc})")


def _has_edges(graph: SecretGraph, grid: KMeansGrid) -> bool:
    if graph.kind == "partition":
        if graph.cell_blocks is None:  # product blocks: some attribute has a block of >= 2 values
            return any(np.bincount(ids).max() > 1 for ids in _attr_block_ids(graph, grid))
        return bool(np.bincount(graph.cell_blocks).max() > 1)
    if graph.kind == "explicit":
        assert graph.edges is not None
        return bool(np.any(graph.edges.min(axis=1) >= 0))
    if graph.kind == "distance":
        w = graph.weights or (1.0,) * grid.dim
        return any(
            m > 1 and wj <= (graph.theta or 0) + 1e-12 for m, wj in zip(grid.sizes, w, strict=True)
        )
    return any(m > 1 for m in grid.sizes)


def _attr_block_ids(graph: SecretGraph, grid: KMeansGrid) -> list[NDArray[np.int64]]:
    assert graph.attr_blocks is not None
    return [
        np.zeros(m, np.int64)
        if b is None
        else np.unique(b, return_inverse=True)[1].astype(np.int64)
        for b, m in zip(graph.attr_blocks, grid.sizes, strict=True)
    ]


def _bottom_cells(graph: SecretGraph, grid: KMeansGrid) -> NDArray[np.int64] | None:
    """Cells joined to ⊥ (None when all of them are)."""
    if graph.bottom:
        return None
    if graph.kind == "explicit" and graph.edges is not None:
        e = graph.edges[graph.edges.min(axis=1) < 0]
        return np.unique(e.max(axis=1))
    return np.zeros(0, np.int64)


def _bottom_reach(graph: SecretGraph, grid: KMeansGrid) -> float:
    """max ‖y − o‖₁ over cells y that may be added or removed (0 when none may)."""
    cells = _bottom_cells(graph, grid)
    if cells is None:
        return float(np.sum(grid.high - grid.low)) / 2
    if cells.size == 0:
        return -1.0
    pts = grid.to_points(np.stack(np.unravel_index(cells, grid.sizes), axis=1))
    return float(np.max(np.sum(np.abs(pts - grid.centre), axis=1)))
