"""The report figures are readable (issue 17 item 8), checked on the rendered figures.

* heatmap tick labels do not overlap each other or a neighbouring panel (age x occupation);
* the released-vs-true figure shows the errors (its y scale is the errors', not the answers');
* the k-means legend covers no point of the map;
* every figure of a report fits the page (<= 1000 px), so it is shown at its real size.
"""

from __future__ import annotations

import base64
import io
import re
from itertools import combinations
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import fugu
from fugu.datasets import adult, adult_domain
from fugu.report import matplotlib_agg
from fugu.report.demo_report import _edge_labels, pair_heatmaps
from fugu.report.plots import centres_map_figure, heatmap_pair_figure, residual_figure


def _boxes(fig: Any) -> tuple[list[Any], list[Any]]:
    """Window extents of every visible non-empty tick label, and of every axes."""
    fig.canvas.draw()
    r = fig.canvas.get_renderer()
    labels, axes = [], []
    for ax in fig.axes:
        axes.append(ax.get_window_extent(r))
        for t in [*ax.get_xticklabels(), *ax.get_yticklabels()]:
            if t.get_visible() and t.get_text():
                labels.append((ax, t.get_window_extent(r)))
    return labels, axes


def _overlaps(a: Any, b: Any, pad: float = 0.5) -> bool:
    return a.x0 + pad < b.x1 and b.x0 + pad < a.x1 and a.y0 + pad < b.y1 and b.y0 + pad < a.y1


def age_occupation_heatmap() -> Any:
    dom = adult_domain(["age", "occupation"])
    hist = fugu.Histogram.from_records(adult(), dom)
    rel = fugu.central.laplace(hist, 1.0, rng=fugu.RandomSource(seed=1))
    panels, edges = pair_heatmaps({"laplace": rel}, hist.counts, dom, (0, 1), bins=(20, 16))
    a0, a1 = dom.attributes
    return heatmap_pair_figure(
        panels,
        "age",
        "occupation",
        "Heatmap of age x occupation: true vs released",
        xticks=_edge_labels(a0, edges[0]),
        yticks=_edge_labels(a1, edges[1]),
    )


def test_heatmap_tick_labels_do_not_overlap() -> None:
    fig = age_occupation_heatmap()
    labels, axes = _boxes(fig)
    assert len(labels) >= 10
    for (_, a), (_, b) in combinations(labels, 2):
        assert not _overlaps(a, b), f"tick labels overlap: {a} {b}"
    for ax, box in labels:  # no label runs into another panel's image
        for other, abox in zip(fig.axes, axes, strict=True):
            if other is not ax and other.get_label() != "<colorbar>":
                assert not _overlaps(box, abox), "a tick label covers a neighbouring panel"
    matplotlib_agg().close(fig)


def test_residual_figure_shows_errors_of_100_on_answers_of_46000() -> None:
    rng = np.random.default_rng(0)
    truth = rng.uniform(0, 46_000, 500)
    answers = {"a": truth + rng.normal(0, 100, 500), "b": truth + rng.normal(0, 30, 500)}
    fig = residual_figure(truth, answers)
    ax = fig.axes[0]
    lo, hi = ax.get_ylim()
    biggest = max(float(np.max(np.abs(answers[k] - truth))) for k in answers)
    assert hi - lo <= 2.2 * biggest  # the y axis is the errors' scale (was 0..46,000)
    assert "RMSE" in ax.get_title()
    assert fig.axes[1].get_ylim() == (lo, hi)  # shared error scale
    matplotlib_agg().close(fig)


def _report_images(html: str) -> list[tuple[str, np.ndarray]]:
    import matplotlib.image as mpimg

    out = []
    for alt, data in re.findall(r'<img alt="([^"]*)" src="data:image/png;base64,([^"]+)"', html):
        out.append((alt, mpimg.imread(io.BytesIO(base64.b64decode(data)), format="png")))
    return out


@pytest.fixture(scope="module")
def demo_report(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from fugu.demo import run_demo

    out = tmp_path_factory.mktemp("demo") / "r.html"
    run_demo(
        seed=3, n_queries=100, quick=True, report_path=out, models=["central", "ldp", "blowfish"],
        progress=False,
    )  # fmt: skip
    return out


def test_every_demo_figure_fits_the_page(demo_report: Path) -> None:
    images = _report_images(demo_report.read_text())
    alts = [a for a, _ in images]
    assert "Error of the released answers" in alts and "k-means centres on the map" in alts
    assert not any("True vs released" in a for a in alts)
    for alt, img in images:
        assert img.shape[1] <= 1000, f"{alt}: {img.shape[1]} px wide, shrunk on the page"


def test_kmeans_legend_covers_no_point() -> None:
    """The demo's k-means map: the legend lies outside the map (it covered a cluster)."""
    from fugu.demo import geo_points

    X, _ = geo_points(2000)
    centres = {
        "Laplace (epsilon-DP)": np.array([[390.0, 290.0], [10.0, 10.0]]),
        "Blowfish distance theta=20": np.array([[300.0, 250.0]]),
    }
    fig = centres_map_figure(X, centres, "k-means", (399, 299))
    ax = fig.axes[0]
    fig.canvas.draw()
    r = fig.canvas.get_renderer()
    assert not _overlaps(ax.get_legend().get_window_extent(r), ax.get_window_extent(r))
    matplotlib_agg().close(fig)
