"""Secure samplers against their exact distributions.

Statistical tests run at a fixed seed; each states its false-alarm rate (the probability that a
correct sampler fails at a random seed). At a fixed seed the outcome is deterministic.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

import fugu
from fugu.noise import (
    RandomSource,
    discrete_laplace,
    discrete_laplace_pmf,
    discrete_laplace_variance,
    geometric_mechanism,
    grid_laplace,
)
from fugu.testing import audit, chi_square_pmf

ALPHA = 1e-3  # false-alarm rate of each goodness-of-fit test below


@pytest.mark.parametrize("scale", [0.3, 1.0, 2.0, 7.5, 40.0])
def test_discrete_laplace_matches_exact_pmf(scale: float) -> None:
    """Chi-square goodness of fit, 200k samples; false-alarm rate 1e-3 per scale."""
    x = discrete_laplace(scale, size=200_000, rng=RandomSource(seed=11))
    p = chi_square_pmf(x, lambda k: discrete_laplace_pmf(k, scale))
    assert p > ALPHA


def test_chi_square_detects_wrong_scale() -> None:
    """The test above can fail: samples at scale 2.2 are rejected against the pmf of scale 2."""
    x = discrete_laplace(2.2, size=200_000, rng=RandomSource(seed=11))
    assert chi_square_pmf(x, lambda k: discrete_laplace_pmf(k, 2.0)) < ALPHA


def test_discrete_laplace_variance_closed_form() -> None:
    p = math.exp(-1 / 3)
    assert discrete_laplace_variance(3.0) == pytest.approx(2 * p / (1 - p) ** 2, rel=1e-5)
    x = discrete_laplace(3.0, size=400_000, rng=RandomSource(seed=5))
    # Sample variance within 2% (its sd is about 0.5% here; false-alarm rate < 1e-4).
    assert x.var() == pytest.approx(float(discrete_laplace_variance(3.0)), rel=0.02)


def test_per_element_scales() -> None:
    scales = np.repeat([0.5, 50.0], 100_000)
    x = discrete_laplace(scales, rng=RandomSource(seed=2))
    assert x[:100_000].var() == pytest.approx(float(discrete_laplace_variance(0.5)), rel=0.05)
    assert x[100_000:].var() == pytest.approx(float(discrete_laplace_variance(50.0)), rel=0.05)


def test_scale_is_rounded_up_never_down() -> None:
    from fugu.noise import _rational_scale

    s = np.array([0.1, 1 / 3, 2.0, 12345.678, 1e9])
    t, d = _rational_scale(s)
    realised = t.astype(float) / d.astype(float)
    assert np.all(realised >= s)
    assert np.all(realised <= s * (1 + 2**-19))


def test_seeded_source_is_reproducible_and_marked() -> None:
    a = discrete_laplace(2.0, size=50, rng=RandomSource(seed=3))
    b = discrete_laplace(2.0, size=50, rng=RandomSource(seed=3))
    assert np.array_equal(a, b)
    assert not RandomSource(seed=3).private and RandomSource().private


def test_secure_source_differs_between_calls() -> None:
    a = discrete_laplace(100.0, size=64)
    b = discrete_laplace(100.0, size=64)
    assert not np.array_equal(a, b)


def test_below_is_uniform_including_large_bounds() -> None:
    """Chi-square over 7 bins; false-alarm rate 1e-3 each."""
    rng = RandomSource(seed=9)
    from scipy import stats

    for bound in (7, 2**40 + 3):
        x = rng.below(np.full(70_000, bound, dtype=np.uint64))
        assert int(x.max()) < bound
        bins = (x.astype(np.float64) / bound * 7).astype(int)
        assert stats.chisquare(np.bincount(bins, minlength=7)).pvalue > ALPHA


def test_bernoulli_probability() -> None:
    rng = RandomSource(seed=4)
    b = rng.bernoulli(0.3, size=200_000)
    assert b.mean() == pytest.approx(0.3, abs=0.005)  # 5.4 standard deviations
    assert rng.bernoulli(1.0, size=100).all() and not rng.bernoulli(0.0, size=100).any()


def test_geometric_mechanism_privacy_audit() -> None:
    """Counting query with sensitivity 1: audit passes at its ε and fails at half the noise."""

    def good(x: int, rng: RandomSource, n: int) -> np.ndarray:
        return geometric_mechanism(np.full(n, x), 1, 0.5, rng)

    def broken(x: int, rng: RandomSource, n: int) -> np.ndarray:
        return geometric_mechanism(np.full(n, x), 1, 1.0, rng)  # claims 0.5, is 1.0-DP

    assert audit(good, 0, 1, 0.5, n_runs=100_000, vectorised=True).passed
    res = audit(broken, 0, 1, 0.5, n_runs=100_000, vectorised=True)
    assert not res.passed and res.epsilon_lower_bound > 0.6


def test_grid_laplace_privacy_and_variance() -> None:
    """Real values with sensitivity 1: ε holds on the worst shift; the variance is exact."""

    def mech(x: float, rng: RandomSource, n: int) -> np.ndarray:
        noisy, _ = grid_laplace(np.full(n, x), 1.0, 1.0, rng, max_changed=1)
        return noisy

    assert audit(mech, 0.3, 1.3, 1.0, n_runs=100_000, vectorised=True).passed
    noisy, info = grid_laplace(np.zeros(200_000), 1.0, 1.0, RandomSource(seed=8), max_changed=1)
    assert info.effective_sensitivity <= 1.0 * (1 + 2**-10)
    assert noisy.var() == pytest.approx(float(info.variance()[0]), rel=0.03)
    assert noisy.var() == pytest.approx(2.0, rel=0.03)  # ≈ 2 (Δ/ε)^2


def test_grid_laplace_output_lies_on_the_grid() -> None:
    noisy, info = grid_laplace([0.123456789, 5.5], 2.0, 1.0, RandomSource(seed=1))
    assert np.all(np.mod(noisy, info.granularity) == 0)


@pytest.mark.parametrize("bad", [0, -1.0, float("nan"), float("inf"), "1", None, True])
def test_bad_epsilon_rejected(bad: object) -> None:
    with pytest.raises(fugu.FuguError, match="epsilon"):
        geometric_mechanism([1, 2], 1, bad, RandomSource(seed=1))  # type: ignore[arg-type]


def test_huge_scale_refused() -> None:
    with pytest.raises(fugu.InvalidParameterError, match="exceeds the sampler's limit"):
        discrete_laplace(1e17, size=1)


def test_non_integer_values_refused_by_geometric() -> None:
    with pytest.raises(fugu.InvalidParameterError, match="integer"):
        geometric_mechanism([0.5], 1, 1.0)


def test_forked_children_get_their_own_bits() -> None:
    import os

    src = fugu.noise.default_source()
    src.bits64(3)  # leave words in the buffer
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:  # pragma: no cover - runs in the child
        os.write(w, src.bits64(4).tobytes())
        os._exit(0)
    os.waitpid(pid, 0)
    child = np.frombuffer(os.read(r, 32), dtype=np.uint64)
    assert not np.array_equal(child, src.bits64(4))


def test_many_distinct_scales_match_the_pmf() -> None:
    """More distinct scales than groups: the per-element path. 100 scales within 0.04% of 2.0,
    so the pooled samples follow the pmf at 2.0 (chi-square, false-alarm rate 1e-3); the two
    halves of a two-scale mixture keep their own variances."""
    from fugu.noise import _MAX_GROUPS

    scales = 2.0 * (1 + np.arange(100) * 2.0**-18)
    assert len(np.unique(scales)) > _MAX_GROUPS
    x = discrete_laplace(np.tile(scales, 2_000), rng=RandomSource(seed=13))
    assert chi_square_pmf(x, lambda k: discrete_laplace_pmf(k, 2.0)) > ALPHA
    mixed = np.concatenate([np.linspace(0.5, 0.5001, 50_000), np.linspace(40.0, 40.01, 50_000)])
    y = discrete_laplace(mixed, rng=RandomSource(seed=14))
    assert y[:50_000].var() == pytest.approx(float(discrete_laplace_variance(0.5)), rel=0.05)
    assert y[50_000:].var() == pytest.approx(float(discrete_laplace_variance(40.0)), rel=0.05)
