"""Registers the Laplace baseline with ``fugu release`` and ``fugu demo``."""

from __future__ import annotations

from typing import Any

from ._common import MechanismEntry, register_mechanism


def _laplace(
    hist: Any, epsilon: float, options: dict[str, Any], rng: Any, accountant: Any = None
) -> Any:
    from ..central import laplace

    return laplace(
        hist,
        epsilon,
        neighbours=options.get("neighbours", "replace"),
        rng=rng,
        accountant=accountant,
    )


register_mechanism(
    MechanismEntry("laplace", _laplace, "central-dp", "Basic: discrete Laplace noise on every cell")
)
