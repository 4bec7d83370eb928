"""The factor g of the bounding sequence G (eq. 19 of Chen & Zhou: g = 2; R2T's reimplementation:
g = 1), offered as ``g_factor``.

Privacy needs only that G is a recursive sequence (spec §3), which positive scaling keeps; the
factor is utility only. Tested here: every G value and bound scales exactly with the factor
(values, greedy bounds, the reduced search programs and their dual bounds), G stays recursive at
g = 1, the mechanism passes the privacy audit at g = 1 on the hard neighbouring pairs of
``test_graph_audit.py`` (false-failure rate at most 1e-3 per audit: Clopper-Pearson with
Bonferroni over events, fixed seeds), the parameter is recorded and bad values are refused
before anything is charged.
"""

from __future__ import annotations

import math

import networkx as nx
import numpy as np
import pytest
from graph_helpers import (
    audit_pair,
    audit_value_and_scale,
    node_annotations,
    random_graph,
    sequences,
    vectorised,
    x_of,
)

import fugu
from fugu.errors import InvalidParameterError
from fugu.graph import KRelation, RecursiveParameters, count, general_recursive
from fugu.graph.krelation import Formulas
from fugu.graph.lp import LPModel
from fugu.graph.patterns import annotations_of, enumerate_pattern
from fugu.graph.recursive import (
    find_j,
    recursive_mechanism,
    x_value,
)

EPS = 1.0


def _relations() -> list:
    """Small relations: node triangles (∧ only), a 2-star edge relation, CNF and DNF formulas."""
    rng = np.random.default_rng(5)
    cnf = [[rng.choice(10, 3, replace=False).tolist() for _ in range(3)] for _ in range(10)]
    dnf = [[rng.choice(10, 3, replace=False).tolist() for _ in range(3)] for _ in range(10)]
    return [
        node_annotations(random_graph(3, n=8, p=0.6)),
        annotations_of(enumerate_pattern(random_graph(7, n=7, p=0.6), "2-star"), "edge"),
        Formulas.from_clauses(cnf, "cnf", 10),
        Formulas.from_clauses(dnf, "dnf", 10),
    ]


# -- G scales exactly with the factor -------------------------------------------------------------
@pytest.mark.parametrize("case", range(4))
def test_g_values_and_greedy_bounds_scale_with_the_factor(case: int) -> None:
    ann = _relations()[case]
    n = ann.n_participants
    m1, m2, m3 = LPModel(ann, g_factor=1.0), LPModel(ann), LPModel(ann, g_factor=0.5)
    assert (m1.g_factor, m2.g_factor, m3.g_factor) == (1.0, 2.0, 0.5)
    for i in range(n + 1):
        g2 = m2.g_value(i)
        assert m1.g_value(i) == pytest.approx(g2 / 2, rel=1e-7, abs=1e-7)
        assert m3.g_value(i) == pytest.approx(g2 / 4, rel=1e-7, abs=1e-7)
    # G_|P| = g · the largest load at f ≡ 1, Σ_{t ∋ p} q(t), exactly (the largest impact for
    # conjunctions; with formulas the loads are ψ, not φ·S: review 13)
    assert m1.g_value(n) == float(m1.load_top.max())
    if not isinstance(ann, Formulas):
        assert m1.g_value(n) == float(ann.impact().max())
    for r in range(n + 1):  # the greedy point is the same: its value scales exactly
        assert m1.greedy_g(r) == m2.greedy_g(r) / 2
        assert m3.greedy_g(r) == m2.greedy_g(r) / 4


@pytest.mark.parametrize("case", range(4))
@pytest.mark.parametrize("factor", [1.0, 0.5, 3.0])
def test_g_search_at_other_factors_answers_like_the_full_g_program(
    case: int, factor: float
) -> None:
    """The search for j (greedy bounds, stored dual bounds, the cap/g pruning of the reduced
    program) gives the same yes/no as G_i ≤ cap from the full program at every factor. A factor
    left at 2 anywhere (bounds, pruning, the final comparison) makes some of these answers wrong."""
    ann = _relations()[case]
    ref = LPModel(ann, method="highs-ipm", g_factor=factor)  # separate cache
    m = LPModel(ann, g_factor=factor)
    rng = np.random.default_rng(case)
    decided = 0
    for i in range(1, ann.n_participants):
        g = ref.g_value(i)
        assert m.greedy_g(ann.n_participants - i) >= g - 1e-7
        caps = [g * 0.9, g * 1.1, g * 0.55, g * 1.9, *rng.uniform(0, 2 * g + 1, 4)]
        for cap in caps:
            if cap < 0 or abs(cap - g) < 1e-6:
                continue
            assert m.g_at_most(i, cap) == (g <= cap), (i, cap, g)
            decided += 1
    assert decided > 10


