"""Review 12: Privelet's privacy loss, measured exactly on what the mechanism hands its sampler.

Every test runs the real ``fugu.central.privelet`` on both members of neighbouring pairs, spies
on the integer grid values handed to the noise step and on the scale the discrete Laplace
sampler really draws with, and computes the exact loss Σ_c |ΔU_c| / scale (grid units; the
sampler only rounds the scale up from there).
"""

from __future__ import annotations

import importlib
import itertools
from fractions import Fraction
from typing import Any

import numpy as np
import pytest

import fugu

PV = importlib.import_module("fugu.central.privelet")
NOISE = importlib.import_module("fugu.noise")


class Spy:
    """The grid units and sampler scales of each privelet() call."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.units: list[np.ndarray] = []
        self.scales: list[np.ndarray] = []
        real_dl = NOISE.discrete_laplace

        def dl(scale: Any, size: Any = None, rng: Any = None) -> Any:
            arr = np.asarray(scale, dtype=np.float64)
            if size is not None:
                arr = np.broadcast_to(arr, (size,) if isinstance(size, int) else size)
            self.scales.append(np.array(arr, copy=True).reshape(-1))
            return real_dl(scale, size=size, rng=rng)

        monkeypatch.setattr(NOISE, "discrete_laplace", dl)
        monkeypatch.setattr(PV, "discrete_laplace", dl, raising=False)
        if hasattr(PV, "add_grid_noise"):  # the exact path: integer grid units
            real_add = PV.add_grid_noise

            def add(units: Any, *args: Any, **kw: Any) -> Any:
                self.units.append(np.asarray(units).astype(object).reshape(-1))
                return real_add(units, *args, **kw)

            monkeypatch.setattr(PV, "add_grid_noise", add)
        if hasattr(PV, "grid_laplace"):  # the float path: grid_laplace rounds the values itself
            real_gl = PV.grid_laplace

            def gl(values: Any, *args: Any, **kw: Any) -> Any:
                noisy, info = real_gl(values, *args, **kw)
                x = np.asarray(values, dtype=np.float64).reshape(-1)
                g = info.granularity.reshape(-1)
                self.units.append(np.rint(x / g).astype(np.int64).astype(object))
                return noisy, info

            monkeypatch.setattr(PV, "grid_laplace", gl)

    def run(self, counts: np.ndarray, dom: fugu.Domain, eps: float, **kw: Any) -> tuple[Any, float]:
        self.units.clear()
        self.scales.clear()
        PV.privelet(fugu.Histogram(counts, dom), eps, rng=fugu.RandomSource(seed=0), **kw)
        units = np.concatenate(self.units)
        scales = np.concatenate(self.scales)
        assert scales.size == units.size and np.all(scales == scales[0])
        return units, float(scales[0])


def _loss(a: tuple[Any, float], b: tuple[Any, float]) -> float:
    assert a[1] == b[1]  # the scale is public: the same for both neighbours
    return float(Fraction(int(np.abs(a[0] - b[0]).sum())) / Fraction(a[1]))


def _neighbours(counts: np.ndarray, relation: str) -> Any:
    cells = list(np.ndindex(*counts.shape))
    if relation == "add-remove":
        for c in cells:
            other = counts.copy()
            other[c] += 1
            yield other
        return
    for src, dst in itertools.permutations(cells, 2):
        if counts[src] == 0:
            continue
        other = counts.copy()
        other[src] -= 1
        other[dst] += 1
        yield other


def _unbalanced() -> fugu.Hierarchy:
    """Leaves at depths 1, 2 and 3, and a single-child node (coefficient always 0)."""
    return fugu.Hierarchy.from_dict(
        {"any": {"a": ["a1", "a2", "a3"], "b": {"bb": ["b1"]}, "c": None}}
    )


def _flat(k: int) -> fugu.Hierarchy:
    return fugu.Hierarchy.from_dict({"any": [f"v{i}" for i in range(k)]})


# == 1. the nominal coefficients are computed exactly before the one rounding to the grid =======
def test_nominal_coefficients_at_large_counts_lose_at_most_epsilon(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A 10-value nominal attribute, add/remove, about 2^47 records (allowed: up to 2^53).

    W(c)·c = (10·v_N − n)/18 was computed in float (v_parent / f, then times the float weight
    5/9) and rounded to the grid 2^-13 by grid_laplace: the float error (ulp 2^-6 here, 128 grid
    steps) is not covered by the rounding slack (one step per changed coefficient), and adding
    one record moved the grid values by up to 1.008 ε. Exact: at most ε."""
    spy = Spy(monkeypatch)
    dom = fugu.Domain([fugu.Nominal("g", _flat(10))])
    counts = np.random.default_rng(5).integers(2**47 // 20, 2**47 // 10, size=10)
    eps = 1.0
    base = spy.run(counts, dom, eps, plain=None, neighbours="add-remove")
    worst = max(
        _loss(base, spy.run(o, dom, eps, plain=None, neighbours="add-remove"))
        for o in _neighbours(counts, "add-remove")
    )
    assert worst <= eps, worst


def _exact_axis_rows(t: Any) -> list[list[Fraction]]:
    """Exact rows W(c)·c(e_j) of one axis transform (Fractions), coefficient by entry."""
    if t.kind == "identity":
        return [[Fraction(int(i == j)) for j in range(t.n)] for i in range(t.n)]
    if t.kind == "haar":
        rows = [[Fraction(1) if j < t.n else Fraction(0) for j in range(t.m)]]
        for lvl in range(t.k):
            width = t.m >> lvl
            for node in range(1 << lvl):
                lo = node * width
                rows.append(
                    [
                        Fraction(1 if lo <= j < lo + width // 2 else -1 if j < lo + width else 0)
                        if lo <= j < lo + width
                        else Fraction(0)
                        for j in range(t.m)
                    ]
                )
        return [r[: t.n] for r in rows]
    out = []
    for s in range(t.n_coef):
        lo, hi = int(t.starts[s]), int(t.stops[s])
        row = [Fraction(int(lo <= j < hi)) for j in range(t.n)]
        if s:
            p = int(t.parent_slot[s])
            plo, phi = int(t.starts[p]), int(t.stops[p])
            f = Fraction(int(t.fanout[s]))
            w = f / (2 * f - 2) if f >= 2 else Fraction(1)
            row = [w * (row[j] - Fraction(int(plo <= j < phi)) / f) for j in range(t.n)]
        out.append(row)
    return out


def _exact_units(counts: np.ndarray, ts: list[Any], gamma: float) -> np.ndarray:
    """round_half_even(W(c)·c / γ) for every coefficient, with Fractions."""
    arr = np.asarray(counts).astype(object)
    for ax, t in enumerate(ts):
        m = np.array(_exact_axis_rows(t), dtype=object)
        arr = np.moveaxis(np.tensordot(m, np.moveaxis(arr, ax, 0), axes=(1, 0)), 0, ax)
    g = Fraction(gamma)
    return np.array([round(Fraction(v) / g) for v in arr.reshape(-1)], dtype=object)


@pytest.mark.parametrize(
    ("shape_doms", "scale"),
    [
        ("nominal4 x haar5 x nominal3", 2**42),
        ("haar3 x nominal-unbalanced", 2**46),
        ("nominal6 x plain2", 2**44),
    ],
)
def test_grid_values_are_the_exact_coefficients_rounded_once(
    monkeypatch: pytest.MonkeyPatch, shape_doms: str, scale: int
) -> None:
    """What is handed to the sampler is round(W(c)·c / γ) of the exact rational W(c)·c: the
    only rounding the effective sensitivity's slack covers. Float transforms (cumulative sums of
    divided values along later axes, division by non-power-of-two fan-outs, float weights)
    were off by several grid steps at these sizes."""
    h4 = fugu.Hierarchy.from_dict({"any": {"a": ["a1", "a2", "a3", "a4"], "b": ["b1", "b2"]}})
    unb = fugu.Hierarchy.from_dict(
        {"any": {"a": ["a1", "a2", "a3"], "b": {"bb": ["b1"]}, "c": None}}
    )
    doms = {
        "nominal4 x haar5 x nominal3": [
            fugu.Nominal("g", h4),
            fugu.Ordinal("x", 0, 4),
            fugu.Nominal("k", _flat(3)),
        ],
        "haar3 x nominal-unbalanced": [fugu.Ordinal("x", 0, 2), fugu.Nominal("u", unb)],
        "nominal6 x plain2": [fugu.Nominal("s", _flat(6)), fugu.Ordinal("y", 0, 1)],
    }
    dom = fugu.Domain(doms[shape_doms])
    plain = ["y"] if "plain" in shape_doms else None
    spy = Spy(monkeypatch)
    counts = np.random.default_rng(1).integers(scale // 2, scale, size=dom.shape)
    units, _ = spy.run(counts, dom, 1.0, plain=plain, neighbours="add-remove")
    ts = PV.privelet_transforms(dom, plain)
    rel = PV.privelet(fugu.Histogram(counts, dom), 1.0, plain=plain, neighbours="add-remove")
    gamma = rel.guarantee.parameters["grid"]
    want = _exact_units(counts, ts, gamma)
    bad = int(np.sum(units != want))
    assert bad == 0, (bad, units.size, int(np.max(np.abs(units - want))))


# == 2. brute force: every neighbouring pair of small cubes, both relations ======================
def _small_domains() -> list[tuple[str, fugu.Domain, Any]]:
    h = fugu.Hierarchy.from_dict({"any": {"a": ["a1", "a2"], "b": ["b1", "b2", "b3"]}})
    unb = fugu.Hierarchy.from_dict(
        {"any": {"a": ["a1", "a2", "a3"], "b": {"bb": ["b1"]}, "c": None}}
    )
    return [
        ("haar5", fugu.Domain([fugu.Ordinal("x", 0, 4)]), None),
        ("nominal-unbalanced", fugu.Domain([fugu.Nominal("u", unb)]), None),
        ("flat4", fugu.Domain([fugu.Nominal("f", _flat(4))]), None),
        ("nominal x haar3", fugu.Domain([fugu.Nominal("g", h), fugu.Ordinal("x", 0, 2)]), None),
        ("haar2 x nominal", fugu.Domain([fugu.Ordinal("x", 0, 1), fugu.Nominal("g", h)]), None),
        (
            "privelet+ plain x nominal",
            fugu.Domain([fugu.Ordinal("p", 0, 2), fugu.Nominal("f", _flat(3))]),
            ["p"],
        ),
        (
            "3-d",
            fugu.Domain(
                [fugu.Ordinal("x", 0, 1), fugu.Nominal("f", _flat(3)), fugu.Ordinal("y", 0, 2)]
            ),
            None,
        ),
    ]


@pytest.mark.parametrize("relation", ["replace", "add-remove"])
@pytest.mark.parametrize("case", _small_domains(), ids=lambda c: c[0])
def test_every_neighbouring_pair_loses_at_most_epsilon(
    monkeypatch: pytest.MonkeyPatch, case: Any, relation: str
) -> None:
    """All pairs (add/remove: every added cell; replace-one: every move), two bases: small
    counts and counts near 2^42 (where float transforms err), ε = 0.7. Under add/remove the
    generalized sensitivity is tight: the worst pair reaches ε within the 2^-10 grid slack."""
    _, dom, plain = case
    spy = Spy(monkeypatch)
    eps = 0.7
    rng = np.random.default_rng(11)
    for counts in (rng.integers(0, 4, size=dom.shape), rng.integers(2**41, 2**42, size=dom.shape)):
        base = spy.run(counts, dom, eps, plain=plain, neighbours=relation)
        worst = max(
            _loss(base, spy.run(o, dom, eps, plain=plain, neighbours=relation))
            for o in _neighbours(counts, relation)
        )
        assert worst <= eps, worst
        if relation == "add-remove":
            assert worst >= eps * (1 - 2**-9), worst


def test_two_nominal_axes_near_2_to_48_replace_one(monkeypatch: pytest.MonkeyPatch) -> None:
    """Review 5's large-count check (3 × 3 nominal axes, counts near 2^48 / 54, replace-one,
    all 81 × 80 moves), now on the integer grid values the mechanism hands the sampler instead
    of a float transform: every pair loses at most ε and the public base does not move."""
    h2 = fugu.Hierarchy.from_dict({"any": {"a": ["a1", "a2", "a3"], "b": ["b1", "b2", "b3"]}})
    dom = fugu.Domain([fugu.Nominal("g", h2), fugu.Nominal("h", h2)])
    counts = np.random.default_rng(1).integers(2**48 // 72, 2**48 // 36, size=dom.shape)
    spy = Spy(monkeypatch)
    eps = 1.0
    base = spy.run(counts, dom, eps, plain=None)
    worst = 0.0
    for other in _neighbours(counts, "replace"):
        got = spy.run(other, dom, eps, plain=None)
        assert got[0][0] == base[0][0]  # the all-base coefficient: n, public
        worst = max(worst, _loss(base, got))
    assert worst <= eps, worst


def test_grid_units_rounds_exactly_half_to_even() -> None:
    """grid_units against Fractions: random numerators up to 2^50, denominators up to 2^20,
    grids 2^-30 .. 2^-10 and 2^3, ties included; the int64 and Python-integer paths agree."""
    rng = np.random.default_rng(7)
    for g in (-30, -13, -10, 3):
        gamma = 2.0**g
        num = rng.integers(-(2**50), 2**50, size=400) >> max(0, -g - 10)
        den = rng.integers(1, 2**20, size=400)
        num[:50] = den[:50] * rng.integers(-9, 9, size=50)  # whole multiples
        if g < 0:  # exact ties: den = 2^(1-g)·d, num = (2k + 1)·d, num/den·2^-g = k + 1/2
            d = rng.integers(1, 2**8, size=20)
            den[50:70] = d << (1 - g)
            num[50:70] = (2 * rng.integers(-99, 99, size=20) + 1) * d
        want = [
            round(Fraction(int(a), int(b)) / Fraction(gamma)) for a, b in zip(num, den, strict=True)
        ]
        got = PV.grid_units(num, den, gamma)
        assert got.tolist() == want, g
        if g < 0:
            assert all(
                Fraction(int(a), int(b)) / Fraction(gamma) % 1 == Fraction(1, 2)
                for a, b in zip(num[50:70], den[50:70], strict=True)
            )
        assert PV.grid_units(num.astype(object), den.astype(object), gamma).tolist() == want
    whole = np.array([3, -5, 2**40])
    assert PV.grid_units(whole, None, 2.0**-13).tolist() == [3 * 2**13, -5 * 2**13, 2**53]


# == 3. refusals before the budget is spent =====================================================
def test_too_small_epsilon_is_refused_before_the_budget_is_spent() -> None:
    """The sampler's scale is λ/γ in grid steps (γ ≈ 2^-13 here), 2^13 times the scale
    start()'s ε check assumed (sensitivity 1): ε = 1e-13 passed that check, the accountant was
    charged, and discrete_laplace refused the scale. Now refused first, naming the range."""
    dom = fugu.Domain([fugu.Ordinal("x", 0, 7)])
    hist = fugu.Histogram(np.ones(8, dtype=int), dom)
    acc = fugu.Accountant(1.0)
    with pytest.raises(fugu.errors.InvalidParameterError, match=r"epsilon=1e-13 is too small"):
        PV.privelet(hist, 1e-13, accountant=acc, rng=fugu.RandomSource(seed=0))
    assert acc.spent == 0.0
    # the smallest ε the check lets through is one the sampler accepts
    ts = PV.privelet_transforms(dom, None)
    sens = PV.coefficient_sensitivity(ts, "replace")
    m, gamma = PV.noise_grid(sens, PV._max_changed(ts, 2), 8)
    eff = NOISE.grid_scale(sens, 1.0, m, gamma)[0]
    low = eff / (gamma * NOISE.MAX_SCALE)
    rel = PV.privelet(hist, low, plain=None, accountant=acc, rng=fugu.RandomSource(seed=0))
    assert rel.guarantee.epsilon == low and acc.spent == low
    with pytest.raises(fugu.errors.InvalidParameterError, match="too small"):
        PV.privelet(hist, float(np.nextafter(low, 0)), plain=None, accountant=acc)
    assert acc.spent == low


# == 4. the guarantee states what is drawn ======================================================
def test_guarantee_states_how_the_sensitivity_follows_from_rho() -> None:
    """The guarantee gave ρ (generalized_sensitivity) and Δ but not how Δ = 2(ρ − 1), 2ρ or ρ
    follows (the source cites only Lemma 1's 2ρ): each case now says which, with the numbers,
    and λ is the scale the sampler is given (noise_scale(eff, ε), rounded up), not eff/ε."""
    h = fugu.Hierarchy.from_dict({"any": {"a": ["a1", "a2"], "b": ["b1", "b2", "b3"]}})
    dom = fugu.Domain([fugu.Ordinal("x", 0, 4), fugu.Nominal("g", h)])
    hist = fugu.Histogram(np.arange(25).reshape(5, 5), dom)
    cases = [
        ({"plain": None}, 22.0, "2(rho - 1) = 22, rho = 12"),
        ({"plain": ["x"]}, 6.0, "2 rho = 6"),
        ({"plain": None, "neighbours": "add-remove"}, 12.0, "rho = 12: add/remove"),
    ]
    for kw, sens, text in cases:
        rel = PV.privelet(hist, 0.3, rng=fugu.RandomSource(seed=0), **kw)
        p = rel.guarantee.parameters
        assert rel.guarantee.sensitivity == sens
        assert p["sensitivity_from"].startswith(text), p["sensitivity_from"]
        assert p["lambda"] == NOISE.noise_scale(p["effective_sensitivity"], 0.3)
    dropped = fugu.Histogram.from_records(
        {"x": [0, 1, 9], "g": ["a1", "b2", "b3"]}, dom, out_of_domain="drop"
    )
    rel = PV.privelet(dropped, 1.0, plain=None, rng=fugu.RandomSource(seed=0))
    assert rel.guarantee.sensitivity == 24.0
    assert "dropped outside the domain" in rel.guarantee.parameters["sensitivity_from"]


def test_python_integer_path_releases_the_same_cube(monkeypatch: pytest.MonkeyPatch) -> None:
    """Forced onto the Python-integer path (huge counts or fan-outs), the same seeded release."""
    wav = importlib.import_module("fugu.central.wavelets")
    h4 = fugu.Hierarchy.from_dict({"any": {"a": ["a1", "a2", "a3", "a4"], "b": ["b1", "b2"]}})
    dom = fugu.Domain([fugu.Nominal("g", h4), fugu.Ordinal("x", 0, 4)])
    hist = fugu.Histogram(np.random.default_rng(3).integers(0, 2**30, size=dom.shape), dom)
    kw: dict[str, Any] = {"plain": None, "neighbours": "add-remove"}
    want = PV.privelet(hist, 1.0, rng=fugu.RandomSource(seed=9), **kw).counts
    monkeypatch.setattr(wav, "INT64_SAFE", 2)
    num, _ = wav.hn_forward_exact(hist.counts, PV.privelet_transforms(dom, None))
    assert num.dtype == object
    got = PV.privelet(hist, 1.0, rng=fugu.RandomSource(seed=9), **kw).counts
    np.testing.assert_array_equal(got, want)


def _random_domain(r: Any) -> tuple[fugu.Domain, Any]:
    """1-3 attributes: Haar (1-6 values, padded) or a random hierarchy (fan-outs 1-4, leaves
    at several depths, single-child nodes), and a random Privelet+ choice."""
    counter = [0]

    def node(depth: int) -> Any:
        counter[0] += 1
        if depth == 0 or r.random() < 0.3:
            return None
        return {f"n{counter[0]}_{i}": node(depth - 1) for i in range(r.randint(1, 4))}

    attrs: list[Any] = []
    for i in range(r.randint(1, 3)):
        if r.random() < 0.5:
            attrs.append(fugu.Ordinal(f"o{i}", 0, r.randint(0, 5)))
        else:
            kids = {f"t{i}_{j}": node(2) for j in range(r.randint(2, 3))}
            attrs.append(fugu.Nominal(f"n{i}", fugu.Hierarchy.from_dict({"root": kids})))
    return fugu.Domain(attrs), r.choice([None, "auto", [attrs[0].name]])


@pytest.mark.parametrize("seed", range(12))
def test_random_cubes_lose_at_most_epsilon(monkeypatch: pytest.MonkeyPatch, seed: int) -> None:
    """Seeded random cubes (at most 40 cells), both relations, counts up to 2^40 / cells:
    every neighbouring pair (replace-one: every move) loses at most ε."""
    import random

    r = random.Random(seed)
    dom, plain = _random_domain(r)
    while dom.size > 40:
        dom, plain = _random_domain(r)
    try:
        PV.privelet_transforms(dom, plain)
    except fugu.errors.DomainError:  # a hierarchy of single children: must stay plain
        plain = [a.name for a in dom.attributes if isinstance(a, fugu.Nominal)]
    spy = Spy(monkeypatch)
    eps = r.choice([0.1, 1.0, 3.0])
    relation = r.choice(["replace", "add-remove"])
    top = r.choice([4, 2**20, 2**40]) // dom.size + 2
    counts = np.random.default_rng(seed).integers(0, top, size=dom.shape)
    base = spy.run(counts, dom, eps, plain=plain, neighbours=relation)
    worst = max(
        _loss(base, spy.run(o, dom, eps, plain=plain, neighbours=relation))
        for o in _neighbours(counts, relation)
    )
    assert worst <= eps, (worst, dom, plain, relation)
