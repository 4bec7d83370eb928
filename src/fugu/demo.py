"""``fugu demo``: the four privacy models on bundled data, side by side, with one HTML report.

1. **Central DP** — the Adult cube (age × sex × occupation × income by default) released by every
   registered cube mechanism; range-query error, error vs ε, true vs released heatmaps.
2. **Local DP** — Adult's ordinal attributes (age, hours per week, capital gain) collected from
   every person under ε-LDP with HDG and the baselines (TDG, CALM, HIO, MSW, Uni).
3. **Blowfish** — private k-means of generated geo points on a 400 × 300 grid, under ε-DP
   (the Laplace baseline) and under Blowfish distance-threshold and partition policies.
4. **Node / edge DP** — triangle counts of networkx's karate-club and Les Misérables graphs by
   the Recursive Mechanism under node and edge privacy.

Everything is computed in one process from data that ships with fugu and networkx: no
downloads. With ``seed=None`` every release uses the secure random source; with a seed the run
is reproducible and every release says NOT PRIVATE.
"""

from __future__ import annotations

import math
import sys
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from .datasets import adult, adult_domain
from .histogram import Histogram
from .noise import RandomSource
from .queries import mae, random_workload, relative_error, rmse

__all__ = ["DemoResult", "MODELS", "run_demo", "geo_points"]

MODELS = ("central", "ldp", "blowfish", "graph")
LDP_METHODS = ("hdg", "tdg", "calm", "hio", "msw", "uni")
LDP_ATTRIBUTES = ("age", "hours_per_week", "capital_gain")


@dataclass
class DemoResult:
    """What ``fugu demo`` measured. ``rows``/``examples`` are the central-DP table (as before);
    ``sections`` holds one table per privacy model; ``figures`` the data behind each plot."""

    epsilon: float
    n_records: int
    domain: str
    rows: list[dict[str, Any]] = field(default_factory=list)
    examples: list[dict[str, Any]] = field(default_factory=list)
    report: str | None = None
    private: bool = True
    sections: list[dict[str, Any]] = field(default_factory=list)
    figures: dict[str, Any] = field(default_factory=dict)
    seconds: float = 0.0
    timings: dict[str, float] = field(default_factory=dict)

    def __repr__(self) -> str:
        models = [s["model"] for s in self.sections]
        flag = "" if self.private else " NOT PRIVATE"
        return (
            f"<DemoResult {models} ε={self.epsilon:g} records={self.n_records:,} "
            f"report={self.report!r} {self.seconds:.1f} s{flag}>"
        )

    def to_dict(self) -> dict[str, Any]:
        return {
            "epsilon": self.epsilon,
            "n_records": self.n_records,
            "domain": self.domain,
            "mechanisms": self.rows,
            "examples": self.examples,
            "sections": [
                {"model": s["model"], "title": s["title"], "header": s["header"], "rows": s["rows"]}
                for s in self.sections
            ],
            "report": self.report,
            "private": self.private,
            "seconds": round(self.seconds, 2),
        }

    def text(self) -> str:
        from .cli._common import table

        lines: list[str] = []
        if not self.private:
            lines.append("(seeded run: reproducible, NOT private)")
        for s in self.sections:
            lines.append("")
            lines.append(s["title"])
            lines.append(table(s["rows"], s["header"]))
            if s.get("note"):
                lines.append(s["note"])
        if self.examples:
            lines.append("")
            names = [r["mechanism"] for r in self.rows]
            lines.append(
                table(
                    [[e["query"], e["true"], *[e[n] for n in names]] for e in self.examples],
                    ["query", "true", *names],
                )
            )
        if self.report:
            lines.append("")
            lines.append(f"report: {self.report}")
        return "\n".join(lines).lstrip("\n")


# -- helpers --------------------------------------------------------------------------------------
def _rng(seed: int | None, offset: int) -> RandomSource | None:
    return None if seed is None else RandomSource(seed=seed + offset)


#: What ``fugu demo`` says it is doing, per model.
STEP_TEXT = {
    "central": "central DP: the Adult cube by every cube mechanism, errors vs epsilon",
    "ldp": "local DP: HDG and the baselines on Adult's ordinal attributes",
    "blowfish": "Blowfish: private k-means of generated geo points under three policies",
    "graph": "node and edge DP: triangle counts (the Recursive Mechanism's linear programs)",
}


