"""The Spark engine (``pip install fugu[spark]``): counting runs inside the cluster.

Two ways to count, both without a Python function called per row:

``method="arrow"`` — per-partition partials through ``mapInArrow``
    Each executor receives its partition as Arrow record batches, runs the vectorised partial
    function (``np.bincount`` of flat keys, LDP support counts, k-means sums) once per batch of up
    to ``batch_rows`` rows, and sends back **one** small payload per partition: the summed partial
    arrays (a few kB to a few MB, whatever the data size). The driver adds the payloads. This is
    the path of :func:`partial_sums` and :func:`partial_counts` (any key function).
``method="jvm"`` — histograms only: the JVM's own ``groupBy``
    The cell coordinates are computed as Spark SQL column expressions (binned attributes by their
    bin, see :mod:`fugu.engines.grouped`), grouped and counted in the JVM; only the distinct
    combinations (at most one per cell) and their counts come back to the driver, where
    :meth:`fugu.Domain.encode_columns` encodes them exactly as the numpy engine does.

What leaves the executors is only the partial counts or sums (arrays sized by the domain or by the
number of clusters, not by the data), and — when the input is bad — an error message that quotes
a few offending values. No noise is added on executors: noise is drawn on the driver from the
driver's secure random source, after the sums arrive.

Errors found on an executor (a missing column, a wrong type, a value outside the domain) come back
as the matching :class:`~fugu.FuguError` whose message names the Spark partition and the column.

Workers run ``sys.executable`` of the driver (``PYSPARK_PYTHON`` is set to it unless already set):
on a cluster, fugu, numpy and pyarrow must be installed in the same Python on every executor.

>>> import fugu  # doctest: +SKIP
>>> spark = fugu.engines.spark.session("local[2]")  # doctest: +SKIP
>>> df = spark.read.parquet("people.parquet")  # doctest: +SKIP
>>> hist = fugu.Histogram.from_records(df, dom)  # doctest: +SKIP
"""

from __future__ import annotations

import os
import pickle
import sys
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

import numpy as np
from numpy.typing import NDArray

from .. import errors as _errors
from ..errors import (
    DomainError,
    FileFormatError,
    FuguError,
    InvalidParameterError,
    InvalidTypeError,
)
from .numpy_engine import CHUNK_ROWS, check_unique_columns, columns_of
from .partial_core import (
    DomainKey,
    Partial,
    _as_partial,
    _CountPartial,
    add_partials,
    check_data_or_sql,
    empty_batch,
    nominal_names,
    warn_no_rows,
)

__all__ = [
    "METHODS",
    "histogram",
    "histogram_from_file",
    "partial_counts",
    "partial_sums",
    "read",
    "session",
    "to_dataframe",
]

#: Histogram methods; "auto" picks DEFAULT_METHOD, chosen by bench/bench_engines.py: on 10^7
#: rows from Parquet (local[2], shared 2-core machine) mapInArrow took 11.3 s warm / 34.6 s
#: first run, the JVM groupBy 11.6 s / 41.2 s (at load 9-12: 14.1 s vs 19.8 s warm). An earlier
#: quiet measurement on the same hardware (specs/ecosystem.md) found the JVM faster (1.6 s vs
#: 2.7 s); pass method= to pick on your cluster.
METHODS = ("auto", "jvm", "arrow")
DEFAULT_METHOD = "arrow"

_RESULT_SCHEMA = "partition int, rows long, payload binary, error_kind string, error string"


def _pyspark() -> Any:
    try:
        import pyspark  # noqa: F401
        from pyspark.sql import SparkSession
    except ImportError:  # pragma: no cover - pyspark is in the test extra
        raise InvalidParameterError(
            "the spark engine needs pyspark: pip install 'fugu[spark]' (and Java 17+)"
        ) from None
    return SparkSession


