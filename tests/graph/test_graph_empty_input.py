"""Empty inputs are released like their neighbours, with a warning to the curator.

Under edge DP the empty graph and a one-edge graph are neighbours, under node DP the empty graph
and a one-node graph, for a K-relation the empty relation and a one-tuple one. ``read_edge_list``
refused a well-formed edge list with no edge lines (``EmptyDataError: ... has no edges``) while
the one-edge list was read and released: the two told apart with probability 1 (ε = ∞ on that
pair), through the library and the ``fugu graph`` CLI. Now the empty file is the empty graph,
every mechanism releases on empty inputs (the Recursive Mechanism's X is 0, its noise still
applies) and warns the curator with a ``UserWarning`` that is not part of the release.

The audit (fixed seed, false-failure rate at most 1e-3 per call, Clopper-Pearson with
Bonferroni over the events) compares the released (value, ln Δ̂) on the empty edge list and its
one-edge neighbour, read from files with ``read_edge_list``.
"""

from __future__ import annotations

import gzip
import json
import math
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

import networkx as nx
import numpy as np
import pytest
from graph_helpers import audit_value_and_scale, sequences, vectorised

import fugu
from fugu.cli import main
from fugu.graph import (
    KRelation,
    RecursiveParameters,
    answer,
    count,
    general_recursive,
    karwa_count,
    laplace_count,
    read_edge_list,
    smooth_triangle_count,
)
from fugu.testing import audit

EPS = 1.0
NOT_REFUSED = "not refused"


def _write(path: Path, text: str) -> Path:
    if path.suffix == ".gz":
        with gzip.open(path, "wt") as fh:
            fh.write(text)
    else:
        path.write_text(text)
    return path


@pytest.mark.parametrize(
    ("name", "text", "options"),
    [
        ("zero.txt", "", {}),
        ("comments.txt", "# Directed graph\n# FromNodeId\tToNodeId\n", {}),
        ("blank.txt", "\n   \n\n", {}),
        ("comments.csv", "# src,dst\n", {"delimiter": ","}),
        ("zero.txt.gz", "", {}),
        ("loops.txt", "1 1\n2 2\n", {"self_loops": "drop"}),  # was empty, silently
    ],
)
def test_edge_list_without_edges_is_the_empty_graph(
    tmp_path: Path, name: str, text: str, options: dict[str, Any]
) -> None:
    """Before: EmptyDataError ("edge list ... has no edges") for all but the dropped loops,
    which gave the empty graph without a word."""
    p = _write(tmp_path / name, text)
    with pytest.warns(UserWarning, match=f"has no edges: read as the empty graph.*{NOT_REFUSED}"):
        G = read_edge_list(p, **options)
    assert G.number_of_nodes() == 0 and G.number_of_edges() == 0


def test_audit_empty_edge_list_against_its_one_edge_neighbour(tmp_path: Path) -> None:
    """Edge DP, pattern "edge": the empty file and the file with one edge line, each read with
    read_edge_list (which refused the first before), released by the Recursive Mechanism. The
    library's own run on the empty graph has X = 0 and j = 0 (noise only); the audit draws the
    same outputs vectorised from the library's j and H (graph_helpers.vectorised)."""
    empty = _write(tmp_path / "empty.txt", "# no edges yet\n")
    one = _write(tmp_path / "one.txt", "# one edge\n1\t2\n")
    params = RecursiveParameters.make(EPS, mu=0.5)

    def graph(path: Path) -> nx.Graph:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", UserWarning)  # the empty file's warning
            G = read_edge_list(path)
        G.graph.update(unit="edge", pattern="edge")
        return G

    g0, g1 = graph(empty), graph(one)
    trace: list[Any] = []
    with pytest.warns(UserWarning, match="no edges"):
        rel = count(g0, "edge", EPS, unit="edge", rng=fugu.RandomSource(seed=5), trace=trace)
    assert math.isfinite(rel.value) and rel.delta_hat is not None and rel.delta_hat > 0
    assert trace[0].x == 0.0 and trace[0].j == 0 and trace[0].true_value == 0.0
    assert sequences(g0, "edge", params)[0] == 0  # the audit's j agrees
    mech = vectorised(params)
    res = audit(mech, g0, g1, EPS, n_runs=60_000, vectorised=True)  # value and ln Δ̂ jointly
    assert res.passed, str(res)
    audit_value_and_scale(mech, g0, g1, EPS, n_runs=60_000)  # and each alone

    def refusing(G: nx.Graph, rng: fugu.RandomSource, size: int) -> np.ndarray:
        # the old behaviour as an output: no release (NaN) on the empty graph
        out = mech(G, rng, size)
        return np.full_like(out, np.nan) if G.number_of_edges() == 0 else out

    caught = audit(refusing, g0, g1, EPS, n_runs=60_000, vectorised=True)
    assert not caught.passed and caught.worst_event == "S is NaN", str(caught)


