"""Headless Chromium helpers for the report tests (Debian's ``chromium`` package)."""

from __future__ import annotations

import json
import shutil
import subprocess
import tempfile
from pathlib import Path
from typing import Any

FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--hide-scrollbars",
    "--force-device-scale-factor=1",
    "--virtual-time-budget=10000",
]

# The report is opened at this window width: its body is at most 1000 CSS px wide, so every
# figure (<= 1000 px, see test_ux_report_figures) is shown at its real size, as a reader sees it.
WIDTH = 1100

# Appended to a copy of the report: after load, record every image's decoded size and place
# on the page, and every heading, in a <pre id="fugu-check"> element that --dump-dom prints.
PROBE = """
<script>
window.addEventListener("load", function () {
  var imgs = Array.prototype.map.call(document.images, function (im) {
    var r = im.getBoundingClientRect();
    return {alt: im.alt, w: im.naturalWidth, h: im.naturalHeight, complete: im.complete,
            x: r.left + window.scrollX, y: r.top + window.scrollY, cw: r.width, ch: r.height};
  });
  var heads = Array.prototype.map.call(document.querySelectorAll("h1,h2"),
                                       function (h) { return h.textContent; });
  var pre = document.createElement("pre");
  pre.id = "fugu-check";
  pre.textContent = JSON.stringify({images: imgs, headings: heads,
                                    height: document.documentElement.scrollHeight});
  document.body.appendChild(pre);
});
</script>
"""


def chromium() -> str:
    exe = shutil.which("chromium") or shutil.which("chromium-browser")
    if exe is None:
        raise RuntimeError("headless Chromium is needed for this test: apt-get install -y chromium")
    return exe


def _run(args: list[str], profile: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [chromium(), *FLAGS, f"--user-data-dir={profile}", *args],
        capture_output=True,
        text=True,
        timeout=180,
        check=False,
    )


def inspect_report(report: Path, workdir: Path) -> tuple[dict[str, Any], Path]:
    """Open ``report`` in headless Chromium; return the probe's findings and a screenshot path."""
    html = report.read_text(encoding="utf-8")
    probe = workdir / "probe.html"
    probe.write_text(html.replace("</body>", PROBE + "</body>"), encoding="utf-8")
    with tempfile.TemporaryDirectory(prefix="fugu-chromium-") as profile:
        dom = _run([f"--window-size={WIDTH},2000", "--dump-dom", probe.as_uri()], profile)
    marker = '<pre id="fugu-check">'
    if marker not in dom.stdout:
        raise AssertionError(f"the probe did not run; chromium said: {dom.stderr[-2000:]}")
    raw = dom.stdout.split(marker, 1)[1].split("</pre>", 1)[0]
    info = json.loads(
        raw.replace("&quot;", '"').replace("&amp;", "&").replace("&lt;", "<").replace("&gt;", ">")
    )
    shot = workdir / "screenshot.png"
    height = min(int(info["height"]) + 50, 16000)
    with tempfile.TemporaryDirectory(prefix="fugu-chromium-") as profile:
        _run([f"--window-size={WIDTH},{height}", f"--screenshot={shot}", probe.as_uri()], profile)
    if not shot.exists():
        raise AssertionError("chromium wrote no screenshot")
    return info, shot
