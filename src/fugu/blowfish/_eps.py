"""Which ε a Blowfish mechanism can serve, checked before anything is planned or spent.

fugu's exact discrete Laplace sampler accepts scales up to ``MAX_SCALE = 2^52`` (beyond it the
release would be pure noise). A mechanism whose noise scale is ``S/(share·ε)`` therefore works
for ``ε >= S/(share·MAX_SCALE)``; below that it used to fail deep inside the planning
(``ZeroDivisionError`` in the Ordered Hierarchical split for ε = 1e-300) or after the budget
was charged. :func:`check_noise_epsilon` validates ε first (``check_epsilon``: finite, > 0,
<= 1000) and then against each noisy part, and says which range works.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from ..budget import fit_epsilon_parts as fit_shares  # the one copy, below the mechanisms
from ..errors import InvalidParameterError, check_epsilon
from ..noise import MAX_SCALE

__all__ = ["NoisePart", "check_noise_epsilon", "fit_shares", "min_epsilon"]

#: The largest ε any fugu mechanism accepts (see :func:`fugu.errors.check_epsilon`).
MAX_EPSILON = 1000.0


@dataclass(frozen=True)
class NoisePart:
    """One noisy part of a release: its sensitivity, its share of ε, and — for real values
    released on a power-of-two grid (:func:`fugu.noise.grid_laplace`) — how many coordinates
    one neighbour may change (``grid_m``; None for integer counts)."""

    name: str
    sensitivity: float
    share: float = 1.0
    grid_m: int | None = None

    def scale_at_one(self) -> float:
        """The sampler's scale at ε = 1 (it is proportional to 1/ε)."""
        if self.sensitivity <= 0:
            return 0.0
        if self.share <= 0:
            return math.inf
        if self.grid_m is None:
            return self.sensitivity / self.share
        m = max(1, int(self.grid_m))
        # the grid of grid_laplace: γ = 2^(floor(log2(S/m)) − 10), effective S + m·γ, scale in
        # grid units (S + m·γ)/(share·ε·γ)
        gamma = math.ldexp(1.0, math.floor(math.log2(self.sensitivity / m)) - 10)
        return (self.sensitivity + m * gamma) / (self.share * gamma)


def min_epsilon(parts: Sequence[NoisePart]) -> float:
    """The smallest ε at which every part's noise scale is within the sampler's limit."""
    return max((p.scale_at_one() for p in parts), default=0.0) / MAX_SCALE


def check_noise_epsilon(epsilon: object, parts: Sequence[NoisePart], mechanism: str) -> float:
    """Return ε as a float, or raise :class:`~fugu.InvalidParameterError` naming the working
    range when some part's noise scale would exceed the exact sampler's limit."""
    eps = check_epsilon(epsilon)
    for p in parts:
        s1 = p.scale_at_one()
        if s1 > 0 and not s1 / eps <= MAX_SCALE:
            low = min_epsilon(parts)
            raise InvalidParameterError(
                f"epsilon={eps!r} is too small for the {mechanism}: the {p.name} noise scale "
                f"{s1 / eps:.3g} (sensitivity {p.sensitivity:g}) would exceed the exact "
                f"sampler's limit 2^52 = {MAX_SCALE:.3g}, and the release would be pure noise. "
                f"With this policy and these settings epsilon must lie in [{low:.3g}, "
                f"{MAX_EPSILON:g}] (typical values are 0.1 to 2)"
            )
    return eps
