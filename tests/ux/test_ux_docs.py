"""Every example and every CLI command shown in the documentation runs.

Pages written for the site (index, tutorials, the CLI guide) are run as a reader would: their
Python blocks and shell commands in order, in one fresh directory per page. The other pages
(one per privacy model) are checked for their ``fugu`` commands, with the input files they name
generated first (``points.csv``, ``users.csv``). A command shown as ``cmd || echo ...`` is a
documented failure and must exit non-zero.
"""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from docs_blocks import blocks

from fugu.cli import cli, main

ROOT = Path(__file__).resolve().parents[2]
DOCS = ROOT / "docs"
SITE_PAGES = [
    "index.md",
    "cli.md",
    "security.md",
    "benchmarks.md",
    *sorted(str(p.relative_to(DOCS)) for p in (DOCS / "tutorials").glob("*.md")),
]
OTHER_PAGES = sorted(
    str(p.relative_to(DOCS))
    for p in DOCS.glob("*.md")
    if str(p.relative_to(DOCS)) not in SITE_PAGES
)
SHELL = {"", "bash", "sh", "shell", "console"}


def commands(text: str) -> list[str]:
    """Shell lines that run fugu (continuation lines joined, comments dropped)."""
    joined = re.sub(r"\\\n\s*", " ", text)
    out = []
    for line in joined.splitlines():
        line = line.strip()
        if line.startswith("$ "):
            line = line[2:]
        if re.search(r"(^|&&\s*|\s)(python -m )?fugu\b", line) and not line.startswith("#"):
            out.append(line)
    return out


def _ensure_all_commands() -> None:
    from fugu.cli import _load_models

    _load_models()
    if "report" not in cli.commands:
        from fugu.cli import report

        report.register(cli)


_DONE: set[str] = set()


def run_command(line: str, cwd: Path) -> None:
    if "_FUGU_COMPLETE=" in line:  # shell completion: needs the real environment variable
        script = re.sub(
            r"(?<=\s)fugu(?=\s)", f"{shlex.quote(sys.executable)} -m fugu", line, count=1
        )
        env = dict(os.environ, PYTHONPATH=str(ROOT / "src"))
        proc = subprocess.run(
            ["bash", "-c", script],
            cwd=cwd,
            env=env,
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )
        assert proc.returncode == 0, proc.stderr
        target = cwd / line.rsplit(">", 1)[1].strip()
        assert "complete" in target.read_text(), "completion script is empty"
        return
    expect_failure = False
    if "||" in line:
        line, _, rest = line.partition("||")
        assert rest.strip().startswith("echo"), f"unsupported shell form: {line}"
        expect_failure = True
    for part in line.split("&&"):
        args = shlex.split(part, comments=True)
        if args[:3] == ["python", "-m", "pip"]:
            continue  # installing is the reader's step; the tests run on the installed tree
        if args[:3] == ["python", "-m", "fugu"]:
            args = args[3:]
        elif args[:1] == ["fugu"]:
            args = args[1:]
        else:
            raise AssertionError(f"unexpected command in the docs: {part!r}")
        key = " ".join(args)
        if args[:1] == ["demo"] and key in _DONE:
            continue  # the same demo run twice in the docs: once is enough
        _DONE.add(key)
        code = main(args)
        if expect_failure:
            assert code != 0, f"'fugu {' '.join(args)}' should fail as the docs say"
        else:
            assert code == 0, f"'fugu {' '.join(args)}' exited with {code}"


def _fixtures(cwd: Path) -> None:
    """The input files the model pages name (their own placeholders for a reader's files)."""
    import json

    from fugu.datasets import adult_domain

    dom = adult_domain(["age", "occupation"])
    (cwd / "my_domain.json").write_text(json.dumps(dom.to_dict()))
    (cwd / "my_queries.json").write_text(json.dumps([{"age": [20, 29], "occupation": "Sales"}]))
    import networkx as nx

    # a small stand-in for the SNAP collaboration network graph.md names
    g = nx.powerlaw_cluster_graph(60, 2, 0.3, seed=1)
    nx.write_edgelist(g, cwd / "ca-GrQc.txt", data=False)
    gen = np.random.default_rng(0)
    pts = gen.integers(0, [400, 300], size=(3000, 2))
    np.savetxt(cwd / "points.csv", pts, delimiter=",", header="lat,lon", comments="", fmt="%d")
    ages = gen.integers(18, 80, 5000)
    np.savetxt(cwd / "users.csv", ages, header="age", comments="", fmt="%d")


def test_pages_found() -> None:
    assert (DOCS / "index.md").exists() and len(SITE_PAGES) >= 8
    n = sum(
        len(commands(t))
        for p in SITE_PAGES
        for b in blocks(DOCS / p)
        for t in [b.text]
        if b.lang in SHELL
    )
    assert n >= 25, f"only {n} commands found in the site pages"


def test_command_parser() -> None:
    text = (
        "fugu a --x 1 \\\n   --y 2   # comment\necho no\n"
        "python -m pip install . && python -m fugu demo"
    )
    assert commands(text) == [
        "fugu a --x 1  --y 2   # comment",
        "python -m pip install . && python -m fugu demo",
    ]


@pytest.mark.parametrize("page", SITE_PAGES)
def test_site_page_runs(page: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _ensure_all_commands()
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("MPLBACKEND", "Agg")
    namespace: dict[str, object] = {"__name__": "__docs__"}
    ran = 0
    for i, (lang, text) in enumerate((b.lang, b.text) for b in blocks(DOCS / page)):
        if lang == "python":
            exec(compile(text, f"{page}[block {i}]", "exec"), namespace)  # noqa: S102
            ran += 1
        elif lang in SHELL:
            for line in commands(text):
                run_command(line, tmp_path)
                ran += 1
    if page not in ("security.md", "benchmarks.md"):
        assert ran, f"{page} has no runnable example"


@pytest.mark.parametrize("page", OTHER_PAGES)
def test_model_page_commands_run(
    page: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _ensure_all_commands()
    monkeypatch.chdir(tmp_path)
    _fixtures(tmp_path)
    for lang, text in ((b.lang, b.text) for b in blocks(DOCS / page)):
        if lang in SHELL:
            for line in commands(text):
                run_command(line, tmp_path)
