"""Issue 15.3 experiment (not kept as the default): a λ-D weight from delta-method moments.

For every λ ≥ 3 query the "full" and "in-in" estimates are smooth functions of the 3·C(λ, 2)
inputs of the pair tables (per pair the in/in cell and the two in-counts). This script
propagates a public noise model of those inputs through each estimator's gradient (central
differences) and weighs the two by the minimum-MSE combination

    w = (M_ii − M_fi) / (M_ff + M_ii − 2 M_fi),  M_ff = V_f + B_f², M_ii = V_i + B_i²,
    M_fi = C + B_f B_i   (clipped to [0, 1], times HDG's cut-error factor)

with V, C from the noise model, B_i = in-in's plug-in structural bias (the "full" table fed
back to "in-in") plus its Norm-Sub bias, B_f = the Norm-Sub bias of "full" (the expected
Norm-Sub shift of the released grids, plug-in, through each estimator's gradient). Everything
it reads is released or public (the grids, their public variance, the response matrices): it
would be post-processing. Noise models: ``--noise raw`` (each 2-D answer a weighted sum of its
grid's cells, independent noise of the grid's variance) or ``consistent`` (the margins after
Phase 2's inverse-variance consistency, shared by every pair holding the attribute, plus each
grid's own interaction noise).

Settings (``--which``): ``docs`` (the docs' table: n = 10^6, d = 6, c = 64, ε = 0.2–2,
release seeds 7, 8, 100 queries per λ), ``grid`` (the seeded grid of
``tests/ldp/test_ldp_lambda_estimator.py``: n = 6·10^4, d = 4, c = 32, ε = 0.5–4, seeds 1, 2,
60 queries), ``seeds`` (independent and correlated Gaussian data of the docs' table at ε = 0.5
and 1 over 12 release seeds: how much of a two-seed cell is seed noise). Prints, per cell, the
MAE of "full" and "in-in" and the ratio to the better one of the default "auto" and of the
delta-method rule. Run ``python bench/bench_lambda_delta.py --which grid`` (a few minutes).
"""

from __future__ import annotations

import argparse
import math
from collections import defaultdict
from collections.abc import Iterator
from itertools import combinations
from typing import Any

import numpy as np
from scipy.stats import norm

import fugu
from fugu.inference.ldp_post import GridEstimate, _fit_pairs, cell_values, consistency
from fugu.ldp import HDG, TDG
from fugu.ldp.grid_release import AUTO_CUT, _log_ramp, _overlap_weights


def truth(codes: np.ndarray, b: np.ndarray) -> np.ndarray:
    out = np.zeros(len(b))
    for i, bi in enumerate(b):
        inside = np.ones(len(codes), dtype=bool)
        for a in range(codes.shape[1]):
            inside &= (codes[:, a] >= bi[a, 0]) & (codes[:, a] < bi[a, 1])
        out[i] = inside.sum()
    return out


# -- the noise model of the pair inputs --------------------------------------------------------
def fractions(rel: Any, g: GridEstimate, ax: int, lo: np.ndarray, hi: np.ndarray) -> np.ndarray:
    """(Q, cells): the share of every cell of ``g`` along ``ax`` inside ``[lo, hi)`` (from the
    response matrix's margin where there is one, the uniform guess otherwise)."""
    e = g.edges[ax]
    m = rel.matrices.get((str(g.attributes[0]), str(g.attributes[1])))
    uni = _overlap_weights(e, lo, hi)
    if m is None:
        return uni
    cum = np.concatenate([[0.0], np.cumsum(np.maximum(m.sum(axis=1 - ax), 0.0))])
    a = np.clip(lo[:, None], e[None, :-1], e[None, 1:])
    b = np.clip(hi[:, None], e[None, :-1], e[None, 1:])
    mass = np.diff(cum[e])[None, :]
    return np.where(mass > 0, (cum[b] - cum[a]) / np.where(mass > 0, mass, 1.0), uni)


