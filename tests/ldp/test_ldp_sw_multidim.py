"""Square Wave and the multi-dimensional baselines (HIO, LHIO, CALM, MSW, Uni).

Statistical checks use fixed seeds: KS at p > 1e-4, audits at alpha = 1e-3, accuracy bounds at
several times the measured error of the seed used (each would fail only if the method broke).
"""

from __future__ import annotations

import math

import numpy as np
import pytest

import fugu
from fugu.ldp.square_wave import (
    em_reconstruct,
    reconstruct,
    sw_densities,
    sw_half_width,
    sw_histogram,
    sw_perturb,
    sw_transition,
)
from fugu.queries import PrefixSums
from fugu.testing import audit, ks_cdf


# -- Square Wave -----------------------------------------------------------------------------------
@pytest.mark.parametrize(("eps", "b"), [(0.5, 0.358), (1.0, 0.256), (2.0, 0.129)])
def test_half_width_of_the_spec(eps, b) -> None:
    assert sw_half_width(eps) == pytest.approx(b, abs=6e-4)
    p, q = sw_densities(eps)
    assert p / q == pytest.approx(math.exp(eps))
    bb = sw_half_width(eps)
    assert 2 * bb * p + q * 1.0 == pytest.approx(1.0)  # total mass over [-b, 1+b]


def test_sw_output_follows_the_square_wave_density() -> None:
    eps, x = 1.0, 0.3
    b = sw_half_width(eps)
    p, q = sw_densities(eps)
    y = sw_perturb(np.full(100_000, x), eps, fugu.RandomSource(seed=1), b)

    def cdf(t):
        t = np.clip(t, -b, 1 + b)
        near = np.clip(t, x - b, x + b) - (x - b)
        return q * (t + b) + (p - q) * near

    assert ks_cdf(y, cdf) > 1e-4


def _sw_mech(eps_used: float):
    def mech(x, rng, n):
        return sw_perturb(np.full(n, x), eps_used, rng, sw_half_width(1.0))

    return mech


def test_sw_audit_passes_and_miscalibrated_fails() -> None:
    ok = audit(_sw_mech(1.0), 0.0, 1.0, 1.0, n_runs=60_000, vectorised=True)
    assert ok.passed, str(ok)
    # Same window, but the densities of ε = 2: the ratio is e^2 on the window.
    bad = audit(_sw_mech(2.0), 0.0, 1.0, 1.0, n_runs=60_000, vectorised=True)
    assert not bad.passed, str(bad)


def test_transition_is_stochastic_and_em_recovers_the_input() -> None:
    M = sw_transition(1.0, 16, 40)
    np.testing.assert_allclose(M.sum(axis=0), 1.0)
    truth = np.zeros(16)
    truth[4], truth[11] = 0.7, 0.3
    h = M @ truth * 1e6  # the expected histogram: EM's fixed point is the truth
    theta, _ = em_reconstruct(h, M, smoothing=False, max_iter=20_000, tol=1e-9)
    assert np.abs(theta - truth).sum() < 0.05


def test_ems_smooths_both_edges_symmetrically() -> None:
    eps, c = 1.0, 16
    b = sw_half_width(eps)
    M = sw_transition(eps, 128, 200, b=b, points=4)
    h = M @ np.full(128, 1 / 128) * 1e5
    h = (h + h[::-1]) / 2  # an exactly mirror-symmetric histogram
    theta, _ = reconstruct(h, eps, c, b=b)
    np.testing.assert_allclose(theta, theta[::-1], atol=1e-9)


def test_sw_estimates_a_distribution() -> None:
    dom = fugu.Domain([fugu.Ordinal("s", 0, 31)])
    vals = np.clip(np.round(np.random.default_rng(0).normal(16, 4, 40_000)), 0, 31).astype(int)
    true = np.bincount(vals, minlength=32) / vals.size
    for rec in ("ems", "em"):
        rel = fugu.ldp.SW(dom, 2.0, reconstruction=rec).simulate(
            {"s": vals}, rng=fugu.RandomSource(seed=3)
        )
        est = rel.counts / vals.size
        assert rel.counts.sum() == pytest.approx(vals.size)
        assert np.abs(est - true).sum() < 0.25, rec
        assert abs(rel.answer({"s": (8, 23)}) / vals.size - true[8:24].sum()) < 0.05
    hist = sw_histogram(np.array([-0.2, 0.5, 1.2]), 0.25, 10)
    assert hist.sum() == 3