def test_j_at_factor_one_is_the_j_of_half_g() -> None:
    """find_j at g = 1 asks G_i/2 ≤ θ e^{jβ} of the paper's G: the same as θ doubled at g = 2."""
    for ann in _relations():
        p1 = RecursiveParameters.make(0.5, g_factor=1)
        p2 = RecursiveParameters.make(0.5, theta=2.0)
        j1, top1 = find_j(LPModel(ann, g_factor=1), p1)
        j2, top2 = find_j(LPModel(ann), p2)
        assert j1 == j2 and top1 == pytest.approx(top2 / 2, rel=1e-9)
        assert j1 <= find_j(LPModel(ann), RecursiveParameters.make(0.5))[0]


# -- G stays a recursive sequence at g = 1 --------------------------------------------------------
def _g_seq(ann, factor: float) -> np.ndarray:
    m = LPModel(ann, g_factor=factor)
    return np.array([m.g_value(i) for i in range(ann.n_participants + 1)])


@pytest.mark.parametrize("seed", range(5))
@pytest.mark.parametrize("pattern", ["triangle", "2-star"])
def test_g_is_recursive_at_factor_one_for_every_withdrawal(seed: int, pattern: str) -> None:
    """G_i(D2) ≤ G_i(D1) ≤ G_{i+1}(D2) (Def. 17) for every node withdrawal, D1 = D2 − p."""
    G = random_graph(seed, n=7, p=0.55)
    ann2 = node_annotations(G, pattern)
    if ann2.n_tuples == 0:
        pytest.skip("no occurrence")
    g2 = _g_seq(ann2, 1.0)
    for p in list(G.nodes):
        G1 = G.copy()
        G1.remove_node(p)
        ann1 = node_annotations(G1, pattern, universe=[v for v in G.nodes if v != p])
        g1 = _g_seq(ann1, 1.0)
        for i in range(g1.size):
            assert g2[i] <= g1[i] + 1e-6, (p, i)
            assert g1[i] <= g2[i + 1] + 1e-6, (p, i)


# -- privacy audit at g = 1 (the audit of test_graph_audit.py: its helpers read params.g_factor) --
def _ann(G: nx.Graph):
    return annotations_of(enumerate_pattern(G, G.graph.get("pattern", "triangle")), G.graph["unit"])


def _params(case: str) -> RecursiveParameters:
    return RecursiveParameters.make(EPS, mu=0.5 if case == "edge" else 1.0, g_factor=1.0)


@pytest.mark.parametrize("case", ["node", "edge", "node-2-star"])
def test_vectorised_equals_library_path_at_factor_one(case: str) -> None:
    """The audited draw is the library's: same j and X (to the certified tolerance) at g = 1,
    and j is smaller than at g = 2 on the 2-star wheel (the factor matters there)."""
    params = _params(case)
    for G in audit_pair(case):
        j, h = sequences(G, G.graph["unit"], params)
        ann = _ann(G)
        for seed in range(3):
            _, dh, _, tr = recursive_mechanism(ann, params, fugu.RandomSource(seed=seed))
            assert tr.j == j
            assert tr.x == pytest.approx(
                float(x_of(h, np.array([dh]), "relaxed")[0]), abs=params.tolerance * dh + 1e-9
            )
        model = LPModel(ann, g_factor=1.0)
        for dh in np.geomspace(0.05, 2 * h[-1] + 1, 20):
            exact = float(x_of(h, np.array([dh]), "relaxed")[0])
            assert x_value(model, dh, 1e-7, "relaxed")[0] == pytest.approx(exact, abs=1e-6)
    p2 = RecursiveParameters.make(EPS, mu=params.mu)
    hub = audit_pair(case)[1]
    j1, j2 = (sequences(hub, hub.graph["unit"], p)[0] for p in (params, p2))
    assert j1 < j2 if case == "node-2-star" else j1 == j2  # (3 vs 4; 1 vs 1 on the others)