def margin_variance(rel: Any, a: int, g: GridEstimate, ax: int) -> float:
    """Variance of one cell of ``g``'s margin on attribute ``a`` after inverse-variance
    consistency: ``1 / Σ_k 1 / (size_k σ_k²)`` over the released grids holding ``a``."""
    cells_g = len(g.edges[ax]) - 1
    inv = 0.0
    for other in rel.grids:
        names = [rel._axis[str(x)] for x in other.attributes]
        if a not in names or other.variance >= 1e29:
            continue
        axo = names.index(a)
        per = max((len(other.edges[axo]) - 1) / cells_g, 1.0)
        rest = other.counts.size / (len(other.edges[axo]) - 1)
        inv += 1.0 / (per * rest * other.variance)
    return 1.0 / inv if inv > 0 else math.inf


def pair_noise(rel: Any, a: int, c: int, lo_a, hi_a, lo_c, hi_c, model: str) -> np.ndarray:  # type: ignore[no-untyped-def]
    """(Q, 5): (Var E, Var m_a, Var m_c, k_a, k_c) with in/in = E + k_a m_a + k_c m_c,
    in/any = m_a, any/in = m_c (``model="consistent"``); for ``"raw"`` the margins are the
    grid's own (σ² Σf² times the other axis' cells) and E its full noise."""
    g, flip = rel._oriented(a, c)
    if flip:
        lo_a, hi_a, lo_c, hi_c = lo_c, hi_c, lo_a, hi_a
    fx, fy = fractions(rel, g, 0, lo_a, hi_a), fractions(rel, g, 1, lo_c, hi_c)
    gx, gy = fx.shape[1], fy.shape[1]
    sxx, sx, syy, sy = (fx**2).sum(1), fx.sum(1), (fy**2).sum(1), fy.sum(1)
    var = g.variance
    x0, y0 = (rel._axis[str(v)] for v in g.attributes)
    ve = var * (sxx - sx**2 / gx) * (syy - sy**2 / gy)
    if model == "consistent":
        vx = margin_variance(rel, x0, g, 0) * sxx
        vy = margin_variance(rel, y0, g, 1) * syy
    else:
        vx, vy = var * gy * sxx, var * gx * syy
    cols = [vy * 0 + ve, vx, vy, sy / gy, sx / gx]
    if flip:
        cols = [ve, vy, vx, sx / gx, sy / gy]
    return np.stack(cols, axis=1)


def noise_sources(lam: int, model: dict) -> tuple[np.ndarray, np.ndarray]:  # type: ignore[type-arg]
    """Loadings (Q, S, P, 3) and variances (Q, S): one interaction source per pair, one margin
    source per position (shared by the pairs holding it, each with its own s.d.)."""
    pairs = list(combinations(range(lam), 2))
    q, npair = next(iter(model.values())).shape[0], len(pairs)
    load = np.zeros((q, npair + lam, npair, 3))
    var = np.ones((q, npair + lam))
    for p, (j, k) in enumerate(pairs):
        ve, vj, vk, kj, kk = model[(j, k)].T
        var[:, p] = ve
        load[:, p, p, 0] = 1.0
        sj, sk = np.sqrt(vj), np.sqrt(vk)
        load[:, npair + j, p] = np.stack([kj * sj, sj, np.zeros(q)], 1)
        load[:, npair + k, p] = np.stack([kk * sk, np.zeros(q), sk], 1)
    return load, var


# -- Norm-Sub's bias (plug-in) ------------------------------------------------------------------
def _norm_sub_shift(mu: np.ndarray, sigma: float, n: float) -> np.ndarray:
    """E[max(mu + σZ − δ, 0)] − mu per cell, δ so that the expected total is n."""

    def expect(d: float) -> np.ndarray:
        z = (mu - d) / sigma
        return np.asarray((mu - d) * norm.cdf(z) + sigma * norm.pdf(z))

    lo, hi = -10 * sigma - n, float(mu.max()) + 10 * sigma
    for _ in range(80):
        mid = 0.5 * (lo + hi)
        lo, hi = (mid, hi) if expect(mid).sum() > n else (lo, mid)
    return expect(0.5 * (lo + hi)) - mu


