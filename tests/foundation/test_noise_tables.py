"""The fast table sampler of discrete Laplace (issue 16 item 1) against the exact distribution.

Every statistical test runs at a fixed seed, so its outcome is deterministic; each states its
false-alarm rate (the probability that a correct sampler would fail it at a random seed).
"""

from __future__ import annotations

import decimal

import numpy as np
import pytest
from scipy import stats

from fugu.noise import (
    _TABLE_MIN_SAMPLES,
    RandomSource,
    _discrete_laplace_reference,
    _flip,
    _floor_exact,
    _LaplaceTables,
    _minus_grid,
    _rational_scale,
    discrete_laplace,
    discrete_laplace_pmf,
)
from fugu.testing import chi_square_pmf

ALPHA = 1e-3  # false-alarm rate of each goodness-of-fit test


def _ts(scale: float) -> tuple[int, int]:
    t, s = _rational_scale(np.asarray([scale]))
    return int(t[0]), int(s[0])


def _cdf(v: np.ndarray, scale: float) -> np.ndarray:
    """P(X <= v) for the discrete Laplace the sampler uses (float64, for binning only)."""
    t, s = _ts(scale)
    p = np.exp(-s / t)
    v = np.asarray(v, dtype=np.float64)
    with np.errstate(over="ignore"):
        neg = np.exp(np.minimum(v, 0) * (s / t)) / (1 + p)  # p^-v/(1+p), v <= 0
        pos = 1 - np.exp(-(np.maximum(v, 0) + 1) * (s / t)) / (1 + p)  # v >= 0
    return np.where(v < 0, neg, pos)


def _binned_pvalue(x: np.ndarray, scale: float, n_bins: int = 60) -> float:
    """Chi-square of samples binned at the exact distribution's quantiles (about equal bins)."""
    qs = np.linspace(0, 1, n_bins + 1)[1:-1]
    # integer edges near the quantiles: X <= edge_j
    lin = scale * np.log(np.where(qs < 0.5, 2 * qs, 1 / (2 * (1 - qs))))
    edges = np.unique(np.round(lin).astype(np.int64))
    probs = np.diff(np.concatenate([[0.0], _cdf(edges, scale), [1.0]]))
    counts = np.bincount(np.searchsorted(edges, x, side="left"), minlength=edges.size + 1)
    return float(stats.chisquare(counts, probs * x.size).pvalue)


# Scales that exercise every part: one table (e = 0) with a rare tail; e = 0 with a 6 % tail;
# one 1-bit digit; one 9-bit digit; two 15-bit digits; three 14-bit digits (int64 path).
TABLE_SCALES = [0.3, 1.0, 7.5, 300.0, 4000.0, 5000.0, 2.0**20, 2.0**41, 2.0**52]


@pytest.mark.parametrize("scale", [0.3, 1.0, 7.5, 300.0, 5000.0])
def test_table_sampler_matches_exact_pmf(scale: float) -> None:
    """Chi-square against the exact pmf cell by cell, 300k samples; false-alarm rate 1e-3."""
    x = _LaplaceTables(*_ts(scale)).sample(RandomSource(seed=21), 300_000)
    assert chi_square_pmf(x, lambda k: discrete_laplace_pmf(k, scale)) > ALPHA


@pytest.mark.parametrize("scale", [4000.0, 2.0**20, 2.0**41, 2.0**52])
def test_table_sampler_matches_exact_cdf_at_large_scales(scale: float) -> None:
    """Large scales: 60 quantile bins of the exact cdf, 300k samples; false-alarm rate 1e-3."""
    x = _LaplaceTables(*_ts(scale)).sample(RandomSource(seed=22), 300_000)
    assert _binned_pvalue(x, scale) > ALPHA


@pytest.mark.parametrize("scale", [5000.0, 2.0**20, 2.0**41])
def test_low_bits_of_large_samples_are_exact(scale: float) -> None:
    """The digits of L: for |X| >= 1, (|X| - 1) mod 2^10 follows the exact law
    P(r) = p^r (1 - p) / (1 - p^1024) (Geometric mod 1024); false-alarm rate 1e-3."""
    t, s = _ts(scale)
    tables = _LaplaceTables(t, s)
    assert tables.e >= 1
    x = tables.sample(RandomSource(seed=23), 400_000)
    r = (np.abs(x[x != 0]) - 1) % 1024
    p = np.exp(-s / t)
    pmf = p ** np.arange(1024) * (1 - p) / (1 - p**1024)
    counts = np.bincount(r, minlength=1024)
    assert stats.chisquare(counts, pmf * r.size).pvalue > ALPHA


