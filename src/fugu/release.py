"""Releases: what a mechanism publishes, with its guarantee, and how to query, save and load it.

Every mechanism returns a :class:`Release`. A release holds only noisy measurements and what
post-processing derived from them, plus a :class:`Guarantee` that states the privacy model, ε,
the neighbour relation, the mechanism and its parameters. It never holds the raw data.

``Release.save(path)`` writes one portable ``.npz`` file (numpy arrays plus a JSON header);
``Release.load(path)`` reads any kind of release back.

>>> import numpy as np, fugu
>>> dom = fugu.Domain([fugu.Ordinal("a", 0, 3)])
>>> hist = fugu.Histogram([5, 0, 2, 1], dom)
>>> rel = fugu.central.laplace(hist, epsilon=1.0, rng=fugu.RandomSource(seed=0))
>>> rel.guarantee.mechanism, rel.guarantee.private
('laplace', False)
>>> # two cells, each of variance 2p/(1-p)^2 with p = e^(-1/2):
>>> round(rel.expected_error(fugu.RangeQuery({"a": (0, 1)})), 3)
3.959
"""

from __future__ import annotations

import json
import math
import zipfile
from collections.abc import Callable, Iterable, Mapping
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, ClassVar, Literal, overload

import numpy as np
from numpy.typing import ArrayLike, NDArray

from .domain import Domain
from .errors import (
    FileFormatError,
    FuguError,
    InvalidParameterError,
    InvalidTypeError,
    MissingDependencyError,
)
from .queries import PrefixSums, RangeQuery, Workload
from .release_state import Array, StateField

__all__ = ["Guarantee", "Release", "CubeRelease", "FORMAT_VERSION"]

FORMAT_VERSION = 1

MODELS = {
    "central-dp": "ε-differential privacy with a trusted curator",
    "blowfish": "Blowfish privacy: ε-indistinguishability of the policy's secret pairs",
    "node-dp": "ε-node differential privacy",
    "edge-dp": "ε-edge differential privacy",
    "participant-dp": "ε-differential privacy for participants of a relational query",
    "ldp": "ε-local differential privacy (each user randomises their own data)",
}


@dataclass(frozen=True)
class Guarantee:
    """What a release promises.

    Attributes
    ----------
    model : one of ``central-dp``, ``blowfish``, ``node-dp``, ``edge-dp``, ``ldp``
    epsilon : the privacy-loss bound
    neighbours : the neighbour relation, in words (e.g. "replace one record")
    mechanism : the mechanism's name (e.g. ``laplace``, ``privelet``)
    sensitivity : the sensitivity the noise is calibrated to (None when not a single number)
    source : where the mechanism and its sensitivity come from (paper, theorem)
    parameters : the mechanism's public parameters
    data_options : how records became counts (out-of-domain policy, engine, public filters)
    post_processing : what was applied after the noise (consistency, non-negativity, rounding)
    private : False when a seeded, reproducible random source was used
    delta : 0 for pure ε-DP (every fugu mechanism but the few marked (ε, δ)); otherwise the
        probability δ with which the e^ε bound may fail: Pr[M(D) ∈ S] ≤ e^ε·Pr[M(D') ∈ S] + δ
    """

    model: str
    epsilon: float
    neighbours: str
    mechanism: str
    sensitivity: float | None = None
    source: str = ""
    parameters: Mapping[str, Any] = field(default_factory=dict)
    data_options: Mapping[str, Any] = field(default_factory=dict)
    post_processing: tuple[str, ...] = ()
    private: bool = True
    delta: float = 0.0

    def __post_init__(self) -> None:
        if self.model not in MODELS:
            raise InvalidParameterError(
                f"model must be one of {sorted(MODELS)}, got {self.model!r}"
            )
        eps = self.epsilon
        if (
            isinstance(eps, bool)
            or not isinstance(eps, int | float | np.integer | np.floating)
            or not math.isfinite(eps)
            or eps <= 0
        ):
            raise InvalidParameterError(
                f"a guarantee's epsilon must be a finite number > 0, got {eps!r}"
            )
        d = self.delta
        if (
            isinstance(d, bool)
            or not isinstance(d, int | float | np.integer | np.floating)
            or not 0 <= d < 1
        ):
            raise InvalidParameterError(
                f"a guarantee's delta must be a number in [0, 1) (0 for pure ε-DP), got {d!r}"
            )

    def __repr__(self) -> str:
        sens = "" if self.sensitivity is None else f", sensitivity={self.sensitivity:g}"
        pp = (
            f", post_processing={len(self.post_processing)} step(s)" if self.post_processing else ""
        )
        return (
            f"Guarantee(model={self.model!r}, epsilon={self.epsilon:g}, "
            + (f"delta={self.delta:g}, " if self.delta else "")
            + f"mechanism={self.mechanism!r}{sens}{pp}, private={self.private})"
        )

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["parameters"] = _jsonable(dict(self.parameters))
        d["data_options"] = _jsonable(dict(self.data_options))
        d["post_processing"] = list(self.post_processing)
        return d

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> Guarantee:
        d = dict(d)
        d["post_processing"] = tuple(d.get("post_processing", ()))
        return cls(**d)

    def with_post_processing(self, step: str) -> Guarantee:
        return Guarantee(**{**asdict(self), "post_processing": (*self.post_processing, step)})

    def describe(self) -> str:
        """The guarantee in plain words."""
        model = MODELS[self.model]
        if self.delta:  # (ε, δ): not the pure ε-DP the model's name states
            model = model.replace("ε-", "(ε, δ)-", 1) + f", delta = {self.delta:g}"
        lines = [
            f"{model}, epsilon = {self.epsilon:g}, neighbours: {self.neighbours}.",
            f"Mechanism: {self.mechanism}"
            + (f" (sensitivity {self.sensitivity:g})" if self.sensitivity is not None else "")
            + ".",
        ]
        if self.source:
            lines.append(f"Source: {self.source}.")
        if self.delta:
            lines.append(
                f"Any one {_protected_unit(self)} changes the probability of any set of outputs "
                f"by at most a factor of e^{self.epsilon:g} = {math.exp(self.epsilon):.3g} plus "
                f"{self.delta:g} (so with probability up to {self.delta:g} the factor bound "
                "may fail: this is not pure ε-DP)."
            )
        else:
            lines.append(
                f"Any one {_protected_unit(self)} changes the probability of any output by at "
                f"most a factor of e^{self.epsilon:g} = {math.exp(self.epsilon):.3g}."
            )
        if self.post_processing:
            lines.append(
                "Post-processing (no further privacy cost): "
                + ", ".join(self.post_processing)
                + "."
            )
        if not self.private:
            reason = self.parameters.get("not_private_reason")
            lines.append(
                f"NOT PRIVATE: {reason}; do not publish."
                if reason
                else "NOT PRIVATE: made with a seeded random source for reproducibility; "
                "do not publish."
            )
        return "\n".join(lines)


