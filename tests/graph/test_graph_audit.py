"""Empirical privacy audit of the Recursive Mechanism on hard neighbouring graphs.

The LP part of the mechanism is deterministic given the data, so the audit computes it once per
input with the library's own code (``find_j``, ``LPModel.h_value``) and then draws the two noises
vectorised with the same samplers (Z drawn at unit scale and multiplied by Δ̂);
``test_vectorised_equals_library_path`` checks that the
library's X-program path gives the same X as the full H sequence. False-failure rate of each
audit: at most alpha = 1e-3 (Clopper-Pearson, Bonferroni over events), fixed seeds.
"""

from __future__ import annotations

import math

import networkx as nx
import numpy as np
import pytest
from graph_helpers import (
    GRID,
    audit_pair,
    audit_value_and_scale,
    book,
    sequences,
    vectorised,
    x_of,
)

import fugu
from fugu.graph import KRelation, RecursiveParameters
from fugu.graph.lp import LPModel
from fugu.graph.patterns import annotations_of, enumerate_pattern
from fugu.graph.recursive import (
    LN_DELTA_HAT_BELOW_THETA,
    LN_DELTA_HAT_MAX,
    find_j,
    recursive_mechanism,
    x_value,
)
from fugu.noise import grid_laplace
from fugu.testing import audit

EPS = 1.0


@pytest.mark.parametrize("case", ["node", "edge", "node-2-star"])
def test_audit_recursive_mechanism(case: str) -> None:
    unit = "edge" if case == "edge" else "node"
    params = RecursiveParameters.make(EPS, mu=1.0 if unit == "node" else 0.5)
    d1, d2 = audit_pair(case)
    mech = vectorised(params)
    audit_value_and_scale(mech, d1, d2, EPS, n_runs=60_000)


@pytest.mark.parametrize("case", ["node", "edge"])
def test_audit_recursive_mechanism_jointly(case: str) -> None:
    """Both outputs (the value and ln Δ̂) in one audit at the total ε = ε1 + ε2: the default
    statistic projects the pair on the direction in which the two inputs' means differ, so a
    leak shared between the coordinates is seen too (the per-column audits above each check one
    coordinate alone; review 21's note). False-alarm rate 1e-3, fixed seed."""
    unit = "edge" if case == "edge" else "node"
    params = RecursiveParameters.make(EPS, mu=1.0 if unit == "node" else 0.5)
    d1, d2 = audit_pair(case)
    res = audit(vectorised(params), d1, d2, EPS, n_runs=60_000, vectorised=True)
    assert res.passed, str(res)
    if case == "node":  # the joint statistic catches the mis-calibrated variant below too
        broken = vectorised(params, broken="true count")
        assert not audit(broken, d1, d2, EPS, n_runs=60_000, vectorised=True).passed


def test_audit_fails_when_the_true_count_is_released() -> None:
    """Mis-calibrated variant: noise scaled by Δ̂ but X replaced by the true count (16 vs 0)."""
    params = RecursiveParameters.make(EPS)
    d1, d2 = audit_pair("node")
    res = audit(
        vectorised(params, broken="true count"),
        d1,
        d2,
        EPS,
        n_runs=60_000,
        vectorised=True,
        statistic=lambda o: o[:, 0],
    )
    assert not res.passed, str(res)


@pytest.mark.parametrize("case", ["node", "edge", "node-2-star"])
def test_vectorised_equals_library_path(case: str) -> None:
    """The library path gives the audited X (fugu's default: min over real i of
    H_i + (|P|-i)Δ̂) and the same j; both X rules match the audit's H grid at 60 values of Δ̂."""
    unit = "edge" if case == "edge" else "node"
    params = RecursiveParameters.make(EPS, mu=1.0 if unit == "node" else 0.5)
    for G in audit_pair(case):
        j, h = sequences(G, unit, params)
        ann = annotations_of(enumerate_pattern(G, G.graph.get("pattern", "triangle")), unit)
        for seed in range(4):
            _, dh, _, tr = recursive_mechanism(ann, params, fugu.RandomSource(seed=seed))
            assert tr.j == j
            assert tr.x == pytest.approx(
                float(x_of(h, np.array([dh]), "relaxed")[0]), abs=params.tolerance * dh + 1e-9
            )
        model = LPModel(ann)
        for dh in np.geomspace(0.05, 2 * h[-1] + 1, 60):
            for rule in ("integer", "relaxed"):
                exact = float(x_of(h, np.array([dh]), rule)[0])
                assert x_value(model, dh, 1e-7, rule)[0] == pytest.approx(exact, abs=1e-6)