def _steps(
    names: Sequence[str], progress: bool, log: Callable[[str], None] | None
) -> Iterator[str]:
    """Yield each model; say what it is (``log``) and show a bar on a terminal (``progress``)."""
    bar: Any = None
    if progress:
        from tqdm import tqdm

        bar = tqdm(total=len(names), desc="fugu demo", unit="model", file=sys.stderr, leave=False)
    for i, name in enumerate(names, 1):
        t0 = time.perf_counter()
        line = f"[{i}/{len(names)}] {STEP_TEXT[name]} ..."
        if bar is not None:
            bar.set_postfix_str(name)
            bar.write(line, file=sys.stderr)
        elif log is not None:
            log(line)
        yield name
        done = f"[{i}/{len(names)}] {name} done in {time.perf_counter() - t0:.1f} s"
        if bar is not None:
            bar.update(1)
            bar.write(done, file=sys.stderr)
        elif log is not None:
            log(done)
    if bar is not None:
        bar.close()


def geo_points(n: int = 20_000, seed: int = 7) -> tuple[np.ndarray, Any]:
    """Seeded geo-like points on a 400 × 300 grid (12 'cities' of different sizes and spreads).

    A stand-in for the Blowfish paper's Twitter locations that needs no download. Returns the
    (n, 2) integer points and their :class:`~fugu.Domain` (``x`` 0..399, ``y`` 0..299).
    """
    from .domain import Domain, Ordinal

    gen = np.random.default_rng(seed)
    centres = gen.uniform([20, 20], [380, 280], (12, 2))
    spread = gen.uniform(5, 25, 12)
    weights = gen.dirichlet(np.full(12, 0.8))
    lab = gen.choice(12, n, p=weights)
    pts = centres[lab] + gen.normal(0.0, 1.0, (n, 2)) * spread[lab, None]
    pts = np.clip(np.rint(pts), [0, 0], [399, 299])
    return pts, Domain([Ordinal("x", 0, 399), Ordinal("y", 0, 299)])


def _lloyd(X: np.ndarray, k: int, seed: int, restarts: int = 5, iters: int = 30) -> np.ndarray:
    """Non-private k-means (best of a few Lloyd runs): the yardstick for the objective ratio."""
    from .blowfish.kmeans import kmeans_objective

    gen = np.random.default_rng(seed)
    best, best_obj = None, math.inf
    for _ in range(restarts):
        c = X[gen.choice(len(X), k, replace=False)].astype(np.float64)
        for _ in range(iters):
            d = ((X[:, None, :] - c[None]) ** 2).sum(-1)
            lab = d.argmin(1)
            for j in range(k):
                m = lab == j
                if m.any():
                    c[j] = X[m].mean(0)
        obj = kmeans_objective(X, c)
        if obj < best_obj:
            best, best_obj = c.copy(), obj
    assert best is not None
    return best


