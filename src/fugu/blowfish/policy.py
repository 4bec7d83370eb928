"""Blowfish policies: the domain T, the discriminative secret graph G and public constraints Q.

A policy says *what* must stay secret. Each edge ``(x, y)`` of the secret graph G promises that,
for every individual, an adversary cannot tell (beyond a factor ``e^ε``) whether that person's
record is ``x`` or ``y``. Values far apart in G are protected less (``e^(kε)`` at graph distance
``k``); values in different connected components are not protected against each other at all.
Source: He, Machanavajjhala, Ding, "Blowfish Privacy", SIGMOD 2014 (arXiv 1312.3913, seed
``000_…``), Section 3 (equations 4–7) and Definition of the discriminative secret graph.

Graph families (none of them ever materialises the ``|T|²`` edges of a large domain):

=====================  ==========================================================================
``full``               every pair of values (complete graph): bounded differential privacy
``attribute``          values that differ in exactly one attribute
``partition``          values in the same block of a partition of T (block membership is public)
``distance``           values within distance θ (weighted L1, or L∞) on the attributes' codes;
                       ``line`` is θ = 1 on one ordered attribute
``explicit``           a given edge list (small domains)
=====================  ==========================================================================

``bottom=True`` adds the vertex ⊥ ("this person is not in the data") joined to every value, so
adding or removing a record is also protected (unbounded neighbours). Without it the number of
records n is public, as in the paper.

Attributes other modules read (the contract for ``fugu.blowfish.kmeans`` and the sensitivity code):

``policy.kind``
    ``"full" | "attribute" | "partition" | "distance" | "explicit"`` (``line`` is ``"distance"``
    with ``theta == 1``; ``policy.is_line`` says so).
``policy.theta``, ``policy.metric``, ``policy.weights``
    distance policies: ``d(x, y) = Σ_A weights[A]·|code_A(x) − code_A(y)|`` (``"l1"``) or
    ``max_A weights[A]·|…|`` (``"linf"``); weights default to 1 (one code step = 1).
    Codes of an integer ordinal ``low..high`` are ``value − low``, so θ is in value units.
``policy.attribute_blocks``
    partition policies given per attribute: a tuple with, for each attribute, a tuple of block ids
    (one per code) or ``None`` (the whole attribute is one block). Two cells are in the same block
    when they agree on every attribute's block id.
``policy.cell_blocks``
    partition policies given per cell: flat block id of every cell (``None`` otherwise). Use
    :meth:`Policy.block_ids` to get flat block ids in either case.
``policy.edges``
    explicit policies: (E, 2) array of flat cell indices, each undirected edge once (x < y).
``policy.bottom``, ``policy.constraints``
    the ⊥ vertex flag and the tuple of public constraints (:mod:`fugu.blowfish.constraints`).
``policy.identifier`` (also ``policy.name``)
    the canonical name used by the budget :class:`~fugu.Accountant` and ledger files: kind and
    parameters, a digest of the domain and a digest of the canonical secret graph; equal for
    equal policies however they were built (CLI spec or Python), in any process.

The compact forms of each graph family (partition block ids, distance weights, explicit edge
arrays with :data:`BOTTOM`) and the edge enumeration are built in
:mod:`fugu.blowfish.policy_edges`; this module holds the :class:`Policy` object and its text form
(:func:`parse_policy`).

Examples
--------
>>> import fugu
>>> from fugu.blowfish import Policy
>>> dom = fugu.Domain([fugu.Ordinal("age", 0, 99)])
>>> Policy.line(dom).description
'line'
>>> p = Policy.parse("distance:theta=5", dom)
>>> p.kind, p.theta, p.is_edge(10, 15), p.is_edge(10, 16)
('distance', 5.0, True, False)
>>> q = Policy.parse("partition:age=10", dom)
>>> q.is_edge(12, 19), q.is_edge(19, 20)
(True, False)
>>> Policy.from_dict(p.to_dict()) == p
True
"""

from __future__ import annotations

import hashlib
import json
import math
import re
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from numpy.typing import ArrayLike, NDArray

from ..budget import is_policy_identifier
from ..domain import Domain, Ordinal
from ..errors import DomainError, InvalidTypeError, PolicyError
from .constraints import Constraint, constraint_from_dict
from .policy_edges import (
    BOTTOM,
    _block_ids,
    _check_domain,
    _edge_array,
    _group_pairs,
    _offset_pairs,
    _partition_fields,
    _weights,
    max_steps,
)
from .policy_edges import partition_block_ids as partition_block_ids  # kept importable here

__all__ = [
    "Policy",
    "check_counted_records",
    "parse_policy",
    "is_policy_identifier",
    "KINDS",
    "BOTTOM",
]

KINDS = ("full", "attribute", "partition", "distance", "explicit")


#: Domains up to this many cells may materialise every edge (tests, brute force).
MAX_MATERIALISED_EDGES = 20_000_000


