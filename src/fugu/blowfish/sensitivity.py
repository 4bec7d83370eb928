"""Policy-specific sensitivity ``S(f, P)`` of linear queries, with and without constraints.

Definition (He, Machanavajjhala, Ding, Blowfish Privacy, SIGMOD 2014, seed ``000_…``, §5):
``S(f, P) = max over neighbouring databases (D1, D2) ∈ N(P) of ||f(D1) − f(D2)||_1``. Adding
Laplace noise of scale ``S(f, P)/ε`` to every output of ``f`` is ``(ε, P)``-Blowfish private
(the paper's Theorem 5.1); ``S(f, P) <= S(f)`` always, with equality for the complete graph.

Without constraints, neighbours move one record along one secret edge ``(x, y)``, so for a linear
query with matrix ``W`` (one column per cell) ``S(f, P) = max_{(x,y) ∈ E} ||W[:, x] − W[:, y]||_1``
(and ``max_x ||W[:, x]||_1`` over cells joined to ⊥). fugu evaluates this maximum

* in closed form where the structure allows (histogram: 2; histogram over a coarsening: 2 or 0;
  cumulative histogram: the largest rank gap of an edge — θ for ``G^{d,θ}``, 1 for the line
  graph; sums of attribute values: the largest L1 length of an edge);
* otherwise edge family by edge family without listing ``|T|²`` pairs: distance and attribute
  graphs offset by offset (a range workload costs ``O(|T| + m·2^d)`` per offset through
  coverage counts of shifted boxes), partition graphs block by block, the complete graph by the
  L1 diameter of the columns (exact by the sign-vector identity when ``m <= 12``);
* :func:`brute_force_sensitivity` enumerates every database of ``n`` records and every
  neighbouring pair (the definition itself, including constraints and minimality) — the test
  oracle for small domains.

With public count constraints (§8 of the paper) a neighbour may need several moves to keep the
constraints true. For *sparse* constraints (every move lifts at most one and lowers at most one
constrained count) the paper builds the policy graph ``G_P`` (a vertex per constrained count,
plus ``v+`` and ``v−``; a move ``x → y`` is an arc from the count it lowers — or ``v+`` — to the
count it lifts — or ``v−``) and proves ``S(h, P) = 2·max(α(G_P), ξ(G_P))`` for the histogram,
with ``α`` the longest simple cycle and ``ξ`` the longest simple ``v+ → v−`` path (in arcs).
Closed forms: one marginal under the complete graph ``2·size(C)``; disjoint marginals under the
attribute graph ``2·max_i size(C_i)``; disjoint ranges under the line graph
``2·(maxcomp(Q) + 1)``. Small graphs are searched exactly; otherwise fugu uses the safe upper
bound ``2·(|Q| + 1)``. Deciding the sensitivity under general constraints is NP-hard (the
paper's §8), so non-sparse constraints get a :class:`~fugu.PolicyError`. For other linear
queries under constraints fugu uses ``max(α, ξ)·S(f, P without constraints)`` (each neighbour is
at most that many single moves) — an upper bound, reported as such.

Where the parts live: this module holds the dispatcher :func:`sensitivity`;
:mod:`fugu.blowfish.sensitivity_queries` the query descriptions and their columns,
:mod:`fugu.blowfish.sensitivity_closed` the unconstrained closed forms and edge maxima,
:mod:`fugu.blowfish.sensitivity_constrained` the policy graph and constrained sensitivities,
:mod:`fugu.blowfish.sensitivity_brute` the brute-force oracle. Their public names stay
importable from here.

>>> import fugu
>>> from fugu.blowfish import Policy, sensitivity
>>> dom = fugu.Domain([fugu.Ordinal("age", 0, 99)])
>>> sensitivity("cumulative", Policy.line(dom)), sensitivity("cumulative", Policy.full(dom))
(1.0, 99.0)
>>> sensitivity("cumulative", Policy.distance_threshold(dom, 5))
5.0
>>> sensitivity("histogram", Policy.partition(dom, {"age": 10}))
2.0
>>> sensitivity(Coarsening({"age": 10}), Policy.partition(dom, {"age": 10}))
0.0
"""

from __future__ import annotations

from typing import Any

from ..errors import InvalidParameterError, InvalidTypeError, PolicyError
from .policy import Policy
from .sensitivity_brute import brute_force_sensitivity
from .sensitivity_closed import _unconstrained
from .sensitivity_constrained import (
    PolicyGraph,
    _line_intervals,
    _line_ranges_exact,
    _safe_moves,
    _without_constraints,
    constrained_histogram_sensitivity,
    policy_graph,
)
from .sensitivity_queries import (
    Coarsening,
    CumulativeHistogram,
    HistogramQuery,
    QueryLike,
    SensitivityResult,
    SumQuery,
    _columns,
    _normalise,
    query_matrix,
)

__all__ = [
    "Coarsening",
    "CumulativeHistogram",
    "HistogramQuery",
    "PolicyGraph",
    "SensitivityResult",
    "SumQuery",
    "brute_force_sensitivity",
    "constrained_histogram_sensitivity",
    "policy_graph",
    "query_matrix",
    "sensitivity",
]

#: Dense query matrices (outputs × cells) up to this many entries in the exact constrained paths.
MAX_DENSE_CELLS = 20_000_000


