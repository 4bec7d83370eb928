"""Sensitive K-relations: tuples annotated with positive Boolean expressions over participants.

A *sensitive K-relation* (Chen and Zhou, "Recursive Mechanism", SIGMOD 2013, seed ``002_…``,
Sec. 2.4 and Def. 14) maps each tuple to a positive Boolean expression (only ∧, ∨, True, False)
over *participants* (people, nodes, edges): the tuple is present exactly when the expression is
true with ``p := p has not withdrawn``. The positive relational algebra (union, projection,
selection, natural join, renaming) acts on annotations by the K-relation rules:

* union and projection: ``R1(t) ∨ R2(t)`` (∨ over all input tuples that project to ``t``);
* natural join: ``R1(t1) ∧ R2(t2)``;
* selection keeps an annotation or drops the tuple; renaming leaves it alone.

**Two forms (a privacy requirement).** The efficient Recursive Mechanism needs neighbouring
relations to carry *φ-equivalent* annotations (spec 8.1(1)): two truth-table-equal expressions
can relax to different functions φ, so the way an annotation is written is part of the privacy
proof. fugu keeps annotations in one of two forms, each safe on its own:

* **minimal DNF** (:class:`KRelation`, compiled to :class:`Annotations`): a set of clauses, each
  a set of distinct participants, none a subset of another. For a monotone Boolean function this
  set (its minimal true sets) is unique, so it depends only on the tuple's truth table, never on
  how or in which order it was built. When ``p`` withdraws, the minimal DNF of the restricted
  function is the old one without the clauses that mention ``p`` — ``R(t)|p→False`` after the
  φ-invariant rewrites of the paper (identity, annihilator, absorption). Duplicate participants
  inside a clause collapse (``a∧b ∧ b∧c`` → ``a∧b∧c``), which gives the paper's φ-sensitivity 1
  for subgraph patterns (Fig. 2(a)). A join of unions expands, though: eight three-way unions
  joined give 3^8 = 6,561 clauses.
* **formulas** (:class:`FormulaRelation`, compiled to :class:`Formulas`): the K-relation formulas
  themselves, one LP column per ∧/∨ gate (spec 5.6), polynomial size (section "Formula form").

**Which form, decided before the data is read.** Whether an annotation is representable, and in
which form, must not depend on the private data: a refusal or a form that appears only on some
databases is itself an observable, and a form that differs between neighbours breaks the proof
(Def. 14 needs both neighbours built the *same* way; spec 8.1(1) has a 4.7·Δ̂ counterexample).
So every relation carries a **public clause bound** :attr:`KRelation.clause_bound`, an upper bound
on the number of minimal-DNF clauses of any of its annotations, computed from the query plan alone:

* a base relation (:meth:`KRelation.from_records`) whose columns keep every owner column: 1 (the
  tuple names its owners); one that leaves an owner column out: the declared public
  ``max_fanin`` (records per tuple), infinite when none is declared;
* pattern occurrences (:func:`fugu.graph.pattern_relation`): 1 — the pattern is public;
* union: the sum of the inputs' bounds; join: their product; projection: the input's bound times
  its declared ``max_fanin`` (infinite without one, unchanged if every column is kept);
  selection, renaming and withdrawal: unchanged.

Under the default rule ``form="auto"`` each operator keeps its result in minimal DNF when that
bound is at most the public threshold ``max_clauses`` (default :data:`MAX_CLAUSES`) and in
formula form otherwise, converting DNF inputs to formulas (``∨`` over the ∧ of each clause, a
unary ∨ kept). Bounds only grow along the plan, so a plan is minimal DNF up to some operators and
formulas after them; ``form="dnf"`` and ``form="formula"`` force one form everywhere. Nothing
here reads the data: for a database and every neighbour the same plan yields the same bounds, so
the same forms at the same operators, and nothing is ever refused for its size (the old
``max_clauses`` refusal, whose occurrence depended on the data, is gone). The form used is in
:attr:`KRelation.form` and in the guarantee of :func:`fugu.graph.answer`.

*A declared bound the data exceed* (``max_fanin`` smaller than the true number of records per
tuple) is never checked: no error, no clipping, no switch of form. The minimal DNF is simply
larger than declared, which costs time and memory only; the released distribution is that of the
form the plan chose, and the proof below holds for it whatever the sizes. (Running time depends
on the data, as everywhere in fugu, and is not released.) A caller who cannot declare a bound
gets formulas, which cost nothing extra to represent.

*Why the mixed plan keeps neighbours φ-equivalent.* Let D2 = D1 + p and build the plan on both.
Up to the first formula operator both sides are in minimal DNF, and the DNF of D1 is the DNF of
D2 without p's clauses (above). The conversion writes a minimal DNF M as ``∨{∧C : C ∈ M}``; on D1
that is ``∨{∧C : C ∈ M, p ∉ C}``, which is exactly the conversion of M with p := False after
``x ∧ False → False`` and ``x ∨ False → x`` (a tuple all of whose clauses hold p is absent from D1
and False in D2). From there on the formula argument below applies unchanged.

Formula form
------------
With formulas a join of unions costs the length of its formula, never the size of its DNF, and
no annotation is ever refused. Why this is private although truth-table-equal formulas can have
different φ (spec 8.1(1)):

*Claim.* Let D2 = D1 + p (p withdraws from D2 to give D1) and build the same query plan on both.
For every tuple t, R1(t) is obtained from R2(t) by substituting p := False and applying only
``x ∨ False → x``, ``x ∧ False → False`` (dropping a tuple whose annotation becomes False) and
``x ∨ x → x``. All three are φ-invariant (φ_{x∧False} = max(0, φ_x − 1) = 0 = φ_False,
max(φ_x, 0) = φ_x, max(φ_x, φ_x) = φ_x), so R1(t) ∼_φ R2(t)|_{p→False}, which is the neighbour
condition (Def. 14 with ∼ = "same φ") under which H is recursive (Thm. 3) and Lemma 7 holds.

*Proof, by induction on the plan.* Base relations: a record owned (jointly) by p is the leaf p or
``∧(…, p, …)``, i.e. False once p := False; the tuple's annotation is the ∨ of its records'
(kept even with one record), so on D1 it is the ∨ of the others — the substitution result after
x ∨ False → x. A tuple all of whose records belong to p is absent from D1 and False in D2 after
substitution. Union and projection build ``∨`` of the children's annotation sets; join builds
``∨{∧(R(t1), R(t2))}``; selection and renaming only look at tuple values. Each operator commutes
with the substitution: an ∧ with a False child is False (and in D1 the joined tuple does not
exist), a False child of an ∨ is dropped (and in D1 that input tuple does not exist), and two ∨
children that become equal after the substitution are merged in D1 but stay twice in D2, which φ
cannot tell apart. No other rewrite is ever applied: in particular unary ∨ gates are never
collapsed and repeated participants under an ∧ of gates are never merged, because ``x ∧ x → x``
is not φ-invariant and a collapse could expose such a repetition on one side only (compiling
collapses unary gates for the LP, which is φ-invariant, after the structure is fixed).

The price against minimal DNF: a participant that reaches a tuple along several ∧-paths counts
that many times in S_{R(t),p} (a triangle built by a self-join of a table without a public bound
has S = 2 per node instead of 1). Conjunctive queries over owner-keyed tables and subgraph
patterns have public bound 1 and stay minimal DNF under ``"auto"``; a projection at the end of
such a query converts clauses that are already deduplicated, so its φ equals the minimal DNF's.
The tests check the claim on random plans (the relation built without p's records is φ-equal to
the withdrawal), that the form decision is the same for a database and each neighbour, and
Lemma 7 (|X(D1) − X(D2)| ≤ Δ̂) on random CNF/DNF relations for every single withdrawal.

Example
-------
>>> from fugu.graph import KRelation
>>> friends = KRelation.from_records(
...     [{"a": 1, "b": 2}, {"a": 1, "b": 3}, {"a": 2, "b": 3}], owners=["a", "b"])
>>> len(friends), friends.annotation((1, 2)), friends.form, friends.clause_bound
(3, '1 ∧ 2', 'dnf', 1.0)
>>> fof = friends.rename({"b": "c"}).join(friends.rename({"a": "c"})).project(["a", "b"])
>>> fof.annotation((1, 3)), fof.form        # a projection without a declared fan-in: formulas
('1 ∧ 2 ∧ 3', 'formula')
>>> friends.rename({"b": "c"}).join(friends.rename({"a": "c"})).project(
...     ["a", "b"], max_fanin=10).form       # public bound 10 <= max_clauses: minimal DNF
'dnf'
"""