@pytest.mark.parametrize("scale", [1.0, 40.0, 5000.0, 2.0**30])
def test_fast_and_reference_paths_draw_the_same_distribution(scale: float) -> None:
    """Two-sample chi-square (contingency) of the table and CKS reference samplers, 200k each
    at the same scale; false-alarm rate 1e-3. (Seeded, the two paths give different numbers:
    they read the random words differently.)"""
    t, s = _ts(scale)
    a = _LaplaceTables(t, s).sample(RandomSource(seed=31), 200_000)
    b = _discrete_laplace_reference(RandomSource(seed=32), t, s, 200_000)
    edges = np.unique(np.quantile(np.concatenate([a, b]), np.linspace(0, 1, 41)[1:-1]))
    ca = np.bincount(np.searchsorted(edges, a, side="left"), minlength=edges.size + 1)
    cb = np.bincount(np.searchsorted(edges, b, side="left"), minlength=edges.size + 1)
    keep = (ca + cb) > 0
    assert stats.chi2_contingency(np.vstack([ca[keep], cb[keep]]))[1] > ALPHA


def test_two_sample_test_can_fail() -> None:
    """The comparison above detects a 3 % change of scale (power check)."""
    a = _LaplaceTables(*_ts(40.0)).sample(RandomSource(seed=31), 200_000)
    b = _discrete_laplace_reference(RandomSource(seed=32), *_ts(41.2), 200_000)
    edges = np.unique(np.quantile(np.concatenate([a, b]), np.linspace(0, 1, 41)[1:-1]))
    ca = np.bincount(np.searchsorted(edges, a, side="left"), minlength=edges.size + 1)
    cb = np.bincount(np.searchsorted(edges, b, side="left"), minlength=edges.size + 1)
    assert stats.chi2_contingency(np.vstack([ca, cb]))[1] < ALPHA


@pytest.mark.parametrize("scale", TABLE_SCALES)
def test_table_ends_are_the_exact_floors(scale: float) -> None:
    """Every stored end floor(θ·2^32) (computed in float64 with a proven error bound) equals
    the one from exact decimal interval arithmetic: all ends of the top table's first 200 and
    last 50, and 200 random ends of every digit table."""
    t, s = _ts(scale)
    tables = _LaplaceTables(t, s)
    gen = np.random.default_rng(0)
    top = tables.top
    idx = sorted(set(range(min(200, top.floors.size))) | set(range(top.floors.size)[-50:]))
    for i in idx:
        assert top.floors[i] == _floor_exact(top.theta, i), (scale, "top", i)
    for o, table in tables.digits:
        m = table.floors.size
        for i in gen.choice(m, size=min(m, 200), replace=False):
            assert table.floors[i] == _floor_exact(table.theta, int(i)), (scale, o, i)


def test_theta_bounds_are_tight_and_ordered() -> None:
    """The exact bounds used for ties and floors bracket the decimal value of θ."""
    t, s = _ts(3.0)
    tables = _LaplaceTables(t, s)
    with decimal.localcontext() as ctx:
        ctx.prec = 80
        p = (-(decimal.Decimal(s) / decimal.Decimal(t))).exp()
        for i in range(5):
            theta = 1 - 2 * p / (1 + p) * p**i  # e = 0: P = p
            lo, hi = tables.top.theta(i, 200)
            assert lo <= theta * 2**200 <= hi
            assert hi - lo <= 2**10
    flo, fhi = _flip(tables.top.theta, 0, 100)
    assert flo <= fhi
    mlo, mhi = _minus_grid(lambda i, q: (5 << (q - 4), 5 << (q - 4)), 4, 100, 4)
    assert mlo == mhi == 0


def test_ties_resolve_with_the_exact_conditional_probability() -> None:
    """A word equal to floor(θ_i·2^32) is undecided; extra bits settle it. Given the tie, the
    outcome is i + 1 with probability 1 - frac(θ_i·2^32). 40,000 forced ties at one end:
    binomial test, false-alarm rate 1e-3."""
    t, s = _ts(2.0)
    top = _LaplaceTables(t, s).top
    i = 1
    words = np.full(40_000, top.floors[i], dtype=np.uint32)
    out = top.draw(RandomSource(seed=41), words)
    assert set(np.unique(out).tolist()) <= {i, i + 1}
    lo, hi = top.theta(i, 160)
    frac = (lo - (int(top.floors[i]) << 128)) / 2.0**128
    k = int((out == i + 1).sum())
    assert stats.binomtest(k, words.size, 1 - frac).pvalue > ALPHA