def sensitivity(query: QueryLike, policy: Policy, *, detail: bool = False) -> Any:
    """Policy-specific L1 sensitivity ``S(f, P)`` of a linear query.

    Parameters
    ----------
    query : str, query object, RangeQuery, Workload, or array
        ``"histogram"``, ``"cumulative"``, ``"sum"``, ``"kmeans_qsize"``, ``"kmeans_qsum"``,
        ``"kmeans_qsum_paper"``, :class:`HistogramQuery`,
        :class:`Coarsening`, :class:`CumulativeHistogram`, :class:`SumQuery`, a
        :class:`~fugu.RangeQuery` or :class:`~fugu.Workload` (range-count queries), or a matrix
        ``W`` of shape (m, |T|) (dense or scipy sparse; columns in the domain's flat order).
    policy : Policy
    detail : bool
        Return a :class:`SensitivityResult` (value, whether exact, method) instead of a float.

    Returns
    -------
    float or SensitivityResult
        Exact where fugu can compute it; otherwise a safe upper bound (``detail=True`` says so).
    """
    if not isinstance(policy, Policy):
        raise InvalidTypeError(
            f"policy must be a fugu.blowfish.Policy, got {type(policy).__name__}"
            + (
                f"; build it on the domain: Policy.parse({policy!r}, domain)"
                if isinstance(policy, str)
                else " (e.g. Policy.line(domain), Policy.distance_threshold(domain, 5))"
            )
        )
    if isinstance(query, str) and query.strip().lower().startswith("kmeans_"):
        return _kmeans(query.strip().lower(), policy, detail)
    q = _normalise(query)
    if policy.constraints:
        res = _constrained(q, policy)
    else:
        res = _unconstrained(q, policy)
    return res if detail else res.value


def _kmeans(key: str, policy: Policy, detail: bool) -> Any:
    """k-means queries (He et al. §6): ``kmeans_qsize`` (cluster sizes), ``kmeans_qsum`` (per-
    cluster coordinate sums, safe: moves that switch clusters included) and
    ``kmeans_qsum_paper`` (the paper's same-cluster values). Computed by
    :mod:`fugu.blowfish.kmeans_queries` on the policy's grid."""
    from . import kmeans_queries as km

    if policy.constraints:
        raise PolicyError("k-means sensitivities are defined for policies without constraints")
    if key == "kmeans_qsize":
        v, how = km.qsize_sensitivity(policy, policy.domain), "k-means q_size"
    elif key in ("kmeans_qsum", "kmeans_qsum_safe"):
        v, how = km.qsum_sensitivity(policy, policy.domain), "k-means q_sum (safe)"
    elif key == "kmeans_qsum_paper":
        v, how = km.qsum_sensitivity(policy, policy.domain, mode="paper"), "k-means q_sum (paper)"
    else:
        raise InvalidParameterError(
            f"unknown k-means query {key!r}; use kmeans_qsize, kmeans_qsum or kmeans_qsum_paper"
        )
    res = SensitivityResult(float(v), True, f"closed form: {how} (fugu.blowfish.kmeans)")
    return res if detail else res.value


def _constrained(q: QueryLike, policy: Policy) -> SensitivityResult:
    """``S(f, P)`` under count constraints.

    The histogram: :func:`constrained_histogram_sensitivity`. The line graph with disjoint range
    constraints: exact for every linear query (:func:`_line_ranges_exact`). Otherwise a neighbour
    is at most ``moves`` single secret moves (a simple cycle or ``v+ → v−`` path of the policy
    graph ``G_P``: ``moves = max(α, ξ)``, or ``|Q| + 1`` when ``G_P`` is too large to search),
    so ``S(f, P) <= moves · S(f, P without constraints)`` — a safe upper bound. (It is *not*
    ``S(h, P)/2``: the histogram's value is lowered by moves that cancel in the histogram, which
    other queries still see; e.g. a cumulative count changes once per move.)
    """
    hist = constrained_histogram_sensitivity(policy)
    if isinstance(q, HistogramQuery):
        return hist
    moves = _safe_moves(hist, policy)
    dom = policy.domain
    iv = _line_intervals(policy)
    if iv is not None:
        if isinstance(q, CumulativeHistogram):
            q.axis(dom)
            return SensitivityResult(
                float(moves),
                True,
                "exact: cumulative histogram, line graph with disjoint range constraints (each "
                "move changes one cumulative count; a neighbour makes at most "
                f"{moves} moves that do not cancel)",
                hist.alpha,
                hist.xi,
                moves,
            )
        small = not isinstance(q, Coarsening) or (
            (int(q.labels(dom).max()) + 1) * dom.size <= MAX_DENSE_CELLS
        )
        if small:
            res = _line_ranges_exact(_columns(q, dom), iv, dom.size)
            return SensitivityResult(res.value, True, res.method, hist.alpha, hist.xi, moves)
    base = _unconstrained(q, _without_constraints(policy))
    return SensitivityResult(
        moves * base.value,
        False,
        f"upper bound: {moves} moves per neighbour (longest cycle/path of the policy graph) × "
        f"single-move sensitivity ({base.method})",
        hist.alpha,
        hist.xi,
        moves,
    )
