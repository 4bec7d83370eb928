"""Bounds arrays given as a workload are checked like ``Workload.from_bounds`` (review 24's note).

``workload=np.array([[[0, 11]]])`` on 10 cells was accepted by ``hierarchical`` (planned for a
range outside the domain) and raised numpy's IndexError in ``hat_tree``; an empty range [3, 3)
and fractional bounds (0.5 cast to 0) passed silently.
"""

from __future__ import annotations

import numpy as np
import pytest

import fugu
from fugu.errors import DomainError, InvalidParameterError
from fugu.queries import Workload, workload_bounds

DOM = fugu.Domain([fugu.Ordinal("a", 0, 9)])
HIST = fugu.Histogram(np.arange(10), DOM)


@pytest.mark.parametrize(
    ("bounds", "error", "match"),
    [
        ([[[0, 11]]], DomainError, "0 <= start < stop <= attribute size"),
        ([[[-1, 4]]], DomainError, "0 <= start < stop"),
        ([[[3, 3]]], DomainError, "start < stop"),
        ([[[0.5, 4.0]]], InvalidParameterError, "whole numbers"),
        ([[[np.nan, 4.0]]], InvalidParameterError, "whole numbers"),
    ],
)
def test_bad_bounds_arrays_are_refused_everywhere(bounds, error, match) -> None:  # type: ignore[no-untyped-def]
    arr = np.array(bounds)
    with pytest.raises(error, match=match):
        workload_bounds(arr, DOM)
    with pytest.raises(error, match=match):
        Workload.from_bounds(arr, DOM)
    for mech in (fugu.central.hierarchical, fugu.central.hat_tree):
        acct = fugu.Accountant(1.0)
        with pytest.raises(error, match=match):
            mech(HIST, 0.5, workload=arr, accountant=acct, rng=fugu.RandomSource(seed=1))
        assert acct.spent == 0.0


def test_whole_float_bounds_and_integers_are_kept() -> None:
    assert workload_bounds(np.array([[[2.0, 5.0]]]), DOM).tolist() == [[[2, 5]]]
    assert workload_bounds(np.array([[[0, 10]]]), DOM).tolist() == [[[0, 10]]]
    rel = fugu.central.hat_tree(
        HIST, 1.0, workload=np.array([[[2, 5]]]), rng=fugu.RandomSource(seed=1)
    )
    assert np.isfinite(rel.answer(fugu.RangeQuery({"a": (2, 4)})))
