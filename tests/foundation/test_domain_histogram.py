"""Domains, encoding, histograms from every input kind, and their errors."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import fugu
from fugu import Domain, Hierarchy, Histogram, Nominal, Ordinal

JOBS = Hierarchy.from_dict(
    {"any": {"white": ["clerk", "exec"], "blue": ["craft", "farm", "driver"]}}
)


def small_domain() -> Domain:
    return Domain(
        [Ordinal("age", 10, 19), Nominal("job", JOBS), Ordinal("gain", edges=[0, 1, 10, 100])]
    )


@settings(max_examples=60, deadline=None)
@given(
    st.lists(st.tuples(st.integers(1, 6), st.integers(-5, 5)), min_size=1, max_size=4), st.data()
)
def test_encode_decode_round_trip(spec: list[tuple[int, int]], data: st.DataObject) -> None:
    dom = Domain([Ordinal(f"x{i}", low, low + size - 1) for i, (size, low) in enumerate(spec)])
    n = data.draw(st.integers(1, 50))
    cols = {
        a.name: np.asarray(data.draw(st.lists(st.integers(a.low, a.high), min_size=n, max_size=n)))
        for a in dom.attributes
    }
    flat = dom.encode(cols)
    assert flat.min() >= 0 and flat.max() < dom.size
    back = dom.decode(flat)
    for name in dom.names:
        assert np.array_equal(back[name], cols[name])


def test_hierarchy_nodes_are_contiguous_intervals() -> None:
    assert JOBS.leaves == ("clerk", "exec", "craft", "farm", "driver")
    assert (JOBS.node("blue").start, JOBS.node("blue").stop) == (2, 5)
    assert JOBS.height == 3
    assert Hierarchy.from_dict(JOBS.to_dict()) == JOBS


def test_nominal_and_binned_encoding() -> None:
    dom = small_domain()
    flat = dom.encode({"age": [10, 19], "job": ["exec", "driver"], "gain": [0, 100]})
    assert dom.decode(flat)["job"].tolist() == ["exec", "driver"]
    assert dom.decode(flat)["gain"].tolist() == ["[0, 1)", "[10, 100]"]


def test_out_of_domain_counts_and_examples() -> None:
    dom = small_domain()
    with pytest.raises(fugu.DomainError, match=r"2 of 4 values lie outside .* e\.g\. 25, 9"):
        dom.encode({"age": [10, 25, 9, 12], "job": ["exec"] * 4, "gain": [0] * 4})
    with pytest.raises(fugu.DomainError, match="'pilot'"):
        dom.encode({"age": [10], "job": ["pilot"], "gain": [0]})


def test_clip_and_drop_are_explicit() -> None:
    dom = Domain([Ordinal("age", 10, 19)])
    assert dom.encode({"age": [5, 25, 12]}, out_of_domain="clip").tolist() == [0, 9, 2]
    assert dom.encode({"age": [5, 25, 12]}, out_of_domain="drop").tolist() == [2]
    hist = Histogram.from_records({"age": [5, 12]}, dom, out_of_domain="drop")
    assert hist.total() == 1 and hist.data_options["out_of_domain"] == "drop"
    with pytest.raises(fugu.DomainError, match="cannot be clipped"):
        Domain([Nominal("s", ["a"])]).encode({"s": ["b"]}, out_of_domain="clip")


def test_nan_and_none_are_refused() -> None:
    dom = small_domain()
    with pytest.raises(fugu.DomainError, match="NaN"):
        dom.encode({"age": [10.0, np.nan], "job": ["exec"] * 2, "gain": [0, 0]})
    with pytest.raises(fugu.DomainError, match="None"):
        dom.encode({"age": [10, 11], "job": ["exec", None], "gain": [0, 0]})


def test_missing_column_and_unknown_attribute() -> None:
    dom = small_domain()
    with pytest.raises(fugu.DomainError, match=r"lack the column\(s\) \['gain'\]"):
        dom.encode({"age": [10], "job": ["exec"]})
    with pytest.raises(fugu.DomainError, match="did you mean"):
        dom.attribute("agee")


def test_domain_of_1e12_cells_is_refused_for_dense_histograms() -> None:
    dom = Domain([Ordinal(f"a{i}", 0, 999) for i in range(4)])
    assert dom.size == 10**12  # a schema may be large
    with pytest.raises(fugu.DomainTooLargeError, match=r"1,000,000,000,000 cells .* Coarsen"):
        Histogram.from_records({f"a{i}": [0] for i in range(4)}, dom)


def test_empty_data_counts_zero() -> None:
    """Zero records are zero counts with a warning, not an error: under add/remove neighbours
    refusing the empty data set would tell it from its one-record neighbours."""
    with pytest.warns(UserWarning, match="no rows"):
        hist = Histogram.from_records(
            {"age": np.array([], dtype=int)}, Domain([Ordinal("age", 0, 9)])
        )
    assert hist.counts.tolist() == [0] * 10


def test_bad_attribute_definitions() -> None:
    with pytest.raises(fugu.InvalidParameterError, match="empty range"):
        Ordinal("age", 5, 4)
    with pytest.raises(fugu.InvalidParameterError, match="at least one"):
        Nominal("s", [])
    with pytest.raises(fugu.InvalidParameterError, match="strictly increasing"):
        Ordinal("g", edges=[0, 0, 1])
    with pytest.raises(fugu.InvalidParameterError, match="unique"):
        Domain([Ordinal("a", 0, 1), Ordinal("a", 0, 1)])


def _records(n: int = 500, seed: int = 0) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    return {
        "age": rng.integers(10, 20, n),
        "job": rng.choice(np.array(JOBS.leaves, dtype=object), n),
        "gain": rng.choice([0, 5, 50, 100], n),
    }


def test_histogram_identical_across_input_kinds(tmp_path) -> None:  # type: ignore[no-untyped-def]
    import pandas as pd
    import polars as pl
    import pyarrow as pa
    import pyarrow.parquet as pq

    dom = small_domain()
    recs = _records()
    ref = Histogram.from_records(recs, dom)
    assert ref.total() == 500
    df = pd.DataFrame(recs)
    assert Histogram.from_records(df, dom) == ref
    assert Histogram.from_records(pl.DataFrame({k: list(v) for k, v in recs.items()}), dom) == ref
    table = pa.table({k: list(v) for k, v in recs.items()})
    assert Histogram.from_records(table, dom) == ref
    df.to_csv(tmp_path / "x.csv", index=False)
    pq.write_table(table, tmp_path / "x.parquet", row_group_size=100)
    for engine in ("duckdb", "numpy"):
        assert Histogram.from_file(tmp_path / "x.csv", dom, engine=engine) == ref
        assert Histogram.from_file(tmp_path / "x.parquet", dom, engine=engine) == ref
    sql = f"SELECT * FROM read_parquet('{tmp_path / 'x.parquet'}') WHERE age >= 15"
    sub = Histogram.from_file(None, dom, engine="duckdb", sql=sql)
    assert sub.total() == int((recs["age"] >= 15).sum())
    assert sub.data_options["public_filter_sql"] == sql


def test_csv_missing_column(tmp_path) -> None:  # type: ignore[no-untyped-def]
    (tmp_path / "x.csv").write_text("age,job\n10,exec\n")
    for engine in ("duckdb", "numpy"):
        with pytest.raises(fugu.DomainError, match=r"lacks the column\(s\) \['gain'\]"):
            Histogram.from_file(tmp_path / "x.csv", small_domain(), engine=engine)


def test_file_out_of_domain_counts_rows(tmp_path) -> None:  # type: ignore[no-untyped-def]
    (tmp_path / "x.csv").write_text("age\n10\n30\n30\n11\n")
    with pytest.raises(fugu.DomainError, match="2 of 4"):
        Histogram.from_file(tmp_path / "x.csv", Domain([Ordinal("age", 10, 19)]), engine="numpy")
    # DuckDB groups first, so it reports distinct values (the histogram still counts rows).
    with pytest.raises(fugu.DomainError, match="outside the domain"):
        Histogram.from_file(tmp_path / "x.csv", Domain([Ordinal("age", 10, 19)]), engine="duckdb")


def test_projection_is_a_marginal() -> None:
    dom = small_domain()
    hist = Histogram.from_records(_records(), dom)
    proj = hist.project(["gain", "age"])
    assert proj.counts.shape == (3, 10)
    assert np.array_equal(proj.counts, hist.counts.sum(axis=1).T)


def test_histogram_rejects_bad_counts() -> None:
    dom = Domain([Ordinal("a", 0, 2)])
    with pytest.raises(fugu.InvalidParameterError, match="non-negative"):
        Histogram([1, -1, 0], dom)
    with pytest.raises(fugu.InvalidParameterError, match="shape"):
        Histogram([1, 2], dom)


def test_adult_bundled() -> None:
    from fugu.datasets import ADULT_ATTRIBUTES, adult, adult_domain

    cols = adult()
    assert len(cols["age"]) == 48_842
    hist = Histogram.from_records(cols, adult_domain(list(ADULT_ATTRIBUTES)[:6]))
    assert hist.total() == 48_842
    assert set(cols["income"]) == {"<=50K", ">50K"}


# int64 overflow (issue 14 item 9) ------------------------------------------------------------
def _dom4() -> Domain:
    return Domain([Ordinal("a", 0, 3)])


@pytest.mark.parametrize(
    "counts",
    [
        np.array([2**64 - 1, 0, 0, 1], dtype=np.uint64),  # wrapped to -1 before
        np.array([2**63, 0, 0, 0], dtype=np.uint64),  # wrapped to -2**63 before
        np.array([2**63 - 1, 0, 0, 1], dtype=np.int64),  # wrapped to negative after noise before
        np.array([2**53 + 1, 0, 0, 0], dtype=np.int64),
        np.array([2.0**60, 0, 0, 0]),
        [2**64 - 1, 0, 0, 0],
    ],
)
def test_counts_too_large_to_represent_are_refused(counts: object) -> None:
    with pytest.raises(fugu.InvalidParameterError, match=r"at most 2\*\*53"):
        Histogram(counts, _dom4())


def test_total_too_large_is_refused() -> None:
    with pytest.raises(fugu.InvalidParameterError, match=r"add up to .* above 2\*\*53"):
        Histogram(np.full(4, 2**52, dtype=np.int64), _dom4())


def test_python_ints_beyond_uint64_are_refused_as_type() -> None:
    with pytest.raises(fugu.InvalidTypeError, match="beyond the int64 range"):
        Histogram([2**70, 0, 0, 0], _dom4())


def test_largest_accepted_count_survives_noise_without_wrapping() -> None:
    """2**53 records in one cell: the noisy answer stays near 2**53, never negative."""
    hist = Histogram(np.array([2**53, 0, 0, 0], dtype=np.uint64), _dom4())
    assert hist.counts.dtype == np.int64 and hist.counts[0] == 2**53
    rel = fugu.central.laplace(hist, 2.2e-16 * 4, rng=fugu.RandomSource(seed=0))
    assert rel.counts[0] > 0 and abs(rel.answer({"a": (0, 3)}) - 2**53) < 2**53
    rel = fugu.central.laplace(hist, 1.0, rng=fugu.RandomSource(seed=0))
    assert abs(rel.counts[0] - 2**53) < 100


def test_uint64_counts_within_range_are_kept_exactly() -> None:
    hist = Histogram(np.array([5, 0, 2**40, 1], dtype=np.uint64), _dom4())
    assert hist.counts.tolist() == [5, 0, 2**40, 1]


def test_uint64_records_out_of_domain_are_refused_not_wrapped() -> None:
    with pytest.raises(fugu.DomainError, match="18446744073709551615"):
        Histogram.from_records({"a": np.array([2**64 - 1, 2, 3], dtype=np.uint64)}, _dom4())
    hist = Histogram.from_records({"a": np.array([1, 2, 3], dtype=np.uint64)}, _dom4())
    assert hist.counts.tolist() == [0, 1, 1, 1]
