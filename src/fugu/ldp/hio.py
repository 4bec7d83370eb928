"""Hierarchy methods: HIO (Wang et al., SIGMOD 2019) and LHIO (HIO per attribute pair).

* :class:`HIO` — a b-ary hierarchy per attribute; users split over the d-dim layers and report
  the cell of their record at their layer with the adaptive oracle (ε-LDP, one report per user
  with the full ε). Cells are estimated on demand from the kept reports (:class:`HIORelease`);
  a query is decomposed per attribute into canonical nodes (:func:`_nodes`).
* :class:`LHIO` — HIO per attribute pair with 2-D constrained inference, then the pair
  post-processing of :mod:`fugu.ldp.pairs`.

Privacy model and sources: :mod:`fugu.ldp.multidim`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from itertools import product
from typing import Any

import numpy as np
from numpy.typing import NDArray

from ..domain import Domain
from ..errors import InvalidParameterError, ReportError, check_positive_int
from ..inference.tree import canonical_runs, consistent_tree, tree_height
from ..noise import RandomSource
from ..release import Guarantee, Release
from ..release_state import Array, Meta
from .multidim_common import YANG, _check_sizes
from .oracles import MAX_GROUP_CELLS, GroupedOracle, estimate_counts, olh_support
from .pairs import _NORM_WORDS, PairsRelease, _finish_pairs, _PairsMethod
from .protocol import ColumnSpec, LDPProtocol

__all__ = ["HIO", "HIORelease", "LHIO"]


# -- hierarchies (HIO, LHIO) ----------------------------------------------------------------------
def _nodes(
    lo: int, hi: int, b: int, h: int, size: int
) -> tuple[NDArray[np.int64], NDArray[np.int64]]:
    """Canonical nodes (level, index) of the interval [lo, hi) in a b-ary tree of height h."""
    if lo == 0 and hi == size:
        return np.zeros(1, np.int64), np.zeros(1, np.int64)
    levels, idx = [], []
    for lvl, (ls, le, rs, re) in enumerate(canonical_runs(np.array([lo]), np.array([hi]), b, h)):
        for s, e in ((int(ls[0]), int(le[0])), (int(rs[0]), int(re[0]))):
            if e > s:
                levels.append(np.full(e - s, lvl))
                idx.append(np.arange(s, e))
    return np.concatenate(levels).astype(np.int64), np.concatenate(idx).astype(np.int64)


class HIORelease(Release):
    """HIO's answers, computed on demand from the kept reports of every layer.

    Each layer's cell estimates are ``(S − N_L q*)/(p* − q*) · n/N_L`` from the layer's reports
    (support counted for exactly the cells a workload needs).
    """

    kind = "ldp-hio"
    _state_fields = (
        Array("group", ndim=1),
        Array("seed", ndim=1),
        Array("y", ndim=1),
        Meta("epsilon", float),
        Meta("branching", int),
        Meta("oracle", str),
        Meta("n", float),
    )

    def __init__(
        self,
        domain: Domain,
        guarantee: Guarantee,
        *,
        epsilon: float,
        branching: int,
        oracle: str,
        group: NDArray[np.int64],
        seed: NDArray[np.uint32],
        y: NDArray[np.int64],
        n: float,
    ) -> None:
        super().__init__(domain, guarantee)
        self.epsilon, self.branching, self.oracle, self.n = (
            float(epsilon),
            int(branching),
            oracle,
            float(n),
        )
        self.sizes = list(domain.shape)
        self.heights = [tree_height(c, self.branching) for c in self.sizes]
        self.layers = _layers(self.heights)
        self.grouped = GroupedOracle(
            self.epsilon, [_layer_cells(L, self.branching) for L in self.layers], oracle
        )
        order = np.argsort(group, kind="stable")
        self.group, self.seed, self.y = group[order], seed[order], y[order]
        self.starts = np.searchsorted(self.group, np.arange(len(self.layers) + 1))
        self.layer_code = {L: i for i, L in enumerate(self.layers)}

    def _estimate_cells(self, gid: int, cells: NDArray[np.int64]) -> NDArray[np.float64]:
        a, z = int(self.starts[gid]), int(self.starts[gid + 1])
        ng = z - a
        if ng == 0:  # nothing measured: the uniform guess (recorded in the guarantee)
            return self.n * self._uniform_share(gid, cells)
        kind = self.grouped.kinds[gid]
        k = int(self.grouped.cells[gid])
        if kind == "grr":
            ys = np.sort(self.y[a:z])
            s = np.searchsorted(ys, cells, side="right") - np.searchsorted(ys, cells, side="left")
        else:
            s = olh_support(
                self.seed[a:z],
                self.y[a:z],
                g=self.grouped.g,
                values=cells,
                wide=k > 2**32,
                backend="numpy" if k > 2**32 else "auto",
            )
        p, q = self.grouped.probabilities(gid)
        return estimate_counts(s, ng, p, q) * (self.n / ng)

    def _uniform_share(self, gid: int, cells: NDArray[np.int64]) -> NDArray[np.float64]:
        """The share of the domain's values inside each cell of layer ``gid``."""
        share = np.ones(cells.size)
        rest = np.asarray(cells, dtype=np.int64).copy()
        levels = self.layers[gid]
        for j in reversed(range(len(self.sizes))):
            node = rest % (self.branching ** levels[j])
            rest //= self.branching ** levels[j]
            width = self.branching ** (self.heights[j] - levels[j])
            inside = np.minimum(self.sizes[j], (node + 1) * width) - node * width
            share *= np.clip(inside, 0, None) / self.sizes[j]
        return share

    def _answer_bounds(self, bounds: NDArray[np.int64]) -> NDArray[np.float64]:
        b = self.branching
        radix = [h + 1 for h in self.heights]
        qids, gids, cells = [], [], []
        for q in range(bounds.shape[0]):
            code = np.zeros(1, np.int64)
            cell = np.zeros(1, np.int64)
            for j, (c, h) in enumerate(zip(self.sizes, self.heights, strict=True)):
                lv, ix = _nodes(int(bounds[q, j, 0]), int(bounds[q, j, 1]), b, h, c)
                code = (code[:, None] * radix[j] + lv[None, :]).ravel()
                cell = (cell[:, None] * (b**lv)[None, :] + ix[None, :]).ravel()
            qids.append(np.full(code.size, q))
            gids.append(code)
            cells.append(cell)
        if not qids:
            return np.zeros(0)
        qa, ca, xa = np.concatenate(qids), np.concatenate(gids), np.concatenate(cells)
        out = np.zeros(bounds.shape[0])
        root = ca == 0  # the all-root layer: the public total
        np.add.at(out, qa[root], self.n)
        qa, ca, xa = qa[~root], ca[~root] - 1, xa[~root]  # layer code k ↔ group k − 1
        order = np.lexsort((xa, ca))
        qa, ca, xa = qa[order], ca[order], xa[order]
        keys = np.stack([ca, xa], axis=1)
        if keys.shape[0] == 0:
            return out
        uniq, inv = np.unique(keys, axis=0, return_inverse=True)
        est = np.zeros(uniq.shape[0])
        gstarts = np.flatnonzero(np.r_[True, uniq[1:, 0] != uniq[:-1, 0]])
        gends = np.r_[gstarts[1:], uniq.shape[0]]
        for s, e in zip(gstarts, gends, strict=True):
            est[s:e] = self._estimate_cells(int(uniq[s, 0]), uniq[s:e, 1])
        np.add.at(out, qa, est[inv.ravel()])
        return out