def session(
    master: str | None = None, *, app_name: str = "fugu", config: dict[str, str] | None = None
) -> Any:
    """The active Spark session, or a new one on ``master`` (e.g. ``"local[2]"``, ``"spark://h:7077"``).

    Sets ``PYSPARK_PYTHON`` to this interpreter (unless set) so executors run the same Python.
    """
    SparkSession = _pyspark()
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    active = SparkSession.getActiveSession()
    if active is not None and master is None:
        return active
    builder = SparkSession.builder.appName(app_name)
    if master:
        builder = builder.master(master)
    for k, v in (config or {}).items():
        builder = builder.config(k, v)
    return builder.getOrCreate()


def _quote(name: str) -> str:
    return "`" + name.replace("`", "``") + "`"


def _is_dataframe(data: Any) -> bool:
    return type(data).__module__.startswith("pyspark") and hasattr(data, "mapInArrow")


def _scan_lines(spark: Any, path: str) -> bool:
    """Refuse a CSV with an empty line, and say whether a quoted value spans lines.

    Spark's CSV reader skips empty lines, but in a one-column CSV an empty line is a record whose
    value is missing: refuse the file, as the numpy and DuckDB engines do.

    Without ``multiLine`` Spark also splits records at every line break, even inside a quoted
    value (RFC 4180 allows one): the record ``"a<LF>b"`` became the records ``a`` and ``b"``,
    one record counted twice, in two cells (the other engines read one). A line with an odd
    number of quotes is where such a value starts or ends; then the file is read with
    ``multiLine`` (one task per file, so only then).

    Spark's CSV reader decodes bytes that are not UTF-8 as U+FFFD, so 'café' and 'cafè' written
    in Latin-1 were both counted as 'caf\ufffd' (the other engines refuse such a file): a line
    that is not UTF-8 is refused. One extra scan of the text finds all three.
    """
    from pyspark.sql import functions as F

    value = F.col("value")
    quotes = F.length(value) - F.length(F.regexp_replace(value, '"', ""))
    row = (
        spark.read.text(path)
        .agg(
            F.max((F.trim(value) == "").cast("int")).alias("empty"),
            F.max((quotes % 2 == 1).cast("int")).alias("odd"),
            F.max(_not_utf8(value).cast("int")).alias("replaced"),
        )
        .collect()[0]
    )
    if row["empty"]:
        raise FileFormatError(
            f"cannot read {path!r} as CSV: it has an empty line, which is a record with missing "
            "values (fugu never skips records): remove it or fill in the values"
        )
    if row["replaced"]:
        raise FileFormatError(
            f"cannot read {path!r} as CSV: it is not UTF-8 text (Spark reads bytes that are not "
            "UTF-8 as U+FFFD, so different values become one); convert the file to UTF-8"
        )
    return bool(row["odd"])


def _not_utf8(value: Any) -> Any:
    """A Spark column: whether a line of text is not valid UTF-8 (Spark 4's is_valid_utf8;
    before it, whether the line holds U+FFFD, which the CSV reader would make of such bytes)."""
    from pyspark.sql import functions as F

    if hasattr(F, "is_valid_utf8"):
        return ~F.is_valid_utf8(value)
    return F.instr(value, "\ufffd") > 0  # pragma: no cover - pyspark < 4


def _refuse_malformed_rows(df: Any, path: str) -> None:
    """Refuse a CSV with a line of more or fewer fields than the header, as the numpy engine
    does. Spark's CSV reader pads a short line with nulls and drops the extra fields of a long
    one, and with column pruning (on by default) it checks a line only against the columns a
    query reads: a histogram over some columns counted such lines silently. One pass that reads
    every column in ``FAILFAST`` mode finds them (10^6 rows of three columns, local[2] on a
    shared 2-core machine: 2.6-3.1 s of the 10.4-11.1 s ``Histogram.from_file`` takes)."""
    from pyspark.sql import functions as F

    cols = [F.col(_quote(c)) for c in df.columns]
    try:
        df.select(F.max(F.hash(*cols))).collect()
    except Exception as exc:  # noqa: BLE001 - Py4J / Spark errors have no common public type
        text = str(exc)
        if "MALFORMED" not in text.upper() and "FAILFAST" not in text.upper():
            raise
        raise FileFormatError(
            f"cannot read {path!r} as CSV: a line has more or fewer fields than the header "
            "(fugu never drops or fills in fields): fix the line, or quote values that contain "
            "the separator"
        ) from None