def _fracs_1d(e1, counts, e2, lo, hi):  # type: ignore[no-untyped-def]
    """Share of every coarse cell (edges e2) inside [lo, hi) in the PCHIP spread of a 1-D grid."""
    cum = np.concatenate([[0.0], np.cumsum(cell_values(e1, np.maximum(counts, 0.0)))])
    a, bb = np.clip(lo, e2[:-1], e2[1:]), np.clip(hi, e2[:-1], e2[1:])
    mass = np.diff(cum[e2])
    return np.where(mass > 0, (cum[bb] - cum[a]) / np.where(mass > 0, mass, 1.0), 0.0)


def norm_sub_input_bias(rel: Any, a: int, c: int, la, ha, lc, hc, shifts) -> list[float]:  # type: ignore[no-untyped-def]
    """Bias of (in/in, in/any, any/in) from Norm-Sub: the 2-D cells' own shift and the change of
    the cut cells' shares through the 1-D grids' shift."""
    g, flip = rel._oriented(a, c)
    if flip:
        la, ha, lc, hc = lc, hc, la, ha
    fx = fractions(rel, g, 0, np.array([la]), np.array([ha]))[0]
    fy = fractions(rel, g, 1, np.array([lc]), np.array([hc]))[0]
    sg = shifts[tuple(g.attributes)].counts
    dfx, dfy = np.zeros_like(fx), np.zeros_like(fy)
    for df, att, ax_, lo, hi in (
        (dfx, g.attributes[0], 0, la, ha),
        (dfy, g.attributes[1], 1, lc, hc),
    ):
        one = rel._one.get(rel._axis[str(att)])
        if one is not None:
            s1 = shifts[tuple(one.attributes)].counts
            e1, e2 = one.edges[0], g.edges[ax_]
            df[:] = _fracs_1d(e1, one.counts, e2, lo, hi) - _fracs_1d(
                e1, one.counts - s1, e2, lo, hi
            )
    G = g.counts
    v = [
        fx @ sg @ fy + dfx @ G @ fy + fx @ G @ dfy,
        fx @ sg.sum(1) + dfx @ G.sum(1),
        sg.sum(0) @ fy + G.sum(0) @ dfy,
    ]
    return [v[0], v[2], v[1]] if flip else v


# -- the delta method ---------------------------------------------------------------------------
def _pair_inputs(tables: dict, pairs: list) -> np.ndarray:  # type: ignore[type-arg]
    t = np.stack([np.asarray(tables[p], dtype=np.float64) for p in pairs], axis=1)
    return np.stack([t[..., 0, 0], t[..., 0, 0] + t[..., 0, 1], t[..., 0, 0] + t[..., 1, 0]], -1)


def _pair_tables(x: np.ndarray, total: np.ndarray) -> np.ndarray:
    ii, ia, ic = x[..., 0], x[..., 1], x[..., 2]
    n = total.reshape(total.shape + (1,) * (x.ndim - 1 - total.ndim))
    return np.stack([np.stack([ii, ia - ii], -1), np.stack([ic - ii, n - ia - ic + ii], -1)], -2)


