"""Nineteenth privacy review (Blowfish): policies as the user wrote them, the queries the
mechanisms calibrate to, and what reaches the sampler.

Every test recomputes a claim from first principles (neighbours from ``Policy.is_edge``, the
exact answers handed to the sampler captured by a spy) and is exact: false-failure rate 0.

Bugs this review found are fixed, and their tests failed before the fix:

* ``SumQuery(attributes=("a", "a"))`` (an attribute summed twice: two equal outputs) got the
  sensitivity of one output under the attribute graph and L1 distance graphs (the greedy
  knapsack and ``max(n − 1)`` treat the repeat as another attribute sharing the move): under
  the line graph 1.0 while one move changes both outputs by 1 — ``blowfish.laplace`` drew
  scale 1/ε for a change of 2 (exact loss 2ε). A repeated attribute is now refused; a
  negative max_weight (negative sensitivity, refused by the sampler after the charge) too.
* Policies read as another one, silently: a parameter given twice in a policy string
  ('distance:theta=5,theta=1' was the line graph), an (E, 2)-reshaped edge array (a (2, E)
  array of sources and targets became other edges), a per-cell block array of another shape
  (flattened into other blocks), Policy.from_dict / dataclasses.replace fields (metric 'l2'
  read as L∞, negative weights joining every pair), a k-means SecretGraph's (E, 3) edges.
* k-means read SQL query rows under a policy with ⊥ at some values only: a record entering
  the result at another value changed the sums by 4.5 at q_sum sensitivity 1.
* k-means under a SecretGraph was charged under its kind ('secret graph distance' for every
  θ), so one ledger summed ε across different policies.
* ``fugu sensitivity -c 'count:age=2..3&age=5..5'`` used the count of age 5 alone.
* Ordered Hierarchical least squares treated the cells padding the last block as unknowns
  (they are known to be empty): not the exact least squares, up to 40 % more variance on
  small domains. Bad input (flags given as strings, eps_split as a string, a query given as
  a mapping, a policy given as a string) now gets clear errors.

Checked and found correct (exact, by enumerating record-labelled databases and their
neighbours under the definition — every changed individual moves along a secret edge, both
databases keep every public count, no proper subset of the changes does — and spying on what
each mechanism hands the sampler): ``laplace`` (histogram, cumulative, sum, blocks,
coarsening, range workload, real matrix), ``ordered`` and ``ordered_hierarchical`` (fan-out
2/3, heights 1–3 and the planner's choice) under line, distance, full, attribute, partition
(per attribute and per cell), explicit with ⊥ at some cells, +⊥, L∞ and weighted distance,
count and marginal constraints with and without ⊥, on 5–7-value and 3 × 2 domains with 2–3
records: no neighbour pair moved the sampler's input by more than the sensitivity used.
"""

from __future__ import annotations

import importlib
from typing import Any

import numpy as np
import pytest

import fugu
from fugu.blowfish import Policy, SumQuery, blowfish_budget, laplace, sensitivity

LA = importlib.import_module("fugu.blowfish.laplace")


def _spy(monkeypatch: pytest.MonkeyPatch, module: Any, name: str) -> list[tuple[Any, float]]:
    """(values, sensitivity) of every call of the sampler ``name`` made through ``module``."""
    calls: list[tuple[Any, float]] = []
    real = getattr(module, name)

    def spy(values: Any, sens: float, epsilon: float, *a: Any, **kw: Any) -> Any:
        calls.append((np.array(values, dtype=np.float64, copy=True), float(sens)))
        return real(values, sens, epsilon, *a, **kw)

    monkeypatch.setattr(module, name, spy)
    return calls


