"""A batch of LDP reports and its wire format: the header, JSON lines, Arrow and Parquet.

:class:`Reports` is what a :class:`~fugu.ldp.Client` produces and an
:class:`~fugu.ldp.Aggregator` absorbs: the columns of randomised reports plus the header that
names the protocol and its public parameters. This module reads and writes it; it knows no
method (the registry, :mod:`fugu.ldp.registry`, turns a header back into a protocol object).

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
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
from numpy.typing import ArrayLike

from ..errors import EmptyDataError, InvalidParameterError, ReportError
from .wire import clean_batch

if TYPE_CHECKING:
    from .protocol import LDPProtocol

__all__ = ["WIRE_FORMAT", "WIRE_VERSION", "ColumnSpec", "Reports", "protocol_from_header"]

WIRE_FORMAT = "fugu-ldp-reports"
WIRE_VERSION = 1

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
    invalid : rows read but rejected while reading, by reason (``"wrong type"``,
        ``"out of type range"``; see :mod:`fugu.ldp.wire`), counted as rejected when aggregated
    """

    protocol: str
    version: int
    params: dict[str, Any]
    columns: dict[str, np.ndarray]
    n: int
    private: bool = True
    malformed: int = 0
    extra: dict[str, Any] = field(default_factory=dict)
    invalid: dict[str, int] = field(default_factory=dict)

    def __len__(self) -> int:
        return self.n

    def __repr__(self) -> str:
        cols = ", ".join(f"{k}:{v.dtype}{list(v.shape[1:]) or ''}" for k, v in self.columns.items())
        rejected = self.malformed + sum(self.invalid.values())
        return (
            f"Reports({self.protocol!r} v{self.version}, n={self.n}, "
            f"epsilon={self.params.get('epsilon')!r}, columns=[{cols}], private={self.private}"
            + (f", rejected_on_read={rejected}" if rejected else "")
            + ")"
        )

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
        """The reports at ``index`` (an integer array or boolean mask): a partition.

        The rows rejected while the batch was read (:attr:`malformed`, :attr:`invalid`) belong
        to no partition and are not carried over (each part would count them again). To keep
        them in the release's record when aggregating the parts, add them once:
        ``agg.add_partial(protocol.empty_state(), 0, {"malformed": batch.malformed,
        **batch.invalid})``.
        """
        idx = np.asarray(index).reshape(-1) if np.ndim(index) else np.asarray(index)
        if idx.dtype == bool:
            if idx.shape != (self.n,):
                raise InvalidParameterError(
                    f"a boolean index must have one entry per report ({self.n}), got shape "
                    f"{idx.shape}"
                )
            n = int(idx.sum())
        else:
            if idx.size == 0:
                idx = idx.astype(np.int64)
            if idx.ndim != 1 or idx.dtype.kind not in "iu":
                raise InvalidParameterError(
                    f"index must be report positions (integers) or a boolean mask of length "
                    f"{self.n}, got {idx.dtype} of shape {idx.shape}"
                )
            if idx.size and (idx.min() < 0 or idx.max() >= self.n):
                raise InvalidParameterError(
                    f"index positions must lie in [0, {self.n}) (no negative positions), got "
                    f"{int(idx.min())}..{int(idx.max())}"
                )
            if np.unique(idx).size != idx.size:
                raise InvalidParameterError(
                    "index repeats a position: the part would hold that report twice and an "
                    "aggregator would count it twice; give each position once"
                )
            n = int(idx.size)
        cols = {k: v[idx] for k, v in self.columns.items()}
        return replace(self, columns=cols, n=n, malformed=0, invalid={})

    @staticmethod
    def concat(batches: Sequence[Reports]) -> Reports:
        """One batch from several with the same header."""
        if not batches:
            raise EmptyDataError("no report batches to concatenate")
        first = batches[0]
        seen: set[int] = set()
        for b in batches:
            if id(b) in seen:
                raise ReportError(
                    "the same batch appears twice in concat: its reports would count twice; "
                    "give each batch once"
                )
            seen.add(id(b))
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
            invalid=dict(sum((Counter(b.invalid) for b in batches), Counter())),
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
        """Rebuild a batch from per-report dicts (bit vectors as hex strings). A row that is not
        an object with every column is counted as ``malformed``; a value that is not exactly of
        its column's type as ``wrong type`` or ``out of type range`` (in :attr:`invalid`). Such
        rows are dropped, never converted."""
        raw: dict[str, list[Any]] = {k: [] for k in specs}
        bad = 0
        for row in rows:
            if not isinstance(row, Mapping) or any(k not in row for k in specs):
                bad += 1
                continue
            for k, spec in specs.items():
                v = row[k]
                if isinstance(spec, tuple) and isinstance(v, str):
                    try:
                        v = bytes.fromhex(v)
                    except ValueError:
                        pass  # text that is not hex: a wrong type, classified below
                raw[k].append(v)
        n = len(next(iter(raw.values()))) if raw else 0
        items = {k: np.array(v + [None], dtype=object)[:-1] for k, v in raw.items()}
        cols, rejected = clean_batch(specs, items, n=n)
        bad += rejected.pop("malformed", 0)
        return cls(
            protocol=str(header["protocol"]),
            version=int(header["version"]),
            params=dict(header["params"]),
            columns=cols,
            n=len(next(iter(cols.values()))) if cols else 0,
            private=bool(header.get("private", True)),
            malformed=bad,
            invalid=dict(rejected),
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
        from ..engines.ldp import arrow_column

        # numbers and bit vectors as numpy (bit vectors: one view of the Arrow buffer); a column
        # with nulls as objects. Nothing is converted here: the aggregator checks every value.
        cols = {
            name: arrow_column(table.column(name)) for name in table.column_names if name != "_n"
        }
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
        # bytes, one line at a time: a line that is not UTF-8 or not JSON (or that JSON cannot
        # hold: an integer of over 4300 digits, arrays nested beyond the recursion limit) is a
        # malformed report, never the end of the whole file
        with open(p, "rb") as fh:
            first = _loads(fh.readline())
            if first is None:
                raise ReportError(
                    f"report file {str(p)!r} does not start with a fugu-ldp-reports header line"
                )
            header = _check_header(first)
            if specs is None:
                specs = protocol_from_header(header).report_columns()
            return cls.from_rows(header, (_loads(line) for line in fh if line.strip()), specs)


def _loads(line: bytes | str) -> Any:
    """One JSON line, or None when it cannot be read (counted as malformed)."""
    try:
        return json.loads(line)
    except (ValueError, RecursionError):  # JSONDecodeError, UnicodeDecodeError, int digits
        return None


_HEADER_TYPES: dict[str, tuple[type, str]] = {
    "format_version": (int, "an integer"),
    "protocol": (str, "a method name such as 'olh'"),
    "version": (int, "an integer"),
    "params": (Mapping, "an object of parameters"),
    "private": (bool, "true or false"),
}


def _check_header(header: Any) -> dict[str, Any]:
    """``header`` as a dict after checking its fields' types: a report header comes from the
    clients, so a wrong type is a :class:`~fugu.errors.ReportError` naming the field, never a
    bare TypeError, nor a ``"private": "false"`` read as true."""
    from ..errors import short_repr

    if not isinstance(header, Mapping) or header.get("format") != WIRE_FORMAT:
        raise ReportError(f"not a {WIRE_FORMAT} header: {str(header)[:120]!r}")
    for key in ("protocol", "version", "params"):
        if key not in header:
            raise ReportError(f"report header lacks {key!r}")
    for key, (kind, what) in _HEADER_TYPES.items():
        v = header.get(key)
        if key in header and (not isinstance(v, kind) or (kind is int and isinstance(v, bool))):
            raise ReportError(
                f"report header field {key!r} must be {what}, got {short_repr(v)}; the reports "
                f"were not written by a fugu client (or the file is damaged): ask for them again"
            )
    if header.get("format_version", 0) > WIRE_VERSION:
        raise ReportError(
            f"reports use wire format {header.get('format_version')}, this fugu reads up to "
            f"{WIRE_VERSION}; upgrade fugu"
        )
    return dict(header)


def protocol_from_header(header: Mapping[str, Any]) -> LDPProtocol:
    """Rebuild the protocol object (public parameters) named by a report header."""
    from ..errors import FuguError, short_repr
    from .registry import METHODS

    name = header["protocol"]
    cls = METHODS.get(name) if isinstance(name, str) else None
    if cls is None:
        raise ReportError(f"unknown LDP protocol {short_repr(name)}; known: {sorted(METHODS)}")
    params = header["params"]
    if not isinstance(params, Mapping):
        raise ReportError(f"report header params must be an object, got {short_repr(params)}")
    missing = [k for k in ("epsilon", "domain") if k not in params]
    if missing:
        raise ReportError(
            f"the {name} report header's params lack {' and '.join(map(repr, missing))}; the "
            f"reports cannot be decoded without them: ask the client for its header"
        )
    try:
        return cls.from_params(params)
    except FuguError as exc:
        raise ReportError(f"the {name} report header's params are not usable: {exc}") from None
    except (TypeError, KeyError, ValueError) as exc:
        raise ReportError(
            f"the {name} report header's params {short_repr(sorted(params))} do not describe the "
            f"{name} protocol ({type(exc).__name__}: {exc}); ask the client for its header"
        ) from None