# -- 1. central DP --------------------------------------------------------------------------------
def _central(
    res: DemoResult,
    epsilon: float,
    n_queries: int,
    attributes: Sequence[str],
    seed: int | None,
    epsilons: Sequence[float],
    reps: int,
) -> dict[str, Any]:
    from .cli import _load_models
    from .cli._common import MECHANISMS

    _load_models()
    dom = adult_domain(list(attributes))
    hist = Histogram.from_records(adult(), dom)
    n = hist.total()
    res.n_records = int(n)
    res.domain = ", ".join(f"{a.name}[{a.size}]" for a in dom.attributes)
    workload = random_workload(
        dom, n_queries, n_predicates=(1, dom.ndim), seed=0 if seed is None else seed
    )
    truth = workload.answer(hist.counts, dom)
    sanity = max(1.0, 0.001 * n)
    answers: dict[str, np.ndarray] = {}
    releases: dict[str, Any] = {}
    skipped: list[str] = []
    entries = [(name, e) for name, e in sorted(MECHANISMS.items()) if e.in_demo]
    for i, (name, entry) in enumerate(entries):
        t0 = time.perf_counter()
        try:
            rel = entry.run(hist, epsilon, dict(entry.demo_options), _rng(seed, i))
            est = rel.answer_many(workload)
        except Exception as exc:  # a mechanism that cannot take this cube is reported, not fatal
            skipped.append(f"{name}: {exc}")
            continue
        secs = time.perf_counter() - t0
        exp = _expected_rmse(rel, workload)
        answers[name] = est
        releases[name] = rel
        res.rows.append(
            {
                "mechanism": name,
                "model": entry.model,
                "mae": mae(est, truth),
                "rmse": rmse(est, truth),
                "mean_relative_error": float(np.mean(relative_error(est, truth, sanity))),
                "expected_rmse": exp,
                "seconds": round(secs, 3),
            }
        )
    for i in range(min(5, len(workload))):
        ex: dict[str, Any] = {"query": str(workload[i]), "true": float(truth[i])}
        ex.update({name: float(a[i]) for name, a in answers.items()})
        res.examples.append(ex)
    # error vs epsilon: every mechanism again at a few epsilons (same workload)
    curves: dict[str, list[float]] = {name: [] for name in answers}
    for j, eps in enumerate(epsilons):
        for i, name in enumerate(answers):
            entry = MECHANISMS[name]
            errs = []
            for r in range(reps):
                rng = _rng(seed, 100 + 100 * j + 10 * i + r)
                rel = entry.run(hist, eps, dict(entry.demo_options), rng)
                errs.append(rmse(rel.answer_many(workload), truth) ** 2)
            curves[name].append(float(np.sqrt(np.mean(errs))))
    res.sections.append(
        {
            "model": "central",
            "title": f"Central DP: Adult ({n:,} records) over {res.domain}, epsilon = {epsilon:g}, "
            f"{len(workload):,} random range queries",
            "header": [
                "mechanism",
                "model",
                "MAE",
                "RMSE",
                "rel. error",
                "expected RMSE",
                "seconds",
            ],
            "rows": [
                [
                    r["mechanism"],
                    r["model"],
                    r["mae"],
                    r["rmse"],
                    r["mean_relative_error"],
                    "-" if r["expected_rmse"] is None else r["expected_rmse"],
                    r["seconds"],
                ]
                for r in res.rows
            ],
            "note": ("skipped: " + "; ".join(skipped)) if skipped else "",
        }
    )
    return {
        "hist": hist,
        "workload": workload,
        "truth": truth,
        "answers": answers,
        "releases": releases,
        "epsilons": list(epsilons),
        "curves": curves,
        "skipped": skipped,
    }


def _expected_rmse(rel: Any, workload: Any) -> float | None:
    try:
        expected = [rel.expected_error(q) for q in workload]
    except Exception:
        return None
    if any(e is None for e in expected):
        return None
    return float(np.sqrt(np.mean(np.square(expected))))


# -- 2. local DP ----------------------------------------------------------------------------------
def _ldp(
    res: DemoResult,
    epsilon: float,
    seed: int | None,
    epsilons: Sequence[float],
    n_queries: int,
    methods: Sequence[str],
) -> dict[str, Any]:
    from . import ldp

    dom = adult_domain(list(LDP_ATTRIBUTES))
    cols = adult()
    records = {k: cols[k] for k in dom.names}
    hist = Histogram.from_records(records, dom)
    workload = random_workload(
        dom, n_queries, n_predicates=2, volume=0.5, seed=1 if seed is None else seed + 1
    )
    truth = workload.answer(hist.counts, dom)
    rows: list[list[Any]] = []
    releases: dict[str, Any] = {}
    curves: dict[str, list[float]] = {}
    eps_all = sorted(set(epsilons) | {epsilon})
    for i, name in enumerate(methods):
        cls = ldp.METHODS[name]
        curve = []
        # CALM is the slowest to aggregate: measured at the demo's epsilon only
        grid = [epsilon] if name == "calm" else eps_all
        for j, eps in enumerate(grid):
            t0 = time.perf_counter()
            rel = cls(dom, epsilon=eps).simulate(records, rng=_rng(seed, 200 + 10 * j + i))
            est = rel.answer_many(workload)
            secs = time.perf_counter() - t0
            curve.append(mae(est, truth))
            if eps == epsilon:
                releases[name] = rel
                rows.append([name.upper(), mae(est, truth), rmse(est, truth), round(secs, 3)])
        if len(grid) == len(eps_all):
            curves[name.upper()] = curve
    rows.sort(key=lambda r: r[1])
    res.sections.append(
        {
            "model": "ldp",
            "title": f"Local DP: Adult ordinal attributes ({', '.join(dom.names)}; "
            f"{int(hist.total()):,} users), epsilon = {epsilon:g}, "
            f"{len(workload)} random 2-D range queries (volume 0.5)",
            "header": ["method", "MAE", "RMSE", "seconds"],
            "rows": rows,
            "note": "Each user sends one randomised report; the server never sees a true value.",
        }
    )
    return {
        "hist": hist,
        "domain": dom,
        "releases": releases,
        "epsilons": eps_all,
        "curves": curves,
        "workload": workload,
        "truth": truth,
    }


