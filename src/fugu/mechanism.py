"""Steps every mechanism shares: checking ε, choosing the random source, charging the budget,
and writing the guarantee. Written once here so each mechanism module stays about its algorithm.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from .budget import NEIGHBOUR_RELATIONS, Accountant
from .errors import MAX_EPSILON, MIN_EPSILON, InvalidParameterError, check_epsilon
from .noise import MAX_SCALE, RandomSource, default_source
from .release import Guarantee

if TYPE_CHECKING:
    from .histogram import Histogram

# the relations a ledger records (budget.NEIGHBOUR_RELATIONS), with what each protects
NEIGHBOURS = dict(
    zip(
        NEIGHBOUR_RELATIONS,
        (
            "replace one record with another (bounded DP)",
            "add or remove one record (unbounded DP)",
        ),
        strict=True,
    )
)


def check_neighbours(neighbours: str) -> str:
    if neighbours not in NEIGHBOURS:
        raise InvalidParameterError(
            "neighbours must be 'replace' (bounded DP, the papers' default) or 'add-remove', "
            f"got {neighbours!r}"
        )
    return neighbours


def histogram_sensitivity(neighbours: str) -> int:
    """L1 sensitivity of a histogram: 2 for replace-one, 1 for add/remove-one."""
    return 2 if check_neighbours(neighbours) == "replace" else 1


def total_is_public(neighbours: str, hist: Histogram) -> bool:
    """Whether a histogram's total n may be used exactly (released without noise).

    Replace-one neighbours keep the number of records, so n is public under them, unless the
    histogram counts only some of them (:attr:`Histogram.counts_a_subset`): records dropped
    outside the domain (``out_of_domain="drop"``; replacing a record by an out-of-domain value
    removes it from the counts) or the rows an SQL query returned (replacing a record can move
    it in or out of the query's result). The counted total then differs between neighbours and
    is private. Add/remove neighbours never make n public.

    >>> import fugu
    >>> dom = fugu.Domain([fugu.Ordinal("age", 0, 3)])
    >>> kept = fugu.Histogram.from_records({"age": [0, 1, 3]}, dom)
    >>> dropped = fugu.Histogram.from_records({"age": [0, 1, 9]}, dom, out_of_domain="drop")
    >>> total_is_public("replace", kept), total_is_public("replace", dropped)
    (True, False)
    >>> total_is_public("add-remove", kept)
    False
    """
    return check_neighbours(neighbours) == "replace" and not hist.counts_a_subset


def epsilon_range(sensitivity: float = 1.0, splits: int = 1) -> tuple[float, float]:
    """The ε range a mechanism can compute with: ``(low, high)``.

    ``low`` is the smallest ε whose noise scale ``sensitivity * splits / ε`` stays within the
    samplers' limit :data:`fugu.noise.MAX_SCALE` (2**52), and never below
    :data:`fugu.errors.MIN_EPSILON`; ``high`` is :data:`fugu.errors.MAX_EPSILON` (1000).

    >>> epsilon_range(1.0)
    (2.220446049250313e-16, 1000.0)
    >>> lo, hi = epsilon_range(sensitivity=2.0, splits=8)
    >>> lo == 16 * 2.0**-52
    True
    """
    low = max(MIN_EPSILON, float(sensitivity) * int(splits) / MAX_SCALE)
    return low, MAX_EPSILON


def check_epsilon_range(
    epsilon: object,
    *,
    mechanism: str,
    sensitivity: float = 1.0,
    splits: int = 1,
    minimum: float | None = None,
    why: str = "",
    name: str = "epsilon",
) -> float:
    """Validate ε for one mechanism before any planning; return it as a float.

    The shared check every mechanism can call first. It refuses, with an
    :class:`~fugu.errors.InvalidParameterError` that names the working range:

    * anything :func:`fugu.errors.check_epsilon` refuses (not a number, NaN, inf, <= 0, > 1000,
      or below 2**-52);
    * an ε so small that the noise scale ``sensitivity * splits / ε`` would exceed the samplers'
      limit 2**52 (``splits``: how many parts the mechanism divides ε into, e.g. tree levels);
    * an ε below a mechanism-specific ``minimum`` (give the reason in ``why``, e.g. "OLH needs
      e^ε - 1 to be representable").

    Parameters
    ----------
    epsilon : object
        The user's ε.
    mechanism : str
        The mechanism's name, for the message.
    sensitivity : float
        The largest sensitivity one part's noise is calibrated to.
    splits : int
        Into how many equal parts ε is divided (sequential composition inside the mechanism).
    minimum : float, optional
        A mechanism-specific lower bound.
    why : str
        Why ``minimum`` applies.
    name : str
        The argument's name, for the message.

    Examples
    --------
    >>> check_epsilon_range(0.5, mechanism="laplace")
    0.5
    >>> try:
    ...     check_epsilon_range(1e-15, mechanism="hierarchical", sensitivity=1.0, splits=20)
    ... except InvalidParameterError as e:
    ...     print(str(e).split(":")[0])
    epsilon=1e-15 is too small for hierarchical
    """
    eps = check_epsilon(epsilon, name)
    low, high = epsilon_range(sensitivity, splits)
    if minimum is not None and minimum > low:
        low = float(minimum)
    if eps < low:
        reason = why or (
            f"its noise scale {float(sensitivity) * int(splits) / eps:.3g} "
            f"(sensitivity {sensitivity:g} x {int(splits)} part(s) / {name}) would exceed the "
            f"samplers' limit 2**52"
        )
        raise InvalidParameterError(
            f"{name}={eps!r} is too small for {mechanism}: {reason}; {mechanism} works with "
            f"{name} from {low:.3g} to {high:g} (typical values are 0.1 to 2)"
        )
    return eps


def start(
    epsilon: object,
    rng: RandomSource | None,
    accountant: Accountant | None,
    what: str,
    *,
    model: str = "central-dp",
    policy: str | None = None,
    sensitivity: float = 1.0,
    splits: int = 1,
    delta: float = 0.0,
    neighbours: str | None = None,
) -> tuple[float, RandomSource]:
    """Validate ε, resolve the random source and charge the accountant (before touching data).

    ε is checked by :func:`check_epsilon_range` with ``sensitivity`` and ``splits`` (how many
    parts the mechanism divides ε into), so a too-small ε is refused, naming the working range,
    before anything is planned or spent. ``delta`` > 0 marks an (ε, δ) mechanism: the accountant
    must have a δ total to spend it from. ``neighbours`` (central DP: ``"replace"`` or
    ``"add-remove"``) is recorded with the spend; a budget spent under the other relation
    refuses it (the two ε do not add up to a guarantee under either).
    """
    eps = check_epsilon_range(epsilon, mechanism=what, sensitivity=sensitivity, splits=splits)
    if neighbours is not None:
        check_neighbours(neighbours)
    source = default_source(rng)
    if accountant is not None:
        accountant.spend(eps, what, model=model, policy=policy, delta=delta, neighbours=neighbours)
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
    delta: float = 0.0,
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
        delta=delta,
    )
