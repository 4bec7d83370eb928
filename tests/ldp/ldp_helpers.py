"""Shared helpers for the LDP tests."""

from __future__ import annotations

import numpy as np

import fugu
from fugu.inference.ldp_post import GridEstimate


def exact_grids(
    p: fugu.ldp.grids.GridProtocol, dom: fugu.Domain, codes: np.ndarray
) -> list[GridEstimate]:
    """The exact (noise-free) 1-D and 2-D grids of a TDG/HDG protocol's layout on ``codes``,
    to feed ``release_from_grids`` (variance 1: the weights do not matter without noise)."""
    grids = []
    for gr in p.groups:
        e = p.edges(gr)
        if len(gr) == 1:
            h = np.histogram(codes[:, gr[0]], bins=e[0])[0].astype(float)
        else:
            h = np.histogram2d(codes[:, gr[0]], codes[:, gr[1]], bins=e)[0]
        grids.append(GridEstimate(tuple(dom.names[a] for a in gr), e, h, 1.0))
    return grids
