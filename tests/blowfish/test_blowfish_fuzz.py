"""Fuzz every Blowfish entry point (issue 14, "must show"): for random ε (including tiny, huge,
NaN, negative, wrong types), random policies (with and without ⊥ and constraints) and random
data, each call either returns a release or raises a ``FuguError`` subclass — never another
exception — and an accountant is charged only when a release is returned."""

from __future__ import annotations

import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import fugu
from fugu.blowfish import (
    CountConstraint,
    KMeans,
    Policy,
    blowfish_budget,
    laplace,
    ordered,
    ordered_hierarchical,
    sensitivity,
)
from fugu.errors import FuguError

EPSILONS = st.one_of(
    st.sampled_from([1e-300, 5e-324, 1e-17, 1e-12, 1e-6, 0.1, 1.0, 500.0, 1e300]),
    st.sampled_from([0.0, -1.0, float("nan"), float("inf"), "1", None, True]),
    st.floats(min_value=1e-9, max_value=50),
)


@st.composite
def policies(draw: st.DrawFn, dom: fugu.Domain) -> Policy:
    k = dom.size
    kind = draw(st.sampled_from(["line", "distance", "full", "partition", "explicit"]))
    bottom = draw(st.booleans()) and draw(st.booleans())
    if kind == "line":
        pol = Policy.line(dom, bottom=bottom)
    elif kind == "distance":
        pol = Policy.distance_threshold(dom, draw(st.integers(1, max(1, k - 1))), bottom=bottom)
    elif kind == "full":
        pol = Policy.full(dom, bottom=bottom)
    elif kind == "partition":
        pol = Policy.partition(dom, {"a": draw(st.integers(2, max(2, k)))}, bottom=bottom)
    else:
        pol = Policy.explicit(dom, [(0, k - 1), (1, 2)], bottom=bottom)
    if draw(st.booleans()):
        lo = draw(st.integers(0, k - 1))
        pol = pol.with_constraints(CountConstraint({"a": (lo, draw(st.integers(lo, k - 1)))}))
    return pol


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_every_entry_point_returns_or_raises_a_fugu_error(data: st.DataObject) -> None:
    k = data.draw(st.integers(3, 12))
    dom = fugu.Domain([fugu.Ordinal("a", 0, k - 1)])
    try:
        pol = data.draw(policies(dom))
    except FuguError:
        return
    counts = np.asarray(data.draw(st.lists(st.integers(0, 30), min_size=k, max_size=k)))
    hist = fugu.Histogram(counts, dom)
    eps = data.draw(EPSILONS)
    which = data.draw(st.sampled_from(["laplace", "cum", "ranges", "ordered", "oh", "kmeans"]))
    acct = fugu.Accountant(blowfish_budget(1000.0, pol))
    rng = fugu.RandomSource(seed=1)
    try:
        if which == "laplace":
            laplace(hist, eps, pol, rng=rng, accountant=acct)
        elif which == "cum":
            laplace(hist, eps, pol, query="cumulative", rng=rng, accountant=acct)
        elif which == "ranges":
            w = fugu.Workload([fugu.RangeQuery({"a": (0, k // 2)}), fugu.RangeQuery({"a": 1})])
            laplace(hist, eps, pol, query=w, rng=rng, accountant=acct)
        elif which == "ordered":
            ordered(hist, eps, pol, rng=rng, accountant=acct)
        elif which == "oh":
            ordered_hierarchical(hist, eps, pol, rng=rng, accountant=acct)
        else:
            pts = np.repeat(np.arange(k, dtype=float), np.maximum(counts, 0))[:, None]
            if pts.shape[0] < 2:
                return
            KMeans(2, eps, policy=pol, rng=rng, accountant=acct).fit(pts)
    except FuguError:
        assert acct.spent == 0, (which, eps)  # refused before anything was spent
        return
    assert acct.spent > 0
    sensitivity("histogram", pol)  # any policy that released has a computable sensitivity
