"""LDP report aggregation on any engine: :meth:`LDPProtocol.partial` per partition, summed.

The server side of a local-DP protocol spends almost all its time in one pure function of a batch
of reports, ``protocol.partial(columns) -> (state, n_accepted, rejected)`` (validate, then count
support). :class:`LDPPartial` turns it into a partial function with fixed keys for
:func:`fugu.engines.partial_sums`, and :func:`aggregate_reports` runs it on an engine and
returns what :meth:`fugu.ldp.protocol.Aggregator.add_partial` takes:

>>> import fugu
>>> from fugu.engines.ldp import aggregate_reports
>>> grr = fugu.ldp.GRR(fugu.Domain([fugu.Ordinal("v", 0, 3)]), 1.0)
>>> reports = grr.client(fugu.RandomSource(seed=0)).perturb({"v": [0, 1, 1, 3] * 50})
>>> state, n_ok, rejected = aggregate_reports(grr, reports.to_arrow(), engine="duckdb")
>>> n_ok, int(state["support"].sum())
(200, 200)
>>> agg = grr.aggregator().add_partial(state, n_ok, rejected)

Reports arrive as Arrow (files, Spark): packed bit-vector columns (``("bytes", width)``) come as
binary values and are unpacked to ``(n, width)`` uint8 arrays; unsigned seeds stored as int64
(Spark has no unsigned types) are coerced by the protocol. States are combined by addition,
which is every fugu protocol's ``merge_state``.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from ..errors import ReportError
from .numpy_engine import columns_of
from .partials import partial_sums

__all__ = ["LDPPartial", "aggregate_reports", "read_header"]

_STATE = "state:"
_REJECTED = "rejected:"
REASONS = ("malformed", "wrong type", "out of range", "other")


def _unpack(values: Any, width: int) -> tuple[np.ndarray, np.ndarray]:
    """Binary values (Arrow array, object array of bytes, or an (n, width) uint8 array) →
    ``((n, width) uint8, bad)``; ``bad`` marks null values and values of another length (their
    rows are zero-filled and must not be used)."""
    if isinstance(values, np.ndarray) and values.dtype == np.uint8 and values.ndim == 2:
        if values.shape[1] == width:
            return values, np.zeros(len(values), dtype=bool)
        return np.zeros((len(values), width), np.uint8), np.ones(len(values), dtype=bool)
    if type(values).__module__.startswith("pyarrow"):
        values = values.to_numpy(zero_copy_only=False)
    items = values if isinstance(values, np.ndarray) else np.asarray(list(values), dtype=object)
    n = len(items)
    try:  # fast path (C-level loops): every value is bytes of the right length
        lens = np.fromiter(map(len, items), dtype=np.int64, count=n)
        if np.all(lens == width):
            raw = b"".join(items)
            return np.frombuffer(raw, dtype=np.uint8).reshape(n, width), np.zeros(n, dtype=bool)
    except TypeError:  # a null or a non-bytes value: the careful path below
        pass
    bad = np.fromiter(
        (not isinstance(v, bytes | bytearray | memoryview) or len(v) != width for v in items),
        dtype=bool,
        count=n,
    )
    zero = bytes(width)
    raw = b"".join(zero if b else bytes(v) for v, b in zip(items, bad, strict=True))
    return np.frombuffer(raw, dtype=np.uint8).reshape(n, width), bad


def _scalar(values: Any, spec: str) -> tuple[np.ndarray, np.ndarray]:
    """A scalar report column → (values, bad): nulls, non-numbers, non-integers in integer
    columns and (for ``uint32``, which Spark stores as int64) values outside [0, 2^32) are bad."""
    arr = np.asarray(values)
    n = len(arr)
    if arr.ndim != 1:
        return np.zeros(n, np.int64), np.ones(n, dtype=bool)
    if arr.dtype == object:
        ok = np.fromiter(
            (
                isinstance(v, int | float | np.integer | np.floating) and not isinstance(v, bool)
                for v in arr
            ),
            dtype=bool,
            count=n,
        )
        arr = np.where(ok, arr, 0).astype(np.float64 if spec == "float" else np.int64)
        bad = ~ok
    elif arr.dtype.kind in "iuf":
        bad = np.zeros(n, dtype=bool)
    else:
        return np.zeros(n, np.int64), np.ones(n, dtype=bool)
    if arr.dtype.kind == "f":
        bad |= ~np.isfinite(arr)
        if spec != "float":
            bad |= arr != np.round(arr)
        arr = np.where(bad, 0, arr)
        if spec != "float":
            arr = arr.astype(np.int64)
    if spec == "uint32":
        big = arr.astype(np.int64) if arr.dtype.kind != "u" else arr
        bad |= (big < 0) | (big >= 2**32)
        arr = np.where(bad, 0, big)
    return arr, bad


@dataclass(frozen=True)
class LDPPartial:
    """``protocol.partial`` as a fixed-key partial function for :func:`partial_sums`.

    Rows that cannot be read as reports (a null, a bit vector of another length, a non-integer
    in an integer column, a ``uint32`` value outside its range) are counted as ``malformed`` and
    dropped before the protocol validates the rest; a batch lacking a report column is rejected
    whole (``wrong type``). Nothing unreadable is ever used.
    """

    protocol: Any

    def __call__(self, batch: Mapping[str, Any]) -> dict[str, np.ndarray]:
        cols, n_bad = self.clean(batch)
        state, n_ok, rejected = self.protocol.partial(cols)
        out = {_STATE + k: np.asarray(v) for k, v in state.items()}
        out["n_accepted"] = np.array([int(n_ok)], dtype=np.int64)
        counts = dict(rejected)
        counts["malformed"] = counts.get("malformed", 0) + n_bad
        for r in REASONS[:-1]:
            out[_REJECTED + r] = np.array([int(counts.pop(r, 0))], dtype=np.int64)
        out[_REJECTED + "other"] = np.array([int(sum(counts.values()))], dtype=np.int64)
        return out

    def clean(self, batch: Mapping[str, Any]) -> tuple[dict[str, np.ndarray], int]:
        """The readable rows of a batch as report columns, and how many rows were unreadable."""
        specs = self.protocol.report_columns()
        n = len(next(iter(batch.values()))) if batch else 0
        bad = np.zeros(n, dtype=bool)
        cols: dict[str, np.ndarray] = {}
        for k, spec in specs.items():
            if k not in batch:
                continue
            arr, bad_k = (
                _unpack(batch[k], spec[1]) if isinstance(spec, tuple) else _scalar(batch[k], spec)
            )
            cols[k] = arr
            bad |= bad_k
        n_bad = int(bad.sum())
        if n_bad:
            cols = {k: v[~bad] for k, v in cols.items()}
        return cols, n_bad


def _additive(protocol: Any) -> bool:
    """True when the protocol's partial states combine by element-wise sum (every frequency
    oracle and grid method; HIO keeps its validated reports and concatenates)."""
    from ..ldp.protocol import LDPProtocol

    return type(protocol).merge_state is LDPProtocol.merge_state


def _batches(data: Any, cols: list[str], engine: str, opts: dict[str, Any]) -> Iterator[Any]:
    """Batches of report columns read by ``engine`` (for protocols whose state is not a sum)."""
    from .partials import _is_spark, iter_source_batches

    opts = dict(opts)
    sql = opts.pop("sql", None)
    if engine == "spark" or _is_spark(data):
        from . import spark as spark_engine

        spark = opts.pop("spark", None)
        master = opts.pop("master", None)
        if master is not None and spark is None:
            spark = spark_engine.session(master)
        df = spark_engine._to_dataframe(data, spark, sql)
        spark_engine._check_columns(df, cols)
        table = spark_engine._collect_arrow(df.select(*[spark_engine._quote(c) for c in cols]))
        if table.num_rows:
            yield dict(columns_of(table, cols))
        return
    if engine == "duckdb" or sql is not None:
        from .duckdb_engine import iter_batches

        yield from iter_batches(data, cols, sql=sql, **opts)
        return
    yield from iter_source_batches(data, cols, **opts)


def _streamed(
    protocol: Any, data: Any, engine: str, opts: dict[str, Any]
) -> tuple[dict[str, np.ndarray], int, Counter[str]]:
    """Aggregation for protocols whose partial state is not a sum (HIO keeps its validated
    reports): batches are read by the engine and validated + merged on the driver. On Spark the
    (randomised) report columns are collected to the driver, which HIO's estimator needs anyway."""
    fn = LDPPartial(protocol)
    state = protocol.empty_state()
    n_ok = 0
    rejected: Counter[str] = Counter()
    for batch in _batches(data, list(protocol.report_columns()), engine, opts):
        cols, n_bad = fn.clean(batch)
        s, k, r = protocol.partial(cols)
        state = protocol.merge_state(state, s)
        n_ok += int(k)
        rejected.update(r)
        if n_bad:
            rejected["malformed"] += n_bad
    return state, n_ok, rejected


