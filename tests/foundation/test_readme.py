"""The README's code runs as written (in a temporary directory)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

README = Path(__file__).resolve().parents[2] / "README.md"


def python_blocks() -> list[str]:
    return re.findall(r"```python\n(.*?)```", README.read_text(), flags=re.S)


def test_readme_has_the_two_commands_first() -> None:
    blocks = re.findall(r"```bash\n(.*?)```", README.read_text(), flags=re.S)
    assert "pip install . && python -m fugu demo" in blocks[0]
    assert 'pip install -e ".[test]" && python -m pytest' in blocks[1]
    ci = (README.parent / ".ci" / "run").read_text()
    assert blocks[1].strip() in ci


@pytest.mark.parametrize("block", python_blocks())
def test_readme_python_runs(block: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    exec(compile(block, str(README), "exec"), {})


def test_the_test_command_runs_the_doctests() -> None:
    """Issue 14 item 13: the ``>>>`` examples in src/fugu run with the README's test command."""
    import tomllib

    cfg = tomllib.loads((README.parent / "pyproject.toml").read_text())["tool"]["pytest"]
    opts = cfg["ini_options"]
    assert "--doctest-modules" in opts["addopts"].split()
    assert "-rs" in opts["addopts"].split()  # skipped browser/Java tests show their reason
    assert "src/fugu" in opts["testpaths"] and "tests" in opts["testpaths"]


def shell_lines() -> list[str]:
    """Every line of the README's shell blocks after the two install commands, in order."""
    blocks = re.findall(r"```bash\n(.*?)```", README.read_text(), flags=re.S)
    return [ln for b in blocks[2:] for ln in b.splitlines() if ln.strip()]


def test_readme_shell_lines_run_in_order_in_a_fresh_folder(tmp_path: Path) -> None:
    """Issue 17 item 2: every command runs as written, from an empty folder, in order."""
    import os
    import subprocess
    import sys

    lines = shell_lines()
    assert len(lines) >= 7 and any(ln.startswith("printf ") for ln in lines)
    bindir = str(Path(sys.executable).parent)  # where the 'fugu' entry point is installed
    env = dict(os.environ, PATH=bindir + os.pathsep + os.environ.get("PATH", ""))
    for line in lines:
        proc = subprocess.run(
            ["bash", "-c", line],
            cwd=tmp_path,
            env=env,
            capture_output=True,
            text=True,
            timeout=600,
            check=False,
        )
        assert proc.returncode == 0, f"README line failed: {line}\n{proc.stderr[-2000:]}"
    assert (tmp_path / "adult.npz").exists() and (tmp_path / "people.csv").exists()
    ledger = (tmp_path / "budget.json").read_text()
    assert '"epsilon": 0.5' in ledger  # the release was charged once


def test_readme_demo_command_runs(tmp_path: Path) -> None:
    """The first README command's demo (``--quick``: the same code on a smaller grid)."""
    import subprocess
    import sys

    blocks = re.findall(r"```bash\n(.*?)```", README.read_text(), flags=re.S)
    demo = blocks[0].split("&&", 1)[1].split()
    assert demo == ["python", "-m", "fugu", "demo"]
    proc = subprocess.run(
        [sys.executable, *demo[1:], "--quick", "--seed", "1"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=900,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert (tmp_path / "fugu-report.html").exists()
