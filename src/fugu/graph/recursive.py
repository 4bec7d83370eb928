"""The Recursive Mechanism: ε-DP linear statistics of sensitive K-relations and subgraph counts.

Privacy model: ε-differential privacy where one *participant* (a node with all its edges under
node privacy, one edge under edge privacy, or whoever owns base tuples of a relation) may
withdraw: neighbours differ by one participant and agree on everything not involving it (Chen and
Zhou, "Recursive Mechanism: Towards Node Differential Privacy and Unrestricted Joins", SIGMOD
2013 / arXiv 1304.4795, seed ``002_…``, Def. 6 and Def. 14). Pure ε-DP (δ = 0), add/remove.

Sensitivity: none is assumed. The global sensitivity of a subgraph count under node privacy is
unbounded (one node can join every triangle); the mechanism calibrates to an *empirical*
sensitivity instead (spec ``recursive_mechanism.md`` Secs. 3 and 5):

1. Δ = min{θ e^{iβ} : G_{|P|−i} ≤ θ e^{iβ}} (eq. 11); ln Δ has global sensitivity β (Lemma 1).
2. Δ̂ = e^{μ+Y} Δ with Y ~ Lap(β/ε1): ε1-DP (Lemma 4).
3. X = min_i H_i + (|P|−i) Δ̂ (eq. 12): global sensitivity ≤ Δ̂ for any fixed Δ̂ (Lemma 7).
   fugu minimises over real i by default (one linear program instead of three; the same
   sensitivity bound holds, derivation in :func:`x_value`; ``x_rule="integer"`` is eq. 12).
4. X̂ = X + Lap(Δ̂/ε2): ε2-DP given Δ̂. Total ε = ε1 + ε2 (Theorem 1).

H and G are the φ-relaxed sequences of Sec. 5 (eqs. 16 and 19): H_i is the least answer when only
"i participants' worth" of fractional presence is kept; G bounds its slopes. G's loads are
ψ_{t,p}, the part of φ_t through p (:mod:`fugu.graph.lp`): equal to eq. 19's φ_t·S_{t,p} on
conjunctions (subgraph counts), but eq. 19 is not a recursive sequence once annotations hold ∨
(a union or projection), which Lemma 1 — and so ε1 — needs; ψ is (review 13). The 2-bounding
property (Theorem 4, accuracy only) held on every case tested with ψ but is not proved for it.
Both come from linear programs (:mod:`fugu.graph.lp`: Clarabel's interior point by default,
HiGHS on request); j is found by binary search on "G_{|P|−j} ≤ θe^{jβ}",
each step a reduced program with the same yes/no answer (:meth:`LPModel.g_at_most`).
Expected error (Theorem 1 with g = 2): with probability ≥ 1 − e^{−με1/β} − e^{−c},
``|X̂ − q| ≤ e^{2μ} Δ* c/ε2 + 2 ⌈ln(Δ*/θ)/β⌉ G_{|P|}``, Δ* = max(θ, e^β G_{|P|}); for subgraph
counts G_{|P|} = 2 × (largest number of occurrences one participant is in), so the error is
about that local empirical sensitivity times a log factor over ε. X is a *lower* bound of the
answer (downward bias), so the release is biased low by design.

Noise: Y and Z come from fugu's exact discrete Laplace sampler on a fine public grid
(:func:`fugu.noise.grid_laplace`), never floating-point Laplace. Solver tolerance (spec 8.1(6)):
the values entering X are certified to within τ = ``tolerance · Δ̂`` by a primal point and a
dual bound, and Z has scale (Δ̂ + 2τ)/ε2, so ``|X̃(D1) − X̃(D2)| ≤ Δ̂ + 2τ`` still holds. The choice
of j in step 1 uses solver values of G; near-ties there are a residual risk the paper does not
cover (documented, not fixed).

Empty inputs (a graph with no nodes under node privacy or no edges under edge privacy, a relation
with no tuples, a query with no participants) are released like any other: |P| = 0, so j = 0,
X = 0, and Δ̂ and Z are drawn as always. Each is a neighbour of an input that is released (one
node, edge or tuple more), so refusing it would tell the two apart with probability 1; the
curator gets a ``UserWarning`` (never part of the release).
"""

from __future__ import annotations

import math
import sys
import time
from collections.abc import Callable, Hashable, Sequence
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np
from numpy.typing import NDArray

from ..budget import Accountant
from ..budget import fit_epsilon_parts as fit_parts  # the one copy, below the mechanisms
from ..errors import InvalidParameterError, InvalidTypeError, check_epsilon
from ..mechanism import guarantee, start
from ..noise import RandomSource, discrete_laplace, grid_scale
from ..release import Guarantee
from .count_release import (
    GRAPH_NEIGHBOURS,
    CountRelease,
    nonnegative_release,
    pattern_name,
    warn_empty,
    warn_if_empty_graph,
)
from .krelation import Annotations, Formulas, KRelation
from .lp import G_FACTOR, LPModel, check_g_factor, check_solver

__all__ = [
    "CountRelease",
    "RecursiveParameters",
    "Trace",
    "answer",
    "recursive_mechanism",
    "exact_sequences",
    "general_recursive",
    "x_value",
]

SOURCE = "Chen & Zhou, Recursive Mechanism (SIGMOD 2013; arXiv 1304.4795), Thm. 1 and Sec. 5"
#: Public clamp on ln Δ̂ (post-processing of the ε1-DP Δ̂): Δ̂ ∈ [θ·e^-30, 1e15].
LN_DELTA_HAT_MAX = math.log(1e15)
LN_DELTA_HAT_BELOW_THETA = 30.0
#: How X is computed: "relaxed" = min over real i (one program), "integer" = eq. 12 (three).
X_RULES = ("relaxed", "integer")
#: Smallest ε1 and ε2: both noises are exact discrete Laplace on a grid of about sensitivity·2^-10,
#: so their scale in grid units is about 2^11/ε, and the sampler takes at most 2^52 (MAX_SCALE).
#: The bound does not depend on the data, so it is checked before anything is charged or read.
MIN_EPSILON_PART = 2.0**-40
#: Public range of θ (in the units of q): keeps Δ̂ ∈ [θ e^-30, 1e15] a normal, positive double.
THETA_RANGE = (1e-9, 1e12)
#: Largest β: e^{jβ} must stay finite for every j the search can reach.
MAX_BETA = 50.0
#: The default β is the paper's ε/5 up to this value (its value at ε = 2), then stays there.
#: Δ = θe^{jβ} overshoots the sensitivity by up to a factor e^β and the noise is Δ̂/ε2, so with
#: β = ε/5 the error grew with ε: karate node-DP triangles (true 45, 30 seeds) RMSE 21 at ε = 2,
#: 34 at ε = 5, 52 at ε = 10 and 4,674 at ε = 50 (Δ̂ ≈ 44,000); capped: 14 / 15 / 15.
DEFAULT_BETA_CAP = 0.4