from __future__ import annotations

import math
from collections.abc import Callable, Hashable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import NDArray

from ..domain import check_column_lengths
from ..errors import InvalidParameterError, InvalidTypeError

__all__ = ["KRelation", "Annotations", "minimal_dnf", "MAX_CLAUSES", "FORMS"]

Clause = frozenset  # a set of participants that must all be present
DNF = frozenset  # a set of clauses; empty = False

#: Default public threshold of ``form="auto"``: a plan step whose public clause bound exceeds it
#: keeps formulas (a join of unions expands in DNF). A threshold, never a refusal.
MAX_CLAUSES = 4096
#: The annotation-form rules of a query (see the module docstring).
FORMS = ("auto", "dnf", "formula")


def minimal_dnf(clauses: Iterable[Iterable[Hashable]]) -> frozenset[frozenset[Hashable]]:
    """The minimal DNF of ``∨_c ∧_{p∈c} p``: clauses that contain another clause are dropped.

    >>> sorted(sorted(c) for c in minimal_dnf([{1, 2}, {1}, {2, 3}, {1, 3}]))
    [[1], [2, 3]]
    """
    cs = sorted({frozenset(c) for c in clauses}, key=len)
    keep: list[frozenset[Hashable]] = []
    for c in cs:
        if not any(k <= c for k in keep):
            keep.append(c)
    return frozenset(keep)


def concatenated_ranges(starts: NDArray[np.int64], lengths: NDArray[np.int64]) -> NDArray[np.int64]:
    """``starts[i], starts[i] + 1, …, starts[i] + lengths[i] - 1`` for every ``i``, in one array.

    The positions of CSR slices (children of gates, neighbours of nodes) gathered at once.

    >>> concatenated_ranges(np.array([5, 0]), np.array([2, 3])).tolist()
    [5, 6, 0, 1, 2]
    """
    within = np.arange(int(lengths.sum())) - np.repeat(np.cumsum(lengths) - lengths, lengths)
    return np.repeat(starts, lengths) + within


def _kept_labels(labels: tuple[Any, ...] | None, used: NDArray[np.bool_]) -> tuple[Any, ...] | None:
    """The labels of the participants still ``used`` after a restriction, in order."""
    return None if labels is None else tuple(lab for lab, u in zip(labels, used, strict=True) if u)


@dataclass(frozen=True)
class Annotations:
    """The compiled annotations of a relation: what the Recursive Mechanism works on.

    Participants that occur in some annotation are numbered ``0..n_participants-1``; each tuple
    ``t`` has clauses ``tuple_ptr[t]:tuple_ptr[t+1]``, clause ``c`` has the participants
    ``clause_vars[clause_ptr[c]:clause_ptr[c+1]]`` (distinct), and ``weights[t] = q(t) > 0``.
    """

    n_participants: int
    clause_ptr: NDArray[np.int64]
    clause_vars: NDArray[np.int64]
    tuple_ptr: NDArray[np.int64]
    weights: NDArray[np.float64]
    labels: tuple[Any, ...] | None = None

    @property
    def n_tuples(self) -> int:
        return int(self.weights.size)

    @property
    def n_clauses(self) -> int:
        return int(self.clause_ptr.size - 1)

    @property
    def size(self) -> int:
        """Total annotation length L (the LP has O(L) rows and columns)."""
        return int(self.clause_vars.size)

    def total(self) -> float:
        """q(supp R) = Σ_t q(t): the true answer."""
        return float(self.weights.sum())

    def clause_tuple(self) -> NDArray[np.int64]:
        """For every clause, the tuple it belongs to."""
        return np.repeat(np.arange(self.n_tuples), np.diff(self.tuple_ptr))

    def incidence(self) -> tuple[NDArray[np.int64], NDArray[np.int64]]:
        """Distinct (tuple, participant) pairs: the participants occurring in each annotation."""
        ct = self.clause_tuple()
        ctv = np.repeat(ct, np.diff(self.clause_ptr))
        key = np.unique(ctv * np.int64(max(1, self.n_participants)) + self.clause_vars)
        n = np.int64(max(1, self.n_participants))
        return key // n, key % n

    def impact(self) -> NDArray[np.float64]:
        """Σ_{t ∋ p} q(t) for every participant p (= Σ_t q(t) S_{R(t),p} in minimal DNF)."""
        t, p = self.incidence()
        out = np.bincount(p, weights=self.weights[t], minlength=self.n_participants)
        return np.asarray(out, dtype=np.float64)

    def evaluate(self, f: NDArray[np.float64]) -> NDArray[np.float64]:
        """φ_{R(t)}(f) for every tuple (spec 5.2): ∧ → max(0, Σ − (m−1)), ∨ → max."""
        lens = np.diff(self.clause_ptr)
        sums = (
            np.add.reduceat(f[self.clause_vars], self.clause_ptr[:-1])
            if self.n_clauses
            else np.zeros(0)
        )
        clause_val = np.maximum(0.0, sums - (lens - 1))
        if not self.n_tuples:
            return np.zeros(0)
        return np.asarray(np.maximum.reduceat(clause_val, self.tuple_ptr[:-1]), dtype=np.float64)

    def truth(self, present: NDArray[np.bool_]) -> NDArray[np.bool_]:
        """Whether each tuple is present when exactly the participants in ``present`` take part."""
        return self.evaluate(present.astype(np.float64)) > 0.5

    @staticmethod
    def conjunctions(
        vars_: NDArray[np.int64],
        weights: NDArray[np.float64] | None,
        n_participants: int,
        labels: Sequence[Any] | None = None,
    ) -> Annotations:
        """One clause per tuple: row ``t`` of the (n, k) array ``vars_`` (distinct per row)."""
        vars_ = np.ascontiguousarray(vars_, dtype=np.int64)
        n, k = vars_.shape
        w = np.ones(n) if weights is None else np.asarray(weights, dtype=np.float64)
        return Annotations(
            n_participants=int(n_participants),
            clause_ptr=np.arange(n + 1, dtype=np.int64) * k,
            clause_vars=vars_.reshape(-1),
            tuple_ptr=np.arange(n + 1, dtype=np.int64),
            weights=w,
            labels=None if labels is None else tuple(labels),
        )

    def restrict(self, keep: NDArray[np.bool_]) -> Annotations:
        """The annotations when only the participants with ``keep[p]`` take part (an ancestor).

        Clauses with a withdrawn participant are dropped, tuples with no clause left vanish and
        participants that no longer occur are renumbered away. In minimal DNF this is exactly
        the neighbour/ancestor relation of the paper (spec 8.1(5)).
        """
        lens = np.diff(self.clause_ptr)
        bad = ~keep[self.clause_vars]
        clause_ok = (
            np.add.reduceat(bad.astype(np.int64), self.clause_ptr[:-1]) == 0
            if self.n_clauses
            else np.zeros(0, bool)
        )
        per_tuple = (
            np.add.reduceat(clause_ok.astype(np.int64), self.tuple_ptr[:-1])
            if self.n_tuples
            else np.zeros(0, np.int64)
        )
        tuple_ok = per_tuple > 0
        kept_vars = self.clause_vars[np.repeat(clause_ok, lens)]
        used = np.zeros(self.n_participants, bool)
        used[kept_vars] = True
        newid = np.cumsum(used) - 1
        new_lens = lens[clause_ok]
        return Annotations(
            n_participants=int(used.sum()),
            clause_ptr=np.concatenate([[0], np.cumsum(new_lens)]).astype(np.int64),
            clause_vars=newid[kept_vars].astype(np.int64),
            tuple_ptr=np.concatenate([[0], np.cumsum(per_tuple[tuple_ok])]).astype(np.int64),
            weights=self.weights[tuple_ok],
            labels=_kept_labels(self.labels, used),
        )

    def withdraw(self, p: int) -> Annotations:
        """The neighbour without participant ``p`` (an index)."""
        keep = np.ones(self.n_participants, bool)
        keep[p] = False
        return self.restrict(keep)


