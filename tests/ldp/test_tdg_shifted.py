"""TDG with shifted partitions (``partitions="shifted"``, the default when g2 ≤ 2).

The grids of pairs (j, k) with j + k odd cut both attributes half a cell further, so every
attribute's margin is seen on two partitions whose common refinement has cells of half the
width (:func:`fugu.inference.ldp_post.refined_margin`). Layout, client cells, the refinement
on exact counts, the release paths (header, save/load), a privacy audit of a shifted grid's
client (fugu.testing.audit: false-alarm rate 1e-3, fixed seed) and the accuracy gain at g2 = 2
(fixed seeds, margins of 3-6x against a measured 10-20x).
"""

from __future__ import annotations

import numpy as np
import pytest
from ldp_helpers import exact_grids

import fugu
from fugu.errors import InvalidParameterError
from fugu.inference.ldp_post import GridEstimate, consistency, refined_margin
from fugu.ldp import HDG, TDG
from fugu.ldp.grid_layout import grid_edges, shifted_edges
from fugu.testing import audit


def _codes(dom: fugu.Domain, n: int, seed: int) -> np.ndarray:
    data = fugu.datasets.correlated_gaussian(n, dom.ndim, int(dom.shape[0]), seed=seed)
    return np.stack([data[a] for a in dom.names], axis=1)


def _true(codes: np.ndarray, bounds: np.ndarray) -> np.ndarray:
    inside = (codes[None, :, :] >= bounds[:, None, :, 0]) & (
        codes[None, :, :] < bounds[:, None, :, 1]
    )
    return inside.all(axis=2).sum(axis=1).astype(float)


def test_layout_is_public_and_half_of_each_attributes_grids_shift() -> None:
    dom = fugu.datasets.synthetic_domain(6, 64)
    p = TDG(dom, 0.5, n_users=1_000_000)  # the guideline's g2 = 2: "auto" shifts
    assert p.g2 == [2] * 6 and p.partitions == "shifted"
    assert TDG(dom, 2.0, n_users=1_000_000).partitions == "aligned"  # g2 = 8
    assert TDG(dom, 0.5, n_users=1_000_000, partitions="aligned").partitions == "aligned"
    for gr in p.groups:
        want = shifted_edges(64, 2) if sum(gr) % 2 else grid_edges(64, 2)
        for e in p.edges(gr):
            np.testing.assert_array_equal(e, want)
    # every attribute sees both partitions (d = 6: 3 shifted and 2 aligned grids each)
    for a in range(6):
        kinds = [p.shifted(gr) for gr in p.groups if a in gr]
        assert sorted(kinds) == [False, False, True, True, True]
    assert p._params()["partitions"] == "shifted"
    assert "partitions" not in TDG(dom, 2.0, n_users=10**6)._params()  # headers as before


