"""The DuckDB engine: CSV / Parquet / SQL / in-memory input, counted out of core.

Histograms: DuckDB groups the rows by the domain's columns (``GROUP BY ALL`` — in C++, spilling
to disk when needed; binned attributes grouped by their bin, see :mod:`fugu.engines.grouped`);
fugu then encodes the distinct value combinations with the domain and adds their counts.
Out-of-domain values are found on the distinct values and reported with the number of rows
affected.

Other partial sums (:func:`fugu.engines.partial_sums`): DuckDB reads the input (projection and
the query's filter pushed down into the Parquet / CSV scan) and streams Arrow batches of
``batch_rows`` rows to the partial function, so memory stays bounded by one batch.

A ``WHERE`` in ``sql=`` is a *public* filter: which rows are counted must not itself be secret; it
is recorded in the release.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
from numpy.typing import NDArray

from ..errors import (
    DomainError,
    FileFormatError,
    InvalidParameterError,
    InvalidTypeError,
)
from .file_numpy import is_tsv
from .numpy_engine import (
    CHUNK_ROWS,
    check_mapping_lengths,
    check_unique_columns,
    columns_of,
    one_per_record,
)
from .partial_core import check_data_or_sql, nominal_names, warn_no_rows

#: DuckDB's integer types (as DESCRIBE names them), which a CSV value like ``2.5`` is rounded to.
_INTEGER_TYPES = frozenset(
    ["TINYINT", "SMALLINT", "INTEGER", "BIGINT", "HUGEINT"]
    + ["UTINYINT", "USMALLINT", "UINTEGER", "UBIGINT", "UHUGEINT"]
)

#: How DuckDB renames the second and later columns of one name (``age`` → ``age_1``).
_RENAMED = re.compile(r"_[0-9]+$")


def _quote(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def _lit(text: str) -> str:
    """A SQL string literal."""
    return "'" + str(text).replace("'", "''") + "'"


_DIALECT_WORDS = "RFC 4180: ',' separated (tabs for .tsv), '\"' quotes doubled inside"


def _first_line(text: str, limit: int = 200) -> str:
    first = text.strip().split("\n", 1)[0]
    return first if len(first) <= limit else first[: limit - 3] + "..."


def csv_dialect(path: str | Path) -> str:
    """The read_csv options of the one CSV dialect every engine reads: RFC 4180 (',' or, for
    ``*.tsv``, a tab; fields quoted with '"', a quote inside doubled), no comment character,
    no lines skipped. DuckDB's sniffer would guess them per file: it took ' for the quote
    character ('a' counted as a), chose no quote at all when one line had a backslash ("a""b"
    kept its quotes), read ';' files the numpy engine refuses, and skipped lines above a line
    it took for the header (in a ragged file, the records above it)."""
    delim = "\t" if is_tsv(path) else ","
    return f"delim='{delim}', quote='\"', escape='\"', comment='', skip=0"


def source_sql(
    path: str | Path | None,
    sql: str | None,
    text_columns: Sequence[str] = (),
    double_columns: Sequence[str] = (),
) -> str:
    """The FROM clause for a file (CSV or Parquet, by extension) or a user's SQL query.

    CSV files are read with no comment character (``comment=''``): DuckDB's sniffer would
    otherwise pick one, e.g. ``#`` when a numeric column holds Excel's ``#N/A``, and skip that
    line — a record dropped silently. Without it the line is a record, and a value like ``#N/A``
    is refused as every engine refuses a non-numeric value. Nor does the sniffer choose lines to
    skip (``skip=0``): in a ragged file it took a later line for the header and dropped the
    records above it; every line after the first is a record, as on the other engines.

    ``text_columns`` (columns of a CSV, which must exist in it) are read as text: a nominal
    attribute's values are labels, and the sniffer would read ``007`` and ``-0`` as the numbers
    7 and 0, ``TRUE`` as a boolean and ``2020-1-2`` as a date.

    ``double_columns`` are read as DOUBLE (columns the sniffer typed as integers from its
    sample but that hold fractions further down: see :meth:`_Connection.check`).
    """
    if sql is not None:
        return f"({sql})"
    if path is None:
        raise InvalidParameterError("give a file path or sql=...")
    p = Path(path)
    if not p.exists():
        raise InvalidParameterError(f"data file {str(p)!r} does not exist")
    lit = "'" + str(p).replace("'", "''") + "'"
    suffixes = "".join(p.suffixes).lower()
    if ".parquet" in suffixes or ".pq" in suffixes:
        return f"read_parquet({lit})"
    if ".csv" in suffixes or ".tsv" in suffixes or ".txt" in suffixes:
        types = ""
        typed = [(c, "VARCHAR") for c in text_columns] + [(c, "DOUBLE") for c in double_columns]
        if typed:
            types = ", types={" + ", ".join(f"{_lit(c)}: '{t}'" for c, t in typed) + "}"
        return f"read_csv({lit}, header=true, {csv_dialect(p)}{types})"
    raise InvalidParameterError(
        f"cannot tell the format of {str(p)!r}: name it *.csv, *.csv.gz or *.parquet"
    )


class _Connection:
    """A DuckDB connection with the input registered; closes itself."""

    def __init__(
        self,
        data: Any,
        sql: str | None,
        threads: int | None,
        progress: bool,
        memory_limit: str | None = None,
        text_columns: Sequence[str] = (),
    ) -> None:
        import duckdb

        check_data_or_sql(data, sql)
        self.con = duckdb.connect()
        if threads:
            self.con.execute(f"SET threads={int(threads)}")
        limit = memory_limit or _rlimit_budget()
        if limit:
            self.con.execute(f"SET memory_limit='{limit}'")
        self.con.execute("SET preserve_insertion_order=false")
        self.con.execute(f"SET enable_progress_bar={'true' if progress else 'false'}")
        self.data, self.sql = data, sql
        self.text_columns = list(text_columns)
        self.table_names: list[str] | None = None
        if sql is not None or data is None or isinstance(data, str | Path):
            self.src = source_sql(data, sql)
        else:
            table = _as_arrow(data)
            if type(table).__module__.split(".")[0] == "pyarrow":
                self.table_names = list(table.schema.names)
            else:  # pandas / Polars
                self.table_names = [str(c) for c in table.columns]
            self.con.register("__fugu_input", table)
            self.src = "__fugu_input"

    def _refuse_empty_lines(self) -> None:
        """DuckDB's CSV reader skips an empty line in a file of two or more columns (no option
        keeps it), where the numpy engine reads a record of missing values and refuses it: look
        for one first, as the Spark engine does (one scan of the lines, stopped at the first
        empty one: 0.45 s for 2·10^6 rows, whose histogram takes 0.8 s). An empty line inside a
        quoted value is refused too."""
        lit = "'" + str(self.data).replace("'", "''") + "'"
        lines = (
            f"read_csv({lit}, header=false, auto_detect=false, columns={{'l': 'VARCHAR'}}, "
            "delim='\x01', quote='', escape='', comment='', strict_mode=false, null_padding=true)"
        )
        if self.con.execute(f"SELECT 1 FROM {lines} WHERE l IS NULL LIMIT 1").fetchall():
            raise FileFormatError(
                f"cannot read {str(self.data)!r} as CSV: it has an empty line, which is a record "
                "with missing values (fugu never skips records; DuckDB's reader would): remove "
                "it or fill in the values"
            )

    def columns(self) -> list[str]:
        import duckdb

        try:
            return [r[0] for r in self.con.execute(f"DESCRIBE SELECT * FROM {self.src}").fetchall()]
        except duckdb.Error as exc:
            raise self.read_error(exc) from None

    def source_columns(self) -> list[str]:
        """The input's column names as written in it, before DuckDB renames repeated ones.

        DuckDB reads a table with two columns named ``age`` (a CSV header ``age,age``, a Parquet
        file, an Arrow table, a query ``SELECT 1 AS age, 2 AS age``) as ``age`` and ``age_1``, and
        matches names ignoring case: ``"age"`` would silently read the first of them.
        """
        import duckdb

        if self.table_names is not None:
            return self.table_names
        try:
            if self.sql is not None:
                return list(self.con.sql(self.sql).columns)
            suffixes = "".join(Path(self.data).suffixes).lower()
            if ".parquet" in suffixes or ".pq" in suffixes:
                import pyarrow.parquet as pq

                return list(pq.read_schema(self.data).names)
            lit = "'" + str(self.data).replace("'", "''") + "'"
            header = self.con.execute(
                f"SELECT * FROM read_csv({lit}, header=false, all_varchar=true, "
                f"{csv_dialect(self.data)}) LIMIT 1"
            ).fetchall()
        except (duckdb.Error, OSError, ValueError) as exc:
            raise InvalidParameterError(f"DuckDB could not read the input: {exc}") from None
        return [str(v) for v in header[0]] if header else self.columns()

    def check(self, names: Sequence[str]) -> None:
        cols = self.columns()
        if self.src.startswith("read_csv(") and len(cols) > 1:
            self._refuse_empty_lines()  # (one column: DuckDB reads an empty line as missing)
        if self.table_names is not None or any(_RENAMED.search(c) for c in cols):
            # DuckDB renames a repeated column `x` to `x_1`: check the names as written
            raw = self.source_columns()
            if len({c.lower() for c in raw}) < len(raw):
                where = "the query" if self.sql is not None else "the input"
                if isinstance(self.data, str | Path) and self.sql is None:
                    where = repr(str(self.data))
                check_unique_columns(names, raw, where=where, fold_case=True)
                # DuckDB keeps the order: its name for column i must be the name written there
                # (CSV header x,x,x_1 reads as x, x_1, x_1_1: "x_1" would read the second x)
                aligned = len(raw) == len(cols)
                for n in names:
                    i = cols.index(n) if n in cols else -1
                    if i >= 0 and (raw[i].lower() != n.lower() if aligned else n not in raw):
                        written = repr(raw[i]) if aligned else "a repeated column"
                        raise DomainError(
                            f"{where}: DuckDB gives the name {n!r} to {written} (column {i + 1}"
                            f" of {raw[:20]}), so it would read that column for {n!r}; rename "
                            "the repeated columns in the input"
                        )
        if self.src.startswith("read_csv("):
            cols = self._written_names(names, cols)
        missing = [n for n in names if n not in cols]
        if missing:
            raise DomainError(
                f"the input lacks the column(s) {missing}; it has {cols[:20]}. Rename the columns "
                f"or change the domain"
            )
        if self.src.startswith("read_csv("):
            text = [c for c in self.text_columns if c in cols]  # labels as written
            double = self._fractional([n for n in names if n not in text])
            if text or double:
                self.src = source_sql(self.data, None, text, double)

    def _written_names(self, names: Sequence[str], cols: list[str]) -> list[str]:
        """A CSV's column names as written in its header, where DuckDB's differ.

        DuckDB trims spaces around header names: in ``' age,age'`` it called the first column
        ``age`` (and the second ``age_1``), so ``age`` read the column written `` age`` while
        the numpy engine reads the one written ``age``; a lone `` age`` was read for ``age``
        where the numpy engine finds no such column. A name read must be the name written at
        its place: a column DuckDB names otherwise is refused."""
        raw = self.source_columns()
        if len(raw) != len(cols):  # pragma: no cover - one header, read twice
            return cols
        for n in names:
            i = cols.index(n) if n in cols else -1
            if i >= 0 and raw[i] != n and n in raw:
                raise DomainError(
                    f"{str(self.data)!r}: DuckDB reads column {i + 1} (written {raw[i]!r}) for "
                    f"{n!r}, not the column written {n!r} (it trims spaces around header names);"
                    " rename the columns in the header"
                )
            if i < 0 and n in raw and n.strip() != n:  # written with spaces DuckDB trims away
                raise DomainError(
                    f"{str(self.data)!r}: DuckDB trims spaces around header names, so it cannot "
                    f"read the column written {n!r}; rename it, or use engine='numpy'"
                )
        # the names as written where DuckDB trimmed them (its renamed repeats kept: see check)
        return [r if r != c and r.strip() == c else c for c, r in zip(cols, raw, strict=True)]

    def _fractional(self, names: Sequence[str]) -> list[str]:
        """The columns among ``names`` that DuckDB's sniffer typed as integers from its sample
        (the first 20,480 rows) but that hold a fraction further down.

        DuckDB casts such a value to the integer type by rounding: ``2.5`` was read as 3 and
        counted in another cell (the numpy engine refuses a fractional value, and bins it where
        it lies), or summed as 3 by k-means. Read as DOUBLE, the value arrives as written. One
        more scan of the text, when a column read was typed as integers (5·10^6 rows of three
        columns: a histogram in 2.1-2.7 s instead of 1.3 s, at load 7 on 2 cores; the numpy
        engine, the default for CSV, needs none).
        """
        import duckdb

        try:
            described = self.con.execute(f"DESCRIBE SELECT * FROM {self.src}").fetchall()
        except duckdb.Error as exc:
            raise self.read_error(exc) from None
        types = {str(r[0]): str(r[1]).upper() for r in described}
        ints = [n for n in names if types.get(n, "") in _INTEGER_TYPES]
        if not ints:
            return []
        lit = "'" + str(self.data).replace("'", "''") + "'"
        text = f"read_csv({lit}, header=true, all_varchar=true, {csv_dialect(self.data)})"
        # trim(): DuckDB pushes a bare TRY_CAST into the CSV scan as a strict conversion (an
        # error on '0x1', which its BIGINT reader takes)
        number = "TRY_CAST(trim({}) AS DOUBLE)"
        checks = ", ".join(
            f"bool_or({number.format(_quote(n))} <> floor({number.format(_quote(n))}))"
            for n in ints
        )
        try:
            (row,) = self.con.execute(f"SELECT {checks} FROM {text}").fetchall()
        except duckdb.Error as exc:
            raise self.read_error(exc) from None
        return [n for n, frac in zip(ints, row, strict=True) if frac]

    def reader(self, query: str, batch_rows: int) -> Iterator[Any]:
        """The query's result as Arrow record batches (read errors: :meth:`read_error`)."""
        import duckdb

        try:
            rel = self.con.sql(query)
            for name in ("to_arrow_reader", "fetch_arrow_reader", "record_batch"):
                fn = getattr(rel, name, None)
                if fn is not None:
                    yield from fn(batch_rows)
                    return
        except (duckdb.Error, OSError) as exc:  # a streamed batch's error comes as OSError
            raise self.read_error(exc) from None
        raise InvalidParameterError(
            "this DuckDB version cannot stream Arrow batches; upgrade duckdb"
        )  # pragma: no cover

    def table(self, query: str) -> Any:
        import duckdb

        try:
            rel = self.con.sql(query)
            fetch = getattr(rel, "to_arrow_table", None) or rel.arrow
            return fetch()
        except duckdb.Error as exc:
            raise self.read_error(exc) from None

    def read_error(self, exc: Exception) -> InvalidParameterError:
        """DuckDB's error as one line. For a CSV file: a :class:`FileFormatError` naming the line
        and what is wrong with it, never the line itself (it holds records; after an open quote,
        the rest of the file) nor DuckDB's advice to loosen the reader (``ignore_errors``,
        ``strict_mode=false``, ``null_padding``: records dropped or padded)."""
        text = str(exc)
        if not self.src.startswith("read_csv("):
            return InvalidParameterError(f"DuckDB could not read the input: {_first_line(text)}")
        line = re.search(r"CSV Error on Line: (\d+)", text)
        where = f"line {line.group(1)}" if line else "a line"
        fields = re.search(r"Expected Number of Columns: (\d+) Found: (\d+)", text)
        column = re.search(r'Error when converting column "(.*?)"\.', text)
        if fields:
            n = int(fields.group(2))
            reason = f"{where} has {n} field{'s' if n != 1 else ''}, the header {fields.group(1)}"
        elif "parallel csv reader" in text.lower():
            return FileFormatError(
                f"cannot read {str(self.data)!r} with DuckDB: its parallel CSV reader cannot "
                "read this file (quoted values that hold line breaks); read it with "
                "engine='numpy' (the default for CSV) or engine='spark'"
            )
        elif "unterminated quote" in text:
            reason = f"{where} opens a quote that is never closed"
        elif "not utf-8 encoded" in text.lower() or "invalid unicode" in text.lower():
            reason = f"{where} is not UTF-8 text; convert the file to UTF-8"
        elif column:
            reason = (
                f"{where}: column {column.group(1)!r} holds a value of another type than the "
                "lines DuckDB sampled (e.g. text among numbers)"
            )
        elif "sniffing" in text:
            reason = (
                "a line has more or fewer fields than the header, or a quote is not closed or "
                "not doubled inside a quoted value"
            )
        else:
            reason = _first_line(text)
        return FileFormatError(
            f"cannot read {str(self.data)!r} as CSV ({_DIALECT_WORDS}): {reason}; fix the file "
            "(fugu neither drops nor pads records)"
        )

    def close(self) -> None:
        self.con.close()