def pair_estimates_moments(tables, loadings, variances, lam, total, max_iter=100):  # type: ignore[no-untyped-def]
    """Per query: both estimates, their gradients (central differences, steps of half an
    input's noise s.d.), V_f, V_i, C and in-in's plug-in structural bias."""
    pairs = list(combinations(range(lam), 2))
    x = _pair_inputs(tables, pairs)
    q, npair = x.shape[0], len(pairs)
    tot = np.full(q, float(total))
    sd = np.sqrt(np.einsum("qs,qspi->qpi", variances, loadings**2))
    h = np.maximum(0.5 * sd, 1e-4 * tot[:, None, None])
    k = 3 * npair
    eye = np.eye(k).reshape(k, npair, 3)
    steps = np.concatenate([np.zeros((1, npair, 3)), eye, -eye])
    xb = x[:, None] + steps[None] * h[:, None]
    totb = np.repeat(tot, 1 + 2 * k)
    tb = _pair_tables(xb.reshape(-1, npair, 3), totb)
    tab = {p: tb[:, i] for i, p in enumerate(pairs)}
    tol = 1e-7 * float(np.max(tot))
    out: dict[str, np.ndarray] = {}
    proj = {}
    zf = np.zeros((q,) + (2,) * lam)
    for variant, key in (("full", "full"), ("in-in", "inin")):
        z, _ = _fit_pairs(tab, lam, totb, variant=variant, max_iter=max_iter, tol=tol)
        a = z.reshape(q, 1 + 2 * k, -1)[:, :, 0]
        g = ((a[:, 1 : 1 + k] - a[:, 1 + k :]) / (2 * h.reshape(q, k))).reshape(q, npair, 3)
        out[f"grad_{key}"] = g
        proj[key] = np.einsum("qpi,qspi->qs", g, loadings)
        if variant == "full":
            zf = z.reshape((q, 1 + 2 * k) + (2,) * lam)[:, 0]
    out["v_full"] = np.einsum("qs,qs->q", variances, proj["full"] ** 2)
    out["v_inin"] = np.einsum("qs,qs->q", variances, proj["inin"] ** 2)
    out["c"] = np.einsum("qs,qs,qs->q", variances, proj["full"], proj["inin"])
    plug = {}
    for j, kk in pairs:
        other = tuple(1 + i for i in range(lam) if i not in (j, kk))
        plug[(j, kk)] = zf.sum(axis=other) if other else zf
    zi, _ = _fit_pairs(plug, lam, tot, variant="in-in", max_iter=max_iter, tol=tol)
    out["bias_inin"] = zi.reshape(q, -1)[:, 0] - zf.reshape(q, -1)[:, 0]
    return out


def moments(rel: Any, b: np.ndarray, model: str) -> dict[int, dict[str, np.ndarray]]:
    sizes = np.asarray(rel._require_domain().shape)
    restricted = (b[:, :, 0] > 0) | (b[:, :, 1] < sizes[None, :])
    lam = restricted.sum(axis=1)
    groups = rel._lambda_tables(b, restricted, lam, np.full(b.shape[0], rel.n))
    sh = [g.copy(_norm_sub_shift(g.counts, math.sqrt(g.variance), rel.n)) for g in rel.grids]
    shifts = {tuple(g.attributes): g for g in consistency(sh)}
    res = {}
    for lv, (qs, tabs) in groups.items():
        pairs = list(combinations(range(lv), 2))
        nm = {p: np.zeros((len(qs), 5)) for p in pairs}
        ds = np.zeros((len(qs), len(pairs), 3))
        for qi, qq in enumerate(qs):
            ax = np.flatnonzero(restricted[qq])
            for pi, (j, k) in enumerate(pairs):
                a, c = int(ax[j]), int(ax[k])
                bb = [np.array([v]) for v in (b[qq, a, 0], b[qq, a, 1], b[qq, c, 0], b[qq, c, 1])]
                nm[(j, k)][qi] = pair_noise(rel, a, c, *bb, model)[0]
                ds[qi, pi] = norm_sub_input_bias(rel, a, c, *(v[0] for v in bb), shifts)
        load, var = noise_sources(lv, nm)
        m = pair_estimates_moments(tabs, load, var, lv, rel.n, rel.max_iter)
        m["nsb_full"] = np.einsum("qpi,qpi->q", m.pop("grad_full"), ds)
        m["nsb_inin"] = np.einsum("qpi,qpi->q", m.pop("grad_inin"), ds)
        res[lv] = m
    return res


def delta_weight(m: dict[str, np.ndarray], cut: float | None) -> np.ndarray:
    """The minimum-MSE weight on "full" per query (clipped), times HDG's cut-error factor."""
    bf = m["nsb_full"]
    bi = m["nsb_inin"] + m["bias_inin"]
    mff, mii, mfi = m["v_full"] + bf**2, m["v_inin"] + bi**2, m["c"] + bf * bi
    den = mff + mii - 2 * mfi
    ok = den > 1e-12 * (mff + mii)
    w = np.clip(np.where(ok, (mii - mfi) / np.where(ok, den, 1.0), 1.0), 0.0, 1.0)
    return w * (_log_ramp(cut, *AUTO_CUT) if cut is not None else 1.0)


