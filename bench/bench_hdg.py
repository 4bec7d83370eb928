"""Benchmark: TDG/HDG against the LDP range-query baselines, and HDG's end-to-end speed.

Two parts (run ``python bench/bench_hdg.py``; ``--quick`` for a small run; ``--part``):

* ``mae`` — the MAE table of issue 8: for each data set (seeded correlated Gaussian and Laplace
  with n = 10^6, d = 6, c = 64, ρ = 0.5, and the Adult ordinal attributes age, education_num,
  hours_per_week, capital_gain), ε ∈ {0.2, 0.5, 1, 2}, λ ∈ {2, 3, 4}, 100 random queries of
  volume ω = 0.5 per λ (fixed seeds), the MAE (|est − true| / n, averaged) of Uni, MSW, HIO,
  LHIO, CALM, TDG and HDG, all run in the same process on the same data and queries, plus
  HDG's ratio to the best baseline.
* ``time`` — HDG end to end for 10^6 and 10^7 users (d = 6, c = 64, ε = 1): client perturbation,
  aggregation (validation + support counts), post-processing (Phase 2 + response matrices)
  and answering 1,000 queries; the aggregation time is compared with one plain ``np.bincount``
  over the same reports (``group·256 + first byte``), run in the same process.
* ``peers`` — fugu's TDG/HDG against the authors' code (privmdr, Yang et al.; run in the
  peers' interpreter ``/work/peers-venv`` from a checkout given by ``--peer-src`` or
  ``$PRIVMDR_SRC``, default ``/work/peers-src/privmdr``; skipped with a message when absent) on
  the same data, the same ε and the same 100 random queries per λ (λ = 2, 3, 4; λ = 1 crashes
  the authors' code), correlated Gaussian (``--data laplace``: Laplace) data (d = 6, c = 64,
  ρ = 0.5), ε ∈ {0.2, 0.5, 1, 2} (``--eps`` to choose). The authors' answers are cached in
  ``--peer-cache`` (JSON) so fugu can be re-run alone. Printed: MAE per (method, ε, λ) for the
  authors' code, fugu's default ("auto") and each λ-D estimator ("full", "in-in") answering
  from the same releases, fugu with the paper's rules (``interpolation="uniform"``,
  ``estimator="in-in"``, TDG ``partitions="aligned"``), fugu / authors and the default / the
  better estimator.
* ``estimators`` — the λ-D estimators "full", "in-in" and the default "auto" side by side
  (issue 15.3), TDG and HDG, correlated Gaussian (ρ = 0.5 and 0) and Laplace data, n = 10^6,
  d = 6, c = 64, ε ∈ {0.2, 0.5, 1, 2}, λ = 3, 4, answers from the same releases; prints
  the weight on "full" and HDG's cut-cell error of the first release, auto / the better
  estimator per cell and the worst and mean ratio per method.
* ``file`` — HDG aggregation of the same OUE reports in memory and from a Parquet report file
  (numpy and DuckDB engines), with the ratio file / in memory (issue 16 item 4: target ≤ 2).
  Bit-vector columns cross the engine boundary as one buffer (``(n, w)`` uint8 view of the
  Arrow data), not as Python ``bytes``.
"""

from __future__ import annotations

import argparse
import math
import os
import time
from collections.abc import Callable
from typing import Any

import numpy as np

import fugu
from fugu import ldp
from fugu.datasets import correlated_gaussian, correlated_laplace, synthetic_domain

METHODS = ["Uni", "MSW", "HIO", "LHIO", "CALM", "TDG", "HDG"]
BASELINES = ["Uni", "MSW", "HIO", "LHIO", "CALM"]


