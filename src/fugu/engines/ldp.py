"""Report aggregation on any engine: a plain partial function per batch, its results combined.

The engine knows no LDP protocol. The caller (:meth:`fugu.ldp.LDPProtocol.aggregate`) hands it a
pure function ``partial(batch) -> dict[str, ndarray]`` of one batch of report columns and,
for partial results that do not combine by addition, a ``merge`` function and the empty state
(HIO keeps its reports). :func:`aggregate_partials` reads the input on the engine and returns the
combined result:

>>> import numpy as np
>>> from fugu.engines.ldp import aggregate_partials
>>> def count(batch):
...     return {"n": np.array([len(batch["y"])]), "ones": np.array([int((batch["y"] == 1).sum())])}
>>> data = {"y": np.array([0, 1, 1, 3] * 50)}
>>> {k: v.tolist() for k, v in aggregate_partials(data, count, columns=["y"]).items()}
{'n': [200], 'ones': [100]}
>>> aggregate_partials(data, count, columns=["y"], engine="duckdb")["ones"].tolist()
[100]

Reports arrive as Arrow (files, DuckDB, Spark). Columns cross the engine boundary as numpy arrays
without per-value Python work: a fixed-size binary column (``fixed_size_binary(w)``, packed bit
vectors) or a ``fixed_size_list<uint8>[w]`` without nulls becomes an ``(n, w)`` uint8 *view* of
the Arrow buffer (:func:`arrow_column`); numbers without nulls become numpy arrays; columns with
nulls or of variable width become object arrays, which the caller checks value by value.
"""

from __future__ import annotations

import json
import pickle
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from ..errors import EmptyDataError, InvalidParameterError, InvalidTypeError, ReportError
from .numpy_engine import CHUNK_ROWS, columns_of

__all__ = [
    "aggregate_partials",
    "aggregate_reports",
    "arrow_column",
    "iter_arrow_batches",
    "read_header",
]

Partial = dict[str, np.ndarray]
_ARROW_SUFFIXES = (".arrow", ".feather", ".ipc")  # Arrow IPC files (Reports.save's .arrow)


# -- Arrow columns → numpy ----------------------------------------------------------------------
def arrow_column(col: Any) -> Any:
    """One Arrow column (Array or ChunkedArray) as numpy, without per-value Python work.

    ``fixed_size_binary(w)`` and ``fixed_size_list<uint8 or int8>[w]`` without nulls → an
    ``(n, w)`` uint8 view of the values buffer (zero copy for one chunk); numbers and booleans
    without nulls → numpy; anything else (nulls, variable-width binary, text) → a numpy object
    array of Python values (``None`` for nulls).

    >>> import pyarrow as pa
    >>> arr = pa.array([b"\\x01\\x02", b"\\x03\\x04"], pa.binary(2))
    >>> arrow_column(arr).tolist()
    [[1, 2], [3, 4]]
    """
    import pyarrow as pa

    if isinstance(col, pa.ChunkedArray):
        if col.num_chunks == 1:
            return arrow_column(col.chunk(0))
        if col.num_chunks == 0:
            return arrow_column(pa.array([], type=col.type))
        parts = [arrow_column(c) for c in col.chunks]
        # chunks of one width each but of different widths (bit vectors of 2 and 3 bytes)
        # cannot be stacked: they become Python values, as one chunk holding both would
        if all(isinstance(p, np.ndarray) and p.dtype != object for p in parts) and (
            len({p.shape[1:] for p in parts}) == 1
        ):
            return np.concatenate(parts)
        return np.concatenate([np.asarray(p, dtype=object) if p.ndim == 1 else _rows(p) for p in
                               parts])  # fmt: skip
    t = col.type
    n = len(col)
    if col.null_count == 0:
        if pa.types.is_fixed_size_binary(t):
            w = t.byte_width
            buf = col.buffers()[1]
            raw = np.frombuffer(buf, dtype=np.uint8) if buf is not None else np.zeros(0, np.uint8)
            start = col.offset * w
            return raw[start : start + n * w].reshape(n, w)
        if pa.types.is_fixed_size_list(t) and t.value_type in (pa.uint8(), pa.int8()):
            w = t.list_size
            values = col.flatten()  # honours the offset
            if values.null_count == 0:
                v = values.to_numpy(zero_copy_only=False)
                if v.dtype == np.int8:
                    v = v.astype(np.int16)  # negative bytes must stay visible (rejected later)
                return v.reshape(n, w)
        if pa.types.is_binary(t) or pa.types.is_large_binary(t):
            # DuckDB and Spark hand fixed-size bit vectors over as variable-width binary: when
            # every value has the same length, the data buffer is the (n, w) matrix
            off_type = np.int64 if pa.types.is_large_binary(t) else np.int32
            offsets = np.frombuffer(col.buffers()[1], dtype=off_type)[
                col.offset : col.offset + n + 1
            ]
            lens = np.diff(offsets)
            if n and np.all(lens == lens[0]):
                w = int(lens[0])
                data = col.buffers()[2]
                raw = (
                    np.frombuffer(data, dtype=np.uint8)
                    if data is not None
                    else np.zeros(0, np.uint8)
                )
                return raw[int(offsets[0]) : int(offsets[0]) + n * w].reshape(n, w)
        if pa.types.is_integer(t) or pa.types.is_floating(t) or pa.types.is_boolean(t):
            return col.to_numpy(zero_copy_only=False)
    return np.asarray(col.to_pylist(), dtype=object) if n else np.zeros(0, dtype=object)


