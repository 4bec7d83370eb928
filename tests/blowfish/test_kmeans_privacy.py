"""Privacy audits of one k-means iteration's release (noisy q_size and q_sum) on worst-case
neighbours for every graph family, and audits that must fail for mis-calibrated variants.

Each audit draws 40,000 releases per input through the mechanism's own code path
(``release_iteration`` with ``repeats``) and tests every threshold event with Clopper–Pearson
bounds; a correct mechanism fails with probability at most ``alpha`` = 1e-3 per audit (fixed
seeds make the outcome deterministic).
"""

from __future__ import annotations

import numpy as np
import pytest

import fugu
from fugu.blowfish.kmeans import (
    IterationPlan,
    KMeansGrid,
    _Assigner,
    _cluster_stats,
    _make_assigner,
    kmeans_sensitivities,
    release_iteration,
    secret_graph,
    su_plan,
)
from fugu.testing import audit

EPS = 1.0
RUNS = 40_000
SQUARE = fugu.Domain([fugu.Ordinal("x", 0, 20), fugu.Ordinal("y", 0, 20)])
LINE = fugu.Domain([fugu.Ordinal("age", 0, 20)])
BASE = np.array([[3.0, 4.0], [15.0, 12.0], [8.0, 17.0]])


def _mechanism(dom, policy, centres, mode="safe", scale_sum=1.0, assigner=None, fraction=0.5):
    """One iteration with public centres: assign, count, add noise (vectorised over runs).
    ``fraction="auto"``: the q_size share of Su et al.'s split (the estimator's default)."""
    grid = KMeansGrid.from_domain(dom)
    graph = secret_graph(policy, grid)
    s_size, s_sum = kmeans_sensitivities(graph, grid, mode)
    if fraction == "auto":
        fraction = su_plan(1000, centres.shape[0], grid.high - grid.low, EPS, s_size, s_sum)
        fraction = fraction.size_fraction if 0 < fraction.size_fraction < 1 else 0.5
    plan = IterationPlan.split(EPS, s_size, s_sum * scale_sum, fraction)
    k = centres.shape[0]

    def stats(points):
        codes = grid.encode(points, clip=False)
        pts = grid.to_points(codes)
        assign = assigner or _make_assigner(graph, grid, codes)
        cols = np.ascontiguousarray(pts.T)
        labels = assign(cols, centres)
        return _cluster_stats(cols - grid.centre[:, None], labels, k)

    def run(points, rng, n):
        ns, nq = release_iteration(*stats(points), plan, rng, repeats=n)
        return np.concatenate([ns, nq.reshape(n, -1)], axis=1)

    run.stats = stats  # type: ignore[attr-defined]
    run.plan = plan  # type: ignore[attr-defined]
    return run, (s_size, s_sum)


def _loss_statistic(mech, d1, d2):
    """The privacy-loss variable of the pair, log p1(o)/p2(o) for Laplace noise with the scales
    the mechanism uses: thresholding it gives the most powerful events (Neyman–Pearson)."""
    (n1, q1), (n2, q2) = mech.stats(d1), mech.stats(d2)
    plan = mech.plan
    a = np.concatenate([n1, q1.reshape(-1)]).astype(float)
    b = np.concatenate([n2, q2.reshape(-1)]).astype(float)
    k = n1.size
    scale = np.concatenate(
        [
            np.full(k, plan.sens_size / plan.eps_size if plan.eps_size else np.inf),
            np.full(q1.size, plan.sens_sum / plan.eps_sum if plan.eps_sum else np.inf),
        ]
    )

    def stat(out):
        return ((np.abs(out - b) - np.abs(out - a)) / scale).sum(axis=1)

    return stat


def _pair(x, y, base=BASE):
    return np.vstack([base, [x]]), np.vstack([base, [y]])


CASES = {
    # family: (domain, policy, x, y, public centres); x and y straddle the centres' boundary
    "full": (SQUARE, None, [0, 0], [20, 20], [[5, 5], [15, 15]]),
    "attribute": (SQUARE, "attribute", [0, 0], [20, 0], [[2, 10], [18, 10]]),
    "distance": (SQUARE, "distance:theta=3", [0, 0], [0, 1], [[0, 0], [0, 1]]),
    "partition": (SQUARE, "partition:x=5,y=5", [0, 0], [4, 4], [[0, 0], [4, 4]]),
    "line": (LINE, "line", [0], [1], [[0], [1]]),
}


@pytest.mark.parametrize("family", sorted(CASES))
def test_one_iteration_passes_audit_on_worst_case_neighbours(family: str) -> None:
    dom, policy, x, y, centres = CASES[family]
    base = BASE[:, : len(x)]
    mech, (s_size, s_sum) = _mechanism(dom, policy, np.asarray(centres, float))
    d1, d2 = _pair(x, y, base)
    # the pair is worst case: its exact change equals the sensitivities
    (n1, q1), (n2, q2) = mech.stats(d1), mech.stats(d2)
    assert np.abs(n1 - n2).sum() == s_size
    assert np.abs(q1 - q2).sum() == pytest.approx(s_sum)
    res = audit(
        mech, d1, d2, EPS, n_runs=RUNS, vectorised=True, statistic=_loss_statistic(mech, d1, d2)
    )
    assert res.passed, str(res)


