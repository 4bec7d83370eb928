"""Sensitive K-relations: annotation semantics (spec 1.4-1.5) and the canonical form (spec 8.1)."""

from __future__ import annotations

import itertools

import numpy as np
import pandas as pd
import polars as pl
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fugu.errors import InvalidParameterError
from fugu.graph import KRelation, minimal_dnf
from fugu.graph.krelation import Annotations


def edges_relation(edges: list[tuple[str, str]]) -> KRelation:
    """An undirected friendship table under node privacy: each edge owned by both ends."""
    rows = [{"x": a, "y": b} for a, b in edges] + [{"x": b, "y": a} for a, b in edges]
    return KRelation.from_records(rows, owners=["x", "y"])


def test_paper_fig2b_pairs_of_friends_with_a_common_friend() -> None:
    # b-c friends, common friends a and d: node privacy gives b ∧ c ∧ (a ∨ d) (as DNF).
    E = edges_relation([("a", "b"), ("a", "c"), ("b", "c"), ("b", "d"), ("c", "d")])
    common = (
        E.rename({"x": "u", "y": "w"})
        .join(E.rename({"x": "v", "y": "w"}))
        .join(E.rename({"x": "u", "y": "v"}))
        .project(["u", "v"])
    )
    assert common.dnf(("b", "c")) == frozenset({frozenset("abc"), frozenset("bcd")})
    assert common.annotation(("b", "c")) == "(a ∧ b ∧ c) ∨ (b ∧ c ∧ d)"
    # a and d are not friends and share b, c: a ∧ d is not needed since (a,d) is no edge
    assert common.dnf(("a", "d")) == frozenset()


def test_union_projection_selection_rename() -> None:
    r1 = KRelation.from_records([{"k": 1, "o": "p"}], owners="o", columns=["k"])
    r2 = KRelation.from_records([{"k": 1, "o": "q"}, {"k": 2, "o": "q"}], owners="o", columns=["k"])
    u = r1.union(r2)
    assert u.dnf((1,)) == frozenset({frozenset({"p"}), frozenset({"q"})})
    assert u.select({"k": 2}).tuples() == [(2,)]
    assert u.select(lambda row: row["k"] > 5).tuples() == []
    assert u.rename({"k": "key"}).columns == ("key",)
    with pytest.raises(InvalidParameterError, match="same columns"):
        u.union(u.rename({"k": "z"}))
    with pytest.raises(InvalidParameterError, match="no column"):
        u.project(["nope"])


def test_join_dedupes_participants_in_a_clause() -> None:
    # a triangle by self-join: (a∧b)∧(b∧c)∧(a∧c) must become a∧b∧c (S = 1, not 2)
    E = edges_relation([("a", "b"), ("b", "c"), ("a", "c")])
    tri = (
        E.rename({"x": "a", "y": "b"})
        .join(E.rename({"x": "b", "y": "c"}))
        .join(E.rename({"x": "a", "y": "c"}))
    )
    assert tri.dnf(("a", "b", "c")) == frozenset({frozenset("abc")})
    ann = tri.select(lambda r: r["a"] < r["b"] < r["c"]).compile()
    assert ann.n_tuples == 1 and ann.size == 3


def test_minimal_dnf_absorption_and_true_refused() -> None:
    assert minimal_dnf([{1}, {1, 2}]) == frozenset({frozenset({1})})
    with pytest.raises(InvalidParameterError, match="True"):
        KRelation(["a"], {(1,): [set()]})


def test_from_pandas_polars_and_joint_owners() -> None:
    df = pd.DataFrame({"trip": [1, 2], "who": [("ann", "bob"), "ann"], "km": [3.0, 4.0]})
    r = KRelation.from_records(df, owners="who")
    assert r.dnf((1, ("ann", "bob"), 3.0)) == frozenset({frozenset({"ann", "bob"})})
    r2 = KRelation.from_records(pl.DataFrame({"trip": [1], "who": ["x"]}), owners="who")
    assert r2.participants == ["x"]
    with pytest.raises(InvalidParameterError, match="missing"):
        KRelation.from_records([{"who": None}], owners="who")


