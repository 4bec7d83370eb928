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
import warnings
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

import numpy as np
from numpy.typing import ArrayLike, NDArray

from ..domain import Domain
from ..errors import (
    EmptyDataError,
    FuguError,
    InvalidParameterError,
    InvalidTypeError,
    ReportError,
    check_epsilon,
)
from ..mechanism import guarantee as make_guarantee
from ..noise import RandomSource, default_source
from ..release import Guarantee, Release
from .wire import REASONS, clean_batch

if TYPE_CHECKING:
    from ..budget import Accountant

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
        """The reports at ``index`` (an integer array or boolean mask): a partition."""
        idx = np.asarray(index)
        cols = {k: v[idx] for k, v in self.columns.items()}
        n = int(idx.sum()) if idx.dtype == bool else int(idx.size)
        return replace(self, columns=cols, n=n, malformed=0, invalid={})

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


# -- validation, budget ---------------------------------------------------------------------------
ON_INVALID = ("reject", "raise")
BUDGET_MODEL = "local-dp"

#: The ε range every LDP method accepts. Below 1e-6 the float64 rounding of the randomisation
#: probabilities (relative 1e-16) is no longer negligible against ε, and e^ε − 1 loses its digits;
#: above 20 the probabilities of the unlikely reports fall below 2^-29 of the likely ones, where
#: the exact samplers' 2^-64 resolution and an OLH hash range above 2^28 stop being sound choices
#: (an ε that large in local DP means no privacy at all).
EPSILON_RANGE = (1e-6, 20.0)


class RejectedReportsWarning(UserWarning):
    """Some reports were rejected by the aggregator (count by reason in the message)."""


def check_ldp_epsilon(epsilon: object, method: str = "this LDP method") -> float:
    """``epsilon`` as a float after checking it lies in :data:`EPSILON_RANGE`.

    >>> check_ldp_epsilon(1.0)
    1.0
    >>> check_ldp_epsilon(1e-9, "OLH")
    Traceback (most recent call last):
    ...
    fugu.errors.InvalidParameterError: OLH needs 1e-06 <= epsilon <= 20, got epsilon=1e-09: ...
    """
    eps = check_epsilon(epsilon)
    lo, hi = EPSILON_RANGE
    if not lo <= eps <= hi:
        why = (
            "below 1e-06 the randomisation probabilities cannot be told apart in floating point "
            "(and the estimates would have a standard deviation of more than 10^6 per user)"
            if eps < lo
            else "above 20 the unlikely reports are rarer than 2^-29 and the exact samplers can "
            "no longer honour the ratio e^epsilon (and such an epsilon gives users no privacy)"
        )
        raise InvalidParameterError(
            f"{method} needs {lo:g} <= epsilon <= {hi:g}, got epsilon={eps!r}: {why}; typical "
            f"local-DP values are 0.5 to 4"
        )
    return eps


def _check_on_invalid(on_invalid: object) -> str:
    if on_invalid not in ON_INVALID:
        raise InvalidParameterError(
            f"on_invalid must be 'reject' (leave malformed reports out, warn and record how many) "
            f"or 'raise' (refuse the batch), got {on_invalid!r}"
        )
    return str(on_invalid)


def _charge_model(accountant: Accountant | None, epsilon: float, what: str) -> str:
    """The model to charge ``accountant`` with (``"local-dp"``), after checking that the
    accountant tracks local DP and that the spend fits (nothing is spent yet)."""
    if accountant is None:
        return BUDGET_MODEL
    from ..budget import Accountant as _Accountant
    from ..budget import same_model

    if not isinstance(accountant, _Accountant):
        raise InvalidTypeError(
            f"accountant must be a fugu.Accountant, got {type(accountant).__name__}"
        )
    model = accountant.budget.model
    if not same_model(model, BUDGET_MODEL):
        raise InvalidParameterError(
            f"this accountant tracks {model!r} budget; a local-DP release ({what}) cannot be "
            f"charged to it. Declare a separate one: fugu.Accountant(fugu.budget.Budget(total, "
            f"model={BUDGET_MODEL!r}))"
        )
    accountant.check(epsilon, f"{what} (local DP)")
    return BUDGET_MODEL


