"""The Ordered Hierarchical Mechanism (OH): cumulative counts every block plus a tree per block.

Privacy model: (ε, P)-Blowfish privacy (He, Machanavajjhala, Ding, SIGMOD 2014, seed ``000_…``,
§7 "Ordered Hierarchical Mechanism", Figure 2(a)). Neighbours: one record moves along an edge of
the policy's secret graph (⊥: also add/remove; constraints: minimal sets of moves).

Structure: blocks of ``L = f^h`` consecutive values (``L >= θ`` in the paper's construction).
S-nodes ``s_m = C_{mL}`` (records in the first m blocks) and, inside each block, a complete
f-ary tree of ``h`` levels below the block root (leaves = single values; the block root is not
measured, it equals ``s_m − s_{m−1}``). A secret move of rank distance ``<= θ`` crosses at most
``⌈θ/L⌉`` block boundaries and touches one root-to-leaf path in at most two blocks, so the
S-part has sensitivity ``⌈θ/L⌉`` (1 when ``L >= θ``) and the H-part ``2h``. The budget is split
``ε = ε_S + ε_H``; every S-node gets discrete Laplace noise of scale ``S_S/ε_S``, every H-node
``S_H/ε_H``. ``h = 0`` is exactly the Ordered Mechanism; one block covering the domain is the
hierarchical mechanism (root = n public) — so the search below never does worse than either.

Error and the budget split (our derivation; the paper's constants are not in our copy): a range
is ``Ĉ_b − Ĉ_a``, each ``Ĉ = s + (≤ (f−1)h H-nodes of the left-sibling decomposition)``. For
uniformly random endpoints the mean squared error without consistency is about

    MSE(ε_S, ε_H) = a/ε_S² + b/ε_H²,   a = 4·S_S²·(B−1)/B,   b = 2·h(f−1)·S_H² = 8(f−1)h³

(``2·Var(Ĉ)`` per endpoint, ``Var(noise) = 2·scale²``, a prefix uses ``h(f−1)/2`` H-nodes on
average). It is minimised at ``ε_S = ε·a^{1/3}/(a^{1/3} + b^{1/3})``, giving
``MSE* = (a^{1/3} + b^{1/3})³/ε² = O(log³θ/ε²)``. With ``fanout``/``height`` unset, fugu
evaluates ``MSE*`` for every fan-out 2..64 and every height 0..⌈log_f k⌉ and takes the smallest
(the worst-case analogue replaces 8 by 16; see ``oh_plan(..., worst_case=True)``). Least squares
helps the trees but not the Ordered Mechanism, so with consistency on (and |T| <= 4096) the best
tree and the Ordered Mechanism are compared by their exact post-least-squares variance.

Consistency (default on): weighted least squares over all S- and H-nodes (1/variance weights;
``C_k = n`` when public), computed exactly in linear time
(:func:`fugu.blowfish.cumulative.gls_leaves`). Least squares is linear and unbiased and lowers
the variance of every range answer (Gauss–Markov); ``expected_error`` stays exact.

>>> import fugu
>>> from fugu.blowfish import Policy, ordered_hierarchical, oh_plan
>>> oh_plan(k=1024, theta=64, epsilon=1.0).fanout > 1
True
>>> dom = fugu.Domain([fugu.Ordinal("x", 0, 1023)])
>>> hist = fugu.Histogram.from_records({"x": [5, 99, 512, 513]}, dom)
>>> pol = Policy.distance_threshold(dom, 64)
>>> rel = ordered_hierarchical(hist, 1.0, pol, rng=fugu.RandomSource(seed=0))
>>> rel.guarantee.mechanism, rel.guarantee.parameters["theta"]
('ordered-hierarchical', 64)
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from ..budget import Accountant
from ..errors import InvalidParameterError, check_positive_int
from ..histogram import Histogram
from ..mechanism import guarantee, start
from ..noise import RandomSource, discrete_laplace_variance
from ._eps import NoisePart, check_noise_epsilon, fit_shares
from .cumulative import (
    CumulativeRelease,
    Structure,
    check_flag,
    check_ordered_input,
    direct_range_variance,
    gls_leaves,
    gls_range_variance,
    measure,
    part_sensitivity,
    prefix_from_nodes,
)
from .ordered import blowfish_neighbours
from .policy import Policy

__all__ = ["ordered_hierarchical", "oh_plan", "OHPlan"]

SOURCE = (
    "He, Machanavajjhala, Ding, Blowfish Privacy (SIGMOD 2014), Sec. 7, Ordered Hierarchical "
    "Mechanism; budget split and error formula derived in fugu (docs/blowfish.md)"
)


@dataclass(frozen=True)
class OHPlan:
    """A structure and budget split with its predicted range-query MSE (times nothing: at ε)."""

    fanout: int
    height: int
    block: int
    eps_s: float
    eps_h: float
    sens_s: float
    sens_h: float
    mse: float


def _split(a: float, b: float, eps: float) -> tuple[float, float, float]:
    if b == 0:
        return eps, 0.0, a / eps**2
    if a == 0:
        return 0.0, eps, b / eps**2
    ca, cb = a ** (1 / 3), b ** (1 / 3)
    eps_s = eps * ca / (ca + cb)
    return eps_s, eps - eps_s, (ca + cb) ** 3 / eps**2


def oh_plan(
    k: int,
    theta: int,
    epsilon: float,
    *,
    fanout: int | None = None,
    height: int | None = None,
    eps_split: float | None = None,
    moves: float = 1.0,
    bottom: bool = False,
    worst_case: bool = False,
    max_fanout: int = 64,
    consistency: bool = False,
) -> OHPlan:
    """Choose fan-out, height and ε split minimising the predicted range-query MSE (see module).

    ``eps_split`` fixes the S-part's share of ε; ``fanout``/``height`` fix the structure.
    ``consistency=True`` plans for answers made consistent by least squares (what
    :func:`ordered_hierarchical` does by default): when the padded domain has at most
    ``MAX_EXACT_PLAN`` values, the best tree (h >= 1) and the best Ordered Mechanism (h = 0) by
    the formula are compared by their exact average variance after least squares over 64 fixed
    random ranges (least squares helps trees, not the Ordered Mechanism). Public computation
    only: no data involved.
    """
    k = check_positive_int(k, "k")
    theta = check_positive_int(theta, "theta (largest rank gap of a secret edge)", 0)
    if eps_split is not None and (
        isinstance(eps_split, bool)
        or not isinstance(eps_split, int | float | np.integer | np.floating)
        or not 0 < eps_split < 1
    ):
        raise InvalidParameterError(
            f"eps_split is the S-part's share of epsilon, in (0, 1); got {eps_split}"
        )
    c_h = 16.0 if worst_case else 8.0
    fans = (
        [check_positive_int(fanout, "fanout", 2)]
        if fanout is not None
        else range(2, max(3, min(max_fanout, k) + 1))
    )
    plans: list[OHPlan] = []
    for f in fans:
        top = max(1, math.ceil(math.log(k, f) - 1e-12)) if k > 1 else 1
        heights = (
            [check_positive_int(height, "height", 0)] if height is not None else range(0, top + 1)
        )
        for h in heights:
            if h == 0 and fanout is None and f != 2:
                continue  # h = 0 (the Ordered Mechanism) does not depend on the fan-out
            if h > 0 and f**h > 4 * k * f:
                continue
            block = f**h
            n_blocks = -(-k // block)
            # S- and H-part sensitivities: the rule of fugu.blowfish.cumulative.part_sensitivity
            s_s = moves * ((-(-theta // block)) if theta else 0)
            if bottom:
                s_s = max(s_s, moves * n_blocks)
            s_h = moves * ((2 * h) if theta else 0)
            if bottom:
                s_h = max(s_h, moves * h)
            n_noisy_s = n_blocks - 1 + (1 if bottom else 0)  # S-nodes with noise (⊥: the total)
            frac = 1.0 if worst_case else n_noisy_s / n_blocks
            if n_noisy_s == 0:
                frac = 0.0
            a = 4.0 * s_s**2 * frac
            b = (c_h / 8.0) * 2 * h * (f - 1) * s_h**2
            if eps_split is not None and h > 0 and (n_blocks > 1 or bottom):
                es, eh = epsilon * eps_split, epsilon * (1 - eps_split)
                mse = a / es**2 + b / eh**2
            else:
                es, eh, mse = _split(a, b, epsilon)
            if h == 0:
                es, eh = epsilon, 0.0
            es, eh = fit_shares(epsilon, [es, eh])  # exact sum <= epsilon
            plans.append(OHPlan(f, h, block, es, eh, float(s_s), float(s_h), float(mse)))

    if not plans:  # only a fixed fanout and height can leave none
        raise InvalidParameterError(
            f"fanout={fanout} and height={height} give blocks of {fanout}^{height} values, far "
            f"more than the domain's {k} (at most 4·k·fanout); use a smaller height, or leave "
            f"fanout/height unset to let fugu choose"
        )
    plans.sort(key=lambda p: p.mse)
    return _least_squares_best(plans, k, bottom) if consistency else plans[0]


#: Structures are compared by their exact least-squares error when the padded domain is at most
#: this large (public computation, no data involved); beyond it by the formula alone.
MAX_EXACT_PLAN = 1 << 12


def _least_squares_best(plans: list[OHPlan], k: int, bottom: bool) -> OHPlan:
    """Of the plans (best formula MSE first), the best tree and the best Ordered Mechanism
    compared by their exact average variance after least squares (see :func:`oh_plan`)."""
    trees = [c for c in plans if c.height > 0][:1]
    flat = [c for c in plans if c.height == 0][:1]
    pool = [c for c in trees + flat if -(-k // c.block) * c.block <= MAX_EXACT_PLAN]
    if len(plans) == 1 or len(pool) < 2:
        return plans[0]
    gen = np.random.default_rng(0)
    ends = np.sort(gen.integers(0, k + 1, size=(64, 2)), axis=1)
    ends[:, 1] = np.maximum(ends[:, 1], ends[:, 0] + 1)
    ends = np.minimum(ends, k)
    ends[:, 0] = np.minimum(ends[:, 0], ends[:, 1] - 1)
    best, best_err = plans[0], math.inf
    for c in pool:
        var_s = (
            float(discrete_laplace_variance(c.sens_s / c.eps_s))
            if c.sens_s > 0 and c.eps_s > 0
            else 0.0
        )
        var_h = (
            float(discrete_laplace_variance(c.sens_h / c.eps_h))
            if c.sens_h > 0 and c.eps_h > 0
            else 0.0
        )
        st = Structure(k, c.fanout, c.height, var_s, var_h, not bottom)
        if c.height > 0 and var_h > 0 and (var_s > 0 or st.n_s == 0):
            err = float(np.mean([gls_range_variance(st, int(a), int(b)) for a, b in ends]))
        else:
            err = float(np.mean(direct_range_variance(ends[:, 0], ends[:, 1], st)))
        if err < best_err - 1e-12:
            best, best_err = c, err
    return best


def ordered_hierarchical(
    hist: Histogram,
    epsilon: float,
    policy: Policy,
    *,
    fanout: int | None = None,
    height: int | None = None,
    eps_split: float | None = None,
    consistency: bool = True,
    rng: RandomSource | None = None,
    accountant: Accountant | None = None,
) -> CumulativeRelease:
    """Release range-query answers of a one-attribute ordered domain with the OH structure.

    Parameters
    ----------
    hist : Histogram over one ordinal attribute
    epsilon : float
    policy : Policy on the histogram's domain (``distance_threshold(dom, θ)`` is the paper's)
    fanout, height : int, optional
        Tree fan-out f >= 2 and levels h >= 0 per block (block = f^h values). Default: chosen by
        :func:`oh_plan` to minimise the predicted range-query MSE.
    eps_split : float, optional
        Share of ε given to the S-nodes; default optimal for the structure.
    consistency : bool
        Weighted least squares over all nodes (unbiased; default on).

    Returns
    -------
    CumulativeRelease
    """
    hist, policy = check_ordered_input(hist, policy, "Ordered Hierarchical Mechanism")
    consistency = check_flag(consistency, "consistency")
    k = hist.domain.size
    probe = part_sensitivity(policy, k, block=1, height=0)
    what = "Ordered Hierarchical Mechanism"
    # ε must be valid before planning: the split divides by ε² (ZeroDivisionError at 1e-300
    # before this check) and every noisy part needs a scale within the sampler's limit
    eps0 = check_noise_epsilon(epsilon, [NoisePart("smallest noisy", 1.0)], what)
    plan = oh_plan(
        k,
        probe.theta,
        eps0,
        fanout=fanout,
        height=height,
        eps_split=eps_split,
        moves=probe.moves,
        bottom=probe.bottom,
        consistency=consistency,
    )
    sens = part_sensitivity(policy, k, block=plan.block, height=plan.height)
    parts = []
    if sens.s_part > 0 and -(-k // plan.block) - (0 if sens.bottom else 1) > 0:
        parts.append(NoisePart("S-node", sens.s_part, plan.eps_s / eps0))
    if sens.h_part > 0 and plan.height > 0:
        parts.append(NoisePart("H-node", sens.h_part, plan.eps_h / eps0))
    check_noise_epsilon(eps0, parts, what)
    eps, source = start(
        epsilon,
        rng,
        accountant,
        f"ordered hierarchical mechanism ({policy.description})",
        model="blowfish",
        policy=policy.name,
    )
    total_public = not sens.bottom
    var_s = (
        float(discrete_laplace_variance(sens.s_part / plan.eps_s))
        if sens.s_part > 0 and plan.eps_s > 0
        else 0.0
    )
    var_h = (
        float(discrete_laplace_variance(sens.h_part / plan.eps_h))
        if sens.h_part > 0 and plan.eps_h > 0
        else 0.0
    )
    st = Structure(
        k=k,
        fanout=plan.fanout,
        height=plan.height,
        var_s=var_s,
        var_h=var_h,
        total_public=total_public,
    )
    counts = hist.counts.reshape(-1)
    s, levels = measure(counts, st, sens, plan.eps_s, plan.eps_h, source)
    n = float(counts.sum()) if total_public else None
    use_gls = consistency and plan.height > 0 and var_h > 0 and (var_s > 0 or st.n_s == 0)
    if use_gls:
        leaves = gls_leaves(s, levels, st, n)
        cum = np.concatenate([[0.0], np.cumsum(leaves)])[: k + 1]
        if n is not None:
            cum[k] = n
        estimate = "least-squares"
    else:
        cum = prefix_from_nodes(s, levels, st, n)
        estimate = "direct"
    g = guarantee(
        model="blowfish",
        epsilon=eps,
        neighbours=blowfish_neighbours(policy),
        mechanism="ordered-hierarchical",
        rng=source,
        sensitivity=None,
        source=SOURCE,
        parameters={
            **policy.summary(),
            "noise": "discrete Laplace",
            "theta": sens.theta,
            "fanout": plan.fanout,
            "height": plan.height,
            "block": plan.block,
            "epsilon_s": plan.eps_s,
            "epsilon_h": plan.eps_h,
            "sensitivity_s": sens.s_part,
            "sensitivity_h": sens.h_part,
            "predicted_mse": plan.mse,
            "total": "public (n known under the policy)" if total_public else "noisy",
        },
        data_options=hist.data_options,
        post_processing=("weighted least-squares consistency (unbiased)",) if use_gls else (),
    )
    meas = {"s": s, **{f"h{i + 1}": lv for i, lv in enumerate(levels)}}
    return CumulativeRelease(hist.domain, g, cum, st, estimate=estimate, measurements=meas)
