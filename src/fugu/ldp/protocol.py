"""The shape every local-DP method in fugu shares: client, reports on the wire, aggregator.

Local differential privacy (LDP): each user randomises their own record on their own device and
sends only the randomised *report*; the aggregator never sees a raw value. A method is ε-LDP when
for any two values ``x, x'`` of one user and any report ``y``,
``Pr[y | x] <= e^ε · Pr[y | x']``. Every method here has each user report **once, with the full
ε** (user division, never budget splitting); when a method needs several measurements, the
user-to-group assignment is public and independent of the data.

The three pieces (and how a new method plugs in)
------------------------------------------------
:class:`LDPProtocol` (subclass it; one class per method, e.g. ``GRR``, ``OLH``, ``HIO``) holds the
*public* configuration: the :class:`~fugu.Domain`, ε and method parameters. Subclasses set the
class attributes ``name`` (wire name, lower case) and ``version`` and implement five hooks:

``_params() -> dict``
    JSON-able method parameters (beyond ``epsilon`` and ``domain``) that client and server must
    agree on. They go into every report header.
``report_columns() -> dict[str, ColumnSpec]``
    The report's columns: ``"int"`` (int64), ``"uint32"``, ``"float"`` (float64) or
    ``("bytes", width)`` (a packed bit vector stored as an (n, width) uint8 array).
``_perturb(codes, rng, groups) -> dict[str, ndarray]``
    The randomiser, vectorised over users. ``codes`` is the (n, d) array of per-attribute codes
    (``Domain.encode_columns``), ``groups`` the public group of each user (or None for methods
    without groups). All privacy randomness must come from ``rng`` (a
    :class:`~fugu.RandomSource`, exact Bernoulli / uniform draws).
``_validate(columns) -> ndarray[bool]``
    Which rows are well-formed reports of this protocol (values in range). Rows that fail are
    rejected and counted, never used.
``support(columns) -> dict[str, ndarray]``
    **The only step whose cost grows with the number of reports**: a pure, vectorised function
    from (already validated) report columns to partial state (support counts). Partial states of
    disjoint partitions combine with :meth:`LDPProtocol.merge_state` (element-wise sum by
    default), so an engine (DuckDB, Spark) may run ``support`` per partition and sum.
    :meth:`LDPProtocol.partial` wraps validation + support for one partition and returns
    ``(state, n_accepted, rejected)``; :meth:`Aggregator.add_partial` absorbs the sum.
``_estimate(state, n) -> Release``
    Post-processing of the merged state into a :class:`~fugu.Release` with ``model="ldp"``.

Optionally ``n_groups`` (> 0 for methods that divide users) and ``assign_groups``.

:class:`Client` (``protocol.client(rng)``) runs the randomiser: ``perturb(records)`` →
:class:`Reports` (vectorised, for simulation and batch clients) and ``perturb_one(record)`` →
a JSON-able dict (the per-record path an app embeds).

:class:`Aggregator` (``protocol.aggregator()``) validates and absorbs reports: ``add(reports)``,
``add_rows(rows)``, ``merge(other)``, ``estimate()`` → Release. Counters ``n_accepted`` and
``rejected`` (reason → count) say what was used.

Wire format (version 1)
-----------------------
A batch of reports is a header plus columns. The header is the JSON object::

    {"format": "fugu-ldp-reports", "format_version": 1, "protocol": "olh", "version": 1,
     "params": {"epsilon": 1.0, "domain": {...}, "g": 4, ...}, "private": true}

* **JSON lines** (``.jsonl``): the first line is the header; every further line is one report,
  an object with one key per column (ints, floats; a bit vector as a lower-case hex string of its
  packed bytes, least-significant bit first within each byte). Lines that do not parse or miss a
  column are counted as ``malformed`` (a truncated file loses only its last line).
* **Arrow / Parquet** (``.arrow``, ``.parquet``): one column per report column (bit vectors as
  ``fixed_size_binary``), the header JSON under the schema metadata key ``fugu.ldp``.

The aggregator refuses (``ReportError``) a batch whose header names another protocol, another
protocol version or other parameters (for instance another ε): those reports were randomised
under another contract and cannot be decoded correctly.

Example
-------
>>> import fugu
>>> dom = fugu.Domain([fugu.Ordinal("age", 0, 9)])
>>> grr = fugu.ldp.GRR(dom, epsilon=1.0)
>>> reports = grr.client(fugu.RandomSource(seed=1)).perturb({"age": [1, 2, 2, 9]})
>>> len(reports), reports.protocol
(4, 'grr')
>>> rel = grr.aggregate(reports)
>>> rel.guarantee.model, rel.guarantee.private
('ldp', False)
"""

