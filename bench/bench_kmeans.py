"""Benchmark and paper reproduction for private k-means (fugu.blowfish.kmeans).

Run ``python bench/bench_kmeans.py`` (full) or ``--quick``. It prints:

1. Fit time on 245,057 × 3 points (RGB pixels), 10 iterations, k = 4, as a ratio to
   scikit-learn's non-private ``KMeans`` (Lloyd, one start, 10 iterations) on the same data in the
   same process.
2. The Blowfish paper's k-means experiment (seed ``000_…``, Figure 1) on stand-in data shipped by
   PyPI packages (no downloads):
   * geo: US cities from ``bokeh_sampledata.us_cities`` inside 30–50°N, 125–110°W on the paper's
     400 × 300 grid of 0.05° cells (stands in for the 193,563 geo-tagged tweets);
   * rgb: pixels of scikit-learn's sample image ``china.jpg`` (values 0–255; 245,057 points as
     skin segmentation) and its 10 % and 1 % subsamples;
   * synthetic: 1,000 points in (0, 1)^4 around 4 random centres, σ = 0.2 per coordinate, on a
     100-bin grid per axis (points outside the unit cube are clipped to it).
   The table is the mean objective ratio private / non-private Lloyd from the same start, for
   ε = 0.1 … 1.0, 10 iterations, k = 4, under Laplace (G^full), G^{d,θ}, G^attr and G^P, in the
   paper's calibration ("paper") and in fugu's valid one ("safe").
3. Objective ratio against diffprivlib's KMeans at the same ε (rgb01, rgb10, synthetic; ε = 0.1,
   0.5, 1), with fugu/diffprivlib ratios. diffprivlib is never imported here: it runs in the
   peers' interpreter (/work/peers-venv, or $FUGU_PEERS_PYTHON) via ``python -c``; without it
   that part is skipped with a message. ``--only-peers`` runs just this part.

Install for the stand-in data: ``pip install bokeh_sampledata`` (scikit-learn ships the images).
"""

from __future__ import annotations

import argparse
import time
from typing import Any

import numpy as np

import fugu
from fugu.blowfish.kmeans import KMeans, KMeansGrid, kmeans_objective
from fugu.blowfish.policy import Policy
from fugu.report.kmeans_experiment import PAPER_EPSILONS, objective_ratio_experiment

KM_PER_LAT_CELL = 2222 / 400  # the paper: 50N–30N ≈ 2222 km over 400 cells
KM_PER_LON_CELL = 1442 / 300  # 125W–110W ≈ 1442 km over 300 cells


# -- data ----------------------------------------------------------------------------------------
def rgb_pixels(n: int = 245_057) -> tuple[np.ndarray, fugu.Domain]:
    from sklearn.datasets import load_sample_image

    px = load_sample_image("china.jpg").reshape(-1, 3).astype(np.float64)
    px = px[np.random.default_rng(0).permutation(len(px))[:n]]
    return px, fugu.Domain([fugu.Ordinal(c, 0, 255) for c in ("b", "g", "r")])


def geo_points() -> tuple[np.ndarray, fugu.Domain]:
    from bokeh_sampledata.us_cities import data

    lat, lon = np.asarray(data["lat"], float), np.asarray(data["lon"], float)
    inside = (lat >= 30) & (lat < 50) & (lon >= -125) & (lon < -110)
    cells = np.stack(
        [np.floor((lat[inside] - 30) / 0.05), np.floor((lon[inside] + 125) / 0.05)], axis=1
    )
    dom = fugu.Domain([fugu.Ordinal("lat", 0, 399), fugu.Ordinal("lon", 0, 299)])
    return np.clip(cells, 0, [399, 299]), dom


def synthetic(n: int = 1000, seed: int = 0) -> tuple[np.ndarray, fugu.Domain]:
    gen = np.random.default_rng(seed)
    centres = gen.random((4, 4))
    pts = centres[gen.integers(0, 4, n)] + gen.normal(0, 0.2, (n, 4))
    edges = np.linspace(0, 1, 101)
    dom = fugu.Domain([fugu.Ordinal(f"x{j}", edges=edges) for j in range(4)])
    return np.clip(pts, 0, 1), dom


