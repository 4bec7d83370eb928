"""The HTML report written by ``fugu demo``."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from . import Report, matplotlib_agg


def write_demo_report(result: Any, hist: Any, workload: Any, truth: np.ndarray, answers: dict[str, np.ndarray],
                      releases: dict[str, Any], path: str | Path) -> Path:
    plt = matplotlib_agg()
    rep = Report(f"fugu demo: Adult cube at epsilon = {result.epsilon:g}")
    rep.add_text(
        "What this is",
        f"The bundled UCI Adult data ({result.n_records:,} people) counted over {result.domain}, released "
        f"by every central mechanism fugu has, and {len(workload):,} random range queries answered "
        f"from each release. The true answers are shown because the publisher holds the data; a "
        f"reader of a release never sees them.",
    )
    if not result.private:
        rep.add_text("Not private", "This report was made with a fixed seed: reproducible, not private.", note=True)
    rep.add_table("Error per mechanism", ["mechanism", "model", "MAE", "RMSE", "mean relative error", "expected RMSE", "seconds"],
                  [[r["mechanism"], r["model"], r["mae"], r["rmse"], r["mean_relative_error"],
                    "-" if r["expected_rmse"] is None else r["expected_rmse"], r["seconds"]] for r in result.rows])
    names = [r["mechanism"] for r in result.rows]
    fig, ax = plt.subplots(figsize=(7, 3.2))
    ax.bar(names, [r["rmse"] for r in result.rows], color="#d35400")
    ax.set_ylabel("RMSE (records)")
    ax.set_title("Range-query error per mechanism")
    ax.tick_params(axis="x", rotation=20)
    rep.add_figure("Range-query error per mechanism", fig)
    fig, axes = plt.subplots(1, len(names), figsize=(3.2 * len(names), 3.2), squeeze=False)
    for ax, name in zip(axes[0], names, strict=True):
        ax.scatter(truth, answers[name], s=4, alpha=0.5, color="#2c3e50")
        lim = [float(min(truth.min(), answers[name].min())), float(max(truth.max(), answers[name].max()))]
        ax.plot(lim, lim, color="#d35400", lw=1)
        ax.set_title(f"True vs noisy answers: {name}")
        ax.set_xlabel("true")
        ax.set_ylabel("released")
    rep.add_figure("True vs released answers", fig)
    rep.add_preformatted("Guarantees", "\n\n".join(f"[{n}]\n{releases[n].guarantee.describe()}" for n in names))
    return rep.save(path)