def _records(data: Any) -> list[dict[str, Any]]:
    """Rows of a list of dicts, a dict of columns, a pandas or a Polars DataFrame."""
    return _table(data)[0]


def _table(data: Any) -> tuple[list[dict[str, Any]], list[Any] | None]:
    """Rows and the declared columns of the container (None for a list of dicts, which declares
    none). The columns of a DataFrame or a dict of columns are its schema, known however many
    rows it holds (none included): they never depend on the data."""
    mod = type(data).__module__
    if mod.startswith("pandas"):
        return list(data.to_dict("records")), list(data.columns)
    if mod.startswith("polars"):
        return list(data.to_dicts()), list(data.columns)
    if isinstance(data, Mapping):
        cols = {k: list(v) for k, v in data.items()}
        check_column_lengths({str(k): len(v) for k, v in cols.items()})
        n = len(next(iter(cols.values()))) if cols else 0
        return [{k: v[i] for k, v in cols.items()} for i in range(n)], list(cols)
    if isinstance(data, list | tuple):
        if not all(isinstance(r, Mapping) for r in data):
            raise InvalidTypeError("records must be dicts (column -> value)")
        return [dict(r) for r in data], None
    raise InvalidTypeError(
        f"cannot read records from {type(data).__name__}; give a list of dicts, a dict of columns, "
        f"or a pandas/Polars DataFrame"
    )


def _owner_values(v: Any) -> list[Any]:
    if isinstance(v, list | tuple | set | frozenset):
        return list(v)
    if v is None or (isinstance(v, float) and v != v):
        raise InvalidParameterError(
            "an owner value is missing (None/NaN); every base tuple must name its owner(s) — a "
            "tuple owned by nobody is public and must be handled outside the mechanism"
        )
    return [v]


def _owner_cell(v: Any) -> Any:
    """An owner cell as a tuple value: a list of joint owners becomes a tuple, a set a
    frozenset (the same owners; hashable, so the row can be a tuple of the relation)."""
    if isinstance(v, list):
        return tuple(v)
    if isinstance(v, set):
        return frozenset(v)
    return v


def _check_hashable(t: tuple[Any, ...], cols: tuple[str, ...], i: int) -> None:
    """Refuse a record whose values cannot form a tuple of the relation (naming the column,
    not the value)."""
    try:
        hash(t)
    except TypeError:
        for c, v in zip(cols, t, strict=True):
            try:
                hash(v)
            except TypeError:
                raise InvalidParameterError(
                    f"column {c!r} of record {i} holds a {type(v).__name__}, which cannot be a "
                    f"value of a relation's tuple (values must be hashable: numbers, strings, "
                    f"tuples); convert it, or leave the column out with columns=[...]"
                ) from None
        raise  # pragma: no cover - every value hashable but the tuple not


