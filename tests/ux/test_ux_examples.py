"""Every script in examples/ runs to completion from a fresh directory and writes its outputs."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = sorted((ROOT / "examples").glob("*.py"))

# Files each example must leave behind (the rest of its contract is exit code 0).
OUTPUTS = {
    "central_cube.py": ["adult-cube.npz", "adult-cube-report.html"],
    "graph_triangles.py": ["karate-2stars.npz"],
    "ldp_app.py": ["reports.jsonl", "ldp-release.npz"],
    "release_report.py": ["releases.html", "releases-with-truth.html"],
}


def test_every_example_is_listed() -> None:
    assert len(EXAMPLES) >= 5
    readme = (ROOT / "examples" / "README.md").read_text()
    for ex in EXAMPLES:
        assert ex.name in readme, f"{ex.name} is not described in examples/README.md"


@pytest.mark.parametrize("script", EXAMPLES, ids=[p.name for p in EXAMPLES])
def test_example_runs(script: Path, tmp_path: Path) -> None:
    env = dict(os.environ, MPLBACKEND="Agg", PYTHONPATH=str(ROOT / "src"))
    proc = subprocess.run(
        [sys.executable, str(script)],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert proc.returncode == 0, (
        f"{script.name} failed:\n{proc.stdout[-2000:]}\n{proc.stderr[-4000:]}"
    )
    assert proc.stdout.strip(), f"{script.name} printed nothing"
    for name in OUTPUTS.get(script.name, []):
        assert (tmp_path / name).exists(), f"{script.name} did not write {name}"