def test_canonical_form_makes_spec_counterexample_phi_equal() -> None:
    # spec 8.1(1): (b1∨b2)∧(b1∨b3) and b1∨(b2∧b3) have the same truth table but different φ
    # as written; in DNF form fugu stores both as the same minimal DNF.
    a = KRelation(["t"], {(0,): [{"b1"}, {"b2"}]}, form="dnf").join(
        KRelation(["t"], {(0,): [{"b1"}, {"b3"}]}, form="dnf")
    )
    b = KRelation(["t"], {(0,): [{"b1"}, {"b2", "b3"}]}, form="dnf")
    assert a.form == "dnf"
    assert a.dnf((0,)) == b.dnf((0,))
    ann = a.compile()
    f = np.full(ann.n_participants, 0.5)
    assert ann.evaluate(f)[0] == pytest.approx(0.5)


# -- φ invariance of the canonical form under withdrawal (a privacy requirement) ----------------
PEOPLE = ["p0", "p1", "p2", "p3", "p4"]


def _build(tables: list[list[tuple[int, int, str]]], drop: str | None) -> KRelation:
    """A fixed positive-RA query over three base tables built from the data without ``drop``."""
    rels = []
    for i, rows in enumerate(tables):
        recs = [{"a": a, "b": b, "o": o} for a, b, o in rows if o != drop]
        r = (
            KRelation.from_records(recs, owners="o", columns=["a", "b"])
            if recs
            else KRelation(["a", "b"])
        )
        rels.append(r.rename({"a": f"c{i}", "b": f"c{i + 1}"}))
    q = (
        rels[0]
        .join(rels[1])
        .project(["c0", "c2"])
        .rename({"c2": "c1"})
        .union(rels[0].project(["c0", "c1"]))
    )
    return q.rename({"c1": "c2"}).join(rels[2]).project(["c0"])


row = st.tuples(st.integers(0, 2), st.integers(0, 2), st.sampled_from(PEOPLE))


@settings(max_examples=60, deadline=None)
@given(st.lists(st.lists(row, max_size=6), min_size=3, max_size=3), st.sampled_from(PEOPLE))
def test_withdrawal_commutes_with_the_builder(
    tables: list[list[tuple[int, int, str]]], p: str
) -> None:
    """The relation built without p equals the canonical form of the old one with p := False."""
    full = _build(tables, None)
    without = _build(tables, p)
    withdrawn = full.withdraw(p)
    assert {t: without.dnf(t) for t in without.tuples()} == {
        t: withdrawn.dnf(t) for t in withdrawn.tuples()
    }
    # and φ agrees at random fractional points (same DNF ⇒ same φ; checked numerically too)
    if len(without):
        a1, a2 = without.compile(), withdrawn.compile()
        val = dict(zip(PEOPLE, np.random.default_rng(0).random(len(PEOPLE)), strict=True))
        f1 = np.array([val[q] for q in a1.labels or ()])
        f2 = np.array([val[q] for q in a2.labels or ()])
        assert np.allclose(np.sort(a1.evaluate(f1)), np.sort(a2.evaluate(f2)))


def test_annotations_restrict_matches_krelation_withdraw() -> None:
    rel = KRelation(
        ["t"], {(i,): [set(c)] for i, c in enumerate(itertools.combinations("abcd", 2))}
    )
    ann = rel.compile()
    p = ann.labels.index("a")  # type: ignore[union-attr]
    assert ann.withdraw(p).n_tuples == len(rel.withdraw("a")) == 3
    empty = Annotations.conjunctions(np.zeros((0, 2), np.int64), None, 0)
    assert empty.total() == 0 and empty.evaluate(np.zeros(0)).size == 0
