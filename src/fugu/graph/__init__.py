"""Node and edge differential privacy for subgraph counts and joins (Recursive Mechanism).

* :func:`count` — ε-node-DP or ε-edge-DP count of a pattern (edge, triangle, k-star, k-triangle,
  path, cycle, k-clique, any small connected networkx graph) in a networkx graph;
* :class:`KRelation` and :func:`answer` — linear statistics of positive relational-algebra
  queries over tables whose tuples are owned by participants;
* :func:`general_recursive` — the exact exponential-time mechanism for any monotone query on tiny
  inputs;
* baselines: :func:`laplace_count` (global sensitivity: edge DP, or node DP with a public degree
  bound), :func:`smooth_triangle_count` (triangles, edge DP, smooth sensitivity of Nissim,
  Raskhodnikova and Smith 2007) and :func:`karwa_count` (Karwa et al. 2011: ε-edge-DP k-stars,
  (ε, δ)-edge-DP k-triangles); all reachable as ``count(..., mechanism=...)``;
* :func:`read_edge_list` — SNAP-style edge lists.

Source: Chen and Zhou, "Recursive Mechanism: Towards Node Differential Privacy and Unrestricted
Joins", SIGMOD 2013 (arXiv 1304.4795), seed ``002_…``; spec ``recursive_mechanism.md``.
"""

from .baselines import laplace_count
from .edges import read_edge_list
from .karwa import karwa_count
from .krelation import Annotations, KRelation, minimal_dnf
from .patterns import PATTERNS, count_occurrences, enumerate_pattern, pattern_relation
from .recursive import (
    CountRelease,
    RecursiveParameters,
    Trace,
    answer,
    count,
    general_recursive,
    recursive_mechanism,
)
from .smooth import smooth_triangle_count

__all__ = [
    "PATTERNS",
    "Annotations",
    "CountRelease",
    "KRelation",
    "RecursiveParameters",
    "Trace",
    "answer",
    "count",
    "count_occurrences",
    "enumerate_pattern",
    "general_recursive",
    "karwa_count",
    "laplace_count",
    "minimal_dnf",
    "pattern_relation",
    "read_edge_list",
    "recursive_mechanism",
    "smooth_triangle_count",
]
