"""Follow-ups of review 16: the ``fugu release`` options that were silently ignored or won,
``fugu kmeans --domain`` errors, and the one ε-parts fitting helper."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from fugu.budget import Accountant
from fugu.cli import main


def run(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    code = main(list(args))
    out, err = capsys.readouterr()
    return code, out, err


def _ledger(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> Path:
    led = tmp_path / "l.json"
    assert run(capsys, "ledger", "init", str(led), "--total", "5")[0] == 0
    return led


def _spent(led: Path) -> float:
    return Accountant.load(led).spent


BASE = ("release", "-a", "age", "-e", "1")


@pytest.mark.parametrize(
    ("args", "first", "second"),
    [
        (("-m", "hierarchical", "--branching", "4", "-o", "branching=8"), "--branching 4",
         "-o branching=8"),
        (("-m", "hierarchical", "-o", "branching=4", "-o", "branching=8"), "-o branching=4",
         "-o branching=8"),
        (("-m", "privelet+", "--plain", "age", "-o", "plain=auto"), "--plain age",
         "-o plain=auto"),
        (("-m", "ordered", "--policy", "line", "-o", "policy=attribute"), "--policy line",
         "-o policy=attribute"),
        (("--neighbours", "add-remove", "-o", "neighbours=replace"), "--neighbours add-remove",
         "-o neighbours=replace"),
    ],
)  # fmt: skip
def test_release_refuses_an_option_given_twice(
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    args: tuple[str, ...],
    first: str,
    second: str,
) -> None:
    """``--branching 4 -o branching=8`` released with branching 8, silently."""
    led = _ledger(tmp_path, capsys)
    code, _, err = run(capsys, *BASE, *args, "--ledger", str(led))
    assert code == 2, err
    assert first in err and second in err and "give it once" in err
    assert _spent(led) == 0


@pytest.mark.parametrize(
    "args",
    [
        ("--plain", ","),
        ("--plain", ""),
        ("--plain", "age,"),
        ("--plain", "age,,sex"),
        ("-o", "plain=,"),
    ],
)
def test_release_refuses_empty_plain_names(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], args: tuple[str, ...]
) -> None:
    """``--plain ,`` meant "no plain attribute" (every attribute transformed), silently."""
    led = _ledger(tmp_path, capsys)
    code, _, err = run(capsys, *BASE, "-m", "privelet+", *args, "--ledger", str(led))
    assert code == 2 and "empty attribute name" in err, err
    assert _spent(led) == 0


def test_release_plain_names_still_work(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run(
        capsys, "release", "-a", "age,sex", "-e", "1", "-m", "privelet+", "--plain", "sex",
        "-o", "consistency=false", "--seed", "1",
    )  # fmt: skip
    assert code == 2 and "-o consistency" in err  # privelet+ takes no such option
    code, out, err = run(
        capsys, "release", "-a", "age,sex", "-e", "1", "-m", "privelet+", "--plain", "sex",
        "--seed", "1", "--json",
    )  # fmt: skip
    assert code == 0, err
    assert len(json.loads(out)["cells"]) == 74 * 2


def test_release_refuses_negative_head(capsys: pytest.CaptureFixture[str]) -> None:
    """``--head -1`` printed a table with no rows."""
    code, out, err = run(capsys, *BASE, "--seed", "1", "--head", "-1")
    assert code == 2 and "--head" in err and "-1" in err
    assert "noisy count" not in out


def test_release_refuses_head_with_json(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """``--head 3 --json`` printed all 74 cells."""
    led = _ledger(tmp_path, capsys)
    code, out, err = run(capsys, *BASE, "--head", "3", "--json", "--ledger", str(led))
    assert code == 2 and "--head" in err and "--json" in err and out == ""
    assert _spent(led) == 0
    code, out, err = run(capsys, *BASE, "--seed", "1", "--json")  # the default --head: fine
    assert code == 0 and len(json.loads(out)["cells"]) == 74


def test_release_head_help_mentions_out(capsys: pytest.CaptureFixture[str]) -> None:
    """The help said "Without --out:" although --head works with --out too."""
    code, out, _ = run(capsys, "release", "--help")
    assert code == 0
    text = " ".join(out.split())
    assert "Without --out" not in text and "with --out only when given" in text


# -- fugu kmeans reads --domain and --columns like the other commands ---------------------------
@pytest.fixture
def points(tmp_path: Path) -> Path:
    path = tmp_path / "pts.csv"
    path.write_text("x,y\n1,2\n3,4\n5,6\n7,8\n")
    return path


def test_kmeans_domain_file_errors_name_the_option(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], points: Path
) -> None:
    """A missing or malformed --domain file was a raw '[Errno 2] ...' or JSON decoder message."""
    missing = tmp_path / "nodomain.json"
    code, _, err = run(capsys, "kmeans", "--data", str(points), "--domain", str(missing), "-e", "1")
    assert code == 2 and f"--domain {str(missing)!r} cannot be read" in err, err
    bad = tmp_path / "bad.json"
    bad.write_text("{bad")
    code, _, err = run(capsys, "kmeans", "--data", str(points), "--domain", str(bad), "-e", "1")
    assert code == 2 and "is not valid JSON" in err and "--domain" in err, err
    nokeys = tmp_path / "nokeys.json"
    nokeys.write_text("[]")
    code, _, err = run(capsys, "kmeans", "--data", str(points), "--domain", str(nokeys), "-e", "1")
    assert code == 2 and f"--domain {str(nokeys)!r}" in err and "Traceback" not in err, err


def test_kmeans_column_spec_errors_name_columns(
    capsys: pytest.CaptureFixture[str], points: Path
) -> None:
    """A bad --columns spec was reported as 'attribute spec ...', not as --columns."""
    code, _, err = run(capsys, "kmeans", "--data", str(points), "-c", "x:0-9,y:0..9", "-e", "1")
    assert code == 2 and "--columns 'x:0-9'" in err and "x:0..9" in err, err
    code, _, err = run(capsys, "kmeans", "--data", str(points), "-c", "x,y:0..9", "-e", "1")
    assert code == 2 and "--columns 'x' needs a domain" in err, err


# -- one copy of the ε-parts fitting, below the mechanisms -------------------------------------
def test_fit_epsilon_parts_is_the_one_copy() -> None:
    """``graph.recursive.fit_parts`` and ``blowfish._eps.fit_shares`` were two copies of one
    rule; both names now are :func:`fugu.budget.fit_epsilon_parts`."""
    from fractions import Fraction

    from fugu.blowfish import _eps
    from fugu.budget import fit_epsilon_parts
    from fugu.graph import recursive

    assert _eps.fit_shares is fit_epsilon_parts and recursive.fit_parts is fit_epsilon_parts
    for eps, f in [(1.0, 0.1), (0.3, 0.7), (1e-3, 1 / 3), (7.0, 0.5)]:
        parts = fit_epsilon_parts(eps, [eps * f, eps * (1 - f)])
        assert sum(Fraction(p) for p in parts) <= Fraction(eps)
        assert parts[0] <= eps * f and parts[1] <= eps * (1 - f)
    assert fit_epsilon_parts(1.0, [0.0, 1.0]) == [0.0, 1.0]
    a, b = fit_epsilon_parts(1.0, [0.1, 1.0 * (1 - 0.1)])  # 0.1 + 0.9 = 1 + 2.8e-17 before
    assert Fraction(a) + Fraction(b) <= 1 and b < 0.9
