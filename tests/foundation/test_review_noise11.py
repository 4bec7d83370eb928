"""Red-team review 11 of fugu.noise: scale rounding, exactness of tails, randomness safety.

Statistical tests run at a fixed seed and state their false-alarm rate (the probability that a
correct sampler fails at a random seed).
"""

from __future__ import annotations

from fractions import Fraction

import numpy as np
import pytest

import fugu.noise as noise
from fugu.noise import RandomSource, _rational_scale, geometric_mechanism, grid_laplace


def _realised(scale: float) -> Fraction:
    """The scale the sampler really uses for ``scale`` (t/s, exactly)."""
    t, s = _rational_scale(np.asarray([scale], dtype=np.float64))
    return Fraction(int(t[0]), int(s[0]))


# ε given as 1/3, 1e-6 or the double just below 0.1: sensitivity / ε in floating point rounds
# DOWN to 3.0, 1e6, 10.0 — exactly representable, so the sampler's ceil does not help.
AWKWARD = [
    (1, 1 / 3),
    (3, 1 / 3),
    (1, 1e-6),
    (3, 0.3),
    (1, float(np.nextafter(0.1, 0))),
    (2**40, 1 / 3),
    (0.7, float(np.nextafter(0.1, 0))),
]


def _capture_scales(monkeypatch: pytest.MonkeyPatch, module: object) -> list[np.ndarray]:
    """Every scale ``module`` hands to ``discrete_laplace`` (flattened copies), in call order."""
    seen: list[np.ndarray] = []
    real = noise.discrete_laplace

    def spy(scale, *args, **kwargs):  # type: ignore[no-untyped-def]
        seen.append(np.array(scale, dtype=np.float64, copy=True).reshape(-1))
        return real(scale, *args, **kwargs)

    monkeypatch.setattr(module, "discrete_laplace", spy)
    return seen


