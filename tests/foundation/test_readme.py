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