# -- the general (exact) mechanism: general_recursive ----------------------------------------
def general_pair() -> tuple[np.ndarray, np.ndarray]:
    """q over subsets of 6 participants: the number of pairs {0, i} present, i = 1..5 (D2),
    and the same query after participant 0 withdrew (D1: q restricted to subsets without 0,
    seen as a database on the other 5 participants). Withdrawing 0 removes 5 (= GS~)."""
    n = 6
    masks = np.arange(1 << n)
    q2 = np.array([((m & 1) * bin(m >> 1).count("1")) for m in masks], dtype=np.float64)
    q1 = np.zeros(1 << (n - 1))  # nothing left once 0 withdrew
    # a second group of pairs that does not involve 0 makes D1 non-trivial: {1,2}, {3,4}
    for q, shift in ((q2, 0), (q1, 1)):
        m = np.arange(q.size) << shift
        q += ((m >> 1) & 1) * ((m >> 2) & 1) + ((m >> 3) & 1) * ((m >> 4) & 1)
    return q1, q2


def general_vectorised(params: RecursiveParameters, divide: float = 1.0):
    """general_recursive's draw, vectorised and exact: the same grid Laplace for ln Δ̂ and, per
    draw, the grid of Δ̂ for Z (the library's grid_laplace_scalar), with per-element scales."""
    from fugu.graph.recursive import clamp_ln_delta_hat, general_sequences
    from fugu.noise import discrete_laplace

    def mech(q: np.ndarray, rng: fugu.RandomSource, size: int) -> np.ndarray:
        n = int(q.size).bit_length() - 1
        h, j = general_sequences(q, n, params)
        ln_delta = math.log(params.theta) + j * params.beta
        noisy, _ = grid_laplace(
            np.full(size, ln_delta), params.beta, params.epsilon1, rng=rng, max_changed=1
        )
        ln_dh = np.array([clamp_ln_delta_hat(v + params.mu, params.theta) for v in noisy])
        dh = np.exp(ln_dh)
        x = np.min(h[None, :] + (n - np.arange(n + 1))[None, :] * dh[:, None], axis=1)
        e = np.frexp(dh)[1] - 1 - 10
        gamma = np.ldexp(1.0, e)
        lam = (dh + gamma) / params.epsilon2
        ints = np.rint(x / gamma)
        z = discrete_laplace(lam / gamma / divide, rng=rng)
        return np.stack([(ints + z) * gamma, ln_dh], axis=1)

    return mech


def test_general_library_path_equals_audit_path() -> None:
    params = RecursiveParameters.make(EPS)
    mech = general_vectorised(params)
    for q in general_pair():
        for seed in range(4):
            rel = fugu.graph.general_recursive(q, None, EPS, rng=fugu.RandomSource(seed=seed))
            out = mech(q, fugu.RandomSource(seed=seed), 1)[0]
            assert rel.value == out[0] and math.log(rel.delta_hat) == pytest.approx(out[1])


def test_audit_general_recursive() -> None:
    params = RecursiveParameters.make(EPS)
    q1, q2 = general_pair()
    mech = general_vectorised(params)
    audit_value_and_scale(mech, q1, q2, EPS, n_runs=40_000)


