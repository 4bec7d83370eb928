"""fugu: answers to statistical questions about sensitive data, under a privacy guarantee the data
owner chooses.

Four privacy models, one library:

* :mod:`fugu.central` — central ε-DP data cubes (Laplace, hierarchical, Privelet);
* :mod:`fugu.blowfish` — Blowfish policies, Ordered mechanisms, private k-means;
* :mod:`fugu.graph` — node and edge DP for subgraph counts and joins (Recursive Mechanism);
* :mod:`fugu.ldp` — local DP frequency oracles and multi-dimensional range queries.

Also :mod:`fugu.datasets` (bundled Adult data, synthetic generators), :mod:`fugu.engines`
(numpy, DuckDB and Spark counting), :mod:`fugu.testing` (the privacy auditor),
:mod:`fugu.budget` (accountants and locked ledger files) and :mod:`fugu.report` (HTML reports).
``dir(fugu)`` lists them all; they load on first use.

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
    FileFormatError,
    FuguError,
    InvalidParameterError,
    InvalidTypeError,
    LedgerError,
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
    "FileFormatError",
    "FuguError",
    "Guarantee",
    "Hierarchy",
    "Histogram",
    "InvalidParameterError",
    "InvalidTypeError",
    "LedgerError",
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


#: Subpackages that load on first use (``fugu.ldp``...), so ``import fugu`` stays fast.
LAZY_MODULES = (
    "blowfish",
    "graph",
    "ldp",
    "datasets",
    "engines",
    "testing",
    "inference",
    "report",
)


def __getattr__(name: str) -> object:
    import importlib

    if name in LAZY_MODULES:
        return importlib.import_module(f"fugu.{name}")
    raise AttributeError(f"module 'fugu' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(LAZY_MODULES))
