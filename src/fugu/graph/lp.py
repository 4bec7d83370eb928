"""The linear programs of the efficient Recursive Mechanism (spec 5.6).

Solved with Clarabel's interior point by default (it factorises the sparse KKT system, so many
occurrences sharing a few participants — a large clique — do not make it dense; measured 8 s
against 152 s for HiGHS' interior point on one G program of a ca-GrQc-shaped graph), or with
HiGHS through scipy (``method="highs-ipm" | "highs-ds" | "highs"``).

Columns: ``f_p ∈ [0,1]`` per participant, ``z_c ∈ [0,1]`` per clause of two or more participants
(the ∧ node), ``r_t ∈ [0,1]`` per tuple of two or more clauses (the ∨ node), and for G one ``w``
and the columns ``u`` of the loads ψ (below).
Rows: ``Σ_{p∈c} f_p − z_c ≤ |c| − 1`` per ∧ node, ``val(c) − r_t ≤ 0`` per clause of an ∨ node,
and for G ``Σ_{t∋p} q(t) ψ_{t,p} − w ≤ 0`` per participant.

* ``H_i = min Σ_t q(t) val(t)`` subject to ``Σ_p f_p = i`` (eq. 16);
* ``G_i = g · min w`` subject to ``Σ_p f_p = i`` (eq. 19 with g = 2, the default
  ``g_factor``; any g > 0 keeps G a recursive sequence, which is all privacy needs — spec §3 —
  while Theorem 4's accuracy bound is proved for g = 2 only; R2T's reimplementation uses 1).
  **The loads are ψ_{t,p}, the part of φ_t that goes through p**, not eq. 19's φ_t·S_{t,p}:
  both agree on conjunctions (subgraph patterns), but with ∨ in the annotations eq. 19's G is
  not a recursive sequence (a withdrawn participant keeps its load through the other clauses)
  and j moved by up to 21 between neighbours (see "the loads of G" below; review 13);
* the X program (eq. 20) drops the equality and minimises ``Σ_t q(t) val(t) − Δ̂ Σ_p f_p``;
* :meth:`LPModel.g_at_most` answers "G_i ≤ cap?" for the search for j with a reduced program,
  after two cheap certificates (a greedy feasible point, stored dual bounds).

Every solve checks the status. The values that make up the released X are *certified*
(spec 8.1(6)): an upper bound is φ evaluated exactly at a feasible point built from the solver's
f, a lower bound comes from weak duality with the solver's multipliers; the gap must be at most
the public tolerance τ, else the LP is re-solved with dual simplex and, failing that, refused.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np
import scipy.sparse as sp
from numpy.typing import NDArray
from scipy.optimize import linprog

from ..errors import FuguError, InvalidParameterError
from .krelation import AND, Annotations, Formulas

__all__ = ["LPModel", "LPResult", "SolverError", "check_g_factor", "check_solver"]

METHODS = ("clarabel", "highs-ipm", "highs-ds", "highs")
#: Clarabel's gap and feasibility tolerances (its defaults are 1e-8 as well).
CLARABEL_TOLERANCE = 1e-8
#: The factor of eq. 19 (G_i = 2 · min max load): the paper's algorithm as published.
G_FACTOR = 2.0


def check_g_factor(g_factor: object) -> float:
    """The factor of G (eq. 19) as a float, refused unless finite and > 0.

    Utility only: G stays a recursive sequence under any positive scaling (spec §3, §8 item 8).
    """
    if isinstance(g_factor, bool) or not (
        isinstance(g_factor, int | float) and math.isfinite(g_factor) and g_factor > 0
    ):
        raise InvalidParameterError(
            f"g_factor (the factor of G in eq. 19) must be a finite number > 0, got "
            f"{g_factor!r}; use 2 (the paper's algorithm, the default) or 1 (as R2T's "
            f"implementation; utility only)"
        )
    return float(g_factor)


def check_solver(method: object, time_limit: object) -> None:
    """Refuse an unknown solver or a time limit that is not a positive number of seconds.

    Both are public: the mechanisms check them before anything is charged.
    """
    if method not in METHODS:
        raise InvalidParameterError(
            f"method (the LP solver) must be one of {METHODS}, got {method!r}"
        )
    if time_limit is not None and (
        isinstance(time_limit, bool)
        or not isinstance(time_limit, int | float)
        or not (math.isfinite(time_limit) and time_limit > 0)
    ):
        raise InvalidParameterError(
            f"lp_time_limit must be a finite number of seconds > 0, or None (no limit), got "
            f"{time_limit!r}"
        )


class SolverError(FuguError, RuntimeError):
    """A linear program did not solve to optimality (or not precisely enough).

    Its message names the kind of program only (``G``, ``H`` or ``X``): never its index, the
    bounds or the certified value, which depend on the private data.
    """


def _kind(label: str) -> str:
    """``"G[29]≤1.8"`` → ``"G"``: the public part of a program's label."""
    return label.split("[")[0]


@dataclass
class LPStats:
    n_solves: int = 0
    seconds: float = 0.0
    per_lp: list[tuple[str, float]] = field(default_factory=list)