@pytest.mark.parametrize("family", ["full", "distance", "line"])
def test_one_iteration_with_su_split_passes_audit(family: str) -> None:
    """The default budget split (Su et al.: about a fifth of each iteration's ε to q_size) on the
    same worst-case neighbours; halving the q_sum noise under that split is caught."""
    dom, policy, x, y, centres = CASES[family]
    base = BASE[:, : len(x)]
    mech, _ = _mechanism(dom, policy, np.asarray(centres, float), fraction="auto")
    assert 0.1 < mech.plan.eps_size < 0.45
    d1, d2 = _pair(x, y, base)
    stat = _loss_statistic(mech, d1, d2)
    assert audit(mech, d1, d2, EPS, n_runs=RUNS, vectorised=True, statistic=stat).passed
    bad, _ = _mechanism(dom, policy, np.asarray(centres, float), fraction="auto", scale_sum=0.5)
    res = audit(
        bad, d1, d2, EPS, n_runs=RUNS, vectorised=True, statistic=_loss_statistic(bad, d1, d2)
    )
    assert not res.passed, str(res)


def test_paper_sensitivity_fails_audit_when_neighbours_straddle_clusters() -> None:
    """G^{d,θ} with the paper's q_sum sensitivity θ: a boundary-straddling pair leaks."""
    dom, policy, x, y, centres = CASES["distance"]
    mech, (_, s_sum) = _mechanism(dom, policy, np.asarray(centres, float), mode="paper")
    assert s_sum == 3.0
    d1, d2 = _pair(x, y)
    res = audit(
        mech, d1, d2, EPS, n_runs=RUNS, vectorised=True, statistic=_loss_statistic(mech, d1, d2)
    )
    assert not res.passed, str(res)
    assert res.epsilon_lower_bound > 2 * EPS


@pytest.mark.parametrize("family", sorted(CASES))
def test_half_sensitivity_fails_audit(family: str) -> None:
    """Noise for half the q_sum sensitivity is caught on the same worst-case pair."""
    dom, policy, x, y, centres = CASES[family]
    mech, _ = _mechanism(dom, policy, np.asarray(centres, float), scale_sum=0.5)
    d1, d2 = _pair(x, y, BASE[:, : len(x)])
    res = audit(
        mech, d1, d2, EPS, n_runs=RUNS, vectorised=True, statistic=_loss_statistic(mech, d1, d2)
    )
    assert not res.passed, str(res)


def test_partition_without_blockwise_assignment_fails_audit() -> None:
    """Exact sizes are only safe because whole blocks are assigned; nearest-centre assignment
    splits the block and the exact sizes reveal which of the two secret values was present."""
    dom, policy, x, y, centres = CASES["partition"]
    mech, (s_size, _) = _mechanism(dom, policy, np.asarray(centres, float), assigner=_Assigner())
    assert s_size == 0.0
    res = audit(mech, *_pair(x, y), EPS, n_runs=2_000, vectorised=True)
    assert not res.passed, str(res)


def test_whole_fit_is_reproducible_and_marked_not_private_with_seed() -> None:
    X = np.array([[1, 2], [3, 4], [18, 19], [17, 20], [10, 10]], float)
    a = fugu.blowfish.kmeans.KMeans(2, 1.0, domain=SQUARE, rng=fugu.RandomSource(seed=5)).fit(X)
    b = fugu.blowfish.kmeans.KMeans(2, 1.0, domain=SQUARE, rng=fugu.RandomSource(seed=5)).fit(X)
    np.testing.assert_array_equal(a.cluster_centers_, b.cluster_centers_)
    assert a.guarantee_.private is False
    assert fugu.blowfish.kmeans.KMeans(2, 1.0, domain=SQUARE).fit(X).guarantee_.private is True


def test_paper_mode_is_marked_not_private_everywhere(tmp_path) -> None:
    """Issue 14 item 3: sensitivity='paper' fails the audit above, so even with the secure
    (production) source the fit warns and every output says NOT PRIVATE."""
    import contextlib
    import io
    import json

    from fugu.cli import main

    X = np.array([[1, 2], [3, 4], [18, 19], [17, 20], [10, 10]], float)
    km = fugu.blowfish.kmeans.KMeans(
        2, 1.0, policy="distance:theta=3", domain=SQUARE, sensitivity="paper"
    )
    assert "NOT PRIVATE" in repr(km)
    with pytest.warns(fugu.PrivacyLeakWarning, match="NOT PRIVATE"):
        km.fit(X)
    g = km.guarantee_
    assert g.private is False and "NOT PRIVATE" in g.describe()
    assert "not_private_reason" in g.parameters and "paper" in g.parameters["warning"]
    assert km.summary()["private"] is False and km.summary()["guarantee"]["private"] is False
    assert g.to_dict()["private"] is False
    assert "NOT PRIVATE" in repr(km)
    # the safe default with the secure source stays private and silent
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("error", fugu.PrivacyLeakWarning)
        safe = fugu.blowfish.kmeans.KMeans(2, 1.0, policy="distance:theta=3", domain=SQUARE).fit(X)
    assert safe.guarantee_.private is True and "NOT PRIVATE" not in repr(safe)
    # saved files (fugu kmeans --out ... .json) carry the flag
    csv = tmp_path / "pts.csv"
    csv.write_text("x,y\n" + "\n".join(f"{int(a)},{int(b)}" for a, b in X) + "\n")
    out = tmp_path / "c.json"
    args = ["kmeans", "--data", str(csv), "--columns", "x:0..20,y:0..20", "--k", "2"]
    args += ["--epsilon", "1", "--policy", "distance:theta=3", "--sensitivity", "paper"]
    buf = io.StringIO()
    with contextlib.redirect_stdout(buf), contextlib.redirect_stderr(buf):
        with pytest.warns(fugu.PrivacyLeakWarning):
            code = main([*args, "--out", str(out)])
    assert code == 0, buf.getvalue()
    assert json.loads(out.read_text())["guarantee"]["private"] is False
    assert "NOT PRIVATE" in buf.getvalue()
