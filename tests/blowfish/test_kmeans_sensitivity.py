"""k-means sensitivities: closed forms equal brute force over every secret pair on small grids.

Brute force (independent of the closed forms): for every edge (x, y) of the policy's secret
graph (listed by ``Policy.materialise_edges``) and every way the two endpoints can fall into
clusters (same cluster or two different ones), compute the exact L1 change of the cluster-size
vector and of the centred per-cluster sum matrix with ``_cluster_stats`` — the function the
mechanism itself uses — and take the maximum. ``safe`` must equal the maximum over all cases,
``paper`` the maximum over same-cluster moves.
"""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import fugu
from fugu.blowfish.kmeans import (
    KMeansGrid,
    _cluster_stats,
    _make_assigner,
    qsize_sensitivity,
    qsum_sensitivity,
    secret_graph,
)
from fugu.blowfish.policy import Policy
from fugu.errors import PolicyError


def _changes(
    grid: KMeansGrid, edges: np.ndarray, lab_x: int, lab_y: int
) -> tuple[np.ndarray, np.ndarray]:
    """Per edge (x, y): L1 change of (q_size, q_sum) when one record moves from x to y, with x in
    cluster ``lab_x`` and y in cluster ``lab_y`` (of 2). Each edge gets its own pair of clusters
    so all edges are evaluated in one call of the mechanism's own ``_cluster_stats``."""
    o = grid.centre
    pts = np.vstack([grid.all_points(), np.zeros((1, grid.dim))])  # row -1: ⊥ (absent record)
    e = edges.shape[0]

    def stats(cells: np.ndarray, lab: int) -> tuple[np.ndarray, np.ndarray]:
        present = cells >= 0
        cols = (pts[cells[present]] - o).T.copy()
        labels = (2 * np.arange(e) + lab)[present]
        sizes, sums = _cluster_stats(cols, labels, 2 * e)
        return sizes.reshape(e, 2), sums.reshape(e, 2, grid.dim)

    s1, q1 = stats(edges[:, 0], lab_x)
    s2, q2 = stats(edges[:, 1], lab_y)
    return np.abs(s1 - s2).sum(axis=1).astype(float), np.abs(q1 - q2).sum(axis=(1, 2))


def brute_force(policy: Policy, grid: KMeansGrid) -> dict[str, tuple[float, float]]:
    edges = policy.materialise_edges()
    best = {"safe": (0.0, 0.0), "paper": (0.0, 0.0)}
    bottom = edges.min(axis=1) < 0
    for lx, ly in itertools.product((0, 1), repeat=2):
        size, total = _changes(grid, edges, lx, ly)
        for key in ("safe", "paper"):
            keep = np.ones(len(edges), bool) if key == "safe" or lx == ly else bottom
            if keep.any():
                b = best[key]
                best[key] = (
                    max(b[0], float(size[keep].max())),
                    max(b[1], float(total[keep].max())),
                )
    # paper mode reports q_size = 2 whenever two cells are joined (CACM); ⊥ alone gives 1
    if (~bottom).any():
        best["paper"] = (2.0, best["paper"][1])
    return best


def _domain(sizes: list[int], lows: list[int], binned: list[bool]) -> fugu.Domain:
    attrs = []
    for j, (m, lo, b) in enumerate(zip(sizes, lows, binned, strict=True)):
        if b:  # non-uniform bins: midpoints are unevenly spaced
            edges = np.cumsum([lo] + [1 + (i * 7 + j) % 4 for i in range(m)])
            attrs.append(fugu.Ordinal(f"a{j}", edges=[float(e) for e in edges]))
        else:
            attrs.append(fugu.Ordinal(f"a{j}", lo, lo + m - 1))
    return fugu.Domain(attrs)


def _check(policy: Policy) -> None:
    grid = KMeansGrid.from_domain(policy.domain)
    expect = brute_force(policy, grid)
    for mode in ("safe", "paper"):
        got = (qsize_sensitivity(policy, grid, mode), qsum_sensitivity(policy, grid, mode))
        if policy.kind == "partition":
            continue  # partitions are checked separately (block-wise assignment)
        assert got[0] == pytest.approx(expect[mode][0]), (mode, policy.description)
        assert got[1] == pytest.approx(expect[mode][1]), (mode, policy.description)


domains = st.tuples(
    st.lists(st.integers(1, 6), min_size=1, max_size=3),
    st.integers(-3, 5),
    st.booleans(),
).map(
    lambda t: _domain(
        t[0], [t[1] + j for j in range(len(t[0]))], [t[2] and j == 0 for j in range(len(t[0]))]
    )
)


@settings(max_examples=40, deadline=None)
@given(
    domains,
    st.sampled_from([1.0, 1.5, 2.0, 3.0, 5.0, 8.0]),
    st.sampled_from(["l1", "linf"]),
    st.booleans(),
)
def test_distance_threshold_matches_brute_force(
    dom: fugu.Domain, theta: float, metric: str, weighted: bool
) -> None:
    if not 2 <= dom.size <= 216:
        return
    weights = [1.0 + (j % 2) for j in range(dom.ndim)] if weighted else None
    if weights and theta < min(weights):
        return
    try:
        pol = Policy.distance_threshold(dom, theta, metric, weights=weights)
    except PolicyError as exc:  # every attribute that can move is too heavy: no secret pair
        w = weights or [1.0] * dom.ndim
        assert "no edge" in str(exc)
        assert all(a.size < 2 or wj > theta for a, wj in zip(dom.attributes, w, strict=True))
        return
    _check(pol)


