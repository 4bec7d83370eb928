"""The Laplace mechanism under a Blowfish policy: noise calibrated to ``S(f, P)/ε``.

Privacy model: (ε, P)-Blowfish privacy (He, Machanavajjhala, Ding, SIGMOD 2014, seed ``000_…``,
§5, Theorem 5.1: releasing ``f(D) + Lap(S(f, P)/ε)^m`` is (ε, P)-Blowfish private). Neighbours:
one record moves along an edge of the secret graph (⊥: add/remove; constraints: a minimal set of
such moves). Sensitivity: :func:`fugu.blowfish.sensitivity` (exact where computable, otherwise
a safe upper bound — the guarantee says which). ``S(f, P) <= S(f)``: never more noise than DP.

Noise: integer-valued queries (histograms, coarsened histograms, range counts, cumulative
counts) get exact discrete Laplace noise; real-valued ones (sums, weighted matrices) are released
on a power-of-two grid with discrete Laplace noise (:func:`fugu.noise.grid_laplace`) — never
floating-point Laplace. Special case from the paper (§5): under a partition policy the histogram
of the blocks (or of any coarser binning) has sensitivity 0 and is released *exactly*; the
guarantee says so (block membership is public under such a policy).

Expected error: each output has variance ``2p/(1−p)²`` with ``p = e^{−ε/S}`` (≈ ``2S²/ε²``).

>>> import fugu
>>> from fugu.blowfish import Policy, laplace, Coarsening
>>> dom = fugu.Domain([fugu.Ordinal("age", 0, 9)])
>>> hist = fugu.Histogram.from_records({"age": [1, 2, 2, 9]}, dom)
>>> pol = Policy.partition(dom, {"age": 5})
>>> rel = laplace(hist, 1.0, pol, query=Coarsening({"age": 5}), rng=fugu.RandomSource(seed=0))
>>> rel.values.tolist(), rel.guarantee.sensitivity
([3.0, 1.0], 0.0)
>>> laplace(hist, 1.0, pol, rng=fugu.RandomSource(seed=0)).guarantee.sensitivity
2.0
"""

from __future__ import annotations

from typing import Any

import numpy as np
from numpy.typing import ArrayLike, NDArray

from ..budget import Accountant
from ..domain import Domain
from ..errors import InvalidTypeError
from ..histogram import Histogram, require_histogram
from ..mechanism import guarantee, start
from ..noise import RandomSource, discrete_laplace_variance, geometric_mechanism, grid_laplace
from ..release import CubeRelease, Guarantee, Release
from ..release_state import Array, Meta
from ._eps import NoisePart, check_noise_epsilon
from .ordered import blowfish_neighbours
from .policy import Policy, check_counted_records
from .sensitivity import Coarsening, HistogramQuery, _normalise, query_matrix, sensitivity

__all__ = ["laplace", "LinearRelease"]

SOURCE = "He, Machanavajjhala, Ding, Blowfish Privacy (SIGMOD 2014), Sec. 5, Theorem 5.1"


class LinearRelease(Release):
    """Noisy answers to a linear query (one value per output), with their noise variances."""

    kind = "blowfish-linear"
    _state_domain = "optional"
    _state_fields = (
        Array("values", ndim=1),
        Array("variance", ndim=1),
        Meta("labels", "str-list", default=None),
    )

    def __init__(
        self,
        domain: Domain | None,
        guarantee: Guarantee,
        values: ArrayLike,
        variance: ArrayLike,
        labels: list[str] | None = None,
    ) -> None:
        super().__init__(domain, guarantee)
        self.values = np.asarray(values, dtype=np.float64).reshape(-1)
        self.variance = np.broadcast_to(np.asarray(variance, np.float64), self.values.shape).copy()
        self.labels = (
            list(labels) if labels is not None else [str(i) for i in range(self.values.size)]
        )

    def expected_errors(self) -> NDArray[np.float64]:
        """RMSE of every output."""
        return np.sqrt(self.variance)


