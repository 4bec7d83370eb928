"""Sensitive K-relations: tuples annotated with positive Boolean expressions over participants.

A *sensitive K-relation* (Chen and Zhou, "Recursive Mechanism", SIGMOD 2013, seed ``002_…``,
Sec. 2.4 and Def. 14) maps each tuple to a positive Boolean expression (only ∧, ∨, True, False)
over *participants* (people, nodes, edges): the tuple is present exactly when the expression is
true with ``p := p has not withdrawn``. The positive relational algebra (union, projection,
selection, natural join, renaming) acts on annotations by the K-relation rules:

* union and projection: ``R1(t) ∨ R2(t)`` (∨ over all input tuples that project to ``t``);
* natural join: ``R1(t1) ∧ R2(t2)``;
* selection keeps an annotation or drops the tuple; renaming leaves it alone.

**Canonical form (a privacy requirement).** The efficient Recursive Mechanism needs neighbouring
relations to carry *φ-equivalent* annotations (spec 8.1(1)): two truth-table-equal expressions
can relax to different functions φ, and a form chosen by the data would break Lemma 7. fugu keeps
every annotation as its **minimal DNF**: a set of clauses, each a set of distinct participants,
none a subset of another. For a monotone Boolean function this set (its minimal true sets) is
unique, so the form depends only on the tuple's truth table, never on how or in which order it was
built. When ``p`` withdraws, the minimal DNF of the restricted function is the old one without the
clauses that mention ``p`` — exactly ``R(t)|p→False`` after the φ-invariant rewrites of the paper
(identity, annihilator, absorption). So neighbours stay φ-equivalent by construction
(:meth:`KRelation.withdraw` is that neighbour, and the tests check it).

The price: a join of unions expands into DNF (at most ``max_clauses`` clauses per tuple; beyond
that fugu refuses rather than switch to another form, which would be data-dependent).
Duplicate participants inside a clause collapse (``a∧b ∧ b∧c`` → ``a∧b∧c``), which gives the better
φ-sensitivity the paper uses for triangles (Fig. 2(a)).

**Formula form** (``from_records(..., form="formula")``, :class:`FormulaRelation`, compiled to
:class:`Formulas`): annotations are the K-relation formulas themselves, with one LP column per ∧/∨
gate (spec 5.6), so a join of unions costs the length of its formula, never the size of its DNF,
and no annotation is ever refused (nothing about representability depends on the data). The form
is a public choice made for a whole query, never per tuple. Why this is private although
truth-table-equal formulas can have different φ (spec 8.1(1)):

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
that many times in S_{R(t),p} (a triangle built by a self-join has S = 2 per node instead of 1),
so minimal DNF (the default) stays the form for conjunctive queries and subgraph patterns.
The tests check the claim on random plans (the relation built without p's records is φ-equal to
the withdrawal) and Lemma 7 (|X(D1) − X(D2)| ≤ Δ̂) on random CNF/DNF relations for every single
withdrawal.

Example
-------
>>> from fugu.graph import KRelation
>>> friends = KRelation.from_records(
...     [{"a": 1, "b": 2}, {"a": 1, "b": 3}, {"a": 2, "b": 3}], owners=["a", "b"])
>>> len(friends), friends.annotation((1, 2))
(3, '1 ∧ 2')
>>> fof = friends.rename({"b": "c"}).join(friends.rename({"a": "c"})).project(["a", "b"])
>>> fof.annotation((1, 3))
'1 ∧ 2 ∧ 3'
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import NDArray

from ..errors import EmptyDataError, InvalidParameterError, InvalidTypeError

__all__ = ["KRelation", "Annotations", "minimal_dnf", "MAX_CLAUSES"]

Clause = frozenset  # a set of participants that must all be present
DNF = frozenset  # a set of clauses; empty = False

#: Default limit on the number of clauses of one annotation (joins of unions expand into DNF).
MAX_CLAUSES = 4096


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
        labels = (
            None
            if self.labels is None
            else tuple(lab for lab, u in zip(self.labels, used, strict=True) if u)
        )
        return Annotations(
            n_participants=int(used.sum()),
            clause_ptr=np.concatenate([[0], np.cumsum(new_lens)]).astype(np.int64),
            clause_vars=newid[kept_vars].astype(np.int64),
            tuple_ptr=np.concatenate([[0], np.cumsum(per_tuple[tuple_ok])]).astype(np.int64),
            weights=self.weights[tuple_ok],
            labels=labels,
        )

    def withdraw(self, p: int) -> Annotations:
        """The neighbour without participant ``p`` (an index)."""
        keep = np.ones(self.n_participants, bool)
        keep[p] = False
        return self.restrict(keep)


def _records(data: Any) -> list[dict[str, Any]]:
    """Rows of a list of dicts, a dict of columns, a pandas or a Polars DataFrame."""
    mod = type(data).__module__
    if mod.startswith("pandas"):
        return list(data.to_dict("records"))
    if mod.startswith("polars"):
        return list(data.to_dicts())
    if isinstance(data, Mapping):
        cols = {k: list(v) for k, v in data.items()}
        lens = {len(v) for v in cols.values()}
        if len(lens) > 1:
            raise InvalidParameterError(f"columns have different lengths {sorted(lens)}")
        n = lens.pop() if lens else 0
        return [{k: v[i] for k, v in cols.items()} for i in range(n)]
    if isinstance(data, list | tuple):
        if not all(isinstance(r, Mapping) for r in data):
            raise InvalidTypeError("records must be dicts (column -> value)")
        return [dict(r) for r in data]
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


class KRelation:
    """A sensitive K-relation: tuples with positive Boolean annotations over participants.

    Build one with :meth:`from_records` (each base tuple names its owner or owners; jointly owned
    tuples are annotated with the ∧ of their owners) and combine relations with :meth:`union`,
    :meth:`project`, :meth:`select`, :meth:`join` and :meth:`rename`. Annotations are kept in
    minimal DNF (see the module docstring: this is what keeps neighbours φ-equivalent).
    Answer a linear statistic privately with :func:`fugu.graph.answer`.

    Parameters
    ----------
    columns : sequence of str
    rows : mapping tuple → iterable of clauses (each an iterable of participants)
    max_clauses : int
        Refuse annotations with more clauses than this (default :data:`MAX_CLAUSES`).
    """

    def __init__(
        self,
        columns: Sequence[str],
        rows: Mapping[tuple[Any, ...], Iterable[Iterable[Hashable]]] | None = None,
        *,
        max_clauses: int = MAX_CLAUSES,
    ) -> None:
        self.columns = tuple(str(c) for c in columns)
        if len(set(self.columns)) != len(self.columns):
            raise InvalidParameterError(f"column names must be distinct, got {self.columns}")
        self.max_clauses = int(max_clauses)
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
            self._check(t, dnf)
            if dnf:
                self._rows[t] = dnf

    def _check(self, t: tuple[Any, ...], dnf: frozenset[frozenset[Hashable]]) -> None:
        if frozenset() in dnf:
            raise InvalidParameterError(
                f"tuple {t!r} is annotated True (present whoever withdraws): public tuples make "
                f"H_0 ≠ 0 (spec 8.1(2)); give it an owner or add its contribution outside the "
                f"mechanism"
            )
        if len(dnf) > self.max_clauses:
            raise InvalidParameterError(
                f"the annotation of tuple {t!r} has {len(dnf)} clauses in minimal DNF, more than "
                f"max_clauses={self.max_clauses}. Build the query with form='formula' (annotations "
                f"kept as formulas, polynomial size, never refused), raise max_clauses, or reorder "
                f"the query so unions are taken after joins. Note: this refusal depends on the "
                f"data; form='formula' has none"
            )

    # -- construction ------------------------------------------------------------------------
    @classmethod
    def from_records(
        cls,
        data: Any,
        *,
        owners: str | Sequence[str],
        columns: Sequence[str] | None = None,
        max_clauses: int = MAX_CLAUSES,
        form: str = "dnf",
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
            The tuple's columns (default: all columns, owner columns included).
        form : {"dnf", "formula"}
            How annotations are kept, for this relation and everything built from it (a public
            choice for the whole query): ``"dnf"`` (default) minimal DNF — canonical, best
            sensitivities for conjunctive queries (subgraph patterns), but a join of unions
            expands and may exceed ``max_clauses``; ``"formula"`` — the K-relation formulas
            themselves (polynomial size, never refused; see the module docstring).

        Identical tuples are merged with ∨ (set semantics).
        """
        if form not in ("dnf", "formula"):
            raise InvalidParameterError(f"form must be 'dnf' or 'formula', got {form!r}")
        rows = _records(data)
        owner_cols = [owners] if isinstance(owners, str) else list(owners)
        if not owner_cols:
            raise InvalidParameterError("owners must name at least one column")
        if columns is None:
            columns = list(rows[0].keys()) if rows else list(owner_cols)
        cols = tuple(columns)
        acc: dict[tuple[Any, ...], set[frozenset[Hashable]]] = {}
        for i, r in enumerate(rows):
            try:
                t = tuple(r[c] for c in cols)
                clause = frozenset(p for c in owner_cols for p in _owner_values(r[c]))
            except KeyError as exc:
                raise InvalidParameterError(f"record {i} has no column {exc.args[0]!r}") from None
            acc.setdefault(t, set()).add(clause)
        if form == "formula":
            return FormulaRelation(
                cols, {t: _or(_record_node(c) for c in clauses) for t, clauses in acc.items()}
            )
        return cls(cols, acc, max_clauses=max_clauses)

    @classmethod
    def _from_conjunctions(
        cls, columns: Sequence[str], values: NDArray[Any], annotations: Annotations
    ) -> KRelation:
        """A relation with one conjunction per tuple, kept as arrays (pattern occurrences)."""
        rel = cls(columns)
        rel._compiled = annotations
        rel._values = values
        return rel

    def _materialise(self) -> dict[tuple[Any, ...], frozenset[frozenset[Hashable]]]:
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

    # -- inspection ----------------------------------------------------------------------------
    def __len__(self) -> int:
        if self._compiled is not None and not self._rows:
            return self._compiled.n_tuples
        return len(self._rows)

    def __repr__(self) -> str:
        return f"<KRelation columns={self.columns} tuples={len(self)}>"

    def tuples(self) -> list[tuple[Any, ...]]:
        """The support: every tuple with a non-False annotation."""
        return list(self._materialise())

    def dnf(self, t: tuple[Any, ...]) -> frozenset[frozenset[Hashable]]:
        """The annotation of ``t`` as a set of clauses (empty: ``t`` is absent)."""
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
    def _new(
        self, columns: Sequence[str], acc: Mapping[tuple[Any, ...], Iterable[Iterable[Hashable]]]
    ) -> KRelation:
        return KRelation(columns, acc, max_clauses=self.max_clauses)

    form = "dnf"

    def union(self, other: KRelation) -> KRelation:
        """``R1 ∪ R2``: annotations ``R1(t) ∨ R2(t)``; both must have the same columns."""
        _require_form(self, other)
        if other.columns != self.columns:
            raise InvalidParameterError(
                f"union needs the same columns, got {self.columns} and {other.columns}"
            )
        acc: dict[tuple[Any, ...], set[frozenset[Hashable]]] = {}
        for rel in (self, other):
            for t, dnf in rel._materialise().items():
                acc.setdefault(t, set()).update(dnf)
        return self._new(self.columns, acc)

    def project(self, columns: Sequence[str]) -> KRelation:
        """``π_columns R``: the ∨ of the annotations of all tuples that project to the same row."""
        cols = tuple(columns)
        idx = [self._index(c) for c in cols]
        acc: dict[tuple[Any, ...], set[frozenset[Hashable]]] = {}
        for t, dnf in self._materialise().items():
            acc.setdefault(tuple(t[i] for i in idx), set()).update(dnf)
        return self._new(cols, acc)

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
            t: dnf
            for t, dnf in self._materialise().items()
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
        """``R1 ⋈ R2`` on the shared columns: annotations ``R1(t1) ∧ R2(t2)`` (in minimal DNF)."""
        _require_form(self, other)
        shared = [c for c in self.columns if c in other.columns]
        extra = [c for c in other.columns if c not in self.columns]
        li = [self._index(c) for c in shared]
        ri = [other._index(c) for c in shared]
        xi = [other._index(c) for c in extra]
        index: dict[
            tuple[Any, ...], list[tuple[tuple[Any, ...], frozenset[frozenset[Hashable]]]]
        ] = {}
        for t, dnf in other._materialise().items():
            index.setdefault(tuple(t[i] for i in ri), []).append((t, dnf))
        acc: dict[tuple[Any, ...], set[frozenset[Hashable]]] = {}
        for t, dnf in self._materialise().items():
            for u, dnf2 in index.get(tuple(t[i] for i in li), ()):
                row = t + tuple(u[i] for i in xi)
                acc.setdefault(row, set()).update(a | b for a in dnf for b in dnf2)
        return self._new(self.columns + tuple(extra), acc)

    def _index(self, c: str) -> int:
        try:
            return self.columns.index(c)
        except ValueError:
            raise InvalidParameterError(f"no column {c!r}; columns are {self.columns}") from None

    # -- neighbours ----------------------------------------------------------------------------
    def withdraw(self, participant: Hashable) -> KRelation:
        """The neighbouring relation in which ``participant`` has withdrawn.

        Its tuples vanish; every other annotation is the old one with ``participant := False``,
        still in minimal DNF (the same form the builders produce on the data without it).
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
        if isinstance(weights, str):
            i = self._index(weights)
            return np.asarray([float(t[i]) for t in rows], dtype=np.float64)
        if callable(weights):
            return np.asarray(
                [float(weights(dict(zip(self.columns, t, strict=True)))) for t in rows],
                dtype=np.float64,
            )
        w = np.asarray(weights, dtype=np.float64).reshape(-1)
        if w.size != n:
            raise InvalidParameterError(
                f"weights has {w.size} entries for {n} tuples (in the order of .tuples())"
            )
        return w


def _clause_key(c: frozenset[Hashable]) -> tuple[int, str]:
    return (len(c), repr(sorted(map(repr, c))))


def _require(other: Any) -> None:
    if not isinstance(other, KRelation):
        raise InvalidTypeError(f"expected a KRelation, got {type(other).__name__}")


def require_nonempty(ann: Annotations) -> None:
    if ann.n_tuples == 0:
        raise EmptyDataError("the relation is empty: nothing to count")


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
            idx = np.repeat(starts, m) + (np.arange(int(m.sum())) - np.repeat(np.cumsum(m) - m, m))
            kv = v[self.child[idx]]
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
                pos = np.repeat(lo, cnt) + (
                    np.arange(int(cnt.sum())) - np.repeat(np.cumsum(cnt) - cnt, cnt)
                )
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
            idx = np.repeat(self.child_ptr[g], m) + (
                np.arange(int(m.sum())) - np.repeat(np.cumsum(m) - m, m)
            )
            kids = self.child[idx]
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
        labels = (
            None
            if self.labels is None
            else tuple(lab for lab, u in zip(self.labels, used, strict=True) if u)
        )
        return Formulas(
            n_participants=n_new,
            gate_type=self.gate_type[reach],
            child_ptr=np.concatenate([[0], np.cumsum(new_lens)]).astype(np.int64),
            child=remap(kept_kids).astype(np.int64),
            root=remap(self.root[tuple_ok]).astype(np.int64),
            weights=self.weights[tuple_ok],
            labels=labels,
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
    if node[0] == "v":
        return str(node[1])
    parts = sorted(_render(c) for c in node[1])
    if len(parts) == 1:
        return parts[0]
    sep = " ∧ " if node[0] == "and" else " ∨ "
    return sep.join(p if p.startswith("(") or (" " not in p) else f"({p})" for p in parts)


class FormulaRelation(KRelation):
    """A sensitive K-relation whose annotations are kept as formulas (``form="formula"``).

    Built with :meth:`KRelation.from_records` (``form="formula"``) and the same positive relational
    algebra; every operator adds gates exactly as the K-relation semantics say (a union or a
    projection adds an ∨ over the merged annotations, a join an ∧ of the two), so a join of unions
    costs the length of its formula instead of the size of its DNF, and nothing is ever refused for
    its size. See the module docstring (section "Formula form") for why the withdrawal of a
    participant keeps neighbours φ-equivalent.
    """

    form = "formula"

    def __init__(
        self, columns: Sequence[str], rows: Mapping[tuple[Any, ...], Node] | None = None
    ) -> None:
        super().__init__(columns)
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

    def __repr__(self) -> str:
        return f"<KRelation form=formula columns={self.columns} tuples={len(self)}>"

    def dnf(self, t: tuple[Any, ...]) -> frozenset[frozenset[Hashable]]:
        raise InvalidParameterError(
            "this relation keeps annotations as formulas (form='formula'); their DNF can be "
            "exponentially large. Use .annotation(t) for the formula"
        )

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

    def _new(self, columns: Sequence[str], acc: Mapping[tuple[Any, ...], Any]) -> KRelation:
        return FormulaRelation(columns, acc)

    def union(self, other: KRelation) -> KRelation:
        _require_form(self, other)
        if other.columns != self.columns:
            raise InvalidParameterError(
                f"union needs the same columns, got {self.columns} and {other.columns}"
            )
        acc: dict[tuple[Any, ...], set[Node]] = {}
        for rel in (self, other):
            for t, node in _nodes_of(rel).items():
                acc.setdefault(t, set()).update(node[1])
        return FormulaRelation(self.columns, {t: _or(kids) for t, kids in acc.items()})

    def project(self, columns: Sequence[str]) -> KRelation:
        cols = tuple(columns)
        idx = [self._index(c) for c in cols]
        acc: dict[tuple[Any, ...], set[Node]] = {}
        for t, node in self._nodes.items():
            acc.setdefault(tuple(t[i] for i in idx), set()).update(node[1])
        return FormulaRelation(cols, {t: _or(kids) for t, kids in acc.items()})

    def join(self, other: KRelation) -> KRelation:
        _require_form(self, other)
        shared = [c for c in self.columns if c in other.columns]
        extra = [c for c in other.columns if c not in self.columns]
        li = [self._index(c) for c in shared]
        ri = [other._index(c) for c in shared]
        xi = [other._index(c) for c in extra]
        index: dict[tuple[Any, ...], list[tuple[tuple[Any, ...], Node]]] = {}
        for t, node in _nodes_of(other).items():
            index.setdefault(tuple(t[i] for i in ri), []).append((t, node))
        acc: dict[tuple[Any, ...], set[Node]] = {}
        for t, node in self._nodes.items():
            for u, node2 in index.get(tuple(t[i] for i in li), ()):
                row = t + tuple(u[i] for i in xi)
                acc.setdefault(row, set()).add(_and([node, node2]))
        return FormulaRelation(self.columns + tuple(extra), {t: _or(k) for t, k in acc.items()})

    def withdraw(self, participant: Hashable) -> KRelation:
        memo: dict[int, Node | None] = {}
        acc = {}
        for t, node in self._nodes.items():
            new = _substitute(node, participant, memo)
            if new is not None:
                acc[t] = new
        return FormulaRelation(self.columns, acc)

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


def _nodes_of(rel: KRelation) -> dict[tuple[Any, ...], Node]:
    return rel._materialise()  # type: ignore[return-value]


def _require_form(a: KRelation, b: Any) -> None:
    _require(b)
    if getattr(b, "form", "dnf") != getattr(a, "form", "dnf"):
        raise InvalidParameterError(
            "both relations must have the same form ('dnf' or 'formula'): the form is a public "
            "choice made once for a whole query (build every base relation with the same form=)"
        )


def _check_nonnegative(w: NDArray[np.float64]) -> NDArray[np.float64]:
    """Weights q(t) of a linear statistic: finite and >= 0 (the Recursive Mechanism's setting)."""
    if w.size and (not np.all(np.isfinite(w)) or np.any(w < 0)):
        raise InvalidParameterError(
            "weights must be finite and >= 0; for signed weights use fugu.graph.answer(..., "
            "split_signed=True), which answers the positive and negative parts separately"
        )
    return w
