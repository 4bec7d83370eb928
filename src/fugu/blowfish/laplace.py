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

Range: answers are exact (int64 below 2^62, or on the noise grid below 2^53 of its steps). With a
public n (no ⊥) a query whose answers ``n · max|W|`` could leave that range is refused before the
charge; with ⊥ n is private and refusing on it would tell neighbours apart, so only a query one
record overflows is refused and the exact answers are clamped to the range (1-Lipschitz: the
sensitivity still holds; the bound is in the guarantee as ``answer_clamp``).

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

import dataclasses
import math
from typing import Any

import numpy as np
from numpy.typing import ArrayLike, NDArray

from ..budget import Accountant
from ..domain import Domain, Ordinal
from ..errors import InvalidParameterError, InvalidTypeError
from ..histogram import Histogram, require_histogram
from ..mechanism import guarantee, start
from ..noise import (
    GRID_EXACT_UNITS,
    RandomSource,
    discrete_laplace_variance,
    geometric_mechanism,
    grid_capacity,
    grid_exact_cap,
    grid_granularity,
    grid_laplace,
    round_dyadic,
)
from ..release import CubeRelease, Guarantee, Release
from ..release_state import Array, Meta
from ._eps import NoisePart, check_noise_epsilon
from .ordered import blowfish_neighbours
from .policy import Policy, check_counted_records
from .sensitivity import (
    Coarsening,
    HistogramQuery,
    SumQuery,
    _normalise,
    query_matrix,
    sensitivity,
)

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
            + (
                f"; build it on the domain: Policy.parse({policy!r}, domain)"
                if isinstance(policy, str)
                else " (e.g. Policy.line(domain), Policy.distance_threshold(domain, 5))"
            )
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
        if w.shape[0] == 0:
            # an empty workload or a 0-row matrix released nothing and spent epsilon
            raise InvalidParameterError(
                "query has no outputs (an empty workload or a matrix with 0 rows): there is "
                "nothing to release; give at least one query"
            )
        integer = bool(np.all(w == np.rint(w)))
    grid_m = None if integer else int(w.shape[0]) if w is not None else None
    check_noise_epsilon(
        epsilon, [NoisePart("output", sens, 1.0, grid_m)], "Blowfish Laplace mechanism"
    )
    # with ⊥ the number of records is private: refusing on it would tell neighbours apart (a
    # record added at a ⊥ value crosses the bound), so the exact answers are clamped to the
    # public range instead (1-Lipschitz: the sensitivity still bounds the change)
    n_private = policy.has_bottom_edges()
    w_int = _integer_matrix(q, w, hist, n_private) if integer and w is not None else None
    if w is not None and not integer and sens > 0:
        _check_grid_range(w, sens, hist, n_private)
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
    if n_private and w is not None:
        params["answer_clamp"] = (
            MAX_INTEGER_ANSWER - 1 if w_int is not None else grid_exact_cap(sens, int(w.shape[0]))
        )
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
    labels = _labels(q, w.shape[0])
    if w_int is not None:
        # integer queries are answered exactly in int64 (in float64 a sum above 2^53 is rounded,
        # and one move could change the rounded answer by more than the sensitivity)
        exact_int = _integer_answers(w_int, hist.counts.reshape(-1).astype(np.int64))
        if sens == 0:
            return LinearRelease(hist.domain, g, exact_int.astype(np.float64), 0.0, labels)
        noisy = geometric_mechanism(exact_int, sens, eps, source)
        var = float(discrete_laplace_variance(sens / eps))
        return LinearRelease(hist.domain, g, noisy.astype(np.float64), var, labels)
    counts = hist.counts.reshape(-1).astype(np.int64)
    if sens == 0:
        # every neighbour has the same exact answers: release their correctly rounded doubles
        # (a float64 product would round the same answer differently for different data)
        return LinearRelease(hist.domain, g, _exact_doubles(w, counts), 0.0, labels)
    # the answers on the noise grid, computed exactly: grid_laplace's rounding to its grid is
    # then the only rounding (float64 W @ counts erred by up to the sensitivity near 2^44: W =
    # [29724288040880.574, 29724288040882.582], 279 records, one move changed the grid value by
    # 1.49 times the effective sensitivity)
    gamma = float(grid_granularity(sens, max(1, int(w.shape[0]))))
    cap = grid_exact_cap(sens, int(w.shape[0])) if n_private else None
    exact = _exact_on_grid(w, counts, gamma, cap)
    vals, info = grid_laplace(exact, sens, eps, source)
    # the noise is on the grid, with the sensitivity rounded up to it: say so (the guarantee
    # said 'discrete Laplace' of scale S/eps, as on the integer path)
    grid_params = {
        **params,
        "noise": "discrete Laplace on a power-of-two grid",
        "grid": float(np.min(info.granularity)),
        "effective_sensitivity": info.effective_sensitivity,
        "scale": info.effective_sensitivity / eps,
    }
    g = dataclasses.replace(g, parameters=grid_params)
    return LinearRelease(hist.domain, g, vals, info.variance(), labels)


