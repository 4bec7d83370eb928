"""Methods that publish every 2-way marginal: CALM, and the machinery LHIO shares with it.

:class:`CALM` (Zhang et al., CCS 2018, as adapted by Yang et al., PVLDB 2020) splits users over
the ``C(d,2)`` attribute pairs; each reports the pair cell of her record with the adaptive
frequency oracle (ε-LDP, one report per user with the full ε). Post-processing: a normalisation
and variance-weighted consistency of the shared 1-D marginals (:func:`_finish_pairs`), then
:class:`PairsRelease` answers λ-D queries from the pairs (the weighted update for λ ≥ 3).
:class:`_PairsMethod` is the pair-division base class CALM and :class:`~fugu.ldp.hio.LHIO`
share. Privacy model and sources: :mod:`fugu.ldp.multidim`.
"""

from __future__ import annotations

from collections.abc import Mapping
from itertools import combinations
from typing import Any

import numpy as np
from numpy.typing import NDArray

from ..domain import Domain
from ..errors import InvalidParameterError, check_positive_int
from ..inference.ldp_post import (
    NORMALISATIONS,
    GridEstimate,
    consistent_grids,
    estimate_from_pairs,
)
from ..noise import RandomSource
from ..queries import PrefixSums
from ..release import Guarantee, Release
from ..release_state import ArrayMap, Meta
from .multidim_common import YANG, _check_sizes, _restricted
from .oracles import GroupedOracle
from .protocol import ColumnSpec, LDPProtocol

__all__ = ["CALM", "PairsRelease"]


# -- pairs (CALM, LHIO) ----------------------------------------------------------------------
def _pair_key(name: str) -> tuple[int, int]:
    """``"0_2"`` (a saved matrix's name) as the attribute pair ``(0, 2)``."""
    j, k = name.split("_")
    return int(j), int(k)


class PairsRelease(Release):
    """Estimated 2-way marginals of every attribute pair; λ-D answers by the weighted update.

    ``matrices[(j, k)]`` (j < k) holds the ``c_j × c_k`` counts of attributes j and k, each
    summing to n. See the module docstring for how λ = 0, 1, 2 and ≥ 3 are answered.
    """

    kind = "ldp-pairs"
    _state_fields = (
        ArrayMap("m", "matrices", fmt=lambda jk: f"{jk[0]}_{jk[1]}", parse=_pair_key, ndim=2),
        Meta("n", float),
        Meta("estimator", str, default="full"),
    )

    def __init__(
        self,
        domain: Domain,
        guarantee: Guarantee,
        matrices: Mapping[tuple[int, int], NDArray[np.float64]],
        n: float,
        estimator: str = "full",
    ) -> None:
        super().__init__(domain, guarantee)
        self.matrices = {tuple(k): np.asarray(v, np.float64) for k, v in matrices.items()}
        self.n = float(n)
        self.estimator = estimator
        self._ps = {k: PrefixSums(v) for k, v in self.matrices.items()}

    def pair(self, a: str, b: str) -> NDArray[np.float64]:
        """The estimated 2-way marginal of attributes ``a`` and ``b`` (rows a, columns b)."""
        dom = self._require_domain()
        j, k = dom.axis(a), dom.axis(b)
        if j == k:
            raise InvalidParameterError(
                f"pair() takes two different attributes, got {a!r} twice; for one attribute's "
                f"counts use pair({a!r}, other).sum(axis=1)"
            )
        return self.matrices[(j, k)] if j < k else self.matrices[(k, j)].T

    def _box(
        self, j: int, k: int, bj: NDArray[np.int64], bk: NDArray[np.int64]
    ) -> NDArray[np.float64]:
        if j < k:
            return self._ps[(j, k)].answer(np.stack([bj, bk], axis=1))
        return self._ps[(k, j)].answer(np.stack([bk, bj], axis=1))

    def _answer_bounds(self, bounds: NDArray[np.int64]) -> NDArray[np.float64]:
        dom = self._require_domain()
        shape = dom.shape
        restr = _restricted(bounds, shape)
        lam = restr.sum(axis=1)
        out = np.full(bounds.shape[0], self.n)
        full = np.zeros((bounds.shape[0], 2), np.int64)
        for L in np.unique(lam):
            qs = np.flatnonzero(lam == L)
            if L == 0:
                continue
            attrs = [np.flatnonzero(restr[q]) for q in qs]
            if L == 1:
                for q, at in zip(qs, attrs, strict=True):
                    j = int(at[0])
                    k = 1 if j == 0 else 0
                    full[q] = (0, shape[k])
                    out[q] = self._box(j, k, bounds[q : q + 1, j], full[q : q + 1])[0]
                continue
            tables: dict[tuple[int, int], NDArray[np.float64]] = {}
            for pa, pb in combinations(range(int(L)), 2):
                t = np.zeros((qs.size, 2, 2))
                for i, (q, at) in enumerate(zip(qs, attrs, strict=True)):
                    j, k = int(at[pa]), int(at[pb])
                    bj, bk = bounds[q : q + 1, j], bounds[q : q + 1, k]
                    fj = np.array([[0, shape[j]]])
                    fk = np.array([[0, shape[k]]])
                    inin = self._box(j, k, bj, bk)[0]
                    in_j = self._box(j, k, bj, fk)[0]
                    in_k = self._box(j, k, fj, bk)[0]
                    tot = self._box(j, k, fj, fk)[0]
                    t[i] = [[inin, in_j - inin], [in_k - inin, tot - in_j - in_k + inin]]
                tables[(pa, pb)] = t
            if L == 2:
                out[qs] = tables[(0, 1)][:, 0, 0]
            else:
                est, _ = estimate_from_pairs(tables, int(L), self.n, variant=self.estimator)
                out[qs] = est
        return out