def _protected_unit(g: Guarantee) -> str:
    return {
        "central-dp": "record",
        "blowfish": "secret pair of the policy",
        "node-dp": "node (with all its edges)",
        "edge-dp": "edge",
        "participant-dp": "participant (with every tuple it owns)",
        "ldp": "user's report",
    }[g.model]


def _jsonable(x: Any) -> Any:
    if isinstance(x, Mapping):
        return {str(k): _jsonable(v) for k, v in x.items()}
    if isinstance(x, list | tuple):
        return [_jsonable(v) for v in x]
    if isinstance(x, np.integer):
        return int(x)
    if isinstance(x, np.floating):
        return float(x)
    if isinstance(x, np.ndarray):
        return x.tolist()
    if isinstance(x, float) and not math.isfinite(x):
        return str(x)
    if x is None or isinstance(x, str | int | float | bool):
        return x
    if hasattr(x, "to_dict"):
        return _jsonable(x.to_dict())
    return str(x)


class Release:
    """Base class of every release. Subclasses implement ``_answer_bounds`` and declare
    ``_state_fields`` (what their file holds; see :mod:`fugu.release_state`).

    Every release can ``answer`` one :class:`~fugu.RangeQuery`, ``answer_many`` a workload,
    report its ``guarantee``, and ``save``/``load`` itself.
    """

    kind: ClassVar[str] = "release"
    _registry: ClassVar[dict[str, type[Release]]] = {}

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        if "kind" in cls.__dict__:
            Release._registry[cls.kind] = cls

    def __init__(self, domain: Domain | None, guarantee: Guarantee) -> None:
        if not isinstance(guarantee, Guarantee):
            raise InvalidTypeError("guarantee must be a fugu.Guarantee")
        self.domain = domain
        self.guarantee = guarantee

    # answering -------------------------------------------------------------------------------
    def _require_domain(self) -> Domain:
        if self.domain is None:
            raise FuguError(f"a {self.kind} release has no domain to answer range queries on")
        return self.domain

    def answer(self, query: RangeQuery | Mapping[str, Any]) -> float:
        """The noisy answer to one range query."""
        q = _as_query(query)
        dom = self._require_domain()
        return float(self._answer_bounds(q.bounds(dom)[None])[0])

    @overload
    def answer_many(
        self, workload: Workload | list[RangeQuery], *, output: Literal["array"] = "array"
    ) -> NDArray[np.float64]: ...

    @overload
    def answer_many(
        self,
        workload: Workload | list[RangeQuery],
        *,
        output: Literal["pandas", "polars", "arrow"],
    ) -> Any: ...

    def answer_many(self, workload: Workload | list[RangeQuery], *, output: str = "array") -> Any:
        """Noisy answers to every query of a workload, vectorised.

        Parameters
        ----------
        workload : Workload or list of RangeQuery
        output : {"array", "pandas", "polars", "arrow"}
            ``"array"`` (the default) returns a float ndarray, one answer per query, as always.
            The others return a table with one row per query and the columns ``query`` (the
            query in words), ``answer`` and ``expected_error`` (RMSE of the answer; null where
            the release does not know it). A keyword rather than a new method or a changed
            return type, so existing callers that index or do arithmetic on the ndarray keep
            working, and the table is one argument away.

        Examples
        --------
        >>> import fugu
        >>> dom = fugu.Domain([fugu.Ordinal("a", 0, 3)])
        >>> rel = fugu.central.laplace(fugu.Histogram([5, 0, 2, 1], dom), 1.0,
        ...                            rng=fugu.RandomSource(seed=0))
        >>> qs = [fugu.RangeQuery(a=(0, 1)), fugu.RangeQuery(a=(2, 3))]
        >>> rel.answer_many(qs).shape
        (2,)
        >>> t = rel.answer_many(qs, output="arrow")
        >>> t.column_names, t.num_rows
        (['query', 'answer', 'expected_error'], 2)
        """
        if output not in _OUTPUTS:
            raise InvalidParameterError(f"output must be one of {list(_OUTPUTS)}, got {output!r}")
        w = _as_workload(workload)
        dom = self._require_domain()
        bounds = w.bounds(dom)
        answers = self._answer_bounds(bounds)
        if output == "array":
            return answers
        import pyarrow as pa

        errors = self._bounds_errors(bounds, w)
        table = pa.table(
            {
                "query": pa.array([str(q) for q in w], pa.string()),
                "answer": pa.array(np.asarray(answers, np.float64)),
                "expected_error": _nullable(errors, len(answers)),
            }
        )
        return _convert(table, output)

    # tables ----------------------------------------------------------------------------------
    def to_arrow(self) -> Any:
        """The release as a ``pyarrow.Table``: one row per cell of the domain.

        Releases that store no dense cells (LDP grids, pairs, HIO) answer every one-cell query;
        a release without a domain (a graph count) gives one row per released value with
        ``count`` and ``expected_error``.

        Columns: one per attribute (integers for plain ordinals; labels, as dictionary-encoded
        strings, for nominal and binned attributes), ``count`` (the noisy estimate of the cell)
        and ``expected_error`` (the cell's RMSE where the release knows it, else null). A
        column whose name an attribute already uses gets a trailing ``_``.

        Examples
        --------
        >>> import fugu
        >>> dom = fugu.Domain([fugu.Ordinal("age", 0, 1), fugu.Nominal("sex", ["F", "M"])])
        >>> rel = fugu.central.laplace(fugu.Histogram([[3, 1], [0, 2]], dom), 1.0,
        ...                            rng=fugu.RandomSource(seed=0))
        >>> t = rel.to_arrow()
        >>> t.column_names
        ['age', 'sex', 'count', 'expected_error']
        >>> t.column("sex").to_pylist()
        ['F', 'M', 'F', 'M']
        """
        import pyarrow as pa

        if self.domain is None:
            return self._scalar_table()
        dom = self.domain
        try:
            counts = np.asarray(self.counts, dtype=np.float64).reshape(-1)
        except NotImplementedError:
            # no dense cells stored (LDP grids, pairs, HIO): answer every one-cell query instead
            if dom.size > _MAX_ERROR_CELLS:
                raise FuguError(
                    f"a {self.kind} release over {dom.size:,} cells is too large for a per-cell "
                    "table; use answer_many(queries, output='pandas') for the queries you need"
                ) from None
            counts = np.asarray(self._answer_bounds(_cell_bounds(dom)), dtype=np.float64)
        if counts.size != dom.size:
            raise FuguError(
                f"a {self.kind} release holds {counts.size} values, not one per cell of the "
                f"domain ({dom.size}); use answer_many(queries, output=...) instead"
            )
        cols: dict[str, Any] = {}
        codes = np.unravel_index(np.arange(dom.size, dtype=np.int64), dom.shape)
        for j, a in enumerate(dom.attributes):
            c = codes[j]
            if getattr(a, "edges", None) is None and a.kind == "ordinal":
                cols[a.name] = pa.array(c + a.low, pa.int64())  # type: ignore[union-attr]
            else:
                cols[a.name] = pa.DictionaryArray.from_arrays(
                    pa.array(c.astype(np.int32)), pa.array(list(a.labels), pa.string())
                )
        count_name = _free_name("count", cols)
        cols[count_name] = pa.array(counts)
        cols[_free_name("expected_error", cols)] = _nullable(self._cell_errors(), dom.size)
        return pa.table(cols)

    def to_pandas(self) -> Any:
        """:meth:`to_arrow` as a ``pandas.DataFrame`` (labels as categoricals); needs pandas."""
        return _convert(self.to_arrow(), "pandas")

    def to_polars(self) -> Any:
        """:meth:`to_arrow` as a ``polars.DataFrame``; needs polars."""
        return _convert(self.to_arrow(), "polars")

    def _scalar_table(self) -> Any:
        """A release without a domain (a graph count): one row per released value."""
        import pyarrow as pa

        try:
            values = np.asarray(self.counts, dtype=np.float64).reshape(-1)
        except NotImplementedError:
            raise FuguError(f"a {self.kind} release has no values to tabulate") from None
        err: NDArray[np.float64] | None = None
        if values.size == 1:
            try:
                e = self.expected_error(None)  # type: ignore[arg-type]
            except (FuguError, TypeError, AttributeError):
                e = None
            err = None if e is None else np.array([float(e)])
        return pa.table({"count": pa.array(values), "expected_error": _nullable(err, values.size)})

    def _cell_errors(self) -> NDArray[np.float64] | None:
        """RMSE of every cell (flat, C order), or None when unknown."""
        dom = self._require_domain()
        if dom.size > _MAX_ERROR_CELLS:
            return None
        return self._bounds_errors(_cell_bounds(dom), None)

    def _bounds_errors(
        self, bounds: NDArray[np.int64], workload: Workload | None
    ) -> NDArray[np.float64] | None:
        """RMSE per query given as bounds (m, d, 2): vectorised when the release offers
        ``expected_variance_many(bounds)``; otherwise one :meth:`expected_error` call per query
        for up to 4096 queries (else None)."""
        many = getattr(self, "expected_variance_many", None)
        if callable(many):
            var = many(bounds)
            return None if var is None else np.sqrt(np.maximum(np.asarray(var, np.float64), 0))
        m = bounds.shape[0]
        if m == 0:
            return np.zeros(0)
        if m > _MAX_ERROR_LOOP:
            return None
        dom = self._require_domain()
        out = np.empty(m)
        for i in range(m):
            q = workload[i] if workload is not None else _cell_query(bounds[i], dom)
            e = self.expected_error(q)
            if e is None:
                return None
            out[i] = e
        return out

    def _answer_bounds(self, bounds: NDArray[np.int64]) -> NDArray[np.float64]:
        raise NotImplementedError(f"{type(self).__name__} does not answer range queries")

    @property
    def counts(self) -> NDArray[np.float64]:
        """The estimated counts of every cell (dense over the domain)."""
        raise NotImplementedError(f"{type(self).__name__} has no dense cell counts")

    def expected_error(self, query: RangeQuery | Mapping[str, Any]) -> float | None:
        """Root mean squared error of :meth:`answer` for this query, or None when unknown."""
        return None

    # persistence -----------------------------------------------------------------------------
    #: What a file of this kind holds (see :mod:`fugu.release_state`): each field saves one
    #: attribute and restores one constructor keyword. ``save`` and ``load`` read it; a kind
    #: declares it instead of writing its own state methods.
    _state_fields: ClassVar[tuple[StateField, ...]] = ()
    #: ``"required"``: the constructor is ``cls(domain, guarantee, **fields)`` and a file must
    #: have a domain; ``"optional"``: the same, the domain may be None; ``"none"``: the release
    #: has no domain, the constructor is ``cls(guarantee, **fields)``.
    _state_domain: ClassVar[Literal["required", "optional", "none"]] = "required"

    def _state(self) -> tuple[dict[str, np.ndarray], dict[str, Any]]:
        """Arrays and JSON-able metadata that rebuild this release (from ``_state_fields``)."""
        if not self._state_fields:
            raise NotImplementedError(f"{type(self).__name__} declares no _state_fields")
        arrays: dict[str, np.ndarray] = {}
        meta: dict[str, Any] = {}
        for f in self._state_fields:
            a, m = f.dump(self)
            arrays.update(a)
            meta.update(m)
        return arrays, meta

    @classmethod
    def _check_state_specs(
        cls,
        specs: Mapping[str, tuple[tuple[int, ...], np.dtype[Any]]],
        meta: Mapping[str, Any],
        domain: Domain | None,
    ) -> None:
        """Check the file's arrays (declared shapes and dtypes only) and meta keys against
        ``_state_fields``, before any array is decompressed. Raises a FuguError."""
        fields = cls._state_fields
        for f in fields:
            f.check_spec(specs, domain)
        stray = sorted(k for k in specs if not any(f.claims(k) for f in fields))
        if stray:
            raise InvalidParameterError(f"unexpected array(s) {stray} for a {cls.kind} release")
        known = {k for f in fields for k in f.meta_keys()}
        extra = sorted(set(meta) - known)
        if extra:
            raise InvalidParameterError(f"unknown meta fields {extra} for a {cls.kind} release")

    @classmethod
    def _from_state(
        cls,
        domain: Domain | None,
        guarantee: Guarantee,
        arrays: Mapping[str, np.ndarray],
        meta: Mapping[str, Any],
    ) -> Release:
        """The release rebuilt from checked state: every field's value as a keyword."""
        kwargs = {f.kwarg: f.load(arrays, meta, domain) for f in cls._state_fields}
        if cls._state_domain == "none":
            return cls(guarantee, **kwargs)  # type: ignore[call-arg, arg-type]
        return cls(domain, guarantee, **kwargs)

    def save(self, path: str | Path) -> Path:
        """Write the release to one ``.npz`` file (arrays + a JSON header). Returns the path."""
        arrays, meta = self._state()
        header = {
            "format": "fugu-release",
            "version": FORMAT_VERSION,
            "kind": self.kind,
            "domain": None if self.domain is None else self.domain.to_dict(),
            "guarantee": self.guarantee.to_dict(),
            "meta": _jsonable(meta),
        }
        p = Path(path)
        if p.suffix != ".npz":
            p = p.with_suffix(p.suffix + ".npz") if p.suffix else p.with_suffix(".npz")
        payload = {f"a_{k}": np.asarray(v) for k, v in arrays.items()}
        payload["__header__"] = np.frombuffer(json.dumps(header).encode(), dtype=np.uint8)
        # atomic: an interrupted save never leaves a truncated release behind
        from ._files import atomic_write

        atomic_write(p, lambda fh: np.savez_compressed(fh, **payload))  # type: ignore[arg-type]
        return p

    @staticmethod
    def load(path: str | Path) -> Release:
        """Read a release written by :meth:`save`, whatever its kind.

        The file is checked before any array is decompressed: the zip members, the JSON header
        against its schema (format, version, kind, domain, every guarantee field: a known model,
        ε finite and > 0, texts as strings), and each array's declared dtype and shape against
        its stored size and the limits below. Any failure raises
        :class:`~fugu.errors.FileFormatError` naming the file and the problem.

        The largest array accepted has ``4 * fugu.domain.MAX_DENSE_CELLS`` elements; set the
        environment variable ``FUGU_MAX_RELEASE_BYTES`` to change the total size accepted
        (default 8 GiB).
        """
        p = Path(path)
        name = str(p)
        if not p.exists():
            raise FileFormatError(f"release file {name!r} does not exist")
        if not p.is_file():
            raise FileFormatError(f"release file {name!r} is not a file")

        def bad(problem: str) -> FileFormatError:
            return FileFormatError(f"{name!r} is not a fugu release file, or is damaged: {problem}")

        try:
            with zipfile.ZipFile(p) as zf:
                infos = {i.filename: i for i in zf.infolist()}
                header = _read_header(zf, infos, bad)
                cls, dom, guarantee, meta = _check_header(header, bad)
                specs = _check_arrays(zf, infos, bad)
            if cls._state_domain == "required" and dom is None:
                raise bad(f"a {cls.kind} release needs a domain, the header has none")
            if cls._state_domain == "none" and dom is not None:
                raise bad(f"a {cls.kind} release has no domain, the header has one")
            try:
                cls._check_state_specs(specs, meta, dom)
            except FuguError as exc:
                raise bad(str(exc)) from None
            with np.load(p, allow_pickle=False) as z:
                arrays = {k[2:]: z[k] for k in z.files if k.startswith("a_")}
            for key, arr in arrays.items():
                if arr.dtype.kind in "fc" and not np.isfinite(arr).all():
                    raise bad(
                        f"array {key!r} holds NaN or infinite values; fugu never writes those "
                        "(noisy values are finite)"
                    )
        except FileFormatError:
            raise
        except Exception as exc:  # zlib.error, BadZipFile, EOFError, an encrypted member, ...
            raise bad(f"{type(exc).__name__}: {exc}") from None
        try:
            return cls._from_state(dom, guarantee, arrays, meta)
        except FuguError as exc:
            raise bad(str(exc)) from None
        except (KeyError, IndexError, TypeError, ValueError, AttributeError, AssertionError) as exc:
            raise bad(
                f"its {header['kind']} state does not fit: {type(exc).__name__}: {exc}"
            ) from None

    def summary(self) -> dict[str, Any]:
        """A JSON-able description (for ``fugu info``)."""
        out: dict[str, Any] = {"kind": self.kind, "guarantee": self.guarantee.to_dict()}
        if self.domain is not None:
            out["domain"] = {a.name: f"{a.kind}[{a.size}]" for a in self.domain.attributes}
        return out

    def __repr__(self) -> str:
        g = self.guarantee
        flag = "" if g.private else " NOT PRIVATE"
        return f"<{type(self).__name__} {g.mechanism} {g.model} ε={g.epsilon:g}{flag}>"


