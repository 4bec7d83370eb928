"""The annotation form of a K-relation comes from the query plan, never the data (issue 18).

Whether an annotation is representable, and in which form (minimal DNF or formulas), must be the
same for a database and every neighbour: a refusal or a form that appears on one side only is an
observable that depends on the private data, and a form that differs between neighbours breaks
the φ-equivalence the Recursive Mechanism's proof needs. The old code kept every annotation in
minimal DNF and refused one with more than ``max_clauses`` clauses, so a join of unions was
refused on a database and accepted on its neighbour; ``test_same_decision_for_every_neighbour``
fails there.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import fugu
from fugu.errors import InvalidParameterError
from fugu.graph import KRelation


def union_parts(people: list[list[str]]) -> list[dict]:
    """Tables j = 0..: key 1 owned by each of ``people[j]`` (a |people[j]|-way union per table)."""
    return [[{"k": 1, "o": who} for who in group] for group in people]


def join_of_unions(tables: list[list[dict]], **kw) -> KRelation:
    rel = None
    for rows in tables:
        part = KRelation.from_records(rows, owners="o", columns=["k"], **kw)
        rel = part if rel is None else rel.join(part)
    assert rel is not None
    return rel


def without(tables: list[list[dict]], p: str) -> list[list[dict]]:
    return [[r for r in rows if r["o"] != p] for rows in tables]


PEOPLE5 = [[f"p{j}_{i}" for i in range(3)] for j in range(5)]


@pytest.mark.parametrize(
    "kw",
    [{"max_clauses": 200}, {}, {"max_clauses": 300, "max_fanin": 3}, {"max_clauses": 1}],
    ids=["threshold-200", "default", "declared-fanin", "threshold-1"],
)
def test_same_decision_for_every_neighbour(kw: dict) -> None:
    """A join of five three-way unions: 3^5 = 243 clauses on the database, 2·3^4 = 162 once one
    participant withdraws. With max_clauses = 200 the old code refused the database and accepted
    every neighbour. Now the form (and the absence of a refusal) is the same on both sides."""
    tables = union_parts(PEOPLE5)
    full = join_of_unions(tables, **kw)
    assert full.form in ("dnf", "formula")
    assert len(full) == 1 and full.clause_bound == (243.0 if "max_fanin" in kw else math.inf)
    for group in PEOPLE5:
        for p in group:
            nb = join_of_unions(without(tables, p), **kw)
            assert (nb.form, nb.form_rule, nb.clause_bound) == (
                full.form,
                full.form_rule,
                full.clause_bound,
            ), p
            assert len(nb.dnf((1,))) == 162  # nothing clipped on either side
    assert len(full.dnf((1,))) == 243


def test_declared_bound_exceeded_is_neither_refused_nor_clipped() -> None:
    """A declared fan-in of 2 is false for this data (3 records per key): the plan's bound 2^5 = 32
    keeps minimal DNF for the database and every neighbour; the DNF is simply larger than declared
    (243 and 162 clauses), never cut, and the relation answers."""
    tables = union_parts(PEOPLE5)
    full = join_of_unions(tables, max_clauses=64, max_fanin=2)
    assert full.form == "dnf" and full.clause_bound == 32
    assert len(full.dnf((1,))) == 243
    nb = join_of_unions(without(tables, "p0_0"), max_clauses=64, max_fanin=2)
    assert nb.form == "dnf" and len(nb.dnf((1,))) == 162
    rel = fugu.graph.answer(full, None, 1.0, rng=fugu.RandomSource(seed=3))
    assert rel.guarantee.parameters["annotation form"] == "dnf"
    assert rel.guarantee.parameters["public clause bound"] == 32


def test_form_follows_the_public_bound_through_the_plan() -> None:
    edges = [("a", "b"), ("b", "c"), ("a", "c"), ("c", "d")]
    rows = [{"x": u, "y": v} for u, v in edges] + [{"x": v, "y": u} for u, v in edges]
    E = KRelation.from_records(rows, owners=["x", "y"])  # owners are columns: bound 1
    assert (E.form, E.clause_bound) == ("dnf", 1.0)
    paths = E.rename({"y": "w"}).join(E.rename({"x": "w", "y": "z"}))
    assert (paths.form, paths.clause_bound) == ("dnf", 1.0)
    common = paths.project(["x", "z"])  # no declared fan-in: no public bound
    assert (common.form, common.clause_bound) == ("formula", math.inf)
    declared = paths.project(["x", "z"], max_fanin=4)
    assert (declared.form, declared.clause_bound) == ("dnf", 4.0)
    assert declared.dnf(("a", "b")) == common.dnf(("a", "b"))
    assert paths.project(["z", "w", "x"]).clause_bound == 1.0  # every column kept
    both = declared.union(declared)
    assert both.clause_bound == 8.0 and both.join(both).clause_bound == 64.0
    assert both.join(both).form == "dnf"
    small = KRelation.from_records(rows, owners=["x", "y"], max_clauses=63)
    mixed = small.join(both.join(both))  # bound 1 * 64; the smaller threshold (63) decides
    assert (mixed.form, mixed.clause_bound, mixed.max_clauses) == ("formula", 64.0, 63)
    with pytest.raises(InvalidParameterError, match="max_fanin"):
        paths.project(["x"], max_fanin=0)
    with pytest.raises(InvalidParameterError, match="max_clauses"):
        KRelation.from_records(rows, owners=["x", "y"], max_clauses=0)
    with pytest.raises(InvalidParameterError, match="form"):
        KRelation.from_records(rows, owners=["x", "y"], form="cnf")


def test_patterns_keep_minimal_dnf() -> None:
    """Subgraph patterns have a public bound of one clause per occurrence: minimal DNF, S = 1."""
    import networkx as nx

    rel, _ = fugu.graph.pattern_relation(nx.karate_club_graph(), "triangle", "node")
    assert (rel.form, rel.form_rule, rel.clause_bound) == ("dnf", "auto", 1.0)
    ann = rel.compile()
    assert ann.impact().max() == pytest.approx(float(np.max(ann.impact())))
    assert rel.select(lambda r: True).form == "dnf"


# -- random plans: the same decision and φ-equivalence for every neighbour ---------------------
def _phi(rel: KRelation, f: dict) -> dict:
    ann = rel.compile()
    vals = ann.evaluate(np.array([f[q] for q in (ann.labels or ())]))
    return dict(zip(rel.tuples(), vals.tolist(), strict=True))


def _plan(tables, drop, plan: int, max_clauses: int, fanin: int | None) -> KRelation:
    rels = []
    for i, rows in enumerate(tables):
        recs = [{"a": a, "b": b, "o": o} for a, b, o in rows if o != drop]
        cols = ["a", "b", "o"] if i == 0 else ["a", "b"]  # table 0 keeps its owner column
        r = KRelation.from_records(
            recs, owners="o", columns=cols, max_clauses=max_clauses, max_fanin=fanin
        )
        rels.append(r.project(["a", "b"]) if i == 0 else r)
    a, b, c = rels
    if plan == 0:  # a join of unions, then a projection
        return a.union(b).join(c.rename({"a": "b", "b": "c"})).project(["a", "c"], max_fanin=fanin)
    if plan == 1:  # a union of joins
        ab = a.join(b.rename({"a": "b", "b": "c"})).project(["a", "c"], max_fanin=fanin)
        return ab.union(c.rename({"b": "c"}))
    # unions joined twice
    u = a.union(b).union(c)
    return u.join(u.rename({"a": "b", "b": "c"})).join(u.rename({"b": "c"}))


row = st.tuples(st.integers(0, 2), st.integers(0, 2), st.sampled_from(["p0", "p1", "p2", "p3"]))


@settings(max_examples=40, deadline=None)
@given(
    st.lists(st.lists(row, max_size=5), min_size=3, max_size=3),
    st.integers(0, 2),
    st.sampled_from([1, 2, 4, 16]),
    st.sampled_from([None, 1, 2]),
)
def test_random_plans_same_form_and_phi_for_every_neighbour(tables, plan, max_clauses, fanin):
    full = _plan(tables, None, plan, max_clauses, fanin)
    rng = np.random.default_rng(0)
    for p in ["p0", "p1", "p2", "p3"]:
        nb = _plan(tables, p, plan, max_clauses, fanin)
        assert (nb.form, nb.clause_bound) == (full.form, full.clause_bound)
        withdrawn = full.withdraw(p)
        assert withdrawn.form == full.form
        assert sorted(map(repr, nb.tuples())) == sorted(map(repr, withdrawn.tuples()))
        if not len(nb):
            continue
        f = {q: float(v) for q, v in zip(["p0", "p1", "p2", "p3"], rng.random(4), strict=True)}
        f[p] = 0.0
        a, b = _phi(nb, f), _phi(withdrawn, f)
        assert a.keys() == b.keys()
        assert all(abs(a[t] - b[t]) < 1e-12 for t in a), (p, a, b)


def test_answer_default_mu_is_the_papers_general_setting_and_recorded() -> None:
    """answer() uses μ = 0.5 (the paper's setting outside node privacy; measured on Figs. 8-9 in
    bench_graph.py --parts mu) and records μ and the form in the guarantee."""
    trips = KRelation.from_records(
        [{"who": w, "km": float(i)} for i, w in enumerate("abcab")], owners="who"
    )
    rel = fugu.graph.answer(trips, "km", 1.0, rng=fugu.RandomSource(seed=0))
    params = rel.guarantee.parameters
    assert params["mu"] == 0.5
    assert (params["annotation form"], params["public clause bound"]) == ("dnf", 1)
    assert (
        fugu.graph.answer(
            trips, "km", 1.0, mu=1.0, rng=fugu.RandomSource(seed=0)
        ).guarantee.parameters["mu"]
        == 1.0
    )  # noqa: E501