# -- 3. Blowfish k-means --------------------------------------------------------------------------
def _blowfish(
    res: DemoResult, epsilon: float, seed: int | None, epsilons: Sequence[float], reps: int
) -> dict[str, Any]:
    from .blowfish.kmeans import KMeans, kmeans_objective

    X, dom = geo_points()
    k = 4
    base = kmeans_objective(X, _lloyd(X, k, seed=0))
    # Every fit starts from the same public, data-independent centres (a 2 x 2 layout of the
    # map), so the differences between policies come from the noise, not from the start.
    init = np.array([[100.0, 75.0], [300.0, 75.0], [100.0, 225.0], [300.0, 225.0]])
    policies: dict[str, str | None] = {
        "Laplace (epsilon-DP)": None,
        "Blowfish distance theta=20": "distance:theta=20",
        "Blowfish partition 40x30": "partition:x=40,y=30",
    }
    eps_all = sorted(set(epsilons) | {epsilon})
    curves: dict[str, list[float]] = {}
    rows: list[list[Any]] = []
    centres: dict[str, np.ndarray] = {}
    guarantees: dict[str, Any] = {}
    for i, (label, pol) in enumerate(policies.items()):
        curve = []
        for j, eps in enumerate(eps_all):
            ratios = []
            for r in range(reps):
                km = KMeans(
                    k,
                    epsilon=eps,
                    policy=pol,
                    domain=dom,
                    init=init,
                    rng=_rng(seed, 300 + 100 * i + 10 * j + r),
                ).fit(X)
                ratios.append(kmeans_objective(X, km.cluster_centers_) / base)
                if eps == epsilon and r == 0:
                    centres[label] = km.cluster_centers_
                    guarantees[label] = km.guarantee_
                    sens = km.sensitivity_
            med = float(np.median(ratios))
            curve.append(med)
            if eps == epsilon:
                rows.append(
                    [
                        label,
                        med,
                        float(np.min(ratios)),
                        float(np.max(ratios)),
                        sens["q_size"],
                        sens["q_sum"],
                    ]
                )
        curves[label] = curve
    res.sections.append(
        {
            "model": "blowfish",
            "title": f"Blowfish k-means: {len(X):,} generated geo points on a 400 x 300 grid, "
            f"k = {k}, "
            f"epsilon = {epsilon:g}, {reps} run{'s' if reps != 1 else ''} "
            "(objective / non-private objective; 1 is perfect)",
            "header": ["privacy", "median ratio", "best", "worst", "S(q_size)", "S(q_sum)"],
            "rows": rows,
            "note": "Blowfish protects the policy's secret pairs only. Partition: sizes are exact "
            "and sums need noise for one block's width, not the map's. Distance theta=20: "
            "a move across a cluster boundary still changes sums by up to the map's "
            "diameter, so the safe sensitivity (and the gain) is small.",
        }
    )
    return {
        "X": X,
        "centres": centres,
        "epsilons": eps_all,
        "curves": curves,
        "guarantees": guarantees,
    }