# -- parameters ---------------------------------------------------------------------------------
@dataclass(frozen=True)
class RecursiveParameters:
    """Public parameters of the Recursive Mechanism (all affect accuracy only, not privacy).

    Defaults follow the paper's experiments (Sec. 6.1): θ = 1, β = ε/5 (capped at
    :data:`DEFAULT_BETA_CAP` = 0.4, its value at ε = 2: beyond, β = ε/5 made the error grow with
    ε), μ = 1 under node privacy and 0.5 otherwise (edge privacy; :func:`answer` on
    K-relations), and the ε1/ε2 split that the paper does not state, read as ε/2 each.
    (``make``'s own default μ is 1.)
    ``tolerance`` is the solver tolerance τ as a fraction of Δ̂ (the noise scale grows by 2τ).
    ``x_rule``: ``"relaxed"`` (default) takes X = min over *real* i ∈ [0, |P|] of
    H_i + (|P| − i)Δ̂, which is the optimum of one linear program; ``"integer"`` is the paper's
    eq. 12 (the same program, then H at the two neighbouring integers). Both have sensitivity ≤ Δ̂
    (see :func:`x_value`); the relaxed X is at most Δ̂ lower.
    ``g_factor`` is the factor of G in eq. 19 (2 in the paper, the default; 1 as R2T's
    reimplementation): privacy only needs G to be a recursive sequence, which any positive factor
    keeps (spec §3, §8 item 8), so it is utility only, but Theorem 4's accuracy bound is proved
    for 2 and no longer applies to other values.
    """

    epsilon1: float
    epsilon2: float
    beta: float
    theta: float
    mu: float
    tolerance: float
    x_rule: str = "relaxed"
    g_factor: float = G_FACTOR

    @classmethod
    def make(
        cls,
        epsilon: float,
        *,
        beta: float | None = None,
        theta: float = 1.0,
        mu: float = 1.0,
        split: float = 0.5,
        tolerance: float = 0.01,
        x_rule: str = "relaxed",
        g_factor: float = G_FACTOR,
        exact_values: bool = False,
    ) -> RecursiveParameters:
        """Checked parameters. ``exact_values=True`` (the general mechanism, whose H and G are
        exact subset values, no solver) is the only case that may use ``tolerance=0``."""
        eps = check_epsilon(epsilon)
        gf = check_g_factor(g_factor)
        if x_rule not in X_RULES:
            raise InvalidParameterError(
                f"x_rule must be one of {X_RULES}, got {x_rule!r} ('relaxed' solves one program, "
                "'integer' is eq. 12 of the paper)"
            )
        if not (_is_number(split) and 0 < split < 1):
            raise InvalidParameterError(
                f"split (the share of epsilon spent on Δ̂) must be a number in (0, 1), got {split!r}"
            )
        b = min(eps / 5, DEFAULT_BETA_CAP) if beta is None else beta
        for name, v in (("beta", b), ("theta", theta), ("mu", mu)):
            if isinstance(v, bool) or not (
                isinstance(v, int | float) and math.isfinite(v) and v > 0
            ):
                raise InvalidParameterError(f"{name} must be a finite number > 0, got {v!r}")
        b = float(b)
        if b > MAX_BETA:
            raise InvalidParameterError(
                f"beta = {b:g} is too large (at most {MAX_BETA:g}); the paper uses beta = "
                f"epsilon/5, and beta only trades the two error terms (accuracy, not privacy)"
            )
        if not (THETA_RANGE[0] <= theta <= THETA_RANGE[1]):
            raise InvalidParameterError(
                f"theta = {theta!r} is outside the supported range {THETA_RANGE[0]:g} .. "
                f"{THETA_RANGE[1]:g} (theta is a public guess of the sensitivity in the units of "
                f"the statistic; the paper uses 1)"
            )
        check_epsilon_split(eps, split)
        low_ok = _is_number(tolerance) and (tolerance >= 0 if exact_values else tolerance > 0)
        if not (low_ok and tolerance <= 1):
            raise InvalidParameterError(
                f"tolerance must be in (0, 1] (a fraction of Δ̂), got {tolerance!r}: the values "
                "entering X come from a solver and are certified to within tolerance·Δ̂, which "
                "the noise then covers; 0 would leave solver error uncovered (default 0.01)"
            )
        eps1, eps2 = fit_parts(eps, (eps * split, eps * (1 - split)))
        return cls(
            eps1,
            eps2,
            float(b),
            float(theta),
            float(mu),
            float(tolerance),
            x_rule,
            gf,
        )

    @property
    def epsilon(self) -> float:
        """ε1 + ε2 rounded up (the exact sum is at most the ε asked for, see
        :func:`fugu.budget.fit_epsilon_parts`)."""
        from fractions import Fraction

        exact = Fraction(self.epsilon1) + Fraction(self.epsilon2)
        total = float(exact)
        return total if Fraction(total) >= exact else math.nextafter(total, math.inf)


def _is_number(v: object) -> bool:
    """A real number (int, float or numpy scalar), not a bool or a string."""
    return not isinstance(v, bool) and isinstance(v, int | float | np.integer | np.floating)


def check_epsilon_split(eps: float, split: float) -> None:
    """Refuse an ε whose parts ε1 = split·ε, ε2 = (1 − split)·ε are below the sampler's range.

    Checked before any budget is charged or any data is read (the bound is public).
    """
    worst = min(split, 1 - split)
    if eps * worst < MIN_EPSILON_PART:
        need = MIN_EPSILON_PART / worst
        raise InvalidParameterError(
            f"epsilon = {eps!r} is too small: the Recursive Mechanism spends split = {split:g} of "
            f"it on Δ̂ and the rest on the answer, and each part must be at least "
            f"{MIN_EPSILON_PART:.3g} (the exact noise sampler's range). Use epsilon >= "
            f"{need:.3g} and at most 1000; useful values are 0.05 to 5"
        )


@dataclass
class Trace:
    """What happened inside one run. **Private**: holds the true answer and data-dependent
    quantities; for tests and benchmarks only, never publish it."""

    true_value: float
    n_participants: int
    n_tuples: int
    size: int
    g_top: float
    j: int
    delta: float
    delta_hat: float
    x: float
    i_star: float
    n_lps: int
    lp_seconds: float
    lp_times: list[tuple[str, float]]
    enumeration_seconds: float = 0.0

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


# -- the mechanism --------------------------------------------------------------------------------
def _progress_callback(
    progress: bool | Callable[[str], None],
) -> tuple[Callable[[str], None] | None, Any]:
    if callable(progress):
        hook = progress

        def public(label: str) -> None:
            # the kind of program only, as on the bar: its index (|P| − j) and the cap of the
            # search for j depend on the private data
            hook(label.split("[")[0])

        return public, None
    if not progress:
        return None, None
    from tqdm import tqdm

    bar = tqdm(desc="recursive mechanism LPs", unit="LP", file=sys.stderr, leave=False)

    def cb(label: str) -> None:
        # only the kind of program (G, H, X): its index depends on the private data
        bar.set_postfix_str(label.split("[")[0])
        bar.update(1)

    return cb, bar


