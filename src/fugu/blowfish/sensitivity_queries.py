"""The queries whose policy-specific sensitivity fugu computes, and the columns they contribute.

A linear query is described by a small public object (:class:`HistogramQuery`,
:class:`Coarsening`, :class:`CumulativeHistogram`, :class:`SumQuery`, a range workload or an
explicit matrix). Its sensitivity needs only ``W[:, x]``, what one record in cell ``x`` adds to
the outputs; the column providers here give those columns densely (:class:`_Dense`) or as
coverage counts of boxes (:class:`_Boxes`) without building ``W``. :func:`query_matrix` is the
dense matrix; :class:`SensitivityResult` is what every sensitivity function returns.
"""

from __future__ import annotations

import itertools
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import NDArray

from ..domain import Domain, Ordinal
from ..errors import DomainError, InvalidParameterError, PolicyError
from ..queries import RangeQuery, Workload
from .policy import Policy

__all__ = [
    "Coarsening",
    "CumulativeHistogram",
    "HistogramQuery",
    "SensitivityResult",
    "SumQuery",
    "query_matrix",
]


@dataclass(frozen=True)
class HistogramQuery:
    """The complete histogram (one count per cell)."""


@dataclass(frozen=True)
class Coarsening:
    """The histogram over a coarser binning of T.

    ``blocks`` as in :meth:`Policy.partition`: a per-attribute mapping (width, block ids, groups,
    ``"level<d>"``) or one bin id per cell.
    """

    blocks: Any

    def labels(self, domain: Domain) -> NDArray[np.int64]:
        from .policy_edges import partition_block_ids

        return partition_block_ids(domain, self.blocks)


@dataclass(frozen=True)
class CumulativeHistogram:
    """``C_i = #{records whose attribute code <= i}`` for i = 1..k (k = the attribute's size).

    On a one-attribute domain ``attribute`` may be omitted. ``C_k = n`` is included; it does not
    change under replace-one neighbours, only when the policy has the ⊥ vertex.
    """

    attribute: str | None = None

    def axis(self, domain: Domain) -> int:
        if self.attribute is None:
            if domain.ndim != 1:
                raise InvalidParameterError(
                    f"a cumulative histogram on a {domain.ndim}-attribute domain needs "
                    f"attribute=one of {list(domain.names)}"
                )
            return 0
        return domain.axis(self.attribute)


@dataclass(frozen=True)
class SumQuery:
    """The vector of per-attribute sums ``Σ_records value_A`` (one output per attribute), each
    record weighted by a public factor at most ``max_weight`` (the paper's weighted sum).

    ``value_A`` is the integer value of an ordinal ``low..high`` attribute, the bin index of a
    binned one. Nominal attributes cannot be summed.
    """

    attributes: tuple[str, ...] | None = None
    max_weight: float = 1.0

    def __post_init__(self) -> None:
        w = self.max_weight
        if (
            isinstance(w, bool)
            or not isinstance(w, int | float | np.integer | np.floating)
            or not (np.isfinite(w) and w >= 0)
        ):
            # a negative weight gave a negative sensitivity, refused by the sampler only after
            # blowfish.laplace had charged the budget
            raise InvalidParameterError(
                f"SumQuery(max_weight=...) is the largest public weight of a record: a finite "
                f"number >= 0, got {w!r}"
            )
        object.__setattr__(self, "max_weight", float(w))
        if self.attributes is None:
            return
        names = (
            (self.attributes,)
            if isinstance(self.attributes, str)
            else tuple(str(a) for a in self.attributes)
        )
        # an attribute summed twice is two equal outputs, which one move changes together; the
        # closed forms count each attribute once (line graph: sensitivity 1 for a change of 2)
        repeated = sorted({a for a in names if names.count(a) > 1})
        if repeated:
            raise InvalidParameterError(
                f"SumQuery(attributes=...): {', '.join(map(repr, repeated))} appears more than "
                f"once in {list(names)}; list each attribute once (a repeated sum is the same "
                f"output twice)"
            )
        object.__setattr__(self, "attributes", names)


@dataclass(frozen=True)
class SensitivityResult:
    """A sensitivity with how it was obtained: ``exact`` False means a safe upper bound."""

    value: float
    exact: bool
    method: str
    alpha: int | None = None
    xi: int | None = None
    #: Under constraints: the largest number of single secret moves whose net effect one
    #: neighbour can have (a safe multiplier for any linear query); None without constraints.
    moves: int | None = None

    def __float__(self) -> float:
        return self.value


QueryLike = Any


