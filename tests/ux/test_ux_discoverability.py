"""Discoverability, progress and defaults (issue 17 items 6, 7, 9: the parts in fugu's surface)."""

from __future__ import annotations

import json

import pytest

import fugu
from fugu.cli import main


def test_dir_fugu_lists_every_model_package() -> None:
    names = dir(fugu)
    for pkg in ("central", "blowfish", "graph", "ldp", "datasets", "engines", "testing"):
        assert pkg in names, pkg
        assert getattr(fugu, pkg).__name__ == f"fugu.{pkg}"


def test_reprs_of_the_surface_are_one_short_line() -> None:
    from fugu.cli import _load_models
    from fugu.cli._common import MECHANISMS
    from fugu.demo import DemoResult
    from fugu.report import Report, matplotlib_agg

    plt = matplotlib_agg()
    rep = Report("r")
    fig, ax = plt.subplots()
    ax.plot([1, 2])
    rep.add_figure("a figure", fig)
    rep.add_table("t", ["a"], [[1]] * 500)
    _load_models()
    res = DemoResult(epsilon=1.0, n_records=10, domain="d", rows=[{"x": 1}] * 1000)
    for obj in (rep, res, MECHANISMS["hierarchical"]):
        r = repr(obj)
        assert "\n" not in r and len(r) < 200, r


def test_release_list_fits_100_columns(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["release", "--list"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert len(lines) > 5
    assert max(len(ln) for ln in lines) <= 100, max(lines, key=len)


def test_demo_says_what_it_does_per_model(capsys: pytest.CaptureFixture[str]) -> None:
    args = ["demo", "--quick", "--models", "central", "--no-report", "--seed", "1", "-e", "1"]
    assert main(args) == 0
    err = capsys.readouterr().err
    assert "[1/1] central DP: the Adult cube" in err and "[1/1] central done in" in err
    assert main([*args, "--quiet"]) == 0
    assert "central" not in capsys.readouterr().err


def test_ldp_simulate_runs_hdg_and_tdg_by_default(capsys: pytest.CaptureFixture[str]) -> None:
    args = ["ldp", "simulate", "--n", "3000", "--d", "3", "--c", "16", "--queries", "5"]
    assert main([*args, "--seed", "1", "--json"]) == 0
    methods = json.loads(capsys.readouterr().out)["methods"]
    assert {"hdg", "tdg"} <= set(methods)


def test_graph_count_nonnegative_is_recorded(capsys: pytest.CaptureFixture[str]) -> None:
    # karate has 78 edges; at epsilon 0.01 (noise scale 100) about a quarter of the estimates
    # are negative without the clamp: over 8 seeds none may be negative with it.
    args = ["graph", "count", "--graph", "karate", "--pattern", "edge", "--unit", "edge",
            "--mechanism", "laplace", "-e", "0.01", "--json", "--nonnegative"]  # fmt: skip
    values = []
    for seed in range(8):
        assert main([*args, "--seed", str(seed)]) == 0
        doc = json.loads(capsys.readouterr().out)
        assert "clamped at 0" in " ".join(doc["guarantee"]["post_processing"])
        values.append(doc["value"])
    assert min(values) >= 0 and len(values) == 8