def test_audit_general_recursive_fails_when_the_noise_is_too_small() -> None:
    """Mis-calibrated variant: Z drawn with a tenth of the scale Δ̂/ε2 (X moves by up to Δ̂)."""
    params = RecursiveParameters.make(EPS)
    q1, q2 = general_pair()
    mech = general_vectorised(params, divide=10.0)
    res = audit(mech, q1, q2, EPS, n_runs=40_000, vectorised=True, statistic=lambda o: o[:, 0])
    assert not res.passed, str(res)


# -- K-relations: fugu.graph.answer ------------------------------------------------------------
def krelation_pair(form: str = "dnf") -> tuple[KRelation, KRelation]:
    """A join of p's record with a union: every tuple is p ∧ (a_i ∨ b_i), plus tuples a_i ∧ b_i
    that p does not touch. Withdrawing p removes 5 tuples (its whole impact). With the default
    rule ``form="auto"`` the base tables have no public fan-in, so the plan keeps formulas."""
    own_p = KRelation.from_records([{"key": 1, "o": "p"}], owners="o", columns=["key"], form=form)
    left = KRelation.from_records(
        [{"key": 1, "v": i, "o": f"a{i}"} for i in range(5)],
        owners="o",
        columns=["key", "v"],
        form=form,
    )
    right = KRelation.from_records(
        [{"key": 1, "v": i, "o": f"b{i}"} for i in range(5)],
        owners="o",
        columns=["key", "v"],
        form=form,
    )
    joint = KRelation.from_records(
        [{"key": 2, "v": i, "o": (f"a{i}", f"b{i}")} for i in range(3)],
        owners="o",
        columns=["key", "v"],
        form=form,
    )
    d2 = own_p.join(left.union(right)).union(joint)
    return d2.withdraw("p"), d2


def common_friend_pair() -> tuple[KRelation, KRelation]:
    """Fig. 2(b) of the paper under node privacy, built by the default rule on a graph and on the
    graph without node p (the real neighbour, not ``withdraw``): friends (u, v) joined with the
    projection "u and v have a common friend". The edge table is owner-keyed (bound 1, minimal
    DNF), the projection has no public fan-in (the plan switches to formulas there), and the
    last join is a formula join. p is a common friend of three pairs and in two edges."""
    edges = [("a", "b"), ("b", "c"), ("a", "c"), ("c", "d"), ("b", "d")]
    edges += [("p", "a"), ("p", "b"), ("p", "d")]

    def build(drop: str | None) -> KRelation:
        es = [(u, v) for u, v in edges if drop not in (u, v)]
        rows = [{"x": u, "y": v} for u, v in es] + [{"x": v, "y": u} for u, v in es]
        E = KRelation.from_records(rows, owners=["x", "y"])
        common = E.rename({"y": "w"}).join(E.rename({"x": "w", "y": "z"})).project(["x", "z"])
        return E.rename({"y": "z"}).join(common).select(lambda r: r["x"] < r["z"])

    return build("p"), build(None)


def relation_sequences(rel: KRelation, params: RecursiveParameters) -> tuple[int, np.ndarray]:
    ann = rel.compile()
    m = LPModel(ann)
    j, _ = find_j(m, params)
    xs = np.arange(ann.n_participants * GRID + 1) / GRID
    return j, np.array([m.h_value(x) for x in xs])  # type: ignore[arg-type]


def answer_vectorised(params: RecursiveParameters):
    def mech(rel: KRelation, rng: fugu.RandomSource, size: int) -> np.ndarray:
        j, h = relation_sequences(rel, params)
        ln_delta = math.log(params.theta) + j * params.beta
        noisy, _ = grid_laplace(
            np.full(size, ln_delta), params.beta, params.epsilon1, rng=rng, max_changed=1
        )
        ln_dh = np.clip(
            noisy + params.mu, math.log(params.theta) - LN_DELTA_HAT_BELOW_THETA, LN_DELTA_HAT_MAX
        )
        dh = np.exp(ln_dh)
        x = x_of(h, dh, params.x_rule)
        z, _ = grid_laplace(np.zeros(size), 1.0, params.epsilon2, rng=rng, max_changed=1)
        return np.stack([x + z * dh * (1 + 2 * params.tolerance), ln_dh], axis=1)

    return mech


