"""The Laplace baseline ("Basic"): independent noise on every cell of the cube.

Privacy model: central ε-differential privacy. Neighbours: replace one record (default; the
histogram's L1 sensitivity is 2 — one cell loses a record, another gains it) or add/remove one
record (sensitivity 1). Source: Dwork, McSherry, Nissim, Smith (2006); the "Basic" baseline of
Privelet (Xiao, Wang, Gehrke, ICDE 2010, seed ``004_…``) and of the Blowfish experiments.

Noise: exact discrete Laplace (two-sided geometric) of scale Δ/ε on each integer count, so the
release is ε-DP exactly (no floating-point leak). A range query covering v cells has variance
v · 2p/(1−p)² with p = e^(−ε/Δ) (≈ 2vΔ²/ε²).
"""

from __future__ import annotations

import numpy as np

from ..budget import Accountant
from ..histogram import Histogram, require_histogram
from ..mechanism import guarantee, histogram_sensitivity, start
from ..noise import RandomSource, discrete_laplace_variance, geometric_mechanism
from ..release import CubeRelease

__all__ = ["laplace", "histogram_sensitivity"]


def laplace(
    hist: Histogram,
    epsilon: float,
    *,
    neighbours: str = "replace",
    rng: RandomSource | None = None,
    accountant: Accountant | None = None,
) -> CubeRelease:
    """Release every cell of ``hist`` with discrete Laplace noise of scale Δ/ε.

    Parameters
    ----------
    hist : Histogram
    epsilon : float
        Privacy-loss bound, > 0.
    neighbours : {"replace", "add-remove"}
        Replace-one-record (Δ = 2, the papers' setting) or add/remove-one-record (Δ = 1).
    rng : RandomSource, optional
        Secure by default; a seeded source makes the release reproducible and not private.
    accountant : Accountant, optional
        Charged ε before the data is touched.

    Returns
    -------
    CubeRelease
        Unbiased noisy counts; ``expected_error(q)`` is exact.

    Examples
    --------
    >>> import fugu
    >>> dom = fugu.Domain([fugu.Ordinal("age", 0, 9)])
    >>> hist = fugu.Histogram.from_records({"age": [1, 2, 2, 9]}, dom)
    >>> rel = fugu.central.laplace(hist, epsilon=1.0, rng=fugu.RandomSource(seed=1))
    >>> rel.counts.shape, rel.guarantee.sensitivity
    ((10,), 2.0)
    """
    hist = require_histogram(hist)
    sens = histogram_sensitivity(neighbours)
    eps, source = start(
        epsilon, rng, accountant, "laplace histogram", neighbours=neighbours, sensitivity=sens
    )
    noisy = geometric_mechanism(hist.counts, sens, eps, source)
    var = float(discrete_laplace_variance(sens / eps))
    g = guarantee(
        model="central-dp",
        epsilon=eps,
        neighbours=neighbours,
        mechanism="laplace",
        rng=source,
        sensitivity=float(sens),
        source="Dwork et al. 2006; 'Basic' in Xiao et al., Privelet (ICDE 2010)",
        parameters={"noise": "discrete Laplace", "scale": sens / eps},
        data_options=hist.data_options,
    )
    return CubeRelease(hist.domain, g, noisy.astype(np.float64), cell_variance=var)
