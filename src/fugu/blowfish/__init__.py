"""Blowfish privacy: policies, policy-specific sensitivity, Ordered mechanisms, private k-means.

Source: He, Machanavajjhala, Ding, "Blowfish Privacy: Tuning Privacy-Utility Trade-offs using
Policies", SIGMOD 2014 (arXiv 1312.3913; seeds ``000_…``, ``001_…``).
"""

from .composition import blowfish_budget, charge_parallel, check_parallel
from .constraints import Constraint, CountConstraint, MarginalConstraint
from .cumulative import CumulativeRelease
from .kmeans import KMeans
from .laplace import LinearRelease, laplace
from .ordered import ordered
from .ordered_hierarchical import OHPlan, oh_plan, ordered_hierarchical
from .policy import BOTTOM, Policy, parse_policy
from .sensitivity import (
    Coarsening,
    CumulativeHistogram,
    HistogramQuery,
    SensitivityResult,
    SumQuery,
    brute_force_sensitivity,
    constrained_histogram_sensitivity,
    policy_graph,
    sensitivity,
)

__all__ = [
    "BOTTOM",
    "KMeans",
    "Coarsening",
    "CumulativeRelease",
    "ordered",
    "blowfish_budget",
    "charge_parallel",
    "check_parallel",
    "laplace",
    "LinearRelease",
    "ordered_hierarchical",
    "oh_plan",
    "OHPlan",
    "CumulativeHistogram",
    "HistogramQuery",
    "SensitivityResult",
    "SumQuery",
    "brute_force_sensitivity",
    "constrained_histogram_sensitivity",
    "policy_graph",
    "sensitivity",
    "Constraint",
    "CountConstraint",
    "MarginalConstraint",
    "Policy",
    "parse_policy",
]
