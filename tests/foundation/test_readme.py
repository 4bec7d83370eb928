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
    assert "src/fugu" in opts["testpaths"] and "tests" in opts["testpaths"]