@pytest.mark.parametrize(("sens", "eps"), AWKWARD)
def test_geometric_mechanism_scale_never_below_sensitivity_over_epsilon(
    sens: float, eps: float, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The privacy loss of one sensitivity step, sens / realised scale, is at most ε exactly."""
    seen = _capture_scales(monkeypatch, noise)
    geometric_mechanism([5], sens, eps, RandomSource(seed=0))
    loss = Fraction(sens) / _realised(float(seen[0][0]))
    assert loss <= Fraction(eps), float(loss / Fraction(eps) - 1)


@pytest.mark.parametrize(("sens", "eps"), [(1.0, 1 / 3), (3.0, 1 / 3), (1.0, 1e-6), (0.75, 0.3)])
def test_grid_laplace_loss_never_above_epsilon(sens: float, eps: float) -> None:
    """Loss of a neighbouring pair on the grid: (sens + m·γ) / (realised grid scale · γ) <= ε."""
    _, info = grid_laplace(np.zeros(4), sens, eps, RandomSource(seed=0), max_changed=2)
    gamma = float(info.granularity[0])
    eff_exact = Fraction(sens) + 2 * Fraction(gamma)  # m = 2 coordinates may round apart
    assert Fraction(info.effective_sensitivity) >= eff_exact
    grid_scale = info.effective_sensitivity / eps / gamma  # what grid_laplace hands the sampler
    with pytest.MonkeyPatch.context() as mp:
        seen = _capture_scales(mp, noise)
        grid_laplace(np.zeros(4), sens, eps, RandomSource(seed=0), max_changed=2)
    assert seen and seen[0][0] >= grid_scale * (1 - 2**-50)
    loss = eff_exact / (_realised(float(seen[0][0])) * Fraction(gamma))
    assert loss <= Fraction(eps), float(loss / Fraction(eps) - 1)


def test_grid_laplace_weighted_loss_never_above_epsilon(monkeypatch: pytest.MonkeyPatch) -> None:
    """With weights, every coordinate's realised scale times w_i γ_i covers eff / ε."""
    w = np.array([1.0, 3.0, 0.1, 7.0 / 3.0, 1e-3])
    seen = _capture_scales(monkeypatch, noise)
    for eps in (1 / 3, 0.3, 1e-6, 999.9):
        seen.clear()
        _, info = grid_laplace(np.zeros(5), 1.0, eps, RandomSource(seed=1), weights=w)
        step = w * info.granularity
        eff_exact = Fraction(1) + 5 * Fraction(float(np.max(step)))
        for i, sc in enumerate(seen[0]):
            loss = eff_exact / (_realised(float(sc)) * Fraction(float(step[i])))
            assert loss <= Fraction(eps)


def _child_draws(fork: object, src: RandomSource) -> bytes:
    """Fork with ``fork()``, let the child send 4 words and 300 noise draws; return them."""
    import os

    r, w = os.pipe()
    pid = fork()  # type: ignore[operator]
    if pid == 0:  # pragma: no cover - runs in the child
        try:
            data = src.bits64(4).tobytes() + noise.discrete_laplace(5.0, 300, rng=src).tobytes()
            os.write(w, data)
        finally:
            os._exit(0)
    os.close(w)
    os.waitpid(pid, 0)
    chunks = []
    while chunk := os.read(r, 4096):
        chunks.append(chunk)
    os.close(r)
    return b"".join(chunks)


def test_fork_from_c_does_not_replay_the_parent_stream() -> None:
    """fork() called from C (ctypes, an extension) runs no os.register_at_fork hook: the child
    must still re-key (before: it replayed the parent's words and noise exactly)."""
    import ctypes
    import sys

    if not sys.platform.startswith("linux"):
        pytest.skip("raw libc fork is exercised on Linux only")
    src = noise.default_source()
    src.bits64(3)  # leave words in the per-source buffer
    noise.discrete_laplace(5.0, 300, rng=src)
    libc = ctypes.PyDLL(None)  # PyDLL keeps the GIL across the call
    libc.fork.restype = ctypes.c_int
    data = _child_draws(libc.fork, src)
    assert len(data) == 32 + 8 * 300
    parent = src.bits64(4).tobytes() + noise.discrete_laplace(5.0, 300, rng=src).tobytes()
    assert data[:32] != parent[:32]
    assert data[32:] != parent[32:]


def test_two_forked_siblings_differ_from_each_other_and_the_parent() -> None:
    import os

    src = RandomSource()
    src.bits64(3)
    a = _child_draws(os.fork, src)
    b = _child_draws(os.fork, src)
    parent = src.bits64(4).tobytes() + noise.discrete_laplace(5.0, 300, rng=src).tobytes()
    assert len({a[:32], b[:32], parent[:32]}) == 3
    assert len({a[32:], b[32:], parent[32:]}) == 3


ALPHA = 1e-3  # false-alarm rate of each statistical test below


def _tail_prob(k: int, scale: float) -> float:
    """P(|X| >= k) = 2 p^k / (1 + p) (k >= 1) at the rational scale the sampler uses."""
    r = _realised(scale)
    p = float(np.exp(-float(1 / r)))
    return 2 * p**k / (1 + p)


@pytest.mark.parametrize(
    ("scale", "n"), [(0.45, 8_000_000), (1.0, 8_000_000), (2.0, 4_000_000), (1e6, 400_000)]
)
def test_tail_beyond_the_top_table_is_exact(scale: float, n: int) -> None:
    """Beyond the top table's last end (|X| >= 1 + K·2^e) the sampler recurses by
    memorylessness: P(|X| >= cut) and P(|X| >= 2·cut) match 2p^k/(1+p), and the sign of tail
    values is fair (exact binomial tests, false-alarm rate 1e-3 each)."""
    from scipy import stats

    t, s = _rational_scale(np.asarray([scale]))
    tables = noise._laplace_tables(int(t[0]), int(s[0]))
    cut = 1 + tables.k_top * (1 << tables.e)
    x = noise.discrete_laplace(scale, size=n, rng=RandomSource(seed=111))
    ax = np.abs(x)
    for k in (cut, 2 * cut) if scale > 100 else (cut,):
        hits = int(np.sum(ax >= k))
        assert stats.binomtest(hits, n, _tail_prob(k, scale)).pvalue > ALPHA, (k, hits)
    tail = x[ax >= cut]
    assert tail.size > 10
    assert stats.binomtest(int(np.sum(tail > 0)), tail.size, 0.5).pvalue > ALPHA


@pytest.mark.parametrize("scale", [0.1, 0.2, 1 / 3, 1.0, 7.5, 1e6 / 3])
@pytest.mark.parametrize("n", [200, 300_000])  # reference sampler / table sampler
def test_zero_and_sign_are_unbiased(scale: float, n: int) -> None:
    """P(X = 0) = (1-p)/(1+p) and P(X > 0) = P(X < 0), both samplers (exact binomial tests
    pooled over repeated draws of n; false-alarm rate 1e-3 each)."""
    from scipy import stats

    rng = RandomSource(seed=112)
    reps = max(1, 300_000 // n)
    x = np.concatenate([noise.discrete_laplace(scale, size=n, rng=rng) for _ in range(reps)])
    p0 = float(noise.discrete_laplace_pmf(0, scale))
    assert stats.binomtest(int(np.sum(x == 0)), x.size, p0).pvalue > ALPHA
    nz = x[x != 0]
    if nz.size:
        assert stats.binomtest(int(np.sum(nz > 0)), nz.size, 0.5).pvalue > ALPHA


def test_negative_seed_is_refused_with_a_fugu_error() -> None:
    """RandomSource(seed=-1) raised numpy's bare ValueError('expected non-negative integer')."""
    import fugu

    with pytest.raises(fugu.InvalidParameterError, match="seed must be a non-negative"):
        RandomSource(seed=-1)
    assert not RandomSource(seed=0).private


def test_grid_laplace_worst_case_neighbours_stay_within_epsilon(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Item 4 of the review: with weights and max_changed, neighbours placed to gain the most
    from rounding to the grid (just below / above half-grid points) never have an exact
    privacy loss Σ_i |Δ grid value_i| / realised scale_i above ε (deterministic: the loss of
    the exact discrete Laplace output distribution, no sampling)."""
    seen = _capture_scales(monkeypatch, noise)
    gen = np.random.default_rng(7)
    for trial in range(300):
        n = int(gen.integers(1, 9))
        m = int(gen.integers(1, n + 1))
        sens = float(gen.choice([1.0, 3.0, 0.1, 1e-9, 2.0**40, 1 / 3, 0.7]))
        eps = float(gen.choice([0.1, 1 / 3, 1e-6, 999.9, 0.3, 1.0]))
        w = None if trial % 2 else gen.choice([1.0, 0.1, 3.0, 1 / 3, 7.0], size=n)
        wf = np.ones(n) if w is None else w
        gamma = noise.grid_granularity(sens, m, wf)
        base = (gen.integers(-50, 50, size=n) + 0.5) * gamma
        x = base - gamma * 2.0**-20  # just below half points: rounds down
        changed = gen.choice(n, size=m, replace=False)
        share = Fraction(sens) / m
        x2 = x.copy()
        for i in changed:  # move up by at most share / w_i (exactly), to just above a half point
            d = float(share / Fraction(float(wf[i])))
            while Fraction(d) * Fraction(float(wf[i])) > share:
                d = float(np.nextafter(d, 0))
            x2[i] = x[i] + d
            while Fraction(float(x2[i])) - Fraction(float(x[i])) > Fraction(d):
                x2[i] = float(np.nextafter(x2[i], -np.inf))
        assert sum(
            Fraction(float(wf[i])) * abs(Fraction(float(x2[i])) - Fraction(float(x[i])))
            for i in range(n)
        ) <= Fraction(sens)
        seen.clear()
        _, info = grid_laplace(x, sens, eps, RandomSource(seed=trial), weights=w, max_changed=m)
        scales = seen[0]
        g = info.granularity.reshape(-1)
        jumps = np.abs(np.rint(x2 / g) - np.rint(x / g)).astype(np.int64)
        loss = sum(int(jumps[i]) / _realised(float(scales[i])) for i in range(n))
        assert loss <= Fraction(eps), (trial, sens, eps, m, float(loss / Fraction(eps) - 1))


@pytest.mark.parametrize("eps", [1 / 3, 0.3, 1e-6, 0.7])
def test_grid_laplace_loss_at_the_exact_rounding_bound(eps: float) -> None:
    """Neighbours that reach the rounding bound exactly: sensitivity Δ = 1025·γ (γ = 2^-10),
    x = γ/2 (rounds to 0, ties to even) and x' = x + Δ (rounds up to 1026): the grid values
    differ by (Δ + γ)/γ, so the loss is exactly (Δ + γ)/(γ·realised scale), which must be
    <= ε. Before the rounding-up fix the scale for ε = 1/3 was 3078 grid units, below the
    exact 3078.0000000000002, and the loss 1/3 exceeded ε = 0.33333333333333331."""
    sens = 1 + 2.0**-10
    x = np.array([2.0**-11])
    x2 = x + sens
    assert Fraction(float(x2[0])) - Fraction(float(x[0])) == Fraction(sens)
    with pytest.MonkeyPatch.context() as mp:
        seen = _capture_scales(mp, noise)
        _, info = grid_laplace(x, sens, eps, RandomSource(seed=0))
    g = float(info.granularity[0])
    assert g == 2.0**-10
    jump = int(np.rint(x2[0] / g)) - int(np.rint(x[0] / g))
    assert jump == 1026  # Δ/γ + 1: the full rounding slack is used
    assert Fraction(jump) / _realised(float(seen[0][0])) <= Fraction(eps)


@pytest.mark.filterwarnings("ignore::RuntimeWarning")  # numpy overflow on the way to inf
def test_scales_beyond_the_double_range_are_refused_by_name() -> None:
    """sensitivity / epsilon above the largest double: the sampler's InvalidParameterError
    (after the exact rounding-up, float() of the quotient raised a bare OverflowError)."""
    import fugu

    with pytest.raises(fugu.InvalidParameterError, match="noise scale"):
        geometric_mechanism([1], 1e308, 1e-3)
    with pytest.raises(fugu.InvalidParameterError, match="noise scale"):
        grid_laplace([1.0], 1e308, 1e-3)
    with pytest.raises(fugu.InvalidParameterError, match="noise scale"):
        grid_laplace([1.0], 1e308, 1.0, weights=[1e-10])  # grid step overflows to inf
    with pytest.raises(fugu.InvalidParameterError, match="noise scale"):
        grid_laplace([1.0], 1.0, 1.0, weights=[1e-310])
    assert noise.noise_scale(1e308, 1e-3) == float("inf")


@pytest.mark.parametrize("args", [(1, 0.0), (1, 1, 0.0), (-1, 1), (1, float("nan"))])
def test_noise_scale_refuses_bad_arguments_by_name(args: tuple) -> None:
    import fugu

    with pytest.raises(fugu.InvalidParameterError, match="noise_scale needs finite"):
        noise.noise_scale(*args)


@pytest.mark.parametrize("k", [4, 8, 20, 40, -3, -20])
def test_grid_step_keeps_its_bound_just_below_powers_of_two(k: int) -> None:
    """grid_granularity promises Σ_changed w_i γ_i <= sensitivity·2^-slack_bits. np.log2 rounded
    log2(2^k·(1 - 2^-53)) up to k, so just below a power of two the step (and the slack
    grid_laplace adds) was twice that, and recursive.grid_laplace_scalar (frexp) disagreed."""
    import math

    sens = float(np.nextafter(2.0**k, 0))
    gamma = float(noise.grid_granularity(sens, 1)[()])
    assert gamma <= sens * 2.0**-10
    assert gamma == math.ldexp(1.0, math.frexp(sens)[1] - 1 - 10)
    _, info = grid_laplace(np.zeros(1), sens, 1.0, RandomSource(seed=0))
    assert info.effective_sensitivity <= sens * (1 + 2.0**-10) * (1 + 2.0**-52)


# == callers outside noise.py: every scale handed to discrete_laplace is >= the exact quotient ==


def test_hierarchical_level_scales_round_up(monkeypatch: pytest.MonkeyPatch) -> None:
    """hierarchical noised each level with delta / (eps * share) in floating point: at eps = 0.3
    with three equal shares the scale was exactly 10.0 per level, below the exact
    1 / (0.3 · 1/3) (the doubles 0.3 and 1/3), so the total loss was above 0.3 (by ~1e-17).
    Failed before: scale 10.0 == float(exact) < exact."""
    import sys

    import fugu

    H = sys.modules["fugu.central.hierarchical"]  # the package re-exports the function's name
    seen = _capture_scales(monkeypatch, H)
    hist = fugu.Histogram(np.arange(64), fugu.Domain([fugu.Ordinal("a", 0, 63)]))
    H.hierarchical(
        hist, 0.3, branching=4, budget=[1 / 3, 1 / 3, 1 / 3], strategy="trees",
        neighbours="add-remove", rng=RandomSource(seed=1),
    )  # fmt: skip
    share = Fraction(1 / 3) / (3 * Fraction(1 / 3))  # the normalised share, as the code makes it
    exact = 1 / (Fraction(0.3) * Fraction(float(share)))
    assert seen and all(Fraction(float(s)) >= exact for arr in seen for s in arr)


def test_hat_tree_and_recursive_scales_round_up(monkeypatch: pytest.MonkeyPatch) -> None:
    """hat_tree (delta * w / (eps * s)) and the recursive mechanism's grid draw
    ((sensitivity + gamma) / epsilon / gamma) divided in floating point (round to nearest)."""
    import fugu
    from fugu.central import hattree
    from fugu.graph import recursive

    seen = _capture_scales(monkeypatch, hattree)
    hist = fugu.Histogram(np.arange(300) % 7, fugu.Domain([fugu.Ordinal("a", 0, 299)]))
    rel = hattree.hat_tree(hist, 1 / 3, neighbours="add-remove", rng=RandomSource(seed=2))
    assert seen and rel is not None
    for arr in seen:  # every scale is at least delta * w / (eps * s) >= 1 / eps, rounded up
        assert all(Fraction(float(s)) >= 1 / Fraction(1 / 3) for s in arr)
    seen_r = _capture_scales(monkeypatch, recursive)
    _, lam = recursive.grid_laplace_scalar(5.0, 1.0, 1 / 3, RandomSource(seed=3))
    gamma = Fraction(2) ** -10
    exact_units = (1 + gamma) / (Fraction(1 / 3) * gamma)
    assert Fraction(float(seen_r[0][0])) >= exact_units
    assert Fraction(lam) >= (1 + gamma) / Fraction(1 / 3)


def test_share_slack_covers_float_share_sums() -> None:
    """Budget shares normalised in floating point (hierarchical's w / w.sum(), the planners'
    shares) can add up to more than 1 by ulps: with scales delta / (eps * share) the total loss
    eps * sum(shares) was then above eps. The central samplers also divide by SHARE_SLACK
    (1 - 2^-40): the loss is eps * SHARE_SLACK * sum(shares) <= eps for every normalisation
    here, while without it some sums exceed 1."""
    rng = np.random.default_rng(5)
    over_without = 0
    for _ in range(2000):
        w = rng.uniform(0.01, 3.0, size=int(rng.integers(2, 40)))
        shares = [float(x) for x in w / w.sum()]
        total = sum(map(Fraction, shares))
        over_without += total > 1
        assert total * Fraction(noise.SHARE_SLACK) <= 1
    assert over_without > 0  # the slack is needed (sums above 1 do occur)
    s = noise.noise_scale(1, 1.0, (0.25, noise.SHARE_SLACK))
    assert Fraction(s) >= 4 / Fraction(noise.SHARE_SLACK) and s < 4 * (1 + 2**-39)