from __future__ import annotations

import json
import math
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, ClassVar

import numpy as np
from numpy.typing import ArrayLike, NDArray

from ..domain import Domain
from ..errors import (
    EmptyDataError,
    InvalidParameterError,
    InvalidTypeError,
    ReportError,
    check_epsilon,
)
from ..mechanism import guarantee as make_guarantee
from ..noise import RandomSource, default_source
from ..release import Guarantee, Release

__all__ = [
    "WIRE_FORMAT",
    "WIRE_VERSION",
    "ColumnSpec",
    "Reports",
    "LDPProtocol",
    "Client",
    "Aggregator",
    "LDP_NEIGHBOURS",
]

WIRE_FORMAT = "fugu-ldp-reports"
WIRE_VERSION = 1
LDP_NEIGHBOURS = "any two values of one user (local DP: each user randomises their own record)"

ColumnSpec = str | tuple[str, int]
_DTYPES = {"int": np.int64, "uint32": np.uint32, "float": np.float64}


def _empty_column(spec: ColumnSpec, n: int = 0) -> np.ndarray:
    if isinstance(spec, tuple):
        return np.zeros((n, spec[1]), dtype=np.uint8)
    return np.zeros(n, dtype=_DTYPES[spec])


def _coerce_column(name: str, spec: ColumnSpec, values: Any) -> np.ndarray:
    arr = np.asarray(values)
    if isinstance(spec, tuple):
        if arr.ndim != 2 or arr.shape[1] != spec[1]:
            raise ReportError(
                f"report column {name!r} must be packed bits of {spec[1]} bytes per report, got "
                f"shape {arr.shape}"
            )
        return arr.astype(np.uint8, copy=False)
    if arr.ndim != 1:
        raise ReportError(f"report column {name!r} must be one-dimensional, got shape {arr.shape}")
    dtype = _DTYPES[spec]
    if spec != "float":
        if arr.dtype.kind == "f":
            if not np.all(np.isfinite(arr)) or not np.all(arr == np.round(arr)):
                raise ReportError(f"report column {name!r} must hold integers")
        elif arr.dtype.kind not in "iub" and arr.size:
            raise ReportError(f"report column {name!r} must hold integers, got {arr.dtype}")
    return arr.astype(dtype, copy=False)


