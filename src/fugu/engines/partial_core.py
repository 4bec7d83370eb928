"""What every engine shares about partial results: their type, how two are added, and the
partial functions of counting (a key function + ``np.bincount``).

This module sits below :mod:`fugu.engines.partials` (the dispatching interface) and the engines
that run partials (:mod:`fugu.engines.spark`), so neither has to import the other for them.
Everything here is re-exported by :mod:`fugu.engines.partials`.

>>> import numpy as np
>>> add_partials(np.array([1, 2]), np.array([3, 4])).tolist()
[4, 6]
"""

from __future__ import annotations

import warnings
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import NDArray

from ..errors import DomainError, InvalidParameterError, InvalidTypeError

__all__ = [
    "ENGINES",
    "Batch",
    "CountKey",
    "DomainKey",
    "Partial",
    "add_partials",
    "check_data_or_sql",
    "check_engine",
    "empty_batch",
    "warn_no_rows",
]

ENGINES = ("numpy", "duckdb", "spark")


def check_engine(engine: str) -> str:
    """``engine`` if it names an engine, else a clear error listing them.

    >>> check_engine("duckdb")
    'duckdb'
    """
    if engine not in ENGINES:
        raise InvalidParameterError(f"engine must be one of {ENGINES}, got {engine!r}")
    return engine


def warn_no_rows(where: str = "the input") -> None:
    """Tell the curator (a :class:`UserWarning`, never part of a release) that ``where`` holds
    no rows, so the counts are all zero and a release made from them is noise around zero.

    Zero rows are counted, not refused: where the number of records is private (add/remove
    neighbours, a Blowfish policy with ⊥, the rows of an SQL query) the empty input and a
    one-record input are neighbours, and refusing one while releasing the other tells them
    apart with probability 1 (an SQL filter that matched nobody would error, revealing the
    count 0).
    """
    warnings.warn(
        f"no rows in {where}: every count is 0 and the release is noise around zero counts. "
        "fugu does not refuse it, because where the number of records is private (add/remove "
        "neighbours, a Blowfish policy with ⊥, the rows of an SQL query) refusing the empty "
        "input would reveal that it is empty",
        UserWarning,
        stacklevel=3,
    )


def empty_batch(columns: Iterable[str]) -> dict[str, NDArray[np.int64]]:
    """A batch of zero rows of ``columns``: what a partial function is given when the input has
    no rows (its result is the zero of the sum, with the shapes a non-empty input gives).

    >>> {k: v.shape for k, v in empty_batch(["a", "b"]).items()}
    {'a': (0,), 'b': (0,)}
    """
    return {str(c): np.zeros(0, dtype=np.int64) for c in columns}


def check_data_or_sql(data: Any, sql: str | None) -> None:
    """Refuse records (or a path) given together with ``sql=``: the query names its own input,
    and the engines read the query alone, so the records would be ignored (counted: the query's
    rows, while the caller believes it counted its records).

    >>> check_data_or_sql(None, "SELECT 1 AS x")
    """
    if sql is not None and data is not None:
        raise InvalidParameterError(
            f"sql= counts the rows of a query, which names its own input, but records were "
            f"given too (a {type(data).__name__}), which would be ignored: pass data=None with "
            f"sql=, or the records without sql="
        )


Partial = np.ndarray | dict[str, np.ndarray]
Batch = Mapping[str, Any]


# -- combining partial results ----------------------------------------------------------------
def add_partials(a: Partial | None, b: Partial | None) -> Partial | None:
    """Element-wise sum of two partial results (arrays or dicts of arrays); None is the identity.

    >>> add_partials({"x": np.array([1, 2])}, {"x": np.array([3, 4])})["x"].tolist()
    [4, 6]
    """
    if a is None:
        return b
    if b is None:
        return a
    if isinstance(a, dict) != isinstance(b, dict):
        raise InvalidTypeError("partial results must all be arrays or all be dicts of arrays")
    if isinstance(a, dict):
        assert isinstance(b, dict)
        if set(a) != set(b):
            raise InvalidParameterError(
                f"partial results have different keys {sorted(a)} and {sorted(b)}; the partial "
                f"function must return the same keys for every batch"
            )
        return {k: _add(a[k], b[k], k) for k in a}
    assert not isinstance(b, dict)
    return _add(a, b, "result")


def _add(x: np.ndarray, y: np.ndarray, what: str) -> np.ndarray:
    x, y = np.asarray(x), np.asarray(y)
    if x.shape != y.shape:
        raise InvalidParameterError(
            f"partial {what} has shape {x.shape} in one batch and {y.shape} in another; the "
            f"partial function must return shapes that do not depend on the batch"
        )
    return x + y


