"""Leftovers of the privacy review: repeated column names, ragged mappings, the magnitude guard
of grid_laplace, the threadpoolctl dependency; and two lines DuckDB's CSV reader skipped (a line
its sniffer takes for a comment, an empty line in a wide file), found on the way."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import fugu
from fugu.engines import histogram_counts, partial_counts, partial_sums

AGE = fugu.Domain([fugu.Ordinal("age", 0, 4)])
AGE_SEX = fugu.Domain([fugu.Ordinal("age", 0, 4), fugu.Nominal("sex", ["F", "M"])])
ENGINES = ["numpy", "duckdb"]


# -- 1. repeated column names: refused by every engine, never "the first one" ------------------
def _dup_sources(tmp_path: Path) -> dict[str, Any]:
    """Each source has two columns named age: the first holds 1, 1, 4, the second 3, 3, 0."""
    import pandas as pd

    csv = tmp_path / "dup.csv"
    csv.write_text("age,age\n1,3\n1,3\n4,0\n")
    table = pa.Table.from_arrays([pa.array([1, 1, 4]), pa.array([3, 3, 0])], names=["age", "age"])
    parquet = tmp_path / "dup.parquet"
    pq.write_table(table, parquet)
    frame = pd.DataFrame([[1, 3], [1, 3], [4, 0]], columns=["age", "age"])
    return {"csv": csv, "parquet": parquet, "arrow": table, "pandas": frame}


@pytest.mark.parametrize("engine", ENGINES)
@pytest.mark.parametrize("source", ["csv", "parquet", "arrow", "pandas"])
def test_repeated_column_name_is_refused(tmp_path: Path, engine: str, source: str) -> None:
    data = _dup_sources(tmp_path)[source]
    with pytest.raises(fugu.DomainError, match=r"repeat: 2 columns named 'age'.*rename or drop"):
        histogram_counts(data, AGE, engine=engine)
    with pytest.raises(fugu.DomainError, match="columns named 'age'"):
        partial_counts(data, lambda b: np.asarray(b["age"]), 5, columns=["age"], engine=engine)
    if source in ("csv", "parquet"):
        with pytest.raises(fugu.DomainError, match=r"dup\.(csv|parquet)' repeat"):
            fugu.Histogram.from_file(data, AGE, engine=engine)
    else:
        with pytest.raises(fugu.DomainError, match="columns named 'age'"):
            fugu.Histogram.from_records(data, AGE, engine=engine)


def test_repeated_column_name_in_a_query_is_refused() -> None:
    with pytest.raises(fugu.DomainError, match="the query repeat: 2 columns named 'age'"):
        fugu.Histogram.from_file(None, AGE, sql="SELECT 1 AS age, 3 AS age")


def test_duckdb_refuses_names_equal_but_for_case_numpy_reads_the_exact_one(
    tmp_path: Path,
) -> None:
    """DuckDB matches names ignoring case (it would read `Age` for `age`); pyarrow does not."""
    csv = tmp_path / "case.csv"
    csv.write_text("Age,age\n1,3\n1,3\n4,0\n")
    with pytest.raises(fugu.DomainError, match="ignoring case"):
        fugu.Histogram.from_file(csv, AGE, engine="duckdb")
    counts = fugu.Histogram.from_file(csv, AGE, engine="numpy").counts
    assert counts.tolist() == [1, 0, 0, 2, 0]  # the column named exactly `age`


def test_duckdb_refuses_the_name_it_made_up_for_a_repeated_column(tmp_path: Path) -> None:
    csv = tmp_path / "dup.csv"
    csv.write_text("age,age\n1,3\n")
    dom = fugu.Domain([fugu.Ordinal("age_1", 0, 4)])
    with pytest.raises(fugu.DomainError, match="DuckDB gives the name 'age_1' to 'age'"):
        fugu.Histogram.from_file(csv, dom, engine="duckdb")
    with pytest.raises(fugu.DomainError, match=r"lacks the column\(s\) \['age_1'\]"):
        fugu.Histogram.from_file(csv, dom, engine="numpy")


@pytest.mark.parametrize("engine", ENGINES)
def test_a_real_column_named_like_a_duckdb_rename_is_read_or_refused(
    tmp_path: Path, engine: str
) -> None:
    """Header x,x,x_1: DuckDB calls the second x `x_1` (and the real x_1 `x_1_1`); reading
    `x_1` must never give the second x (2), only the real x_1 (3) or a refusal."""
    csv = tmp_path / "x.csv"
    csv.write_text("x,x,x_1\n1,2,3\n")
    dom = fugu.Domain([fugu.Ordinal("x_1", 0, 4)])
    if engine == "numpy":
        assert fugu.Histogram.from_file(csv, dom, engine=engine).counts.tolist() == [0, 0, 0, 1, 0]
    else:
        with pytest.raises(fugu.DomainError, match="gives the name 'x_1' to 'x' \\(column 2"):
            fugu.Histogram.from_file(csv, dom, engine=engine)


@pytest.mark.parametrize("engine", ENGINES)
def test_repeated_columns_that_are_not_read_do_not_matter(tmp_path: Path, engine: str) -> None:
    csv = tmp_path / "other.csv"
    csv.write_text("x,x,age\n0,9,1\n0,9,1\n0,9,4\n")
    assert fugu.Histogram.from_file(csv, AGE, engine=engine).counts.tolist() == [0, 2, 0, 0, 1]
    table = pa.Table.from_arrays(
        [pa.array([0, 0, 0])] * 2 + [pa.array([1, 1, 4])], ["x", "x", "age"]
    )
    assert histogram_counts(table, AGE, engine=engine).tolist() == [0, 2, 0, 0, 1]


def test_duckdb_counts_a_line_its_sniffer_would_take_for_a_comment(tmp_path: Path) -> None:
    """Excel's #N/A made DuckDB's sniffer choose '#' as the comment character and skip the line
    (53 of 54 records counted); read with comment='' the line is a record and #N/A is refused as
    a non-numeric value (the numpy engine refuses it as a missing value: pyarrow reads #N/A as
    null). test_review_privacy4 has the review's version."""
    rows = "".join(f"{20 + i % 50},F\n" for i in range(50))
    path = tmp_path / "excel.csv"
    path.write_text("age,sex\n30,F\n31,M\n#N/A,M\n40,F\n" + rows)
    dom = fugu.Domain([fugu.Ordinal("age", 0, 99), fugu.Nominal("sex", ["F", "M"])])
    for engine in ENGINES:
        with pytest.raises(fugu.FuguError):
            fugu.Histogram.from_file(path, dom, engine=engine)
    path.write_text("age,sex\n30,F\n31,M\n#31,M\n40,F\n")
    nominal = fugu.Domain([fugu.Nominal("age", ["30", "31", "40", "#31"])])
    assert fugu.Histogram.from_file(path, nominal, engine="duckdb").total() == 4


