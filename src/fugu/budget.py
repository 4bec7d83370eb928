"""Privacy budget: sequential composition with a ledger.

An :class:`Accountant` holds a declared total ε and records every spend. Spending more than what
remains raises :class:`~fugu.errors.BudgetExceededError`, which says what remains. Pass
``accountant=`` to any mechanism to have it charge its ε before it touches the data.

Parallel composition (releases on disjoint parts of the data cost the maximum, not the sum) is
available through :meth:`Accountant.parallel`, which the caller must only use when the parts are
disjoint by a *public* rule that one neighbour change cannot cross; for Blowfish policies the
condition is checked by the policy module. Under central DP's default replace-one neighbours a
partition of the *domain* (age < 50 / age >= 50, regions) does not qualify: replacing one record
can move it from one part to another, so both releases change, and a part released under
replace-one treats its own count as public (hierarchical and the hat tree publish it exactly),
which then tells the neighbours apart with certainty. Partition the domain only with releases made
under ``neighbours="add-remove"`` (recorded as such); under replace-one, only sets of individuals
fixed in advance (not by their values) are disjoint parts.

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

Ledger files
------------
A ledger file (``fugu ledger init PATH --total EPS``) shares one budget between processes. Open
it with :func:`ledger_file`: it holds an exclusive OS lock on ``PATH.lock`` for the whole
read-check-spend-write, validates every field, and writes the file back atomically, so two
concurrent releases never overspend and every successful spend is recorded.

>>> import os, tempfile
>>> path = os.path.join(tempfile.mkdtemp(), "ledger.json")
>>> fugu.budget.create_ledger(path, 1.0)
Accountant(total=1, model='central-dp', spent=0, remaining=1, entries=0)
>>> with fugu.budget.ledger_file(path, model="central-dp") as acct:
...     acct.spend(0.25, "first release")
>>> fugu.Accountant.load(path).remaining
0.75
"""

from __future__ import annotations

import json
import math
import os
import re
import threading
from collections import Counter
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field, replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

from ._files import atomic_write
from .errors import (
    BudgetExceededError,
    FuguError,
    InvalidParameterError,
    LedgerError,
    check_epsilon,
    short_repr,
)

__all__ = [
    "Budget",
    "Accountant",
    "LedgerEntry",
    "ledger_file",
    "create_ledger",
    "MODELS",
    "LEDGER_FORMAT",
    "NamedPolicy",
    "is_policy_identifier",
    "fit_epsilon_parts",
]

_TOL = 1e-12

#: Privacy models a budget (and a ledger file) can track; the same names as ``Guarantee.model``.
MODELS = ("central-dp", "blowfish", "node-dp", "edge-dp", "participant-dp", "ldp", "local-dp")

#: Other names of one model: ``fugu.ldp`` charges "local-dp", the CLI and releases say "ldp".
_ALIASES = {"local-dp": "ldp"}


def same_model(a: str, b: str) -> bool:
    """Whether two model names denote the same privacy model (``"ldp"`` = ``"local-dp"``)."""
    return _ALIASES.get(a, a) == _ALIASES.get(b, b)


#: The form of ``fugu.blowfish.Policy.identifier``: ``"<kind and parameters> [domain <16 hex>,
#: graph <16 hex>]"``. A budget tie in another form (a bare CLI spec such as ``"line"``, or
#: ``"line [0123456789]"`` as fugu named policies before) is bound to an identifier only by a
#: policy object that recognises it (:meth:`Accountant.bind_policy`).
_POLICY_IDENTIFIER = re.compile(r" \[domain [0-9a-f]{16}, graph [0-9a-f]{16}\]$")


def is_policy_identifier(text: object) -> bool:
    """Whether ``text`` has the form of ``fugu.blowfish.Policy.identifier``.

    >>> is_policy_identifier("line [domain 6b717dab30a40bea, graph 434534af5ccff8ab]")
    True
    >>> is_policy_identifier("line"), is_policy_identifier("line [db3be6c3b6]")
    (False, False)
    """
    return isinstance(text, str) and bool(_POLICY_IDENTIFIER.search(text))


@runtime_checkable
class NamedPolicy(Protocol):
    """What the budget needs of a policy object (``fugu.blowfish.Policy`` is one): its canonical
    ``identifier``, and ``names(text)``: whether an older name or a CLI spec names it."""

    @property
    def identifier(self) -> str: ...

    def names(self, text: str) -> bool: ...


def _policy_text(policy: Any, what: str = "policy") -> str | None:
    """A policy argument as the text a budget records: a string as it is, a policy object as
    its identifier."""
    if policy is None or isinstance(policy, str):
        return policy
    ident = getattr(policy, "identifier", None)
    if isinstance(ident, str):
        return ident
    raise InvalidParameterError(
        f"{what} must be a policy identifier (a string), a fugu.blowfish.Policy or None, got "
        f"{policy!r}"
    )


def _older_form_fix(tie: str, policy: str, where: str) -> str:
    return (
        f"{where} names its Blowfish policy {tie!r} in an older form (a policy spec without its "
        f"domain, or a name written by fugu before policy identifiers); a release under "
        f"{policy!r} cannot be checked against it by name. Open it once with the policy object "
        f"- fugu.budget.ledger_file(path, model='blowfish', policy=<fugu.blowfish.Policy>), or "
        f"any fugu command with --policy SPEC and --ledger - which checks that {tie!r} names "
        f"that policy and records its identifier"
    )


#: ``format`` field written in every ledger file (files without it, from older fugu, still load).
LEDGER_FORMAT = "fugu-ledger"
LEDGER_VERSION = 1


@dataclass(frozen=True)
class Budget:
    """A privacy budget: ε under a model (default central DP) and, for Blowfish, the policy
    every release must be made under (a ``fugu.blowfish.Policy``, recorded as its
    ``identifier``, or that identifier).

    ``delta`` is the total δ that (ε, δ) releases may add up to (sequential composition sums the
    δs too); 0, the default, admits only pure ε-DP releases.
    """

    epsilon: float
    model: str = "central-dp"
    policy: str | None = None
    delta: float = 0.0

    def __post_init__(self) -> None:
        object.__setattr__(self, "epsilon", check_epsilon(self.epsilon))
        if not isinstance(self.model, str) or self.model not in MODELS:
            raise InvalidParameterError(f"model must be one of {list(MODELS)}, got {self.model!r}")
        # a fugu.blowfish.Policy is recorded by its identifier
        object.__setattr__(self, "policy", _policy_text(self.policy))
        object.__setattr__(self, "delta", _check_delta(self.delta, "delta", InvalidParameterError))