def true_answers(codes: np.ndarray, bounds: np.ndarray) -> np.ndarray:
    """Exact counts, one vectorised pass over the records per query (restricted axes only).

    An axis is skipped only when its interval holds every record's code (``lo = 0`` and ``hi``
    above the largest code), so the answer never depends on the other queries of the batch.
    """
    out = np.zeros(len(bounds))
    above = codes.max(axis=0) + 1 if len(codes) else np.zeros(bounds.shape[1], dtype=np.int64)
    for i, b in enumerate(bounds):
        r = np.flatnonzero((b[:, 0] > 0) | (b[:, 1] < above))
        if len(r) == 0:
            out[i] = len(codes)
            continue
        inside = np.ones(len(codes), dtype=bool)
        for a in r:
            col = codes[:, a]
            inside &= (col >= b[a, 0]) & (col < b[a, 1])
        out[i] = inside.sum()
    return out


def datasets(n: int, quick: bool) -> dict[str, tuple[fugu.Domain, np.ndarray]]:
    d, c = 6, 64
    dom = synthetic_domain(d, c)
    out = {}
    for name, gen in (("gaussian", correlated_gaussian), ("laplace", correlated_laplace)):
        cols = gen(n, d, c, seed=2026)
        out[name] = (dom, np.stack([cols[a] for a in dom.names], 1))
    names = ["age", "education_num", "hours_per_week", "capital_gain"]
    adom = fugu.datasets.adult_domain(names)
    raw = fugu.datasets.adult()
    out["adult"] = (adom, adom.encode_columns({a: raw[a] for a in names}))
    return out


def make(name: str, dom: fugu.Domain, eps: float) -> Any:
    cls = getattr(ldp, name, None)
    if cls is None:
        return None
    return cls(dom, eps)


def run_mae(quick: bool, methods: list[str] | None = None) -> None:
    n = 100_000 if quick else 1_000_000
    epsilons = [0.5, 2.0] if quick else [0.2, 0.5, 1.0, 2.0]
    lams = [2, 3, 4]
    n_queries = 100
    sets = datasets(n, quick)
    print(f"# MAE (|est - true| / n), {n_queries} queries per lambda, omega = 0.5")
    print("# methods missing from fugu.ldp are shown as '-'")
    summary: list[tuple[str, float, int, float, str, float]] = []
    for ds, (dom, codes) in sets.items():
        nn = len(codes)
        work = {
            lam: fugu.queries.random_workload(
                dom, n_queries, n_predicates=lam, volume=0.5, seed=lam
            )
            for lam in lams
            if lam <= dom.ndim
        }
        truth = {lam: true_answers(codes, w.bounds(dom)) for lam, w in work.items()}
        print(f"\n## {ds}: n = {nn:,}, d = {dom.ndim}, sizes = {list(dom.shape)}")
        header = (
            f"{'eps':>5} {'lam':>3} " + " ".join(f"{m:>8}" for m in METHODS) + "  HDG/best-baseline"
        )
        print(header)
        for eps in epsilons:
            res: dict[str, dict[int, float]] = {}
            secs: dict[str, float] = {}
            for m in methods or METHODS:
                proto = make(m, dom, eps)
                if proto is None:
                    continue
                t0 = time.perf_counter()
                try:
                    rel = proto.simulate(codes, rng=fugu.RandomSource(seed=7))
                    res[m] = {
                        lam: float(np.mean(np.abs(rel.answer_many(w) - truth[lam]))) / nn
                        for lam, w in work.items()
                    }
                except Exception as exc:  # a baseline failing must not hide the others
                    print(f"   {m} failed at eps={eps}: {type(exc).__name__}: {exc}")
                secs[m] = time.perf_counter() - t0
            for lam in work:
                cells = [f"{res[m][lam]:8.4f}" if m in res else f"{'-':>8}" for m in METHODS]
                base = [res[m][lam] for m in BASELINES if m in res]
                ratio = res["HDG"][lam] / min(base) if base and "HDG" in res else math.nan
                best = min((res[m][lam], m) for m in BASELINES if m in res)[1] if base else "-"
                flag = "" if ratio < 1 else "   <-- HDG not best"
                print(f"{eps:5.1f} {lam:3d} " + " ".join(cells) + f"  {ratio:5.2f} ({best}){flag}")
                summary.append((ds, eps, lam, ratio, best, res.get("HDG", {}).get(lam, math.nan)))
            print("      seconds: " + ", ".join(f"{m} {s:.1f}" for m, s in secs.items()))
    lost = [(s[0], s[1], s[2]) for s in summary if not s[3] < 1]
    lost_high = [x for x in lost if x[1] >= 0.5]
    print(f"\n# HDG beats every baseline in {len(summary) - len(lost)} of {len(summary)} cells;")
    print(f"# not in {lost or 'none'}; at eps >= 0.5 not in {lost_high or 'none'}")


