"""Privelet never refuses on a private n (add/remove neighbours): its coefficients are clamped to
the noise grid's public range instead (review 24's note).

``check_grid_range`` refused, before the charge but on the data, a histogram with more records
than the grid holds (here 2^52·(1 − 2^-20) on four cells): under add/remove the largest
histogram it released and its neighbour with one record more were told apart with probability 1.
With n public (replace-one) the refusal stays: it depends only on public facts.
"""

from __future__ import annotations

import numpy as np
import pytest

import fugu
from fugu.errors import InvalidParameterError

DOM = fugu.Domain([fugu.Ordinal("a", 0, 3)])
TOP = 4503595332403200  # floor of the grid's range for this domain (2^52·(1 − 2^-20))


def _privelet(counts: list[int], neighbours: str, acct: fugu.Accountant | None = None):  # type: ignore[no-untyped-def]
    hist = fugu.Histogram(np.array(counts), DOM)
    return fugu.central.privelet(
        hist, 1.0, neighbours=neighbours, accountant=acct, rng=fugu.RandomSource(seed=1)
    )


def test_neighbours_across_the_range_both_release_under_add_remove() -> None:
    """Before: [TOP, 0, 0, 0] released and [TOP, 1, 0, 0] raised 'holds histograms of at most
    4.5036e+15 records'."""
    a = _privelet([TOP, 0, 0, 0], "add-remove")
    b = _privelet([TOP, 1, 0, 0], "add-remove")
    for rel in (a, b):
        assert np.all(np.isfinite(rel.counts))
        assert abs(float(rel.counts[0]) - TOP) < 100


def test_far_beyond_the_range_is_clamped_not_refused() -> None:
    rel = _privelet([TOP + 2**51, 0, 0, 0], "add-remove")
    assert abs(float(rel.counts.sum()) - TOP) < 100  # the clamp, plus noise


def test_a_public_n_is_still_refused_before_the_charge() -> None:
    acct = fugu.Accountant(2.0)
    with pytest.raises(InvalidParameterError, match="holds histograms of at most"):
        _privelet([TOP, 1, 0, 0], "replace", acct)
    assert acct.spent == 0.0
