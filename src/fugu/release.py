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
from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, ClassVar

import numpy as np
from numpy.typing import ArrayLike, NDArray

from .domain import Domain
from .errors import FuguError, InvalidParameterError, InvalidTypeError
from .queries import PrefixSums, RangeQuery, Workload

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

    def __post_init__(self) -> None:
        if self.model not in MODELS:
            raise InvalidParameterError(
                f"model must be one of {sorted(MODELS)}, got {self.model!r}"
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
        lines = [
            f"{MODELS[self.model]}, epsilon = {self.epsilon:g}, neighbours: {self.neighbours}.",
            f"Mechanism: {self.mechanism}"
            + (f" (sensitivity {self.sensitivity:g})" if self.sensitivity is not None else "")
            + ".",
        ]
        if self.source:
            lines.append(f"Source: {self.source}.")
        lines.append(
            f"Any one {_protected_unit(self)} changes the probability of any output by at most a "
            f"factor of e^{self.epsilon:g} = {math.exp(self.epsilon):.3g}."
        )
        if self.post_processing:
            lines.append(
                "Post-processing (no further privacy cost): "
                + ", ".join(self.post_processing)
                + "."
            )
        if not self.private:
            lines.append(
                "NOT PRIVATE: made with a seeded random source for reproducibility; do not publish."
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
    """Base class of every release. Subclasses implement ``_answer_bounds`` and the state hooks.

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
        q = query if isinstance(query, RangeQuery) else RangeQuery(dict(query))
        dom = self._require_domain()
        return float(self._answer_bounds(q.bounds(dom)[None])[0])

    def answer_many(self, workload: Workload | list[RangeQuery]) -> NDArray[np.float64]:
        """Noisy answers to every query of a workload, vectorised."""
        w = workload if isinstance(workload, Workload) else Workload(workload)
        dom = self._require_domain()
        return self._answer_bounds(w.bounds(dom))

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
    def _state(self) -> tuple[dict[str, np.ndarray], dict[str, Any]]:
        """Arrays and JSON-able metadata that rebuild this release."""
        raise NotImplementedError

    @classmethod
    def _from_state(
        cls,
        domain: Domain | None,
        guarantee: Guarantee,
        arrays: Mapping[str, np.ndarray],
        meta: Mapping[str, Any],
    ) -> Release:
        raise NotImplementedError

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
        with open(p, "wb") as fh:
            np.savez_compressed(fh, **payload)  # type: ignore[arg-type]
        return p

    @staticmethod
    def load(path: str | Path) -> Release:
        """Read a release written by :meth:`save`, whatever its kind."""
        p = Path(path)
        if not p.exists():
            raise InvalidParameterError(f"release file {str(p)!r} does not exist")
        try:
            with np.load(p, allow_pickle=False) as z:
                header = json.loads(bytes(z["__header__"]).decode())
                arrays = {k[2:]: z[k] for k in z.files if k.startswith("a_")}
        except (OSError, ValueError, KeyError, zipfile.BadZipFile, json.JSONDecodeError) as exc:
            raise InvalidParameterError(f"{str(p)!r} is not a fugu release file ({exc})") from None
        if header.get("format") != "fugu-release":
            raise InvalidParameterError(f"{str(p)!r} is not a fugu release file")
        if header.get("version", 0) > FORMAT_VERSION:
            raise InvalidParameterError(
                f"{str(p)!r} was written by a newer fugu (format {header['version']}); upgrade fugu"
            )
        _import_all_release_kinds()
        cls = Release._registry.get(header["kind"])
        if cls is None:
            raise InvalidParameterError(f"unknown release kind {header['kind']!r} in {str(p)!r}")
        dom = None if header["domain"] is None else Domain.from_dict(header["domain"])
        return cls._from_state(
            dom, Guarantee.from_dict(header["guarantee"]), arrays, header["meta"]
        )

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

    def _state(self) -> tuple[dict[str, np.ndarray], dict[str, Any]]:
        arrays = {"estimate": self._estimate}
        if self._cell_variance is not None:
            arrays["cell_variance"] = np.ascontiguousarray(self._cell_variance)
        return arrays, {}

    @classmethod
    def _from_state(
        cls,
        domain: Domain | None,
        guarantee: Guarantee,
        arrays: Mapping[str, np.ndarray],
        meta: Mapping[str, Any],
    ) -> Release:
        assert domain is not None
        return cls(domain, guarantee, arrays["estimate"], cell_variance=arrays.get("cell_variance"))

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
