"""CLI messages speak the command line's language (issue 17 item 10)."""

from __future__ import annotations

from pathlib import Path

import pytest

from fugu.cli import main


def run(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    code = main(list(args))
    out = capsys.readouterr()
    return code, out.out, out.err


@pytest.fixture(scope="module")
def cube(tmp_path_factory: pytest.TempPathFactory) -> str:
    path = tmp_path_factory.mktemp("cube") / "adult.npz"
    args = ["release", "-a", "age,sex,occupation", "-e", "1", "--seed", "1", "--out", str(path)]
    assert main(args) == 0
    return str(path)


def test_out_of_domain_error_names_the_cli_option(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    data = tmp_path / "p.csv"
    data.write_text("age,sex\n34,F\n151,M\n")
    code, _, err = run(capsys, "release", "--data", str(data), "-a", "age:0..99,sex:F|M", "-e", "1")
    assert code == 2 and "--out-of-domain clip" in err and "--out-of-domain drop" in err
    assert "out_of_domain=" not in err
    code, _, err = run(capsys, "kmeans", "--data", str(data), "-c", "age:0..99", "-e", "1")
    assert code == 2 and "pass --clip" in err and "clip=True" not in err


def test_unknown_category_lists_the_valid_ones(
    cube: str, capsys: pytest.CaptureFixture[str]
) -> None:
    code, _, err = run(capsys, "query", cube, "-w", "occupation=Foo")
    assert code == 2 and "Adm-clerical" in err and "White-collar" in err
    code, _, err = run(capsys, "query", cube, "-w", "sex=male")
    assert code == 2 and "did you mean Male?" in err and "Female, Male" in err
    code, _, err = run(capsys, "query", cube, "-w", "agee=20..29")
    assert code == 2 and "did you mean age?" in err


def test_a_dash_range_suggests_two_dots(cube: str, capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = run(capsys, "query", cube, "-w", "age=20-29")
    assert code == 2 and "age=20..29" in err
    code, _, err = run(capsys, "release", "--data", "x.csv", "-a", "age:20-29", "-e", "1")
    assert code == 2 and "age:20..29" in err
    code, _, err = run(capsys, "sensitivity", "-a", "age", "--policy", "line", "-q", "age=1-9")
    assert code == 2 and "age=1..9" in err


def test_an_interval_leaving_the_domain_is_clipped_with_a_notice(
    cube: str, capsys: pytest.CaptureFixture[str]
) -> None:
    code, clipped, err = run(capsys, "query", cube, "-w", "age=10..29", "--json")
    assert code == 0 and "notice: age=10..29 clipped to the domain: age=17..29" in err
    code, inside, _ = run(capsys, "query", cube, "-w", "age=17..29", "--json")
    assert code == 0 and clipped.replace("17..29", "X") == inside.replace("17..29", "X")
    code, _, err = run(capsys, "query", cube, "-w", "age=95..120")
    assert code == 2 and "names no cell" in err  # entirely outside: refused with the reason
