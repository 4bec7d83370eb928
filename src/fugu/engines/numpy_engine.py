"""The numpy engine: chunked ``np.bincount`` and conversion of in-memory tables to columns."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import numpy as np
from numpy.typing import NDArray

from ..domain import check_column_lengths, column_length
from ..errors import DomainError, InvalidTypeError, short_repr

CHUNK_ROWS = 1 << 22


def bincount_chunked(
    flat: NDArray[np.int64], size: int, weights: NDArray[Any] | None = None, chunk: int = CHUNK_ROWS
) -> NDArray[np.int64]:
    """Counts of each flat index in ``[0, size)``; chunked so temporaries stay bounded.

    >>> bincount_chunked(np.array([0, 2, 2]), 4).tolist()
    [1, 0, 2, 0]
    """
    if weights is None and flat.size <= chunk:  # one chunk: no accumulator, no extra pass
        return np.bincount(flat, minlength=size).astype(np.int64, copy=False)
    out = np.zeros(size, dtype=np.int64)
    for start in range(0, flat.size, chunk):
        part = flat[start : start + chunk]
        w = None if weights is None else weights[start : start + chunk]
        counts = np.bincount(part, weights=w, minlength=size)
        out += counts.astype(np.int64) if w is not None else counts
    return out


def sum_partials(partials: Iterable[NDArray[np.int64]], size: int) -> NDArray[np.int64]:
    """Sum per-partition count vectors (the reduce step of every engine)."""
    total = np.zeros(size, dtype=np.int64)
    for p in partials:
        total += p
    return total


def columns_of(data: Any, names: Sequence[str]) -> Mapping[str, np.ndarray]:
    """The named columns of an in-memory table as numpy arrays.

    Accepts a mapping of name → array, a numpy structured array, a pandas or Polars DataFrame, or a
    pyarrow Table / RecordBatch. Missing columns are reported by the domain, with their names; a
    mapping whose columns differ in length, and a named column that appears twice, are refused.
    A table of zero rows gives columns of length 0.
    """
    if isinstance(data, Mapping):
        check_mapping_lengths(data)
        cols = {str(k): np.asarray(v) for k, v in data.items() if str(k) in names}
    elif isinstance(data, np.ndarray) and data.dtype.names:
        cols = {n: np.asarray(data[n]) for n in data.dtype.names if n in names}
    else:
        mod = type(data).__module__.split(".")[0]
        if mod == "pandas":
            check_unique_columns(names, [str(c) for c in data.columns])
            cols = {str(c): _pandas_column(data[c]) for c in data.columns if str(c) in names}
        elif mod == "polars":
            if type(data).__name__ == "LazyFrame":  # the needed columns, computed
                schema = getattr(data, "collect_schema", None)
                have = schema().names() if schema is not None else data.columns
                data = data.select([c for c in have if c in names])
                data = data.collect()
            cols = {c: _polars_column(data[c]) for c in data.columns if c in names}
        elif mod == "pyarrow":
            check_unique_columns(names, list(data.column_names))
            cols = {c: _arrow_column(data.column(c)) for c in data.column_names if c in names}
        elif mod == "pyspark":
            raise InvalidTypeError(
                "Spark DataFrames are counted by the spark engine; pass engine='spark'"
            )
        else:
            raise InvalidTypeError(
                f"records must be a mapping of column name to array, a numpy structured array, "
                f"a pandas/Polars DataFrame or an Arrow table; got {type(data).__name__}"
            )
    # zero rows are columns of length 0, not an error: where the number of records is private,
    # refusing them would reveal it (the counting layer warns the curator)
    return {name: one_per_record(name, v) for name, v in cols.items()}


def one_per_record(name: str, values: Any) -> Any:
    """A column as one value per record: a single value (a scalar, a string) is refused, and a
    2-d array only passes as a column or row vector, flattened (an (n, 2) array was flattened
    into 2n records)."""
    shape = getattr(values, "shape", None)
    if shape is None:  # Arrow arrays: one value per record
        return values
    if len(shape) == 0:
        raise DomainError(
            f"column {name!r} holds a single value ({short_repr(values)}), not a column: give "
            f"a list or an array with one value per record, e.g. {{{name!r}: [...]}}"
        )
    if len(shape) > 1:
        if sum(1 for k in shape if k != 1) > 1:
            raise DomainError(
                f"column {name!r} has shape {tuple(shape)}: a column holds one value per record "
                f"(a 1-d array); give each attribute its own column"
            )
        return values.reshape(-1)
    return values


def check_mapping_lengths(data: Mapping[Any, Any], what: str = "the records") -> None:
    """Refuse a mapping of columns whose columns differ in length (every entry with a length is
    a column, whether or not it is read: a table is aligned row by row)."""
    lengths = {str(k): column_length(v) for k, v in data.items()}
    check_column_lengths({k: n for k, n in lengths.items() if n is not None}, what)


def check_unique_columns(
    names: Sequence[str], have: Sequence[str], where: str = "the records", fold_case: bool = False
) -> None:
    """Refuse a table in which a needed column name appears more than once.

    Readers differ on such tables (pyarrow refuses, DuckDB renames the later ones ``age_1`` and
    reads the first), so fugu refuses them everywhere rather than pick one. ``fold_case``: names
    that differ only in case count as one (DuckDB matches names ignoring case).

    >>> check_unique_columns(["age"], ["age", "sex"])
    >>> try:
    ...     check_unique_columns(["age"], ["age", "age"])
    ... except DomainError as err:
    ...     print(str(err)[:61])
    the column names of the records repeat: 2 columns named 'age'
    """

    def key(n: str) -> str:
        return n.lower() if fold_case else n

    found: dict[str, list[str]] = {}
    for h in have:
        found.setdefault(key(h), []).append(h)
    dups = {n: found[key(n)] for n in dict.fromkeys(names) if len(found.get(key(n), ())) > 1}
    if dups:
        detail = "; ".join(f"{len(v)} columns named {n!r} ({v})" for n, v in dups.items())
        case = any(len(set(v)) > 1 for v in dups.values())
        raise DomainError(
            f"the column names of {where} repeat: {detail}"
            + (", and DuckDB matches column names ignoring case" if case else "")
            + ". fugu cannot tell which one holds the values and does not pick one: rename or "
            "drop the repeated column(s)"
        )


def _pandas_column(s: Any) -> np.ndarray:
    if s.dtype.kind in "iufb" and not (s.hasnans and s.dtype.kind in "iub"):
        return s.to_numpy()
    # missing values of nullable columns (Int64, boolean) as None: refused as missing, never as
    # a 'non-numeric value such as [<NA>]'
    return s.to_numpy(dtype=object, na_value=None)


def _polars_column(s: Any) -> Any:
    if s.dtype.is_numeric():
        return np.asarray(s.to_list(), dtype=object) if s.null_count() else s.to_numpy()
    return _arrow_column(s.to_arrow())


def _arrow_column(c: Any) -> Any:
    """Numeric Arrow columns become numpy arrays; string columns stay Arrow (hash lookup)."""
    import pyarrow as pa

    if (
        pa.types.is_string(c.type)
        or pa.types.is_large_string(c.type)
        or pa.types.is_dictionary(c.type)
    ):
        return c.combine_chunks() if isinstance(c, pa.ChunkedArray) else c
    if c.null_count:
        return np.asarray(c.to_pylist(), dtype=object)
    return np.asarray(c.to_numpy(zero_copy_only=False))
