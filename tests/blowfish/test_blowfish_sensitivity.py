"""Policy-specific sensitivity: closed forms and edge engines against brute force over every
neighbouring database (the definition), S(f, P) <= S(f), and the paper's known values."""

from __future__ import annotations

import importlib

import numpy as np
import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

import fugu
from fugu.blowfish import (
    Coarsening,
    CumulativeHistogram,
    Policy,
    SumQuery,
    brute_force_sensitivity,
    sensitivity,
)
from fugu.errors import InvalidParameterError, PolicyError

S = importlib.import_module("fugu.blowfish.sensitivity")


@st.composite
def domains(draw: st.DrawFn) -> fugu.Domain:
    if draw(st.booleans()):
        return fugu.Domain([fugu.Ordinal("a", 0, draw(st.integers(1, 5)))])
    return fugu.Domain(
        [
            fugu.Ordinal("a", 0, draw(st.integers(1, 2))),
            fugu.Ordinal("b", 0, draw(st.integers(1, 2))),
        ]
    )


@st.composite
def policies(draw: st.DrawFn, dom: fugu.Domain) -> Policy:
    try:
        return _policy(draw, dom)
    except PolicyError as exc:  # a graph with no secret pair is refused (issue 14 item 2)
        assert "no edge" in str(exc)
        assume(False)
        raise


def _policy(draw: st.DrawFn, dom: fugu.Domain) -> Policy:
    kind = draw(
        st.sampled_from(["full", "attribute", "distance", "linf", "partition", "cells", "explicit"])
    )
    bottom = draw(st.booleans()) and draw(st.booleans())
    if kind == "full":
        return Policy.full(dom, bottom=bottom)
    if kind == "attribute":
        return Policy.attribute(dom, bottom=bottom)
    if kind in ("distance", "linf"):
        theta = draw(st.integers(1, 3))
        return Policy.distance_threshold(
            dom, theta, "l1" if kind == "distance" else "linf", bottom=bottom
        )
    if kind == "partition":
        return Policy.partition(dom, {"a": draw(st.integers(1, 3))}, bottom=bottom)
    if kind == "cells":
        ids = draw(st.lists(st.integers(0, 2), min_size=dom.size, max_size=dom.size))
        return Policy.partition(dom, np.asarray(ids), bottom=bottom)
    pairs = draw(
        st.lists(
            st.tuples(st.integers(-1, dom.size - 1), st.integers(0, dom.size - 1)).filter(
                lambda t: t[0] != t[1]
            ),
            min_size=1,
            max_size=6,
        )
    )
    return Policy.explicit(dom, [(None if a < 0 else a, b) for a, b in pairs], bottom=bottom)


@st.composite
def queries(draw: st.DrawFn, dom: fugu.Domain) -> object:
    kind = draw(
        st.sampled_from(["histogram", "cumulative", "sum", "coarsening", "workload", "matrix"])
    )
    if kind == "cumulative":
        return CumulativeHistogram(draw(st.sampled_from(list(dom.names))))
    if kind == "sum":
        return SumQuery(max_weight=draw(st.sampled_from([1.0, 2.5])))
    if kind == "coarsening":
        return Coarsening({"a": draw(st.integers(1, 3))})
    if kind == "workload":
        qs = []
        for _ in range(draw(st.integers(1, 4))):
            cond = {}
            for a in dom.attributes:
                if draw(st.booleans()):
                    lo = draw(st.integers(a.low, a.high))
                    cond[a.name] = (lo, draw(st.integers(lo, a.high)))
            qs.append(fugu.RangeQuery(cond))
        return fugu.Workload(qs)
    if kind == "matrix":
        m = draw(st.integers(1, 3))
        vals = draw(st.lists(st.integers(-3, 3), min_size=m * dom.size, max_size=m * dom.size))
        return np.asarray(vals, dtype=np.float64).reshape(m, dom.size)
    return "histogram"


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_closed_forms_equal_brute_force(data: st.DataObject) -> None:
    """Every graph family × every query kind: the engine equals the definition (n = 2 records)."""
    dom = data.draw(domains())
    pol = data.draw(policies(dom))
    q = data.draw(queries(dom))
    fast = sensitivity(q, pol, detail=True)
    slow = brute_force_sensitivity(q, pol, n=2, max_databases=100_000)
    assert fast.exact
    assert fast.value == pytest.approx(slow), (pol, q, fast)


@settings(max_examples=60, deadline=None)
@given(data=st.data())
def test_policy_sensitivity_never_exceeds_dp(data: st.DataObject) -> None:
    dom = data.draw(domains())
    pol = data.draw(policies(dom))
    q = data.draw(queries(dom))
    dp = Policy.full(dom, bottom=pol.has_bottom_edges())
    assert sensitivity(q, pol) <= sensitivity(q, dp) + 1e-9


