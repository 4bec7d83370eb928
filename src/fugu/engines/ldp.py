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

from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from .partials import partial_sums

__all__ = ["LDPPartial", "aggregate_reports"]

_STATE = "state:"
_REJECTED = "rejected:"
REASONS = ("malformed", "wrong type", "out of range", "other")


def _unpack(values: Any, width: int) -> np.ndarray:
    """Binary values (Arrow array or object array of bytes) → (n, width) uint8."""
    if isinstance(values, np.ndarray) and values.dtype == np.uint8 and values.ndim == 2:
        return values
    if type(values).__module__.startswith("pyarrow"):
        values = values.to_pylist()
    items = list(values)
    if any(v is None or len(v) != width for v in items):
        return np.zeros((len(items), width + 1), dtype=np.uint8)  # rejected as "wrong type"
    return np.frombuffer(b"".join(bytes(v) for v in items), dtype=np.uint8).reshape(-1, width)


@dataclass(frozen=True)
class LDPPartial:
    """``protocol.partial`` as a fixed-key partial function for :func:`partial_sums`."""

    protocol: Any

    def __call__(self, batch: Mapping[str, Any]) -> dict[str, np.ndarray]:
        specs = self.protocol.report_columns()
        cols = {
            k: _unpack(batch[k], spec[1]) if isinstance(spec, tuple) else batch[k]
            for k, spec in specs.items()
            if k in batch
        }
        state, n_ok, rejected = self.protocol.partial(cols)
        out = {_STATE + k: np.asarray(v) for k, v in state.items()}
        out["n_accepted"] = np.array([int(n_ok)], dtype=np.int64)
        counts = dict(rejected)
        for r in REASONS[:-1]:
            out[_REJECTED + r] = np.array([int(counts.pop(r, 0))], dtype=np.int64)
        out[_REJECTED + "other"] = np.array([int(sum(counts.values()))], dtype=np.int64)
        return out


def aggregate_reports(
    protocol: Any, data: Any, *, engine: str = "numpy", **engine_options: Any
) -> tuple[dict[str, np.ndarray], int, Counter[str]]:
    """``(state, n_accepted, rejected)`` of every report in ``data``, counted by ``engine``.

    ``data``: report columns (a mapping, an Arrow table such as ``Reports.to_arrow()``), a
    Parquet/CSV report file, an iterable of those, or a Spark DataFrame of reports. The caller
    checks that the reports' header matches ``protocol`` (the header is not part of the rows).
    """
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