def read(
    path: str | Path,
    spark: Any = None,
    *,
    format: str | None = None,
    text_columns: Sequence[str] = (),
) -> Any:
    """A Spark DataFrame of a Parquet or CSV file / directory (CSV: header row, inferred types).

    ``text_columns``: CSV columns read as text whatever their values look like (a nominal
    attribute's labels: inferred, ``007`` and ``7`` would both be the number 7).
    """
    spark = spark or session()
    p = str(path)
    fmt = format
    if fmt is None:
        low = p.lower().rstrip("/")
        if ".parquet" in low or low.endswith(".pq"):
            fmt = "parquet"
        elif ".csv" in low or low.endswith(".tsv") or low.endswith(".txt"):
            fmt = "csv"
        else:
            raise InvalidParameterError(
                f"cannot tell the format of {p!r}: name it *.csv or *.parquet, or pass format="
            )
    if "://" not in p and not Path(p).exists():
        raise InvalidParameterError(f"data file {p!r} does not exist")
    if fmt == "parquet":
        return spark.read.parquet(p)
    if fmt == "csv":
        options = _csv_options(p, multiline=_scan_lines(spark, p))
        df = spark.read.csv(p, header=True, inferSchema=True, **options)
        _refuse_malformed_rows(df, p)
        return _as_text(spark, df, p, text_columns, options)
    raise InvalidParameterError(f"format must be 'parquet' or 'csv', got {fmt!r}")


def _csv_options(path: str, multiline: bool = False) -> dict[str, str]:
    """Spark's CSV options for the dialect every engine reads (RFC 4180: a quote inside a
    quoted field is doubled, where Spark's default escape is a backslash and kept ``"a""b"``
    as written; tabs for ``*.tsv``; ``multiline``: quoted values may span lines)."""
    from .file_numpy import is_tsv

    options = {"mode": "FAILFAST", "escape": '"', "sep": "\t" if is_tsv(path) else ","}
    if multiline:
        options["multiLine"] = "true"
    return options


def _as_text(
    spark: Any, df: Any, path: str, text_columns: Sequence[str], options: dict[str, str]
) -> Any:
    """``df`` (a CSV read with inferred types) read again with ``text_columns`` as strings."""
    from pyspark.sql import types as T

    text = set(text_columns)
    fields = df.schema.fields
    if not any(f.name in text and not isinstance(f.dataType, T.StringType) for f in fields):
        return df
    schema = T.StructType(
        [
            T.StructField(f.name, T.StringType() if f.name in text else f.dataType, True)
            for f in fields
        ]
    )
    return spark.read.csv(path, header=True, schema=schema, **options)


def _to_dataframe(data: Any, spark: Any, sql: str | None, text_columns: Sequence[str] = ()) -> Any:
    check_data_or_sql(data, sql)
    if sql is not None:
        return (spark or session()).sql(sql)
    if _is_dataframe(data):
        return data
    if isinstance(data, str | Path):
        return read(data, spark, text_columns=text_columns)

    return to_dataframe(data, spark)