_STATE = "state:"
_REJECTED = "rejected:"


@dataclass(frozen=True)
class EnginePartial:
    """:meth:`LDPProtocol.partial` as a plain partial function with fixed keys, for the engines
    (:func:`fugu.engines.ldp.aggregate_partials`): the protocol passes its own; the engine knows
    no protocol. Picklable (Spark executors run it)."""

    protocol: Any

    def __call__(self, batch: Mapping[str, Any]) -> dict[str, np.ndarray]:
        state, n_ok, rejected = self.protocol.partial(batch)
        out = {_STATE + k: np.asarray(v) for k, v in state.items()}
        out["n_accepted"] = np.array([int(n_ok)], dtype=np.int64)
        for r in REASONS:
            out[_REJECTED + r] = np.array([int(rejected.get(r, 0))], dtype=np.int64)
        return out

    def merge(self, a: Mapping[str, np.ndarray], b: Mapping[str, np.ndarray]) -> dict[str, Any]:
        """Combine two results when the protocol's state is not a sum (HIO)."""
        sa = {k[len(_STATE) :]: v for k, v in a.items() if k.startswith(_STATE)}
        sb = {k[len(_STATE) :]: v for k, v in b.items() if k.startswith(_STATE)}
        out = {_STATE + k: v for k, v in self.protocol.merge_state(sa, sb).items()}
        out.update({k: a[k] + b[k] for k in a if not k.startswith(_STATE)})
        return out

    @staticmethod
    def unpack(total: Mapping[str, np.ndarray]) -> tuple[dict[str, np.ndarray], int, Counter[str]]:
        state = {k[len(_STATE) :]: v for k, v in total.items() if k.startswith(_STATE)}
        rejected: Counter[str] = Counter(
            {k[len(_REJECTED) :]: int(v[0]) for k, v in total.items()
             if k.startswith(_REJECTED) and v[0]}
        )  # fmt: skip
        return state, int(total["n_accepted"][0]), rejected


