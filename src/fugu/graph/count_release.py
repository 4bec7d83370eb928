"""The release of one noisy graph statistic, shared by every graph mechanism.

The Recursive Mechanism (:mod:`fugu.graph.recursive`) and the baselines
(:mod:`fugu.graph.baselines`, :mod:`fugu.graph.smooth`, :mod:`fugu.graph.karwa`) all publish a
:class:`CountRelease`; it lives below all of them so that none imports another for it.
"""

from __future__ import annotations

import os
import sys
import warnings
from pathlib import Path
from typing import Any

import numpy as np
from numpy.typing import NDArray

from ..errors import InvalidParameterError, InvalidTypeError
from ..release import Guarantee, Release
from ..release_state import Array, Meta

__all__ = [
    "CountRelease",
    "nonnegative_release",
    "pattern_name",
    "warn_empty",
    "warn_if_empty_graph",
    "GRAPH_NEIGHBOURS",
]

#: The neighbour relation of each graph privacy model, as the guarantees state it.
GRAPH_NEIGHBOURS = {
    "participant-dp": "one participant withdraws together with every tuple it owns (add/remove)",
    "node-dp": "add or remove one node with all its edges",
    "edge-dp": "add or remove one edge (node set public)",
}


class CountRelease(Release):
    """One noisy number (a subgraph count or a linear statistic) with its guarantee.

    ``value`` is the released estimate; ``delta_hat`` the released noisy sensitivity Δ̂ of the
    Recursive Mechanism (None for baselines); ``noise_std`` the standard deviation of the final
    noise (the Recursive Mechanism's estimate is also biased low, which this does not include).
    """

    kind = "graph-count"
    _state_domain = "none"
    _state_fields = (
        Array("value", scalar=True),
        Array("delta_hat", scalar=True, optional=True),
        Meta("noise_std", float, nullable=True, default=None),
        Meta("statistic", str, default=""),
    )

    def __init__(
        self,
        guarantee: Guarantee,
        value: float,
        *,
        delta_hat: float | None = None,
        noise_std: float | None = None,
        statistic: str = "",
    ) -> None:
        super().__init__(None, guarantee)
        self.value = float(value)
        self.delta_hat = None if delta_hat is None else float(delta_hat)
        self.noise_std = None if noise_std is None else float(noise_std)
        self.statistic = statistic

    def answer(self, query: Any = None) -> float:  # type: ignore[override]
        """The released value (this release answers one statistic)."""
        if query is not None and query != self.statistic:
            raise InvalidParameterError(f"this release answers only {self.statistic!r}")
        return self.value

    @property
    def counts(self) -> NDArray[np.float64]:
        return np.array([self.value])

    def expected_error(self, query: Any = None) -> float | None:
        """None: the Recursive Mechanism's bias is data-dependent (see ``noise_std``)."""
        return None if self.delta_hat is not None else self.noise_std

    def summary(self) -> dict[str, Any]:
        return super().summary() | {
            "statistic": self.statistic,
            "value": self.value,
            "delta_hat": self.delta_hat,
        }

    def __repr__(self) -> str:
        g = self.guarantee
        tail = "" if g.private else " NOT PRIVATE"
        what = f"({g.mechanism}, {g.model}, ε={g.epsilon:g})"
        return f"<CountRelease {self.statistic} ≈ {self.value:.4g} {what}{tail}>"


def nonnegative_release(rel: CountRelease) -> CountRelease:
    """``max(0, value)``: post-processing (no privacy cost), recorded in the guarantee.

    A count or a sum of nonnegative weights is never negative, but unbiased noise can push the
    estimate below 0; clamping removes such impossible values (and adds a small upward bias near
    0). The release says so in ``guarantee.post_processing``.
    """
    g = rel.guarantee.with_post_processing("clamped at 0 (nonnegative=True)")
    return CountRelease(
        g,
        max(0.0, rel.value),
        delta_hat=rel.delta_hat,
        noise_std=rel.noise_std,
        statistic=rel.statistic,
    )


def pattern_name(pattern: Any, k: int | None) -> str:
    import networkx as nx

    if isinstance(pattern, nx.Graph):
        if k is not None:
            raise InvalidParameterError(
                f"k={k!r} has no effect on a networkx pattern (k sizes the named patterns "
                f"k-star, k-triangle, path, cycle and k-clique); leave k unset"
            )
        return f"pattern({pattern.number_of_nodes()} nodes, {pattern.number_of_edges()} edges)"
    if not isinstance(pattern, str):
        raise InvalidTypeError(
            f"pattern must be a name or a networkx graph, got {type(pattern).__name__}"
        )
    from .patterns import _normalise

    name, kk = _normalise(pattern, k)
    if name.startswith("k-"):
        return f"{kk}-{name[2:]}"
    if name in ("path", "cycle"):
        return f"{name} of length {kk}"
    return name


#: fugu's own source directory, as in code objects' file names (warnings skip its frames)
_FUGU_DIR = str(Path(__file__).parents[1]) + os.sep


def warn_empty(
    what: str,
    neighbour: str,
    *,
    handled: str = "released like any other input",
    result: str = "the release is the mechanism's answer on empty data (0) plus its noise",
) -> None:
    """Tell the curator (a ``UserWarning``, never part of a release) that ``what`` is empty.

    An empty input is handled like any other: ``neighbour`` is a neighbouring input that is
    released, so refusing the empty one would tell the two apart with probability 1 (ε = ∞ on
    that pair). The warning points at the first caller outside fugu. It is never raised: with
    warnings turned into errors (``python -W error``, ``simplefilter("error")``) raising it
    would refuse the empty input again, so it is shown instead (``warnings.showwarning``).
    """
    level, frame = 1, sys._getframe(0)
    while frame is not None and frame.f_code.co_filename.startswith(_FUGU_DIR):
        frame, level = frame.f_back, level + 1  # type: ignore[assignment]
    message = (
        f"{what}: {handled}, not refused. Its neighbour {neighbour} is released, so refusing "
        f"this input would reveal with certainty that it is empty (epsilon = infinity on that "
        f"pair); {result}. (This warning is for the curator, not part of any release.)"
    )
    try:
        warnings.warn(message, UserWarning, stacklevel=level)
    except UserWarning as exc:  # an "error" filter: show it, never refuse on it
        where = ("<unknown>", 0) if frame is None else (frame.f_code.co_filename, frame.f_lineno)
        warnings.showwarning(exc, UserWarning, *where)


def warn_if_empty_graph(G: Any, unit: str) -> None:
    """:func:`warn_empty` for a graph with no participants: no nodes (node DP), no edges (edge DP).

    Called by every graph mechanism after its public checks, so that an empty graph is released
    like its neighbours (a one-node graph under node DP, a one-edge graph under edge DP).
    """
    if unit == "node" and G.number_of_nodes() == 0:
        warn_empty("the graph has no nodes (node privacy)", "(one node more)")
    elif unit == "edge" and G.number_of_edges() == 0:
        warn_empty(
            "the graph has no edges (edge privacy)", "(one edge more, on the same public nodes)"
        )
