"""The Ordered Mechanism: a noisy cumulative histogram under a Blowfish policy.

Privacy model: (ε, P)-Blowfish privacy (He, Machanavajjhala, Ding, SIGMOD 2014, seed ``000_…``,
§7 "Ordered Mechanism"). Neighbours: one record moves along an edge of the policy's secret graph
(plus add/remove when the policy has ⊥; minimal sets of such moves under constraints).

Mechanism: release ``c̃_j = C_j + Lap(S/ε)`` for every cumulative count ``C_j`` (j = 1..k−1;
``C_k = n`` is public under the paper's bounded neighbours). Sensitivity: ``S = θ``, the largest
rank distance of a secret edge (line graph: 1; ``G^{d,θ}``: θ; complete graph: k − 1; partition:
the widest block) — computed by :func:`fugu.blowfish.sensitivity` for the policy at hand.
Noise is exact discrete Laplace (integer counts), so the release is exactly (ε, P)-Blowfish.

Error (no post-processing): a range ``[x_i, x_j]`` is ``c̃_j − c̃_{i−1}``, the difference of two
independent noisy counts, so its mean squared error is ``2·Var = 2·2θ²/ε²`` (discrete Laplace:
``2p/(1−p)²`` per count, ``p = e^{−ε/θ}``) — independent of |T| (the paper's Theorem 7.x; the
hierarchical mechanism's is O(log³|T|/ε²)). ``inference=True`` (or ``rel.monotone()``) projects
onto ``0 <= C_1 <= … <= C_k = n`` by isotonic regression (Hay et al.); it never increases the
L2 distance to the truth and helps most on sparse data, but it is not unbiased, so it is off by
default and recorded in the guarantee when used. The mechanism degrades as θ²: for θ beyond
about 8 use :func:`fugu.blowfish.ordered_hierarchical`.

>>> import fugu
>>> from fugu.blowfish import Policy, ordered
>>> dom = fugu.Domain([fugu.Ordinal("age", 0, 99)])
>>> hist = fugu.Histogram.from_records({"age": [23, 35, 35, 61, 70]}, dom)
>>> rel = ordered(hist, epsilon=1.0, policy=Policy.line(dom), rng=fugu.RandomSource(seed=1))
>>> rel.guarantee.model, rel.guarantee.sensitivity, rel.total
('blowfish', 1.0, 5.0)
>>> round(rel.expected_error({"age": (20, 39)}) ** 2, 3)  # 2 counts, each 2p/(1-p)^2, p = e^-1
3.683
"""

from __future__ import annotations

from ..budget import Accountant
from ..histogram import Histogram
from ..mechanism import guarantee, start
from ..noise import RandomSource, discrete_laplace_variance
from ._eps import NoisePart, check_noise_epsilon
from .cumulative import (
    CumulativeRelease,
    Structure,
    check_flag,
    check_ordered_input,
    measure,
    part_sensitivity,
    prefix_from_nodes,
)
from .policy import Policy

__all__ = ["ordered", "blowfish_neighbours"]

SOURCE = "He, Machanavajjhala, Ding, Blowfish Privacy (SIGMOD 2014), Sec. 7, Ordered Mechanism"


def blowfish_neighbours(policy: Policy) -> str:
    """The neighbour relation of a policy, in words (for the guarantee)."""
    s = f"move one record along an edge of the secret graph '{policy.description}'"
    if policy.bottom:
        s += ", or add/remove one record (⊥)"
    elif policy.has_bottom_edges():
        # explicit ⊥ edges at some values only: adding or removing a record elsewhere is not a
        # neighbour, and the sensitivities do not cover it (a 'sum' covers ⊥ at those values)
        cells = policy.bottom_cells()
        shown = ", ".join(str(int(c)) for c in cells[:8]) + (", ..." if cells.size > 8 else "")
        s += (
            f", or add/remove one record whose value is joined to ⊥ (only cells {shown}; "
            f"adding or removing a record at any other value is not protected)"
        )
    if policy.constraints:
        s += "; with public constraints: a minimal set of such moves keeping them true"
    return s


def ordered(
    hist: Histogram,
    epsilon: float,
    policy: Policy,
    *,
    inference: bool = False,
    rng: RandomSource | None = None,
    accountant: Accountant | None = None,
) -> CumulativeRelease:
    """Release the cumulative histogram of a one-attribute ordered domain with noise θ/ε.

    Parameters
    ----------
    hist : Histogram over one ordinal attribute
    epsilon : float
    policy : Policy on the histogram's domain (``Policy.line``, ``distance_threshold``, ...)
    inference : bool
        Isotonic projection (monotone, ``0 <= C <= n``) after the noise; biased, off by default.
    rng, accountant : as for every mechanism

    Returns
    -------
    CumulativeRelease
        ``answer`` (ranges from two counts), ``counts``, ``quantile``, exact ``expected_error``.
    """
    hist, policy = check_ordered_input(hist, policy, "Ordered Mechanism")
    inference = check_flag(inference, "inference")
    k = hist.domain.size
    sens = part_sensitivity(policy, k, block=1, height=0)
    check_noise_epsilon(epsilon, [NoisePart("cumulative-count", sens.s_part)], "Ordered Mechanism")
    eps, source = start(
        epsilon,
        rng,
        accountant,
        f"ordered mechanism ({policy.description})",
        model="blowfish",
        policy=policy.name,
    )
    total_public = not sens.bottom
    var_s = float(discrete_laplace_variance(sens.s_part / eps)) if sens.s_part > 0 else 0.0
    st = Structure(k=k, fanout=2, height=0, var_s=var_s, var_h=0.0, total_public=total_public)
    counts = hist.counts.reshape(-1)
    s, _ = measure(counts, st, sens, eps, eps, source)
    n = float(counts.sum()) if total_public else None  # n is public under bounded neighbours
    cum = prefix_from_nodes(s, [], st, n)
    g = guarantee(
        model="blowfish",
        epsilon=eps,
        neighbours=blowfish_neighbours(policy),
        mechanism="ordered",
        rng=source,
        sensitivity=sens.s_part,
        source=SOURCE,
        parameters={
            **policy.summary(),
            "noise": "discrete Laplace",
            "scale": sens.s_part / eps if sens.s_part else 0.0,
            "theta": sens.theta,
            "total": "public (n known under the policy)" if total_public else "noisy",
            **({"exact": "sensitivity 0: released without noise"} if sens.s_part == 0 else {}),
        },
        data_options=hist.data_options,
    )
    rel = CumulativeRelease(hist.domain, g, cum, st, measurements={"s": s})
    return rel.monotone() if inference else rel