_OUTPUTS = ("array", "pandas", "polars", "arrow")
_MAX_ERROR_LOOP = 4096  # queries answered one expected_error call at a time
_MAX_ERROR_CELLS = 2**24  # cells for which to_arrow computes per-cell errors


def _cell_bounds(dom: Domain) -> NDArray[np.int64]:
    """Bounds (size, d, 2) of every one-cell query, in C order."""
    cells = np.unravel_index(np.arange(dom.size, dtype=np.int64), dom.shape)
    bounds = np.empty((dom.size, dom.ndim, 2), dtype=np.int64)
    for j in range(dom.ndim):
        bounds[:, j, 0] = cells[j]
        bounds[:, j, 1] = cells[j] + 1
    return bounds


def _as_query(query: Any) -> RangeQuery:
    if isinstance(query, RangeQuery):
        return query
    if isinstance(query, Mapping):
        return RangeQuery(dict(query))
    raise InvalidTypeError(
        f"a query is a fugu.RangeQuery or a mapping like {{'age': (20, 29)}}, got "
        f"{type(query).__name__}"
    )


def _as_workload(workload: Any) -> Workload:
    if isinstance(workload, Workload):
        return workload
    if isinstance(workload, str | bytes | Mapping) or not isinstance(workload, Iterable):
        raise InvalidTypeError(
            f"a workload is a fugu.Workload or a list of RangeQuery, got {type(workload).__name__}"
        )
    return Workload([_as_query(q) for q in workload])


