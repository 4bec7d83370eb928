"""Blowfish privacy: policies, policy-specific sensitivity, Ordered mechanisms, private k-means.

Source: He, Machanavajjhala, Ding, "Blowfish Privacy: Tuning Privacy-Utility Trade-offs using
Policies", SIGMOD 2014 (arXiv 1312.3913; seeds ``000_…``, ``001_…``).
"""

from .constraints import Constraint, CountConstraint, MarginalConstraint
from .policy import BOTTOM, Policy, parse_policy

__all__ = [
    "BOTTOM",
    "Constraint",
    "CountConstraint",
    "MarginalConstraint",
    "Policy",
    "parse_policy",
]
