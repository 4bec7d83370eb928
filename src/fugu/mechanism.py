"""Steps every mechanism shares: checking ε, choosing the random source, charging the budget,
and writing the guarantee. Written once here so each mechanism module stays about its algorithm.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from .budget import Accountant
from .errors import InvalidParameterError, check_epsilon
from .noise import RandomSource, default_source
from .release import Guarantee

NEIGHBOURS = {
    "replace": "replace one record with another (bounded DP)",
    "add-remove": "add or remove one record (unbounded DP)",
}


def check_neighbours(neighbours: str) -> str:
    if neighbours not in NEIGHBOURS:
        raise InvalidParameterError(
            "neighbours must be 'replace' (bounded DP, the papers' default) or 'add-remove', "
            f"got {neighbours!r}"
        )
    return neighbours


def start(
    epsilon: object,
    rng: RandomSource | None,
    accountant: Accountant | None,
    what: str,
    *,
    model: str = "central-dp",
    policy: str | None = None,
) -> tuple[float, RandomSource]:
    """Validate ε, resolve the random source and charge the accountant (before touching data)."""
    eps = check_epsilon(epsilon)
    source = default_source(rng)
    if accountant is not None:
        accountant.spend(eps, what, model=model, policy=policy)
    return eps, source


def guarantee(
    *,
    model: str,
    epsilon: float,
    neighbours: str,
    mechanism: str,
    rng: RandomSource,
    sensitivity: float | None = None,
    source: str = "",
    parameters: Mapping[str, Any] | None = None,
    data_options: Mapping[str, Any] | None = None,
    post_processing: tuple[str, ...] = (),
) -> Guarantee:
    return Guarantee(
        model=model,
        epsilon=epsilon,
        neighbours=NEIGHBOURS.get(neighbours, neighbours),
        mechanism=mechanism,
        sensitivity=sensitivity,
        source=source,
        parameters=dict(parameters or {}),
        data_options=dict(data_options or {}),
        post_processing=post_processing,
        private=rng.private,
    )
