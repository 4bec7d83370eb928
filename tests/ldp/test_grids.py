"""Tests of fugu.ldp.grids: guideline, grid geometry, noise-free answering (exactness and
maximum-entropy estimates), arbitrary domain sizes, bad input, save/load.

Deterministic unless stated; statistical tests give their false-failure rate.
"""

from __future__ import annotations

from itertools import combinations

import numpy as np
import pytest
from ldp_helpers import exact_grids
from scipy.optimize import minimize

import fugu
from fugu.errors import DomainError, InvalidParameterError
from fugu.ldp import HDG, TDG
from fugu.ldp.grids import GridRelease, grid_edges, guideline, round_granularity

# --------------------------------------------------------------------------- guideline


# spec ldp_range.md §5.2 table: (n, d, eps) -> (HDG g1 raw, used), (HDG g2 raw, used), (TDG g2)
SPEC_TABLE = [
    (200_000, 4, 0.5, (10.8, 8), (2.07, 2), (2.35, 2)),
    (200_000, 4, 1.0, (17.5, 16), (2.97, 2), (3.38, 4)),
    (200_000, 4, 2.0, (30.0, 32), (4.47, 4), (5.07, 4)),
    (200_000, 6, 0.5, (8.4, 8), (1.72, 2), (1.87, 2)),
    (200_000, 6, 1.0, (13.6, 16), (2.47, 2), (2.69, 2)),
    (200_000, 6, 2.0, (23.5, 16), (3.71, 4), (4.04, 4)),
    (1_000_000, 4, 0.5, (18.4, 16), (3.10, 4), (3.52, 4)),
    (1_000_000, 4, 1.0, (29.9, 32), (4.45, 4), (5.05, 4)),
    (1_000_000, 4, 2.0, (51.3, 64), (6.68, 8), (7.59, 8)),
    (1_000_000, 6, 0.5, (14.4, 16), (2.57, 2), (2.80, 2)),
    (1_000_000, 6, 1.0, (23.3, 16), (3.69, 4), (4.02, 4)),
    (1_000_000, 6, 2.0, (40.1, 32), (5.55, 4), (6.03, 8)),
]


@pytest.mark.parametrize(("n", "d", "eps", "g1", "g2", "tg2"), SPEC_TABLE)
def test_guideline_matches_spec_table(n, d, eps, g1, g2, tg2) -> None:
    r1, r2 = guideline(n, eps, d, hybrid=True)
    assert r1 == pytest.approx(g1[0], abs=0.06)  # the table has one decimal
    assert r2 == pytest.approx(g2[0], abs=0.0051)
    assert round_granularity(r1, 64) == g1[1]
    assert round_granularity(r2, 64) == g2[1]
    _, t2 = guideline(n, eps, d, hybrid=False)
    assert t2 == pytest.approx(tg2[0], abs=0.0051)
    assert round_granularity(t2, 64) == tg2[1]
    dom = fugu.datasets.synthetic_domain(d, 64)
    h = HDG(dom, eps, n_users=n)
    assert h.g1 == [g1[1]] * d and h.g2 == [g2[1]] * d
    assert TDG(dom, eps, n_users=n).g2 == [tg2[1]] * d


def test_round_granularity_rules() -> None:
    assert round_granularity(0.3, 64) == 2  # floor of 2
    assert round_granularity(6.0, 64) == 4  # tie -> lower
    assert round_granularity(6.01, 64) == 8
    assert round_granularity(1000.0, 64) == 64  # capped at c
    assert round_granularity(9.0, 10) == 8
    assert round_granularity(13.0, 10) == 10
    assert round_granularity(3.5, 3) == 3


def test_grid_edges_nest_and_cover() -> None:
    for c in (10, 17, 64, 100):
        for g2 in (2, 4):
            for g1 in (g2, 2 * g2, 4 * g2):
                if g1 > c:
                    continue
                fine, coarse = grid_edges(c, g1), grid_edges(c, g2)
                assert fine[0] == 0 and fine[-1] == c
                assert np.all(np.diff(fine) >= 1)
                assert set(coarse) <= set(fine)
    with pytest.raises(InvalidParameterError):
        grid_edges(4, 5)


