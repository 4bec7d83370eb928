"""Issue 15.3 measurement (not a default): fixed blends of the two λ-D estimators, per cell.

Answers each λ ≥ 3 workload from the same TDG or HDG releases with ``w · "full" + (1 − w) ·
"in-in"`` for a range of fixed weights w and prints each blend's MAE relative to the better of
the two pure estimators (1.000 = as good as the better one), the release's own "auto" weight,
and, per cell, in how many releases "full" beat "in-in" with the paired mean difference and its
standard error (MAE / n), so a cell where one estimator wins can be told from seed noise.

The data are the docs' table's (correlated Gaussian ρ = 0.5 and 0, correlated Laplace; d = 6,
c = 64, 100 queries per λ, ω = 0.5, release seeds 7, 8, ...). Run e.g.
``python bench/bench_lambda_blend.py --method TDG --eps 2 --seeds 8`` (about a minute per ε
at n = 10^6).

``--sources`` asks where a cell's error comes from instead: each λ-D estimator is re-run with
parts of its 2 × 2 in/out tables replaced by the exact counts — the 1-D in-fractions, the 2-D
(in, in) cells, or both — and the MAE of each variant is printed (same releases, same queries).

``--twin`` builds, for each data set, its *twin*: every record keeps its cell of each attribute
in the common refinement of all the grids' cells of it (with TDG's shifted grids, cells of half a
box; so the twin's TDG or HDG releases are identical, report for report, at the same seed),
but its value inside the cell is redrawn from the log-smooth shape of the exact margin,
independently per attribute. Whatever an estimator does, it gives the same answers on both, so per
query err(data) + err(twin) ≥ |truth(data) − truth(twin)|. The part prints that gap and each
estimator's MAE on both, and the slack ``best(data) + best(twin) − gap``: below 0, no function of
the release can be as good as the better estimator on both data sets at once.
"""

from __future__ import annotations

import argparse
from collections.abc import Iterator
from itertools import combinations
from typing import Any

import numpy as np

import fugu
from bench_hdg import true_answers
from fugu import ldp
from fugu.datasets import correlated_gaussian, correlated_laplace, synthetic_domain
from fugu.inference.ldp_post import estimate_from_pairs

WEIGHTS = (0.0, 0.25, 0.5, 0.7, 0.8, 0.9, 1.0)
DATA = (
    ("gaussian 0.5", correlated_gaussian, {"rho": 0.5}),
    ("gaussian 0", correlated_gaussian, {"rho": 0.0}),
    ("laplace 0.5", correlated_laplace, {}),
)


def _releases(
    method: str,
    dom: fugu.Domain,
    codes: np.ndarray,
    eps: float,
    seeds: int,
    interpolation: str | None = None,
) -> list[Any]:
    """``seeds`` releases of ``method`` on ``codes`` (release seeds 7, 8, ...)."""
    mech = getattr(ldp, method)(dom, eps, interpolation=interpolation)
    return [mech.simulate(codes, rng=fugu.RandomSource(seed=7 + s)) for s in range(seeds)]


def _cells(
    method: str,
    epsilons: list[float],
    n: int,
    seeds: int,
    dom: fugu.Domain,
    interpolation: str | None = None,
) -> Iterator[tuple[str, float, int, np.ndarray, list[Any], np.ndarray]]:
    """Per (data set, ε, λ): the records, the releases (seeds 7, 8, ...) and the bounds of the
    100 random λ-attribute queries (ω = 0.5; query seed λ)."""
    d, c = dom.ndim, int(dom.shape[0])
    for data, gen, kw in DATA:
        cols = gen(n, d, c, seed=2026, **kw)
        codes = np.stack([cols[a] for a in dom.names], 1)
        for eps in epsilons:
            rels = _releases(method, dom, codes, eps, seeds, interpolation)
            for lam in (3, 4):
                w = fugu.queries.random_workload(dom, 100, n_predicates=lam, volume=0.5, seed=lam)
                yield data, eps, lam, codes, rels, w.bounds(dom)


