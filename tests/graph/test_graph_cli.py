"""``fugu graph count`` end to end (small graphs)."""

from __future__ import annotations

import json

from fugu.cli import main


def test_cli_count_karate_json(capsys, tmp_path) -> None:
    out = tmp_path / "rel.npz"
    rc = main(
        [
            "graph",
            "count",
            "--graph",
            "karate",
            "--pattern",
            "triangle",
            "--unit",
            "node",
            "--epsilon",
            "0.5",
            "--seed",
            "3",
            "--json",
            "--out",
            str(out),
        ]
    )
    assert rc == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["kind"] == "graph-count" and doc["guarantee"]["model"] == "node-dp"
    assert out.exists()
    assert main(["info", str(out)]) == 0


def test_cli_edges_file_progress_and_errors(capsys, tmp_path, monkeypatch) -> None:
    monkeypatch.setattr("fugu.cli._common.is_tty", lambda: True)  # progress: terminals only
    p = tmp_path / "g.txt"
    p.write_text("# SNAP\n0\t1\n1\t2\n0\t2\n2\t3\n3\t3\n")
    assert main(["graph", "count", "--edges", str(p), "--epsilon", "1", "--seed", "1"]) == 2
    assert "self-loop" in capsys.readouterr().err
    rc = main(
        [
            "graph",
            "count",
            "--edges",
            str(p),
            "--drop-self-loops",
            "--unit",
            "edge",
            "--pattern",
            "2-star",
            "--epsilon",
            "1",
            "--seed",
            "1",
        ]
    )
    captured = capsys.readouterr()
    assert (
        rc == 0 and "2-star count" in captured.out and "edge differential privacy" in captured.out
    )
    assert "LP" in captured.err  # progress display on stderr
    assert main(["graph", "count", "--graph", "karate", "--epsilon", "-1"]) == 2
    assert main(["graph", "count", "--epsilon", "1"]) != 0  # neither --edges nor --graph
    rc = main(
        [
            "graph",
            "count",
            "--graph",
            "karate",
            "--mechanism",
            "laplace",
            "--unit",
            "edge",
            "--epsilon",
            "1",
            "--seed",
            "0",
        ]
    )
    assert rc == 0 and "global sensitivity" in capsys.readouterr().out


def test_cli_smooth_baseline_and_solver_choice(capsys) -> None:
    base = ["graph", "count", "--graph", "karate", "--epsilon", "0.5", "--seed", "1", "--json"]
    rc = main([*base, "--pattern", "triangle", "--unit", "edge", "--mechanism", "smooth"])
    assert rc == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["guarantee"]["model"] == "edge-dp"
    assert "smooth" in doc["guarantee"]["mechanism"].lower()
    # the smooth baseline only counts triangles under edge privacy: a clear refusal otherwise
    rc = main([*base, "--pattern", "2-star", "--unit", "edge", "--mechanism", "smooth"])
    assert rc != 0
    assert "--pattern triangle --unit edge" in capsys.readouterr().err
    # the alias "Triangles" names the same pattern (it was refused: the check compared strings)
    rc = main([*base, "--pattern", "Triangles", "--unit", "edge", "--mechanism", "smooth"])
    assert rc == 0 and "smooth" in json.loads(capsys.readouterr().out)["guarantee"]["mechanism"]
    # both LP solvers release under the same guarantee (seeded: same noise draws)
    vals = []
    for solver in ("clarabel", "highs-ipm"):
        assert main([*base, "--pattern", "triangle", "--solver", solver]) == 0
        vals.append(json.loads(capsys.readouterr().out)["value"])
    assert abs(vals[0] - vals[1]) < 1.0


def test_cli_karwa_delta_needs_a_delta_ledger(capsys, tmp_path) -> None:  # type: ignore[no-untyped-def]
    pure, with_delta = tmp_path / "pure.json", tmp_path / "delta.json"
    assert main(["ledger", "init", str(pure), "--total", "2", "--model", "edge-dp"]) == 0
    init = ["ledger", "init", str(with_delta), "--total", "2", "--model", "edge-dp"]
    assert main([*init, "--delta", "1e-5"]) == 0
    count = ["graph", "count", "--graph", "karate", "--pattern", "2-triangle", "--unit", "edge"]
    count += ["--epsilon", "0.5", "--mechanism", "karwa", "--delta", "1e-6", "--seed", "1"]
    capsys.readouterr()
    assert main([*count, "--ledger", str(pure)]) != 0
    assert "δ total" in capsys.readouterr().err
    assert json.loads(pure.read_text())["ledger"] == []  # nothing spent
    assert main([*count, "--ledger", str(with_delta)]) == 0
    assert "delta = 1e-06" in capsys.readouterr().out
    entry = json.loads(with_delta.read_text())["ledger"][0]
    assert entry["delta"] == 1e-6 and entry["epsilon"] == 0.5
    # --delta is refused where it would be ignored
    assert main(["graph", "count", "--graph", "karate", "-e", "1", "--delta", "0.1"]) != 0


def test_graph_count_file_with_two_values_is_refused(tmp_path) -> None:  # type: ignore[no-untyped-def]
    import networkx as nx
    import numpy as np
    import pytest

    import fugu

    rel = fugu.graph.laplace_count(
        nx.karate_club_graph(), "triangle", 1.0, unit="edge", rng=fugu.RandomSource(seed=1)
    )
    path = rel.save(tmp_path / "c.npz")
    with np.load(path) as z:
        payload = {k: z[k] for k in z.files}
    payload["a_value"] = np.array([1.0, 2.0])
    np.savez_compressed(path, **payload)
    with pytest.raises(fugu.errors.FileFormatError, match="one value"):
        fugu.Release.load(path)


def test_cli_g_factor_reaches_the_guarantee_and_is_refused_elsewhere(capsys) -> None:
    base = ["graph", "count", "--graph", "karate", "--unit", "edge", "-e", "0.5", "--seed", "1"]
    assert main([*base, "--g-factor", "1", "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["guarantee"]["parameters"]["g_factor"] == 1.0
    assert main([*base, "--mechanism", "laplace", "--g-factor", "1"]) != 0
    assert "--g-factor" in capsys.readouterr().err
    assert main([*base, "--g-factor", "0"]) != 0
    assert "g_factor" in capsys.readouterr().err
