"""Predict each central mechanism's error before spending any budget, and recommend one.

Every central cube mechanism in fugu adds noise whose variance for a range query depends only on
the public domain, the query and ε — never on the data. So the error of Laplace ("Basic"), the
hierarchical mechanism, the hat tree (1-D) and Privelet / Privelet+ can be computed exactly for
a whole workload without touching the data, and the mechanism with the smallest predicted error
chosen.

>>> import fugu
>>> dom = fugu.Domain([fugu.Ordinal("x", 0, 1023)])
>>> w = fugu.queries.random_workload(dom, 200, seed=0)
>>> rec = fugu.central.recommend(dom, w, epsilon=1.0)
>>> rec.best
'hat-tree'
>>> rec.rmse["hierarchical"] > rec.rmse["hat-tree"]
True
>>> rec.rmse["laplace"] > 1.5 * rec.rmse["hierarchical"]
True
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from numpy.typing import NDArray

from ..domain import Domain
from ..errors import InvalidParameterError, check_epsilon
from ..mechanism import histogram_sensitivity
from ..noise import discrete_laplace_variance
from ..queries import RangeQuery, Workload, workload_bounds
from .hattree import hat_tree_variance
from .hierarchical import hierarchical_variance, plan_cube
from .privelet import choose_plain, privelet_variance

__all__ = ["predict_errors", "recommend", "Recommendation", "MECHANISMS"]

#: The mechanisms :func:`predict_errors` knows, with the options each is predicted for.
MECHANISMS = ("laplace", "hierarchical", "hat-tree", "privelet", "privelet+")

#: The hat tree is predicted for 1-D domains up to this many cells (its plan search takes
#: seconds there and over a minute at 65,536 cells); ask for it by name above.
HAT_TREE_AUTO_MAX = 16_384


def predict_errors(
    domain: Domain,
    workload: Workload | Sequence[RangeQuery] | NDArray[np.int64],
    epsilon: float,
    *,
    neighbours: str = "replace",
    mechanisms: Sequence[str] | None = None,
    branching: Any = None,
) -> dict[str, NDArray[np.float64]]:
    """Per-query noise variance of each mechanism (exact, data-independent).

    Returns ``{mechanism: variances (m,)}``. "hierarchical" is planned for this workload (as
    ``hierarchical(..., workload=...)`` would be); "privelet" transforms every attribute;
    "privelet+" uses ``plain="auto"`` (left out of the default list when the rule leaves
    nothing plain or transforms nothing, where it equals "privelet" or is Laplace-like; named
    in ``mechanisms`` it is predicted). "hat-tree" is predicted for 1-D domains only, planned
    for this workload; with ``mechanisms=None`` (all of :data:`MECHANISMS`) only up to
    ``HAT_TREE_AUTO_MAX`` cells (name it in ``mechanisms`` for larger ones; named on a cube it
    is refused). An empty or unknown ``mechanisms`` is refused.
    """
    eps = check_epsilon(epsilon)
    delta = histogram_sensitivity(neighbours)
    b = workload_bounds(workload, domain)
    out: dict[str, NDArray[np.float64]] = {}
    capped = mechanisms is None  # the default list predicts the hat tree up to the cap only
    names = list(MECHANISMS) if mechanisms is None else _check_mechanisms(mechanisms, domain)
    for name in names:
        if name == "laplace":
            vol = np.prod(b[:, :, 1] - b[:, :, 0], axis=1).astype(np.float64)
            out[name] = vol * float(discrete_laplace_variance(delta / eps))
        elif name == "hierarchical":
            out[name] = hierarchical_variance(
                domain, b, eps, branching=branching, neighbours=neighbours, workload=b
            )
        elif name == "hat-tree":
            if domain.ndim == 1 and (not capped or domain.size <= HAT_TREE_AUTO_MAX):
                out[name] = hat_tree_variance(
                    domain, b, eps, neighbours=neighbours, plan_for_queries=True
                )
        elif name == "privelet":
            out[name] = privelet_variance(domain, b, eps, plain=None, neighbours=neighbours)
        elif name == "privelet+":
            plain = choose_plain(domain)
            if not capped or 0 < len(plain) < domain.ndim:
                out[name] = privelet_variance(domain, b, eps, plain=plain, neighbours=neighbours)
    return out


def _check_mechanisms(mechanisms: Sequence[str], domain: Domain) -> list[str]:
    """The mechanisms asked for by name: known, at least one, and each predictable here (a
    named mechanism is never silently left out: ``recommend`` then failed on an empty dict
    with "min() arg is an empty sequence")."""
    names = [mechanisms] if isinstance(mechanisms, str) else list(mechanisms)
    if not names:
        raise InvalidParameterError(
            f"mechanisms is empty; name at least one of {list(MECHANISMS)}, or leave it out "
            f"(None) to predict them all"
        )
    for name in names:
        if name not in MECHANISMS:
            raise InvalidParameterError(f"unknown mechanism {name!r}; known: {list(MECHANISMS)}")
        if name == "hat-tree" and domain.ndim != 1:
            raise InvalidParameterError(
                f"mechanisms: 'hat-tree' releases one attribute and this domain has "
                f"{domain.ndim} {list(domain.names)}; for cubes name 'hierarchical' (its "
                f"Kronecker plans use the hat tree per attribute)"
            )
    return names


def _ratio(base: float | None, rmse: float) -> float:
    """How many times lower ``rmse`` is than Laplace's ``base`` (inf when it is 0 < base)."""
    if not base:
        return float("nan")
    return base / rmse if rmse > 0 else math.inf