def _free_name(name: str, taken: Mapping[str, Any]) -> str:
    while name in taken:
        name += "_"
    return name


def _nullable(values: NDArray[np.float64] | None, n: int) -> Any:
    import pyarrow as pa

    if values is None:
        return pa.nulls(n, pa.float64())
    return pa.array(np.asarray(values, np.float64))


def _cell_query(b: NDArray[np.int64], dom: Domain) -> RangeQuery:
    conds: dict[str, Any] = {}
    for j, a in enumerate(dom.attributes):
        lo = int(b[j, 0])
        if a.kind == "ordinal" and getattr(a, "edges", None) is None:
            conds[a.name] = (lo + a.low, lo + a.low)  # type: ignore[union-attr]
        else:
            label = a.labels[lo]
            conds[a.name] = (label, label) if a.kind == "ordinal" else label
    return RangeQuery(conds)


def _convert(table: Any, output: str) -> Any:
    """An Arrow table as the requested kind; pandas and polars are optional."""
    if output == "arrow":
        return table
    if output == "pandas":
        try:
            import pandas  # noqa: F401
        except ImportError:
            raise MissingDependencyError(
                "output='pandas' / to_pandas() needs pandas: pip install pandas "
                "(or use to_arrow(), which needs nothing extra)"
            ) from None
        return table.to_pandas()
    try:
        import polars as pl
    except ImportError:
        raise MissingDependencyError(
            "output='polars' / to_polars() needs polars: pip install polars "
            "(or use to_arrow(), which needs nothing extra)"
        ) from None
    return pl.from_arrow(table)


