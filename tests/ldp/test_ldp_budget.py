"""One budget for every LDP release (issue 17 item 4, Python side): ``aggregate`` and ``simulate``
of every method take ``accountant=`` and charge ε once per release with model ``"local-dp"``;
a ledger of another model refuses before anything is read; a refused or failed release spends
nothing.

Deterministic (fixed seeds): false-failure rate 0.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

import fugu
from fugu import ldp
from fugu.budget import Accountant, Budget
from fugu.errors import BudgetExceededError, InvalidParameterError, ReportError

N = 300
DOM1 = fugu.Domain([fugu.Ordinal("v", 0, 7)])
DOM3 = fugu.datasets.synthetic_domain(3, 8)
DATA1 = {"v": np.arange(N) % 8}
DATA3 = fugu.datasets.correlated_gaussian(N, 3, 8, seed=1)

METHODS: dict[str, Any] = {
    "grr": lambda: ldp.GRR(DOM1, 0.5),
    "olh": lambda: ldp.OLH(DOM1, 0.5),
    "oue": lambda: ldp.OUE(DOM1, 0.5),
    "sw": lambda: ldp.SW(DOM1, 0.5),
    "uni": lambda: ldp.Uni(DOM3, 0.5),
    "hio": lambda: ldp.HIO(DOM3, 0.5, branching=2),
    "lhio": lambda: ldp.LHIO(DOM3, 0.5, branching=2),
    "calm": lambda: ldp.CALM(DOM3, 0.5),
    "msw": lambda: ldp.MSW(DOM3, 0.5),
    "tdg": lambda: ldp.TDG(DOM3, 0.5),
    "hdg": lambda: ldp.HDG(DOM3, 0.5),
}


def _data(proto: Any) -> dict[str, np.ndarray]:
    return DATA1 if proto.domain is DOM1 else DATA3


@pytest.mark.parametrize("method", sorted(METHODS))
def test_simulate_and_aggregate_charge_once_each(method: str) -> None:
    proto = METHODS[method]()
    acct = Accountant(Budget(2.0, model="local-dp"))
    rel = proto.simulate(_data(proto), rng=fugu.RandomSource(seed=1), accountant=acct)
    assert len(acct.ledger) == 1 and acct.spent == pytest.approx(0.5)
    assert proto.name in acct.ledger[0].what
    reports = proto.client(fugu.RandomSource(seed=2)).perturb(_data(proto))
    proto.aggregate(reports, accountant=acct)
    assert len(acct.ledger) == 2 and acct.spent == pytest.approx(1.0)
    assert rel.guarantee.model == "ldp"


def test_other_models_are_refused_before_any_work() -> None:
    proto = METHODS["hdg"]()
    central = Accountant(1.0)
    with pytest.raises(InvalidParameterError, match="'central-dp' budget"):
        proto.simulate(DATA3, accountant=central)
    with pytest.raises(InvalidParameterError, match="local-dp"):
        proto.aggregate("no-such-file.parquet", accountant=central)  # refused before reading
    assert central.ledger == []
    alias = Accountant(Budget(1.0, model="ldp"))  # the CLI's `ledger init --model ldp`
    proto.simulate(DATA3, rng=fugu.RandomSource(seed=1), accountant=alias)
    assert alias.spent == pytest.approx(0.5)


def test_overspending_and_failed_releases_spend_nothing() -> None:
    proto = METHODS["olh"]()
    acct = Accountant(Budget(0.7, model="local-dp"))
    proto.simulate(DATA1, rng=fugu.RandomSource(seed=1), accountant=acct)
    with pytest.raises(BudgetExceededError):
        proto.simulate(DATA1, rng=fugu.RandomSource(seed=1), accountant=acct)
    assert len(acct.ledger) == 1
    reports = proto.client(fugu.RandomSource(seed=3)).perturb(DATA1)
    bad = ldp.Reports("olh", 1, reports.params, dict(reports.columns), reports.n)
    bad.columns["y"] = bad.columns["y"].copy()
    bad.columns["y"][0] = 99  # out of range
    acct2 = Accountant(Budget(1.0, model="local-dp"))
    with pytest.raises(ReportError):
        proto.aggregate(bad, on_invalid="raise", accountant=acct2)
    assert acct2.ledger == []
    with pytest.raises(fugu.EmptyDataError):
        proto.aggregate(reports.take(np.zeros(reports.n, bool)), accountant=acct2)
    assert acct2.ledger == []


def test_aggregator_estimate_takes_an_accountant() -> None:
    proto = METHODS["grr"]()
    reports = proto.client(fugu.RandomSource(seed=3)).perturb(DATA1)
    acct = Accountant(Budget(1.0, model="local-dp"))
    proto.aggregator().add(reports).estimate(accountant=acct)
    assert acct.spent == pytest.approx(0.5)
    with pytest.raises(fugu.InvalidTypeError):
        proto.aggregate(reports, accountant=1.0)  # type: ignore[arg-type]