def test_shifted_edges_midpoints() -> None:
    for c, g in ((64, 2), (64, 4), (10, 4), (33, 8), (3, 2)):
        a, s = grid_edges(c, g), shifted_edges(c, g)
        assert s[0] == 0 and s[-1] == c and np.all(np.diff(s) > 0)
        assert len(s) == g + 2 or c < 2 * g  # g - 1 whole cells and two half cells
        mids = (a[:-1] + a[1:]) // 2
        assert set(s[1:-1]) <= set(mids.tolist()) | set(
            ((2 * np.arange(g) + 1) * c // (2 * g)).tolist()
        )
    np.testing.assert_array_equal(shifted_edges(8, 8), grid_edges(8, 8))  # one value per cell
    np.testing.assert_array_equal(shifted_edges(8, 1), grid_edges(8, 1))


def test_bad_partitions_refused() -> None:
    dom = fugu.datasets.synthetic_domain(3, 8)
    with pytest.raises(InvalidParameterError, match="partitions must be one of"):
        TDG(dom, 1.0, partitions="offset")
    with pytest.raises(InvalidParameterError, match="TDG option"):
        HDG(dom, 1.0, partitions="shifted")


def test_client_cells_match_brute_force() -> None:
    dom = fugu.Domain([fugu.Ordinal("a", 0, 9), fugu.Ordinal("b", 0, 16), fugu.Ordinal("c", 0, 4)])
    p = TDG(dom, 1.0, g2=[4, 4, 2], partitions="shifted")
    rng = np.random.default_rng(3)
    codes = np.stack([rng.integers(0, s, 5_000) for s in dom.shape], axis=1)
    groups = rng.integers(0, len(p.groups), 5_000)
    got = p.cells(codes, groups)
    for j, gr in enumerate(p.groups):
        rows = groups == j
        ex, ey = p.edges(gr)
        cx = np.searchsorted(ex, codes[rows, gr[0]], side="right") - 1
        cy = np.searchsorted(ey, codes[rows, gr[1]], side="right") - 1
        np.testing.assert_array_equal(got[rows], cx * (len(ey) - 1) + cy)
    assert max(int(v) for v in p._require().cells) == 5 * 5  # shifted (a, b): 4 + 1 cells each


def test_refinement_recovers_half_cells_from_exact_grids() -> None:
    dom = fugu.datasets.synthetic_domain(4, 32)
    codes = _codes(dom, 20_000, 1)
    p = TDG(dom, 1.0, g2=4, partitions="shifted")
    grids = exact_grids(p, dom, codes)
    for a, name in enumerate(dom.names):
        fine = refined_margin(grids, name)
        np.testing.assert_array_equal(fine.edges[0], np.arange(0, 33, 4))
        want = np.add.reduceat(np.bincount(codes[:, a], minlength=32), fine.edges[0][:-1])
        np.testing.assert_allclose(fine.counts, want, atol=1e-8)
    # consistency leaves exact (already consistent) grids unchanged
    for g0, g1 in zip(grids, consistency(grids), strict=True):
        np.testing.assert_allclose(g1.counts, g0.counts, atol=1e-8)


def test_refined_consistency_makes_the_margins_agree() -> None:
    e1, e2 = np.array([0, 4, 8]), np.array([0, 2, 6, 8])
    f = np.array([0, 2, 4, 6, 8])
    g_a = GridEstimate(("x", "y"), (e1, f[[0, 4]]), np.array([[40.0], [60.0]]), 2.0)
    g_b = GridEstimate(("x", "z"), (e2, f[[0, 2, 4]]), np.array([[5, 6], [20, 21], [30, 22.0]]))
    out = consistency([g_a, g_b])
    fine = refined_margin(out, "x")
    for g in out:
        e = g.edges[0]
        pos = np.searchsorted(fine.edges[0], e)
        np.testing.assert_allclose(
            g.marginal(["x"]), np.add.reduceat(fine.counts, pos[:-1]), atol=1e-9
        )


def test_shifted_release_header_and_files_round_trip(tmp_path) -> None:
    dom = fugu.datasets.synthetic_domain(3, 16)
    codes = _codes(dom, 3_000, 2)
    p = TDG(dom, 1.0, g2=2)  # auto: shifted
    reports = p.client(fugu.RandomSource(seed=4)).perturb(codes)
    rel = p.aggregate(reports)
    server = TDG(dom, 1.0)  # no granularities: read from the reports' header
    again = server.aggregate(reports)
    w = fugu.queries.random_workload(dom, 40, n_predicates=2, seed=1)
    np.testing.assert_allclose(again.answer_many(w), rel.answer_many(w))
    assert again.guarantee.parameters["partitions"] == "shifted"
    loaded = fugu.Release.load(rel.save(tmp_path / "tdg"))
    np.testing.assert_allclose(loaded.answer_many(w), rel.answer_many(w))


@pytest.mark.parametrize("group", [0, 2])  # pairs (a0, a1) and (a1, a2): shifted grids
def test_shifted_grid_client_passes_ldp_audit(group: int) -> None:
    """The statistic reads the bits of both records' cells (cell 0 and the last of the 3 × 3
    grid, in another byte): the first byte alone could not fail at 2ε (review 21)."""
    dom = fugu.datasets.synthetic_domain(3, 8)
    proto = TDG(dom, 1.0, g2=2, partitions="shifted")
    assert proto.shifted(proto.groups[group])

    def mech(record, rng, n):
        codes = np.repeat(np.asarray(record, dtype=np.int64)[None], n, axis=0)
        rep = proto.client(rng).perturb(codes, groups=np.full(n, group))
        bits = rep.columns["bits"]  # OUE bit k of cell k: byte k // 8, bit k % 8 (little)
        last = proto._require().cells[group] - 1  # the cell of [7, 7, 7]
        b_first = bits[:, 0] & 1
        b_last = (bits[:, last // 8] >> (last % 8)) & 1
        return (b_first + 2 * b_last).astype(np.float64)  # both records' cells (review 21)

    res = audit(mech, [0, 0, 0], [7, 7, 7], 1.0, n_runs=60_000, discrete=True, vectorised=True)
    assert res.passed, str(res)


def test_shifted_beats_aligned_at_two_cells() -> None:
    """n = 2·10^5, d = 4, c = 32, ε = 0.5 (g2 = 2), two releases each, 100 queries per λ of
    ω = 0.5. Measured: λ = 1 / 2 / 3 about 10-20x lower MAE; asserted: 3x."""
    dom = fugu.datasets.synthetic_domain(4, 32)
    n = 200_000
    codes = _codes(dom, n, 5)
    err = {}
    for part in ("aligned", "shifted"):
        tdg = TDG(dom, 0.5, n_users=n, partitions=part)
        assert tdg.g2 == [2] * 4
        rels = [tdg.simulate(codes, rng=fugu.RandomSource(seed=s)) for s in (1, 2)]
        for lam in (1, 2, 3):
            w = fugu.queries.random_workload(dom, 100, n_predicates=lam, volume=0.5, seed=lam)
            t = _true(codes, w.bounds(dom))
            err[(part, lam)] = np.mean([np.abs(r.answer_many(w) - t).mean() for r in rels]) / n
    for lam in (1, 2, 3):
        assert err[("shifted", lam)] < err[("aligned", lam)] / 3, err


def test_reports_of_the_other_layout_are_refused() -> None:
    """A server whose layout differs from the clients' (aligned vs shifted, same g2) cannot
    decode their cells: refused, in both directions."""
    dom = fugu.datasets.synthetic_domain(3, 16)
    codes = {a: np.arange(300) % 16 for a in dom.names}
    for client_p, server_p in (("aligned", "auto"), ("auto", "aligned")):
        rep = TDG(dom, 1.0, g2=2, partitions=client_p).client(fugu.RandomSource(seed=1))
        with pytest.raises(fugu.errors.ReportError, match="partitions") as err:
            TDG(dom, 1.0, g2=2, partitions=server_p).aggregate(rep.perturb(codes))
        assert "None" not in str(err.value) and "'aligned' (absent)" in str(err.value)


def test_shifted_grid_audit_catches_twice_the_epsilon() -> None:
    """The statistic above fails a client that runs at 2ε while ε is claimed."""
    dom = fugu.datasets.synthetic_domain(3, 8)
    proto = TDG(dom, 2.0, g2=2, partitions="shifted")

    def mech(record, rng, n):
        codes = np.repeat(np.asarray(record, dtype=np.int64)[None], n, axis=0)
        bits = proto.client(rng).perturb(codes, groups=np.zeros(n, dtype=np.int64)).columns["bits"]
        last = proto._require().cells[0] - 1
        return ((bits[:, 0] & 1) + 2 * ((bits[:, last // 8] >> (last % 8)) & 1)).astype(float)

    res = audit(mech, [0, 0, 0], [7, 7, 7], 1.0, n_runs=60_000, discrete=True, vectorised=True)
    assert not res.passed
