"""Benchmark of fugu.graph (Recursive Mechanism): accuracy and running time.

Run ``python bench/bench_graph.py`` (``--quick`` for a smaller run). Parts:

1. Figure 4 of Chen & Zhou (SIGMOD 2013) at |V| = 200, average degree 10, ε = 0.5: median
   relative error over R runs (a fresh seeded G(n, p) per run) for triangle, 2-star and 2-triangle
   under node and edge privacy, next to the paper's values (read from its plots, spec §6) and to
   the Laplace baseline with global sensitivity (edge DP) run in the same process.
2. Real graphs that ship offline: karate, Les Misérables (networkx), OpenFlights routes
   (bokeh_sampledata), Minnesota roads (pygsp, if installed): triangle counts, node and edge.
4. Figures 8 and 9 of the paper (generic K-relations): random 3-CNF (join of unions) and 3-DNF
   (union of joins) annotations, |P| = |supp R|, q ≡ 1, ε = 0.5 (the paper's reference line
   US~/(ε q) fits ε = 0.5), θ = 1, β = ε/5 and μ = 0.5 (the paper's stated setting, Sec. 6.1,
   which uses μ = 1 only for node privacy; Sec. 6.2 states none). Fig. 8: |supp R| = 1,000 and
   2..10 clauses per tuple, Fig. 9: 3 clauses and |supp R| = 100..1,000. Annotations are kept
   as formulas (one LP column per gate). ``--relations`` seeded relations per cell, R noise runs
   each reusing the relation's LP model; metric: median relative error over all runs (the
   paper's); first-run time reported.
5. ``--parts mu``: median relative error against μ on Figures 8-9 cells (model-based: the
   library's LPs, thousands of (Y, Z) draws per μ), and at μ = 0.5 with ``g_factor`` = 1 (G
   without the factor 2 of eq. 19, as R2T's implementation). ``--mus`` picks the μ values and
   ``--sizes`` the cells. ``--g-factor`` sets the factor of G for the Figures 8-9 part (releases
   through ``recursive_mechanism``; default 2, the paper's algorithm).
3. Running time vs number of occurrences (triangles, node privacy) on seeded collaboration-like
   graphs, up to the ca-GrQc shape (≈5,000 nodes, ≈14,500 edges, ≈48,000 triangles in the real
   graph): enumeration time, number of LPs, time per LP, total. ``--max-occ`` caps the sizes tried
   and ``--lp-time-limit`` stops a run whose LP exceeds the limit (reported as such).
"""

from __future__ import annotations

import argparse
import itertools
import math
import time

import networkx as nx
import numpy as np
from numpy.typing import NDArray

import fugu
from fugu.graph import (
    RecursiveParameters,
    count,
    count_occurrences,
    laplace_count,
    recursive_mechanism,
    smooth_triangle_count,
)
from fugu.graph.lp import LPModel, SolverError
from fugu.graph.patterns import annotations_of, enumerate_pattern

PAPER_FIG4_V200 = {  # spec §6, Fig. 4(a) at |V| = 200 (read from the plots, ±3%)
    ("triangle", "node"): 0.16,
    ("triangle", "edge"): 0.079,
    ("2-star", "node"): 0.65,
    ("2-star", "edge"): 0.014,
    ("2-triangle", "node"): 0.34,
    ("2-triangle", "edge"): 0.25,
}
PAPER_LOCAL_SENS = {"triangle": 0.52, "2-star": 0.062, "2-triangle": 59}


def rel_err(est: float, truth: float) -> float:
    return abs(est - truth) / max(truth, 1e-12)