@pytest.mark.parametrize("newline", ["\n", "\r\n"])
@pytest.mark.parametrize("engine", ENGINES)
def test_an_empty_line_in_a_wide_csv_is_refused(tmp_path: Path, engine: str, newline: str) -> None:
    """DuckDB skipped an empty line of a two-column CSV (counted 3 of 4 lines) where the numpy
    engine refuses the record of missing values; a one-column file was refused already."""
    path = tmp_path / "gap.csv"
    path.write_text(newline.join(["age,sex", "3,F", "", "1,M", "4,F", ""]))
    with pytest.raises(fugu.FuguError, match="empty line|NaN/None"):
        fugu.Histogram.from_file(path, AGE_SEX, engine=engine)
    path.write_text(newline.join(["age,sex", "3,F", "1,M", "4,F", ""]))
    assert fugu.Histogram.from_file(path, AGE_SEX, engine=engine).total() == 3


# -- 2. ragged mappings: a FuguError naming every column and its length -------------------------
RAGGED = {"age": np.array([1, 1, 4]), "sex": np.array(["F", "M"])}


def _ragged_calls(data: dict[str, Any]) -> dict[str, Any]:
    cols = ["age", "sex"]

    def n_rows(b: Any) -> np.ndarray:
        return np.array([len(b["age"])])

    def key(b: Any) -> np.ndarray:
        return np.asarray(b["age"], dtype=np.int64)

    calls: dict[str, Any] = {
        "Domain.encode": lambda: AGE_SEX.encode(data),
        "Domain.encode_columns": lambda: AGE_SEX.encode_columns(data),
    }
    for eng in ENGINES:
        calls[f"from_records-{eng}"] = lambda e=eng: fugu.Histogram.from_records(
            data, AGE_SEX, engine=e
        )
        calls[f"histogram_counts-{eng}"] = lambda e=eng: histogram_counts(data, AGE_SEX, engine=e)
        calls[f"partial_counts-{eng}"] = lambda e=eng: partial_counts(
            data, key, 5, columns=cols, engine=e
        )
        calls[f"partial_sums-{eng}"] = lambda e=eng: partial_sums(
            data, n_rows, columns=cols, engine=e
        )
    calls["partial_counts-duckdb-group"] = lambda: partial_counts(
        data, key, 5, columns=cols, engine="duckdb", group=True
    )
    return calls