def _rlimit_budget() -> str | None:
    """A DuckDB memory limit inside the process's own limit (RLIMIT_DATA / RLIMIT_AS), if any.

    DuckDB sizes its buffer pool from the machine's RAM; under a process limit (a container, a
    batch scheduler, ``ulimit -d``) it would fail to allocate instead of spilling to disk. Half of
    what is left under the limit is given to DuckDB.
    """
    try:
        import resource

        limits = [resource.getrlimit(r)[0] for r in (resource.RLIMIT_DATA, resource.RLIMIT_AS)]
        finite = [lim for lim in limits if lim not in (resource.RLIM_INFINITY, -1) and lim > 0]
        if not finite:
            return None
        used = 0
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith("VmData:"):
                    used = int(line.split()[1]) * 1024
        left = max(min(finite) - used, 0)
        return f"{max(left // 2, 32 * 2**20) // 2**20}MB"
    except (ImportError, OSError, ValueError):  # pragma: no cover - non-Linux
        return None


def _arrow_array(values: Any, name: str = "a column") -> Any:
    """A column as an Arrow array; an (n, w) uint8 array (packed bits) as fixed-size binary."""
    import pyarrow as pa

    if type(values).__module__.split(".")[0] == "pyarrow":
        return values
    arr = np.asarray(values)
    if arr.ndim == 1 and arr.dtype.kind in "SU" and not isinstance(values, np.ndarray):
        # a list of bytes or str: numpy's fixed-width array drops trailing NUL bytes
        # (b"\x01\x00" -> b"\x01", an all-zero bit vector -> b""), Arrow keeps them
        return pa.array(list(values))
    if arr.ndim == 2 and arr.dtype == np.uint8:
        buf = pa.py_buffer(np.ascontiguousarray(arr).tobytes())
        return pa.Array.from_buffers(pa.binary(arr.shape[1]), arr.shape[0], [None, buf])
    if arr.ndim == 2 and arr.dtype.kind in "iuf":
        # rows of numbers of another type: kept as they are (a reader checks their range)
        flat = pa.array(np.ascontiguousarray(arr).reshape(-1))
        return pa.FixedSizeListArray.from_arrays(flat, arr.shape[1])
    if arr.ndim != 1:
        raise InvalidTypeError(
            f"{name} must be a one-dimensional array of values (one per record), got shape "
            f"{arr.shape}"
        )
    return pa.array(arr)