def find_j(model: LPModel, params: RecursiveParameters) -> tuple[int, float]:
    """j and G_{|P|} of eq. 11 by binary search (G is nondecreasing in its index)."""
    _check_model_factor(model, params)
    n = model.ann.n_participants
    g_top = model.g_value(n)
    theta, beta = params.theta, params.beta
    if g_top <= theta:
        return 0, g_top
    hi = min(n, math.ceil(math.log(g_top / theta) / beta) + 1)

    def ok(j: int) -> bool:
        return j >= n or model.g_at_most(n - j, _cap(theta, j * beta))

    lo = 1
    while lo < hi:
        mid = (lo + hi) // 2
        if ok(mid):
            hi = mid
        else:
            lo = mid + 1
    return lo, g_top


def grid_laplace_scalar(
    x: float, sensitivity: float, epsilon: float, rng: RandomSource
) -> tuple[float, float]:
    """``x`` + Laplace(sensitivity/ε) on a power-of-two grid, exactly; returns (value, scale).

    The same draw as :func:`fugu.noise.grid_laplace` for one value (grid
    ``γ = 2^(floor(log2 sensitivity) − 10)``, effective sensitivity ``sensitivity + γ``, exact
    discrete Laplace on the grid, same random stream), but ``x/γ`` is rounded and added to the
    noise in exact integer arithmetic, so no magnitude of ``x`` (a data value) can make the draw
    fail after the budget is spent. The result is the exact grid value rounded once to a double.
    The scale in grid units is below ``(2^11 + 1)/ε`` whatever the sensitivity, which is what
    :data:`MIN_EPSILON_PART` guards.
    """
    from fractions import Fraction

    if not (math.isfinite(x) and math.isfinite(sensitivity) and sensitivity > 0):
        raise InvalidParameterError(  # pragma: no cover - callers pass checked values
            f"grid_laplace_scalar needs finite x and sensitivity > 0, got {x!r}, {sensitivity!r}"
        )
    e = math.frexp(sensitivity)[1] - 1 - 10  # floor(log2 sensitivity) - 10
    gamma = math.ldexp(1.0, e)
    _, lam = grid_scale(sensitivity, epsilon, 1, gamma)  # grid_laplace's λ, rounded up there too
    ints = round(Fraction(x) / Fraction(2) ** e)  # round half to even, like np.rint
    noise = int(discrete_laplace(np.array([lam / gamma]), rng=rng)[0])
    return float(Fraction(ints + noise) * Fraction(2) ** e), lam


def _check_model_factor(model: LPModel, params: RecursiveParameters) -> None:
    if model.g_factor != params.g_factor:
        raise InvalidParameterError(
            f"the LP model's g_factor ({model.g_factor:g}) differs from the parameters' "
            f"g_factor ({params.g_factor:g}); build the LPModel with g_factor=params.g_factor"
        )


def _cap(theta: float, log_factor: float) -> float:
    """θ·e^{jβ} without overflow (capped at e^700, far above any G this library can hold)."""
    return math.exp(min(math.log(theta) + log_factor, 700.0))


def x_value(
    model: LPModel, delta_hat: float, tau: float = math.inf, rule: str = "integer"
) -> tuple[float, float]:
    """X of step 3 and where the minimum is: ``(X, i*)``.

    ``rule="integer"`` is eq. 12, X = min over integers i of H_i + (|P| − i)Δ̂, found by the X
    program (eq. 20) and H at the two integers around its minimiser (H is convex, Lemma 10).

    ``rule="relaxed"`` minimises over real i ∈ [0, |P|], with H_x the same program at a real
    budget |f| = x: that is exactly the X program, so one solve. **Its sensitivity is also ≤ Δ̂**
    (our derivation, the real-index version of Lemma 7): for neighbours D1 ⪯ D2 = D1 + p and real
    x ∈ [0, |P1|], H_x(D2) ≤ H_x(D1) (extend the optimal f of D1 by f_p = 0; naturalness) and
    H_x(D1) ≤ H_{x+1}(D2) (restrict the optimal f of D2 to P1: its budget is ≥ x, φ is monotone,
    H is nondecreasing). Then X(D2) ≤ X(D1) + Δ̂, and X(D1) ≤ X(D2) because the minimum of D2 over
    x ∈ [0, 1) is ≥ |P1|Δ̂ ≥ X(D1). Leaving out participants in no annotation changes nothing
    (H'_x = H_{max(0, x−1)}). Accuracy: X_integer − Δ̂ ≤ X_relaxed ≤ X_integer, tiny next to the
    Lap(Δ̂/ε2) noise. Checked on neighbours by ``test_lemma7_x_sensitivity_on_neighbours``.

    With a finite ``tau`` the value is certified: the returned X lies in [X_true, X_true + τ]
    (a primal point gives the upper bound, the solver's multipliers a weak-duality lower bound).
    """
    ann = model.ann
    n = ann.n_participants
    total = ann.total()
    if n == 0:
        return 0.0, 0
    # H_{i} − H_{i−1} ≤ max_p Σ_{t∋p} q(t) = G_{|P|}/g for all i (Lemma 9 + convexity), so when
    # Δ̂ reaches that bound the minimum is at i = |P| exactly (also over real i).
    if delta_hat >= float(model.impact.max(initial=0.0)):
        return total, n
    if rule == "relaxed":
        value, i_real = model.x_relaxed(delta_hat, tau)
        return min(value, total), i_real
    i_real = model.x_argmin(delta_hat)
    cands = sorted(
        {min(n, max(0, math.floor(i_real + 1e-9))), min(n, max(0, math.ceil(i_real - 1e-9)))}
    )
    if len(cands) == 1:  # i' is an integer: also look one step either side (cheap safety)
        i0 = cands[0]
        cands = sorted({max(0, i0 - 1), i0, min(n, i0 + 1)})
    best = math.inf
    best_i = n
    for i in cands:
        v = model.h_value(i, tau) + (n - i) * delta_hat
        if v < best:
            best, best_i = v, i
    return best, best_i