@pytest.mark.parametrize(
    "extra",
    [
        ["--unit", "edge", "--pattern", "edge"],
        ["--unit", "node", "--pattern", "triangle"],
        ["--unit", "edge", "--pattern", "triangle", "--mechanism", "laplace", "--nodes", "3"],
        ["--unit", "edge", "--pattern", "2-star", "--mechanism", "karwa", "--nodes", "3"],
    ],
)
def test_cli_releases_on_an_empty_edge_list_as_on_its_neighbour(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, extra: list[str]
) -> None:
    """Before: `fugu graph count --edges empty.txt` exited with "has no edges" (rc 1) and the
    one-edge file released. Now both release; the warning is a stderr line, not in the JSON."""
    files = {
        "empty": _write(tmp_path / "empty.txt", "# nothing\n"),
        "one": _write(tmp_path / "one.txt", "1 2\n"),
    }
    docs = {}
    for what, path in files.items():
        args = ["graph", "count", "--edges", str(path), "-e", "1", "--seed", "1", "--json"]
        rc = main(args + extra)
        captured = capsys.readouterr()
        assert rc == 0, captured.err
        docs[what] = json.loads(captured.out)
        has_warning = "warning: edge list" in captured.err and NOT_REFUSED in captured.err
        assert has_warning == (what == "empty"), captured.err
        assert NOT_REFUSED not in captured.out
    assert docs["empty"]["guarantee"] == docs["one"]["guarantee"]  # the same public promise
    assert math.isfinite(docs["empty"]["value"])


K0 = KRelation.from_records([], owners="who", columns=["who", "km"])
K1 = KRelation.from_records([{"who": "ann", "km": 2.0}], owners="who")


def _one_edge(n: int) -> nx.Graph:
    G = nx.empty_graph(n)
    G.add_edge(0, 1)
    return G


def _one_node() -> nx.Graph:
    G = nx.Graph()
    G.add_node("v")
    return G


#: (empty input, its neighbour, the release); seeded sources (tests only)
CASES: dict[str, tuple[Any, Any, Callable[[Any, fugu.RandomSource], Any]]] = {
    "count node": (nx.Graph(), _one_node(), lambda d, r: count(d, "triangle", EPS, rng=r)),
    "count edge": (
        nx.empty_graph(3),
        _one_edge(3),
        lambda d, r: count(d, "edge", EPS, unit="edge", rng=r),
    ),
    "count edge laplace": (
        nx.empty_graph(3),
        _one_edge(3),
        lambda d, r: count(d, "triangle", EPS, unit="edge", mechanism="laplace", rng=r),
    ),
    "laplace node": (
        nx.Graph(),
        _one_node(),
        lambda d, r: laplace_count(d, "edge", EPS, "node", r, degree_bound=2),
    ),
    "smooth": (nx.empty_graph(3), _one_edge(3), lambda d, r: smooth_triangle_count(d, EPS, rng=r)),
    "karwa 2-star": (
        nx.empty_graph(3),
        _one_edge(3),
        lambda d, r: karwa_count(d, "2-star", EPS, rng=r),
    ),
    "karwa 2-triangle": (
        nx.empty_graph(4),
        _one_edge(4),
        lambda d, r: karwa_count(d, "2-triangle", EPS, delta=0.1, rng=r),
    ),
    "answer": (K0, K1, lambda d, r: answer(d, "km", EPS, rng=r)),
    "answer signed": (K0, K1, lambda d, r: answer(d, "km", EPS, split_signed=True, rng=r)),
    "general": (
        [],
        ["ann"],
        lambda d, r: general_recursive(lambda s: float(len(s)), d, EPS, rng=r),
    ),
    "general krelation": (K0, K1, lambda d, r: general_recursive(d, None, EPS, rng=r)),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_empty_inputs_are_released_with_a_warning_to_the_curator(case: str) -> None:
    """Every entry point releases on the empty input and on its neighbour; only the empty one
    warns (a UserWarning pointing at the caller, here this file), and the warning is not in the
    release. Before: no warning (these entry points already released)."""
    empty, neighbour, release = CASES[case]
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        rel = release(empty, fugu.RandomSource(seed=2))
    ours = [w for w in caught if NOT_REFUSED in str(w.message)]
    assert len(ours) == 1, [str(w.message) for w in caught]
    assert issubclass(ours[0].category, UserWarning)
    assert ours[0].filename == __file__
    assert "empty" in str(ours[0].message) and "epsilon = infinity" in str(ours[0].message)
    assert math.isfinite(rel.value) and rel.guarantee.epsilon == pytest.approx(EPS)
    assert NOT_REFUSED not in f"{rel.summary()} {rel!r} {rel.guarantee.describe()}"
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        other = release(neighbour, fugu.RandomSource(seed=2))
    assert not [w for w in caught if NOT_REFUSED in str(w.message)]
    assert math.isfinite(other.value)
    assert other.guarantee.mechanism == rel.guarantee.mechanism  # the same code path
    assert other.guarantee.parameters.keys() == rel.guarantee.parameters.keys()


@pytest.mark.parametrize("case", ["count node", "count edge", "answer", "general"])
def test_the_warning_is_never_a_refusal_even_as_an_error(case: str) -> None:
    """With warnings turned into errors (python -W error), the empty input's UserWarning was
    raised: the empty input refused, its neighbour released, the leak again. It is shown
    instead (warnings.showwarning, pointing at this file) and the release is made."""
    empty, neighbour, release = CASES[case]
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("error")
        rel = release(empty, fugu.RandomSource(seed=2))
        other = release(neighbour, fugu.RandomSource(seed=2))
    assert math.isfinite(rel.value) and math.isfinite(other.value)
    ours = [w for w in caught if NOT_REFUSED in str(w.message)]
    assert len(ours) == 1 and ours[0].category is UserWarning and ours[0].filename == __file__
