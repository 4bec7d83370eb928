"""``fugu demo``: every cube mechanism on the bundled Adult data, side by side, with a report."""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from .datasets import adult, adult_domain
from .histogram import Histogram
from .noise import RandomSource
from .queries import mae, random_workload, relative_error, rmse


@dataclass
class DemoResult:
    epsilon: float
    n_records: int
    domain: str
    rows: list[dict[str, Any]] = field(default_factory=list)
    examples: list[dict[str, Any]] = field(default_factory=list)
    report: str | None = None
    private: bool = True

    def to_dict(self) -> dict[str, Any]:
        return {"epsilon": self.epsilon, "n_records": self.n_records, "domain": self.domain,
                "mechanisms": self.rows, "examples": self.examples, "report": self.report}

    def text(self) -> str:
        from .cli._common import table

        lines = [f"Adult ({self.n_records:,} records) over {self.domain}, epsilon = {self.epsilon:g}"]
        if not self.private:
            lines.append("(seeded run: reproducible, NOT private)")
        lines.append("")
        lines.append(table(
            [[r["mechanism"], r["model"], r["mae"], r["rmse"], r["mean_relative_error"], r["expected_rmse"] if r["expected_rmse"] is not None else "-", r["seconds"]] for r in self.rows],
            ["mechanism", "model", "MAE", "RMSE", "rel. error", "expected RMSE", "seconds"],
        ))
        if self.examples:
            lines.append("")
            names = [r["mechanism"] for r in self.rows]
            lines.append(table([[e["query"], e["true"], *[e[n] for n in names]] for e in self.examples], ["query", "true", *names]))
        if self.report:
            lines.append("")
            lines.append(f"report: {self.report}")
        return "\n".join(lines)


def run_demo(
    epsilon: float = 1.0,
    n_queries: int = 1000,
    attributes: list[str] | None = None,
    seed: int | None = None,
    report_path: str | Path | None = "fugu-report.html",
) -> DemoResult:
    """Release the Adult cube with every registered mechanism and compare errors on one workload."""
    from .cli import _load_models
    from .cli._common import MECHANISMS

    _load_models()
    dom = adult_domain(attributes or ["age", "sex", "occupation", "income"])
    hist = Histogram.from_records(adult(), dom)
    n = hist.total()
    workload = random_workload(dom, n_queries, n_predicates=(1, dom.ndim), seed=0 if seed is None else seed)
    truth = workload.answer(hist.counts, dom)
    sanity = max(1.0, 0.001 * n)
    result = DemoResult(epsilon=epsilon, n_records=n, domain=", ".join(f"{a.name}[{a.size}]" for a in dom.attributes),
                        private=seed is None)
    answers: dict[str, np.ndarray] = {}
    releases: dict[str, Any] = {}
    for name, entry in sorted(MECHANISMS.items()):
        if not entry.in_demo:
            continue
        rng = RandomSource(seed=seed) if seed is not None else None
        t0 = time.perf_counter()
        rel = entry.run(hist, epsilon, dict(entry.demo_options), rng)
        est = rel.answer_many(workload)
        secs = time.perf_counter() - t0
        expected = [rel.expected_error(q) for q in workload]
        exp_rmse = None if any(e is None for e in expected) else float(np.sqrt(np.mean(np.square(expected))))
        answers[name] = est
        releases[name] = rel
        result.rows.append({
            "mechanism": name, "model": entry.model, "mae": mae(est, truth), "rmse": rmse(est, truth),
            "mean_relative_error": float(np.mean(relative_error(est, truth, sanity))),
            "expected_rmse": exp_rmse, "seconds": round(secs, 3),
        })
    for i in range(min(5, len(workload))):
        ex: dict[str, Any] = {"query": str(workload[i]), "true": float(truth[i])}
        ex.update({name: float(a[i]) for name, a in answers.items()})
        result.examples.append(ex)
    if report_path:
        from .report.demo_report import write_demo_report

        result.report = str(write_demo_report(result, hist, workload, truth, answers, releases, report_path))
    return result