def figure4(
    runs: int,
    queries: tuple[str, ...] = ("triangle", "2-star", "2-triangle"),
    n: int = 200,
    avgdeg: float = 10.0,
    eps: float = 0.5,
    units: tuple[str, ...] = ("node", "edge"),
) -> None:
    print(
        f"\n== Figure 4 setting: G(n={n}, p={avgdeg / (n - 1):.4f}), eps={eps}, {runs} runs per cell =="  # noqa: E501
    )
    print(
        f"{'query':<11}{'unit':<6}{'fugu RM':>9}{'paper RM':>10}{'Laplace GS':>12}{'fugu SS':>9}"
        f"{'Karwa':>9}{'paper LS':>10}{'RM s/run':>10}{'occ':>8}"
    )
    for query in queries:
        for unit in units:
            errs, lap, smooth, karwa, secs, occs = [], [], [], [], [], []
            for r in range(runs):
                G = nx.gnp_random_graph(n, avgdeg / (n - 1), seed=1000 + r)
                truth = count_occurrences(G, query)
                rng = fugu.RandomSource(seed=r)
                t0 = time.perf_counter()
                rel = count(G, query, eps, unit=unit, rng=rng)
                secs.append(time.perf_counter() - t0)
                errs.append(rel_err(rel.value, truth))
                occs.append(truth)
                if unit == "edge":
                    lap.append(
                        rel_err(laplace_count(G, query, eps, unit="edge", rng=rng).value, truth)
                    )
                    if query == "triangle":
                        smooth.append(rel_err(smooth_triangle_count(G, eps, rng=rng).value, truth))
                    else:  # Karwa et al.: 2-star eps-DP, 2-triangle (eps, delta = 0.1) as the paper
                        kw = {"delta": 0.1} if "triangle" in query else {}
                        est = count(
                            G, query, eps, unit="edge", mechanism="karwa", rng=rng, **kw
                        ).value
                        karwa.append(rel_err(est, truth))
            lap_s = f"{np.median(lap):12.3g}" if lap else f"{'(node: n/a)':>12}"
            ls = f"{PAPER_LOCAL_SENS[query]:10.3g}" if unit == "edge" else f"{'':>10}"
            ss = f"{np.median(smooth):9.3f}" if smooth else f"{'':>9}"
            kw_s = f"{np.median(karwa):9.3g}" if karwa else f"{'':>9}"
            print(
                f"{query:<11}{unit:<6}{np.median(errs):9.3f}{PAPER_FIG4_V200[(query, unit)]:10.3f}{lap_s}{ss}{kw_s}{ls}"  # noqa: E501
                f"{np.median(secs):10.2f}{int(np.median(occs)):8d}",
                flush=True,
            )
    print(
        "(fugu SS = smooth-sensitivity triangle count, pure eps-edge DP, NRS 2007, gamma=4; "
        "Karwa = Karwa et al. 2011 in fugu: 2-star eps-DP smooth sensitivity, 2-triangle "
        "(eps, delta=0.1)-DP; paper LS = the paper's local-sensitivity baselines, edge DP, with "
        "delta = 0.1 for 2-triangles)"
    )


def real_graphs(runs: int, lp_limit: float, max_occ: int) -> None:
    graphs: dict[str, nx.Graph] = {
        "karate": nx.karate_club_graph(),
        "lesmis": nx.Graph(nx.les_miserables_graph()),
    }
    try:
        from bokeh_sampledata.airport_routes import routes

        F = nx.Graph()
        F.add_edges_from(zip(routes["Source"], routes["Destination"], strict=True))
        F.remove_edges_from(list(nx.selfloop_edges(F)))
        graphs["openflights"] = F
    except Exception as exc:  # pragma: no cover - optional data
        print(f"(OpenFlights skipped: {exc})")
    try:
        import warnings

        import pygsp

        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            g = pygsp.graphs.Minnesota()
        M = nx.from_scipy_sparse_array(g.W)
        M.remove_edges_from(list(nx.selfloop_edges(M)))
        graphs["minnesota-roads"] = nx.Graph(M)
    except Exception as exc:
        print(f"(Minnesota roads skipped: {type(exc).__name__}: {exc})")
    print(f"\n== Real graphs: triangles, eps=0.5, median relative error over {runs} runs ==")
    print(
        f"{'graph':<16}{'|V|':>6}{'|E|':>7}{'tri':>7}{'RM node':>9}{'RM edge':>9}{'Laplace edge':>13}{'1st run s node':>15}{'1st run s edge':>15}"  # noqa: E501
    )
    for name, G in graphs.items():
        truth = count_occurrences(G, "triangle")
        if truth > max_occ:
            print(
                f"{name:<16}{G.number_of_nodes():6d}{G.number_of_edges():7d}{truth:7d}"
                "  (skipped: more triangles than --max-occ)"
            )
            continue
        row = {}
        for unit in ("node", "edge"):
            # one LP model per data set: j and the H values are deterministic given the data, so
            # runs after the first reuse them (each run still draws fresh Δ̂, solves its X program)
            ann = annotations_of(enumerate_pattern(G, "triangle"), unit)
            params = RecursiveParameters.make(0.5, mu=1.0 if unit == "node" else 0.5)
            model = LPModel(ann, time_limit=lp_limit)
            errs, secs = [], []
            try:
                for r in range(runs):
                    t0 = time.perf_counter()
                    x_hat, *_ = recursive_mechanism(
                        ann, params, fugu.RandomSource(seed=r), model=model
                    )
                    secs.append(time.perf_counter() - t0)
                    errs.append(rel_err(x_hat, truth))
            except SolverError as exc:
                print(f"({name} {unit}: stopped: {exc})")
                errs = errs or [float("nan")]
                secs = secs or [float("nan")]
            row[unit] = (np.median(errs), secs[0])
        lap = np.median(
            [
                rel_err(
                    laplace_count(G, "triangle", 0.5, "edge", rng=fugu.RandomSource(seed=r)).value,
                    truth,
                )
                for r in range(runs)
            ]
        )
        print(
            f"{name:<16}{G.number_of_nodes():6d}{G.number_of_edges():7d}{truth:7d}{row['node'][0]:9.3f}"
            f"{row['edge'][0]:9.3f}{lap:13.3g}{row['node'][1]:15.2f}{row['edge'][1]:15.2f}",
            flush=True,
        )