@pytest.mark.parametrize("call", sorted(_ragged_calls(RAGGED)))
def test_ragged_mapping_is_a_clear_error(call: str) -> None:
    with pytest.raises(fugu.DomainError, match=r"different lengths: \{'age': 3, 'sex': 2\}"):
        _ragged_calls(RAGGED)[call]()


def test_ragged_message_names_the_odd_column_and_the_fix() -> None:
    data = {"a": [1, 2, 3], "b": [1, 2, 3], "c": [1]}
    with pytest.raises(fugu.DomainError, match=r"give the column\(s\) \['c'\] 3 values"):
        fugu.engines.columns_of(data, ["a", "b"])


@pytest.mark.parametrize("engine", ENGINES)
def test_a_ragged_column_that_is_not_read_is_refused_too(engine: str) -> None:
    """The mapping is the table: a column of another length means misaligned records (the
    DuckDB engine converts every column, so both engines refuse it alike)."""
    data = {"age": [1, 1, 4], "sex": ["F", "M", "M"], "note": [1.0]}
    with pytest.raises(fugu.DomainError, match=r"'note': 1"):
        fugu.Histogram.from_records(data, AGE_SEX, engine=engine)
    with pytest.raises(fugu.DomainError, match=r"'note': 1"):
        histogram_counts(data, AGE_SEX, engine=engine)


def test_even_mappings_still_count() -> None:
    data = {"age": [1, 1, 4], "sex": ["F", "M", "M"], "note": ["a", "b", "c"]}
    for engine in ENGINES:
        got = histogram_counts(data, AGE_SEX, engine=engine)
        assert got.tolist() == [0, 0, 1, 1, 0, 0, 0, 0, 0, 1]


# -- 3. grid_laplace's magnitude guard: a clear error at the int64 limit ------------------------
def test_grid_laplace_names_the_limit_but_never_the_value() -> None:
    """The values are private: review 5 saw the message print a released histogram's neighbour's
    count (after the budget was spent). It names the grid, the limit and the range only."""
    from fugu.noise import grid_laplace

    rng = fugu.RandomSource(seed=1)
    # sensitivity 1, one value changes: grid 2**-10, so 2**53 is 2**63 grid units
    messages = []
    for values in ([1.0, 2.0**53], [-(2.0**53)], [1e308]):
        with pytest.raises(
            fugu.InvalidParameterError, match=r"2\*\*62 grid units.*within ±4\.5036e\+15"
        ) as err:
            grid_laplace(values, 1.0, 1.0, rng, max_changed=1)
        messages.append(str(err.value))
    assert "9.0072e+15" not in messages[0] and "9.22e+18" not in messages[0]
    assert len(set(messages)) == 1  # the same text whatever the private value


def test_grid_laplace_limit_is_exactly_2_to_62_grid_units() -> None:
    from fugu.noise import GRID_MAX_UNITS, grid_laplace

    rng = fugu.RandomSource(seed=2)
    top = GRID_MAX_UNITS * 2.0**-10  # 2**52: exactly 2**62 grid units of 2**-10
    noisy, info = grid_laplace([top, -top], 1.0, 1.0, rng, max_changed=1)
    assert float(info.granularity[0]) == 2.0**-10
    assert np.all(np.abs(noisy - [top, -top]) < 2**20)  # rounded once to a double, near the value
    with pytest.raises(fugu.InvalidParameterError, match="2\\*\\*62"):
        grid_laplace([np.nextafter(top, np.inf)], 1.0, 1.0, rng, max_changed=1)


def test_grid_laplace_is_exact_on_the_grid_within_2_to_53_units() -> None:
    """Below 2**53 grid units the released double is exactly an integer number of grid steps."""
    from fugu.noise import grid_laplace

    x = np.array([2.0**42 + 0.3, -(2.0**42) - 0.7, 5.5])  # about 2**52 grid units of 2**-10
    noisy, info = grid_laplace(x, 1.0, 1.0, fugu.RandomSource(seed=3), max_changed=1)
    steps = noisy / info.granularity
    assert np.all(steps == np.rint(steps)) and np.all(np.abs(steps) < 2**53)


