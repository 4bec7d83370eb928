"""Domains: the public schema that maps records to cells and back.

A :class:`Domain` is a tuple of attributes. An :class:`Ordinal` attribute is an integer range or a
numeric column binned by explicit edges; a :class:`Nominal` attribute has named values arranged in a
:class:`Hierarchy` (a tree whose leaves are the values and whose internal nodes are named groups).
Leaves are numbered in depth-first order, so every hierarchy node covers a contiguous run of codes
and a query on a node is an interval.

A domain is a schema, not data: it may describe far more cells than fit in memory. Only dense
structures (a :class:`~fugu.Histogram`, a cube release) refuse a domain that will not fit.

Examples
--------
>>> from fugu import Domain, Ordinal, Nominal, Hierarchy
>>> h = Hierarchy.from_dict({"any": {"collar": ["white", "blue"], "other": ["service"]}})
>>> dom = Domain([Ordinal("age", 0, 9), Nominal("job", h)])
>>> dom.shape, dom.size
((10, 3), 30)
>>> dom.encode({"age": [3, 9], "job": ["blue", "service"]}).tolist()
[10, 29]
>>> h.node("collar")
HierarchyNode(name='collar', depth=1, start=0, stop=2)
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

import numpy as np
from numpy.typing import ArrayLike, NDArray

from .errors import (
    DomainError,
    DomainTooLargeError,
    InvalidParameterError,
    InvalidTypeError,
    short_repr,
)

__all__ = [
    "Attribute",
    "Domain",
    "Hierarchy",
    "HierarchyNode",
    "Nominal",
    "Ordinal",
    "OutOfDomainPolicy",
    "MAX_DENSE_CELLS",
]

#: Dense structures larger than this many cells are refused (8 bytes each: 2 GiB).
MAX_DENSE_CELLS = 2**28

OutOfDomainPolicy = Literal["error", "clip", "drop"]


# ---------------------------------------------------------------------------------------------
# Hierarchy
# ---------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class HierarchyNode:
    """One node of a hierarchy: its name, depth (root = 0) and leaf codes ``[start, stop)``."""

    name: str
    depth: int
    start: int
    stop: int

    @property
    def size(self) -> int:
        return self.stop - self.start


@dataclass(frozen=True)
class Hierarchy:
    """A tree over the values of a nominal attribute.

    Build it with :meth:`from_dict` (nested mappings whose innermost values are lists of leaves),
    :meth:`from_parents` (child → parent mapping) or :meth:`flat` (root with every value as a
    child). Leaves are ordered depth first, so each node covers a contiguous code interval.

    >>> h = Hierarchy.from_dict({"any": {"a": ["x", "y"], "b": ["z"]}})
    >>> h.leaves
    ('x', 'y', 'z')
    >>> [n.name for n in h.children(h.root)]
    ['a', 'b']
    >>> h.height
    3
    """

    nodes: tuple[HierarchyNode, ...]
    parent: tuple[int, ...]  # parent index of each node; -1 for the root
    leaves: tuple[str, ...]
    _index: Mapping[str, int] = field(default_factory=dict, compare=False, repr=False)
    _children: tuple[tuple[int, ...], ...] = field(default=(), compare=False, repr=False)

    # construction ------------------------------------------------------------------------
    @classmethod
    def from_dict(cls, tree: Mapping[str, Any]) -> Hierarchy:
        """From ``{root: {group: [leaf, ...] | {subgroup: ...}, ...}}``.

        A leaf list may also be a mapping value of ``None`` (``{"x": None}``).
        """
        if not isinstance(tree, Mapping) or len(tree) != 1:
            raise InvalidParameterError(
                "hierarchy must be a mapping with exactly one root, e.g. "
                "{'any': {'group': ['a', 'b']}}"
            )
        ((root_name, root_children),) = tree.items()
        nodes: list[HierarchyNode] = []
        parent: list[int] = []
        leaves: list[str] = []

        def visit(name: Any, children: Any, depth: int, par: int) -> None:
            idx = len(nodes)
            nodes.append(HierarchyNode(str(name), depth, len(leaves), -1))
            parent.append(par)
            if children is None:
                leaves.append(str(name))
            else:
                items: Iterable[tuple[Any, Any]]
                if isinstance(children, Mapping):
                    items = children.items()
                elif isinstance(children, list | tuple):
                    items = [
                        (c, None) if not isinstance(c, Mapping) else next(iter(c.items()))
                        for c in children
                    ]
                else:
                    raise InvalidParameterError(
                        f"hierarchy node {name!r}: children must be a list or mapping, got "
                        f"{type(children).__name__}"
                    )
                items = list(items)
                if not items:
                    raise InvalidParameterError(f"hierarchy node {name!r} has no children")
                for child, grand in items:
                    visit(child, grand, depth + 1, idx)
            nodes[idx] = HierarchyNode(str(name), depth, nodes[idx].start, len(leaves))

        visit(root_name, root_children, 0, -1)
        return cls.build(nodes, parent, leaves)

    @classmethod
    def from_parents(cls, parents: Mapping[str, str | None]) -> Hierarchy:
        """From a child → parent mapping (the root maps to None). Children keep insertion order."""
        kids: dict[str | None, list[str]] = {}
        for child, par in parents.items():
            kids.setdefault(par, []).append(child)
        roots = kids.get(None, [])
        if len(roots) != 1:
            raise InvalidParameterError(
                f"hierarchy needs exactly one root (parent None), found {roots}"
            )

        def subtree(name: str) -> Any:
            if name not in kids:
                return None
            return {c: subtree(c) for c in kids[name]}

        return cls.from_dict({roots[0]: subtree(roots[0])})

    @classmethod
    def flat(cls, values: Sequence[Any], root: str = "*") -> Hierarchy:
        """A two-level hierarchy: a root whose children are the values."""
        return cls.from_dict({root: [str(v) for v in values]})

    @classmethod
    def build(
        cls, nodes: Sequence[HierarchyNode], parent: Sequence[int], leaves: Sequence[str]
    ) -> Hierarchy:
        names = [n.name for n in nodes]
        dupes = (
            sorted({n for n in names if names.count(n) > 1})
            if len(set(names)) != len(names)
            else []
        )
        if dupes:
            raise InvalidParameterError(
                f"hierarchy node names must be unique; repeated: {dupes[:5]}"
            )
        children: list[list[int]] = [[] for _ in nodes]
        for i, p in enumerate(parent):
            if p >= 0:
                children[p].append(i)
        return cls(
            tuple(nodes),
            tuple(parent),
            tuple(leaves),
            {n: i for i, n in enumerate(names)},
            tuple(tuple(c) for c in children),
        )

    # queries -------------------------------------------------------------------------------
    @property
    def root(self) -> HierarchyNode:
        return self.nodes[0]

    @property
    def height(self) -> int:
        """Number of levels, counting the root and the leaves (Privelet's h)."""
        return 1 + max(n.depth for n in self.nodes)

    @property
    def size(self) -> int:
        return len(self.leaves)

    def node(self, name: str) -> HierarchyNode:
        """The node called ``name``; a clear error lists close names when it does not exist."""
        try:
            return self.nodes[self._index[str(name)]]
        except KeyError:
            import difflib

            close = difflib.get_close_matches(str(name), list(self._index), n=3)
            hint = f"; did you mean {close}?" if close else ""
            raise DomainError(f"no hierarchy node called {name!r}{hint}") from None

    def index(self, node: HierarchyNode | str) -> int:
        return self._index[node if isinstance(node, str) else node.name]

    def children(self, node: HierarchyNode | str) -> list[HierarchyNode]:
        return [self.nodes[c] for c in self._children[self.index(node)]]

    def children_index(self, i: int) -> tuple[int, ...]:
        return self._children[i]

    def is_leaf(self, node: HierarchyNode | str) -> bool:
        return not self._children[self.index(node)]

    def internal_nodes(self) -> list[int]:
        return [i for i, c in enumerate(self._children) if c]

    def to_dict(self) -> dict[str, Any]:
        def rec(i: int) -> Any:
            kids = self._children[i]
            if not kids:
                return None
            if all(not self._children[k] for k in kids):
                return [self.nodes[k].name for k in kids]
            return {self.nodes[k].name: rec(k) for k in kids}

        return {self.root.name: rec(0)}


# ---------------------------------------------------------------------------------------------
# Tables given as mappings of columns
# ---------------------------------------------------------------------------------------------
def column_length(values: Any) -> int | None:
    """The number of values in a column, or None for something that is not a column (a scalar,
    a string).

    >>> column_length([1, 2, 3]), column_length(np.zeros((4, 2))), column_length(5)
    (3, 4, None)
    """
    if isinstance(values, str | bytes):
        return None
    try:
        return len(values)
    except TypeError:  # a scalar, or a 0-d array
        return None


def check_column_lengths(lengths: Mapping[str, int], what: str = "the records") -> None:
    """Refuse columns of different lengths, naming each column and its length.

    A table given as a mapping of columns is aligned row by row: a column longer or shorter than
    the others would pair values of different records, and fugu neither pads nor cuts it.

    >>> check_column_lengths({"age": 3, "sex": 3})
    >>> try:
    ...     check_column_lengths({"age": 3, "sex": 2})
    ... except DomainError as err:
    ...     print(str(err)[:71])
    the columns of the records have different lengths: {'age': 3, 'sex': 2}
    """
    distinct = set(lengths.values())
    if len(distinct) <= 1:
        return
    values = list(lengths.values())
    by_count = sorted(distinct, key=values.count, reverse=True)
    if values.count(by_count[0]) > values.count(by_count[1]):
        odd = [k for k, n in lengths.items() if n != by_count[0]]
        fix = f"give the column(s) {odd} {by_count[0]} values like the others"
    else:
        fix = "give every column the same number of values"
    raise DomainError(
        f"the columns of {what} have different lengths: {dict(lengths)}; every column needs one "
        f"value per record (fugu neither pads nor cuts a column): {fix}, or leave a column that "
        f"is not needed out of the table"
    )


def _is_arrow(values: Any) -> bool:
    return type(values).__module__.startswith("pyarrow")


def _as_array(values: Any, name: str) -> np.ndarray:
    if _is_arrow(values):
        if values.null_count:
            return np.asarray(values.to_pylist(), dtype=object)
        return np.asarray(values.to_numpy(zero_copy_only=False))
    arr = np.asarray(values)
    if arr.ndim != 1:
        arr = arr.reshape(-1)
    return arr


def _loose_numeral(v: Any) -> bool:
    """Text that Python and numpy read as a number but a CSV reader does not: digit grouping
    with ``_`` ('1_0' is 10) or digits outside ASCII ('٣' is 3). Spark refuses both."""
    if isinstance(v, bytes):
        return b"_" in v
    return isinstance(v, str) and ("_" in v or not v.isascii())


def _text_as_numbers(arr: np.ndarray) -> np.ndarray:
    """Numbers written as text or held as Python objects: int64 when every value is an integer
    (exact beyond 2**53, where float64 rounds '9007199254740993' to 2**53), else float64.
    Raises TypeError / ValueError when a value is not a number (also '1_0' and non-ASCII
    digits, which Python would read as numbers: :func:`_loose_numeral`)."""
    if arr.dtype.kind == "U" and arr.size:
        if np.any(np.char.find(arr, "_") >= 0):
            raise ValueError("digit grouping")
        try:
            arr.astype("S")  # raises on any character outside ASCII (vectorised)
        except UnicodeEncodeError:
            raise ValueError("non-ASCII digits") from None
    elif arr.dtype.kind == "S" and arr.size and np.any(np.char.find(arr, b"_") >= 0):
        raise ValueError("digit grouping")
    elif arr.dtype.kind == "O" and any(_loose_numeral(v) for v in arr.reshape(-1).tolist()):
        raise ValueError("digit grouping or non-ASCII digits")
    if arr.dtype.kind in "US":
        try:
            return arr.astype(np.int64)
        except (TypeError, ValueError, OverflowError):
            return arr.astype(np.float64)
    values = arr.reshape(-1).tolist()
    if values and all(isinstance(v, int | np.integer) for v in values):
        try:
            return arr.astype(np.int64)
        except OverflowError:  # beyond int64: beyond every domain, float64 is enough
            pass
    return arr.astype(np.float64)


def _non_numeric_examples(arr: NDArray[Any], limit: int = 3) -> list[Any]:
    """Up to ``limit`` distinct values that are not numbers (only offending values are shown in
    errors: the column's valid values belong to other records). Runs on the error path only."""
    bad: list[Any] = []
    for v in arr.reshape(-1).tolist():
        try:
            if _loose_numeral(v):
                raise ValueError(v)
            float(v)
        except (TypeError, ValueError):
            if v not in bad:
                bad.append(v)
                if len(bad) == limit:
                    break
    return bad


def check_out_of_domain(policy: Any) -> OutOfDomainPolicy:
    """``policy`` if it is an out-of-domain policy, else the error (checked before any value is
    looked at: a misspelt policy must not pass or fail depending on the data).

    >>> check_out_of_domain("drop")
    'drop'
    """
    if policy not in ("error", "clip", "drop"):
        raise InvalidParameterError(
            f"out_of_domain must be 'error', 'clip' or 'drop', got {policy!r}"
        )
    return policy  # type: ignore[no-any-return]


def _out_of_domain_error(
    name: str, bad: np.ndarray, n_bad: int, n: int, allowed: str
) -> DomainError:
    examples = ", ".join(short_repr(v.item() if hasattr(v, "item") else v) for v in bad[:5])
    return DomainError(
        f"attribute {name!r}: {n_bad} of {n} values lie outside the domain ({allowed}), e.g. "
        f"{examples}; fix the data or the domain, or pass out_of_domain='clip' (ordinal only) or "
        f"'drop' (recorded in the release)"
    )


@dataclass(frozen=True)
class Ordinal:
    """An ordered attribute: integers ``low..high`` (inclusive) or a numeric column binned by edges.

    With ``edges`` (strictly increasing), value v falls in bin i when
    ``edges[i] <= v < edges[i+1]``;
    the last bin also holds ``edges[-1]``. Bin labels are ``"[a, b)"`` strings.

    >>> Ordinal("age", 17, 90).size
    74
    >>> Ordinal("gain", edges=[0, 1, 100, 1000]).encode([0, 50, 1000]).tolist()
    [0, 1, 2]
    """

    name: str
    low: int = 0
    high: int | None = None
    edges: tuple[float, ...] | None = None

    def __init__(
        self,
        name: str,
        low: int = 0,
        high: int | None = None,
        *,
        edges: Sequence[float] | None = None,
    ) -> None:
        if not isinstance(name, str) or not name:
            raise InvalidParameterError(f"attribute name must be a non-empty string, got {name!r}")
        object.__setattr__(self, "name", name)
        if edges is not None:
            e = tuple(float(x) for x in edges)
            if (
                len(e) < 2
                or any(not math.isfinite(x) for x in e)
                or any(b <= a for a, b in zip(e, e[1:], strict=False))
            ):
                raise InvalidParameterError(
                    f"attribute {name!r}: edges must be >= 2 finite, strictly increasing "
                    f"numbers, got {list(edges)!r}"
                )
            object.__setattr__(self, "edges", e)
            object.__setattr__(self, "low", 0)
            object.__setattr__(self, "high", len(e) - 2)
            return
        object.__setattr__(self, "edges", None)
        if high is None:
            raise InvalidParameterError(
                f"attribute {name!r}: give low and high (inclusive integers) or edges=[...]"
            )
        for arg, v in (("low", low), ("high", high)):
            if isinstance(v, bool) or not isinstance(v, int | np.integer):
                raise InvalidTypeError(f"attribute {name!r}: {arg} must be an integer, got {v!r}")
        if high < low:
            raise InvalidParameterError(
                f"attribute {name!r}: empty range low={low} > high={high}; an attribute "
                f"needs at least one value"
            )
        if low < -(2**63) or high >= 2**63 or high - low >= 2**63 - 1:
            # values and codes are int64: wider bounds overflowed (or wrapped) when encoding
            raise InvalidParameterError(
                f"attribute {name!r}: low={low} and high={high} must lie in the int64 range "
                f"[-2**63, 2**63 - 1], at most 2**63 - 2 apart; shift the values (subtract a "
                f"public offset) or bin them with edges=[...]"
            )
        object.__setattr__(self, "low", int(low))
        object.__setattr__(self, "high", int(high))

    kind = "ordinal"

    @property
    def size(self) -> int:
        assert self.high is not None
        return self.high - self.low + 1

    @property
    def labels(self) -> list[str]:
        if self.edges is not None:
            e = self.edges
            return [
                f"[{_fmt(e[i])}, {_fmt(e[i + 1])}{']' if i == len(e) - 2 else ')'}"
                for i in range(len(e) - 1)
            ]
        assert self.high is not None
        return [str(v) for v in range(self.low, self.high + 1)]

    def encode(
        self, values: ArrayLike, out_of_domain: OutOfDomainPolicy = "error"
    ) -> NDArray[np.int64]:
        """Codes in ``[0, size)``; out-of-domain handling as in :meth:`Domain.encode`.

        With ``out_of_domain='drop'`` the dropped rows get code -1.
        """
        check_out_of_domain(out_of_domain)
        arr = _as_array(values, self.name)
        if arr.dtype.kind in "mMcV":
            raise InvalidTypeError(
                f"attribute {self.name!r} is ordinal (numbers) but got values of type "
                f"{arr.dtype}; convert the column to numbers first (e.g. days since a public "
                f"date) or declare the attribute Nominal"
            )
        if arr.dtype.kind in "OUS":
            try:
                arr = _text_as_numbers(arr)
            except (TypeError, ValueError):
                raise DomainError(
                    f"attribute {self.name!r} is ordinal but got non-numeric values such as "
                    f"[{', '.join(map(short_repr, _non_numeric_examples(arr)))}]; declare it "
                    f"Nominal or convert the column"
                ) from None
            if arr.dtype.kind == "f" and self.edges is None:
                self._refuse_inexact(arr)
        if arr.dtype.kind == "b":
            arr = arr.astype(np.int64)
        over = None  # unsigned values beyond int64: above every domain (high < 2**63)
        shown = arr  # the values quoted in errors
        if arr.dtype.kind == "u" and self.edges is None:
            # as int64, so that ``arr - low`` never meets a negative low in unsigned arithmetic
            # (numpy's OverflowError even for values inside the domain)
            if arr.dtype.itemsize == 8 and arr.size and int(arr.max()) >= 2**63:
                over = arr >= np.uint64(2**63)
            arr = arr.astype(np.int64)
        if arr.dtype.kind == "f":
            nan = np.isnan(arr)
            if nan.any():
                raise DomainError(
                    f"attribute {self.name!r}: {int(nan.sum())} of {arr.size} values are NaN/None; "
                    f"impute or remove them before counting (fugu never drops them silently)"
                )
        if self.edges is None and arr.dtype.kind == "i" and arr.size and over is None:
            # Fast path: signed integer column already inside the range. Shifted to start at 0
            # and viewed as unsigned, values below low wrap to huge numbers, so one max() checks
            # both ends (exact: |v - low| < 2^64 for int64 v and low, and the range is narrower
            # than 2^63).
            wide = arr.astype(np.int64, copy=False)
            codes = wide if self.low == 0 else wide - np.int64(self.low)
            if int(codes.view(np.uint64).max()) <= int(self.high) - self.low:  # type: ignore[arg-type]
                return codes
        if self.edges is not None:
            e = np.asarray(self.edges)
            codes = np.searchsorted(e, arr, side="right").astype(np.int64) - 1
            codes[arr == e[-1]] = len(e) - 2
            low_bad, high_bad = arr < e[0], arr > e[-1]
            allowed = f"[{_fmt(e[0])}, {_fmt(e[-1])}]"
        else:
            if arr.dtype.kind == "f":
                frac = arr != np.floor(arr)
                if frac.any():
                    raise DomainError(
                        f"attribute {self.name!r} holds integers {self.low}..{self.high} but got "
                        f"fractional values such as {arr[frac][:3].tolist()}; "
                        f"bin it with edges=[...]"
                    )
                # Compared as int64, exactly: numpy compares float64 with the bound rounded to
                # float64, so 2**53 + 4.0 passed as <= 2**53 + 3 and got a code past the end.
                # Whole floats below 2**63 in magnitude are exact int64; the others are beyond
                # every domain.
                big = (arr >= 2.0**63) | (arr < -(2.0**63))
                under = big & (arr < 0)
                over = big & (arr > 0)
                arr = np.where(big, 0.0, arr).astype(np.int64)
            else:
                under = None
            low_bad, high_bad = arr < self.low, arr > self.high  # type: ignore[operator]
            if over is not None:
                low_bad &= ~over
                high_bad |= over
            if under is not None:
                high_bad &= ~under
                low_bad |= under
            inside = ~(low_bad | high_bad)
            codes = np.zeros(arr.shape, np.int64)
            # int64 values (bool and unsigned ones converted above): v - low for v in
            # [low, high] cannot overflow
            codes[inside] = arr[inside] - np.int64(self.low)
            allowed = f"{self.low}..{self.high}"
        return _apply_policy(
            self.name,
            shown,
            codes,
            low_bad,
            high_bad,
            self.size,
            out_of_domain,
            allowed,
            clip_ok=True,
        )

    def _refuse_inexact(self, floats: np.ndarray) -> None:
        """Text or objects read as float64 (not all integers) on a range reaching 2**53: an
        integer beyond 2**53 among them was rounded, so its cell would depend on the other
        values of the column (alone, or among integers only, it is read exactly)."""
        if max(abs(self.low), abs(int(self.high))) < 2**53 or not floats.size:  # type: ignore[arg-type]
            return  # beyond 2**53, rounded or not, a value lies outside the range
        finite = floats[np.isfinite(floats)]
        if finite.size and float(np.abs(finite).max()) >= 2**53:
            raise DomainError(
                f"attribute {self.name!r} ({self.low}..{self.high}) got numbers beyond 2**53 "
                f"among values that are not all integers (e.g. '2.0'), which float64 cannot "
                f"read exactly; give the column as integers (int64, or integers written as such)"
            )

    def decode(self, codes: ArrayLike) -> np.ndarray:
        c = np.asarray(codes, dtype=np.int64)
        if self.edges is not None:
            return np.asarray(self.labels, dtype=object)[c]
        return c + self.low

    def code_of(self, value: Any) -> int:
        """The code of a single value (used to resolve query bounds)."""
        return int(self.encode(np.asarray([value]))[0])

    def to_dict(self) -> dict[str, Any]:
        if self.edges is not None:
            return {"kind": "ordinal", "name": self.name, "edges": list(self.edges)}
        return {"kind": "ordinal", "name": self.name, "low": self.low, "high": self.high}


def _fmt(x: float) -> str:
    return str(int(x)) if float(x).is_integer() else f"{x:g}"


def _apply_policy(
    name: str,
    arr: np.ndarray,
    codes: NDArray[np.int64],
    low_bad: np.ndarray,
    high_bad: np.ndarray,
    size: int,
    policy: str,
    allowed: str,
    clip_ok: bool,
) -> NDArray[np.int64]:
    bad = low_bad | high_bad
    if not bad.any():
        return codes
    if policy == "error":
        raise _out_of_domain_error(name, arr[bad], int(bad.sum()), arr.size, allowed)
    if policy == "clip":
        if not clip_ok:
            raise DomainError(
                f"attribute {name!r} is nominal: out-of-domain values cannot be clipped; use "
                f"out_of_domain='drop' or add the values to the domain"
            )
        codes = codes.copy()
        codes[low_bad] = 0
        codes[high_bad] = size - 1
        return codes
    if policy == "drop":
        codes = codes.copy()
        codes[bad] = -1
        return codes
    raise InvalidParameterError(f"out_of_domain must be 'error', 'clip' or 'drop', got {policy!r}")


@dataclass(frozen=True)
class Nominal:
    """An unordered attribute with named values and a hierarchy over them.

    ``Nominal("sex", ["Female", "Male"])`` gets a flat hierarchy (root ``"sex:*"``);
    ``Nominal("job", hierarchy)`` takes its values from the hierarchy's leaves.

    >>> Nominal("sex", ["F", "M"]).encode(["M", "F", "M"]).tolist()
    [1, 0, 1]
    """

    name: str
    hierarchy: Hierarchy

    def __init__(
        self, name: str, values_or_hierarchy: Hierarchy | Sequence[Any] | Mapping[str, Any]
    ) -> None:
        if not isinstance(name, str) or not name:
            raise InvalidParameterError(f"attribute name must be a non-empty string, got {name!r}")
        h = values_or_hierarchy
        if isinstance(h, Mapping):
            h = Hierarchy.from_dict(h)
        elif not isinstance(h, Hierarchy):
            if isinstance(h, str | bytes) or not isinstance(h, Iterable):
                raise InvalidTypeError(
                    f"attribute {name!r}: values must be a list of values, a Hierarchy or a "
                    f"mapping, got {h!r}"
                    + (
                        f"; write Nominal({name!r}, [{h!r}]) for one value"
                        if isinstance(h, str)
                        else ""
                    )
                )
            values = [str(v) for v in h]
            if not values:
                raise InvalidParameterError(
                    f"attribute {name!r} has no values; a nominal attribute needs at least one"
                )
            if len(set(values)) != len(values):
                raise InvalidParameterError(
                    f"attribute {name!r}: values must be distinct, got {values}"
                )
            h = Hierarchy.flat(values, root=f"{name}:*")
        object.__setattr__(self, "name", name)
        object.__setattr__(self, "hierarchy", h)

    kind = "nominal"

    @property
    def size(self) -> int:
        return self.hierarchy.size

    @property
    def values(self) -> tuple[str, ...]:
        return self.hierarchy.leaves

    @property
    def labels(self) -> list[str]:
        return list(self.hierarchy.leaves)

    def encode(
        self, values: ArrayLike, out_of_domain: OutOfDomainPolicy = "error"
    ) -> NDArray[np.int64]:
        check_out_of_domain(out_of_domain)
        if _is_arrow(values):
            if values.null_count:  # type: ignore[union-attr]
                raise DomainError(
                    f"attribute {self.name!r}: {values.null_count} of {len(values)} values are "  # type: ignore[union-attr, arg-type]
                    f"null; impute or remove them (fugu never drops them silently)"
                )
            codes = _lookup_codes(values, self.hierarchy.leaves)
            if (codes < 0).any():
                values = np.asarray(values.to_pylist(), dtype=object)  # type: ignore[union-attr]
            else:
                return codes
        arr = _as_array(values, self.name)
        codes = _lookup_codes(arr, self.hierarchy.leaves)
        missing = codes == _MISSING
        if missing.any():
            raise DomainError(
                f"attribute {self.name!r}: {int(missing.sum())} of {arr.size} values are None/NaN; "
                f"impute or remove them (fugu never drops them silently)"
            )
        bad = codes < 0
        shown = f"one of {self.size} values, e.g. {list(self.hierarchy.leaves)[:4]}"
        return _apply_policy(
            self.name,
            arr,
            codes,
            bad,
            np.zeros_like(bad),
            self.size,
            out_of_domain,
            shown,
            clip_ok=False,
        )

    def decode(self, codes: ArrayLike) -> np.ndarray:
        return np.asarray(self.hierarchy.leaves, dtype=object)[np.asarray(codes, dtype=np.int64)]

    def to_dict(self) -> dict[str, Any]:
        return {"kind": "nominal", "name": self.name, "hierarchy": self.hierarchy.to_dict()}


Attribute = Ordinal | Nominal


_MISSING = -2


def _arrow_text(t: Any) -> bool:
    """Whether an Arrow type holds text (strings, or a dictionary of strings)."""
    import pyarrow as pa

    if pa.types.is_dictionary(t):
        t = t.value_type
    is_view = getattr(pa.types, "is_string_view", lambda _: False)
    return bool(pa.types.is_string(t) or pa.types.is_large_string(t) or is_view(t))


def _lookup_codes(arr: Any, leaves: tuple[str, ...]) -> NDArray[np.int64]:
    """Position of each value in ``leaves``: -1 when absent, -2 (``_MISSING``) for None/NaN.

    Arrow string arrays go through Arrow's hash lookup; numpy arrays are factorised (pandas' hash
    table when pandas is installed, else ``np.unique``) and only the distinct values are looked up.
    """
    import pyarrow as pa

    if isinstance(arr, pa.ChunkedArray | pa.Array):
        if not _arrow_text(arr.type):
            # numbers, booleans, dates: labelled by str() of their numpy values, as every engine
            # labels them (Arrow's cast to string writes 1.0 as '1' and True as 'true')
            arr = np.asarray(arr.to_numpy(zero_copy_only=False))
        else:
            import pyarrow.compute as pc

            values = arr if pa.types.is_string(arr.type) else pc.cast(arr, pa.string())
            idx = pc.index_in(values, value_set=pa.array(list(leaves), type=pa.string()))
            return np.asarray(idx.fill_null(-1).to_numpy(zero_copy_only=False), dtype=np.int64)
    if arr.size == 0:
        return np.zeros(0, np.int64)
    lookup = {v: i for i, v in enumerate(leaves)}
    # A label is str() of the record's own value. Factorising first gives values that are equal
    # in Python (1, 1.0, True; 0.0 and -0.0) the label of whichever came first, so a record's
    # cell would depend on the other records: -0.0 becomes 0.0 (one value, as every engine
    # groups them), and an object column that is not all text is factorised by its text
    # (slower, so only then).
    if arr.dtype.kind == "f":
        arr = arr + 0.0
    try:
        import pandas as pd

        inverse, uniques = pd.factorize(arr)  # None / NaN -> -1
        if arr.dtype.kind == "O" and not all(isinstance(u, str) for u in uniques):
            missing = np.asarray(pd.isna(arr), dtype=bool).reshape(-1)
            inverse, uniques = pd.factorize(arr.reshape(-1).astype(str))
            inverse = np.where(missing, -1, inverse)
        mapped = np.array([lookup.get(str(u), -1) for u in uniques] + [_MISSING], dtype=np.int64)
        return mapped[np.asarray(inverse)]  # index -1 picks the trailing _MISSING
    except ImportError:  # pragma: no cover - pandas is optional
        if arr.dtype.kind == "f":
            nan = np.isnan(arr)
        else:
            nan = np.array(
                [v is None or (isinstance(v, float) and v != v) for v in arr], dtype=bool
            )
        uniq_arr, inverse = np.unique(arr.astype(str), return_inverse=True)
        mapped = np.array([lookup.get(u, -1) for u in uniq_arr.tolist()], dtype=np.int64)
        codes = mapped[np.asarray(inverse).reshape(-1)]
        codes[nan] = _MISSING
        return codes


_ATTRIBUTE_EXAMPLES = (
    '{"kind": "ordinal", "name": "age", "low": 0, "high": 99}, '
    '{"kind": "ordinal", "name": "income", "edges": [0, 1000, 10000]} or '
    '{"kind": "nominal", "name": "sex", "hierarchy": {"sex:*": ["F", "M"]}}'
)


def attribute_from_dict(d: Mapping[str, Any]) -> Attribute:
    """An attribute from its :meth:`to_dict` description; a description that lacks a key or
    names no known kind is refused by name (never a bare KeyError)."""
    from .errors import short_repr

    if not isinstance(d, Mapping):
        raise InvalidParameterError(
            f"an attribute description is an object such as {_ATTRIBUTE_EXAMPLES}; got "
            f"{short_repr(d)}"
        )
    kind = d.get("kind")
    if kind == "ordinal":
        need = ("name", "edges") if "edges" in d else ("name", "low", "high")
    elif kind == "nominal":
        need = ("name", "hierarchy")
    else:
        raise InvalidParameterError(
            f"unknown attribute description {short_repr(dict(d))}: 'kind' must be 'ordinal' or "
            f"'nominal', e.g. {_ATTRIBUTE_EXAMPLES}"
        )
    missing = [k for k in need if k not in d]
    if missing:
        raise InvalidParameterError(
            f"the {kind} attribute description {short_repr(dict(d))} lacks "
            f"{', '.join(map(repr, missing))}; e.g. {_ATTRIBUTE_EXAMPLES}"
        )
    if kind == "ordinal":
        if "edges" in d:
            return Ordinal(d["name"], edges=d["edges"])
        return Ordinal(d["name"], d["low"], d["high"])
    return Nominal(d["name"], Hierarchy.from_dict(d["hierarchy"]))


# ---------------------------------------------------------------------------------------------
# Domain
# ---------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Domain:
    """An ordered tuple of attributes; cells are numbered in C (row-major) order.

    >>> dom = Domain([Ordinal("a", 0, 3), Ordinal("b", 1, 2)])
    >>> dom.names, dom.shape
    (('a', 'b'), (4, 2))
    >>> dom.decode([7])
    {'a': array([3]), 'b': array([2])}
    """

    attributes: tuple[Attribute, ...]

    def __init__(self, attributes: Iterable[Attribute]) -> None:
        if isinstance(attributes, Ordinal | Nominal | str | bytes) or not isinstance(
            attributes, Iterable
        ):
            raise InvalidTypeError(
                f"a domain takes a list of Ordinal/Nominal attributes, got {attributes!r}; "
                f"e.g. Domain([Ordinal('age', 0, 99)])"
            )
        attrs = tuple(attributes)
        if not attrs:
            raise InvalidParameterError("a domain needs at least one attribute")
        for a in attrs:
            if not isinstance(a, Ordinal | Nominal):
                raise InvalidTypeError(f"domain attributes must be Ordinal or Nominal, got {a!r}")
        names = [a.name for a in attrs]
        if len(set(names)) != len(names):
            raise InvalidParameterError(f"attribute names must be unique, got {names}")
        object.__setattr__(self, "attributes", attrs)

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(a.name for a in self.attributes)

    @property
    def shape(self) -> tuple[int, ...]:
        return tuple(a.size for a in self.attributes)

    @property
    def size(self) -> int:
        """Number of cells (a Python int: may exceed 2**63)."""
        return math.prod(self.shape)

    @property
    def ndim(self) -> int:
        return len(self.attributes)

    def __len__(self) -> int:
        return len(self.attributes)

    def __contains__(self, name: object) -> bool:
        return name in self.names

    def __getitem__(self, name: str) -> Attribute:
        return self.attribute(name)

    def attribute(self, name: str) -> Attribute:
        for a in self.attributes:
            if a.name == name:
                return a
        import difflib

        close = difflib.get_close_matches(str(name), list(self.names), n=3)
        hint = f"; did you mean {close}?" if close else ""
        raise DomainError(f"unknown attribute {name!r}: the domain has {list(self.names)}{hint}")

    def axis(self, name: str) -> int:
        self.attribute(name)
        return self.names.index(name)

    def project(self, names: Sequence[str]) -> Domain:
        """The sub-domain of the named attributes, in the given order."""
        return Domain([self.attribute(n) for n in names])

    def check_dense(self, what: str = "a dense histogram", bytes_per_cell: int = 8) -> None:
        """Raise :class:`DomainTooLargeError` if a dense array over the domain will not fit."""
        if self.size > MAX_DENSE_CELLS:
            gib = self.size * bytes_per_cell / 2**30
            raise DomainTooLargeError(
                f"{what} over this domain needs {self.size:,} cells ({gib:,.1f} GiB); the limit is "
                f"{MAX_DENSE_CELLS:,} cells. Coarsen attributes (fewer bins or a higher hierarchy "
                f"level), release marginals over fewer attributes, or use an LDP/grid method that "
                f"is not dense over the whole domain"
            )

    # encoding ------------------------------------------------------------------------------
    def encode_columns(
        self, columns: Mapping[str, ArrayLike], out_of_domain: OutOfDomainPolicy = "error"
    ) -> NDArray[np.int64]:
        """Per-attribute codes as an (n, d) array; rows dropped by the policy carry -1."""
        check_out_of_domain(out_of_domain)
        missing = [n for n in self.names if n not in columns]
        if missing:
            raise DomainError(
                f"records lack the column(s) {missing}; "
                f"they have {sorted(map(str, columns))[:20]}. "
                f"Rename the columns or change the domain"
            )
        self._check_lengths(columns)
        cols = [a.encode(columns[a.name], out_of_domain) for a in self.attributes]
        lengths = {c.size for c in cols}
        if len(lengths) > 1:  # columns without a length (scalars) count as one value
            check_column_lengths(dict(zip(self.names, [c.size for c in cols], strict=True)))
        return np.stack(cols, axis=1) if cols[0].size else np.zeros((0, self.ndim), np.int64)

    def _check_lengths(self, columns: Mapping[str, ArrayLike]) -> None:
        """The domain's columns must have one length (before any is encoded)."""
        lengths = {n: column_length(columns[n]) for n in self.names}
        check_column_lengths({n: k for n, k in lengths.items() if k is not None})

    def encode(
        self, columns: Mapping[str, ArrayLike], out_of_domain: OutOfDomainPolicy = "error"
    ) -> NDArray[np.int64]:
        """Flat cell indices (C order). Needs ``size < 2**63``; dropped rows are removed.

        Dropping is only done when ``out_of_domain='drop'`` was asked for.
        """
        check_out_of_domain(out_of_domain)
        if self.size >= 2**63:
            raise DomainTooLargeError(
                f"the domain has {self.size:.3g} cells, too many for a flat 64-bit cell index; use "
                f"per-attribute codes (encode_columns)"
            )
        missing = [n for n in self.names if n not in columns]
        if missing:
            self.encode_columns(columns, out_of_domain)  # raises the standard error
        self._check_lengths(columns)
        flat: NDArray[np.int64] | None = None
        for a in self.attributes:
            c = a.encode(columns[a.name], out_of_domain)
            if flat is None:
                # The first attribute's codes may be the caller's own array: copy before the
                # in-place updates that a second attribute needs.
                flat = c.copy() if self.ndim > 1 else c
            else:
                if c.size != flat.size:  # e.g. a 2-d column, flattened by Attribute.encode
                    raise DomainError(
                        f"column {a.name!r} gives {c.size} values and the columns before it "
                        f"{flat.size}; every column needs one value per record (a 1-d array)"
                    )
                dropped = ((flat < 0) | (c < 0)) if out_of_domain == "drop" else None
                flat *= a.size
                flat += c
                if dropped is not None and dropped.any():
                    flat[dropped] = -1
        assert flat is not None
        if out_of_domain == "drop":
            flat = flat[flat >= 0]
        return flat

    def flatten(self, codes: NDArray[np.int64]) -> NDArray[np.int64]:
        """(n, d) codes → flat indices."""
        flat = np.zeros(codes.shape[0], dtype=np.int64)
        for j, size in enumerate(self.shape):
            flat *= size
            flat += codes[:, j]
        return flat

    def unflatten(self, flat: ArrayLike) -> NDArray[np.int64]:
        """Flat indices → (n, d) codes."""
        f = np.asarray(flat, dtype=np.int64).reshape(-1)
        return np.stack(np.unravel_index(f, self.shape), axis=1).astype(np.int64)

    def decode(self, flat: ArrayLike) -> dict[str, np.ndarray]:
        """Flat indices → ``{name: values}`` (bin labels for binned attributes)."""
        codes = self.unflatten(flat)
        return {a.name: a.decode(codes[:, j]) for j, a in enumerate(self.attributes)}

    # serialisation -------------------------------------------------------------------------
    def to_dict(self) -> dict[str, Any]:
        return {"attributes": [a.to_dict() for a in self.attributes]}

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> Domain:
        """The domain of a :meth:`to_dict` description (``{"attributes": [...]}``)."""
        if not isinstance(d, Mapping) or not isinstance(d.get("attributes"), list | tuple):
            from .errors import short_repr

            raise InvalidParameterError(
                f'a domain description is {{"attributes": [...]}} with one object per attribute '
                f"(e.g. {_ATTRIBUTE_EXAMPLES}); got {short_repr(d)}"
            )
        return cls([attribute_from_dict(a) for a in d["attributes"]])

    def to_json(self) -> str:
        return json.dumps(self.to_dict())

    def __repr__(self) -> str:
        parts = ", ".join(f"{a.name}:{a.kind}[{a.size}]" for a in self.attributes)
        return f"Domain({parts})"