CPU: dict[str, float] = {}


def timed(fn: Callable[[], Any], key: str = "") -> tuple[Any, float]:
    """Run ``fn``; return its result and wall seconds (CPU seconds go to ``CPU[key]``)."""
    c0, t0 = time.process_time(), time.perf_counter()
    out = fn()
    CPU[key] = time.process_time() - c0
    return out, time.perf_counter() - t0


def run_time(quick: bool) -> None:
    sizes = [100_000, 1_000_000] if quick else [1_000_000, 10_000_000]
    d, c, eps = 6, 64, 1.0
    dom = synthetic_domain(d, c)
    w = fugu.queries.random_workload(dom, 1000, n_predicates=(2, 4), volume=0.5, seed=1)
    print("\n# HDG end to end, d = 6, c = 64, eps = 1, 1000 queries (lambda 2..4), seconds")
    print("# (wall seconds; the 'cpu s' line: CPU seconds of this process, robust to other load)")
    print(f"{'n':>11} {'perturb':>8} {'aggregate':>9} {'postproc':>8} {'answer':>7} {'total':>7}"
          f" {'bincount':>8} {'agg/bincount':>12} {'g1':>3} {'g2':>3}")  # fmt: skip
    for n in sizes:
        cols = correlated_gaussian(n, d, c, seed=3)
        codes = np.stack([cols[a] for a in dom.names], 1)
        del cols
        hdg = ldp.HDG(dom, eps, n_users=n)
        rng = fugu.RandomSource()  # the secure source, as in production
        reports, t_p = timed(
            lambda hdg=hdg, codes=codes, rng=rng: hdg.client(rng).perturb(codes), "perturb"
        )
        agg, t_a = timed(lambda hdg=hdg, reports=reports: hdg.aggregator().add(reports), "agg")
        rel, t_e = timed(agg.estimate, "post")
        _, t_q = timed(lambda rel=rel: rel.answer_many(w), "answer")
        g = reports.columns["group"]
        b0 = reports.columns["bits"][:, 0]
        _, t_b = timed(
            lambda g=g, b0=b0, m=hdg.n_groups: np.bincount(g * 256 + b0, minlength=256 * m), "bc"
        )
        total = t_p + t_a + t_e + t_q
        print(f"{n:11,} {t_p:8.2f} {t_a:9.2f} {t_e:8.2f} {t_q:7.2f} {total:7.2f} {t_b:8.3f}"
              f" {t_a / t_b:12.1f} {hdg.g1[0]:3d} {hdg.g2[0]:3d}")  # fmt: skip
        cpu = CPU
        tot = sum(cpu[k] for k in ("perturb", "agg", "post", "answer"))
        print(f"{'  cpu s':>11} {cpu['perturb']:8.2f} {cpu['agg']:9.2f} {cpu['post']:8.2f}"
              f" {cpu['answer']:7.2f} {tot:7.2f}"
              f" {cpu['bc']:8.3f} {cpu['agg'] / max(cpu['bc'], 1e-9):12.1f}")  # fmt: skip
        del reports, agg, codes


