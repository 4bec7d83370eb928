"""General positive formulas in polynomial size (issue 18 part 1): the formula form of K-relations,
its LP (one column per gate), the neighbour (φ-equivalence) argument and Lemma 7."""

from __future__ import annotations

import numpy as np
import pytest

import fugu
from fugu.errors import InvalidParameterError
from fugu.graph import KRelation
from fugu.graph.krelation import Formulas
from fugu.graph.lp import LPModel
from fugu.graph.recursive import RecursiveParameters, recursive_mechanism, x_value


def random_formulas(seed: int, kind: str, n: int = 9, tuples: int = 7, clauses: int = 3):
    rng = np.random.default_rng(seed)
    data = [
        [list(rng.choice(n, size=int(rng.integers(1, 4)), replace=False)) for _ in range(clauses)]
        for _ in range(tuples)
    ]
    return data, Formulas.from_clauses(data, kind, n, labels=list(range(n)))


def brute_truth(data, kind: str, present: np.ndarray) -> list[bool]:
    if kind == "cnf":
        return [all(any(present[v] for v in c) for c in cl) for cl in data]
    return [any(all(present[v] for v in c) for c in cl) for cl in data]


@pytest.mark.parametrize("kind", ["cnf", "dnf"])
def test_truth_phi_and_naturalness_of_withdrawal(kind: str) -> None:
    """Truth tables against brute force; after withdrawing p, φ of every remaining tuple equals
    φ of the original with f_p = 0 (the substitution p := False is φ-exact), for random f."""
    data, F = random_formulas(1, kind)
    n = F.n_participants
    for mask in range(1 << n):
        present = np.array([(mask >> i) & 1 for i in range(n)], bool)
        assert F.truth(present).tolist() == brute_truth(data, kind, present)
    rng = np.random.default_rng(2)
    for p in range(n):
        W = F.withdraw(p)
        assert W.labels is not None
        assert W.n_tuples == sum(brute_truth(data, kind, np.arange(n) != p))
        for _ in range(20):
            f = rng.random(n)
            f[p] = 0.0
            full = F.evaluate(f)
            sub = W.evaluate(f[list(W.labels)])
            # tuples that vanished have φ = 0 at every f with f_p = 0
            kept = full > 0
            assert np.allclose(np.sort(full[kept]), np.sort(sub[sub > 0]), atol=1e-12)


def test_paper_fig3_sensitivities() -> None:
    """(a ∨ b) ∧ (a ∨ c) ∧ (b ∨ d): S_a = S_b = 2, S_c = S_d = 1; (a∧b) ∨ (a∧c) ∨ (b∧d): all 1."""
    F = Formulas.from_clauses([[[0, 1], [0, 2], [1, 3]]], "cnf", 4)
    _, p, s = F.sensitivity_pairs()
    assert dict(zip(p.tolist(), s.tolist(), strict=True)) == {0: 2, 1: 2, 2: 1, 3: 1}
    D = Formulas.from_clauses([[[0, 1], [0, 2], [1, 3]]], "dnf", 4)
    assert set(D.sensitivity_pairs()[2].tolist()) == {1.0}
    assert F.impact().tolist() == [2, 2, 1, 1]


def test_formula_lp_equals_the_dnf_lp_on_dnf_relations() -> None:
    rng = np.random.default_rng(3)
    data = [[list(rng.choice(10, 3, replace=False)) for _ in range(3)] for _ in range(10)]
    F = Formulas.from_clauses(data, "dnf", 10)
    A = KRelation(["t"], {(i,): [[f"p{v}" for v in c] for c in cl] for i, cl in enumerate(data)})
    mf, ma = LPModel(F), LPModel(A.compile())
    for i in range(0, 11, 2):
        assert mf.h_value(i) == pytest.approx(ma.h_value(i), abs=1e-6)
        assert mf.g_value(i) == pytest.approx(ma.g_value(i), abs=1e-6)
    for dh in (0.3, 1.0, 2.5):
        assert x_value(mf, dh, 1e-7, "relaxed")[0] == pytest.approx(
            x_value(ma, dh, 1e-7, "relaxed")[0], abs=1e-6
        )


def _h(model: LPModel) -> np.ndarray:
    return np.array([model.h_value(i) for i in range(model.n_f + 1)])