def _rows(matrix: np.ndarray) -> np.ndarray:
    out = np.empty(matrix.shape[0], dtype=object)
    for i, r in enumerate(matrix):
        out[i] = bytes(r) if matrix.dtype == np.uint8 else r
    return out


def _batch_columns(batch: Any, names: Sequence[str]) -> dict[str, Any]:
    return {n: arrow_column(batch.column(batch.schema.get_field_index(n))) for n in names}


# -- readers ------------------------------------------------------------------------------------
def _check(names: Sequence[str], have: Iterable[str], where: str) -> None:
    have = list(have)
    missing = [c for c in names if c not in have]
    if missing:
        raise ReportError(f"{where} lacks the report column(s) {missing}; it has {have[:20]}")
    repeated = [c for c in names if have.count(c) > 1]
    if repeated:  # Arrow's get_field_index gives -1 for a repeated name: the last column
        raise ReportError(
            f"{where} has more than one column named {repeated}; fugu cannot tell which holds "
            f"the reports and does not pick one: rename or drop the repeated column(s)"
        )


def _file_batches(path: Path, names: list[str], batch_rows: int) -> Iterator[Any]:
    suffix = path.suffix.lower()
    if not path.exists():
        raise InvalidParameterError(f"report file {str(path)!r} does not exist")
    try:
        if suffix in (".parquet", ".pq"):
            import pyarrow.parquet as pq

            f = pq.ParquetFile(path)
            _check(names, f.schema_arrow.names, f"report file {str(path)!r}")
            for i in range(f.num_row_groups):
                yield from f.read_row_group(i, columns=names).to_batches(max_chunksize=batch_rows)
            return
        if suffix in _ARROW_SUFFIXES:
            import pyarrow as pa

            with pa.memory_map(str(path)) as src:
                reader = pa.ipc.open_file(src)
                _check(names, reader.schema.names, f"report file {str(path)!r}")
                for i in range(reader.num_record_batches):
                    yield reader.get_batch(i).select(names)
            return
        if suffix in (".csv", ".tsv", ".txt") or ".csv" in "".join(path.suffixes).lower():
            import pyarrow.csv as pcsv

            from .file_numpy import csv_convert_options, csv_errors, csv_parse_options

            # empty lines kept (a report with missing values, rejected and counted as on the
            # DuckDB engine: pyarrow's default skipped them), the data reader's dialect
            with csv_errors(path):
                reader = pcsv.open_csv(
                    path,
                    read_options=pcsv.ReadOptions(block_size=1 << 24),
                    parse_options=csv_parse_options(path),
                    convert_options=csv_convert_options(),
                )
            _check(names, reader.schema.names, f"report file {str(path)!r}")
            with csv_errors(path):
                for batch in reader:
                    yield batch.select(names)
            return
    except OSError as exc:
        raise ReportError(f"report file {str(path)!r} cannot be read ({exc})") from None
    raise InvalidParameterError(
        f"cannot tell the format of {str(path)!r}: name it *.parquet, *.arrow or *.csv"
    )