def _exact_terms(w: NDArray[np.float64], counts: NDArray[np.int64]) -> list[tuple[int, int]]:
    """``Σ_x W[i, x]·counts[x]`` exactly, per output: ``(total, e)`` with answer = total·2^e
    (Python integers: every double is an integer mantissa times a power of two)."""
    idx = np.flatnonzero(counts)
    out: list[tuple[int, int]] = []
    if idx.size == 0:
        return [(0, 0)] * int(w.shape[0])
    h = counts[idx].astype(object)
    mant, ex = np.frexp(w[:, idx])
    big = (mant * 2.0**53).astype(np.int64)  # exact: |mant| < 1, 53-bit significands
    exps = ex.astype(np.int64) - 53
    for i in range(w.shape[0]):
        e0 = int(exps[i].min())
        shifts = (exps[i] - e0).astype(object)
        total = int(np.left_shift(big[i].astype(object) * h, shifts).sum())
        out.append((total, e0))
    return out


def _exact_on_grid(
    w: NDArray[np.float64], counts: NDArray[np.int64], gamma: float, cap: float | None = None
) -> NDArray[np.float64]:
    """The exact answers rounded (half to even) to multiples of the power of two ``gamma``, as
    doubles (exact: the range check keeps them below 2^53 grid units). ``cap`` (a multiple of
    ``gamma`` below 2^53 of them; a private n, where nothing was checked): answers beyond
    ``±cap`` are clamped to it, compared in exact integers (a double product could overflow).

    >>> w = np.array([[1e300, 1.0]])
    >>> _exact_on_grid(w, np.array([10**9, 3]), 1.0, cap=2.0**40).tolist()
    [1099511627776.0]
    """
    g = int(math.frexp(gamma)[1]) - 1  # gamma = 2^g
    k = 0 if cap is None else int(cap / gamma)  # exact: cap is k grid steps
    vals = []
    for total, e0 in _exact_terms(w, counts):
        if cap is not None:
            over = abs(total) << (e0 - g) > k if e0 >= g else abs(total) > k << (g - e0)
            if over:
                vals.append(cap if total > 0 else -cap)
                continue
        vals.append(round_dyadic(total, e0, g))
    return np.asarray(vals, dtype=np.float64)


def _exact_doubles(w: NDArray[np.float64], counts: NDArray[np.int64]) -> NDArray[np.float64]:
    """The exact answers, correctly rounded to doubles."""
    from fractions import Fraction

    vals = []
    for total, e0 in _exact_terms(w, counts):
        vals.append(float(Fraction(total) * Fraction(2) ** e0))
    return np.asarray(vals, dtype=np.float64)


#: Integer answers are computed in int64 when ``n · max|W|`` stays below this (no overflow in
#: the product, and room for the noise).
MAX_INTEGER_ANSWER = 2**62


def _integer_matrix(
    q: Any, w: NDArray[np.float64], hist: Histogram, n_private: bool = False
) -> NDArray[np.int64]:
    """The exact int64 matrix of an integer-valued query, checked (before any budget is spent)
    so that every answer ``W·h`` is exact in int64: ``n · max|W| < 2^62``. With a private n
    (a policy with ⊥) that check is skipped: :func:`_integer_answers` clamps instead.

    A :class:`SumQuery` is rebuilt from the attributes' integer values (``low + code``):
    :func:`query_matrix` holds them as float64, which rounds values above 2^53. The check uses
    only the number of records, as Privelet's grid-range check does.
    """
    if isinstance(q, SumQuery) and float(q.max_weight).is_integer():
        w_int = _sum_matrix(q, hist.domain)
    else:
        if not float(np.max(np.abs(w), initial=0.0)) < MAX_INTEGER_ANSWER:
            raise InvalidParameterError(
                f"query: an entry of the query matrix is at least 2^62 in magnitude; fugu "
                f"answers integer queries exactly in int64 and needs |W| < {MAX_INTEGER_ANSWER:g}"
            )
        w_int = w.astype(np.int64)
    n = int(hist.counts.sum())
    top = int(np.max(np.abs(w_int), initial=0))
    if n * top >= MAX_INTEGER_ANSWER and not n_private:
        raise InvalidParameterError(
            f"query: its answers could reach {top:g} per record, and fugu answers integer queries "
            f"exactly in int64 (|answer| < 2^62): this histogram has more than "
            f"{(MAX_INTEGER_ANSWER - 1) // max(top, 1):.6g} records; shift or rescale the "
            f"attribute (e.g. subtract a public offset) before summing"
        )
    return w_int