# == 1. a sum over a repeated attribute ============================================================
@pytest.mark.parametrize(
    "make",
    [
        lambda d: Policy.line(d),
        lambda d: Policy.distance_threshold(d, 3),
        lambda d: Policy.attribute(d),
    ],
    ids=["line", "distance3", "attribute"],
)
def test_sum_over_a_repeated_attribute_is_refused_before_the_charge(
    monkeypatch: pytest.MonkeyPatch, make: Any
) -> None:
    """Before the fix: ``sensitivity(SumQuery(("a", "a")), line) == 1.0`` (attribute graph 9,
    distance θ = 3: 3) while moving one record by one step changes both outputs: the answers
    handed to the sampler for [1, 2, 3] and its neighbour [1, 2, 4] were [6, 6] and [7, 7], L1
    change 2 at sensitivity 1 (loss 2ε). Now the query itself is refused, naming the attribute,
    and nothing is charged."""
    dom = fugu.Domain([fugu.Ordinal("a", 0, 9)])
    pol = make(dom)
    calls = _spy(monkeypatch, LA, "geometric_mechanism")
    acct = fugu.Accountant(blowfish_budget(10.0, pol))
    with pytest.raises(fugu.InvalidParameterError, match="'a'.*more than once"):
        q = SumQuery(attributes=("a", "a"))
        hist = fugu.Histogram.from_records({"a": [1, 2, 3]}, dom)
        laplace(hist, 1.0, pol, query=q, rng=fugu.RandomSource(seed=0), accountant=acct)
    assert acct.spent == 0 and not calls
    with pytest.raises(fugu.InvalidParameterError, match="more than once"):
        sensitivity(SumQuery(attributes=["a", "a"]), pol)


def test_sum_sensitivity_covers_every_move_of_distinct_attributes() -> None:
    """The closed forms that failed for repeats are right for distinct attributes: on a 3 × 4
    grid, the largest change of the sum vector over every secret pair (``is_edge``) equals
    ``sensitivity`` for the attribute graph and L1 / L∞ distance graphs."""
    dom = fugu.Domain([fugu.Ordinal("a", 0, 2), fugu.Ordinal("b", 0, 3)])
    codes = np.indices(dom.shape).reshape(2, -1).T
    for pol in (
        Policy.attribute(dom),
        Policy.distance_threshold(dom, 2),
        Policy.distance_threshold(dom, 3, "linf"),
        Policy.distance_threshold(dom, 2.5, weights=[1, 2]),
    ):
        for attrs in (("a",), ("b",), ("a", "b"), ("b", "a")):
            axes = [dom.axis(n) for n in attrs]
            best = max(
                float(np.abs(codes[x, axes] - codes[y, axes]).sum())
                for x in range(dom.size)
                for y in range(dom.size)
                if pol.is_edge(x, y)
            )
            assert sensitivity(SumQuery(attributes=attrs), pol) == best, (pol, attrs)


@pytest.mark.parametrize("w", [-2.0, -0.5, float("nan"), float("inf"), "2", True])
def test_sum_weight_is_checked_before_the_charge(w: Any) -> None:
    """Before the fix ``sensitivity(SumQuery(max_weight=-2), line)`` was -2.0 and
    ``blowfish.laplace`` charged the accountant, then the sampler refused the negative
    sensitivity ('sensitivity must be finite and > 0, got -2.0'): budget spent for nothing.
    Now the query is refused when built, naming max_weight."""
    with pytest.raises(fugu.InvalidParameterError, match="max_weight"):
        SumQuery(max_weight=w)
    dom = fugu.Domain([fugu.Ordinal("a", 0, 9)])
    assert sensitivity(SumQuery(max_weight=2), Policy.line(dom)) == 2.0


# == 2. policy strings are read as written ========================================================
@pytest.mark.parametrize(
    ("spec", "what"),
    [
        ("distance:theta=5,theta=1", "'theta' is given twice"),
        ("distance:5,theta=1", "given twice"),
        ("distance:theta=5,metric=l1,metric=linf", "'metric' is given twice"),
        ("partition:a=5,a=2", "'a' is given twice"),
        ("distance:theta=3,weights=1,weights=2+bottom", "'weights' is given twice"),
    ],
)
def test_policy_spec_with_a_repeated_parameter_is_refused(spec: str, what: str) -> None:
    """Before the fix the last value won silently: 'distance:theta=5,theta=1' (or
    'distance:5,theta=1') was the line graph — a release meant to hide values within 5 protected
    only neighbouring values (a value 5 apart at ε-distance 5ε) — and 'partition:a=5,a=2' cut
    blocks of 2. A policy that is not the one written is refused, naming the parameter."""
    dom = fugu.Domain([fugu.Ordinal("a", 0, 9)])
    with pytest.raises(fugu.PolicyError, match=what):
        Policy.parse(spec, dom)
    assert Policy.parse("distance:5", dom) == Policy.distance_threshold(dom, 5)