@pytest.mark.parametrize("kind", ["cnf", "dnf"])
@pytest.mark.parametrize("seed", range(3))
def test_recursive_property_and_lemma7_for_every_withdrawal(kind: str, seed: int) -> None:
    """H_i(D2) <= H_i(D1) <= H_{i+1}(D2) (recursive, Def. 17) and |X(D1) - X(D2)| <= Δ̂ (Lemma 7)
    for every single withdrawal of random CNF/DNF relations. D1 drops participants left in no
    annotation; with u of them, H on the full universe is H_{max(0, i-u)}."""
    _, F = random_formulas(10 + seed, kind)
    m2 = LPModel(F)
    h2 = _h(m2)
    n = F.n_participants
    assert h2[0] == 0 and h2[-1] == F.total()
    assert np.all(np.diff(h2, 2) >= -1e-6)  # convex (Lemma 10)
    for p in range(n):
        F1 = F.withdraw(p)
        m1 = LPModel(F1)
        h1 = _h(m1)
        u = (n - 1) - F1.n_participants
        h1u = np.array([h1[max(0, i - u)] for i in range(n)])
        for i in range(n):
            assert h2[i] <= h1u[i] + 1e-6 and h1u[i] <= h2[i + 1] + 1e-6, (p, i)
        for dh in (0.3, 1.0, 2.2):
            for rule in ("relaxed", "integer"):
                x2 = x_value(m2, dh, 1e-7, rule)[0]
                x1 = x_value(m1, dh, 1e-7, rule)[0]
                assert abs(x2 - x1) <= dh + 1e-6, (p, dh, rule, x1, x2)


# -- K-relations in formula form ---------------------------------------------------------------
def _records(rng: np.random.Generator, n_people: int, n_rows: int, key: str) -> list[dict]:
    out = []
    for _ in range(n_rows):
        k, v, who = int(rng.integers(0, 3)), int(rng.integers(0, 4)), int(rng.integers(n_people))
        out.append({"k": k, key: v, "o": f"u{who}"})
    return out


def _plan(rows_a, rows_b, rows_c, form: str) -> KRelation:
    """A join of unions followed by a projection (join of unions: the case minimal DNF expands)."""
    a = KRelation.from_records(rows_a, owners="o", columns=["k", "x"], form=form)
    b = KRelation.from_records(rows_b, owners="o", columns=["k", "x"], form=form)
    c = KRelation.from_records(rows_c, owners="o", columns=["k", "y"], form=form)
    return a.union(b).join(c).project(["x", "y"])


def _phi_by_label(F: Formulas, f: dict) -> dict:
    assert F.labels is not None
    vals = F.evaluate(np.array([f[lab] for lab in F.labels]))
    return dict(enumerate(sorted(vals.tolist())))


@pytest.mark.parametrize("seed", range(5))
def test_plan_built_without_p_is_phi_equal_to_the_withdrawal(seed: int) -> None:
    """The claim in the krelation module docstring: building the query on the data without p's
    records gives the withdrawal of p from the query's result, up to φ (checked at random f)."""
    rng = np.random.default_rng(seed)
    ra, rb, rc = (_records(rng, 6, 8, key) for key in ("x", "x", "y"))
    full = _plan(ra, rb, rc, "formula")
    people = full.participants
    for p in people:
        without = _plan(*([r for r in rows if r["o"] != p] for rows in (ra, rb, rc)), "formula")
        withdrawn = full.withdraw(p)
        assert sorted(without.tuples()) == sorted(withdrawn.tuples())
        fw, fo = withdrawn.compile(), without.compile()
        for _ in range(10):
            f = {q: float(rng.random()) for q in people}
            assert np.allclose(
                list(_phi_by_label(fw, f).values()), list(_phi_by_label(fo, f).values())
            )


def test_formula_truth_matches_dnf_form() -> None:
    rng = np.random.default_rng(7)
    ra, rb, rc = (_records(rng, 6, 8, key) for key in ("x", "x", "y"))
    fr, dr = _plan(ra, rb, rc, "formula"), _plan(ra, rb, rc, "dnf")
    assert sorted(fr.tuples()) == sorted(dr.tuples())
    people = fr.participants
    F, D = fr.compile(), dr.compile()
    assert F.labels is not None and D.labels is not None
    for mask in range(0, 1 << len(people), 3):
        present = {q: bool(mask >> i & 1) for i, q in enumerate(people)}
        tf = F.truth(np.array([present[q] for q in F.labels]))
        td = D.truth(np.array([present[q] for q in D.labels]))
        assert sorted(tf.tolist()) == sorted(td.tolist())


