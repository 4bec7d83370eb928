"""Privacy budget: sequential composition with a ledger.

An :class:`Accountant` holds a declared total ε and records every spend. Spending more than what
remains raises :class:`~fugu.errors.BudgetExceededError`, which says what remains. Pass
``accountant=`` to any mechanism to have it charge its ε before it touches the data.

Parallel composition (releases on disjoint parts of the data cost the maximum, not the sum) is
available through :meth:`Accountant.parallel`, which the caller must only use when the parts are
disjoint by a *public* rule (e.g. a partition of the domain); for Blowfish policies the condition
is checked by the policy module.

>>> import fugu
>>> acct = fugu.Accountant(1.0)
>>> acct.spend(0.4, "age histogram")
>>> acct.remaining
0.6
>>> try:
...     acct.spend(0.7, "too much")
... except fugu.BudgetExceededError as e:
...     print(str(e).split(";")[0])
cannot spend epsilon=0.7 on 'too much': only 0.6 of 1 remains
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from .errors import BudgetExceededError, InvalidParameterError, check_epsilon

__all__ = ["Budget", "Accountant", "LedgerEntry"]

_TOL = 1e-12


@dataclass(frozen=True)
class Budget:
    """A privacy budget: ε under a model (default central DP) and, for Blowfish, a policy name."""

    epsilon: float
    model: str = "central-dp"
    policy: str | None = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "epsilon", check_epsilon(self.epsilon))


@dataclass(frozen=True)
class LedgerEntry:
    epsilon: float
    what: str
    time: str
    parts: tuple[str, ...] = ()


@dataclass
class Accountant:
    """Sequential-composition accountant with a ledger.

    Parameters
    ----------
    total : float or Budget
        The declared total ε.
    """

    total: float | Budget
    ledger: list[LedgerEntry] = field(default_factory=list)

    def __post_init__(self) -> None:
        if not isinstance(self.total, Budget):
            self.total = Budget(check_epsilon(self.total, "total"))

    @property
    def budget(self) -> Budget:
        assert isinstance(self.total, Budget)
        return self.total

    @property
    def spent(self) -> float:
        return math.fsum(e.epsilon for e in self.ledger)

    @property
    def remaining(self) -> float:
        return max(0.0, round(self.budget.epsilon - self.spent, 12))

    def check(self, epsilon: float, what: str) -> None:
        """Raise if spending ``epsilon`` would exceed the total; spend nothing."""
        epsilon = check_epsilon(epsilon)
        if epsilon > self.remaining + _TOL:
            raise BudgetExceededError(
                f"cannot spend epsilon={epsilon:g} on {what!r}: only {self.remaining:g} of "
                f"{self.budget.epsilon:g} remains; spend less, or declare a larger total"
            )

    def spend(
        self, epsilon: float, what: str, *, model: str | None = None, policy: str | None = None
    ) -> None:
        """Record a spend (sequential composition)."""
        self._check_model(model, policy)
        self.check(epsilon, what)
        self.ledger.append(LedgerEntry(float(epsilon), what, _now()))

    def parallel(self, epsilons: Sequence[float], what: Sequence[str], *, disjoint_by: str) -> None:
        """Record releases on disjoint parts of the data: they cost ``max(epsilons)``.

        ``disjoint_by`` must name the public rule that makes the parts disjoint; it is written to
        the ledger.
        """
        if not disjoint_by:
            raise InvalidParameterError(
                "parallel composition needs the public rule that makes the parts disjoint"
            )
        if len(epsilons) != len(what) or not epsilons:
            raise InvalidParameterError("give one description per epsilon")
        eps = max(check_epsilon(e) for e in epsilons)
        label = f"parallel ({disjoint_by}): " + ", ".join(what)
        self.check(eps, label)
        self.ledger.append(LedgerEntry(eps, label, _now(), tuple(what)))

    def _check_model(self, model: str | None, policy: str | None) -> None:
        b = self.budget
        if model is not None and model != b.model:
            raise InvalidParameterError(
                f"this accountant tracks {b.model!r} budget; a {model!r} release cannot be charged "
                f"to it (compose across models only with a common guarantee)"
            )
        if policy is not None and b.policy is not None and policy != b.policy:
            raise InvalidParameterError(
                f"this accountant tracks the Blowfish policy {b.policy!r}; a release under policy "
                f"{policy!r} composes only under a common policy"
            )

    # ledger files ------------------------------------------------------------------------------
    def save(self, path: str | Path) -> None:
        data = {"budget": asdict(self.budget), "ledger": [asdict(e) for e in self.ledger]}
        Path(path).write_text(json.dumps(data, indent=2))

    @classmethod
    def load(cls, path: str | Path) -> Accountant:
        data = json.loads(Path(path).read_text())
        acct = cls(Budget(**data["budget"]))
        acct.ledger = [
            LedgerEntry(e["epsilon"], e["what"], e["time"], tuple(e.get("parts", ())))
            for e in data["ledger"]
        ]
        return acct

    def report(self) -> str:
        lines = [
            f"total epsilon {self.budget.epsilon:g} ({self.budget.model}), "
            f"spent {self.spent:g}, remaining {self.remaining:g}"
        ]
        lines += [f"  {e.time}  {e.epsilon:g}  {e.what}" for e in self.ledger]
        return "\n".join(lines)


def _now() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def charge(accountant: Accountant | None, epsilon: float, what: str, **kw: Any) -> None:
    """Charge ``accountant`` (if given) before a mechanism touches the data."""
    if accountant is not None:
        accountant.spend(epsilon, what, **kw)
