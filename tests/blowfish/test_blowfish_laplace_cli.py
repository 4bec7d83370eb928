"""Blowfish Laplace releases, composition checks, isotonic inference and the command line."""

from __future__ import annotations

import json

import numpy as np
import pytest
from click.testing import CliRunner
from hypothesis import given, settings
from hypothesis import strategies as st

import fugu
from fugu.blowfish import (
    Coarsening,
    CountConstraint,
    LinearRelease,
    MarginalConstraint,
    Policy,
    blowfish_budget,
    charge_parallel,
    check_parallel,
    laplace,
)
from fugu.errors import PolicyError
from fugu.inference.isotonic import isotonic_regression, minmax_isotonic, monotone_cumulative


def h2d() -> fugu.Histogram:
    dom = fugu.Domain([fugu.Ordinal("x", 0, 9), fugu.Ordinal("y", 0, 3)])
    return fugu.Histogram(np.random.default_rng(0).poisson(4, (10, 4)), dom)


def test_partition_coarsening_is_exact_and_says_so() -> None:
    h = h2d()
    pol = Policy.partition(h.domain, {"x": 5})
    rel = laplace(h, 1.0, pol, query="blocks", rng=fugu.RandomSource(seed=1))
    assert isinstance(rel, LinearRelease)
    truth = np.bincount(pol.block_ids(), weights=h.counts.reshape(-1))
    assert np.array_equal(rel.values, truth) and np.all(rel.variance == 0)
    assert rel.guarantee.sensitivity == 0 and "without noise" in rel.guarantee.parameters["exact"]
    coarser = laplace(h, 1.0, pol, query=Coarsening({"x": 10}), rng=fugu.RandomSource(seed=1))
    assert coarser.values.tolist() == [h.total()]


def test_histogram_release_noise_and_error() -> None:
    h = h2d()
    pol = Policy.attribute(h.domain)
    rel = laplace(h, 1.0, pol, rng=fugu.RandomSource(seed=2))
    assert isinstance(rel, fugu.CubeRelease) and rel.guarantee.model == "blowfish"
    p = np.exp(-0.5)
    assert rel.expected_error({"x": (0, 0), "y": (0, 0)}) ** 2 == pytest.approx(
        2 * p / (1 - p) ** 2, rel=1e-3
    )
    errs = np.concatenate(
        [
            laplace(h, 1.0, pol, rng=fugu.RandomSource(seed=s)).counts.reshape(-1)
            - h.counts.reshape(-1)
            for s in range(50)
        ]
    )
    assert errs.var() == pytest.approx(2 * p / (1 - p) ** 2, rel=0.1)


def test_linear_queries_integer_and_real(tmp_path: object) -> None:
    h = h2d()
    pol = Policy.distance_threshold(h.domain, 2)
    w = fugu.random_workload(h.domain, 20, seed=4)
    rel = laplace(h, 1.0, pol, query=w, rng=fugu.RandomSource(seed=3))
    assert rel.values.shape == (20,) and rel.guarantee.sensitivity == fugu.blowfish.sensitivity(
        w, pol
    )
    real = laplace(
        h,
        1.0,
        pol,
        query=np.linspace(0, 0.37, 2 * h.domain.size).reshape(2, -1),
        rng=fugu.RandomSource(seed=3),
    )
    assert real.values.shape == (2,) and np.all(real.variance > 0)
    back = fugu.Release.load(rel.save(str(tmp_path) + "/lin.npz"))  # type: ignore[operator]
    assert isinstance(back, LinearRelease) and np.array_equal(back.values, rel.values)


def test_laplace_with_constraints_uses_the_policy_graph() -> None:
    h = h2d()
    pol = Policy.attribute(h.domain).with_constraints(MarginalConstraint(["y"]))
    rel = laplace(h, 1.0, pol, rng=fugu.RandomSource(seed=5))
    assert rel.guarantee.sensitivity == 8  # 2·size(C) = 2·4
    with pytest.raises(PolicyError, match="defined on"):
        laplace(h, 1.0, Policy.line(fugu.Domain([fugu.Ordinal("x", 0, 3)])))