def recursive_mechanism(
    ann: Annotations | Formulas,
    params: RecursiveParameters,
    rng: RandomSource,
    *,
    method: str = "clarabel",
    g_method: str | None = None,
    progress: bool | Callable[[str], None] = False,
    lp_time_limit: float | None = None,
    model: LPModel | None = None,
) -> tuple[float, float, float, Trace]:
    """Run the efficient Recursive Mechanism on compiled annotations.

    Returns ``(x_hat, delta_hat, noise_scale, trace)``. ``x_hat`` and ``delta_hat`` are the
    (ε1 + ε2)-DP outputs; ``trace`` is private (true answer, j, Δ, X) — never publish it.
    ``model``: an :class:`LPModel` of the same annotations to reuse (its H/G values are cached;
    for repeated experiments on one data set); its ``g_factor`` must equal ``params.g_factor``.
    """
    if not params.tolerance > 0:  # the values entering X come from the solver: certify them
        raise InvalidParameterError(
            f"tolerance must be in (0, 1] for the solver-based mechanism, got "
            f"{params.tolerance!r} (parameters made with exact_values=True are for "
            "general_recursive only)"
        )
    cb, bar = _progress_callback(progress)
    try:
        if model is None or model.ann is not ann:
            model = LPModel(
                ann,
                method=method,
                g_method=g_method,
                progress=cb,
                time_limit=lp_time_limit,
                g_factor=params.g_factor,
            )
        n0 = model.stats.n_solves
        s0 = model.stats.seconds
        j, g_top = find_j(model, params)
        ln_delta = math.log(params.theta) + j * params.beta
        # Step 2: ln Δ̂ = ln Δ + μ + Y, Y ~ Lap(β/ε1) on a fine grid (exact discrete sampler).
        noisy, _ = grid_laplace_scalar(ln_delta, params.beta, params.epsilon1, rng)
        ln_dh = clamp_ln_delta_hat(noisy + params.mu, params.theta)
        delta_hat = math.exp(ln_dh)
        tau = params.tolerance * delta_hat
        x, i_star = x_value(model, delta_hat, tau, params.x_rule)
        sens = delta_hat + 2 * tau
        # the grid scale is < (2^11 + 1)/ε2 <= MAX_SCALE for every Δ̂ (checked by make())
        x_hat, scale = grid_laplace_scalar(x, sens, params.epsilon2, rng)
    finally:
        if bar is not None:
            bar.close()
    trace = Trace(
        true_value=ann.total(),
        n_participants=ann.n_participants,
        n_tuples=ann.n_tuples,
        size=ann.size,
        g_top=g_top,
        j=j,
        delta=math.exp(ln_delta),
        delta_hat=delta_hat,
        x=x,
        i_star=i_star,
        n_lps=model.stats.n_solves - n0,
        lp_seconds=model.stats.seconds - s0,
        lp_times=list(model.stats.per_lp[n0:]),
    )
    return x_hat, delta_hat, scale, trace


def _guarantee(
    model: str,
    params: RecursiveParameters,
    rng: RandomSource,
    statistic: str,
    neighbours: str,
    mechanism: str = "recursive",
    extra: dict[str, Any] | None = None,
) -> Guarantee:
    return guarantee(
        model=model,
        epsilon=params.epsilon,
        neighbours=neighbours,
        mechanism=mechanism,
        rng=rng,
        sensitivity=None,
        source=SOURCE,
        parameters={
            "statistic": statistic,
            "epsilon1 (for Δ̂)": params.epsilon1,
            "epsilon2 (for the answer)": params.epsilon2,
            "beta": params.beta,
            "theta": params.theta,
            "mu": params.mu,
            "tolerance": params.tolerance,
            "X": params.x_rule,
            **({} if mechanism.startswith("recursive (general") else {"g_factor": params.g_factor}),
            "noise": "discrete Laplace on a power-of-two grid",
            **(extra or {}),
        },
    )


NEIGHBOURS_RELATION = GRAPH_NEIGHBOURS["participant-dp"]