class LPModel:
    """The constraint system of spec 5.6 for one set of annotations, built once, solved often."""

    def __init__(
        self,
        ann: Annotations | Formulas,
        *,
        method: str = "clarabel",
        g_method: str | None = None,
        progress: Callable[[str], None] | None = None,
        time_limit: float | None = None,
        g_factor: float = G_FACTOR,
    ) -> None:
        check_solver(method, time_limit)
        if g_method is not None:
            check_solver(g_method, None)
        #: The factor of eq. 19 in G (2 in the paper, 1 in R2T's implementation). Public and
        #: utility only; every G value, bound and pruning threshold below uses it.
        self.g_factor = check_g_factor(g_factor)
        self.ann = ann
        self.method = method
        self.g_method = g_method or method
        self.progress = progress
        self.time_limit = time_limit
        # H and G values depend only on the data: cached per model (reused across runs on the
        # same data by benchmarks; within one run each index is solved once anyway)
        self._h_cache: dict[tuple[int, float], float] = {}
        self._g_cache: dict[int, float] = {}
        # cheap bounds that settle most steps of the search for j without a program:
        # G after r whole-participant removals (greedy), and weak-duality lower bounds
        # (const, slope, n_left_out) from every reduced G program solved so far
        self._greedy_g: NDArray[np.float64] = np.zeros(0)
        self._g_lower: list[tuple[float, float, int]] = []
        self.stats = LPStats()
        #: Σ_t q(t) S_{R(t),p} per participant: bounds H_i − H_{i−1} (Lemma 9), used by X
        self.impact = ann.impact()
        if isinstance(ann, Formulas):
            n_cols = self._formula_rows(ann)
            self._formula_loads(ann)
        else:
            n_cols = self._dnf_rows(ann)
            self._dnf_loads(ann)
        #: (tuple, participant) pairs of G's loads, and each participant's load at f ≡ 1
        #: (Σ_{t ∋ p} q(t)): G_{|P|} / g, and the bound behind the search's pruning
        self.incidence = (self.pair_t, self.pair_p)
        self.load_top = np.asarray(
            np.bincount(
                self.pair_p, weights=ann.weights[self.pair_t], minlength=ann.n_participants
            ),
            dtype=np.float64,
        )
        # objective Σ_t q(t) val(t)
        c = np.zeros(n_cols)
        np.add.at(c, self.tuple_val, ann.weights)
        self.c_h = c
        self._a_h: sp.csr_array | None = None
        self._a_g: sp.csr_array | None = None
        self._g_rhs: NDArray[np.float64] | None = None

    def _dnf_rows(self, ann: Annotations) -> int:
        """∧ rows per clause of two or more participants, ∨ rows per clause of a multi-clause
        tuple; sets base, base_rhs, tuple_val, row_tuple, n_f, n_cols; returns n_cols."""
        n_p = ann.n_participants
        lens = np.diff(ann.clause_ptr)
        ncl = np.diff(ann.tuple_ptr)
        multi_c = lens >= 2
        multi_t = ncl >= 2
        self.n_f = n_p
        z_col = np.full(ann.n_clauses, -1, np.int64)
        z_col[multi_c] = n_p + np.arange(int(multi_c.sum()))
        n_z = int(multi_c.sum())
        r_col = np.full(ann.n_tuples, -1, np.int64)
        r_col[multi_t] = n_p + n_z + np.arange(int(multi_t.sum()))
        n_cols = n_p + n_z + int(multi_t.sum())
        self.n_cols = n_cols  # without w
        # value column of every clause and tuple
        first_var = ann.clause_vars[ann.clause_ptr[:-1]] if ann.n_clauses else np.zeros(0, np.int64)
        clause_val = np.where(multi_c, z_col, first_var)
        self.clause_val = clause_val
        first_clause = ann.tuple_ptr[:-1]
        tuple_val = np.where(
            multi_t, r_col, clause_val[first_clause] if ann.n_tuples else np.zeros(0, np.int64)
        )
        self.tuple_val = tuple_val
        rows: list[NDArray[np.int64]] = []
        cols: list[NDArray[np.int64]] = []
        vals: list[NDArray[np.float64]] = []
        rhs: list[NDArray[np.float64]] = []
        n_rows = 0
        # ∧ rows
        mc = np.flatnonzero(multi_c)
        if mc.size:
            row_of_clause = np.full(ann.n_clauses, -1, np.int64)
            row_of_clause[mc] = np.arange(mc.size)
            clause_of_var = np.repeat(np.arange(ann.n_clauses), lens)
            sel = multi_c[clause_of_var]
            rows += [row_of_clause[clause_of_var[sel]], np.arange(mc.size)]
            cols += [ann.clause_vars[sel], z_col[mc]]
            vals += [np.ones(int(sel.sum())), -np.ones(mc.size)]
            rhs.append((lens[mc] - 1).astype(np.float64))
            n_rows += mc.size
        # ∨ rows
        mt = multi_t[np.repeat(np.arange(ann.n_tuples), ncl)] if ann.n_tuples else np.zeros(0, bool)
        clauses_in_or = np.flatnonzero(mt)
        if clauses_in_or.size:
            owner_t = np.repeat(np.arange(ann.n_tuples), ncl)[clauses_in_or]
            r = n_rows + np.arange(clauses_in_or.size)
            rows += [r, r]
            cols += [clause_val[clauses_in_or], r_col[owner_t]]
            vals += [np.ones(r.size), -np.ones(r.size)]
            rhs.append(np.zeros(r.size))
            n_rows += r.size
        self.n_base_rows = n_rows
        # the tuple every base row belongs to (rows of one tuple only involve its own columns)
        row_tuple: list[NDArray[np.int64]] = []
        if mc.size:
            row_tuple.append(ann.clause_tuple()[mc])
        if clauses_in_or.size:
            row_tuple.append(owner_t)
        self.row_tuple = np.concatenate(row_tuple) if row_tuple else np.zeros(0, np.int64)
        self.base = (
            np.concatenate(rows) if rows else np.zeros(0, np.int64),
            np.concatenate(cols) if cols else np.zeros(0, np.int64),
            np.concatenate(vals) if vals else np.zeros(0),
        )
        self.base_rhs = np.concatenate(rhs) if rhs else np.zeros(0)
        return n_cols

    def _formula_rows(self, ann: Formulas) -> int:
        """One column per gate (the standard polynomial encoding of spec 5.6): an ∧ gate with
        children c_1..c_m gives Σ val(c_l) − z ≤ m − 1, an ∨ gate val(c_l) − z ≤ 0 per child."""
        n_p = ann.n_participants
        self.n_f = n_p
        n_cols = n_p + ann.n_gates
        self.n_cols = n_cols
        lens = np.diff(ann.child_ptr)
        parent = np.repeat(np.arange(ann.n_gates), lens)
        is_and = ann.gate_type == AND
        # ∧: one row per gate; ∨: one row per child
        and_gates = np.flatnonzero(is_and)
        row_of_and = np.full(ann.n_gates, -1, np.int64)
        row_of_and[and_gates] = np.arange(and_gates.size)
        in_and = is_and[parent]
        n_and = and_gates.size
        or_children = np.flatnonzero(~in_and)
        r_or = n_and + np.arange(or_children.size)
        rows = np.concatenate([row_of_and[parent[in_and]], row_of_and[and_gates], r_or, r_or])
        cols = np.concatenate(
            [
                ann.child[in_and],
                n_p + and_gates,
                ann.child[or_children],
                n_p + parent[or_children],
            ]
        )
        vals = np.concatenate(
            [
                np.ones(int(in_and.sum())),
                -np.ones(n_and),
                np.ones(or_children.size),
                -np.ones(or_children.size),
            ]
        )
        self.base = (rows.astype(np.int64), cols.astype(np.int64), vals)
        self.base_rhs = np.concatenate(
            [(lens[and_gates] - 1).astype(np.float64), np.zeros(or_children.size)]
        )
        self.n_base_rows = n_and + or_children.size
        gate_tuple = ann.gate_tuple()
        self.row_tuple = np.concatenate([gate_tuple[and_gates], gate_tuple[parent[or_children]]])
        self.tuple_val = ann.root.astype(np.int64)
        return n_cols

    # -- the loads of G: ψ_{t,p}, the part of φ_t that goes through p --------------------------
    # G_i = g · min_{|f|=i} max_p Σ_t q(t) ψ_{t,p}(f). ψ_{t,p} is φ of the tuple's annotation
    # restricted to the ways p takes part: for minimal DNF the largest clause value among the
    # clauses that hold p; for formulas, bottom-up, ψ_{leaf p,p} = f_p, ψ_{∨,p} = max of the
    # children's ψ_{·,p}, ψ_{∧,p} = max over the children l that hold p of
    # max(0, ψ_{l,p} + Σ_{l'≠l} φ_{l'} − (m − 1)). Then ψ ≤ φ, ψ is monotone in f, ψ_{t,p} = 0
    # when f_p = 0, and at f_p = 0 the other participants' ψ equal those of the relation without
    # p (same substitution argument as φ's naturalness): so G is a recursive sequence (Def. 17).
    # The paper's load φ_t · S_{t,p} (eq. 19) is not when annotations hold ∨: with
    # t_k = p ∨ x_k, p's load at f_p = 0 is still Σ_k q(t_k), G_i of the relation exceeds G_i of
    # the relation without p, and j moved by 21 between those neighbours (m = 100 tuples).
    # For conjunctions (subgraph patterns) ψ_{t,p} = φ_t = φ_t · S_{t,p}: eq. 19 unchanged.
    def _dnf_loads(self, ann: Annotations) -> None:
        """ψ columns of minimal DNF: φ_t where p is in every clause of t, the clause's value
        where p is in one clause, else a column u ≥ each clause value (clauses holding p)."""
        n_p = max(1, ann.n_participants)
        lens = np.diff(ann.clause_ptr)
        ncl = np.diff(ann.tuple_ptr)
        clause_of_var = np.repeat(np.arange(ann.n_clauses), lens)
        key = ann.clause_tuple()[clause_of_var] * np.int64(n_p) + ann.clause_vars
        order = np.argsort(key, kind="stable")
        uk, start, counts = np.unique(key[order], return_index=True, return_counts=True)
        pair_t, pair_p = uk // n_p, uk % n_p
        col = np.empty(uk.size, np.int64)
        every = counts == ncl[pair_t]
        col[every] = self.tuple_val[pair_t[every]]
        one = ~every & (counts == 1)
        col[one] = self.clause_val[clause_of_var[order[start[one]]]]
        multi = ~every & ~one
        n_u = int(multi.sum())
        col[multi] = self.n_cols + np.arange(n_u)
        entry_pair = np.repeat(np.arange(uk.size), counts)
        sel = multi[entry_pair]
        src = self.clause_val[clause_of_var[order]][sel]
        target = col[entry_pair[sel]]
        levels = [np.arange(src.size)] if src.size else []
        self._set_loads(
            pair_t,
            pair_p,
            col,
            n_u,
            [[int(c)] for c in src],
            np.zeros(src.size),
            target,
            pair_t[entry_pair[sel]],
            levels,
        )

    def _formula_loads(self, ann: Formulas) -> None:
        """ψ columns of formulas, gate by gate (children before parents): a gate's own column
        where ψ equals φ of the gate, a child's ψ column where ∨ has one way through p, else a
        new column u with the rows of the rule above."""
        n = ann.n_participants
        types = ann.gate_type.tolist()
        ptr = ann.child_ptr.tolist()
        child = ann.child.tolist()
        gate_tuple = ann.gate_tuple().tolist()
        psi: list[dict[int, int]] = []
        height: list[int] = []
        rows_cols: list[list[int]] = []
        rows_rhs: list[float] = []
        rows_target: list[int] = []
        rows_tuple: list[int] = []
        rows_level: list[int] = []
        next_u = self.n_cols
        for g in range(ann.n_gates):
            kids = child[ptr[g] : ptr[g + 1]]
            maps = [{k: k} if k < n else psi[k - n] for k in kids]
            h = 1 + max((height[k - n] for k in kids if k >= n), default=0)
            height.append(h)
            ways: dict[int, list[int]] = {}
            for pos, mp in enumerate(maps):
                for q in mp:
                    ways.setdefault(q, []).append(pos)
            m = len(kids)
            out: dict[int, int] = {}
            for q, where in ways.items():
                refs = [maps[pos][q] for pos in where]
                if types[g] == AND:
                    if any(refs[i] == kids[pos] for i, pos in enumerate(where)):
                        out[q] = n + g  # that child's ψ is its φ: ψ of the ∧ is its φ
                        continue
                    new = [
                        [ref] + [kids[o] for o in range(m) if o != pos]
                        for ref, pos in zip(refs, where, strict=True)
                    ]
                    rhs = float(m - 1)
                else:
                    if len(where) == m and all(
                        ref == kids[pos] for ref, pos in zip(refs, where, strict=True)
                    ):
                        out[q] = n + g
                        continue
                    distinct = list(dict.fromkeys(refs))
                    if len(distinct) == 1:
                        out[q] = distinct[0]
                        continue
                    new = [[ref] for ref in distinct]
                    rhs = 0.0
                for cols in new:
                    rows_cols.append(cols)
                    rows_rhs.append(rhs)
                    rows_target.append(next_u)
                    rows_tuple.append(gate_tuple[g])
                    rows_level.append(h)
                out[q] = next_u
                next_u += 1
            psi.append(out)
        pt: list[int] = []
        pp: list[int] = []
        pc: list[int] = []
        for t, r in enumerate(ann.root.tolist()):
            for q, c in ({r: r} if r < n else psi[r - n]).items():
                pt.append(t)
                pp.append(q)
                pc.append(c)
        lv = np.asarray(rows_level, np.int64)
        levels = [np.flatnonzero(lv == h) for h in np.unique(lv)]
        self._set_loads(
            np.asarray(pt, np.int64),
            np.asarray(pp, np.int64),
            np.asarray(pc, np.int64),
            next_u - self.n_cols,
            rows_cols,
            np.asarray(rows_rhs),
            np.asarray(rows_target, np.int64),
            np.asarray(rows_tuple, np.int64),
            levels,
        )

    def _set_loads(
        self,
        pair_t: NDArray[np.int64],
        pair_p: NDArray[np.int64],
        pair_col: NDArray[np.int64],
        n_u: int,
        row_cols: list[list[int]],
        rhs: NDArray[np.float64],
        target: NDArray[np.int64],
        row_tuple: NDArray[np.int64],
        levels: list[NDArray[np.int64]],
    ) -> None:
        """Store the ψ structure: rows ``Σ cols − u ≤ rhs`` (u = target column)."""
        order = np.lexsort((pair_p, pair_t))
        self.pair_t, self.pair_p, self.pair_col = pair_t[order], pair_p[order], pair_col[order]
        self.n_u = int(n_u)
        n_rows = len(row_cols)
        self.n_psi_rows = n_rows
        lens = np.fromiter((len(c) for c in row_cols), np.int64, n_rows)
        flat = np.fromiter((c for cols in row_cols for c in cols), np.int64, int(lens.sum()))
        r_expr = np.repeat(np.arange(n_rows), lens)
        width = self.n_cols + self.n_u
        self._psi_expr = sp.csr_array((np.ones(flat.size), (r_expr, flat)), shape=(n_rows, width))
        self._psi_target = target
        self._psi_levels = levels
        self.psi_rows = (
            np.concatenate([r_expr, np.arange(n_rows)]),
            np.concatenate([flat, target]),
            np.concatenate([np.ones(flat.size), -np.ones(n_rows)]),
        )
        self.psi_rhs = np.asarray(rhs, np.float64)
        self.psi_row_tuple = np.asarray(row_tuple, np.int64)

    def _column_values(self, f: NDArray[np.float64]) -> NDArray[np.float64]:
        """The value of every column of the H program at presence ``f`` (φ of each node)."""
        x = np.zeros(self.n_cols + self.n_u)
        ann = self.ann
        if isinstance(ann, Formulas):
            x[: self.n_cols] = ann.node_values(f)
            return x
        x[: self.n_f] = f
        if ann.n_clauses:
            lens = np.diff(ann.clause_ptr)
            sums = np.add.reduceat(f[ann.clause_vars], ann.clause_ptr[:-1])
            cval = np.maximum(0.0, sums - (lens - 1))
            x[self.clause_val] = cval
            x[self.tuple_val] = np.maximum.reduceat(cval, ann.tuple_ptr[:-1])
        return x

    def psi_values(self, f: NDArray[np.float64]) -> NDArray[np.float64]:
        """ψ_{t,p}(f) for every (tuple, participant) pair of :attr:`incidence`."""
        x = self._column_values(f)
        for sel in self._psi_levels:
            vals = self._psi_expr[sel] @ x - self.psi_rhs[sel]
            np.maximum.at(x, self._psi_target[sel], vals)  # u starts at 0: max(0, rows)
        return x[self.pair_col]

    # -- matrices ------------------------------------------------------------------------------
    def _a_base(self, extra_cols: int = 0) -> sp.csr_array:
        r, c, v = self.base
        return sp.csr_array((v, (r, c)), shape=(self.n_base_rows, self.n_cols + extra_cols))

    @property
    def a_h(self) -> sp.csr_array:
        if self._a_h is None:
            self._a_h = self._a_base()
        return self._a_h

    @property
    def a_g(self) -> sp.csr_array:
        """G's rows: the base rows, the ψ rows (columns u after the base columns) and one load
        row ``Σ_t q(t) ψ_{t,p} − w ≤ 0`` per participant (w the last column)."""
        if self._a_g is None:
            t, p = self.incidence
            w_col = self.n_cols + self.n_u
            r0 = self.n_base_rows + self.n_psi_rows
            used = np.unique(p)
            row_of_p = np.full(self.ann.n_participants, -1, np.int64)
            row_of_p[used] = r0 + np.arange(used.size)
            r, c, v = self.base
            pr, pc, pv = self.psi_rows
            rows = np.concatenate([r, self.n_base_rows + pr, row_of_p[p], row_of_p[used]])
            cols = np.concatenate([c, pc, self.pair_col, np.full(used.size, w_col)])
            vals = np.concatenate([v, pv, self.ann.weights[t], -np.ones(used.size)])
            shape = (r0 + used.size, w_col + 1)
            a = sp.coo_array((vals, (rows, cols)), shape=shape).tocsr()
            a.sum_duplicates()
            self._a_g = a
            self._g_rhs = np.concatenate([self.base_rhs, self.psi_rhs, np.zeros(used.size)])
        return self._a_g

    def _bounds(self, g: bool) -> NDArray[np.float64]:
        ub = np.ones(self.n_cols + (self.n_u + 1 if g else 0))
        if g:
            # w bounds the largest load Σ_t q(t) ψ_{t,p}(f) ≤ Σ_{t∋p} q(t) (ψ ≤ 1); doubled
            # for float safety
            ub[-1] = max(1.0, 2.0 * float(self.load_top.max(initial=0.0)))
        return np.stack([np.zeros_like(ub), ub], axis=1)

    def _eq(self, g: bool) -> sp.csr_array:
        n = self.n_cols + (self.n_u + 1 if g else 0)
        return sp.csr_array(
            (np.ones(self.n_f), (np.zeros(self.n_f, np.int64), np.arange(self.n_f))), shape=(1, n)
        )

    # -- solving ---------------------------------------------------------------------------------
    def _solve(
        self,
        label: str,
        c: NDArray[np.float64],
        a: sp.csr_array,
        b: NDArray[np.float64],
        a_eq: sp.csr_array | None,
        b_eq: NDArray[np.float64] | None,
        bounds: NDArray[np.float64],
        method: str,
    ) -> LPResult:
        # A solver that stops short (Clarabel's "AlmostSolved" on a degenerate program) is
        # retried with dual simplex: a failure here comes after the budget is spent and depends
        # on the data, so it must be as rare as the solvers allow.
        first: LPResult | None = None
        for m in dict.fromkeys((method, "highs-ds")):
            if self.progress is not None:
                self.progress(label)
            t0 = time.perf_counter()
            solver = _solve_clarabel if m == "clarabel" else _solve_highs
            res = solver(c, a, b, a_eq, b_eq, bounds, m, self.time_limit)
            dt = time.perf_counter() - t0
            self.stats.n_solves += 1
            self.stats.seconds += dt
            self.stats.per_lp.append((label, dt))
            if res.ok:
                return res
            first = first or res
        assert first is not None
        # the program's kind only: its index (|P| − j, |P| private under node DP) and the cap
        # of the search for j depend on the data, and the budget is already spent here
        also = "" if method == "highs-ds" else "; dual simplex failed too"
        raise SolverError(
            f"the {_kind(label)} linear program did not solve ({method}: {first.message}{also})"
        )

    def h_value(self, i: int, tau: float = math.inf) -> float:
        """H_i, certified to within ``tau`` when ``tau`` is finite (else the solver's value)."""
        n = self.n_f
        if i <= 0:
            return 0.0
        if i >= n:
            return self.ann.total()
        key = (i, tau)
        if key not in self._h_cache:
            self._h_cache[key] = self._h_solve(i, tau)
        return self._h_cache[key]

    def _h_solve(self, i: int, tau: float) -> float:
        return self._certified(
            f"H[{i}]",
            self.c_h,
            float(i),
            tau,
            lambda res: self._upper(res.x[: self.n_f], float(i)),
        )[0]

    def _certified(
        self,
        label: str,
        c: NDArray[np.float64],
        budget: float | None,
        tau: float,
        upper: Callable[[LPResult], float],
        offset: float = 0.0,
    ) -> tuple[float, LPResult]:
        """``offset + min c·x`` over the H constraints (and ``Σ_p f_p = budget`` unless None).

        With a finite ``tau`` the value returned is ``upper(res)`` (φ evaluated exactly at a
        feasible point) once a weak-duality lower bound is within ``tau`` of it; otherwise the
        program is re-solved with dual simplex and, failing that, refused.
        """
        a_eq = None if budget is None else self._eq(False)
        b_eq = None if budget is None else np.array([budget])
        for method in dict.fromkeys((self.method, "highs-ds")):
            res = self._solve(
                label, c, self.a_h, self.base_rhs, a_eq, b_eq, self._bounds(False), method
            )
            if not math.isfinite(tau):
                return res.fun + offset, res
            hi = upper(res)
            lo = offset + _weak_duality_bound(
                res, c, self.a_h, self.base_rhs, self._bounds(False), self.n_f, budget or 0.0
            )
            if hi - lo <= tau:
                return hi, res
        # No numbers: the bounds are the exact (un-noised) H or X, the index depends on the data
        # and τ = tolerance·Δ̂; the budget is already spent when this is raised.
        raise SolverError(
            f"the {_kind(label)} linear program could not be certified to the requested "
            f"tolerance (its primal and dual bounds stay further apart); raise tolerance= (a "
            f"fraction of Δ̂)"
        )

    def g_value(self, i: int) -> float:
        """G_i = g · min_f max_p Σ_t q(t) ψ_{t,p}(f) with |f| = i (eq. 19's shape, g = 2 by
        default; ψ_{t,p} = φ_t · S_{t,p} for conjunctions, see "the loads of G")."""
        if i <= 0:
            return 0.0
        if i >= self.n_f:
            return self.g_factor * float(self.load_top.max(initial=0.0))
        if i in self._g_cache:
            return self._g_cache[i]
        a = self.a_g
        assert self._g_rhs is not None
        c = np.zeros(self.n_cols + self.n_u + 1)
        c[-1] = 1.0
        res = self._solve(
            f"G[{i}]",
            c,
            a,
            self._g_rhs,
            self._eq(True),
            np.array([float(i)]),
            self._bounds(True),
            self.g_method,
        )
        self._g_cache[i] = self.g_factor * res.fun
        return self._g_cache[i]

    def g_at_most(self, i: int, cap: float) -> bool:
        """Whether G_i ≤ cap, by a smaller program than :meth:`g_value` (same answer).

        With g the factor of G (:attr:`g_factor`): a participant whose load at f ≡ 1
        (:attr:`load_top`, Σ_{t∋p} q(t)) is at most cap/g can never push max_p above cap/g (ψ
        is monotone, so loads only fall as f falls): its row is left out. Tuples that involve no
        remaining participant then constrain nothing and are left out too, and the participants
        that occur only in those tuples keep one pooled slack:
        ``Σ_{kept} f_p ≥ i − (number left out)`` (G is nondecreasing in f, so "≥" and "=" give
        the same minimum). The minimum of this program is ≤ cap/g exactly when G_i ≤ cap.
        """
        n = self.n_f
        if i <= 0:
            return cap >= 0.0
        if i >= n:
            return self.g_value(n) <= cap
        if i in self._g_cache:
            return self._g_cache[i] <= cap
        if self.greedy_g(n - i) <= cap:  # a feasible point: G_i is at most this
            return True
        gf = self.g_factor
        if any(gf * (c0 + slope * (n_out - i)) > cap for c0, slope, n_out in self._g_lower):
            return False  # a dual bound valid at every index already exceeds cap
        hot = self.load_top > cap / gf
        if not hot.any():
            return True
        a = self.a_g
        assert self._g_rhs is not None
        t, p = self.incidence
        keep_t = np.zeros(self.ann.n_tuples, bool)
        keep_t[t[hot[p]]] = True
        used = np.unique(p)
        row_tuple = np.concatenate([self.row_tuple, self.psi_row_tuple])
        rows = np.concatenate(
            [
                np.flatnonzero(keep_t[row_tuple]),
                row_tuple.size + np.flatnonzero(hot[used]),
            ]
        )
        sub = a[rows]
        cols = np.unique(sub.indices)
        sub = sub[:, cols]
        is_f = cols < self.n_f
        f_cols = np.flatnonzero(is_f)
        n_left_out = n - f_cols.size
        pool = sp.csr_array(
            (-np.ones(f_cols.size), (np.zeros(f_cols.size, np.int64), f_cols)),
            shape=(1, cols.size),
        )
        c = np.zeros(cols.size)
        c[-1] = 1.0  # w is the last column of a_g, and every hot row holds it
        a_sub = sp.vstack([sub, pool]).tocsr()
        b_sub = np.concatenate([self._g_rhs[rows], [float(n_left_out - i)]])
        bounds = self._bounds(True)[cols]
        res = self._solve(f"G[{i}]≤{cap:.4g}", c, a_sub, b_sub, None, None, bounds, self.g_method)
        # The program at another index i' differs only in the pool's right-hand side, and every
        # such program relaxes the full G program: its multipliers bound G_{i'}/g from below for
        # all i' (weak duality), linearly in i'. Stored unscaled (bounds on G/g).
        b_sub[-1] = 0.0
        const = _weak_duality_bound(res, c, a_sub, b_sub, bounds)
        self._g_lower.append((const, min(float(res.y_ub[-1]), 0.0), n_left_out))
        return gf * res.fun <= cap

    def greedy_g(self, removals: int) -> float:
        """An upper bound on G_{|P|−r}: g · the largest load after r greedy removals.

        Greedy: r times, set f_p = 0 for the participant with the largest current load
        Σ_t q(t) ψ_{t,p}(f). The point is feasible for the G program at index |P| − r, so
        its objective bounds G from above (used only to skip programs, never as a value).
        """
        r = int(removals)
        if r >= self._greedy_g.size:
            self._greedy_g = self._greedy_sequence(max(r, 2 * self._greedy_g.size, 16))
        return float(self._greedy_g[min(r, self._greedy_g.size - 1)])

    def _greedy_sequence(self, r_max: int) -> NDArray[np.float64]:
        n = self.n_f
        t, p = self.incidence
        f = np.ones(n)
        out = np.empty(min(r_max, n) + 1)
        for r in range(out.size):
            loads = np.bincount(p, weights=self.ann.weights[t] * self.psi_values(f), minlength=n)
            out[r] = self.g_factor * float(loads.max(initial=0.0))
            if r < out.size - 1:
                f[int(np.argmax(np.where(f > 0, loads, -1.0)))] = 0.0
        return out

    def x_argmin(self, delta_hat: float) -> float:
        """The real minimiser i' = Σ_p f_p of the X program (eq. 20)."""
        c = self.c_h.copy()
        c[: self.n_f] -= delta_hat
        res = self._solve(
            "X", c, self.a_h, self.base_rhs, None, None, self._bounds(False), self.method
        )
        return float(np.clip(res.x[: self.n_f], 0, 1).sum())

    def x_relaxed(self, delta_hat: float, tau: float = math.inf) -> tuple[float, float]:
        """min over f ∈ [0,1]^P of Σ_t q(t) φ_t(f) + (|P| − |f|) Δ̂, and |f| at the optimum.

        Certified to within ``tau`` when finite: every f in the box is feasible, so φ evaluated
        exactly at the solver's (clipped) f is an upper bound, and weak duality a lower bound.
        """
        n = self.n_f
        c = self.c_h.copy()
        c[:n] -= delta_hat

        def upper(res: LPResult) -> float:
            f = np.clip(res.x[:n], 0.0, 1.0)
            return float(self.ann.weights @ self.ann.evaluate(f)) + (n - f.sum()) * delta_hat

        value, res = self._certified("X", c, None, tau, upper, offset=n * delta_hat)
        return value, float(np.clip(res.x[:n], 0.0, 1.0).sum())

    # -- certification ---------------------------------------------------------------------------
    def _upper(self, f: NDArray[np.float64], i: float) -> float:
        """Σ_t q(t) φ_t(f') at a point f' with |f'| = i exactly (an upper bound on H_i)."""
        f = np.clip(f, 0.0, 1.0)
        s = float(f.sum())
        n = f.size
        if s > i:
            f = f * (i / s)
        elif s < i:
            f = f + (1.0 - f) * ((i - s) / max(n - s, 1e-300))
            f = np.clip(f, 0.0, 1.0)
        return float(self.ann.weights @ self.ann.evaluate(f))


