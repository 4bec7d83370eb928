"""Bundled data and seeded generators.

* :func:`adult` / :func:`adult_domain` — the UCI Adult census data (48,842 people), shipped inside
  the package (CC BY 4.0; Becker and Kohavi 1996; attribution in ``data/ADULT-SOURCE.md``), with a
  documented domain: ordinal age, hours per week, education years, binned capital gain; nominal
  sex, race, workclass, education, marital status, occupation, relationship, native country and
  income, each with a hierarchy.
* :func:`correlated_gaussian`, :func:`correlated_laplace` — seeded synthetic tables of n rows and
  d ordinal attributes of c values.
* :func:`small_graphs` and :func:`powerlaw_cluster` — graphs for the graph module.
"""

from .adult import ADULT_ATTRIBUTES, adult, adult_domain, adult_histogram
from .synthetic import correlated_gaussian, correlated_laplace, synthetic_domain

__all__ = [
    "ADULT_ATTRIBUTES",
    "adult",
    "adult_domain",
    "adult_histogram",
    "correlated_gaussian",
    "correlated_laplace",
    "synthetic_domain",
]