def run(
    method: str,
    epsilons: list[float],
    n: int,
    seeds: int,
    interpolation: str | None = None,
    d: int = 6,
    c: int = 64,
) -> None:
    dom = synthetic_domain(d, c)
    print(f"# {method}, n = {n:,}, d = {d}, c = {c}, {seeds} releases per cell; blend MAE / "
          "better pure estimator's MAE at w = " + " ".join(f"{w:g}" for w in WEIGHTS))  # fmt: skip
    for data, eps, lam, codes, rels, b in _cells(method, epsilons, n, seeds, dom, interpolation):
        truth = true_answers(codes, b)
        full = np.array([r.with_estimator("full")._answer_bounds(b) for r in rels])
        inin = np.array([r.with_estimator("in-in")._answer_bounds(b) for r in rels])
        per_release = np.abs(full - truth).mean(axis=1) - np.abs(inin - truth).mean(axis=1)
        maes = [float(np.abs(x * full + (1 - x) * inin - truth).mean()) / n
                for x in WEIGHTS]  # fmt: skip
        best = min(maes[0], maes[-1])
        se = per_release.std(ddof=1) / np.sqrt(seeds) / n if seeds > 1 else float("nan")
        print(f"{data:>13} eps {eps:g} lam {lam} auto w {rels[0].full_weight:.2f} | "
              + " ".join(f"{m / best:.3f}" for m in maes)
              + f" | full better in {int((per_release < 0).sum())}/{seeds},"
              f" full - in-in {per_release.mean() / n:+.5f} ± {se:.5f}",
              flush=True)  # fmt: skip


def _exact_parts(
    codes: np.ndarray, b: np.ndarray, restricted: np.ndarray, qs: np.ndarray
) -> tuple[dict[tuple[int, int], float], dict[tuple[int, int, int], float]]:
    """Exact 1-D in-counts per (query, axis) and 2-D (in, in) counts per (query, axis, axis)."""
    one: dict[tuple[int, int], float] = {}
    two: dict[tuple[int, int, int], float] = {}
    for q in qs:
        ax = np.flatnonzero(restricted[q])
        inside = {int(a): (codes[:, a] >= b[q, a, 0]) & (codes[:, a] < b[q, a, 1]) for a in ax}
        for a, m in inside.items():
            one[(int(q), a)] = float(m.sum())
        for a, c in combinations(inside, 2):
            two[(int(q), a, c)] = float((inside[a] & inside[c]).sum())
    return one, two


def sources(
    method: str,
    epsilons: list[float],
    n: int,
    seeds: int,
    interpolation: str | None = None,
    d: int = 6,
    c: int = 64,
) -> None:
    """MAE of each λ-D estimator with exact 1-D in-fractions and / or exact 2-D (in, in) cells."""
    dom = synthetic_domain(d, c)
    sizes = np.asarray(dom.shape)
    variants = (("estimated", False, False), ("exact 1-D", True, False),
                ("exact 2-D", False, True), ("both exact", True, True))  # fmt: skip
    print(f"# {method}, n = {n:,}, d = {d}, c = {c}, {seeds} releases per cell; MAE / n of "
          '"full" | "in-in" with the in/out tables: '
          + ", ".join(v[0] for v in variants))  # fmt: skip
    for data, eps, lam, codes, rels, b in _cells(method, epsilons, n, seeds, dom, interpolation):
        restricted = (b[:, :, 0] > 0) | (b[:, :, 1] < sizes[None, :])
        mae: dict[tuple[str, str], list[float]] = {
            (v[0], e): [] for v in variants for e in ("full", "in-in")
        }
        lam_q = restricted.sum(axis=1)
        for rel in rels:
            out = np.full(len(b), float(n))
            qs, stacked = rel._lambda_tables(b, restricted, lam_q, out)[lam]
            if rel is rels[0]:  # the same query rows, in the same order, every release
                truth = true_answers(codes, b[qs])
                one, two = _exact_parts(codes, b, restricted, qs)
            for name, exact1, exact2 in variants:
                tabs = {}
                for (pj, pk), t in stacked.items():
                    t = t.copy()
                    for i, q in enumerate(qs):
                        ax = np.flatnonzero(restricted[q])
                        a, cc = int(ax[pj]), int(ax[pk])
                        ii, ia, ic = t[i, 0, 0], t[i, 0].sum(), t[i, :, 0].sum()
                        if exact1:
                            ia, ic = one[(int(q), a)], one[(int(q), cc)]
                        if exact2:
                            ii = two[(int(q), a, cc)]
                        t[i] = [[ii, ia - ii], [ic - ii, n - ia - ic + ii]]
                    tabs[(pj, pk)] = t
                for est in ("full", "in-in"):
                    e, _ = estimate_from_pairs(tabs, lam, n, variant=est)
                    mae[(name, est)].append(float(np.abs(e - truth).mean()) / n)
        cells = " | ".join(
            f"{np.mean(mae[(v[0], 'full')]):.4f} {np.mean(mae[(v[0], 'in-in')]):.4f}"
            for v in variants
        )
        print(f"{data:>13} eps {eps:g} lam {lam} | {cells}", flush=True)