def read_header(data: Any) -> dict[str, Any] | None:
    """The ``fugu.ldp`` report header of an Arrow table or a Parquet / Arrow report file (from
    the schema metadata, without reading the rows); None when the input carries none (a Spark
    DataFrame, CSV, a mapping of columns)."""
    meta: Any = None
    mod = type(data).__module__.split(".")[0]
    if mod == "pyarrow" and hasattr(data, "schema"):
        meta = data.schema.metadata
    elif isinstance(data, str | Path):
        p = Path(data)
        suffix = p.suffix.lower()
        try:
            if suffix in (".parquet", ".pq"):
                import pyarrow.parquet as pq

                meta = pq.read_schema(p).metadata
            elif suffix in (".arrow", ".feather"):
                import pyarrow as pa

                with pa.memory_map(str(p)) as src:
                    meta = pa.ipc.open_file(src).schema.metadata
        except (OSError, ValueError) as exc:
            raise ReportError(f"report file {str(p)!r} cannot be read ({exc})") from None
    if not meta or b"fugu.ldp" not in meta:
        return None
    try:
        header = json.loads(meta[b"fugu.ldp"])
    except json.JSONDecodeError:
        raise ReportError("the fugu.ldp header in the schema metadata is not valid JSON") from None
    return dict(header) if isinstance(header, Mapping) else None


