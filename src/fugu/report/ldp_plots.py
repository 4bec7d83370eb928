"""Figures and the HTML comparison report of the local-DP range-query methods.

Moved here from :mod:`fugu.ldp.grids` (issue 19: mechanisms do not draw; ``report/`` may import
mechanisms, never the reverse). :func:`range_report` runs every method on the same records and
queries and returns a :class:`fugu.report.Report`; ``fugu ldp simulate --report`` uses it.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np

from ..domain import Domain
from ..errors import InvalidParameterError
from ..ldp.grids import grid_edges
from ..ldp.protocol import LDPProtocol
from ..noise import RandomSource
from ..release import Release
from . import Report, matplotlib_agg

__all__ = ["range_report"]

#: What the title of an experiment report on raw data says.
NOT_FOR_RELEASE = "experiment on raw data: not for release"


def range_report(
    domain: Domain,
    records: Any,
    *,
    methods: Sequence[str] = ("uni", "msw", "hio", "lhio", "calm", "tdg", "hdg"),
    epsilons: Sequence[float] = (0.2, 0.5, 1.0, 2.0),
    lam: int = 2,
    volume: float = 0.5,
    n_queries: int = 100,
    pair: tuple[str, str] | None = None,
    heatmap_bins: int = 16,
    seed: int | None = 0,
    title: str = "Local DP multi-dimensional range queries",
    options: dict[str, Any] | None = None,
) -> Any:
    """An HTML report (:class:`fugu.report.Report`) comparing LDP range-query methods.

    Runs every method of ``methods`` (wire names of :data:`fugu.ldp.METHODS`; unknown ones are
    skipped with a note) at every ε on the same records and ``n_queries`` random λ-D queries of
    volume ``volume``; plots MAE (|est − true|/n) against ε, tabulates it, and shows the true and
    the estimated 2-D distribution of one attribute pair (default: the first two attributes) as
    heatmaps of ``heatmap_bins`` × ``heatmap_bins`` blocks, for the last method at the largest ε.

    ``options`` are passed to every method's constructor (``fugu ldp simulate -o key=value``;
    the CLI checks each key against every method first) and listed in the report's setup.

    ``seed`` makes the runs reproducible and therefore NOT private (an experiment on data you
    hold anyway); pass ``seed=None`` to use the secure source. Used by ``fugu ldp simulate
    --report``.
    """
    from ..ldp.registry import METHODS
    from ..queries import random_workload

    proto0 = LDPProtocol(domain, 1.0)
    codes = proto0.encode(records)
    n = codes.shape[0]
    if n == 0:
        raise InvalidParameterError("records are empty")
    lam = min(lam, domain.ndim)
    work = random_workload(domain, n_queries, n_predicates=lam, volume=volume, seed=seed)
    bounds = work.bounds(domain)
    inside = np.ones((len(work), n), dtype=bool)
    for a in range(domain.ndim):
        inside &= (codes[None, :, a] >= bounds[:, a, 0, None]) & (
            codes[None, :, a] < bounds[:, a, 1, None]
        )
    truth = inside.sum(axis=1).astype(np.float64)
    del inside
    rep = Report(f"{title} ({NOT_FOR_RELEASE})")
    rep.add_text(
        "Not a private release",
        "This experiment runs on the raw records: it shows their exact number, their true "
        "2-D distribution and errors measured against the true answers. Keep it with the data "
        "owner; do not publish or share it."
        + (
            " Its runs are seeded (reproducible), so even the estimates are not private."
            if seed is not None
            else ""
        ),
        note=True,
    )
    rep.add_text(
        "Setup",
        f"{n:,} records, {domain.ndim} attributes ({', '.join(domain.names)}); {len(work)} random "
        f"{lam}-D range queries covering a fraction {volume:g} of each queried attribute. MAE is "
        f"the mean |estimate − truth| / n."
        + (
            " Method options: " + ", ".join(f"{k}={v}" for k, v in options.items()) + "."
            if options
            else ""
        ),
    )
    mae: dict[str, list[float]] = {}
    last: tuple[str, Release] | None = None
    skipped = []
    for name in methods:
        cls = METHODS.get(name.lower())
        if cls is None:
            skipped.append(name)
            continue
        mae[name] = []
        for i, eps in enumerate(epsilons):
            rng = None if seed is None else RandomSource(seed=seed + 1000 * i + 1)
            try:
                rel = cls(domain, eps, **(options or {})).simulate(codes, rng=rng)
            except Exception as exc:  # one method failing must not hide the others
                skipped.append(f"{name} (eps={eps:g}: {exc})")
                mae[name].append(math.nan)
                continue
            mae[name].append(float(np.mean(np.abs(rel.answer_many(work) - truth))) / n)
            last = (name, rel)
    if skipped:
        rep.add_text("Skipped", "; ".join(skipped), note=True)
    plt = matplotlib_agg()
    fig, ax = plt.subplots(figsize=(6.5, 4))
    for name, vals in mae.items():
        ax.plot(list(epsilons), vals, marker="o", label=name.upper())
    ax.set_xlabel("ε")
    ax.set_ylabel("MAE (fraction of users)")
    ax.set_yscale("log")
    ax.legend()
    rep.add_figure(f"MAE vs ε ({lam}-D queries)", fig)
    rep.add_table(
        "MAE table",
        ["method", *[f"ε={e:g}" for e in epsilons]],
        [[m.upper(), *v] for m, v in mae.items()],
    )
    if last is not None and domain.ndim >= 2:
        x, y = pair or (domain.names[0], domain.names[1])
        ax_x, ax_y = domain.axis(x), domain.axis(y)
        ex = grid_edges(domain.shape[ax_x], min(heatmap_bins, domain.shape[ax_x]))
        ey = grid_edges(domain.shape[ax_y], min(heatmap_bins, domain.shape[ax_y]))
        gx, gy = len(ex) - 1, len(ey) - 1
        b = np.zeros((gx * gy, domain.ndim, 2), dtype=np.int64)
        b[:, :, 1] = domain.shape
        ii, jj = np.meshgrid(np.arange(gx), np.arange(gy), indexing="ij")
        b[:, ax_x, 0], b[:, ax_x, 1] = ex[ii.ravel()], ex[ii.ravel() + 1]
        b[:, ax_y, 0], b[:, ax_y, 1] = ey[jj.ravel()], ey[jj.ravel() + 1]
        est = last[1]._answer_bounds(b).reshape(gx, gy) / n
        cx = np.searchsorted(ex, codes[:, ax_x], side="right") - 1
        cy = np.searchsorted(ey, codes[:, ax_y], side="right") - 1
        true2 = np.bincount(cx * gy + cy, minlength=gx * gy).reshape(gx, gy) / n
        fig, axes = plt.subplots(1, 2, figsize=(9, 4))
        vmax = float(max(true2.max(), est.max()))
        panels = ((axes[0], true2, "true (raw data)"), (axes[1], est, f"{last[0].upper()}"))
        for a_, mat, ttl in panels:
            im = a_.imshow(mat.T, origin="lower", vmin=0, vmax=vmax, cmap="viridis")
            a_.set_title(ttl)
            a_.set_xlabel(x)
            a_.set_ylabel(y)
        fig.colorbar(im, ax=axes, shrink=0.8)
        rep.add_figure(
            f"2-D distribution of ({x}, {y})",
            fig,
            f"Fraction of users per block, true (from the raw records: not private) vs "
            f"{last[0].upper()} at ε = {epsilons[-1]:g}.",
        )
    return rep