def test_privelet_on_a_histogram_of_2_to_44_records_still_releases() -> None:
    """A legitimate caller above 2**52 grid units (2**54 here): a 2**52 guard would refuse it
    after the budget is spent."""
    from fugu.central.privelet import privelet

    counts = np.zeros(64, dtype=np.int64)
    counts[3] = 2**44
    hist = fugu.Histogram(counts, fugu.Domain([fugu.Ordinal("a", 0, 63)]))
    rel = privelet(hist, 1.0, rng=fugu.RandomSource(seed=4), neighbours="add-remove")
    assert abs(float(rel.counts.sum()) - 2**44) < 2**20


# -- 4. threadpoolctl: a declared dependency, still imported lazily ------------------------------
def test_threadpoolctl_is_a_declared_dependency() -> None:
    """hat_tree's graded derivation needs it to run BLAS on one thread (512 cells: 57 s with it,
    163 s without, on a loaded 2-core machine; the same plan either way)."""
    import tomllib

    root = Path(__file__).resolve().parents[2]
    deps = tomllib.loads((root / "pyproject.toml").read_text())["project"]["dependencies"]
    assert any(d.replace(" ", "").startswith("threadpoolctl>=") for d in deps)


def test_threadpoolctl_is_not_imported_by_import_fugu_but_limits_blas_when_used() -> None:
    import json
    import subprocess
    import sys

    code = (
        "import json, sys, fugu, fugu.central; from fugu.central import hatplan; "
        "before = 'threadpoolctl' in sys.modules\n"
        "from threadpoolctl import threadpool_info\n"
        "with hatplan._one_blas_thread():\n"
        "    inside = [i['num_threads'] for i in threadpool_info() if i['user_api'] == 'blas']\n"
        "print(json.dumps([before, inside]))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    before, inside = json.loads(out.stdout)
    assert before is False
    assert inside and set(inside) == {1}


# -- 2b. ragged mappings in the k-means points and the K-relation records --------------------------
def test_kmeans_points_ragged_mapping_names_every_column() -> None:
    """np.stack raised numpy's ValueError ('all input arrays must have the same shape')."""
    from fugu.blowfish.kmeans import KMeans

    dom = fugu.Domain([fugu.Ordinal("x", 0, 9), fugu.Ordinal("y", 0, 9)])
    km = KMeans(2, 1.0, domain=dom, rng=fugu.RandomSource(seed=0))
    with pytest.raises(fugu.DomainError, match=r"'x': 3, 'y': 2"):
        km.fit({"x": [1, 2, 3], "y": [1, 2]})


def test_krelation_ragged_mapping_names_every_column() -> None:
    """The old message gave the lengths without the columns ('[2, 3]')."""
    from fugu.graph import KRelation

    with pytest.raises(fugu.DomainError, match=r"'a': 3, 'b': 2"):
        KRelation.from_records({"a": [1, 2, 3], "b": [2, 3]}, owners=["a", "b"])


# -- review 4: an empty CSV field of a nominal column is missing on every engine ------------------
@pytest.mark.parametrize("policy", ["error", "drop"])
@pytest.mark.parametrize("engine", ["numpy", "duckdb"])
def test_empty_nominal_field_is_a_missing_value(tmp_path: Path, engine: str, policy: str) -> None:
    """pyarrow read the empty field as the label "", so under drop the numpy engine dropped a
    record with a missing value (DuckDB and Spark refuse it); 'NA' stays a label (both engines
    drop it as out of domain under drop)."""
    dom = fugu.Domain([fugu.Nominal("c", ["a", "b"]), fugu.Ordinal("x", 0, 4)])
    empty = tmp_path / "empty.csv"
    empty.write_text("c,x\na,1\n,2\nb,3\n")
    with pytest.raises(fugu.DomainError, match="1 of 3 values are"):
        fugu.Histogram.from_file(empty, dom, engine=engine, out_of_domain=policy)
    label = tmp_path / "na.csv"
    label.write_text("c,x\nNA,1\nb,2\n")
    if policy == "drop":
        hist = fugu.Histogram.from_file(label, dom, engine=engine, out_of_domain=policy)
        assert int(hist.counts.sum()) == 1
    else:
        with pytest.raises(fugu.DomainError, match="'NA'"):
            fugu.Histogram.from_file(label, dom, engine=engine, out_of_domain=policy)
