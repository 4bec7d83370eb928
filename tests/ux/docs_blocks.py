"""The fenced code blocks of a documentation page, for the docs tests (tests/ux/test_ux_docs.py
and tests/ux/test_docs_examples.py read pages the same way)."""

from __future__ import annotations

import re
from pathlib import Path

_FENCE = re.compile(r"^( *)```(\S*)\s*$")
SKIP = re.compile(r"<!--\s*docs-test:\s*skip\s*\((.+?)\)\s*-->")


class Block:
    def __init__(self, lang: str, text: str, line: int, skip: str | None) -> None:
        self.lang, self.text, self.line, self.skip = lang, text, line, skip


def blocks(path: Path) -> list[Block]:
    """Every fenced code block (MyST directives excluded), with the skip reason marked above it."""
    out: list[Block] = []
    lines = path.read_text(encoding="utf-8").splitlines()
    i = 0
    while i < len(lines):
        m = _FENCE.match(lines[i])
        if not m:
            i += 1
            continue
        indent, lang, start = len(m.group(1)), m.group(2), i + 1
        prev = next((ln for ln in reversed(lines[:i]) if ln.strip()), "")
        skip = SKIP.search(prev)
        body: list[str] = []
        i += 1
        while i < len(lines) and not lines[i].strip().startswith("```"):
            body.append(lines[i][indent:] if lines[i][:indent].strip() == "" else lines[i])
            i += 1
        i += 1
        if not lang.startswith("{"):
            out.append(Block(lang, "\n".join(body), start, skip.group(1) if skip else None))
    return out
