"""What the multi-dimensional LDP baselines share: their source, the domain check, the query mask.

Used by :mod:`fugu.ldp.independent`, :mod:`fugu.ldp.pairs` and :mod:`fugu.ldp.hio` (the methods
are described in :mod:`fugu.ldp.multidim`).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from numpy.typing import NDArray

from ..domain import Domain
from ..errors import InvalidParameterError

__all__ = ["YANG"]


YANG = (
    "Yang, Wang, Li, Cheng, Su, 'Answering Multi-Dimensional Range Queries under Local "
    "Differential Privacy', PVLDB 14(3) 2020, Section 3"
)


def _restricted(bounds: NDArray[np.int64], shape: Sequence[int]) -> NDArray[np.bool_]:
    """(m, d) mask: which attributes each query restricts."""
    full = (bounds[:, :, 0] == 0) & (bounds[:, :, 1] == np.asarray(shape)[None, :])
    return ~full


def _check_sizes(domain: Domain) -> list[int]:
    sizes = [a.size for a in domain.attributes]
    for a in domain.attributes:
        if a.size < 2:
            raise InvalidParameterError(f"attribute {a.name!r} has {a.size} value; need c >= 2")
    return sizes