class KRelation:
    """A sensitive K-relation: tuples with positive Boolean annotations over participants.

    Build one with :meth:`from_records` (each base tuple names its owner or owners; jointly owned
    tuples are annotated with the ∧ of their owners) and combine relations with :meth:`union`,
    :meth:`project`, :meth:`select`, :meth:`join` and :meth:`rename`. How annotations are kept
    (minimal DNF or formulas) is decided from the *query plan alone*, never from the data (see
    the module docstring, "Which form, decided before the data is read"): :attr:`form` is the form
    in use, :attr:`clause_bound` the public bound on the clauses of one annotation that the plan
    implies, :attr:`form_rule` the rule asked for (``"auto"``, ``"dnf"`` or ``"formula"``).
    Answer a linear statistic privately with :func:`fugu.graph.answer`.

    Constructing a ``KRelation`` directly from clauses (below) keeps the given annotations in
    minimal DNF (canonical, so safe as it is). Its clause bound is ``clause_bound`` if declared
    (public, never checked against the rows), else infinite, and operators applied to it decide
    their form from that bound like any other.

    Parameters
    ----------
    columns : sequence of str
    rows : mapping tuple → iterable of clauses (each an iterable of participants)
    max_clauses : int
        Public threshold of the ``"auto"`` rule (default :data:`MAX_CLAUSES`): a plan step whose
        public clause bound exceeds it keeps formulas. Never a refusal.
    form : {"auto", "dnf"}
        The rule for relations built from this one (``"dnf"``: minimal DNF everywhere).
    clause_bound : int, optional
        A public bound on the clauses per annotation (default: none, i.e. infinite).

    Examples
    --------
    >>> from fugu.graph import KRelation
    >>> r = KRelation(["k"], {(1,): [{"a", "b"}, {"a"}]})
    >>> r.annotation((1,)), r.form
    ('a', 'dnf')
    """

    #: The form of this object's annotations: ``"dnf"`` (minimal DNF) or ``"formula"``.
    form = "dnf"

    def __init__(
        self,
        columns: Sequence[str],
        rows: Mapping[tuple[Any, ...], Iterable[Iterable[Hashable]]] | None = None,
        *,
        max_clauses: int = MAX_CLAUSES,
        form: str = "auto",
        clause_bound: int | None = None,
    ) -> None:
        self.columns = tuple(str(c) for c in columns)
        if len(set(self.columns)) != len(self.columns):
            raise InvalidParameterError(f"column names must be distinct, got {self.columns}")
        self.max_clauses = _check_max_clauses(max_clauses)
        if form not in ("auto", "dnf"):
            raise InvalidParameterError(
                f"a KRelation built from clauses has form 'auto' or 'dnf', got {form!r} (for "
                f"formulas use KRelation.from_records(..., form='formula'))"
            )
        #: The rule asked for: "auto", "dnf" or "formula" (inherited by every derived relation).
        self.form_rule = form
        #: Public upper bound on the clauses of one annotation, from the plan only (inf: none).
        self.clause_bound: float = _check_fanin(clause_bound, "clause_bound")
        self._rows: dict[tuple[Any, ...], frozenset[frozenset[Hashable]]] = {}
        self._compiled: Annotations | None = None
        self._values: NDArray[Any] | None = None
        for t, ann in (rows or {}).items():
            t = tuple(t)
            if len(t) != len(self.columns):
                raise InvalidParameterError(
                    f"tuple {t!r} has {len(t)} values for columns {self.columns}"
                )
            dnf = minimal_dnf(ann)
            _check_not_true(t, dnf)
            if dnf:
                self._rows[t] = dnf

    # -- construction ------------------------------------------------------------------------
    @classmethod
    def from_records(
        cls,
        data: Any,
        *,
        owners: str | Sequence[str],
        columns: Sequence[str] | None = None,
        max_clauses: int = MAX_CLAUSES,
        form: str = "auto",
        max_fanin: int | None = None,
    ) -> KRelation:
        """A base relation from records; each tuple is annotated with the ∧ of its owners.

        Parameters
        ----------
        data : list of dicts, dict of columns, pandas or Polars DataFrame
        owners : str or list of str
            Column(s) naming the participant(s) who own each tuple. A cell may hold one
            participant or a list/tuple of them (joint ownership). An edge under node privacy is
            owned by both its end points: ``owners=["src", "dst"]``.
        columns : list of str, optional
            The tuple's columns. Default: every column of the container, owner columns included
            — a DataFrame's columns or a dict's keys (its schema, the same with no rows), or the
            first record's keys for a list of dicts. An empty list of dicts declares no columns
            and needs ``columns=`` (the schema is public: it must not depend on whether any
            participant is present).
        max_clauses : int
            Public threshold of ``form="auto"`` (default :data:`MAX_CLAUSES`); never a refusal.
        form : {"auto", "dnf", "formula"}
            How annotations are kept, for this relation and everything built from it (a public
            choice for the whole query). ``"auto"`` (default): minimal DNF at every step of the
            plan whose public clause bound (:attr:`clause_bound`, computed from the operators and
            the declared ``max_fanin`` values only) is at most ``max_clauses``, formulas from the
            first step where it is not. ``"dnf"``: minimal DNF everywhere (canonical, best
            sensitivities; a join of unions can be exponentially large, and the time and memory
            that costs are the caller's choice — it is never refused). ``"formula"``: the
            K-relation formulas everywhere (polynomial size). See the module docstring.
        max_fanin : int, optional
            A *public* bound on how many records share one tuple when ``columns`` leaves out an
            owner column (the number of clauses of a base annotation). Used only to compute the
            clause bound of the plan, i.e. to choose the form; it is never checked against the
            data, so data that exceed it are neither refused nor clipped (the minimal DNF is just
            larger than declared, and the guarantee is unchanged). Without it such a relation
            has no public bound and ``"auto"`` keeps it as formulas.

        Identical tuples are merged with ∨ (set semantics).
        """
        if form not in FORMS:
            raise InvalidParameterError(f"form must be one of {FORMS}, got {form!r}")
        fanin = _check_fanin(max_fanin)
        maxc = _check_max_clauses(max_clauses)
        rows, schema = _table(data)
        if not isinstance(owners, str) and not (
            isinstance(owners, Sequence) and all(isinstance(c, str) for c in owners)
        ):
            raise InvalidParameterError(
                f"owners must be a column name or a list of column names (the column(s) naming "
                f"each tuple's participant(s)), got {owners!r}"
            )
        owner_cols = [owners] if isinstance(owners, str) else list(owners)
        if not owner_cols:
            raise InvalidParameterError("owners must name at least one column")
        if columns is None:
            # the container's schema, never the rows: with the first row's keys, an empty
            # DataFrame (every owner withdrawn) had only the owner columns, so answer(rel, "km")
            # raised after the budget was spent where its neighbour with one row released
            if schema is not None:
                columns = schema
            elif rows:
                columns = list(rows[0].keys())
            else:
                raise InvalidParameterError(
                    "an empty list of records declares no columns; pass columns=[...] (the "
                    "relation's schema is public and must not depend on whether rows exist), or "
                    "give a DataFrame or a dict of columns"
                )
        cols = tuple(columns)
        owner_set = set(owner_cols)
        acc: dict[tuple[Any, ...], set[frozenset[Hashable]]] = {}
        for i, r in enumerate(rows):
            try:
                # an owner cell may list joint owners: kept in the tuple as a tuple (a list
                # cannot be part of a tuple's key)
                t = tuple(_owner_cell(r[c]) if c in owner_set else r[c] for c in cols)
                clause = frozenset(p for c in owner_cols for p in _owner_values(r[c]))
            except KeyError as exc:
                raise InvalidParameterError(f"record {i} has no column {exc.args[0]!r}") from None
            _check_hashable(t, cols, i)
            acc.setdefault(t, set()).add(clause)
        # the tuple determines its owners when every owner column is kept: one clause per tuple
        bound = 1.0 if all(c in cols for c in owner_cols) else fanin
        if _dnf_chosen(form, bound, maxc):
            return _make(True, cols, acc, form, bound, maxc)
        nodes = {t: _or(_record_node(c) for c in clauses) for t, clauses in acc.items()}
        return _make(False, cols, nodes, form, bound, maxc)

    @classmethod
    def _from_conjunctions(
        cls, columns: Sequence[str], values: NDArray[Any], annotations: Annotations
    ) -> KRelation:
        """A relation with one conjunction per tuple, kept as arrays (pattern occurrences): the
        pattern fixes one clause per tuple, a public bound of 1 (rule ``"auto"``)."""
        rel = cls(columns)
        rel.form_rule, rel.clause_bound = "auto", 1.0
        rel._compiled = annotations
        rel._values = values
        return rel

    def _materialise(self) -> dict[tuple[Any, ...], Any]:
        if self._values is not None and self._compiled is not None and not self._rows:
            ann = self._compiled
            labels = ann.labels if ann.labels is not None else tuple(range(ann.n_participants))
            vals = self._values.tolist()
            vars_ = ann.clause_vars.tolist()
            ptr = ann.clause_ptr.tolist()
            for t in range(ann.n_tuples):
                row = tuple(vals[t]) if isinstance(vals[t], list) else (vals[t],)
                clause = frozenset(labels[v] for v in vars_[ptr[t] : ptr[t + 1]])
                self._rows[row] = minimal_dnf([*(self._rows.get(row, ())), clause])
        return self._rows

    def _new(self, columns: Sequence[str], acc: Mapping[tuple[Any, ...], Any]) -> KRelation:
        """A relation in this one's form, rule and bound (select, rename, withdraw)."""
        return _make(
            self.form == "dnf", columns, acc, self.form_rule, self.clause_bound, self.max_clauses
        )

    # -- inspection ----------------------------------------------------------------------------
    def __len__(self) -> int:
        if self._compiled is not None and not self._rows:
            return self._compiled.n_tuples
        return len(self._rows)

    def __repr__(self) -> str:
        return f"<KRelation form={self.form} columns={self.columns} tuples={len(self)}>"

    def tuples(self) -> list[tuple[Any, ...]]:
        """The support: every tuple with a non-False annotation."""
        return list(self._materialise())

    def dnf(self, t: tuple[Any, ...]) -> frozenset[frozenset[Hashable]]:
        """The annotation of ``t`` as a set of clauses, its minimal DNF (empty: ``t`` is absent).

        For inspection by the data holder. On a relation in formula form the DNF is expanded
        here (it can be exponentially large); the mechanism never uses this expansion.
        """
        return self._materialise().get(tuple(t), frozenset())

    def annotation(self, t: tuple[Any, ...]) -> str:
        """The annotation of ``t`` as text, e.g. ``'a ∧ b ∧ (c ∨ d)'`` is shown as DNF."""
        dnf = self.dnf(t)
        if not dnf:
            return "False"
        parts = [" ∧ ".join(sorted(map(str, c))) for c in dnf]
        parts.sort()
        if len(parts) == 1:
            return parts[0]
        return " ∨ ".join(f"({p})" if "∧" in p else p for p in parts)

    @property
    def participants(self) -> list[Hashable]:
        """Participants occurring in some annotation (withdrawing anyone else changes nothing)."""
        if self._compiled is not None and not self._rows and self._compiled.labels is not None:
            return list(self._compiled.labels)
        seen: dict[Hashable, None] = {}
        for dnf in self._materialise().values():
            for c in dnf:
                for p in c:
                    seen.setdefault(p, None)
        return list(seen)

    # -- positive relational algebra -----------------------------------------------------------
    # Every operator first decides the form of its result from public facts only (the rules and
    # clause bounds of its inputs, its own declared parameters), then builds it.
    def union(self, other: KRelation) -> KRelation:
        """``R1 ∪ R2``: annotations ``R1(t) ∨ R2(t)``; both must have the same columns.

        Clause bound: the sum of the inputs' bounds.
        """
        _require(other)
        if other.columns != self.columns:
            raise InvalidParameterError(
                f"union needs the same columns, got {self.columns} and {other.columns}"
            )
        rule, maxc = _plan(self, other)
        bound = self.clause_bound + other.clause_bound
        dnf = _dnf_chosen(rule, bound, maxc)
        acc: dict[tuple[Any, ...], set[Any]] = {}
        for rel in (self, other):
            for t, ann in _view(rel, dnf).items():
                acc.setdefault(t, set()).update(ann if dnf else ann[1])
        return _make(dnf, self.columns, _close(acc, dnf), rule, bound, maxc)

    def project(self, columns: Sequence[str], *, max_fanin: int | None = None) -> KRelation:
        """``π_columns R``: the ∨ of the annotations of all tuples that project to the same row.

        ``max_fanin``: a *public* bound on how many input tuples project to one row. It only
        sets the clause bound of the result (``max_fanin ×`` the input's; without it the bound
        is infinite unless every column is kept) and so the form under ``form="auto"``; it is
        never checked against the data (see :meth:`from_records`).
        """
        cols = tuple(columns)
        idx = [self._index(c) for c in cols]
        fanin = _check_fanin(max_fanin)
        bound = self.clause_bound * (1.0 if set(cols) >= set(self.columns) else fanin)
        rule, maxc = self.form_rule, self.max_clauses
        dnf = _dnf_chosen(rule, bound, maxc)
        acc: dict[tuple[Any, ...], set[Any]] = {}
        for t, ann in _view(self, dnf).items():
            acc.setdefault(tuple(t[i] for i in idx), set()).update(ann if dnf else ann[1])
        return _make(dnf, cols, _close(acc, dnf), rule, bound, maxc)

    def select(self, predicate: Callable[[dict[str, Any]], bool] | Mapping[str, Any]) -> KRelation:
        """``σ R``: keep the tuples for which ``predicate(row_dict)`` is true (or that match a
        mapping column → value). The predicate must only look at the tuple itself."""
        pred: Callable[[dict[str, Any]], bool]
        if isinstance(predicate, Mapping):
            want = dict(predicate)
            for c in want:
                self._index(c)

            def pred(row: dict[str, Any]) -> bool:
                return all(row[c] == v for c, v in want.items())
        elif callable(predicate):
            pred = predicate
        else:
            raise InvalidTypeError(
                "predicate must be a callable(row_dict) -> bool or a mapping column -> value"
            )
        acc = {
            t: ann
            for t, ann in self._materialise().items()
            if pred(dict(zip(self.columns, t, strict=True)))
        }
        return self._new(self.columns, acc)

    def rename(self, mapping: Mapping[str, str]) -> KRelation:
        """``ρ R``: rename columns; annotations are unchanged."""
        for c in mapping:
            self._index(c)
        cols = tuple(mapping.get(c, c) for c in self.columns)
        return self._new(cols, self._materialise())

    def join(self, other: KRelation) -> KRelation:
        """``R1 ⋈ R2`` on the shared columns: annotations ``R1(t1) ∧ R2(t2)``.

        Clause bound: the product of the inputs' bounds (in DNF every clause of one side meets
        every clause of the other).
        """
        _require(other)
        rule, maxc = _plan(self, other)
        bound = self.clause_bound * other.clause_bound
        dnf = _dnf_chosen(rule, bound, maxc)
        shared = [c for c in self.columns if c in other.columns]
        extra = [c for c in other.columns if c not in self.columns]
        li = [self._index(c) for c in shared]
        ri = [other._index(c) for c in shared]
        xi = [other._index(c) for c in extra]
        index: dict[tuple[Any, ...], list[tuple[tuple[Any, ...], Any]]] = {}
        for t, ann in _view(other, dnf).items():
            index.setdefault(tuple(t[i] for i in ri), []).append((t, ann))
        acc: dict[tuple[Any, ...], set[Any]] = {}
        for t, ann in _view(self, dnf).items():
            for u, ann2 in index.get(tuple(t[i] for i in li), ()):
                row = t + tuple(u[i] for i in xi)
                if dnf:
                    acc.setdefault(row, set()).update(a | b for a in ann for b in ann2)
                else:
                    acc.setdefault(row, set()).add(_and([ann, ann2]))
        return _make(dnf, self.columns + tuple(extra), _close(acc, dnf), rule, bound, maxc)

    def _index(self, c: str) -> int:
        try:
            return self.columns.index(c)
        except ValueError:
            raise InvalidParameterError(f"no column {c!r}; columns are {self.columns}") from None

    # -- neighbours ----------------------------------------------------------------------------
    def withdraw(self, participant: Hashable) -> KRelation:
        """The neighbouring relation in which ``participant`` has withdrawn.

        Its tuples vanish; every other annotation is the old one with ``participant := False``,
        still in minimal DNF (the same form the builders produce on the data without it: the
        form, rule and clause bound do not change).
        """
        acc = {}
        for t, dnf in self._materialise().items():
            kept = frozenset(c for c in dnf if participant not in c)
            if kept:
                acc[t] = kept
        return self._new(self.columns, acc)

    # -- compile -------------------------------------------------------------------------------
    def compile(
        self,
        weights: Callable[[dict[str, Any]], float]
        | Sequence[float]
        | NDArray[Any]
        | str
        | None = None,
    ) -> Annotations:
        """The annotations as arrays, with the per-tuple weights q(t) (tuples of weight 0 dropped).

        ``weights``: None (count: q ≡ 1), a column name, a callable on the row dict, or an array
        aligned with :meth:`tuples`. Weights must be finite and ≥ 0 (split signed weights with
        :func:`fugu.graph.answer`).
        """
        if self._compiled is not None and not self._rows and weights is None:
            return self._compiled
        rows = self._materialise()
        w = _check_nonnegative(self._weights(weights))
        labels: dict[Hashable, int] = {}
        clause_vars: list[int] = []
        clause_lens: list[int] = []
        tuple_lens: list[int] = []
        tw: list[float] = []
        for (_t, dnf), wt in zip(rows.items(), w, strict=True):
            if wt == 0:
                continue
            tw.append(float(wt))
            tuple_lens.append(len(dnf))
            for c in sorted(dnf, key=_clause_key):
                clause_lens.append(len(c))
                clause_vars.extend(labels.setdefault(p, len(labels)) for p in sorted(c, key=repr))
        return Annotations(
            n_participants=len(labels),
            clause_ptr=np.concatenate([[0], np.cumsum(clause_lens, dtype=np.int64)]).astype(
                np.int64
            ),
            clause_vars=np.asarray(clause_vars, dtype=np.int64),
            tuple_ptr=np.concatenate([[0], np.cumsum(tuple_lens, dtype=np.int64)]).astype(np.int64),
            weights=np.asarray(tw, dtype=np.float64),
            labels=tuple(labels),
        )

    def _weights(self, weights: Any) -> NDArray[np.float64]:
        rows = self._materialise()
        n = len(rows)
        if weights is None:
            return np.ones(n)
        i = self._index(weights) if isinstance(weights, str) else -1
        try:
            if isinstance(weights, str):
                return np.asarray([_number(t[i]) for t in rows], dtype=np.float64)
            if callable(weights):
                return np.asarray(
                    [_number(weights(dict(zip(self.columns, t, strict=True)))) for t in rows],
                    dtype=np.float64,
                )
            arr = np.asarray(weights)
            if arr.dtype.kind in "USO":  # text, or objects that may be text: one by one
                arr = np.asarray([_number(v) for v in arr.reshape(-1)], dtype=np.float64)
            w = np.asarray(arr, dtype=np.float64).reshape(-1)
        except (TypeError, ValueError):
            # the offending value is private data: the message names the weights, not the value
            what = f"column {weights!r}" if isinstance(weights, str) else "weights"
            raise InvalidParameterError(
                f"the {what} of some tuple is not a number; q(t) must be a finite number >= 0 "
                f"for every tuple (clean the data, or give a callable that maps each row to one)"
            ) from None
        if w.size != n:
            raise InvalidParameterError(
                f"weights has {w.size} entries for {n} tuples (in the order of .tuples())"
            )
        return w