# -- reports ------------------------------------------------------------------------------------
@dataclass
class Reports:
    """A batch of randomised reports with the header that says how to decode them.

    Attributes
    ----------
    protocol, version : the method's wire name and version
    params : the public parameters the reports were made with (``epsilon``, ``domain``, ...)
    columns : report columns, each with ``n`` rows
    n : number of reports
    private : False when the client used a seeded (reproducible, not private) random source
    malformed : rows that could not be read from a file (counted as rejected when aggregated)
    """

    protocol: str
    version: int
    params: dict[str, Any]
    columns: dict[str, np.ndarray]
    n: int
    private: bool = True
    malformed: int = 0
    extra: dict[str, Any] = field(default_factory=dict)

    def __len__(self) -> int:
        return self.n

    def header(self) -> dict[str, Any]:
        return {
            "format": WIRE_FORMAT,
            "format_version": WIRE_VERSION,
            "protocol": self.protocol,
            "version": self.version,
            "params": self.params,
            "private": self.private,
        }

    def take(self, index: ArrayLike) -> Reports:
        """The reports at ``index`` (an integer array or boolean mask): a partition."""
        idx = np.asarray(index)
        cols = {k: v[idx] for k, v in self.columns.items()}
        n = int(idx.sum()) if idx.dtype == bool else int(idx.size)
        return replace(self, columns=cols, n=n, malformed=0)

    @staticmethod
    def concat(batches: Sequence[Reports]) -> Reports:
        """One batch from several with the same header."""
        if not batches:
            raise EmptyDataError("no report batches to concatenate")
        first = batches[0]
        for b in batches[1:]:
            if (b.protocol, b.version, b.params) != (first.protocol, first.version, first.params):
                raise ReportError("cannot concatenate report batches with different headers")
        cols = {k: np.concatenate([b.columns[k] for b in batches]) for k in first.columns}
        return replace(
            first,
            columns=cols,
            n=sum(b.n for b in batches),
            private=all(b.private for b in batches),
            malformed=sum(b.malformed for b in batches),
        )

    # -- rows (per-record path, JSON lines) -----------------------------------------------------
    def rows(self) -> list[dict[str, Any]]:
        """The reports as JSON-able dicts (bit vectors as hex strings)."""
        out: list[dict[str, Any]] = [{} for _ in range(self.n)]
        for k, v in self.columns.items():
            if v.ndim == 2:
                vals: list[Any] = [bytes(r).hex() for r in v]
            else:
                vals = v.tolist()
            for row, x in zip(out, vals, strict=True):
                row[k] = x
        return out

    @classmethod
    def from_rows(
        cls, header: Mapping[str, Any], rows: Iterable[Any], specs: Mapping[str, ColumnSpec]
    ) -> Reports:
        """Rebuild a batch from per-report dicts; rows that do not fit ``specs`` are counted as
        ``malformed`` and dropped."""
        good: dict[str, list[Any]] = {k: [] for k in specs}
        bad = 0
        for row in rows:
            parsed = _parse_row(row, specs)
            if parsed is None:
                bad += 1
                continue
            for k, v in parsed.items():
                good[k].append(v)
        n = len(next(iter(good.values()))) if good else 0
        cols: dict[str, np.ndarray] = {}
        for k, spec in specs.items():
            if isinstance(spec, tuple):
                cols[k] = (
                    np.frombuffer(b"".join(good[k]), dtype=np.uint8).reshape(n, spec[1])
                    if n
                    else _empty_column(spec)
                )
            else:
                cols[k] = np.asarray(good[k], dtype=_DTYPES[spec]) if n else _empty_column(spec)
        return cls(
            protocol=str(header["protocol"]),
            version=int(header["version"]),
            params=dict(header["params"]),
            columns=cols,
            n=n,
            private=bool(header.get("private", True)),
            malformed=bad,
        )

    # -- files ----------------------------------------------------------------------------------
    def save(self, path: str | Path) -> Path:
        """Write to ``.jsonl``, ``.parquet`` or ``.arrow`` (chosen by the suffix)."""
        p = Path(path)
        suffix = p.suffix.lower()
        if suffix in (".jsonl", ".json", ".ndjson"):
            with open(p, "w", encoding="utf-8") as fh:
                fh.write(json.dumps(self.header()) + "\n")
                for row in self.rows():
                    fh.write(json.dumps(row, separators=(",", ":")) + "\n")
        elif suffix in (".parquet", ".arrow", ".feather"):
            import pyarrow as pa

            table = self.to_arrow()
            if suffix == ".parquet":
                import pyarrow.parquet as pq

                pq.write_table(table, p)
            else:
                with pa.OSFile(str(p), "wb") as sink, pa.ipc.new_file(sink, table.schema) as w:
                    w.write_table(table)
        else:
            raise InvalidParameterError(
                f"report file {str(p)!r}: use a .jsonl, .parquet or .arrow suffix"
            )
        return p

    def to_arrow(self) -> Any:
        """A ``pyarrow.Table`` with the header in the schema metadata key ``fugu.ldp``."""
        import pyarrow as pa

        arrays = []
        names = []
        for k, v in self.columns.items():
            names.append(k)
            if v.ndim == 2:
                width = v.shape[1]
                buf = pa.py_buffer(np.ascontiguousarray(v).tobytes())
                arrays.append(pa.Array.from_buffers(pa.binary(width), len(v), [None, buf]))
            else:
                arrays.append(pa.array(v))
        meta = {b"fugu.ldp": json.dumps(self.header()).encode()}
        if not names:
            schema = pa.schema([pa.field("_n", pa.int8())], metadata=meta)
            return pa.Table.from_arrays([pa.array(np.zeros(self.n, np.int8))], schema=schema)
        return pa.Table.from_arrays(arrays, names=names).replace_schema_metadata(meta)

    @classmethod
    def from_arrow(cls, table: Any, specs: Mapping[str, ColumnSpec] | None = None) -> Reports:
        """Read a table written by :meth:`to_arrow` (header from the schema metadata)."""
        meta = table.schema.metadata or {}
        if b"fugu.ldp" not in meta:
            raise ReportError("the table has no fugu.ldp header in its schema metadata")
        header = _check_header(json.loads(meta[b"fugu.ldp"]))
        cols: dict[str, np.ndarray] = {}
        for name in table.column_names:
            if name == "_n":
                continue
            col = table.column(name).combine_chunks()
            if hasattr(col.type, "byte_width") and col.type.id == 15:  # fixed_size_binary
                width = col.type.byte_width
                raw = np.frombuffer(col.buffers()[1], dtype=np.uint8)
                start = col.offset * width
                cols[name] = raw[start : start + len(col) * width].reshape(len(col), width)
            else:
                cols[name] = col.to_numpy(zero_copy_only=False)
        return cls(
            protocol=str(header["protocol"]),
            version=int(header["version"]),
            params=dict(header["params"]),
            columns=cols,
            n=table.num_rows,
            private=bool(header.get("private", True)),
        )

    @classmethod
    def load(cls, path: str | Path, specs: Mapping[str, ColumnSpec] | None = None) -> Reports:
        """Read a report file written by :meth:`save` (or by another client following the
        documented format). For JSON lines, ``specs`` (default: the protocol's own columns,
        looked up in the registry) says which columns each line must have."""
        p = Path(path)
        if not p.exists():
            raise InvalidParameterError(f"report file {str(p)!r} does not exist")
        suffix = p.suffix.lower()
        if suffix in (".parquet", ".arrow", ".feather"):
            import pyarrow as pa

            try:
                if suffix == ".parquet":
                    import pyarrow.parquet as pq

                    table = pq.read_table(p)
                else:
                    with pa.memory_map(str(p)) as src:
                        table = pa.ipc.open_file(src).read_all()
            except (OSError, pa.ArrowException) as exc:
                raise ReportError(
                    f"report file {str(p)!r} cannot be read ({exc}); it may be truncated: "
                    f"ask the client to send it again"
                ) from None
            return cls.from_arrow(table)
        with open(p, encoding="utf-8") as fh:
            first = fh.readline()
            try:
                header = _check_header(json.loads(first))
            except (json.JSONDecodeError, TypeError):
                raise ReportError(
                    f"report file {str(p)!r} does not start with a fugu-ldp-reports header line"
                ) from None
            if specs is None:
                specs = protocol_from_header(header).report_columns()
            return cls.from_rows(header, (_loads(line) for line in fh if line.strip()), specs)