def test_full_graph_reproduces_dp_numbers() -> None:
    dom = fugu.Domain([fugu.Ordinal("age", 0, 99)])
    full = Policy.full(dom)
    assert sensitivity("histogram", full) == 2  # bounded DP histogram
    assert sensitivity("histogram", full.with_bottom()) == 2
    assert sensitivity("histogram", Policy.explicit(dom, [(0, None)])) == 1  # add/remove only
    assert sensitivity("cumulative", full) == 99  # k - 1
    assert sensitivity("sum", full) == 99  # (b - a)
    w = fugu.random_workload(dom, 40, seed=3)
    wm = S.query_matrix(w, dom)
    expect = max(np.abs(wm[:, x] - wm[:, y]).sum() for x in range(100) for y in range(100))
    assert sensitivity(w, full) == expect


def test_paper_values() -> None:
    """CACM / SIGMOD values: sum over [0, 100]: full 100, G^{L1,5} 5; weighted sum (b−a)·max w;
    line graph cumulative histogram 1; partition coarsening 0."""
    dom = fugu.Domain([fugu.Ordinal("v", 0, 100)])
    assert sensitivity("sum", Policy.full(dom)) == 100
    assert sensitivity("sum", Policy.distance_threshold(dom, 5)) == 5
    assert sensitivity(SumQuery(max_weight=3.0), Policy.full(dom)) == 300
    assert sensitivity(SumQuery(max_weight=3.0), Policy.distance_threshold(dom, 5)) == 15
    # blocks of 10 values [0..9], [10..19], ...: the widest move inside a block is 9
    assert sensitivity("sum", Policy.partition(dom, {"v": 10})) == 9
    assert sensitivity("cumulative", Policy.line(dom)) == 1
    assert sensitivity("cumulative", Policy.distance_threshold(dom, 7)) == 7
    assert sensitivity(Coarsening({"v": 10}), Policy.partition(dom, {"v": 10})) == 0
    assert sensitivity(Coarsening({"v": 20}), Policy.partition(dom, {"v": 10})) == 0
    assert sensitivity(Coarsening({"v": 5}), Policy.partition(dom, {"v": 10})) == 2
    assert sensitivity("histogram", Policy.partition(dom, {"v": 10})) == 2


def test_attribute_policy_sum_vector() -> None:
    dom = fugu.Domain(
        [fugu.Ordinal("b", 0, 255), fugu.Ordinal("g", 0, 255), fugu.Ordinal("r", 0, 127)]
    )
    assert sensitivity("sum", Policy.attribute(dom)) == 255  # max_A (a_i - b_i)
    assert sensitivity("sum", Policy.full(dom)) == 255 + 255 + 127  # L1 diameter d(T)
    assert sensitivity("sum", Policy.distance_threshold(dom, 32)) == 32


def test_grid_range_workload_offsets_match_pairs() -> None:
    """The coverage-count engine on a 2-D grid equals the pairwise definition."""
    dom = fugu.Domain([fugu.Ordinal("x", 0, 11), fugu.Ordinal("y", 0, 8)])
    w = fugu.random_workload(dom, 30, seed=5)
    wm = S.query_matrix(w, dom)
    for pol in (
        Policy.distance_threshold(dom, 3),
        Policy.attribute(dom),
        Policy.partition(dom, {"x": 4, "y": 3}),
    ):
        best = 0.0
        for s, d in pol.iter_edges():
            best = max(best, float(np.abs(wm[:, s] - wm[:, d]).sum(axis=0).max()))
        assert sensitivity(w, pol) == best


def test_large_domain_closed_forms_are_fast() -> None:
    dom = fugu.Domain([fugu.Ordinal("x", 0, 2**20 - 1)])
    assert sensitivity("cumulative", Policy.distance_threshold(dom, 100)) == 100
    assert sensitivity("histogram", Policy.full(dom)) == 2
    grid = fugu.Domain([fugu.Ordinal("x", 0, 399), fugu.Ordinal("y", 0, 299)])
    w = fugu.random_workload(grid, 200, seed=1)
    assert sensitivity(w, Policy.distance_threshold(grid, 2)) >= 1


def test_unknown_queries_and_shapes_rejected() -> None:
    dom = fugu.Domain([fugu.Ordinal("x", 0, 4)])
    with pytest.raises(InvalidParameterError):
        sensitivity("median", Policy.line(dom))
    with pytest.raises(fugu.DomainError):
        sensitivity(np.ones((2, 7)), Policy.line(dom))
    with pytest.raises(fugu.InvalidTypeError):
        sensitivity("histogram", "line")  # type: ignore[arg-type]
    with pytest.raises(InvalidParameterError):
        brute_force_sensitivity("histogram", Policy.line(dom), n=20)


def test_kmeans_queries_delegate_to_the_kmeans_module() -> None:
    """He et al. §6 / CACM: q_size has sensitivity 2; q_sum is d(T) under G^full and the
    paper's θ under G^{d,θ} (same-cluster moves; the safe value also covers cluster switches)."""
    dom = fugu.Domain([fugu.Ordinal("x", 0, 100), fugu.Ordinal("y", 0, 100)])
    assert sensitivity("kmeans_qsize", Policy.full(dom)) == 2
    assert sensitivity("kmeans_qsum", Policy.full(dom)) == 200
    assert sensitivity("kmeans_qsum_paper", Policy.distance_threshold(dom, 5)) == 5
    assert sensitivity("kmeans_qsum", Policy.distance_threshold(dom, 5)) >= 5
    with pytest.raises(InvalidParameterError):
        sensitivity("kmeans_median", Policy.full(dom))