def laplace(
    hist: Histogram,
    epsilon: float,
    policy: Policy,
    *,
    query: Any = None,
    rng: RandomSource | None = None,
    accountant: Accountant | None = None,
) -> Release:
    """Release ``f(hist)`` with discrete Laplace noise of scale ``S(f, P)/ε``.

    Parameters
    ----------
    hist : Histogram
    epsilon : float
    policy : Policy on the histogram's domain
    query : optional
        None (the full histogram: returns a :class:`~fugu.CubeRelease` that answers range
        queries), a :class:`Coarsening` (coarse histogram; exact when the policy's blocks lie
        inside its bins), ``"blocks"`` (the histogram of a partition policy's blocks), or any
        linear query :func:`sensitivity` accepts (range workload, ``"cumulative"``, ``"sum"``,
        a matrix): returns a :class:`LinearRelease`.
    """
    hist = require_histogram(hist)
    if not isinstance(policy, Policy):
        raise InvalidTypeError(
            f"policy must be a fugu.blowfish.Policy, got {type(policy).__name__}"
        )
    if policy.domain != hist.domain:
        from ..errors import PolicyError

        raise PolicyError(
            f"the policy is defined on {policy.domain!r} but the histogram on {hist.domain!r}"
        )
    check_counted_records(hist, policy, "Blowfish Laplace mechanism")
    if isinstance(query, str) and query == "blocks":
        q: Any = Coarsening(policy.block_ids())
    else:
        q = _normalise(query) if query is not None else HistogramQuery()
    res = sensitivity(q, policy, detail=True)
    sens = float(res.value)
    w: NDArray[np.float64] | None = None
    integer = True
    if not isinstance(q, HistogramQuery):
        w = query_matrix(q, hist.domain) if not _is_dense_matrix(q) else np.asarray(q, np.float64)
        if w.ndim == 1:
            w = w[None, :]
        integer = bool(np.all(w == np.rint(w)))
    grid_m = None if integer else int(w.shape[0]) if w is not None else None
    check_noise_epsilon(
        epsilon, [NoisePart("output", sens, 1.0, grid_m)], "Blowfish Laplace mechanism"
    )
    eps, source = start(
        epsilon,
        rng,
        accountant,
        f"blowfish laplace ({policy.description})",
        model="blowfish",
        policy=policy.name,
    )
    params: dict[str, Any] = {
        **policy.summary(),
        "noise": "discrete Laplace",
        "scale": sens / eps,
        "sensitivity_method": res.method,
        "sensitivity_exact": res.exact,
    }
    if sens == 0:
        params["exact"] = "sensitivity 0 under this policy: released without noise"
    g = guarantee(
        model="blowfish",
        epsilon=eps,
        neighbours=blowfish_neighbours(policy),
        mechanism="blowfish-laplace",
        rng=source,
        sensitivity=sens,
        source=SOURCE,
        parameters=params,
        data_options=hist.data_options,
    )
    if isinstance(q, HistogramQuery):
        counts = hist.counts
        noisy = geometric_mechanism(counts, sens, eps, source) if sens > 0 else counts
        var = float(discrete_laplace_variance(sens / eps)) if sens > 0 else 0.0
        return CubeRelease(hist.domain, g, np.asarray(noisy, dtype=np.float64), cell_variance=var)
    assert w is not None
    exact = w @ hist.counts.reshape(-1).astype(np.float64)
    labels = _labels(q, w.shape[0])
    if sens == 0:
        return LinearRelease(hist.domain, g, exact, 0.0, labels)
    if integer:
        noisy = geometric_mechanism(np.rint(exact).astype(np.int64), sens, eps, source)
        var = float(discrete_laplace_variance(sens / eps))
        return LinearRelease(hist.domain, g, noisy.astype(np.float64), var, labels)
    vals, info = grid_laplace(exact, sens, eps, source)
    return LinearRelease(hist.domain, g, vals, info.variance(), labels)


def _is_dense_matrix(q: Any) -> bool:
    return isinstance(q, np.ndarray)


def _labels(q: Any, m: int) -> list[str]:
    if isinstance(q, Coarsening):
        return [f"block {i}" for i in range(m)]
    return [str(i) for i in range(m)]