def run_file(quick: bool, repeat: int = 3, n: int | None = None) -> None:
    import tempfile
    from pathlib import Path

    n = n or (200_000 if quick else 3_000_000)
    d, c, eps = 6, 64, 1.0
    dom = synthetic_domain(d, c)
    cols = correlated_gaussian(n, d, c, seed=3)
    codes = np.stack([cols[a] for a in dom.names], 1)
    hdg = ldp.HDG(dom, eps, n_users=n)
    reports = hdg.client(fugu.RandomSource(seed=1)).perturb(codes)
    width = reports.columns["bits"].shape[1]
    print(f"\n# HDG aggregation of {n:,} OUE reports ({width} bytes each), best of {repeat}, s")
    print(f"{'path':>28} {'seconds':>8} {'ratio to memory':>16}")

    def best(fn: Callable[[], Any]) -> tuple[Any, float]:
        out, t = None, math.inf
        for _ in range(repeat):
            t0 = time.perf_counter()
            out = fn()
            t = min(t, time.perf_counter() - t0)
        return out, t

    ref, t_mem = best(lambda: hdg.aggregator_for(reports))
    print(f"{'in memory (Reports)':>28} {t_mem:8.3f} {1.0:16.2f}")
    with tempfile.TemporaryDirectory() as tmp:
        path = reports.save(Path(tmp) / "reports.parquet")
        for engine in ("numpy", "duckdb"):
            agg, t = best(lambda engine=engine: hdg.aggregator_for(path, engine=engine))
            same = agg.n_accepted == ref.n_accepted and all(
                np.array_equal(agg.state[k], ref.state[k]) for k in ref.state
            )
            print(f"{'Parquet file, ' + engine:>28} {t:8.3f} {t / t_mem:16.2f}"
                  f"{'' if same else '   <-- STATE DIFFERS'}")  # fmt: skip


# A small driver run by the peers' interpreter: it imports the authors' modules from their
# checkout, feeds them our records and query boxes, and writes their answers as JSON.
_PEER_DRIVER = """
import argparse, contextlib, json, random, sys
import numpy as np
src, data_path, out_path = sys.argv[1], sys.argv[2], sys.argv[3]
sys.path.insert(0, src)
import TDG, HDG, generate_query as GQ
z = np.load(data_path)
codes, bounds, cfg = z["codes"], z["bounds"], json.loads(str(z["settings"]))
n, d = codes.shape
c = int(cfg["c"])
res = {}
for run in cfg["runs"]:
    algo, eps, seed = run["algo"], float(run["epsilon"]), int(run["seed"])
    args = argparse.Namespace(user_num=n, attribute_num=d, domain_size=c, query_num=len(bounds),
        query_dimension=2, consistency_iteration_num_max=100,
        weighted_update_iteration_num_max=100, epsilon=eps, dimension_query_volume=0.5,
        algorithm_name=algo)
    queries = []
    for b in bounds:
        sel = [j for j in range(d) if b[j, 0] > 0 or b[j, 1] < c]
        q = GQ.RangeQuery(len(sel), d, args=args)
        q.initialize_range_query()
        q.selected_attribute_list = sel
        for j in sel:
            q.query_attribute_node_list[j].left_interval = int(b[j, 0])
            q.query_attribute_node_list[j].right_interval = int(b[j, 1]) - 1
        queries.append(q)
    np.random.seed(seed)
    random.seed(seed)
    recs = codes[np.random.permutation(n)].tolist()
    with contextlib.redirect_stdout(sys.stderr):
        if algo == "TDG":
            aa = TDG.AG_Uniform_Grid_optimal(args=args)
        else:
            aa = HDG.AG_Uniform_Grid_1_2_way_optimal(args=args)
        aa.group_attribute()
        aa.construct_Grid_set()
        aa.get_LDP_Grid_set_divide_user(recs)
        aa.get_consistent_Grid_set()
        if algo == "HDG":
            aa.get_weight_update_for_2_way_group()
        ans = [float(aa.answer_range_query(q)) for q in queries]
    res[algo + "|" + repr(eps) + "|" + str(seed)] = {
        "answers": ans, "g1": getattr(aa, "granularity_1_way", None), "g2": aa.granularity}
    json.dump(res, open(out_path, "w"))
"""