@dataclass(frozen=True)
class Recommendation:
    """Predicted RMSE over a workload for each mechanism, and the best one."""

    rmse: dict[str, float]
    best: str
    options: dict[str, dict[str, Any]] = field(default_factory=dict)

    def table(self) -> list[list[Any]]:
        """Rows [mechanism, RMSE, times better than Laplace, options], best first.

        A mechanism that answers every query exactly (RMSE 0: e.g. the total query under
        replace-one neighbours, where n is public) is ``inf`` times better than Laplace; the
        ratio is ``nan`` when there is no Laplace row or both are exact.
        """
        base = self.rmse.get("laplace")
        rows = []
        for name, r in sorted(self.rmse.items(), key=lambda kv: kv[1]):
            rows.append([name, r, _ratio(base, r), str(self.options.get(name, {}))])
        return rows

    def to_dict(self) -> dict[str, Any]:
        return {"rmse": self.rmse, "best": self.best, "options": self.options}


def recommend(
    domain: Domain,
    workload: Workload | Sequence[RangeQuery] | NDArray[np.int64],
    epsilon: float,
    *,
    neighbours: str = "replace",
    mechanisms: Sequence[str] | None = None,
) -> Recommendation:
    """Recommend the central mechanism with the smallest predicted RMSE on ``workload``.

    Uses only the domain, the workload and ε (no data, no budget).
    """
    var = predict_errors(domain, workload, epsilon, neighbours=neighbours, mechanisms=mechanisms)
    rmse = {k: float(math.sqrt(float(np.mean(v)))) for k, v in var.items()}
    best = min(rmse, key=lambda k: rmse[k])
    options: dict[str, dict[str, Any]] = {}
    if "hierarchical" in rmse:
        b = workload_bounds(workload, domain)
        trees, _, dense = plan_cube(domain, workload=b, neighbours=neighbours)
        if dense is not None:
            options["hierarchical"] = {
                "structure": "kronecker",
                "axes": [d.kind for d in dense],
                "note": "planned for this workload: pass workload= to hierarchical()",
            }
        else:
            options["hierarchical"] = {
                "structure": "product of trees",
                "branching": [t.b for t in trees],
                "level_shares": [[round(x, 4) for x in t.p] for t in trees],
                "note": "planned for this workload: pass workload= to hierarchical()",
            }
    if "hat-tree" in rmse:
        options["hat-tree"] = {
            "note": "planned for this workload: pass workload= to hat_tree() (1-D only)"
        }
    if "privelet+" in rmse:
        options["privelet+"] = {"plain": choose_plain(domain)}
    if "privelet" in rmse:
        options["privelet"] = {"plain": None}
    return Recommendation(rmse=rmse, best=best, options=options)