_NORM_WORDS = {
    "norm": "shift to the total n (unbiased)",
    "norm-sub": "Norm-Sub (non-negative, biased)",
    "norm-mul": "Norm-Mul (non-negative, biased)",
    "norm-cut": "Norm-Cut (non-negative, biased)",
    "base-pos": "negatives clamped (biased)",
}


def _finish_pairs(
    pairs: list[tuple[int, int]],
    mats: list[NDArray[np.float64]],
    variances: list[float],
    n: float,
    max_iter: int,
    method: str = "norm",
) -> tuple[dict[tuple[int, int], NDArray[np.float64]], int]:
    grids = [
        GridEstimate(
            (j, k), (np.arange(m.shape[0] + 1), np.arange(m.shape[1] + 1)), m, max(v, 1e-12)
        )
        for (j, k), m, v in zip(pairs, mats, variances, strict=True)
    ]
    out, rounds = consistent_grids(grids, n, max_iter=max_iter, method=method)
    return {p: g.counts for p, g in zip(pairs, out, strict=True)}, rounds


# A pair's dense marginal (support counts, estimate, prefix sums) may hold at most this many
# cells (128 MiB of float64), the limit of HDG's response matrices (fugu.ldp.grid_phase2).
_MAX_PAIR_CELLS = 1 << 24