def run_peers(
    quick: bool, n: int | None, src: str, cache: str, seeds: int, data: str = "gaussian",
    epsilons: list[float] | None = None, methods: list[str] | None = None,
) -> None:  # fmt: skip
    """fugu TDG/HDG vs the authors' code (see the module docstring)."""
    import json
    import os
    import subprocess
    import sys
    import tempfile
    from pathlib import Path

    n = n or (100_000 if quick else 1_000_000)
    d, c = 6, 64
    epsilons = epsilons or ([0.5, 2.0] if quick else [0.2, 0.5, 1.0, 2.0])
    lams = [2, 3, 4]
    dom = synthetic_domain(d, c)
    gen = correlated_laplace if data == "laplace" else correlated_gaussian
    cols = gen(n, d, c, seed=2026)
    codes = np.stack([cols[a] for a in dom.names], 1)
    work = {
        lam: fugu.queries.random_workload(dom, 100, n_predicates=lam, volume=0.5, seed=lam)
        for lam in lams
    }
    bounds = np.concatenate([work[lam].bounds(dom) for lam in lams])
    truth = true_answers(codes, bounds)
    algos = [a for a in ("TDG", "HDG") if not methods or a in methods]
    runs = [
        {"algo": a, "epsilon": e, "seed": s}
        for a in algos
        for e in epsilons
        for s in range(1, seeds + 1)
    ]
    peer: dict[str, Any] = {}
    cache_path = Path(cache) if cache else None
    key_tag = f"n={n}" if data == "gaussian" else f"n={n}|{data}"
    if cache_path and cache_path.exists():
        peer = json.loads(cache_path.read_text()).get(key_tag, {})
    todo = [r for r in runs if f"{r['algo']}|{r['epsilon']!r}|{r['seed']}" not in peer]
    py = os.environ.get("PEERS_PYTHON", "/work/peers-venv/bin/python")
    if todo and not (Path(src, "HDG.py").exists() and Path(py).exists()):
        print(f"\n# authors' code not found ({src} / {py}): peers part skipped")
        return
    if todo:
        with tempfile.TemporaryDirectory() as tmp:
            drv = Path(tmp, "driver.py")
            drv.write_text(_PEER_DRIVER)
            in_path = Path(tmp, "in.npz")
            np.savez(in_path, codes=codes, bounds=bounds,
                     settings=json.dumps({"c": c, "runs": todo}))  # fmt: skip
            out = Path(tmp, "out.json")
            t0 = time.perf_counter()
            proc = subprocess.run(
                [py, str(drv), src, str(in_path), str(out)], stdout=subprocess.DEVNULL,
                stderr=subprocess.PIPE, text=True,
            )  # fmt: skip
            if not out.exists():
                print(f"\n# authors' code failed: {proc.stderr[-2000:]}")
                return
            peer.update(json.loads(out.read_text()))
            print(f"# authors' code: {len(todo)} runs in {time.perf_counter() - t0:.0f} s",
                  file=sys.stderr)  # fmt: skip
        if cache_path:
            allc = json.loads(cache_path.read_text()) if cache_path.exists() else {}
            allc[key_tag] = peer
            cache_path.write_text(json.dumps(allc))
    print(f"\n# fugu vs the authors' code (privmdr), correlated {data} rho = 0.5, n = {n:,},")
    print(f"# d = {d}, c = {c}, 100 queries per lambda (omega = 0.5), MAE averaged over "
          f"{seeds} seed(s) each; fugu's estimators answer from the same releases")  # fmt: skip
    print(f"{'method':>6} {'eps':>4} {'lam':>3} {'authors':>8} {'auto':>8} {'full':>8}"
          f" {'in-in':>8} {'auto/auth±se':>12} {'best/auth':>9} {'auto/best':>9}"
          f" {'paper-rules':>11} {'paper/auth':>10}  g1/g2 authors, fugu")  # fmt: skip
    for algo in algos:
        cls = getattr(ldp, algo)
        for eps in epsilons:
            a_err = np.array(
                [np.abs(np.array(peer[f"{algo}|{eps!r}|{s}"]["answers"]) - truth) / n
                 for s in range(1, seeds + 1)],
            )  # fmt: skip
            rel = [
                cls(dom, eps).simulate(codes, rng=fugu.RandomSource(seed=100 + s))
                for s in range(1, seeds + 1)
            ]
            rules = {"interpolation": "uniform", "estimator": "in-in"}
            if algo == "TDG":  # the paper's layout: every grid aligned
                rules["partitions"] = "aligned"
            paper = [
                cls(dom, eps, **rules).simulate(codes, rng=fugu.RandomSource(seed=100 + s))
                for s in range(1, seeds + 1)
            ]
            errs = {
                e: np.array(
                    [np.abs(r.with_estimator(e)._answer_bounds(bounds) - truth) / n for r in rel]
                )
                for e in ("auto", "full", "in-in")
            }
            p_err = np.array([np.abs(r._answer_bounds(bounds) - truth) / n for r in paper])
            info = peer[f"{algo}|{eps!r}|1"]
            gp = rel[0].guarantee.parameters
            for i, lam in enumerate(lams):
                sl = slice(100 * i, 100 * (i + 1))
                # per-run MAEs; the ratio's standard error by the delta method
                a_r, p_r = (x[:, sl].mean(axis=1) for x in (a_err, p_err))
                m = {e: x[:, sl].mean(axis=1).mean() for e, x in errs.items()}
                f_r = errs["auto"][:, sl].mean(axis=1)
                a, f, pp = a_r.mean(), m["auto"], p_r.mean()
                best = min(m["full"], m["in-in"])

                def se(x: np.ndarray) -> float:
                    return float(x.std(ddof=1) / math.sqrt(len(x))) if len(x) > 1 else math.nan

                rse = (f / a) * math.sqrt((se(f_r) / f) ** 2 + (se(a_r) / a) ** 2)
                print(f"{algo:>6} {eps:4.1f} {lam:3d} {a:8.4f} {f:8.4f} {m['full']:8.4f}"
                      f" {m['in-in']:8.4f} {f / a:7.2f}±{rse:4.2f} {best / a:9.2f}"
                      f" {f / best:9.2f} {pp:11.4f} {pp / a:10.2f}  {info['g1']}/{info['g2']}, "
                      f"{(gp.get('g1') or ['-'])[0]}/{gp['g2'][0]}")  # fmt: skip