def answer(
    krelation: KRelation,
    weights: Any = None,
    epsilon: float = 1.0,
    *,
    split_signed: bool = False,
    signed_share: float = 0.5,
    beta: float | None = None,
    theta: float = 1.0,
    mu: float = 0.5,
    split: float = 0.5,
    tolerance: float = 0.01,
    x_rule: str = "relaxed",
    g_factor: float = G_FACTOR,
    rng: RandomSource | None = None,
    accountant: Accountant | None = None,
    progress: bool | Callable[[str], None] = False,
    nonnegative: bool = False,
) -> CountRelease:
    """ε-DP answer to the linear statistic Σ_t q(t) over a sensitive K-relation.

    Privacy model: ε-DP where one participant withdraws with everything it owns (Def. 14 of the
    Recursive Mechanism paper); the efficient Recursive Mechanism (see the module docstring).
    The relation's annotation form (minimal DNF or formulas) was decided from the query plan
    alone (:mod:`fugu.graph.krelation`); it is recorded in the guarantee's parameters.

    Parameters
    ----------
    krelation : KRelation
        The query result, built with the positive relational algebra.
    weights : None, column name, callable(row) or array
        q(t) ≥ 0 per tuple (None counts tuples). Signed weights need ``split_signed=True``:
        the positive and negative parts are answered as two releases with ``signed_share`` and
        ``1 − signed_share`` of ε (sequential composition: the total is still ε) and subtracted.
    epsilon : float
        Total privacy budget (ε1 + ε2, and both parts of a signed split).
    beta, theta, mu, split, tolerance, x_rule :
        See :class:`RecursiveParameters` (θ is in the units of the weights). ``mu`` (upward
        bias of Δ̂, accuracy only) defaults to 0.5, the paper's general setting (it uses 1 only
        for node privacy); on the Figures 8-9 relations the median error grows with μ (measured
        in ``bench/bench_graph.py --parts mu``: 1.6-1.7x from μ = 0.5 to 1). It is recorded in
        the guarantee's parameters.
    g_factor : float
        The factor of the bounding sequence G in eq. 19: 2 (default) is the paper's algorithm as
        published; 1 as R2T's reimplementation. Utility only: privacy holds for every finite
        g_factor > 0 (G stays a recursive sequence), but the accuracy theorem (Theorem 4) is
        proved for 2 only. On the Figure 9 relations (100-500 tuples) 1 lowers the median error
        1.4-1.9x (see ``docs/graph.md``). Recorded in the guarantee's parameters.
    rng, accountant :
        Random source (secure by default); an accountant (model ``"participant-dp"``) charged ε
        once, after the weights are read and checked (a refusal there charges nothing).
    nonnegative : bool
        Clamp the released value at 0 (post-processing, recorded in the guarantee). Not with
        ``split_signed`` (a signed sum can be negative).

    Examples
    --------
    >>> import fugu
    >>> from fugu.graph import KRelation, answer
    >>> rows = [{"who": "ann", "km": 3.0}, {"who": "bob", "km": 5.0}, {"who": "ann", "km": 4.0}]
    >>> trips = KRelation.from_records(rows, owners="who")
    >>> rel = answer(trips, "km", epsilon=1.0, rng=fugu.RandomSource(seed=2))
    >>> rel.guarantee.epsilon, rel.statistic
    (1.0, 'sum of km')
    """
    if not isinstance(krelation, KRelation):
        raise InvalidTypeError(
            f"krelation must be a fugu.graph.KRelation, got {type(krelation).__name__}"
        )
    eps = check_epsilon(epsilon)
    if split_signed and nonnegative:
        raise InvalidParameterError(
            "nonnegative=True clamps at 0, but a signed sum (split_signed=True) can be negative; "
            "drop one of the two"
        )
    if split_signed and not (_is_number(signed_share) and 0 < signed_share < 1):
        raise InvalidParameterError(
            f"signed_share must be a number in (0, 1), got {signed_share!r}"
        )
    # the parts' ε add up to at most ε exactly (each part's ε1 + ε2 to at most its share)
    part_eps = (
        fit_parts(eps, (eps * signed_share, eps * (1 - signed_share))) if split_signed else (eps,)
    )
    # every parameter is checked before the budget is charged and before the relation is read
    all_params = [
        RecursiveParameters.make(
            part,
            beta=beta,
            theta=theta,
            mu=mu,
            split=split,
            tolerance=tolerance,
            x_rule=x_rule,
            g_factor=g_factor,
        )
        for part in part_eps
    ]
    label = (
        "count of tuples"
        if weights is None
        else (f"sum of {weights}" if isinstance(weights, str) else "weighted sum")
    )
    # The weights are data: read and checked before anything is charged, so a refusal (a value
    # that is not a number, NaN, a negative weight) spends nothing and names no value.
    w = krelation._weights(weights)
    if not np.all(np.isfinite(w)):
        raise InvalidParameterError(
            f"weights ({label}) must be finite; some tuple's weight is NaN or infinite"
        )
    with np.errstate(over="ignore"):
        top = float(np.abs(w).sum()) * all_params[0].g_factor
    if not math.isfinite(top):
        # G_|P| (g times the largest load) and the search for j overflow: refused before the
        # charge (it raised a bare OverflowError after it)
        raise InvalidParameterError(
            f"weights ({label}) are too large: their total times g_factor overflows a double "
            f"(1.8e308); rescale them (theta is in the units of the weights)"
        )
    has_neg = bool(np.any(w < 0))
    if has_neg and not split_signed:
        raise InvalidParameterError(
            "weights has negative entries; the Recursive Mechanism needs q(t) >= 0 (monotone "
            "queries). Pass split_signed=True to answer the positive and negative parts as two "
            "releases that share epsilon"
        )
    if len(krelation) == 0:  # released like its neighbours: X = 0 plus the noise
        warn_empty("the relation has no tuples", "(one tuple more, owned by one participant)")
    eps_total, source = start(
        eps, rng, accountant, f"recursive mechanism: {label}", model="participant-dp"
    )
    # the annotation form and its public clause bound come from the query plan, not the data
    form_info = {
        "annotation form": krelation.form,
        "annotation form rule": krelation.form_rule,
        "public clause bound": (
            int(krelation.clause_bound) if math.isfinite(krelation.clause_bound) else "none"
        ),
    }
    if not split_signed:
        params = all_params[0]
        ann = krelation.compile(w)
        x_hat, dh, scale, _ = recursive_mechanism(ann, params, source, progress=progress)
        g = _guarantee(
            "participant-dp", params, source, label, NEIGHBOURS_RELATION, extra=form_info
        )
        rel = CountRelease(g, x_hat, delta_hat=dh, noise_std=math.sqrt(2) * scale, statistic=label)
        return nonnegative_release(rel) if nonnegative else rel
    parts = []
    for sign, params in zip((1.0, -1.0), all_params, strict=True):
        ann = krelation.compile(np.maximum(sign * w, 0.0))
        parts.append((recursive_mechanism(ann, params, source, progress=progress), params))
    (xp, dhp, sp_, _), pp = parts[0]
    (xn, dhn, sn, _), pn = parts[1]
    g = guarantee(
        model="participant-dp",
        epsilon=eps_total,
        neighbours=NEIGHBOURS_RELATION,
        mechanism="recursive (signed split)",
        rng=source,
        source=SOURCE + "; signed weights split into two nonnegative queries (Sec. 3, Def. 13)",
        parameters={
            "statistic": label,
            "positive part epsilon": pp.epsilon,
            "negative part epsilon": pn.epsilon,
            "positive part Δ̂": dhp,
            "negative part Δ̂": dhn,
            "beta (positive part)": pp.beta,
            "beta (negative part)": pn.beta,
            "epsilon1 (for Δ̂), positive part": pp.epsilon1,
            "epsilon1 (for Δ̂), negative part": pn.epsilon1,
            "theta": theta,
            "mu": mu,
            "tolerance": pp.tolerance,
            "X": pp.x_rule,
            "g_factor": pp.g_factor,
            "noise": "discrete Laplace on a power-of-two grid",
            **form_info,
        },
    )
    return CountRelease(
        g, xp - xn, delta_hat=None, noise_std=math.sqrt(2 * (sp_**2 + sn**2)), statistic=label
    )


# -- exact (exponential) sequences and the general mechanism (spec section 4) ---------------------
MAX_EXACT_PARTICIPANTS = 20


def subset_values(ann: Annotations | Formulas) -> NDArray[np.float64]:
    """q(M(P')) for every subset P' (bitmask over participants 0..n−1) of a K-relation."""
    n = ann.n_participants
    if n > MAX_EXACT_PARTICIPANTS:
        raise InvalidParameterError(
            f"exact sequences enumerate 2^n subsets; n = {n} > {MAX_EXACT_PARTICIPANTS}"
        )
    if isinstance(ann, Formulas):
        bits = (np.arange(1 << n)[:, None] >> np.arange(n)[None, :]) & 1
        return np.array([float(ann.weights @ ann.truth(b.astype(bool))) for b in bits])
    masks = np.arange(1 << n, dtype=np.int64)
    lens = np.diff(ann.clause_ptr)
    cm = (
        np.add.reduceat(np.left_shift(np.int64(1), ann.clause_vars), ann.clause_ptr[:-1])
        if ann.n_clauses
        else np.zeros(0, np.int64)
    )
    out = np.zeros(masks.size)
    del lens
    for t in range(ann.n_tuples):
        cs = cm[ann.tuple_ptr[t] : ann.tuple_ptr[t + 1]]
        sat = np.zeros(masks.size, bool)
        for c in cs:
            sat |= (masks & c) == c
        out += ann.weights[t] * sat
    return out


def exact_sequences(
    q: NDArray[np.float64], n: int
) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
    """H (eq. 13) and G (eq. 15) of the general construction from q over all 2^n subsets.

    H_i = min_{|P'|=i} q(P'); G_i = min_{|P'|=i} GS~(P') with GS~(P') = max_{P''⊆P'} LS~(P'') and
    LS~(P'') = max_{p∈P''} q(P'') − q(P''−p). Exponential: for tiny inputs and tests.
    """
    q = np.asarray(q, dtype=np.float64)
    size = 1 << n
    if q.shape != (size,):
        raise InvalidParameterError(f"q must have 2^n = {size} entries")
    masks = np.arange(size, dtype=np.int64)
    pop = np.zeros(size, np.int64)
    ls = np.zeros(size)
    for p in range(n):
        bit = np.int64(1) << np.int64(p)
        has = (masks & bit) != 0
        pop += has
        ls = np.where(has, np.maximum(ls, q - q[masks ^ bit]), ls)
    gs = ls.copy()
    for p in range(n):  # subset-max transform
        bit = np.int64(1) << np.int64(p)
        has = (masks & bit) != 0
        gs[has] = np.maximum(gs[has], gs[masks[has] ^ bit])
    h = np.full(n + 1, np.inf)
    g = np.full(n + 1, np.inf)
    np.minimum.at(h, pop, q)
    np.minimum.at(g, pop, gs)
    return h, g