# reading release files ------------------------------------------------------------------------
_HEADER_MEMBER = "__header__.npy"
_MAX_HEADER_BYTES = 256 * 2**20
_GUARANTEE_FIELDS = {
    "model": str,
    "epsilon": float,
    "neighbours": str,
    "mechanism": str,
    "sensitivity": float,
    "source": str,
    "parameters": dict,
    "data_options": dict,
    "post_processing": list,
    "private": bool,
    "delta": float,
}
#: "private" too: every file fugu writes says it, and a guarantee without it must not be read
#: as private (a seeded release would become private by losing one field)
_GUARANTEE_REQUIRED = ("model", "epsilon", "neighbours", "mechanism", "private")


def _max_release_bytes() -> int:
    import os

    raw = os.environ.get("FUGU_MAX_RELEASE_BYTES", "")
    try:
        return int(raw) if raw else 8 * 2**30
    except ValueError:
        raise InvalidParameterError(
            f"FUGU_MAX_RELEASE_BYTES must be an integer number of bytes, got {raw!r}"
        ) from None


def _npy_header(
    zf: zipfile.ZipFile, info: zipfile.ZipInfo, bad: Callable[[str], FileFormatError]
) -> tuple[tuple[int, ...], np.dtype[Any], int]:
    """(shape, dtype, header length) of one ``.npy`` member, reading only its header."""
    fmt = np.lib.format
    with zf.open(info) as fh:
        try:
            version = fmt.read_magic(fh)
            if version == (1, 0):
                shape, _fortran, dtype = fmt.read_array_header_1_0(fh)
            elif version == (2, 0):
                shape, _fortran, dtype = fmt.read_array_header_2_0(fh)
            else:
                raise bad(f"array {info.filename!r} uses .npy format {version}, not 1.0 or 2.0")
        except FileFormatError:
            raise
        except (ValueError, EOFError, OSError, SyntaxError, TypeError) as exc:
            raise bad(f"array {info.filename!r} has a malformed header ({exc})") from None
        offset = fh.tell()
    return tuple(int(n) for n in shape), np.dtype(dtype), offset


