"""TDG — Two-Dimensional Grid (Yang, Wang, Li, Cheng, Su, PVLDB 14(3) 2020, seed ``003_…``).

Privacy model: ε-local differential privacy. Neighbours: any two records of one user (each user
randomises her own record on her device; the aggregator is untrusted). Sensitivity: not
applicable (local randomiser); every user sends **one** report with the full ε, so the
protocol is ε-LDP exactly — the report is the output of one ε-LDP frequency oracle (GRR, OLH or
OUE, Wang et al., USENIX Security 2017) applied to the user's cell in one grid, and the
user-to-grid assignment is public and independent of the data (user division, §2 of the paper).
Everything after the reports (Norm-Sub, consistency, λ-D estimation) is post-processing.

Algorithm (§4, spec ``ldp_range.md`` §5):

1. **Grids.** Users are divided into m = C(d, 2) groups, one per attribute pair; pair (j, k)
   is cut into g2 × g2 cells (per attribute ``min(g2, c)``, cell boundaries ``floor(i·c/g2)``,
   so any domain size works). g2 comes from the guideline
   ``g2 = sqrt(2α2(e^ε−1)·sqrt(n/(m e^ε)))`` (α2 = 0.03) rounded to a power of two
   (:func:`fugu.ldp.grids.round_granularity`). Each user reports her cell through the grid's
   frequency oracle; counts are scaled from the group to the population (× n/N_group).
   fugu's extension (``partitions``; default ``"auto"``: on when g2 ≤ 2): the grids of pairs
   (j, k) with j + k odd are cut half a cell further (:func:`~fugu.ldp.grid_layout.shifted_edges`),
   so every attribute's margin is seen on two partitions and Phase 2 estimates it on their
   common refinement (cells of half the width). The layout is public and fixed before any
   report, so privacy is unchanged; ``partitions="aligned"`` is the paper's TDG.
2. **Post-processing.** Norm-Sub on every grid, then consistency of the 1-D marginals shared
   by grids alternated with Norm-Sub until no cell moves by a user (at most 100 rounds), ending
   with Norm-Sub (:func:`fugu.inference.ldp_post.consistent_grids`; with shifted partitions the
   margins are made consistent on the refinement by weighted least squares,
   :func:`fugu.inference.ldp_post.refined_margin`).
3. **Answers.** A 2-D query sums the cells of its pair's grid; a cut cell is split by the
   paper's uniform guess (``interpolation="uniform"``) or, by default, by the product of the
   two attributes' within-cell shares read from the grids' consistent margins spread over
   their values by the smoothest log-density with their cell counts (``"logsmooth"``, which
   keeps a sharp mode; ``"pchip"``, monotone cubic interpolation, flattens it); λ = 1 uses the
   grids' (consistent) marginals; λ ≥ 3 combines the 2-D answers of all C(λ, 2) pairs by
   weighted update (Algorithm 2, all four in/out cells of each pair: "full";
   :class:`~fugu.ldp.grids.GridRelease`).

Expected error (§5.1): noise + sampling variance of a 2-D answer ≈ (covered cells) ·
n·m·4e^ε/(e^ε−1)² (OUE/OLH; GRR on small grids is lower), plus a non-uniformity error from cut
cells that depends on the data; ``rel.expected_error(q)`` gives the first part for λ ≤ 2.
TDG's grids are coarse (g2 is 2–8 at n = 10^6), so partial cells make its 2-D answers biased;
HDG (:mod:`fugu.ldp.hdg`) fixes that with 1-D grids.

Example
-------
>>> import fugu
>>> dom = fugu.datasets.synthetic_domain(3, 16)
>>> data = fugu.datasets.correlated_gaussian(20_000, 3, 16, seed=1)
>>> tdg = fugu.ldp.TDG(dom, epsilon=1.0)
>>> rel = tdg.simulate(data, rng=fugu.RandomSource(seed=2))
>>> rel.guarantee.model, rel.guarantee.parameters["g2"], rel.guarantee.parameters["partitions"]
('ldp', [2, 2, 2], 'shifted')
>>> q = fugu.RangeQuery({"a0": (3, 10), "a1": (2, 12)})
>>> abs(rel.answer(q) - q.answer(fugu.Histogram.from_records(data, dom).counts, dom)) < 2000
True
"""

from __future__ import annotations

from typing import ClassVar

from .grids import GridProtocol
from .registry import register_method

__all__ = ["TDG"]


@register_method
class TDG(GridProtocol):
    """Two-Dimensional Grid: 2-D grids over every attribute pair (see the module docstring).

    Parameters are those of :class:`~fugu.ldp.grids.GridProtocol` without ``g1``.
    """

    name: ClassVar[str] = "tdg"
    hybrid: ClassVar[bool] = False
    summary: ClassVar[str] = "Two-Dimensional Grid: 2-D grids over all attribute pairs"
    source: ClassVar[str] = (
        "Yang, Wang, Li, Cheng, Su, 'Answering Multi-Dimensional Range Queries under Local "
        "Differential Privacy', PVLDB 14(3) 2020, Section 4 (TDG)"
    )