# -- 1. timing -----------------------------------------------------------------------------------
def bench_fit_time(repeats: int) -> dict[str, float]:
    from sklearn.cluster import KMeans as SkKMeans

    X, dom = rgb_pixels()
    fugu_t, sk_t = [], []
    for r in range(repeats):
        t0 = time.perf_counter()
        KMeans(4, 1.0, domain=dom, n_iter=10, rng=fugu.RandomSource(seed=r)).fit(X)
        fugu_t.append(time.perf_counter() - t0)
        t0 = time.perf_counter()
        SkKMeans(
            4, init="random", n_init=1, max_iter=10, tol=0.0, algorithm="lloyd", random_state=r
        ).fit(X)
        sk_t.append(time.perf_counter() - t0)
    f, s = float(np.median(fugu_t)), float(np.median(sk_t))
    print(f"\n== fit time, {len(X):,} x 3 points, k=4, 10 iterations (median of {repeats}) ==")
    print(f"fugu KMeans (eps=1, secure-noise path, seeded): {f:.3f} s")
    print(f"scikit-learn KMeans (non-private Lloyd, 1 start): {s:.3f} s")
    print(f"ratio fugu / scikit-learn: {f / s:.2f}x")
    return {"fugu_s": f, "sklearn_s": s, "ratio": f / s}


# -- 2. paper experiment -------------------------------------------------------------------------
def _run(
    name: str,
    X: np.ndarray,
    dom: fugu.Domain,
    policies: list[Any],
    labels: list[str],
    reps: int,
    eps: list[float],
    mode: str,
    results: dict[str, Any],
) -> None:
    res = objective_ratio_experiment(
        X,
        dom,
        policies,
        epsilons=eps,
        repetitions=reps,
        sensitivity=mode,
        dataset=name,
        names=labels,
        seed=7,
    )
    print(
        f"\n== {name}: n={res.n:,}, d={res.dim}, {reps} repetitions, sensitivities={mode} "
        f"({res.seconds:.0f} s) =="
    )
    print(
        "sensitivities (q_size, q_sum): "
        + ", ".join(f"{k} {v[0]:g}/{v[1]:g}" for k, v in res.sensitivities.items())
    )
    print(res.table())
    results[f"{name}/{mode}"] = res


def geo_policies(dom: fugu.Domain) -> tuple[list[Any], list[str]]:
    w = [KM_PER_LAT_CELL, KM_PER_LON_CELL]
    pols: list[Any] = [None]
    labels = ["laplace"]
    for km in (2000, 1000, 500, 100):
        pols.append(Policy.distance_threshold(dom, km, weights=w))
        labels.append(f"d,{km}km")
    pols.append(Policy.attribute(dom))
    labels.append("attr")
    for blocks, (a, b) in ((100, (40, 30)), (1200, (10, 10)), (120000, (1, 1))):
        pols.append(Policy.partition(dom, {"lat": a, "lon": b}))
        labels.append(f"part|{blocks}")
    return pols, labels


def rgb_policies(dom: fugu.Domain) -> tuple[list[Any], list[str]]:
    pols: list[Any] = [None]
    labels = ["laplace"]
    for theta in (256, 128, 64, 32):
        pols.append(Policy.distance_threshold(dom, theta))
        labels.append(f"d,{theta}")
    pols.append(Policy.attribute(dom))
    labels.append("attr")
    for width in (64, 16):
        pols.append(Policy.partition(dom, {"b": width, "g": width, "r": width}))
        labels.append(f"part|{(256 // width) ** 3}")
    return pols, labels


def synthetic_policies(dom: fugu.Domain) -> tuple[list[Any], list[str]]:
    pols: list[Any] = [None]
    labels = ["laplace"]
    for theta in (1.0, 0.5, 0.25, 0.1):
        pols.append(Policy.distance_threshold(dom, theta, weights=[0.01] * 4))
        labels.append(f"d,{theta:g}")
    pols.append(Policy.attribute(dom))
    labels.append("attr")
    for width in (25, 10):
        pols.append(Policy.partition(dom, {f"x{j}": width for j in range(4)}))
        labels.append(f"part|{(100 // width) ** 4}")
    return pols, labels