def test_g1_refines_g2_and_explicit_granularities() -> None:
    dom = fugu.Domain([fugu.Ordinal("x", 0, 9), fugu.Ordinal("y", 0, 99), fugu.Ordinal("z", 0, 2)])
    h = HDG(dom, 1.0, g1=[4, 16, 64], g2=[8, 4, 2])
    assert h.g1 == [8, 16, 3]  # g1 raised to g2 on x, capped at c on z
    assert h.g2 == [8, 4, 2]
    with pytest.raises(InvalidParameterError, match="multiple"):
        HDG(dom, 1.0, g1=[4, 12, 3], g2=[2, 8, 2])


# --------------------------------------------------------------------------- bad input


def test_tdg_needs_two_attributes() -> None:
    dom = fugu.Domain([fugu.Ordinal("x", 0, 9)])
    with pytest.raises(InvalidParameterError, match="at least 2 attributes"):
        TDG(dom, 1.0)
    HDG(dom, 1.0, n_users=1000)  # a single 1-D grid is fine for HDG


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"oracle": "sw"}, "oracle"),
        ({"estimator": "exact"}, "estimator"),
        ({"alpha1": -1.0}, "alpha1"),
        ({"n_users": 0}, "n_users"),
        ({"g2": [2]}, "one granularity per attribute"),
        ({"g2": 0}, "positive"),
    ],
)
def test_bad_parameters(kwargs, match) -> None:
    dom = fugu.datasets.synthetic_domain(3, 8)
    with pytest.raises(InvalidParameterError, match=match):
        HDG(dom, 1.0, **kwargs)


def test_bad_epsilon_and_g1_for_tdg() -> None:
    dom = fugu.datasets.synthetic_domain(3, 8)
    for eps in (0, -1, float("nan"), float("inf")):
        with pytest.raises(InvalidParameterError):
            TDG(dom, eps)
    with pytest.raises(InvalidParameterError, match="g1"):
        TDG(dom, 1.0, g1=4)


def test_unresolved_protocol_explains_itself() -> None:
    dom = fugu.datasets.synthetic_domain(3, 8)
    with pytest.raises(InvalidParameterError, match="n_users"):
        HDG(dom, 1.0).aggregator()


def _exact_release(cls, dom, codes, **kw) -> GridRelease:
    """Grids with exact counts (noise switched off) through the same Phases 2 and 3."""
    proto = cls(dom, 1.0, n_users=len(codes), **kw)
    grids = exact_grids(proto, dom, codes)
    g = proto.guarantee(private=False, n=len(codes))
    return proto.release_from_grids(grids, float(len(codes)), g)


def _codes(dom, n, seed):
    rng = np.random.default_rng(seed)
    z = rng.multivariate_normal(np.zeros(dom.ndim), 0.5 + 0.5 * np.eye(dom.ndim), size=n)
    u = np.clip((z + 3) / 6, 0, 0.999999)
    return (u * np.asarray(dom.shape)).astype(np.int64)


def test_bad_queries() -> None:
    dom = fugu.datasets.synthetic_domain(3, 8)
    rel = _exact_release(HDG, dom, _codes(dom, 500, 0), g1=4, g2=2)
    with pytest.raises(DomainError, match="reversed"):
        rel.answer(fugu.RangeQuery({"a0": (5, 2)}))
    with pytest.raises(InvalidParameterError, match="twice"):
        rel.answer(fugu.RangeQuery({"a0": (1, 2)}, a0=(3, 4)))
    with pytest.raises(DomainError):
        rel.answer(fugu.RangeQuery({"a0": (0, 8)}))  # beyond the domain 0..7
    with pytest.raises(Exception, match="a9"):
        rel.answer(fugu.RangeQuery({"a9": (0, 1)}))


# --------------------------------------------------------------------------- noise-free answers


def _true(codes, bounds):
    inside = (codes[None] >= bounds[:, None, :, 0]) & (codes[None] < bounds[:, None, :, 1])
    return inside.all(-1).sum(1).astype(float)


