"""The HTML report written by ``fugu demo``: one section per privacy model."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from ..queries import PrefixSums
from . import Report, matplotlib_agg
from .plain import plain_text
from .plots import (
    bar_figure,
    centres_map_figure,
    coarse_grid_bounds,
    error_vs_epsilon_figure,
    heatmap_pair_figure,
    residual_figure,
)

__all__ = ["write_demo_report", "pair_heatmaps"]


def pair_heatmaps(
    releases: dict[str, Any],
    truth_counts: np.ndarray | None,
    domain: Any,
    axes: tuple[int, int],
    bins: tuple[int, int] = (24, 24),
) -> tuple[dict[str, np.ndarray], list[np.ndarray]]:
    """2-D distributions over two attributes (coarse bins), true and from each release.

    Releases answer one range query per bin, so this works for any release that answers
    range queries (cubes, grids, LDP pairs), not only dense ones.
    """
    bounds, edges = coarse_grid_bounds(domain.shape, axes, bins)
    shape = (len(edges[0]) - 1, len(edges[1]) - 1)
    panels: dict[str, np.ndarray] = {}
    if truth_counts is not None:
        panels["true (publisher only)"] = PrefixSums(truth_counts).answer(bounds).reshape(shape)
    for name, rel in releases.items():
        panels[name] = np.asarray(rel._answer_bounds(bounds), dtype=np.float64).reshape(shape)
    return panels, edges


def pair_heatmap_figure(
    releases: dict[str, Any],
    truth_counts: np.ndarray | None,
    domain: Any,
    axes: tuple[int, int],
    bins: tuple[int, int],
    subtitle: str,
) -> Any:
    """The :func:`pair_heatmaps` panels side by side, ticked with the attributes' value labels
    and titled 'Heatmap of A x B: ``subtitle``'.

    Blocks of several cells are coloured by their mean count per cell: the blocks of a coarse
    grid differ in size (74 ages in 24 blocks of 3 or 4), and their sums drew every 4-wide
    block a third brighter than its 3-wide neighbours, stripes that are not in the data.
    """
    panels, edges = pair_heatmaps(releases, truth_counts, domain, axes, bins=bins)
    area = np.outer(np.diff(edges[0]), np.diff(edges[1])).astype(np.float64)
    panels = {name: np.asarray(p, dtype=np.float64) / area for name, p in panels.items()}
    a0, a1 = domain.attributes[axes[0]], domain.attributes[axes[1]]
    return heatmap_pair_figure(
        panels,
        a0.name,
        a1.name,
        f"Heatmap of {a0.name} x {a1.name}: {subtitle}",
        xticks=_edge_labels(a0, edges[0]),
        yticks=_edge_labels(a1, edges[1]),
        colorbar_label="count" if area.max() == 1 else "count per cell (mean over a block)",
    )


def _edge_labels(attr: Any, edges: np.ndarray) -> list[str]:
    labels = getattr(attr, "labels", None)
    if callable(labels):
        labels = labels()
    if labels is None:
        labels = [str(i) for i in range(attr.size)]
    return [str(labels[int(e)]) for e in edges[:-1]]


def write_demo_report(result: Any, parts: dict[str, dict[str, Any]], path: str | Path) -> Path:
    plt = matplotlib_agg()
    rep = Report(f"fugu demo: four privacy models at epsilon = {result.epsilon:g}")
    rep.add_text(
        "What this is",
        "fugu answers statistical questions about sensitive data under a privacy guarantee the "
        "data owner chooses. This report runs each of fugu's four privacy models on data that "
        "ships with fugu and networkx and shows, for each, what the guarantee means and how "
        "accurate the released statistics are.\n\n"
        "True values appear next to released ones because the publisher holds the data; a reader "
        "of a release never sees them. Epsilon (the privacy-loss bound) is the knob: smaller is "
        "more private and noisier.",
    )
    if not result.private:
        rep.add_text(
            "Not private",
            "This report was made with a fixed seed: reproducible, NOT private. Run "
            "'fugu demo' without --seed for releases that use the secure random source.",
            note=True,
        )
    sec = {s["model"]: s for s in result.sections}
    if "central" in parts:
        _central_section(rep, plt, result, parts["central"], sec["central"])
    if "ldp" in parts:
        _ldp_section(rep, parts["ldp"], sec["ldp"], result.epsilon)
    if "blowfish" in parts:
        _blowfish_section(rep, plt, parts["blowfish"], sec["blowfish"], result.epsilon)
    if "graph" in parts:
        _graph_section(rep, parts["graph"], sec["graph"])
    return rep.save(path)


def _central_section(
    rep: Report, plt: Any, result: Any, part: dict[str, Any], s: dict[str, Any]
) -> None:
    releases = part["releases"]
    rep.add_text(
        "1. Central differential privacy: the Adult data cube",
        "A trusted curator holds the census records of "
        f"{result.n_records:,} people and publishes a noisy count for every cell of "
        f"{result.domain}. Any range query (e.g. 'age 20-29 and White-collar') is then "
        "answered from the release, as often as wanted, at no further privacy cost.",
    )
    if releases:
        # one mechanism's guarantee stands for all: the heading names it (its post-processing,
        # e.g. hierarchical's least squares, is not the others')
        name, first = next(iter(releases.items()))
        rep.add_text(
            f"The guarantee in plain words (central DP, {name})", plain_text(first.guarantee)
        )
    rep.add_table(
        s["title"],
        s["header"],
        s["rows"],
        caption="MAE/RMSE in records; relative error with a sanity bound of 0.1% of n.",
    )
    if s.get("note"):
        rep.add_text("", s["note"], note=True)
    names = [r["mechanism"] for r in result.rows]
    if names:
        rep.add_figure(
            "Range-query error per mechanism",
            bar_figure(
                names,
                [r["rmse"] for r in result.rows],
                "Range-query error per mechanism",
                "RMSE (records)",
            ),
        )
        fig = error_vs_epsilon_figure(
            part["epsilons"],
            part["curves"],
            "Central DP: range-query error vs epsilon",
            "RMSE (records)",
        )
        rep.add_figure(
            "Error vs epsilon (central DP)",
            fig,
            "Root mean square over fresh releases at each epsilon, same queries.",
        )
        rep.add_figure(
            "Error of the released answers",
            residual_figure(part["truth"], part["answers"]),
            "Each dot is one range query: its released minus its true answer, against the true "
            "answer. The orange line is no error; panels share the error scale.",
        )
        hist = part["hist"]
        dom = hist.domain
        if dom.ndim >= 2:
            best = min(result.rows, key=lambda r: r["rmse"])["mechanism"]
            shown = {n: releases[n] for n in dict.fromkeys([best, "laplace"]) if n in releases}
            axes = (0, _widest_other(dom, 0))
            a0, a1 = dom.attributes[axes[0]], dom.attributes[axes[1]]
            rep.add_figure(
                f"Heatmap: {a0.name} x {a1.name}",
                pair_heatmap_figure(shown, hist.counts, dom, axes, (20, 16), "true vs released"),
                "Counts summed over the other attributes (a block of several values: its mean "
                "count per cell); same colour scale in every panel.",
            )
    guarantees = "\n\n".join(f"[{n}]\n{r.guarantee.describe()}" for n, r in releases.items())
    rep.add_preformatted("Guarantees of the central releases", guarantees)


def _widest_other(dom: Any, axis: int) -> int:
    sizes = [a.size if i != axis else -1 for i, a in enumerate(dom.attributes)]
    return int(np.argmax(sizes))


def _ldp_section(rep: Report, part: dict[str, Any], s: dict[str, Any], epsilon: float) -> None:
    rels = part["releases"]
    rep.add_text(
        "2. Local differential privacy: Adult's ordinal attributes",
        "No trusted curator: each person randomises their own record on their own device and "
        "sends one noisy report. The server combines the reports into a release that answers "
        "multi-dimensional range queries. HDG (Hybrid-Dimensional Grids) is compared with the "
        "baselines TDG, CALM, HIO, MSW and Uni (the uniform guess).",
    )
    if rels:
        name, first = next(iter(rels.items()))
        rep.add_text(
            f"The guarantee in plain words (local DP, {name.upper()})",
            plain_text(first.guarantee),
        )
    rep.add_table(s["title"], s["header"], s["rows"], caption="Mean absolute error in people.")
    rep.add_figure(
        "Error vs epsilon (local DP)",
        error_vs_epsilon_figure(
            part["epsilons"],
            part["curves"],
            "Local DP: MAE of 2-D range queries vs epsilon",
            "MAE (people)",
        ),
        "Each point is a fresh collection from all users at that epsilon (CALM, the slowest to "
        "aggregate, only at the demo's epsilon: see the table).",
    )
    dom = part["domain"]
    shown = {f"{n.upper()} (released)": rels[n] for n in ("hdg", "msw") if n in rels}
    a0, a1 = dom.attributes[0], dom.attributes[1]
    rep.add_figure(
        f"Heatmap: {a0.name} x {a1.name} under local DP",
        pair_heatmap_figure(
            shown,
            part["hist"].counts,
            dom,
            (0, 1),
            (24, 20),
            f"true vs estimated (epsilon = {epsilon:g})",
        ),
        "HDG keeps the joint shape; MSW multiplies one-dimensional estimates and loses it.",
    )


def _blowfish_section(
    rep: Report, plt: Any, part: dict[str, Any], s: dict[str, Any], epsilon: float
) -> None:
    rep.add_text(
        "3. Blowfish privacy: k-means of locations",
        "Blowfish lets the publisher say which secrets matter. Here the points are people's "
        "locations on a 400 x 300 grid; the policy 'distance:theta=20' protects whether a "
        "person is at one place or another within 20 cells (their neighbourhood), but not "
        "which side of the country they live on. The partition policy protects the location "
        "within each 40 x 30 block. Ordinary epsilon-DP (the Laplace baseline) protects "
        "everything and needs the most noise.",
    )

    for label, g in part["guarantees"].items():
        if g.model == "blowfish":
            rep.add_text(f"The guarantee in plain words (Blowfish: {label})", plain_text(g))
            break
    rep.add_table(
        s["title"],
        s["header"],
        s["rows"],
        caption="S(q_size), S(q_sum): the policy-specific sensitivities the noise uses.",
    )
    rep.add_figure(
        "Objective ratio vs epsilon (k-means)",
        error_vs_epsilon_figure(
            part["epsilons"],
            part["curves"],
            "k-means: private / non-private objective vs epsilon",
            "objective ratio (1 = perfect)",
        ),
        "Median over repeated fits. Every fit starts from the same public, data-independent "
        "centres, so the differences come from the noise.",
    )
    fig = centres_map_figure(
        part["X"], part["centres"], f"k-means centres at epsilon = {epsilon:g}", (399, 299)
    )
    rep.add_figure("k-means centres on the map", fig)
    rep.add_preformatted(
        "Guarantees of the k-means fits",
        "\n\n".join(f"[{n}]\n{g.describe()}" for n, g in part["guarantees"].items()),
    )


def _graph_section(rep: Report, part: dict[str, Any], s: dict[str, Any]) -> None:
    rels = part["releases"]
    rep.add_text(
        "4. Node and edge differential privacy: triangles in a social graph",
        "A triangle is three people who all know each other; its count measures how clustered "
        "a community is. Under node privacy a person and all their links are hidden; under "
        "edge privacy one link at a time. The Recursive Mechanism calibrates the noise to how "
        "much the count could change, privately, without a public bound on anybody's degree.",
    )
    for unit in ("node", "edge"):
        rel = next((r for k, r in rels.items() if k.endswith(f"({unit})")), None)
        if rel is not None:
            rep.add_text(f"The guarantee in plain words ({unit} DP)", plain_text(rel.guarantee))
    rep.add_table(s["title"], s["header"], s["rows"])
    rep.add_figure(
        "Error vs epsilon (graphs)",
        error_vs_epsilon_figure(
            part["epsilons"],
            part["curves"],
            "Triangle count: relative error vs epsilon",
            "relative error",
        ),
        "One release per epsilon (the error of a single run varies). Node privacy protects far "
        "more and so costs more accuracy on small graphs.",
    )
    rep.add_preformatted(
        "Guarantees of the graph releases",
        "\n\n".join(f"[{n}]\n{r.guarantee.describe()}" for n, r in rels.items()),
    )