def _number(v: Any) -> float:
    """A weight as a float; text is not a number (Python's float() reads '1_0' as 10 and
    non-ASCII digits such as '٣' as 3, so a text column would be silently misread)."""
    if isinstance(v, str | bytes):
        raise TypeError("text is not a weight")
    return float(v)


def _clause_key(c: frozenset[Hashable]) -> tuple[int, str]:
    return (len(c), repr(sorted(map(repr, c))))


def _require(other: Any) -> None:
    if not isinstance(other, KRelation):
        raise InvalidTypeError(f"expected a KRelation, got {type(other).__name__}")


# -- general positive formulas (polynomial size) -------------------------------------------------
AND, OR = 0, 1


@dataclass(frozen=True)
class Formulas:
    """Compiled annotations kept as formulas: one tree of ∧/∨ gates per tuple (issue 18 part 1).

    Node ids ``0..n_participants-1`` are the participants; node ``n_participants + g`` is gate
    ``g``. Gate ``g`` has type ``gate_type[g]`` (:data:`AND` or :data:`OR`) and children
    ``child[child_ptr[g]:child_ptr[g+1]]`` (node ids; every child gate has a smaller index, so
    the gate order is topological). Tuple ``t`` has root node ``root[t]`` and weight
    ``weights[t] > 0``; no gate is shared between tuples. The linear programs get one column per
    gate (the standard polynomial encoding), so a join of unions costs its formula's length, not
    the size of its DNF. φ is the paper's relaxation: ∧ → max(0, Σ − (m − 1)), ∨ → max.

    Why neighbours stay φ-equivalent without a canonical form: see the module docstring of
    :mod:`fugu.graph.krelation` (section "Formula form").
    """

    n_participants: int
    gate_type: NDArray[np.int8]
    child_ptr: NDArray[np.int64]
    child: NDArray[np.int64]
    root: NDArray[np.int64]
    weights: NDArray[np.float64]
    labels: tuple[Any, ...] | None = None

    # -- construction -----------------------------------------------------------------------
    @staticmethod
    def from_clauses(
        tuples: Sequence[Sequence[Sequence[int]]],
        kind: str,
        n_participants: int,
        weights: Sequence[float] | None = None,
        labels: Sequence[Any] | None = None,
    ) -> Formulas:
        """Tuples given as CNF (``kind="cnf"``: ∧ of ∨-clauses) or DNF (``"dnf"``: ∨ of
        ∧-clauses) over participant indices; each tuple is a list of clauses.

        >>> f = Formulas.from_clauses([[[0, 1], [1, 2]]], "cnf", 3)   # (p0 ∨ p1) ∧ (p1 ∨ p2)
        >>> f.evaluate(np.array([1.0, 0.0, 1.0])).tolist()
        [1.0]
        """
        if kind not in ("cnf", "dnf"):
            raise InvalidParameterError(f"kind must be 'cnf' or 'dnf', got {kind!r}")
        inner, outer = (OR, AND) if kind == "cnf" else (AND, OR)
        types: list[int] = []
        ptr = [0]
        kids: list[int] = []
        roots: list[int] = []
        n = int(n_participants)
        for clauses in tuples:
            tops = []
            for c in clauses:
                vs = sorted({int(v) for v in c})
                if not vs or min(vs) < 0 or max(vs) >= n:
                    raise InvalidParameterError(
                        f"clause {list(c)!r} must name participants 0..{n - 1}"
                    )
                if len(vs) == 1:
                    tops.append(vs[0])
                    continue
                types.append(inner)
                kids.extend(vs)
                ptr.append(len(kids))
                tops.append(n + len(types) - 1)
            if not tops:
                raise InvalidParameterError("every tuple needs at least one clause")
            if len(tops) == 1:
                roots.append(tops[0])
                continue
            types.append(outer)
            kids.extend(tops)
            ptr.append(len(kids))
            roots.append(n + len(types) - 1)
        w = np.ones(len(roots)) if weights is None else np.asarray(weights, dtype=np.float64)
        return Formulas(
            n_participants=n,
            gate_type=np.asarray(types, dtype=np.int8),
            child_ptr=np.asarray(ptr, dtype=np.int64),
            child=np.asarray(kids, dtype=np.int64),
            root=np.asarray(roots, dtype=np.int64),
            weights=w,
            labels=None if labels is None else tuple(labels),
        )

    # -- sizes ----------------------------------------------------------------------------------
    @property
    def n_tuples(self) -> int:
        return int(self.root.size)

    @property
    def n_gates(self) -> int:
        return int(self.gate_type.size)

    @property
    def size(self) -> int:
        """Total formula length L (the LP has O(L) rows and columns)."""
        return int(self.child.size)

    def total(self) -> float:
        return float(self.weights.sum())

    # -- structure helpers ------------------------------------------------------------------------
    def _levels(self) -> list[NDArray[np.int64]]:
        """Gates grouped by height (leaves 0): every child of a level-ℓ gate has a lower level."""
        n = self.n_participants
        height = np.zeros(n + self.n_gates, np.int64)
        lens = np.diff(self.child_ptr)
        parent = np.repeat(np.arange(self.n_gates), lens)
        # child gates have smaller indices: one pass in index order, vectorised by rounds
        h = np.zeros(self.n_gates, np.int64)
        while True:
            kid_h = np.where(self.child >= n, h[np.maximum(self.child - n, 0)] + 1, 1)
            new = np.zeros(self.n_gates, np.int64)
            if self.n_gates:
                np.maximum.at(new, parent, kid_h)
            if np.array_equal(new, h):
                break
            h = new
        height[n:] = h
        order = np.argsort(h, kind="stable")
        bounds = np.flatnonzero(np.diff(h[order])) + 1
        return [g for g in np.split(order, bounds) if g.size]

    def gate_tuple(self) -> NDArray[np.int64]:
        """The tuple every gate belongs to (gates are not shared)."""
        n = self.n_participants
        owner = np.full(self.n_gates, -1, np.int64)
        is_gate = self.root >= n
        owner[self.root[is_gate] - n] = np.flatnonzero(is_gate)
        lens = np.diff(self.child_ptr)
        parent = np.repeat(np.arange(self.n_gates), lens)
        sel = self.child >= n
        kid, par = self.child[sel] - n, parent[sel]
        for _ in range(self.n_gates + 1):  # parents have larger indices: propagate downwards
            before = owner.copy()
            owner[kid] = np.where(owner[par] >= 0, owner[par], owner[kid])
            if np.array_equal(before, owner):
                break
        return owner

    # -- φ ----------------------------------------------------------------------------------------
    def node_values(self, f: NDArray[np.float64]) -> NDArray[np.float64]:
        """φ of every node (participants first, then gates) at presence ``f``."""
        n = self.n_participants
        v = np.empty(n + self.n_gates)
        v[:n] = f
        lens = np.diff(self.child_ptr)
        for gates in self._levels():
            starts = self.child_ptr[gates]
            m = lens[gates]
            kv = v[self.child[concatenated_ranges(starts, m)]]
            offs = np.concatenate([[0], np.cumsum(m)[:-1]])
            sums = np.add.reduceat(kv, offs)
            maxs = np.maximum.reduceat(kv, offs)
            is_and = self.gate_type[gates] == AND
            v[n + gates] = np.where(is_and, np.maximum(0.0, sums - (m - 1)), maxs)
        return v

    def evaluate(self, f: NDArray[np.float64]) -> NDArray[np.float64]:
        """φ_{R(t)}(f) for every tuple."""
        if not self.n_tuples:
            return np.zeros(0)
        return np.asarray(self.node_values(np.asarray(f, np.float64))[self.root], np.float64)

    def truth(self, present: NDArray[np.bool_]) -> NDArray[np.bool_]:
        return self.evaluate(present.astype(np.float64)) > 0.5

    # -- φ-sensitivities -------------------------------------------------------------------------
    def sensitivity_pairs(self) -> tuple[NDArray[np.int64], NDArray[np.int64], NDArray[np.float64]]:
        """(tuple, participant, S_{R(t),p}) for every participant in every tuple's formula.

        S of the paper's eq. 17: a leaf p has S = 1 for p; ∧ adds its children's S, ∨ takes the
        maximum (spec 5.4). Computed level by level over (gate, participant) pairs.
        """
        n = self.n_participants
        lens = np.diff(self.child_ptr)
        parent = np.repeat(np.arange(self.n_gates), lens)
        # pairs[g] as arrays: gate ids, participants, values (only for gates already done)
        pg = np.zeros(0, np.int64)
        pp = np.zeros(0, np.int64)
        ps = np.zeros(0)
        for gates in self._levels():
            mark = np.zeros(self.n_gates, bool)
            mark[gates] = True
            sel = mark[parent]
            kids, pars = self.child[sel], parent[sel]
            leaf = kids < n
            g_parts = [pars[leaf]]
            p_parts = [kids[leaf]]
            s_parts = [np.ones(int(leaf.sum()))]
            sub_kids, sub_pars = kids[~leaf] - n, pars[~leaf]
            if sub_kids.size and pg.size:
                order = np.argsort(pg, kind="stable")
                spg, spp, sps = pg[order], pp[order], ps[order]
                lo = np.searchsorted(spg, sub_kids, "left")
                hi = np.searchsorted(spg, sub_kids, "right")
                cnt = hi - lo
                rep = np.repeat(np.arange(sub_kids.size), cnt)
                pos = concatenated_ranges(lo, cnt)
                g_parts.append(sub_pars[rep])
                p_parts.append(spp[pos])
                s_parts.append(sps[pos])
            g_all = np.concatenate(g_parts)
            p_all = np.concatenate(p_parts)
            s_all = np.concatenate(s_parts)
            key = g_all * np.int64(max(n, 1)) + p_all
            uk, inv = np.unique(key, return_inverse=True)
            gk = uk // max(n, 1)
            is_and = self.gate_type[gk] == AND
            sums = np.bincount(inv, weights=s_all, minlength=uk.size)
            maxs = np.zeros(uk.size)
            np.maximum.at(maxs, inv, s_all)
            pg = np.concatenate([pg, gk])
            pp = np.concatenate([pp, uk % max(n, 1)])
            ps = np.concatenate([ps, np.where(is_and, sums, maxs)])
        # per tuple: the root's pairs
        t_parts = [np.flatnonzero(self.root < n)]
        p_out = [self.root[self.root < n]]
        s_out = [np.ones(t_parts[0].size)]
        gate_roots = np.flatnonzero(self.root >= n)
        if gate_roots.size and pg.size:
            root_of_gate = np.full(self.n_gates, -1, np.int64)
            root_of_gate[self.root[gate_roots] - n] = gate_roots
            keep = root_of_gate[pg] >= 0
            t_parts.append(root_of_gate[pg[keep]])
            p_out.append(pp[keep])
            s_out.append(ps[keep])
        return (np.concatenate(t_parts), np.concatenate(p_out), np.concatenate(s_out))

    def incidence(self) -> tuple[NDArray[np.int64], NDArray[np.int64]]:
        t, p, _ = self.sensitivity_pairs()
        return t, p

    def impact(self) -> NDArray[np.float64]:
        """Σ_t q(t) S_{R(t),p} per participant (G_{|P|}/2, the closed form of spec 5.5)."""
        t, p, s = self.sensitivity_pairs()
        return np.asarray(
            np.bincount(p, weights=self.weights[t] * s, minlength=self.n_participants),
            dtype=np.float64,
        )

    # -- neighbours ----------------------------------------------------------------------------
    def restrict(self, keep: NDArray[np.bool_]) -> Formulas:
        """The formulas when only participants with ``keep[p]`` take part: withdrawn participants
        become False and False is removed by the φ-invariant rules only (x ∨ False → x,
        x ∧ False → False); unary gates are kept, nothing else is rewritten."""
        n = self.n_participants
        lens = np.diff(self.child_ptr)
        parent = np.repeat(np.arange(self.n_gates), lens)
        false = np.zeros(n + self.n_gates, bool)
        false[:n] = ~np.asarray(keep, bool)
        for gates in self._levels():
            mark = np.zeros(self.n_gates, bool)
            mark[gates] = True
            sel = mark[parent]
            kf = false[self.child[sel]].astype(np.int64)
            n_false = np.bincount(parent[sel], weights=kf, minlength=self.n_gates)[gates]
            is_and = self.gate_type[gates] == AND
            false[n + gates] = np.where(is_and, n_false > 0, n_false == lens[gates])
        tuple_ok = ~false[self.root]
        # gates reachable from kept roots through non-False nodes (False children of ∨ dropped)
        reach = np.zeros(self.n_gates, bool)
        r = self.root[tuple_ok]
        reach[r[r >= n] - n] = True
        for gates in reversed(self._levels()):
            g = gates[reach[gates]]
            if not g.size:
                continue
            m = lens[g]
            kids = self.child[concatenated_ranges(self.child_ptr[g], m)]
            ok = (kids >= n) & ~false[kids]
            reach[kids[ok] - n] = True
        child_ok = ~false[self.child] & reach[parent]
        kept_kids = self.child[child_ok]
        used = np.zeros(n, bool)
        used[kept_kids[kept_kids < n]] = True
        rl = self.root[tuple_ok]
        used[rl[rl < n]] = True
        new_p = np.cumsum(used) - 1
        new_g = np.cumsum(reach) - 1
        n_new = int(used.sum())

        def remap(ids: NDArray[np.int64]) -> NDArray[np.int64]:
            return np.where(ids < n, new_p[np.minimum(ids, n - 1)], n_new + new_g[ids - n])

        new_lens = np.bincount(parent[child_ok], minlength=self.n_gates)[reach]
        return Formulas(
            n_participants=n_new,
            gate_type=self.gate_type[reach],
            child_ptr=np.concatenate([[0], np.cumsum(new_lens)]).astype(np.int64),
            child=remap(kept_kids).astype(np.int64),
            root=remap(self.root[tuple_ok]).astype(np.int64),
            weights=self.weights[tuple_ok],
            labels=_kept_labels(self.labels, used),
        )

    def withdraw(self, p: int) -> Formulas:
        keep = np.ones(self.n_participants, bool)
        keep[p] = False
        return self.restrict(keep)


