"""Policies: constructors, parser, graph structure, serialisation and bad input."""

from __future__ import annotations

import numpy as np
import pytest

import fugu
from fugu.blowfish import BOTTOM, CountConstraint, MarginalConstraint, Policy, parse_policy
from fugu.errors import DomainError, InvalidTypeError, PolicyError


def dom1(k: int = 10) -> fugu.Domain:
    return fugu.Domain([fugu.Ordinal("a", 0, k - 1)])


def dom2() -> fugu.Domain:
    return fugu.Domain([fugu.Ordinal("x", 0, 5), fugu.Ordinal("y", 0, 3)])


def all_policies(dom: fugu.Domain) -> list[Policy]:
    return [
        Policy.full(dom),
        Policy.attribute(dom),
        Policy.distance_threshold(dom, 1),
        Policy.distance_threshold(dom, 2),
        Policy.distance_threshold(dom, 2, "linf"),
        Policy.partition(dom, {dom.names[0]: 2}),
        Policy.partition(dom, np.arange(dom.size) % 3),
        Policy.explicit(dom, [(0, 1), (2, dom.size - 1), (3, None)]),
        Policy.attribute(dom, bottom=True),
    ]


@pytest.mark.parametrize("dom", [dom1(), dom2()], ids=["1d", "2d"])
def test_edges_agree_with_is_edge_and_counts(dom: fugu.Domain) -> None:
    for p in all_policies(dom):
        e = p.materialise_edges()
        cell = e[e.min(axis=1) >= 0]
        assert len(cell) == p.n_edges(), p
        assert len({tuple(sorted(r)) for r in cell.tolist()}) == len(cell), "edges listed twice"
        listed = {tuple(sorted(r)) for r in e.tolist()}
        for x in range(-1, dom.size):
            for y in range(x + 1, dom.size):
                assert p.is_edge(x, y) == ((min(x, y), max(x, y)) in listed), (p, x, y)
                assert p.is_edge(x, y) == p.is_edge(y, x)


def test_distance_graph_is_the_l1_ball() -> None:
    dom = dom2()
    p = Policy.distance_threshold(dom, 2)
    codes = np.indices(dom.shape).reshape(2, -1).T
    for x in range(dom.size):
        for y in range(dom.size):
            if x != y:
                assert p.is_edge(x, y) == (np.abs(codes[x] - codes[y]).sum() <= 2)


def test_line_is_distance_one_and_full_is_complete() -> None:
    d = dom1(6)
    line = Policy.line(d)
    assert line.kind == "distance" and line.theta == 1 and line.is_line
    assert line.n_edges() == 5 and line.description == "line"
    assert Policy.full(d).n_edges() == 15
    assert Policy.attribute(d).n_edges() == 15  # one attribute: complete


def test_partition_blocks_and_crosses() -> None:
    d = dom2()
    p = Policy.partition(d, {"x": [[0, 1, 2], [3, 4, 5]], "y": 2})
    ids = p.block_ids().reshape(d.shape)
    assert len(np.unique(ids)) == 4
    assert not p.crosses(ids) and p.crosses(np.arange(d.size) % 2)
    assert Policy.partition(d, {"x": 1}).n_edges() == 6 * 6  # each x value: y values complete


def test_serialisation_roundtrip_and_name() -> None:
    for dom in (dom1(), dom2()):
        for p in all_policies(dom):
            q = Policy.from_dict(p.to_dict())
            assert q == p and q.name == p.name and str(q) == str(p)
    c = Policy.line(dom1()).with_constraints(CountConstraint({"a": (2, 4)}))
    assert Policy.from_dict(c.to_dict()) == c
    assert c.name != Policy.line(dom1()).name
    assert hash(c) == hash(Policy.from_dict(c.to_dict()))


def test_parser() -> None:
    d = dom1()
    assert parse_policy("line", d) == Policy.line(d)
    assert parse_policy("distance:theta=3", d) == Policy.distance_threshold(d, 3)
    assert parse_policy("distance:3", d) == Policy.distance_threshold(d, 3)
    assert parse_policy("full", d) == Policy.full(d)
    assert parse_policy("attribute", d) == Policy.attribute(d)
    assert parse_policy("partition:a=5", d) == Policy.partition(d, {"a": 5})
    assert parse_policy("line+bottom", d).bottom
    assert parse_policy("distance:theta=2,metric=linf", dom2()).metric == "linf"
    h = fugu.Hierarchy.from_dict({"any": {"g1": ["a", "b"], "g2": ["c"]}})
    dn = fugu.Domain([fugu.Nominal("job", h)])
    assert parse_policy("partition:job=level1", dn).block_ids().tolist() == [0, 0, 1]


@pytest.mark.parametrize(
    "text",
    ["", "nonsense", "distance", "distance:theta=abc", "partition", "full:theta=3", "line:2"],
)
def test_parser_rejects(text: str) -> None:
    with pytest.raises(PolicyError):
        parse_policy(text, dom1())


