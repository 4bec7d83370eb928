"""The server side of an LDP protocol: validate reports, keep mergeable state, estimate.

:class:`Aggregator` (``protocol.aggregator()``) checks each batch's header against its protocol,
rejects (and counts, by reason) every report the protocol cannot have produced, and keeps only
the support counts of the accepted ones, so aggregators over disjoint partitions merge exactly.

The same counting runs on an engine (DuckDB, Spark) through :class:`EnginePartial`, the
protocol's per-batch partial function with fixed keys: the engine knows no protocol.
:func:`absorb` routes one item of reports (a batch, a file, a table) to the right path.
"""

from __future__ import annotations

import json
import os
import warnings
import weakref
from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from ..errors import EmptyDataError, InvalidTypeError, ReportError
from ..release import Release
from .checks import RejectedReportsWarning, _charge_model, _check_on_invalid
from .reports import Reports, _check_header
from .wire import REASONS, clean_batch

if TYPE_CHECKING:
    from ..budget import Accountant
    from .protocol import LDPProtocol

__all__ = ["Aggregator", "EnginePartial", "absorb"]

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


class Aggregator:
    """Server side: validates reports, keeps mergeable partial state, estimates.

    ``state`` holds only what :meth:`LDPProtocol.support` derived from accepted reports (support
    counts), so two aggregators over disjoint partitions ``merge`` into exactly the aggregator
    over their union.

    Reports carry no identity (that is what keeps users anonymous), so the aggregator cannot
    tell a report sent twice from two equal reports. What it can tell, it refuses with
    :class:`~fugu.errors.ReportError`, since every report would count twice: the same batch
    object or the same report file (under any spelling or link) absorbed twice, an aggregator
    merged with itself, or two aggregators that absorbed a common batch or file (within one
    process; a pickled aggregator carries its counts only). Copies of a file, or overlapping
    parts of a batch, are the caller's to avoid.
    """

    def __init__(self, protocol: LDPProtocol) -> None:
        self.protocol = protocol
        self.state = protocol.empty_state()
        self.n_accepted = 0
        self.rejected: Counter[str] = Counter()
        self.private = True
        # what has been absorbed, to refuse absorbing it twice (every report would count twice):
        # batches by identity (weak references: no batch is kept alive), files by real path
        self._batches: dict[int, weakref.ref[Reports]] = {}
        self._files: dict[str, str] = {}

    def __getstate__(self) -> dict[str, Any]:
        # batch identities and file paths mean nothing in another process (two servers may
        # both hold a /srv/reports.jsonl): a pickled aggregator carries its counts only
        return {k: v for k, v in self.__dict__.items() if k not in ("_batches", "_files")}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        self._batches, self._files = {}, {}

    def _note_batch(self, reports: Reports) -> None:
        old = self._batches.get(id(reports))
        if old is not None and old() is reports:
            raise ReportError(
                f"this batch of {reports.n:,} {reports.protocol} reports was already absorbed by "
                f"this aggregator; absorbing it again would count every report twice (give each "
                f"batch once; disjoint parts of one batch: Reports.take)"
            )
        self._batches[id(reports)] = weakref.ref(reports)

    def note_file(self, path: str | Path) -> None:
        """Record that the reports of file ``path`` are being absorbed; refuse a file (under
        any spelling or link) absorbed before, whose reports would count twice."""
        real = os.path.realpath(path)
        if real in self._files:
            raise ReportError(
                f"report file {str(path)!r} was already absorbed by this aggregator"
                + (f" (as {self._files[real]!r})" if self._files[real] != str(path) else "")
                + "; absorbing it again would count every report twice: give each file once"
            )
        self._files[real] = str(path)

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

            def shown(params: dict[str, Any], k: str) -> str:
                # a key a header leaves out is not None: TDG's headers name only shifted grids
                if k in params:
                    return repr(params[k])
                return "'aligned' (absent)" if k == "partitions" else "(absent)"

            detail = ", ".join(
                f"{k}: reports {shown(theirs, k)} vs aggregator {shown(mine, k)}"
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
        self._note_batch(reports)
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
        example by an engine, per partition, on reports whose header it has checked).

        The state must have this protocol's keys and, for a summed state, each array the
        shape of :meth:`LDPProtocol.empty_state` with integer counts; ``n_accepted`` and the
        rejected counts must be non-negative integers. Anything else is refused
        (:class:`~fugu.errors.ReportError`): a count vector of another length would be
        broadcast into every cell, or a partial of another domain added cell by cell."""
        state = dict(state)
        self._check_partial(state, n_accepted, dict(rejected or {}))
        self.state = self.protocol.merge_state(self.state, state)
        self.n_accepted += int(n_accepted)
        self.rejected.update(dict(rejected or {}))
        self.private = self.private and private
        return self

    def _check_partial(
        self, state: dict[str, Any], n_accepted: Any, rejected: dict[str, Any]
    ) -> None:
        p = self.protocol
        if set(state) != set(self.state):
            raise ReportError(
                f"a partial {p.name} state must have the keys {sorted(self.state)}, got "
                f"{sorted(state)}: it was not computed by this protocol's partial()"
            )
        counts = [
            ("n_accepted", n_accepted),
            *((f"rejected[{k!r}]", v) for k, v in rejected.items()),
        ]
        for what, v in counts:
            if isinstance(v, bool) or not isinstance(v, int | np.integer) or v < 0:
                raise ReportError(f"a partial {p.name} state's {what} must be a count, got {v!r}")
        if not p.sums_states():
            return  # the protocol merges its own state (HIO keeps reports)
        for k, mine in self.state.items():
            v = np.asarray(state[k])
            if v.shape != np.shape(mine) or v.dtype.kind not in "iu" or (v.size and v.min() < 0):
                raise ReportError(
                    f"a partial {p.name} state's {k!r} must be non-negative integer counts of "
                    f"shape {np.shape(mine)}, got {v.dtype} of shape {v.shape}: it was computed "
                    f"for other parameters (another domain?) or not by partial()"
                )

    def add_rows(self, rows: Iterable[Any], header: Mapping[str, Any] | None = None) -> Aggregator:
        """Absorb per-record report dicts (as made by :meth:`Client.perturb_one`)."""
        hdr = dict(header) if header is not None else self.protocol.header()
        return self.add(Reports.from_rows(_check_header(hdr), rows, self.protocol.report_columns()))

    def merge(self, other: Aggregator) -> Aggregator:
        """Absorb another aggregator's state (disjoint partitions; in place; returns self)."""
        if not isinstance(other, Aggregator):
            raise InvalidTypeError(f"expected a fugu.ldp Aggregator, got {type(other).__name__}")
        if other is self:
            raise ReportError("an aggregator cannot merge itself: every report would count twice")
        if json.dumps(other.protocol.params()) != json.dumps(self.protocol.params()) or (
            other.protocol.name != self.protocol.name
        ):
            raise ReportError("cannot merge aggregators of different protocols or parameters")
        both = [
            ref() for k, ref in other._batches.items()
            if k in self._batches and ref() is not None and self._batches[k]() is ref()
        ]  # fmt: skip
        files = sorted(set(self._files) & set(other._files))
        if both or files:
            what = f"the file(s) {[other._files[f] for f in files]}" if files else (
                f"{len(both)} batch(es) of reports")  # fmt: skip
            raise ReportError(
                f"both aggregators absorbed {what}: merging them would count those reports "
                f"twice; merge aggregators of disjoint reports only"
            )
        self._batches.update(other._batches)
        self._files.update(other._files)
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


def _is_arrow(values: Any) -> bool:
    return type(values).__module__.split(".")[0] == "pyarrow"


def absorb(
    protocol: LDPProtocol,
    agg: Aggregator | None,
    item: Any,
    engine: str,
    header: Mapping[str, Any] | None,
    opts: dict[str, Any],
) -> Aggregator:
    """Absorb one item of reports (a batch, a file, a table, a mapping of columns) into ``agg``
    (a new aggregator of ``protocol`` when None) on ``engine``, after checking its header."""
    from ..engines.ldp import read_header

    path = item if isinstance(item, str | Path) else None
    if path is not None and Path(path).suffix.lower() in (".jsonl", ".json", ".ndjson"):
        item = Reports.load(path)
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
        proto = protocol._for_reports(stub) if stub is not None else protocol
        agg = proto.aggregator()
    if stub is not None:
        agg._check_header(stub)
    if path is not None:
        agg.note_file(path)
    private = stub.private if stub is not None else True
    if isinstance(item, Reports):
        if engine == "numpy" and not opts:
            return agg.add(item)
        agg._note_batch(item)
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