def general_recursive(
    query: Callable[[frozenset[Hashable]], float] | NDArray[np.float64] | KRelation,
    participants: Sequence[Hashable] | None,
    epsilon: float,
    *,
    beta: float | None = None,
    theta: float = 1.0,
    mu: float = 1.0,
    split: float = 0.5,
    model: str | None = None,
    rng: RandomSource | None = None,
    accountant: Accountant | None = None,
    check_monotone: bool = True,
    nonnegative: bool = False,
) -> CountRelease:
    """The general (exponential-time) Recursive Mechanism of spec section 4, for tiny inputs.

    Privacy model: ε-DP (pure, add/remove) where one participant withdraws (Def. 6 of Chen and
    Zhou, SIGMOD 2013); ``model`` names it in the guarantee: ``"participant-dp"`` (default),
    ``"node-dp"`` or ``"edge-dp"`` when the participants are nodes or edges.
    Sensitivity: none assumed; the noise is calibrated to a private estimate Δ̂ of the global
    empirical sensitivity GS~ (Theorem 2: G is a 1-bounding sequence). Source: Chen and Zhou,
    Sec. 4.2 (eqs. 13-15) and Theorem 1; spec ``recursive_mechanism.md`` section 4.

    Works for any *monotone* query q over subsets of participants (q(∅) = 0, withdrawals never
    raise the answer): H_i and G_i are minima over all ancestors of size i (eqs. 13-15), G is a
    1-bounding sequence, error ≈ Õ(GS~/ε). Costs 2^|P| evaluations of q (|P| ≤ 20). The bound is
    checked on the data: 21 participants are refused (uncharged) while their 20-participant
    neighbour is released, which tells the two apart; use it only where |P| ≤ 20 is public.
    No participants at all is released (X = 0 plus the noise), with a ``UserWarning``.

    Parameters
    ----------
    query : callable(frozenset of participants) → float, an array of q over all 2^n bitmasks,
        or a KRelation (its tuple count)
    participants : the participants (ignored for a KRelation)
    epsilon : total ε (ε1 = split·ε for Δ̂, the rest for the answer)
    beta, theta, mu, split : see :class:`RecursiveParameters`
    model : the privacy model named in the guarantee (see above)
    rng, accountant : random source (secure by default) and an accountant charged ε once
    check_monotone : must be True (the default): a query that is not monotone is refused.
        ``False`` is refused too: Lemma 7 (the answer moves by at most Δ̂ between
        neighbours) needs monotonicity, and without it the stated ε does not hold (a
        non-monotone q on 5 participants gave an exact loss of 2.0 at ε = 1); the check costs
        no more than the sequences themselves.
    nonnegative : clamp the released value at 0 (post-processing, recorded in the guarantee)

    Examples
    --------
    >>> import fugu
    >>> rel = fugu.graph.general_recursive(lambda s: len(s), ["a", "b", "c"], 1.0,
    ...                                    rng=fugu.RandomSource(seed=0))
    >>> rel.guarantee.model, rel.guarantee.mechanism
    ('participant-dp', 'recursive (general, exact)')
    """
    model_name = "participant-dp" if model is None else model
    if model_name not in _GENERAL_MODELS:
        raise InvalidParameterError(
            f"model must be one of {sorted(_GENERAL_MODELS)}, got {model!r}"
        )
    params = RecursiveParameters.make(
        epsilon, beta=beta, theta=theta, mu=mu, split=split, tolerance=0.0, exact_values=True
    )
    if isinstance(query, KRelation):
        ann = query.compile()
        q = subset_values(ann)
        n = ann.n_participants
    elif callable(query):
        if participants is None:
            raise InvalidParameterError("participants are needed with a callable query")
        parts = list(participants)
        n = len(parts)
        _check_exact_size(n)
        if len(set(parts)) != n:
            # a repeated participant would be two bits of the subset lattice for one person:
            # its withdrawal then moves two steps, and X changes by up to (repeats)·Δ̂
            raise InvalidParameterError(
                "participants must be distinct (each is one person, node or edge that may "
                "withdraw); the list repeats some of them"
            )
        q = np.array(
            [
                float(query(frozenset(p for b, p in enumerate(parts) if m >> b & 1)))
                for m in range(1 << n)
            ]
        )
    else:
        q = np.asarray(query, dtype=np.float64).reshape(-1)
        n = max(0, q.size.bit_length() - 1)
        if q.size != 1 << n:
            raise InvalidParameterError(
                "an array query must have 2^n entries (one per subset bitmask)"
            )
        _check_exact_size(n)
    if not np.all(np.isfinite(q)):
        raise InvalidParameterError("query values must be finite")
    if not check_monotone:
        raise InvalidParameterError(
            f"check_monotone={check_monotone!r}: the general Recursive Mechanism is ε-DP only for "
            "monotone queries (withdrawals never raise the answer; Lemma 7), so the check is "
            "always made; leave check_monotone at its default True"
        )
    _check_monotone(q, n)
    if n == 0:  # released like its neighbours: H = (0), X = 0 plus the noise
        warn_empty("the query has no participants", "(one participant more)")
    _, source = start(
        params.epsilon, rng, accountant, "general recursive mechanism", model=model_name
    )
    h, j = general_sequences(q, n, params)
    x_hat, dh, scale = general_noise(h, j, params, source)
    gu = _guarantee(
        model_name,
        params,
        source,
        "monotone query",
        _GENERAL_MODELS[model_name],
        mechanism="recursive (general, exact)",
    )
    rel = CountRelease(
        gu, x_hat, delta_hat=dh, noise_std=math.sqrt(2) * scale, statistic="monotone query"
    )
    return nonnegative_release(rel) if nonnegative else rel


_GENERAL_MODELS = GRAPH_NEIGHBOURS


def _check_exact_size(n: int) -> None:
    if n > MAX_EXACT_PARTICIPANTS:
        raise InvalidParameterError(
            f"the general mechanism enumerates 2^n subsets; n = {n} > {MAX_EXACT_PARTICIPANTS} "
            f"(use fugu.graph.answer for K-relations of any size)"
        )


def general_sequences(
    q: NDArray[np.float64], n: int, params: RecursiveParameters
) -> tuple[NDArray[np.float64], int]:
    """The deterministic part of :func:`general_recursive`: exact H and j of eq. 11 (g = 1).

    **Private** (depends on the data); the audit and the library both call it.
    """
    h, g = exact_sequences(q, n)
    with np.errstate(divide="ignore"):
        log_g = np.log(g)  # -inf for G = 0
    i = np.arange(n + 1)
    ok = log_g[n - i] <= math.log(params.theta) + i * params.beta
    return h, int(np.argmax(ok))  # i = n always qualifies (G_0 = 0)