def _as_arrow(data: Any) -> Any:
    import pyarrow as pa

    mod = type(data).__module__.split(".")[0]
    if mod in ("pyarrow", "pandas", "polars"):
        return data
    if isinstance(data, np.ndarray) and data.dtype.names:
        return pa.table({n: data[n] for n in data.dtype.names})
    if hasattr(data, "items"):
        check_mapping_lengths(data)
        return pa.table({str(k): _arrow_array(v, f"column {str(k)!r}") for k, v in data.items()})
    raise InvalidTypeError(
        f"the duckdb engine reads a CSV/Parquet path, sql=..., or an in-memory table (mapping, "
        f"pandas/Polars DataFrame, Arrow); got {type(data).__name__}"
    )


def iter_batches(
    data: Any,
    names: Sequence[str],
    *,
    sql: str | None = None,
    batch_rows: int = CHUNK_ROWS,
    threads: int | None = None,
    progress: bool = False,
    text_columns: Sequence[str] = (),
) -> Iterator[dict[str, Any]]:
    """Stream the named columns of the input as batches (dicts of columns)."""
    for batch in iter_arrow_batches(
        data,
        names,
        sql=sql,
        batch_rows=batch_rows,
        threads=threads,
        progress=progress,
        text_columns=text_columns,
    ):
        yield dict(columns_of(batch, list(names)))