def _weak_duality_bound(
    res: LPResult,
    c: NDArray[np.float64],
    a: sp.csr_array,
    b: NDArray[np.float64],
    bounds: NDArray[np.float64],
    n_eq_cols: int = 0,
    eq_rhs: float = 0.0,
) -> float:
    """A lower bound on ``min c·x`` s.t. ``a x ≤ b`` (and ``Σ_{j<n_eq_cols} x_j = eq_rhs`` when
    the solve had that equality), box ``bounds``: weak duality, valid for any multipliers."""
    y = np.minimum(res.y_ub, 0.0)
    y_eq = float(res.y_eq[0]) if res.y_eq.size else 0.0
    d = c - a.T @ y
    d[:n_eq_cols] -= y_eq
    box = np.where(d >= 0, d * bounds[:, 0], d * bounds[:, 1]).sum()
    return float(b @ y + y_eq * eq_rhs + box)


@dataclass
class LPResult:
    """One solve, in scipy's sign conventions whatever the backend.

    ``y_ub`` (≤ 0) and ``y_eq`` are the multipliers of the inequality and equality rows
    (∂ optimum / ∂ right-hand side), as ``linprog``'s ``marginals``.
    """

    ok: bool
    message: str
    x: NDArray[np.float64] = field(default_factory=lambda: np.zeros(0))
    fun: float = math.nan
    y_ub: NDArray[np.float64] = field(default_factory=lambda: np.zeros(0))
    y_eq: NDArray[np.float64] = field(default_factory=lambda: np.zeros(0))


