"""fugu: answers to statistical questions about sensitive data, under a privacy guarantee the data
owner chooses.

Four privacy models, one library:

* :mod:`fugu.central` — central ε-DP data cubes (Laplace, hierarchical, Privelet);
* :mod:`fugu.blowfish` — Blowfish policies, Ordered mechanisms, private k-means;
* :mod:`fugu.graph` — node and edge DP for subgraph counts and joins (Recursive Mechanism);
* :mod:`fugu.ldp` — local DP frequency oracles and multi-dimensional range queries.

>>> import fugu
>>> dom = fugu.Domain([fugu.Ordinal("age", 0, 99)])
>>> hist = fugu.Histogram.from_records({"age": [23, 35, 35, 61]}, dom)
>>> rel = fugu.central.laplace(hist, epsilon=1.0)
>>> isinstance(rel.answer(fugu.RangeQuery({"age": (20, 39)})), float)
True
"""

from . import central, noise
from .budget import Accountant, Budget
from .domain import Domain, Hierarchy, Nominal, Ordinal
from .errors import (
    BudgetExceededError,
    DomainError,
    DomainTooLargeError,
    EmptyDataError,
    FuguError,
    InvalidParameterError,
    InvalidTypeError,
    PolicyError,
    PrivacyLeakWarning,
    ReportError,
)
from .histogram import Histogram
from .noise import RandomSource
from .queries import RangeQuery, Workload, random_workload
from .release import CubeRelease, Guarantee, Release

__version__ = "0.1.0"

__all__ = [
    "Accountant",
    "Budget",
    "BudgetExceededError",
    "CubeRelease",
    "Domain",
    "DomainError",
    "DomainTooLargeError",
    "EmptyDataError",
    "FuguError",
    "Guarantee",
    "Hierarchy",
    "Histogram",
    "InvalidParameterError",
    "InvalidTypeError",
    "Nominal",
    "Ordinal",
    "PolicyError",
    "PrivacyLeakWarning",
    "RandomSource",
    "RangeQuery",
    "Release",
    "ReportError",
    "Workload",
    "central",
    "noise",
    "random_workload",
]


def __getattr__(name: str) -> object:
    # Model packages load on first use so `import fugu` stays fast.
    import importlib

    if name in (
        "blowfish",
        "graph",
        "ldp",
        "datasets",
        "testing",
        "inference",
        "engines",
        "report",
    ):
        return importlib.import_module(f"fugu.{name}")
    raise AttributeError(f"module 'fugu' has no attribute {name!r}")