def _loads(line: str) -> Any:
    try:
        return json.loads(line)
    except json.JSONDecodeError:
        return None


def _parse_row(row: Any, specs: Mapping[str, ColumnSpec]) -> dict[str, Any] | None:
    if not isinstance(row, Mapping):
        return None
    out: dict[str, Any] = {}
    for k, spec in specs.items():
        if k not in row:
            return None
        v = row[k]
        if isinstance(spec, tuple):
            if not isinstance(v, str):
                return None
            try:
                b = bytes.fromhex(v)
            except ValueError:
                return None
            if len(b) != spec[1]:
                return None
            out[k] = b
        elif spec == "float":
            if isinstance(v, bool) or not isinstance(v, int | float) or not math.isfinite(v):
                return None
            out[k] = float(v)
        else:
            if isinstance(v, bool) or not isinstance(v, int):
                return None
            if spec == "uint32" and not 0 <= v < 2**32:
                return None
            if spec == "int" and not -(2**63) <= v < 2**63:
                return None
            out[k] = v
    return out


def _check_header(header: Any) -> dict[str, Any]:
    if not isinstance(header, Mapping) or header.get("format") != WIRE_FORMAT:
        raise ReportError(f"not a {WIRE_FORMAT} header: {str(header)[:120]!r}")
    if int(header.get("format_version", 0)) > WIRE_VERSION:
        raise ReportError(
            f"reports use wire format {header.get('format_version')}, this fugu reads up to "
            f"{WIRE_VERSION}; upgrade fugu"
        )
    for key in ("protocol", "version", "params"):
        if key not in header:
            raise ReportError(f"report header lacks {key!r}")
    return dict(header)


def protocol_from_header(header: Mapping[str, Any]) -> LDPProtocol:
    """Rebuild the protocol object (public parameters) named by a report header."""
    from .registry import METHODS

    name = header["protocol"]
    cls = METHODS.get(name)
    if cls is None:
        raise ReportError(f"unknown LDP protocol {name!r}; known: {sorted(METHODS)}")
    return cls.from_params(header["params"])