def _twin(codes: np.ndarray, edges: list[np.ndarray], seed: int = 5) -> np.ndarray:
    """``codes`` with every value redrawn inside its cell of ``edges[j]`` (same cells)."""
    from fugu.inference.ldp_post import cell_values

    rng = np.random.default_rng(seed)
    out = codes.copy()
    for j, e in enumerate(edges):
        cell = np.searchsorted(e, codes[:, j], side="right") - 1
        cnt = np.bincount(cell, minlength=len(e) - 1).astype(np.float64)
        shape = cell_values(e, cnt, method="logsmooth")
        for k in range(len(e) - 1):
            rows = np.flatnonzero(cell == k)
            p = shape[e[k] : e[k + 1]]
            if rows.size:
                out[rows, j] = e[k] + rng.choice(p.size, size=rows.size, p=p / p.sum())
    return out


def _refinements(grids: Any, names: list[str]) -> list[np.ndarray]:
    """Per attribute, the common refinement of every grid's cells of it (shifted grids too)."""
    cuts: dict[str, set[int]] = {a: set() for a in names}
    for g in grids:
        for a, e in zip(g.attributes, g.edges, strict=True):
            cuts[str(a) if str(a) in cuts else names[int(a)]].update(int(x) for x in e)
    return [np.array(sorted(cuts[a]), dtype=np.int64) for a in names]


def twin(
    method: str,
    epsilons: list[float],
    n: int,
    seeds: int,
    interpolation: str | None = None,
    d: int = 6,
    c: int = 64,
) -> None:
    """Each data set against its twin (same cells, log-smooth values inside): see ``--twin``."""
    dom = synthetic_domain(d, c)
    print(f"# {method}, n = {n:,}, d = {d}, c = {c}, {seeds} releases per cell; MAE / n on the "
          "data | on its twin; gap = mean |truth - twin's truth|; "
          "slack = best + best - gap")  # fmt: skip
    for data, gen, kw in DATA:
        a = np.stack([gen(n, d, c, seed=2026, **kw)[x] for x in dom.names], 1)
        for eps in epsilons:
            rels_a = _releases(method, dom, a, eps, seeds, interpolation)
            b_codes = _twin(a, _refinements(rels_a[0].grids, list(dom.names)))
            rels_b = _releases(method, dom, b_codes, eps, seeds, interpolation)
            same = all(
                np.array_equal(ga.counts, gb.counts)
                for ra, rb in zip(rels_a, rels_b, strict=True)
                for ga, gb in zip(ra.grids, rb.grids, strict=True)
            )
            for lam in (3, 4):
                w = fugu.queries.random_workload(dom, 100, n_predicates=lam, volume=0.5, seed=lam)
                bounds = w.bounds(dom)
                ta, tb = true_answers(a, bounds), true_answers(b_codes, bounds)
                gap = float(np.abs(ta - tb).mean()) / n
                err = {}
                for est in ("full", "in-in"):
                    for name, rels, t in (("data", rels_a, ta), ("twin", rels_b, tb)):
                        ans = np.array([r.with_estimator(est)._answer_bounds(bounds) for r in rels])
                        err[(est, name)] = float(np.abs(ans - t).mean()) / n
                best_a = min(err[("full", "data")], err[("in-in", "data")])
                best_b = min(err[("full", "twin")], err[("in-in", "twin")])
                e = {f"{k[0]} {k[1]}": f"{v:.4f}" for k, v in err.items()}
                cells = ", ".join(
                    f"{x} {e[x + ' data']} | {e[x + ' twin']}" for x in ("full", "in-in")
                )
                warn = "" if same else " (releases differ!)"
                print(f"{data:>13} eps {eps:g} lam {lam} | gap {gap:.4f} | {cells} | "
                      f"slack {best_a + best_b - gap:+.4f}{warn}", flush=True)  # fmt: skip


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--method", choices=["TDG", "HDG"], default="TDG")
    ap.add_argument("--eps", default="2", help="comma-separated epsilons")
    ap.add_argument("--n", type=int, default=1_000_000)
    ap.add_argument("--seeds", type=int, default=8, help="releases per cell")
    ap.add_argument("--sources", action="store_true", help="exact-part decomposition instead")
    ap.add_argument("--twin", action="store_true", help="each data set against its twin")
    ap.add_argument("--interpolation", default=None, help="of the margins (default: the method's)")
    args = ap.parse_args()
    part = sources if args.sources else twin if args.twin else run
    part(
        args.method, [float(e) for e in args.eps.split(",")], args.n, args.seeds, args.interpolation
    )


if __name__ == "__main__":
    main()