# -- 4. graphs ------------------------------------------------------------------------------------
def _graph(
    res: DemoResult, epsilon: float, seed: int | None, epsilons: Sequence[float], reps: int
) -> dict[str, Any]:
    import networkx as nx

    from .graph import count

    graphs = {"karate club": nx.karate_club_graph(), "Les Miserables": nx.les_miserables_graph()}
    eps_all = sorted(set(epsilons) | {epsilon})
    rows: list[list[Any]] = []
    curves: dict[str, list[float]] = {}
    releases: dict[str, Any] = {}
    for gi, (gname, G) in enumerate(graphs.items()):
        G = nx.Graph(G)
        true = sum(nx.triangles(G).values()) // 3
        for ui, unit in enumerate(("node", "edge")):
            curve = []
            for j, eps in enumerate(eps_all):
                errs = []
                for r in range(reps):
                    t0 = time.perf_counter()
                    rel = count(
                        G,
                        "triangle",
                        eps,
                        unit=unit,
                        rng=_rng(seed, 1000 + 100 * gi + 50 * ui + 10 * j + r),
                    )
                    secs = time.perf_counter() - t0
                    errs.append(abs(rel.value - true) / max(1, true))
                    if eps == epsilon and r == 0:
                        releases[f"{gname} ({unit})"] = rel
                        rows.append(
                            [
                                gname,
                                G.number_of_nodes(),
                                G.number_of_edges(),
                                true,
                                f"{unit}-DP",
                                rel.value,
                                round(secs, 3),
                            ]
                        )
                curve.append(float(np.median(errs)))
            curves[f"{gname}, {unit}-DP"] = curve
    res.sections.append(
        {
            "model": "graph",
            "title": f"Node and edge DP: triangle counts by the Recursive Mechanism, "
            f"epsilon = {epsilon:g}",
            "header": [
                "graph",
                "nodes",
                "edges",
                "true triangles",
                "privacy",
                "released",
                "seconds",
            ],
            "rows": rows,
            "note": "Node DP hides a whole person with all their links; edge DP one link.",
        }
    )
    return {"releases": releases, "epsilons": eps_all, "curves": curves}


# -- the demo -------------------------------------------------------------------------------------
def run_demo(
    epsilon: float = 1.0,
    n_queries: int = 1000,
    attributes: list[str] | None = None,
    seed: int | None = None,
    report_path: str | Path | None = "fugu-report.html",
    *,
    models: Sequence[str] = MODELS,
    quick: bool = False,
    progress: bool | None = None,
    log: Callable[[str], None] | None = None,
) -> DemoResult:
    """Run the demo for the chosen privacy models and (optionally) write the HTML report.

    ``quick`` shrinks repetitions and the ε grid (for tests). ``progress`` shows a bar on
    stderr (default: when stderr is a terminal). ``log`` receives one line per model as it
    starts and ends (``fugu demo`` prints them on stderr unless ``--quiet``).
    """
    from .errors import InvalidParameterError, check_epsilon

    epsilon = check_epsilon(epsilon)
    bad = [m for m in models if m not in MODELS]
    if bad or not models:
        raise InvalidParameterError(
            f"models must be a non-empty subset of {MODELS}, got {list(models)}"
        )
    if progress is None:
        progress = sys.stderr.isatty()
    t_start = time.perf_counter()
    epsilons = (0.25, 1.0, 4.0) if quick else (0.1, 0.25, 0.5, 1.0, 2.0, 4.0)
    reps = 1 if quick else 5
    res = DemoResult(epsilon=epsilon, n_records=0, domain="", private=seed is None)
    parts: dict[str, dict[str, Any]] = {}
    runners: dict[str, Callable[[], dict[str, Any]]] = {
        "central": lambda: _central(
            res,
            epsilon,
            n_queries,
            attributes or ["age", "sex", "occupation", "income"],
            seed,
            epsilons,
            1 if quick else 3,
        ),
        "ldp": lambda: _ldp(
            res,
            epsilon,
            seed,
            (0.5, 2.0) if quick else (0.5, 1.0, 2.0, 4.0),
            min(n_queries, 100 if quick else 300),
            LDP_METHODS,
        ),
        "blowfish": lambda: _blowfish(res, epsilon, seed, epsilons, reps),
        "graph": lambda: _graph(res, epsilon, seed, (0.5, 2.0) if quick else (0.5, 1.0, 2.0), 1),
    }
    for name in _steps([m for m in MODELS if m in models], progress, log):
        t0 = time.process_time()
        parts[name] = runners[name]()
        res.timings[name] = time.process_time() - t0
    res.figures = parts
    if report_path:
        from .report.demo_report import write_demo_report

        res.report = str(write_demo_report(res, parts, report_path).resolve())
    res.seconds = time.perf_counter() - t_start
    return res