def to_dataframe(data: Any, spark: Any = None, num_partitions: int | None = None) -> Any:
    """A Spark DataFrame of an in-memory table (mapping of columns, pandas / Polars, Arrow).

    Unsigned integer columns (Spark has none) become int64; uint64 values must fit in int64.
    The rows are held by the driver (Spark copies an in-memory table into its JVM); without
    ``num_partitions`` they are split into ``spark.default.parallelism`` partitions.
    """
    import pyarrow as pa
    import pyarrow.compute as pc

    from .duckdb_engine import _as_arrow

    table = _as_arrow(data)
    mod = type(table).__module__.split(".")[0]
    if mod == "polars":
        table = table.to_arrow()
    elif mod == "pandas":
        table = pa.Table.from_pandas(table, preserve_index=False)
    elif isinstance(table, pa.RecordBatch):
        table = pa.Table.from_batches([table])
    for i, field in enumerate(table.schema):
        if pa.types.is_unsigned_integer(field.type):
            col = table.column(i)
            if pa.types.is_uint64(field.type) and len(col) and pc.max(col).as_py() >= 2**63:
                raise InvalidTypeError(
                    f"column {field.name!r} holds uint64 values >= 2**63, which Spark cannot store"
                )
            table = table.set_column(i, field.name, pc.cast(col, pa.int64()))
        elif pa.types.is_fixed_size_binary(field.type):
            table = table.set_column(i, field.name, pc.cast(table.column(i), pa.binary()))
    spark = spark or session()
    df = spark.createDataFrame(table)
    if num_partitions:
        return df.repartition(int(num_partitions))
    # createDataFrame makes one partition per 10,000-row Arrow batch (1,000 for 10^7 rows): one
    # task per core is enough, and far cheaper to cache and to schedule.
    return df.coalesce(max(1, int(spark.sparkContext.defaultParallelism)))


def _check_columns(df: Any, columns: Sequence[str]) -> None:
    have = list(df.columns)
    missing = [c for c in columns if c not in have]
    if missing:
        raise DomainError(
            f"the Spark DataFrame lacks the column(s) {missing}; it has {have[:20]}. Rename the "
            f"columns or change the domain / key"
        )
    # Spark resolves column names ignoring case by default (spark.sql.caseSensitive=false)
    check_unique_columns(columns, have, where="the Spark DataFrame", fold_case=True)


# -- per-partition partials (mapInArrow) ----------------------------------------------------------
#: Column carrying each row's original Spark partition id when partitions are coalesced.
_PART_COLUMN = "__fugu_partition"


def _partition_runner(
    fn: Callable[[Any], Any], columns: list[str], batch_rows: int, part_column: str | None = None
) -> Callable[[Iterator[Any]], Iterator[Any]]:
    """The function each executor runs on its partition (an iterator of Arrow record batches).

    With ``part_column`` the task holds several coalesced partitions whose original ids are in
    that column: batches are split where the id changes, so an error names the partition it
    came from (and no batch given to ``fn`` mixes partitions).
    """

    def run(batches: Iterator[Any]) -> Iterator[Any]:
        import pyarrow as pa
        from pyspark import TaskContext

        ctx = TaskContext.get()
        pid = ctx.partitionId() if ctx is not None else -1
        schema = pa.schema(
            [
                ("partition", pa.int32()),
                ("rows", pa.int64()),
                ("payload", pa.binary()),
                ("error_kind", pa.string()),
                ("error", pa.string()),
            ]
        )
        acc: Partial | None = None
        rows = 0
        buf: list[Any] = []
        buffered = 0
        current = pid

        def flush() -> None:
            nonlocal acc, buf, buffered
            if not buf:
                return
            table = pa.Table.from_batches(buf)
            buf, buffered = [], 0
            acc = add_partials(acc, _as_partial(fn(dict(columns_of(table, columns)))))

        try:
            for rb in batches:
                if rb.num_rows == 0:
                    continue
                rows += rb.num_rows
                if part_column is None:
                    pieces = [(current, rb)]
                else:
                    p = np.asarray(rb.column(part_column).to_numpy(zero_copy_only=False))
                    cuts = [0, *(np.flatnonzero(p[1:] != p[:-1]) + 1).tolist(), p.size]
                    spans = zip(cuts[:-1], cuts[1:], strict=True)
                    pieces = [(int(p[a]), rb.slice(a, b - a)) for a, b in spans]
                for piece_pid, piece in pieces:
                    if piece_pid != current:
                        flush()
                        current = piece_pid
                    buf.append(piece)
                    buffered += piece.num_rows
                    if buffered >= batch_rows:
                        flush()
            flush()
            payload = None if acc is None else pickle.dumps(acc, protocol=pickle.HIGHEST_PROTOCOL)
            row: dict[str, Any] = {
                "partition": pid,
                "rows": rows,
                "payload": payload,
                "error_kind": None,
                "error": None,
            }
        except Exception as exc:  # noqa: BLE001 - sent to the driver and raised there as a FuguError
            kind = type(exc).__name__
            msg = str(exc.args[0]) if isinstance(exc, KeyError) and exc.args else str(exc)
            row = {
                "partition": current,
                "rows": rows,
                "payload": None,
                "error_kind": kind,
                "error": msg,
            }
        yield pa.RecordBatch.from_pylist([row], schema=schema)

    return run


