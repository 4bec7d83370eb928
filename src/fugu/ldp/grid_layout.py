"""Grid layout of TDG and HDG: the granularity guideline and the cell boundaries.

* :func:`guideline` — Yang et al.'s granularities (§4.5; spec ``ldp_range.md`` §5.2):
  ``g1 = [n(e^ε−1)²α1² / (2 m e^ε)]^{1/3}``, ``g2 = sqrt(2α2(e^ε−1) sqrt(n/(m e^ε)))`` with
  ``m`` the number of user groups (:func:`n_groups`), then per attribute
  :func:`round_granularity` (nearest power of two by linear distance, ties down, at least 2; a
  value ≥ the attribute size c becomes c, one cell per value).
* :func:`grid_edges` — cell boundaries ``floor(k·c/g)``: equal cells when g divides c, cells
  differing by at most one value otherwise, nested partitions when one granularity divides the
  other.
* :func:`shifted_edges` — the same cells moved by half a cell (``floor((2k+1)·c/(2g))``, with a
  half cell at each end): TDG with ``partitions="shifted"`` cuts half of an attribute's 2-D
  grids this way, so its margins are seen on two partitions whose common refinement has cells
  of half the width.

Public arithmetic only: nothing here sees a report or a record.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np
from numpy.typing import NDArray

from ..errors import InvalidParameterError, check_positive_int
from .checks import check_ldp_epsilon

__all__ = [
    "ALPHA1",
    "ALPHA2",
    "PARTITIONS",
    "grid_edges",
    "guideline",
    "n_groups",
    "round_granularity",
    "shifted_edges",
]

#: How TDG cuts its 2-D grids: "aligned" (the paper: every grid at ``floor(k·c/g2)``),
#: "shifted" (the grids of pairs (j, k) with j + k odd at :func:`shifted_edges`) or "auto"
#: (TDG's default: "shifted" when no attribute has more than 2 cells, else "aligned").
PARTITIONS = ("auto", "aligned", "shifted")

ALPHA1 = 0.7
ALPHA2 = 0.03


def round_granularity(raw: float, c: int) -> int:
    """The guideline's rounding: nearest power of two by linear distance (ties to the lower),
    at least 2; ``raw >= c`` (or a power of two >= c) gives ``c`` — one cell per value.

    >>> [round_granularity(g, 64) for g in (1.2, 2.97, 3.0, 5.55, 23.3, 40.1, 70.0)]
    [2, 2, 2, 4, 16, 32, 64]
    >>> round_granularity(7.9, 10), round_granularity(5.0, 6)
    (8, 4)
    """
    c = check_positive_int(c, "attribute size", 2)
    if not math.isfinite(raw) or raw >= c:
        return c
    if raw <= 2:
        g = 2
    else:
        lo = 1 << int(math.floor(math.log2(raw)))
        g = lo if raw - lo <= 2 * lo - raw else 2 * lo
    return c if g >= c else g


def n_groups(d: int, hybrid: bool) -> int:
    """Number of user groups: C(d, 2) 2-D grids, plus d 1-D grids for HDG."""
    return d * (d - 1) // 2 + (d if hybrid else 0)


def guideline(
    n: int, epsilon: float, d: int, *, hybrid: bool, alpha1: float = ALPHA1, alpha2: float = ALPHA2
) -> tuple[float, float]:
    """Raw (unrounded) granularities ``(g1, g2)`` of Yang et al.'s guideline.

    ``g1`` is for HDG's 1-D grids (``nan`` for TDG); each group has ``n/m`` users.

    >>> g1, g2 = guideline(1_000_000, 1.0, 6, hybrid=True)    # spec §5.2 table: 23.3, 3.69
    >>> round(g1, 1), round(g2, 2)
    (23.3, 3.69)
    >>> round(guideline(1_000_000, 1.0, 6, hybrid=False)[1], 2)
    4.02
    """
    m = n_groups(d, hybrid)
    e = math.exp(check_ldp_epsilon(epsilon, "the grid guideline"))
    per = n / m
    g2 = math.sqrt(2 * alpha2 * (e - 1) * math.sqrt(per / e))
    g1 = (per * (e - 1) ** 2 * alpha1**2 / (2 * e)) ** (1 / 3) if hybrid else math.nan
    return g1, g2


def grid_edges(c: int, g: int) -> NDArray[np.int64]:
    """Boundaries of ``g`` cells over ``[0, c)``: ``floor(k·c/g)``, k = 0..g.

    >>> grid_edges(64, 4).tolist(), grid_edges(10, 4).tolist()
    ([0, 16, 32, 48, 64], [0, 2, 5, 7, 10])
    """
    c, g = _check_cells(c, g)
    return (np.arange(g + 1, dtype=np.int64) * c) // g


def _check_cells(c: Any, g: Any) -> tuple[int, int]:
    """An attribute size ``c`` >= 1 and a granularity ``g`` in 1..c, as ints."""
    c = check_positive_int(c, "c (attribute size)")
    g = check_positive_int(g, "g (granularity)")
    if g > c:
        raise InvalidParameterError(f"granularity must lie in 1..{c}, got {g}")
    return c, g


def shifted_edges(c: int, g: int) -> NDArray[np.int64]:
    """Boundaries of :func:`grid_edges` moved by half a cell: ``0``, ``floor((2k+1)·c/(2g))``
    for k = 0..g−1, and ``c`` — g − 1 whole cells and a half cell at each end. A granularity
    of 1 or ``c`` (no cut, or one value per cell) is not shifted.

    >>> shifted_edges(64, 4).tolist(), shifted_edges(64, 2).tolist(), shifted_edges(5, 5).tolist()
    ([0, 8, 24, 40, 56, 64], [0, 16, 48, 64], [0, 1, 2, 3, 4, 5])
    """
    aligned = grid_edges(c, g)
    c, g = _check_cells(c, g)
    if g <= 1 or g >= c:
        return aligned
    mid = ((2 * np.arange(g, dtype=np.int64) + 1) * c) // (2 * g)
    return np.unique(np.concatenate([[0], mid, [c]])).astype(np.int64)


def _lookup(edges: NDArray[np.int64]) -> NDArray[np.int64]:
    """Value → cell index for cells with these boundaries."""
    return np.repeat(np.arange(len(edges) - 1, dtype=np.int64), np.diff(edges))


def _check_granularity(v: Any, name: str, sizes: Sequence[int]) -> list[int]:
    if isinstance(v, int | np.integer) and not isinstance(v, bool | np.bool_):
        vals = [v] * len(sizes)
    elif isinstance(v, str | bytes) or not isinstance(v, Sequence | np.ndarray):
        raise InvalidParameterError(
            f"{name} must be a positive integer or a list of one per attribute "
            f"({len(sizes)}), got {v!r} ({type(v).__name__}); e.g. {name}=4"
        )
    else:
        vals = list(v)
    if len(vals) != len(sizes):
        raise InvalidParameterError(f"{name} needs one granularity per attribute ({len(sizes)})")
    out = []
    for g, c in zip(vals, sizes, strict=True):
        if isinstance(g, bool) or not isinstance(g, int | np.integer) or not 1 <= int(g):
            raise InvalidParameterError(f"{name} must hold positive integers, got {g!r}")
        out.append(min(int(g), int(c)))
    return out