@pytest.mark.parametrize(
    "edges",
    [
        np.array([[0, 1, 2], [3, 4, 5]]),  # (2, E): sources and targets
        np.array([[0, 3, 1], [1, 4, 2]]).T.reshape(2, 3),  # (2, 3) again, other values
        np.array([0, 3, 1, 4]),  # flat
        np.array([[0, 3, 1], [2, 4, 5]]),  # (E, 3)
        np.array([[0.0, 3.0]]),  # floats
        np.array([[True, False]]),
    ],
)
def test_explicit_edge_array_must_be_e_by_2(edges: Any) -> None:
    """Before the fix an integer array was ``reshape(-1, 2)``-ed: the (2, E) array of sources
    [0, 1, 2] and targets [3, 4, 5] (edges 0–3, 1–4, 2–5) became the edges 0–1, 2–3, 4–5 — a
    different secret graph, silently (0 and 3 no longer protected against each other). A float
    array raised a bare TypeError. Now anything but an (E, 2) integer array is refused."""
    dom = fugu.Domain([fugu.Ordinal("a", 0, 5)])
    with pytest.raises(fugu.PolicyError, match="edges"):
        Policy.explicit(dom, edges)
    ok = Policy.explicit(dom, np.array([[0, 3], [1, 4], [2, 5]]))
    assert ok.is_edge(0, 3) and not ok.is_edge(0, 1)


@pytest.mark.parametrize("bad", [[(0, True)], [(0, 1.5)], [(0.0, 3)]])
def test_explicit_edge_endpoints_are_cells_or_records(bad: Any) -> None:
    """A bool endpoint was read as cell 1 and a float one raised "'float' object is not
    iterable"; both are refused by name."""
    dom = fugu.Domain([fugu.Ordinal("a", 0, 5)])
    with pytest.raises(fugu.PolicyError, match="edges: an endpoint"):
        Policy.explicit(dom, bad)
    nom = fugu.Domain([fugu.Nominal("sex", ["F", "M", "X"])])
    assert Policy.explicit(nom, [("F", "M")]).is_edge(0, 1)
    assert Policy.explicit(dom, [((0,), (3,)), (1, None)]).is_edge(0, 3)


# == 3. k-means ===================================================================================
def test_kmeans_sql_rows_need_bottom_at_every_value(tmp_path: Any) -> None:
    """Rows of an SQL query are not a fixed set: changing a record (here its flag) moves it in
    or out of the result, an add/remove at its value. Without ⊥ the fit was already refused
    (bca8c66); with ⊥ joined to some values only (explicit edges (4, 5), (4, ⊥)) it ran: q_sum
    sensitivity max(1, |4 − 4.5|) = 1 on x in 0..9 (centre 4.5), while a record entering the
    result at 9 changes the centred sums by 4.5 (loss 4.5ε per iteration). Now refused before
    anything is read or charged, as the histogram mechanisms refuse such a policy
    (check_counted_records)."""
    pa = pytest.importorskip("pyarrow")
    pq = pytest.importorskip("pyarrow.parquet")
    pytest.importorskip("duckdb")
    from fugu.blowfish.kmeans import KMeans, kmeans_sensitivities

    dom = fugu.Domain([fugu.Ordinal("x", 0, 9)])
    path = tmp_path / "p.parquet"
    pq.write_table(pa.table({"x": [1, 2, 3, 9, 4, 5], "flag": [1, 1, 1, 0, 1, 1]}), path)
    pol = Policy.explicit(dom, [(4, 5), (4, None)])
    assert kmeans_sensitivities(pol, dom)[1] == 1.0  # a record added at 9 moves the sums 4.5
    acc = fugu.Accountant(blowfish_budget(10.0, pol))
    est = KMeans(2, 1.0, policy=pol, accountant=acc, rng=fugu.RandomSource(seed=1))
    with pytest.raises(fugu.PolicyError, match="SQL query.*some values only"):
        est.fit(None, sql=f"SELECT x FROM '{path}' WHERE flag = 1")
    assert acc.spent == 0
    ok = KMeans(2, 1.0, policy=pol.with_bottom(), rng=fugu.RandomSource(seed=1))
    ok.fit(None, sql=f"SELECT x FROM '{path}' WHERE flag = 1")
    assert ok.sensitivity_["q_sum"] == 4.5