def _as_partial(p: Any) -> Partial:
    if isinstance(p, Mapping):
        return {str(k): np.asarray(v) for k, v in p.items()}
    return np.asarray(p)


# -- keys ---------------------------------------------------------------------------------------
def nominal_names(domain: Any) -> list[str]:
    """The columns of ``domain``'s nominal attributes: labels, which a CSV reader must read as
    text (never as numbers, booleans or dates: ``007`` is not ``7``).

    >>> import fugu
    >>> nominal_names(fugu.Domain([fugu.Ordinal("a", 0, 3), fugu.Nominal("b", ["x"])]))
    ['b']
    """
    return [a.name for a in domain.attributes if getattr(a, "kind", None) == "nominal"]


def text_columns_of(key: Any) -> list[str]:
    """The columns a key function reads as labels: a :class:`DomainKey`'s nominal columns."""
    return nominal_names(key.domain) if isinstance(key, DomainKey) else []


CountKey = Callable[[Batch], NDArray[np.int64]]


@dataclass(frozen=True)
class DomainKey:
    """The key function of a histogram: a batch → flat cell indices of ``domain``.

    Rows that the ``out_of_domain="drop"`` policy removes are left out; other policies behave as
    in :meth:`fugu.Domain.encode`. Picklable, so Spark executors can run it.

    >>> import fugu
    >>> key = DomainKey(fugu.Domain([fugu.Ordinal("a", 0, 3)]))
    >>> key({"a": np.array([3, 0])}).tolist()
    [3, 0]
    """

    domain: Any
    out_of_domain: str = "error"

    def __call__(self, batch: Batch) -> NDArray[np.int64]:
        return self.domain.encode(batch, self.out_of_domain)

    @property
    def size(self) -> int:
        return int(self.domain.size)

    @property
    def columns(self) -> list[str]:
        return list(self.domain.names)


@dataclass(frozen=True)
class _CountPartial:
    """Turns a key function into a partial: ``np.bincount`` of its keys, optionally weighted."""

    key: Any
    size: int
    weights: tuple[str, ...] | None = None
    count_column: str | None = None  # pre-grouped input: rows carry a multiplicity
    single: bool = False  # one weight column given as a string: return (size,) not (size, 1)

    def __call__(self, batch: Batch) -> np.ndarray:
        keys = np.asarray(self.key(batch))
        if keys.ndim != 1:
            keys = keys.reshape(-1)
        if keys.dtype.kind not in "iu":
            raise InvalidTypeError(f"the key function must return integers, got dtype {keys.dtype}")
        mult = None
        if self.count_column is not None:
            mult = np.asarray(batch[self.count_column], dtype=np.int64)
            if mult.shape != keys.shape:
                raise InvalidParameterError(
                    "the key function must return one key per row (it dropped or added rows); "
                    "drop rows by giving them no key only with engine='numpy'"
                )
        if keys.size:
            lo, hi = int(keys.min()), int(keys.max())
            if lo < 0 or hi >= self.size:
                bad = lo if lo < 0 else hi
                raise DomainError(f"the key function returned {bad}, outside [0, {self.size})")
        if self.weights is None:
            if mult is None:
                return np.bincount(keys, minlength=self.size).astype(np.int64, copy=False)
            return _int_bincount(keys, mult, self.size)
        cols = []
        for w in self.weights:
            wv = _numeric(batch[w], w)
            if mult is not None:
                wv = wv * mult
            if wv.dtype.kind in "iub":
                cols.append(_int_bincount(keys, wv.astype(np.int64), self.size))
            else:
                cols.append(np.bincount(keys, weights=wv, minlength=self.size))
        out = np.stack(cols, axis=1)
        return out[:, 0] if self.single else out


def _int_bincount(keys: np.ndarray, weights: np.ndarray, size: int) -> NDArray[np.int64]:
    """Exact integer-weighted bincount (np.bincount converts weights to float64)."""
    if keys.size == 0:
        return np.zeros(size, dtype=np.int64)
    if np.abs(weights).max(initial=0) * max(keys.size, 1) < 2**52:
        return np.rint(np.bincount(keys, weights=weights, minlength=size)).astype(np.int64)
    out = np.zeros(size, dtype=np.int64)
    np.add.at(out, keys, weights)
    return out


def _numeric(values: Any, name: str) -> np.ndarray:
    arr = np.asarray(
        values.to_numpy(zero_copy_only=False)
        if hasattr(values, "to_numpy") and type(values).__module__.startswith("pyarrow")
        else values
    )
    if arr.dtype.kind not in "iufb":
        raise InvalidTypeError(f"weight column {name!r} must be numeric, got dtype {arr.dtype}")
    if arr.dtype.kind == "f" and not np.all(np.isfinite(arr)):
        raise DomainError(f"weight column {name!r} holds NaN or infinite values")
    return arr
