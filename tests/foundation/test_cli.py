"""The fugu command end to end on the bundled Adult data."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from fugu.cli import main


def run(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    code = main(list(args))
    out, err = capsys.readouterr()
    return code, out, err


def test_release_query_info(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out_file = tmp_path / "adult.npz"
    code, out, _ = run(
        capsys,
        "release",
        "--data",
        "adult",
        "--attributes",
        "age,sex,occupation",
        "--mechanism",
        "laplace",
        "--epsilon",
        "1",
        "--seed",
        "1",
        "--out",
        str(out_file),
        "--json",
    )
    assert code == 0
    meta = json.loads(out)
    assert meta["guarantee"]["mechanism"] == "laplace" and meta["guarantee"]["private"] is False
    code, out, _ = run(
        capsys,
        "query",
        str(out_file),
        "--where",
        "age=20..29",
        "--where",
        "occupation=White-collar",
        "--json",
    )
    assert code == 0
    ans = json.loads(out)
    assert ans["expected_error"] > 0 and 4000 < ans["answer"] < 7000  # true count is 5,394
    code, out, _ = run(capsys, "info", str(out_file))
    assert code == 0 and "epsilon = 1" in out and "age ordinal[74]" in out


def test_demo_writes_report(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    report = tmp_path / "r.html"
    code, out, _ = run(
        capsys, "demo", "--quick", "--models", "central", "--seed", "3", "--report", str(report)
    )
    assert code == 0
    assert "laplace" in out and "report:" in out
    html = report.read_text()
    assert html.startswith("<!doctype html>") and "data:image/png;base64," in html


def test_ledger_refuses_overspending(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    ledger = tmp_path / "budget.json"
    assert run(capsys, "ledger", "init", str(ledger), "--total", "1.0")[0] == 0
    args = ["release", "--attributes", "age", "--epsilon", "0.6", "--ledger", str(ledger)]
    assert run(capsys, *args)[0] == 0
    code, _, err = run(capsys, *args)
    assert code == 2 and "only 0.4 of 1 remains" in err


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["release", "--attributes", "age", "--epsilon", "-1"], "epsilon must be > 0"),
        (
            ["release", "--attributes", "agee", "--epsilon", "1"],
            "Adult has no declared domain for 'agee'",
        ),
        (
            ["release", "--attributes", "age", "--epsilon", "1", "--mechanism", "nope"],
            "unknown mechanism",
        ),
        (["query", "missing.npz", "--where", "age=1..2"], "does not exist"),
    ],
)
def test_errors_are_one_line(
    args: list[str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    code, _, err = run(capsys, *args)
    assert code != 0 and message in err
    assert "Traceback" not in err


def test_file_input_needs_a_declared_domain(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    csv = tmp_path / "x.csv"
    csv.write_text("age,sex\n20,F\n30,M\n")
    code, _, err = run(
        capsys, "release", "--data", str(csv), "--attributes", "age", "--epsilon", "1"
    )
    assert code == 2 and "never infers a domain" in err
    code, out, _ = run(
        capsys,
        "release",
        "--data",
        str(csv),
        "--attributes",
        "age:0..99,sex:F|M",
        "--epsilon",
        "1",
        "--json",
    )
    assert code == 0 and json.loads(out)["domain"] == {"age": "ordinal[100]", "sex": "nominal[2]"}


def test_console_script_and_debug_flag() -> None:
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "fugu",
            "--debug",
            "release",
            "--attributes",
            "age",
            "--epsilon",
            "0",
        ],
        capture_output=True,
        text=True,
    )
    assert proc.returncode != 0 and "Traceback" in proc.stderr
    proc = subprocess.run([sys.executable, "-m", "fugu", "--help"], capture_output=True, text=True)
    assert proc.returncode == 0 and "release" in proc.stdout and "demo" in proc.stdout


def test_ledger_ties_blowfish_releases_to_one_policy(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    ledger = tmp_path / "bf.json"
    assert (
        run(
            capsys,
            "ledger",
            "init",
            str(ledger),
            "--total",
            "1",
            "--model",
            "blowfish",
            "--policy",
            "line",
        )[0]
        == 0
    )
    base = [
        "release",
        "--attributes",
        "age",
        "--mechanism",
        "ordered",
        "--epsilon",
        "0.3",
        "--ledger",
        str(ledger),
    ]
    assert run(capsys, *base, "--policy", "line")[0] == 0
    code, _, err = run(capsys, *base, "--policy", "distance:theta=2")
    assert code == 2 and "compose only under a common policy" in err
    code, _, err = run(
        capsys, "release", "--attributes", "age", "--epsilon", "0.1", "--ledger", str(ledger)
    )
    assert code == 2 and "cannot be charged" in err


@pytest.mark.parametrize("strategy", ["trees", "kronecker"])
def test_hierarchical_strategy_option(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], strategy: str
) -> None:
    """``-o strategy=`` reaches fugu.central.hierarchical (it was refused as an unknown option)."""
    code, out, _ = run(
        capsys,
        "release",
        "--data",
        "adult",
        "--attributes",
        "age,hours_per_week",
        "--mechanism",
        "hierarchical",
        "-o",
        f"strategy={strategy}",
        "--epsilon",
        "1",
        "--seed",
        "1",
        "--out",
        str(tmp_path / "h.npz"),
        "--json",
    )
    assert code == 0
    structure = json.loads(out)["guarantee"]["parameters"]["structure"]
    assert strategy[:4] in json.dumps(structure).lower()
