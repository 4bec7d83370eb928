"""Grid machinery shared by TDG and HDG (Yang et al., PVLDB 2020): the client/server protocol.

The two public methods live in :mod:`fugu.ldp.tdg` and :mod:`fugu.ldp.hdg`; read their
docstrings for the privacy statement. What they share is split by the question a reader asks
(each name is re-exported here, its old home):

* :mod:`fugu.ldp.grid_layout` — how fine the grids are and where their cells lie:
  :func:`guideline` (Yang et al. §4.5; spec ``ldp_range.md`` §5.2), :func:`round_granularity`,
  :func:`grid_edges`. ``g1 ≥ g2`` is enforced so that the 1-D partition refines the 2-D one.
* :mod:`fugu.ldp.grid_oue` — the default frequency oracle, grouped OUE, vectorised.
* this module — :class:`GridProtocol`: the client/server shape of :mod:`fugu.ldp.protocol`
  with one user group per grid, every user reporting the cell of her record in her group's grid
  through a :class:`~fugu.ldp.oracles.GroupedOracle`.
* :mod:`fugu.ldp.grid_phase2` — Phase 2 (consistency between the grids, response matrices):
  :func:`release_from_grids`, behind :meth:`GridProtocol.release_from_grids`.
* :mod:`fugu.ldp.grid_matrices` — the response matrices Phase 2 builds for cut cells.
* :mod:`fugu.ldp.grid_release` — :class:`GridRelease`, Phase 3: answers λ-D range queries for
  any λ (see its docstring).

Where fugu departs from the authors' code (privmdr; spec §7), and why:

* Frequency oracle: OUE by default, as in the code (the paper's text says OLH, whose variance
  it quotes with OUE's p = 1/2, q = 1/(e^ε+1)); OLH, GRR and adaptive are options. Real OUE
  reports are produced (the code simulates the bit counts).
* Consistency weights: inverse variance for both methods, as the paper's §4.2 derives (TDG's
  code uses the plain mean; identical when all grids have the same variance).
* Phase 2 and the weighted updates stop when nothing moves by one user (the paper's threshold
  1/n) instead of running a fixed 100 rounds: same MAE to five decimals, about 10× faster.
* λ-D estimator: all four in/out cells of each pair (``estimator="full"``) or the code's
  (in, in)-only rule (which the paper's Q(q)^{(j,k)} describes, ``"in-in"``); the default
  ``"auto"`` leans to "in-in" when HDG's grids' predicted noise or cut-cell error is high;
  TDG, whose margins are log-smooth by default, answers with "full" (issue 15).
* Cut cells: split by the 1-D estimates spread over their values instead of the paper's
  uniformity assumption, which biases every answer around a mode low (TDG gets a response
  matrix too): HDG's fine 1-D grids by monotone cubic interpolation of their cumulative counts
  (``interpolation="pchip"``), TDG's coarse margins by the smoothest log-density with their
  cell counts (``"logsmooth"``), which keeps a sharp mode; the response matrix's fit starts
  from a smooth surface through the 2-D grid (:func:`~fugu.ldp.grid_matrices.smooth_start`)
  instead of a flat one, so a box keeps some of the pair's dependence inside it.
* Domain sizes need not be powers of two; λ = 1 queries are answered (the code crashes);
  users are assigned to groups by a balanced public random permutation.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping, Sequence
from itertools import combinations
from typing import TYPE_CHECKING, Any, ClassVar

import numpy as np
from numpy.typing import NDArray

from ..domain import Domain
from ..errors import InvalidParameterError, ReportError, check_positive_int
from ..inference.ldp_post import (
    INTERPOLATIONS,
    GridEstimate,
)
from ..noise import RandomSource
from ..release import Guarantee, Release
from .grid_layout import (
    ALPHA1,
    ALPHA2,
    PARTITIONS,
    _check_granularity,
    _lookup,
    grid_edges,
    guideline,
    n_groups,
    round_granularity,
    shifted_edges,
)
from .grid_oue import bernoulli_bytes, oue_grouped_perturb, oue_grouped_support
from .grid_phase2 import _MAX_MATRIX_CELLS, release_from_grids
from .grid_release import (
    AUTO_NOISE,
    ESTIMATORS,
    GridRelease,
    auto_weight,
)
from .oracles import GroupedOracle
from .protocol import Client, LDPProtocol, Reports

if TYPE_CHECKING:
    from ..budget import Accountant

#: Added to a grid protocol's source when its partitions are shifted (TDG's default at g2 <= 2).
SHIFTED_SOURCE = (
    "; shifted partitions (grids of pairs (j, k) with j + k odd cut half a cell further, margins "
    "made consistent on the common refinement): fugu's extension, not in the paper; the layout "
    "is public and fixed before any report, so the privacy argument is the paper's "
    "(docs/ldp_grids.md)"
)

__all__ = [
    "ALPHA1",
    "ALPHA2",
    "GridProtocol",
    "GridRelease",
    "grid_edges",
    "guideline",
    "round_granularity",
    # re-exported from the modules these now live in (fugu.ldp.grids was their home)
    "AUTO_NOISE",
    "ESTIMATORS",
    "auto_weight",
    "bernoulli_bytes",
    "n_groups",
    "oue_grouped_perturb",
    "oue_grouped_support",
    "release_from_grids",
]

ORACLES = ("adaptive", "oue", "olh", "grr")
NORMALISATIONS = ("norm", "norm-sub")


# ----------------------------------------------------------------------------- protocol
class GridProtocol(LDPProtocol):
    """TDG/HDG protocol (public configuration). Use :class:`~fugu.ldp.TDG` or
    :class:`~fugu.ldp.HDG`; this base class holds the shared code.

    Parameters (both methods)
    -------------------------
    domain : Domain (attributes are treated as ordered: an ordinal's values, a nominal's
        hierarchy leaves in DFS order).
    epsilon : ε of each user's single report.
    n_users : expected number of users, for the granularity guideline. When neither it nor the
        granularities are given, ``client().perturb`` and ``simulate`` use the batch size, and
        ``aggregate`` takes the granularities from the reports' header.
    g1, g2 : granularities (an int for every attribute, or one per attribute), overriding the
        guideline. ``g1`` only for HDG.
    oracle : frequency oracle for the grid cells: ``"oue"`` (default, as in the authors' code),
        ``"olh"`` (the paper's text), ``"adaptive"`` (GRR for grids with fewer than 3e^ε + 2
        cells, else OLH) or ``"grr"``. OUE is the default because its variance
        ``4e^ε/(e^ε−1)²`` per user is exact and minimal (OLH reaches it only for a non-integer
        hash range and an ideal hash), its aggregation is a few ``np.bincount`` calls instead of
        OLH's O(reports × cells) hash evaluations, and in our runs (n = 10^6, d = 6, c = 64,
        4 seeds) OUE, OLH and adaptive gave the same MAE within one standard error; GRR alone
        is much worse on the fine 1-D grids. OLH sends 12 bytes per report instead of
        ``cells/8``; choose it when bandwidth matters more than server time.
    alpha1, alpha2 : guideline constants (0.7 and 0.03, the paper's values).
    estimator : λ-D estimator (λ ≥ 3): ``"full"`` fits all four in/out cells of every
        attribute pair; ``"in-in"`` fits only the (in, in) cell as the authors' code does;
        ``"auto"`` (default) averages the two with a weight on "full" that falls from 1 to 0
        (linear in the logarithm) as the predicted noise of one 2-D cell (standard deviation
        from ε and the group sizes, public) rises from 1 % to 3.5 % of n for HDG, from 1.5 %
        to 10 % for TDG with its default log-smooth margins (about 0.5 at 3.9 %, where the
        average beats both), from 0.35 % to 0.6 % for TDG with PCHIP margins (TDG with
        aligned 2 × 2 boxes: 1; :func:`auto_weight`); for HDG it is also multiplied by a
        factor from the release's cut-cell error (:func:`~fugu.ldp.grid_release.cut_error`,
        read from the released grids: post-processing). With exact 2-D answers "full" is 5×
        more accurate, but it multiplies the noisy grids' bias (Norm-Sub, coarse cells; TDG's
        coarse margins) through the pair tables, and "in-in" loses less of it. The choice does
        not always pick the better one (``docs/ldp_grids.md`` has the measured table: HDG
        worst 1.00×, TDG 1.15× on heavy-tailed data).
    interpolation : how a cut cell is split between the query and the rest. The 1-D grids
        (TDG: the 2-D grids' consistent margins) are spread over their values
        (:func:`fugu.inference.ldp_post.cell_values`), and a 2-D cell by the product of its two
        attributes' within-cell shares (HDG's response matrix, now fitted value by value; TDG
        gets one too). ``"pchip"`` (HDG's default): the monotone cubic interpolant of the
        cumulative counts. ``"logsmooth"`` (TDG's default): the smoothest log-density with the
        cells' counts, which keeps a sharp mode that PCHIP flattens; it matters where cells are
        wide (TDG's 4–8 boxes over 64 values: λ = 1 / 2 MAE 0.019 / 0.030 → 0.013 / 0.019 of
        n on the Laplace data at ε = 2, n = 10^6, and 0.018 / 0.024 → 0.006 / 0.010 on
        correlated Gaussian data at ε = 1) and not on HDG's fine 1-D grids (−4 % to +7 %
        there). ``"uniform"``: the paper's uniformity assumption (authors' code). The uniform
        guess underestimates every interval around a mode that cuts cells: with exact grids on
        Gaussian data (c = 64, ω = 0.5, g1 = 8, g2 = 2) the mean signed error of λ = 1/2/3
        answers was −0.012/−0.017/−0.019 of n, against −0.0006/−0.0011/−0.0013 with
        ``"pchip"`` (TDG, g2 = 4, λ = 2: MAE 0.070 → 0.021). ``None`` (default): the method's
        default.
    normalisation : ``"norm-sub"`` (default, the paper's Phase 2) or ``"norm"``: the grids are
        only shifted to sum to n and made consistent (linear, so the released counts and every
        answer built from them are unbiased up to the within-cell shares, and may be negative);
        cut cells are split by the shares of the unclipped 1-D estimates. Norm-Sub's clipping
        moves mass from dense to empty cells (answers around a mode come out low at small ε)
        but lowers the variance more: measured (n = 2·10^5, d = 6, c = 64, independent
        Gaussian, ε = 0.5, 2 seeds) λ = 1 mean signed error +0.0045 ("norm") vs −0.0144, but
        MAE 0.036 vs 0.028; λ = 2: +0.006 vs −0.021, MAE 0.045 vs 0.034. Use ``"norm"`` when
        answers are summed or averaged (biases add up, noise averages out).
    partitions : TDG only. ``"aligned"`` (the paper): every 2-D grid cuts an attribute at
        ``floor(k·c/g2)``. ``"shifted"``: the grids of pairs (j, k) with j + k odd cut both
        attributes half a cell further (:func:`~fugu.ldp.grid_layout.shifted_edges`: g2 − 1
        whole cells and a half cell at each end), so each attribute's margin is seen on two
        partitions, and the consistency step estimates it on their common refinement (cells of
        half the width; weighted least squares, :func:`~fugu.inference.ldp_post.refined_margin`).
        The layout is public and the same for every user: privacy is unchanged. It gives the
        within-cell shape that TDG's coarse cells hide; at g2 = 2 (ε ≤ 0.5 at n = 10^6) that
        is the difference between the uniform guess and a usable answer (``docs/ldp_grids.md``,
        "Shifted partitions"). ``"auto"`` (default): ``"shifted"`` when no attribute has more
        than two cells (g2 ≤ 2), else ``"aligned"`` (with 4 and 8 cells the refined cells'
        noise costs more than the shape gains on smooth data). HDG: always aligned.
    max_iter, tol : stopping rule of Phase 2 (rounds of consistency + Norm-Sub) and of the
        weighted updates: stop when a round changes nothing by ``tol`` counts or more (1 user, the
        paper's threshold 1/n in frequency units), at most ``max_iter`` rounds (the code's 100).
    """

    hybrid: ClassVar[bool] = False
    version: ClassVar[int] = 1

    def __init__(
        self,
        domain: Domain,
        epsilon: float,
        *,
        n_users: int | None = None,
        g1: int | Sequence[int] | None = None,
        g2: int | Sequence[int] | None = None,
        oracle: str = "oue",
        alpha1: float = ALPHA1,
        alpha2: float = ALPHA2,
        estimator: str = "auto",
        max_iter: int = 100,
        tol: float = 1.0,
        interpolation: str | None = None,
        normalisation: str = "norm-sub",
        partitions: str = "auto",
    ) -> None:
        super().__init__(domain, epsilon)
        d = domain.ndim
        if not self.hybrid and d < 2:
            raise InvalidParameterError(
                f"TDG needs at least 2 attributes (it measures attribute pairs), the domain has "
                f"{d}; use HDG or a frequency oracle (fugu.ldp.OUE) for one attribute"
            )
        if oracle not in ORACLES:
            raise InvalidParameterError(f"oracle must be one of {ORACLES}, got {oracle!r}")
        if estimator not in ESTIMATORS:
            raise InvalidParameterError(f"estimator must be one of {ESTIMATORS}, got {estimator!r}")
        if interpolation is None:
            interpolation = "pchip" if self.hybrid else "logsmooth"
        if interpolation not in INTERPOLATIONS:
            raise InvalidParameterError(
                f"interpolation must be one of {INTERPOLATIONS}, got {interpolation!r}"
            )
        self.interpolation = interpolation
        if normalisation not in NORMALISATIONS:
            raise InvalidParameterError(
                f"normalisation must be one of {NORMALISATIONS}, got {normalisation!r}"
            )
        self.normalisation = normalisation
        if partitions not in PARTITIONS:
            raise InvalidParameterError(
                f"partitions must be one of {PARTITIONS}, got {partitions!r}"
            )
        if partitions == "shifted" and self.hybrid:
            raise InvalidParameterError(
                "partitions='shifted' is a TDG option: HDG's 1-D grids already refine its 2-D "
                "grids' cells (leave partitions out, or use TDG)"
            )
        self._partitions_given = partitions
        self.partitions = "aligned"  # resolved with the granularities (_resolve)
        for name, a in (("alpha1", alpha1), ("alpha2", alpha2)):
            if not (isinstance(a, int | float) and math.isfinite(a) and a > 0):
                raise InvalidParameterError(f"{name} must be a positive number, got {a!r}")
        if g1 is not None and not self.hybrid:
            raise InvalidParameterError("g1 (1-D grids) is an HDG parameter; TDG has only g2")
        self.n_users = None if n_users is None else check_positive_int(n_users, "n_users", 1)
        self.oracle_kind = oracle
        self.alpha1, self.alpha2 = float(alpha1), float(alpha2)
        self.estimator = estimator
        self.max_iter = check_positive_int(max_iter, "max_iter", 1)
        if not (isinstance(tol, int | float) and tol >= 0):
            raise InvalidParameterError(f"tol must be >= 0, got {tol!r}")
        self.tol = float(tol)
        self.sizes = [a.size for a in domain.attributes]
        for attr in domain.attributes:
            if attr.size < 2:
                raise InvalidParameterError(
                    f"attribute {attr.name!r} has {attr.size} value; need >= 2"
                )
        if self.hybrid:
            _check_matrix_sizes(domain)
        self._g1_given = g1
        self._g2_given = g2
        self.g1: list[int] | None = None
        self.g2: list[int] | None = None
        self._grouped: GroupedOracle | None = None
        if g2 is not None or n_users is not None:
            self._resolve(n_users)

    # -- configuration -------------------------------------------------------------------------
    @property
    def resolved(self) -> bool:
        """True once the granularities (and so the grids) are fixed."""
        return self.g2 is not None

    def _resolve(self, n: int | None) -> None:
        d = self.domain.ndim
        raw1, raw2 = (math.nan, math.nan)
        if n is not None:
            raw1, raw2 = guideline(
                n, self.epsilon, d, hybrid=self.hybrid, alpha1=self.alpha1, alpha2=self.alpha2
            )
        if self._g2_given is not None:
            g2 = _check_granularity(self._g2_given, "g2", self.sizes)
        elif n is not None:
            g2 = [round_granularity(raw2, c) for c in self.sizes]
        else:
            raise InvalidParameterError("give n_users (expected number of users) or g2")
        g1: list[int] | None = None
        if self.hybrid:
            if self._g1_given is not None:
                g1 = _check_granularity(self._g1_given, "g1", self.sizes)
            elif n is not None:
                g1 = [round_granularity(raw1, c) for c in self.sizes]
            else:
                raise InvalidParameterError("give n_users (expected number of users) or g1 and g2")
            # The 1-D grid must refine the 2-D grid's partition of the attribute (one
            # attribute: no 2-D grid, g2 is not used and does not constrain g1).
            if d >= 2:
                g1 = [max(a, b) for a, b in zip(g1, g2, strict=True)]
                for a, b, c in zip(g1, g2, self.sizes, strict=True):
                    if a != c and a % b:
                        raise InvalidParameterError(
                            f"g1 = {a} must be a multiple of g2 = {b} (or equal the attribute size)"
                        )
        self.g1, self.g2 = g1, g2
        self.partitions = self._partitions_given
        if self.partitions == "auto":  # two boxes per attribute: shifting is what TDG needs
            small = all(g <= 2 for g in g2)
            self.partitions = "shifted" if not self.hybrid and small else "aligned"
        self.raw_granularity = (raw1, raw2)
        self.groups = self._make_groups()
        cells = [int(np.prod([len(e) - 1 for e in self.edges(gr)])) for gr in self.groups]
        self._grouped = GroupedOracle(self.epsilon, cells, self.oracle_kind)

    def _g(self, dims: int, axis: int) -> int:
        if dims == 1:
            assert self.g1 is not None
            return self.g1[axis]
        assert self.g2 is not None
        return self.g2[axis]

    def _make_groups(self) -> list[tuple[int, ...]]:
        d = self.domain.ndim
        singles = [(a,) for a in range(d)] if self.hybrid else []
        return singles + list(combinations(range(d), 2))

    def shifted(self, group: tuple[int, ...]) -> bool:
        """Whether a group's grid is cut at :func:`shifted_edges` (``partitions="shifted"``:
        the pairs (j, k) with j + k odd)."""
        return self.partitions == "shifted" and len(group) == 2 and sum(group) % 2 == 1

    def edges(self, group: tuple[int, ...]) -> tuple[NDArray[np.int64], ...]:
        """Cell boundaries of a group's grid, per attribute."""
        cut = shifted_edges if self.shifted(group) else grid_edges
        return tuple(cut(self.sizes[a], self._g(len(group), a)) for a in group)

    def for_users(self, n: int) -> GridProtocol:
        """A copy with the granularities chosen for ``n`` users (no-op when already fixed)."""
        if self.resolved:
            return self
        return type(self)(self.domain, self.epsilon, n_users=n, **self._options())

    def _options(self) -> dict[str, Any]:
        opts: dict[str, Any] = {
            "oracle": self.oracle_kind,
            "alpha1": self.alpha1,
            "alpha2": self.alpha2,
            "estimator": self.estimator,
            "max_iter": self.max_iter,
            "tol": self.tol,
            "interpolation": self.interpolation,
            "normalisation": self.normalisation,
            "partitions": self._partitions_given,
            "g2": self._g2_given,
        }
        if self.hybrid:
            opts["g1"] = self._g1_given
        return opts

    def _require(self) -> GroupedOracle:
        if self._grouped is None:
            raise InvalidParameterError(
                f"{self.name.upper()} needs its granularities before reports can be made or read: "
                f"give n_users= (expected number of users) or the granularities, or call "
                f"simulate(records) / aggregate(reports), which take them from the data / header"
            )
        return self._grouped

    # -- LDPProtocol hooks ---------------------------------------------------------------------
    def guarantee(
        self, *, private: bool, n: int, post_processing: tuple[str, ...] = ()
    ) -> Guarantee:
        """The protocol's guarantee; with shifted partitions its source names fugu's extension
        (the paper's grids are aligned)."""
        g = super().guarantee(private=private, n=n, post_processing=post_processing)
        if self.partitions != "shifted":
            return g
        return dataclasses.replace(g, source=g.source + SHIFTED_SOURCE)

    def _params(self) -> dict[str, Any]:
        self._require()
        p: dict[str, Any] = {"g2": list(self.g2 or [])}
        if self.hybrid:
            p["g1"] = list(self.g1 or [])
        p["oracle"] = self.oracle_kind
        if self.partitions != "aligned":  # absent for the paper's layout (headers as before)
            p["partitions"] = self.partitions
        return p

    @property
    def n_groups(self) -> int:
        return n_groups(self.domain.ndim, self.hybrid)

    def report_columns(self) -> dict[str, Any]:
        return self._require().report_columns()

    def cells(self, codes: NDArray[np.int64], groups: NDArray[np.int64]) -> NDArray[np.int64]:
        """Each user's cell index in her group's grid (vectorised; row-major within a grid)."""
        n = codes.shape[0]
        if n == 0:
            return np.zeros(0, dtype=np.int64)
        # one flat lookup table value -> cell per (attribute, distinct cell boundaries)
        luts: list[NDArray[np.int64]] = []
        where: dict[tuple[int, bytes], int] = {}
        first_off, second_off, n_cols = [], [], []
        for gr in self.groups:
            edges = self.edges(gr)
            offs = []
            for a, e in zip(gr, edges, strict=True):
                key = (a, e.tobytes())
                if key not in where:
                    where[key] = sum(len(t) for t in luts)
                    luts.append(_lookup(e))
                offs.append(where[key])
            first_off.append(offs[0])
            second_off.append(offs[-1])
            n_cols.append(len(edges[-1]) - 1)
        lut = np.concatenate(luts)
        first = np.array([gr[0] for gr in self.groups], dtype=np.int64)
        second = np.array([gr[-1] for gr in self.groups], dtype=np.int64)
        single = np.array([len(gr) == 1 for gr in self.groups])
        off_a, off_b = np.asarray(first_off, np.int64), np.asarray(second_off, np.int64)
        cols = np.asarray(n_cols, dtype=np.int64)
        rows = np.arange(n)
        cx = lut[off_a[groups] + codes[rows, first[groups]]]
        cy = lut[off_b[groups] + codes[rows, second[groups]]]
        return np.where(single[groups], cx, cx * cols[groups] + cy)

    def _perturb(
        self, codes: NDArray[np.int64], rng: RandomSource, groups: NDArray[np.int64] | None
    ) -> dict[str, np.ndarray]:
        assert groups is not None
        grouped = self._require()
        values = self.cells(codes, groups)
        if self.oracle_kind == "oue":
            if np.any(values >= grouped.cells[groups]):  # pragma: no cover - internal check
                raise InvalidParameterError("a cell index lies outside its grid")
            bits = oue_grouped_perturb(
                groups, values, grouped.cells, grouped.width, self.epsilon, rng
            )
            return {"group": groups, "bits": bits}
        return grouped.perturb(groups, values, rng)

    def _validate(self, columns: Mapping[str, np.ndarray]) -> NDArray[np.bool_]:
        grouped = self._require()
        if self.oracle_kind != "oue":
            return grouped.validate(columns)
        # valid group, and no bit set beyond the group's domain (byte masks, vectorised)
        grp = np.asarray(columns["group"], dtype=np.int64)
        bits = np.asarray(columns["bits"], dtype=np.uint8)
        ok = (grp >= 0) & (grp < grouped.m)
        gi = np.where(ok, grp, 0)
        allowed = np.zeros((grouped.m, grouped.width), dtype=np.uint8)
        for j, k in enumerate(grouped.cells):
            mask = np.zeros(grouped.width * 8, dtype=bool)
            mask[: int(k)] = True
            allowed[j] = np.packbits(mask, bitorder="little")
        for pos in range(grouped.width):
            if np.all(allowed[:, pos] == 0xFF):
                continue  # every group may set every bit of this byte
            ok &= (bits[:, pos] & ~allowed[gi, pos]) == 0
        return ok

    def support(self, columns: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
        grouped = self._require()
        if self.oracle_kind == "oue":
            return dict(oue_grouped_support(columns["group"], columns["bits"], grouped.cells))
        return grouped.support(columns)

    def empty_state(self) -> dict[str, np.ndarray]:
        grouped = self._require()
        return {
            "support": np.zeros(int(grouped.offsets[-1]), dtype=np.int64),
            "n_group": np.zeros(grouped.m, dtype=np.int64),
        }

    # -- public API (granularities resolved from the data when not fixed) -----------------------
    def client(self, rng: RandomSource | None = None) -> Client:
        return _GridClient(self, rng)

    def _for_reports(self, reports: Reports) -> GridProtocol:
        # granularities not fixed here: take them from the reports' header (checked there)
        return self if self.resolved else self._from_header(reports)

    def _from_header(self, reports: Reports) -> GridProtocol:
        params = dict(reports.params)
        if reports.protocol != self.name:
            raise ReportError(
                f"reports were made by protocol {reports.protocol!r}, not {self.name!r}"
            )
        if params.get("epsilon") != self.epsilon or params.get("oracle") != self.oracle_kind:
            raise ReportError(
                f"reports were randomised with epsilon={params.get('epsilon')!r}, "
                f"oracle={params.get('oracle')!r}; this {self.name.upper()} has "
                f"epsilon={self.epsilon!r}, oracle={self.oracle_kind!r}"
            )
        if Domain.from_dict(params["domain"]) != self.domain:
            raise ReportError("reports were made over another domain")
        opts = self._options()
        opts["g2"] = params.get("g2")
        opts["partitions"] = params.get("partitions", "aligned")
        if self._partitions_given != "auto" and opts["partitions"] != self._partitions_given:
            # the layout asked for is not the clients': refused, as when g2 is given
            raise ReportError(
                f"reports were randomised with partitions={opts['partitions']!r}; this "
                f"{self.name.upper()} has partitions={self._partitions_given!r}. Leave "
                f"partitions out (or 'auto') to take the layout from the reports' header"
            )
        if self.hybrid:
            opts["g1"] = params.get("g1")
        try:
            return type(self)(self.domain, self.epsilon, **opts)
        except InvalidParameterError as exc:
            raise ReportError(f"bad parameters in the reports' header: {exc}") from None

    def simulate(
        self,
        records: Any,
        rng: RandomSource | None = None,
        *,
        engine: str = "numpy",
        accountant: Accountant | None = None,
        **engine_options: Any,
    ) -> Release:
        codes = self.encode(records)
        proto = self.for_users(max(1, codes.shape[0]))
        return LDPProtocol.simulate(
            proto, codes, rng, engine=engine, accountant=accountant, **engine_options
        )

    # -- server side -----------------------------------------------------------------------------
    def _estimate(self, state: Mapping[str, np.ndarray], n: int) -> Release:
        grouped = self._require()
        raw = grouped.estimates(state)
        n_group = np.asarray(state["n_group"], dtype=np.float64)
        names = self.domain.names
        grids = []
        for j, gr in enumerate(self.groups):
            shape = tuple(len(e) - 1 for e in self.edges(gr))
            k = int(np.prod(shape))
            if n_group[j] > 0:
                scale = n / n_group[j]
                est = raw[j] * scale
                var = scale**2 * grouped.cell_variance(j, n_group[j])
            else:  # no report in this group: an uninformative grid with (practically) no weight
                est = np.full(k, n / k)
                var = 1e30
            grids.append(
                GridEstimate(tuple(names[a] for a in gr), self.edges(gr), est.reshape(shape), var)
            )
        empty = [
            "x".join(names[a] for a in gr) for j, gr in enumerate(self.groups) if n_group[j] <= 0
        ]
        said: tuple[str, ...] = ()
        if empty:
            said = (
                f"{len(empty)} of {len(self.groups)} groups had no report: their grids "
                f"({', '.join(empty)}) are the uniform guess, with no weight in the consistency",
            )
        gu = self.guarantee(private=True, n=n, post_processing=said)
        return self.release_from_grids(grids, n, gu, users_per_group=n_group.tolist())

    def release_from_grids(
        self,
        grids: Sequence[GridEstimate],
        n: float,
        guarantee: Guarantee,
        users_per_group: Sequence[float] | None = None,
    ) -> GridRelease:
        """Phases 2 and 3 on estimated grids (one per group, in :attr:`groups` order).

        The server side after the frequency oracles
        (:func:`fugu.ldp.grid_phase2.release_from_grids`); public so experiments can feed other
        grids (e.g. exact counts, to separate the noise from the estimation error). It only
        post-processes its input: the release is as private as the grids and ``guarantee`` given.
        """
        return release_from_grids(self, grids, n, guarantee, users_per_group)


def _check_matrix_sizes(domain: Domain) -> None:
    """HDG needs a response matrix of ``c_x · c_y`` values per pair (Phase 2): refuse a domain
    whose matrix would be too large here, before any user reports (public sizes only)."""
    for a, b in combinations(domain.attributes, 2):
        cells = a.size * b.size
        if cells > _MAX_MATRIX_CELLS:
            raise InvalidParameterError(
                f"HDG's response matrix for ({a.name}, {b.name}) would have {cells:,} cells "
                f"({a.size:,} x {b.size:,} values), more than {_MAX_MATRIX_CELLS:,}; coarsen "
                f"these attributes (fewer values, e.g. wider bins) or use TDG"
            )


class _GridClient(Client):
    """Client that fixes the granularities from the batch size when the protocol has none."""

    def perturb(self, records: Any, groups: Any = None) -> Reports:
        p = self.protocol
        assert isinstance(p, GridProtocol)
        if not p.resolved:
            codes = p.encode(records)
            self.protocol = p.for_users(max(1, codes.shape[0]))
            records = codes
        return super().perturb(records, groups)

    def perturb_one(self, record: Mapping[str, Any], group: int | None = None) -> dict[str, Any]:
        p = self.protocol
        assert isinstance(p, GridProtocol)
        p._require()
        return super().perturb_one(record, group)