def _table_batches(data: Any, names: list[str], batch_rows: int) -> Iterator[dict[str, Any]]:
    mod = type(data).__module__.split(".")[0]
    if mod == "pyarrow" and hasattr(data, "schema"):
        _check(names, data.schema.names, "the report table")
        if hasattr(data, "read_next_batch"):  # a RecordBatchReader: stream its batches
            batches: Iterable[Any] = data
        elif hasattr(data, "to_batches"):
            batches = data.to_batches(max_chunksize=batch_rows)
        else:
            batches = [data]
        for b in batches:
            if b.num_rows:
                yield _batch_columns(b, names)
        return
    if isinstance(data, Mapping):
        cols = {str(k): v for k, v in data.items() if str(k) in names}
        _check(names, cols, "the report columns")
        # lengths are cross-checked by the caller's partial function: hand the columns over
        # whole when they disagree, so that no row is matched with another row's values
        lengths = {len(v) if not isinstance(v, np.ndarray) else v.shape[0] for v in cols.values()}
        cols = {k: v if _is_arrow(v) else _exact_column(v) for k, v in cols.items()}
        if len(lengths) != 1:
            yield cols
            return
        n = lengths.pop()
        for start in range(0, n, batch_rows):
            yield {
                k: (arrow_column(v.slice(start, batch_rows)) if _is_arrow(v) else
                    v[start : start + batch_rows])
                for k, v in cols.items()
            }  # fmt: skip
        return
    table = columns_of(data, names)  # pandas / Polars / structured arrays
    _check(names, table, "the report table")
    n = len(next(iter(table.values())))
    for start in range(0, n, batch_rows):
        yield {k: v[start : start + batch_rows] for k, v in table.items()}


def _exact_column(values: Any) -> np.ndarray:
    """A column given as a Python sequence, as numpy without changing a value: bytes and
    strings stay Python objects (``np.asarray`` makes them fixed-width 'S'/'U' arrays, which
    drop trailing NUL bytes: an all-zero bit vector b'\\x00' became b'')."""
    if isinstance(values, np.ndarray):
        return values
    arr = np.asarray(values)
    if arr.dtype.kind in "SU":
        arr = np.empty(len(values), dtype=object)
        arr[:] = list(values)
    return arr


def _exact_arrow(values: Any) -> Any:
    """:func:`_exact_column` for an engine that registers Arrow: a Python sequence of bytes
    or strings as an Arrow array of the same values, None when no Arrow type holds them all
    (mixed types); anything else unchanged."""
    if _is_arrow(values) or isinstance(values, np.ndarray):
        return values
    arr = _exact_column(values)
    if arr.dtype != object:
        return values
    import pyarrow as pa

    try:
        return pa.array(list(arr))
    except (pa.ArrowInvalid, pa.ArrowTypeError):  # mixed types: no Arrow column holds them
        return None


def _is_arrow(v: Any) -> bool:
    return type(v).__module__.split(".")[0] == "pyarrow"


def _is_arrow_file(data: Any) -> bool:
    return isinstance(data, str | Path) and Path(data).suffix.lower() in _ARROW_SUFFIXES


def _is_spark(data: Any) -> bool:
    return type(data).__module__.startswith("pyspark")