def collaboration_graph(n: int, n_cliques: int, seed: int) -> nx.Graph:
    """A seeded collaboration-like graph: powerlaw-cluster backbone plus dense 'paper' cliques.

    With n = 5242 and the default clique list it has the ca-GrQc shape (≈14,000 edges and tens of
    thousands of triangles, many inside a few large cliques, as in the real graph).
    """
    rng = np.random.default_rng(seed)
    G = nx.powerlaw_cluster_graph(n, 2, 0.6, seed=seed)
    sizes = [
        44,
        34,
        30,
        28,
        25,
        22,
        20,
        18,
        16,
        15,
        14,
        13,
        12,
        12,
        11,
        10,
        10,
        10,
        9,
        9,
        9,
        8,
        8,
        8,
    ][:n_cliques]
    nodes = np.array(list(G.nodes))
    deg = np.array([G.degree(v) for v in nodes], float)
    for s in sizes:
        members = rng.choice(nodes, size=min(s, n), replace=False, p=deg / deg.sum())
        G.add_edges_from(itertools.combinations(members.tolist(), 2))
    return G


def scaling(max_occ: int, lp_limit: float) -> None:
    print(
        f"\n== Node-DP triangle counting: time vs occurrences (Clarabel interior point; LP time limit {lp_limit:.0f} s) =="  # noqa: E501
    )
    print(
        f"{'|V|':>6}{'|E|':>7}{'triangles':>10}{'enum s':>8}{'LPs':>5}{'LP s total':>11}{'s/LP':>8}{'max LP s':>9}{'total s':>9}{'rel err':>8}"  # noqa: E501
    )
    configs = [(1000, 0), (3000, 0), (9000, 0), (27000, 0), (90000, 0), (5242, 24)]
    for n, nc in configs:
        G = (
            collaboration_graph(n, nc, seed=n)
            if nc
            else nx.powerlaw_cluster_graph(n, 3, 0.5, seed=n)
        )
        tri = count_occurrences(G, "triangle")
        if tri > max_occ:
            print(f"{n:6d}{G.number_of_edges():7d}{tri:10d}  (skipped: above --max-occ {max_occ})")
            continue
        trace: list = []
        t0 = time.perf_counter()
        try:
            rel = count(
                G,
                "triangle",
                0.5,
                unit="node",
                rng=fugu.RandomSource(seed=1),
                trace=trace,
                lp_time_limit=lp_limit,
            )
        except SolverError as exc:
            print(
                f"{n:6d}{G.number_of_edges():7d}{tri:10d}  stopped after {time.perf_counter() - t0:.0f} s: {exc}"  # noqa: E501
            )
            continue
        total = time.perf_counter() - t0
        tr = trace[0]
        times = [t for _, t in tr.lp_times]
        print(
            f"{n:6d}{G.number_of_edges():7d}{tri:10d}{tr.enumeration_seconds:8.2f}{tr.n_lps:5d}{tr.lp_seconds:11.1f}"
            f"{tr.lp_seconds / max(tr.n_lps, 1):8.2f}{max(times, default=0):9.1f}{total:9.1f}{rel_err(rel.value, tri):8.3f}",  # noqa: E501
            flush=True,
        )
    print(
        "paper (real ca-GrQc, 48,260 triangles): 3,940 s node, 54,236 s edge; target here: < 120 s"
    )


