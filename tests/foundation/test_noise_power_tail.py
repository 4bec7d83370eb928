"""The exact sampler of NRS's heavy-tailed noise P(k) ∝ 1/(1 + |k/c|^γ) and its grid wrapper.

Goodness-of-fit tests use fixed seeds; each has a false-alarm rate of ALPHA = 1e-3.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from fugu import RandomSource
from fugu.errors import InvalidParameterError
from fugu.noise import (
    _below_int,
    grid_power_tail,
    power_tail_integer,
    power_tail_pmf,
    power_tail_variance,
)
from fugu.testing import chi_square_pmf

ALPHA = 1e-3


def draws(scale: int, gamma: int, n: int, seed: int) -> np.ndarray:
    rng = RandomSource(seed=seed)
    return np.array([power_tail_integer(scale, gamma, rng) for _ in range(n)], dtype=np.int64)


@pytest.mark.parametrize(("scale", "gamma"), [(1, 4), (3, 4), (8, 4), (2, 2), (5, 3), (4, 6)])
def test_power_tail_matches_exact_pmf(scale: int, gamma: int) -> None:
    """Chi-square goodness of fit, 30k samples; false-alarm rate 1e-3 per case."""
    x = draws(scale, gamma, 30_000, seed=100 + scale + 10 * gamma)
    assert chi_square_pmf(x, lambda k: power_tail_pmf(k, scale, gamma)) > ALPHA


def test_chi_square_detects_wrong_gamma() -> None:
    """The test above can fail: γ = 4 samples are rejected against the γ = 3 and γ = 5 pmfs."""
    x = draws(3, 4, 30_000, seed=7)
    assert chi_square_pmf(x, lambda k: power_tail_pmf(k, 3, 3)) < ALPHA
    assert chi_square_pmf(x, lambda k: power_tail_pmf(k, 3, 5)) < ALPHA


def test_pmf_sums_to_one_and_variance() -> None:
    k = np.arange(-200_000, 200_001)
    assert power_tail_pmf(k, 2, 4).sum() == pytest.approx(1.0, abs=1e-12)
    assert power_tail_variance(4) == 1.0
    assert power_tail_variance(6) == pytest.approx(0.5)
    assert math.isinf(power_tail_variance(3))
    # Large grid (the mechanism's regime, c >= 2^40): scaled draws have variance close to 1.
    c = 2**40 + 12345
    z = draws(c, 4, 20_000, seed=3).astype(np.float64) / c
    # Var Z = 1 but E Z^4 is infinite: a loose band (the sample variance is heavy-tailed).
    assert 0.8 < z.var() < 1.3
    assert np.median(np.abs(z)) == pytest.approx(0.567, abs=0.03)


def test_below_int_is_uniform_beyond_64_bits() -> None:
    rng = RandomSource(seed=5)
    big = 3 * 2**70
    top = np.array([_below_int(rng, big) >> 70 for _ in range(6_000)])
    assert set(np.unique(top)) == {0, 1, 2}
    small = np.array([_below_int(rng, 5) for _ in range(10_000)])
    assert chi_square_pmf(top, lambda k: np.where((k >= 0) & (k < 3), 1 / 3, 0.0)) > ALPHA
    assert chi_square_pmf(small, lambda k: np.where((k >= 0) & (k < 5), 0.2, 0.0)) > ALPHA
    assert _below_int(rng, 1) == 0
    with pytest.raises(InvalidParameterError):
        _below_int(rng, 0)


def test_grid_power_tail_grid_and_scale() -> None:
    for low, scale in ((0.37, 0.37), (0.37, 8.0), (100.0, 176.5), (1.0, 3.0e12), (3.0e12, 3.0e12)):
        noisy, info = grid_power_tail(41, scale, 4, RandomSource(seed=1), min_scale=low)
        assert info.points_per_unit >= 2**40
        assert scale <= info.scale <= scale * (1 + 2.0**-40)
        assert info.granularity <= 1.0 and math.log2(info.granularity).is_integer()
        assert info.granularity == 2.0 ** min(0, math.floor(math.log2(low)) - 40)
        assert info.scale == info.points_per_unit * info.granularity
        assert (noisy / info.granularity).is_integer()
    # The grid depends on min_scale only, not on the scale.
    grids = {grid_power_tail(0, s, 4, min_scale=2.0)[1].granularity for s in (2.0, 3.9, 4.1, 1e3)}
    assert grids == {2.0**-39}
    # Same seed, same integer draw: value + granularity * K.
    noisy, info = grid_power_tail(41, 176.5, 4, RandomSource(seed=9), min_scale=1.0)
    k = power_tail_integer(info.points_per_unit, 4, RandomSource(seed=9))
    assert noisy == math.ldexp(float((41 << 40) + k), -40)


@pytest.mark.parametrize(
    ("kwargs", "word"),
    [
        ({"value": 1.5, "scale": 1.0}, "value"),
        ({"value": 1, "scale": 0.0}, "scale"),
        ({"value": 1, "scale": float("nan")}, "scale"),
        ({"value": 1, "scale": 0.25}, "min_scale"),
        ({"value": 1, "scale": 1.0, "min_scale": 0.0}, "min_scale"),
        ({"value": 1, "scale": 1.0, "gamma": 1}, "gamma"),
        ({"value": 1, "scale": 1.0, "gamma": 2.5}, "gamma"),
    ],
)
def test_grid_power_tail_bad_input(kwargs: dict, word: str) -> None:
    with pytest.raises(InvalidParameterError, match=word):
        grid_power_tail(**{"min_scale": 0.5, **kwargs})


def test_power_tail_integer_bad_scale() -> None:
    with pytest.raises(InvalidParameterError, match="scale"):
        power_tail_integer(0, 4)
    with pytest.raises(InvalidParameterError, match="scale"):
        power_tail_integer(2.0, 4)  # type: ignore[arg-type]