@pytest.mark.parametrize("cls", [TDG, HDG])
def test_noise_free_aligned_2d_answers_are_exact(cls) -> None:
    dom = fugu.Domain([fugu.Ordinal("x", 0, 15), fugu.Ordinal("y", 0, 23), fugu.Ordinal("z", 0, 9)])
    codes = _codes(dom, 3000, 1)
    kw = {"g1": [8, 8, 10], "g2": [4, 4, 2]} if cls is HDG else {"g2": [4, 4, 2]}
    rel = _exact_release(cls, dom, codes, **kw)
    # grids x: 4 cells of 4; y: 4 cells of 6; z: 2 cells of 5 -> aligned intervals
    qs = [
        fugu.RangeQuery({"x": (4, 11), "y": (0, 17)}),
        fugu.RangeQuery({"x": (0, 3), "z": (5, 9)}),
        fugu.RangeQuery({"y": (6, 23), "z": (0, 4)}),
        fugu.RangeQuery({"y": (6, 11)}),
    ]
    w = fugu.Workload(qs)
    np.testing.assert_allclose(rel.answer_many(w), _true(codes, w.bounds(dom)), atol=1e-6)


def test_hdg_noise_free_unaligned_uses_1d_information() -> None:
    """With exact grids and an attribute-pair that is independent within cells, HDG's response
    matrix answers unaligned 2-D queries far better than TDG's uniform guess."""
    dom = fugu.datasets.synthetic_domain(2, 32)
    codes = _codes(dom, 20_000, 2)
    kw = {"g2": 2}
    hdg = _exact_release(HDG, dom, codes, g1=32, **kw)
    tdg = _exact_release(TDG, dom, codes, partitions="aligned", **kw)  # the paper's TDG
    w = fugu.queries.random_workload(dom, 200, n_predicates=2, seed=3)
    t = _true(codes, w.bounds(dom))
    e_h = np.mean(np.abs(hdg.answer_many(w) - t))
    e_t = np.mean(np.abs(tdg.answer_many(w) - t))
    assert e_h < 0.5 * e_t
    # 1-D answers from exact 1-D grids at full resolution are exact
    w1 = fugu.queries.random_workload(dom, 50, n_predicates=1, seed=4)
    np.testing.assert_allclose(hdg.answer_many(w1), _true(codes, w1.bounds(dom)), atol=1e-6)


def _max_entropy_answer(codes, b, restricted, n):
    """Direct solve: max-entropy 2^λ in/out table matching every pair's four cells."""
    lam = len(restricted)
    ins = np.stack([(codes[:, a] >= b[a, 0]) & (codes[:, a] < b[a, 1]) for a in restricted], 1)
    idx = (~ins).astype(int) @ (2 ** np.arange(lam)[::-1])
    p = np.bincount(idx, minlength=2**lam).reshape((2,) * lam) / n
    cells = np.array(np.unravel_index(np.arange(2**lam), (2,) * lam)).T
    rows, rhs = [np.ones(2**lam)], [1.0]
    for j, k in combinations(range(lam), 2):
        m = p.sum(axis=tuple(i for i in range(lam) if i not in (j, k)))
        for u in (0, 1):
            for v in (0, 1):
                rows.append(((cells[:, j] == u) & (cells[:, k] == v)).astype(float))
                rhs.append(m[u, v])
    a_eq, b_eq = np.array(rows), np.array(rhs)

    def dual(theta):
        q = np.exp(a_eq.T @ theta)
        return float(q.sum() - b_eq @ theta), a_eq @ q - b_eq

    res = minimize(dual, np.zeros(len(b_eq)), jac=True, method="BFGS", options={"gtol": 1e-12})
    return float(np.exp(a_eq.T @ res.x)[0] * n)


@pytest.mark.parametrize("lam", [3, 4])
def test_noise_free_lambda_d_is_the_max_entropy_fit(lam) -> None:
    dom = fugu.datasets.synthetic_domain(4, 8)
    codes = _codes(dom, 4000, 5)
    rel = _exact_release(TDG, dom, codes, g2=8, tol=1e-9, max_iter=5000)  # g2 = c: exact 2-D
    w = fugu.queries.random_workload(dom, 5, n_predicates=lam, volume=0.5, seed=lam)
    b = w.bounds(dom)
    got = rel.answer_many(w)
    for i in range(len(w)):
        restricted = [a for a in range(4) if b[i, a, 0] > 0 or b[i, a, 1] < 8]
        assert got[i] == pytest.approx(_max_entropy_answer(codes, b[i], restricted, 4000), abs=0.05)


