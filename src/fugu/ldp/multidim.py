"""Multi-dimensional range queries under local DP: the baselines HIO, LHIO, CALM, MSW and Uni.

Each method answers λ-D range-count queries over the ordered attributes of a
:class:`~fugu.Domain` (an ordinal's values; a nominal's leaves in DFS order). Source for all
five: Yang, Wang, Li, Cheng, Su, "Answering Multi-Dimensional Range Queries under Local
Differential Privacy", PVLDB 14(3) 2020 (seed ``003_…``), Section 3 ("baseline approaches"),
with each primitive from its own paper; spec ``ldp_range.md`` §4.

Privacy model: ε-local DP, neighbours: any two records of one user. Every user sends **one**
report with the full ε (user division); the user-to-group assignment is public, balanced and
independent of the data (:meth:`~fugu.ldp.protocol.LDPProtocol.assign_groups`). Everything
after the frequency oracle / Square Wave is post-processing.

* :class:`Uni` — the uniform guess ``n · Π |I_j|/c_j``. Users send a constant (only n is used).
  A floor every method must beat.
* :class:`MSW` — users split into d groups; group j reports attribute j by Square Wave; each
  1-D distribution is rebuilt with EMS; a λ-D answer is ``n · Π_j θ_j(I_j)`` (independence).
* :class:`HIO` (Wang et al., SIGMOD 2019) — a b-ary hierarchy per attribute; users split over
  the ``Π(h_j + 1) − 1`` d-dim layers (all-root layer dropped); a user reports the d-dim cell of
  her record at her layer with the adaptive oracle (GRR or OLH). A query is decomposed per
  attribute into at most ``2(b−1)h`` canonical nodes (root for unqueried attributes) and answered
  by summing, over the product of node lists, each cell's estimate scaled by ``n / N_layer``.
  Cells are estimated on demand from the kept reports (layers over six attributes have up to
  c^6 cells), so HIO's mergeable state is the reports themselves (merge = concatenation).
* :class:`LHIO` — HIO per attribute pair: users split over the ``C(d,2)`` pairs and, inside a
  pair, over the ``(h_j+1)(h_k+1) − 1`` 2-D layers. The pair's total (the root layer) is the
  public n. 2-D constrained inference: Hay et al.'s least-squares tree consistency applied along
  the first attribute (for every node of the second) and then along the second — with equal
  node variances this is the exact least-squares projection onto consistent 2-D hierarchies
  (the design is a Kronecker product, so both orders give the same result; the paper runs it
  "twice, starting with each attribute", details omitted). Then, as in CALM, Norm-Sub and
  consistency across pairs, and λ-D answers from the pairs.
* :class:`CALM` (Zhang et al., CCS 2018, as adapted by Yang et al.) — all ``C(d,2)`` 2-way
  marginals over the full domains; users split over the pairs; adaptive oracle per pair;
  post-processing = a normalisation and variance-weighted consistency of the shared 1-D
  marginals, alternated (:func:`fugu.inference.ldp_post.consistent_grids`).

Normalisation (CALM, LHIO). The default ``normalisation="norm"`` shifts every cell of a pair
equally so the pair sums to n: linear, so answers stay **unbiased** (fugu's rule), and cells may
stay negative. ``"norm-sub"`` is the CALM paper's Norm-Sub (non-negative, biased). With c = 64
every pair has 4,096 cells whose noise dwarfs the counts, and Norm-Sub then keeps only the noise
peaks: measured on correlated Gaussian data (n = 10^6, d = 6, ε = 2, 30 queries) the 2-D MAE
was 0.031 (CALM) and 0.023 (LHIO) with ``"norm"`` against 0.254 and 0.287 with ``"norm-sub"``
(0.247 / 0.133 vs 0.298 / 0.307 at ε = 0.5).

λ-D answers for LHIO and CALM (:class:`PairsRelease`): λ = 2 from the pair's matrix; λ ≥ 3 by
the weighted update over the 2^λ in/out table fitted to all four in/out cells of every pair
(:func:`fugu.inference.ldp_post.estimate_from_pairs`, ``variant="full"``, shared with TDG/HDG);
λ = 1 from the (consistent) 1-D marginal; λ = 0 is n.

Where the code lives (each name re-exported here, its old home): :mod:`fugu.ldp.independent`
(Uni, MSW), :mod:`fugu.ldp.pairs` (CALM, :class:`PairsRelease`), :mod:`fugu.ldp.hio` (HIO,
LHIO) and :mod:`fugu.ldp.multidim_common` (what they share).
"""

from __future__ import annotations

from .hio import HIO, LHIO, HIORelease
from .hio import _layer_cell_of as _layer_cell_of  # re-exported (tests use it)
from .independent import MSW, ProductRelease, Uni, UniformRelease
from .multidim_common import YANG as YANG
from .pairs import CALM, PairsRelease

__all__ = [
    "Uni",
    "MSW",
    "HIO",
    "LHIO",
    "CALM",
    "UniformRelease",
    "ProductRelease",
    "HIORelease",
    "PairsRelease",
]