def _raise_partition_error(failed: list[Any]) -> None:
    failed = sorted(failed, key=lambda r: r["partition"])
    first = failed[0]
    where = f"on Spark partition {first['partition']}"
    if len(failed) > 1:
        where += (
            f" (and {len(failed) - 1} other partition(s): {[r['partition'] for r in failed[1:6]]})"
        )
    kind, msg = first["error_kind"], first["error"]
    cls = getattr(_errors, kind, None)
    if isinstance(cls, type) and issubclass(cls, FuguError):
        raise cls(f"{where}: {msg}")
    if kind == "KeyError":
        raise DomainError(
            f"{where}: the partition lacks the column {msg}; check the DataFrame's schema"
        )
    if kind in ("TypeError", "ArrowInvalid", "ArrowTypeError", "ArrowNotImplementedError"):
        raise InvalidTypeError(f"{where}: {kind}: {msg}")
    if kind == "ValueError":
        raise DomainError(f"{where}: {msg}")
    raise InvalidParameterError(f"{where}: {kind}: {msg}")


def coalesce_to_tasks(df: Any) -> tuple[Any, str | None]:
    """``df`` coalesced to ``spark.default.parallelism`` partitions, and the name of the column
    holding each row's original partition id (None when nothing was coalesced).

    So one partial per *task* reaches the driver, never one per partition: a DataFrame with
    thousands of partitions (``createDataFrame`` makes one per 10,000 rows) would otherwise
    collect thousands of domain-sized payloads at once into the driver's heap (issue 16.5:
    10^7 cached rows, 64^3 cells, 1,000 partitions x 2 MiB exhausted a 4 GiB heap). The id is
    taken before coalescing, so errors can still name the partition a bad row was in.
    """
    width = max(1, int(df.sparkSession.sparkContext.defaultParallelism))
    if df.rdd.getNumPartitions() <= width:
        return df, None
    from pyspark.sql import functions as F

    # a name no column has (ignoring case, as Spark does): withColumn replaces a column of that
    # name, whose values were then counted as partition ids
    taken = {c.lower() for c in df.columns}
    name = _PART_COLUMN
    while name.lower() in taken:
        name = "_" + name
    return df.withColumn(name, F.spark_partition_id()).coalesce(width), name


def partial_sums(
    data: Any,
    partial: Callable[[Any], Any],
    *,
    columns: Sequence[str],
    sql: str | None = None,
    spark: Any = None,
    master: str | None = None,
    num_partitions: int | None = None,
    batch_rows: int = CHUNK_ROWS,
    text_columns: Sequence[str] = (),
) -> Partial:
    """:func:`fugu.engines.partial_sums` on Spark: ``mapInArrow`` per partition, summed."""
    if master is not None and spark is None:
        spark = session(master)
    df = _to_dataframe(data, spark, sql, text_columns)
    cols = list(columns)
    _check_columns(df, cols)
    df = df.select(*[_quote(c) for c in cols])
    if num_partitions:
        df = df.repartition(int(num_partitions))
    df, part_column = coalesce_to_tasks(df)
    results = df.mapInArrow(
        _partition_runner(partial, cols, int(batch_rows), part_column), _RESULT_SCHEMA
    ).collect()
    failed = [r for r in results if r["error_kind"] is not None]
    if failed:
        _raise_partition_error(failed)
    total: Partial | None = None
    for r in sorted(results, key=lambda r: r["partition"]):
        if r["payload"] is not None:
            total = add_partials(total, pickle.loads(bytes(r["payload"])))
    if total is None:  # zero rows: zero sums, not a refusal (see warn_no_rows)
        warn_no_rows("the Spark DataFrame")
        total = _as_partial(partial(empty_batch(cols)))
    return total


