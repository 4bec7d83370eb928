"""The numpy engine on files: Parquet row group by row group, CSV in streamed batches.

Memory stays bounded by one batch plus the count vector, whatever the file's size.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import numpy as np
from numpy.typing import NDArray

from ..domain import Domain, OutOfDomainPolicy
from ..errors import DomainError, FileFormatError, InvalidParameterError
from .numpy_engine import bincount_chunked, check_unique_columns, columns_of
from .partial_core import nominal_names, warn_no_rows


def iter_batches(
    path: str | Path,
    names: list[str],
    batch_rows: int = 1 << 20,
    progress: bool = False,
    text_columns: Sequence[str] = (),
) -> Iterator[Any]:
    """Arrow record batches of the named columns (``progress``: a tqdm bar on stderr, in rows).

    ``text_columns``: columns a CSV holds labels in (nominal attributes), read as written.
    """
    bar = _progress_bar(path, progress)
    try:
        for batch in _iter_batches(path, names, batch_rows, text_columns):
            if bar is not None:
                bar.update(batch.num_rows)
            yield batch
    finally:
        if bar is not None:
            bar.close()


def _progress_bar(path: str | Path, progress: bool) -> Any:
    if not progress:
        return None
    from tqdm import tqdm

    total = None
    try:
        import pyarrow.parquet as pq

        total = pq.ParquetFile(path).metadata.num_rows
    except Exception:  # noqa: BLE001 - CSV or unreadable: a bar without a total
        total = None
    return tqdm(total=total, unit=" rows", unit_scale=True, desc=f"counting {Path(path).name}")


def _iter_batches(
    path: str | Path, names: list[str], batch_rows: int, text_columns: Sequence[str] = ()
) -> Iterator[Any]:
    p = Path(path)
    if not p.exists():
        raise InvalidParameterError(f"data file {str(p)!r} does not exist")
    if p.is_dir():
        raise InvalidParameterError(
            f"{str(p)!r} is a directory; the numpy engine reads one CSV or Parquet file: name a "
            f"file, or read the directory with engine='duckdb' (every Parquet file under it) or "
            f"engine='spark'"
        )
    suffixes = "".join(p.suffixes).lower()
    if ".parquet" in suffixes or ".pq" in suffixes:
        import pyarrow.parquet as pq

        f = pq.ParquetFile(p)
        have = f.schema_arrow.names
        _check_columns(names, have, p)
        for i in range(f.num_row_groups):
            yield from f.read_row_group(i, columns=names).to_batches(max_chunksize=batch_rows)
    elif ".csv" in suffixes or ".tsv" in suffixes or ".txt" in suffixes:
        import pyarrow.csv as pcsv

        with csv_errors(p):
            reader = pcsv.open_csv(
                p,
                read_options=pcsv.ReadOptions(block_size=1 << 24),
                parse_options=csv_parse_options(p),
                convert_options=csv_convert_options(text_columns),
            )
        _check_columns(names, reader.schema.names, p)
        with csv_errors(p, reader.schema.names):
            for batch in reader:
                yield batch.select(names)
    else:
        raise InvalidParameterError(
            f"cannot tell the format of {str(p)!r}: name it *.csv or *.parquet"
        )


def refuse_open_quote(path: str | Path) -> None:
    """Refuse a CSV in which a quote is opened and never closed.

    pyarrow reads such a quote as one value running to the end of the file: every record after
    it became part of one label, refused as outside the domain, but with
    ``out_of_domain='drop'`` dropped silently (DuckDB refuses the file): the histograms of that
    policy call this. In a file whose quotes are all paired (RFC 4180: around a value, or
    doubled inside one) their number is even; an odd number is an open quote or a quote inside
    an unquoted value (``5'11"``, read as written), which Python's csv module, reading the file
    strictly, tells apart. Counting costs one pass of ``bytes.count`` (46 MB: 0.07 s); the
    strict read only happens for a file with an odd number of quotes.
    """
    import codecs
    import csv

    import pyarrow as pa

    quotes = 0
    with pa.input_stream(str(path)) as stream:  # decompresses *.gz and others
        while chunk := stream.read(1 << 24):
            quotes += chunk.count(b'"')
    if quotes % 2 == 0:
        return
    delimiter = "\t" if is_tsv(path) else ","
    with pa.input_stream(str(path)) as stream:
        lines = codecs.iterdecode(iter(lambda: stream.read(1 << 20), b""), "utf-8", "replace")
        try:
            for _ in csv.reader(_lines_of(lines), delimiter=delimiter, strict=True):
                pass
        except csv.Error as exc:
            if "unexpected end of data" in str(exc):
                raise FileFormatError(
                    f"cannot read {str(path)!r} as CSV: a quote is opened and never closed, so "
                    "every record after it would be read as one value; close or remove the "
                    "quote (fugu never drops records)"
                ) from None


def _lines_of(chunks: Iterator[str]) -> Iterator[str]:
    """Lines (each with its line end, ``\\r`` or ``\\n``) of a stream of text chunks, for
    :mod:`csv`; :meth:`str.splitlines` would also cut at characters csv reads inside values."""
    import re

    rest = ""
    for chunk in chunks:
        parts = re.split(r"(?<=[\r\n])", rest + chunk)
        rest = parts.pop()
        yield from parts
    if rest:
        yield rest


def _is_csv(path: str | Path) -> bool:
    suffixes = "".join(Path(path).suffixes).lower()
    parquet = ".parquet" in suffixes or ".pq" in suffixes
    return not parquet and any(s in suffixes for s in (".csv", ".tsv", ".txt"))


def is_tsv(path: str | Path) -> bool:
    """Whether a file is tab-separated (``*.tsv``, ``*.tsv.gz``): every engine splits it on
    tabs, every other CSV on commas (RFC 4180; no engine guesses the delimiter)."""
    return ".tsv" in "".join(Path(path).suffixes).lower()


def csv_parse_options(path: str | Path | None = None) -> Any:
    """pyarrow CSV parse options that keep empty lines (tab-separated for ``*.tsv``) and line
    breaks inside quoted values.

    pyarrow skips empty lines by default, but in a one-column CSV an empty line is a record whose
    value is missing: skipping it would drop a record silently (and under replace-one neighbours
    change the "public" n). Kept, it becomes a missing value, which fugu refuses as it refuses
    every other missing value (as the DuckDB engine does); in a wider CSV it is a parse error.

    A quoted value may hold a line break (RFC 4180). By default pyarrow cuts a file into blocks
    at line breaks without looking at quotes, so a record whose value held a line break at a
    block boundary (every 16 MiB) was read as two values, one of them counted in another cell.
    ``newlines_in_values=True`` cuts blocks between records (5·10^6 rows: no slower).
    """
    import pyarrow.csv as pcsv

    delimiter = "\t" if path is not None and is_tsv(path) else ","
    return pcsv.ParseOptions(delimiter=delimiter, ignore_empty_lines=False, newlines_in_values=True)


def csv_convert_options(text_columns: Sequence[str] = ()) -> Any:
    """pyarrow CSV convert options under which an empty field is missing in every column, and
    the ``text_columns`` (those of nominal attributes) are read as text.

    pyarrow reads an empty field of a text column as the label ``""`` (and turns ``NA``,
    ``NULL``, ``#N/A``… into missing values), so a record with a missing nominal value was
    counted as the label ``""`` or, under ``out_of_domain="drop"``, dropped. Like the DuckDB
    engine, only the empty field is missing here, in every column: fugu refuses it as every
    missing value, and ``NA`` is a label (or, in a number column, a non-numeric value).

    A nominal attribute's values are labels: with its type inferred, a column of digits became
    numbers, so the labels ``007`` and ``7`` were both counted as ``7`` and ``01`` was refused
    as ``1``. Read as text, every label is the string written in the file.
    """
    import pyarrow as pa
    import pyarrow.csv as pcsv

    return pcsv.ConvertOptions(
        strings_can_be_null=True,
        null_values=[""],
        column_types={str(n): pa.string() for n in text_columns},
    )


@contextmanager
def csv_errors(path: str | Path, columns: Sequence[str] = ()) -> Iterator[None]:
    """Turn pyarrow's CSV parse errors into a :class:`FileFormatError` naming the file (and,
    for a value that does not fit its column's type, the column among ``columns``)."""
    import re

    import pyarrow as pa

    try:
        yield
    except pa.ArrowInvalid as exc:
        text = str(exc)
        column = re.search(r"In CSV column #(\d+): CSV conversion error", text)
        if "invalid utf8" in text.lower() or "invalid utf-8" in text.lower():
            raise FileFormatError(
                f"cannot read {str(path)!r} as CSV: it is not UTF-8 text ({text}); convert the "
                "file to UTF-8"
            ) from None
        if column:
            i = int(column.group(1))
            name = repr(columns[i]) if i < len(columns) else f"#{i + 1}"
            raise FileFormatError(
                f"cannot read {str(path)!r} as CSV: column {name} holds a value that does not "
                f"fit the type the reader took from the first 16 MiB of the file ({text}); fix "
                "the value (fugu never drops records)"
            ) from None
        raise FileFormatError(
            f"cannot read {str(path)!r} as CSV: {text}; fix the line (fugu neither drops nor "
            "pads records)"
        ) from None


def read_csv_table(path: str | Path, text_columns: Sequence[str] = ()) -> Any:
    """The whole CSV file as an Arrow table (empty lines kept: see :func:`csv_parse_options`;
    ``text_columns`` read as text: see :func:`csv_convert_options`)."""
    import pyarrow.csv as pcsv

    with csv_errors(path):
        return pcsv.read_csv(
            path,
            parse_options=csv_parse_options(path),
            convert_options=csv_convert_options(text_columns),
        )


def _check_columns(names: list[str], have: list[str], path: str | Path) -> None:
    missing = [n for n in names if n not in have]
    if missing:
        raise DomainError(
            f"the input lacks the column(s) {missing}; it has {have[:20]}. Rename the columns or "
            f"change the domain"
        )
    check_unique_columns(names, have, where=repr(str(path)))


def histogram_from_file(
    path: str | Path | None,
    domain: Domain,
    *,
    out_of_domain: OutOfDomainPolicy = "error",
    batch_rows: int = 1 << 20,
    progress: bool = False,
) -> NDArray[np.int64]:
    if path is None:
        raise InvalidParameterError(
            "the numpy engine reads files; for SQL input use engine='duckdb'"
        )
    if out_of_domain == "drop" and _is_csv(path) and Path(path).is_file():
        refuse_open_quote(path)  # dropped, the rest of the file would go unnoticed
    total = np.zeros(domain.size, dtype=np.int64)
    rows = 0
    text = nominal_names(domain)
    for batch in iter_batches(path, list(domain.names), batch_rows, progress, text):
        if batch.num_rows == 0:
            continue
        rows += batch.num_rows
        flat = domain.encode(columns_of(batch, domain.names), out_of_domain)
        total += bincount_chunked(flat, domain.size)
    if rows == 0:  # zero counts, not a refusal: the number of records may be private
        warn_no_rows(repr(str(path)))
    return total
