"""The Ordered Hierarchical Mechanism has one planner, :func:`oh_plan` (issue 19: the release
used a second planner signature and then planned again). Known answers below were recorded
from the two-planner code before the fold: the release's structure must not change."""

from __future__ import annotations

import importlib

import pytest

import fugu
from fugu.blowfish import Policy, oh_plan, ordered_hierarchical

OH = importlib.import_module("fugu.blowfish.ordered_hierarchical")

# (k, θ, ⊥) -> (fan-out, height, ε_S) with least squares on / off, ε = 1 (recorded before the fold)
KNOWN = {
    (64, 4, False): ((4, 1, 0.3500621581899868), (2, 0, 1.0)),
    (1000, 16, False): ((8, 1, 0.3964533285203737),) * 2,
    (1000, 16, True): ((23, 2, 0.18355493923433902),) * 2,
    (4096, 64, False): ((32, 1, 0.28572714263860916),) * 2,
    (300, 1, False): ((2, 0, 1.0),) * 2,
    (200, 8, True): ((10, 2, 0.23245395427292462),) * 2,
}


@pytest.mark.parametrize(("k", "theta", "bottom"), list(KNOWN))
def test_one_planner_same_structures(k: int, theta: int, bottom: bool) -> None:
    moves = 1.0
    for consistency, want in zip((True, False), KNOWN[(k, theta, bottom)], strict=True):
        p = oh_plan(k, theta, 1.0, bottom=bottom, moves=moves, consistency=consistency)
        assert (p.fanout, p.height) == want[:2]
        assert p.eps_s == pytest.approx(want[2], rel=1e-12)


@pytest.mark.parametrize("consistency", [True, False])
def test_release_uses_the_planner(consistency: bool) -> None:
    """The release's structure, split and part sensitivities are the planner's."""
    dom = fugu.Domain([fugu.Ordinal("x", 0, 63)])
    hist = fugu.Histogram.from_records({"x": [1, 5, 40, 41]}, dom)
    rel = ordered_hierarchical(
        hist,
        1.0,
        Policy.distance_threshold(dom, 4),
        consistency=consistency,
        rng=fugu.RandomSource(seed=0),
    )
    g = rel.guarantee.parameters
    p = oh_plan(64, 4, 1.0, consistency=consistency)
    assert (g["fanout"], g["height"]) == (p.fanout, p.height)
    assert (g["epsilon_s"], g["epsilon_h"]) == (p.eps_s, p.eps_h)
    assert (g["sensitivity_s"], g["sensitivity_h"]) == (p.sens_s, p.sens_h)


def test_no_second_planner() -> None:
    assert not hasattr(OH, "oh_candidates") and not hasattr(OH, "_choose")


def test_oh_plan_refuses_a_block_far_larger_than_the_domain() -> None:
    """fanout=2, height=10 on 6 values (blocks of 1024) left no plan: IndexError before (review 3);
    now a clear InvalidParameterError naming both settings."""
    with pytest.raises(fugu.errors.InvalidParameterError, match="height=10"):
        oh_plan(6, 1, 1.0, fanout=2, height=10)
