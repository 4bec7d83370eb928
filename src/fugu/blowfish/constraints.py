"""Public constraints of a Blowfish policy: count-query and marginal constraints.

A constraint says that some statistic of the data is already public (for example the number of
men and women, or a published marginal). Public counts correlate the records, so a change of one
record along a secret edge may force other records to change to keep the constraint true: the
neighbours of a database are then the *minimal* sets of secret moves that keep every constraint
true. Source: He, Machanavajjhala, Ding, Blowfish Privacy (SIGMOD 2014, seed ``000_…``) Section 3
(count and marginal constraints) and Section 8 (sparse constraints, the policy graph, Theorem 8.x:
``S(h, P) = 2·max(α(G_P), ξ(G_P))``).

This module holds the constraint objects. The sensitivity under constraints (policy graph, α, ξ,
closed forms and the exact search) is in :mod:`fugu.blowfish.sensitivity`.

>>> import fugu
>>> from fugu.blowfish import CountConstraint, MarginalConstraint
>>> dom = fugu.Domain([fugu.Ordinal("age", 0, 9), fugu.Nominal("sex", ["F", "M"])])
>>> CountConstraint({"age": (0, 4)}).mask(dom).reshape(-1).sum()
np.int64(10)
>>> MarginalConstraint(["sex"]).size(dom)
2
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import NDArray

from ..domain import Domain
from ..errors import DomainError, InvalidParameterError, PolicyError
from ..queries import RangeQuery

__all__ = ["Constraint", "CountConstraint", "MarginalConstraint", "constraint_from_dict"]


class Constraint:
    """Base class: a publicly known fact about the data."""

    def check(self, domain: Domain) -> None:  # pragma: no cover - abstract
        raise NotImplementedError

    def queries(self, domain: Domain) -> list[NDArray[np.bool_]]:
        """The count queries whose answers are public, as flat cell masks."""
        raise NotImplementedError  # pragma: no cover

    @property
    def description(self) -> str:  # pragma: no cover
        raise NotImplementedError

    def to_dict(self) -> dict[str, Any]:  # pragma: no cover
        raise NotImplementedError


@dataclass(frozen=True, eq=True)
class CountConstraint(Constraint):
    """The number of records satisfying ``query`` is public.

    ``query`` is a :class:`~fugu.RangeQuery` or its conditions mapping (inclusive ranges for
    ordinal attributes, a value or hierarchy node for nominal ones), or a list of flat cell
    indices (``cells=[...]``) for arbitrary predicates.
    """

    conditions: tuple[tuple[str, Any], ...] = ()
    cells: tuple[int, ...] | None = None
    label: str = ""

    def __init__(
        self,
        query: RangeQuery | Mapping[str, Any] | None = None,
        *,
        cells: Sequence[int] | None = None,
        label: str = "",
    ) -> None:
        if (query is None) == (cells is None):
            raise InvalidParameterError("a count constraint needs a query or cells=[...], not both")
        if query is not None:
            conds = query.conditions if isinstance(query, RangeQuery) else dict(query)
            items = tuple(
                (str(k), tuple(v) if isinstance(v, list) else v) for k, v in conds.items()
            )
            object.__setattr__(self, "conditions", items)
            object.__setattr__(self, "cells", None)
        else:
            assert cells is not None
            object.__setattr__(self, "conditions", ())
            object.__setattr__(self, "cells", tuple(int(c) for c in cells))
        object.__setattr__(self, "label", label)

    def check(self, domain: Domain) -> None:
        self.mask(domain)

    def mask(self, domain: Domain) -> NDArray[np.bool_]:
        """Boolean cube over the domain: True where the query counts the cell.

        Raises :class:`~fugu.DomainError` when the query names an unknown attribute or value.
        """
        if self.cells is not None:
            c = np.asarray(self.cells, dtype=np.int64)
            if c.size and (c.min() < 0 or c.max() >= domain.size):
                raise DomainError(
                    f"count constraint refers to cells outside the domain (0..{domain.size - 1}): "
                    f"{c[(c < 0) | (c >= domain.size)][:5].tolist()}"
                )
            m = np.zeros(domain.size, bool)
            m[c] = True
            return m.reshape(domain.shape)
        try:
            b = RangeQuery(dict(self.conditions)).bounds(domain)
        except DomainError as exc:
            raise DomainError(f"count constraint {self.description}: {exc}") from None
        m = np.zeros(domain.shape, bool)
        m[tuple(slice(lo, hi) for lo, hi in b)] = True
        return m

    def queries(self, domain: Domain) -> list[NDArray[np.bool_]]:
        return [self.mask(domain).reshape(-1)]

    @property
    def description(self) -> str:
        if self.label:
            return self.label
        if self.cells is not None:
            return f"count of {len(self.cells)} cells"
        return "count(" + str(RangeQuery(dict(self.conditions))) + ")"

    def to_dict(self) -> dict[str, Any]:
        if self.cells is not None:
            return {"type": "count", "cells": list(self.cells), "label": self.label}
        return {
            "type": "count",
            "conditions": [[k, list(v) if isinstance(v, tuple) else v] for k, v in self.conditions],
            "label": self.label,
        }


@dataclass(frozen=True, eq=True)
class MarginalConstraint(Constraint):
    """The marginal over ``attributes`` is public: one count query per cell of the marginal."""

    attributes: tuple[str, ...]

    def __init__(self, attributes: Sequence[str] | str) -> None:
        names = (attributes,) if isinstance(attributes, str) else tuple(str(a) for a in attributes)
        if not names:
            raise InvalidParameterError("a marginal constraint needs at least one attribute")
        if len(set(names)) != len(names):
            raise InvalidParameterError(f"marginal attributes repeat: {list(names)}")
        object.__setattr__(self, "attributes", names)

    def check(self, domain: Domain) -> None:
        for a in self.attributes:
            if a not in domain.names:
                raise DomainError(
                    f"marginal constraint on {list(self.attributes)}: unknown attribute {a!r}; "
                    f"the domain has {list(domain.names)}"
                )

    def size(self, domain: Domain) -> int:
        """size(C): the number of cells of the marginal."""
        self.check(domain)
        return int(np.prod([domain.attribute(a).size for a in self.attributes]))

    def labels(self, domain: Domain) -> NDArray[np.int64]:
        """Flat marginal-cell id of every domain cell."""
        self.check(domain)
        axes = [domain.axis(a) for a in self.attributes]
        grids = np.indices(domain.shape).reshape(domain.ndim, -1)
        sub = [domain.shape[a] for a in axes]
        return np.ravel_multi_index(tuple(grids[a] for a in axes), sub).astype(np.int64)

    def queries(self, domain: Domain) -> list[NDArray[np.bool_]]:
        lab = self.labels(domain)
        return [lab == i for i in range(self.size(domain))]

    @property
    def description(self) -> str:
        return "marginal(" + ",".join(self.attributes) + ")"

    def to_dict(self) -> dict[str, Any]:
        return {"type": "marginal", "attributes": list(self.attributes)}


def constraint_from_dict(d: Mapping[str, Any]) -> Constraint:
    t = d.get("type")
    if t == "marginal":
        return MarginalConstraint(d["attributes"])
    if t == "count":
        if d.get("cells") is not None:
            return CountConstraint(cells=d["cells"], label=d.get("label", ""))
        conds = {k: tuple(v) if isinstance(v, list) else v for k, v in d["conditions"]}
        return CountConstraint(conds, label=d.get("label", ""))
    raise PolicyError(f"unknown constraint description {dict(d)!r}")