def test_in_in_estimator_has_the_higher_floor() -> None:
    """Spec §5.7: with exact 2-D answers the (in,in)-only estimator's error is several times
    the four-cell estimator's (deterministic data and queries)."""
    dom = fugu.datasets.synthetic_domain(5, 16)
    codes = _codes(dom, 20_000, 6)
    rel = _exact_release(TDG, dom, codes, g2=16)
    w = fugu.queries.random_workload(dom, 100, n_predicates=3, volume=0.5, seed=7)
    t = _true(codes, w.bounds(dom))
    full = np.mean(np.abs(rel.answer_many(w) - t))
    inin = np.mean(np.abs(rel.with_estimator("in-in").answer_many(w) - t))
    assert full * 2 < inin


def test_every_query_dimension_and_attribute_subset() -> None:
    dom = fugu.Domain(
        [
            fugu.Ordinal("a", 0, 6),
            fugu.Ordinal("b", 0, 20),
            fugu.Ordinal("c", 0, 2),
            fugu.Ordinal("d", 0, 99),
        ]
    )
    codes = _codes(dom, 2000, 8)
    for cls in (TDG, HDG):
        rel = _exact_release(cls, dom, codes)
        assert rel.answer(fugu.RangeQuery({})) == pytest.approx(2000)
        for lam in range(1, 5):
            w = fugu.queries.random_workload(dom, 20, n_predicates=lam, seed=lam)
            got = rel.answer_many(w)
            assert np.all(np.isfinite(got))
            assert np.all(got >= -1e-6) and np.all(got <= 2000 + 1e-6)
            # single answers agree with the vectorised path
            assert rel.answer(w[0]) == pytest.approx(got[0])


def test_save_load_roundtrip(tmp_path) -> None:
    dom = fugu.datasets.synthetic_domain(3, 16)
    rel = HDG(dom, 1.0).simulate(_codes(dom, 5000, 9), rng=fugu.RandomSource(seed=1))
    path = rel.save(tmp_path / "hdg")
    back = fugu.Release.load(path)
    assert isinstance(back, GridRelease)
    w = fugu.queries.random_workload(dom, 30, n_predicates=(1, 3), seed=1)
    np.testing.assert_allclose(back.answer_many(w), rel.answer_many(w))
    assert back.guarantee == rel.guarantee
    assert back.guarantee.private is False


def test_range_report_writes_html(tmp_path) -> None:
    from fugu.report.ldp_plots import range_report

    dom = fugu.datasets.synthetic_domain(3, 16)
    data = fugu.datasets.correlated_gaussian(5000, 3, 16, seed=1)
    rep = range_report(
        dom, data, methods=("uni", "tdg", "hdg", "nope"), epsilons=(1.0, 2.0), n_queries=20
    )
    html = rep.save(tmp_path / "r.html").read_text()
    assert html.count("data:image/png;base64") == 2  # MAE vs ε, heatmaps
    assert "HDG" in html and "nope" in html and "not private" in html


@pytest.mark.parametrize("cls", [TDG, HDG])
def test_cells_match_the_grid_edges(cls) -> None:
    dom = fugu.Domain([fugu.Ordinal("x", 0, 9), fugu.Ordinal("y", 0, 40), fugu.Ordinal("z", 0, 2)])
    proto = cls(dom, 1.0, g2=[4, 4, 2], **({"g1": [8, 16, 3]} if cls is HDG else {}))
    rng = np.random.default_rng(3)
    codes = np.stack([rng.integers(0, s, 500) for s in dom.shape], 1)
    groups = rng.integers(0, proto.n_groups, 500)
    got = proto.cells(codes, groups)
    for i in range(500):
        gr = proto.groups[groups[i]]
        cell = 0
        for e, a in zip(proto.edges(gr), gr, strict=True):
            cell = cell * (len(e) - 1) + int(np.searchsorted(e, codes[i, a], side="right") - 1)
        assert got[i] == cell