class _Columns:
    m: int

    def pair_cost(self, src: NDArray[np.int64], dst: NDArray[np.int64]) -> NDArray[np.float64]:
        raise NotImplementedError

    def norms(self, cells: NDArray[np.int64]) -> NDArray[np.float64]:
        raise NotImplementedError

    def offset_cost(
        self, shape: tuple[int, ...], delta: NDArray[np.int64]
    ) -> NDArray[np.float64] | None:
        return None

    def dense(self, size: int) -> NDArray[np.float64]:
        raise NotImplementedError


class _Dense(_Columns):
    def __init__(self, w: Any, size: int) -> None:
        from scipy import sparse

        if sparse.issparse(w):
            self.w: Any = sparse.csc_matrix(w, dtype=np.float64)
            self.sparse = True
        else:
            arr = np.asarray(w, dtype=np.float64)
            if arr.ndim == 1:
                arr = arr[None, :]
            if arr.ndim != 2:
                raise InvalidParameterError(
                    f"a query matrix must be 2-D (m, |T|), got shape {arr.shape}"
                )
            if not np.all(np.isfinite(arr)):
                raise InvalidParameterError("a query matrix must be finite")
            self.w = arr
            self.sparse = False
        if self.w.shape[1] != size:
            raise DomainError(
                f"query matrix has {self.w.shape[1]} columns; the domain has {size} cells (one "
                f"column per cell, in the domain's flat C order)"
            )
        self.m = int(self.w.shape[0])

    def pair_cost(self, src: NDArray[np.int64], dst: NDArray[np.int64]) -> NDArray[np.float64]:
        if self.sparse:
            d = self.w[:, src] - self.w[:, dst]
            return np.asarray(abs(d).sum(axis=0)).reshape(-1)
        return np.abs(self.w[:, src] - self.w[:, dst]).sum(axis=0)

    def norms(self, cells: NDArray[np.int64]) -> NDArray[np.float64]:
        if self.sparse:
            return np.asarray(abs(self.w[:, cells]).sum(axis=0)).reshape(-1)
        return np.abs(self.w[:, cells]).sum(axis=0)

    def dense(self, size: int) -> NDArray[np.float64]:
        return np.asarray(self.w.todense()) if self.sparse else self.w


class _Boxes(_Columns):
    """A range workload: bounds (m, d, 2), half-open code intervals."""

    def __init__(self, bounds: NDArray[np.int64], shape: tuple[int, ...]) -> None:
        self.b = np.asarray(bounds, dtype=np.int64)
        self.shape = shape
        self.m = int(self.b.shape[0])
        self._cover: NDArray[np.float64] | None = None

    def coverage(
        self, lo: NDArray[np.int64] | None = None, hi: NDArray[np.int64] | None = None
    ) -> NDArray[np.float64]:
        """Number of boxes covering each cell (difference array + cumulative sums)."""
        lo = self.b[:, :, 0] if lo is None else lo
        hi = self.b[:, :, 1] if hi is None else hi
        keep = np.all(hi > lo, axis=1)
        lo, hi = lo[keep], hi[keep]
        d = len(self.shape)
        diff = np.zeros(tuple(n + 1 for n in self.shape), dtype=np.float64)
        for corner in itertools.product((0, 1), repeat=d):
            idx = tuple(np.where(c, hi[:, j], lo[:, j]) for j, c in enumerate(corner))
            np.add.at(diff, idx, (-1.0) ** sum(corner))
        for axis in range(d):
            diff = np.cumsum(diff, axis=axis)
        return diff[tuple(slice(0, n) for n in self.shape)]

    def cover(self) -> NDArray[np.float64]:
        if self._cover is None:
            self._cover = self.coverage()
        return self._cover

    def offset_cost(
        self, shape: tuple[int, ...], delta: NDArray[np.int64]
    ) -> NDArray[np.float64] | None:
        # queries holding both x and x+δ are the boxes [max(a, a−δ), min(b, b−δ))
        lo = np.maximum(self.b[:, :, 0], self.b[:, :, 0] - delta[None, :])
        hi = np.minimum(self.b[:, :, 1], self.b[:, :, 1] - delta[None, :])
        both = self.coverage(lo, hi)
        c = self.cover()
        src = tuple(
            slice(max(0, -int(k)), n - max(0, int(k))) for n, k in zip(shape, delta, strict=True)
        )
        dst = tuple(
            slice(max(0, int(k)), n - max(0, -int(k))) for n, k in zip(shape, delta, strict=True)
        )
        return (c[src] + c[dst] - 2 * both[src]).reshape(-1)

    def _members(self, cells: NDArray[np.int64]) -> NDArray[np.bool_]:
        codes = np.stack(np.unravel_index(cells, self.shape), axis=1)  # (c, d)
        lo = self.b[:, None, :, 0]
        hi = self.b[:, None, :, 1]
        return np.all((codes[None] >= lo) & (codes[None] < hi), axis=2)  # (m, c)

    def pair_cost(self, src: NDArray[np.int64], dst: NDArray[np.int64]) -> NDArray[np.float64]:
        return (self._members(src) != self._members(dst)).sum(axis=0).astype(np.float64)

    def norms(self, cells: NDArray[np.int64]) -> NDArray[np.float64]:
        return self.cover().reshape(-1)[cells]

    def dense(self, size: int) -> NDArray[np.float64]:
        return self._members(np.arange(size)).astype(np.float64)


