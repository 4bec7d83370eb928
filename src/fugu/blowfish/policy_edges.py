"""A Blowfish secret graph on the domain's cells: partition blocks, distance weights, edge lists.

:class:`~fugu.blowfish.Policy` (in :mod:`fugu.blowfish.policy`) never lists the ``|T|²`` edges of
a large domain; it keeps each graph family in a compact form. This module turns the user's
arguments into those forms and back into cells: the per-attribute or per-cell block ids of a
partition (:func:`partition_block_ids`), the attribute weights of a distance graph, the checked
(E, 2) array of an explicit graph (with :data:`BOTTOM`, the ⊥ vertex), and the enumeration of
edges offset by offset (distance/attribute graphs) or group by group (partitions). No data.
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

import numpy as np
from numpy.typing import ArrayLike, NDArray

from ..domain import Domain, Nominal, Ordinal
from ..errors import DomainError, InvalidTypeError, PolicyError

__all__ = ["BOTTOM", "partition_block_ids"]

#: Flat index used for the ⊥ vertex ("no record") in edge lists and ``is_edge``.
BOTTOM = -1


def partition_block_ids(domain: Domain, blocks: Mapping[str, Any] | ArrayLike) -> NDArray[np.int64]:
    """Flat block id of every cell for ``blocks`` as in :meth:`Policy.partition` — also for a
    binning with one value per block (a query, not a policy: no secret pair is needed)."""
    f = _partition_fields(_check_domain(domain), blocks)
    return _block_ids(domain, f["attribute_blocks"], f["cell_blocks"])


def _block_ids(
    domain: Domain,
    attribute_blocks: tuple[tuple[int, ...] | None, ...] | None,
    cell_blocks: NDArray[np.int64] | None,
) -> NDArray[np.int64]:
    if cell_blocks is not None:
        return cell_blocks
    assert attribute_blocks is not None
    per = [
        np.zeros(a.size, np.int64) if b is None else np.asarray(b, np.int64)
        for a, b in zip(domain.attributes, attribute_blocks, strict=True)
    ]
    nb = [int(p.max()) + 1 for p in per]
    grids = np.meshgrid(*per, indexing="ij")
    flat = np.zeros(domain.shape, np.int64)
    for g, n in zip(grids, nb, strict=True):
        flat = flat * n + g
    return flat.reshape(-1)


def _partition_fields(domain: Domain, blocks: Mapping[str, Any] | ArrayLike) -> dict[str, Any]:
    """The Policy fields of a partition: per-attribute blocks or per-cell block ids, and a label."""
    if isinstance(blocks, Mapping):
        per_attr: list[tuple[int, ...] | None] = [None] * domain.ndim
        for name, spec in blocks.items():
            j = domain.axis(str(name))
            per_attr[j] = _attribute_blocks(domain.attributes[j], spec)
        parts = [
            f"{a.name}={_block_label(blocks[a.name])}"
            for a in domain.attributes
            if a.name in blocks
        ]
        return {
            "attribute_blocks": tuple(per_attr),
            "cell_blocks": None,
            "label": "partition:" + ",".join(parts),
        }
    arr = np.asarray(blocks)
    if arr.ndim != 1 and arr.shape != domain.shape:
        # same size, other shape: flattening read a (3, 2) array on a (2, 3) domain as other
        # blocks, silently
        raise PolicyError(
            f"partition blocks: an array of block ids must have the domain's shape "
            f"{domain.shape} (or be flat, in the domain's C order), got shape {arr.shape}"
        )
    if arr.size != domain.size:
        raise PolicyError(
            f"partition blocks: got {arr.size} block ids for a domain of {domain.size} cells; "
            f"the partition must cover the domain: give one block id per cell (shape "
            f"{domain.shape}) or a per-attribute mapping"
        )
    if arr.dtype.kind not in "iu":
        if arr.dtype.kind == "f" and np.all(arr == np.rint(arr)):
            arr = arr.astype(np.int64)
        else:
            raise PolicyError("partition blocks: per-cell block ids must be integers")
    _, ids = np.unique(arr.reshape(-1), return_inverse=True)
    ids = ids.astype(np.int64)
    ids.setflags(write=False)
    return {"attribute_blocks": None, "cell_blocks": ids, "label": "partition:cells"}


def _check_domain(domain: Any) -> Domain:
    if not isinstance(domain, Domain):
        raise InvalidTypeError(f"domain must be a fugu.Domain, got {type(domain).__name__}")
    return domain


#: Slack of the distance test ``d(x, y) <= θ + EDGE_SLACK`` (absolute, as in ``is_edge``).
EDGE_SLACK = 1e-12


def max_steps(theta: float, weight: float, limit: int) -> int:
    """The largest ``g`` in ``0..limit`` with ``g·weight <= θ + EDGE_SLACK``: the longest edge of
    a distance graph along one attribute, by the very float test ``Policy.is_edge`` makes.

    (A separate tolerance on the ratio, ``floor(θ/weight + 1e-9)``, undercounted by one for
    weights below 1e-3: θ = 3e-6 − 5e-13 with weight 1e-6 has edges of 3 steps, but the
    cumulative sensitivity came out 2.)
    """
    bound = float(theta) + EDGE_SLACK
    w = float(weight)
    g = min(int(limit), max(0, int(math.floor(bound / w))))
    while g < limit and (g + 1) * w <= bound:
        g += 1
    while g > 0 and g * w > bound:
        g -= 1
    return g


def _weights(
    domain: Domain, weights: Mapping[str, float] | Sequence[float] | None
) -> tuple[float, ...]:
    if weights is None:
        return tuple(1.0 for _ in domain.attributes)
    if isinstance(weights, Mapping):
        unknown = [k for k in weights if k not in domain.names]
        if unknown:
            raise DomainError(
                f"weights name unknown attributes {unknown}; the domain has {list(domain.names)}"
            )
        w = [float(weights.get(a.name, 1.0)) for a in domain.attributes]
    else:
        w = [float(x) for x in weights]
        if len(w) != domain.ndim:
            raise PolicyError(f"give one weight per attribute ({domain.ndim}), got {len(w)}")
    if any(not (math.isfinite(x) and x > 0) for x in w):
        raise PolicyError(f"weights must be finite and > 0, got {w}")
    return tuple(w)


def _block_label(spec: Any) -> str:
    if isinstance(spec, int | str):
        return str(spec)
    return "custom"


def _attribute_blocks(attr: Ordinal | Nominal, spec: Any) -> tuple[int, ...]:
    n = attr.size
    if isinstance(spec, bool):
        raise PolicyError(
            f"partition of {attr.name!r}: expected a width, block ids or groups, got {spec!r}"
        )
    if isinstance(spec, float | np.floating):
        raise PolicyError(
            f"partition of {attr.name!r}: a block width is an integer >= 1 (consecutive values "
            f"per block), got {spec!r}"
        )
    if isinstance(spec, int | np.integer):
        width = int(spec)
        if width < 1:
            raise PolicyError(
                f"partition of {attr.name!r}: block width must be an integer >= 1, got {width}"
            )
        return tuple(int(i) // width for i in range(n))
    if isinstance(spec, str):
        if isinstance(attr, Nominal) and spec.startswith("level"):
            try:
                depth = int(spec[5:])
            except ValueError:
                raise PolicyError(
                    f"partition of {attr.name!r}: write 'level1', 'level2', ..."
                ) from None
            h = attr.hierarchy
            if not 0 <= depth < h.height:
                raise PolicyError(
                    f"partition of {attr.name!r}: hierarchy depth {depth} outside 0..{h.height - 1}"
                )
            ids = np.full(n, -1, np.int64)
            k = 0
            for node in h.nodes:
                if node.depth == depth or (
                    node.depth < depth and node.size == 1 and h.is_leaf(node)
                ):
                    ids[node.start : node.stop] = k
                    k += 1
            return tuple(int(i) for i in ids)
        raise PolicyError(
            f"partition of {attr.name!r}: cannot read {spec!r}; give a width (integer), block ids, "
            f"groups of values, or 'level<d>' for a nominal hierarchy"
        )
    items = list(spec)
    if items and all(isinstance(g, list | tuple | set | frozenset) for g in items):
        ids = np.full(n, -1, np.int64)
        for b, group in enumerate(items):
            for v in group:
                code = _code_of(attr, v)
                if ids[code] >= 0:
                    raise PolicyError(
                        f"partition of {attr.name!r}: value {v!r} is in two blocks "
                        f"({ids[code]} and {b}); blocks must not overlap"
                    )
                ids[code] = b
        missing = np.flatnonzero(ids < 0)
        if missing.size:
            vals = [attr.decode([m])[0] for m in missing[:5]]
            raise PolicyError(
                f"partition of {attr.name!r} does not cover the domain: {missing.size} value(s) "
                f"are in no block, e.g. {[v.item() if hasattr(v, 'item') else v for v in vals]}; "
                f"every value must be in exactly one block"
            )
        return tuple(int(i) for i in ids)
    arr = np.asarray(items)
    if arr.size != n:
        raise PolicyError(
            f"partition of {attr.name!r}: got {arr.size} block ids for {n} values; the partition "
            f"must cover the attribute (one block id per value)"
        )
    if arr.dtype.kind not in "iu":
        raise PolicyError(f"partition of {attr.name!r}: block ids must be integers")
    _, ids2 = np.unique(arr, return_inverse=True)
    return tuple(int(i) for i in ids2.reshape(-1))


def _code_of(attr: Ordinal | Nominal, v: Any) -> int:
    try:
        return int(attr.encode(np.asarray([v]))[0])
    except DomainError as exc:
        raise DomainError(f"partition of {attr.name!r}: {exc}") from None


def _edge_array(domain: Domain, edges: Any) -> NDArray[np.int64]:
    if isinstance(edges, np.ndarray) and edges.dtype.kind in "iufb":
        # an array is read as (E, 2) only when it has that shape: reshape(-1, 2) silently read a
        # (2, E) array of sources and targets, or an (E, 3) one, as other edges
        if edges.ndim != 2 or edges.shape[1] != 2:
            raise PolicyError(
                f"edges: an array of edges must have shape (E, 2), one row (x, y) per edge, got "
                f"shape {edges.shape}" + ("; transpose a (2, E) array" if edges.ndim == 2 else "")
            )
        if edges.dtype.kind in "bf":
            raise PolicyError(
                f"edges: endpoints must be integer cell indices, got an array of {edges.dtype}"
            )
        arr = edges.astype(np.int64)
    else:
        rows = []
        for e in edges:
            if len(e) != 2:
                raise PolicyError(f"an edge is a pair of cells, got {e!r}")
            rows.append([_cell_of(domain, v) for v in e])
        arr = np.asarray(rows, dtype=np.int64).reshape(-1, 2)
    if arr.size and (arr.max() >= domain.size or arr.min() < BOTTOM):
        raise DomainError(f"edge endpoints must be cells 0..{domain.size - 1} (or -1 for ⊥)")
    if np.any(arr[:, 0] == arr[:, 1]):
        raise PolicyError("an edge joins two different values; found a self-loop")
    arr = np.sort(arr, axis=1)
    both_bottom = (arr == BOTTOM).all(axis=1)
    if both_bottom.any():
        raise PolicyError("an edge cannot join ⊥ to ⊥")
    arr = np.unique(arr, axis=0)
    # ⊥ edges are stored as (cell, -1) for readability
    bot = arr[:, 0] == BOTTOM
    arr[bot] = arr[bot][:, ::-1]
    arr.setflags(write=False)
    return arr


def _cell_of(domain: Domain, v: Any) -> int:
    if v is None or (isinstance(v, str) and v.lower() in ("bottom", "⊥")):
        return BOTTOM
    if isinstance(v, bool | np.bool_):
        raise PolicyError(f"edges: an endpoint is a cell index, a record or None (⊥), got {v!r}")
    if isinstance(v, int | np.integer):
        return int(v)
    if isinstance(v, float | np.floating):
        raise PolicyError(
            f"edges: an endpoint is an integer cell index, a record (a mapping or a tuple of "
            f"values, e.g. ({v!r},)) or None (⊥), got {v!r}"
        )
    if isinstance(v, Mapping):
        return int(domain.encode({k: [val] for k, val in v.items()})[0])
    vals = [v] if isinstance(v, str) else list(v)  # a string is one value, not its letters
    if len(vals) != domain.ndim:
        raise PolicyError(f"record {v!r} needs one value per attribute {list(domain.names)}")
    return int(domain.encode({a: [val] for a, val in zip(domain.names, vals, strict=True)})[0])


def _offset_pairs(
    shape: tuple[int, ...], delta: NDArray[np.int64], chunk: int
) -> Iterator[tuple[NDArray[np.int64], NDArray[np.int64]]]:
    """Flat (src, src + δ) for every src with both inside the grid."""
    ranges = []
    for n, k in zip(shape, delta, strict=True):
        lo, hi = max(0, -int(k)), n - max(0, int(k))
        if hi <= lo:
            return
        ranges.append(np.arange(lo, hi, dtype=np.int64))
    strides = np.ones(len(shape), np.int64)
    for j in range(len(shape) - 2, -1, -1):
        strides[j] = strides[j + 1] * shape[j + 1]
    flat_delta = int((delta * strides).sum())
    # flat indices of the sub-grid, built axis by axis (no per-cell Python loop)
    src = np.zeros(1, np.int64)
    for r, st in zip(ranges, strides, strict=True):
        src = (src[:, None] + r[None, :] * st).reshape(-1)
    for i in range(0, src.size, chunk):
        s = src[i : i + chunk]
        yield s, s + flat_delta


def _group_pairs(
    groups: NDArray[np.int64], chunk: int
) -> Iterator[tuple[NDArray[np.int64], NDArray[np.int64]]]:
    """All pairs of cells within each group, vectorised over groups of equal size."""
    order = np.argsort(groups, kind="stable")
    g_sorted = groups[order]
    starts = np.flatnonzero(np.r_[True, g_sorted[1:] != g_sorted[:-1]])
    sizes = np.diff(np.r_[starts, g_sorted.size])
    for s in np.unique(sizes):
        if s < 2:
            continue
        st = starts[sizes == s]
        members = order[st[:, None] + np.arange(s)[None, :]]  # (n_groups, s)
        iu, ju = np.triu_indices(int(s), 1)
        per_group = iu.size
        step = max(1, chunk // per_group)
        for i in range(0, members.shape[0], step):
            m = members[i : i + step]
            yield m[:, iu].reshape(-1), m[:, ju].reshape(-1)
