"""Privelet's transforms: exact inverses, generalized sensitivity, adjoints, variance oracles."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fugu import Hierarchy
from fugu.central.wavelets import (
    AxisTransform,
    HaarTransform,
    IdentityTransform,
    NominalTransform,
    generalized_sensitivity,
    hn_forward,
    hn_inverse,
    hn_project,
    hn_weights,
)
from fugu.errors import DomainError


def _tree(draw: Any, depth: int, counter: list[int]) -> Any:
    counter[0] += 1
    name = f"n{counter[0]}"
    if depth == 0 or draw(st.integers(0, 3)) == 0:
        return name, None
    k = draw(st.integers(1, 4))
    return name, dict(_tree(draw, depth - 1, counter) for _ in range(k))


@st.composite
def hierarchies(draw: Any) -> Hierarchy:
    counter = [0]
    kids = dict(_tree(draw, 3, counter) for _ in range(draw(st.integers(2, 4))))
    return Hierarchy.from_dict({"root": kids})


def _matrix(t: AxisTransform) -> np.ndarray:
    """Rows: forward transform of each unit entry."""
    return np.stack([t.forward(np.eye(t.n)[j]) for j in range(t.n)])


@settings(max_examples=50, deadline=None)
@given(n=st.integers(1, 300), seed=st.integers(0, 2**31))
def test_haar_inverts_exactly(n: int, seed: int) -> None:
    x = np.random.default_rng(seed).integers(0, 1000, size=n).astype(float)
    t = HaarTransform(n)
    c = t.forward(x)
    assert c.shape == (t.m,) and t.m >= n and t.m < 2 * max(n, 1) + 1
    np.testing.assert_allclose(t.inverse(c), x, atol=1e-9)
    assert c[0] == pytest.approx(x.sum() / t.m)


@settings(max_examples=50, deadline=None)
@given(h=hierarchies(), seed=st.integers(0, 2**31))
def test_nominal_inverts_exactly_and_mean_subtraction_keeps_exact_coefficients(
    h: Hierarchy, seed: int
) -> None:
    x = np.random.default_rng(seed).integers(0, 100, size=h.size).astype(float)
    t = NominalTransform(h)
    c = t.forward(x)
    assert c.shape == (len(h.nodes),)  # over-complete: one per non-root node plus the base
    np.testing.assert_allclose(t.inverse(c), x, atol=1e-9)
    np.testing.assert_allclose(t.project(c), c, atol=1e-9)  # sibling coefficients already sum to 0
    assert c[0] == pytest.approx(x.sum())


@settings(max_examples=25, deadline=None)
@given(h=hierarchies())
def test_generalized_sensitivity_brute_force_equals_closed_form(h: Hierarchy) -> None:
    for t in (NominalTransform(h), HaarTransform(h.size)):
        brute = (np.abs(_matrix(t)) * t.weights).sum(axis=1).max()
        assert brute == pytest.approx(t.P)
        assert (np.abs(_matrix(t)) > 1e-12).sum(axis=1).max() <= t.max_changed


def test_closed_forms_on_balanced_domains() -> None:
    for m in (2, 8, 64, 1024):
        assert HaarTransform(m).P == 1 + np.log2(m)
    h = Hierarchy.from_dict({"r": {f"g{i}": [f"v{i}{j}" for j in range(3)] for i in range(4)}})
    assert NominalTransform(h).P == h.height == 3


@settings(max_examples=20, deadline=None)
@given(
    shape_seed=st.integers(0, 2**31),
    kinds=st.lists(st.sampled_from(["haar", "nominal", "identity"]), min_size=1, max_size=3),
)
def test_hn_inverts_and_sensitivity_is_the_product(shape_seed: int, kinds: list[str]) -> None:
    rng = np.random.default_rng(shape_seed)
    ts: list[AxisTransform] = []
    for k in kinds:
        if k == "haar":
            ts.append(HaarTransform(int(rng.integers(1, 7))))
        elif k == "nominal":
            groups = int(rng.integers(2, 4))
            ts.append(
                NominalTransform(
                    Hierarchy.from_dict(
                        {
                            "r": {
                                f"g{i}": [f"g{i}v{j}" for j in range(int(rng.integers(1, 3)))]
                                for i in range(groups)
                            }
                        }
                    )
                )
            )
        else:
            ts.append(IdentityTransform(int(rng.integers(1, 4))))
    shape = tuple(t.n for t in ts)
    x = rng.integers(0, 50, size=shape).astype(float)
    c = hn_forward(x, ts)
    assert c.shape == tuple(t.n_coef for t in ts)
    np.testing.assert_allclose(hn_inverse(c, ts), x, atol=1e-9)
    np.testing.assert_allclose(hn_inverse(hn_project(c, ts), ts), x, atol=1e-9)
    # brute force generalized sensitivity over every unit cell
    w = np.broadcast_to(hn_weights(ts), c.shape)
    brute = max(
        float((np.abs(hn_forward(np.eye(x.size)[i].reshape(shape), ts)) * w).sum())
        for i in range(x.size)
    )
    assert brute == pytest.approx(generalized_sensitivity(ts))


def test_adjoint_matches_explicit_reconstruction_matrix() -> None:
    h = Hierarchy.from_dict(
        {"r": {"a": ["x", "y", "z"], "b": {"c": ["p", "q"], "d": ["s"]}, "e": ["t", "u"]}}
    )
    rng = np.random.default_rng(0)
    for t in (HaarTransform(7), NominalTransform(h), IdentityTransform(4)):
        R = np.stack([t.inverse(t.project(np.eye(t.n_coef)[k])) for k in range(t.n_coef)], axis=1)
        q = rng.normal(size=(5, t.n))
        np.testing.assert_allclose(t.adjoint(q), q @ R, atol=1e-12)


def test_haar_worst_range_variance_oracle() -> None:
    """Spec §B.6 [chk]: worst range variance / λ² = 2.375 (m=8), 2.844 (16), 3.725 (64)."""
    for m, worst in ((8, 2.375), (16, 2.84375), (64, 3.7246)):
        t = HaarTransform(m)
        j = np.arange(m)
        rows = np.array([(j >= a) & (j < b) for a in range(m) for b in range(a + 1, m + 1)], float)
        var = 2 * t.noise_factor(rows)
        assert var.max() == pytest.approx(worst, abs=1e-3)
        assert var.max() <= (2 + np.log2(m)) / 2  # the paper's bound


def test_nominal_mean_subtraction_oracle() -> None:
    """Spec §B.3/B.6 [chk]: max node-query variance 6→2 (f=2), 20→3.5 (f=4), 114.5→6.6 (f=16)."""
    for f, before, after in ((2, 6.0, 2.0), (4, 20.0, 3.5), (16, 114.5, 6.5996)):
        h = Hierarchy.flat([f"v{i}" for i in range(f)])
        t = NominalTransform(h)
        rows = np.array([[n.start <= j < n.stop for j in range(h.size)] for n in h.nodes], float)
        R = np.stack([t.inverse(np.eye(t.n_coef)[k]) for k in range(t.n_coef)], axis=1)
        no_sub = 2 * (((rows @ R) / t.weights) ** 2).sum(1).max()
        assert no_sub == pytest.approx(before)
        assert 2 * t.noise_factor(rows).max() == pytest.approx(after, abs=1e-3)
        assert 2 * t.noise_factor(rows).max() < 8


def test_single_child_everywhere_is_refused() -> None:
    h = Hierarchy.from_dict({"r": {"a": {"b": ["c"]}}})
    with pytest.raises(DomainError, match="single child"):
        NominalTransform(h, "job")


def test_single_child_groups_cost_nothing() -> None:
    h = Hierarchy.from_dict({"r": {"a": {"only": ["x", "y"]}, "b": ["z", "w"]}})
    t = NominalTransform(h)
    assert t.P == 3  # the single-child edge a→only does not count
    c = t.forward(np.array([1.0, 2, 3, 4]))
    only = int(np.flatnonzero(t.order == h.index("only"))[0])
    assert c[only] == 0


@settings(max_examples=40, deadline=None)
@given(h=hierarchies(), n=st.integers(1, 40), seed=st.integers(0, 2**31))
def test_forward_exact_is_the_weighted_forward(h: Hierarchy, n: int, seed: int) -> None:
    """hn_forward_exact's numerators over its denominators are W(c)·c (the float transform
    times the weights) — as integers, in int64 and as Python integers alike."""
    from fugu.central.wavelets import hn_forward_exact

    ts: list[AxisTransform] = [HaarTransform(n)]
    if any(len(h.children_index(i)) > 1 for i in range(len(h.nodes))):
        ts.append(NominalTransform(h))
    shape = tuple(t.n for t in ts)
    x = np.random.default_rng(seed).integers(0, 1000, size=shape)
    num, den = hn_forward_exact(x, ts)
    assert num.dtype == np.int64
    want = hn_forward(x.astype(float), ts) * hn_weights(ts)
    got = num / (1 if den is None else den)
    np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-9)
    big = x.astype(object)  # the Python-integer path (huge counts or fan-outs)
    for ax, t in enumerate(ts):
        big = t.forward_exact(big, ax)
    assert big.dtype == object
    np.testing.assert_array_equal(big.astype(np.int64), num)