def general_noise(
    h: NDArray[np.float64], j: int, params: RecursiveParameters, rng: RandomSource
) -> tuple[float, float, float]:
    """Steps 2-4 for exact H and j: (X̂, Δ̂, scale of the answer's noise)."""
    n = h.size - 1
    ln_delta = math.log(params.theta) + j * params.beta
    noisy, _ = grid_laplace_scalar(ln_delta, params.beta, params.epsilon1, rng)
    dh = math.exp(clamp_ln_delta_hat(noisy + params.mu, params.theta))
    x = float(np.min(h + (n - np.arange(n + 1)) * dh))
    x_hat, scale = grid_laplace_scalar(x, dh, params.epsilon2, rng)
    return x_hat, dh, scale


def clamp_ln_delta_hat(ln_dh: float, theta: float) -> float:
    """The public clamp of ln Δ̂ to [ln θ − 30, ln 1e15] (post-processing of the ε1-DP Δ̂)."""
    return min(max(ln_dh, math.log(theta) - LN_DELTA_HAT_BELOW_THETA), LN_DELTA_HAT_MAX)


def _check_monotone(q: NDArray[np.float64], n: int) -> None:
    if q.size and q[0] != 0:
        raise InvalidParameterError(
            f"the query must be 0 on the empty set (q(∅) = {q[0]!r}); subtract public parts first"
        )
    masks = np.arange(q.size, dtype=np.int64)
    for p in range(n):
        bit = np.int64(1) << np.int64(p)
        has = (masks & bit) != 0
        if np.any(q[has] < q[masks[has] ^ bit] - 1e-12):
            raise InvalidParameterError(
                "the query is not monotone: some withdrawal raises the answer; the Recursive "
                "Mechanism needs monotone queries (no difference/negation)"
            )


def timed(fn: Callable[[], Any]) -> tuple[Any, float]:
    t0 = time.perf_counter()
    out = fn()
    return out, time.perf_counter() - t0


# -- subgraph counting ----------------------------------------------------------------------------
def count(
    G: Any,
    pattern: Any,
    epsilon: float,
    unit: str = "node",
    rng: RandomSource | None = None,
    *,
    k: int | None = None,
    beta: float | None = None,
    theta: float = 1.0,
    mu: float | None = None,
    split: float = 0.5,
    tolerance: float = 0.01,
    x_rule: str = "relaxed",
    g_factor: float = G_FACTOR,
    node_predicate: Callable[[dict[str, Any]], bool] | None = None,
    edge_predicate: Callable[[dict[str, Any]], bool] | None = None,
    induced: bool = False,
    accountant: Accountant | None = None,
    progress: bool | Callable[[str], None] = False,
    method: str = "clarabel",
    lp_time_limit: float | None = None,
    trace: list[Trace] | None = None,
    mechanism: str = "recursive",
    delta: float | None = None,
    degree_bound: int | None = None,
    nonnegative: bool = False,
) -> CountRelease:
    """ε-node- or ε-edge-DP count of a pattern's occurrences in a graph (Recursive Mechanism).

    Privacy model: ``unit="node"``: ε-node differential privacy — neighbouring graphs differ by one
    node and all its edges (the node set itself is private). ``unit="edge"``: ε-edge differential
    privacy — neighbours differ by one edge; the node set is public. Add/remove neighbours, pure ε.
    Sensitivity: no global bound is assumed (under node privacy it is unbounded); the noise is
    calibrated to the empirical sensitivity, privately (see the module docstring). Source: Chen and
    Zhou, SIGMOD 2013 (arXiv 1304.4795), Theorem 1, Secs. 5-6. Expected error: about
    ``2 · LS~ · ln(LS~)/β / ε`` where LS~ is the largest number of occurrences one node (edge)
    is in; the estimate is biased low (a lower bound plus unbiased noise).

    Parameters
    ----------
    G : networkx.Graph
        Undirected simple graph (directed graphs, multigraphs and self-loops are refused with the
        conversion to use).
    pattern : str or networkx.Graph
        ``"edge"``, ``"triangle"``, ``"k-star"``, ``"k-triangle"``, ``"path"`` (k edges),
        ``"cycle"`` (k nodes), ``"k-clique"``; forms like ``"2-star"``, ``"4-cycle"`` set k. Or any
        small connected networkx graph (matched by VF2; nodes/edges may carry a ``"predicate"``).
    epsilon : float
        Total ε (ε1 = split·ε for Δ̂, ε2 = the rest for the answer).
    unit : {"node", "edge"}
    rng : RandomSource, optional
        Secure by default; seeded = reproducible and NOT private.
    k : int, optional
        Size parameter of the named pattern.
    beta, theta, mu, split, tolerance :
        Mechanism parameters (:class:`RecursiveParameters`); defaults from the paper's experiments:
        β = min(ε/5, 0.4), θ = 1, μ = 1 (node) or 0.5 (edge), ε1 = ε2 = ε/2, τ = 1% of Δ̂.
    g_factor : float
        The factor of G in eq. 19: 2 (default, the paper) or e.g. 1 (as R2T's reimplementation).
        Utility only (privacy holds for every finite g_factor > 0; Theorem 4's accuracy bound
        assumes 2). Recorded in the guarantee's parameters.
    node_predicate, edge_predicate : callable(attrs) -> bool, optional
        Only occurrences whose every node / edge satisfies the predicate are counted.
    induced : bool
        Count induced occurrences (node privacy and networkx patterns only).
    progress : bool or callable(str)
        Show a progress display (stderr) while the LPs run, or call ``progress(kind)`` once per
        program with its kind only (``"G"``, ``"H"`` or ``"X"``: the index and the cap of a
        program depend on the private data).
    method, lp_time_limit :
        LP solver: ``"clarabel"`` (default; interior point on the sparse KKT system) or HiGHS
        through scipy (``"highs-ipm"``, ``"highs-ds"``, ``"highs"``), and a per-LP time limit in
        seconds (a run that hits it raises :class:`fugu.graph.lp.SolverError`; nothing is released).
        Both are checked before anything is charged.
    trace : list, optional
        If given, the private :class:`Trace` of the run is appended (tests and benchmarks only).
    mechanism : {"recursive", "karwa", "smooth", "laplace"}
        ``"recursive"`` (default): the Recursive Mechanism, any pattern, node or edge DP.
        The baselines take none of its options (``beta`` … ``trace``, the predicates,
        ``induced``, ``g_factor``): giving one with them is refused, not ignored.
        The paper's edge-DP baselines: ``"karwa"`` — Karwa, Raskhodnikova, Smith, Yaroslavtsev
        (PVLDB 2011): ε-DP k-star count (smooth sensitivity) or (ε, δ)-DP k-triangle count (needs
        ``delta``), see :mod:`fugu.graph.karwa`; ``"smooth"`` — triangles, Nissim, Raskhodnikova
        and Smith 2007; ``"laplace"`` — global sensitivity (node DP needs ``degree_bound``).
    delta : float, optional
        δ of the (ε, δ)-DP k-triangle baseline (``mechanism="karwa"`` only).
    degree_bound : int, optional
        Public degree bound of the node-DP Laplace baseline (``mechanism="laplace"`` only).
    nonnegative : bool
        Clamp the released count at 0 (post-processing, recorded in the guarantee).

    Returns
    -------
    CountRelease
        ``.value`` the noisy count, ``.delta_hat`` the noisy sensitivity, ``.guarantee``.

    Examples
    --------
    >>> import networkx as nx, fugu
    >>> rel = fugu.graph.count(nx.karate_club_graph(), "triangle", epsilon=1.0, unit="node",
    ...                        rng=fugu.RandomSource(seed=1))
    >>> rel.guarantee.model, rel.statistic
    ('node-dp', 'triangle count')
    """
    from .patterns import check_unit, pattern_relation

    check_unit(unit)
    if mechanism not in MECHANISMS:
        raise InvalidParameterError(f"mechanism must be one of {MECHANISMS}, got {mechanism!r}")
    if mechanism != "recursive":
        if g_factor != G_FACTOR:
            raise InvalidParameterError(
                f"g_factor={g_factor!r} is an option of the Recursive Mechanism (the factor of "
                f"G in eq. 19); mechanism={mechanism!r} has no G: drop g_factor"
            )
        # the baselines take none of the Recursive Mechanism's options: one given would be
        # ignored silently (a predicate or induced=True would not restrict the released count)
        given = [
            name
            for name, value, default in (
                ("beta", beta, None),
                ("theta", theta, 1.0),
                ("mu", mu, None),
                ("split", split, 0.5),
                ("tolerance", tolerance, 0.01),
                ("x_rule", x_rule, "relaxed"),
                ("node_predicate", node_predicate, None),
                ("edge_predicate", edge_predicate, None),
                ("induced", induced, False),
                ("progress", progress, False),
                ("method", method, "clarabel"),
                ("lp_time_limit", lp_time_limit, None),
                ("trace", trace, None),
            )
            if value is not default and (callable(value) or value != default)
        ]
        if given:
            hint = (
                " (to restrict a laplace count, give a networkx pattern whose nodes or edges "
                "carry a 'predicate' attribute)"
                if mechanism == "laplace" and {"node_predicate", "edge_predicate"} & set(given)
                else ""
            )
            raise InvalidParameterError(
                f"{', '.join(given)}: option(s) of the Recursive Mechanism "
                f"(mechanism='recursive') that mechanism={mechanism!r} would ignore; drop "
                f"them{hint}"
            )
        return _baseline_count(
            G,
            pattern,
            epsilon,
            unit,
            rng,
            mechanism=mechanism,
            k=k,
            delta=delta,
            degree_bound=degree_bound,
            accountant=accountant,
            nonnegative=nonnegative,
        )
    for name, value in (("delta", delta), ("degree_bound", degree_bound)):
        if value is not None:
            raise InvalidParameterError(
                f"{name}= is an option of a baseline (mechanism='karwa' or 'laplace'); the "
                f"Recursive Mechanism is pure ε-DP and needs no {name}"
            )
    model = "node-dp" if unit == "node" else "edge-dp"
    params = RecursiveParameters.make(
        epsilon,
        beta=beta,
        theta=theta,
        mu=(1.0 if unit == "node" else 0.5) if mu is None else mu,
        split=split,
        tolerance=tolerance,
        x_rule=x_rule,
        g_factor=g_factor,
    )
    name = pattern_name(pattern, k)
    from .patterns import check_graph, check_pattern

    check_pattern(pattern, induced, unit)  # public: before anything is charged
    check_solver(method, lp_time_limit)
    check_graph(G)  # a graph that cannot be counted is refused uncharged, as by the baselines
    # the occurrences are enumerated before anything is charged: an error there (a predicate
    # that fails on some node's attributes) depends on the graph and must spend nothing
    rel, occ = pattern_relation(
        G,
        pattern,
        unit,
        k,
        node_predicate=node_predicate,
        edge_predicate=edge_predicate,
        induced=induced,
    )
    ann = rel.compile()
    warn_if_empty_graph(G, unit)  # released like its neighbours: X = 0 plus the noise
    _, source = start(
        params.epsilon, rng, accountant, f"recursive mechanism: {name} count", model=model
    )
    x_hat, dh, scale, tr = recursive_mechanism(
        ann, params, source, method=method, progress=progress, lp_time_limit=lp_time_limit
    )
    tr.enumeration_seconds = occ.seconds
    if trace is not None:
        trace.append(tr)
    options: dict[str, Any] = {"unit": unit}
    if node_predicate is not None or edge_predicate is not None:
        options["constraints"] = "node/edge predicates (public)"
    if induced:
        options["induced"] = True
    g = _guarantee(model, params, source, f"{name} count", GRAPH_NEIGHBOURS[model], extra=options)
    out = CountRelease(
        g, x_hat, delta_hat=dh, noise_std=math.sqrt(2) * scale, statistic=f"{name} count"
    )
    return nonnegative_release(out) if nonnegative else out


