"""Phase 2 of TDG and HDG (Yang et al., PVLDB 2020): from estimated grids to a release.

:func:`release_from_grids` is the server side after the frequency oracles: Norm-Sub and
inverse-variance consistency across the grids (:func:`fugu.inference.ldp_post.consistent_grids`),
the response matrices for cut cells (:mod:`fugu.ldp.grid_matrices`), and the
:class:`~fugu.ldp.grid_release.GridRelease` that answers queries, with every step recorded in
the guarantee. It reads only the grids and public parameters: post-processing, no privacy cost.
:meth:`fugu.ldp.grids.GridProtocol.release_from_grids` is the entry point (the name is also
importable from :mod:`fugu.ldp.grids`, its old home).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import replace
from typing import TYPE_CHECKING

import numpy as np
from numpy.typing import NDArray

from ..errors import InvalidParameterError
from ..inference.ldp_post import GridEstimate, cell_values, consistent_grids, response_matrix
from ..release import Guarantee
from .grid_matrices import (
    _pair_margins,
    _product_matrix,
    _rescale_blocks,
    _spread,
    fitted_matrix,
)
from .grid_release import GridRelease

if TYPE_CHECKING:
    from .grids import GridProtocol

__all__ = ["release_from_grids"]

_MAX_MATRIX_CELLS = 1 << 24  # response matrix c_x * c_y limit (128 MiB of float64)


def _check_grids(proto: GridProtocol, grids: Sequence[GridEstimate]) -> None:
    """``grids`` must be one per group of ``proto``, in its order, on its attributes and cells."""
    want = [tuple(proto.domain.names[a] for a in gr) for gr in proto.groups]
    got = [tuple(str(a) for a in g.attributes) for g in grids]
    if got != want:
        raise InvalidParameterError(
            f"grids must be one per group of this {proto.name.upper()}, in its order {want}; "
            f"got {got}"
        )
    for gr, g in zip(proto.groups, grids, strict=True):
        for e, f in zip(proto.edges(gr), g.edges, strict=True):
            if not np.array_equal(e, f):
                raise InvalidParameterError(
                    f"the grid of {got[proto.groups.index(gr)]} has cell edges {f.tolist()}; "
                    f"this {proto.name.upper()}'s are {e.tolist()} (proto.edges(group))"
                )


def release_from_grids(
    proto: GridProtocol,
    grids: Sequence[GridEstimate],
    n: float,
    guarantee: Guarantee,
    users_per_group: Sequence[float] | None = None,
) -> GridRelease:
    """Phases 2 and 3 of ``proto`` on estimated grids (one per group, in ``proto.groups`` order).

    The server side after the frequency oracles (:meth:`GridProtocol.release_from_grids` calls
    this); public so experiments can feed other grids (e.g. exact counts, to separate the noise
    from the estimation error). It only post-processes its input: the release is as private as
    the grids and ``guarantee`` given.
    """
    names = proto.domain.names
    _check_grids(proto, grids)
    unbiased = None
    if proto.normalisation == "norm":
        # Phase 2 without clipping: shift each grid to n, then consistency (linear, so the
        # counts stay unbiased); the Norm-Sub'd copy only shapes the response matrices.
        unbiased, rounds_u = consistent_grids(
            grids, float(n), max_iter=proto.max_iter, tol=proto.tol, method="norm"
        )
        grids = unbiased
    post, rounds = consistent_grids(grids, float(n), max_iter=proto.max_iter, tol=proto.tol)
    matrices: dict[tuple[str, str], NDArray[np.float64]] = {}
    sweeps = 0
    one = {g.attributes[0]: g for g in post if len(g.attributes) == 1}
    if not proto.hybrid and proto.interpolation != "uniform":
        one = _pair_margins(post)
    if unbiased is not None:
        one_u = {g.attributes[0]: g for g in unbiased if len(g.attributes) == 1}
        if not proto.hybrid:
            one_u = _pair_margins(unbiased)
        for g in unbiased:
            if len(g.attributes) != 2:
                continue
            x, y = g.attributes
            if proto.sizes[names.index(x)] * proto.sizes[names.index(y)] > _MAX_MATRIX_CELLS:
                continue  # uniform guess inside cut cells for this pair
            vx = _spread(one_u[x].edges[0], one_u[x].counts, proto.interpolation)
            vy = _spread(one_u[y].edges[0], one_u[y].counts, proto.interpolation)
            matrices[(str(x), str(y))] = _product_matrix(g.edges, g.counts, vx, vy)
    elif one:
        for g in post:
            if len(g.attributes) != 2:
                continue
            x, y = g.attributes
            cells = proto.sizes[names.index(x)] * proto.sizes[names.index(y)]
            if cells > _MAX_MATRIX_CELLS:
                if not proto.hybrid:
                    continue  # TDG falls back to the uniform guess for this pair
                raise InvalidParameterError(
                    f"HDG's response matrix for ({x}, {y}) would have {cells:,} cells; "
                    f"coarsen the attributes (fewer values) to at most {_MAX_MATRIX_CELLS:,}"
                )
            if proto.interpolation == "uniform":  # the paper's rule: flat start, cell by cell
                m, s = response_matrix(
                    g, float(n), one[x], one[y], max_iter=proto.max_iter, tol=proto.tol,
                    interpolation="uniform",
                )  # fmt: skip
            else:  # smooth start, value by value (issue 15.3)
                vx = cell_values(one[x].edges[0], one[x].counts, method=proto.interpolation)
                vy = cell_values(one[y].edges[0], one[y].counts, method=proto.interpolation)
                m, s = fitted_matrix(g, float(n), vx, vy, max_iter=proto.max_iter, tol=proto.tol)
            if unbiased is not None:  # block sums = the unbiased counts
                m = _rescale_blocks(m, g.edges, unbiased[post.index(g)].counts)
            matrices[(str(x), str(y))] = m
            sweeps = max(sweeps, s)
    steps: tuple[str, ...] = (
        f"Norm-Sub and inverse-variance consistency across grids ({rounds} rounds, "
        "ending with Norm-Sub)",
    )
    shifted: tuple[str, ...] = ()
    if proto.partitions == "shifted":
        shifted = (
            "the grids of pairs (j, k) with j + k odd are cut half a cell further; each "
            "attribute's margins are made consistent on the common refinement of its two "
            "partitions (weighted least squares), which the spreads and answers use",
        )
    steps += shifted
    if unbiased is not None:  # cut cells: the closed-form product matrices built above
        steps = (
            "grids shifted to sum to n and made consistent by inverse-variance weighting "
            f"({rounds_u} rounds; linear: the released counts stay unbiased and may be "
            "negative)",
            *shifted,
            "cut cells split by the product of the two attributes' within-cell shares of the "
            "unclipped 1-D estimates ("
            + ("the 1-D grids" if proto.hybrid else "the 2-D grids' consistent margins")
            + f") spread over their values by {proto.interpolation!r} interpolation",
        )
    elif proto.hybrid:
        steps += (
            f"response matrices by weighted update (Algorithm 1, {sweeps} sweeps), 1-D grids "
            f"spread over their values by {proto.interpolation!r} interpolation",
        )
    elif matrices:
        steps += (
            "cut cells answered by a response matrix fitted to the 2-D grid and its margins "
            f"spread over their values by {proto.interpolation!r} interpolation "
            f"({sweeps} sweeps)",
        )
    if proto.interpolation != "uniform":
        unfitted = [
            f"{x}x{y}"
            for x, y in (g.attributes for g in grids if len(g.attributes) == 2)
            if (str(x), str(y)) not in matrices
        ]
        if unfitted:  # TDG: a pair whose matrix would exceed the limit
            steps += (
                f"cut cells of {', '.join(unfitted)} split by the uniform guess (a response "
                f"matrix there would exceed {_MAX_MATRIX_CELLS:,} cells)",
            )
    params = dict(guarantee.parameters)
    params.update(
        {
            "groups": [[names[a] for a in gr] for gr in proto.groups],
            "oracles": list(proto._require().kinds),
            "users_per_group": [] if users_per_group is None else [int(v) for v in users_per_group],
            "raw_granularity": {
                "g1": None if math.isnan(proto.raw_granularity[0]) else proto.raw_granularity[0],
                "g2": None if math.isnan(proto.raw_granularity[1]) else proto.raw_granularity[1],
            },
            "alpha1": proto.alpha1,
            "alpha2": proto.alpha2,
            "interpolation": proto.interpolation,
            "normalisation": proto.normalisation,
        }
    )
    gu = replace(guarantee, parameters=params, post_processing=(*guarantee.post_processing, *steps))
    rel = GridRelease(
        proto.domain, gu, post if unbiased is None else unbiased, float(n),
        matrices=matrices, estimator=proto.estimator, method=proto.name,
        n_groups=proto.n_groups, tol=proto.tol, max_iter=proto.max_iter,
        interpolation=proto.interpolation,
    )  # fmt: skip
    # the λ-D weight as the release applies it (noise and, for HDG, the released cut error)
    est_txt = f"lambda-D answers by weighted update, estimator {proto.estimator!r}"
    if proto.estimator == "auto":
        cut = rel.cut_error
        est_txt += (
            f" (weight {rel.full_weight:.2f} on 'full', the rest on 'in-in': predicted noise of "
            f"a 2-D cell {rel.cell_noise:.4f} n"
            + (f", cut-cell error {cut:.4f} n" if cut is not None else "")
            + ")"
        )
    rel.guarantee = replace(gu, post_processing=(*gu.post_processing, est_txt))
    return rel
