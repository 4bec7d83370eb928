"""Review 17: how data comes into the central mechanisms (engines, domain encoding, histograms).

Each test failed before the fix it comes with (see the commit messages). Found and fixed:

* one record read as two, or in another record's cell: a quoted line break cut at a pyarrow
  block boundary (numpy) or split into two records (Spark); a nominal label depending on the
  other records (Arrow vs str() labels, values equal in Python factorised together, integers
  beyond 2**53 read exactly or rounded as the column's other values decided);
* totals taken as public for rows a query chose: ``from_records(engine='spark', sql=...)``
  and records given together with ``sql=`` (the query was counted, the records ignored);
* values changed or read from another column: DuckDB rounding a fraction past its sniffing
  sample, reading the column written ``' age'`` for ``age``, Spark merging non-UTF-8 labels
  into U+FFFD, a float above an ordinal range given a code past its end, columns named like
  the engines' own ``__n`` / ``__fugu_partition``, 2-d columns flattened into more records;
* records swallowed: a quote never closed read as one value to the end of the file, which
  ``out_of_domain='drop'`` dropped silently (numpy, Spark);
* bad input that raised Python's own errors (unsigned columns below zero, bounds beyond
  int64, scalars as columns, options an engine does not take, directories, streams).

Checked and found consistent on numpy, DuckDB and Spark (both methods): BOM, CRLF and CR line
ends, stray quotes inside unquoted fields, spaces around values, NaN/None/empty values,
Parquet types (ints of every width, uint64, decimal, dictionary, large/view strings, dates,
booleans, nulls), pandas nullable dtypes."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest

import fugu

LABELS = fugu.Domain([fugu.Nominal("b", ["x", "a", 'b"', "a\nb"])])


# -- 1. a quoted value holding a line break, at a block boundary of the CSV reader -----------------
def test_numpy_engine_keeps_a_quoted_line_break_across_reader_blocks(tmp_path: Path) -> None:
    """pyarrow's streamed CSV reader cut the file into 16 MiB blocks at line breaks without
    looking at quotes: a record whose quoted value held a line break at a block boundary was
    read as two values (here the label ``b"`` counted, one record lost)."""
    path = tmp_path / "quoted.csv"
    rows = 3_000_000  # 17 MiB: more than one block of the reader
    with open(path, "w", newline="") as f:
        f.write("b\n")
        f.write('"a\nb"\n' * rows)
    hist = fugu.Histogram.from_file(path, LABELS, engine="numpy", out_of_domain="drop")
    assert hist.counts.tolist() == [0, 0, 0, rows]


# -- 2. Spark read a quoted value holding a line break as two records ---------------------------
@pytest.mark.parametrize("method", ["arrow", "jvm"])
def test_spark_reads_a_quoted_line_break_as_one_record(
    spark: Any, tmp_path: Path, method: str
) -> None:
    """Spark's CSV reader (without multiLine) splits records at every line break: in a
    one-column file the record ``"a<LF>b"`` became the two records ``a`` and ``b"`` (one record
    counted twice, in two cells; the total one too many). The other engines read it as one."""
    path = tmp_path / "quoted.csv"
    path.write_text('b\nx\n"a\nb"\nx\n')
    dom = fugu.Domain([fugu.Nominal("b", ["x", "a", 'b"', "a\nb"])])
    expected = [2, 0, 0, 1]
    for engine in ("numpy", "duckdb"):
        assert fugu.Histogram.from_file(path, dom, engine=engine).counts.tolist() == expected
    hist = fugu.Histogram.from_file(
        path, dom, engine="spark", spark=spark, method=method, out_of_domain="drop"
    )
    assert hist.counts.tolist() == expected


def test_spark_reads_a_quoted_line_break_in_a_wide_file(spark: Any, tmp_path: Path) -> None:
    """Two columns: the halves of ``x,"p<LF>q,r"`` have two fields each, so FAILFAST did not
    see them and Spark counted two records, (x, p) and (q, r")."""
    path = tmp_path / "quoted2.csv"
    path.write_text('a,b\nx,"p\nq,r"\ny,p\n')
    dom = fugu.Domain(
        [fugu.Nominal("a", ["x", "y", "q"]), fugu.Nominal("b", ["p", 'r"', "p\nq,r"])]
    )
    want = fugu.Histogram.from_file(path, dom, engine="numpy").counts.tolist()
    assert want == [[0, 0, 1], [1, 0, 0], [0, 0, 0]]
    got = fugu.Histogram.from_file(path, dom, engine="spark", spark=spark, out_of_domain="drop")
    assert got.counts.tolist() == want


# -- 3. from_records(engine="spark", sql=...) counted the query, not the records -----------------
def test_from_records_on_spark_refuses_sql(spark: Any) -> None:
    """``sql=`` went on to the Spark engine, which counted the query's rows instead of the
    records given, and the histogram did not record the query: its total was taken as public
    (``counts_a_subset`` False) although replacing a record can move it in or out of the
    query's result. The records are counted, or the call is refused before anything is read."""
    df = spark.createDataFrame([(0,), (1,), (3,)], ["age"])
    df.createOrReplaceTempView("review17_people")
    dom = fugu.Domain([fugu.Ordinal("age", 0, 3)])
    with pytest.raises(fugu.errors.InvalidParameterError, match="from_file"):
        fugu.Histogram.from_records(
            df, dom, engine="spark", sql="SELECT * FROM review17_people WHERE age >= 1"
        )
    hist = fugu.Histogram.from_file(
        None, dom, engine="spark", sql="SELECT * FROM review17_people WHERE age >= 1"
    )
    assert hist.counts.tolist() == [0, 1, 0, 1] and hist.counts_a_subset


# -- 4. unsigned integer columns and the int64 range of an ordinal attribute ---------------------
@pytest.mark.parametrize("dtype", [np.uint8, np.uint32, np.uint64])
def test_unsigned_columns_on_an_attribute_below_zero(dtype: Any) -> None:
    """``arr - low`` with a negative ``low`` on an unsigned column raised numpy's OverflowError
    (``Python integer -3 out of bounds for uint8``), even for values inside the domain: a
    Parquet file of unsigned integers could not be counted on such a domain."""
    att = fugu.Ordinal("t", -3, 3)
    assert att.encode(np.array([0, 1, 3], dtype)).tolist() == [3, 4, 6]
    assert att.encode(np.array([0, 200], dtype), "clip").tolist() == [3, 6]
    assert att.encode(np.array([0, 200], dtype), "drop").tolist() == [3, -1]
    with pytest.raises(fugu.DomainError, match="1 of 2 values lie outside"):
        att.encode(np.array([0, 200], dtype))
    dom = fugu.Domain([att])
    hist = fugu.Histogram.from_records({"t": np.array([1, 2, 2], dtype)}, dom)
    assert hist.counts.tolist() == [0, 0, 0, 0, 1, 2, 0]


def test_uint64_values_beyond_int64_are_outside_the_domain() -> None:
    top = 2**63 - 1
    att = fugu.Ordinal("t", top - 3, top)
    values = np.array([top, 2**63, 2**64 - 1], np.uint64)
    assert att.encode(values, "clip").tolist() == [3, 3, 3]
    assert att.encode(values, "drop").tolist() == [3, -1, -1]
    with pytest.raises(fugu.DomainError, match="2 of 3 values lie outside.*9223372036854775808"):
        att.encode(values)


@pytest.mark.parametrize(
    ("low", "high"), [(-(2**63) - 1, 0), (0, 2**63), (-(2**62), 2**62), (2**64, 2**64 + 1)]
)
def test_ordinal_bounds_must_fit_64_bit_codes(low: int, high: int) -> None:
    """Bounds beyond int64 gave numpy's OverflowError on the first encode (or codes that wrap
    around); refused where the attribute is made, naming the range."""
    with pytest.raises(fugu.InvalidParameterError, match="2\\*\\*63"):
        fugu.Ordinal("t", low, high)


# -- 5. integers beyond 2**53 given as floats, strings or Python objects --------------------------
BIG = 2**53  # from here on, float64 has no odd integers


def test_a_float_above_the_domain_is_never_a_code_past_its_end() -> None:
    """``arr > high`` compared float64 with high rounded to float64: 2**53 + 4.0 (an exact
    float) on the attribute 2**53..2**53 + 3 passed as inside and got code 4 of 4: the record
    was counted in the next cell of the domain (here a = 1, t = 2**53) instead of refused."""
    dom = fugu.Domain([fugu.Ordinal("a", 0, 1), fugu.Ordinal("t", BIG, BIG + 3)])
    records = {"a": np.array([0]), "t": np.array([float(BIG + 4)])}
    with pytest.raises(fugu.DomainError, match="outside the domain"):
        fugu.Histogram.from_records(records, dom)
    clipped = fugu.Histogram.from_records(records, dom, out_of_domain="clip")
    assert clipped.counts.tolist() == [[0, 0, 0, 1], [0, 0, 0, 0]]
    att = fugu.Ordinal("t", -BIG - 3, -BIG)
    assert att.encode(np.array([float(-BIG - 4)]), "drop").tolist() == [-1]


@pytest.mark.parametrize("kind", ["str", "object"])
def test_integers_beyond_2_to_53_as_text_or_objects_are_exact(kind: str) -> None:
    """Text and Python-object columns went through float64: '9007199254740993' (2**53 + 1)
    was counted as 2**53, and 2**53 + 3 as 2**53 + 4 (past the end of the attribute)."""
    values = [BIG + 1, BIG + 3, BIG]
    arr = np.array([str(v) for v in values]) if kind == "str" else np.array(values, object)
    assert fugu.Ordinal("t", BIG, BIG + 3).encode(arr).tolist() == [1, 3, 0]
    with pytest.raises(fugu.DomainError, match="outside the domain"):
        fugu.Ordinal("t", BIG, BIG + 2).encode(arr)
    mixed = np.array(["1", "2.0", " 3"]) if kind == "str" else np.array([1, 2.0, 3], object)
    assert fugu.Ordinal("t", 0, 3).encode(mixed).tolist() == [1, 2, 3]
    with pytest.raises(fugu.DomainError, match="fractional"):
        fugu.Ordinal("t", 0, 3).encode(np.array([1, 2.5], object if kind == "object" else str))


# -- 6. DuckDB rounded a decimal it met after the rows its sniffer sampled ----------------------
def _late_value_csv(tmp_path: Path, late: str, rows: int = 30_000) -> Path:
    path = tmp_path / "late.csv"
    with open(path, "w") as f:
        f.write("a,b\n")
        f.write("1,x\n" * rows)
        f.write(f"{late},x\n3,x\n")
    return path


def test_duckdb_never_rounds_a_value_its_sniffer_did_not_sample(tmp_path: Path) -> None:
    """DuckDB typed column a BIGINT from the first 20,480 rows and cast a later '2.5' to 3:
    the record was counted in cell 3 where the numpy engine refuses a fractional value."""
    dom = fugu.Domain([fugu.Ordinal("a", 0, 4), fugu.Nominal("b", ["x"])])
    path = _late_value_csv(tmp_path, "2.5")
    for engine in ("numpy", "duckdb"):
        with pytest.raises(fugu.DomainError, match="fractional values such as \\[2.5\\]"):
            fugu.Histogram.from_file(path, dom, engine=engine)
    path = _late_value_csv(tmp_path, "2.0")
    want = [[0], [30_000], [1], [1], [0]]
    for engine in ("numpy", "duckdb"):
        assert fugu.Histogram.from_file(path, dom, engine=engine).counts.tolist() == want
    # binned: 2.5 lies in [0, 2.7); rounded to 3 it was counted in [2.7, 5]
    path = _late_value_csv(tmp_path, "2.5")
    binned = fugu.Domain([fugu.Ordinal("a", edges=[0, 2.7, 5]), fugu.Nominal("b", ["x"])])
    for engine in ("numpy", "duckdb"):
        hist = fugu.Histogram.from_file(path, binned, engine=engine)
        assert hist.counts.tolist() == [[30_001], [1]]


def test_duckdb_batches_carry_the_value_written(tmp_path: Path) -> None:
    """The same on the streamed path of partial_sums (k-means sums, LDP reports)."""
    from fugu.engines import partial_sums

    path = _late_value_csv(tmp_path, "2.5")

    def total(batch: Any) -> np.ndarray:
        return np.array([np.asarray(batch["a"], dtype=np.float64).sum()])

    sums = {e: partial_sums(path, total, columns=["a"], engine=e)[0] for e in ("numpy", "duckdb")}
    assert sums == {"numpy": 30_005.5, "duckdb": 30_005.5}


# -- 7. records and sql= together: the records were ignored --------------------------------------
def test_records_and_a_query_together_are_refused() -> None:
    """With both, the DuckDB engine counted the query's rows and ignored the records given:
    ``histogram_counts({'x': [1, 2, 3, 4]}, dom, sql='SELECT 7 AS x')`` counted one 7. k-means
    fed in-memory points with sql= took n from the points (as public) and the sizes and sums of
    its iterations from the query. Refused, naming both arguments."""
    from fugu.engines import histogram_counts, partial_counts, partial_sums

    dom = fugu.Domain([fugu.Ordinal("x", 0, 9)])
    data = {"x": np.array([1, 2, 3, 4])}
    query = "SELECT 7 AS x"
    calls = [
        lambda: histogram_counts(data, dom, sql=query),
        lambda: histogram_counts(data, dom, engine="duckdb", sql=query),
        lambda: partial_sums(data, lambda b: np.array([len(b["x"])]), columns=["x"], sql=query),
        lambda: partial_counts(data, lambda b: b["x"], 10, columns=["x"], sql=query),
        lambda: partial_counts(data, lambda b: b["x"], 10, columns=["x"], sql=query, group=True),
    ]
    for call in calls:
        with pytest.raises(fugu.errors.InvalidParameterError, match="data=None"):
            call()
    assert histogram_counts(None, dom, sql=query).tolist() == [0] * 7 + [1, 0, 0]
    km = fugu.blowfish.KMeans(
        n_clusters=1, epsilon=1.0, domain=dom, rng=fugu.RandomSource(seed=1), n_iter=1
    )
    with pytest.raises(fugu.errors.InvalidParameterError, match="data=None"):
        km.fit(np.array([[1], [2], [3], [4]]), sql="SELECT 9 AS x")


def test_a_spark_dataframe_and_a_query_together_are_refused(spark: Any) -> None:
    from fugu.engines import partial_sums

    df = spark.createDataFrame([(1,), (2,)], ["x"])
    with pytest.raises(fugu.errors.InvalidParameterError, match="data=None"):
        partial_sums(df, lambda b: np.array([len(b["x"])]), columns=["x"], sql="SELECT 7 AS x")


# -- 8. columns that are not one value per record ------------------------------------------------
def test_a_two_dimensional_column_is_refused_not_flattened_into_more_records() -> None:
    """A (2, 2) column was flattened: two rows counted as four records."""
    dom = fugu.Domain([fugu.Ordinal("age", 0, 4)])
    with pytest.raises(fugu.DomainError, match="'age'.*shape \\(2, 2\\)"):
        fugu.Histogram.from_records({"age": np.array([[1, 2], [3, 4]])}, dom)
    structured = np.zeros(2, dtype=[("age", np.int64, (2,))])
    with pytest.raises(fugu.DomainError, match="'age'.*shape \\(2, 2\\)"):
        fugu.Histogram.from_records(structured, dom)
    # one value per record, as a column vector or a row vector: kept
    for column in (np.array([[1], [2]]), np.array([[1, 2]])):
        hist = fugu.Histogram.from_records({"age": column}, dom)
        assert hist.counts.tolist() == [0, 1, 1, 0, 0]


@pytest.mark.parametrize("value", [3, "3", np.int64(3)])
def test_a_single_value_is_not_a_column(value: Any) -> None:
    """``{'age': 3}`` raised Python's 'len() of unsized object' (a TypeError, no fugu error)."""
    dom = fugu.Domain([fugu.Ordinal("age", 0, 4)])
    with pytest.raises(fugu.DomainError, match="'age' holds a single value"):
        fugu.Histogram.from_records({"age": value}, dom)


def test_rows_given_as_dicts_are_refused_by_name() -> None:
    """A list of row dicts went through the iterable-of-tables path: each row a 'table' of
    scalars, and the same TypeError."""
    from fugu.engines import DomainKey, partial_counts

    dom = fugu.Domain([fugu.Ordinal("age", 0, 4)])
    with pytest.raises(fugu.DomainError, match="'age' holds a single value"):
        partial_counts([{"age": 1}, {"age": 2}], DomainKey(dom), dom.size)


# -- 9. a directory given to the numpy engine ---------------------------------------------------
def test_numpy_engine_names_a_directory(tmp_path: Path) -> None:
    """A directory of Parquet files (as Spark writes them) raised pyarrow's bare OSError."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    folder = tmp_path / "people.parquet"
    folder.mkdir()
    pq.write_table(pa.table({"age": [1, 2]}), folder / "part-0.parquet")
    dom = fugu.Domain([fugu.Ordinal("age", 0, 4)])
    with pytest.raises(fugu.errors.InvalidParameterError, match="directory.*engine='duckdb'"):
        fugu.Histogram.from_file(folder, dom, engine="numpy")
    assert fugu.Histogram.from_file(folder, dom).counts.tolist() == [0, 1, 1, 0, 0]


# -- 10. a nominal attribute's labels do not depend on the array type ---------------------------
@pytest.mark.parametrize(
    "values", [[1.0, 2.5], [True, False], [1, 2], [np.float32(1.5), np.float32(2.0)]]
)
def test_nominal_labels_of_arrow_and_numpy_numbers_agree(values: list[Any]) -> None:
    """Arrow arrays were looked up through Arrow's cast to string, numpy arrays through str():
    Arrow's 1.0 was the label '1' and numpy's '1.0', Arrow's True 'true' and numpy's 'True', so
    Domain.encode({'b': pa.array([1.0])}) and Histogram.from_records of the same column (made
    numpy by columns_of) counted different cells."""
    import pyarrow as pa

    att = fugu.Nominal("b", ["1", "1.0", "2", "2.0", "2.5", "1.5", "true", "True", "False"])
    arrow = att.encode(pa.array(values), "drop").tolist()
    numpy = att.encode(np.array(values), "drop").tolist()
    assert arrow == numpy
    chunked = att.encode(pa.chunked_array([pa.array(values)]), "drop").tolist()
    assert chunked == numpy


def test_a_records_nominal_code_does_not_depend_on_the_other_records() -> None:
    """Arrow's labels were kept only when every value matched one; else all values were looked
    up again through str(). The column [1.0, 2.0] was counted in the cells '1' and '2', and
    with one more record (3.7, dropped) in '1.0' and '2.0': one record moved every other
    record to another cell (with the labels '1' and '2' alone, it dropped them all)."""
    import pyarrow as pa

    att = fugu.Nominal("b", ["1", "2", "1.0", "2.0"])
    two = att.encode(pa.array([1.0, 2.0]), "drop").tolist()
    three = att.encode(pa.array([1.0, 2.0, 3.7]), "drop").tolist()
    assert three[:2] == two == [2, 3]


def test_a_nominal_label_is_the_records_own_value_not_an_equal_ones() -> None:
    """Values were factorised before they were written as labels, so values equal in Python
    shared the label of whichever came first: in an object column 1.0 after 1 was counted as
    '1' (alone: '1.0'), 1 after True as 'True'; and in a float column -0.0 took the label of
    0.0 when 0.0 came first ('0.0'), or gave it its own ('-0.0') when it came first."""
    att = fugu.Nominal("b", ["1", "1.0", "True", "0.0"])
    assert att.encode(np.array([1.0], object)).tolist() == [1]
    assert att.encode(np.array([1, 1.0], object)).tolist() == [0, 1]
    assert att.encode(np.array([True, 1], object)).tolist() == [2, 0]
    for column in ([0.0, -0.0], [-0.0, 0.0]):  # one label for both zeros, in any order
        assert att.encode(np.array(column)).tolist() == [3, 3]


@pytest.mark.parametrize("kind", ["str", "object"])
def test_integers_beyond_2_to_53_mixed_with_other_numbers_are_refused(kind: str) -> None:
    """An all-integer text column is read exactly; one with a value written otherwise ('2.0',
    'inf') went through float64, so 2**53 + 1 was then counted as 2**53: another record
    decided the cell of this one. On a domain reaching 2**53 such a column is refused (the
    fix: give the column as integers); elsewhere nothing beyond 2**53 can be inside it."""
    values = [str(BIG + 1), "2.0"] if kind == "str" else [BIG + 1, 2.0]
    arr = np.array(values, dtype=object if kind == "object" else str)
    att = fugu.Ordinal("t", BIG, BIG + 3)
    assert att.encode(arr[:1], "drop").tolist() == [1]
    with pytest.raises(fugu.DomainError, match="2\\*\\*53"):
        att.encode(arr, "drop")
    small = fugu.Ordinal("t", 0, 3)  # below 2**53: the big value is outside either way
    assert small.encode(arr, "drop").tolist() == [-1, 2]


def test_a_missing_pandas_boolean_is_called_missing() -> None:
    """pandas' nullable boolean column gave its <NA> to the encoder as pd.NA, refused as a
    'non-numeric value such as [<NA>]' (the DuckDB engine: 'NaN/None')."""
    import pandas as pd

    dom = fugu.Domain([fugu.Ordinal("a", 0, 4)])
    frame = pd.DataFrame({"a": pd.array([True, None, False], dtype="boolean")})
    with pytest.raises(fugu.DomainError, match="1 of 3 values are NaN/None"):
        fugu.Histogram.from_records(frame, dom)


# -- 11. the numpy engine's CSV errors say what is wrong --------------------------------------
def test_a_late_value_of_another_type_is_explained(tmp_path: Path) -> None:
    """Every pyarrow CSV error ended with advice about empty lines, also when a value past the
    first 16 MiB did not fit the type pyarrow had given the column there."""
    path = tmp_path / "late.csv"
    with open(path, "w") as f:
        f.write("a,b\n")
        f.write("1,x\n" * 5_000_000)  # 20 MB: past the reader's first block
        f.write("abc,x\n")
    dom = fugu.Domain([fugu.Ordinal("a", 0, 4), fugu.Nominal("b", ["x"])])
    with pytest.raises(fugu.FileFormatError) as err:
        fugu.Histogram.from_file(path, dom, engine="numpy")
    msg = str(err.value)
    assert "empty line" not in msg and "first 16 MiB" in msg and "'a'" in msg, msg


# -- 12. a column named like the DuckDB engine's own count column -------------------------------
def test_a_column_named_like_the_duckdb_count_column_is_counted() -> None:
    """The grouped DuckDB query named its row count __n: an attribute called __n raised
    pyarrow's KeyError ('Field "__n" exists 2 times in schema') where numpy counts it."""
    from fugu.engines import DomainKey, histogram_counts, partial_counts

    dom = fugu.Domain([fugu.Ordinal("__n", 0, 4), fugu.Ordinal("___n", 0, 1)])
    data = {"__n": np.array([1, 1, 1, 4, 4]), "___n": np.array([0, 1, 0, 1, 0])}
    want = histogram_counts(data, dom).tolist()
    assert histogram_counts(data, dom, engine="duckdb").tolist() == want
    got = partial_counts(data, DomainKey(dom), dom.size, engine="duckdb", group=True)
    assert got.tolist() == want


def test_duckdb_says_why_it_cannot_read_a_file_of_quoted_line_breaks(tmp_path: Path) -> None:
    """DuckDB's parallel reader gives up on a large file whose quoted values hold line breaks;
    the error said 'Not implemented Error: ...; fix the file', though the file is valid (the
    numpy engine, the default for CSV, reads it)."""
    path = tmp_path / "quoted.csv"
    with open(path, "w", newline="") as f:
        f.write("b\n")
        f.write('"a\nb"\n' * 3_000_000)
    with pytest.raises(fugu.FileFormatError) as err:
        fugu.Histogram.from_file(path, LABELS, engine="duckdb")
    msg = str(err.value)
    assert "engine='numpy'" in msg and "fix the file" not in msg and "\n" not in msg, msg


# -- 13. DuckDB trims the names of a CSV header -------------------------------------------------
def test_duckdb_reads_the_column_written_with_the_name(tmp_path: Path) -> None:
    """DuckDB trims spaces around header names: in ' age,age' it read the first column for
    'age' (counts 1, 1, 4) where the numpy engine reads the second (3, 3, 0); and a lone ' age'
    was read for 'age' where the numpy engine finds no column 'age'. DuckDB now refuses both
    (the name written is not the name asked for)."""
    dom = fugu.Domain([fugu.Ordinal("age", 0, 4)])
    path = tmp_path / "trimmed.csv"
    path.write_text(" age,age\n1,3\n1,3\n4,0\n")
    assert fugu.Histogram.from_file(path, dom, engine="numpy").counts.tolist() == [1, 0, 0, 2, 0]
    with pytest.raises(fugu.DomainError, match="' age'"):
        fugu.Histogram.from_file(path, dom, engine="duckdb")
    path.write_text(" age,b\n1,3\n")
    for engine in ("numpy", "duckdb"):
        with pytest.raises(fugu.DomainError, match="lacks the column"):
            fugu.Histogram.from_file(path, dom, engine=engine)
    path.write_text("age,b\n1,3\n")  # written as asked: read
    assert fugu.Histogram.from_file(path, dom, engine="duckdb").counts.tolist() == [0, 1, 0, 0, 0]


# -- 14. a CSV that is not UTF-8 ----------------------------------------------------------------
def _latin1_csv(tmp_path: Path) -> Path:
    path = tmp_path / "latin1.csv"
    path.write_bytes("b\ncaf\u00e9\ncaf\u00e8\nx\n".encode("latin-1"))
    return path


def test_numpy_engine_says_a_csv_is_not_utf8(tmp_path: Path) -> None:
    path = _latin1_csv(tmp_path)
    dom = fugu.Domain([fugu.Nominal("b", ["caf\u00e9", "x"])])
    with pytest.raises(fugu.FileFormatError) as err:
        fugu.Histogram.from_file(path, dom, engine="numpy")
    assert "not UTF-8" in str(err.value) and "type" not in str(err.value), str(err.value)


def test_spark_refuses_a_csv_that_is_not_utf8(spark: Any, tmp_path: Path) -> None:
    """Spark decodes invalid UTF-8 as U+FFFD: 'café' and 'cafè' written in Latin-1 both became
    'caf\ufffd', two values counted as one (or, with out_of_domain='drop', both dropped
    silently) where the numpy and DuckDB engines refuse the file."""
    path = _latin1_csv(tmp_path)
    dom = fugu.Domain([fugu.Nominal("b", ["caf\u00e9", "x", "caf\ufffd"])])
    with pytest.raises(fugu.FileFormatError, match="not UTF-8"):
        fugu.Histogram.from_file(path, dom, engine="spark", spark=spark, out_of_domain="drop")


# -- 15. a column named like the Spark engine's partition column ------------------------------
def test_a_column_named_like_the_spark_partition_column_is_counted(spark: Any) -> None:
    """When partitions were coalesced, withColumn('__fugu_partition', spark_partition_id())
    replaced a column of that name: its values were counted as partition ids."""
    dom = fugu.Domain([fugu.Ordinal("__fugu_partition", 0, 9)])
    df = spark.createDataFrame([(7,)] * 40, ["__fugu_partition"]).repartition(4)
    hist = fugu.Histogram.from_records(df, dom, engine="spark", method="arrow")
    assert hist.counts.tolist() == [0] * 7 + [40, 0, 0]


# -- 16. an option the engine does not take ------------------------------------------------------
@pytest.mark.parametrize(
    ("engine", "option"),
    [("numpy", "threads"), ("duckdb", "batch_rows"), ("duckdb", "out_of_domian")],
)
def test_from_file_names_an_option_the_engine_does_not_take(
    tmp_path: Path, engine: str, option: str
) -> None:
    """Python's TypeError ('histogram() got an unexpected keyword argument ...'), with neither
    the engine's options nor, for a misspelling, the option meant."""
    path = tmp_path / "a.csv"
    path.write_text("a\n1\n")
    dom = fugu.Domain([fugu.Ordinal("a", 0, 4)])
    with pytest.raises(fugu.errors.InvalidParameterError, match=f"{option}.*{engine}") as err:
        fugu.Histogram.from_file(path, dom, engine=engine, **{option: 2})
    if option == "out_of_domian":
        assert "out_of_domain" in str(err.value)


# -- 17. a missing value is counted in rows on every engine --------------------------------------
def test_grouped_engines_count_missing_values_in_rows(tmp_path: Path) -> None:
    """DuckDB (and Spark's JVM method) counted missing values among the distinct values they
    grouped: '1 of 3 values are NaN/None' for a file of 30,002 rows, where the numpy engine
    says '1 of 30002'."""
    path = tmp_path / "gap.csv"
    with open(path, "w") as f:
        f.write("a,b\n")
        f.write("1,x\n" * 30_000)
        f.write(",x\n3,x\n")
    dom = fugu.Domain([fugu.Ordinal("a", 0, 4), fugu.Nominal("b", ["x"])])
    messages = []
    for engine in ("numpy", "duckdb"):
        with pytest.raises(fugu.DomainError) as err:
            fugu.Histogram.from_file(path, dom, engine=engine)
        messages.append(str(err.value))
    assert messages[0] == messages[1] and "1 of 30002 values" in messages[0], messages


def test_duckdb_names_an_attribute_written_with_spaces(tmp_path: Path) -> None:
    """An attribute whose name has spaces around it: DuckDB cannot read it (it trims header
    names); refused by name, not with a binder error."""
    path = tmp_path / "spaced.csv"
    path.write_text(" age,b\n1,3\n")
    dom = fugu.Domain([fugu.Ordinal(" age", 0, 4)])
    assert fugu.Histogram.from_file(path, dom, engine="numpy").counts.tolist() == [0, 1, 0, 0, 0]
    with pytest.raises(fugu.DomainError, match="trims spaces.*engine='numpy'"):
        fugu.Histogram.from_file(path, dom, engine="duckdb")


def test_from_records_on_spark_names_an_option_it_does_not_take() -> None:
    """Python's TypeError from the Spark engine's histogram() (no fugu error, no fix)."""
    dom = fugu.Domain([fugu.Ordinal("a", 0, 4)])
    with pytest.raises(fugu.errors.InvalidParameterError, match="'methd'.*'method'"):
        fugu.Histogram.from_records({"a": [1]}, dom, engine="spark", methd="jvm")


def test_duckdb_reads_a_column_vector_and_refuses_a_matrix_as_numpy_does() -> None:
    """The DuckDB engine made a 2-d column an Arrow list column: (n, 1) was refused as
    'non-numeric values such as [array([2]), ...]', (n, 2) raised numpy's ValueError ('truth
    value of an array ... is ambiguous')."""
    from fugu.engines import histogram_counts

    dom = fugu.Domain([fugu.Ordinal("age", 0, 4)])
    vector = {"age": np.array([[1], [2]])}
    assert histogram_counts(vector, dom, engine="duckdb").tolist() == [0, 1, 1, 0, 0]
    with pytest.raises(fugu.DomainError, match="shape \\(2, 2\\)"):
        histogram_counts({"age": np.array([[1, 2], [3, 4]])}, dom, engine="duckdb")


# -- 18. streams and lazy tables --------------------------------------------------------------
def test_an_arrow_batch_reader_is_read_batch_by_batch() -> None:
    """A pyarrow RecordBatchReader (a stream of batches) was taken for a table and raised
    AttributeError ('... has no attribute column_names')."""
    import pyarrow as pa

    from fugu.engines import histogram_counts

    dom = fugu.Domain([fugu.Ordinal("a", 0, 4)])
    table = pa.table({"a": [1, 2, 2, 4]})
    reader = pa.RecordBatchReader.from_batches(table.schema, table.to_batches(max_chunksize=2))
    assert histogram_counts(reader, dom).tolist() == [0, 1, 2, 0, 1]


def test_a_polars_lazy_frame_is_counted() -> None:
    """numpy engine: "LazyFrame is not subscriptable" (a TypeError); the DuckDB engine counts it."""
    pl = pytest.importorskip("polars")
    dom = fugu.Domain([fugu.Ordinal("a", 0, 4)])
    lazy = pl.DataFrame({"a": [1, 2, 2]}).lazy()
    assert fugu.Histogram.from_records(lazy, dom).counts.tolist() == [0, 1, 2, 0, 0]


# -- 19. a quote that is never closed ------------------------------------------------------------
OPEN_QUOTE = 'b\nx\n"a\nb\nx\n'  # the quote opened on line 3 runs to the end of the file
STRAY = "5'11\""  # a quote inside an unquoted value: read as written by every engine


def test_numpy_engine_refuses_a_quote_never_closed(tmp_path: Path) -> None:
    """pyarrow reads an unclosed quote as one value running to the end of the file: every
    record after it became part of one label, which out_of_domain='drop' dropped silently
    (DuckDB refuses the file; with 'error' the label is refused as outside the domain). Stray
    quotes inside unquoted values are still read."""
    from fugu.engines import histogram_counts

    path = tmp_path / "open.csv"
    path.write_text(OPEN_QUOTE)
    dom = fugu.Domain([fugu.Nominal("b", ["x", "a", "b", STRAY])])
    for engine in ("numpy", "duckdb"):
        with pytest.raises(fugu.FileFormatError, match="quote"):
            fugu.Histogram.from_file(path, dom, engine=engine, out_of_domain="drop")
    with pytest.raises(fugu.FileFormatError, match="quote"):
        histogram_counts(path, dom, out_of_domain="drop")
    with pytest.raises(fugu.DomainError, match="outside the domain"):
        fugu.Histogram.from_file(path, dom, engine="numpy")
    path.write_text(f"b\n{STRAY}\nx\nx\n")
    for engine in ("numpy", "duckdb"):
        hist = fugu.Histogram.from_file(path, dom, engine=engine)
        assert hist.counts.tolist() == [2, 0, 0, 1]


def test_spark_refuses_a_quote_never_closed_when_dropping(spark: Any, tmp_path: Path) -> None:
    """Read with multiLine (a line has an odd number of quotes), Spark too took the rest of
    the file for one value, which out_of_domain='drop' dropped silently."""
    path = tmp_path / "open.csv"
    path.write_text(OPEN_QUOTE)
    dom = fugu.Domain([fugu.Nominal("b", ["x", "a", "b", STRAY])])
    with pytest.raises(fugu.FileFormatError, match="quote"):
        fugu.Histogram.from_file(path, dom, engine="spark", spark=spark, out_of_domain="drop")
    path.write_text(f"b\n{STRAY}\nx\nx\n")
    hist = fugu.Histogram.from_file(path, dom, engine="spark", spark=spark)
    assert hist.counts.tolist() == [2, 0, 0, 1]


def test_arrow_array_keeps_trailing_nul_bytes_of_a_list() -> None:
    """Review 18's note: report columns given as Python lists of bytes reach Arrow through
    ``_arrow_array`` on the Spark path too (aggregator.absorb); numpy's fixed-width array
    dropped trailing NUL bytes, so an all-zero OUE bit vector became b'' and was rejected."""
    from fugu.engines.duckdb_engine import _arrow_array

    vals = [b"\x01\x00", b"\x00\x00", b"ab"]
    assert _arrow_array(vals).to_pylist() == vals
    assert _arrow_array(["a", "b"]).to_pylist() == ["a", "b"]


def test_from_records_records_the_engine_that_counted() -> None:
    """Review 17's note: Histogram.from_records(engine='duckdb') counts in-memory records with
    numpy but recorded 'duckdb' as the engine in the release's data options."""
    dom = fugu.Domain([fugu.Ordinal("x", 0, 3)])
    h = fugu.Histogram.from_records({"x": [0, 1, 1, 3]}, dom, engine="duckdb")
    assert h.data_options["engine"] == "numpy"
    assert h.counts.tolist() == [1, 2, 0, 1]


@pytest.mark.parametrize("engine", ["numpy", "duckdb"])
@pytest.mark.parametrize("text", ["1_0", "\u0663"])  # digit grouping; ARABIC-INDIC DIGIT THREE
def test_loose_numerals_are_refused_as_spark_does(tmp_path: Path, engine: str, text: str) -> None:
    """Review 17's note: numpy and DuckDB counted '1_0' as 10 and '٣' as 3 (Python's int()
    reads both) where Spark refuses them: the same file gave different counts per engine. Now
    refused as non-numeric, naming the value; plain numbers written as text still count."""
    dom = fugu.Domain([fugu.Ordinal("x", 0, 20)])
    path = tmp_path / "x.csv"
    path.write_text(f"x\n{text}\n2\n", encoding="utf-8")
    with pytest.raises(fugu.errors.DomainError, match="non-numeric"):
        fugu.Histogram.from_file(path, dom, engine=engine)
    ok = fugu.Histogram.from_records({"x": np.array(["1", "2", "10"])}, dom)
    assert ok.counts.nonzero()[0].tolist() == [1, 2, 10]