def aggregate_reports(
    protocol: Any, data: Any, *, engine: str = "numpy", **engine_options: Any
) -> tuple[dict[str, np.ndarray], int, Counter[str]]:
    """``(state, n_accepted, rejected)`` of every report in ``data``, counted by ``engine``.

    ``data``: report columns (a mapping, an Arrow table such as ``Reports.to_arrow()``), a
    Parquet/CSV report file, an iterable of those, or a Spark DataFrame of reports. The caller
    checks that the reports' header matches ``protocol`` (the header is not part of the rows);
    :meth:`fugu.ldp.LDPProtocol.aggregate` with ``engine=`` does that and then calls this.
    Protocols whose partial state is not a plain sum (HIO) are read batch by batch by the engine
    and merged on the driver.
    """
    if not _additive(protocol):
        return _streamed(protocol, data, engine, dict(engine_options))
    cols = list(protocol.report_columns())
    total = partial_sums(data, LDPPartial(protocol), columns=cols, engine=engine, **engine_options)
    assert isinstance(total, dict)
    state = {k[len(_STATE) :]: v for k, v in total.items() if k.startswith(_STATE)}
    rejected: Counter[str] = Counter(
        {
            k[len(_REJECTED) :]: int(v[0])
            for k, v in total.items()
            if k.startswith(_REJECTED) and v[0]
        }
    )
    return state, int(total["n_accepted"][0]), rejected