def _layers(heights: Sequence[int]) -> list[tuple[int, ...]]:
    """Every d-dim level except the all-root one, in mixed-radix order (layer code − 1)."""
    return [L for L in product(*[range(h + 1) for h in heights]) if any(L)]


def _layer_cells(levels: Sequence[int], b: int) -> int:
    return int(np.prod([b**lv for lv in levels], dtype=object))


def _layer_cell_of(
    codes: NDArray[np.int64], levels: NDArray[np.int64], heights: Sequence[int], b: int
) -> NDArray[np.int64]:
    """Cell index of each user's record in her layer (levels: (n, d))."""
    cell = np.zeros(codes.shape[0], dtype=np.int64)
    for j, h in enumerate(heights):
        lv = levels[:, j]
        node = codes[:, j] // (b ** (h - lv))
        cell = cell * (b**lv) + node
    return cell


def _node_shares(c: int, b: int, h: int, lv: int) -> NDArray[np.float64]:
    """The share of an attribute's ``c`` values under each node of level ``lv`` of its b-ary
    tree of height ``h`` (nodes past the last value hold none)."""
    width = b ** (h - lv)
    node = np.arange(b**lv)
    inside = np.minimum(c, (node + 1) * width) - node * width
    return np.clip(inside, 0, None) / c