def _values(domain: Domain, q: SumQuery) -> NDArray[np.float64]:
    names = q.attributes if q.attributes is not None else domain.names
    rows = []
    grids = np.indices(domain.shape).reshape(domain.ndim, -1)
    for n in names:
        a = domain.attribute(n)
        if not isinstance(a, Ordinal):
            raise InvalidParameterError(
                f"attribute {n!r} is nominal; only ordered attributes can be summed"
            )
        j = domain.axis(n)
        base = 0 if a.edges is not None else a.low
        rows.append((grids[j] + base).astype(np.float64) * float(q.max_weight))
    return np.stack(rows)


def _columns(query: QueryLike, domain: Domain) -> _Columns:
    if isinstance(query, SumQuery):
        return _Dense(_values(domain, query), domain.size)
    if isinstance(query, RangeQuery):
        return _Boxes(query.bounds(domain)[None], domain.shape)
    if isinstance(query, Workload):
        return _Boxes(query.bounds(domain), domain.shape)
    if isinstance(query, list | tuple) and query and all(isinstance(q, RangeQuery) for q in query):
        return _Boxes(Workload(list(query)).bounds(domain), domain.shape)
    if isinstance(query, HistogramQuery):
        return _Dense(np.eye(domain.size), domain.size)
    if isinstance(query, CumulativeHistogram):
        return _Dense(query_matrix(query, domain), domain.size)
    if isinstance(query, Coarsening):
        return _Dense(query_matrix(query, domain), domain.size)
    return _Dense(query, domain.size)


def query_matrix(query: QueryLike, domain: Domain) -> NDArray[np.float64]:
    """The dense matrix ``W`` (m × |T|) of a linear query (small domains; tests and brute force)."""
    query = _normalise(query)
    if isinstance(query, HistogramQuery):
        return np.eye(domain.size)
    if isinstance(query, Coarsening):
        lab = query.labels(domain)
        return (lab[None, :] == np.arange(int(lab.max()) + 1)[:, None]).astype(np.float64)
    if isinstance(query, CumulativeHistogram):
        axis = query.axis(domain)
        k = domain.shape[axis]
        codes = np.indices(domain.shape).reshape(domain.ndim, -1)[axis]
        return (codes[None, :] <= np.arange(k)[:, None]).astype(np.float64)
    return _columns(query, domain).dense(domain.size)


def _normalise(query: QueryLike) -> QueryLike:
    if isinstance(query, Mapping):
        # float() of the mapping raised a bare TypeError; {"age": 10} could be the count of age
        # 10 or a coarsening by 10, so say which object to pass rather than guess
        raise InvalidParameterError(
            f"query={dict(query)!r}: a mapping is ambiguous; pass RangeQuery({dict(query)!r}) "
            f"for one range count, or Coarsening({dict(query)!r}) for the histogram of coarser "
            f"bins"
        )
    if isinstance(query, str):
        key = query.strip().lower()
        if key in ("histogram", "hist", "h"):
            return HistogramQuery()
        if key in ("cumulative", "cumulative_histogram", "cdf", "s"):
            return CumulativeHistogram()
        if key in ("sum", "sums"):
            return SumQuery()
        raise InvalidParameterError(
            f"unknown query {query!r}; use 'histogram', 'cumulative', 'sum', a RangeQuery, a "
            f"Workload, a Coarsening, or a query matrix"
        )
    return query


def coarsening_from_policy(policy: Policy) -> Coarsening:
    """The coarsest histogram a partition policy releases exactly: the histogram of its blocks."""
    if policy.kind != "partition":
        raise PolicyError("only a partition policy has blocks to release exactly")
    return Coarsening(policy.block_ids())
