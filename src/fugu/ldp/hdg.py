"""HDG — Hybrid-Dimensional Grid (Yang, Wang, Li, Cheng, Su, PVLDB 14(3) 2020, seed ``003_…``).

Privacy model: ε-local differential privacy. Neighbours: any two records of one user (each user
randomises her own record on her device; the aggregator is untrusted). Sensitivity: not
applicable (local randomiser); every user sends **one** report with the full ε — the output of
one ε-LDP frequency oracle (GRR, OLH or OUE; Wang et al., USENIX Security 2017) applied to her
cell in one grid, the grid being assigned publicly and independently of the data (user
division). Everything after the reports is post-processing.

Algorithm (§4, spec ``ldp_range.md`` §5):

1. **Grids.** m = d + C(d, 2) user groups: a 1-D grid of g1 cells for every attribute and a
   g2 × g2 grid for every pair, with the guideline
   ``g1 = [n(e^ε−1)²α1²/(2m e^ε)]^{1/3}``, ``g2 = sqrt(2α2(e^ε−1)·sqrt(n/(m e^ε)))``
   (α1 = 0.7, α2 = 0.03), each rounded to a power of two and capped at the attribute size c;
   g1 ≥ g2 so the 1-D cells refine the 2-D ones. Cell boundaries ``floor(i·c/g)`` (any c).
2. **Post-processing.** Norm-Sub, then consistency of every attribute's marginal across its
   1-D grid and d − 1 2-D grids with inverse-variance weights (§4.2: weight ∝ 1/|S_i|),
   alternated with Norm-Sub until stable, ending with Norm-Sub.
3. **Response matrices** (Algorithm 1). For each pair, a c_j × c_k matrix fitted by weighted
   update (IPF) to the 1-D grids of j and k and the pair's 2-D grid. By default the 1-D grids
   are first spread over their values by monotone cubic interpolation of their cumulative
   counts and fitted value by value (``interpolation="pchip"``); ``"uniform"`` fits them cell
   by cell as the paper does (flat inside a 1-D cell, which underestimates intervals around
   a mode).
4. **Answers.** A 2-D query: cells of the 2-D grid fully inside contribute their count, cut cells
   the response matrix's sum over the cut. λ = 1: the 1-D grid (spread over its values as in
   step 3). λ ≥ 3: the 2 × 2 in/out table of each attribute pair from 2-D answers, combined by
   weighted update (Algorithm 2; ``estimator="full"`` fits all four cells of each pair table,
   ``"in-in"`` only the (in, in) cell as the authors' code, the default ``"auto"`` picks one
   from the predicted noise of the grids — see ``docs/ldp_grids.md`` for the measurements).

Expected error (§5.1): noise + sampling variance per cell ``n·m·Var_FO`` (≈ 4e^ε/(e^ε−1)² per
user for OUE/OLH); ``rel.expected_error(q)`` gives this part for λ ≤ 2 (non-uniformity and
estimation errors depend on the data).

Example
-------
>>> import fugu
>>> dom = fugu.datasets.synthetic_domain(3, 16)
>>> data = fugu.datasets.correlated_gaussian(20_000, 3, 16, seed=1)
>>> hdg = fugu.ldp.HDG(dom, epsilon=1.0)
>>> reports = hdg.client(fugu.RandomSource(seed=2)).perturb(data)   # user side
>>> rel = hdg.aggregate(reports)                                     # server side
>>> rel.guarantee.parameters["g1"], rel.guarantee.parameters["g2"]
([8, 8, 8], [2, 2, 2])
>>> q = fugu.RangeQuery({"a0": (0, 7), "a1": (4, 11), "a2": (0, 9)})
>>> abs(rel.answer(q) - q.answer(fugu.Histogram.from_records(data, dom).counts, dom)) < 2000
True
"""

from __future__ import annotations

from typing import ClassVar

from .grids import GridProtocol
from .registry import register_method

__all__ = ["HDG"]


@register_method
class HDG(GridProtocol):
    """Hybrid-Dimensional Grid: 1-D grids per attribute plus 2-D grids per pair (see the module
    docstring). Parameters: :class:`~fugu.ldp.grids.GridProtocol`."""

    name: ClassVar[str] = "hdg"
    hybrid: ClassVar[bool] = True
    summary: ClassVar[str] = "Hybrid-Dimensional Grid: 1-D and 2-D grids with response matrices"
    source: ClassVar[str] = (
        "Yang, Wang, Li, Cheng, Su, 'Answering Multi-Dimensional Range Queries under Local "
        "Differential Privacy', PVLDB 14(3) 2020, Section 4 (HDG, Algorithms 1 and 2)"
    )
