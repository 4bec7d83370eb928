"""Adversarial tests of ``cell_values(method="logsmooth")`` (TDG's default margin spread).

The method's definition: per run of positive cells, the per-value density whose cell sums are
the counts and whose logarithm has the least sum of squared second differences. These tests
check that the solver reaches that density (a KKT point) on ordinary noisy counts, survives
extreme counts, refuses non-finite ones, and falls back to PCHIP (totals kept) when Newton's
method does not converge.
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import fugu.inference.ldp_post as lp
from fugu.errors import InvalidParameterError
from fugu.inference.ldp_post import cell_values


def _pen(v: np.ndarray) -> np.ndarray:
    """``P log v`` with ``P = D2ᵀ D2`` (the penalty's gradient up to a factor 2)."""
    d2 = np.diff(np.log(v), 2)
    out = np.zeros(v.size)
    out[:-2] += d2
    out[1:-1] -= 2 * d2
    out[2:] += d2
    return out


def _kkt_gap(e: np.ndarray, counts: np.ndarray, v: np.ndarray) -> float:
    """How far ``v`` (one run of positive cells) is from a KKT point of the definition: at the
    optimum ``(P η)_j + λ_k a_j = 0`` for every value j of cell k (``a_j = v_j / t_k``, the
    gradient of the cell's relative sum). Returns the largest residual with the best λ per
    cell, relative to the largest ``|P η|``."""
    w = np.diff(e)
    k = np.repeat(np.arange(counts.size), w)
    pe = _pen(v)
    a = v / counts[k]
    lam = -np.bincount(k, weights=a * pe) / np.bincount(k, weights=a * a)
    return float(np.max(np.abs(pe + lam[k] * a)) / np.max(np.abs(pe)))


def _random_cells(rng: np.random.Generator, c: int, g: int) -> np.ndarray:
    cuts = np.sort(rng.choice(np.arange(1, c), size=g - 1, replace=False))
    return np.concatenate([[0], cuts, [c]])


def test_newton_reaches_the_smoothest_density_on_noisy_counts() -> None:
    """Regression: the first version stopped after 60 Gauss-Newton steps (no Lagrangian
    curvature, no line search) far from the constraints on about a third of random
    exponential counts (4-16 cells over 64 values; log cell sums off by up to 1.7 before the
    final rescaling), so the rescaled result was a jagged density, not the defined one."""
    rng = np.random.default_rng(7)
    worst = 0.0
    for _ in range(60):
        g = int(rng.integers(4, 17))
        e = _random_cells(rng, 64, g)
        if np.all(np.diff(e) == 1):
            continue
        counts = rng.exponential(100.0, g)
        v = cell_values(e, counts, method="logsmooth")
        np.testing.assert_allclose(np.add.reduceat(v, e[:-1]), counts, rtol=1e-9)
        worst = max(worst, _kkt_gap(e, counts, v))
    assert worst < 1e-5, worst


def test_extreme_counts_give_finite_values_with_their_totals() -> None:
    """Counts spanning 1e-300..1e300 keep finite values and their totals."""
    rng = np.random.default_rng(3)
    for _ in range(40):
        g = int(rng.integers(2, 12))
        e = _random_cells(rng, int(rng.integers(g + 1, 80)), g)
        counts = 10.0 ** rng.uniform(-300, 300, g)
        v = cell_values(e, counts, method="logsmooth")
        assert np.all(np.isfinite(v)) and np.all(v >= 0)
        np.testing.assert_allclose(np.add.reduceat(v, e[:-1]), counts, rtol=1e-9)
    # denormal counts next to huge ones gave NaN (log of 0 after dividing by the width);
    # a denormal cell cannot keep its total when split, but nothing may be NaN or negative
    for e, counts in (
        ([0, 2, 5], [5e-324, 1.0]),
        ([0, 8, 14, 15, 21, 25, 28], [1.0, 0.0, 0.0, 5e-324, 1.0, 1e308]),
        ([0, 1, 2, 10], [1e-310, 1e308, 5e-324]),
        ([0, 7, 15], [1e308, 5e-324]),
    ):
        v = cell_values(e, counts, method="logsmooth")
        assert np.all(np.isfinite(v)) and np.all(v >= 0)
        assert np.add.reduceat(v, np.array(e[:-1])).max() <= 1e308
    for counts in ([1e300, 1e-300, 1e300], [1e308, 1.0], [1e-300, 1e-300, 2e-300]):
        e = np.arange(len(counts) + 1) * 8
        v = cell_values(e, np.array(counts), method="logsmooth")
        assert np.all(np.isfinite(v)) and np.all(v >= 0)
        np.testing.assert_allclose(np.add.reduceat(v, e[:-1]), counts, rtol=1e-9)


@pytest.mark.parametrize("method", ["logsmooth", "pchip", "uniform"])
@pytest.mark.parametrize("bad", [np.nan, np.inf, -np.inf])
def test_non_finite_counts_are_refused(bad: float, method: str) -> None:
    """Regression: a NaN count was silently treated as an empty cell by "logsmooth" and +inf
    gave NaN; "pchip" and "uniform" returned NaN values, and -inf was clipped to an empty
    cell."""
    with pytest.raises(InvalidParameterError, match="counts must be finite; cell 1"):
        cell_values([0, 4, 8, 12], [1.0, bad, 2.0], method=method)


def test_falls_back_to_pchip_when_newton_does_not_converge(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """With no Newton step allowed the run is not a KKT point: it must be PCHIP's spread of
    that run (same totals), not the flat start rescaled."""
    e, counts = np.array([0, 5, 13, 20]), np.array([3.0, 9.0, 1.0])
    monkeypatch.setattr(lp, "_LOG_SMOOTH_STEPS", 0)
    v = cell_values(e, counts, method="logsmooth")
    np.testing.assert_allclose(v, cell_values(e, counts, method="pchip"), rtol=1e-12)
    # two runs: each falls back on its own (PCHIP of the run alone), zeros stay zero
    e2 = np.array([0, 5, 13, 20, 24, 29, 37, 44])
    c2 = np.array([3.0, 9.0, 1.0, 0.0, 3.0, 9.0, 1.0])
    v2 = cell_values(e2, c2, method="logsmooth")
    np.testing.assert_allclose(v2[:20], v, rtol=1e-12)
    np.testing.assert_allclose(v2[24:], v, rtol=1e-12)
    assert np.all(v2[20:24] == 0)


def test_fallback_keeps_totals_when_pchip_cancels(monkeypatch: pytest.MonkeyPatch) -> None:
    """PCHIP differences cumulative counts, so a cell of 1e-9 next to 1e19 loses its total;
    the fallback spreads such a cell evenly."""
    monkeypatch.setattr(lp, "_LOG_SMOOTH_STEPS", 0)
    e = np.array([0, 4, 11, 15, 19])
    counts = np.array([9.1e18, 5.7e-9, 3.6e16, 0.11])
    v = cell_values(e, counts, method="logsmooth")
    assert np.all(np.isfinite(v)) and np.all(v >= 0)
    np.testing.assert_allclose(np.add.reduceat(v, e[:-1]), counts, rtol=1e-9)


@pytest.mark.parametrize("dynamic_range", [1e5, 1e20, 1e100])
def test_geometric_data_recovered_over_wide_ranges(dynamic_range: float) -> None:
    for c, g in ((64, 8), (64, 16), (1000, 10)):
        v = dynamic_range ** (-np.arange(c) / (c - 1))
        e = np.linspace(0, c, g + 1).astype(int)
        out = cell_values(e, np.add.reduceat(v, e[:-1]), method="logsmooth")
        np.testing.assert_allclose(out, v, rtol=1e-5)


def test_wide_cells_are_solved_in_linear_memory() -> None:
    """Regression: the sparse LU of the KKT matrix filled in (each cell's constraint row is
    dense), so 10^6 values in 2 cells were killed for memory. Two cells always admit an
    exponential density, so it is recovered; the accuracy falls as eps·width^4 (1e-7 to 1.1e-6
    at 1,000 values per cell, depending on the sparse solver's rounding: 1.1e-6 with scipy
    1.17.1), and runs with a cell wider than _LOG_SMOOTH_MAX_WIDTH use PCHIP."""
    v = np.exp(-np.arange(2000) / 800.0)
    e = np.array([0, 1000, 2000])
    out = cell_values(e, np.add.reduceat(v, e[:-1]), method="logsmooth")
    np.testing.assert_allclose(out, v, rtol=5e-6)
    e = np.array([0, 500_000, 1_000_000])
    out = cell_values(e, [3.0, 1.0], method="logsmooth")
    np.testing.assert_allclose(out, cell_values(e, [3.0, 1.0], method="pchip"), atol=1e-12)
    np.testing.assert_allclose(np.add.reduceat(out, e[:-1]), [3.0, 1.0], rtol=1e-12)


def _counts(draw: st.DrawFn) -> tuple[np.ndarray, np.ndarray]:
    g = draw(st.integers(1, 12))
    widths = draw(st.lists(st.integers(1, 9), min_size=g, max_size=g))
    e = np.concatenate([[0], np.cumsum(widths)])
    mags = draw(st.lists(st.floats(-290, 290), min_size=g, max_size=g))
    zero = draw(st.lists(st.booleans(), min_size=g, max_size=g))
    counts = np.where(zero, 0.0, 10.0 ** np.array(mags))
    return e, counts


@settings(max_examples=200, deadline=None, derandomize=True)
@given(st.data())
def test_properties(data: st.DataObject) -> None:
    e, counts = data.draw(st.composite(_counts)())
    v = cell_values(e, counts, method="logsmooth")
    w = np.diff(e)
    assert v.shape == (int(e[-1]),)
    assert np.all(np.isfinite(v)) and np.all(v >= 0)
    sums = np.add.reduceat(v, e[:-1])
    pos = counts > 0
    np.testing.assert_allclose(sums[pos], counts[pos], rtol=1e-9)
    assert np.all(v[np.repeat(~pos, w)] == 0)
    # scaling the counts scales the values
    np.testing.assert_allclose(
        cell_values(e, counts * 1e-3, method="logsmooth"), v * 1e-3, rtol=1e-6, atol=0
    )
    # every run of positive cells is fitted alone
    if pos.any() and not pos.all():
        first = int(np.flatnonzero(pos)[0])
        last = first
        while last + 1 < pos.size and pos[last + 1]:
            last += 1
        lo, hi = int(e[first]), int(e[last + 1])
        alone = cell_values(e[first : last + 2] - lo, counts[first : last + 1], method="logsmooth")
        np.testing.assert_allclose(v[lo:hi], alone, rtol=1e-9)


def test_single_cell_widths_one_and_ragged_edges() -> None:
    np.testing.assert_allclose(cell_values([0, 7], [3.5], method="logsmooth"), np.full(7, 0.5))
    np.testing.assert_allclose(
        cell_values([0, 1, 2, 3], [1.0, 4.0, 2.0], method="logsmooth"), [1.0, 4.0, 2.0]
    )
    # a run of width-1 cells inside ragged edges keeps its counts exactly
    v = cell_values([0, 1, 2, 6, 7], [2.0, 3.0, 0.0, 5.0], method="logsmooth")
    np.testing.assert_allclose(v[:2], [2.0, 3.0])
    np.testing.assert_allclose(v[6], 5.0)
    assert np.all(v[2:6] == 0)
