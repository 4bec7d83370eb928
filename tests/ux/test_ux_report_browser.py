"""The HTML reports opened in headless Chromium: every plot decodes and renders (non-blank
pixels where the image sits on a screenshot), and the expected sections and titles are there.

Deterministic: the reports are made with seeded (NOT private) sources; no statistical checks.

Marked ``browser``: skipped with the reason on a machine without Chromium, a failure when
``FUGU_REQUIRE_BROWSER=1`` (CI) is set -- see the repository's ``conftest.py``.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from ux_browser import inspect_report

import fugu
from fugu.demo import run_demo
from fugu.report.release_report import write_release_report

pytestmark = pytest.mark.browser


def _png(path: Path) -> np.ndarray:
    import matplotlib.image as mpimg

    return np.asarray(mpimg.imread(str(path)))


def _check_images(info: dict, shot: Path, expected_alts: list[str]) -> None:
    images = info["images"]
    alts = [im["alt"] for im in images]
    for alt in expected_alts:
        assert any(alt in a for a in alts), f"no figure titled {alt!r} among {alts}"
    pixels = _png(shot)[..., :3]
    for im in images:
        assert im["complete"] and im["w"] > 100 and im["h"] > 100, f"image not decoded: {im}"
        # shown at its real size (not shrunk to fit, so its text stays readable)
        assert abs(im["cw"] - im["w"]) <= 1, f"{im['alt']} shown {im['cw']} px wide of {im['w']}"
        x0, y0 = int(im["x"]), int(im["y"])
        x1, y1 = int(im["x"] + im["cw"]), int(im["y"] + im["ch"])
        if y1 > pixels.shape[0]:
            continue  # below a very long page's screenshot limit; decoding was checked above
        region = pixels[y0:y1, x0:x1]
        assert region.size, f"empty region for {im['alt']}"
        # A rendered plot has dark text/lines and coloured marks on a white background.
        dark = float(np.mean(region.mean(axis=-1) < 0.5))
        colourful = float(np.mean(region.max(axis=-1) - region.min(axis=-1) > 0.25))
        assert region.std() > 0.05, f"blank image: {im['alt']}"
        assert dark > 0.002, f"no axes or text drawn in {im['alt']}"
        assert colourful > 0.001, f"no coloured marks in {im['alt']}"


@pytest.fixture(scope="module")
def demo_report(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("demo") / "fugu-report.html"
    run_demo(seed=5, n_queries=200, quick=True, report_path=out, progress=False)
    return out


def test_demo_report_renders_in_chromium(demo_report: Path, tmp_path: Path) -> None:
    info, shot = inspect_report(demo_report, tmp_path)
    heads = info["headings"]
    for expected in (
        "1. Central differential privacy: the Adult data cube",
        "2. Local differential privacy: Adult's ordinal attributes",
        "3. Blowfish privacy: k-means of locations",
        "4. Node and edge differential privacy: triangles in a social graph",
        "The guarantee in plain words (node DP)",
    ):
        assert expected in heads, f"missing section {expected!r}"
    # the central and local headings name the mechanism they describe (03dc4c9)
    for prefix in (
        "The guarantee in plain words (central DP, ",
        "The guarantee in plain words (local DP, ",
    ):
        assert any(h.startswith(prefix) for h in heads), f"missing section {prefix!r}..."
    assert any(h.startswith("The guarantee in plain words (Blowfish") for h in heads)
    _check_images(
        info,
        shot,
        [
            "Range-query error per mechanism",
            "Error vs epsilon (central DP)",
            "Error of the released answers",
            "Heatmap: age x occupation",
            "Error vs epsilon (local DP)",
            "Heatmap: age x hours_per_week under local DP",
            "Objective ratio vs epsilon (k-means)",
            "k-means centres on the map",
            "Error vs epsilon (graphs)",
        ],
    )
    assert len(info["images"]) >= 9


def test_release_report_renders_in_chromium(tmp_path: Path) -> None:
    import networkx as nx

    from fugu.datasets import adult, adult_domain

    dom = adult_domain(["age", "occupation"])
    hist = fugu.Histogram.from_records(adult(), dom)
    rng = fugu.RandomSource(seed=11)
    releases = [
        ("cube", fugu.central.privelet(hist, epsilon=1.0, plain="auto", rng=rng)),
        ("ages", fugu.central.hierarchical(hist.project(["age"]), epsilon=1.0, rng=rng)),
        ("triangles", fugu.graph.count(nx.karate_club_graph(), "triangle", 1.0, rng=rng)),
    ]
    out = write_release_report(
        releases,
        tmp_path / "r.html",
        n_queries=100,
        truth=lambda d: fugu.Histogram.from_records(adult(), d).counts,
    )
    info, shot = inspect_report(out, tmp_path)
    assert "cube: the guarantee in plain words" in info["headings"]
    assert "triangles: released value" in info["headings"]
    _check_images(
        info,
        shot,
        [
            "cube: heatmap age x occupation",
            "cube: expected error per query",
            "ages: distribution",
            "Error vs epsilon",
            "Error of the released answers",
        ],
    )


def test_probe_catches_a_blank_image(tmp_path: Path) -> None:
    """The check must be able to fail: a report whose only figure is blank is rejected."""
    from fugu.report import Report, matplotlib_agg

    plt = matplotlib_agg()
    fig, ax = plt.subplots(figsize=(4, 3))
    ax.set_axis_off()
    rep = Report("blank")
    rep.add_figure("Blank", fig)
    out = rep.save(tmp_path / "blank.html")
    info, shot = inspect_report(out, tmp_path)
    with pytest.raises(AssertionError, match="blank image|no axes"):
        _check_images(info, shot, ["Blank"])
