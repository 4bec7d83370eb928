"""Histograms from grouped rows: what the DuckDB and Spark (JVM) engines return.

Both engines let the database group the rows by the domain's columns and send back only the
distinct value combinations with their row counts. The combinations are at most the number of
cells (plus distinct out-of-domain values), so the driver encodes them with the very same
:meth:`fugu.Domain.encode_columns` as the numpy engine — same out-of-domain policy, same errors
— and adds their counts.

High-cardinality columns binned by edges (a float ``income``) would defeat the grouping, so the
grouping key of a binned attribute is a *canonical* SQL expression: in-domain values are replaced
inside the database by the left edge of their bin (which encodes to the same bin) while
out-of-domain values (and NaN / NULL) pass through unchanged, so they are reported exactly as the
numpy engine reports them.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from typing import Any

import numpy as np
from numpy.typing import NDArray

from ..domain import Domain, Ordinal
from ..errors import DomainError
from .partial_core import warn_no_rows


def canonical_sql(attr: Any, quote: Callable[[str], str]) -> str:
    """The SQL grouping expression of one attribute (works in DuckDB and Spark SQL).

    >>> canonical_sql(Ordinal("age", 0, 9), lambda n: '"' + n + '"')
    '"age"'
    >>> sql = canonical_sql(Ordinal("g", edges=[0, 1, 5]), lambda n: n)
    >>> sql.startswith("CASE WHEN g >= CAST(0.0 AS DOUBLE) AND g <= CAST(5.0 AS DOUBLE) THEN")
    True
    """
    col = quote(attr.name)
    if not isinstance(attr, Ordinal) or attr.edges is None:
        return col
    e = [_lit(x) for x in attr.edges]
    inner = " ".join(f"WHEN {col} >= {e[i]} THEN {e[i]}" for i in range(len(e) - 2, 0, -1))
    bucket = f"CASE {inner} ELSE {e[0]} END" if inner else e[0]
    return f"CASE WHEN {col} >= {e[0]} AND {col} <= {e[-1]} THEN ({bucket}) ELSE {col} END"


def _lit(x: float) -> str:
    return f"CAST({float(x)!r} AS DOUBLE)"


def encode_grouped(
    domain: Domain,
    values: Mapping[str, Any],
    counts: NDArray[np.int64],
    out_of_domain: str = "error",
    locate: Callable[[str], str] | None = None,
) -> NDArray[np.int64]:
    """Dense counts (flat, ``domain.size``) from distinct combinations ``values`` with ``counts``.

    ``locate(column)`` may return a phrase naming where bad values of a column live (the Spark
    engine names the partitions); it is called only when an error is raised. No combinations
    (an input of zero rows) give zero counts, with a warning to the curator, never an error:
    where the number of records is private, refusing zero rows would reveal it.
    """
    counts = np.asarray(counts, dtype=np.int64)
    total = int(counts.sum())
    missing = [a.name for a in domain.attributes if a.name not in values]
    if missing:
        raise DomainError(f"records lack the column {missing[0]!r}")
    if total == 0:
        warn_no_rows()
        return np.zeros(domain.size, dtype=np.int64)
    for a in domain.attributes:
        try:
            codes = a.encode(values[a.name], "drop")
        except DomainError as exc:  # NaN / None: refused whatever the policy
            raise _located(_in_rows(exc, values[a.name], counts), a.name, locate) from None
        bad = codes < 0
        if bad.any() and out_of_domain == "error":
            n_rows = int(counts[bad].sum())
            try:
                a.encode(np.asarray(values[a.name])[bad], "error")
            except DomainError as exc:
                msg = str(exc)
            else:  # pragma: no cover - the drop pass found a bad value
                msg = f"attribute {a.name!r}: values outside the domain"
            raise _located(DomainError(f"{n_rows:,} of {total:,} rows: {msg}"), a.name, locate)
    codes = domain.encode_columns(values, out_of_domain)  # type: ignore[arg-type]
    keep = (codes >= 0).all(axis=1)
    flat = domain.flatten(codes[keep])
    out = np.zeros(domain.size, dtype=np.int64)
    np.add.at(out, flat, counts[keep])
    return out


def _in_rows(exc: DomainError, values: Any, counts: NDArray[np.int64]) -> DomainError:
    """``exc`` counting missing values in rows, as the numpy engine does, not among the
    distinct values grouped ('1 of 3 values are NaN/None' for a file of 30,002 rows)."""
    arr = np.asarray(values).reshape(-1)
    if arr.dtype.kind == "f":
        missing = np.isnan(arr)
    elif arr.dtype.kind == "O":
        missing = np.array(
            [v is None or (isinstance(v, float) and v != v) for v in arr.tolist()], dtype=bool
        )
    else:
        return exc
    if not missing.any() or missing.size != counts.size:
        return exc
    rows = f"{int(counts[missing].sum())} of {int(counts.sum())} values are"
    text, n = re.subn(r"\d+ of \d+ values are", rows, str(exc), count=1)
    return DomainError(text) if n else exc


def _located(exc: DomainError, column: str, locate: Callable[[str], str] | None) -> DomainError:
    if locate is None:
        return exc
    try:
        where = locate(column)
    except Exception:  # noqa: BLE001 - locating is best effort; the error itself stands
        return exc
    return DomainError(f"{where}, column {column!r}: {exc}")