# -- K-relations in formula form ---------------------------------------------------------------
#: A formula node: ("v", p) a participant, ("and", (child, ...)), ("or", frozenset(children)).
Node = tuple[Any, ...]


def _and(children: Sequence[Node]) -> Node:
    return ("and", tuple(children))


def _or(children: Iterable[Node]) -> Node:
    return ("or", frozenset(children))


def _record_node(owners: Iterable[Hashable]) -> Node:
    leaves = sorted({("v", p) for p in owners}, key=repr)
    if not leaves:
        raise InvalidParameterError("a record needs at least one owner")
    return leaves[0] if len(leaves) == 1 else _and(leaves)


def _substitute(node: Node, gone: Hashable, memo: dict[int, Node | None]) -> Node | None:
    """``node`` with ``gone := False``, simplified by x ∨ False → x and x ∧ False → False only
    (None is False). Unary gates are kept: collapsing them is φ-invariant but would change the
    structure later operators see; keeping the plan's structure is what the privacy argument uses.
    """
    key = id(node)
    if key in memo:
        return memo[key]
    kind = node[0]
    out: Node | None
    if kind == "v":
        out = None if node[1] == gone else node
    elif kind == "and":
        kids = [_substitute(c, gone, memo) for c in node[1]]
        out = None if any(k is None for k in kids) else _and([k for k in kids if k is not None])
    else:
        kept = [k for k in (_substitute(c, gone, memo) for c in node[1]) if k is not None]
        out = _or(kept) if kept else None
    memo[key] = out
    return out