@dataclass(frozen=True)
class LedgerEntry:
    """One recorded spend: its ε, what it paid for, when (UTC), the parts of a parallel spend,
    for Blowfish the policy it was spent under, and for central DP its neighbour relation
    (``"replace"`` or ``"add-remove"``; None in ledgers written before fugu recorded it)."""

    epsilon: float
    what: str
    time: str
    parts: tuple[str, ...] = ()
    policy: str | None = None
    delta: float = 0.0
    neighbours: str | None = None

    def __post_init__(self) -> None:
        # a NaN spend made every later budget check false (unlimited spending); a negative one
        # gave budget back
        eps = _check_number(self.epsilon, "a ledger entry's epsilon", InvalidParameterError)
        object.__setattr__(self, "epsilon", eps)
        object.__setattr__(
            self, "delta", _check_delta(self.delta, "a ledger entry's delta", InvalidParameterError)
        )


@dataclass
class Accountant:
    """Sequential-composition accountant with a ledger.

    Parameters
    ----------
    total : float or Budget
        The declared total ε.

    Examples
    --------
    >>> acct = Accountant(Budget(2.0, model="ldp"))
    >>> acct.spend(0.5, "OLH frequencies", model="ldp")
    >>> acct
    Accountant(total=2, model='ldp', spent=0.5, remaining=1.5, entries=1)
    """

    total: float | Budget
    ledger: list[LedgerEntry] = field(default_factory=list)
    _lock: Any = field(default_factory=threading.RLock, init=False, repr=False, compare=False)
    #: set by :func:`ledger_file` when its block ends: later spends would never reach the file
    _closed: str | None = field(default=None, init=False, repr=False, compare=False)
    #: set by :func:`ledger_file` for its block: writes the ledger file after every spend, so a
    #: spend is on disk before the mechanism that made it touches the data
    _persist: Any = field(default=None, init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        if not isinstance(self.total, Budget):
            self.total = Budget(check_epsilon(self.total, "total"))
        if not isinstance(self.ledger, list) or not all(
            isinstance(e, LedgerEntry) for e in self.ledger
        ):
            raise InvalidParameterError("ledger must be a list of fugu.budget.LedgerEntry")
        if self.ledger:
            self.ledger = list(self.ledger)  # the caller's list is not the budget's
            if self.spent > self.budget.epsilon * (1 + _TOL) or (
                self.spent_delta > self.budget.delta * (1 + _TOL)
            ):
                raise BudgetExceededError(
                    f"the ledger given spends epsilon {self.spent:g}, delta "
                    f"{self.spent_delta:g}: more than the total (epsilon "
                    f"{self.budget.epsilon:g}, delta {self.budget.delta:g}); declare a total "
                    "that covers every spend already made"
                )

    # check-then-record is one step under a lock, so threads sharing an accountant never
    # overspend (measured without it: 8 threads x 400 spends of 0.001 against 1.0 recorded 1002)
    def __getstate__(self) -> dict[str, Any]:
        state = dict(self.__dict__)
        state.pop("_lock", None)
        persist = state.pop("_persist", None)  # a copy elsewhere holds no lock on the file
        if persist is not None:  # so it must not spend: its spends would reach no file
            state["_closed"] = persist.path
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        self._lock = threading.RLock()
        self._persist = None

    def __repr__(self) -> str:
        b = self.budget
        pol = f", policy={b.policy!r}" if b.policy is not None else ""
        pol += f", delta={b.delta:g}, spent_delta={self.spent_delta:g}" if b.delta else ""
        return (
            f"Accountant(total={b.epsilon:g}, model={b.model!r}{pol}, spent={self.spent:g}, "
            f"remaining={self.remaining:g}, entries={len(self.ledger)})"
        )

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
        """Raise if spending ``epsilon`` would exceed the total; spend nothing.

        The sum of every spend, this one included, is compared with the total (exact sum, with
        a relative slack of 1e-12 for decimal fractions such as 0.1 + 0.2 + 0.7): a slack per
        spend would let any number of tiny spends through once the budget is used up.
        """
        epsilon = check_epsilon(epsilon)
        if math.fsum([*(e.epsilon for e in self.ledger), epsilon]) > self.budget.epsilon * (
            1 + _TOL
        ):
            raise BudgetExceededError(
                f"cannot spend epsilon={epsilon:g} on {what!r}: only {self.remaining:g} of "
                f"{self.budget.epsilon:g} remains; spend less, or declare a larger total"
            )

    @property
    def spent_delta(self) -> float:
        """The δ spent so far by (ε, δ) releases (they add up, like ε)."""
        return math.fsum(e.delta for e in self.ledger)

    def spend(
        self,
        epsilon: float,
        what: str,
        *,
        model: str | None = None,
        policy: str | None = None,
        delta: float = 0.0,
        neighbours: str | None = None,
    ) -> None:
        """Record a spend (sequential composition of ε and, for (ε, δ) releases, of δ).

        ``policy``: the Blowfish policy of the release (a ``fugu.blowfish.Policy`` or its
        identifier); a budget tied to another policy refuses it. ``neighbours``: the release's
        neighbour relation (central DP); a budget already spent under the other one refuses it.
        """
        policy = _policy_text(policy)
        self._check_model(model, policy)
        delta = _check_delta(delta, "delta", InvalidParameterError)
        neighbours = _check_neighbours_text(neighbours)
        with self._lock:
            self._check_open()
            self._check_names_policy(policy)
            self._check_common_policy(policy)
            self._check_common_neighbours(neighbours)
            self.check(epsilon, what)
            if delta and self.spent_delta + delta > self.budget.delta * (1 + 1e-12):
                raise BudgetExceededError(
                    f"cannot spend delta={delta:g} on {what!r}: this budget allows delta "
                    f"{self.budget.delta:g} in total and {self.spent_delta:g} is spent; an "
                    "(ε, δ) release needs a budget with a δ total (Budget(..., delta=...), "
                    "'fugu ledger init --delta')"
                )
            self._record(
                LedgerEntry(
                    float(epsilon),
                    str(what),
                    _now(),
                    policy=policy,
                    delta=delta,
                    neighbours=neighbours,
                )
            )

    def parallel(
        self,
        epsilons: Sequence[float],
        what: Sequence[str],
        *,
        disjoint_by: str,
        model: str | None = None,
        policy: str | None = None,
        neighbours: str | None = None,
        individuals: bool = False,
    ) -> None:
        """Record releases on disjoint parts of the data: they cost ``max(epsilons)``.

        ``disjoint_by`` must name the public rule that makes the parts disjoint; it is written to
        the ledger. The rule must keep every neighbour change inside one part. For central DP
        the releases' neighbour relation is required: under ``neighbours="add-remove"`` a
        partition of the domain (or of individuals) qualifies; under ``"replace"`` a replaced
        record may cross from one part to another (each part's release may publish its exact
        count), so only a partition of *individuals* fixed in advance, not by their records'
        values, qualifies: say so with ``individuals=True``. Nothing here can check the rule:
        when in doubt, :meth:`spend` each part.

        >>> acct = Accountant(1.0)
        >>> acct.parallel([0.5, 0.7], ["north", "south"], disjoint_by="region (domain partition)",
        ...               neighbours="add-remove")
        >>> acct.spent
        0.7
        """
        if not disjoint_by:
            raise InvalidParameterError(
                "parallel composition needs the public rule that makes the parts disjoint"
            )
        if len(epsilons) != len(what) or not epsilons:
            raise InvalidParameterError("give one description per epsilon")
        eps = max(check_epsilon(e) for e in epsilons)
        label = f"parallel ({disjoint_by}): " + ", ".join(what)
        policy = _policy_text(policy)
        self._check_model(model, policy)
        neighbours = _check_neighbours_text(neighbours)
        if same_model(model or self.budget.model, "central-dp"):
            _check_central_parallel(neighbours, individuals)
        with self._lock:
            self._check_open()
            self._check_names_policy(policy)
            self._check_common_policy(policy)
            self._check_common_neighbours(neighbours)
            self.check(eps, label)
            self._record(
                LedgerEntry(
                    eps,
                    label,
                    _now(),
                    tuple(str(w) for w in what),
                    policy=policy,
                    neighbours=neighbours,
                )
            )

    def _record(self, entry: LedgerEntry) -> None:
        """Append a checked spend; in a :func:`ledger_file` block, write the file at once.

        The spend reaches the disk before the caller (a mechanism) goes on to the data: a process
        killed later in the block (SIGKILL, out of memory, power loss) keeps it. If the write
        fails, the spend is taken back and the error raised, so nothing is released unrecorded.
        """
        self.ledger.append(entry)
        if self._persist is not None:
            try:
                self._persist()
            except BaseException:
                self.ledger.pop()
                raise

    def _check_open(self) -> None:
        if self._closed is not None:
            raise LedgerError(
                f"this accountant was yielded by ledger_file for {self._closed!r}, and its block "
                "has ended or this is a copy in another process (pickled to a worker): a spend "
                "now would never reach the file (and another process could spend the same "
                "epsilon); open the ledger where you spend, with "
                "'with fugu.budget.ledger_file(path) as acct:', and spend inside the block"
            )

    def _check_common_neighbours(self, neighbours: str | None) -> None:
        """Central-DP spends compose sequentially only under one neighbour relation.

        An ε add/remove release is only 2ε-DP under replace-one, and a replace-one release (which
        may use the exact n) has no add/remove guarantee at all, so summing the two ε would state
        a guarantee neither relation gives. The first recorded relation ties the budget.
        """
        used = {e.neighbours for e in self.ledger if e.neighbours is not None}
        if neighbours is None:
            if used and same_model(self.budget.model, "central-dp"):
                # a spend of no stated relation may be an add/remove epsilon (2x under replace)
                raise InvalidParameterError(
                    f"this budget has been spent on releases with neighbours="
                    f"{sorted(used)[0]!r}; a spend must state its neighbour relation "
                    f"(neighbours={sorted(used)[0]!r}) to be summed with them"
                )
            return
        if used and neighbours not in used:
            raise InvalidParameterError(
                f"this budget has been spent on releases with neighbours={sorted(used)[0]!r}; a "
                f"release with neighbours={neighbours!r} does not compose with them (an "
                "add/remove epsilon is twice that under replace-one, and replace-one gives no "
                "add/remove guarantee): make every release with one neighbour relation, or keep "
                "one ledger per relation"
            )

    def _check_model(self, model: str | None, policy: str | None) -> None:
        b = self.budget
        if model is not None and not same_model(model, b.model):
            raise InvalidParameterError(
                f"this accountant tracks {b.model!r} budget; a {model!r} release cannot be charged "
                f"to it (compose across models only with a common guarantee)"
            )
        if policy is not None and b.policy is not None and policy != b.policy:
            if is_policy_identifier(policy) and not is_policy_identifier(b.policy):
                raise LedgerError(_older_form_fix(b.policy, policy, "this budget"))
            raise InvalidParameterError(
                f"this accountant tracks the Blowfish policy {b.policy!r}; a release under policy "
                f"{policy!r} composes only under a common policy"
            )

    def _check_names_policy(self, policy: str | None) -> None:
        """A spend on a Blowfish budget tied to a policy must name its release's policy: one
        under no named policy would be summed with the releases under the tied one."""
        b = self.budget
        if policy is not None or not same_model(b.model, "blowfish"):
            return
        tied = b.policy or next((e.policy for e in self.ledger if e.policy is not None), None)
        if tied is not None:
            raise InvalidParameterError(
                f"this Blowfish budget is tied to the policy {tied!r}; a spend must name the "
                "policy of its release (policy=<fugu.blowfish.Policy> or its identifier): "
                "releases compose only under a common policy"
            )

    def _check_common_policy(self, policy: str | None) -> None:
        """Blowfish spends compose sequentially only under one policy (Blowfish paper, §5).

        A ledger tied to a policy is checked by :meth:`_check_model`; one that is not takes the
        policy of its first release and refuses a release under another (the sum of the two ε
        would be stated for no policy that both protect).
        """
        if policy is None or self.budget.policy is not None:
            return
        used = {e.policy for e in self.ledger if e.policy is not None}
        if used and policy not in used:
            older = sorted(u for u in used if not is_policy_identifier(u))
            if older and is_policy_identifier(policy):
                raise LedgerError(_older_form_fix(older[0], policy, "this budget"))
            raise InvalidParameterError(
                f"this Blowfish budget has been spent under the policy {sorted(used)[0]!r}; a "
                f"release under {policy!r} does not compose with it (sequential composition "
                "holds under one policy): keep one ledger per policy"
            )

    def bind_policy(self, policy: NamedPolicy) -> list[str]:
        """Record ``policy`` by its identifier wherever this budget names it in an older form.

        The budget's policy and each entry's are rewritten when ``policy.names(old)`` says the
        old text names this very policy (its name before identifiers, or a CLI spec that gives
        it on its domain); any other text is left alone, so a release under ``policy`` is still
        refused by a budget tied to another one. Returns the old texts rebound.
        """
        ident = _policy_text(policy)
        assert ident is not None
        if not is_policy_identifier(ident):
            raise InvalidParameterError(f"{ident!r} is not a policy identifier")

        def rebinds(old: str | None) -> bool:
            return old is not None and old != ident and bool(policy.names(old))

        with self._lock:
            old_texts = sorted({str(e.policy) for e in self.ledger if rebinds(e.policy)})
            if rebinds(self.budget.policy):
                old_texts = sorted({*old_texts, str(self.budget.policy)})
                self.total = Budget(
                    self.budget.epsilon, self.budget.model, ident, self.budget.delta
                )
            self.ledger = [
                replace(e, policy=ident)  # every other field (delta, neighbours) kept
                if rebinds(e.policy)
                else e
                for e in self.ledger
            ]
        return old_texts

    # ledger files ------------------------------------------------------------------------------
    def to_dict(self) -> dict[str, Any]:
        """The ledger file's JSON content."""
        return {
            "format": LEDGER_FORMAT,
            "version": LEDGER_VERSION,
            "budget": asdict(self.budget),
            "ledger": [_entry_dict(e) for e in self.ledger],
        }

    def save(self, path: str | Path) -> None:
        """Write the ledger file atomically (temporary file in the same folder, fsync, rename).

        A reader never sees a half-written file. ``save`` alone does not lock: to share a ledger
        between processes use :func:`ledger_file`, which locks around read-check-spend-write.
        It refuses to write over a ledger file that records a spend this accountant does not
        hold (a fresh accountant saved over a spent ledger would forget its spends), or with a
        larger total ε or δ, another model or another policy than the file declares (the total
        would be raised without notice): create ledgers with :func:`create_ledger`, which never
        overwrites.
        """
        # through a symlink: replace the file it points to, not the link
        real = Path(os.path.realpath(path))
        _refuse_hard_links(real)
        _refuse_forgetting(real, self.ledger, self.budget)
        _atomic_write(real, json.dumps(self.to_dict(), indent=2) + "\n")

    @classmethod
    def load(cls, path: str | Path) -> Accountant:
        """Read and validate a ledger file; a missing or corrupt file raises :class:`LedgerError`.

        Every field is checked: the total and each entry's ε are finite numbers > 0, texts are
        strings, the model is known, and the entries do not spend more than the total.
        """
        p = Path(path)
        _require_ledger_file(p)
        try:
            text = p.read_bytes().decode("utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            raise LedgerError(f"cannot read ledger {str(p)!r}: {exc}") from None
        try:
            data = json.loads(
                text, parse_constant=_reject_constant, object_pairs_hook=_reject_duplicates
            )
        except (json.JSONDecodeError, ValueError, RecursionError) as exc:
            raise LedgerError(f"ledger {str(p)!r} is not valid JSON: {exc}") from None
        return cls.from_dict(data, source=str(p))

    @classmethod
    def from_dict(cls, data: Any, *, source: str = "<dict>") -> Accountant:
        """Build an accountant from a ledger file's content, validating every field."""

        def bad(problem: str) -> LedgerError:
            return LedgerError(
                f"ledger {source!r} is corrupt: {problem}; restore it from a backup or recreate "
                f"it with 'fugu ledger init' (the spends it recorded still count)"
            )

        if not isinstance(data, Mapping):
            raise bad(f"expected a JSON object, got {type(data).__name__}")
        extra = set(data) - {"format", "version", "budget", "ledger"}
        if extra:
            raise bad(f"unknown top-level fields {sorted(extra)}")
        if "format" in data and data["format"] != LEDGER_FORMAT:
            raise bad(f"format is {data['format']!r}, expected {LEDGER_FORMAT!r}")
        if "version" in data:
            v = data["version"]
            if isinstance(v, bool) or not isinstance(v, int) or v < 1:
                raise bad(f"version must be a positive integer, got {v!r}")
            if v > LEDGER_VERSION:
                raise LedgerError(
                    f"ledger {source!r} was written by a newer fugu (ledger format {v}); "
                    "upgrade fugu"
                )
        if "budget" not in data or "ledger" not in data:
            raise bad("it needs the fields 'budget' and 'ledger'")
        b = data["budget"]
        if not isinstance(b, Mapping):
            raise bad(f"'budget' must be an object, got {type(b).__name__}")
        if set(b) - {"epsilon", "model", "policy", "delta"} or "epsilon" not in b:
            raise bad(
                f"'budget' must have 'epsilon' (and optionally 'model', 'policy', 'delta'), got {b}"
            )
        total = _check_number(b["epsilon"], "budget epsilon (the total)", bad)
        model = b.get("model", "central-dp")
        if not isinstance(model, str) or model not in MODELS:
            raise bad(f"budget model must be one of {list(MODELS)}, got {model!r}")
        policy = b.get("policy")
        if policy is not None and not isinstance(policy, str):
            raise bad(f"budget policy must be a string or null, got {policy!r}")
        entries = data["ledger"]
        if not isinstance(entries, list):
            raise bad(f"'ledger' must be a list of entries, got {type(entries).__name__}")
        ledger = []
        for i, e in enumerate(entries):
            if not isinstance(e, Mapping):
                raise bad(f"entry {i} must be an object, got {type(e).__name__}")
            missing = {"epsilon", "what", "time"} - set(e)
            unknown = set(e) - {"epsilon", "what", "time", "parts", "policy", "delta", "neighbours"}
            if missing or unknown:
                raise bad(
                    f"entry {i} needs fields epsilon, what, time (optional parts, policy); "
                    f"missing {sorted(missing)}, unknown {sorted(unknown)}"
                )
            eps = _check_number(e["epsilon"], f"entry {i} epsilon", bad)
            for k in ("what", "time"):
                if not isinstance(e[k], str):
                    raise bad(f"entry {i} {k!r} must be a string, got {e[k]!r}")
            parts = e.get("parts", [])
            if not isinstance(parts, list) or not all(isinstance(x, str) for x in parts):
                raise bad(f"entry {i} 'parts' must be a list of strings, got {parts!r}")
            entry_policy = e.get("policy")
            if entry_policy is not None and not isinstance(entry_policy, str):
                raise bad(f"entry {i} 'policy' must be a string or null, got {entry_policy!r}")
            entry_delta = _check_delta(e.get("delta", 0.0), f"entry {i} delta", bad)
            entry_nb = e.get("neighbours")
            if entry_nb is not None and entry_nb not in NEIGHBOUR_RELATIONS:
                raise bad(
                    f"entry {i} 'neighbours' must be one of {list(NEIGHBOUR_RELATIONS)} or null, "
                    f"got {entry_nb!r}"
                )
            ledger.append(
                LedgerEntry(
                    eps, e["what"], e["time"], tuple(parts), entry_policy, entry_delta, entry_nb
                )
            )
        _check_entries_compose(ledger, policy, bad)
        total_delta = _check_delta(b.get("delta", 0.0), "budget delta", bad)
        acct = cls(Budget(total, model=model, policy=policy, delta=total_delta))
        acct.ledger = ledger
        # the slack spend() allows (relative, 1e-12); an absolute 1e-9 let a small total be
        # exceeded by a large fraction of itself
        if acct.spent > total * (1 + _TOL):
            raise bad(
                f"its entries spend {acct.spent:g}, more than its total {total:g} "
                "(it was edited by hand or written without a lock)"
            )
        if acct.spent_delta > total_delta * (1 + 1e-12):
            raise bad(
                f"its entries spend delta {acct.spent_delta:g}, more than its delta total "
                f"{total_delta:g} (it was edited by hand or written without a lock)"
            )
        return acct

    def report(self) -> str:
        lines = [
            f"total epsilon {self.budget.epsilon:g} ({self.budget.model}), "
            f"spent {self.spent:g}, remaining {self.remaining:g}"
            + (
                f"; total delta {self.budget.delta:g}, spent {self.spent_delta:g}"
                if self.budget.delta
                else ""
            )
        ]
        if self.budget.policy is not None:
            bound = is_policy_identifier(self.budget.policy)
            lines.append(
                f"policy {self.budget.policy}"
                + ("" if bound else " (bound to its domain by the first release under it)")
            )
        lines += [
            f"  {e.time}  {e.epsilon:g}{f' (delta {e.delta:g})' if e.delta else ''}  {e.what}"
            for e in self.ledger
        ]
        return "\n".join(lines)


def _entry_dict(e: LedgerEntry) -> dict[str, Any]:
    """One entry as the ledger file writes it (policy, neighbours and delta only when set).

    Written field by field: ``dataclasses.asdict`` made a spend in a ledger block of 5,000
    entries take ~0.1 s, now that every spend is written at once."""
    d: dict[str, Any] = {"epsilon": e.epsilon, "what": e.what, "time": e.time}
    d["parts"] = list(e.parts)
    if e.policy is not None:
        d["policy"] = e.policy
    if e.delta:
        d["delta"] = e.delta
    if e.neighbours is not None:
        d["neighbours"] = e.neighbours
    return d


#: The central-DP neighbour relations a ledger entry may record (see ``fugu.mechanism``).
NEIGHBOUR_RELATIONS = ("replace", "add-remove")


def _check_entries_compose(
    ledger: Sequence[LedgerEntry], policy: str | None, bad: Callable[[str], LedgerError]
) -> None:
    """Raise ``bad`` if a ledger file's entries could not have been recorded together: spends
    under both neighbour relations, or under two policy identifiers (or one other than the
    budget's), which :meth:`Accountant.spend` refuses to sum. Policies named in an older form
    are left to :meth:`Accountant.bind_policy`."""
    relations = sorted({e.neighbours for e in ledger if e.neighbours is not None})
    if len(relations) > 1:
        raise bad(
            f"its entries were spent under both neighbour relations {relations}, whose epsilons "
            "do not add up to a guarantee under either"
        )
    idents = {e.policy for e in ledger if is_policy_identifier(e.policy)}
    if is_policy_identifier(policy):
        idents.add(policy)
    if len(idents) > 1:
        raise bad(
            f"its entries and budget name {len(idents)} Blowfish policies "
            f"({', '.join(sorted(str(i) for i in idents))}); releases compose only under one"
        )


def _check_central_parallel(neighbours: str | None, individuals: object) -> None:
    """Central-DP parallel composition holds for a domain partition only under add/remove."""
    if not isinstance(individuals, bool):
        raise InvalidParameterError(f"individuals must be True or False, got {individuals!r}")
    if neighbours is None:
        raise InvalidParameterError(
            "central-DP parallel composition needs the releases' neighbour relation: pass "
            "neighbours='add-remove' (a partition of the domain or of individuals qualifies) or "
            "neighbours='replace' with individuals=True (only a partition of individuals fixed in "
            "advance qualifies: a replaced record can move between domain parts)"
        )
    if neighbours == "replace" and not individuals:
        raise InvalidParameterError(
            "under replace-one neighbours a partition of the domain is not disjoint: a replaced "
            "record can move from one part to another and change both releases (each may publish "
            "its part's exact count), so they cost the sum of their epsilons; spend each part, "
            "release under neighbours='add-remove', or pass individuals=True if the parts are "
            "fixed sets of individuals (not chosen by their records' values)"
        )


def _check_neighbours_text(neighbours: object) -> str | None:
    if neighbours is None or neighbours in NEIGHBOUR_RELATIONS:
        return neighbours  # type: ignore[return-value]
    raise InvalidParameterError(
        f"neighbours must be one of {list(NEIGHBOUR_RELATIONS)} or None, got {neighbours!r}"
    )


def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not a number a ledger may hold")


def _reject_duplicates(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    """A JSON object; a key given twice (JSON keeps the last silently) is refused."""
    out: dict[str, Any] = {}
    for k, v in pairs:
        if k in out:
            raise ValueError(f"the key {k!r} appears twice in one object")
        out[k] = v
    return out


def _check_delta(value: Any, name: str, bad: Any) -> float:
    """δ of an (ε, δ) guarantee: a number in [0, 1) (0: pure ε-DP)."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise bad(f"{name} must be a number in [0, 1), got {short_repr(value)}")
    v = _as_float(value)
    if not (math.isfinite(v) and 0 <= v < 1):
        raise bad(f"{name} must be a number in [0, 1) (0 for pure ε-DP), got {short_repr(value)}")
    return v


def _as_float(value: int | float) -> float:
    """``float(value)``; an integer beyond float's range (a ledger's JSON may hold one) is inf."""
    try:
        return float(value)
    except OverflowError:
        return math.inf if value > 0 else -math.inf


def _check_number(value: Any, name: str, bad: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise bad(f"{name} must be a number, got {short_repr(value)}")
    v = _as_float(value)
    if not math.isfinite(v) or v <= 0:
        raise bad(f"{name} must be a finite number > 0, got {short_repr(value)}")
    if v > 1000:
        raise bad(f"{name} is {short_repr(value)}, above the largest epsilon fugu accepts (1000)")
    return v


def _refuse_forgetting(
    path: Path, ledger: Sequence[LedgerEntry], budget: Budget | None = None
) -> None:
    """Raise if the ledger file ``path`` records a spend missing from ``ledger``, or if
    ``budget`` would loosen the budget it declares (a larger ε or δ total, another model, a
    policy other than the file's, which may only be bound from an older form to an identifier).
    """
    if not path.exists():
        return
    try:
        old = Accountant.load(path)
    except LedgerError as exc:
        # a ledger written by a newer fugu, or damaged: it may record spends all the same
        raise LedgerError(
            f"{str(path)!r} exists and is not a ledger this fugu can read ({exc}); writing over "
            "it would forget any spend it records. Choose another path, or delete it "
            "deliberately if the releases it recorded were never published"
        ) from None
    if budget is not None:
        _refuse_loosening(path, old.budget, budget)

    # the relation too: re-labelling replace-one spends add/remove would let add/remove
    # releases be summed with them (a policy may change: bind_policy rewrites older forms)
    def key(e: LedgerEntry) -> tuple[float, str, str, float, str | None]:
        return (e.epsilon, e.what, e.time, e.delta, e.neighbours)

    missing = Counter(map(key, old.ledger)) - Counter(map(key, ledger))
    if missing:
        n = sum(missing.values())
        eps = math.fsum(k[0] * c for k, c in missing.items())
        raise LedgerError(
            f"ledger {str(path)!r} records {n} spend(s) ({eps:g} epsilon) that this accountant "
            "does not hold; writing it would forget them. Spend from that ledger with 'with "
            "fugu.budget.ledger_file(path) as acct:', create new ledgers with "
            "fugu.budget.create_ledger (it never overwrites), or delete the old file "
            "deliberately if its releases were never published"
        )


def _refuse_loosening(path: Path, old: Budget, new: Budget) -> None:
    """Raise if writing ``new`` over the ledger ``path``, which declares ``old``, would raise
    its total, change its model or untie its policy: only ``fugu ledger init`` sets a total."""
    changes = []
    if new.epsilon > old.epsilon:
        changes.append(f"total epsilon {old.epsilon:g} -> {new.epsilon:g}")
    if new.delta > old.delta:
        changes.append(f"total delta {old.delta:g} -> {new.delta:g}")
    if not same_model(new.model, old.model):
        changes.append(f"model {old.model!r} -> {new.model!r}")
    binds = old.policy is None or (
        not is_policy_identifier(old.policy) and is_policy_identifier(new.policy)
    )
    if new.policy != old.policy and not binds:
        changes.append(f"policy {old.policy!r} -> {new.policy!r}")
    if changes:
        raise LedgerError(
            f"ledger {str(path)!r} declares total epsilon {old.epsilon:g} ({old.model}); "
            f"writing this accountant over it would change {'; '.join(changes)} without notice, "
            "and the releases already charged to it were made against the declared total. "
            "Spend from the ledger as it is ('with fugu.budget.ledger_file(path) as acct:'), "
            "or start a new ledger for a new budget with 'fugu ledger init NEW_PATH --total EPS'"
        )


def _refuse_hard_links(path: Path) -> None:
    """LedgerError if the ledger ``path`` has another hard link: each name takes its own lock,
    and the first atomic write (a rename) makes the names two files, two budgets."""
    try:
        links = os.stat(path).st_nlink
    except OSError:
        return  # no file yet (or unreadable: reading it says why)
    if links > 1:
        raise LedgerError(
            f"ledger {str(path)!r} has {links} hard links; spending through one name would "
            "split it from the others (each write replaces the file), so each name would "
            "spend the whole total. Keep one name (remove the other links) and share it with "
            "a symbolic link, which fugu follows to the one file and its one lock"
        )


def _require_ledger_file(p: Path) -> None:
    """LedgerError, saying how to create the ledger, when there is no file ``p``."""
    if not p.exists():
        raise LedgerError(
            f"ledger {str(p)!r} does not exist; create it with 'fugu ledger init {p} --total EPS'"
        )


def _atomic_write(path: Path, text: str) -> None:
    """Write ``text`` to ``path`` via a temporary file in the same folder, fsync and rename."""
    data = text.encode("utf-8")
    atomic_write(
        path,
        lambda fh: fh.write(data),
        error=lambda m: LedgerError(m.replace("cannot write", "cannot write ledger", 1)),
    )


def _lock_path(p: Path) -> Path:
    """``<real path>.lock``: every name of one ledger (symlinks, relative paths) shares a lock."""
    real = Path(os.path.realpath(p))
    return real.with_name(real.name + ".lock")


def _lock_module() -> Any:
    try:
        import fcntl
    except ImportError:  # pragma: no cover - Windows
        raise FuguError(
            "ledger files need OS file locks (fcntl.flock), which this platform does not have; "
            "share a budget here with one in-memory fugu.Accountant instead"
        ) from None
    return fcntl


def _same_file(fh: Any, path: Path) -> bool:
    """Whether the open file ``fh`` is still the file at ``path`` (not removed or replaced)."""
    try:
        now = os.stat(path)
    except FileNotFoundError:
        return False
    held = os.fstat(fh.fileno())
    return (held.st_dev, held.st_ino) == (now.st_dev, now.st_ino)


@contextmanager
def _exclusive_lock(p: Path) -> Iterator[Callable[[], None]]:
    """Hold an exclusive OS lock on the ledger ``p`` (on its sibling lock file) for the block.

    Yields a check to call before each write: it raises :class:`LedgerError` if the lock file
    was removed or replaced while held (another process may then hold a lock on the new one).
    A lock file removed or replaced while this process waited for it is locked afresh.
    """
    fcntl = _lock_module()
    lock_path = _lock_path(p)
    # flock excludes open files, not threads: a second block on one ledger in the same thread
    # would wait for itself forever
    key = (str(lock_path), os.getpid(), threading.get_ident())
    with _HELD_LOCK:
        if key in _HELD:
            raise LedgerError(
                f"ledger {str(p)!r} is already open in this thread (a ledger_file block inside "
                "another on the same ledger would wait for itself forever); spend from the "
                "accountant the outer block yielded"
            )
        _HELD.add(key)
    try:
        with _flock(p, lock_path, fcntl) as still_held:
            yield still_held
    finally:
        with _HELD_LOCK:
            _HELD.discard(key)


#: (lock file, process, thread) of every ledger lock this process holds
_HELD: set[tuple[str, int, int]] = set()
_HELD_LOCK = threading.Lock()


@contextmanager
def _flock(p: Path, lock_path: Path, fcntl: Any) -> Iterator[Callable[[], None]]:
    while True:
        try:
            lock_fh = open(lock_path, "a+b")  # noqa: SIM115 - held for the whole block
        except OSError as exc:
            raise LedgerError(f"cannot create the lock file {str(lock_path)!r}: {exc}") from None
        try:
            fcntl.flock(lock_fh.fileno(), fcntl.LOCK_EX)
            if _same_file(lock_fh, lock_path):
                break
        except BaseException:
            lock_fh.close()
            raise
        lock_fh.close()  # it was removed or replaced while we waited: lock the current one

    def still_held() -> None:
        if not _same_file(lock_fh, lock_path):
            raise LedgerError(
                f"the lock file {str(lock_path)!r} of ledger {str(p)!r} was removed or replaced "
                "while this process held it, so another process may be spending from the same "
                "ledger; nothing more is written. Open the ledger again, and never delete the "
                ".lock file of a ledger in use"
            )

    try:
        yield still_held
    finally:
        try:
            fcntl.flock(lock_fh.fileno(), fcntl.LOCK_UN)
        finally:
            lock_fh.close()


@contextmanager
def ledger_file(
    path: str | Path, *, model: str | None = None, policy: str | NamedPolicy | None = None
) -> Iterator[Accountant]:
    """Open a ledger file for spending, under an exclusive OS lock.

    Takes ``fcntl.flock`` on the sibling file ``<path>.lock`` (created if missing), loads and
    validates the ledger and yields its :class:`Accountant`. Every spend in the block is written
    back atomically as it is made, before the mechanism that made it touches the data (a process
    killed later in the block keeps it); the lock is released when the block exits. Other
    processes opening the same ledger wait for the lock, so read-check-spend-write is one step:
    concurrent releases never overspend and every successful spend is recorded.

    Parameters
    ----------
    path : str or Path
        The ledger file, created by ``fugu ledger init PATH --total EPS``.
    model : str, optional
        The privacy model of the release about to be charged; a ledger of another model refuses.
    policy : fugu.blowfish.Policy or str, optional
        The Blowfish policy of the release (or its ``identifier``); a ledger tied to another
        policy refuses. Given as a policy object, it also binds a ledger that names the policy
        in an older form (a CLI spec such as ``"line"`` from ``fugu ledger init --policy``
        without a domain, or a name written by fugu before identifiers) to its identifier,
        after :meth:`~fugu.blowfish.Policy.names` has checked that the old text names it.

    Raises
    ------
    LedgerError
        The file is missing or corrupt, or tracks another model or policy.
    FuguError
        The platform has no ``fcntl.flock`` (Windows).

    Notes
    -----
    The lock is advisory and local: it protects processes on one machine (and local file
    systems). Over NFS or other network file systems ``flock`` may not be honoured across
    machines; keep a shared ledger on a local disk. The lock is held until the block exits, so
    keep the block short: the release is computed while other processes wait.

    Examples
    --------
    >>> import os, tempfile, fugu
    >>> path = os.path.join(tempfile.mkdtemp(), "l.json")
    >>> _ = create_ledger(path, 1.0, model="ldp")
    >>> try:
    ...     with ledger_file(path, model="central-dp"):
    ...         pass
    ... except fugu.errors.LedgerError as e:
    ...     print(str(e).split(";")[0])  # doctest: +ELLIPSIS
    ledger ... tracks 'ldp' budget, not 'central-dp'
    """
    p = Path(path)
    if model is not None and model not in MODELS:
        raise InvalidParameterError(f"model must be one of {list(MODELS)}, got {model!r}")
    _require_ledger_file(p)
    text = _policy_text(policy)
    # resolved once: the file read and written is the one locked, even if the process changes
    # its working folder (a relative path) or the link is pointed elsewhere inside the block
    real = Path(os.path.realpath(p))
    with _exclusive_lock(real) as still_held:
        _refuse_hard_links(real)
        acct = Accountant.load(real)
        rebound = acct.bind_policy(policy) if isinstance(policy, NamedPolicy) else []
        b = acct.budget
        if model is not None and not same_model(model, b.model):
            raise LedgerError(
                f"ledger {str(p)!r} tracks {b.model!r} budget, not {model!r}; a {model} release "
                f"cannot be charged to it (use a ledger made with 'fugu ledger init PATH "
                f"--model {model}')"
            )
        try:
            acct._check_model(None, text)
            acct._check_common_policy(text)
        except LedgerError as exc:
            if not isinstance(policy, NamedPolicy):
                raise LedgerError(
                    str(exc).replace("this budget", f"ledger {str(p)!r}", 1)
                ) from None
            # the policy object was asked, and said the old name is another policy's
            tied = b.policy or next(e.policy for e in acct.ledger if e.policy is not None)
            raise LedgerError(
                f"ledger {str(p)!r} tracks the Blowfish policy {tied!r} (named in an older "
                f"form), and {text!r} is not that policy on this domain; releases compose only "
                "under a common policy (keep one ledger per policy)"
            ) from None
        except InvalidParameterError:
            tied = b.policy or next(e.policy for e in acct.ledger if e.policy is not None)
            hint = ""
            if str(text).split(" [")[0] == str(tied).split(" [")[0] + "+bottom":
                hint = (
                    "; this release also protects presence (the policy with ⊥, e.g. fugu "
                    "--neighbours add-remove), which a ledger made with --policy SPEC+bottom "
                    "tracks"
                )
            raise LedgerError(
                f"ledger {str(p)!r} tracks the Blowfish policy {tied!r}, not {text!r}; "
                f"releases compose only under a common policy (keep one ledger per policy){hint}"
            ) from None
        written = [list(acct.ledger)]

        owner = os.getpid()

        def persist() -> None:
            if os.getpid() != owner:
                raise LedgerError(
                    f"this accountant of ledger {str(p)!r} belongs to process {owner}; a spend "
                    f"in process {os.getpid()} (forked from it) would be overwritten by its "
                    "next write. Open the ledger in the process that spends, with "
                    "'with fugu.budget.ledger_file(path) as acct:'"
                )
            still_held()
            acct.save(real)
            written[0] = list(acct.ledger)

        persist.path = str(p)  # type: ignore[attr-defined]
        if rebound:
            persist()
        acct._persist = persist  # every spend is written while the lock is held
        try:
            yield acct
        finally:
            with acct._lock:  # a spend under way in another thread is written first
                acct._persist = None
                acct._closed = str(p)  # spends after the block would never reach the file
                if acct.ledger != written[0]:  # the ledger list changed by hand in the block
                    still_held()
                    acct.save(real)


def create_ledger(
    path: str | Path,
    total: float,
    *,
    model: str = "central-dp",
    policy: str | NamedPolicy | None = None,
    delta: float = 0.0,
) -> Accountant:
    """Create a new ledger file with a declared total; refuse if the file already exists.

    Re-initialising an existing ledger would forget every spend it records (the releases made
    under it are still out there), so this never overwrites: delete the old file deliberately
    first if you really mean to start over. Runs under the same lock as :func:`ledger_file`
    and writes atomically.

    >>> import os, tempfile
    >>> path = os.path.join(tempfile.mkdtemp(), "new.json")
    >>> create_ledger(path, 2.0, model="ldp")
    Accountant(total=2, model='ldp', spent=0, remaining=2, entries=0)
    >>> try:
    ...     create_ledger(path, 5.0)
    ... except LedgerError as e:
    ...     print(str(e).split(":")[0])  # doctest: +ELLIPSIS
    ledger ... already exists
    """
    p = Path(path)
    total = check_epsilon(total, "total")  # named as the caller (and --total) gave it
    acct = Accountant(Budget(total, model=model, policy=_policy_text(policy), delta=delta))
    with _exclusive_lock(p) as still_held:
        if p.exists():
            try:
                old = Accountant.load(p)
                what = (
                    f"total {old.budget.epsilon:g} ({old.budget.model}), {len(old.ledger)} "
                    f"spend(s), {old.spent:g} spent"
                )
            except LedgerError:
                what = "and is not a valid ledger"
            raise LedgerError(
                f"ledger {str(p)!r} already exists: {what}; re-initialising it would forget "
                "those spends. Use it as it is, choose another path, or delete it deliberately "
                "if the releases it recorded were never published"
            )
        still_held()
        acct.save(p)
    return acct


def _now() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def charge(accountant: Accountant | None, epsilon: float, what: str, **kw: Any) -> None:
    """Charge ``accountant`` (if given) before a mechanism touches the data."""
    if accountant is not None:
        accountant.spend(epsilon, what, **kw)


def fit_epsilon_parts(epsilon: float, parts: Sequence[float]) -> list[float]:
    """The ε parts of one release, each lowered by whole ulps until their *exact* sum is at most
    ``epsilon``.

    Splits computed in floating point (``ε·f`` and ``ε·(1 − f)``, ``ε − ε_init``, ``ε·w/total``
    per iteration) round to nearest, so the parts can add up to a few ulps more than the ε the
    guarantee states (ε = 1, f = 0.1: 0.1 + 0.9 = 1 + 2.8e-17), and the noises drawn with them
    would spend that much more. Every mechanism that splits its ε (Blowfish's Ordered
    Hierarchical and k-means, the Recursive Mechanism) fits its parts here. A part of 0 stays 0;
    the sum is compared exactly (:class:`fractions.Fraction`), never in floating point.

    >>> a, b = fit_epsilon_parts(1.0, [0.1 * 1.0, 1.0 * (1 - 0.1)])
    >>> from fractions import Fraction
    >>> Fraction(a) + Fraction(b) <= 1
    True
    >>> fit_epsilon_parts(1.0, [0.25, 0.75])  # already exact: unchanged
    [0.25, 0.75]
    """
    from fractions import Fraction

    out = [float(p) for p in parts]
    target = Fraction(float(epsilon))
    while sum((Fraction(p) for p in out), Fraction(0)) > target:
        out = [math.nextafter(p, 0.0) if p > 0 else p for p in out]
    return out