def iter_arrow_batches(
    data: Any,
    names: Sequence[str],
    *,
    sql: str | None = None,
    batch_rows: int = CHUNK_ROWS,
    threads: int | None = None,
    progress: bool = False,
    text_columns: Sequence[str] = (),
) -> Iterator[Any]:
    """Stream the named columns of the input as Arrow record batches (non-empty ones), for
    callers that convert columns themselves (packed bit vectors stay one buffer:
    :func:`fugu.engines.ldp.arrow_column`). ``text_columns``: see :func:`source_sql`."""
    con = _Connection(data, sql, threads, progress, text_columns=text_columns)
    try:
        con.check(names)
        sel = ", ".join(_quote(n) for n in names)
        for batch in con.reader(f"SELECT {sel} FROM {con.src}", batch_rows):
            if batch.num_rows:
                yield batch
    finally:
        con.close()


def count_column(names: Sequence[str]) -> str:
    """The name of the row-count column of :func:`grouped_batches`: ``__n``, with more leading
    underscores while a column read has that name (DuckDB matches names ignoring case).

    >>> count_column(["age"]), count_column(["__n", "___N"])
    ('__n', '____n')
    """
    taken = {n.lower() for n in names}
    name = "__n"
    while name in taken:
        name = "_" + name
    return name


