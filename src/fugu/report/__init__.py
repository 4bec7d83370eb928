"""Single-file HTML reports: text, tables and matplotlib figures inlined as PNG (works offline).

>>> from fugu.report import Report
>>> r = Report("Example")
>>> r.add_text("Hello", "A paragraph.")
>>> "<h2>Hello</h2>" in r.render()
True
"""

from __future__ import annotations

import base64
import html
import io
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

__all__ = ["Report"]

_TEMPLATE = """<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>{{ title|e }}</title>
<style>
body{font-family:system-ui,-apple-system,Segoe UI,Roboto,sans-serif;max-width:1000px;
 margin:2em auto;padding:0 1em;color:#222}
h1{border-bottom:2px solid #d35400;padding-bottom:.2em} h2{margin-top:1.6em;color:#8e3200}
table{border-collapse:collapse;margin:.5em 0;font-size:.92em}
th,td{border:1px solid #ccc;padding:.25em .6em;text-align:right}
th{background:#f6f0ea} td:first-child,th:first-child{text-align:left}
figure{margin:1em 0} figcaption{font-size:.9em;color:#555} img{max-width:100%}
.note{background:#fff6e5;border-left:4px solid #e67e22;padding:.5em 1em} pre{white-space:pre-wrap}
footer{margin-top:3em;font-size:.8em;color:#777}
</style></head><body>
<h1>{{ title|e }}</h1>
{% for s in sections %}<section>{% if s.heading %}<h2>{{ s.heading|e }}</h2>{% endif %}
{{ s.html }}</section>
{% endfor %}
<footer>Written by fugu {{ version }} on {{ when }}.
Self-contained: no network needed to view.</footer>
</body></html>
"""


@dataclass
class _Section:
    heading: str
    html: str


@dataclass
class Report:
    """A report under construction; :meth:`save` writes one self-contained HTML file."""

    title: str
    sections: list[_Section] = field(default_factory=list)

    def __repr__(self) -> str:
        figures = sum("<img " in s.html for s in self.sections)
        return f"Report({self.title!r}, {len(self.sections)} sections, {figures} figures)"

    def add_text(self, heading: str, text: str, *, note: bool = False) -> None:
        body = "".join(f"<p>{html.escape(p)}</p>" for p in text.split("\n\n"))
        if note:
            body = f'<div class="note">{body}</div>'
        self.sections.append(_Section(heading, body))

    def add_preformatted(self, heading: str, text: str) -> None:
        self.sections.append(_Section(heading, f"<pre>{html.escape(text)}</pre>"))

    def add_table(
        self, heading: str, header: list[str], rows: list[list[Any]], caption: str = ""
    ) -> None:
        head = "".join(f"<th>{html.escape(str(h))}</th>" for h in header)
        body = "".join(
            "<tr>" + "".join(f"<td>{html.escape(_cell(c))}</td>" for c in r) + "</tr>" for r in rows
        )
        cap = f"<caption>{html.escape(caption)}</caption>" if caption else ""
        self.sections.append(
            _Section(
                heading, f"<table>{cap}<thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"
            )
        )

    def add_figure(self, heading: str, fig: Any, caption: str = "") -> None:
        """Add a matplotlib figure (rendered to PNG, base64-inlined, then closed)."""
        import matplotlib.pyplot as plt

        buf = io.BytesIO()
        fig.savefig(buf, format="png", dpi=110, bbox_inches="tight")
        plt.close(fig)
        data = base64.b64encode(buf.getvalue()).decode()
        cap = f"<figcaption>{html.escape(caption)}</figcaption>" if caption else ""
        alt = html.escape(heading or caption or "figure")
        self.sections.append(
            _Section(
                heading,
                f'<figure><img alt="{alt}" src="data:image/png;base64,{data}">{cap}</figure>',
            )
        )

    def render(self) -> str:
        import jinja2

        from .. import __version__

        env = jinja2.Environment(autoescape=False)
        return env.from_string(_TEMPLATE).render(
            title=self.title,
            sections=self.sections,
            version=__version__,
            when=datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC"),
        )

    def save(self, path: str | Path) -> Path:
        """Write the report to ``path`` atomically: a failed write keeps the old file.

        An existing file is replaced only when it is empty or an HTML page (an older report):
        a report path that names a data file, a release or a ledger by mistake is refused.
        """
        from .._files import atomic_write

        p = Path(path)
        _refuse_other_file(p)
        data = self.render().encode("utf-8")  # before the file is touched
        atomic_write(p, lambda fh: fh.write(data))
        return p


def _refuse_other_file(p: Path) -> None:
    from ..errors import InvalidParameterError

    try:
        with open(p, "rb") as fh:
            head = fh.read(256)
    except FileNotFoundError:
        return
    except IsADirectoryError:
        raise InvalidParameterError(
            f"the report path {str(p)!r} is a folder; give a file name such as report.html"
        ) from None
    except OSError:
        return  # unreadable: the write itself will say why it fails
    page = head.lstrip(b"\xef\xbb\xbf \t\r\n").lower()
    if head and not page.startswith((b"<!doctype html", b"<html")):
        raise InvalidParameterError(
            f"{str(p)!r} exists and is not an HTML report (a data file or a release?): "
            "refusing to overwrite it; write the report to another file"
        )


def _cell(c: Any) -> str:
    if isinstance(c, float):
        return f"{c:,.3g}" if abs(c) < 1e-2 and c != 0 else f"{c:,.2f}"
    return str(c)


def matplotlib_agg() -> Any:
    """pyplot with the non-interactive Agg backend (for headless report rendering)."""
    import matplotlib

    matplotlib.use("Agg", force=True)
    import matplotlib.pyplot as plt

    return plt
