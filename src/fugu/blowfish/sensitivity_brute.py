"""``S(f, P)`` by brute force: the definition itself, the test oracle for small domains.

:func:`brute_force_sensitivity` enumerates every database of ``n`` records over the domain and
every neighbouring pair of the policy (including count constraints and minimality), and takes
the largest L1 change of the query's answer.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable

import numpy as np
from numpy.typing import ArrayLike, NDArray

from ..errors import InvalidParameterError
from .policy import Policy
from .sensitivity_constrained import _constraint_queries
from .sensitivity_queries import (
    Coarsening,
    CumulativeHistogram,
    HistogramQuery,
    QueryLike,
    SumQuery,
    query_matrix,
)

__all__ = [
    "brute_force_sensitivity",
]


def brute_force_sensitivity(
    f: QueryLike | Callable[[NDArray[np.int64]], ArrayLike],
    policy: Policy,
    n: int,
    *,
    moves: str = "secret",
    max_databases: int = 5_000,
) -> float:
    """``max ||f(D1) − f(D2)||_1`` over every pair of Blowfish neighbours with ``n`` individuals.

    Enumerates all databases (each of the ``n`` individuals takes a value of T, or ⊥ when the
    policy has the ⊥ vertex), keeps those satisfying the constraints (grouped by the public
    constraint answers: neighbours share them), and applies the neighbour definition of §4 of
    the paper: ``T(D1, D2)`` (secret pairs whose value changed along an edge) non-empty and
    minimal — no ``D3`` with ``∅ ≠ T(D1, D3) ⊊ T(D1, D2)``, nor ``T(D1, D3) = T(D1, D2)`` with a
    smaller symmetric difference. ``f`` maps a histogram cube to a vector, or is any query
    :func:`sensitivity` accepts. Small domains only (``(|T| + ⊥)^n <= max_databases``).

    ``moves="secret"`` (default, the neighbour relation fugu's guarantees use): every record that
    changes moves along a secret edge — neighbours are the minimal sets of *secret moves* that
    keep the constraints true (the reading under which the paper's Theorem 8.x holds: its proof
    decomposes the difference into arcs of ``G_P``). ``moves="any"``: the literal reading where
    records may also change along non-edges and only the edge changes count in ``T(D1, D2)``;
    under constraints it can exceed ``2·max(α, ξ)`` (collateral non-secret changes).
    """
    if moves not in ("secret", "any"):
        raise InvalidParameterError(f"moves must be 'secret' or 'any', got {moves!r}")
    dom = policy.domain
    size = dom.size
    has_bot = policy.has_bottom_edges()
    n_vals = size + (1 if has_bot else 0)
    total = n_vals**n
    if total > max_databases:
        raise InvalidParameterError(
            f"brute force over {total:,} databases exceeds max_databases={max_databases:,}"
        )
    if callable(f) and not isinstance(
        f, Coarsening | CumulativeHistogram | HistogramQuery | SumQuery
    ):
        fn = f
    else:
        w = query_matrix(f, dom)

        def fn(h: NDArray[np.int64]) -> ArrayLike:
            return w @ h.reshape(-1)

    dbs = np.asarray(list(itertools.product(range(n_vals), repeat=n)), dtype=np.int64)
    hists = np.zeros((dbs.shape[0], n_vals), np.int64)
    np.add.at(hists, (np.repeat(np.arange(dbs.shape[0]), n), dbs.reshape(-1)), 1)
    hists = hists[:, :size]
    outs = np.stack(
        [np.asarray(fn(h.reshape(dom.shape)), dtype=np.float64).reshape(-1) for h in hists]
    )
    adj = np.zeros((n_vals, n_vals), bool)
    for s, d in policy.iter_edges():
        adj[s, d] = adj[d, s] = True
    if has_bot:
        cells = policy.bottom_cells()
        adj[cells, size] = adj[size, cells] = True
    masks, _ = _constraint_queries(policy)
    if masks:
        answers = hists @ np.stack(masks, axis=1).astype(np.int64)
        _, group = np.unique(answers, axis=0, return_inverse=True)
        group = group.reshape(-1)
    else:
        group = np.zeros(dbs.shape[0], np.int64)
    best = 0.0
    for g in np.unique(group):
        members = np.flatnonzero(group == g)
        best = max(best, _group_best(dbs[members], outs[members], adj, moves == "secret"))
    return best


def _group_best(
    dbs: NDArray[np.int64], outs: NDArray[np.float64], adj: NDArray[np.bool_], secret_only: bool
) -> float:
    best = 0.0
    # records are exchangeable: D1 up to a permutation of the ids is enough
    reps = (
        np.flatnonzero(np.all(np.diff(dbs, axis=1) >= 0, axis=1))
        if dbs.shape[1] > 1
        else range(len(dbs))
    )
    for i in reps:
        d1 = dbs[i]
        diff = dbs != d1[None, :]  # (N, n)
        edge = diff & adj[d1[None, :], dbs]
        tvec = np.where(edge, dbs, -1)  # T(D1, D): new value on an edge change, else -1
        nonempty = edge.any(axis=1)
        if secret_only:
            nonempty &= np.all(edge == diff, axis=1)
        cand = np.flatnonzero(nonempty)
        if cand.size == 0:
            continue
        t2 = tvec[cand]  # (c, n)
        t3 = tvec[nonempty]  # (e, n) possible D3 (T non-empty)
        d3 = dbs[nonempty]
        # T3 ⊆ T2: every id of T3 is -1 or agrees with T2
        sub = np.all((t3[None, :, :] == -1) | (t3[None, :, :] == t2[:, None, :]), axis=2)  # (c, e)
        eq = np.all(t3[None, :, :] == t2[:, None, :], axis=2)
        strict = sub & ~eq
        # Δ(D1, D3) ⊊ Δ(D1, D2): D3 agrees with D1 or D2 on every id, and D3 != D2
        d2 = dbs[cand]
        within = np.all(
            (d3[None, :, :] == d1[None, None, :]) | (d3[None, :, :] == d2[:, None, :]), axis=2
        )
        same = np.all(d3[None, :, :] == d2[:, None, :], axis=2)
        smaller = eq & within & ~same
        minimal = ~(strict | smaller).any(axis=1)
        if minimal.any():
            nb = cand[minimal]
            best = max(best, float(np.abs(outs[nb] - outs[i][None, :]).sum(axis=1).max()))
    return best