def partial_counts(
    data: Any,
    key: Callable[[Any], NDArray[np.int64]],
    size: int,
    *,
    columns: Sequence[str],
    weights: tuple[str, ...] | None = None,
    single: bool = False,
    **options: Any,
) -> np.ndarray:
    """:func:`fugu.engines.partial_counts` on Spark (``mapInArrow`` + ``np.bincount``)."""
    fn = _CountPartial(key, int(size), weights, single=single)
    return np.asarray(partial_sums(data, fn, columns=columns, **options))


# -- histograms ------------------------------------------------------------------------------------
def _check_types(df: Any, domain: Any) -> bool:
    """Refuse a column whose type cannot hold the attribute's values. True when the input has
    no rows and a column is typed as text only because of that (a header-only CSV, where every
    column is a string): its counts are zero, not a type error."""
    from pyspark.sql import types as T

    fields = {f.name: f.dataType for f in df.schema.fields}
    for a in domain.attributes:
        t = fields[a.name]
        if a.kind == "ordinal":
            if not isinstance(t, T.NumericType):
                if not df.limit(1).count():  # a header-only CSV: every column is a string
                    return True
                raise InvalidTypeError(
                    f"column {a.name!r} has Spark type {t.simpleString()}, but attribute "
                    f"{a.name!r} "
                    f"is ordinal and needs numbers; cast it (df.withColumn({a.name!r}, "
                    f"col({a.name!r}).cast('double'))) or declare it Nominal"
                )
        elif not isinstance(t, T.StringType | T.NumericType | T.BooleanType):
            raise InvalidTypeError(
                f"column {a.name!r} has Spark type {t.simpleString()}; a nominal attribute needs "
                f"strings, numbers or booleans"
            )
    return False


def _bad_sql(attr: Any) -> str:
    """A Spark SQL predicate true for rows whose ``attr`` value is outside the domain."""
    c = _quote(attr.name)
    if attr.kind == "nominal":
        vals = ", ".join(
            "'" + v.replace("\\", "\\\\").replace("'", "\\'") + "'" for v in attr.values
        )
        return f"({c} IS NULL OR NOT (CAST({c} AS STRING) IN ({vals})))"
    if attr.edges is not None:
        lo, hi = float(attr.edges[0]), float(attr.edges[-1])
        return f"({c} IS NULL OR NOT ({c} >= {lo!r} AND {c} <= {hi!r}))"
    return f"({c} IS NULL OR NOT ({c} >= {attr.low} AND {c} <= {attr.high} AND {c} = FLOOR({c})))"


def _locator(df: Any, domain: Any) -> Callable[[str], str]:
    def locate(column: str) -> str:
        from pyspark.sql import functions as F

        bad = _bad_sql(domain.attribute(column))
        # The partition id is taken before the filter (a non-deterministic column stops the
        # filter from being pushed below the DataFrame's own repartitioning).
        tagged = df.select(F.spark_partition_id().alias("__fugu_p"), _quote(column))
        rows = (
            tagged.where(F.expr(bad))
            .select("__fugu_p")
            .distinct()
            .orderBy("__fugu_p")
            .limit(6)
            .collect()
        )
        parts = [int(r["__fugu_p"]) for r in rows]
        if not parts:
            return "on Spark"
        return (
            "on Spark partition"
            + ("s " if len(parts) > 1 else " ")
            + ", ".join(map(str, parts[:5]))
            + (" and more" if len(parts) > 5 else "")
        )

    return locate


def _collect_arrow(df: Any) -> Any:
    to_arrow = getattr(df, "toArrow", None)
    if to_arrow is not None:
        return to_arrow()
    import pyarrow as pa  # pragma: no cover - pyspark < 4

    return pa.Table.from_pandas(df.toPandas())  # pragma: no cover