def test_tail_of_the_top_table_is_used_and_exact() -> None:
    """At scale 5000 the top table stops where ends would share a cell, leaving a tail of a few
    per cent that recurses by memorylessness; the far tail keeps the exact slope (the pmf
    ratio between |X| in [3·scale, 4·scale) and [4·scale, 5·scale) is e^1)."""
    t, s = _ts(5000.0)
    tables = _LaplaceTables(t, s)
    words = RandomSource(seed=51).bits32(200_000)
    top = tables.top.draw(RandomSource(seed=52), words)
    tail_rate = float(np.mean(top > tables.k_top))
    assert 0.005 < tail_rate < 0.1
    x = np.abs(tables.sample(RandomSource(seed=53), 1_000_000)).astype(np.float64) / 5000.0
    a = int(np.sum((x >= 3) & (x < 4)))
    b = int(np.sum((x >= 4) & (x < 5)))
    # a / (a + b) = e / (1 + e) exactly; binomial test, false-alarm rate 1e-3
    assert stats.binomtest(a, a + b, np.e / (1 + np.e)).pvalue > ALPHA


def test_group_size_decides_the_path_and_seeded_draws_repeat() -> None:
    """Big groups use the tables and small ones the reference; both repeat under a seed."""
    for n in (_TABLE_MIN_SAMPLES - 1, _TABLE_MIN_SAMPLES, 50_000):
        a = discrete_laplace(12.5, size=n, rng=RandomSource(seed=7))
        b = discrete_laplace(12.5, size=n, rng=RandomSource(seed=7))
        assert np.array_equal(a, b)
    # the same scale through an array of equal scales and through a scalar: same numbers
    c = discrete_laplace(np.full(50_000, 12.5), rng=RandomSource(seed=7))
    assert np.array_equal(a, c)


def test_mixed_scales_use_one_table_per_scale() -> None:
    """Two scales of 60k elements each keep their own exact laws (chi-square, 1e-3 each)."""
    scales = np.repeat([0.7, 25.0], 60_000)
    x = discrete_laplace(scales, rng=RandomSource(seed=61))
    assert chi_square_pmf(x[:60_000], lambda k: discrete_laplace_pmf(k, 0.7)) > ALPHA
    assert chi_square_pmf(x[60_000:], lambda k: discrete_laplace_pmf(k, 25.0)) > ALPHA


def test_secure_table_draws_vary() -> None:
    a = discrete_laplace(1e6, size=10_000)
    b = discrete_laplace(1e6, size=10_000)
    assert (a == b).mean() < 0.01


@pytest.mark.parametrize("scale", [5000.0, 2.0**20, 2.0**41, 2.0**52])
def test_digit_slot_lookup_equals_the_cell_lookup(scale: float) -> None:
    """Digit tables whose ends each sit in their own slot use the near-uniform slot form (a 2^d
    table instead of the 2^16-cell one; always the lowest digit, not a 15-bit top digit);
    given the same words and the same bits for ties, both forms give the same outcomes."""
    tables = _LaplaceTables(*_ts(scale))
    words = RandomSource(seed=71).bits32(300_000)
    assert tables.digits[0][1].slot_bits > 0
    for _, table in tables.digits:
        if not table.slot_bits:
            continue
        slots = table.draw(RandomSource(seed=72), words)
        saved, table.slot_bits = table.slot_bits, 0
        try:
            cells = table.draw(RandomSource(seed=72), words)
        finally:
            table.slot_bits = saved
        assert np.array_equal(slots, cells)
    # forced ties in the slot form resolve to one of the two neighbouring outcomes
    _, table = tables.digits[0]
    m = min(3, table.floors.size)
    tie_words = np.repeat(table.floors[:m], 50).astype(np.uint32)
    out = table.draw(RandomSource(seed=73), tie_words).reshape(m, 50)
    for i in range(m):
        assert set(np.unique(out[i]).tolist()) <= {i, i + 1}
