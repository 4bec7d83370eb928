"""Error prediction before spending budget, the recommendation, and the CLI."""

from __future__ import annotations

import json

import numpy as np
import pytest
from click.testing import CliRunner

import fugu
from fugu.central import predict_errors, recommend
from fugu.cli import cli, main
from fugu.datasets import adult_domain, adult_histogram
from fugu.errors import InvalidParameterError
from fugu.queries import random_workload


def test_predictions_match_measured_errors() -> None:
    """Predicted RMSE (no data) vs measured RMSE over 30 releases: within 15% for every
    mechanism (relative SD of each measured MSE < 5%: a false failure needs > 3 SD)."""
    dom = fugu.Domain([fugu.Ordinal("x", 0, 1023), fugu.Ordinal("y", 0, 15)])
    counts = np.random.default_rng(0).poisson(3, size=dom.shape)
    hist = fugu.Histogram(counts, dom)
    w = random_workload(dom, 1000, n_predicates=(1, 2), seed=1)
    truth = w.answer(counts, dom)
    pred = {k: float(np.sqrt(v.mean())) for k, v in predict_errors(dom, w, 1.0).items()}
    runs = {
        "laplace": lambda s: fugu.central.laplace(hist, 1.0, rng=fugu.RandomSource(seed=s)),
        "hierarchical": lambda s: fugu.central.hierarchical(
            hist, 1.0, rng=fugu.RandomSource(seed=s)
        ),
        "privelet": lambda s: fugu.central.privelet(
            hist, 1.0, plain=None, rng=fugu.RandomSource(seed=s)
        ),
    }
    for name, run in runs.items():
        mse = np.mean([np.mean((run(s).answer_many(w) - truth) ** 2) for s in range(30)])
        assert np.sqrt(mse) == pytest.approx(pred[name], rel=0.15), name


def test_laplace_prediction_equals_release_expected_error() -> None:
    dom = adult_domain(["age", "sex"])
    w = random_workload(dom, 20, seed=0)
    var = predict_errors(dom, w, 0.7, mechanisms=["laplace"])["laplace"]
    rel = fugu.central.laplace(adult_histogram(["age", "sex"]), 0.7, rng=fugu.RandomSource(seed=0))
    for q, v in zip(w, var, strict=True):
        assert rel.expected_error(q) == pytest.approx(np.sqrt(v))


def test_recommendation_follows_the_domain() -> None:
    small = fugu.Domain([fugu.Ordinal("x", 0, 7)])
    w_small = random_workload(small, 100, seed=0)
    # add/remove: on 8 cells the best plan is no tree at all, i.e. Laplace itself
    ar = recommend(small, w_small, 1.0, neighbours="add-remove")
    assert ar.rmse["hierarchical"] == pytest.approx(ar.rmse["laplace"])
    assert ar.options["hierarchical"]["branching"] == [8]
    assert ar.rmse["privelet"] > ar.rmse["laplace"]
    # replace-one: the same cells plus the public total, strictly better than Laplace
    rep = recommend(small, w_small, 1.0)
    assert rep.best == "hierarchical" and rep.rmse["hierarchical"] < rep.rmse["laplace"]
    big = fugu.Domain([fugu.Ordinal("x", 0, 65535)])
    rec = recommend(big, random_workload(big, 300, seed=0), 1.0)
    assert rec.best == "hierarchical" and rec.rmse["laplace"] > 5 * rec.rmse["hierarchical"]
    assert rec.options["hierarchical"]["level_shares"][0][0] == 0.0
    with pytest.raises(InvalidParameterError, match="unknown mechanism"):
        predict_errors(big, random_workload(big, 3, seed=0), 1.0, mechanisms=["magic"])
    with pytest.raises(InvalidParameterError, match="epsilon"):
        recommend(big, random_workload(big, 3, seed=0), -1.0)