PAIRS = {
    "dnf": lambda: krelation_pair("dnf"),
    "auto-formula": lambda: krelation_pair("auto"),
    "auto-switch": common_friend_pair,
}


def test_pairs_forms() -> None:
    d1, d2 = krelation_pair("dnf")
    assert d2.annotation((1, 0)) == "(a0 ∧ p) ∨ (b0 ∧ p)" and d2.form == "dnf"
    assert len(d2) - len(d1) == 5
    d1, d2 = krelation_pair("auto")
    assert d2.annotation((1, 0)) == "(a0 ∨ b0) ∧ p" and d1.form == d2.form == "formula"
    d1, d2 = common_friend_pair()
    assert d1.form == d2.form == "formula" and d2.clause_bound == math.inf
    assert d2.annotation(("a", "b")) == "((a ∧ b ∧ c) ∨ (a ∧ b ∧ p)) ∧ a ∧ b"
    assert len(d2) - len(d1) == 3  # (a, d) and (b, d) need p or a path through it


@pytest.mark.parametrize("pair", sorted(PAIRS))
def test_answer_pair_annotations_and_library_x(pair: str) -> None:
    """The pairs have ∨ in their annotations; the audit's H grid gives the library's X."""
    d1, d2 = PAIRS[pair]()
    params = RecursiveParameters.make(EPS)
    for rel in (d1, d2):
        j, h = relation_sequences(rel, params)
        ann = rel.compile()
        for seed in range(3):
            _, dh, _, tr = recursive_mechanism(ann, params, fugu.RandomSource(seed=seed))
            assert tr.j == j
        model = LPModel(ann)
        for dh in np.geomspace(0.05, 2 * h[-1] + 1, 40):
            exact = float(x_of(h, np.array([dh]), "relaxed")[0])
            assert x_value(model, dh, 1e-7, "relaxed")[0] == pytest.approx(exact, abs=1e-6)


@pytest.mark.parametrize("pair", sorted(PAIRS))
def test_audit_answer(pair: str) -> None:
    """ε audit of fugu.graph.answer on each annotation-form path (minimal DNF; formulas under the
    default rule; the default rule switching from DNF to formulas at a projection)."""
    params = RecursiveParameters.make(EPS)
    d1, d2 = PAIRS[pair]()
    mech = answer_vectorised(params)
    audit_value_and_scale(mech, d1, d2, EPS, n_runs=40_000)


# -- the global-sensitivity Laplace baseline ----------------------------------------------------
def test_audit_laplace_count() -> None:
    """Book with 12 pages ± spine, 14 nodes: GS = n - 2 = 12 = the change (tight); the library
    path (geometric_mechanism of scale GS/ε) is what is drawn, vectorised."""
    from fugu.graph.baselines import global_sensitivity
    from fugu.noise import geometric_mechanism

    def mech(G: nx.Graph, rng: fugu.RandomSource, size: int, divide: float = 1.0) -> np.ndarray:
        gs = global_sensitivity("triangle", "edge", n=G.number_of_nodes())
        true = len(enumerate_pattern(G, "triangle"))
        return geometric_mechanism(np.full(size, true), gs / divide, EPS, rng)

    d1, d2 = book(12, False), book(12, True)
    for seed in range(3):
        rel = fugu.graph.laplace_count(d2, "triangle", EPS, rng=fugu.RandomSource(seed=seed))
        assert rel.value == mech(d2, fugu.RandomSource(seed=seed), 1)[0]
    assert audit(mech, d1, d2, EPS, n_runs=30_000, vectorised=True).passed
    res = audit(
        lambda G, r, s: mech(G, r, s, divide=2.0), d1, d2, EPS, n_runs=30_000, vectorised=True
    )
    assert not res.passed, str(res)