class _PairsMethod(LDPProtocol):
    source = YANG

    def __init__(
        self,
        domain: Domain,
        epsilon: float,
        oracle: str = "adaptive",
        estimator: str = "full",
        max_iter: int = 100,
        normalisation: str = "norm",
    ) -> None:
        super().__init__(domain, epsilon)
        if normalisation not in NORMALISATIONS:
            raise InvalidParameterError(
                f"normalisation must be one of {NORMALISATIONS}, got {normalisation!r}"
            )
        self.normalisation = normalisation
        if domain.ndim < 2:
            raise InvalidParameterError(
                f"{self.name.upper()} measures attribute pairs; the domain has {domain.ndim} "
                f"attribute. Use a frequency oracle or SW for one attribute"
            )
        self.sizes = _check_sizes(domain)
        for j, k in combinations(range(domain.ndim), 2):
            cells = self.sizes[j] * self.sizes[k]
            if cells > _MAX_PAIR_CELLS:  # refused before any report: the sizes are public
                raise InvalidParameterError(
                    f"{self.name.upper()} keeps a dense {self.sizes[j]:,} x {self.sizes[k]:,} "
                    f"marginal of ({domain.names[j]}, {domain.names[k]}): {cells:,} cells, more "
                    f"than {_MAX_PAIR_CELLS:,}; coarsen these attributes (fewer values, e.g. "
                    f"wider bins) or use TDG"
                )
        if estimator not in ("full", "in-in"):
            raise InvalidParameterError(f"estimator must be 'full' or 'in-in', got {estimator!r}")
        self.oracle = oracle
        self.estimator = estimator
        self.max_iter = check_positive_int(max_iter, "max_iter")
        self.pairs = list(combinations(range(domain.ndim), 2))

    def _base_params(self) -> dict[str, Any]:
        return {
            "oracle": self.oracle,
            "estimator": self.estimator,
            "max_iter": self.max_iter,
            "normalisation": self.normalisation,
        }

    @property
    def n_groups(self) -> int:
        return self.grouped.m

    grouped: GroupedOracle

    def report_columns(self) -> dict[str, ColumnSpec]:
        return self.grouped.report_columns()

    def _validate(self, columns: Mapping[str, np.ndarray]) -> NDArray[np.bool_]:
        return self.grouped.validate(columns)

    def support(self, columns: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
        return self.grouped.support(columns)


class CALM(_PairsMethod):
    """CALM with all 2-way marginals (Zhang et al., CCS 2018, as used by Yang et al. §3).

    Users are split over the C(d,2) attribute pairs; each reports the cell of her pair's values
    (``c_j·c_k`` cells) with the adaptive oracle at full ε. Post-processing: ``normalisation``
    (default ``"norm"``, unbiased; ``"norm-sub"`` as in the CALM paper, see the module
    docstring) and variance-weighted consistency of shared 1-D marginals, alternated until
    nothing moves by a count (at most ``max_iter`` rounds). Error of a 2-D answer: variance about
    ``(ωc)^2 · C(d,2)^2 · Var_cell(n / C(d,2))`` (the sum of ``(ωc)^2`` cells of one pair).

    >>> import fugu, numpy as np
    >>> dom = fugu.datasets.synthetic_domain(3, 8)
    >>> recs = fugu.datasets.correlated_gaussian(3000, 3, 8, seed=1)
    >>> rel = fugu.ldp.CALM(dom, 1.0).simulate(recs, rng=fugu.RandomSource(seed=1))
    >>> round(rel.answer({}))
    3000
    """

    name = "calm"
    summary = "CALM: all 2-way marginals, Norm-Sub + consistency"

    def __init__(
        self,
        domain: Domain,
        epsilon: float,
        oracle: str = "adaptive",
        estimator: str = "full",
        max_iter: int = 100,
        normalisation: str = "norm",
    ) -> None:
        super().__init__(domain, epsilon, oracle, estimator, max_iter, normalisation)
        self.grouped = GroupedOracle(
            self.epsilon, [self.sizes[j] * self.sizes[k] for j, k in self.pairs], oracle
        )

    def _params(self) -> dict[str, Any]:
        return self._base_params()

    def _perturb(
        self, codes: NDArray[np.int64], rng: RandomSource, groups: Any
    ) -> dict[str, np.ndarray]:
        g = np.asarray(groups, dtype=np.int64)
        pj = np.array([p[0] for p in self.pairs])[g]
        pk = np.array([p[1] for p in self.pairs])[g]
        rows = np.arange(codes.shape[0])
        ck = np.asarray(self.sizes)[pk]
        cell = codes[rows, pj] * ck + codes[rows, pk]
        return self.grouped.perturb(g, cell, rng)

    def _estimate(self, state: Mapping[str, np.ndarray], n: int) -> Release:
        ests = self.grouped.estimates(state)
        ng = state["n_group"].astype(np.float64)
        mats, variances = [], []
        for i, (j, k) in enumerate(self.pairs):
            scale = n / ng[i] if ng[i] > 0 else 0.0
            mats.append(ests[i].reshape(self.sizes[j], self.sizes[k]) * scale)
            variances.append(
                self.grouped.cell_variance(i, max(ng[i], 1.0)) * scale**2 if ng[i] else 1e12
            )
        matrices, rounds = _finish_pairs(
            self.pairs, mats, variances, n, self.max_iter, self.normalisation
        )
        g = self.guarantee(
            private=True,
            n=n,
            post_processing=(
                f"{_NORM_WORDS[self.normalisation]} + variance-weighted consistency of shared 1-D "
                f"marginals ({rounds} rounds)",
                f"lambda-D answers by weighted update ({self.estimator} in/out tables)",
            ),
        )
        return PairsRelease(self.domain, g, matrices, n, self.estimator)