def _render(node: Node) -> str:
    """The formula as text: nested gates of the same kind shown flat (associativity is
    φ-invariant), a multi-child gate of the other kind in parentheses; unary gates are
    transparent. For display only."""
    return _render_kind(node)[0]


def _render_kind(node: Node) -> tuple[str, str]:
    """(text, kind of the top operator: "v", "and" or "or")."""
    if node[0] == "v":
        return str(node[1]), "v"
    kids = [_render_kind(c) for c in node[1]]
    if len(kids) == 1:
        return kids[0]
    kind = node[0]
    parts = sorted(text if k in ("v", kind) else f"({text})" for text, k in kids)
    return (" ∧ " if kind == "and" else " ∨ ").join(parts), kind


class FormulaRelation(KRelation):
    """A sensitive K-relation whose annotations are kept as formulas.

    Produced by :meth:`KRelation.from_records` and the positive relational algebra when the
    query's form is ``"formula"``, or ``"auto"`` beyond the public clause threshold. Every
    operator adds gates exactly as the K-relation semantics say (a union or a projection adds an
    ∨ over the merged annotations, a join an ∧ of the two), so a join of unions costs the length
    of its formula instead of the size of its DNF, and nothing is ever refused for its size. See
    the module docstring (section "Formula form") for why the withdrawal of a participant keeps
    neighbours φ-equivalent.
    """

    form = "formula"

    def __init__(
        self,
        columns: Sequence[str],
        rows: Mapping[tuple[Any, ...], Node] | None = None,
        *,
        max_clauses: int = MAX_CLAUSES,
    ) -> None:
        super().__init__(columns, max_clauses=max_clauses)
        self.form_rule = "formula"
        self._nodes: dict[tuple[Any, ...], Node] = {}
        for t, node in (rows or {}).items():
            t = tuple(t)
            if len(t) != len(self.columns):
                raise InvalidParameterError(
                    f"tuple {t!r} has {len(t)} values for columns {self.columns}"
                )
            self._nodes[t] = node

    def _materialise(self) -> dict[tuple[Any, ...], Any]:
        return self._nodes

    def __len__(self) -> int:
        return len(self._nodes)

    def dnf(self, t: tuple[Any, ...]) -> frozenset[frozenset[Hashable]]:
        node = self._nodes.get(tuple(t))
        return frozenset() if node is None else _node_dnf(node, {})

    def annotation(self, t: tuple[Any, ...]) -> str:
        node = self._nodes.get(tuple(t))
        return "False" if node is None else _render(node)

    @property
    def participants(self) -> list[Hashable]:
        seen: dict[Hashable, None] = {}
        stack = list(self._nodes.values())
        done: set[int] = set()
        while stack:
            node = stack.pop()
            if id(node) in done:
                continue
            done.add(id(node))
            if node[0] == "v":
                seen.setdefault(node[1], None)
            else:
                stack.extend(node[1])
        return list(seen)

    def withdraw(self, participant: Hashable) -> KRelation:
        memo: dict[int, Node | None] = {}
        acc = {}
        for t, node in self._nodes.items():
            new = _substitute(node, participant, memo)
            if new is not None:
                acc[t] = new
        return self._new(self.columns, acc)

    def compile(self, weights: Any = None) -> Formulas:  # type: ignore[override]
        """The formulas as arrays (one gate tree per tuple, unary gates collapsed, which is
        φ-invariant), with the per-tuple weights q(t) (tuples of weight 0 dropped)."""
        w = _check_nonnegative(self._weights(weights))
        labels: dict[Hashable, int] = {}
        types: list[int] = []
        kids: list[int] = []
        ptr = [0]
        roots: list[int] = []
        tw: list[float] = []
        pending: list[tuple[int, list[int]]] = []  # gates are numbered after all leaves are known

        def emit(node: Node) -> int:
            """Returns a node code: participant index p as ~p (negative), gate g as g >= 0."""
            kind = node[0]
            if kind == "v":
                return ~labels.setdefault(node[1], len(labels))
            codes = [emit(c) for c in node[1]]
            if len(codes) == 1:
                return codes[0]
            gate = len(pending)
            pending.append((AND if kind == "and" else OR, codes))
            return gate

        for (_t, node), wt in zip(self._nodes.items(), w, strict=True):
            if wt == 0:
                continue
            tw.append(float(wt))
            roots.append(emit(node))
        n = len(labels)

        def node_id(code: int) -> int:
            return ~code if code < 0 else n + code

        for gtype, codes in pending:
            types.append(gtype)
            kids.extend(node_id(c) for c in codes)
            ptr.append(len(kids))
        return Formulas(
            n_participants=n,
            gate_type=np.asarray(types, dtype=np.int8),
            child_ptr=np.asarray(ptr, dtype=np.int64),
            child=np.asarray(kids, dtype=np.int64),
            root=np.asarray([node_id(r) for r in roots], dtype=np.int64),
            weights=np.asarray(tw, dtype=np.float64),
            labels=tuple(labels),
        )


