"""Issue 15.3: the λ-D estimator default ("auto") against "full" and "in-in".

"auto" averages the two with a weight on "full" that depends only on the predicted noise of
one 2-D cell (public: ε and group sizes). No rule of public numbers is never worse than the
better of the two: which one wins depends on the data (independent Gaussian data at ε = 1
prefer "full" by 1.7×, heavy-tailed Laplace data prefer "in-in" by 1.2–1.4×). Measured on the
docs' grid (n = 2·10^5 and 10^6, 24 cells each) the rule's worst cell is 1.25× the better
estimator (the threshold rule it replaced: 1.74×). Statistical test: on a seeded grid of
Gaussian and Laplace data, ε and λ, the default's MAE is within 30 % of the better estimator
in every cell and within 10 % on average (answers from the same release, so only the
estimator differs; fixed seeds, so the test is deterministic).
"""

from __future__ import annotations

import functools

import numpy as np
import pytest

import fugu
from fugu.ldp import HDG
from fugu.ldp.grids import auto_weight

N, D, C = 60_000, 4, 32


def _truth(codes: np.ndarray, b: np.ndarray) -> np.ndarray:
    inside = np.ones((len(b), len(codes)), dtype=bool)
    for j in range(codes.shape[1]):
        inside &= (codes[None, :, j] >= b[:, j, 0:1]) & (codes[None, :, j] < b[:, j, 1:2])
    return inside.sum(axis=1).astype(float)


@functools.cache
def _setup(gen: str, rho: float | None, eps: float) -> tuple:  # type: ignore[type-arg]
    dom = fugu.datasets.synthetic_domain(D, C)
    kw = {"rho": rho} if rho is not None else {}
    cols = getattr(fugu.datasets, f"correlated_{gen}")(N, D, C, seed=11, **kw)
    codes = np.stack([cols[a] for a in dom.names], 1)
    rels = tuple(HDG(dom, eps).simulate(codes, rng=fugu.RandomSource(seed=s)) for s in (1, 2))
    return dom, codes, rels


def _maes(gen: str, rho: float | None, eps: float, lam: int) -> dict[str, float]:
    dom, codes, rels = _setup(gen, rho, eps)
    b = fugu.queries.random_workload(dom, 60, n_predicates=lam, volume=0.5, seed=lam).bounds(dom)
    t = _truth(codes, b)
    out: dict[str, float] = {"auto": 0.0, "full": 0.0, "in-in": 0.0}
    for rel in rels:
        assert rel.estimator == "auto"
        for est in out:
            r = rel.with_estimator(est)
            out[est] += float(np.mean(np.abs(r._answer_bounds(b) - t))) / N / len(rels)
    return out


CELLS = [
    (gen, rho, eps, lam)
    for gen, rho in (("gaussian", 0.0), ("gaussian", 0.5), ("laplace", None))
    for eps in (0.5, 1.0, 2.0)  # the docs' and the paper's range of ε (0.2 is slow here)
    for lam in (3, 4)
]
RATIOS: list[float] = []


@pytest.mark.parametrize(("gen", "rho", "eps", "lam"), CELLS)
def test_auto_never_much_worse_than_either(gen: str, rho: float, eps: float, lam: int) -> None:
    m = _maes(gen, rho, eps, lam)
    ratio = m["auto"] / min(m["full"], m["in-in"])
    RATIOS.append(ratio)
    assert ratio <= 1.30, m


@pytest.mark.xfail(reason="known gap: heavy-tailed data at large eps prefer 'in-in'", strict=True)
def test_auto_heavy_tailed_large_eps_gap() -> None:
    m = _maes("laplace", None, 4.0, 3)  # "auto" gives all weight to "full" here: 1.30x
    assert m["auto"] <= 1.10 * min(m["full"], m["in-in"]), m


def test_auto_mean_ratio() -> None:
    if len(RATIOS) < len(CELLS):
        pytest.skip("needs the grid above in the same run")
    assert float(np.mean(RATIOS)) <= 1.10, RATIOS


def test_auto_rule_uses_public_noise_only() -> None:
    dom = fugu.datasets.synthetic_domain(3, 16)
    data = fugu.datasets.correlated_gaussian(20_000, 3, 16, seed=1)
    other = fugu.datasets.correlated_laplace(20_000, 3, 16, seed=2)
    for eps, want in ((0.5, 0.0), (6.0, 1.0)):
        rel = HDG(dom, eps).simulate(data, rng=fugu.RandomSource(seed=1))
        rel2 = HDG(dom, eps).simulate(other, rng=fugu.RandomSource(seed=3))
        assert rel.cell_noise == pytest.approx(rel2.cell_noise)  # data do not enter
        assert rel.full_weight == rel2.full_weight == want
        assert rel.full_weight == auto_weight(rel.cell_noise)
        assert f"weight {want:.2f} on 'full'" in " ".join(rel.guarantee.post_processing)
        assert rel.with_estimator("full").full_weight == 1.0
        assert rel.with_estimator("in-in").full_weight == 0.0
    ws = [auto_weight(s) for s in np.geomspace(0.1, 0.001, 30)]
    assert ws[0] == 0.0 and ws[-1] == 1.0 and bool(np.all(np.diff(ws) >= 0))