def test_partition_block_array_must_have_the_domain_shape() -> None:
    """Before the fix a per-cell block array was only checked for its size: on a (2, 3) domain
    the (3, 2) array [[0, 0], [1, 1], [2, 2]] (blocks along the first attribute, transposed)
    became the blocks [0, 0, 1, 1, 2, 2] of the flat domain — another partition, silently
    (cells (0, 0) and (1, 0), meant as one block, were in different blocks: their move released
    exactly). Now refused unless flat or of the domain's shape."""
    dom = fugu.Domain([fugu.Ordinal("a", 0, 1), fugu.Ordinal("b", 0, 2)])
    for bad in (np.array([[0, 0], [1, 1], [2, 2]]), np.zeros((1, 2, 3), np.int64)):
        with pytest.raises(fugu.PolicyError, match=r"domain's shape \(2, 3\)"):
            Policy.partition(dom, bad)
    flat = Policy.partition(dom, [0, 1, 2, 0, 1, 2])
    assert flat == Policy.partition(dom, np.array([[0, 1, 2], [0, 1, 2]]))
    assert flat.is_edge(0, 3) and not flat.is_edge(0, 1)


@pytest.mark.parametrize(
    ("change", "what"),
    [
        ({"metric": "l2"}, "metric"),
        ({"weights": [-1.0]}, "weight"),
        ({"weights": [1.0, 1.0]}, "weight"),
        ({"weights": [0.0]}, "weight"),
        ({"theta": float("inf")}, "theta"),
        ({"kind": "partition", "cell_blocks": [0, 0, 1]}, "cell_blocks"),
        ({"kind": "partition", "attribute_blocks": [[0, 0, 1]]}, "attribute_blocks"),
        ({"kind": "explicit", "edges": [[0, 12]]}, "explicit edges"),
        ({"kind": "explicit", "edges": [[3, 3], [0, 1]]}, "explicit edges"),
        ({"kind": "ring"}, "unknown policy kind"),
    ],
)
def test_policy_fields_are_checked_however_the_policy_is_built(
    change: dict[str, Any], what: str
) -> None:
    """Policy.from_dict (a release's policy_spec, a hand-written description) and
    dataclasses.replace build a Policy without the class methods' checks. Before the fix
    metric 'l2' was accepted and read as L∞, a negative weight joined every pair (is_edge(0, 9)
    under 'distance:theta=2'), two weights on a one-attribute domain were ignored, a zero weight
    or theta = inf raised ZeroDivisionError / OverflowError from sensitivity, a short
    cell_blocks an IndexError, and a self-loop passed. Now each is a PolicyError when built."""
    import dataclasses

    dom = fugu.Domain([fugu.Ordinal("a", 0, 9)])
    spec = Policy.distance_threshold(dom, 2).to_dict()
    spec.update(change)
    with pytest.raises(fugu.PolicyError, match=what):
        Policy.from_dict(spec)
    with pytest.raises(fugu.PolicyError, match="metric"):
        dataclasses.replace(Policy.line(dom), metric="euclid")
    assert dataclasses.replace(Policy.line(dom), theta=np.int64(3)).is_edge(0, 3)
    for pol in (
        Policy.distance_threshold(dom, 2, "linf", weights=[0.5]),
        Policy.partition(dom, {"a": 5}, bottom=True),
        Policy.partition(dom, np.arange(10) // 3),
        Policy.explicit(dom, [(0, 9), (4, None)]),
    ):
        assert Policy.from_dict(pol.to_dict()) == pol


@pytest.mark.parametrize(
    "graph",
    [
        {"kind": "explicit", "edges": np.array([[0, 1, 2]])},
        {"kind": "explicit", "edges": np.array([[0, 150]])},
        {"kind": "partition", "cell_blocks": np.array([0, 0, 1, 1])},
        {"kind": "partition", "attr_blocks": (np.array([0, 0, 1]), None)},
        {"kind": "distance", "theta": 2.0, "weights": (1.0,)},
        {"kind": "distance", "theta": 2.0, "weights": (-1.0, 1.0)},
        {"kind": "distance", "theta": float("inf")},
    ],
)
def test_kmeans_secret_graph_must_fit_the_grid(graph: dict[str, Any]) -> None:
    """A k-means SecretGraph given directly was not checked against the grid: the edge array
    [[0, 1, 2]] was read as the edge (0, 1) only (the fit ran, silently another graph), and
    short weights, blocks or out-of-range edges raised numpy's ValueError ('zip() argument 2 is
    shorter', 'array is not broadcastable', 'index 150 is out of bounds'). Now a PolicyError
    naming the field, before anything is read or charged."""
    from fugu.blowfish.kmeans import KMeans, SecretGraph

    dom = fugu.Domain([fugu.Ordinal("x", 0, 9), fugu.Ordinal("y", 0, 9)])
    acc = fugu.Accountant(10.0)
    g = SecretGraph(**graph)
    with pytest.raises(fugu.PolicyError, match="SecretGraph"):
        KMeans(2, 1.0, policy=g, domain=dom, accountant=acc).fit(np.zeros((5, 2)))
    assert acc.spent == 0


# == 4. bad input ================================================================================
def test_policy_parameters_that_are_not_numbers_are_named() -> None:
    """'distance:theta=3,weights=1|x' raised a bare ValueError ("could not convert string to
    float: 'x'") and Policy.partition(dom, {'a': 2.0}) a TypeError ("'float' object is not
    iterable"); both are PolicyErrors naming the parameter and the fix."""
    dom = fugu.Domain([fugu.Ordinal("a", 0, 9), fugu.Ordinal("b", 0, 3)])
    with pytest.raises(fugu.PolicyError, match="weights must be numbers"):
        Policy.parse("distance:theta=3,weights=1|x", dom)
    with pytest.raises(fugu.PolicyError, match="'a': a block width is an integer"):
        Policy.partition(dom, {"a": 2.0})
    assert Policy.parse("distance:theta=3,weights=1|2", dom).weights == (1.0, 2.0)


def test_kmeans_guarantee_names_the_bottom_neighbours() -> None:
    """The k-means guarantee said 'replace one record's value along an edge' under every
    policy, also with ⊥ (the sensitivities cover add/remove: q_size 2 ≥ 1, q_sum ≥ ‖y − o‖₁),
    and for ⊥ at some cells only it did not say which; the histogram mechanisms' guarantees
    (blowfish_neighbours) say both. Now the k-means guarantee does too."""
    from fugu.blowfish.kmeans import KMeans

    dom = fugu.Domain([fugu.Ordinal("x", 0, 9)])
    X = np.arange(10).reshape(-1, 1)
    full = KMeans(2, 1.0, policy=Policy.line(dom, bottom=True), rng=fugu.RandomSource(seed=0))
    assert "add/remove one record (⊥)" in full.fit(X).guarantee_.neighbours
    part = KMeans(
        2, 1.0, policy=Policy.explicit(dom, [(0, 1), (4, None)]), rng=fugu.RandomSource(seed=0)
    )
    assert "only cells 4;" in part.fit(X).guarantee_.neighbours
    none = KMeans(2, 1.0, policy=Policy.line(dom), rng=fugu.RandomSource(seed=0)).fit(X)
    assert "add/remove" not in none.guarantee_.neighbours


def test_kmeans_secret_graphs_are_charged_under_their_own_identifier() -> None:
    """A fit under a SecretGraph was charged under 'secret graph <label>', the label being the
    kind when no description is given: SecretGraph('distance', theta=1) and theta=50 were one
    policy to the ledger, which summed their ε although no policy protects both (sequential
    composition holds under one policy). Now the identifier of the same graph as a Policy."""
    from fugu.blowfish.kmeans import KMeans, SecretGraph

    dom = fugu.Domain([fugu.Ordinal("x", 0, 99)])
    X = np.arange(100).reshape(-1, 1)
    acc = fugu.Accountant(fugu.Budget(10.0, model="blowfish"))
    KMeans(
        2,
        1.0,
        policy=SecretGraph("distance", theta=1.0),
        domain=dom,
        accountant=acc,
        rng=fugu.RandomSource(seed=0),
    ).fit(X)
    with pytest.raises(fugu.InvalidParameterError, match="does not compose"):
        KMeans(
            2,
            1.0,
            policy=SecretGraph("distance", theta=50.0),
            domain=dom,
            accountant=acc,
            rng=fugu.RandomSource(seed=0),
        ).fit(X)
    assert acc.spent == 1.0
    # the same graph given as a Policy is the same policy
    KMeans(2, 1.0, policy=Policy.line(dom), accountant=acc, rng=fugu.RandomSource(seed=0)).fit(X)
    assert acc.spent == 2.0


def test_cli_sensitivity_refuses_an_attribute_named_twice_in_a_box() -> None:
    """'fugu sensitivity -c count:age=2..3&age=5..5' computed the sensitivity under the public
    count of age 5 alone (the last condition won; cumulative: 3 instead of 2 with age 2..3),
    and '-q age=1..3&age=5..6' answered another range. Both are refused, naming the option."""
    from click.testing import CliRunner

    from fugu.cli import _load_models, cli

    _load_models()
    for opt in (
        ["-c", "count:age=2..3&age=5..5"],
        ["-q", "age=1..3&age=5..6"],
        ["-q", "coarsening:age=2,age=5"],
    ):
        res = CliRunner().invoke(cli, ["sensitivity", "-a", "age:0..9", "-p", "line", *opt])
        said = res.output + str(res.exception)
        assert res.exit_code != 0 and "'age' is given twice" in said, said
    ok = CliRunner().invoke(
        cli, ["sensitivity", "-a", "age:0..9", "-p", "line", "-c", "count:age=2..3"]
    )
    assert ok.exit_code == 0, ok.output


def test_ordered_flags_must_be_booleans() -> None:
    """ordered(..., inference='no') applied the isotonic projection (a non-empty string is
    truthy) and ordered_hierarchical(..., consistency='no') kept least squares on: the release
    was biased / post-processed against what was written. Now refused, naming the option."""
    from fugu.blowfish import ordered, ordered_hierarchical

    dom = fugu.Domain([fugu.Ordinal("a", 0, 9)])
    hist = fugu.Histogram.from_records({"a": [1, 2]}, dom)
    with pytest.raises(fugu.InvalidParameterError, match="inference must be True or False"):
        ordered(hist, 1.0, Policy.line(dom), inference="no")
    with pytest.raises(fugu.InvalidParameterError, match="consistency must be True or False"):
        ordered_hierarchical(hist, 1.0, Policy.line(dom), consistency="no")
    rel = ordered(hist, 1.0, Policy.line(dom), inference=np.bool_(False), rng=fugu.RandomSource(0))
    assert rel.estimate == "direct"


def test_oh_eps_split_and_a_query_mapping_are_read_or_named() -> None:
    """ordered_hierarchical(..., eps_split='0.5') raised "'<' not supported between instances
    of 'int' and 'str'"; laplace(..., query={'a': (1, 3)}) raised "float() argument must be a
    string or a real number, not 'dict'". eps_split is refused by name; a mapping is refused
    with the two objects it could mean ({'a': 10}: the count of a = 10, or bins of 10)."""
    from fugu.blowfish import ordered_hierarchical

    dom = fugu.Domain([fugu.Ordinal("a", 0, 9)])
    hist = fugu.Histogram.from_records({"a": [1, 2, 7]}, dom)
    for bad in ("0.5", True, float("nan")):
        with pytest.raises(fugu.InvalidParameterError, match="eps_split"):
            ordered_hierarchical(hist, 1.0, Policy.line(dom), eps_split=bad)
    with pytest.raises(fugu.InvalidParameterError, match=r"RangeQuery\(\{'a': 10\}\)"):
        laplace(hist, 1.0, Policy.line(dom), query={"a": 10})
    with pytest.raises(fugu.InvalidParameterError, match="Coarsening"):
        sensitivity({"a": (1, 3)}, Policy.full(dom))


def test_a_policy_string_gets_the_fix() -> None:
    """laplace(hist, 1.0, 'line') and sensitivity('sum', 'line') said only 'policy must be a
    fugu.blowfish.Policy, got str'; they now say how to build one."""
    dom = fugu.Domain([fugu.Ordinal("a", 0, 9)])
    hist = fugu.Histogram.from_records({"a": [1, 2]}, dom)
    with pytest.raises(fugu.InvalidTypeError, match=r"Policy.parse\('line', domain\)"):
        laplace(hist, 1.0, "line")  # type: ignore[arg-type]
    with pytest.raises(fugu.InvalidTypeError, match=r"Policy.parse\('line', domain\)"):
        sensitivity("sum", "line")  # type: ignore[arg-type]


# == 5. Ordered Hierarchical least squares: the padded cells are known to be empty =================
def _dense_oh(st: Any) -> tuple[np.ndarray, np.ndarray]:
    """Design matrix over the k real cells (padding pinned to 0) and measurement weights."""
    f, h = st.fanout, st.height
    rows, wts = [], []
    for m in range(st.n_s):
        r = np.zeros(st.padded)
        r[: (m + 1) * st.block] = 1
        rows.append(r), wts.append(1 / st.var_s)
    for lv in range(1, h + 1):
        size = st.block // f**lv
        for b in range(st.n_blocks):
            for j in range(f**lv):
                r = np.zeros(st.padded)
                r[b * st.block + j * size : b * st.block + (j + 1) * size] = 1
                rows.append(r), wts.append(1 / st.var_h)
    return np.array(rows)[:, : st.k], np.array(wts)


@pytest.mark.parametrize(
    ("f", "h", "k", "public"),
    [(4, 1, 9, True), (4, 1, 9, False), (2, 2, 5, True), (3, 2, 19, False), (2, 3, 9, True)],
)
def test_oh_least_squares_pins_the_padding_to_zero(f: int, h: int, k: int, public: bool) -> None:
    """Blocks of f^h values pad the domain to B·f^h cells; the padded cells hold no record
    (public). gls_leaves estimated them as unknowns, so they absorbed noise from every node
    above them and the least squares was not the exact one: on k = 9, f = 4, h = 1 the
    average range variance was 1.124 (total public) against 0.931 for the exact solution
    (k = 5, f = 2, h = 2: 0.546 vs 0.362). Now the estimate equals dense weighted least
    squares over the k real cells (with C_k = n when public), the padded leaves are 0, and
    gls_range_variance equals the exact covariance for every range."""
    C = importlib.import_module("fugu.blowfish.cumulative")
    st = C.Structure(k=k, fanout=f, height=h, var_s=2.0, var_h=0.7, total_public=public)
    gen = np.random.default_rng(11)
    s = gen.normal(size=st.n_s) * 5
    levels = [gen.normal(size=(st.n_blocks, f**lv)) * 3 for lv in range(1, h + 1)]
    total = 4.0 if public else None
    got = C.gls_leaves(s, levels, st, total)
    a, w = _dense_oh(st)
    y = np.concatenate([s] + [lv.reshape(-1) for lv in levels])
    prec = a.T @ (w[:, None] * a)
    cov = np.linalg.inv(prec)
    x = cov @ (a.T @ (w * y))
    if public:  # the exact total as a constraint
        one = np.ones(k)
        x = x + cov @ one * (total - one @ x) / (one @ cov @ one)
        cov = cov - np.outer(cov @ one, cov @ one) / (one @ cov @ one)
    assert np.allclose(got[:k], x, atol=1e-9) and not got[k:].any()
    for lo in range(k):
        for hi in range(lo + 1, k + 1):
            v = cov[lo:hi, lo:hi].sum()
            assert C.gls_range_variance(st, lo, hi) == pytest.approx(v, rel=1e-9, abs=1e-12)


def test_kmeans_points_with_sql_are_refused_before_the_charge() -> None:
    """KMeans.fit(points, sql=...) took n from the points (public, no ⊥) and the engine
    refused the points + query pair (6114024) only at the first iteration's partial_sums,
    after the accountant was charged. Now refused first, nothing charged."""
    pytest.importorskip("duckdb")
    from fugu.blowfish.kmeans import KMeans

    dom = fugu.Domain([fugu.Ordinal("x", 0, 9)])
    acc = fugu.Accountant(10.0)
    est = KMeans(2, 1.0, domain=dom, accountant=acc, rng=fugu.RandomSource(seed=1))
    with pytest.raises(fugu.InvalidParameterError, match="sql="):
        est.fit(np.arange(10).reshape(-1, 1), sql="SELECT 7 AS x")
    assert acc.spent == 0


@pytest.mark.parametrize("opts", [{"threads": 2}, {"master": "local"}])
def test_kmeans_engine_options_are_checked_before_the_charge(opts: dict[str, Any]) -> None:
    """In-memory points meet the engine only in the iterations: KMeans.fit(X, threads=2) on
    the numpy engine raised 'the numpy engine takes no options ['threads']' with the
    accountant charged. Now the options are tried first, nothing charged; valid ones run."""
    from fugu.blowfish.kmeans import KMeans

    dom = fugu.Domain([fugu.Ordinal("x", 0, 99)])
    X = np.random.default_rng(0).integers(0, 100, (200, 1))
    acc = fugu.Accountant(10.0)
    est = KMeans(2, 1.0, domain=dom, accountant=acc, rng=fugu.RandomSource(seed=1))
    with pytest.raises(fugu.InvalidParameterError, match="takes no options"):
        est.fit(X, **opts)
    assert acc.spent == 0
    pytest.importorskip("duckdb")
    ok = KMeans(2, 1.0, domain=dom, rng=fugu.RandomSource(seed=1)).fit(
        X, engine="duckdb", threads=1
    )
    ref = KMeans(2, 1.0, domain=dom, rng=fugu.RandomSource(seed=1)).fit(X)
    assert np.array_equal(ok.cluster_centers_, ref.cluster_centers_)


@pytest.mark.parametrize(
    "init", ["bogus", np.zeros((3, 1)), np.array([[np.nan], [1.0]]), [["a"], ["b"]]]
)
def test_kmeans_init_is_checked_before_the_charge(init: Any) -> None:
    """init was checked where it was used, after the accountant was charged: init='bogus', a
    (3, 1) array for k = 2 or a NaN centre raised InvalidParameterError with ε spent (text
    centres: a bare ValueError). Now refused before, nothing charged."""
    from fugu.blowfish.kmeans import KMeans

    dom = fugu.Domain([fugu.Ordinal("x", 0, 99)])
    X = np.random.default_rng(0).integers(0, 100, (200, 1))
    acc = fugu.Accountant(10.0)
    with pytest.raises(fugu.InvalidParameterError, match="init must be"):
        KMeans(2, 1.0, domain=dom, init=init, accountant=acc).fit(X)
    assert acc.spent == 0
    ok = KMeans(2, 1.0, domain=dom, init=[[0.0], [50.0]], rng=fugu.RandomSource(seed=1))
    assert ok.fit(X).cluster_centers_.shape == (2, 1)
    # a centre outside the domain is refused too (it was clipped into it without a word)
    with pytest.raises(fugu.InvalidParameterError, match="outside the domain's range"):
        KMeans(2, 1.0, domain=dom, init=[[-5.0], [50.0]], accountant=acc).fit(X)
    assert acc.spent == 0


@pytest.mark.parametrize("query", [fugu.Workload([]), np.zeros((0, 10))])
def test_laplace_refuses_a_query_with_no_outputs(query: Any) -> None:
    """An empty workload or a 0-row matrix released an empty vector and charged ε."""
    dom = fugu.Domain([fugu.Ordinal("a", 0, 9)])
    hist = fugu.Histogram.from_records({"a": [1, 2, 9]}, dom)
    acc = fugu.Accountant(blowfish_budget(10.0, Policy.line(dom)))
    with pytest.raises(fugu.InvalidParameterError, match="no outputs"):
        laplace(hist, 1.0, Policy.line(dom), query=query, accountant=acc)
    assert acc.spent == 0