def test_parallel_composition_conditions() -> None:
    dom = fugu.Domain([fugu.Ordinal("x", 0, 9)])
    halves = [0] * 5 + [1] * 5
    pol = Policy.partition(dom, {"x": 5})
    assert "no secret edge" in check_parallel(pol, halves)
    with pytest.raises(PolicyError, match="joins two parts"):
        check_parallel(Policy.line(dom), halves)
    with pytest.raises(PolicyError, match="constraint"):
        check_parallel(pol.with_constraints(CountConstraint({"x": (3, 6)})), halves)
    assert check_parallel(Policy.line(dom)).startswith("disjoint sets of individuals")
    # a constraint on a union of components has no critical pair: still fine
    assert check_parallel(pol.with_constraints(CountConstraint({"x": (0, 4)})))
    with pytest.raises(PolicyError, match="critical|changed by a secret move"):
        check_parallel(Policy.line(dom).with_constraints(CountConstraint({"x": (0, 4)})))
    acct = fugu.Accountant(blowfish_budget(1.0, pol))
    charge_parallel(acct, pol, [0.5, 0.5], ["left", "right"], parts=halves)
    assert acct.remaining == pytest.approx(0.5)
    with pytest.raises(fugu.InvalidParameterError):
        charge_parallel(acct, Policy.full(dom), [0.1], ["x"], parts=[0] * 10)


@settings(max_examples=100, deadline=None)
@given(st.lists(st.floats(-50, 50), min_size=1, max_size=25), st.data())
def test_pava_equals_min_max_formula(y: list[float], data: st.DataObject) -> None:
    w = data.draw(st.lists(st.floats(0.1, 5), min_size=len(y), max_size=len(y)))
    fit = isotonic_regression(y, w)
    assert np.allclose(fit, minmax_isotonic(y, w), atol=1e-6)
    assert np.all(np.diff(fit) >= -1e-9)


def test_monotone_cumulative_box() -> None:
    c = monotone_cumulative([-3.0, 5.0, 4.0, 12.0, 9.0], total=10.0)
    assert c[0] == 0 and c[-1] == 10 and np.all(np.diff(c) >= 0) and c.max() <= 10


def run_cli(args: list[str]) -> tuple[int, str]:
    from fugu.cli import _load_models, cli

    _load_models()
    res = CliRunner().invoke(cli, args, catch_exceptions=True)
    return res.exit_code, res.stdout


def test_cli_release_and_sensitivity(tmp_path: object) -> None:
    out = str(tmp_path) + "/o.npz"  # type: ignore[operator]
    code, text = run_cli(
        [
            "release",
            "-a",
            "age",
            "-m",
            "ordered",
            "--policy",
            "line",
            "-e",
            "1",
            "--seed",
            "1",
            "--out",
            out,
        ]
    )
    assert code == 0, text
    code, text = run_cli(["query", out, "-w", "age=20..29", "--json"])
    assert code == 0 and json.loads(text)["expected_error"] > 0
    for mech, pol in [
        ("ordered-hierarchical", "distance:theta=10"),
        ("blowfish-laplace", "partition:age=10"),
    ]:
        code, text = run_cli(
            [
                "release",
                "-a",
                "age",
                "-m",
                mech,
                "--policy",
                pol,
                "-e",
                "1",
                "--seed",
                "2",
                "--json",
            ]
        )
        assert code == 0, text
        assert json.loads(text)["guarantee"]["model"] == "blowfish"
    code, text = run_cli(
        [
            "sensitivity",
            "-a",
            "age",
            "-p",
            "line",
            "-p",
            "distance:theta=5",
            "-q",
            "cumulative",
            "--json",
        ]
    )
    assert code == 0, text
    assert [r["sensitivity"] for r in json.loads(text)] == [1.0, 5.0]
    code, text = run_cli(
        [
            "sensitivity",
            "--data",
            "x.csv",
            "-a",
            "a:0..2,b:0..1",
            "-p",
            "full",
            "-c",
            "marginal:a",
            "--brute-force",
            "3",
            "--json",
        ]
    )
    assert code == 0, text
    rec = json.loads(text)[0]
    assert rec["sensitivity"] == 6 and rec["brute_force"] == 6


def test_cli_errors_are_one_line() -> None:
    from fugu.cli import main

    assert main(["release", "-a", "age", "-m", "ordered", "-e", "1"]) == 2
    assert (
        main(["release", "-a", "age", "-m", "ordered", "--policy", "distance:theta=0.5", "-e", "1"])
        == 2
    )
    assert main(["sensitivity", "-a", "age", "-p", "partition:nope=3"]) == 2
