"""Range-count queries, workloads, exact answers by prefix sums, and error metrics.

A :class:`RangeQuery` puts a condition on some attributes: an inclusive ``(low, high)`` interval
of values for an ordinal attribute, or a value / hierarchy node name for a nominal one.
Attributes it does not name are unrestricted. Resolved against a :class:`~fugu.Domain`, a query
becomes per-attribute half-open code intervals ``[start, stop)``.

Exact answers on any dense cube use a summed-area table (prefix sums along every axis) and
inclusion–exclusion over the 2^d corners, vectorised over a whole workload.

>>> import numpy as np, fugu
>>> dom = fugu.Domain([fugu.Ordinal("a", 0, 3), fugu.Ordinal("b", 0, 1)])
>>> cube = np.arange(8).reshape(4, 2)
>>> fugu.RangeQuery({"a": (1, 2)}).answer(cube, dom)
14.0
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import ArrayLike, NDArray

from .domain import Domain, Nominal, Ordinal
from .errors import DomainError, InvalidParameterError, InvalidTypeError, check_positive_int

__all__ = [
    "RangeQuery",
    "Workload",
    "PrefixSums",
    "mae",
    "rmse",
    "relative_error",
    "random_workload",
    "parse_condition",
]


Condition = tuple[Any, Any] | str | int | float


@dataclass(frozen=True)
class RangeQuery:
    """A conjunction of per-attribute conditions, each inclusive.

    On a *binned* ordinal attribute (``Ordinal(edges=...)``) the data hold bins, not values, so a
    condition selects whole bins: give bin labels (``("[0, 10)", "[10, 50)")``), or numbers,
    which select every bin from the one holding the low bound to the one holding the high bound
    (``(3, 7)`` on edges 0, 10, 50 counts the whole bin [0, 10); ``(0, 10)`` counts [0, 10) and
    [10, 50), because 10 lies in the second bin). A query can only be as fine as the bins.

    >>> q = RangeQuery({"age": (20, 29), "occupation": "Professional"})
    >>> q.attributes
    ('age', 'occupation')
    """

    conditions: Mapping[str, Condition]

    def __init__(
        self, conditions: Mapping[str, Condition] | None = None, **kwargs: Condition
    ) -> None:
        if conditions is not None and not isinstance(conditions, Mapping):
            raise InvalidTypeError(
                f"a RangeQuery takes a mapping of attribute name -> condition, got "
                f"{type(conditions).__name__} {conditions!r:.60}; "
                "e.g. RangeQuery({'age': (20, 29)})"
            )
        conds = dict(conditions or {})
        for k in conds:
            if not isinstance(k, str):
                raise InvalidTypeError(f"attribute names in a query are strings, got {k!r}")
        for k, v in kwargs.items():
            if k in conds:
                raise InvalidParameterError(f"attribute {k!r} appears twice in the query")
            conds[k] = v
        object.__setattr__(self, "conditions", conds)

    @property
    def attributes(self) -> tuple[str, ...]:
        return tuple(self.conditions)

    def bounds(self, domain: Domain) -> NDArray[np.int64]:
        """Half-open code intervals, shape (d, 2), for every attribute of ``domain``."""
        out = np.zeros((domain.ndim, 2), dtype=np.int64)
        out[:, 1] = domain.shape
        for name, cond in self.conditions.items():
            j = domain.axis(name)
            out[j] = _resolve(domain.attributes[j], cond)
        return out

    def answer(self, cube: ArrayLike, domain: Domain) -> float:
        """Exact answer on a dense cube (brute-force slice sum; fine for one query)."""
        b = self.bounds(domain)
        arr = np.asarray(cube)
        return float(arr[tuple(slice(lo, hi) for lo, hi in b)].sum())

    def volume(self, domain: Domain) -> int:
        b = self.bounds(domain)
        return int(np.prod(b[:, 1] - b[:, 0]))

    def __str__(self) -> str:
        parts = []
        for k, v in self.conditions.items():
            parts.append(f"{k}={v[0]}..{v[1]}" if isinstance(v, tuple) else f"{k}={v}")
        return " & ".join(parts) or "(all records)"


def _resolve(attr: Ordinal | Nominal, cond: Condition) -> tuple[int, int]:
    if isinstance(attr, Nominal):
        if isinstance(cond, tuple | list):
            raise DomainError(
                f"attribute {attr.name!r} is nominal: give a value or hierarchy node name, not an "
                f"interval {cond!r}"
            )
        node = attr.hierarchy.node(str(cond))
        return node.start, node.stop
    if isinstance(cond, tuple | list):
        if len(cond) != 2:
            raise DomainError(f"attribute {attr.name!r}: an interval is (low, high), got {cond!r}")
        lo, hi = cond
    else:
        lo = hi = cond
    if any(isinstance(v, bool | np.bool_) for v in (lo, hi)):
        # True would silently mean 1 (a JSON workload's true, a mask passed by mistake)
        raise DomainError(
            f"attribute {attr.name!r}: interval bounds must be numbers, got {cond!r} (a boolean "
            f"would be read as 0 or 1); give numbers, e.g. (0, 1)"
        )
    if attr.edges is not None and isinstance(lo, str):
        labels = attr.labels
        for v in (lo, hi):
            if v not in labels:
                raise DomainError(
                    f"attribute {attr.name!r}: unknown bin {v!r}; bins are {labels[:6]}..."
                )
        start, stop = labels.index(str(lo)), labels.index(str(hi)) + 1
        if stop <= start:
            raise DomainError(
                f"attribute {attr.name!r}: reversed interval ({lo!r}, {hi!r}); write it as "
                f"({hi!r}, {lo!r})"
            )
        return start, stop
    try:
        # integers stay exact (float() would move 2**53 + 1 to 2**53); the rest become floats
        lo_f, hi_f = _bound(lo), _bound(hi)
    except (TypeError, ValueError, OverflowError):
        raise DomainError(
            f"attribute {attr.name!r}: interval bounds must be numbers, got {cond!r}"
        ) from None
    if math.isnan(lo_f) or math.isnan(hi_f):
        raise DomainError(f"attribute {attr.name!r}: interval bounds must be numbers, got {cond!r}")
    if hi_f < lo_f:
        raise DomainError(
            f"attribute {attr.name!r}: reversed interval ({lo}, {hi}); write it as ({hi}, {lo})"
        )
    if attr.edges is not None:
        e = attr.edges
        if lo_f < e[0] or hi_f > e[-1]:
            raise DomainError(
                f"attribute {attr.name!r}: interval ({lo}, {hi}) leaves the domain "
                f"[{e[0]:g}, {e[-1]:g}]"
            )
        # the last bin holds its right edge too: a bound equal to e[-1] is in bin len(e) - 2
        start = min(int(np.searchsorted(e, lo_f, side="right")) - 1, len(e) - 2)
        stop = min(int(np.searchsorted(e, hi_f, side="right")), len(e) - 1)
        return max(start, 0), max(stop, start + 1)
    assert attr.high is not None
    if lo_f < attr.low or hi_f > attr.high:
        raise DomainError(
            f"attribute {attr.name!r}: interval ({lo}, {hi}) leaves the domain "
            f"{attr.low}..{attr.high}; "
            f"clip the interval to the domain"
        )
    if lo_f != math.floor(lo_f) or hi_f != math.floor(hi_f):
        raise DomainError(f"attribute {attr.name!r} takes integer bounds, got ({lo}, {hi})")
    return int(lo_f) - attr.low, int(hi_f) - attr.low + 1


def _bound(v: Any) -> int | float:
    """A query bound as a number: Python / numpy integers exactly, anything else as a float."""
    if isinstance(v, int | np.integer) and not isinstance(v, bool | np.bool_):
        return int(v)
    return float(v)


def parse_condition(text: str) -> tuple[str, Condition]:
    """Parse the CLI form ``name=lo..hi`` or ``name=value``.

    >>> parse_condition("age=20..29"), parse_condition("sex=Male")
    (('age', (20, 29)), ('sex', 'Male'))
    """
    if "=" not in text:
        raise InvalidParameterError(
            f"a condition looks like 'age=20..29' or 'sex=Male', got {text!r}"
        )
    name, _, value = text.partition("=")
    name, value = name.strip(), value.strip()
    if ".." in value:
        lo, _, hi = value.partition("..")
        return name, (_number(lo), _number(hi))
    return name, value


def _number(s: str) -> Any:
    s = s.strip()
    try:
        return int(s)
    except ValueError:
        try:
            return float(s)
        except ValueError:
            return s


class Workload(Sequence[RangeQuery]):
    """A list of range queries, resolved to a bounds array (m, d, 2) once per domain.

    >>> import fugu
    >>> dom = fugu.Domain([fugu.Ordinal("a", 0, 9)])
    >>> w = Workload([RangeQuery({"a": (0, 4)}), RangeQuery({"a": (5, 9)})])
    >>> w.bounds(dom)[:, 0].tolist()
    [[0, 5], [5, 10]]
    """

    def __init__(
        self,
        queries: Iterable[RangeQuery] = (),
        *,
        bounds: NDArray[np.int64] | None = None,
        domain: Domain | None = None,
    ) -> None:
        self._queries = list(queries)
        for q in self._queries:
            if not isinstance(q, RangeQuery):
                raise InvalidTypeError(
                    f"a workload holds RangeQuery objects, got {type(q).__name__}"
                )
        self._bounds = bounds
        self._domain = domain
        if bounds is not None and not self._queries:
            self._queries = []

    @classmethod
    def from_bounds(cls, bounds: ArrayLike, domain: Domain) -> Workload:
        """A workload given directly as code bounds, shape (m, d, 2), half-open."""
        b = _bounds_array(bounds, domain, "bounds")
        return cls(bounds=b, domain=domain)

    def __len__(self) -> int:
        if self._bounds is not None and not self._queries:
            return int(self._bounds.shape[0])
        return len(self._queries)

    def __getitem__(self, i: int) -> RangeQuery:  # type: ignore[override]
        if self._queries:
            return self._queries[i]
        assert self._bounds is not None and self._domain is not None
        return _query_from_bounds(self._bounds[i], self._domain)

    def __iter__(self) -> Iterator[RangeQuery]:
        for i in range(len(self)):
            yield self[i]

    def bounds(self, domain: Domain) -> NDArray[np.int64]:
        if self._bounds is not None and self._domain == domain:
            return self._bounds
        if self._bounds is not None and not self._queries:
            raise DomainError("this workload was built for another domain")
        if not self._queries:
            return np.zeros((0, domain.ndim, 2), dtype=np.int64)
        b = np.stack([q.bounds(domain) for q in self._queries])
        self._bounds, self._domain = b, domain
        return b

    def answer(self, cube: ArrayLike, domain: Domain) -> NDArray[np.float64]:
        """Exact answers on a dense cube."""
        return PrefixSums(np.asarray(cube)).answer(self.bounds(domain))

    def __repr__(self) -> str:
        n = len(self)
        shown = ", ".join(str(self[i]) for i in range(min(n, 2)))
        more = ", ..." if n > 2 else ""
        body = f": {shown}{more}" if n else ""
        return f"Workload({n} quer{'y' if n == 1 else 'ies'}{body})"


def _bounds_array(bounds: ArrayLike, domain: Domain, name: str) -> NDArray[np.int64]:
    """``bounds`` as int64 of shape (m, d, 2) for ``domain``, every range non-empty and inside
    the domain (``0 <= start < stop <= size``); the error names ``name``. Fractional or NaN
    bounds are refused (a cast to int64 truncated 2.7 to 2 silently)."""
    raw = np.asarray(bounds)
    if raw.dtype.kind == "f" and not (np.all(np.isfinite(raw)) and np.all(raw == np.floor(raw))):
        raise InvalidParameterError(f"{name} must be whole numbers (half-open code bounds)")
    if raw.dtype.kind not in "iuf" and raw.size:
        raise InvalidParameterError(
            f"{name} must be whole numbers (half-open code bounds), got dtype {raw.dtype}"
        )
    b = raw.astype(np.int64)
    if b.ndim != 3 or b.shape[1:] != (domain.ndim, 2):
        raise InvalidParameterError(f"{name} must have shape (m, {domain.ndim}, 2), got {b.shape}")
    shape = np.asarray(domain.shape)
    if np.any(b[:, :, 0] < 0) or np.any(b[:, :, 1] > shape) or np.any(b[:, :, 1] <= b[:, :, 0]):
        raise DomainError(
            f"{name} must satisfy 0 <= start < stop <= attribute size (half-open code bounds; "
            f"sizes {tuple(int(x) for x in shape)})"
        )
    return b


def workload_bounds(
    workload: Workload | Iterable[RangeQuery] | NDArray[np.int64], domain: Domain
) -> NDArray[np.int64]:
    """The half-open code bounds (m, d, 2) of a non-empty workload.

    ``workload`` is a :class:`Workload`, a list of :class:`RangeQuery` or a bounds array.

    >>> import fugu
    >>> dom = fugu.Domain([fugu.Ordinal("a", 0, 9)])
    >>> workload_bounds([RangeQuery({"a": (2, 4)})], dom).tolist()
    [[[2, 5]]]
    """
    if isinstance(workload, np.ndarray):
        b = _bounds_array(workload, domain, "workload bounds")
    else:
        w = workload if isinstance(workload, Workload) else Workload(list(workload))
        b = w.bounds(domain)
    if b.shape[0] == 0:
        raise InvalidParameterError("the workload is empty; give at least one query")
    return b


def _query_from_bounds(b: NDArray[np.int64], domain: Domain) -> RangeQuery:
    conds: dict[str, Condition] = {}
    for j, attr in enumerate(domain.attributes):
        lo, hi = int(b[j, 0]), int(b[j, 1])
        if lo == 0 and hi == attr.size:
            continue
        if isinstance(attr, Nominal):
            match = [n.name for n in attr.hierarchy.nodes if n.start == lo and n.stop == hi]
            if not match:
                raise DomainError(f"bounds {lo}..{hi} are not a node of {attr.name!r}'s hierarchy")
            conds[attr.name] = match[-1]
        elif attr.edges is not None:
            conds[attr.name] = (attr.labels[lo], attr.labels[hi - 1])
        else:
            conds[attr.name] = (lo + attr.low, hi - 1 + attr.low)
    return RangeQuery(conds)


class PrefixSums:
    """Summed-area table of a cube: any box sum in 2^d look-ups.

    >>> import numpy as np
    >>> ps = PrefixSums(np.ones((4, 4)))
    >>> ps.answer(np.array([[[0, 2], [1, 4]]])).tolist()
    [6.0]
    """

    def __init__(self, cube: ArrayLike) -> None:
        arr = np.asarray(cube, dtype=np.float64)
        table = np.zeros(tuple(s + 1 for s in arr.shape), dtype=np.float64)
        table[tuple(slice(1, None) for _ in arr.shape)] = arr
        for ax in range(arr.ndim):
            np.cumsum(table, axis=ax, out=table)
        self.table = table
        self.ndim = arr.ndim

    def __repr__(self) -> str:
        return f"PrefixSums(shape={tuple(s - 1 for s in self.table.shape)})"

    def answer(self, bounds: ArrayLike) -> NDArray[np.float64]:
        """Sums over half-open boxes, ``bounds`` of shape (m, d, 2)."""
        b = np.asarray(bounds, dtype=np.int64)
        if b.ndim == 2:
            b = b[None]
        m, d, _ = b.shape
        if d != self.ndim:
            raise InvalidParameterError(f"bounds have {d} dimensions, the cube has {self.ndim}")
        total = np.zeros(m, dtype=np.float64)
        for corner in range(1 << d):
            idx = []
            sign = 1
            for j in range(d):
                if corner >> j & 1:
                    idx.append(b[:, j, 0])
                    sign = -sign
                else:
                    idx.append(b[:, j, 1])
            total += sign * self.table[tuple(idx)]
        return total


# -- error metrics ------------------------------------------------------------------------
def _pair(
    estimates: ArrayLike, truth: ArrayLike
) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
    """Estimates and truth as float arrays of one shape: numpy would broadcast a truth of
    another length (3 estimates against 1 true answer) into a wrong error without a word."""
    e, t = np.asarray(estimates, np.float64), np.asarray(truth, np.float64)
    if e.shape != t.shape:
        raise InvalidParameterError(
            f"estimates and truth must have the same shape (one true answer per estimate), got "
            f"{e.shape} and {t.shape}"
        )
    if e.size == 0:
        raise InvalidParameterError("estimates and truth are empty: no error to measure")
    return e, t


def mae(estimates: ArrayLike, truth: ArrayLike) -> float:
    """Mean absolute error."""
    e, t = _pair(estimates, truth)
    return float(np.mean(np.abs(e - t)))


def rmse(estimates: ArrayLike, truth: ArrayLike) -> float:
    """Root mean squared error."""
    e, t = _pair(estimates, truth)
    return float(np.sqrt(np.mean((e - t) ** 2)))


def relative_error(
    estimates: ArrayLike, truth: ArrayLike, sanity_bound: float
) -> NDArray[np.float64]:
    """|est − true| / max(true, sanity_bound), per query (Privelet uses 0.1% of n as the bound)."""
    e, t = _pair(estimates, truth)
    if not sanity_bound > 0 or not math.isfinite(sanity_bound):  # NaN gave NaN errors
        raise InvalidParameterError(f"sanity_bound must be a number > 0, got {sanity_bound}")
    return np.abs(e - t) / np.maximum(t, sanity_bound)


# -- random workloads ---------------------------------------------------------------------
def random_workload(
    domain: Domain,
    n_queries: int,
    *,
    n_predicates: int | tuple[int, int] | None = None,
    attributes: Sequence[str] | None = None,
    volume: float | None = None,
    seed: int | None = None,
) -> Workload:
    """Random range queries like the papers' workloads.

    Each query picks ``n_predicates`` attributes (an int, an inclusive (low, high) range drawn
    uniformly, or all attributes when None) among ``attributes`` (default all). An ordinal
    attribute gets a uniformly random interval (or, with ``volume`` = ω in (0, 1], an interval
    covering a fraction ω of its range, as in the LDP range-query paper); a nominal attribute gets
    a uniformly random non-root hierarchy node. Public randomness only (no data involved).

    >>> import fugu
    >>> dom = fugu.Domain([fugu.Ordinal("a", 0, 99), fugu.Ordinal("b", 0, 9)])
    >>> len(random_workload(dom, 50, n_predicates=1, seed=0))
    50
    """
    n_queries = check_positive_int(n_queries, "n_queries")
    if seed is not None:
        seed = check_positive_int(seed, "seed", 0)
    rng = np.random.default_rng(seed)
    names = list(attributes) if attributes is not None else list(domain.names)
    for n in names:
        domain.attribute(n)
    if len(set(names)) != len(names):
        # a repeated name would be drawn twice: fewer predicates than n_predicates asks
        raise InvalidParameterError(f"attributes must be distinct, got {names}")
    if n_predicates is None:
        lo_k = hi_k = len(names)
    elif isinstance(n_predicates, tuple | list):
        if len(n_predicates) != 2:
            raise InvalidParameterError(
                "n_predicates must be an int or an inclusive (low, high) pair, got "
                f"{n_predicates!r}"
            )
        lo_k = check_positive_int(n_predicates[0], "n_predicates")
        hi_k = check_positive_int(n_predicates[1], "n_predicates")
    else:
        lo_k = hi_k = check_positive_int(n_predicates, "n_predicates")
    if not (1 <= lo_k <= hi_k <= len(names)):
        raise InvalidParameterError(f"n_predicates must lie in 1..{len(names)}, got {n_predicates}")
    if volume is not None and not (0 < volume <= 1):
        raise InvalidParameterError(f"volume must lie in (0, 1], got {volume}")
    bounds = np.zeros((n_queries, domain.ndim, 2), dtype=np.int64)
    bounds[:, :, 1] = domain.shape
    axes = [domain.axis(n) for n in names]
    for i in range(n_queries):
        k = int(rng.integers(lo_k, hi_k + 1))
        for j in rng.choice(axes, size=k, replace=False):
            attr = domain.attributes[int(j)]
            if isinstance(attr, Nominal):
                nodes = attr.hierarchy.nodes[1:] or attr.hierarchy.nodes
                node = nodes[int(rng.integers(len(nodes)))]
                bounds[i, j] = node.start, node.stop
            elif volume is not None:
                width = max(1, int(round(volume * attr.size)))
                start = int(rng.integers(0, attr.size - width + 1))
                bounds[i, j] = start, start + width
            else:
                a, b = sorted(rng.integers(0, attr.size, size=2).tolist())
                bounds[i, j] = a, b + 1
    return Workload.from_bounds(bounds, domain)
