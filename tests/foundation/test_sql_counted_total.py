"""A histogram counted from an SQL query's rows does not have a public total.

``Histogram.from_file(sql=...)`` counts the rows a query returns; a ``WHERE`` (or a join)
selects rows by their values, so replacing or moving one record can move it in or out of the
result and change the counted n. Review 15 found the hierarchical mechanism and the hat tree
releasing that n exactly under replace-one neighbours (fixed in ``hierarchical.py``); the shared
rule, :func:`fugu.mechanism.total_is_public`, and Privelet (base coefficient) and Blowfish
policies without ⊥ (which treat n as public) had the same gap. Each test below failed before
the fix (Privelet released the counted total exactly; Blowfish accepted the histogram).
Deterministic; false-failure rate 0.
"""

from __future__ import annotations

from pathlib import Path

import pytest

import fugu
from fugu.blowfish import Policy, laplace, ordered
from fugu.mechanism import total_is_public

pytest.importorskip("duckdb")


def _dom() -> fugu.Domain:
    return fugu.Domain([fugu.Ordinal("a0", 0, 7)])


def _sql_hist(tmp_path: Path, values: list[int], name: str = "t") -> fugu.Histogram:
    path = tmp_path / f"{name}.csv"
    path.write_text("a0\n" + "\n".join(str(v) for v in values) + "\n")
    return fugu.Histogram.from_file(
        None, _dom(), engine="duckdb", sql=f"SELECT a0 FROM '{path}' WHERE a0 >= 2"
    )


def test_sql_counted_histogram_has_no_public_total(tmp_path: Path) -> None:
    hist = _sql_hist(tmp_path, [1, 2, 5, 7])
    assert hist.counts_a_subset and not hist.dropped_records
    assert not total_is_public("replace", hist)
    whole = fugu.Histogram.from_file(tmp_path / "t.csv", _dom(), engine="duckdb")
    assert not whole.counts_a_subset and total_is_public("replace", whole)


def test_privelet_does_not_release_an_sql_counted_total(tmp_path: Path) -> None:
    """Two tables differing in one record (5 -> 1) give 3 and 2 rows with a0 >= 2; under
    replace-one Privelet took the counted n as its public base coefficient and released it
    exactly (counts summing to 3.0 and 2.0)."""
    sums = []
    for i, rows in enumerate(([1, 2, 5, 7], [1, 2, 1, 7])):
        rel = fugu.central.privelet(
            _sql_hist(tmp_path, rows, f"t{i}"), 0.1, plain=None, rng=fugu.RandomSource(seed=1)
        )
        assert rel.guarantee.parameters["base_coefficient"] == "noised"
        sums.append(round(float(rel.counts.sum()), 6))
    assert sums[0] not in (2.0, 3.0) and sums[1] not in (2.0, 3.0)


@pytest.mark.parametrize("mechanism", [laplace, ordered])
def test_blowfish_without_bottom_refuses_an_sql_counted_histogram(
    tmp_path: Path, mechanism: object
) -> None:
    hist = _sql_hist(tmp_path, [1, 2, 5, 7])
    policy = Policy.line(hist.domain)
    acc = fugu.Accountant(fugu.blowfish.blowfish_budget(10.0, policy))
    with pytest.raises(fugu.errors.PolicyError, match="SQL query"):
        mechanism(hist, 1.0, policy, accountant=acc, rng=fugu.RandomSource(seed=1))  # type: ignore[operator]
    assert acc.spent == 0  # refused before anything is charged
    rel = mechanism(  # type: ignore[operator]
        hist, 1.0, policy.with_bottom(), rng=fugu.RandomSource(seed=1)
    )
    assert rel is not None
