"""The baselines that treat attributes independently: Uni and MSW (Yang et al., PVLDB 2020, §3).

* :class:`Uni` — the uniform guess ``n · Π |I_j|/c_j`` (:class:`UniformRelease`). Users send a
  constant (only n is used): a floor every method must beat.
* :class:`MSW` — users split into d groups; group j reports attribute j by Square Wave (ε-LDP,
  one report per user with the full ε); each 1-D distribution is rebuilt with EMS; a λ-D answer
  is ``n · Π_j θ_j(I_j)`` (:class:`ProductRelease`, independence).

Privacy model and sources: :mod:`fugu.ldp.multidim`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
from numpy.typing import NDArray

from ..domain import Domain
from ..errors import InvalidParameterError, check_positive_int
from ..noise import RandomSource
from ..release import Guarantee, Release
from ..release_state import ArrayList, Meta
from .multidim_common import YANG, _check_sizes
from .protocol import ColumnSpec, LDPProtocol
from .square_wave import (
    check_tol,
    default_bins,
    reconstruct,
    sw_histogram,
    sw_perturb,
    sw_report_half_width,
)

__all__ = ["MSW", "ProductRelease", "Uni", "UniformRelease"]


# -- Uni -----------------------------------------------------------------------------------------
class UniformRelease(Release):
    """Answers ``n · Π |I_j| / c_j``: what a method that learned nothing would say."""

    kind = "ldp-uniform"
    _state_fields = (Meta("n", float),)

    def __init__(self, domain: Domain, guarantee: Guarantee, n: float) -> None:
        super().__init__(domain, guarantee)
        self.n = float(n)

    def _answer_bounds(self, bounds: NDArray[np.int64]) -> NDArray[np.float64]:
        dom = self._require_domain()
        frac = (bounds[:, :, 1] - bounds[:, :, 0]) / np.asarray(dom.shape, np.float64)[None, :]
        return self.n * frac.prod(axis=1)


class Uni(LDPProtocol):
    """The uniform guess (Yang et al.'s "Uni"): each user sends the constant 0; the answer to a
    query is ``n`` times its volume fraction. Trivially ε-LDP (the report does not depend on the
    record). Expected error: the query's distance from uniformity.

    >>> import fugu
    >>> dom = fugu.Domain([fugu.Ordinal("a", 0, 3), fugu.Ordinal("b", 0, 3)])
    >>> rel = fugu.ldp.Uni(dom, 1.0).simulate({"a": [0, 1], "b": [2, 3]})
    >>> rel.answer({"a": (0, 1)})
    1.0
    """

    name = "uni"
    summary = "uniform guess (floor)"
    source = YANG

    def report_columns(self) -> dict[str, ColumnSpec]:
        return {"v": "int"}

    def _perturb(
        self, codes: NDArray[np.int64], rng: RandomSource, groups: Any
    ) -> dict[str, np.ndarray]:
        return {"v": np.zeros(codes.shape[0], dtype=np.int64)}

    def _validate(self, columns: Mapping[str, np.ndarray]) -> NDArray[np.bool_]:
        return columns["v"] == 0

    def support(self, columns: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
        return {"n": np.array([columns["v"].size], dtype=np.int64)}

    def _estimate(self, state: Mapping[str, np.ndarray], n: int) -> Release:
        return UniformRelease(self.domain, self.guarantee(private=True, n=n), n)


# -- MSW -----------------------------------------------------------------------------------------
class ProductRelease(Release):
    """Per-attribute distributions; a λ-D answer is ``n · Π_j θ_j(I_j)`` (independence)."""

    kind = "ldp-product"
    _state_fields = (ArrayList("theta", "thetas", ndim=1), Meta("n", float))

    def __init__(
        self, domain: Domain, guarantee: Guarantee, thetas: Sequence[NDArray[np.float64]], n: float
    ) -> None:
        super().__init__(domain, guarantee)
        self.thetas = [np.asarray(t, np.float64) for t in thetas]
        self.n = float(n)
        self._cum = [np.concatenate([[0.0], np.cumsum(t)]) for t in self.thetas]

    def marginal(self, name: str) -> NDArray[np.float64]:
        """Estimated counts of one attribute."""
        return self.thetas[self._require_domain().axis(name)] * self.n

    def _answer_bounds(self, bounds: NDArray[np.int64]) -> NDArray[np.float64]:
        out = np.full(bounds.shape[0], self.n)
        for j, cum in enumerate(self._cum):
            out *= cum[bounds[:, j, 1]] - cum[bounds[:, j, 0]]
        return out


class MSW(LDPProtocol):
    """Multiplied Square Wave (Yang et al. §3): users split into d groups, group j reports
    attribute j (value mapped to the bin centre ``(k + 0.5)/c_j``) with Square Wave at full ε;
    EMS (or EM) rebuilds each 1-D distribution; a λ-D answer is the product of the 1-D answers.

    Privacy: ε-LDP (one SW report per user; Li et al., SIGMOD 2020). Error: the 1-D estimates
    converge to the true marginals, so the error floor is the data's departure from independence.
    Report: ``group`` and ``y`` (float in ``[−b, 1 + b]``); state: one output histogram per
    attribute (see :func:`~fugu.ldp.square_wave.default_bins`).
    """

    name = "msw"
    summary = "Square Wave per attribute, product of 1-D answers"
    source = YANG + "; Square Wave: Li et al., SIGMOD 2020"

    def __init__(
        self,
        domain: Domain,
        epsilon: float,
        reconstruction: str = "ems",
        max_iter: int = 10_000,
        tol: float = 1e-3,
        resolution: int = 128,
    ) -> None:
        super().__init__(domain, epsilon)
        self.sizes = _check_sizes(domain)
        if reconstruction not in ("ems", "em"):
            raise InvalidParameterError(
                f"reconstruction must be 'ems' or 'em', got {reconstruction!r}"
            )
        self.reconstruction = reconstruction
        self.max_iter = check_positive_int(max_iter, "max_iter")
        self.tol = check_tol(tol)
        self.b = sw_report_half_width(self.epsilon)
        self.resolution = check_positive_int(resolution, "resolution", 1)
        self.bins = [default_bins(self.b, c, self.resolution) for c in self.sizes]
        self.offsets = np.concatenate([[0], np.cumsum(self.bins)]).astype(np.int64)

    def _params(self) -> dict[str, Any]:
        return {
            "reconstruction": self.reconstruction,
            "max_iter": self.max_iter,
            "tol": self.tol,
            "resolution": self.resolution,
        }

    @property
    def n_groups(self) -> int:
        return self.domain.ndim

    def report_columns(self) -> dict[str, ColumnSpec]:
        return {"group": "int", "y": "float"}

    def _perturb(
        self, codes: NDArray[np.int64], rng: RandomSource, groups: Any
    ) -> dict[str, np.ndarray]:
        g = np.asarray(groups, dtype=np.int64)
        mine = codes[np.arange(codes.shape[0]), g]
        x = (mine + 0.5) / np.asarray(self.sizes, np.float64)[g]
        return {"group": g, "y": sw_perturb(x, self.epsilon, rng, self.b)}

    def _validate(self, columns: Mapping[str, np.ndarray]) -> NDArray[np.bool_]:
        g, y = columns["group"], columns["y"]
        return (g >= 0) & (g < self.n_groups) & np.isfinite(y) & (y >= -self.b) & (y <= 1 + self.b)

    def support(self, columns: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
        g, y = columns["group"], columns["y"]
        out = np.zeros(int(self.offsets[-1]), dtype=np.int64)
        for j in range(self.n_groups):
            out[self.offsets[j] : self.offsets[j + 1]] = sw_histogram(
                y[g == j], self.b, self.bins[j]
            )
        return {"hist": out}

    def _estimate(self, state: Mapping[str, np.ndarray], n: int) -> Release:
        thetas, unmeasured = [], []
        for j, c in enumerate(self.sizes):
            h = state["hist"][self.offsets[j] : self.offsets[j + 1]]
            if not np.any(h):
                unmeasured.append(self.domain.names[j])
            theta, _ = reconstruct(
                h,
                self.epsilon,
                c,
                b=self.b,
                smoothing=self.reconstruction == "ems",
                resolution=self.resolution,
                max_iter=self.max_iter,
                tol=self.tol,
            )
            thetas.append(theta)
        g = self.guarantee(
            private=True,
            n=n,
            post_processing=(
                *(
                    (f"no report for {', '.join(unmeasured)}: uniform distribution",)
                    if unmeasured
                    else ()
                ),
                f"{self.reconstruction.upper()} reconstruction per attribute",
                "product of 1-D answers (independence assumption)",
            ),
        )
        return ProductRelease(self.domain, g, thetas, n)
