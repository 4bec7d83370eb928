"""Leftovers of the privacy review (not privacy bugs): repeated column names, ragged mappings,
the magnitude guard of grid_laplace, the threadpoolctl dependency."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

import fugu
from fugu.engines import histogram_counts, partial_counts, partial_sums

AGE_SEX = fugu.Domain([fugu.Ordinal("age", 0, 4), fugu.Nominal("sex", ["F", "M"])])
ENGINES = ["numpy", "duckdb"]


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