def _read_header(
    zf: zipfile.ZipFile,
    infos: Mapping[str, zipfile.ZipInfo],
    bad: Callable[[str], FileFormatError],
) -> dict[str, Any]:
    info = infos.get(_HEADER_MEMBER)
    if info is None:
        raise bad("it has no __header__ (was it written by Release.save?)")
    if info.file_size > _MAX_HEADER_BYTES:
        raise bad(f"its header declares {info.file_size:,} bytes, above {_MAX_HEADER_BYTES:,}")
    shape, dtype, offset = _npy_header(zf, info, bad)
    if dtype != np.uint8 or len(shape) != 1 or offset + shape[0] != info.file_size:
        raise bad(f"its header is a {dtype} array of shape {shape}, not the JSON bytes expected")
    try:
        with zf.open(info) as fh:
            fh.seek(offset)
            raw = fh.read(shape[0])
        header = json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError, RecursionError) as exc:
        raise bad(f"its header is not valid JSON ({exc})") from None
    if not isinstance(header, dict):
        raise bad(f"its header is a JSON {type(header).__name__}, not an object")
    return header


def _check_header(
    header: Mapping[str, Any], bad: Callable[[str], FileFormatError]
) -> tuple[type[Release], Domain | None, Guarantee, dict[str, Any]]:
    if header.get("format") != "fugu-release":
        raise bad(f"format is {header.get('format')!r}, not 'fugu-release'")
    if "version" not in header:
        raise bad(
            "its header has no format version (every file Release.save writes has one); save "
            "the release again with fugu"
        )
    version = header["version"]
    if isinstance(version, bool) or not isinstance(version, int) or version < 1:
        raise bad(f"version must be a positive integer, got {version!r}")
    if version > FORMAT_VERSION:
        raise bad(f"it was written by a newer fugu (format {version}); upgrade fugu")
    unknown = set(header) - {"format", "version", "kind", "domain", "guarantee", "meta"}
    if unknown:
        raise bad(f"unknown header fields {sorted(unknown)}")
    kind = header.get("kind")
    _import_all_release_kinds()
    if not isinstance(kind, str) or kind not in Release._registry:
        raise bad(f"unknown release kind {kind!r}; known: {sorted(Release._registry)}")
    cls = Release._registry[kind]
    dom_d = header.get("domain")
    dom: Domain | None = None
    if dom_d is not None:
        if not isinstance(dom_d, dict) or not isinstance(dom_d.get("attributes"), list):
            raise bad("'domain' must be an object with a list of 'attributes'")
        try:
            dom = Domain.from_dict(dom_d)
        except FuguError as exc:
            raise bad(f"its domain is invalid: {exc}") from None
        except (KeyError, TypeError, ValueError, AttributeError, IndexError) as exc:
            raise bad(f"its domain is invalid: {type(exc).__name__}: {exc}") from None
    guarantee = _check_guarantee(header.get("guarantee"), bad)
    meta = header.get("meta", {})
    if not isinstance(meta, dict):
        raise bad(f"'meta' must be an object, got {type(meta).__name__}")
    return cls, dom, guarantee, meta