@pytest.mark.parametrize("case", ["node", "edge", "node-2-star"])
def test_audit_recursive_mechanism_at_factor_one(case: str) -> None:
    params = _params(case)
    d1, d2 = audit_pair(case)
    mech = vectorised(params)
    audit_value_and_scale(mech, d1, d2, EPS, n_runs=60_000)


# -- entry points: recorded, refused, consistent ---------------------------------------------------
def _trips() -> KRelation:
    return KRelation.from_records(
        [{"who": w, "km": float(i + 1)} for i, w in enumerate("abcabd")], owners="who"
    )


def test_g_factor_is_threaded_and_recorded() -> None:
    G = nx.karate_club_graph()
    rng = fugu.RandomSource
    rel = fugu.graph.answer(_trips(), "km", 1.0, rng=rng(seed=0))
    assert rel.guarantee.parameters["g_factor"] == 2.0  # the paper's algorithm by default
    rel = fugu.graph.answer(_trips(), "km", 1.0, g_factor=1, rng=rng(seed=0))
    assert rel.guarantee.parameters["g_factor"] == 1.0
    signed = fugu.graph.answer(
        _trips(), lambda r: r["km"] - 3, 1.0, split_signed=True, g_factor=1, rng=rng(seed=0)
    )
    assert signed.guarantee.parameters["g_factor"] == 1.0
    traces: list = []
    for f in (2.0, 1.0):
        rel = count(G, "triangle", 1.0, g_factor=f, trace=traces, rng=rng(seed=1))
        assert rel.guarantee.parameters["g_factor"] == f
    # the run at g = 1 computed G_|P| = largest impact (half of g = 2) and a j no larger
    assert traces[1].g_top == pytest.approx(traces[0].g_top / 2)
    assert traces[1].j <= traces[0].j
    # the general mechanism's G (eq. 15) has no factor: nothing recorded there
    gen = general_recursive(_trips(), None, 1.0, rng=rng(seed=0))
    assert "g_factor" not in gen.guarantee.parameters


BAD = [0, -1.0, 0.0, math.nan, math.inf, -math.inf, True, "2", None, 1e-400]


@pytest.mark.parametrize("bad", BAD)
def test_bad_g_factor_refused_before_spending(bad) -> None:
    G = nx.karate_club_graph()
    calls = [
        (
            "participant-dp",
            lambda a: fugu.graph.answer(_trips(), "km", 0.5, g_factor=bad, accountant=a),
        ),
        ("node-dp", lambda a: count(G, "triangle", 0.5, g_factor=bad, accountant=a)),
    ]
    for model, call in calls:
        acct = fugu.Accountant(fugu.Budget(1.0, model=model))
        with pytest.raises(InvalidParameterError, match=r"g_factor .*finite number > 0.*use 2"):
            call(acct)
        assert acct.spent == 0
    with pytest.raises(InvalidParameterError, match="g_factor"):
        RecursiveParameters.make(1.0, g_factor=bad)
    with pytest.raises(InvalidParameterError, match="g_factor"):
        LPModel(_relations()[0], g_factor=bad)


def test_g_factor_with_a_baseline_is_refused_not_ignored() -> None:
    G = nx.karate_club_graph()
    with pytest.raises(InvalidParameterError, match="g_factor=1.*no G"):
        count(G, "triangle", 0.5, unit="edge", mechanism="laplace", g_factor=1)
    count(G, "triangle", 0.5, unit="edge", mechanism="laplace", rng=fugu.RandomSource(seed=0))


def test_a_model_with_another_factor_is_refused() -> None:
    ann = _relations()[0]
    params = RecursiveParameters.make(1.0, g_factor=1.0)
    with pytest.raises(InvalidParameterError, match="g_factor"):
        recursive_mechanism(ann, params, fugu.RandomSource(seed=0), model=LPModel(ann))
    recursive_mechanism(ann, params, fugu.RandomSource(seed=0), model=LPModel(ann, g_factor=1))