def _is_table(data: Any) -> bool:
    if isinstance(data, Mapping | np.ndarray):
        return True
    return type(data).__module__.split(".")[0] in ("pandas", "polars", "pyarrow")


def iter_arrow_batches(
    data: Any,
    names: Sequence[str],
    *,
    engine: str = "numpy",
    batch_rows: int = CHUNK_ROWS,
    **engine_options: Any,
) -> Iterator[dict[str, Any]]:
    """Batches (dicts of the named columns, converted by :func:`arrow_column`) of a report input
    read by ``engine`` ("numpy" or "duckdb"; Spark DataFrames are collected to the driver)."""
    names = list(names)
    opts = dict(engine_options)
    sql = opts.pop("sql", None)
    if engine == "spark" or _is_spark(data):
        from . import spark as spark_engine

        spark = opts.pop("spark", None)
        master = opts.pop("master", None)
        opts.pop("num_partitions", None)
        if master is not None and spark is None:
            spark = spark_engine.session(master)
        df = spark_engine._to_dataframe(data, spark, sql)
        spark_engine._check_columns(df, names)
        table = spark_engine._collect_arrow(df.select(*[spark_engine._quote(c) for c in names]))
        for b in table.to_batches(max_chunksize=batch_rows):
            if b.num_rows:
                yield _batch_columns(b, names)
        return
    if engine == "duckdb" and sql is None and _is_arrow_file(data):
        # DuckDB reads no Arrow IPC file (Reports.save writes them); the file is columnar
        # already, so pyarrow streams it as on the numpy engine (same batches, same result)
        engine = "numpy"
        for key in ("threads", "text_columns"):
            opts.pop(key, None)
    if engine == "duckdb" or sql is not None:
        from .duckdb_engine import iter_arrow_batches as duck_batches

        exact = (
            {k: _exact_arrow(v) for k, v in data.items()}
            if isinstance(data, Mapping) and sql is None
            else None
        )
        if exact is None or all(v is not None for v in exact.values()):
            src = data if exact is None else exact  # Python bytes/strings: exact Arrow values
            for b in duck_batches(src, names, sql=sql, batch_rows=batch_rows, **opts):
                if b.num_rows:
                    yield _batch_columns(b, names)
            return
        # a column of mixed Python values has no Arrow type: the batch is in memory already,
        # so it is read here, value by value (the same result as the numpy engine)
        for key in ("threads", "text_columns"):
            opts.pop(key, None)
    progress = bool(opts.pop("progress", False))
    if opts:
        raise InvalidParameterError(f"the numpy engine takes no options {sorted(opts)}")
    if isinstance(data, str | Path):
        bar = None
        if progress:
            from tqdm import tqdm

            bar = tqdm(unit=" reports", unit_scale=True, desc=f"reading {Path(data).name}")
        try:
            for b in _file_batches(Path(data), names, batch_rows):
                if b.num_rows:
                    if bar is not None:
                        bar.update(b.num_rows)
                    yield _batch_columns(b, names)
        finally:
            if bar is not None:
                bar.close()
        return
    if _is_table(data):
        yield from _table_batches(data, names, batch_rows)
        return
    if isinstance(data, Iterable):
        for item in data:
            yield from iter_arrow_batches(
                item, names, engine=engine, batch_rows=batch_rows, **engine_options
            )
        return
    raise InvalidTypeError(
        f"reports must be a table (mapping of columns, Arrow, DataFrame), a Parquet/Arrow/CSV "
        f"path, an iterable of those or a Spark DataFrame; got {type(data).__name__}"
    )