def test_bad_input_messages() -> None:
    d = dom1()
    with pytest.raises(PolicyError, match="theta"):
        Policy.distance_threshold(d, 0.5)
    with pytest.raises(PolicyError, match="theta"):
        Policy.distance_threshold(d, 0)
    with pytest.raises(InvalidTypeError):
        Policy.distance_threshold(d, "3")  # type: ignore[arg-type]
    with pytest.raises(PolicyError, match="does not cover"):
        Policy.partition(d, {"a": [[0, 1], [2, 3]]})
    with pytest.raises(PolicyError, match="overlap"):
        Policy.partition(d, {"a": [[0, 1, 2, 3, 4], [4, 5, 6, 7, 8, 9]]})
    with pytest.raises(PolicyError, match="cover"):
        Policy.partition(d, {"a": [0, 0, 1]})
    with pytest.raises(PolicyError, match="cover"):
        Policy.partition(d, np.zeros(3))
    with pytest.raises(PolicyError, match="width"):
        Policy.partition(d, {"a": 0})
    with pytest.raises(DomainError):
        Policy.partition(d, {"b": 2})
    with pytest.raises(PolicyError, match="nominal"):
        Policy.distance_threshold(fugu.Domain([fugu.Nominal("s", ["F", "M"])]), 1)
    with pytest.raises(PolicyError, match="one-attribute"):
        parse_policy("line", dom2())
    with pytest.raises(PolicyError, match="self-loop"):
        Policy.explicit(d, [(1, 1)])
    with pytest.raises(DomainError):
        Policy.explicit(d, [(1, 99)])
    with pytest.raises(InvalidTypeError):
        Policy.full("not a domain")  # type: ignore[arg-type]


def test_constraints_refer_to_known_values() -> None:
    d = dom2()
    with pytest.raises(DomainError):
        Policy.full(d).with_constraints(CountConstraint({"x": (0, 9)}))
    with pytest.raises(DomainError):
        Policy.full(d).with_constraints(CountConstraint({"z": 1}))
    with pytest.raises(DomainError):
        Policy.full(d).with_constraints(MarginalConstraint(["z"]))
    with pytest.raises(DomainError):
        Policy.full(d).with_constraints(CountConstraint(cells=[0, 99]))
    with pytest.raises(InvalidTypeError):
        Policy.full(d).with_constraints("x")  # type: ignore[arg-type]


def test_explicit_with_records_and_bottom() -> None:
    d = dom2()
    p = Policy.explicit(d, [({"x": 0, "y": 0}, (1, 0)), ((2, 3), None)])
    assert p.is_edge(0, d.encode({"x": [1], "y": [0]})[0])
    cell = int(d.encode({"x": [2], "y": [3]})[0])
    assert p.is_edge(cell, BOTTOM) and p.has_bottom_edges()
    assert p.bottom_cells().tolist() == [cell]


def test_large_domains_never_materialise_quadratic_edges() -> None:
    big = fugu.Domain([fugu.Ordinal("x", 0, 399), fugu.Ordinal("y", 0, 299)])
    p = Policy.distance_threshold(big, 5)
    assert p.n_edges() < 61 * big.size
    with pytest.raises(PolicyError, match="enumerate"):
        next(Policy.full(big).iter_edges())


def test_policy_is_recorded_in_the_release_guarantee(tmp_path: object) -> None:
    from fugu.blowfish import ordered

    d = dom1(30)
    pol = Policy.distance_threshold(d, 3).with_constraints(CountConstraint({"a": (2, 4)}))
    h = fugu.Histogram(np.arange(30), d)
    rel = ordered(h, 1.0, pol, rng=fugu.RandomSource(seed=0))
    back = fugu.Release.load(rel.save(str(tmp_path) + "/r.npz"))  # type: ignore[operator]
    prm = back.guarantee.parameters
    assert prm["policy_id"] == pol.name and Policy.from_dict(prm["policy_spec"], back.domain) == pol


def test_policies_without_secret_pairs_are_refused_everywhere() -> None:
    """Issue 14 item 2: a graph with no edge (and no ⊥) protects nothing; every constructor
    refuses it with a PolicyError, as distance_threshold already did."""
    import dataclasses

    d = fugu.Domain([fugu.Ordinal("x", 0, 5)])
    one = fugu.Domain([fugu.Ordinal("x", 0, 0)])
    builders = [
        lambda: Policy.explicit(d, []),
        lambda: Policy.partition(d, {"x": 1}),
        lambda: Policy.partition(d, list(range(6))),
        lambda: Policy.full(one),
        lambda: Policy.attribute(one),
        lambda: Policy.full(one, bottom=True).with_bottom(False),
        lambda: Policy.parse("partition:x=1", d),
        lambda: Policy.from_dict(
            {**Policy.partition(d, {"x": 2}).to_dict(), "attribute_blocks": [[0, 1, 2, 3, 4, 5]]}, d
        ),
        lambda: dataclasses.replace(Policy.explicit(d, [(0, 1)]), edges=np.zeros((0, 2), int)),
    ]
    for build in builders:
        with pytest.raises(PolicyError, match="no edge"):
            build()
    # presence-only protection (⊥) and ordinary graphs stay valid
    assert Policy.partition(d, {"x": 1}, bottom=True).has_bottom_edges()
    assert Policy.explicit(d, [(0, None)]).has_bottom_edges()
    assert Policy.full(one, bottom=True).bottom