MECHANISMS = ("recursive", "karwa", "smooth", "laplace")


def _baseline_count(
    G: Any,
    pattern: Any,
    epsilon: float,
    unit: str,
    rng: RandomSource | None,
    *,
    mechanism: str,
    k: int | None,
    delta: float | None,
    degree_bound: int | None,
    accountant: Accountant | None,
    nonnegative: bool,
) -> CountRelease:
    """``count(..., mechanism=...)`` for the paper's baselines (edge DP, except Laplace)."""
    if mechanism not in MECHANISMS:
        raise InvalidParameterError(f"mechanism must be one of {MECHANISMS}, got {mechanism!r}")
    if mechanism in ("karwa", "smooth") and unit != "edge":
        raise InvalidParameterError(
            f"mechanism={mechanism!r} is an edge-DP baseline; pass unit='edge' (for node DP use "
            f"mechanism='recursive')"
        )
    if mechanism != "karwa" and delta is not None:
        raise InvalidParameterError(
            "delta= is only used by mechanism='karwa' (the (ε, δ)-DP k-triangle count)"
        )
    if mechanism != "laplace" and degree_bound is not None:
        raise InvalidParameterError("degree_bound= is only used by mechanism='laplace'")
    if mechanism == "karwa":
        from .karwa import karwa_count

        return karwa_count(
            G,
            pattern,
            epsilon,
            k=k,
            delta=delta,
            rng=rng,
            accountant=accountant,
            nonnegative=nonnegative,
        )
    if mechanism == "smooth":
        from .smooth import smooth_triangle_count

        if pattern_name(pattern, k) != "triangle":
            raise InvalidParameterError(
                f"mechanism='smooth' counts triangles; got pattern {pattern!r} (use "
                f"mechanism='karwa' for k-stars and k-triangles)"
            )
        return smooth_triangle_count(
            G, epsilon, rng=rng, accountant=accountant, nonnegative=nonnegative
        )
    from .baselines import laplace_count

    return laplace_count(
        G,
        pattern,
        epsilon,
        unit,
        rng,
        k=k,
        degree_bound=degree_bound,
        accountant=accountant,
        nonnegative=nonnegative,
    )