def test_join_of_eight_three_way_unions_runs_in_formula_form() -> None:
    """The issue's example: 3^8 = 6,561 clauses in DNF; the formula form keeps 8 ∨-gates of 3 and
    answers. Nothing is refused: form="dnf" builds the whole DNF (the caller's choice), and the
    default rule picks formulas because the three-way unions have no public fan-in."""

    def unions(form: str, joins: int = 8, **kw) -> KRelation:
        rel = None
        for j in range(joins):
            part = KRelation.from_records(
                [{"k": 1, "o": f"p{j}_{i}"} for i in range(3)], owners="o", columns=["k"],
                form=form, **kw,
            )  # fmt: skip
            rel = part if rel is None else rel.join(part)
        assert rel is not None
        return rel

    forced = unions("dnf", 5, max_clauses=200)  # 3^5 = 243 > 200: no refusal, no clipping
    assert forced.form == "dnf" and len(forced.dnf((1,))) == 243
    assert unions("auto", 8).form == "formula"
    rel = unions("formula")
    assert len(rel) == 1 and len(rel.participants) == 24
    F = rel.compile()
    assert F.n_gates == 8 + 7 and F.size == 8 * 3 + 14  # 8 ∨ of 3, then 7 binary ∧
    out = fugu.graph.answer(rel, None, 1.0, rng=fugu.RandomSource(seed=0))
    assert np.isfinite(out.value)
    with pytest.raises(InvalidParameterError, match="whole query"):
        rel.join(KRelation.from_records([{"k": 1, "o": "z"}], owners="o", form="dnf"))
    # the default rule combined with an explicit one follows the explicit one
    joined = rel.join(KRelation.from_records([{"k": 1, "o": "z"}], owners="o", columns=["k"]))
    assert joined.form == "formula" and joined.form_rule == "formula"
    assert len(rel.dnf((1,))) == 3**8  # inspection expands the formula (never used by answer)


def test_figure8_cnf_relation_end_to_end_small() -> None:
    """A 10-clause 3-CNF relation over 150 tuples (|P| = |supp R|) runs in seconds."""
    rng = np.random.default_rng(0)
    n = 150
    data = [[list(rng.choice(n, 3, replace=False)) for _ in range(10)] for _ in range(n)]
    F = Formulas.from_clauses(data, "cnf", n)
    params = RecursiveParameters.make(0.5)
    x_hat, dh, _, tr = recursive_mechanism(F, params, fugu.RandomSource(seed=1))
    assert tr.true_value == n and np.isfinite(x_hat) and dh > 0
    assert tr.lp_seconds < 60


def test_general_recursive_accepts_formula_relations() -> None:
    rel = KRelation.from_records(
        [{"k": 1, "o": "a"}, {"k": 1, "o": "b"}, {"k": 2, "o": "c"}], owners="o", columns=["k"],
        form="formula",
    )  # fmt: skip
    out = fugu.graph.general_recursive(rel, None, 1.0, rng=fugu.RandomSource(seed=0))
    assert np.isfinite(out.value)
    from fugu.graph.recursive import subset_values

    q = subset_values(rel.compile())
    assert q[0] == 0 and q[-1] == 2 and len(q) == 8


@pytest.mark.parametrize("kind", ["cnf", "dnf"])
def test_g_search_program_answers_like_the_full_g_program(kind: str) -> None:
    """The reduced program of the search for j (and its greedy/dual shortcuts) gives the same
    yes/no as the full G program on formulas, where S_{R(t),p} can exceed 1 (CNF)."""
    _, F = random_formulas(21, kind, n=10, tuples=9, clauses=4)
    full = LPModel(F)
    n = F.n_participants
    for i in range(1, n):
        g = full.g_value(i)
        for cap in (0.5 * g, 0.97 * g, 1.03 * g + 1e-6, 2.0 * g + 1e-6):
            if abs(cap - g) < 1e-6:
                continue
            assert LPModel(F).g_at_most(i, cap) == (g <= cap), (i, cap, g)
