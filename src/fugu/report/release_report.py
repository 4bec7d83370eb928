"""The HTML report of saved releases (``fugu report RELEASE(S)``).

For every release: the guarantee in plain words, its parameters, the expected error of a random
workload of range queries (when the release answers range queries and knows its error), a
heatmap of the two widest attributes, and — when the publisher passes the true data — released
against true answers. Across releases: predicted error against ε (the noise of central and
Blowfish releases scales as 1/ε; of local-DP frequency oracles as e^(ε/2)/(e^ε − 1)), with the
measured error of each release at its own ε when the truth is known.

Only released values, public parameters and (optionally) the publisher's own true counts enter
the report; it is written for the publisher. Do not publish a report that shows true values.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from functools import partial
from pathlib import Path
from typing import Any

import numpy as np

from ..queries import mae, random_workload, rmse
from . import Report
from .demo_report import pair_heatmap_figure
from .plain import plain_text
from .plots import (
    error_vs_epsilon_figure,
    expected_error_figure,
    residual_figure,
)

__all__ = ["write_release_report", "noise_scale"]

EPSILON_GRID = (0.1, 0.2, 0.5, 1.0, 2.0, 4.0)

#: What the title of a report that shows true values says.
PUBLISHER_ONLY = "publisher only: shows true values, not for release"


def noise_scale(model: str, epsilon: float) -> float | None:
    """How the noise's standard deviation grows as ε shrinks, up to a constant (None: unknown).

    Central and Blowfish releases add noise of scale S/ε. Local-DP frequency oracles (OLH,
    OUE) have variance ∝ e^ε/(e^ε − 1)² per user (Wang et al. 2017), so sd ∝ e^(ε/2)/(e^ε − 1).
    Graph releases calibrate to data-dependent quantities: no simple law.

    >>> noise_scale("central-dp", 0.5) / noise_scale("central-dp", 1.0)
    2.0
    """
    if model in ("central-dp", "blowfish"):
        return 1.0 / epsilon
    if model == "ldp":
        return math.exp(epsilon / 2) / math.expm1(epsilon)
    return None


def _safe(fn: Callable[[], Any]) -> Any:
    try:
        return fn()
    except Exception:  # a release kind that cannot do this step is shown without it
        return None


def write_release_report(
    releases: Sequence[tuple[str, Any]],
    path: str | Path,
    *,
    truth: Callable[[Any], np.ndarray | None] | None = None,
    n_queries: int = 500,
    seed: int = 0,
    title: str | None = None,
    progress: bool = False,
) -> Path:
    """Write one self-contained HTML report about ``releases`` ((label, Release) pairs).

    ``truth(domain)`` returns the publisher's true dense counts over a release's domain (or
    None); it enables the true-vs-released comparisons. An error it raises (the data cannot be
    read, or do not fit a release's domain) is raised again naming the release, and no report
    is written. The query workload uses public randomness seeded by ``seed``.
    """
    rep = Report(
        (title or f"fugu report: {len(releases)} release(s)")
        + (f" ({PUBLISHER_ONLY})" if truth is not None else "")
    )
    rep.add_text(
        "What this is",
        "A description of each release: what its guarantee means, how accurate its answers are "
        "expected to be, and what it looks like. "
        + (
            "True values are shown because the publisher supplied the data: this report is for "
            "the publisher and must not be published with them."
            if truth is not None
            else "No true data was given, so every number here is either released or predicted."
        ),
        note=truth is not None,
    )
    rows = []
    for label, rel in releases:
        g = rel.guarantee
        rows.append(
            [
                label,
                rel.kind,
                g.model,
                g.mechanism,
                f"{float(g.epsilon):g}",  # as a float cell it showed 0.125 as 0.12
                g.neighbours,
                "yes" if g.private else "NO (seeded)",
            ]
        )
    rep.add_table(
        "Releases",
        ["release", "kind", "model", "mechanism", "epsilon", "neighbours", "private"],
        rows,
    )
    curves: dict[str, list[float]] = {}
    measured: dict[str, tuple[float, float]] = {}
    all_truth: dict[str, np.ndarray] = {}
    all_answers: dict[str, np.ndarray] = {}
    items: Any = releases
    if progress:
        import sys

        from tqdm import tqdm

        items = tqdm(releases, desc="fugu report", unit="release", file=sys.stderr, leave=False)
    for label, rel in items:
        g = rel.guarantee
        rep.add_text(f"{label}: the guarantee in plain words", plain_text(g))
        rep.add_preformatted(f"{label}: the guarantee as recorded", g.describe())
        params = dict(g.parameters)
        if params:
            rep.add_table(
                f"{label}: parameters",
                ["parameter", "value"],
                [[k, _short(v)] for k, v in params.items()],
            )
        dom = rel.domain
        if dom is None:
            _scalar_section(rep, label, rel)
            continue
        true_counts = _true_counts(truth, dom, label) if truth is not None else None
        wl = _safe(
            partial(random_workload, dom, n_queries, n_predicates=(1, min(dom.ndim, 3)), seed=seed)
        )
        est = _safe(partial(rel.answer_many, wl)) if wl is not None else None
        if est is None:
            rep.add_text(f"{label}: answers", "This release does not answer range queries.")
            continue
        exp = _safe(partial(_expected, rel, wl))
        if exp is not None and not np.all(np.isfinite(exp)):
            exp = None
        t = wl.answer(true_counts, dom) if true_counts is not None else None
        stats = [["queries", len(wl)]]
        if exp is not None:
            stats.append(
                ["expected RMSE (root mean square over queries)", float(np.sqrt(np.mean(exp**2)))]
            )
            stats.append(["median expected RMSE", float(np.median(exp))])
        if t is not None:
            stats.append(["measured MAE (publisher only)", mae(est, t)])
            stats.append(["measured RMSE (publisher only)", rmse(est, t)])
            measured[label] = (float(g.epsilon), rmse(est, t))
            all_truth[label] = t
            all_answers[label] = est
        rep.add_table(f"{label}: accuracy on {len(wl)} random range queries", ["", "value"], stats)
        if exp is not None:
            rep.add_table(
                f"{label}: expected error per query (first 10)",
                ["query", "released answer", "expected error (RMSE)"]
                + (["true (publisher only)"] if t is not None else []),
                [
                    [str(wl[i]), float(est[i]), float(exp[i])]
                    + ([float(t[i])] if t is not None else [])
                    for i in range(min(10, len(wl)))
                ],
            )
            rep.add_figure(
                f"{label}: expected error per query",
                expected_error_figure(
                    exp, None if t is None else est - t, f"Expected error per query: {label}"
                ),
                "The line is the predicted RMSE of each query, before looking at the data.",
            )
            scale = noise_scale(g.model, float(g.epsilon))
            if scale is not None:
                base = float(np.sqrt(np.mean(exp**2))) / scale
                curves[label] = [base * (noise_scale(g.model, e) or 0.0) for e in EPSILON_GRID]
        if dom.ndim >= 2:
            sizes = [a.size for a in dom.attributes]
            order = sorted(range(dom.ndim), key=lambda i: -sizes[i])
            axes = (min(order[:2]), max(order[:2]))
            a0, a1 = dom.attributes[axes[0]], dom.attributes[axes[1]]
            rep.add_figure(
                f"{label}: heatmap {a0.name} x {a1.name}",
                pair_heatmap_figure(
                    {f"{label} (released)": rel}, true_counts, dom, axes, (24, 24), label
                ),
                "Counts summed over the other attributes; a block of several values shows "
                "its mean count per cell (see the colour bar).",
            )
        elif dom.ndim == 1:
            _one_d_figure(rep, label, rel, true_counts)
    if curves:
        fig = error_vs_epsilon_figure(
            EPSILON_GRID, curves, "Predicted error vs epsilon", "expected RMSE (records)"
        )
        ax = fig.axes[0]
        for label, (e, m) in measured.items():
            ax.scatter([e], [m], marker="*", s=120, color="black", zorder=5)
            ax.annotate(
                f"measured: {label}", (e, m), fontsize=7, xytext=(4, 4), textcoords="offset points"
            )
        rep.add_figure(
            "Error vs epsilon",
            fig,
            "Lines: this release's expected error rescaled to other epsilons by how "
            "its noise scales (a prediction; re-releasing costs budget). Stars: "
            "measured error at the release's own epsilon (publisher only).",
        )
    if all_answers:
        rep.add_figure(
            "Error of the released answers",
            residual_figure(all_truth, all_answers),
            "Each dot is one range query: its released minus its true answer, against the true "
            "answer (publisher only). The orange line is no error; panels share the error scale.",
        )
    return rep.save(path)


def _true_counts(truth: Callable[[Any], Any], dom: Any, label: str) -> Any:
    """The publisher's true counts over ``dom``; a failure is an error naming the release.

    It was swallowed: a report asked for with the true data (a missing file, data that do not
    fit the release's domain) came out titled "publisher only" with no comparison at all.
    """
    from ..errors import FuguError, InvalidParameterError

    why = "; give the data the release was made from, or leave out the true data"
    try:
        return truth(dom)
    except FuguError as exc:
        raise type(exc)(f"the true data for {label}: {exc}{why}") from None
    except (OSError, ValueError, TypeError) as exc:
        raise InvalidParameterError(f"the true data for {label}: {exc}{why}") from None


def _expected(rel: Any, wl: Any) -> np.ndarray:
    return np.array([rel.expected_error(q) for q in wl], dtype=float)


def _one_d_figure(rep: Report, label: str, rel: Any, true_counts: np.ndarray | None) -> None:
    """The released (and true) counts of a 1-D release along its values.

    Up to 200 values get one step each; a longer domain is shown in 64 bins as the mean count
    per value of each bin (bins of unequal width, 74 ages in 64 bins of 1 or 2, drew every
    2-value bin as a spike twice as high). The x axis is ticked with the attribute's values (it
    showed codes 0..n-1 as 'age (code)' while the heatmaps show values).
    """
    from . import matplotlib_agg
    from .plots import PALETTE, coarse_grid_bounds

    dom = rel.domain
    attr = dom.attributes[0]
    plt = matplotlib_agg()
    n = dom.shape[0]
    bounds, edges = coarse_grid_bounds((n, 1), (0, 1), (n if n <= 200 else 64, 1))
    bounds = bounds[:, :1, :]
    e = edges[0]
    widths = np.diff(e).astype(np.float64)
    fig, ax = plt.subplots(figsize=(7, 3.2))
    x = np.arange(len(e))  # bin i spans [x[i], x[i + 1]); the last value is repeated to close it

    def steps(counts: Any) -> np.ndarray:
        per_value = np.asarray(counts, dtype=np.float64) / widths
        return np.append(per_value, per_value[-1])

    if true_counts is not None:
        from ..queries import PrefixSums

        ax.step(
            x,
            steps(PrefixSums(true_counts).answer(bounds)),
            where="post",
            color=PALETTE[1],
            label="true (publisher only)",
        )
    ax.step(x, steps(rel._answer_bounds(bounds)), where="post", color=PALETTE[0], label="released")
    labels = [str(v) for v in attr.labels]
    ticks = np.unique(np.linspace(0, len(e) - 2, min(len(e) - 1, 10)).round().astype(int))
    ax.set_xticks(ticks + 0.5, [labels[int(e[t])] for t in ticks], rotation=45, ha="right")
    ax.set_title(f"Released distribution of {attr.name}: {label}")
    ax.set_xlabel(attr.name)
    ax.set_ylabel("count" if widths.max() == 1 else "count per value (mean over a bin)")
    ax.legend(fontsize=8)
    rep.add_figure(f"{label}: distribution", fig)


def _scalar_section(rep: Report, label: str, rel: Any) -> None:
    rows = []
    value = _safe(lambda: rel.answer())
    if value is not None:
        rows.append(["released value", float(value)])
    err = _safe(lambda: rel.expected_error())
    rows.append(["expected error (RMSE)", "unknown (data-dependent)" if err is None else err])
    for attr in ("statistic", "delta_hat", "noise_std"):
        v = getattr(rel, attr, None)
        if v is not None:
            rows.append([attr, v])
    rep.add_table(f"{label}: released value", ["", "value"], rows)


def _short(v: Any) -> str:
    s = str(v)
    return s if len(s) <= 120 else s[:117] + "..."