def _check_guarantee(g: Any, bad: Callable[[str], FileFormatError]) -> Guarantee:
    if not isinstance(g, dict):
        raise bad(f"'guarantee' must be an object, got {type(g).__name__}")
    missing = [k for k in _GUARANTEE_REQUIRED if k not in g]
    unknown = sorted(set(g) - set(_GUARANTEE_FIELDS))
    if missing or unknown:
        raise bad(f"guarantee fields missing {missing}, unknown {unknown}")
    for key, typ in _GUARANTEE_FIELDS.items():
        if key not in g or (g[key] is None and key == "sensitivity"):
            continue
        v = g[key]
        ok = (
            isinstance(v, int | float) and not isinstance(v, bool)
            if typ is float
            else isinstance(v, typ)
        )
        if not ok:
            raise bad(f"guarantee {key!r} must be a {typ.__name__}, got {v!r}")
    if g["model"] not in MODELS:
        raise bad(f"guarantee model must be one of {sorted(MODELS)}, got {g['model']!r}")
    eps = g["epsilon"]
    if not math.isfinite(eps) or eps <= 0:
        raise bad(f"guarantee epsilon must be a finite number > 0, got {eps!r}")
    dl = g.get("delta", 0.0)
    if not math.isfinite(dl) or not 0 <= dl < 1:
        raise bad(f"guarantee delta must be a number in [0, 1), got {dl!r}")
    sens = g.get("sensitivity")
    if sens is not None and (math.isnan(sens) or sens < 0):
        raise bad(f"guarantee sensitivity must be >= 0, got {sens!r}")
    if not all(isinstance(x, str) for x in g.get("post_processing", [])):
        raise bad("guarantee post_processing must be a list of strings")
    g = _older_delta(g, bad)
    try:
        return Guarantee.from_dict(g)
    except FuguError as exc:
        raise bad(f"its guarantee is invalid: {exc}") from None


#: the (ε, δ) mechanisms of files written before guarantees had a ``delta`` field: their δ was
#: only among the parameters (Karwa et al.'s k-triangle count)
_OLDER_DELTA_MECHANISMS = ("Karwa et al. k-triangle",)


def _older_delta(g: dict[str, Any], bad: Callable[[str], FileFormatError]) -> dict[str, Any]:
    """The guarantee of a file written before ``Guarantee.delta``, with the δ its (ε, δ)
    mechanism kept among the parameters: read without it, the release would claim pure ε-DP."""
    if "delta" in g or not str(g["mechanism"]).startswith(_OLDER_DELTA_MECHANISMS):
        return g
    params = g.get("parameters")
    dl = params.get("delta") if isinstance(params, dict) else None
    if (
        isinstance(dl, bool)
        or not isinstance(dl, int | float)
        or not (math.isfinite(dl) and 0 < dl < 1)
    ):
        raise bad(
            f"its {g['mechanism']!r} guarantee is (ε, δ)-DP but states no delta (a file from "
            f"an older fugu, or edited); it cannot be read as pure ε-DP. Release it again"
        )
    return {**g, "delta": float(dl)}