# -- Spark: the partial function on the executors ------------------------------------------------
def _spark_runner(
    fn: Callable[[Mapping[str, Any]], Partial], names: list[str], batch_rows: int
) -> Callable[[Iterator[Any]], Iterator[Any]]:
    """What each executor runs on its partition: Arrow batches → :func:`arrow_column` (bit
    vectors as buffer views) → ``fn`` → one pickled partial sum per partition."""

    def run(batches: Iterator[Any]) -> Iterator[Any]:
        import pyarrow as pa
        from pyspark import TaskContext

        ctx = TaskContext.get()
        pid = ctx.partitionId() if ctx is not None else -1
        schema = _RESULT_SCHEMA_ARROW()
        acc: Partial | None = None
        rows = 0
        buf: list[Any] = []
        buffered = 0

        def flush() -> None:
            nonlocal acc, buf, buffered
            if not buf:
                return
            table = pa.Table.from_batches(buf)
            buf, buffered = [], 0
            part = fn({n: arrow_column(table.column(n)) for n in names})
            acc = part if acc is None else {k: acc[k] + part[k] for k in acc}

        try:
            for rb in batches:
                if rb.num_rows == 0:
                    continue
                rows += rb.num_rows
                buf.append(rb)
                buffered += rb.num_rows
                if buffered >= batch_rows:
                    flush()
            flush()
            payload = None if acc is None else pickle.dumps(acc, protocol=pickle.HIGHEST_PROTOCOL)
            row: dict[str, Any] = {"partition": pid, "rows": rows, "payload": payload,
                                   "error_kind": None, "error": None}  # fmt: skip
        except Exception as exc:  # noqa: BLE001 - raised on the driver as a FuguError
            msg = str(exc.args[0]) if isinstance(exc, KeyError) and exc.args else str(exc)
            row = {"partition": pid, "rows": rows, "payload": None,
                   "error_kind": type(exc).__name__, "error": msg}  # fmt: skip
        yield pa.RecordBatch.from_pylist([row], schema=schema)

    return run


def _RESULT_SCHEMA_ARROW() -> Any:  # noqa: N802 - a constant built lazily (pyarrow import)
    import pyarrow as pa

    return pa.schema(
        [
            ("partition", pa.int32()),
            ("rows", pa.int64()),
            ("payload", pa.binary()),
            ("error_kind", pa.string()),
            ("error", pa.string()),
        ]
    )


def _spark_sums(
    data: Any, fn: Callable[[Mapping[str, Any]], Partial], names: list[str], opts: dict[str, Any]
) -> Partial | None:
    from . import spark as spark_engine

    opts = dict(opts)
    spark = opts.pop("spark", None)
    master = opts.pop("master", None)
    sql = opts.pop("sql", None)
    num_partitions = opts.pop("num_partitions", None)
    batch_rows = int(opts.pop("batch_rows", CHUNK_ROWS))
    if opts:
        raise InvalidParameterError(f"the spark engine takes no options {sorted(opts)}")
    if master is not None and spark is None:
        spark = spark_engine.session(master)
    df = spark_engine._to_dataframe(data, spark, sql)
    spark_engine._check_columns(df, names)
    df = df.select(*[spark_engine._quote(c) for c in names])
    if num_partitions:
        df = df.repartition(int(num_partitions))
    # One partial per task, not per partition: thousands of small partitions would each send a
    # support-sized payload to the driver at once (issue 16.5). The runner reads only ``names``.
    df, _ = spark_engine.coalesce_to_tasks(df)
    results = df.mapInArrow(
        _spark_runner(fn, names, batch_rows), spark_engine._RESULT_SCHEMA
    ).collect()
    failed = [r for r in results if r["error_kind"] is not None]
    if failed:
        spark_engine._raise_partition_error(failed)
    total: Partial | None = None
    for r in sorted(results, key=lambda r: r["partition"]):
        if r["payload"] is not None:
            part = pickle.loads(bytes(r["payload"]))
            total = part if total is None else {k: total[k] + part[k] for k in total}
    return total


