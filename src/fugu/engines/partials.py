"""The engine interface: partition → partial result → sum.

Two functions are the whole contract. Mechanisms (histograms, LDP aggregation, k-means) call them
with ``engine=`` and never learn which engine ran:

:func:`partial_counts` ``(data, key, size, columns=..., weights=None, engine=...)``
    ``key`` maps one batch of records (a mapping of column name → array) to flat int64 keys in
    ``[0, size)``, one per row. The engine runs it on every partition, ``np.bincount`` s the keys
    (optionally weighted by one or more columns) and sums the partial vectors.
:func:`partial_sums` ``(data, partial, columns=..., engine=...)``
    The general form: ``partial`` maps one batch to an array, or a dict of arrays, whose shapes do
    not depend on the batch (support counts of LDP reports, per-cluster sums of k-means). The
    engine sums the partial results element-wise. Use this when a row contributes to many bins
    (OLH support, OUE bit counts) or when several arrays come back at once.

Both functions must be *pure and row-decomposable*: the result over the union of two disjoint
batches is the sum of the results over each. That is what lets an engine split the data however
it likes (row groups, Arrow batches, Spark partitions) and still return the same numbers. With
integer keys and integer weights every engine returns **identical** arrays; float weights are
identical when every partial sum is exactly representable (for example coordinates on a grid of
multiples of a power of two, with sums below 2**53 times that power) and otherwise agree up to
floating-point rounding.

Data accepted (``data``):

* an in-memory table: mapping of name → array, numpy structured array, pandas / Polars DataFrame,
  pyarrow Table or RecordBatch;
* a path to a CSV or Parquet file (``str`` or :class:`pathlib.Path`);
* ``None`` with ``sql="SELECT ..."`` (DuckDB engine): the result of a query;
* an iterable of batches (each one of the in-memory forms above), e.g. a stream of report files;
* a Spark DataFrame (``engine="spark"``).

A batch handed to ``key`` / ``partial`` is a ``dict`` of the requested columns: numeric columns
as numpy arrays, string columns as numpy object arrays or Arrow arrays (both accepted by
:meth:`fugu.Domain.encode`). Functions must be picklable (module-level functions, dataclasses,
``functools.partial``; closures work with Spark's cloudpickle) to run on Spark executors.

Examples
--------
>>> import numpy as np
>>> from fugu.engines import partial_counts, partial_sums
>>> data = {"a": np.array([0, 1, 1, 3]), "b": np.array([1, 0, 1, 1])}
>>> def cell(batch):
...     return batch["a"] * 2 + batch["b"]
>>> partial_counts(data, cell, 8, columns=["a", "b"]).tolist()
[0, 1, 1, 1, 0, 0, 0, 1]
>>> partial_counts(data, cell, 8, columns=["a", "b"], engine="duckdb").tolist()
[0, 1, 1, 1, 0, 0, 0, 1]
>>> def stats(batch):
...     return {"n": np.array([len(batch["a"])]), "sum_a": np.array([batch["a"].sum()])}
>>> {k: v.tolist() for k, v in partial_sums(data, stats, columns=["a"]).items()}
{'n': [4], 'sum_a': [5]}
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
from numpy.typing import NDArray

from ..errors import DomainError, FuguError, InvalidParameterError, InvalidTypeError
from .numpy_engine import CHUNK_ROWS, columns_of
from .partial_core import (
    ENGINES,
    Batch,
    CountKey,
    DomainKey,
    Partial,
    _as_partial,
    _CountPartial,
    add_partials,
    check_engine,
    empty_batch,
    text_columns_of,
    warn_no_rows,
)

__all__ = [
    "ENGINES",
    "CountKey",
    "DomainKey",
    "Partial",
    "add_partials",
    "iter_source_batches",
    "partial_counts",
    "partial_sums",
]


# -- sources ------------------------------------------------------------------------------------
def _is_spark(data: Any) -> bool:
    return type(data).__module__.startswith("pyspark")


def _is_path(data: Any) -> bool:
    return isinstance(data, str | Path)


def _is_table(data: Any) -> bool:
    if isinstance(data, Mapping):
        return True
    if isinstance(data, np.ndarray):
        return True
    if type(data).__name__ == "RecordBatchReader":  # a stream of Arrow batches, not a table
        return False
    return type(data).__module__.split(".")[0] in ("pandas", "polars", "pyarrow")


def _num_rows(cols: Mapping[str, Any]) -> int:
    lengths = {len(v) for v in cols.values()}
    if len(lengths) > 1:
        raise DomainError(
            f"columns have different lengths: { {k: len(v) for k, v in cols.items()} }"
        )
    return lengths.pop() if lengths else 0


def _slice(cols: Mapping[str, Any], start: int, stop: int) -> dict[str, Any]:
    return {k: v[start:stop] for k, v in cols.items()}


def _check_columns(columns: Sequence[str], have: Iterable[str], where: str = "the input") -> None:
    have = list(have)
    missing = [c for c in columns if c not in have]
    if missing:
        raise DomainError(
            f"{where} lacks the column(s) {missing}; it has {have[:20]}. Rename the columns or "
            f"change the domain / key"
        )


def iter_source_batches(
    data: Any,
    columns: Sequence[str],
    *,
    batch_rows: int = CHUNK_ROWS,
    text_columns: Sequence[str] = (),
) -> Iterator[dict[str, Any]]:
    """Batches (dicts of the named columns) of an in-memory table, a file or an iterable of tables.

    This is the numpy engine's reader: Parquet row group by row group, CSV in streamed blocks,
    in-memory tables in slices of ``batch_rows`` rows, so memory stays bounded by one batch.
    ``text_columns``: CSV columns of labels, read as written (not as numbers).
    """
    cols = list(columns)
    if _is_path(data):
        from .file_numpy import iter_batches

        for batch in iter_batches(data, cols, batch_rows, text_columns=text_columns):
            if batch.num_rows:
                yield dict(columns_of(batch, cols))
        return
    if _is_table(data):
        table = columns_of(data, cols)
        _check_columns(cols, table)
        n = _num_rows(table)
        for start in range(0, n, batch_rows):
            yield _slice(table, start, start + batch_rows)
        return
    if _is_spark(data):
        raise InvalidTypeError(
            "a Spark DataFrame is counted by the spark engine; pass engine='spark'"
        )
    if isinstance(data, Iterable):
        for item in data:
            yield from iter_source_batches(
                item, cols, batch_rows=batch_rows, text_columns=text_columns
            )
        return
    raise InvalidTypeError(
        f"data must be a table (mapping, DataFrame, Arrow), a CSV/Parquet path, an iterable of "
        f"tables or a Spark DataFrame; got {type(data).__name__}"
    )


# -- the interface --------------------------------------------------------------------------------
def partial_sums(
    data: Any,
    partial: Callable[[Batch], Any],
    *,
    columns: Sequence[str],
    engine: str = "numpy",
    sql: str | None = None,
    batch_rows: int = CHUNK_ROWS,
    text_columns: Sequence[str] = (),
    **engine_options: Any,
) -> Partial:
    """Run ``partial`` on every partition of ``data`` and sum the results element-wise.

    An input with no rows (an empty table, a CSV file with only its header, a query that
    matched nothing) is not refused: ``partial`` is run once on a batch of zero rows (int64
    columns of length 0), which must give the zero of the sum, and a :class:`UserWarning` tells
    the curator. Where the number of records is private, refusing zero rows would reveal it.

    Parameters
    ----------
    data : table, path, iterable of tables, Spark DataFrame, or None with ``sql``
    partial : callable
        ``partial(batch) -> array | dict[str, array]``; pure and row-decomposable (see module doc).
    columns : the columns ``partial`` reads (only these are read from files / sent to executors).
    engine : ``"numpy"`` (default), ``"duckdb"`` or ``"spark"``.
    sql : a DuckDB query to read instead of ``data`` (its WHERE is a *public* filter).
    batch_rows : rows per batch on the numpy and DuckDB engines (bounds memory).
    text_columns : columns of labels (nominal attributes): a CSV reader reads them as written,
        never as numbers, booleans or dates (``"007"`` is not ``7``).
    engine_options : ``threads`` (DuckDB); ``spark``, ``master``, ``num_partitions`` (Spark).

    Raises
    ------
    FuguError
        errors raised by ``partial`` keep their class; on Spark they name the partition.
    """
    check_engine(engine)
    cols = list(columns)
    if not cols:
        raise InvalidParameterError("columns must name at least one column the function reads")
    if engine == "spark" or _is_spark(data):
        from . import spark as spark_engine

        return spark_engine.partial_sums(
            data, partial, columns=cols, sql=sql, text_columns=text_columns, **engine_options
        )
    if engine == "duckdb" or sql is not None:
        from .duckdb_engine import iter_batches as duck_batches

        batches: Iterable[dict[str, Any]] = duck_batches(
            data, cols, sql=sql, batch_rows=batch_rows, text_columns=text_columns, **engine_options
        )
    else:
        if engine_options:
            raise InvalidParameterError(
                f"the numpy engine takes no options {sorted(engine_options)}"
            )
        batches = iter_source_batches(data, cols, batch_rows=batch_rows, text_columns=text_columns)
    total: Partial | None = None
    for batch in batches:
        total = add_partials(total, _as_partial(partial(batch)))
    if total is None:  # zero rows: zero sums, not a refusal (see warn_no_rows)
        warn_no_rows()
        total = _as_partial(partial(empty_batch(cols)))
    return total


def partial_counts(
    data: Any,
    key: Callable[[Batch], NDArray[np.int64]],
    size: int,
    *,
    columns: Sequence[str] | None = None,
    weights: str | Sequence[str] | None = None,
    engine: str = "numpy",
    sql: str | None = None,
    group: bool = False,
    batch_rows: int = CHUNK_ROWS,
    **engine_options: Any,
) -> np.ndarray:
    """Counts (or weighted sums) of ``key(batch)`` over ``[0, size)``, summed over partitions.

    Parameters
    ----------
    key : callable or :class:`DomainKey`
        Maps a batch to one int64 key in ``[0, size)`` per row (row-wise: a row's key depends
        only on that row). A :class:`DomainKey` gives histogram cells.
    size : number of bins.
    columns : the columns ``key`` reads (default: ``key.columns`` when it has them).
    weights : a column name (result shape ``(size,)``) or a list of names (``(size, len)``): sum
        these columns per key instead of counting rows. Integer weights are summed exactly.
    group : DuckDB only — group the rows by ``columns`` (and weights) inside DuckDB first and
        apply ``key`` to the distinct combinations (fast when they are few, as for the columns
        of a small domain; slow for high-cardinality columns such as OLH seeds).

    Returns
    -------
    int64 array of counts, or weighted sums (int64 for integer weights, float64 otherwise).

    Examples
    --------
    >>> import numpy as np
    >>> data = {"x": np.array([2, 0, 2]), "w": np.array([10, 20, 30])}
    >>> partial_counts(data, lambda b: b["x"], 3, columns=["x"], weights="w").tolist()
    [20, 0, 40]
    """
    check_engine(engine)
    size = int(size)
    if size < 1:
        raise InvalidParameterError(f"size must be >= 1, got {size}")
    if columns is None:
        columns = getattr(key, "columns", None)
        if columns is None:
            raise InvalidParameterError("give columns=[...]: the columns the key function reads")
    single = isinstance(weights, str)
    wcols: tuple[str, ...] | None = None
    if weights is not None:
        wcols = (weights,) if isinstance(weights, str) else tuple(weights)
    read = list(dict.fromkeys([*columns, *(wcols or ())]))
    text = list(engine_options.pop("text_columns", ())) or text_columns_of(key)
    if engine == "spark" or _is_spark(data):
        from . import spark as spark_engine

        return spark_engine.partial_counts(
            data,
            key,
            size,
            columns=read,
            weights=wcols,
            single=single,
            sql=sql,
            text_columns=text,
            **engine_options,
        )
    if group and (engine == "duckdb" or sql is not None):
        from .duckdb_engine import count_column, grouped_batches

        fn = _CountPartial(key, size, wcols, count_column=count_column(read), single=single)
        total: Partial | None = None
        for batch in grouped_batches(data, read, sql=sql, text_columns=text, **engine_options):
            total = add_partials(total, fn(batch))
        if total is None:  # zero rows: zero counts, not a refusal (see warn_no_rows)
            warn_no_rows()
            total = fn(empty_batch([*read, count_column(read)]))
        return np.asarray(total)
    fn = _CountPartial(key, size, wcols, single=single)
    out = partial_sums(
        data,
        fn,
        columns=read,
        engine=engine,
        sql=sql,
        batch_rows=batch_rows,
        text_columns=text,
        **engine_options,
    )
    return np.asarray(out)


def wrap_error(exc: BaseException, where: str) -> FuguError:
    """A FuguError of the same kind as ``exc`` whose message says where it happened."""
    msg = f"{where}: {exc}"
    if isinstance(exc, FuguError):
        err: FuguError = type(exc)(msg)
    elif isinstance(exc, KeyError):
        err = DomainError(f"{where}: missing column {exc}")
    elif isinstance(exc, TypeError):
        err = InvalidTypeError(msg)
    else:
        err = InvalidParameterError(f"{where}: {type(exc).__name__}: {exc}")
    return err