def _check_arrays(
    zf: zipfile.ZipFile,
    infos: Mapping[str, zipfile.ZipInfo],
    bad: Callable[[str], FileFormatError],
) -> dict[str, tuple[tuple[int, ...], np.dtype[Any]]]:
    from .domain import MAX_DENSE_CELLS

    limit = _max_release_bytes()
    total = 0
    specs: dict[str, tuple[tuple[int, ...], np.dtype[Any]]] = {}
    for member, info in infos.items():
        if member == _HEADER_MEMBER:
            continue
        if not (member.startswith("a_") and member.endswith(".npy")):
            raise bad(f"unexpected member {member!r}")
        shape, dtype, offset = _npy_header(zf, info, bad)
        key = member[2:-4]
        if dtype.hasobject:
            raise bad(f"array {key!r} holds Python objects ({dtype}); fugu never writes those")
        if any(n < 0 for n in shape):
            raise bad(f"array {key!r} declares a negative shape {shape}")
        count = math.prod(shape)
        if count > 4 * MAX_DENSE_CELLS:
            raise bad(f"array {key!r} declares {count:,} elements, above {4 * MAX_DENSE_CELLS:,}")
        nbytes = count * dtype.itemsize
        if offset + nbytes != info.file_size:
            raise bad(
                f"array {key!r} declares shape {shape} of {dtype} ({nbytes:,} bytes) but stores "
                f"{info.file_size - offset:,} bytes (truncated or edited)"
            )
        total += nbytes
        if total > limit:
            raise bad(
                f"its arrays declare more than {limit:,} bytes; set FUGU_MAX_RELEASE_BYTES "
                "to accept larger releases"
            )
        specs[key] = (shape, dtype)
    return specs


def _import_all_release_kinds() -> None:
    """Import the modules that define release kinds so ``load`` can find them."""
    import importlib

    for mod in (
        "fugu.central",
        "fugu.blowfish",
        "fugu.graph",
        "fugu.ldp",
    ):
        try:
            importlib.import_module(mod)
        except ImportError:  # pragma: no cover - a model package may be absent in a slim install
            pass


class CubeRelease(Release):
    """A dense noisy cube: answers are sums of estimated cells (post-processing of the noise).

    Parameters
    ----------
    estimate : array, shape ``domain.shape``
        Estimated cell counts (unbiased unless post-processing says otherwise).
    cell_variance : array or float, optional
        Noise variance of each cell when cells carry independent noise; enables
        :meth:`expected_error`. Subclasses with correlated noise override ``expected_error``.
    """

    kind = "cube"
    _state_fields: ClassVar[tuple[StateField, ...]] = (
        Array("estimate", "_estimate", shape="domain"),
        Array("cell_variance", "_cell_variance", shape="domain", optional=True),
    )

    def __init__(
        self,
        domain: Domain,
        guarantee: Guarantee,
        estimate: ArrayLike,
        *,
        cell_variance: ArrayLike | None = None,
    ) -> None:
        super().__init__(domain, guarantee)
        est = np.asarray(estimate, dtype=np.float64)
        if est.shape != domain.shape:
            raise InvalidParameterError(
                f"estimate has shape {est.shape}, the domain needs {domain.shape}"
            )
        self._estimate = est
        self._cell_variance = (
            None
            if cell_variance is None
            else np.broadcast_to(np.asarray(cell_variance, np.float64), domain.shape)
        )
        self._prefix: PrefixSums | None = None
        self._var_prefix: PrefixSums | None = None

    @property
    def counts(self) -> NDArray[np.float64]:
        return self._estimate

    def _answer_bounds(self, bounds: NDArray[np.int64]) -> NDArray[np.float64]:
        if self._prefix is None:
            self._prefix = PrefixSums(self._estimate)
        return self._prefix.answer(bounds)

    def expected_error(self, query: RangeQuery | Mapping[str, Any]) -> float | None:
        if self._cell_variance is None:
            return None
        q = query if isinstance(query, RangeQuery) else RangeQuery(dict(query))
        if self._var_prefix is None:
            self._var_prefix = PrefixSums(self._cell_variance)
        assert self.domain is not None
        return float(math.sqrt(max(0.0, self._var_prefix.answer(q.bounds(self.domain)[None])[0])))

    def _independent_cells(self) -> bool:
        return (
            self._cell_variance is not None
            and type(self).expected_error is CubeRelease.expected_error
        )

    def _cell_errors(self) -> NDArray[np.float64] | None:
        if self._independent_cells():
            assert self._cell_variance is not None
            return np.sqrt(np.asarray(self._cell_variance, np.float64)).reshape(-1)
        return super()._cell_errors()

    def _bounds_errors(
        self, bounds: NDArray[np.int64], workload: Workload | None
    ) -> NDArray[np.float64] | None:
        if self._independent_cells():
            if self._var_prefix is None:
                assert self._cell_variance is not None
                self._var_prefix = PrefixSums(self._cell_variance)
            return np.sqrt(np.maximum(self._var_prefix.answer(bounds), 0.0))
        return super()._bounds_errors(bounds, workload)

    def __repr__(self) -> str:
        return super().__repr__()[:-1] + f" cells={self._estimate.size}>"

    def post_process(
        self, step: str, fn: Callable[[NDArray[np.float64]], NDArray[np.float64]]
    ) -> CubeRelease:
        """A new release whose cells are ``fn(counts)``, with ``step`` recorded in the guarantee.

        The expected error is no longer known after an arbitrary post-processing step.
        """
        assert self.domain is not None
        return CubeRelease(
            self.domain, self.guarantee.with_post_processing(step), fn(self._estimate.copy())
        )

    def nonnegative(self) -> CubeRelease:
        """Negative cells set to 0 (biased; recorded)."""
        return self.post_process("clamp negative cells to 0", lambda c: np.maximum(c, 0.0))

    def rounded(self) -> CubeRelease:
        """Cells rounded to integers (recorded)."""
        return self.post_process("round cells to integers", np.rint)