def paper_experiment(quick: bool) -> dict[str, Any]:
    reps = 3 if quick else 50
    eps = [0.1, 1.0] if quick else list(PAPER_EPSILONS)
    results: dict[str, Any] = {}
    geo, gdom = geo_points()
    rgb, rdom = rgb_pixels()
    perm = np.random.default_rng(1).permutation(len(rgb))
    rgb10, rgb01 = rgb[perm[: len(rgb) // 10]], rgb[perm[: len(rgb) // 100]]
    syn, sdom = synthetic()
    sets = [
        ("geo (us_cities, 400x300)", geo, gdom, geo_policies(gdom)),
        ("rgb01 (china.jpg 1%)", rgb01, rdom, rgb_policies(rdom)),
        ("synthetic (0,1)^4", syn, sdom, synthetic_policies(sdom)),
    ]
    for mode in ("paper", "safe"):
        for name, X, dom, (pols, labels) in sets:
            _run(
                name,
                X,
                dom,
                pols,
                labels,
                reps if mode == "paper" else max(3, reps // 2),
                eps,
                mode,
                results,
            )
    # Figure 1(d): Laplace / G^{d,128} objective on rgb, rgb10, rgb01 (paper calibration)
    print("\n== Figure 1(d): mean objective Laplace / G^{d,128} (paper calibration) ==")
    d128 = Policy.distance_threshold(rdom, 128)
    sizes = [("rgb01", rgb01, reps), ("rgb10", rgb10, max(3, reps // 5))]
    if not quick:
        sizes.append(("rgb (245,057)", rgb, 5))
    header = "eps    " + "  ".join(f"{n:>14}" for n, _, _ in sizes)
    cols = []
    for name, X, r in sizes:
        res = objective_ratio_experiment(
            X,
            rdom,
            [None, d128],
            epsilons=eps,
            repetitions=r,
            sensitivity="paper",
            names=["laplace", "d,128"],
            seed=11,
            dataset=name,
        )
        cols.append(res)
        results[f"fig1d/{name}"] = res
    print(header)
    for e in eps:
        print(f"{e:<6g} " + "  ".join(f"{c.laplace_gain('d,128', e):14.2f}" for c in cols))
    return results


# -- 3. diffprivlib --------------------------------------------------------------------------------
#: The peer runs in its own interpreter (diffprivlib is never a fugu dependency): this script is
#: passed to ``python -c`` in /work/peers-venv (or $FUGU_PEERS_PYTHON). diffprivlib 0.6.6 imports
#: a scikit-learn tree internal that newer scikit-learn removed, in its forest module only, so
#: that one module is stubbed before the import.
PEER_SCRIPT = """
import json, sys, types, warnings
import numpy as np
stub = types.ModuleType("diffprivlib.models.forest")
stub.RandomForestClassifier = stub.DecisionTreeClassifier = None
sys.modules["diffprivlib.models.forest"] = stub
from diffprivlib.models import KMeans
warnings.simplefilter("ignore")
args = json.loads(sys.argv[1])
X = np.load(args["data"])
bounds = (np.array(args["low"]), np.array(args["high"]))
out = {}
for eps in args["eps"]:
    objs, iters = [], []
    for s in range(args["reps"]):
        m = KMeans(n_clusters=args["k"], epsilon=eps, bounds=bounds, random_state=s).fit(X)
        c = m.cluster_centers_
        d2 = np.min(((X[:, None, :] - c[None]) ** 2).sum(axis=2), axis=1)
        objs.append(float(d2.sum()))
        iters.append(int(m.n_iter_))
    out[str(eps)] = {"objectives": objs, "iters": iters}
print(json.dumps(out))
"""


def peer_python() -> str | None:
    """The interpreter of the peers' venv, if it can import diffprivlib."""
    import os
    import subprocess

    exe = os.environ.get("FUGU_PEERS_PYTHON", "/work/peers-venv/bin/python")
    if not os.path.exists(exe):
        return None
    probe = "import importlib.util as u, sys; sys.exit(u.find_spec('diffprivlib') is None)"
    ok = subprocess.run([exe, "-c", probe], capture_output=True).returncode == 0
    return exe if ok else None


def run_diffprivlib(
    exe: str,
    pts: np.ndarray,
    low: np.ndarray,
    high: np.ndarray,
    k: int,
    eps: list[float],
    reps: int,
) -> dict[str, Any]:
    import json
    import subprocess
    import tempfile

    with tempfile.TemporaryDirectory() as tmp:
        path = f"{tmp}/points.npy"
        np.save(path, pts)
        args = {
            "data": path,
            "eps": eps,
            "reps": reps,
            "k": k,
            "low": low.tolist(),
            "high": high.tolist(),
        }
        out = subprocess.run(
            [exe, "-c", PEER_SCRIPT, json.dumps(args)], capture_output=True, text=True, check=True
        )
    return json.loads(out.stdout)


def bench_diffprivlib(quick: bool) -> dict[str, Any]:
    """fugu's ε-DP k-means (defaults) vs diffprivlib's KMeans on the same points, same ε, same
    k, same bounds; objective ratios against scikit-learn's k-means++ (10 starts)."""
    print("\n== objective ratio vs diffprivlib KMeans (eps-DP, k=4) ==")
    exe = peer_python()
    if exe is None:
        print(
            "diffprivlib is not available: skipped. Create the peers' venv "
            "(python3 -m venv /work/peers-venv && /work/peers-venv/bin/pip install diffprivlib) "
            "or set FUGU_PEERS_PYTHON to an interpreter that has it."
        )
        return {}
    from sklearn.cluster import KMeans as SkKMeans

    rgb, rdom = rgb_pixels()
    perm = np.random.default_rng(1).permutation(len(rgb))
    rgb01, rgb10 = rgb[perm[: len(rgb) // 100]], rgb[perm[: len(rgb) // 10]]
    syn, sdom = synthetic()
    reps = 3 if quick else 20
    eps_grid = [0.1, 0.5, 1.0]
    sets = [("rgb01", rgb01, rdom), ("synthetic", syn, sdom)]
    if not quick:
        sets.insert(1, ("rgb10", rgb10, rdom))
    print(
        f"ratio = mean objective over {reps} seeds / objective of scikit-learn k-means++ "
        "(10 starts, non-private). fugu: defaults (replace-one neighbours: counts sensitivity 2,"
    )
    print(
        "sums d(T)); diffprivlib: add/remove neighbours (counts 1), a weaker guarantee at equal "
        "eps. fugu-paper: fugu with the paper's settings (10 updates, equal split, uniform start)."
    )
    print(
        f"{'data':<10} {'n':>7} {'eps':>5} {'fugu':>8} {'fugu-paper':>11} {'diffprivlib':>12} "
        f"{'fugu/dpl':>9}  fugu plan"
    )
    table: dict[str, Any] = {}
    for name, X, dom in sets:
        grid = KMeansGrid.from_domain(dom)
        pts = grid.to_points(grid.encode(X, clip=True))
        best = kmeans_objective(
            pts, SkKMeans(4, n_init=10, random_state=0).fit(pts).cluster_centers_
        )
        dpl = run_diffprivlib(exe, pts, grid.low, grid.high, 4, eps_grid, reps)
        for eps in eps_grid:
            f, old, plan = [], [], ""
            for s in range(reps):
                km = KMeans(4, eps, domain=dom, clip=True, rng=fugu.RandomSource(seed=s)).fit(X)
                f.append(km.inertia_)
                plan = f"{km.n_iter_} updates, start: {km.init_.split(' (')[0]}"
                paper = KMeans(
                    4,
                    eps,
                    domain=dom,
                    clip=True,
                    n_iter=10,
                    size_fraction=0.5,
                    init="random",
                    rng=fugu.RandomSource(seed=s),
                )
                old.append(paper.fit(X).inertia_)
            d = dpl[str(eps)]["objectives"]
            rf, ro, rd = np.mean(f) / best, np.mean(old) / best, np.mean(d) / best
            table[f"{name}/{eps}"] = {"fugu": rf, "fugu_paper": ro, "diffprivlib": rd}
            print(
                f"{name:<10} {len(X):>7,} {eps:>5g} {rf:>8.2f} {ro:>11.2f} {rd:>12.2f} "
                f"{rf / rd:>9.2f}  {plan}"
            )
    worst = max(v["fugu"] / v["diffprivlib"] for v in table.values())
    print(f"largest fugu/diffprivlib ratio: {worst:.2f} (target: <= 1 at every eps)")
    return table


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="smaller run (3 repetitions, 2 epsilons)")
    ap.add_argument(
        "--skip-paper", action="store_true", help="only the timing and diffprivlib parts"
    )
    ap.add_argument("--only-peers", action="store_true", help="only the diffprivlib comparison")
    args = ap.parse_args()
    if args.only_peers:
        bench_diffprivlib(args.quick)
        return
    bench_fit_time(3 if args.quick else 5)
    if not args.skip_paper:
        paper_experiment(args.quick)
    bench_diffprivlib(args.quick)


if __name__ == "__main__":
    main()
