"""Central ε-DP data cubes for range-count queries."""

from .hattree import HatTreeRelease, hat_tree
from .hierarchical import HierarchicalRelease, hierarchical, qardaji_branching
from .laplace import laplace
from .privelet import PriveletRelease, choose_plain, privelet
from .recommend import Recommendation, predict_errors, recommend

__all__ = [
    "laplace",
    "hierarchical",
    "HierarchicalRelease",
    "qardaji_branching",
    "hat_tree",
    "HatTreeRelease",
    "privelet",
    "PriveletRelease",
    "choose_plain",
    "recommend",
    "predict_errors",
    "Recommendation",
]
