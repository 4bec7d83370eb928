"""Reading graphs: SNAP-style edge lists.

A SNAP edge list is a text file with one edge per line (``u<TAB>v`` or ``u v``) and ``#`` comment
lines (whole lines only: a ``#`` inside an id is part of it); collaboration graphs such as ca-GrQc
list each undirected edge in both directions.
:func:`read_edge_list` reads it as an **undirected simple graph**: ``u v`` and ``v u`` (and
repeats) become one edge — this conversion is documented, not silent. Self-loops are refused
unless ``self_loops="drop"``. Node ids become ints when every id is written as a canonical
decimal integer (``0`` or ``-?[1-9][0-9]*``, ASCII digits), else they all stay strings: two
spellings are never one node (``01``, ``+1``, ``1_0`` and ``1`` are four nodes). Merging them
would make the graph depend on the other lines of the file — one non-numeric id elsewhere kept
them apart — so two neighbouring files would not give neighbouring graphs.

A well-formed file with no edge lines (empty, or comments only; or only self-loops, dropped) is
data, not an error: it is read as the empty graph, with a ``UserWarning`` to the curator. Under
edge privacy it is the neighbour of a one-edge list and under node privacy of a one-node graph;
refusing it while releasing on those would tell them apart with certainty.

The node set is the set of ids that occur in some edge: it depends on the edges. Under edge
privacy the node set is public (the edge-DP baselines use its size n), so add the public node set
to the graph (``G.add_nodes_from(...)``; the CLI's ``--nodes N``) before releasing.
"""

from __future__ import annotations

import bz2
import gzip
import lzma
import re
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import IO

import networkx as nx
import numpy as np

from ..errors import InvalidParameterError
from .count_release import warn_empty

__all__ = ["read_edge_list"]


def read_edge_list(
    path: str | Path,
    *,
    comment: str = "#",
    delimiter: str | None = None,
    self_loops: str = "error",
) -> nx.Graph:
    """Read a SNAP-style edge list (optionally ``.gz``, ``.bz2``, ``.xz``) as an undirected graph.

    Parameters
    ----------
    path : file with two node ids per line (extra columns are ignored)
    comment : lines starting with this (after leading whitespace) are skipped; elsewhere in a
        line it is part of the text (an id ``c#d`` is the node ``c#d``, not ``c``)
    delimiter : None splits on any whitespace; with a delimiter, whitespace around each id
        is dropped and an empty id is refused
    self_loops : "error" (default) or "drop"

    Returns
    -------
    networkx.Graph
        The graph of the edges; a file without edge lines gives the empty graph (no nodes),
        with a ``UserWarning`` (it is data like any other: see the module docstring).

    Examples
    --------
    >>> import tempfile, os
    >>> p = os.path.join(tempfile.mkdtemp(), "g.txt")
    >>> _ = open(p, "w").write("# toy\\n1\\t2\\n2\\t1\\n2\\t3\\n")
    >>> G = read_edge_list(p)
    >>> G.number_of_nodes(), G.number_of_edges()
    (3, 2)
    """
    if self_loops not in ("error", "drop"):
        raise InvalidParameterError(f"self_loops must be 'error' or 'drop', got {self_loops!r}")
    p = Path(path)
    if not p.exists():
        raise InvalidParameterError(f"edge list {str(p)!r} does not exist")
    if not isinstance(comment, str) or not comment:
        raise InvalidParameterError(
            f"comment must be a non-empty string (lines starting with it are skipped), got "
            f"{comment!r}"
        )
    # compressed files as numpy's loadtxt opened them (by suffix)
    openers: dict[str, Callable[..., IO[str]]] = {
        ".gz": gzip.open,
        ".bz2": bz2.open,
        ".xz": lzma.open,
    }
    opener = openers.get(p.suffix, open)
    try:
        # utf-8-sig: a byte-order mark (Windows editors) is not part of the first id
        with opener(p, "rt", encoding="utf-8-sig") as fh, warnings.catch_warnings():
            warnings.simplefilter("ignore", UserWarning)  # "input contained no data": handled below
            # only whole lines are comments: numpy's comments= also cuts a line at the first
            # comment character, so the id 'c#d' was read as 'c' (two nodes merged into one)
            lines = (line for line in fh if not line.lstrip().startswith(comment))
            raw = np.loadtxt(
                lines, dtype=str, comments=None, delimiter=delimiter, ndmin=2, usecols=(0, 1)
            )
    except (ValueError, IndexError) as exc:
        raise InvalidParameterError(
            f"{str(p)!r} is not an edge list (two node ids per line, '{comment}' comments): {exc}"
        ) from None
    except OSError as exc:  # a directory, no permission, a damaged compressed file
        raise InvalidParameterError(
            f"cannot read the edge list {str(p)!r}: {exc.strerror or exc}"
        ) from None
    # A file with no edge lines is an empty edge set (data, not an error): raw is (0, 2) and
    # the steps below give the empty graph, warned about at the end.
    raw = raw.reshape(-1, 2)
    if delimiter is not None:
        # ids are the fields without surrounding whitespace ('1, 2' is the edge 1-2); an empty
        # field ('3,' or '3<TAB><TAB>4') is no id: it would make one node '' of every such line
        # (merging their people) and drop the id after it
        raw = np.char.strip(raw)
        empty = np.flatnonzero((raw == "").any(axis=1))
        if empty.size:
            raise InvalidParameterError(
                f"{str(p)!r} has {empty.size} line(s) with an empty node id (data line "
                f"{int(empty[0]) + 1}, comment lines not counted): two delimiters in a row or a "
                f"delimiter at the end of the line. Fix those lines (every line holds two ids "
                f"separated by {delimiter!r})"
            )
    ids = _node_ids(raw)
    loops = ids[:, 0] == ids[:, 1]
    if loops.any():
        if self_loops == "error":
            first = ids[np.flatnonzero(loops)[0], 0]
            raise InvalidParameterError(
                f"{str(p)!r} has {int(loops.sum())} self-loop(s) (e.g. {first} {first}); "
                f"patterns are "
                f"counted in simple graphs — pass self_loops='drop' (CLI: --drop-self-loops)"
            )
        ids = ids[~loops]
    G = nx.Graph()
    G.add_edges_from(ids.tolist())
    if G.number_of_edges() == 0:
        warn_empty(
            f"edge list {str(p)!r} has no edges",
            "(one edge more under edge privacy, one node more under node privacy)",
            handled="read as the empty graph (no nodes)",
            result="a count on it releases 0 plus the mechanism's noise (under edge privacy, "
            "add the public node set to the graph; CLI: --nodes N)",
        )
    return G


_CANONICAL_INT = re.compile(r"0|-?[1-9][0-9]*", re.ASCII)


def _node_ids(raw: np.ndarray) -> np.ndarray:
    """The ids as ints when every one is a canonical decimal integer, else the strings.

    Canonical spellings map one-to-one onto ints, so the choice never merges two ids: the graph
    read from a file with one more (or one fewer) line is the neighbour it should be whatever
    the other lines hold.
    """
    try:
        ids = raw.astype(np.int64)
    except (ValueError, OverflowError):
        ids = None
    if ids is not None and bool(np.all(ids.astype(str) == raw)):
        return ids  # the fast path: every id is the canonical spelling of its int64 value
    flat = raw.reshape(-1).tolist()
    if all(_CANONICAL_INT.fullmatch(s) for s in flat):  # beyond 64 bits: Python ints
        return np.array([int(s) for s in flat], dtype=object).reshape(raw.shape)
    return raw