def run_estimators(
    quick: bool,
    n: int | None,
    seeds: int,
    methods: list[str] | None = None,
    epsilons: list[float] | None = None,
) -> None:
    """The λ-D estimators side by side (issue 15.3): "full", "in-in" and the default "auto"
    answering from the same releases, per (method, data, ε, λ), with auto / the better one."""
    n = n or (200_000 if quick else 1_000_000)
    d, c = 6, 64
    epsilons = epsilons or ([0.5, 2.0] if quick else [0.2, 0.5, 1.0, 2.0])
    dom = synthetic_domain(d, c)
    work = {
        lam: fugu.queries.random_workload(dom, 100, n_predicates=lam, volume=0.5, seed=lam)
        for lam in (3, 4)
    }
    print(f"\n# lambda-D estimators, n = {n:,}, d = {d}, c = {c}, 100 queries per lambda "
          f"(omega = 0.5), MAE / n over {seeds} release(s), the same for all three")  # fmt: skip
    print(f"{'method':>6} {'data':>14} {'eps':>4} {'lam':>3} {'full':>8} {'in-in':>8} "
          f"{'auto':>8} {'w_full':>6} {'cut':>6} {'auto/better':>11}")  # fmt: skip
    ratios: dict[str, list[float]] = {}
    for data, gen, kw in (
        ("gaussian 0.5", correlated_gaussian, {"rho": 0.5}),
        ("gaussian 0", correlated_gaussian, {"rho": 0.0}),
        ("laplace 0.5", correlated_laplace, {}),
    ):
        cols = gen(n, d, c, seed=2026, **kw)
        codes = np.stack([cols[a] for a in dom.names], 1)
        truth = {lam: true_answers(codes, w.bounds(dom)) for lam, w in work.items()}
        for method in [m for m in ("HDG", "TDG") if not methods or m in methods]:
            cls = getattr(ldp, method)
            for eps in epsilons:
                rels = [
                    cls(dom, eps).simulate(codes, rng=fugu.RandomSource(seed=7 + s))
                    for s in range(seeds)
                ]
                for lam, w in work.items():
                    b = w.bounds(dom)
                    m = {
                        e: float(np.mean([np.mean(np.abs(
                            r.with_estimator(e)._answer_bounds(b) - truth[lam])) for r in rels]))
                        / n
                        for e in ("full", "in-in", "auto")
                    }  # fmt: skip
                    ratio = m["auto"] / min(m["full"], m["in-in"])
                    ratios.setdefault(method, []).append(ratio)
                    cut = rels[0].cut_error
                    cut_txt = "-" if cut is None else f"{cut:.4f}"
                    print(f"{method:>6} {data:>14} {eps:4.1f} {lam:3d} {m['full']:8.4f}"
                          f" {m['in-in']:8.4f} {m['auto']:8.4f} {rels[0].full_weight:6.2f}"
                          f" {cut_txt:>6} {ratio:11.2f}", flush=True)  # fmt: skip
    for method, r in ratios.items():
        print(f"# {method}: auto / better estimator worst {max(r):.2f}, mean {np.mean(r):.3f}, "
              f"better than both in {sum(x < 1 for x in r)} of {len(r)} cells")  # fmt: skip


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="small sizes (about a minute)")
    ap.add_argument(
        "--part", choices=["all", "mae", "time", "file", "peers", "estimators"], default="all"
    )
    ap.add_argument("--peer-src", default=os.environ.get("PRIVMDR_SRC", "/work/peers-src/privmdr"))
    ap.add_argument("--peer-cache", default="", help="JSON file caching the authors' answers")
    ap.add_argument("--seeds", type=int, default=2, help="runs per method and eps (peers)")
    ap.add_argument("--n", type=int, default=None, help="reports for the 'file' part")
    ap.add_argument("--data", choices=["gaussian", "laplace"], default="gaussian",
                    help="data of the peers part (correlated, rho = 0.5)")  # fmt: skip
    ap.add_argument("--eps", default="", help="comma-separated epsilons (peers, estimators)")
    ap.add_argument(
        "--methods", default="", help="comma-separated methods of the mae/peers/estimators parts"
    )
    args = ap.parse_args()
    methods = [m for m in args.methods.split(",") if m] or None
    if args.part in ("all", "file"):
        run_file(args.quick, n=args.n)
    if args.part in ("all", "time"):
        run_time(args.quick)
    if args.part in ("all", "mae"):
        run_mae(args.quick, methods)
    eps = [float(e) for e in args.eps.split(",")] if args.eps else None
    if args.part in ("all", "estimators"):
        run_estimators(args.quick, args.n, args.seeds, methods, eps)
    if args.part in ("all", "peers"):
        run_peers(
            args.quick, args.n, args.peer_src, args.peer_cache, args.seeds, args.data, eps, methods
        )


if __name__ == "__main__":
    main()
