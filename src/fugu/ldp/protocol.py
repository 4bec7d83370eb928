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

The pieces live in their own modules, each re-exported here: :mod:`fugu.ldp.reports` (the
report batch and its wire format), :mod:`fugu.ldp.client`, :mod:`fugu.ldp.aggregator` (with the
engine path) and :mod:`fugu.ldp.checks` (ε range, ``on_invalid``, the accountant's model). This
module holds the base class.

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

from collections import Counter
from collections.abc import Mapping
from dataclasses import replace
from typing import TYPE_CHECKING, Any, ClassVar

import numpy as np
from numpy.typing import NDArray

from ..domain import Domain
from ..errors import EmptyDataError, FuguError, InvalidParameterError, InvalidTypeError
from ..mechanism import guarantee as make_guarantee
from ..noise import RandomSource, default_source
from ..release import Guarantee, Release
from .aggregator import Aggregator, EnginePartial, absorb
from .checks import (
    BUDGET_MODEL,
    EPSILON_RANGE,
    ON_INVALID,
    RejectedReportsWarning,
    _charge_model,
    _check_on_invalid,
    check_ldp_epsilon,
)
from .client import Client
from .reports import (
    WIRE_FORMAT,
    WIRE_VERSION,
    ColumnSpec,
    Reports,
    _empty_column,
    protocol_from_header,
)
from .wire import clean_batch

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
    # re-exported from the modules these now live in (fugu.ldp.protocol was their home)
    "BUDGET_MODEL",
    "EPSILON_RANGE",
    "ON_INVALID",
    "EnginePartial",
    "RejectedReportsWarning",
    "check_ldp_epsilon",
    "protocol_from_header",
]

LDP_NEIGHBOURS = "any two values of one user (local DP: each user randomises their own record)"


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

    def sums_states(self) -> bool:
        """Whether partial states are count arrays summed by the default :meth:`merge_state`
        (False when a method merges its own state, as HIO keeps reports)."""
        return type(self).merge_state is LDPProtocol.merge_state

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
            agg = absorb(self, agg, item, engine, header, dict(engine_options))
        assert agg is not None
        return agg

    def _for_reports(self, reports: Reports) -> LDPProtocol:
        """The protocol that decodes ``reports`` (grid methods take granularities from them)."""
        return self

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
        params = {**self._params(), "n_reports": n}
        grouped = getattr(self, "grouped", None)
        if grouped is not None and hasattr(grouped, "kinds"):
            # the oracle each group's users report through (GRR or OLH when "adaptive"), as
            # TDG/HDG record it: "adaptive" alone does not say which one a group used
            params["oracles"] = list(grouped.kinds)
        g = make_guarantee(
            model="ldp",
            epsilon=self.epsilon,
            neighbours=LDP_NEIGHBOURS,
            mechanism=self.name,
            rng=default_source(None),
            sensitivity=None,
            source=self.source,
            parameters=params,
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
