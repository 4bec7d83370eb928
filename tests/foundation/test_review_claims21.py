"""Review 21: claims and audit coverage across all mechanisms.

Every public mechanism was checked for (1) a module docstring and a released ``Guarantee`` that
state the same model, neighbour relation, sensitivity and source, (2) randomness only through
``fugu.noise`` / ``RandomSource`` (a seeded source marks the release not private), and (3) a
privacy audit on hard neighbouring inputs with a companion showing the audit can fail. This file
adds the audits that were missing or too weak to fail:

* Blowfish Laplace on a policy-specific sensitivity (a sum under the line and θ = 2 distance
  policies: S = 1 and 2, where plain DP needs the domain width), integer and grid paths;
  companion: the line-calibrated release audited on a θ = 2 move must fail.
* The node-DP global-sensitivity Laplace baseline (only the edge-DP one was audited): triangles
  and 2-stars on the pair that meets the degree-bound sensitivity exactly; companion: half the
  sensitivity fails.
* LDP clients whose audits had no failing companion: OUE, HIO, CALM, MSW.
* Ordered and Ordered Hierarchical under a policy with ⊥ (add/remove): a record added at the
  first value (every cumulative count / S-node moves); companions: no ⊥ (the total is exact),
  and the mechanism run at 2ε (Ordered) / 4ε (OH, S-nodes only).
* Central Laplace under add/remove neighbours.
* TDG with shifted partitions: its audit looked at the first byte of the OUE report, which holds
  the cell of [0, 0, 0] but not that of [7, 7, 7] (cell 8, second byte); one bit can show at most
  ln((e^ε + 1)/2) = 0.62 at ε = 1, so that audit could not fail even at twice the ε. Here the
  statistic is both cells' bits (where the ratio reaches e^ε), with a failing companion.

Claims fixed (each with a test below that failed before): the node-DP Laplace baseline gave the
edge-DP source; a Blowfish real-valued query's guarantee said 'discrete Laplace' of scale S/ε
where the noise is on a power-of-two grid with the sensitivity rounded up; TDG with shifted
partitions gave the paper's source alone; k-means gave q_sum's sensitivity as the whole
release's, and its source left out Su et al. (grid start, plan).

Every audit's false-alarm rate is the auditor's alpha = 1e-3 (Clopper-Pearson, Bonferroni over
events); seeds are fixed, so the tests are deterministic.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import networkx as nx
import numpy as np
import pytest

import fugu
from fugu import ldp
from fugu.blowfish import Policy, SumQuery
from fugu.blowfish import laplace as blowfish_laplace
from fugu.graph.baselines import global_sensitivity
from fugu.graph.patterns import enumerate_pattern
from fugu.noise import geometric_mechanism
from fugu.testing import audit

EPS = 1.0
ALPHA = 1e-3  # the auditor's default false-alarm rate, stated for every test below


# -- Blowfish Laplace: policy-specific sensitivity of a sum ----------------------------------------
#: not vectorised (one library call per run): 8,000 runs per input keep each audit near 5 s
RUNS_BF = 8_000
DOM6 = fugu.Domain([fugu.Ordinal("x", 0, 5)])


def _hist(*cells: int) -> fugu.Histogram:
    counts = np.zeros(6, dtype=np.int64)
    for c in cells:
        counts[c] += 1
    return fugu.Histogram(counts, DOM6)


def _sum_release(policy: Policy, max_weight: float, eps: float = EPS) -> Callable[..., Any]:
    query = SumQuery("x", max_weight=max_weight)

    def mech(h: fugu.Histogram, rng: fugu.RandomSource) -> float:
        rel = blowfish_laplace(h, eps, policy, query=query, rng=rng)
        return float(rel.values[0])  # type: ignore[attr-defined]

    return mech


@pytest.mark.parametrize("max_weight", [1.0, 0.3])  # integer path; power-of-two grid path
@pytest.mark.parametrize("theta", [1, 2])
def test_blowfish_sum_passes_audit_on_a_move_along_the_longest_edge(
    theta: int, max_weight: float
) -> None:
    """S(sum, distance θ) = θ·max_weight: a record moved by θ (2 → 2 + θ) meets it exactly."""
    policy = Policy.line(DOM6) if theta == 1 else Policy.distance_threshold(DOM6, theta)
    rel = blowfish_laplace(_hist(2), EPS, policy, query=SumQuery("x", max_weight=max_weight))
    assert rel.guarantee.sensitivity == pytest.approx(theta * max_weight)
    d1, d2 = _hist(0, 2, 5), _hist(0, 2 + theta, 5)
    res = audit(_sum_release(policy, max_weight), d1, d2, EPS, n_runs=RUNS_BF, alpha=ALPHA)
    assert res.passed, str(res)


@pytest.mark.parametrize("max_weight", [1.0, 0.3])
def test_blowfish_sum_calibrated_to_the_line_fails_on_a_two_step_move(max_weight: float) -> None:
    """Noise for the line policy (S = max_weight) on an edge of the θ = 2 policy (change 2·S):
    really 2ε; the audit must see it."""
    d1, d2 = _hist(0, 2, 5), _hist(0, 4, 5)
    res = audit(_sum_release(Policy.line(DOM6), max_weight), d1, d2, EPS, n_runs=RUNS_BF)
    assert not res.passed and res.epsilon_lower_bound > 1.2, str(res)


# -- the node-DP global-sensitivity Laplace baseline -----------------------------------------------
def _node_pair(pattern: str, d: int) -> tuple[nx.Graph, nx.Graph]:
    """The D-clique (degree D - 1) and the same graph with one more node joined to all of its
    nodes: every degree stays <= D, and the count changes by exactly GS(pattern, D) (tight:
    C(D, 2) triangles; C(D, 2) + D·C(D - 1, 1) 2-stars)."""
    del pattern  # the same pair is tight for both patterns
    g1 = nx.complete_graph(d)
    g2 = g1.copy()
    g2.add_edges_from((d, v) for v in range(d))
    return g1, g2


def _node_laplace(pattern: str, d: int, divide: float = 1.0) -> Callable[..., Any]:
    gs = global_sensitivity(pattern, "node", degree_bound=d, k=2 if pattern == "k-star" else None)

    def mech(G: nx.Graph, rng: fugu.RandomSource, size: int) -> np.ndarray:
        true = len(enumerate_pattern(G, pattern, 2 if pattern == "k-star" else None))
        return geometric_mechanism(np.full(size, true), gs / divide, EPS, rng)

    return mech


@pytest.mark.parametrize(("pattern", "d"), [("triangle", 4), ("k-star", 3)])
def test_node_laplace_baseline_passes_audit_on_the_tight_pair(pattern: str, d: int) -> None:
    k = 2 if pattern == "k-star" else None
    g1, g2 = _node_pair(pattern, d)
    gs = global_sensitivity(pattern, "node", degree_bound=d, k=k)
    assert gs == (math.comb(d, 2) if pattern == "triangle" else 3 + 3 * 2)
    change = len(enumerate_pattern(g2, pattern, k)) - len(enumerate_pattern(g1, pattern, k))
    assert change == gs  # the pair is the worst case
    mech = _node_laplace(pattern, d)
    for seed in range(3):  # the audited draw is the library's
        rel = fugu.graph.laplace_count(
            g2, pattern, EPS, unit="node", k=k, degree_bound=d, rng=fugu.RandomSource(seed=seed)
        )
        assert rel.value == mech(g2, fugu.RandomSource(seed=seed), 1)[0]
        assert rel.guarantee.sensitivity == gs and rel.guarantee.model == "node-dp"
    res = audit(mech, g1, g2, EPS, n_runs=30_000, vectorised=True, alpha=ALPHA)
    assert res.passed, str(res)


def test_node_laplace_baseline_with_half_the_sensitivity_fails_audit() -> None:
    g1, g2 = _node_pair("triangle", 4)
    res = audit(
        _node_laplace("triangle", 4, divide=2.0), g1, g2, EPS, n_runs=30_000, vectorised=True
    )
    assert not res.passed, str(res)


# -- LDP clients: audits that must fail at an understated epsilon ---------------------------------
def _bits(rep: Any, n_cells: int) -> np.ndarray:
    return np.unpackbits(rep.columns["bits"], axis=1, count=n_cells, bitorder="little")


def _oue(eps: float) -> Callable[..., Any]:
    from fugu.ldp.oracles import oue_perturb

    def mech(v: int, rng: fugu.RandomSource, n: int) -> np.ndarray:
        bits = np.unpackbits(
            oue_perturb(np.full(n, v), 4, eps, rng), axis=1, count=4, bitorder="little"
        )
        return (bits @ (1 << np.arange(4))).astype(np.float64)  # the whole report, 16 events

    return mech


def test_oue_client_audit_catches_twice_the_epsilon() -> None:
    assert audit(_oue(EPS), 0, 1, EPS, n_runs=60_000, discrete=True, vectorised=True).passed
    res = audit(_oue(2 * EPS), 0, 1, EPS, n_runs=60_000, discrete=True, vectorised=True)
    assert not res.passed and res.epsilon_lower_bound > 1.2, str(res)


def _multidim(method: str, eps: float) -> tuple[Any, Callable[..., Any]]:
    dom = fugu.datasets.synthetic_domain(2, 4)
    proto = {
        "hio": lambda: ldp.HIO(dom, eps, branching=2, oracle="grr"),
        "calm": lambda: ldp.CALM(dom, eps, oracle="grr"),
        "msw": lambda: ldp.MSW(dom, eps),
    }[method]()
    group = proto.n_groups - 1

    def mech(record: list[int], rng: fugu.RandomSource, n: int) -> np.ndarray:
        codes = np.repeat(np.asarray(record, dtype=np.int64)[None], n, axis=0)
        rep = proto.client(rng).perturb(codes, groups=np.full(n, group))
        return rep.columns["y"].astype(np.float64)  # the whole report (GRR cell / SW value)

    return proto, mech


@pytest.mark.parametrize("method", ["hio", "calm", "msw"])
def test_multidim_client_audit_catches_twice_the_epsilon(method: str) -> None:
    """Same hard pair as tests/ldp/test_ldp_sw_multidim.py (records differing in every
    attribute), client run at 2ε, claimed ε: must fail."""
    _, mech = _multidim(method, 2 * EPS)
    res = audit(mech, [0, 0], [3, 3], EPS, n_runs=50_000, discrete=method != "msw", vectorised=True)
    assert not res.passed and res.epsilon_lower_bound > 1.2, str(res)


def _tdg_shifted(eps: float, group: int) -> tuple[Any, Callable[..., Any]]:
    dom = fugu.datasets.synthetic_domain(3, 8)
    proto = ldp.TDG(dom, eps, g2=2, partitions="shifted")
    cells = [int(proto.cells(np.full((1, 3), v, np.int64), np.array([group]))[0]) for v in (0, 7)]
    n_cells = (
        int(
            proto.client(fugu.RandomSource(seed=0))
            .perturb(np.zeros((1, 3), np.int64), groups=np.array([group]))
            .columns["bits"]
            .shape[1]
        )
        * 8
    )

    def mech(record: list[int], rng: fugu.RandomSource, n: int) -> np.ndarray:
        codes = np.repeat(np.asarray(record, dtype=np.int64)[None], n, axis=0)
        bits = _bits(proto.client(rng).perturb(codes, groups=np.full(n, group)), n_cells)
        return (2 * bits[:, cells[0]] + bits[:, cells[1]]).astype(np.float64)

    return proto, mech


@pytest.mark.parametrize("group", [0, 2])  # the shifted grids
def test_tdg_shifted_client_audit_sees_both_cells(group: int) -> None:
    proto, mech = _tdg_shifted(EPS, group)
    assert proto.shifted(proto.groups[group])
    res = audit(mech, [0, 0, 0], [7, 7, 7], EPS, n_runs=60_000, discrete=True, vectorised=True)
    assert res.passed, str(res)
    # the pair is hard: the point estimate reaches the claimed epsilon (both bits flip)
    assert res.epsilon_point_estimate > 0.8 * EPS, str(res)


def test_tdg_shifted_client_audit_catches_twice_the_epsilon() -> None:
    _, mech = _tdg_shifted(2 * EPS, 0)
    res = audit(mech, [0, 0, 0], [7, 7, 7], EPS, n_runs=60_000, discrete=True, vectorised=True)
    assert not res.passed and res.epsilon_lower_bound > 1.2, str(res)


def test_old_shifted_tdg_statistic_could_not_fail() -> None:
    """The first byte of a shifted 3×3 grid's report holds cell 0 only: at twice the ε the old
    statistic still passes (why the audits above use both cells' bits)."""
    dom = fugu.datasets.synthetic_domain(3, 8)
    loud = ldp.TDG(dom, 2 * EPS, g2=2, partitions="shifted")

    def mech(record: list[int], rng: fugu.RandomSource, n: int) -> np.ndarray:
        codes = np.repeat(np.asarray(record, dtype=np.int64)[None], n, axis=0)
        rep = loud.client(rng).perturb(codes, groups=np.full(n, 0))
        return rep.columns["bits"][:, 0].astype(np.float64)

    res = audit(mech, [0, 0, 0], [7, 7, 7], EPS, n_runs=60_000, discrete=True, vectorised=True)
    assert res.epsilon_point_estimate < math.log((math.exp(2 * EPS) + 1) / 2) + 0.1, str(res)


# -- claims: the released guarantee says what the module docstring says ---------------------------
def test_node_laplace_baseline_guarantee_names_the_node_dp_source() -> None:
    """The node-DP baseline's guarantee gave the edge-DP source ('edge-DP sensitivities as in
    Karwa et al.') where the module docstring names the degree-bound baseline's."""
    g1, _ = _node_pair("triangle", 4)
    node = fugu.graph.laplace_count(g1, "triangle", EPS, unit="node", degree_bound=4).guarantee
    assert "Kasiviswanathan" in node.source and "degree" in node.source
    assert "edge-DP" not in node.source
    edge = fugu.graph.laplace_count(g1, "triangle", EPS, unit="edge").guarantee
    assert "Karwa" in edge.source and "Dwork" in edge.source


def test_blowfish_real_valued_query_guarantee_states_the_grid_noise() -> None:
    """A real-valued query (a sum with weight 0.3) is released with discrete Laplace on a
    power-of-two grid and the sensitivity rounded up to it (module docstring); the guarantee said
    'discrete Laplace' of scale S/eps, the integer path's text."""
    rel = blowfish_laplace(_hist(2, 4), EPS, Policy.line(DOM6), query=SumQuery("x", max_weight=0.3))
    p = rel.guarantee.parameters
    assert "grid" in p["noise"] and p["grid"] > 0
    assert p["effective_sensitivity"] >= 0.3 and p["scale"] == p["effective_sensitivity"] / EPS
    assert rel.guarantee.sensitivity == pytest.approx(0.3)
    whole = blowfish_laplace(_hist(2, 4), EPS, Policy.line(DOM6), query=SumQuery("x"))
    assert whole.guarantee.parameters["noise"] == "discrete Laplace"
    assert "grid" not in whole.guarantee.parameters


def test_tdg_shifted_guarantee_names_fugus_extension() -> None:
    """TDG with shifted partitions (fugu's extension, module docstring) was released with the
    paper's source alone ('Section 4 (TDG)'); the aligned layout keeps the paper's text."""
    dom = fugu.datasets.synthetic_domain(3, 8)
    data = fugu.datasets.correlated_gaussian(3_000, 3, 8, seed=1)
    shifted = ldp.TDG(dom, EPS, g2=2, partitions="shifted")
    g = shifted.simulate(data, rng=fugu.RandomSource(seed=2)).guarantee
    assert "Section 4 (TDG)" in g.source and "fugu's extension" in g.source
    aligned = ldp.TDG(dom, EPS, g2=2, partitions="aligned")
    assert aligned.simulate(data, rng=fugu.RandomSource(seed=2)).guarantee.source == ldp.TDG.source


# -- central Laplace under add/remove neighbours (only replace-one was audited) --------------------
def _central(neighbours: str) -> Callable[..., Any]:
    def mech(h: fugu.Histogram, rng: fugu.RandomSource) -> np.ndarray:
        return fugu.central.laplace(h, EPS, neighbours=neighbours, rng=rng).counts

    return mech


def _hist3(counts: list[int]) -> fugu.Histogram:
    return fugu.Histogram(np.array(counts), fugu.Domain([fugu.Ordinal("v", 0, 2)]))


def test_central_laplace_add_remove_passes_audit_and_fails_on_a_replacement() -> None:
    """Add/remove (sensitivity 1): one record added to cell 1 passes at ε = 1; the same
    calibration audited on a replacement (L1 change 2, the replace-one relation) is really 2ε."""
    added = audit(_central("add-remove"), _hist3([3, 0, 5]), _hist3([3, 1, 5]), EPS, n_runs=5_000)
    assert added.passed, str(added)
    moved = audit(_central("add-remove"), _hist3([3, 0, 5]), _hist3([2, 1, 5]), EPS, n_runs=5_000)
    assert not moved.passed, str(moved)


def _kmeans(**kw: Any) -> Any:
    dom = fugu.Domain([fugu.Ordinal("x", 0, 255), fugu.Ordinal("y", 0, 255)])
    pts = np.random.default_rng(0).integers(0, 256, size=(3_000, 2))
    return fugu.blowfish.KMeans(3, epsilon=EPS, domain=dom, **kw).fit(pts)


def test_kmeans_guarantee_does_not_give_q_sums_sensitivity_as_the_whole_releases() -> None:
    """The k-means release noises q_size (sensitivity 2), q_sum (510 here) and the grid start's
    histogram (2); its guarantee gave sensitivity=510 (q_sum's), which describe() printed as
    'Mechanism: kmeans (sensitivity 510)'. The field is None (not one number, as the Guarantee
    docstring says) and the parameters keep each part's."""
    g = _kmeans(rng=fugu.RandomSource(seed=1)).guarantee_
    assert g.sensitivity is None and "sensitivity" not in g.describe().split("\n")[1]
    p = g.parameters
    assert p["q_size_sensitivity"] == 2.0 and p["q_sum_sensitivity"] == 510.0
    assert p["init_grid_sensitivity"] == 2.0


def test_kmeans_guarantee_names_the_grid_start_and_plan_source() -> None:
    """The default fit starts from Su et al.'s private grid (EUGkM) and takes its number of
    updates and ε split from Su et al. (CODASPY 2016, kmeans_init / kmeans_queries); the
    guarantee's source named only the Blowfish paper and SuLQ."""
    g = _kmeans(rng=fugu.RandomSource(seed=1)).guarantee_
    assert g.parameters["init"].startswith("private grid start")
    assert "Su, Cao, Li, Bertino, Jin" in g.source and "CODASPY 2016" in g.source


# -- Ordered / Ordered Hierarchical with ⊥ (add/remove is a neighbour): not audited before ---------
#: four values: the LLR statistics below sum few terms, so their extreme events are common
DOM8 = fugu.Domain([fugu.Ordinal("x", 0, 3)])
BASE8 = np.array([1, 0, 2, 3])


def _cumulative(run: Callable[..., Any]) -> Callable[..., Any]:
    def mech(counts: np.ndarray, rng: fugu.RandomSource) -> np.ndarray:
        cumulative = run(fugu.Histogram(counts, DOM8), rng).cumulative  # C_0 = 0, C_1, …, C_k
        return np.asarray(cumulative[1:], dtype=np.float64)

    return mech


def _ordered_runs(bottom: bool) -> dict[str, Callable[..., Any]]:
    pol = Policy.line(DOM8, bottom=bottom)
    return {
        "ordered": lambda h, r: fugu.blowfish.ordered(h, EPS, pol, rng=r),
        # fanout 2, height 1: 2 blocks, so adding a record moves both S-nodes (S_S = 2)
        "oh": lambda h, r: fugu.blowfish.ordered_hierarchical(
            h, EPS, pol, fanout=2, height=1, rng=r
        ),
    }


@pytest.mark.parametrize("name", ["ordered", "oh"])
def test_ordered_with_bottom_passes_audit_on_a_record_added_at_the_first_value(name: str) -> None:
    """A record added at value 0 changes every cumulative count (Ordered: S = k = 4) and every
    S-node (OH: S_S = the number of blocks): the hardest add/remove pair."""
    added = BASE8 + np.eye(4, dtype=np.int64)[0]
    res = audit(_cumulative(_ordered_runs(True)[name]), BASE8, added, EPS, n_runs=RUNS_BF)
    assert res.passed, str(res)


@pytest.mark.parametrize("name", ["ordered", "oh"])
def test_ordered_without_bottom_fails_audit_on_an_added_record(name: str) -> None:
    """Without ⊥ (moves only: S = 1 and the total n is public, released exactly) the same
    add/remove pair must fail; the released total is the statistic (after OH's least squares
    the default projection mixes it with the noisy nodes and sees only 0.8)."""
    added = BASE8 + np.eye(4, dtype=np.int64)[0]
    mech = _cumulative(_ordered_runs(False)[name])
    res = audit(mech, BASE8, added, EPS, n_runs=RUNS_BF, statistic=lambda o: o[:, -1])
    assert not res.passed, str(res)


def _llr_at(c1: np.ndarray, c2: np.ndarray, cols: list[int]) -> Callable[..., Any]:
    """Σ over the columns of |y − c2| − |y − c1|: the log-likelihood ratio (up to the common
    scale) of independent Laplace noise on those columns."""
    a, b = c1[cols], c2[cols]
    return lambda o: (np.abs(o[:, cols] - b) - np.abs(o[:, cols] - a)).sum(axis=1)


def test_ordered_with_bottom_run_at_twice_the_epsilon_fails_audit() -> None:
    """Companion of the ⊥ audit: Ordered run at 2ε, claimed ε, on the same pair. Its cumulative
    counts get independent noise of one scale, so the statistic is their exact LLR (the default
    projection is weaker)."""
    pol = Policy.line(DOM8, bottom=True)
    added = BASE8 + np.eye(4, dtype=np.int64)[0]
    stat = _llr_at(np.cumsum(BASE8), np.cumsum(added), list(range(4)))
    ok = audit(
        _cumulative(lambda h, r: fugu.blowfish.ordered(h, EPS, pol, rng=r)),
        BASE8, added, EPS, n_runs=RUNS_BF, statistic=stat,
    )  # fmt: skip
    assert ok.passed, str(ok)
    loud = _cumulative(lambda h, r: fugu.blowfish.ordered(h, 2 * EPS, pol, rng=r))
    res = audit(loud, BASE8, added, EPS, n_runs=RUNS_BF, statistic=stat)
    assert not res.passed, str(res)


def test_oh_with_bottom_s_nodes_run_loud_fail_audit() -> None:
    """Companion for OH with ⊥: without consistency the cumulative counts at the 2 block ends
    are the S-nodes (independent noise of scale S_S/ε_S, S_S = 2 blocks); the LLR on them sees
    the S part's loss ε_S alone, so the mechanism is run at 4ε (S part ≈ 2.2ε) to fail at ε,
    and passes at ε (S part ≈ 0.56ε)."""
    pol = Policy.line(DOM8, bottom=True)
    added = BASE8 + np.eye(4, dtype=np.int64)[0]
    stat = _llr_at(np.cumsum(BASE8), np.cumsum(added), [1, 3])

    def run(eps: float) -> Callable[..., Any]:
        return _cumulative(
            lambda h, r: fugu.blowfish.ordered_hierarchical(
                h, eps, pol, fanout=2, height=1, consistency=False, rng=r
            )
        )

    rel = fugu.blowfish.ordered_hierarchical(
        _h8 := fugu.Histogram(BASE8, DOM8), EPS, pol, fanout=2, height=1, consistency=False
    )
    assert rel.guarantee.parameters["sensitivity_s"] == 2.0 and _h8.counts.sum() == 6
    assert audit(run(EPS), BASE8, added, EPS, n_runs=RUNS_BF, statistic=stat).passed
    res = audit(run(4 * EPS), BASE8, added, EPS, n_runs=RUNS_BF, statistic=stat)
    assert not res.passed, str(res)