PAPER_FIG8 = {  # spec §6: |supp R| = 1000, clauses 2, 4, 6, 8, 10
    "dnf": {"err": [0.095, 0.15, 0.18, 0.20, 0.31], "time": [99, 1270, 3620, 4920, 5440]},
    "cnf": {"err": [0.12, 0.14, 0.13, 0.11, 0.14], "time": [11, 275, 1270, 2960, 4310]},
    "ref": [0.028, 0.048, 0.066, 0.082, 0.096],
}
PAPER_FIG9 = {  # spec §6: 3 clauses, |supp R| = 100 .. 1000
    "dnf": {
        "err": [0.16, 0.26, 0.17, 0.16, 0.18, 0.17, 0.13, 0.13, 0.12, 0.12],
        "time": [1.4, 5.0, 12, 29, 55, 105, 165, 269, 369, 562],
    },
    "cnf": {
        "err": [0.17, 0.29, 0.20, 0.18, 0.20, 0.19, 0.14, 0.15, 0.13, 0.14],
        "time": [2.2, 6.6, 11, 16, 23, 26, 28, 31, 41, 48],
    },
    "ref": [0.34, 0.19, 0.13, 0.095, 0.072, 0.060, 0.057, 0.048, 0.042, 0.042],
}


def random_relation(kind: str, size: int, clauses: int, seed: int):
    """|P| = |supp R| = size; every tuple a random 3-CNF or 3-DNF with ``clauses`` clauses."""
    from fugu.graph.krelation import Formulas

    rng = np.random.default_rng(seed)
    data = [
        [rng.choice(size, 3, replace=False).tolist() for _ in range(clauses)] for _ in range(size)
    ]
    return Formulas.from_clauses(data, kind, size)


def mu_sweep(
    draws: int,
    cells: list[tuple[str, int, int]],
    mus: tuple[float, ...] = (0.1, 0.25, 0.5, 0.75, 1.0, 1.5),
    relations: int = 3,
    eps: float = 0.5,
) -> None:
    """Median relative error against μ on the Figures 8-9 settings.

    Per relation the deterministic part (j, hence Δ, and X as a function of Δ̂) is computed once
    with the library's own code; then ``draws`` pairs (Y, Z) are drawn per μ from numpy's Laplace
    (the same law as fugu's fine-grid discrete Laplace up to the grid) and the release
    X(Δ̂) + Z is formed as ``recursive_mechanism`` does (X from the library's X program on 16
    values of Δ̂ below the largest impact, linearly interpolated; X is the true answer above it).
    An accuracy estimate with thousands of draws instead of 20 runs; never a release. Column
    "g=1 mu=.5": the same at μ = 0.5 with ``g_factor=1`` (G without the factor 2 of eq. 19, as in
    R2T's RM.py; utility only): its own LP model and search for j.
    """
    from fugu.graph.recursive import find_j, x_value

    print(
        f"\n== mu sweep (K-relations, eps={eps}, {relations} relations x {draws} draws per mu) =="
    )
    print(
        f"{'kind':>5}{'|supp R|':>9}{'clauses':>8}"
        + "".join(f"{'mu=' + format(m, 'g'):>9}" for m in mus)
        + f"{'ref':>8}{'paper':>7}{'Delta/US':>9}{'g=1 mu=.5':>10}"
    )
    gen = np.random.default_rng(12345)
    for kind, size, clauses in cells:
        errs: dict[float, list[NDArray]] = {m: [] for m in mus}
        half: list[NDArray] = []  # g_factor = 1 (as R2T's RM.py), μ = 0.5
        refs, ratio = [], []
        for k in range(relations):
            ann = random_relation(kind, size, clauses, seed=size * 100 + clauses + 7919 * k)
            _, p = ann.incidence()
            us = float(np.bincount(p).max())
            refs.append(us / (eps * ann.total()))
            model, model1 = LPModel(ann), LPModel(ann, g_factor=1.0)
            top = float(model.impact.max(initial=0.0))
            for m in (*mus, -0.5):  # -0.5: μ = 0.5 at g_factor = 1
                params = RecursiveParameters.make(eps, mu=abs(m), g_factor=1.0 if m < 0 else 2.0)
                j, _ = find_j(model1 if m < 0 else model, params)
                delta = math.exp(j * params.beta)
                if m == mus[0]:
                    ratio.append(delta / us)
                y = gen.laplace(0.0, params.beta / params.epsilon1, draws)
                dh = delta * np.exp(params.mu + y)
                x = np.full(draws, ann.total())
                low = dh < top  # below the largest impact X can fall under the true answer
                if low.any():  # X(Δ̂) is concave and piecewise linear: interpolate on a grid
                    grid = np.geomspace(max(float(dh[low].min()), 1e-6), top, 16)
                    xs = [x_value(model, float(g), math.inf, params.x_rule)[0] for g in grid]
                    x[low] = np.interp(dh[low], grid, xs)
                z = gen.laplace(0.0, 1.0, draws) * dh * (1 + 2 * params.tolerance) / params.epsilon2
                (half if m < 0 else errs[m]).append(np.abs(x + z - ann.total()) / ann.total())
        print(
            f"{kind:>5}{size:9d}{clauses:8d}"
            + "".join(f"{np.median(np.concatenate(errs[m])):9.3f}" for m in mus)
            + f"{np.median(refs):8.3f}{_paper_err(kind, size, clauses):>7}"
            + f"{np.median(ratio):9.2f}"
            + f"{np.median(np.concatenate(half)):10.3f}",
            flush=True,
        )