# -- protocol ----------------------------------------------------------------------------------
class LDPProtocol:
    """Base class of every LDP method (public configuration; see the module docstring)."""

    name: ClassVar[str] = "protocol"
    version: ClassVar[int] = 1
    summary: ClassVar[str] = ""
    source: ClassVar[str] = ""

    def __init__(self, domain: Domain, epsilon: float) -> None:
        if not isinstance(domain, Domain):
            raise InvalidTypeError(
                f"domain must be a fugu.Domain, got {type(domain).__name__}; e.g. "
                f"fugu.Domain([fugu.Ordinal('age', 0, 99)])"
            )
        self.domain = domain
        self.epsilon = check_epsilon(epsilon)

    # -- hooks ----------------------------------------------------------------------------------
    def _params(self) -> dict[str, Any]:
        return {}

    def report_columns(self) -> dict[str, ColumnSpec]:
        raise NotImplementedError

    @property
    def n_groups(self) -> int:
        """Number of user groups (0: the method does not divide users)."""
        return 0

    def _perturb(
        self, codes: NDArray[np.int64], rng: RandomSource, groups: NDArray[np.int64] | None
    ) -> dict[str, np.ndarray]:
        raise NotImplementedError

    def _validate(self, columns: Mapping[str, np.ndarray]) -> NDArray[np.bool_]:
        raise NotImplementedError

    def support(self, columns: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
        raise NotImplementedError

    def empty_state(self) -> dict[str, np.ndarray]:
        cols = {k: _empty_column(s) for k, s in self.report_columns().items()}
        return self.support(cols)

    def merge_state(
        self, a: Mapping[str, np.ndarray], b: Mapping[str, np.ndarray]
    ) -> dict[str, np.ndarray]:
        """Combine the partial states of two disjoint partitions (default: element-wise sum)."""
        return {k: a[k] + b[k] for k in a}

    def _estimate(self, state: Mapping[str, np.ndarray], n: int) -> Release:
        raise NotImplementedError

    def partial(
        self, columns: Mapping[str, Any]
    ) -> tuple[dict[str, np.ndarray], int, Counter[str]]:
        """Validate report columns and count support: ``(state, n_accepted, rejected)``.

        A pure function of one batch (no header check: the caller has matched the batch's
        header against this protocol). Engines run it per partition and combine the states with
        :meth:`merge_state`, then hand the sum to :meth:`Aggregator.add_partial`.
        """
        specs = self.report_columns()
        rejected: Counter[str] = Counter()
        n = len(next(iter(columns.values()))) if columns else 0
        try:
            cols = {k: _coerce_column(k, specs[k], columns[k]) for k in specs}
        except (ReportError, KeyError):
            rejected["wrong type"] += n
            return self.empty_state(), 0, rejected
        ok = np.asarray(self._validate(cols), dtype=bool)
        n_bad = int(ok.size - ok.sum())
        if n_bad:
            rejected["out of range"] += n_bad
            cols = {k: v[ok] for k, v in cols.items()}
        return self.support(cols), int(ok.sum()), rejected

    # -- public API -----------------------------------------------------------------------------
    def params(self) -> dict[str, Any]:
        """Every public parameter client and server must share (goes into report headers)."""
        return {"epsilon": self.epsilon, "domain": self.domain.to_dict(), **self._params()}

    @classmethod
    def from_params(cls, params: Mapping[str, Any]) -> LDPProtocol:
        """Rebuild from :meth:`params` (the server side of a report file)."""
        p = dict(params)
        dom = Domain.from_dict(p.pop("domain"))
        eps = p.pop("epsilon")
        return cls(dom, eps, **p)  # type: ignore[call-arg]

    def header(self, private: bool = True) -> dict[str, Any]:
        return Reports(self.name, self.version, self.params(), {}, 0, private).header()

    def client(self, rng: RandomSource | None = None) -> Client:
        """The user-side randomiser (secure random source by default)."""
        return Client(self, rng)

    def aggregator(self) -> Aggregator:
        """An empty server-side aggregator."""
        return Aggregator(self)

    def aggregate(
        self,
        reports: Any,
        *,
        engine: str = "numpy",
        header: Mapping[str, Any] | None = None,
        **engine_options: Any,
    ) -> Release:
        """Validate and aggregate reports, and estimate: the whole server side in one call.

        ``reports``: a :class:`Reports` batch (or a list of them), an Arrow table made by
        :meth:`Reports.to_arrow`, a report file (``.parquet``/``.arrow`` read by the engine,
        ``.jsonl`` read in memory), or a Spark DataFrame of report columns. ``engine``:
        ``"numpy"`` (default), ``"duckdb"`` or ``"spark"`` (see :mod:`fugu.engines`), with its
        options (``batch_rows``, ``threads``, ``spark``, ``master``, ``num_partitions``). Every
        engine gives the same release: support counts are summed exactly.

        The reports' header (schema metadata of Arrow/Parquet, first line of JSON lines) is
        checked against this protocol; a Spark DataFrame or CSV file carries none, so pass
        ``header=`` (for instance ``reports.header()``) or the reports are taken to follow this
        protocol's parameters. Unreadable or out-of-range rows are rejected and counted.
        """
        return self.aggregator_for(
            reports, engine=engine, header=header, **engine_options
        ).estimate()

    def aggregator_for(
        self,
        reports: Any,
        *,
        engine: str = "numpy",
        header: Mapping[str, Any] | None = None,
        **engine_options: Any,
    ) -> Aggregator:
        """The aggregator after absorbing ``reports`` on ``engine`` (see :meth:`aggregate`),
        before estimation: its ``n_accepted`` and ``rejected`` say what was used."""
        from ..engines import check_engine

        check_engine(engine)
        if isinstance(reports, Reports):
            items: list[Any] = [reports]
        elif isinstance(reports, list | tuple) and reports:
            items = list(reports)
        else:
            items = [reports]
        agg: Aggregator | None = None
        for item in items:
            agg = self._absorb(agg, item, engine, header, dict(engine_options))
        assert agg is not None
        return agg

    def _for_reports(self, reports: Reports) -> LDPProtocol:
        """The protocol that decodes ``reports`` (grid methods take granularities from them)."""
        return self

    def _absorb(
        self,
        agg: Aggregator | None,
        item: Any,
        engine: str,
        header: Mapping[str, Any] | None,
        opts: dict[str, Any],
    ) -> Aggregator:
        from ..engines.ldp import aggregate_reports, read_header

        if isinstance(item, str | Path) and Path(item).suffix.lower() in (
            ".jsonl",
            ".json",
            ".ndjson",
        ):
            item = Reports.load(item)
        if isinstance(item, Reports):
            hdr: dict[str, Any] | None = item.header()
            malformed = item.malformed
        else:
            hdr = read_header(item)
            malformed = 0
        if header is not None:
            given = _check_header(dict(header))
            if hdr is not None and json.loads(json.dumps(hdr["params"])) != json.loads(
                json.dumps(given["params"])
            ):
                raise ReportError("header= differs from the header the reports carry")
            hdr = hdr if hdr is not None else given
        stub = None
        if hdr is not None:
            hdr = _check_header(hdr)
            stub = Reports(
                str(hdr["protocol"]),
                int(hdr["version"]),
                dict(hdr["params"]),
                {},
                0,
                private=bool(hdr.get("private", True)),
            )
        if agg is None:
            proto = self._for_reports(stub) if stub is not None else self
            agg = proto.aggregator()
        if stub is not None:
            agg._check_header(stub)
        if isinstance(item, Reports):
            if engine == "numpy" and not opts:
                return agg.add(item)
            src: Any = item.columns if engine == "numpy" else item.to_arrow()
            if item.n == 0:
                if malformed:
                    agg.rejected["malformed"] += malformed
                return agg
        else:
            src = item
        try:
            state, n_ok, rejected = aggregate_reports(agg.protocol, src, engine=engine, **opts)
        except EmptyDataError:  # an empty batch / partition set: nothing to absorb
            state, n_ok, rejected = agg.protocol.empty_state(), 0, Counter()
        agg.add_partial(state, n_ok, rejected, private=stub.private if stub is not None else True)
        if malformed:
            agg.rejected["malformed"] += malformed
        return agg

    def simulate(
        self,
        records: Any,
        rng: RandomSource | None = None,
        *,
        engine: str = "numpy",
        **engine_options: Any,
    ) -> Release:
        """Client and server in one call (experiments): perturb every record (in memory),
        aggregate on ``engine`` (see :meth:`aggregate`)."""
        return self.aggregate(self.client(rng).perturb(records), engine=engine, **engine_options)

    def assign_groups(self, n: int, rng: RandomSource) -> NDArray[np.int64]:
        """Public, data-independent, balanced assignment of ``n`` users to the method's groups:
        a random permutation of ``0, 1, …, m−1, 0, 1, …`` (group sizes differ by at most 1)."""
        m = self.n_groups
        if m <= 0:
            raise InvalidParameterError(f"{self.name} does not divide users into groups")
        gen = rng.numpy_generator()
        return gen.permutation(np.arange(n, dtype=np.int64) % m)

    def encode(self, records: Any) -> NDArray[np.int64]:
        """Records (mapping of columns, DataFrame, or an (n, d) code array) → (n, d) codes."""
        if isinstance(records, np.ndarray):
            codes = np.asarray(records)
            if codes.ndim == 1 and self.domain.ndim == 1:
                codes = codes[:, None]
            if codes.ndim != 2 or codes.shape[1] != self.domain.ndim:
                raise InvalidParameterError(
                    f"a code array must have shape (n, {self.domain.ndim}), got {codes.shape}"
                )
            if codes.dtype.kind not in "iu":
                raise InvalidTypeError(f"codes must be integers, got {codes.dtype}")
            shape = np.asarray(self.domain.shape)
            bad = (codes < 0) | (codes >= shape)
            if bad.any():
                j = int(np.argwhere(bad)[0][1])
                from ..errors import DomainError

                raise DomainError(
                    f"codes of attribute {self.domain.names[j]!r} must lie in [0, "
                    f"{int(shape[j])}); got {int(codes[bad.any(axis=1)][0, j])}"
                )
            return codes.astype(np.int64, copy=False)
        if hasattr(records, "to_pydict") and not isinstance(records, Mapping):
            records = records.to_pydict()
        if not hasattr(records, "__getitem__"):
            raise InvalidTypeError(
                f"records must be a mapping of columns, a DataFrame or an (n, d) code array, got "
                f"{type(records).__name__}"
            )
        return self.domain.encode_columns(records)

    def guarantee(
        self, *, private: bool, n: int, post_processing: tuple[str, ...] = ()
    ) -> Guarantee:
        g = make_guarantee(
            model="ldp",
            epsilon=self.epsilon,
            neighbours=LDP_NEIGHBOURS,
            mechanism=self.name,
            rng=default_source(None),
            sensitivity=None,
            source=self.source,
            parameters={**self._params(), "n_reports": n},
            post_processing=post_processing,
        )
        return replace(g, private=private)

    def __repr__(self) -> str:
        extra = ", ".join(f"{k}={v!r}" for k, v in self._params().items())
        sep = ", " if extra else ""
        return f"{type(self).__name__}({self.domain!r}, epsilon={self.epsilon:g}{sep}{extra})"


# -- client --------------------------------------------------------------------------------------
class Client:
    """The user-side randomiser of a protocol.

    ``perturb(records)`` randomises a batch (vectorised); ``perturb_one(record)`` randomises one
    record and returns a JSON-able dict, one line of the JSON-lines wire format.
    """

    def __init__(self, protocol: LDPProtocol, rng: RandomSource | None = None) -> None:
        self.protocol = protocol
        self.rng = default_source(rng)

    def perturb(self, records: Any, groups: ArrayLike | None = None) -> Reports:
        """Randomise every record; ``groups`` (public, optional) fixes each user's group."""
        p = self.protocol
        codes = p.encode(records)
        n = codes.shape[0]
        g: NDArray[np.int64] | None = None
        if p.n_groups > 0:
            if groups is None:
                g = p.assign_groups(n, self.rng)
            else:
                g = np.asarray(groups, dtype=np.int64).reshape(-1)
                if g.size != n or (n and (g.min() < 0 or g.max() >= p.n_groups)):
                    raise InvalidParameterError(
                        f"groups must be {n} integers in [0, {p.n_groups}), one per record"
                    )
        cols = (
            p._perturb(codes, self.rng, g)
            if n
            else {k: _empty_column(s) for k, s in p.report_columns().items()}
        )
        specs = p.report_columns()
        cols = {k: _coerce_column(k, specs[k], cols[k]) for k in specs}
        return Reports(p.name, p.version, p.params(), cols, n, private=self.rng.private)

    def perturb_one(self, record: Mapping[str, Any], group: int | None = None) -> dict[str, Any]:
        """Randomise one user's record (``{attribute: value}``) into one report dict.

        The group, for methods that divide users, is drawn uniformly at random when not given
        (public randomness, independent of the record).
        """
        p = self.protocol
        codes = p.encode({k: [record[k]] for k in p.domain.names})
        g = None
        if p.n_groups > 0:
            if group is None:
                group = int(self.rng.integers(p.n_groups))
            if not 0 <= int(group) < p.n_groups:
                raise InvalidParameterError(f"group must lie in [0, {p.n_groups}), got {group}")
            g = np.array([int(group)], dtype=np.int64)
        cols = p._perturb(codes, self.rng, g)
        specs = p.report_columns()
        row: dict[str, Any] = {}
        for k, spec in specs.items():
            v = np.asarray(cols[k])[0]
            row[k] = bytes(np.asarray(v, np.uint8)).hex() if isinstance(spec, tuple) else v.item()
        return row

    def header(self) -> dict[str, Any]:
        """The header line to send before the rows of :meth:`perturb_one`."""
        return self.protocol.header(private=self.rng.private)


# -- aggregator ----------------------------------------------------------------------------------
class Aggregator:
    """Server side: validates reports, keeps mergeable partial state, estimates.

    ``state`` holds only what :meth:`LDPProtocol.support` derived from accepted reports (support
    counts), so two aggregators over disjoint partitions ``merge`` into exactly the aggregator
    over their union.
    """

    def __init__(self, protocol: LDPProtocol) -> None:
        self.protocol = protocol
        self.state = protocol.empty_state()
        self.n_accepted = 0
        self.rejected: Counter[str] = Counter()
        self.private = True

    @property
    def n_rejected(self) -> int:
        return sum(self.rejected.values())

    def _check_header(self, reports: Reports) -> None:
        p = self.protocol
        if reports.protocol != p.name:
            raise ReportError(
                f"reports were made by protocol {reports.protocol!r}, this aggregator decodes "
                f"{p.name!r}; aggregate them with fugu.ldp.{reports.protocol.upper()} instead"
            )
        if reports.version != p.version:
            raise ReportError(
                f"reports use {p.name} version {reports.version}, this aggregator decodes version "
                f"{p.version}"
            )
        mine = json.loads(json.dumps(p.params()))
        theirs = json.loads(json.dumps(reports.params))
        if mine != theirs:
            diff = sorted(k for k in set(mine) | set(theirs) if mine.get(k) != theirs.get(k))
            detail = ", ".join(
                f"{k}: reports {theirs.get(k)!r} vs aggregator {mine.get(k)!r}"
                for k in diff
                if k != "domain"
            )
            if "domain" in diff:
                detail = (detail + ", " if detail else "") + "domain differs"
            raise ReportError(
                f"reports were randomised with other {p.name} parameters ({detail}); they cannot "
                f"be decoded with these. Build the aggregator from the reports' header "
                f"(fugu.ldp.protocol_from_header) or ask the clients to use these parameters"
            )

    def add(self, reports: Reports) -> Aggregator:
        """Validate a batch and absorb its well-formed reports (in place; returns self)."""
        if not isinstance(reports, Reports):
            raise InvalidTypeError(f"expected fugu.ldp.Reports, got {type(reports).__name__}")
        self._check_header(reports)
        if reports.malformed:
            self.rejected["malformed"] += reports.malformed
        specs = self.protocol.report_columns()
        missing = [k for k in specs if k not in reports.columns]
        if missing:
            raise ReportError(f"{self.protocol.name} reports lack the column(s) {missing}")
        state, n_ok, rejected = self.protocol.partial(reports.columns)
        self.add_partial(state, n_ok, rejected, private=reports.private)
        return self

    def add_partial(
        self,
        state: Mapping[str, np.ndarray],
        n_accepted: int,
        rejected: Mapping[str, int] | None = None,
        *,
        private: bool = True,
    ) -> Aggregator:
        """Absorb a partial state computed elsewhere by :meth:`LDPProtocol.partial` (for
        example by an engine, per partition, on reports whose header it has checked)."""
        self.state = self.protocol.merge_state(self.state, dict(state))
        self.n_accepted += int(n_accepted)
        self.rejected.update(dict(rejected or {}))
        self.private = self.private and private
        return self

    def add_rows(self, rows: Iterable[Any], header: Mapping[str, Any] | None = None) -> Aggregator:
        """Absorb per-record report dicts (as made by :meth:`Client.perturb_one`)."""
        hdr = dict(header) if header is not None else self.protocol.header()
        return self.add(Reports.from_rows(_check_header(hdr), rows, self.protocol.report_columns()))

    def merge(self, other: Aggregator) -> Aggregator:
        """Absorb another aggregator's state (disjoint partitions; in place; returns self)."""
        if json.dumps(other.protocol.params()) != json.dumps(self.protocol.params()) or (
            other.protocol.name != self.protocol.name
        ):
            raise ReportError("cannot merge aggregators of different protocols or parameters")
        self.state = self.protocol.merge_state(self.state, other.state)
        self.n_accepted += other.n_accepted
        self.rejected += other.rejected
        self.private = self.private and other.private
        return self

    def estimate(self) -> Release:
        """The release estimated from every accepted report."""
        if self.n_accepted == 0:
            raise EmptyDataError(
                f"no valid {self.protocol.name} reports were aggregated "
                f"(rejected: {dict(self.rejected) or 'none'})"
            )
        rel = self.protocol._estimate(self.state, self.n_accepted)
        if not self.private and rel.guarantee.private:
            rel.guarantee = replace(rel.guarantee, private=False)
        return rel

    def summary(self) -> dict[str, Any]:
        return {
            "protocol": self.protocol.name,
            "accepted": self.n_accepted,
            "rejected": dict(self.rejected),
        }