def test_sw_on_binned_raw_values() -> None:
    dom = fugu.Domain([fugu.Ordinal("x", edges=np.linspace(0, 1, 17).tolist())])
    x = np.random.default_rng(2).beta(2, 5, 20_000)
    rel = fugu.ldp.SW(dom, 2.0).simulate({"x": x}, rng=fugu.RandomSource(seed=4))
    true = np.histogram(x, bins=16, range=(0, 1))[0] / x.size
    assert np.abs(rel.counts / x.size - true).sum() < 0.25


# -- multi-dimensional baselines ------------------------------------------------------------
N, D, C = 60_000, 3, 16


@pytest.fixture(scope="module")
def data():
    dom = fugu.datasets.synthetic_domain(D, C)
    recs = fugu.datasets.correlated_gaussian(N, D, C, rho=0.6, seed=7)
    cube = np.zeros(dom.shape)
    np.add.at(cube, tuple(dom.encode_columns(recs).T), 1)
    return dom, recs, cube


def _mae(rel, dom, cube, lam, seed=1):
    w = fugu.random_workload(dom, 40, n_predicates=lam, volume=0.5, seed=seed)
    truth = PrefixSums(cube).answer(w.bounds(dom))
    return float(np.mean(np.abs(rel.answer_many(w) - truth)) / N)


def test_near_exact_at_huge_epsilon(data) -> None:
    """With ε = 20 the oracles are almost noiseless: the estimators' algebra must be exact."""
    dom, recs, cube = data
    for cls in (fugu.ldp.HIO, fugu.ldp.LHIO, fugu.ldp.CALM):
        rel = cls(dom, 20.0, oracle="grr").simulate(recs, rng=fugu.RandomSource(seed=1))
        # sampling error only: each group sees a random subset of the users
        limit = 0.02 if cls is fugu.ldp.HIO else 0.01
        assert _mae(rel, dom, cube, 2) < limit, cls.name
        assert _mae(rel, dom, cube, 1) < limit, cls.name
    # λ = 3 from exact pairs: the weighted update's error floor (spec §5.7, ~0.003 with all four
    # in/out cells)
    rel = fugu.ldp.CALM(dom, 20.0, oracle="grr").simulate(recs, rng=fugu.RandomSource(seed=1))
    assert _mae(rel, dom, cube, 3) < 0.01
    msw = fugu.ldp.MSW(dom, 20.0).simulate(recs, rng=fugu.RandomSource(seed=1))
    marg = cube.sum(axis=(1, 2)) / N
    assert np.abs(msw.marginal("a0") / N - marg).sum() < 0.05


def test_every_method_beats_the_uniform_guess(data) -> None:
    dom, recs, cube = data
    uni = _mae(fugu.ldp.Uni(dom, 2.0).simulate(recs), dom, cube, 2)
    for cls in (fugu.ldp.MSW, fugu.ldp.HIO, fugu.ldp.LHIO, fugu.ldp.CALM):
        kw = {"branching": 4} if cls in (fugu.ldp.HIO, fugu.ldp.LHIO) else {}
        rel = cls(dom, 2.0, **kw).simulate(recs, rng=fugu.RandomSource(seed=2))
        err = _mae(rel, dom, cube, 2)
        assert err < uni, (cls.name, err, uni)


def test_uniform_guess_known_answer() -> None:
    dom = fugu.Domain([fugu.Ordinal("a", 0, 9), fugu.Ordinal("b", 0, 3)])
    rel = fugu.ldp.Uni(dom, 1.0).simulate({"a": [0] * 40, "b": [0] * 40})
    assert rel.answer({"a": (0, 4), "b": 1}) == pytest.approx(40 * 0.5 * 0.25)
    assert rel.answer({}) == 40