def _paper_err(kind: str, size: int, clauses: int) -> str:
    """The paper's median relative error of the cell (Figs. 8-9), or "-"."""
    if clauses == 3 and size in range(100, 1001, 100):
        return f"{PAPER_FIG9[kind]['err'][size // 100 - 1]:.3f}"
    if size == 1000 and clauses in (2, 4, 6, 8, 10):
        return f"{PAPER_FIG8[kind]['err'][clauses // 2 - 1]:.3f}"
    return "-"


def krelation_cell(
    kind: str,
    size: int,
    clauses: int,
    runs: int,
    relations: int,
    mu: float,
    eps: float = 0.5,
    g_factor: float = 2.0,
) -> tuple[float, float, float, int]:
    """(median relative error over ``relations`` seeded relations x ``runs`` runs, mean first-run
    seconds, median US~/(ε q), LPs of the first run). The paper: "several different K-relations
    ... for each we run every mechanism many times", median relative error."""
    errs, firsts, refs, lps = [], [], [], 0
    for k in range(relations):
        ann = random_relation(kind, size, clauses, seed=size * 100 + clauses + 7919 * k)
        _, p = ann.incidence()
        us = float(
            np.bincount(p, minlength=ann.n_participants).max()
        )  # max #tuples per participant
        refs.append(us / (eps * ann.total()))
        params = RecursiveParameters.make(eps, mu=mu, g_factor=g_factor)
        model = LPModel(ann, g_factor=g_factor)
        for r in range(runs):
            t0 = time.perf_counter()
            x_hat, _, _, tr = recursive_mechanism(
                ann, params, fugu.RandomSource(seed=1000 * k + r), model=model
            )
            if r == 0:
                firsts.append(time.perf_counter() - t0)
                lps = max(lps, tr.n_lps)
            errs.append(rel_err(x_hat, ann.total()))
    return float(np.median(errs)), float(np.mean(firsts)), float(np.median(refs)), lps