# -- the interface ------------------------------------------------------------------------------
def aggregate_partials(
    data: Any,
    partial: Callable[[Mapping[str, Any]], Partial],
    *,
    columns: Sequence[str],
    engine: str = "numpy",
    merge: Callable[[Partial, Partial], Partial] | None = None,
    **engine_options: Any,
) -> Partial:
    """``partial`` over every batch of ``data`` read by ``engine``, combined.

    Parameters
    ----------
    data : report columns (a mapping, an Arrow table), a Parquet / Arrow / CSV path, an iterable
        of those, or a Spark DataFrame.
    partial : callable
        ``partial(batch) -> dict[str, ndarray]``, pure; ``batch`` maps each of ``columns`` to a
        numpy array (see :func:`arrow_column`). Must be picklable for Spark.
    columns : the columns ``partial`` reads.
    engine : ``"numpy"`` (default), ``"duckdb"`` or ``"spark"``.
    merge : how two partial results combine; ``None`` (default) adds them element-wise, which
        lets Spark run ``partial`` on the executors. With ``merge`` given, batches are read by
        the engine and combined on the driver (Spark collects the columns).
    engine_options : ``batch_rows``, ``sql``, ``threads``, ``progress`` (numpy/DuckDB);
        ``spark``, ``master``, ``num_partitions`` (Spark).

    Raises
    ------
    EmptyDataError
        when the input has no rows.
    """
    from . import check_engine

    check_engine(engine)
    names = list(columns)
    if not names:
        raise InvalidParameterError("columns must name at least one column the function reads")
    opts = dict(engine_options)
    if merge is None and (engine == "spark" or _is_spark(data)):
        total = _spark_sums(data, partial, names, opts)
    else:
        batch_rows = int(opts.pop("batch_rows", CHUNK_ROWS))
        total = None
        for batch in iter_arrow_batches(data, names, engine=engine, batch_rows=batch_rows, **opts):
            part = {k: np.asarray(v) for k, v in partial(batch).items()}
            if total is None:
                total = part
            elif merge is None:
                total = {k: total[k] + part[k] for k in total}
            else:
                total = merge(total, part)
    if total is None:
        raise EmptyDataError("the input has no reports; there is nothing to aggregate")
    return total


def read_header(data: Any, key: str = "fugu.ldp") -> dict[str, Any] | None:
    """The JSON header stored under ``key`` in the schema metadata of an Arrow table or a
    Parquet / Arrow file (read without the rows); None when the input carries none (a Spark
    DataFrame, CSV, a mapping of columns)."""
    meta: Any = None
    mod = type(data).__module__.split(".")[0]
    bkey = key.encode()
    if mod == "pyarrow" and hasattr(data, "schema"):
        meta = data.schema.metadata
    elif isinstance(data, str | Path):
        p = Path(data)
        suffix = p.suffix.lower()
        try:
            if suffix in (".parquet", ".pq"):
                import pyarrow.parquet as pq

                meta = pq.read_schema(p).metadata
            elif suffix in (".arrow", ".feather", ".ipc"):
                import pyarrow as pa

                with pa.memory_map(str(p)) as src:
                    meta = pa.ipc.open_file(src).schema.metadata
        except (OSError, ValueError) as exc:
            raise ReportError(f"report file {str(p)!r} cannot be read ({exc})") from None
    if not meta or bkey not in meta:
        return None
    try:
        header = json.loads(meta[bkey])
    except json.JSONDecodeError:
        raise ReportError(f"the {key} header in the schema metadata is not valid JSON") from None
    return dict(header) if isinstance(header, Mapping) else None


def aggregate_reports(
    protocol: Any, data: Any, *, engine: str = "numpy", **engine_options: Any
) -> tuple[dict[str, np.ndarray], int, Any]:
    """``(state, n_accepted, rejected)`` of the reports in ``data`` for ``protocol`` (kept for
    callers of the earlier interface): the protocol runs its own partial function through
    :func:`aggregate_partials` (``protocol.run_partials``); this module imports no protocol."""
    result: tuple[dict[str, np.ndarray], int, Any] = protocol.run_partials(
        data, engine, engine_options
    )
    return result
