"""Privacy audits (fugu.testing.audit) of the LDP clients that had none (issue 14, "mechanisms
audited"): LHIO with each oracle, HIO and CALM with the OLH / OUE oracles, Uni, and one audit on
the unseeded production random source. The older audits (GRR, OLH, OUE, SW, HIO/CALM with GRR,
MSW, TDG, HDG) live next to each method's tests.

Each audit runs one user group's randomiser (the group is public) on the hardest pair of records:
two records that differ in every attribute, so that their cells differ in every layer / pair.
The statistic is the report's support of the two records' cells (2 bits: supports cell 1,
supports cell 2), which holds the events where the likelihood ratio reaches e^ε for every oracle
(GRR: ``y`` equals the cell; OLH: ``H_seed(cell) = y``; OUE: the cell's bit is set).

Every audit has a false-alarm rate of alpha = 1e-3 (the auditor's Bonferroni bound); the seeds
are fixed, so the tests are deterministic. The miscalibrated clients (run at twice the claimed ε)
show that the audits can fail.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

import fugu
from fugu import ldp
from fugu.ldp.multidim import _layer_cell_of
from fugu.ldp.oracles import olh_hash
from fugu.testing import audit

DOM = fugu.datasets.synthetic_domain(3, 4)
D1, D2 = [0, 0, 0], [3, 3, 3]


def _cell(proto: Any, record: list[int], group: int) -> int:
    """The cell a record reports in ``group``'s oracle."""
    codes = np.asarray([record], dtype=np.int64)
    if isinstance(proto, ldp.LHIO):
        j, k, lj, lk = proto.groups[group]
        b = proto.branching
        nj = codes[0, j] // b ** (proto.heights[j] - lj)
        nk = codes[0, k] // b ** (proto.heights[k] - lk)
        return int(nj * b**lk + nk)
    if isinstance(proto, ldp.HIO):
        levels = proto._levels[[group]]
        return int(_layer_cell_of(codes, levels, proto.heights, proto.branching)[0])
    if isinstance(proto, ldp.CALM):
        j, k = proto.pairs[group]
        return int(codes[0, j] * proto.sizes[k] + codes[0, k])
    raise AssertionError(type(proto))


def _supports(proto: Any, cols: dict[str, np.ndarray], group: int, cell: int) -> np.ndarray:
    grouped = proto.grouped
    kind = grouped.kinds[group]
    if kind == "oue":
        bits = np.unpackbits(cols["bits"], axis=1, bitorder="little")
        return bits[:, cell].astype(bool)
    if kind == "grr":
        return cols["y"] == cell
    return olh_hash(cell, cols["seed"], grouped.g) == cols["y"]


def _mechanism(proto: Any, group: int) -> Any:
    c1, c2 = _cell(proto, D1, group), _cell(proto, D2, group)
    assert c1 != c2

    def mech(record: list[int], rng: fugu.RandomSource, n: int) -> np.ndarray:
        codes = np.repeat(np.asarray(record, dtype=np.int64)[None], n, axis=0)
        rep = proto.client(rng).perturb(codes, groups=np.full(n, group))
        s1 = _supports(proto, rep.columns, group, c1)
        s2 = _supports(proto, rep.columns, group, c2)
        return (2 * s1 + s2).astype(np.float64)

    return mech


def _audit(proto: Any, group: int, claimed: float, seed: int | None = 20261129) -> Any:
    return audit(
        _mechanism(proto, group), D1, D2, claimed,
        n_runs=60_000, discrete=True, vectorised=True, seed=seed,
    )  # fmt: skip


LHIO_CASES = ["grr", "olh", "oue"]


@pytest.mark.parametrize("oracle", LHIO_CASES)
def test_lhio_client_passes_the_ldp_audit(oracle: str) -> None:
    proto = ldp.LHIO(DOM, 1.0, branching=2, oracle=oracle)
    # the finest layer of the first pair, and a mixed layer (root of one attribute)
    for group in (len(proto.groups) // 3 - 1, 1):
        res = _audit(proto, group, 1.0)
        assert res.passed, (oracle, group, str(res))


def test_lhio_audit_catches_twice_the_epsilon() -> None:
    loud = ldp.LHIO(DOM, 2.0, branching=2, oracle="olh")
    res = _audit(loud, len(loud.groups) // 3 - 1, 1.0)
    assert not res.passed and res.epsilon_lower_bound > 1.2, str(res)


@pytest.mark.parametrize(("method", "oracle"), [("hio", "olh"), ("calm", "olh"), ("calm", "oue")])
def test_hio_and_calm_with_other_oracles_pass_the_ldp_audit(method: str, oracle: str) -> None:
    proto = (
        ldp.HIO(DOM, 1.0, branching=2, oracle=oracle)
        if method == "hio"
        else ldp.CALM(DOM, 1.0, oracle=oracle)
    )
    res = _audit(proto, proto.n_groups - 1, 1.0)
    assert res.passed, str(res)


def test_uni_reports_carry_nothing() -> None:
    uni = ldp.Uni(DOM, 1.0)

    def mech(record: list[int], rng: fugu.RandomSource, n: int) -> np.ndarray:
        codes = np.repeat(np.asarray(record, dtype=np.int64)[None], n, axis=0)
        return uni.client(rng).perturb(codes).columns["v"].astype(np.float64)

    res = audit(mech, D1, D2, 1e-6, n_runs=20_000, discrete=True, vectorised=True)
    assert res.passed and res.epsilon_lower_bound <= 0, str(res)


def test_production_source_passes_the_audit() -> None:
    """The unseeded path (the operating system's CSPRNG, what users get) on LHIO's client."""
    proto = ldp.LHIO(DOM, 1.0, branching=2, oracle="oue")
    res = _audit(proto, len(proto.groups) // 3 - 1, 1.0, seed=None)
    assert res.passed, str(res)
