"""Counting engines: partition → partial counts → sum.

The only work that grows with the number of records is counting. It goes through one interface:
an engine turns records into per-partition partial count vectors over a known number of bins and
sums them. Mechanisms never see which engine produced their counts.

* ``numpy`` (default): ``np.bincount`` on flattened cell indices, in chunks.
* ``duckdb``: CSV / Parquet / SQL input, grouped by the domain's columns inside DuckDB
  (out-of-core), then encoded and summed here.
* ``spark``: see :mod:`fugu.engines.spark` (optional extra ``fugu[spark]``).
"""

from __future__ import annotations

from .numpy_engine import bincount_chunked, columns_of, sum_partials

ENGINES = ("numpy", "duckdb", "spark")

__all__ = ["ENGINES", "bincount_chunked", "columns_of", "sum_partials", "check_engine"]


def check_engine(engine: str) -> str:
    from ..errors import InvalidParameterError

    if engine not in ENGINES:
        raise InvalidParameterError(f"engine must be one of {ENGINES}, got {engine!r}")
    return engine
