"""Count and marginal constraints: the policy graph, α and ξ, the paper's closed forms, and
brute force over every database in I_Q (neighbours = minimal sets of secret moves)."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import fugu
from fugu.blowfish import (
    CountConstraint,
    MarginalConstraint,
    Policy,
    brute_force_sensitivity,
    constrained_histogram_sensitivity,
    policy_graph,
    sensitivity,
)
from fugu.errors import PolicyError


def grid(a: int, b: int) -> fugu.Domain:
    return fugu.Domain([fugu.Ordinal("a", 0, a - 1), fugu.Ordinal("b", 0, b - 1)])


def line(k: int) -> fugu.Domain:
    return fugu.Domain([fugu.Ordinal("x", 0, k - 1)])


def test_one_marginal_full_graph_is_twice_its_size() -> None:
    """Spec oracle: one 2×2 marginal under G^full with n >= 4: 8 (= 2·size(C))."""
    dom = fugu.Domain([fugu.Ordinal("a", 0, 1), fugu.Ordinal("b", 0, 1), fugu.Ordinal("c", 0, 1)])
    pol = Policy.full(dom).with_constraints(MarginalConstraint(["a", "b"]))
    res = constrained_histogram_sensitivity(pol)
    assert res.value == 8 and res.exact and res.alpha == 4
    small = Policy.full(grid(2, 2)).with_constraints(MarginalConstraint(["a"]))
    assert sensitivity("histogram", small) == 4
    assert brute_force_sensitivity("histogram", small, n=3, max_databases=10_000) == 4


def test_disjoint_marginals_attribute_graph() -> None:
    pol = Policy.attribute(grid(2, 3)).with_constraints(MarginalConstraint(["a"]))
    res = constrained_histogram_sensitivity(pol)
    assert res.value == 4 and res.exact
    assert brute_force_sensitivity("histogram", pol, n=3, max_databases=10_000) == 4
    dom = fugu.Domain([fugu.Ordinal("a", 0, 1), fugu.Ordinal("b", 0, 2), fugu.Ordinal("c", 0, 1)])
    pol2 = Policy.attribute(dom).with_constraints(
        MarginalConstraint(["a"]), MarginalConstraint(["b"])
    )
    assert constrained_histogram_sensitivity(pol2).value == 6  # 2·max(2, 3)


@pytest.mark.parametrize(
    "ranges, k, expect",
    [
        ([(1, 2)], 6, 4),  # one range, free both sides: path v+ → r → v−
        ([(1, 2), (3, 4)], 6, 6),  # maxcomp 2: 2(maxcomp + 1)
        ([(0, 1), (2, 3)], 6, 2),  # component at the domain end: only moves in the free part
        ([(0, 5)], 6, 2),  # one range over everything: moves inside it
        ([(1, 1)], 5, 2),  # a one-value range is entered and left at the same cell
        ([(1, 2), (4, 4)], 6, 4),  # two components
    ],
)
def test_disjoint_ranges_line_graph_equals_brute_force(
    ranges: list[tuple[int, int]], k: int, expect: int
) -> None:
    pol = Policy.line(line(k)).with_constraints(*[CountConstraint({"x": r}) for r in ranges])
    res = sensitivity("histogram", pol, detail=True)
    assert res.value == expect and res.exact
    assert brute_force_sensitivity("histogram", pol, n=3, max_databases=10_000) == expect


def test_paper_bound_for_ranges_is_reported() -> None:
    pol = Policy.line(line(8)).with_constraints(
        *[CountConstraint({"x": r}) for r in [(1, 2), (3, 4), (5, 6)]]
    )
    res = sensitivity("histogram", pol, detail=True)
    assert res.value == 8 and "2(maxcomp+1) = 8" in res.method


def test_policy_graph_search_equals_brute_force() -> None:
    """Count constraints under the complete graph, exact search of G_P."""
    dom = grid(2, 2)
    cases = [
        [CountConstraint({"a": 0})],
        [CountConstraint(cells=[0, 1]), CountConstraint(cells=[2])],
        [CountConstraint(cells=[0, 3])],
    ]
    for cons in cases:
        pol = Policy.full(dom).with_constraints(*cons)
        g = policy_graph(pol)
        alpha, xi, searched = g.alpha_xi()
        assert searched
        res = constrained_histogram_sensitivity(pol)
        assert res.value == 2 * max(alpha, xi)
        bf = brute_force_sensitivity("histogram", pol, n=3, max_databases=10_000)
        assert res.value >= bf  # never an under-estimate
        if res.exact:
            assert res.value == bf


def test_upper_bounds_are_safe_when_moves_cancel() -> None:
    pol = Policy.line(line(6)).with_constraints(
        *[CountConstraint({"x": r}) for r in [(1, 1), (2, 2), (3, 4)]]
    )
    assert sensitivity("histogram", pol) >= brute_force_sensitivity(
        "histogram", pol, n=4, max_databases=2_000
    )
    bare = Policy.full(line(4)).with_constraints(
        MarginalConstraint(["x"])
    )  # the histogram itself is public
    assert sensitivity("histogram", bare, detail=True).exact is False
    assert brute_force_sensitivity("histogram", bare, n=3, max_databases=10_000) == 0


def test_other_queries_under_constraints_line_graph_exact() -> None:
    pol = Policy.line(line(6)).with_constraints(
        CountConstraint({"x": (1, 2)}), CountConstraint({"x": (3, 4)})
    )
    res = sensitivity("cumulative", pol, detail=True)
    assert res.exact and res.value == 3 * 1  # the path v+ → [1,2] → [3,4] → v−: 3 moves
    assert res.value == brute_force_sensitivity("cumulative", pol, n=3, max_databases=10_000)
    full = Policy.full(line(6)).with_constraints(CountConstraint({"x": (1, 2)}))
    res = sensitivity("cumulative", full, detail=True)
    assert not res.exact and res.value >= brute_force_sensitivity(
        "cumulative", full, n=3, max_databases=10_000
    )


def test_non_sparse_constraints_are_refused_with_np_hard_message() -> None:
    pol = Policy.full(grid(2, 2)).with_constraints(
        MarginalConstraint(["a"]), MarginalConstraint(["b"])
    )
    with pytest.raises(PolicyError, match="NP-hard"):
        sensitivity("histogram", pol)
    overlap = Policy.full(line(5)).with_constraints(
        CountConstraint({"x": (0, 2)}), CountConstraint({"x": (1, 3)})
    )
    with pytest.raises(PolicyError, match="not sparse"):
        sensitivity("histogram", overlap)


def test_bottom_moves_in_policy_graph() -> None:
    pol = Policy.full(line(3), bottom=True).with_constraints(CountConstraint({"x": 0}))
    g = policy_graph(pol)
    assert (g.plus, 0) in g.arcs and (0, g.minus) in g.arcs
    assert sensitivity("histogram", pol) >= brute_force_sensitivity(
        "histogram", pol, n=2, max_databases=10_000
    )


def test_literal_reading_with_collateral_moves_differs() -> None:
    """Documented open item: if records may also change along non-edges (moves='any'), a secret
    move can force collateral changes and the theorem's value is no longer an upper bound."""
    pol = Policy.line(line(7)).with_constraints(
        CountConstraint({"x": (0, 1)}), CountConstraint({"x": (2, 3)})
    )
    assert brute_force_sensitivity("histogram", pol, n=3, max_databases=10_000, moves="any") >= 4
    assert brute_force_sensitivity("histogram", pol, n=3, max_databases=10_000) == sensitivity(
        "histogram", pol
    )


@settings(max_examples=60, deadline=None)
@given(data=st.data())
def test_random_sparse_constraints_never_under_estimate(data: st.DataObject) -> None:
    """Random count constraints on tiny domains: the computed S(h, P) is never below brute force
    over I_Q (n = 3), and equals it whenever it is reported exact."""
    k = data.draw(st.integers(2, 5))
    dom = line(k)
    kind = data.draw(st.sampled_from(["full", "line", "distance"]))
    pol = {
        "full": Policy.full(dom),
        "line": Policy.line(dom),
        "distance": Policy.distance_threshold(dom, 2),
    }[kind]
    cons = [
        CountConstraint(
            cells=sorted(data.draw(st.sets(st.integers(0, k - 1), min_size=1, max_size=k)))
        )
        for _ in range(data.draw(st.integers(1, 2)))
    ]
    pol = pol.with_constraints(*cons)
    try:
        res = sensitivity("histogram", pol, detail=True)
    except PolicyError:
        return  # not sparse: refused (tested above)
    bf = brute_force_sensitivity("histogram", pol, n=3, max_databases=1_000)
    assert res.value >= bf
    if res.exact:
        assert res.value == bf
