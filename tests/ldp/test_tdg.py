"""Tests of fugu.ldp.TDG: client audit, the uniform guess on a hand-computed grid, λ = 1 from
2-D marginals, bad input. The audits use fugu.testing.audit (false-alarm rate 1e-3, fixed
seeds); the rest is deterministic.
"""

from __future__ import annotations

import numpy as np
import pytest

import fugu
from fugu.errors import InvalidParameterError
from fugu.inference.ldp_post import GridEstimate
from fugu.ldp import TDG
from fugu.ldp.grids import GridRelease
from fugu.testing import audit


def _mech(proto, group):
    def mech(record, rng, n):
        codes = np.repeat(np.asarray(record, dtype=np.int64)[None], n, axis=0)
        rep = proto.client(rng).perturb(codes, groups=np.full(n, group))
        return rep.columns["bits"][:, 0].astype(np.float64)

    return mech


@pytest.mark.parametrize("eps", [0.5, 2.0])
def test_tdg_client_passes_ldp_audit(eps) -> None:
    dom = fugu.datasets.synthetic_domain(3, 8)
    proto = TDG(dom, eps, g2=2)
    res = audit(
        _mech(proto, 1), [0, 0, 0], [7, 7, 7], eps, n_runs=60_000, discrete=True, vectorised=True
    )
    assert res.passed, str(res)


def test_tdg_audit_catches_understated_epsilon() -> None:
    dom = fugu.datasets.synthetic_domain(3, 8)
    proto = TDG(dom, 1.5, g2=2)
    res = audit(
        _mech(proto, 0), [0, 0, 0], [7, 7, 7], 0.75, n_runs=60_000, discrete=True, vectorised=True
    )
    assert not res.passed


def _hand_release() -> GridRelease:
    dom = fugu.Domain([fugu.Ordinal("x", 0, 3), fugu.Ordinal("y", 0, 5), fugu.Ordinal("z", 0, 1)])
    e_x, e_y, e_z = np.array([0, 2, 4]), np.array([0, 3, 6]), np.array([0, 1, 2])
    grids = [
        GridEstimate(("x", "y"), (e_x, e_y), np.array([[10.0, 20.0], [30.0, 40.0]])),
        GridEstimate(("x", "z"), (e_x, e_z), np.array([[10.0, 20.0], [30.0, 40.0]])),
        GridEstimate(("y", "z"), (e_y, e_z), np.array([[15.0, 25.0], [25.0, 35.0]])),
    ]
    g = fugu.release.Guarantee(
        model="ldp", epsilon=1.0, neighbours="x", mechanism="tdg", private=False
    )
    return GridRelease(dom, g, grids, 100.0, method="tdg")


def test_uniform_guess_known_answers() -> None:
    rel = _hand_release()
    # x in [1, 2] covers half of each x cell; y in [0, 3] covers all of y cell 0 and 1/3 of cell 1
    q = fugu.RangeQuery({"x": (1, 2), "y": (0, 3)})
    expected = 0.5 * (10 + 20 / 3) + 0.5 * (30 + 40 / 3)
    assert rel.answer(q) == pytest.approx(expected)
    # λ = 1 from the mean of the 2-D marginals: x-cell 0 is 30 in both grids
    assert rel.answer(fugu.RangeQuery({"x": (0, 0)})) == pytest.approx(15.0)
    # y from (x,y) [40, 60] and (y,z) [40, 60]: y in [0, 1] = 2/3 of cell 0
    assert rel.answer(fugu.RangeQuery({"y": (0, 1)})) == pytest.approx(40 * 2 / 3)
    assert rel.answer(fugu.RangeQuery({})) == pytest.approx(100.0)
    assert 0 <= rel.answer(fugu.RangeQuery({"x": (0, 1), "y": (0, 2), "z": 0})) <= 100


def test_tdg_rejects_one_attribute_and_missing_pairs() -> None:
    with pytest.raises(InvalidParameterError, match="at least 2 attributes"):
        TDG(fugu.Domain([fugu.Ordinal("x", 0, 9)]), 1.0)
    rel = _hand_release()
    rel2 = GridRelease(rel.domain, rel.guarantee, rel.grids[:1], 100.0, method="tdg")
    with pytest.raises(InvalidParameterError, match="no 2-D grid"):
        rel2.answer(fugu.RangeQuery({"x": (0, 1), "z": 0}))


def test_tdg_end_to_end_small() -> None:
    dom = fugu.datasets.synthetic_domain(3, 16)
    data = fugu.datasets.correlated_gaussian(30_000, 3, 16, seed=5)
    rel = TDG(dom, 2.0).simulate(data, rng=fugu.RandomSource(seed=1))
    assert rel.guarantee.mechanism == "tdg" and rel.guarantee.model == "ldp"
    assert len(rel.grids) == 3 and set(rel.matrices) == {("a0", "a1"), ("a0", "a2"), ("a1", "a2")}
    plain = TDG(dom, 2.0, interpolation="uniform").simulate(data, rng=fugu.RandomSource(seed=1))
    assert not plain.matrices  # the paper's uniform guess needs no matrix
    codes = np.stack([data[a] for a in dom.names], 1)
    q = fugu.RangeQuery({"a0": (0, 7), "a1": (0, 7)})  # aligned with g2 = 2 or 4
    truth = ((codes[:, 0] < 8) & (codes[:, 1] < 8)).sum()
    assert abs(rel.answer(q) - truth) < 4 * rel.expected_error(q)
