"""Composition of Blowfish releases under one policy (He, Machanavajjhala, Ding, SIGMOD 2014, §4).

* Sequential (Theorem 4.1): (ε1, P) then (ε2, P) on the same data is (ε1 + ε2, P), with or
  without constraints. Every Blowfish mechanism charges its ε to an
  :class:`~fugu.Accountant` with ``model="blowfish"`` and ``policy=policy.name``; an accountant
  declared for one policy refuses releases under another (``Budget(ε, "blowfish", policy.name)``).
* Parallel (Theorems 4.2–4.3): releases on *disjoint* parts of the data cost ``max ε_i`` only
  when the paper's condition holds, which :func:`check_parallel` verifies:

  - parts given as disjoint sets of individuals (``parts=None``): allowed with the cardinality
    constraint only, or when no constraint is *critical* to any secret pair (no secret edge
    changes a constrained count: ``crit(q) = ∅``);
  - parts given as a partition of the domain T (``parts`` = a part label per cell): every secret
    edge must stay inside one part (else one record's move changes two parts, and the two
    releases must be paid ``ε_i + ε_j``), and every constrained count must lie inside one part
    (a constraint may affect only the part it is about).

>>> import fugu
>>> from fugu.blowfish import Policy, check_parallel
>>> dom = fugu.Domain([fugu.Ordinal("age", 0, 9)])
>>> check_parallel(Policy.partition(dom, {"age": 5}), parts=[0] * 5 + [1] * 5)
'domain parts joined by no secret edge'
>>> try:
...     check_parallel(Policy.line(dom), parts=[0] * 5 + [1] * 5)
... except fugu.PolicyError as e:
...     print(str(e).split(";")[0])
parallel composition does not hold: a secret edge of 'line' joins two parts
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from numpy.typing import ArrayLike

from ..budget import Accountant, Budget
from ..errors import PolicyError
from .policy import Policy

__all__ = ["check_parallel", "charge_parallel", "blowfish_budget"]


def blowfish_budget(epsilon: float, policy: Policy) -> Budget:
    """A budget that only Blowfish releases under ``policy`` may spend."""
    return Budget(epsilon, model="blowfish", policy=policy.name)


def check_parallel(policy: Policy, parts: ArrayLike | None = None) -> str:
    """Verify the paper's parallel-composition condition; return the rule or raise PolicyError."""
    dom = policy.domain
    masks = [m for c in policy.constraints for m in c.queries(dom)]
    if parts is None:
        for m in masks:
            if _critical(policy, m):
                raise PolicyError(
                    "parallel composition over disjoint sets of individuals does not hold: a "
                    "public count constraint is changed by a secret move, so it correlates the "
                    "parts (He et al. 2014, Sec. 4); charge the releases sequentially"
                )
        return "disjoint sets of individuals" + (" (no critical constraint)" if masks else "")
    lab = np.asarray(parts).reshape(-1)
    if lab.size != dom.size:
        raise PolicyError(f"parts must give one label per cell ({dom.size}), got {lab.size}")
    if policy.crosses(lab):
        raise PolicyError(
            f"parallel composition does not hold: a secret edge of '{policy.description}' joins "
            f"two parts; a record moving along it changes both releases, so they cost the sum "
            f"of their epsilons"
        )
    for m in masks:
        if np.unique(lab[m]).size > 1:
            raise PolicyError(
                "parallel composition does not hold: a public constraint covers cells of several "
                "parts, so it affects more than one release (He et al. 2014, Theorem 4.3)"
            )
    return "domain parts joined by no secret edge"


def _critical(policy: Policy, mask: np.ndarray) -> bool:
    """True when some secret edge (or ⊥) has exactly one endpoint inside the constrained set."""
    if policy.has_bottom_edges() and mask[policy.bottom_cells()].any():
        return True
    return policy.crosses(mask.astype(np.int64))


def charge_parallel(
    accountant: Accountant,
    policy: Policy,
    epsilons: Sequence[float],
    what: Sequence[str],
    *,
    parts: ArrayLike | None = None,
) -> None:
    """Charge releases on disjoint parts at ``max(epsilons)`` after checking the condition."""
    rule = check_parallel(policy, parts)
    accountant.parallel(
        list(epsilons),
        list(what),
        disjoint_by=f"{rule}; policy {policy.name}",
        model="blowfish",
        policy=policy.name,
    )
