"""Privacy auditing and statistical-test helpers (public: users audit too).

:func:`audit` runs a mechanism many times on two neighbouring inputs and checks that no output
event has a likelihood ratio above e^ε beyond a Clopper–Pearson confidence bound. It can only
refute privacy (find a violation), never prove it; it is strong against mis-calibrated noise, a
missing factor of 2 in a sensitivity, or noise calibrated to the wrong neighbour relation.

:func:`ldp_ratio` checks a local-DP client exactly when its report distribution can be
enumerated. :func:`chi_square_pmf` and :func:`ks_cdf` test samplers against exact distributions.

>>> import numpy as np, fugu
>>> from fugu.testing import audit
>>> def mech(x, rng, n):   # counting query with correct discrete Laplace noise, vectorised
...     return x + fugu.noise.discrete_laplace(1.0, size=n, rng=rng)
>>> audit(mech, 0, 1, epsilon=1.0, n_runs=50_000, vectorised=True).passed
True
>>> def broken(x, rng, n):  # half the needed noise: really 2-DP
...     return x + fugu.noise.discrete_laplace(0.5, size=n, rng=rng)
>>> audit(broken, 0, 1, epsilon=1.0, n_runs=50_000, vectorised=True).passed
False
"""

from .audit import AuditResult, audit, chi_square_pmf, ks_cdf, ldp_ratio

__all__ = ["AuditResult", "audit", "chi_square_pmf", "ks_cdf", "ldp_ratio"]
