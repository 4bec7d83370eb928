"""The Blowfish Laplace mechanism never refuses on a private number of records.

With ⊥ in the policy (``bottom=True`` or an explicit ⊥ edge) a neighbour adds or removes a
record, so n is private. The mechanism refused, before the charge but on the data, any
linear query whose answers could leave the exact range (integer queries: ``n · max|W| ≥ 2^62``;
real ones: the noise grid's exact range): a data set just below the bound released and its
neighbour with one record more at a ⊥ value was refused, which told them apart with
probability 1 (review 25's note on ``blowfish/laplace.py``; k-means had the same, b917353).
Now, with a private n, the exact answers are clamped to the public range (1-Lipschitz, so the
sensitivity still bounds the change; the bound is in the guarantee as ``answer_clamp``), and
only a query one record already overflows is refused (public). A public n is still checked.
"""

from __future__ import annotations

import numpy as np
import pytest

import fugu
from fugu.blowfish import Policy, laplace
from fugu.errors import InvalidParameterError

DOM = fugu.Domain([fugu.Ordinal("x", 0, 2)])
# value 0 may be added or removed; 1 and 2 only swap: the sensitivity stays small while the
# answers of records at 1 and 2 are huge
POLICY = Policy.explicit(DOM, [(0, None), (1, 2)])
W_INT = np.array([[1.0, 2.0**61, 2.0**61 + 1]])  # integer entries: exact int64 path
W_REAL = np.array([[1.5, 2.0**40, 2.0**40 + 1.5]])  # real entries: the noise grid path


def _hist(values: list[int]) -> fugu.Histogram:
    return fugu.Histogram.from_records({"x": values}, DOM)


def _release(values: list[int], w: np.ndarray, policy: Policy = POLICY) -> fugu.Release:
    return laplace(_hist(values), 1.0, policy, query=w, rng=fugu.RandomSource(seed=1))


@pytest.mark.parametrize(
    ("w", "base"),
    [(W_INT, [1]), (W_REAL, [1] * 7)],
    ids=["integer", "real"],
)
def test_neighbours_across_the_bound_both_release(w: np.ndarray, base: list[int]) -> None:
    """Before: ``base`` released and ``base`` + one record at 0 (its ⊥ neighbour) raised
    'this histogram has more than ... records' (integer: 2 · (2^61 + 1) ≥ 2^62; real:
    8 · 2^40 above the grid's 8.796e12)."""
    assert POLICY.has_bottom_edges()
    a, b = _release(base, w), _release([*base, 0], w)
    for rel in (a, b):
        assert np.all(np.isfinite(rel.values))
        assert rel.guarantee.parameters["answer_clamp"] > 0
    exact = float(w[0] @ np.bincount(base, minlength=3))
    assert a.values[0] == pytest.approx(exact, rel=1e-9, abs=50)


def test_answers_beyond_the_range_are_clamped_to_it() -> None:
    """5,000 records at 1 sum to 5.5e15, beyond the real query's exact grid range (8.8e12):
    released as the clamp plus noise (before: refused on n)."""
    rel = _release([1] * 5000 + [0], W_REAL)
    cap = rel.guarantee.parameters["answer_clamp"]
    assert 8.7e12 < cap < 8.8e12
    assert abs(rel.values[0] - cap) < 100  # noise of scale 1.5 on the clamped answer
    rel = _release([1] * 3 + [0], W_INT)
    assert rel.values[0] == pytest.approx(2.0**62, rel=1e-12)  # int64 clamp 2^62 - 1


def test_a_query_one_record_overflows_is_refused_publicly() -> None:
    """The one check left with a private n uses one record, which is public: the same refusal
    for every data set, before the charge."""
    w = np.array([[1.5, 2.0**61, 2.0**61 + 1.5]])
    acct = fugu.Accountant(fugu.Budget(1.0))
    for values in ([0], [1, 1, 2]):
        with pytest.raises(InvalidParameterError, match="one record's answer is already beyond"):
            laplace(_hist(values), 0.5, POLICY, query=w, rng=fugu.RandomSource(seed=1),
                    accountant=acct)  # fmt: skip
    assert acct.spent == 0.0


def test_a_public_n_is_still_checked_before_the_charge() -> None:
    """Without ⊥ n is public: the exact check on it stays (and the policy's ⊥ test is a call:
    a bound method would be truthy and have made every policy's n private)."""
    line = Policy.explicit(DOM, [(1, 2)])
    assert not line.has_bottom_edges()
    acct = fugu.Accountant(fugu.Budget(1.0))
    with pytest.raises(InvalidParameterError, match="more than .* records"):
        laplace(_hist([1, 1]), 0.5, line, query=W_INT, rng=fugu.RandomSource(seed=1),
                accountant=acct)  # fmt: skip
    assert acct.spent == 0.0
    assert "answer_clamp" not in _release([1], W_INT, line).guarantee.parameters