def _solve_highs(
    c: NDArray[np.float64],
    a: sp.csr_array,
    b: NDArray[np.float64],
    a_eq: sp.csr_array | None,
    b_eq: NDArray[np.float64] | None,
    bounds: NDArray[np.float64],
    method: str,
    time_limit: float | None,
) -> LPResult:
    res = linprog(
        c,
        A_ub=a if a.shape[0] else None,
        b_ub=b if a.shape[0] else None,
        A_eq=a_eq,
        b_eq=b_eq,
        bounds=bounds,
        method=method,
        options={} if time_limit is None else {"time_limit": float(time_limit)},
    )
    if res.status != 0:
        return LPResult(False, f"status {res.status}, {res.message}")
    y_ub = np.asarray(res.ineqlin.marginals, np.float64) if a.shape[0] else np.zeros(0)
    y_eq = np.asarray(res.eqlin.marginals, np.float64) if a_eq is not None else np.zeros(0)
    return LPResult(True, "optimal", np.asarray(res.x), float(res.fun), y_ub, y_eq)


def _solve_clarabel(
    c: NDArray[np.float64],
    a: sp.csr_array,
    b: NDArray[np.float64],
    a_eq: sp.csr_array | None,
    b_eq: NDArray[np.float64] | None,
    bounds: NDArray[np.float64],
    method: str,
    time_limit: float | None,
) -> LPResult:
    """Clarabel's interior point on ``A_eq x = b_eq, A x ≤ b, lb ≤ x ≤ ub`` (all bounds finite).

    Clarabel factorises the sparse KKT system directly, so it is not slowed down by the dense
    normal equations that many overlapping occurrences (a large clique) create.
    """
    import clarabel

    n = c.size
    n_eq = 0 if a_eq is None else a_eq.shape[0]
    eye = sp.identity(n, format="csr")
    blocks = ([a_eq] if a_eq is not None else []) + [a, -eye, eye]
    rhs = ([b_eq] if b_eq is not None else []) + [b, -bounds[:, 0], bounds[:, 1]]
    cones = ([clarabel.ZeroConeT(n_eq)] if n_eq else []) + [
        clarabel.NonnegativeConeT(a.shape[0] + 2 * n)
    ]
    settings = clarabel.DefaultSettings()
    settings.verbose = False
    for name in ("tol_gap_abs", "tol_gap_rel", "tol_feas"):
        setattr(settings, name, CLARABEL_TOLERANCE)
    if time_limit is not None:
        settings.time_limit = float(time_limit)
    solver = clarabel.DefaultSolver(
        sp.csc_matrix((n, n)),
        np.asarray(c, np.float64),
        sp.csc_matrix(sp.vstack(blocks)),
        np.concatenate(rhs).astype(np.float64),
        cones,
        settings,
    )
    sol = solver.solve()
    status = str(sol.status)
    if status != "Solved":
        return LPResult(False, f"status {status}")
    z = np.asarray(sol.z, np.float64)
    return LPResult(
        True,
        "optimal",
        np.asarray(sol.x, np.float64),
        float(sol.obj_val),
        -z[n_eq : n_eq + a.shape[0]],
        -z[:n_eq],
    )
