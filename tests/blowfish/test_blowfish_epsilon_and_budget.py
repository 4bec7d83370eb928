"""ε range and budget of every Blowfish entry point (issue 14 item 11, issue 17 item 4).

* A tiny ε (1e-300 used to raise ZeroDivisionError in ordered_hierarchical's plan) is refused
  with a FuguError that names the working ε range, before anything is planned or spent; an ε
  just inside the range works.
* Every mechanism takes ``accountant=`` and charges it with model "blowfish" and the policy's
  identifier (``Policy.name``); an accountant declared for another policy refuses, spending
  nothing.
"""

from __future__ import annotations

import re
from collections.abc import Callable

import numpy as np
import pytest

import fugu
from fugu.blowfish import (
    KMeans,
    Policy,
    blowfish_budget,
    charge_parallel,
    laplace,
    ordered,
    ordered_hierarchical,
)
from fugu.errors import FuguError, InvalidParameterError

DOM = fugu.Domain([fugu.Ordinal("a", 0, 63)])
HIST = fugu.Histogram.from_records({"a": [0, 1, 2, 3, 5, 40, 41]}, DOM)
POL = Policy.distance_threshold(DOM, 4)
PTS = np.array([[1.0], [2.0], [40.0], [50.0], [51.0]])

Run = Callable[[float, object], object]

ENTRY_POINTS: dict[str, Run] = {
    "laplace-histogram": lambda e, acct: laplace(HIST, e, POL, accountant=acct),
    "laplace-cumulative": lambda e, acct: laplace(
        HIST, e, POL, query="cumulative", accountant=acct
    ),
    "laplace-sum (grid)": lambda e, acct: laplace(HIST, e, POL, query="sum", accountant=acct),
    "laplace-matrix (grid)": lambda e, acct: laplace(
        HIST, e, POL, query=np.linspace(0, 1, 64)[None], accountant=acct
    ),
    "ordered": lambda e, acct: ordered(HIST, e, POL, accountant=acct),
    "ordered_hierarchical": lambda e, acct: ordered_hierarchical(HIST, e, POL, accountant=acct),
    "ordered_hierarchical f=2 h=3": lambda e, acct: ordered_hierarchical(
        HIST, e, POL, fanout=2, height=3, accountant=acct
    ),
    "kmeans (policy)": lambda e, acct: KMeans(2, e, policy=POL, accountant=acct).fit(PTS),
    "kmeans (policy string)": lambda e, acct: KMeans(
        2, e, policy="distance:theta=4", domain=DOM, accountant=acct
    ).fit(PTS),
}


def _acct() -> fugu.Accountant:
    return fugu.Accountant(blowfish_budget(5.0, POL))


@pytest.mark.parametrize("name", sorted(ENTRY_POINTS))
@pytest.mark.parametrize("eps", [1e-300, 1e-17, 5e-324])
def test_tiny_epsilon_is_refused_before_spending(name: str, eps: float) -> None:
    acct = _acct()
    with pytest.raises(InvalidParameterError, match="epsilon"):
        ENTRY_POINTS[name](eps, acct)
    assert acct.spent == 0 and not acct.ledger


@pytest.mark.parametrize("name", sorted(ENTRY_POINTS))
def test_refusal_names_the_working_range_and_its_lower_end_works(name: str) -> None:
    """Between 2^-52 (the floor of every mechanism) and each mechanism's own limit the message
    gives the range; just inside it the mechanism runs."""
    acct = _acct()
    try:
        ENTRY_POINTS[name](1e-15, acct)
        return  # 1e-15 is inside this mechanism's range
    except InvalidParameterError as exc:
        m = re.search(r"must lie in \[([0-9.e+-]+), 1000\]", str(exc))
        assert m, str(exc)
        low = float(m.group(1))
    assert acct.spent == 0
    ENTRY_POINTS[name](low * 1.01, acct)  # the stated lower end (rounded up) is accepted
    assert acct.spent == pytest.approx(low * 1.01)


@pytest.mark.parametrize("name", sorted(ENTRY_POINTS))
def test_accountant_is_charged_with_blowfish_and_the_policy_name(name: str) -> None:
    acct = _acct()
    ENTRY_POINTS[name](0.5, acct)
    assert acct.spent == pytest.approx(0.5) and len(acct.ledger) == 1
    # an accountant for another policy refuses and spends nothing
    other = fugu.Accountant(blowfish_budget(5.0, Policy.line(DOM)))
    with pytest.raises(FuguError, match="policy"):
        ENTRY_POINTS[name](0.5, other)
    assert other.spent == 0
    # and so does a central-DP accountant
    dp = fugu.Accountant(5.0)
    with pytest.raises(FuguError):
        ENTRY_POINTS[name](0.5, dp)
    assert dp.spent == 0


def test_parallel_composition_charges_under_the_policy() -> None:
    pol = Policy.partition(DOM, {"a": 8})
    acct = fugu.Accountant(blowfish_budget(1.0, pol))
    charge_parallel(acct, pol, [0.5, 0.7], ["left", "right"], parts=pol.block_ids() // 4)
    assert acct.spent == pytest.approx(0.7)
    with pytest.raises(FuguError):
        charge_parallel(fugu.Accountant(blowfish_budget(1.0, POL)), pol, [0.5], ["x"], parts=None)


def test_kmeans_epsilon_dp_is_charged_as_central_dp() -> None:
    acct = fugu.Accountant(1.0)
    KMeans(2, 0.5, domain=DOM, accountant=acct).fit(PTS)
    assert acct.spent == pytest.approx(0.5)