def grouped_batches(
    data: Any,
    names: Sequence[str],
    *,
    sql: str | None = None,
    threads: int | None = None,
    progress: bool = False,
    exprs: Sequence[str] | None = None,
    text_columns: Sequence[str] = (),
) -> Iterator[dict[str, Any]]:
    """One batch of the distinct combinations of ``names`` with their row counts in the column
    :func:`count_column` ``(names)`` (``__n`` unless a column read has that name)."""
    counted = count_column(names)
    con = _Connection(data, sql, threads, progress, text_columns=text_columns)
    try:
        con.check(names)
        groups = exprs or [_quote(n) for n in names]
        sel = ", ".join(f"{e} AS {_quote(n)}" for e, n in zip(groups, names, strict=True))
        table = con.table(
            f"SELECT {sel}, count(*) AS {_quote(counted)} FROM {con.src} GROUP BY ALL"
        )
    finally:
        con.close()
    if table.num_rows == 0:
        return
    out: dict[str, Any] = {}
    for n in names:
        col = table.column(n)
        out[n] = (
            np.asarray(col.to_pylist(), dtype=object)
            if col.null_count
            else np.asarray(col.to_numpy(zero_copy_only=False))
        )
    out[counted] = np.asarray(table.column(counted).to_numpy(), dtype=np.int64)
    yield out


