"""Figures for reports (matplotlib, Agg backend). Every function returns a Figure.

All inputs are released values, true values the publisher already holds, or public parameters;
nothing here draws noise or touches a mechanism.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
from numpy.typing import ArrayLike, NDArray

from . import matplotlib_agg

__all__ = [
    "bar_figure",
    "coarse_grid_bounds",
    "error_vs_epsilon_figure",
    "centres_map_figure",
    "heatmap_pair_figure",
    "residual_figure",
    "true_vs_noisy_figure",
    "expected_error_figure",
    "PALETTE",
]

PALETTE = ["#d35400", "#2c3e50", "#16a085", "#8e44ad", "#c0392b", "#2980b9", "#7f8c8d", "#f39c12"]


def bar_figure(labels: Sequence[str], values: Sequence[float], title: str, ylabel: str) -> Any:
    plt = matplotlib_agg()
    fig, ax = plt.subplots(figsize=(7, 3.2))
    ax.bar(list(labels), list(values), color=PALETTE[0])
    ax.set_ylabel(ylabel)
    ax.set_title(title)
    ax.tick_params(axis="x", rotation=20)
    return fig


def error_vs_epsilon_figure(
    epsilons: Sequence[float],
    errors: Mapping[str, Sequence[float]],
    title: str,
    ylabel: str,
    *,
    log: bool = True,
    styles: Mapping[str, str] | None = None,
) -> Any:
    """One line per method: error (y) against ε (x), both on log scales by default."""
    plt = matplotlib_agg()
    fig, ax = plt.subplots(figsize=(7, 3.6))
    for i, (name, ys) in enumerate(errors.items()):
        ls = (styles or {}).get(name, "-")
        ax.plot(
            list(epsilons),
            list(ys),
            ls,
            marker="o",
            ms=4,
            label=name,
            color=PALETTE[i % len(PALETTE)],
        )
    if log:
        ax.set_xscale("log")
        ax.set_yscale("log")
    ax.set_xlabel("epsilon (privacy-loss bound; smaller is more private)")
    ax.set_ylabel(ylabel)
    ax.set_title(title)
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=8, ncol=2)
    return fig


def true_vs_noisy_figure(
    truth: ArrayLike, answers: Mapping[str, ArrayLike], title_prefix: str = "True vs noisy answers"
) -> Any:
    """Scatter of released answers against true answers, one panel per release."""
    plt = matplotlib_agg()
    t = np.asarray(truth, dtype=np.float64)
    names = list(answers)
    ncol = min(4, max(1, len(names)))
    nrow = (len(names) + ncol - 1) // ncol
    fig, axes = plt.subplots(nrow, ncol, figsize=(3.4 * ncol, 3.2 * nrow), squeeze=False)
    for ax in axes.flat[len(names) :]:
        ax.set_visible(False)
    for ax, name in zip(axes.flat, names, strict=False):
        a = np.asarray(answers[name], dtype=np.float64)
        ax.scatter(t, a, s=4, alpha=0.5, color=PALETTE[1])
        lo = float(min(t.min(), a.min()))
        hi = float(max(t.max(), a.max()))
        ax.plot([lo, hi], [lo, hi], color=PALETTE[0], lw=1)
        ax.set_title(f"{title_prefix}: {name}", fontsize=9)
        ax.set_xlabel("true")
        ax.set_ylabel("released")
    fig.tight_layout()
    return fig


def residual_figure(
    truth: ArrayLike | Mapping[str, ArrayLike],
    answers: Mapping[str, ArrayLike],
    title: str = "Error of the released answers",
) -> Any:
    """Released minus true answer (y) against the true answer (x), one panel per release.

    Errors of ~100 on answers up to ~46,000 are invisible on a true-vs-released scatter; here
    they fill the y axis. Panels share the y scale so releases compare at a glance; the x axis
    is symmetric-log so small and large queries both show. Two panels per row keep the figure
    at the report's width (readable at its real size).
    """
    plt = matplotlib_agg()
    names = list(answers)
    truths = {
        n: np.asarray(truth[n] if isinstance(truth, Mapping) else truth, dtype=np.float64)
        for n in names
    }
    resid = {n: np.asarray(answers[n], dtype=np.float64) - truths[n] for n in names}
    ncol = 1 if len(names) == 1 else 2
    nrow = (len(names) + ncol - 1) // ncol
    fig, axes = plt.subplots(
        nrow, ncol, figsize=(7.6, 2.5 * nrow + 0.5), squeeze=False, sharey=True
    )
    for ax in axes.flat[len(names) :]:
        ax.set_visible(False)
    finite = [np.abs(r[np.isfinite(r)]) for r in resid.values()]
    lim = max([float(np.max(f)) for f in finite if f.size] + [1.0]) * 1.05
    for i, (ax, name) in enumerate(zip(axes.flat, names, strict=False)):
        t, r = truths[name], resid[name]
        ax.axhline(0.0, color=PALETTE[0], lw=1)
        ax.scatter(t, r, s=4, alpha=0.5, color=PALETTE[1])
        rmse = float(np.sqrt(np.mean(r**2))) if r.size else float("nan")
        ax.set_title(f"{name}: RMSE {rmse:,.1f}", fontsize=9)
        ax.set_xscale("symlog", linthresh=10)
        ax.set_ylim(-lim, lim)
        ax.grid(True, alpha=0.3)
        if i % ncol == 0:
            ax.set_ylabel("released - true")
        if i // ncol == nrow - 1 or i + ncol >= len(names):
            ax.set_xlabel("true answer (symlog)")
    fig.suptitle(title, fontsize=10)
    fig.tight_layout()
    return fig


def expected_error_figure(expected: ArrayLike, measured: ArrayLike | None, title: str) -> Any:
    """Expected RMSE per query (sorted), with measured absolute errors when the truth is known."""
    plt = matplotlib_agg()
    e = np.asarray(expected, dtype=np.float64)
    order = np.argsort(e, kind="stable")
    fig, ax = plt.subplots(figsize=(7, 3.4))
    if measured is not None:
        m = np.abs(np.asarray(measured, dtype=np.float64))[order]
        ax.scatter(
            np.arange(len(m)),
            m,
            s=4,
            alpha=0.5,
            color=PALETTE[1],
            label="measured |error| (publisher only)",
        )
    ax.plot(np.arange(len(e)), e[order], color=PALETTE[0], lw=2, label="expected error (RMSE)")
    ax.set_xlabel("queries, sorted by expected error")
    ax.set_ylabel("error (records)")
    ax.set_title(title)
    ax.legend(fontsize=8)
    return fig


def coarse_grid_bounds(
    shape: Sequence[int], axes: tuple[int, int], bins: tuple[int, int]
) -> tuple[NDArray[np.int64], list[NDArray[np.int64]]]:
    """Half-open code bounds (m, d, 2) of a coarse grid over two axes of a cube (others whole).

    Returns the bounds (row-major over the coarse grid) and the two lists of bin edges.
    """
    d = len(shape)
    edges = []
    for ax, b in zip(axes, bins, strict=True):
        n = int(shape[ax])
        k = max(1, min(int(b), n))
        edges.append(np.unique(np.floor(np.arange(k + 1) * n / k).astype(np.int64)))
    e0, e1 = edges
    m = (len(e0) - 1) * (len(e1) - 1)
    bounds = np.zeros((m, d, 2), dtype=np.int64)
    bounds[:, :, 1] = np.asarray(shape, dtype=np.int64)
    g0, g1 = np.meshgrid(np.arange(len(e0) - 1), np.arange(len(e1) - 1), indexing="ij")
    i0 = g0.ravel()
    i1 = g1.ravel()
    bounds[:, axes[0], 0] = e0[i0]
    bounds[:, axes[0], 1] = e0[i0 + 1]
    bounds[:, axes[1], 0] = e1[i1]
    bounds[:, axes[1], 1] = e1[i1 + 1]
    return bounds, edges


def heatmap_pair_figure(
    panels: Mapping[str, ArrayLike],
    xlabel: str,
    ylabel: str,
    title: str,
    *,
    xticks: Sequence[str] | None = None,
    yticks: Sequence[str] | None = None,
    colorbar_label: str = "count",
) -> Any:
    """Side-by-side heatmaps on one colour scale (e.g. true and released 2-D distributions).

    Each panel is a 2-D array indexed [x, y]; it is drawn with x across and y upwards. Tick
    labels never overlap: x labels are rotated and thinned to fit the panel's width, y labels
    thinned to its height, and only the first panel carries y labels (the panels share them).
    """
    plt = matplotlib_agg()
    names = list(panels)
    arrays = [np.asarray(panels[n], dtype=np.float64) for n in names]
    vmax = max(float(np.nanmax(a)) for a in arrays)
    vmin = min(0.0, min(float(np.nanmin(a)) for a in arrays))
    ylab_chars = max((len(str(t)) for t in yticks or []), default=4)
    panel_w = 3.3 if len(names) > 1 else 5.0
    fig_w = min(8.6, panel_w * len(names) + 0.09 * ylab_chars + 1.2)
    fig, axes = plt.subplots(
        1,
        len(names),
        figsize=(fig_w, 4.0),
        squeeze=False,
        sharey=True,
        layout="constrained",
    )
    im = None
    fontsize = 7
    line = fontsize * 1.5 / 72  # inches one label needs across its text line
    for j, (ax, name, a) in enumerate(zip(axes[0], names, arrays, strict=True)):
        im = ax.imshow(a.T, origin="lower", aspect="auto", cmap="magma", vmin=vmin, vmax=vmax)
        ax.set_title(name, fontsize=10)
        ax.set_xlabel(xlabel)
        if j == 0:
            ax.set_ylabel(ylabel)
        if xticks is not None and len(xticks) == a.shape[0]:
            # rotated 45 degrees, a label takes line / sin(45) of the panel's width
            fit = max(1, int(0.85 * panel_w / (line * 1.42)))
            step = -(-len(xticks) // fit)
            ax.set_xticks(range(0, len(xticks), step))
            ax.set_xticklabels(list(xticks)[::step], rotation=45, ha="right", fontsize=fontsize)
        if yticks is not None and len(yticks) == a.shape[1]:
            fit = max(1, int(2.5 / line))  # label rows in the panel's height
            step = -(-len(yticks) // fit)
            ax.set_yticks(range(0, len(yticks), step))
            if j == 0:
                ax.set_yticklabels(list(yticks)[::step], fontsize=fontsize)
        if j > 0:
            ax.tick_params(labelleft=False)
    fig.suptitle(title)
    if im is not None:
        fig.colorbar(im, ax=list(axes[0]), shrink=0.8, label=colorbar_label)
    return fig


def centres_map_figure(
    points: ArrayLike,
    centres: Mapping[str, ArrayLike],
    title: str,
    extent: tuple[float, float],
) -> Any:
    """Points in grey and each fit's centres as markers; the legend sits outside the map so it
    never covers a cluster."""
    plt = matplotlib_agg()
    X = np.asarray(points, dtype=np.float64)
    fig, ax = plt.subplots(figsize=(6.2, 4.4))
    ax.scatter(X[:, 0], X[:, 1], s=1, alpha=0.25, color="#7f8c8d")
    markers = ["X", "P", "D", "o"]
    for i, (label, c) in enumerate(centres.items()):
        c = np.asarray(c, dtype=np.float64)
        ax.scatter(
            c[:, 0],
            c[:, 1],
            s=90,
            marker=markers[i % 4],
            color=PALETTE[i % len(PALETTE)],
            edgecolor="black",
            label=label,
        )
    ax.set_xlim(0, extent[0])
    ax.set_ylim(0, extent[1])
    ax.set_title(title)
    ax.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.01, 1.0), borderaxespad=0.0)
    return fig