def test_cli_release_and_recommend(tmp_path, capsys) -> None:  # type: ignore[no-untyped-def]
    runner = CliRunner()
    res = runner.invoke(cli, ["release", "--list"])
    assert res.exit_code == 0
    for name in ("hierarchical", "privelet", "privelet+"):
        assert name in res.output
    out = tmp_path / "h.npz"
    res = runner.invoke(
        cli,
        [
            "release",
            "-m",
            "hierarchical",
            "-e",
            "1",
            "-a",
            "age,sex",
            "--branching",
            "4",
            "-o",
            "budget=geometric",
            "--seed",
            "1",
            "--out",
            str(out),
        ],
    )
    assert res.exit_code == 0, res.output
    rel = fugu.Release.load(out)
    assert rel.guarantee.parameters["branching"] == [4, 4]
    res = runner.invoke(
        cli,
        ["release", "-m", "hierarchical", "-e", "1", "-a", "age,sex,occupation",
         "-o", "flat=sex,occupation", "-o", "consistency=false", "--seed", "1", "--out", str(out)],
    )  # fmt: skip
    assert res.exit_code == 0, res.output
    params = fugu.Release.load(out).guarantee.parameters
    assert params["flat"] == ["sex", "occupation"] and params["height"][1:] == [0, 0]
    res = runner.invoke(
        cli,
        [
            "release",
            "-m",
            "privelet+",
            "-e",
            "1",
            "-a",
            "age,sex,occupation",
            "--plain",
            "age,sex",
            "--seed",
            "1",
            "--out",
            str(tmp_path / "p.npz"),
        ],
    )
    assert res.exit_code == 0, res.output
    assert fugu.Release.load(tmp_path / "p.npz").guarantee.parameters["plain"] == ["age", "sex"]
    code = main(["release", "-m", "hierarchical", "-e", "1", "-a", "age", "--branching", "1"])
    err = capsys.readouterr().err
    assert code != 0 and "branching must be an integer >= 2" in err and "Traceback" not in err
    code = main(["release", "-m", "privelet+", "-e", "1", "-a", "age", "--plain", "sex"])
    assert code != 0 and "unknown attribute 'sex'" in capsys.readouterr().err
    res = runner.invoke(
        cli, ["recommend", "-e", "1", "-a", "age,occupation", "-w", "random:200:1-2", "--json"]
    )
    assert res.exit_code == 0, res.output
    data = json.loads(res.output)
    assert data["best"] in data["rmse"] and data["n_queries"] == 200
    qfile = tmp_path / "w.json"
    qfile.write_text(json.dumps([{"age": [20, 29]}, {"age": [30, 60], "occupation": "Sales"}]))
    res = runner.invoke(cli, ["recommend", "-e", "0.5", "-a", "age,occupation", "-w", str(qfile)])
    assert res.exit_code == 0 and "recommended:" in res.output
    code = main(["recommend", "-e", "0.5", "-a", "age", "-w", "nonsense"])
    assert code != 0 and "--workload" in capsys.readouterr().err


def test_recommend_predicts_the_hat_tree_on_one_attribute() -> None:
    """1-D: the hat tree is predicted (planned for the workload, as hat_tree(workload=) is) and
    its prediction is the release's own expected error; cubes and huge domains leave it out."""
    dom = fugu.Domain([fugu.Ordinal("x", 0, 1023)])
    w = random_workload(dom, 300, seed=2)
    rec = recommend(dom, w, 1.0, neighbours="add-remove")
    assert rec.best == "hat-tree"
    assert rec.rmse["hat-tree"] < 0.95 * rec.rmse["hierarchical"]
    hist = fugu.Histogram(np.ones(dom.shape, dtype=np.int64), dom)
    rel = fugu.central.hat_tree(
        hist, 1.0, workload=w, neighbours="add-remove", rng=fugu.RandomSource(seed=0)
    )
    own = float(np.sqrt(np.mean(rel.expected_variance_many(w.bounds(dom)))))
    assert own == pytest.approx(rec.rmse["hat-tree"], rel=1e-9)
    cube = fugu.Domain([fugu.Ordinal("x", 0, 15), fugu.Ordinal("y", 0, 15)])
    assert "hat-tree" not in recommend(cube, random_workload(cube, 20, seed=0), 1.0).rmse
    big = fugu.Domain([fugu.Ordinal("x", 0, 65535)])
    assert "hat-tree" not in predict_errors(big, random_workload(big, 5, seed=0), 1.0)


def test_cli_release_hat_tree(tmp_path) -> None:  # type: ignore[no-untyped-def]
    runner = CliRunner()
    out = tmp_path / "hat.npz"
    res = runner.invoke(
        cli,
        ["release", "-m", "hat-tree", "-e", "1", "-a", "age", "-o", "strategy=hats",
         "-o", "fanout=8", "--seed", "1", "--out", str(out)],
    )  # fmt: skip
    assert res.exit_code == 0, res.output
    params = fugu.Release.load(out).guarantee.parameters
    assert params["fanout"] == 8 and params["strategy"]["used"] == "hats"
    res = runner.invoke(
        cli, ["release", "-m", "hat-tree", "-e", "1", "-a", "age", "-o", "fanout=x"]
    )
    assert res.exit_code != 0 and "fanout must be an integer" in str(res.exception)
    res = runner.invoke(cli, ["release", "-m", "hat-tree", "-e", "1", "-a", "age,sex"])
    assert res.exit_code != 0 and "hierarchical for cubes" in str(res.exception)


@pytest.mark.parametrize("neighbours", ["replace", "add-remove"])
def test_total_query_only_workload_gets_a_table(neighbours: str) -> None:
    """A workload of the total query only: under replace-one n is public, so the trees and
    Privelet answer it exactly (RMSE 0) and table() divided Laplace's RMSE by 0
    (ZeroDivisionError, also in 'fugu recommend'). The exact mechanisms are inf times better."""
    dom = fugu.Domain([fugu.Ordinal("x", 0, 15)])
    rec = recommend(dom, [fugu.RangeQuery({})], 1.0, neighbours=neighbours)
    rows = rec.table()
    assert [r[0] for r in rows][0] == rec.best
    ratio = {r[0]: r[2] for r in rows}
    assert ratio["laplace"] == 1.0
    for name, r in rec.rmse.items():
        if r == 0.0:
            assert ratio[name] == float("inf")
        else:
            assert ratio[name] == pytest.approx(rec.rmse["laplace"] / r)
    if neighbours == "replace":
        assert rec.rmse["hierarchical"] == 0.0 and rec.rmse[rec.best] == 0.0
