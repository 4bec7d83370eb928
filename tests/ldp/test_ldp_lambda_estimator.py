"""Issue 15.3: the λ-D estimator default ("auto") against "full" and "in-in", for HDG and TDG.

"auto" averages the two with a weight on "full" that depends only on the predicted noise of one
2-D cell (public: ε and the group sizes) and on the method, with thresholds per method
(``AUTO_NOISE``): TDG's only 1-D information is its coarse 2-D grids' margins, so "full" (which
fits them) needs far less noise before it wins. Rules that also read the released grids (the
disagreement of the two estimates) were measured too and did no better out of sample.

Statistical test (deterministic: fixed data, query and noise seeds): on a seeded grid (HDG and
TDG × correlated Gaussian ρ = 0, 0.5 and Laplace data × ε = 0.5, 1, 2, 4 × λ = 3, 4; n = 6·10^4,
d = 4, c = 32; two releases and 60 queries per cell, answers from the same releases so only the
estimator differs), the default's MAE is within ``CELL_BOUND`` of the better estimator in every
cell and within ``MEAN_BOUND`` on average per method. Measured: HDG worst 1.21 (Laplace, ε = 4,
λ = 3, where "in-in" wins and the rule gives all weight to "full"), mean 1.01; TDG worst 1.08,
mean 1.01. Seed-to-seed, one cell's ratio moves by about ±0.05 (two releases of 60 queries),
so the bounds sit about one such step above the measured worst cell. The test fails with the
old code: the flat start of the response matrices gave 1.30 in the Laplace ε = 4 cell (then a
strict xfail), and the single rule for both methods gives TDG 4.6× at ε = 2 (checked below).
"""

from __future__ import annotations

import functools

import numpy as np
import pytest

import fugu
from fugu.ldp import HDG, TDG
from fugu.ldp.grids import auto_weight

N, D, C = 60_000, 4, 32
CELL_BOUND, MEAN_BOUND = 1.25, 1.03
OLD_RULE = (0.035, 0.008)  # the single rule before this change (both methods; HDG's now)


def _truth(codes: np.ndarray, b: np.ndarray) -> np.ndarray:
    inside = np.ones((len(b), len(codes)), dtype=bool)
    for j in range(codes.shape[1]):
        inside &= (codes[None, :, j] >= b[:, j, 0:1]) & (codes[None, :, j] < b[:, j, 1:2])
    return inside.sum(axis=1).astype(float)


@functools.cache
def _setup(method: str, gen: str, rho: float | None, eps: float) -> tuple:  # type: ignore[type-arg]
    dom = fugu.datasets.synthetic_domain(D, C)
    kw = {"rho": rho} if rho is not None else {}
    cols = getattr(fugu.datasets, f"correlated_{gen}")(N, D, C, seed=11, **kw)
    codes = np.stack([cols[a] for a in dom.names], 1)
    cls = HDG if method == "hdg" else TDG
    rels = tuple(cls(dom, eps).simulate(codes, rng=fugu.RandomSource(seed=s)) for s in (1, 2))
    return dom, codes, rels


def _answers(method: str, gen: str, rho: float | None, eps: float, lam: int) -> tuple:  # type: ignore[type-arg]
    """Per release: (auto, full, in-in) answers, the truth, and the release's noise."""
    dom, codes, rels = _setup(method, gen, rho, eps)
    b = fugu.queries.random_workload(dom, 60, n_predicates=lam, volume=0.5, seed=lam).bounds(dom)
    t = _truth(codes, b)
    out = []
    for rel in rels:
        assert rel.estimator == "auto"
        ans = {e: rel.with_estimator(e)._answer_bounds(b) for e in ("auto", "full", "in-in")}
        out.append((ans, t, rel.cell_noise))
    return tuple(out)


def _mae(runs: tuple, combine) -> float:  # type: ignore[no-untyped-def,type-arg]
    return float(np.mean([np.mean(np.abs(combine(a, noise) - t)) for a, t, noise in runs])) / N


CELLS = [
    (method, gen, rho, eps, lam)
    for method in ("hdg", "tdg")
    for gen, rho in (("gaussian", 0.0), ("gaussian", 0.5), ("laplace", None))
    for eps in (0.5, 1.0, 2.0, 4.0)
    for lam in (3, 4)
]
RATIOS: dict[str, list[float]] = {"hdg": [], "tdg": []}


def _ratio(cell: tuple, combine) -> float:  # type: ignore[no-untyped-def,type-arg]
    runs = _answers(*cell)
    better = min(_mae(runs, lambda a, s: a["full"]), _mae(runs, lambda a, s: a["in-in"]))
    return _mae(runs, combine) / better


@pytest.mark.slow
@pytest.mark.parametrize(("method", "gen", "rho", "eps", "lam"), CELLS)
def test_auto_never_much_worse_than_either(
    method: str, gen: str, rho: float | None, eps: float, lam: int
) -> None:
    ratio = _ratio((method, gen, rho, eps, lam), lambda a, s: a["auto"])
    RATIOS[method].append(ratio)
    assert ratio <= CELL_BOUND, (method, gen, rho, eps, lam, ratio)


@pytest.mark.slow
@pytest.mark.parametrize("method", ["hdg", "tdg"])
def test_auto_mean_ratio(method: str) -> None:
    if len(RATIOS[method]) < len(CELLS) // 2:
        pytest.skip("needs the grid above in the same run")
    assert float(np.mean(RATIOS[method])) <= MEAN_BOUND, RATIOS[method]


@pytest.mark.slow
def test_old_single_rule_fails_the_bound_on_tdg() -> None:
    """The test can fail: the rule before this change (one threshold pair for both methods)
    leaves TDG at ε = 2 on "full", about 3–5× the error of "in-in"."""
    hi, lo = OLD_RULE

    def old(a, noise):  # type: ignore[no-untyped-def]
        w = min(1.0, max(0.0, np.log(hi / noise) / np.log(hi / lo)))
        return w * a["full"] + (1 - w) * a["in-in"]

    worst = max(_ratio(("tdg", "gaussian", 0.0, 2.0, lam), old) for lam in (3, 4))
    assert worst > 2 * CELL_BOUND, worst


def test_auto_rule_uses_public_noise_only() -> None:
    dom = fugu.datasets.synthetic_domain(3, 16)
    data = fugu.datasets.correlated_gaussian(20_000, 3, 16, seed=1)
    other = fugu.datasets.correlated_laplace(20_000, 3, 16, seed=2)
    for cls in (HDG, TDG):
        for eps, want in ((0.2, 0.0), (8.0, 1.0)):
            rel = cls(dom, eps).simulate(data, rng=fugu.RandomSource(seed=1))
            rel2 = cls(dom, eps).simulate(other, rng=fugu.RandomSource(seed=3))
            assert rel.cell_noise == pytest.approx(rel2.cell_noise)  # data do not enter
            assert rel.full_weight == rel2.full_weight == want
            assert rel.full_weight == auto_weight(rel.cell_noise, cls.name)
            assert f"weight {want:.2f} on 'full'" in " ".join(rel.guarantee.post_processing)
            assert rel.with_estimator("full").full_weight == 1.0
            assert rel.with_estimator("in-in").full_weight == 0.0
    for method in ("hdg", "tdg"):
        ws = [auto_weight(s, method) for s in np.geomspace(0.1, 0.001, 30)]
        assert ws[0] == 0.0 and ws[-1] == 1.0 and bool(np.all(np.diff(ws) >= 0))
    # TDG switches to "full" only at a much lower noise than HDG
    assert auto_weight(0.006, "tdg") < 0.5 < auto_weight(0.006, "hdg")
