"""The command line keeps its promises (issues 14 item 12, 17 items 3 and 4).

* A misspelt or ignored option is refused, with the valid ones listed, before anything is read
  or spent (the ledger is unchanged, no output file appears).
* Every command that releases takes --ledger; a ledger of another model refuses clearly;
  an overspend is refused.
* A release that is not saved is shown: never spend for nothing.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from fugu.budget import Accountant
from fugu.cli import main


def run(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    code = main(list(args))
    out = capsys.readouterr()
    return code, out.out, out.err


def ledger(tmp_path: Path, capsys: pytest.CaptureFixture[str], total: float, model: str) -> Path:
    path = tmp_path / f"{model}.json"
    assert run(capsys, "ledger", "init", str(path), "--total", str(total), "--model", model)[0] == 0
    return path


def spent(path: Path) -> float:
    return Accountant.load(path).spent


@pytest.fixture
def users(tmp_path: Path) -> Path:
    rng = np.random.default_rng(0)
    p = tmp_path / "users.csv"
    rows = "\n".join(f"{a},{b}" for a, b in rng.integers(0, 100, (2000, 2)))
    p.write_text("age,hours\n" + rows + "\n")
    return p


@pytest.fixture
def points(tmp_path: Path) -> Path:
    rng = np.random.default_rng(1)
    p = tmp_path / "points.csv"
    rows = "\n".join(f"{a},{b}" for a, b in rng.integers(0, 100, (500, 2)))
    p.write_text("x,y\n" + rows + "\n")
    return p


# -- issue 14 item 12: unknown or ignored options --
@pytest.mark.parametrize(
    ("args", "says"),
    [
        (["-m", "hierarchical", "-o", "branchng=4"], "did you mean --branching"),
        (["-m", "hierarchical", "-o", "consistancy=false"], "did you mean -o consistency"),
        (["-m", "laplace", "--policy", "line"], "'laplace' does not take --policy"),
        (["-m", "privelet", "--branching", "4"], "does not take --branching"),
        (["-m", "ordered", "--policy", "line", "-o", "inferense=true"], "-o inference"),
    ],
)
def test_release_refuses_unknown_options_before_spending(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], args: list[str], says: str
) -> None:
    led = ledger(tmp_path, capsys, 5, "blowfish" if "ordered" in args else "central-dp")
    out = tmp_path / "r.npz"
    code, _, err = run(
        capsys, "release", "-a", "age", "-e", "1", "--ledger", str(led), "--out", str(out), *args
    )
    assert code == 2
    assert says in err and "Nothing was read or spent" in err
    assert "options:" in err or "takes no options" in err  # the valid keys are listed
    assert spent(led) == 0 and not out.exists()


def test_release_lists_every_valid_key(capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = run(capsys, "release", "-a", "age", "-e", "1", "-m", "hierarchical", "-o", "x=1")
    assert code == 2
    for key in ("--branching", "-o budget", "-o consistency", "-o nonnegative", "-o flat"):
        assert key in err


def test_ldp_refuses_unknown_method_options(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], users: Path
) -> None:
    led = ledger(tmp_path, capsys, 5, "ldp")
    out = tmp_path / "r.jsonl"
    args = ["--data", str(users), "-a", "age:0..99", "-m", "olh", "-e", "1", "--out", str(out)]
    code, _, err = run(capsys, "ldp", "perturb", *args, "-o", "gg=3", "--ledger", str(led))
    assert code == 2 and "did you mean -o g=" in err
    assert spent(led) == 0 and not out.exists()
    code, _, err = run(
        capsys, "ldp", "simulate", "--n", "500", "--d", "2", "-m", "hio", "-o", "branchng=4"
    )
    assert code == 2 and "-o branching" in err


@pytest.mark.parametrize(
    ("args", "says"),
    [
        (
            ["graph", "count", "--graph", "karate", "-e", "1", "--mechanism", "laplace",
             "--degree-bound", "40", "--beta", "0.1"],
            "--beta has no effect with --mechanism laplace",
        ),
        (
            ["graph", "count", "--graph", "karate", "-e", "1", "--degree-bound", "40"],
            "--degree-bound has no effect with --mechanism recursive",
        ),
        (
            ["graph", "count", "--graph", "karate", "-e", "1", "--mechanism", "smooth",
             "--unit", "edge", "--theta", "2"],
            "--theta has no effect",
        ),
        (["ldp", "simulate", "--n", "500", "--report-epsilons", "1,2"], "without --report"),
        (["release", "-a", "age", "-e", "1", "--engine", "duckdb"], "--engine has no effect"),
        (["release", "--data", "x.csv", "--sql", "SELECT 1", "-a", "a:0..1", "-e", "1"],
         "--data has no effect with --sql"),
        (["graph", "count", "--graph", "karate", "-e", "1", "-k", "3"], "-k has no effect"),
        (["report", "r.npz", "--engine", "duckdb"], "--engine has no effect without --data"),
        (["ledger", "init", "x.json", "--total", "1", "--policy", "line"],
         "--policy has no effect with --model central-dp"),
        (["recommend", "-a", "age", "-e", "1", "-w", "q.json", "--seed", "3"],
         "--seed has no effect with a workload file"),
        (["ldp", "simulate", "--data", "synthetic", "-a", "age:0..9"], "--attributes has no"),
    ],
)  # fmt: skip
def test_ignored_options_are_refused(
    capsys: pytest.CaptureFixture[str], args: list[str], says: str
) -> None:
    code, _, err = run(capsys, *args)
    assert code == 2 and says in err


def test_kmeans_refuses_repetitions_without_report(
    capsys: pytest.CaptureFixture[str], points: Path
) -> None:
    code, _, err = run(
        capsys, "kmeans", "--data", str(points), "-c", "x:0..99,y:0..99", "-e", "1",
        "--repetitions", "3",
    )  # fmt: skip
    assert code == 2 and "--repetitions has no effect without --report" in err


# -- issue 17 item 4: one ledger for every command --
def test_every_releasing_command_charges_its_ledger(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], users: Path, points: Path
) -> None:
    central = ledger(tmp_path, capsys, 1.0, "central-dp")
    node = ledger(tmp_path, capsys, 1.0, "node-dp")
    ldp = ledger(tmp_path, capsys, 1.0, "ldp")
    seed = ["--seed", "1"]
    # fugu release and fugu kmeans share one central-DP ledger: 0.5 + 0.4
    assert run(capsys, "release", "-a", "age", "-e", "0.5", "--ledger", str(central), *seed)[0] == 0
    code, out, _ = run(
        capsys, "kmeans", "--data", str(points), "-c", "x:0..99,y:0..99", "-e", "0.4", "--k", "2",
        "--ledger", str(central), *seed,
    )  # fmt: skip
    assert code == 0 and "spent 0.9 of 1" in out
    assert spent(central) == pytest.approx(0.9)
    # overspending the shared ledger is refused and changes nothing
    code, _, err = run(capsys, "release", "-a", "sex", "-e", "0.2", "--ledger", str(central))
    assert code == 2 and "only 0.1 of 1 remains" in err
    assert spent(central) == pytest.approx(0.9)
    # fugu graph count: node-DP ledger
    code, out, _ = run(
        capsys, "graph", "count", "--graph", "karate", "-e", "0.25", "--ledger", str(node), *seed
    )
    assert code == 0 and spent(node) == pytest.approx(0.25)
    # fugu ldp perturb and aggregate: an LDP ledger
    reports = tmp_path / "r.jsonl"
    code, out, _ = run(
        capsys, "ldp", "perturb", "--data", str(users), "-a", "age:0..99", "-m", "oue", "-e", "0.5",
        "--out", str(reports), "--ledger", str(ldp), *seed,
    )  # fmt: skip
    assert code == 0 and spent(ldp) == pytest.approx(0.5)
    assert run(capsys, "ldp", "aggregate", str(reports), "--ledger", str(ldp))[0] == 0
    assert spent(ldp) == pytest.approx(1.0)
    code, _, err = run(capsys, "ldp", "aggregate", str(reports), "--ledger", str(ldp))
    assert code == 2 and "only 0 of 1 remains" in err


@pytest.mark.parametrize(
    "command",
    [
        ["release", "-a", "age", "-e", "0.1"],
        ["graph", "count", "--graph", "karate", "-e", "0.1"],
        ["kmeans", "-c", "x:0..99,y:0..99", "-e", "0.1"],
        ["ldp", "aggregate"],
    ],
)
def test_a_ledger_of_another_model_refuses(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], command: list[str], points: Path
) -> None:
    other = ledger(tmp_path, capsys, 1.0, "edge-dp")
    if command[0] == "kmeans":
        command = [*command, "--data", str(points)]
    if command[0] == "ldp":
        rep = tmp_path / "r.jsonl"
        assert main(["ldp", "perturb", "--data", str(points), "-a", "x:0..99", "-m", "grr",
                     "-e", "1", "--out", str(rep)]) == 0  # fmt: skip
        command = [*command, str(rep)]
    code, _, err = run(capsys, *command, "--ledger", str(other))
    assert code == 2
    assert "tracks 'edge-dp' budget" in err and "fugu ledger init" in err
    assert spent(other) == 0


# -- issue 17 item 3: never spend for nothing --
def test_release_without_out_prints_the_cells(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    led = ledger(tmp_path, capsys, 1.0, "central-dp")
    code, out, _ = run(
        capsys, "release", "-a", "age,sex", "-e", "0.5", "--seed", "2", "--ledger", str(led)
    )
    assert code == 0
    assert "age" in out and "sex" in out and "noisy count" in out
    assert "20 of 148 cells shown" in out and "17   Female" in out
    code, out, _ = run(capsys, "release", "-a", "sex", "-e", "0.5", "--seed", "2", "--json")
    cells = json.loads(out)["cells"]
    assert [c["sex"] for c in cells] == ["Female", "Male"] and all("count" in c for c in cells)


def test_aggregate_without_out_prints_the_estimates(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], users: Path
) -> None:
    rep = tmp_path / "r.jsonl"
    assert main(["ldp", "perturb", "--data", str(users), "-a", "age:0..99", "-m", "olh", "-e", "1",
                 "--out", str(rep), "--seed", "1"]) == 0  # fmt: skip
    capsys.readouterr()
    code, out, _ = run(capsys, "ldp", "aggregate", str(rep))
    assert code == 0 and "noisy count" in out and "20 of 100 cells shown" in out


def test_concurrent_cli_releases_never_overspend_and_all_are_recorded(tmp_path: Path) -> None:
    """Issue 14 item 5 through the command line: 4 real processes each ask for 0.3 of a ledger
    of 1.0 at once; exactly 3 succeed, the 4th is refused, and the ledger records all 3."""
    import subprocess
    import sys

    led = tmp_path / "l.json"
    assert main(["ledger", "init", str(led), "--total", "1.0"]) == 0
    cmd = [sys.executable, "-m", "fugu", "release", "-a", "sex", "-e", "0.3", "--ledger", str(led)]
    procs = [
        subprocess.Popen(cmd, cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        for _ in range(4)
    ]
    codes = [p.wait(timeout=300) for p in procs]
    errs = [p.stderr.read().decode() if p.stderr else "" for p in procs]
    assert sorted(codes) == [0, 0, 0, 2], errs
    assert any("remains" in e for e in errs)
    acct = Accountant.load(led)
    assert len(acct.ledger) == 3 and acct.spent == pytest.approx(0.9)


def test_a_bad_policy_spends_nothing_on_a_policy_ledger(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The CLI charges a policy-tied Blowfish ledger itself: the policy must be valid first."""
    led = tmp_path / "bf.json"
    init = ["ledger", "init", str(led), "--total", "1", "--model", "blowfish", "--policy", "line"]
    assert main(init) == 0
    args = ["release", "-a", "age,sex", "-m", "blowfish-laplace", "--policy", "line", "-e", "0.5"]
    code, _, err = run(capsys, *args, "--ledger", str(led))
    assert code == 2 and "one-attribute domain" in err
    assert spent(led) == 0


def test_ledger_init_never_wipes_an_existing_ledger(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    led = ledger(tmp_path, capsys, 1.0, "central-dp")
    assert run(capsys, "release", "-a", "sex", "-e", "0.4", "--ledger", str(led))[0] == 0
    code, _, err = run(capsys, "ledger", "init", str(led), "--total", "5")
    assert code == 2 and "already exists" in err
    assert spent(led) == pytest.approx(0.4)