def _check_max_clauses(v: Any) -> int:
    if isinstance(v, bool) or not isinstance(v, int | np.integer) or v < 1:
        raise InvalidParameterError(f"max_clauses must be an integer >= 1, got {v!r}")
    return int(v)


def _check_fanin(v: Any, name: str = "max_fanin") -> float:
    """A declared public bound as a float (inf when not declared)."""
    if v is None:
        return math.inf
    if isinstance(v, bool) or not isinstance(v, int | np.integer) or v < 1:
        raise InvalidParameterError(
            f"{name} must be an integer >= 1 (a public bound) or None, got {v!r}"
        )
    return float(v)


def _check_not_true(t: tuple[Any, ...], dnf: frozenset[frozenset[Hashable]]) -> None:
    if frozenset() in dnf:
        raise InvalidParameterError(
            f"tuple {t!r} is annotated True (present whoever withdraws): public tuples make "
            f"H_0 ≠ 0 (spec 8.1(2)); give it an owner or add its contribution outside the "
            f"mechanism"
        )


def _plan(a: KRelation, b: KRelation) -> tuple[str, int]:
    """The rule and threshold of a binary operator's result, from its inputs' public settings.

    Mixing ``"dnf"`` and ``"formula"`` is refused (the caller asked for two forms in one query);
    ``"dnf"`` or ``"formula"`` combined with ``"auto"`` wins; the threshold is the smaller one.
    """
    rules = {a.form_rule, b.form_rule}
    if {"dnf", "formula"} <= rules:
        raise InvalidParameterError(
            "one relation asks for form='dnf' and the other for form='formula': the form is a "
            "public choice made once for a whole query (build every base relation with the same "
            "form=, or use the default form='auto')"
        )
    rule = "dnf" if "dnf" in rules else "formula" if "formula" in rules else "auto"
    return rule, min(a.max_clauses, b.max_clauses)


def _dnf_chosen(rule: str, bound: float, max_clauses: int) -> bool:
    """The form decision: a function of public values only (never of the data)."""
    return rule == "dnf" or (rule == "auto" and bound <= max_clauses)


def _make(
    dnf: bool,
    columns: Sequence[str],
    rows: Mapping[tuple[Any, ...], Any],
    rule: str,
    bound: float,
    max_clauses: int,
) -> KRelation:
    rel: KRelation = (
        KRelation(columns, rows, max_clauses=max_clauses)
        if dnf
        else FormulaRelation(columns, rows, max_clauses=max_clauses)
    )
    rel.form_rule, rel.clause_bound = rule, bound
    return rel


def _view(rel: KRelation, dnf: bool) -> dict[tuple[Any, ...], Any]:
    """``rel``'s annotations in the form an operator decided on: minimal DNF (clause sets) or
    formulas (every root an ∨ gate). A DNF relation becomes ``∨(∧ clause, …)`` — the unary ∨
    of a one-clause tuple kept — which commutes with withdrawal (module docstring); a formula
    relation is expanded to its minimal DNF only under ``form="dnf"`` or a form='dnf' input."""
    rows = rel._materialise()
    if dnf == (rel.form == "dnf"):
        return rows
    if dnf:
        memo: dict[int, frozenset[frozenset[Hashable]]] = {}
        return {t: _node_dnf(node, memo) for t, node in rows.items()}
    return {t: _or(_record_node(c) for c in clauses) for t, clauses in rows.items()}


def _close(acc: dict[tuple[Any, ...], set[Any]], dnf: bool) -> dict[tuple[Any, ...], Any]:
    """Collected clause sets (DNF, minimised by the constructor) or ∨ children (formula)."""
    return acc if dnf else {t: _or(kids) for t, kids in acc.items()}


def _node_dnf(node: Node, memo: dict[int, frozenset[frozenset[Hashable]]]) -> DNF:
    """The minimal DNF of a formula (can be exponentially large: for inspection and for
    ``form="dnf"`` plans that combine a formula input)."""
    key = id(node)
    if key in memo:
        return memo[key]
    kind = node[0]
    out: frozenset[frozenset[Hashable]]
    if kind == "v":
        out = frozenset({frozenset({node[1]})})
    elif kind == "or":
        out = minimal_dnf(c for kid in node[1] for c in _node_dnf(kid, memo))
    else:
        acc: frozenset[frozenset[Hashable]] = frozenset({frozenset()})
        for kid in node[1]:
            acc = minimal_dnf(a | b for a in acc for b in _node_dnf(kid, memo))
        out = acc
    memo[key] = out
    return out


def _check_nonnegative(w: NDArray[np.float64]) -> NDArray[np.float64]:
    """Weights q(t) of a linear statistic: finite and >= 0 (the Recursive Mechanism's setting)."""
    if w.size and (not np.all(np.isfinite(w)) or np.any(w < 0)):
        raise InvalidParameterError(
            "weights must be finite and >= 0; for signed weights use fugu.graph.answer(..., "
            "split_signed=True), which answers the positive and negative parts separately"
        )
    return w
