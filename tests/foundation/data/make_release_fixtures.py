"""How tests/foundation/data/releases_v1/ was made (run once, with the code of commit 3033565,
before the declarative release state of issue 19). Kept for the record; re-running it with a
newer fugu writes files in the newer code's format, which is not what the fixtures test.

Each ``<kind>.npz`` is a small release saved by ``Release.save``; ``answers.json`` holds, per
file, the queries asked and the answers the old code gave, so a test can check that today's
``Release.load`` reads every old file into a release that answers the same.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

import fugu

HERE = Path(__file__).parent / "releases_v1"


def _rng() -> fugu.RandomSource:
    return fugu.RandomSource(seed=7)


def releases() -> dict[str, tuple[fugu.Release, list[dict]]]:
    d1 = fugu.Domain([fugu.Ordinal("a", 0, 7)])
    h1 = fugu.Histogram(np.array([5, 0, 3, 9, 1, 0, 2, 4]), d1)
    d2 = fugu.Domain([fugu.Ordinal("a", 0, 3), fugu.Nominal("b", ["x", "y", "z"])])
    h2 = fugu.Histogram(np.arange(12).reshape(4, 3), d2)
    d3 = fugu.Domain([fugu.Ordinal(n, 0, 3) for n in ("a", "b", "c")])
    rs = np.random.default_rng(3)
    recs3 = {n: rs.integers(0, 4, 300) for n in ("a", "b", "c")}
    q1 = [{"a": (0, 3)}, {"a": (2, 6)}]
    q2 = [{"a": (0, 1)}, {"a": (1, 3), "b": "y"}]
    q3 = [{"a": (0, 1)}, {"a": (1, 2), "b": (0, 2)}, {"a": (0, 2), "b": (1, 3), "c": (0, 1)}]
    line = fugu.blowfish.Policy.line(d1)
    out: dict[str, tuple[fugu.Release, list[dict]]] = {
        "cube": (fugu.central.laplace(h2, 1.0, rng=_rng()), q2),
        "hierarchical": (fugu.central.hierarchical(h2, 1.0, rng=_rng()), q2),
        "hierarchical-noconsistency": (
            fugu.central.hierarchical(h1, 1.0, consistency=False, rng=_rng()),
            q1,
        ),
        "privelet": (fugu.central.privelet(h2, 1.0, rng=_rng()), q2),
        "blowfish-cumulative": (fugu.blowfish.ordered(h1, 1.0, line, rng=_rng()), q1),
        "blowfish-linear": (
            fugu.blowfish.laplace(h1, 1.0, line, query="cumulative", rng=_rng()),
            [],
        ),
        "blowfish-ordered-hierarchical": (
            fugu.blowfish.ordered_hierarchical(h1, 1.0, line, rng=_rng()),
            q1,
        ),
        "blowfish-cube": (fugu.blowfish.laplace(h1, 1.0, line, rng=_rng()), q1),
        "ldp-frequency": (
            fugu.ldp.OLH(d1, epsilon=1.0).simulate({"a": np.arange(200) % 8}, rng=_rng()),
            q1,
        ),
        "ldp-uniform": (fugu.ldp.Uni(d3, 1.0).simulate(recs3, rng=_rng()), q3),
        "ldp-product": (fugu.ldp.MSW(d3, 1.0).simulate(recs3, rng=_rng()), q3),
        "ldp-pairs": (fugu.ldp.CALM(d3, 1.0).simulate(recs3, rng=_rng()), q3),
        "ldp-hio": (fugu.ldp.HIO(d3, 1.0).simulate(recs3, rng=_rng()), q3),
        "ldp-grids": (fugu.ldp.HDG(d3, 1.0).simulate(recs3, rng=_rng()), q3),
    }
    try:
        import networkx as nx

        g = nx.karate_club_graph()
        out["graph-count"] = (
            fugu.graph.count(g, "triangle", 1.0, unit="edge", mechanism="laplace", rng=_rng()),
            [],
        )
        out["graph-count-recursive"] = (
            fugu.graph.count(nx.path_graph(6), "edge", 1.0, unit="node", rng=_rng()),
            [],
        )
    except ImportError:  # pragma: no cover
        pass
    return out


def main() -> None:
    HERE.mkdir(exist_ok=True)
    answers = {}
    for name, (rel, queries) in releases().items():
        rel.save(HERE / f"{name}.npz")
        rec: dict = {"kind": rel.kind, "queries": queries}
        rec["answers"] = [float(rel.answer(q)) for q in queries]
        try:
            rec["counts"] = np.asarray(rel.counts, np.float64).ravel().tolist()
        except NotImplementedError:
            pass
        rec["errors"] = [rel.expected_error(q) for q in queries]
        if name.startswith("graph-count"):
            rec["value"] = rel.value  # type: ignore[attr-defined]
            rec["errors"] = [rel.expected_error()]
        if name == "blowfish-linear":
            rec["values"] = rel.values.tolist()  # type: ignore[attr-defined]
            rec["variance"] = rel.variance.tolist()  # type: ignore[attr-defined]
        answers[name] = rec
    (HERE / "answers.json").write_text(json.dumps(answers, indent=1) + "\n")


if __name__ == "__main__":
    main()