def _jvm_histogram(df: Any, domain: Any, out_of_domain: str) -> NDArray[np.int64]:
    from pyspark.sql import functions as F

    from .grouped import canonical_sql, encode_grouped

    keys = [f"__fugu_{j}" for j in range(domain.ndim)]
    sel = [
        F.expr(canonical_sql(a, _quote)).alias(k)
        for a, k in zip(domain.attributes, keys, strict=True)
    ]
    grouped = df.select(*sel).groupBy(*keys).agg(F.count(F.lit(1)).alias("__fugu_n"))
    table = _collect_arrow(grouped)
    if table.num_rows == 0:  # zero counts, not a refusal (see warn_no_rows)
        warn_no_rows("the Spark DataFrame")
        return np.zeros(domain.size, dtype=np.int64)
    values: dict[str, Any] = {}
    for a, k in zip(domain.attributes, keys, strict=True):
        col = table.column(k)
        values[a.name] = (
            np.asarray(col.to_pylist(), dtype=object)
            if col.null_count
            else np.asarray(col.to_numpy(zero_copy_only=False))
        )
    counts = np.asarray(table.column("__fugu_n").to_numpy(), dtype=np.int64)
    return encode_grouped(domain, values, counts, out_of_domain, locate=_locator(df, domain))


def histogram(
    data: Any,
    domain: Any,
    *,
    out_of_domain: str = "error",
    method: str = "auto",
    spark: Any = None,
    master: str | None = None,
    sql: str | None = None,
    num_partitions: int | None = None,
    batch_rows: int = CHUNK_ROWS,
    progress: bool = False,
) -> NDArray[np.int64]:
    """Flat histogram counts of a Spark DataFrame (or a table :func:`to_dataframe` takes).

    ``method``: ``"jvm"`` (group-by inside the JVM), ``"arrow"`` (``mapInArrow`` + bincount per
    partition) or ``"auto"`` (:data:`DEFAULT_METHOD`, the faster in ``bench/bench_engines.py``).
    Both give identical counts. ``progress`` is accepted for symmetry with the other engines;
    Spark shows its own console progress bar (``spark.ui.showConsoleProgress``).
    """
    if method not in METHODS:
        raise InvalidParameterError(f"method must be one of {METHODS}, got {method!r}")
    domain.check_dense("a histogram")
    if master is not None and spark is None:
        spark = session(master)
    df = _to_dataframe(data, spark, sql, nominal_names(domain))
    names = list(domain.names)
    _check_columns(df, names)
    if _check_types(df, domain):  # no rows (a header-only CSV): zero counts, not a refusal
        warn_no_rows("the Spark DataFrame")
        return np.zeros(domain.size, dtype=np.int64)
    if num_partitions:
        df = df.repartition(int(num_partitions))
    m = DEFAULT_METHOD if method == "auto" else method
    if m == "jvm":
        return _jvm_histogram(df, domain, out_of_domain)
    counts = partial_counts(
        df, DomainKey(domain, out_of_domain), domain.size, columns=names, batch_rows=batch_rows
    )
    return np.asarray(counts, dtype=np.int64)


def histogram_from_file(
    path: str | Path | None,
    domain: Any,
    *,
    out_of_domain: str = "error",
    sql: str | None = None,
    format: str | None = None,
    spark: Any = None,
    master: str | None = None,
    **options: Any,
) -> NDArray[np.int64]:
    """Flat histogram counts of a Parquet / CSV file read by Spark (or a Spark SQL query)."""
    if master is not None and spark is None:
        spark = session(master)
    if sql is None:
        if path is None:
            raise InvalidParameterError("give a file path or sql=... (a Spark SQL query)")
        if out_of_domain == "drop" and "://" not in str(path) and Path(path).is_file():
            from .file_numpy import _is_csv, refuse_open_quote

            if format == "csv" or (format is None and _is_csv(path)):
                refuse_open_quote(path)  # dropped, the rest of the file would go unnoticed
        data: Any = read(path, spark, format=format, text_columns=nominal_names(domain))
    else:
        data = (spark or session()).sql(sql)
    return histogram(data, domain, out_of_domain=out_of_domain, spark=spark, **options)
