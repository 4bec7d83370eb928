"""Shared machinery of the Ordered and Ordered Hierarchical mechanisms.

Both release noisy measurements of the cumulative histogram of a one-attribute ordered domain
``x_1 < … < x_k`` (``C_j`` = number of records with code < j, ``C_0 = 0``, ``C_k = n``):

* S-nodes ``s_m = C_{mL}`` every ``L`` values (``m = 1..B−1``, ``B = ⌈k/L⌉``; ``s_B = n`` is
  public under the paper's bounded neighbours, noisy when the policy has ⊥);
* H-nodes: inside each block of ``L = f^h`` values a complete f-ary tree, the ``h`` levels below
  the block root (the root is omitted: it equals ``s_m − s_{m−1}``).

The Ordered Mechanism is ``L = 1, h = 0`` (every cumulative count is an S-node); the Ordered
Hierarchical Mechanism uses ``L >= θ``. A secret move of rank distance ``<= θ`` crosses at most
``⌈θ/L⌉`` block boundaries (S-part sensitivity) and touches one root-to-leaf path in at most two
blocks (H-part sensitivity ``2h``). He, Machanavajjhala, Ding, Blowfish Privacy (SIGMOD 2014,
seed ``000_…``) §7, Figure 2(a); sensitivities checked by brute force in the tests.

Everything after the noise (range answers, least-squares consistency, monotone projection,
quantiles) is post-processing and lives here and in :mod:`fugu.inference`.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np
from numpy.typing import ArrayLike, NDArray

from ..domain import Domain
from ..errors import InvalidParameterError
from ..inference.isotonic import monotone_cumulative
from ..queries import RangeQuery
from ..release import Guarantee, Release
from ..release_state import Array, ArrayMap, Meta

__all__ = ["CumulativeRelease", "Structure"]

FloatArray = NDArray[np.float64]


@dataclass(frozen=True)
class Structure:
    """Public layout and noise of a cumulative-tree release.

    ``var_s``/``var_h``: exact noise variance of one S-node / H-node (discrete Laplace);
    ``total_public``: ``C_k = n`` is released exactly (no ⊥ in the policy).
    """

    k: int
    fanout: int
    height: int
    var_s: float
    var_h: float
    total_public: bool

    @property
    def block(self) -> int:
        return self.fanout**self.height

    @property
    def n_blocks(self) -> int:
        return -(-self.k // self.block)

    @property
    def padded(self) -> int:
        return self.n_blocks * self.block

    @property
    def n_s(self) -> int:
        """Number of noisy S-nodes."""
        return self.n_blocks - (1 if self.total_public else 0)


# ----------------------------------------------------------------------------------------------
# exact measurements (private data enters only in ``measure``)
# ----------------------------------------------------------------------------------------------
def exact_nodes(
    counts: NDArray[np.int64], st: Structure
) -> tuple[NDArray[np.int64], list[NDArray[np.int64]]]:
    """S-node values (length ``n_s``) and H levels 1..h, each of shape (B, f^l)."""
    x = np.zeros(st.padded, np.int64)
    x[: st.k] = counts
    blocks = x.reshape(st.n_blocks, st.block)
    totals = blocks.sum(axis=1)
    s = np.cumsum(totals)[: st.n_s]
    levels: list[NDArray[np.int64]] = []
    for lvl in range(1, st.height + 1):
        levels.append(blocks.reshape(st.n_blocks, st.fanout**lvl, -1).sum(axis=2))
    return s, levels


# ----------------------------------------------------------------------------------------------
# post-processing
# ----------------------------------------------------------------------------------------------
def prefix_from_nodes(
    s: FloatArray, levels: list[FloatArray], st: Structure, total: float | None
) -> FloatArray:
    """``Ĉ_j`` for j = 0..k from S-nodes plus the left-sibling decomposition inside each block."""
    b, f, h, big_l = st.n_blocks, st.fanout, st.height, st.block
    s_full = np.zeros(b + 1)
    s_full[1 : 1 + st.n_s] = s
    if st.total_public:
        s_full[b] = float(total or 0.0)
    t = np.arange(big_l)
    inner = np.zeros((b, big_l))
    for lvl in range(1, h + 1):
        size = big_l // f**lvl
        vals = levels[lvl - 1]  # (B, f^lvl)
        cs = np.concatenate([np.zeros((b, 1)), np.cumsum(vals, axis=1)], axis=1)
        first = (t // (size * f)) * f
        d = (t // size) % f
        inner += cs[:, first + d] - cs[:, first]
    c = (s_full[:b, None] + inner).reshape(-1)
    c = np.concatenate([c, [s_full[b]]])  # C_K
    out = c[: st.k + 1].copy()
    if st.total_public and total is not None:
        out[st.k] = float(total)
    return out


def gls_leaves(
    s: FloatArray, levels: list[FloatArray], st: Structure, total: float | None
) -> FloatArray:
    """Weighted least-squares leaf estimates (length ``padded``) from all S- and H-nodes.

    Minimises ``Σ (ŝ − s̃)²/var_s + Σ (Ĥ − H̃)²/var_h`` subject to every node equalling the sum of
    its leaves (and ``C_K = n`` when public). Two stages, both exact and linear time: per block,
    the generalised two-pass tree algorithm (:func:`fugu.inference.tree.consistent_tree`, block
    root unmeasured) gives the H-estimate ``z_m`` of each block total with variance ``τ``; then
    the chain of cumulative totals ``u_m`` solves the tridiagonal normal equations of
    ``Σ_m (u_m − u_{m−1} − z_m)²/τ + Σ_m (u_m − s̃_m)²/var_s``; finally each block's tree is
    shifted so its root equals ``u_m − u_{m−1}`` (the down pass is linear in the root value).
    """
    from scipy.linalg import solve_banded

    from ..inference.tree import consistent_tree

    b, f, h = st.n_blocks, st.fanout, st.height
    if h == 0:
        u = np.zeros(b + 1)
        u[1 : 1 + st.n_s] = s
        if st.total_public:
            u[b] = float(total or 0.0)
        return np.diff(u)
    tree = [np.zeros((b, 1))] + [np.asarray(lv, dtype=np.float64) for lv in levels]
    lvar = [math.inf] + [st.var_h] * h
    out = consistent_tree(tree, f, lvar)
    z = out[0][:, 0].copy()
    v = st.var_h
    for _ in range(h - 1):
        v = 1.0 / (1.0 / st.var_h + 1.0 / (f * v))
    inv_t = np.full(b, 1.0 / (f * v))  # 1/τ_m: the precision of block m's H-estimate z_m
    valid = st.k - (b - 1) * st.block  # real values in the last block (the rest is padding)
    last = None
    if valid < st.block:
        # the padded cells hold no record (public): the last block's tree is solved with them
        # pinned to 0 (free, they took noise from every node above them; up to 40 % more
        # variance for ranges near the end of small domains)
        last = _pinned_block([np.asarray(lv, np.float64)[b - 1] for lv in levels], st, valid)
        z[b - 1], inv_t[b - 1] = last[0], 1.0 / last[1]
    n_unknown = st.n_s
    if n_unknown == 0:
        u_hat = np.array([0.0, float(total or 0.0)])
    else:
        inv_s = 1.0 / st.var_s
        # Σ_m (u_m − u_{m−1} − z_m)²·inv_t[m] + Σ_m (u_m − s̃_m)²·inv_s, u_0 = 0 (u_B = n if
        # public): tridiagonal normal equations in u_1..u_{n_s}
        nxt = np.concatenate([inv_t[1:], [0.0]])[:n_unknown]
        z_next = np.concatenate([z[1:], [0.0]])[:n_unknown]
        diag = inv_t[:n_unknown] + nxt + inv_s
        rhs = s * inv_s + z[:n_unknown] * inv_t[:n_unknown] - z_next * nxt
        if st.total_public:
            rhs[-1] += float(total or 0.0) * inv_t[b - 1]
        ab = np.zeros((3, n_unknown))
        ab[0, 1:] = -inv_t[1:n_unknown]
        ab[1] = diag
        ab[2, :-1] = -inv_t[1:n_unknown]
        sol = solve_banded((1, 1), ab, rhs)
        u_hat = np.concatenate([[0.0], sol, [float(total or 0.0)] if st.total_public else []])
    root = np.diff(u_hat)
    delta = root - z
    leaves = out[h] + (delta / f**h)[:, None]
    if last is not None:
        leaves[b - 1] = last[2](float(root[b - 1]))
    return leaves.reshape(-1)


def _pinned_block(levels: list[FloatArray], st: Structure, valid: int) -> tuple[float, float, Any]:
    """Exact least squares inside one block whose leaves ``valid..L-1`` are known to be 0.

    ``levels[l-1]`` holds the block's noisy level-l nodes (``f^l`` of them, variance
    ``var_h``; the block root is not measured). The tree two-pass algorithm with per-node
    variances (leaves known exactly get variance 0): returns the block total's estimate from
    the tree, its variance, and ``down(total)`` giving the leaf estimates once the total is
    fixed (the weighted least-squares solution; padded leaves exactly 0)."""
    f, h, big_l, vh = st.fanout, st.height, st.block, st.var_h
    leaf = np.arange(big_l)
    real = leaf < valid
    est = [np.zeros(0)] * (h + 1)  # est[l], var[l]: up-pass estimates of level l (0 = root)
    var = [np.zeros(0)] * (h + 1)
    sums = [np.zeros(0)] * (h + 1)  # children-sum estimate and variance of level-l nodes
    svar = [np.zeros(0)] * (h + 1)
    est[h] = np.where(real, levels[h - 1], 0.0)
    var[h] = np.where(real, vh, 0.0)
    for lvl in range(h - 1, -1, -1):
        sums[lvl] = est[lvl + 1].reshape(-1, f).sum(axis=1)
        svar[lvl] = var[lvl + 1].reshape(-1, f).sum(axis=1)
        if lvl == 0:
            est[0], var[0] = sums[0], svar[0]
            break
        y = levels[lvl - 1]
        free = svar[lvl] > 0  # nodes with a real leaf below
        with np.errstate(divide="ignore", invalid="ignore"):
            prec = np.where(free, 1.0 / vh + 1.0 / np.where(free, svar[lvl], 1.0), 1.0)
            comb = (y / vh + sums[lvl] / np.where(free, svar[lvl], 1.0)) / prec
        est[lvl] = np.where(free, comb, 0.0)
        var[lvl] = np.where(free, 1.0 / prec, 0.0)

    def down(total: float) -> FloatArray:
        final = np.array([total])
        for lvl in range(0, h):
            gap = np.repeat(final - sums[lvl], f)
            sv = np.repeat(svar[lvl], f)
            share = np.divide(var[lvl + 1], sv, out=np.zeros_like(sv), where=sv > 0)
            final = est[lvl + 1] + share * gap
        return final

    return float(est[0][0]), float(var[0][0]), down


def gls_range_variance(st: Structure, lo: int, hi: int) -> float:
    """Exact variance of a range answer ``[lo, hi)`` after :func:`gls_leaves`.

    The estimator is ``x̂ = M Aᵀ Σ⁻¹ y`` with ``Var(wᵀx̂) = wᵀ M w``; feeding the measurement
    vector whose leaf entries are ``var_h · w`` (all other entries 0, total 0) gives
    ``x̂ = M w`` (leaves are measured directly), so one run of the solver yields the variance.
    """
    w = np.zeros(st.padded)
    w[lo:hi] = 1.0
    blocks = (st.var_h * w).reshape(st.n_blocks, st.block)
    levels = [np.zeros((st.n_blocks, st.fanout**lvl)) for lvl in range(1, st.height)]
    levels.append(blocks)
    est = gls_leaves(np.zeros(st.n_s), levels, st, 0.0 if st.total_public else None)
    return float(w @ est)


# ----------------------------------------------------------------------------------------------
# the release
# ----------------------------------------------------------------------------------------------
class CumulativeRelease(Release):
    """A noisy cumulative histogram ``Ĉ_0..Ĉ_k`` of a one-attribute ordered domain.

    A range ``[x_i, x_j]`` is answered by two cumulative counts, ``Ĉ_{j+1} − Ĉ_i``; cell counts
    are differences; :meth:`quantile` reads the cumulative histogram. ``expected_error`` is the
    exact RMSE of an answer (for least-squares consistency too); after the monotone projection it
    is unknown (None).
    """

    kind = "blowfish-cumulative"
    _state_fields = (
        Array("cumulative", ndim=1),
        ArrayMap("m_", "measurements", "_measurements"),
        Meta("structure", dict, convert=lambda d: Structure(**d), to_json=asdict),
        Meta("estimate", str),
    )

    def __init__(
        self,
        domain: Domain,
        guarantee: Guarantee,
        cumulative: ArrayLike,
        structure: Structure,
        *,
        estimate: str = "direct",
        measurements: Mapping[str, Any] | None = None,
    ) -> None:
        super().__init__(domain, guarantee)
        c = np.asarray(cumulative, dtype=np.float64)
        if c.shape != (structure.k + 1,):
            raise InvalidParameterError(f"cumulative must have k+1 = {structure.k + 1} values")
        self.cumulative = c
        self.structure = structure
        self.estimate = estimate  # "direct" | "least-squares" | "monotone"
        self._measurements = dict(measurements or {})

    @property
    def counts(self) -> FloatArray:
        return np.diff(self.cumulative)

    @property
    def total(self) -> float:
        return float(self.cumulative[-1])

    def _answer_bounds(self, bounds: NDArray[np.int64]) -> FloatArray:
        lo, hi = bounds[:, 0, 0], bounds[:, 0, 1]
        return self.cumulative[hi] - self.cumulative[lo]

    def quantile(self, q: ArrayLike) -> np.ndarray:
        """The smallest value whose estimated cumulative share reaches ``q`` (0 < q <= 1).

        Reads the (running-maximum, clipped) cumulative histogram — post-processing.
        """
        qs = np.asarray(q, dtype=np.float64)
        if np.any((qs <= 0) | (qs > 1)) or not np.all(np.isfinite(qs)):
            raise InvalidParameterError(f"quantile levels must lie in (0, 1], got {q!r}")
        c = np.maximum.accumulate(np.clip(self.cumulative, 0, None))
        total = c[-1] if c[-1] > 0 else 1.0
        idx = np.searchsorted(c[1:], qs * total, side="left")
        idx = np.clip(idx, 0, self.structure.k - 1)
        assert self.domain is not None
        return self.domain.attributes[0].decode(idx)

    def monotone(self, nonnegative: bool = True) -> CumulativeRelease:
        """Isotonic projection onto ``0 <= Ĉ_1 <= … <= Ĉ_k`` (= n when public); recorded."""
        st = self.structure
        total = self.total if st.total_public else None
        c = monotone_cumulative(self.cumulative[1:], total=total, nonnegative=nonnegative)
        step = "isotonic regression of the cumulative histogram (PAVA" + (
            ", 0 <= C <= n)" if total is not None else ", C >= 0)" if nonnegative else ")"
        )
        assert self.domain is not None
        return CumulativeRelease(
            self.domain,
            self.guarantee.with_post_processing(step),
            np.concatenate([[0.0], c]),
            st,
            estimate="monotone",
            measurements=self._measurements,
        )

    # -- error -----------------------------------------------------------------------------
    def expected_error(self, query: RangeQuery | Mapping[str, Any]) -> float | None:
        q = query if isinstance(query, RangeQuery) else RangeQuery(dict(query))
        assert self.domain is not None
        b = q.bounds(self.domain)
        v = self.range_variance(np.array([b[0, 0]]), np.array([b[0, 1]]))
        return None if v is None else float(math.sqrt(max(0.0, v[0])))

    def range_variance(self, lo: ArrayLike, hi: ArrayLike) -> FloatArray | None:
        """Exact noise variance of the answers to ranges ``[lo, hi)`` (codes), or None."""
        lo_a, hi_a = np.asarray(lo, np.int64), np.asarray(hi, np.int64)
        if self.estimate == "monotone":
            return None
        if self.estimate == "least-squares":
            return np.array(
                [self._gls_variance(int(a), int(c)) for a, c in zip(lo_a, hi_a, strict=True)]
            )
        return direct_range_variance(lo_a, hi_a, self.structure)

    def _gls_variance(self, lo: int, hi: int) -> float:
        return gls_range_variance(self.structure, lo, hi)

    def summary(self) -> dict[str, Any]:
        out = super().summary()
        out["structure"] = asdict(self.structure)
        out["estimate"] = self.estimate
        return out


def _digits(
    t: NDArray[np.int64], st: Structure
) -> list[tuple[NDArray[np.int64], NDArray[np.int64]]]:
    """Per H-level: (first sibling index, number of nodes) used by the prefix of length t."""
    out = []
    for lvl in range(1, st.height + 1):
        size = st.block // st.fanout**lvl
        out.append(((t // (size * st.fanout)) * st.fanout, (t // size) % st.fanout))
    return out


def direct_range_variance(
    lo: NDArray[np.int64], hi: NDArray[np.int64], st: Structure
) -> FloatArray:
    """Variance of ``Ĉ_hi − Ĉ_lo`` without consistency (S- and H-nodes independent)."""

    def s_var(pos: NDArray[np.int64]) -> FloatArray:
        m = pos // st.block
        noisy = (m >= 1) & (m <= st.n_s)
        exact_end = st.total_public & (pos >= st.k)
        return np.where(noisy & ~exact_end, st.var_s, 0.0)

    ma, mb = lo // st.block, hi // st.block
    ta, tb = lo % st.block, hi % st.block
    end_a = st.total_public & (lo >= st.k)
    end_b = st.total_public & (hi >= st.k)
    ta = np.where(end_a, 0, ta)
    tb = np.where(end_b, 0, tb)
    same = (ma == mb) & ~end_a & ~end_b
    var = np.where(same, 0.0, s_var(lo) + s_var(hi))
    nodes = np.zeros(lo.shape, dtype=np.float64)
    for (ga, da), (gb, db) in zip(_digits(ta, st), _digits(tb, st), strict=True):
        shared = same & (ga == gb)
        nodes += np.where(shared, np.abs(da - db), da + db)
    return var + nodes * st.var_h


# ----------------------------------------------------------------------------------------------
# sensitivities and the noisy measurement (the only place private counts are touched)
# ----------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class PartSensitivity:
    """Policy-specific sensitivities of the S-part and H-part, and where they come from."""

    theta: int  # largest rank gap of a secret edge (S(cumulative, P) without constraints)
    moves: float  # single moves per neighbour (1 without constraints; max(α, ξ) of G_P with)
    s_part: float
    h_part: float
    bottom: bool


def part_sensitivity(policy: Any, k: int, block: int, height: int) -> PartSensitivity:
    """``S_S = moves·⌈θ/L⌉`` (⊥: also ``B``, every S-node and the total), ``S_H = moves·2h``
    (⊥ alone: ``h``). Upper bounds for any graph whose edges have rank gap <= θ; exact for the
    distance-threshold graphs on large enough domains (brute-force checked in the tests)."""
    from dataclasses import replace

    from .sensitivity import (
        CumulativeHistogram,
        _safe_moves,
        constrained_histogram_sensitivity,
        sensitivity,
    )

    theta = 0
    if policy.has_edges():  # cell-to-cell edges (a policy may have only ⊥ edges)
        bare = replace(policy, constraints=(), bottom=False)
        theta = int(round(sensitivity(CumulativeHistogram(), bare)))
    moves = 1.0
    if policy.constraints:
        # the number of single moves a neighbour makes (max(α, ξ) of the policy graph; on the
        # line graph with disjoint ranges the moves that do not cancel) — NOT S(h, P)/2, which
        # is lowered by cancellations that cumulative counts and tree nodes still see
        moves = float(_safe_moves(constrained_histogram_sensitivity(policy), policy))
    bottom = bool(policy.has_bottom_edges())
    n_blocks = -(-k // block)
    s_part = float(-(-theta // block)) if theta else 0.0
    h_part = float(2 * height) if theta else 0.0
    if bottom:
        s_part = max(s_part, float(n_blocks))
        h_part = max(h_part, float(height))
    return PartSensitivity(theta, moves, moves * s_part, moves * h_part, bottom)


def measure(
    counts: NDArray[np.int64],
    st: Structure,
    sens: PartSensitivity,
    eps_s: float,
    eps_h: float,
    rng: Any,
) -> tuple[FloatArray, list[FloatArray]]:
    """Noisy S-nodes and H-levels: exact discrete Laplace noise of scale sensitivity/ε per part.
    A part with sensitivity 0 is released exactly (no secret pair can change it)."""
    from ..noise import geometric_mechanism

    s, levels = exact_nodes(counts, st)
    if (s.size and sens.s_part > 0 and not eps_s > 0) or (
        levels and sens.h_part > 0 and not eps_h > 0
    ):
        raise RuntimeError("internal error: a noisy part of the release has no privacy budget")
    if s.size:
        s = geometric_mechanism(s, sens.s_part, eps_s, rng) if sens.s_part > 0 else s
    noisy_levels: list[FloatArray] = []
    for lv in levels:
        noisy = geometric_mechanism(lv, sens.h_part, eps_h, rng) if sens.h_part > 0 else lv
        noisy_levels.append(np.asarray(noisy, dtype=np.float64))
    return np.asarray(s, dtype=np.float64), noisy_levels


def check_flag(value: Any, name: str) -> bool:
    """A True/False option (``inference``, ``consistency``): a string such as ``"no"`` was
    truthy and switched the post-processing on."""
    if not isinstance(value, bool | np.bool_):
        raise InvalidParameterError(f"{name} must be True or False, got {value!r}")
    return bool(value)


def check_ordered_input(hist: Any, policy: Any, what: str) -> tuple[Any, Any]:
    from ..domain import Ordinal
    from ..errors import InvalidTypeError, PolicyError
    from ..histogram import require_histogram
    from .policy import Policy, check_counted_records

    hist = require_histogram(hist)
    if not isinstance(policy, Policy):
        raise InvalidTypeError(
            f"policy must be a fugu.blowfish.Policy (e.g. Policy.line(dom)), got "
            f"{type(policy).__name__}"
        )
    dom = hist.domain
    if dom.ndim != 1 or not isinstance(dom.attributes[0], Ordinal):
        raise InvalidParameterError(
            f"the {what} works on one ordered attribute; this histogram has {list(dom.names)}. "
            f"Use hist.project(['age']) with a policy on that attribute's domain"
        )
    if policy.domain != dom:
        raise PolicyError(
            f"the policy is defined on {policy.domain!r} but the histogram on {dom!r}; build the "
            f"policy on the histogram's domain"
        )
    check_counted_records(hist, policy, what)
    return hist, policy