def _integer_answers(w_int: NDArray[np.int64], counts: NDArray[np.int64]) -> NDArray[np.int64]:
    """``W·h`` exactly, clamped to ``±(2^62 − 1)`` (reached only with a private n, where
    :func:`_integer_matrix` does not refuse): int64 when ``n · max|W| < 2^62``, else Python
    integers, so an answer that would overflow int64 is clamped, not wrapped around.

    >>> w = np.array([[2**61, 1], [1, 1]], dtype=np.int64)
    >>> _integer_answers(w, np.array([3, 1], dtype=np.int64)).tolist()
    [4611686018427387903, 4]
    """
    n = int(counts.sum())
    top = int(np.max(np.abs(w_int), initial=0))
    if n * top < MAX_INTEGER_ANSWER:
        return np.asarray(w_int @ counts, dtype=np.int64)
    exact = w_int.astype(object) @ counts.astype(object)
    cap = MAX_INTEGER_ANSWER - 1
    return np.array([max(-cap, min(cap, int(v))) for v in exact], dtype=np.int64)


def _check_grid_range(
    w: NDArray[np.float64], sens: float, hist: Histogram, n_private: bool = False
) -> None:
    """Refuse, before any budget is spent, a real-valued query whose answers could leave the
    noise grid's exact range (:func:`fugu.noise.grid_laplace` accepts |value| <= 2^62 grid
    units and raised beyond, after the charge, on the data: one neighbour released, the other
    raised; fugu hands it answers rounded exactly to the grid, exact doubles up to 2^53 units).
    ``|answer_i| <= n · max_x |W[i, x]|`` and the grid depends only on (sensitivity, m), so the
    check uses only the number of records, as Privelet's does. With a private n (a policy with
    ⊥) it uses one record only, which is public: more records are clamped to the range instead
    (:func:`_exact_on_grid`)."""
    # the answers are rounded exactly onto the grid: exact doubles below 2^53 grid units
    gamma, limit = grid_capacity(sens, int(w.shape[0]), GRID_EXACT_UNITS)
    n = 1.0 if n_private else float(hist.counts.sum())
    top = float(np.max(np.abs(w), initial=0.0))
    if n * top > limit:
        raise InvalidParameterError(
            f"query: its answers could reach {top:g} per record, and the noise grid for this "
            f"query ({gamma:g}, sensitivity {sens:g}) holds answers up to {limit:.6g}: "
            + (
                "one record's answer is already beyond it"
                if n_private
                else f"this histogram has more than {limit / top:.6g} records"
            )
            + "; shift or rescale the query (e.g. subtract a public offset) before releasing it"
        )


def _sum_matrix(q: SumQuery, domain: Domain) -> NDArray[np.int64]:
    """Exact integer values (one row per summed attribute) of an integer-weighted sum."""
    names = q.attributes if q.attributes is not None else domain.names
    grids = np.indices(domain.shape).reshape(domain.ndim, -1)
    weight = float(q.max_weight)
    rows = []
    for name in names:
        a = domain.attribute(name)
        if not isinstance(a, Ordinal):
            raise InvalidParameterError(
                f"attribute {name!r} is nominal; only ordered attributes can be summed"
            )
        base = 0 if a.edges is not None else int(a.low)
        top = max(abs(base), abs(base + domain.shape[domain.axis(name)] - 1)) * abs(weight)
        if not top < MAX_INTEGER_ANSWER:
            raise InvalidParameterError(
                f"query: the values of {name!r} times max_weight reach {top:g}; fugu answers "
                f"integer sums exactly in int64 and needs them below 2^62"
            )
        rows.append((grids[domain.axis(name)].astype(np.int64) + base) * int(weight))
    return np.stack(rows)


def _is_dense_matrix(q: Any) -> bool:
    return isinstance(q, np.ndarray)


def _labels(q: Any, m: int) -> list[str]:
    if isinstance(q, Coarsening):
        return [f"block {i}" for i in range(m)]
    return [str(i) for i in range(m)]