def figures_8_9(
    runs: int,
    sizes: list[int],
    clause_counts: list[int],
    relations: int,
    mu: float,
    g_factor: float = 2.0,
) -> None:
    print(
        f"\n== Figure 8: |supp R| = 1000, 3-CNF and 3-DNF, eps = 0.5, mu = {mu}, "
        f"g_factor = {g_factor:g}, {relations} relations x {runs} runs per cell =="
    )
    print(
        f"{'clauses':>8}{'kind':>5}{'fugu err':>10}{'paper err':>10}{'ref US/eq':>10}"
        f"{'paper ref':>10}{'fugu s':>8}{'paper s':>9}{'LPs':>5}"
    )
    for ci, c in enumerate([2, 4, 6, 8, 10]):
        if c not in clause_counts:
            continue
        for kind in ("cnf", "dnf"):
            err, secs, ref, lps = krelation_cell(kind, 1000, c, runs, relations, mu, 0.5, g_factor)
            print(
                f"{c:8d}{kind:>5}{err:10.3f}{PAPER_FIG8[kind]['err'][ci]:10.3f}{ref:10.3f}"
                f"{PAPER_FIG8['ref'][ci]:10.3f}{secs:8.1f}{PAPER_FIG8[kind]['time'][ci]:9.0f}{lps:5d}",
                flush=True,
            )
    print(
        f"\n== Figure 9: 3 clauses, |supp R| = 100..1000, eps = 0.5, mu = {mu}, "
        f"g_factor = {g_factor:g}, {relations} relations x {runs} runs per cell =="
    )
    print(
        f"{'|supp R|':>8}{'kind':>5}{'fugu err':>10}{'paper err':>10}{'ref US/eq':>10}"
        f"{'paper ref':>10}{'fugu s':>8}{'paper s':>9}{'LPs':>5}"
    )
    for si, size in enumerate(range(100, 1001, 100)):
        if size not in sizes:
            continue
        for kind in ("cnf", "dnf"):
            err, secs, ref, lps = krelation_cell(kind, size, 3, runs, relations, mu, 0.5, g_factor)
            print(
                f"{size:8d}{kind:>5}{err:10.3f}{PAPER_FIG9[kind]['err'][si]:10.3f}{ref:10.3f}"
                f"{PAPER_FIG9['ref'][si]:10.3f}{secs:8.1f}{PAPER_FIG9[kind]['time'][si]:9.1f}{lps:5d}",
                flush=True,
            )
    print(
        "(fugu s = first run, mean over the relations: LPs included; later runs reuse the "
        "relation's LP model)"
    )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--quick", action="store_true", help="fewer runs and smaller graphs")
    ap.add_argument("--runs", type=int, help="runs per accuracy cell (default 20, quick 5)")
    ap.add_argument("--max-occ", type=int, help="largest number of triangles in the timing part")
    ap.add_argument("--lp-time-limit", type=float, default=300.0)
    ap.add_argument("--parts", default="fig4,real,scaling,fig89")
    ap.add_argument("--draws", type=int, default=2000, help="(Y, Z) draws per mu (--parts mu)")
    ap.add_argument("--relations", type=int, default=3, help="random relations per fig89 cell")
    ap.add_argument(
        "--mu", type=float, default=0.5, help="mu for fig89 (the paper's setting except node DP)"
    )
    ap.add_argument(
        "--g-factor",
        type=float,
        default=2.0,
        help="factor of G in eq. 19 for fig89 (2: the paper; 1: as R2T's implementation)",
    )
    ap.add_argument("--mus", default="0.1,0.25,0.5,0.75,1,1.5", help="mu values (--parts mu)")
    ap.add_argument("--sizes", default="100,200,300,400,500,600,700,800,900,1000")
    ap.add_argument("--clauses", default="2,4,6,8,10")
    ap.add_argument("--units", default="node,edge", help="Figure 4 units")
    ap.add_argument("--queries", default="triangle,2-star,2-triangle", help="Figure 4 queries")
    a = ap.parse_args()
    runs = a.runs or (5 if a.quick else 20)
    max_occ = a.max_occ or (5_000 if a.quick else 100_000)
    parts = a.parts.split(",")
    t0 = time.perf_counter()
    if "fig4" in parts:
        figure4(runs, tuple(a.queries.split(",")), units=tuple(a.units.split(",")))
    if "real" in parts:
        real_graphs(runs, a.lp_time_limit, max_occ)
    if "scaling" in parts:
        scaling(max_occ, a.lp_time_limit)
    if "mu" in parts:
        cells = [(k, s, 3) for s in (100, 300, 500, 1000) for k in ("cnf", "dnf")]
        cells += [(k, 1000, 6) for k in ("cnf", "dnf")]
        sizes = {int(x) for x in a.sizes.split(",")}
        cells = [c for c in cells if c[1] in sizes and (not a.quick or c[1] <= 300)]
        mu_sweep(a.draws, cells, tuple(float(m) for m in a.mus.split(",")), a.relations)
    if "fig89" in parts:
        figures_8_9(
            runs,
            [int(x) for x in a.sizes.split(",")] if not a.quick else [100, 300],
            [int(x) for x in a.clauses.split(",")] if not a.quick else [2, 4],
            a.relations,
            a.mu,
            a.g_factor,
        )
    print(f"\ntotal bench time {time.perf_counter() - t0:.0f} s")


if __name__ == "__main__":
    main()
