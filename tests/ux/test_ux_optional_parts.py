"""Optional system parts (Chromium, Java): skipped with the reason when missing, a failure when
CI requires them (``FUGU_REQUIRE_BROWSER`` / ``FUGU_REQUIRE_JAVA`` / ``FUGU_REQUIRE_SYSTEM``).

Each case runs pytest in a subprocess with a PATH that holds neither ``chromium`` nor ``java``,
so it holds on any machine, with or without them installed.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
BROWSER_TESTS = "tests/ux/test_ux_report_browser.py"
SPARK_TEST = "tests/engines/test_engines_cli.py::test_engines_check_runs_on_executors"


def _pytest(target: str, tmp_path: Path, **env: str) -> subprocess.CompletedProcess[str]:
    bare = tmp_path / "bin"  # an empty directory: no chromium, no java
    bare.mkdir(exist_ok=True)
    base = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith("FUGU_REQUIRE") and k not in ("JAVA_HOME", "PYTEST_ADDOPTS")
    }
    return subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-rs", "-p", "no:cacheprovider", target],
        cwd=ROOT,
        env=base | {"PATH": str(bare)} | env,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )


def test_browser_tests_skip_with_reason_without_chromium(tmp_path: Path) -> None:
    proc = _pytest(BROWSER_TESTS, tmp_path)
    assert proc.returncode == 0, proc.stdout[-3000:]
    assert "3 skipped" in proc.stdout
    assert "no headless Chromium" in proc.stdout and "FUGU_REQUIRE_BROWSER=1" in proc.stdout


@pytest.mark.parametrize("var", ["FUGU_REQUIRE_BROWSER", "FUGU_REQUIRE_SYSTEM"])
def test_browser_tests_fail_when_required(tmp_path: Path, var: str) -> None:
    proc = _pytest(BROWSER_TESTS, tmp_path, **{var: "1"})
    assert proc.returncode != 0
    assert "required system part missing: no headless Chromium" in proc.stdout
    assert "skipped" not in proc.stdout


def test_spark_tests_skip_with_reason_without_java(tmp_path: Path) -> None:
    proc = _pytest(SPARK_TEST, tmp_path)
    assert proc.returncode == 0, proc.stdout[-3000:]
    assert "1 skipped" in proc.stdout and "no Java runtime" in proc.stdout


@pytest.mark.parametrize("var", ["FUGU_REQUIRE_JAVA", "FUGU_REQUIRE_SYSTEM"])
def test_spark_tests_fail_when_required(tmp_path: Path, var: str) -> None:
    proc = _pytest(SPARK_TEST, tmp_path, **{var: "1"})
    assert proc.returncode != 0
    assert "required system part missing: no Java runtime" in proc.stdout


def test_ci_requires_every_system_part() -> None:
    ci = (ROOT / ".ci" / "run").read_text()
    assert "export FUGU_REQUIRE_SYSTEM=1" in ci
    assert "chromium" in ci
