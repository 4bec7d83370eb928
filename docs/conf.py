"""Sphinx configuration for the fugu documentation (Markdown pages through MyST, API reference
from docstrings through autodoc + napoleon, CLI reference through sphinx-click).

Build offline with warnings as errors::

    python -m sphinx -W -b html docs docs/_build/html
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "src"))

project = "fugu"
author = "The fugu developers"
copyright = "2026, The fugu developers"  # noqa: A001
try:
    from fugu import __version__ as release
except Exception:  # pragma: no cover - docs of a broken tree still build the prose
    release = "0.1.0"
version = release

extensions = [
    "myst_parser",
    "sphinx.ext.autodoc",
    "sphinx.ext.napoleon",
    "sphinx.ext.viewcode",
    "sphinx_click",
]
source_suffix = {".md": "markdown", ".rst": "restructuredtext"}
root_doc = "index"
exclude_patterns = ["_build", "Thumbs.db", ".DS_Store", "**/README.md"]
myst_enable_extensions = ["colon_fence", "deflist"]
myst_heading_anchors = 3

autodoc_default_options = {"members": True, "show-inheritance": False}
autodoc_member_order = "bysource"
autodoc_typehints = "description"
autodoc_typehints_format = "short"
autodoc_preserve_defaults = True
napoleon_numpy_docstring = True
napoleon_google_docstring = False
napoleon_use_rtype = False

html_theme = "furo"
html_title = f"fugu {release}"
html_static_path: list[str] = []

# Pages other engineers write, one per privacy model or subsystem: listed in the index's
# toctree when they exist (see _model_pages below), so the site builds at every commit.
MODEL_PAGES = ["central", "blowfish", "kmeans", "graph", "ldp", "ldp_grids", "engines"]


def _model_pages(app, docname, source):  # type: ignore[no-untyped-def]
    """List the model pages that exist in the index; unlink references to ones not written yet."""
    present = [p for p in MODEL_PAGES if (HERE / f"{p}.md").exists()]
    if docname == "index":
        source[0] = source[0].replace("<!-- model-pages -->", "\n".join(present))
    for p in MODEL_PAGES:
        if p not in present:
            source[0] = re.sub(r"\{doc\}`(?:\.\./)?" + p + "`", f"the *{p}* page", source[0])


def _register_cli() -> None:
    """Load every command into the click group so the CLI reference is complete."""
    from fugu import cli as fugu_cli

    fugu_cli._load_models()
    if "report" not in fugu_cli.cli.commands:
        from fugu.cli import report as report_cli

        report_cli.register(fugu_cli.cli)


_ABS = re.compile(r"(?<![\\|`])\|([A-Za-z])\|(?![_`])")


def _absolute_values(app, what, name, obj, options, lines):  # type: ignore[no-untyped-def]
    """Docstrings write absolute values as |k|, which reStructuredText reads as a substitution
    reference; escape the bars."""
    lines[:] = [_ABS.sub(r"\\|\1\\|", line) for line in lines]


def setup(app):  # type: ignore[no-untyped-def]
    _register_cli()
    app.connect("autodoc-process-docstring", _absolute_values)
    app.connect("source-read", _model_pages)