def test_hio_decomposition_counts_every_value_once() -> None:
    """HIO with a noiseless stand-in: every group holds everyone (answers = exact counts)."""
    dom = fugu.datasets.synthetic_domain(2, 9)  # c = 9 is not a power of b = 2: padded tree
    hio = fugu.ldp.HIO(dom, 20.0, branching=2, oracle="grr")  # ε at the top of the LDP range
    recs = fugu.datasets.correlated_gaussian(500, 2, 9, seed=3)
    codes = dom.encode_columns(recs)
    parts = [
        hio.client(fugu.RandomSource(seed=g)).perturb(codes, groups=np.full(500, g))
        for g in range(hio.n_groups)
    ]
    agg = hio.aggregator()
    for p in parts:
        agg.add(p)
    rel = agg.estimate()
    cube = np.zeros(dom.shape)
    np.add.at(cube, tuple(codes.T), 1)
    w = fugu.random_workload(dom, 30, seed=5)
    # every group has all 500 users, scaled by n / N_group = n_groups: divide it back
    est = rel.answer_many(w) / hio.n_groups
    # ε = 20 keeps a report with probability 1 − 1e-8: the debiasing moves counts by < 1e-3
    np.testing.assert_allclose(est, PrefixSums(cube).answer(w.bounds(dom)), atol=1e-3)


def test_lhio_pairs_are_consistent(data) -> None:
    dom, recs, cube = data
    for norm in ("norm", "norm-sub"):
        lhio = fugu.ldp.LHIO(dom, 1.0, normalisation=norm)
        rel = lhio.simulate(recs, rng=fugu.RandomSource(seed=3))
        m01, m02 = rel.pair("a0", "a1"), rel.pair("a0", "a2")
        assert m01.sum() == pytest.approx(N)
        np.testing.assert_allclose(m01.sum(axis=1), m02.sum(axis=1), atol=N * 0.02)
        assert "consistency" in " ".join(rel.guarantee.post_processing)
        if norm == "norm-sub":
            assert m01.min() >= 0
        else:  # unbiased: linear post-processing only
            assert "unbiased" in " ".join(rel.guarantee.post_processing)


def test_msw_is_a_product(data) -> None:
    dom, recs, cube = data
    rel = fugu.ldp.MSW(dom, 1.0).simulate(recs, rng=fugu.RandomSource(seed=4))
    q = {"a0": (0, 7), "a1": (4, 11)}
    a0 = rel.answer({"a0": (0, 7)}) / N
    a1 = rel.answer({"a1": (4, 11)}) / N
    assert rel.answer(q) == pytest.approx(N * a0 * a1)


@pytest.mark.parametrize("method", ["hio", "calm", "msw"])
def test_multidim_clients_pass_the_ldp_audit(method) -> None:
    """One group's randomiser on two records that differ in every attribute (the hard pair)."""
    dom = fugu.datasets.synthetic_domain(2, 4)
    proto = {
        "hio": lambda: fugu.ldp.HIO(dom, 1.0, branching=2, oracle="grr"),
        "calm": lambda: fugu.ldp.CALM(dom, 1.0, oracle="grr"),
        "msw": lambda: fugu.ldp.MSW(dom, 1.0),
    }[method]()
    group = proto.n_groups - 1

    def mech(record, rng, n):
        codes = np.repeat(np.asarray(record, dtype=np.int64)[None], n, axis=0)
        rep = proto.client(rng).perturb(codes, groups=np.full(n, group))
        return rep.columns["y"].astype(np.float64)

    res = audit(
        mech,
        [0, 0],
        [3, 3],
        1.0,
        n_runs=50_000,
        discrete=method != "msw",
        vectorised=True,
        statistic=(lambda out: out[:, 0]) if method != "msw" else None,
    )
    assert res.passed, str(res)