def _is_arrow(values: Any) -> bool:
    return type(values).__module__.split(".")[0] == "pyarrow"


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
        self.epsilon = check_ldp_epsilon(epsilon, f"fugu.ldp.{type(self).__name__}")

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
        self, columns: Mapping[str, Any], n: int | None = None
    ) -> tuple[dict[str, np.ndarray], int, Counter[str]]:
        """Validate report columns and count support: ``(state, n_accepted, rejected)``.

        A pure function of one batch (no header check: the caller has matched the batch's
        header against this protocol). Every value is converted exactly to its column's type or
        its report is rejected (:func:`fugu.ldp.wire.clean_batch`: never wrapped); then the
        protocol's ``_validate`` rejects well-typed values it cannot have produced
        (``"out of range"``). ``n``, when given, is the number of reports the batch declares;
        columns of another length reject the whole batch. Engines run this per partition and
        combine the states with :meth:`merge_state`, then hand the sum to
        :meth:`Aggregator.add_partial`.
        """
        specs = self.report_columns()
        cols, rejected = clean_batch(specs, columns, n)
        size = len(next(iter(cols.values()))) if cols else 0
        if size == 0:
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
        on_invalid: str = "reject",
        accountant: Accountant | None = None,
        **engine_options: Any,
    ) -> Release:
        """Validate and aggregate reports, and estimate: the whole server side in one call.

        Parameters
        ----------
        reports : a :class:`Reports` batch (or a list of them), an Arrow table made by
            :meth:`Reports.to_arrow`, a mapping of report columns, a report file
            (``.parquet``/``.arrow`` read by the engine, ``.jsonl`` read in memory), or a Spark
            DataFrame of report columns.
        engine : ``"numpy"`` (default), ``"duckdb"`` or ``"spark"`` (see :mod:`fugu.engines`),
            with its options (``batch_rows``, ``threads``, ``spark``, ``master``,
            ``num_partitions``). Every engine gives the same release: support counts are summed
            exactly.
        header : the reports' header when they carry none (a Spark DataFrame, CSV, a mapping):
            for instance ``reports.header()``. Without it such reports are taken to follow this
            protocol's parameters.
        on_invalid : ``"reject"`` (default) or ``"raise"``. Every report is checked: a value its
            column's type cannot hold exactly, a missing value, a value this protocol cannot
            produce, a batch whose columns differ in length — each such report is rejected,
            never converted (see :mod:`fugu.ldp.wire` for the reasons). With ``"reject"`` the
            rejected reports are left out, a :class:`RejectedReportsWarning` gives their count
            by reason and the release records it (``guarantee.data_options``); with ``"raise"``
            any rejected report raises :class:`~fugu.errors.ReportError` and nothing is
            released or charged.
        accountant : :class:`~fugu.Accountant`, optional
            Charged ε once for this release, with model ``"local-dp"`` (the same model as the
            CLI's ``"ldp"``). The charge is checked before any report is read and recorded when
            the release is made.

        The reports' header (schema metadata of Arrow/Parquet, first line of JSON lines) is
        checked against this protocol: reports made with other parameters are refused.
        """
        _check_on_invalid(on_invalid)
        model = _charge_model(accountant, self.epsilon, self.name)
        agg = self.aggregator_for(reports, engine=engine, header=header, **engine_options)
        return agg.estimate(on_invalid=on_invalid, accountant=accountant, _model=model)

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
        from ..engines.ldp import read_header

        if isinstance(item, str | Path) and Path(item).suffix.lower() in (
            ".jsonl",
            ".json",
            ".ndjson",
        ):
            item = Reports.load(item)
        if isinstance(item, Reports):
            hdr: dict[str, Any] | None = item.header()
        else:
            hdr = read_header(item)
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
        private = stub.private if stub is not None else True
        if isinstance(item, Reports):
            if engine == "numpy" and not opts:
                return agg.add(item)
            if item.malformed:
                agg.rejected["malformed"] += item.malformed
            agg.rejected.update({k: v for k, v in item.invalid.items() if v})
            src: Any = dict(item.columns)
            n_declared: int | None = item.n
        else:
            src, n_declared = item, None
        if isinstance(src, Mapping):
            # one batch in memory: its columns must agree in length before an engine splits it
            specs = agg.protocol.report_columns()
            _, whole = clean_batch(
                specs, {k: src[k] for k in specs if k in src}, n_declared, structure_only=True
            )
            if whole:
                agg.add_partial(agg.protocol.empty_state(), 0, whole, private=private)
                return agg
            if engine != "numpy" and any(
                np.asarray(src[k]).dtype == object for k in specs if not _is_arrow(src[k])
            ):
                # Python objects (mixed types, None) have no column type an engine could
                # register; the batch is in memory already, so it is read there (same result)
                engine = "numpy"
                opts = {k: v for k, v in opts.items() if k == "batch_rows"}
            elif engine == "spark":
                from ..engines.duckdb_engine import _as_arrow

                src = _as_arrow({k: src[k] for k in specs})
        state, n_ok, rejected = agg.protocol.run_partials(src, engine, opts)
        agg.add_partial(state, n_ok, rejected, private=private)
        return agg

    def run_partials(
        self, data: Any, engine: str = "numpy", opts: Mapping[str, Any] | None = None
    ) -> tuple[dict[str, np.ndarray], int, Counter[str]]:
        """``(state, n_accepted, rejected)`` of every report in ``data`` (no header check), with
        :meth:`partial` run per batch by ``engine`` (:func:`fugu.engines.ldp.aggregate_partials`):
        summed on the executors when :meth:`merge_state` is a sum, else merged on the driver."""
        from ..engines.ldp import aggregate_partials

        fn = EnginePartial(self)
        additive = type(self).merge_state is LDPProtocol.merge_state
        try:
            total = aggregate_partials(
                data,
                fn,
                columns=list(self.report_columns()),
                engine=engine,
                merge=None if additive else fn.merge,
                **dict(opts or {}),
            )
        except EmptyDataError:  # an empty batch / partition set: nothing to absorb
            return self.empty_state(), 0, Counter()
        return fn.unpack(total)

    def simulate(
        self,
        records: Any,
        rng: RandomSource | None = None,
        *,
        engine: str = "numpy",
        accountant: Accountant | None = None,
        **engine_options: Any,
    ) -> Release:
        """Client and server in one call (experiments): perturb every record (in memory),
        aggregate on ``engine`` (see :meth:`aggregate`). ``accountant`` is charged ε once, with
        model ``"local-dp"``; the charge is checked before any record is randomised."""
        _charge_model(accountant, self.epsilon, self.name)
        return self.aggregate(
            self.client(rng).perturb(records),
            engine=engine,
            accountant=accountant,
            **engine_options,
        )

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
        try:
            params = self._params()
        except FuguError:  # parameters chosen later (e.g. HDG's granularities from the data)
            params = {}
        extra = ", ".join(f"{k}={v!r}" for k, v in params.items())
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
        specs = self.protocol.report_columns()
        missing = [k for k in specs if k not in reports.columns]
        if missing:
            raise ReportError(f"{self.protocol.name} reports lack the column(s) {missing}")
        if reports.malformed:
            self.rejected["malformed"] += reports.malformed
        self.rejected.update(reports.invalid)
        state, n_ok, rejected = self.protocol.partial(reports.columns, reports.n)
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

    def estimate(
        self,
        *,
        on_invalid: str = "reject",
        accountant: Accountant | None = None,
        _model: str | None = None,
    ) -> Release:
        """The release estimated from every accepted report.

        Rejected reports (by reason in :attr:`rejected`) raise :class:`ReportError` with
        ``on_invalid="raise"``; with ``"reject"`` they give a :class:`RejectedReportsWarning` and
        are recorded in the release (``guarantee.data_options["rejected_reports"]``).
        ``accountant`` is charged ε once (model ``"local-dp"``) when the release is made.
        """
        _check_on_invalid(on_invalid)
        p = self.protocol
        model = _model or _charge_model(accountant, p.epsilon, p.name)
        rejected = {k: int(v) for k, v in sorted(self.rejected.items()) if v}
        detail = ", ".join(f"{v:,} {k}" for k, v in rejected.items())
        if rejected and on_invalid == "raise":
            raise ReportError(
                f"{self.n_rejected:,} of {self.n_accepted + self.n_rejected:,} {p.name} reports "
                f"are invalid ({detail}); nothing was released. Pass on_invalid='reject' to "
                f"leave them out"
            )
        if self.n_accepted == 0:
            raise EmptyDataError(
                f"no valid {p.name} reports were aggregated (rejected: {detail or 'none'})"
            )
        if rejected:
            warnings.warn(
                f"{self.n_rejected:,} of {self.n_accepted + self.n_rejected:,} {p.name} reports "
                f"were rejected and left out ({detail}); the release records these counts",
                RejectedReportsWarning,
                stacklevel=3,
            )
        rel = p._estimate(self.state, self.n_accepted)
        g = rel.guarantee
        data_options = {
            **dict(g.data_options),
            "reports_accepted": int(self.n_accepted),
            "rejected_reports": rejected,
        }
        rel.guarantee = replace(g, data_options=data_options, private=g.private and self.private)
        if accountant is not None:
            accountant.spend(
                p.epsilon, f"{p.name} release from {self.n_accepted:,} reports", model=model
            )
        return rel

    def summary(self) -> dict[str, Any]:
        return {
            "protocol": self.protocol.name,
            "accepted": self.n_accepted,
            "rejected": dict(self.rejected),
        }
