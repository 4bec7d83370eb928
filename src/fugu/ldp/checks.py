"""What every LDP method checks before it runs: the ε range, ``on_invalid``, the accountant.

The ε of a local-DP method must lie in :data:`EPSILON_RANGE`; an aggregator told what to do with
rejected reports takes ``"reject"`` or ``"raise"``; an accountant charged for a local-DP release
must track the ``"local-dp"`` model, and the charge is checked before any report is read.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..errors import InvalidParameterError, InvalidTypeError, check_epsilon

if TYPE_CHECKING:
    from ..budget import Accountant

__all__ = [
    "BUDGET_MODEL",
    "EPSILON_RANGE",
    "ON_INVALID",
    "RejectedReportsWarning",
    "check_ldp_epsilon",
]

ON_INVALID = ("reject", "raise")
BUDGET_MODEL = "local-dp"

#: The ε range every LDP method accepts. Below 1e-6 the float64 rounding of the randomisation
#: probabilities (relative 1e-16) is no longer negligible against ε, and e^ε − 1 loses its digits;
#: above 20 the probabilities of the unlikely reports fall below 2^-29 of the likely ones, where
#: the exact samplers' 2^-64 resolution and an OLH hash range above 2^28 stop being sound choices
#: (an ε that large in local DP means no privacy at all).
EPSILON_RANGE = (1e-6, 20.0)


class RejectedReportsWarning(UserWarning):
    """Some reports were rejected by the aggregator (count by reason in the message)."""


def check_ldp_epsilon(epsilon: object, method: str = "this LDP method") -> float:
    """``epsilon`` as a float after checking it lies in :data:`EPSILON_RANGE`.

    >>> check_ldp_epsilon(1.0)
    1.0
    >>> check_ldp_epsilon(1e-9, "OLH")
    Traceback (most recent call last):
    ...
    fugu.errors.InvalidParameterError: OLH needs 1e-06 <= epsilon <= 20, got epsilon=1e-09: ...
    """
    eps = check_epsilon(epsilon)
    lo, hi = EPSILON_RANGE
    if not lo <= eps <= hi:
        why = (
            "below 1e-06 the randomisation probabilities cannot be told apart in floating point "
            "(and the estimates would have a standard deviation of more than 10^6 per user)"
            if eps < lo
            else "above 20 the unlikely reports are rarer than 2^-29 and the exact samplers can "
            "no longer honour the ratio e^epsilon (and such an epsilon gives users no privacy)"
        )
        raise InvalidParameterError(
            f"{method} needs {lo:g} <= epsilon <= {hi:g}, got epsilon={eps!r}: {why}; typical "
            f"local-DP values are 0.5 to 4"
        )
    return eps


def _check_on_invalid(on_invalid: object) -> str:
    if on_invalid not in ON_INVALID:
        raise InvalidParameterError(
            f"on_invalid must be 'reject' (leave malformed reports out, warn and record how many) "
            f"or 'raise' (refuse the batch), got {on_invalid!r}"
        )
    return str(on_invalid)


def _charge_model(accountant: Accountant | None, epsilon: float, what: str) -> str:
    """The model to charge ``accountant`` with (``"local-dp"``), after checking that the
    accountant tracks local DP and that the spend fits (nothing is spent yet)."""
    if accountant is None:
        return BUDGET_MODEL
    from ..budget import Accountant as _Accountant
    from ..budget import same_model

    if not isinstance(accountant, _Accountant):
        raise InvalidTypeError(
            f"accountant must be a fugu.Accountant, got {type(accountant).__name__}"
        )
    model = accountant.budget.model
    if not same_model(model, BUDGET_MODEL):
        raise InvalidParameterError(
            f"this accountant tracks {model!r} budget; a local-DP release ({what}) cannot be "
            f"charged to it. Declare a separate one: fugu.Accountant(fugu.budget.Budget(total, "
            f"model={BUDGET_MODEL!r}))"
        )
    accountant.check(epsilon, f"{what} (local DP)")
    return BUDGET_MODEL
