"""The DuckDB engine: CSV / Parquet / SQL input counted out of core.

DuckDB groups the rows by the domain's columns (``GROUP BY ALL`` — in C++, spilling to disk when
needed); fugu then encodes the distinct value combinations with the domain and adds their counts
with ``np.bincount(..., weights=counts)``. Out-of-domain values are found on the distinct values,
so the error still counts the affected rows exactly.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from ..errors import DomainError, InvalidParameterError


def _quote(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def source_sql(path: str | Path | None, sql: str | None) -> str:
    """The FROM clause for a file (CSV or Parquet, by extension) or a user's SQL query."""
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
        return f"read_csv({lit}, header=true)"
    raise InvalidParameterError(
        f"cannot tell the format of {str(p)!r}: name it *.csv, *.csv.gz or *.parquet"
    )


def grouped_counts(
    names: Sequence[str], path: str | Path | None = None, sql: str | None = None, threads: int | None = None
) -> tuple[dict[str, np.ndarray], np.ndarray]:
    """Distinct combinations of ``names`` and their row counts, computed inside DuckDB."""
    import duckdb

    con = duckdb.connect()
    try:
        if threads:
            con.execute(f"SET threads={int(threads)}")
        src = source_sql(path, sql)
        try:
            cols = [r[0] for r in con.execute(f"DESCRIBE SELECT * FROM {src}").fetchall()]
        except duckdb.Error as exc:  # pragma: no cover - message depends on DuckDB version
            raise InvalidParameterError(f"DuckDB could not read the input: {exc}") from None
        missing = [n for n in names if n not in cols]
        if missing:
            raise DomainError(
                f"the input lacks the column(s) {missing}; it has {cols[:20]}. Rename the columns "
                f"or change the domain"
            )
        sel = ", ".join(_quote(n) for n in names)
        rel = con.sql(f"SELECT {sel}, count(*) AS __n FROM {src} GROUP BY ALL")
        # DuckDB >= 1.4 names it to_arrow_table; older releases fetch_arrow_table.
        fetch = getattr(rel, "to_arrow_table", None) or rel.arrow
        table: Any = fetch()
    finally:
        con.close()
    out = {}
    for n in names:
        col = table.column(n)
        out[n] = np.asarray(col.to_pylist(), dtype=object) if col.null_count else np.asarray(col.to_numpy(zero_copy_only=False))
    return out, np.asarray(table.column("__n").to_numpy(), dtype=np.int64)