# -- runs ---------------------------------------------------------------------------------------
def settings(which: str) -> Iterator[tuple[Any, ...]]:
    if which == "docs":
        n, d, c, nq, seeds, epss, dseed = 1_000_000, 6, 64, 100, (7, 8), (0.2, 0.5, 1.0, 2.0), 2026
        data = [("gaussian", {"rho": 0.5}), ("gaussian", {"rho": 0.0}), ("laplace", {})]
    elif which == "seeds":
        n, d, c, nq, seeds, epss, dseed = 1_000_000, 6, 64, 100, range(7, 19), (0.5, 1.0), 2026
        data = [("gaussian", {"rho": 0.0}), ("gaussian", {"rho": 0.5})]
    else:
        n, d, c, nq, seeds, epss, dseed = 60_000, 4, 32, 60, (1, 2), (0.5, 1.0, 2.0, 4.0), 11
        data = [("gaussian", {"rho": 0.0}), ("gaussian", {"rho": 0.5}), ("laplace", {})]
    dom = fugu.datasets.synthetic_domain(d, c)
    for gen, kw in data:
        cols = getattr(fugu.datasets, f"correlated_{gen}")(n, d, c, seed=dseed, **kw)
        codes = np.stack([cols[a] for a in dom.names], 1)
        yield f"{gen} {kw.get('rho', '')}", dom, codes, n, nq, seeds, epss


def run(which: str, method: str, model: str, delta: bool) -> None:
    ratios: dict[str, list[float]] = defaultdict(list)
    print(f"{'data':>14} {'eps':>4} {'lam':>3} {'full':>7} {'in-in':>7} {'auto/b':>7} "
          f"{'w_auto':>6}" + (f" {'delta/b':>7} {'w_delta':>7}" if delta else ""))  # fmt: skip
    for data, dom, codes, n, nq, seeds, epss in settings(which):
        work = {
            lv: fugu.queries.random_workload(dom, nq, n_predicates=lv, volume=0.5, seed=lv)
            for lv in (3, 4)
        }
        tr = {lv: truth(codes, w.bounds(dom)) for lv, w in work.items()}
        cls = HDG if method == "hdg" else TDG
        for eps in epss:
            err: dict[int, dict[str, list[float]]] = defaultdict(lambda: defaultdict(list))
            wts: dict[int, list[float]] = defaultdict(list)
            for s in seeds:
                rel = cls(dom, eps).simulate(codes, rng=fugu.RandomSource(seed=s))
                for lv, w in work.items():
                    b = w.bounds(dom)
                    ans = {e: rel.with_estimator(e)._answer_bounds(b) for e in ("full", "in-in")}
                    ans["auto"] = rel._answer_bounds(b)
                    if delta:
                        m = moments(rel, b, model)[lv]
                        wd = delta_weight(m, rel.cut_error)
                        ans["delta"] = wd * ans["full"] + (1 - wd) * ans["in-in"]
                        wts[lv].append(float(np.mean(wd)))
                    for e, v in ans.items():
                        err[lv][e].append(float(np.mean(np.abs(v - tr[lv]))) / n)
            for lv in (3, 4):
                mae = {e: float(np.mean(v)) for e, v in err[lv].items()}
                better = min(mae["full"], mae["in-in"])
                ratios["auto"].append(mae["auto"] / better)
                line = (f"{data:>14} {eps:4.1f} {lv:3d} {mae['full']:7.4f} {mae['in-in']:7.4f} "
                        f"{mae['auto'] / better:7.3f} {rel.full_weight:6.2f}")  # fmt: skip
                if delta:
                    ratios["delta"].append(mae["delta"] / better)
                    line += f" {mae['delta'] / better:7.3f} {np.mean(wts[lv]):7.2f}"
                print(line, flush=True)
    for k, v in ratios.items():
        print(f"# {k}: worst {max(v):.3f}, mean {np.mean(v):.4f} over {len(v)} cells")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--which", default="grid", choices=["grid", "docs", "seeds"])
    ap.add_argument("--method", default="hdg", choices=["hdg", "tdg"])
    ap.add_argument("--noise", default="consistent", choices=["consistent", "raw"])
    ap.add_argument("--no-delta", action="store_true", help="only full / in-in / auto")
    a = ap.parse_args()
    run(a.which, a.method, a.noise, not a.no_delta)


if __name__ == "__main__":
    main()