@settings(max_examples=25, deadline=None)
@given(domains, st.booleans())
def test_full_and_attribute_match_brute_force(dom: fugu.Domain, bottom: bool) -> None:
    if not 2 <= dom.size <= 216:
        return
    _check(Policy.full(dom, bottom=bottom))
    _check(Policy.attribute(dom, bottom=bottom))


def test_explicit_graph_with_bottom_edges_matches_brute_force() -> None:
    dom = fugu.Domain([fugu.Ordinal("x", 0, 4), fugu.Ordinal("y", 0, 3)])
    _check(Policy.explicit(dom, [(0, 1), (3, 17), (5, None)]))
    _check(Policy.explicit(dom, [(7, 8)], bottom=True))


def test_line_graph_known_values() -> None:
    dom = fugu.Domain([fugu.Ordinal("age", 0, 100)])
    assert qsum_sensitivity("line", dom, "paper") == 1.0
    assert (
        qsum_sensitivity("line", dom, "safe") == 99.0
    )  # ages 0 and 1 in different clusters: 50 + 49
    assert qsize_sensitivity("line", dom) == 2.0


def test_paper_table_values() -> None:
    """CACM pg 68: values in [0, 100] → 100 (DP), 5 (G^{L1,5}), 10 (width-10 blocks), and
    max_i(a_i − b_i) (attribute policy)."""
    one = fugu.Domain([fugu.Ordinal("age", 0, 100)])
    assert qsum_sensitivity(None, one, "paper") == 100.0
    assert qsum_sensitivity("distance:theta=5", one, "paper") == 5.0
    two = fugu.Domain([fugu.Ordinal("a", 0, 100), fugu.Ordinal("b", 0, 30)])
    assert qsum_sensitivity("attribute", two, "paper") == 100.0
    assert qsum_sensitivity(None, two) == 130.0  # d(T)
    assert (
        qsum_sensitivity("attribute", two) == 130.0
    )  # a corner and its reflection in one attribute
    blocks = fugu.Domain([fugu.Ordinal("age", 0, 99)])
    assert qsum_sensitivity("partition:age=10", blocks) == 9.0  # integer ages 0..9 in a block
    assert qsize_sensitivity("partition:age=10", blocks, "safe") == 0.0
    assert qsize_sensitivity("partition:age=10", blocks, "paper") == 2.0
    with pytest.raises(PolicyError, match="no edge"):  # no secret pair at all: refused
        qsize_sensitivity("partition:age=1", blocks, "paper")


@settings(max_examples=30, deadline=None)
@given(
    st.lists(st.integers(1, 6), min_size=1, max_size=3),
    st.data(),
)
def test_partition_blockwise_assignment_never_splits_a_block(
    sizes: list[int], data: st.DataObject
) -> None:
    """Partitions: the block diameter equals brute force, and no secret pair straddles clusters."""
    dom = _domain(sizes, [0] * len(sizes), [False] * len(sizes))
    per_cell = data.draw(st.booleans())
    try:
        if per_cell:
            ids = np.array(
                data.draw(st.lists(st.integers(0, 3), min_size=dom.size, max_size=dom.size))
            )
            policy = Policy.partition(dom, ids)
        else:
            spec = {a.name: data.draw(st.integers(1, a.size)) for a in dom.attributes}
            policy = Policy.partition(dom, spec)
    except PolicyError as exc:  # only singleton blocks: no secret pair, refused
        assert "no edge" in str(exc)
        return
    grid = KMeansGrid.from_domain(dom)
    expect = brute_force(policy, grid)
    assert qsum_sensitivity(policy, grid, "safe") == pytest.approx(expect["paper"][1])
    assert qsum_sensitivity(policy, grid, "paper") == pytest.approx(expect["paper"][1])
    assert qsize_sensitivity(policy, grid, "safe") == 0.0
    # block-wise assignment: both endpoints of every edge get the same cluster, for any centres
    graph = secret_graph(policy, grid)
    codes = np.indices(grid.sizes).reshape(grid.dim, -1).T
    assign = _make_assigner(graph, grid, codes)
    centres = grid.low + np.random.default_rng(len(sizes)).random((3, grid.dim)) * (
        grid.high - grid.low
    )
    labels = assign(np.ascontiguousarray(grid.all_points().T), centres)
    edges = policy.materialise_edges()
    if edges.size:
        assert np.all(labels[edges[:, 0]] == labels[edges[:, 1]])


def test_sensitivity_never_exceeds_dp_and_theta_monotone() -> None:
    dom = fugu.Domain([fugu.Ordinal("x", 0, 39), fugu.Ordinal("y", 0, 29)])
    dp = qsum_sensitivity(None, dom)
    prev = 0.0
    for theta in (1, 2, 5, 10, 20, 40, 68, 100):
        s = qsum_sensitivity(f"distance:theta={theta}", dom, "paper")
        assert s == min(theta, 68)  # d(T) = 39 + 29
        assert prev <= s <= dp
        prev = s
        assert qsum_sensitivity(f"distance:theta={theta}", dom, "safe") <= dp


def test_large_grid_is_fast() -> None:
    """The twitter-sized grid (400 × 300) with a large θ: closed form, no edge enumeration."""
    import time

    dom = fugu.Domain([fugu.Ordinal("lat", 0, 399), fugu.Ordinal("lon", 0, 299)])
    t0 = time.perf_counter()
    assert qsum_sensitivity("distance:theta=400", dom, "paper") == 400.0
    assert qsum_sensitivity("distance:theta=100", dom, "safe") == 697.0  # corner and its neighbour
    assert qsum_sensitivity("distance:theta=400", dom, "safe") == 698.0  # two corners 299 apart
    assert time.perf_counter() - t0 < 5.0