def grouped_counts(
    names: Sequence[str],
    path: str | Path | None = None,
    sql: str | None = None,
    threads: int | None = None,
) -> tuple[dict[str, np.ndarray], np.ndarray]:
    """Distinct combinations of ``names`` and their row counts, computed inside DuckDB."""
    for batch in grouped_batches(path, names, sql=sql, threads=threads):
        n = batch.pop(count_column(names))
        return batch, n
    return {k: np.zeros(0) for k in names}, np.zeros(0, dtype=np.int64)


def histogram(
    data: Any,
    domain: Any,
    *,
    out_of_domain: str = "error",
    sql: str | None = None,
    threads: int | None = None,
    progress: bool = False,
) -> NDArray[np.int64]:
    """Flat histogram counts of a file, a query or an in-memory table, grouped inside DuckDB."""
    from .grouped import canonical_sql, encode_grouped

    names = list(domain.names)
    if isinstance(data, Mapping):  # one value per record, as the numpy engine reads a column
        data = {k: one_per_record(str(k), v) if str(k) in names else v for k, v in data.items()}
    exprs = [canonical_sql(a, _quote) for a in domain.attributes]
    for batch in grouped_batches(
        data,
        names,
        sql=sql,
        threads=threads,
        progress=progress,
        exprs=exprs,
        text_columns=nominal_names(domain),
    ):
        n = batch.pop(count_column(names))
        return encode_grouped(domain, batch, n, out_of_domain)
    # zero rows (a header-only CSV, a query that matched nothing): zero counts, not a refusal,
    # since where the number of records is private refusing them would reveal it
    warn_no_rows(repr(str(data)) if isinstance(data, str | Path) else "the input")
    return np.zeros(domain.size, dtype=np.int64)