@dataclass(frozen=True, eq=False)
class Policy:
    """A Blowfish policy ``P = (T, G, I_Q)``. Build it with the class methods, not directly.

    Frozen and hashable by content (``==`` compares the serialised form). ``str(policy)`` is
    a one-line description; ``policy.to_dict()`` / ``Policy.from_dict`` round-trip it into a
    release's guarantee.
    """

    domain: Domain
    kind: str
    theta: float | None = None
    metric: str = "l1"
    weights: tuple[float, ...] | None = None
    attribute_blocks: tuple[tuple[int, ...] | None, ...] | None = None
    cell_blocks: NDArray[np.int64] | None = field(default=None, repr=False)
    edges: NDArray[np.int64] | None = field(default=None, repr=False)
    bottom: bool = False
    constraints: tuple[Constraint, ...] = ()
    label: str = ""

    def __post_init__(self) -> None:
        _check_fields(self)
        # A policy without a single secret pair protects nothing: every query would have
        # sensitivity 0 and be released exactly, labelled private. Refused wherever the policy
        # is built (class methods, from_dict, with_bottom(False), dataclasses.replace).
        if not self.has_edges() and not self.has_bottom_edges():
            raise PolicyError(
                f"the secret graph '{self.label or self.kind}' on a domain of {self.domain.size} "
                f"cell(s) {list(self.domain.names)} has no edge: no pair of values is secret, so "
                f"it would protect nothing and every release would be exact. Give at least one "
                f"secret pair (e.g. Policy.line(dom), Policy.full(dom), partition blocks of two "
                f"or more values, explicit edges), or bottom=True to protect presence"
            )

    # ------------------------------------------------------------------------------------------
    # constructors
    # ------------------------------------------------------------------------------------------
    @classmethod
    def full(cls, domain: Domain, *, bottom: bool = False) -> Policy:
        """Complete secret graph: every pair of values is secret (= bounded DP)."""
        return cls(_check_domain(domain), "full", bottom=bool(bottom), label="full")

    @classmethod
    def attribute(cls, domain: Domain, *, bottom: bool = False) -> Policy:
        """Values differing in exactly one attribute are secret pairs (``G^attr``)."""
        return cls(_check_domain(domain), "attribute", bottom=bool(bottom), label="attribute")

    @classmethod
    def partition(
        cls,
        domain: Domain,
        blocks: Mapping[str, Any] | ArrayLike,
        *,
        bottom: bool = False,
    ) -> Policy:
        """Values in the same block are secret pairs; which block a record is in is public.

        ``blocks`` is either

        * a mapping ``{attribute: spec}`` — per-attribute blocks; attributes not named form one
          block each (fully protected). ``spec`` is an integer width (consecutive codes grouped
          by ``width``; 1 = every value its own block), a sequence of block ids (one per value),
          a list of groups (lists of values covering the attribute exactly once), or for a
          nominal attribute ``"level<d>"`` (the hierarchy nodes at depth d);
        * an array of block ids, one per cell (shape ``domain.shape`` or flat).

        >>> import fugu
        >>> dom = fugu.Domain([fugu.Ordinal("x", 0, 5)])
        >>> Policy.partition(dom, {"x": [[0, 1, 2], [3, 4, 5]]}).block_ids().tolist()
        [0, 0, 0, 1, 1, 1]
        """
        domain = _check_domain(domain)
        fields = _partition_fields(domain, blocks)
        return cls(domain, "partition", bottom=bool(bottom), **fields)

    @classmethod
    def distance_threshold(
        cls,
        domain: Domain,
        theta: float,
        metric: str = "l1",
        *,
        weights: Mapping[str, float] | Sequence[float] | None = None,
        bottom: bool = False,
    ) -> Policy:
        """Values within distance ``theta`` are secret pairs (``G^{d,θ}``).

        The distance is taken on attribute codes (``value − low`` for an integer ordinal, bin
        rank for a binned one), each multiplied by its weight (default 1): ``"l1"`` sums the
        per-attribute distances, ``"linf"`` takes the largest. Every attribute must be ordinal.
        θ must be at least the smallest weight, or the graph would have no edge and protect
        nothing.
        """
        domain = _check_domain(domain)
        nominal = [a.name for a in domain.attributes if not isinstance(a, Ordinal)]
        if nominal:
            raise PolicyError(
                f"a distance-threshold policy needs ordered attributes; {nominal} are nominal. "
                f"Use an 'attribute' or 'partition' policy for them, or make them Ordinal"
            )
        if metric not in ("l1", "linf"):
            raise PolicyError(f"metric must be 'l1' or 'linf', got {metric!r}")
        if isinstance(theta, bool) or not isinstance(theta, int | float | np.integer | np.floating):
            raise InvalidTypeError(f"theta must be a number >= 1, got {theta!r}")
        t = float(theta)
        w = _weights(domain, weights)
        if not math.isfinite(t) or t < min(w):
            raise PolicyError(
                f"theta={theta!r} is smaller than one step of every attribute (smallest weight "
                f"{min(w):g}): the secret graph would have no edge and protect nothing; use "
                f"theta >= {min(w):g} (theta=1 is the line graph)"
            )
        label = (
            "line" if (t == 1 and domain.ndim == 1 and w == (1.0,)) else f"distance:theta={_num(t)}"
        )
        if metric != "l1":
            label += f",metric={metric}"
        if weights is not None and any(x != 1.0 for x in w):
            label += ",weights=" + "|".join(_num(x) for x in w)
        return cls(
            domain, "distance", theta=t, metric=metric, weights=w, bottom=bool(bottom), label=label
        )

    @classmethod
    def line(cls, domain: Domain, *, bottom: bool = False) -> Policy:
        """Adjacent values of an ordered attribute are secret pairs: ``distance_threshold(θ=1)``."""
        return cls.distance_threshold(domain, 1, bottom=bottom)

    @classmethod
    def explicit(cls, domain: Domain, edges: Any, *, bottom: bool = False) -> Policy:
        """A secret graph given as a list of edges between cells (small domains).

        Each edge is a pair of flat cell indices, or a pair of records (mappings ``{attr: value}``
        or tuples of values in attribute order). ``None`` or ``"bottom"`` as an endpoint means ⊥
        (and sets ``bottom`` only for that edge — use ``bottom=True`` to join ⊥ to every value).
        """
        domain = _check_domain(domain)
        pairs = _edge_array(domain, edges)
        return cls(
            domain,
            "explicit",
            edges=pairs,
            bottom=bool(bottom),
            label=f"explicit:{len(pairs)} edges",
        )

    @classmethod
    def parse(cls, text: str, domain: Domain) -> Policy:
        """Parse the command-line form; see :func:`parse_policy`."""
        return parse_policy(text, domain)

    def with_constraints(self, *constraints: Constraint) -> Policy:
        """The same secret graph with these public constraints added (checked against T)."""
        for c in constraints:
            if not isinstance(c, Constraint):
                raise InvalidTypeError(
                    f"constraints must be CountConstraint or MarginalConstraint, got "
                    f"{type(c).__name__}"
                )
            c.check(self.domain)
        return _replace(self, constraints=(*self.constraints, *constraints))

    def with_bottom(self, bottom: bool = True) -> Policy:
        """The same policy with (or without) the ⊥ vertex."""
        return _replace(self, bottom=bool(bottom))

    # ------------------------------------------------------------------------------------------
    # descriptions
    # ------------------------------------------------------------------------------------------
    @property
    def is_line(self) -> bool:
        return (
            self.kind == "distance"
            and self.domain.ndim == 1
            and self.theta is not None
            # joins only neighbouring values, by the same test as is_edge (not θ < 2w, which
            # called θ = 2 − 5e-13 a line although is_edge joins values 2 apart)
            and max_steps(self.theta, (self.weights or (1.0,))[0], self.domain.size - 1) <= 1
        )

    @property
    def description(self) -> str:
        """Human-readable one-liner, e.g. ``'distance:theta=5'`` or ``'line+bottom'``."""
        s = self.label or self.kind
        if self.bottom:
            s += "+bottom"
        if self.constraints:
            s += " with " + "; ".join(c.description for c in self.constraints)
        return s

    @property
    def identifier(self) -> str:
        """The policy's one canonical name, for the budget ledger and for comparing policies.

        ``"<kind and parameters> [domain <16 hex>, graph <16 hex>]"``: a readable summary, the
        SHA-256 of the domain (its attributes, values and order) and the SHA-256 of the secret
        graph in a canonical form (kind, θ / metric / weights, partition blocks renumbered in
        order of first appearance, sorted edges, ⊥, constraints). Labels and the way the policy
        was built do not enter it, so the same policy has the same identifier whether it came
        from ``parse_policy("distance:theta=5", dom)`` (the CLI's ``--policy``) or
        ``Policy.distance_threshold(dom, 5)``, in any process; two policies are equal (``==``)
        exactly when their identifiers are. Partitions over at most 2^20 cells compare by their
        cells, so per-attribute and per-cell forms of one partition are the same policy; over
        larger domains the two forms get different identifiers (never the reverse).

        >>> import fugu
        >>> dom = fugu.Domain([fugu.Ordinal("age", 0, 99)])
        >>> p = Policy.parse("distance:theta=5", dom)
        >>> p.identifier == Policy.distance_threshold(dom, 5).identifier
        True
        >>> p.identifier.split(" [")[0]
        'distance:theta=5'
        """
        ident = self.__dict__.get("_identifier")
        if ident is None:
            ident = _identifier(self)
            object.__setattr__(self, "_identifier", ident)
        return ident

    @property
    def name(self) -> str:
        """The same as :attr:`identifier` (the name every Blowfish mechanism charges a budget
        under)."""
        return self.identifier

    @property
    def legacy_name(self) -> str:
        """The name fugu gave this policy before :attr:`identifier` (``description [digest]``):
        ledgers written then record it; :meth:`names` recognises it."""
        digest = hashlib.sha256(json.dumps(self.to_dict(), sort_keys=True).encode()).hexdigest()
        return f"{self.description} [{digest[:10]}]"

    def names(self, text: str) -> bool:
        """Whether ``text`` names this policy: its :attr:`identifier`, its :attr:`legacy_name`,
        or a policy spec (the CLI's ``--policy``, e.g. ``"line"``) that gives this very policy
        on this policy's domain. Used to bind ledgers that name a policy in an older form.

        >>> import fugu
        >>> p = Policy.line(fugu.Domain([fugu.Ordinal("age", 0, 99)]))
        >>> p.names("line"), p.names("distance:theta=1"), p.names("line+bottom")
        (True, True, False)
        """
        if not isinstance(text, str):
            return False
        if text in (self.identifier, self.legacy_name):
            return True
        if is_policy_identifier(text) or _LEGACY_NAME.search(text):
            return False
        try:
            return parse_policy(text, self.domain).identifier == self.identifier
        except (PolicyError, DomainError, InvalidTypeError, ValueError):
            return False

    def __str__(self) -> str:
        return f"Policy({self.description} on {self.domain!r})"

    __repr__ = __str__

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Policy) and self.identifier == other.identifier

    def __hash__(self) -> int:
        return hash(self.identifier)

    # ------------------------------------------------------------------------------------------
    # serialisation
    # ------------------------------------------------------------------------------------------
    def to_dict(self) -> dict[str, Any]:
        d: dict[str, Any] = {"kind": self.kind, "label": self.label, "bottom": self.bottom}
        if self.kind == "distance":
            d.update(theta=self.theta, metric=self.metric, weights=list(self.weights or ()))
        if self.attribute_blocks is not None:
            d["attribute_blocks"] = [None if b is None else list(b) for b in self.attribute_blocks]
        if self.cell_blocks is not None:
            d["cell_blocks"] = self.cell_blocks.tolist()
        if self.edges is not None:
            d["edges"] = self.edges.tolist()
        if self.constraints:
            d["constraints"] = [c.to_dict() for c in self.constraints]
        d["domain"] = self.domain.to_dict()
        return d

    @classmethod
    def from_dict(cls, d: Mapping[str, Any], domain: Domain | None = None) -> Policy:
        if domain is None and "domain" not in d:
            raise PolicyError("this policy description has no domain; pass domain=release.domain")
        dom = domain if domain is not None else Domain.from_dict(d["domain"])
        kind = d.get("kind")
        if kind not in KINDS:
            raise PolicyError(f"unknown policy kind {kind!r}; expected one of {KINDS}")
        cons = tuple(constraint_from_dict(c) for c in d.get("constraints", ()))
        edges = None
        if d.get("edges") is not None:
            edges = np.asarray(d["edges"], dtype=np.int64).reshape(-1, 2)
            edges.setflags(write=False)
        cells = None
        if d.get("cell_blocks") is not None:
            cells = np.asarray(d["cell_blocks"], dtype=np.int64)
            cells.setflags(write=False)
        ab = d.get("attribute_blocks")
        return cls(
            dom,
            kind,
            theta=None if d.get("theta") is None else float(d["theta"]),
            metric=d.get("metric", "l1"),
            weights=tuple(float(x) for x in d["weights"]) if d.get("weights") else None,
            attribute_blocks=None
            if ab is None
            else tuple(None if b is None else tuple(int(x) for x in b) for b in ab),
            cell_blocks=cells,
            edges=edges,
            bottom=bool(d.get("bottom", False)),
            constraints=cons,
            label=d.get("label", ""),
        )

    def summary(self) -> dict[str, Any]:
        """Short JSON-able description for a release's guarantee (no per-cell arrays)."""
        out: dict[str, Any] = {
            "policy": self.description,
            "policy_id": self.name,
            "graph": self.kind,
        }
        if self.kind == "distance":
            out.update(theta=self.theta, metric=self.metric)
        if self.bottom:
            out["bottom"] = True
        big = (self.cell_blocks is not None and self.cell_blocks.size > 10_000) or (
            self.edges is not None and self.edges.size > 20_000
        )
        if not big:
            spec = self.to_dict()
            spec.pop("domain")  # the release holds the domain: Policy.from_dict(spec, rel.domain)
            out["policy_spec"] = spec
        return out

    # ------------------------------------------------------------------------------------------
    # graph structure
    # ------------------------------------------------------------------------------------------
    def block_ids(self) -> NDArray[np.int64]:
        """Flat block id of every cell (partition policies only)."""
        if self.kind != "partition":
            raise PolicyError(f"a {self.kind} policy has no partition blocks")
        return _block_ids(self.domain, self.attribute_blocks, self.cell_blocks)

    def _codes(self, x: int) -> NDArray[np.int64]:
        if not 0 <= int(x) < self.domain.size:
            raise DomainError(f"cell index {x} is outside the domain (0..{self.domain.size - 1})")
        return np.asarray(np.unravel_index(int(x), self.domain.shape), dtype=np.int64)

    def distance(self, x: int, y: int) -> float:
        """The policy metric between two cells (distance policies)."""
        if self.kind != "distance":
            raise PolicyError("only distance-threshold policies have a metric")
        diff = np.abs(self._codes(x) - self._codes(y)) * np.asarray(self.weights)
        return float(diff.sum() if self.metric == "l1" else diff.max())

    def is_edge(self, x: int, y: int) -> bool:
        """True when ``(x, y)`` is a secret pair; cells are flat indices, ⊥ is ``BOTTOM`` (-1)."""
        x, y = int(x), int(y)
        if x == y:
            return False
        if BOTTOM in (x, y):
            other = y if x == BOTTOM else x
            self._codes(other)
            if self.bottom:
                return True
            return self.kind == "explicit" and bool(
                np.any(np.all(self.edges == (other, BOTTOM), axis=1))
            )
        cx, cy = self._codes(x), self._codes(y)
        if self.kind == "full":
            return True
        if self.kind == "attribute":
            return int(np.count_nonzero(cx != cy)) == 1
        if self.kind == "partition":
            b = self.block_ids()
            return bool(b[x] == b[y])
        if self.kind == "distance":
            return self.distance(x, y) <= float(self.theta or 0) + 1e-12
        assert self.edges is not None
        lo, hi = (x, y) if x < y else (y, x)
        return bool(np.any((self.edges[:, 0] == lo) & (self.edges[:, 1] == hi)))

    def neighbours(self, x: int) -> NDArray[np.int64]:
        """Cells joined to ``x`` (excluding ⊥). For small domains and tests."""
        x = int(x)
        self._codes(x)
        if self.kind == "explicit":
            assert self.edges is not None
            e = self.edges
            out = np.concatenate([e[e[:, 0] == x, 1], e[e[:, 1] == x, 0]])
            return np.unique(out[out >= 0])
        cand = np.arange(self.domain.size)
        mask = (
            np.array([self.is_edge(x, int(y)) for y in cand]) if self.domain.size <= 4096 else None
        )
        if mask is None:
            src, dst = [], []
            for s, d in self.iter_edges():
                src.append(d[s == x])
                dst.append(s[d == x])
            return np.unique(np.concatenate(src + dst))
        return cand[mask]

    def offsets(self) -> list[NDArray[np.int64]]:
        """For distance and attribute graphs: the code offsets δ (one per undirected direction)
        such that the edges are exactly the pairs ``(x, x + δ)`` inside the domain."""
        shape = self.domain.shape
        out: list[NDArray[np.int64]] = []
        if self.kind == "attribute":
            for j, n in enumerate(shape):
                for k in range(1, n):
                    d = np.zeros(len(shape), np.int64)
                    d[j] = k
                    out.append(d)
            return out
        if self.kind != "distance":
            raise PolicyError(f"a {self.kind} policy is not described by offsets")
        w = np.asarray(self.weights, dtype=np.float64)
        theta = float(self.theta or 0) + 1e-12
        reach = [
            max_steps(float(self.theta or 0), wj, n - 1) for n, wj in zip(shape, w, strict=True)
        ]
        grids = np.meshgrid(*[np.arange(-r, r + 1) for r in reach], indexing="ij")
        cand = np.stack([g.reshape(-1) for g in grids], axis=1).astype(np.int64)
        dist = np.abs(cand) * w[None, :]
        within = (dist.sum(axis=1) if self.metric == "l1" else dist.max(axis=1)) <= theta
        nz = cand != 0
        first = np.argmax(nz, axis=1)
        positive = nz.any(axis=1) & (cand[np.arange(len(cand)), first] > 0)
        out = list(cand[within & positive])
        return out

    def has_edges(self) -> bool:
        """True when the graph has at least one edge between two cells (cheap)."""
        if self.kind in ("full", "attribute"):
            return any(n >= 2 for n in self.domain.shape)
        if self.kind == "distance":
            assert self.weights is not None
            return any(
                n >= 2 and wj <= float(self.theta or 0) + 1e-12
                for n, wj in zip(self.domain.shape, self.weights, strict=True)
            )
        return self.n_edges() > 0

    def n_edges(self) -> int:
        """Number of undirected edges between cells (⊥ edges not counted)."""
        if self.kind == "full":
            n = self.domain.size
            return n * (n - 1) // 2
        if self.kind == "explicit":
            assert self.edges is not None
            return int(np.count_nonzero(self.edges.min(axis=1) >= 0))
        if self.kind == "partition":
            sizes = np.bincount(self.block_ids())
            return int((sizes * (sizes - 1) // 2).sum())
        total = 0
        for d in self.offsets():
            total += int(
                np.prod([n - abs(int(k)) for n, k in zip(self.domain.shape, d, strict=True)])
            )
        return total

    def iter_edges(
        self, chunk: int = 1 << 20
    ) -> Iterator[tuple[NDArray[np.int64], NDArray[np.int64]]]:
        """Yield the cell–cell edges as chunks ``(src, dst)`` of flat indices, each edge once.

        Distance/attribute graphs are generated offset by offset, partition graphs block by block
        (grouped by block size), so nothing of size ``|T|²`` is built unless the graph has that
        many edges. ⊥ edges are not included (see ``bottom``).
        """
        shape = self.domain.shape
        if self.kind in ("distance", "attribute"):
            for d in self.offsets():
                yield from _offset_pairs(shape, d, chunk)
            return
        if self.kind == "explicit":
            assert self.edges is not None
            e = self.edges[self.edges.min(axis=1) >= 0]
            for i in range(0, len(e), chunk):
                yield e[i : i + chunk, 0], e[i : i + chunk, 1]
            return
        if self.kind == "full":
            n = self.domain.size
            if n * (n - 1) // 2 > MAX_MATERIALISED_EDGES:
                raise PolicyError(
                    f"the full graph on {n:,} cells has {n * (n - 1) // 2:,} edges; fugu does not "
                    f"enumerate them (closed forms are used where they exist)"
                )
            yield from _group_pairs(np.zeros(n, np.int64), chunk)
            return
        yield from _group_pairs(self.block_ids(), chunk)

    def materialise_edges(self) -> NDArray[np.int64]:
        """All cell–cell edges as an (E, 2) array, plus ⊥ edges (x, -1) when ``bottom``.

        Refused for graphs with more than ``MAX_MATERIALISED_EDGES`` edges.
        """
        if self.n_edges() > MAX_MATERIALISED_EDGES:
            raise PolicyError(f"{self.description} has {self.n_edges():,} edges; too many to list")
        parts = [np.stack([s, d], axis=1) for s, d in self.iter_edges()]
        out = np.concatenate(parts) if parts else np.zeros((0, 2), np.int64)
        if self.bottom:
            cells = np.arange(self.domain.size, dtype=np.int64)
            out = np.concatenate([out, np.stack([cells, np.full_like(cells, BOTTOM)], axis=1)])
        if self.kind == "explicit" and self.edges is not None:
            out = np.concatenate([out, self.edges[self.edges.min(axis=1) < 0]])
        return out

    def has_bottom_edges(self) -> bool:
        """True when some value is joined to ⊥ (``bottom=True`` or an explicit ⊥ edge)."""
        if self.bottom:
            return True
        return self.kind == "explicit" and self.edges is not None and bool(np.any(self.edges < 0))

    def bottom_cells(self) -> NDArray[np.int64]:
        """Cells joined to ⊥."""
        if self.bottom:
            return np.arange(self.domain.size, dtype=np.int64)
        if self.kind == "explicit" and self.edges is not None:
            e = self.edges[self.edges.min(axis=1) < 0]
            return np.unique(e.max(axis=1))
        return np.zeros(0, np.int64)

    def crosses(self, labels: ArrayLike) -> bool:
        """True when some secret edge joins two cells with different labels.

        ``labels`` assigns every cell to a part (shape ``domain.shape`` or flat). Used to check
        the parallel-composition condition: releases on value-disjoint parts compose in parallel
        only when no edge crosses between parts. ⊥ edges never cross (adding or removing a record
        touches one part only).
        """
        lab = np.asarray(labels).reshape(-1)
        if lab.size != self.domain.size:
            raise DomainError(
                f"labels must give one part per cell ({self.domain.size}), got {lab.size}"
            )
        if self.kind == "full":
            return bool(np.unique(lab).size > 1)
        if self.kind == "partition":
            b = self.block_ids()
            pairs = np.unique(
                np.stack([b, np.unique(lab, return_inverse=True)[1].reshape(-1)]), axis=1
            )
            return bool(pairs.shape[1] > np.unique(b).size)
        if self.kind == "attribute":
            cube = lab.reshape(self.domain.shape)
            for axis in range(cube.ndim):
                first = np.take(cube, [0], axis=axis)
                if np.any(cube != first):
                    return True
            return False
        for s, d in self.iter_edges():
            if np.any(lab[s] != lab[d]):
                return True
        return False


def _check_fields(p: Policy) -> None:
    """The fields of a policy built directly (``Policy.from_dict``, ``dataclasses.replace``)
    must describe the graph the class methods would build: a metric fugu knows (``'l2'`` was
    read as L∞), positive weights (a negative one joined every pair), one block id per value
    or cell, edges between cells of the domain. Refused with :class:`~fugu.PolicyError`."""
    dom = p.domain
    if not isinstance(dom, Domain):
        raise InvalidTypeError(f"domain must be a fugu.Domain, got {type(dom).__name__}")
    if p.kind not in KINDS:
        raise PolicyError(f"unknown policy kind {p.kind!r}; expected one of {KINDS}")
    if p.kind == "distance":
        if p.metric not in ("l1", "linf"):
            raise PolicyError(f"metric must be 'l1' or 'linf', got {p.metric!r}")
        w = p.weights
        if (
            w is None
            or len(w) != dom.ndim
            or any(isinstance(x, bool) or not (math.isfinite(x) and x > 0) for x in w)
        ):
            raise PolicyError(
                f"a distance policy needs one finite weight > 0 per attribute ({dom.ndim}), "
                f"got {w!r}"
            )
        t = p.theta
        if (
            isinstance(t, bool)
            or not isinstance(t, int | float | np.integer | np.floating)
            or not math.isfinite(t)
        ):
            raise PolicyError(f"a distance policy needs a finite theta, got {t!r}")
    if p.kind == "partition":
        if (p.cell_blocks is None) == (p.attribute_blocks is None):
            raise PolicyError("a partition policy needs attribute_blocks or cell_blocks (one)")
        if p.cell_blocks is not None:
            c = np.asarray(p.cell_blocks)
            if c.shape != (dom.size,) or c.dtype.kind not in "iu" or (c.size and c.min() < 0):
                raise PolicyError(
                    f"cell_blocks must hold one block id >= 0 per cell ({dom.size}), got an "
                    f"array of shape {c.shape} ({c.dtype})"
                )
        else:
            ab = p.attribute_blocks
            assert ab is not None
            if len(ab) != dom.ndim or any(
                b is not None and (len(b) != a.size or min(b, default=0) < 0)
                for a, b in zip(dom.attributes, ab, strict=False)
            ):
                raise PolicyError(
                    f"attribute_blocks must give, per attribute ({dom.ndim}), None or one block "
                    f"id >= 0 per value ({[a.size for a in dom.attributes]})"
                )
    if p.kind == "explicit":
        e = np.asarray(p.edges) if p.edges is not None else None
        if (
            e is None
            or e.ndim != 2
            or e.shape[1] != 2
            or e.dtype.kind not in "iu"
            or (e.size and (e.min() < BOTTOM or e.max() >= dom.size))
            or bool(np.any(e[:, 0] == e[:, 1]))
        ):
            raise PolicyError(
                f"explicit edges must be an (E, 2) integer array of distinct cells "
                f"0..{dom.size - 1} (or {BOTTOM} for ⊥)"
            )


# ----------------------------------------------------------------------------------------------
# parsing
# ----------------------------------------------------------------------------------------------
def check_counted_records(hist: Any, policy: Policy, what: str) -> None:
    """Refuse a histogram that counts only some records when the policy keeps n public (no ⊥).

    Without ⊥ a Blowfish neighbour moves a record along an edge, so the number of records is
    public and the mechanisms use it exactly (the cumulative count ``C_k = n``, sensitivities of
    moves only). A histogram built with ``out_of_domain="drop"`` counts only the records inside
    the domain: a record moved outside it vanishes from the counts, a change no edge describes.
    Likewise one counted from an SQL query's rows (``Histogram.from_file(sql=...)``): moving a
    record's value can move it in or out of the query's result.

    >>> import fugu
    >>> from fugu.blowfish import Policy
    >>> dom = fugu.Domain([fugu.Ordinal("age", 0, 3)])
    >>> hist = fugu.Histogram.from_records({"age": [0, 1, 9]}, dom, out_of_domain="drop")
    >>> check_counted_records(hist, Policy.line(dom).with_bottom(), "Ordered Mechanism")
    >>> check_counted_records(hist, Policy.line(dom), "Ordered Mechanism")
    Traceback (most recent call last):
    ...
    fugu.errors.PolicyError: hist was built with out_of_domain='drop', ...
    """
    if hist.dropped_records and not policy.bottom:
        raise PolicyError(
            f"hist was built with out_of_domain='drop', but the {what} under policy "
            f"{policy.description!r} (no ⊥) treats the number of records as public, and a record "
            "moved out of the domain would silently leave the counts; use the policy with ⊥ "
            "(policy.with_bottom(), or SPEC+bottom on the command line), or build the histogram "
            "with out_of_domain='error' or 'clip'"
        )
    if hist.counts_a_subset and not policy.bottom:
        raise PolicyError(
            f"hist counts the rows of an SQL query, but the {what} under policy "
            f"{policy.description!r} (no ⊥) treats the number of records as public, and "
            "changing one record can move it in or out of the query's result; use the policy "
            "with ⊥ (policy.with_bottom(), or SPEC+bottom on the command line), or count the "
            "whole table (path=... without sql=)"
        )


def parse_policy(text: str, domain: Domain) -> Policy:
    """Parse a policy string.

    ============================  ===============================================================
    ``full`` (or ``dp``)          complete graph (bounded DP)
    ``attribute``                 differ in one attribute
    ``line``                      adjacent values of the one ordered attribute (θ = 1)
    ``distance:theta=5``          within L1 distance 5 (``distance:5`` also works); add
                                  ``,metric=linf`` or ``,weights=1|2`` (one per attribute)
    ``partition:age=10``          blocks of 10 consecutive ages (other attributes: one block);
                                  ``partition:lat=40,lon=30``; nominal ``job=level1``
    ``...+bottom``                also protect presence (add/remove a record), e.g. ``line+bottom``
    ============================  ===============================================================

    >>> import fugu
    >>> parse_policy("distance:theta=3+bottom", fugu.Domain([fugu.Ordinal("a", 0, 9)])).description
    'distance:theta=3+bottom'
    """
    if not isinstance(text, str) or not text.strip():
        raise PolicyError(f"policy must be a non-empty string such as 'line', got {text!r}")
    s = text.strip()
    bottom = False
    if s.endswith("+bottom"):
        bottom, s = True, s[: -len("+bottom")]
    kind, _, rest = s.partition(":")
    kind = kind.strip().lower()
    args = _parse_args(rest, text)
    if kind in ("full", "dp", "complete"):
        _no_args(args, text)
        return Policy.full(domain, bottom=bottom)
    if kind in ("attribute", "attr"):
        _no_args(args, text)
        return Policy.attribute(domain, bottom=bottom)
    if kind == "line":
        _no_args(args, text)
        if domain.ndim != 1:
            raise PolicyError(
                f"'line' needs a one-attribute domain, this one has {list(domain.names)}; use "
                f"'distance:theta=1' for the grid graph"
            )
        return Policy.line(domain, bottom=bottom)
    if kind in ("distance", "distance_threshold", "threshold"):
        if "theta" in args and "" in args:
            # 'distance:5,theta=1' silently dropped the 5
            raise PolicyError(
                f"{text!r}: the threshold is given twice ({args['']!r} and theta="
                f"{args['theta']!r}); write it once, e.g. 'distance:theta=5'"
            )
        theta = args.pop("theta", args.pop("", None))
        if theta is None:
            raise PolicyError(f"{text!r}: give the threshold, e.g. 'distance:theta=5'")
        metric = str(args.pop("metric", "l1")).lower()
        weights = args.pop("weights", None)
        _no_args(args, text)
        try:
            t = float(theta)
        except ValueError:
            raise PolicyError(f"{text!r}: theta must be a number, got {theta!r}") from None
        try:
            w = None if weights is None else [float(x) for x in str(weights).split("|")]
        except ValueError:
            raise PolicyError(
                f"{text!r}: weights must be numbers separated by '|', one per attribute "
                f"(e.g. weights=1|2), got {weights!r}"
            ) from None
        return Policy.distance_threshold(domain, t, metric, weights=w, bottom=bottom)
    if kind == "partition":
        if not args or "" in args:
            raise PolicyError(
                f"{text!r}: say how each attribute is cut, e.g. 'partition:age=10' (blocks of 10 "
                f"values) or 'partition:lat=40,lon=30'"
            )
        spec: dict[str, Any] = {}
        for k, v in args.items():
            try:
                spec[k] = int(v)
            except ValueError:
                spec[k] = v
        return Policy.partition(domain, spec, bottom=bottom)
    raise PolicyError(
        f"unknown policy {text!r}; use 'full', 'attribute', 'line', 'distance:theta=5' or "
        f"'partition:age=10' (append '+bottom' to also protect presence)"
    )


def _parse_args(rest: str, text: str) -> dict[str, str]:
    out: dict[str, str] = {}
    if not rest.strip():
        return out
    for item in rest.split(","):
        k, sep, v = item.partition("=")
        if not sep:
            if "" in out:
                raise PolicyError(f"{text!r}: cannot read {item!r}; write key=value")
            out[""] = k.strip()
        else:
            key = k.strip()
            if key in out:
                # the last value silently won: 'distance:theta=5,theta=1' was the line graph
                raise PolicyError(
                    f"{text!r}: {key!r} is given twice ({out[key]!r} and {v.strip()!r}); give "
                    f"each parameter once"
                )
            out[key] = v.strip()
    return out


def _no_args(args: Mapping[str, str], text: str) -> None:
    if args:
        raise PolicyError(f"{text!r}: this policy takes no parameters, got {dict(args)}")


def _replace(p: Policy, **changes: Any) -> Policy:
    from dataclasses import replace

    return replace(p, **changes)


def _num(x: float) -> str:
    return str(int(x)) if float(x).is_integer() else f"{x:g}"


# ----------------------------------------------------------------------------------------------
# the canonical identifier
# ----------------------------------------------------------------------------------------------
_LEGACY_NAME = re.compile(r" \[[0-9a-f]{10}\]$")
#: partitions over at most this many cells are compared cell by cell
_CELL_CANONICAL = 2**20


def _first_seen(ids: ArrayLike) -> NDArray[np.int64]:
    """Block ids renumbered 0, 1, 2, ... in order of first appearance (a canonical labelling)."""
    a = np.asarray(ids, dtype=np.int64).reshape(-1)
    if a.size == 0:
        return a
    _, first, inv = np.unique(a, return_index=True, return_inverse=True)
    rank = np.empty(first.size, np.int64)
    rank[np.argsort(first, kind="stable")] = np.arange(first.size)
    return rank[inv.reshape(-1)]


def _identifier(p: Policy) -> str:
    dom_digest = hashlib.sha256(json.dumps(p.domain.to_dict()).encode()).hexdigest()[:16]
    head: dict[str, Any] = {"v": 1, "kind": p.kind, "bottom": bool(p.bottom)}
    arrays: list[NDArray[np.int64]] = []
    what = p.kind
    if p.kind == "distance":
        w = [float(x) for x in (p.weights or [1.0] * p.domain.ndim)]
        head.update(theta=float(p.theta or 0.0), metric=p.metric, weights=w)
        t = float(p.theta or 0.0)
        line = t == 1 and p.domain.ndim == 1 and w == [1.0] and p.metric == "l1"
        what = "line" if line else f"distance:theta={_num(t)}"
        if p.metric != "l1":
            what += f",metric={p.metric}"
        if any(x != 1.0 for x in w):
            what += ",weights=" + "|".join(_num(x) for x in w)
    elif p.kind == "partition":
        if p.domain.size <= _CELL_CANONICAL:
            cells = _first_seen(p.block_ids())
            head["blocks"] = "cells"
            arrays.append(cells)
            n_blocks = int(cells.max()) + 1 if cells.size else 0
        elif p.attribute_blocks is not None:
            per = [
                _first_seen(np.zeros(a.size, np.int64) if b is None else b)
                for a, b in zip(p.domain.attributes, p.attribute_blocks, strict=True)
            ]
            head["blocks"] = "attributes"
            arrays.extend(per)
            n_blocks = math.prod(int(x.max()) + 1 for x in per)
        else:
            cells = _first_seen(p.block_ids())
            head["blocks"] = "cells"
            arrays.append(cells)
            n_blocks = int(cells.max()) + 1 if cells.size else 0
        what = f"partition:{n_blocks} blocks"
    elif p.kind == "explicit":
        edges = np.asarray(p.edges if p.edges is not None else np.zeros((0, 2)), np.int64)
        arrays.append(edges.reshape(-1))
        what = f"explicit:{edges.shape[0]} edges"
    if p.constraints:
        head["constraints"] = sorted(json.dumps(c.to_dict(), sort_keys=True) for c in p.constraints)
    h = hashlib.sha256(json.dumps(head, sort_keys=True).encode())
    for a in arrays:
        h.update(b"|%d|" % a.size)
        h.update(np.ascontiguousarray(a, dtype="<i8").tobytes())
    if p.bottom:
        what += "+bottom"
    if p.constraints:
        what += f" with {len(p.constraints)} constraint(s)"
    return f"{what} [domain {dom_digest}, graph {h.hexdigest()[:16]}]"