def _level_variances(measured: Sequence[bool]) -> list[float] | None:
    """``level_variance`` for :func:`consistent_tree` (equal variances for measured levels,
    inf for unmeasured ones, 1e30 for an unmeasured finest level); None when all are measured."""
    if all(measured):
        return None
    last = len(measured) - 1
    return [1.0 if m else (1e30 if i == last else np.inf) for i, m in enumerate(measured)]


class HIO(LDPProtocol):
    """HIO (Wang, Ding, Zhou, Hong, Huang, Li, Jha, SIGMOD 2019; Yang et al. §3).

    Parameters
    ----------
    domain, epsilon
    branching : the hierarchy's fan-out b (default 4; Yang et al. report the optimum near 5, and
        4 divides c = 64 evenly).
    oracle : "adaptive" (GRR or OLH per layer, default), "grr" or "olh".

    Privacy: ε-LDP (one oracle report per user). Error: with ``Π(h_j + 1) − 1`` groups each has
    about ``n / 4^d`` users at c = 64, b = 4, and a λ-D answer sums up to ``(2(b−1)h)^λ`` noisy
    cells, so the variance grows like ``(h+1)^d (2(b−1)h)^λ Var_cell`` (curse of dimensionality).
    """

    name = "hio"
    summary = "HIO: d-dim hierarchy, users split over layers"
    source = YANG + "; HIO: Wang et al., SIGMOD 2019"

    def __init__(
        self, domain: Domain, epsilon: float, branching: int = 4, oracle: str = "adaptive"
    ) -> None:
        super().__init__(domain, epsilon)
        self.sizes = _check_sizes(domain)
        self.branching = check_positive_int(branching, "branching", 2)
        if oracle not in ("adaptive", "grr", "olh"):
            raise InvalidParameterError(
                f"oracle must be 'adaptive', 'grr' or 'olh', got {oracle!r}"
            )
        self.oracle = oracle
        self.heights = [tree_height(c, self.branching) for c in self.sizes]
        self.layers = _layers(self.heights)
        if len(self.layers) > 2**22:
            raise InvalidParameterError(
                f"HIO would split users over {len(self.layers):,} layers; use fewer attributes, a "
                f"larger branching, or LHIO/CALM/TDG/HDG"
            )
        finest = _layer_cells(self.heights, self.branching)
        if finest > MAX_GROUP_CELLS:
            raise InvalidParameterError(
                f"HIO's finest layer would have {finest:,} cells (the product of the attributes' "
                f"tree sizes), above the 2^62 a report can index; use fewer attributes, or "
                f"LHIO/CALM/TDG/HDG, which measure attribute pairs"
            )
        self.grouped = GroupedOracle(
            self.epsilon, [_layer_cells(L, self.branching) for L in self.layers], oracle
        )
        self._levels = np.asarray(self.layers, dtype=np.int64)

    def _params(self) -> dict[str, Any]:
        return {"branching": self.branching, "oracle": self.oracle}

    @property
    def n_groups(self) -> int:
        return len(self.layers)

    def report_columns(self) -> dict[str, ColumnSpec]:
        return self.grouped.report_columns()

    def _perturb(
        self, codes: NDArray[np.int64], rng: RandomSource, groups: Any
    ) -> dict[str, np.ndarray]:
        g = np.asarray(groups, dtype=np.int64)
        cell = _layer_cell_of(codes, self._levels[g], self.heights, self.branching)
        return self.grouped.perturb(g, cell, rng)

    def _validate(self, columns: Mapping[str, np.ndarray]) -> NDArray[np.bool_]:
        return self.grouped.validate(columns)

    def support(self, columns: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
        # Cells are estimated on demand: the partial state is the (validated) reports.
        return {k: np.asarray(columns[k]).copy() for k in ("group", "seed", "y")}

    def merge_state(
        self, a: Mapping[str, np.ndarray], b: Mapping[str, np.ndarray]
    ) -> dict[str, np.ndarray]:
        self._check_reports(b, "a partial hio state")
        return {k: np.concatenate([a[k], b[k]]) for k in ("group", "seed", "y")}

    def _check_reports(self, state: Mapping[str, Any], what: str) -> None:
        """Refuse a state (kept reports) that :meth:`partial` cannot have made: columns of
        different lengths or types, or reports that ``_validate`` rejects (the engine path and
        :meth:`Aggregator.add_partial` take states from outside)."""
        cols = {k: np.asarray(state[k]) for k in ("group", "seed", "y")}
        sizes = {v.shape for v in cols.values()}
        ok = len(sizes) == 1 and all(v.ndim == 1 and v.dtype.kind in "iu" for v in cols.values())
        if ok and cols["group"].size:
            seed = cols["seed"]
            ok = bool(np.all((seed >= 0) & (seed < 2**32)))
            ok = ok and bool(
                np.all(self._validate({k: v.astype(np.int64) for k, v in cols.items()}))
            )
        if not ok:
            raise ReportError(
                f"{what} must hold HIO reports as made by partial(): integer columns 'group', "
                f"'seed', 'y' of one length with values this protocol can produce; got "
                f"{ {k: (str(v.dtype), v.shape) for k, v in cols.items()} }"
            )

    def _estimate(self, state: Mapping[str, np.ndarray], n: int) -> Release:
        self._check_reports(state, "the hio state")
        if np.asarray(state["group"]).size != n:
            raise ReportError(
                f"the hio state holds {np.asarray(state['group']).size:,} reports but "
                f"n_accepted says {n:,}: HIO's state is the accepted reports themselves, so the "
                f"two must agree (the partial states were not made by partial(), or were "
                f"merged with their counts but not their reports)"
            )
        empty = self.n_groups - np.unique(np.asarray(state["group"])).size
        note = (
            (
                f"{empty} of {self.n_groups} layers had no report: their cells are the uniform "
                f"guess (n times the cell's share of the domain)",
            )
            if empty
            else ()
        )
        g = self.guarantee(private=True, n=n, post_processing=note)
        return HIORelease(
            self.domain,
            g,
            epsilon=self.epsilon,
            branching=self.branching,
            oracle=self.oracle,
            group=state["group"].astype(np.int64),
            seed=state["seed"].astype(np.uint32),
            y=state["y"].astype(np.int64),
            n=n,
        )


class LHIO(_PairsMethod):
    """LHIO, "low-dimensional HIO" (Yang et al. §3): HIO on every attribute pair, 2-D
    constrained inference, cross-pair consistency, λ-D answers by the weighted update.

    Users are split over the C(d,2) pairs × the ``(h_j+1)(h_k+1) − 1`` 2-D layers of each pair
    (225 groups for d = 6, c = 64, b = 4). Each reports the 2-D cell of her pair at her layer
    with the adaptive oracle at full ε. Post-processing (see the module docstring): per-pair
    least-squares tree consistency along each attribute, then normalisation + cross-pair
    consistency.
    """

    name = "lhio"
    summary = "LHIO: HIO per attribute pair + consistency + weighted update"

    def __init__(
        self,
        domain: Domain,
        epsilon: float,
        branching: int = 4,
        oracle: str = "adaptive",
        estimator: str = "full",
        max_iter: int = 100,
        normalisation: str = "norm",
    ) -> None:
        super().__init__(domain, epsilon, oracle, estimator, max_iter, normalisation)
        self.branching = check_positive_int(branching, "branching", 2)
        self.heights = [tree_height(c, self.branching) for c in self.sizes]
        self.groups: list[tuple[int, int, int, int]] = []  # (j, k, level_j, level_k)
        for j, k in self.pairs:
            for lj in range(self.heights[j] + 1):
                for lk in range(self.heights[k] + 1):
                    if lj or lk:
                        self.groups.append((j, k, lj, lk))
        b = self.branching
        self.grouped = GroupedOracle(
            self.epsilon, [b ** (lj + lk) for _, _, lj, lk in self.groups], oracle
        )
        self._garr = np.asarray(self.groups, dtype=np.int64)

    def _params(self) -> dict[str, Any]:
        return {"branching": self.branching, **self._base_params()}

    def _perturb(
        self, codes: NDArray[np.int64], rng: RandomSource, groups: Any
    ) -> dict[str, np.ndarray]:
        g = np.asarray(groups, dtype=np.int64)
        j, k, lj, lk = (self._garr[g, i] for i in range(4))
        rows = np.arange(codes.shape[0])
        hj = np.asarray(self.heights)[j]
        hk = np.asarray(self.heights)[k]
        b = self.branching
        nj = codes[rows, j] // (b ** (hj - lj))
        nk = codes[rows, k] // (b ** (hk - lk))
        return self.grouped.perturb(g, nj * (b**lk) + nk, rng)

    def _estimate(self, state: Mapping[str, np.ndarray], n: int) -> Release:
        b = self.branching
        ests = self.grouped.estimates(state)
        ng = state["n_group"].astype(np.float64)
        layer: dict[tuple[int, int, int, int], NDArray[np.float64]] = {}
        var: dict[tuple[int, int], float] = {}
        for i, (j, k, lj, lk) in enumerate(self.groups):
            if ng[i] > 0:
                scale = n / ng[i]
                layer[(j, k, lj, lk)] = ests[i].reshape(b**lj, b**lk) * scale
                var[(j, k)] = max(
                    var.get((j, k), 0.0), self.grouped.cell_variance(i, ng[i]) * scale**2
                )
        empty = int(np.count_nonzero(ng == 0))
        mats, variances = [], []
        for j, k in self.pairs:
            hj, hk = self.heights[j], self.heights[k]
            shares = [
                [_node_shares(c, b, h, lv) for lv in range(h + 1)]
                for c, h in ((self.sizes[j], hj), (self.sizes[k], hk))
            ]
            # a layer without reports starts as the uniform guess and is left out of the
            # least squares (unmeasured: variance inf; at the finest level, where the tree
            # needs a value, a weight of 1e-30); the pair's root is the public n
            seen = {
                (lj, lk): (lj, lk) == (0, 0) or (j, k, lj, lk) in layer
                for lj in range(hj + 1)
                for lk in range(hk + 1)
            }
            L = {
                (lj, lk): layer.get((j, k, lj, lk), n * np.outer(shares[0][lj], shares[1][lk]))
                for lj in range(hj + 1)
                for lk in range(hk + 1)
            }
            for lk in range(hk + 1):  # along attribute j, for every node of attribute k
                levels = [L[(lj, lk)].T for lj in range(hj + 1)]
                v = _level_variances([seen[(lj, lk)] for lj in range(hj + 1)])
                for lj, arr in enumerate(consistent_tree(levels, b, v)):
                    L[(lj, lk)] = arr.T
                column = any(seen[(lj, lk)] for lj in range(hj + 1))
                seen.update({(lj, lk): column for lj in range(hj + 1)})
            for lj in range(hj + 1):  # along attribute k, for every node of attribute j
                levels = [L[(lj, lk)] for lk in range(hk + 1)]
                v = _level_variances([seen[(lj, lk)] for lk in range(hk + 1)])
                for lk, arr in enumerate(consistent_tree(levels, b, v)):
                    L[(lj, lk)] = arr
            mats.append(L[(hj, hk)][: self.sizes[j], : self.sizes[k]])
            variances.append(var.get((j, k), 1e12))
        matrices, rounds = _finish_pairs(
            self.pairs, mats, variances, n, self.max_iter, self.normalisation
        )
        note = (
            (
                f"{empty} of {self.n_groups} layers had no report: left out of the 2-D "
                f"consistency (their cells come from the other layers)",
            )
            if empty
            else ()
        )
        g = self.guarantee(
            private=True,
            n=n,
            post_processing=(
                *note,
                "2-D hierarchy least-squares consistency (Hay et al. along each attribute)",
                f"{_NORM_WORDS[self.normalisation]} + variance-weighted consistency of shared 1-D "
                f"marginals ({rounds} rounds)",
                f"lambda-D answers by weighted update ({self.estimator} in/out tables)",
            ),
        )
        return PairsRelease(self.domain, g, matrices, n, self.estimator)
