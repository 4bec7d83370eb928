"""Histogram: dense counts over a :class:`~fugu.Domain`.

A histogram is the private input of every central mechanism. It is counted by an engine
(:mod:`fugu.engines`) from records or files, or given directly as an array of counts.

>>> import numpy as np, fugu
>>> dom = fugu.Domain([fugu.Ordinal("age", 0, 4), fugu.Nominal("sex", ["F", "M"])])
>>> hist = fugu.Histogram.from_records({"age": [1, 1, 4], "sex": ["F", "M", "M"]}, dom)
>>> hist.counts.tolist()
[[0, 0], [1, 1], [0, 0], [0, 0], [0, 1]]
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
from numpy.typing import ArrayLike, NDArray

from .domain import Domain, OutOfDomainPolicy
from .engines import bincount_chunked, check_engine, columns_of
from .engines.partial_core import warn_no_rows
from .errors import InvalidParameterError, InvalidTypeError

__all__ = ["Histogram", "MAX_COUNT"]

#: The largest count (and total of counts) a histogram accepts: 2**53, the largest integer up to
#: which float64 (in which every release is computed) is exact. Noise at any accepted epsilon
#: keeps the noisy counts far inside the int64 range.
MAX_COUNT = 2**53


class Histogram:
    """Dense integer counts shaped like the domain.

    Parameters
    ----------
    counts : array of non-negative integers, shape ``domain.shape``
    domain : Domain
    data_options : dict, optional
        How the records were turned into counts (out-of-domain policy, source). Recorded in every
        release made from this histogram; never holds data-dependent numbers.
    """

    def __init__(
        self, counts: ArrayLike, domain: Domain, *, data_options: dict[str, Any] | None = None
    ) -> None:
        if not isinstance(domain, Domain):
            raise InvalidTypeError(f"domain must be a fugu.Domain, got {type(domain).__name__}")
        domain.check_dense("a histogram")
        arr = np.asarray(counts)
        if arr.shape != domain.shape:
            if arr.size == domain.size and arr.ndim == 1:
                arr = arr.reshape(domain.shape)
            else:
                raise InvalidParameterError(
                    f"counts have shape {arr.shape}, the domain needs {domain.shape}"
                )
        if arr.dtype.kind == "f":
            if not np.all(np.isfinite(arr)) or not np.all(arr == np.rint(arr)):
                raise InvalidParameterError("counts must be finite whole numbers")
        elif arr.dtype.kind not in "iu":
            raise InvalidTypeError(
                f"counts must be integers, got dtype {arr.dtype}"
                + (" (integers beyond the int64 range?)" if arr.dtype.kind == "O" else "")
            )
        if arr.size:
            low, high = arr.min(), arr.max()
            if low < 0:
                raise InvalidParameterError(
                    f"counts must be non-negative, got a cell of {low}; a histogram counts records"
                )
            if high > MAX_COUNT:
                raise InvalidParameterError(
                    f"counts must be at most 2**53 = {MAX_COUNT:,}, got a cell of {int(high):,}: "
                    "releases are computed in float64, which cannot hold larger counts exactly, "
                    "and noise could push them past the int64 range"
                )
            total = float(arr.sum(dtype=np.float64))
            if total > MAX_COUNT:
                raise InvalidParameterError(
                    f"the counts add up to {total:.6g} records, above 2**53 = {MAX_COUNT:,}: "
                    "range answers over them cannot be represented exactly in float64 (nor, with "
                    "noise, safely in int64); count fewer records or split the data"
                )
        self.counts: NDArray[np.int64] = arr.astype(np.int64, copy=False)
        self.domain = domain
        self.data_options: dict[str, Any] = dict(data_options or {})

    # construction ----------------------------------------------------------------------------
    @classmethod
    def from_records(
        cls,
        data: Any,
        domain: Domain,
        *,
        out_of_domain: OutOfDomainPolicy = "error",
        engine: str = "numpy",
        **engine_options: Any,
    ) -> Histogram:
        """Count records: a mapping of column → array, a structured array, a pandas or Polars
        DataFrame, an Arrow table, or (``engine="spark"``) a Spark DataFrame.

        ``out_of_domain``: ``"error"`` (default) refuses values outside the domain with a count
        and examples; ``"clip"`` moves ordinal values to the nearest end; ``"drop"`` leaves such
        rows out. The choice (never the number of rows affected) is recorded in the release.

        Records of zero rows give all-zero counts and a :class:`UserWarning`, never an error:
        where the number of records is private (add/remove neighbours, a Blowfish policy with
        ⊥), the empty input and one record are neighbours, and refusing one would reveal it.
        """
        check_engine(engine)
        if engine == "spark" or type(data).__module__.startswith("pyspark"):
            from .engines import spark as spark_engine

            if "sql" in engine_options:  # the query's rows would be counted, not the records
                raise InvalidParameterError(
                    "Histogram.from_records counts the records it is given and takes no sql=; "
                    "count the rows of a query with Histogram.from_file(None, domain, sql=..., "
                    "engine='spark'), which records the query as the public filter"
                )
            _check_file_options(
                "spark", engine_options, _SPARK_RECORD_OPTIONS, "Histogram.from_records"
            )

            counts = spark_engine.histogram(
                data, domain, out_of_domain=out_of_domain, **engine_options
            )
            return cls(
                counts.reshape(domain.shape),
                domain,
                data_options={"out_of_domain": out_of_domain, "engine": "spark"},
            )
        if engine_options:  # never dropped silently: sql= would be a filter not applied
            raise InvalidParameterError(
                f"Histogram.from_records counts in-memory records with numpy and takes no "
                f"engine options, got {sorted(engine_options)}; count a file or a query "
                f"(sql=...) with Histogram.from_file, or pass engine='spark' for Spark's options"
            )
        domain.check_dense("a histogram")
        cols = columns_of(data, domain.names)
        flat = domain.encode(cols, out_of_domain)
        counts = bincount_chunked(flat, domain.size)
        if cols and all(len(v) == 0 for v in cols.values()):
            warn_no_rows("the records")
        return cls(  # in-memory records are counted by numpy whatever engine= names
            counts.reshape(domain.shape),
            domain,
            data_options={"out_of_domain": out_of_domain, "engine": "numpy"},
        )

    @classmethod
    def from_file(
        cls,
        path: str | Path | None,
        domain: Domain,
        *,
        engine: str | None = None,
        sql: str | None = None,
        out_of_domain: OutOfDomainPolicy = "error",
        **engine_options: Any,
    ) -> Histogram:
        """Count a CSV or Parquet file, or the result of ``sql`` (a DuckDB query).

        ``engine`` defaults to the faster in ``bench/bench_engines.py``: ``"duckdb"`` for Parquet
        and ``sql``, ``"numpy"`` (streamed pyarrow reader) for CSV.
        A ``WHERE`` in ``sql`` is a *public* filter: which rows are counted must not itself be
        secret (it is part of the release's definition).

        An input of zero rows (a CSV with only its header, a Parquet file or a query with no
        rows) gives all-zero counts and a :class:`UserWarning`, never an error: the number of
        rows a query returns is private, and refusing zero would reveal it. A file with no
        header (no columns) is still refused.
        """
        if engine is None:
            from .engines import default_file_engine

            engine = default_file_engine(path, sql)
        check_engine(engine)
        if sql is not None and (path is not None or engine == "numpy"):
            # either would be ignored (the filter by the numpy engine, the file by the query),
            # while the release records the query as the public filter applied
            raise InvalidParameterError(
                f"sql= counts the result of a query (its input named in the query) on the "
                f"DuckDB or Spark engine: pass path=None (got {str(path)!r}) and engine='duckdb' "
                f"or 'spark' (got {engine!r})"
            )
        domain.check_dense("a histogram")
        _check_file_options(engine, engine_options)
        if engine == "spark":
            from .engines import spark as spark_engine

            counts = spark_engine.histogram_from_file(
                path, domain, out_of_domain=out_of_domain, sql=sql, **engine_options
            )
        elif engine == "numpy":
            from .engines.file_numpy import histogram_from_file as numpy_from_file

            counts = numpy_from_file(path, domain, out_of_domain=out_of_domain, **engine_options)
        else:
            from .engines.duckdb_engine import histogram as duckdb_histogram

            counts = duckdb_histogram(
                path, domain, out_of_domain=out_of_domain, sql=sql, **engine_options
            )
        opts = {
            "out_of_domain": out_of_domain,
            "engine": engine,
            "source": "sql" if sql else "file",
        }
        if sql:
            opts["public_filter_sql"] = sql
        return cls(counts.reshape(domain.shape), domain, data_options=opts)

    # views -----------------------------------------------------------------------------------
    @property
    def shape(self) -> tuple[int, ...]:
        return self.domain.shape

    @property
    def dropped_records(self) -> bool:
        """Whether records outside the domain were dropped while counting
        (``out_of_domain="drop"``): then the counted total is not the number of records."""
        return self.data_options.get("out_of_domain") == "drop"

    @property
    def counts_a_subset(self) -> bool:
        """Whether only some of the records may have been counted: records dropped outside the
        domain, or the rows an SQL query returned (``from_file(sql=...)``: a ``WHERE`` or a
        join selects rows by their values). Replacing one record can then change the counted
        total, so it is not public even under replace-one neighbours."""
        return self.dropped_records or self.data_options.get("source") == "sql"

    def total(self) -> int:
        """The number of records (private: do not publish it without noise)."""
        return int(self.counts.sum())

    def project(self, names: list[str] | tuple[str, ...]) -> Histogram:
        """The marginal histogram over the named attributes."""
        sub = self.domain.project(list(names))
        axes = [self.domain.axis(n) for n in names]
        other = tuple(a for a in range(self.domain.ndim) if a not in axes)
        summed = self.counts.sum(axis=other)
        kept = [a for a in range(self.domain.ndim) if a in axes]
        order = [kept.index(a) for a in axes]
        return Histogram(np.transpose(summed, order), sub, data_options=self.data_options)

    def __repr__(self) -> str:
        return f"Histogram({self.domain!r})"

    def __eq__(self, other: object) -> bool:
        return (
            isinstance(other, Histogram)
            and self.domain == other.domain
            and np.array_equal(self.counts, other.counts)
        )

    __hash__ = None  # type: ignore[assignment]


#: The options each engine's file reader takes (Histogram.from_file's ``engine_options``).
_FILE_OPTIONS = {
    "numpy": ("batch_rows", "progress"),
    "duckdb": ("threads", "progress"),
    "spark": ("format", "spark", "master", "method", "num_partitions", "batch_rows", "progress"),
}


#: The options the Spark engine takes for records (Histogram.from_records, engine="spark").
_SPARK_RECORD_OPTIONS = ("spark", "master", "method", "num_partitions", "batch_rows", "progress")


def _check_file_options(
    engine: str,
    options: dict[str, Any],
    allowed: tuple[str, ...] | None = None,
    where: str = "Histogram.from_file",
) -> None:
    """Refuse an option ``engine`` does not take, naming the options it does take (and the
    argument a misspelt one was meant for)."""
    allowed = _FILE_OPTIONS[engine] if allowed is None else allowed
    unknown = [k for k in options if k not in allowed]
    if not unknown:
        return
    import difflib

    words = [*allowed, "out_of_domain", "engine", "sql"]
    hints = [
        f"{k!r} (did you mean {close[0]!r}?)" if close else repr(k)
        for k in unknown
        for close in [difflib.get_close_matches(k, words, n=1)]
    ]
    raise InvalidParameterError(
        f"{where} got the option(s) {', '.join(hints)}, which the {engine} engine does not "
        f"take; its options are {list(allowed)}"
    )


def require_histogram(hist: Any, what: str = "hist") -> Histogram:
    """Check a mechanism's input is a Histogram with at least one record."""
    if not isinstance(hist, Histogram):
        raise InvalidTypeError(
            f"{what} must be a fugu.Histogram, got {type(hist).__name__}; build one with "
            f"fugu.Histogram.from_records(records, domain) or fugu.Histogram(counts, domain)"
        )
    return hist
