"""A release from a Parquet file larger than the memory the process may use.

The file holds 20 * 2**20 rows of three uncompressed, un-dictionary-encoded int64 columns
(~480 MiB on disk, the same decoded). A child process limits its data segment (RLIMIT_DATA: heap
and private anonymous mappings, where every array and Arrow buffer lives) to 400 MiB — less than
the file — then counts it with the numpy engine (row group by row group) and the DuckDB engine
(streaming GROUP BY) and makes a Laplace release. A control child that reads the whole table into
memory under the same limit must fail, which shows the limit bites.

Deterministic (fixed seed; the counts are compared exactly with a checksum computed here in
streaming fashion): false-failure rate 0.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

CHILD = Path(__file__).with_name("outofcore_child.py")
ROW_GROUP = 1 << 20
N_GROUPS = 20
LIMIT_MB = 400


@pytest.fixture(scope="module")
def big_file(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, int]:
    """Write the file one row group at a time; return it with the expected checksum."""
    path = tmp_path_factory.mktemp("outofcore") / "big.parquet"
    schema = pa.schema([(c, pa.int64()) for c in "abc"])
    rng = np.random.default_rng(11)
    counts = np.zeros(64**3, dtype=np.int64)
    block = {c: rng.integers(0, 64, ROW_GROUP) for c in "abc"}
    with pq.ParquetWriter(path, schema, compression="none", use_dictionary=False) as writer:
        for g in range(N_GROUPS):
            # cheap variation between row groups: rotate the columns' values
            cols = {c: (v + g) % 64 for c, v in block.items()}
            writer.write_table(pa.table(cols, schema=schema), row_group_size=ROW_GROUP)
            counts += np.bincount((cols["a"] * 64 + cols["b"]) * 64 + cols["c"], minlength=64**3)
    checksum = int((counts * np.arange(64**3) % 1000003).sum())
    assert path.stat().st_size > LIMIT_MB * 2**20
    return path, checksum


def _run(path: Path, engine: str, *extra: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, str(CHILD), str(path), engine, str(LIMIT_MB), *extra],
        capture_output=True,
        text=True,
        timeout=600,
    )


@pytest.mark.parametrize("engine", ["numpy", "duckdb"])
def test_release_from_file_larger_than_memory(big_file: tuple[Path, int], engine: str) -> None:
    path, checksum = big_file
    res = _run(path, engine)
    assert res.returncode == 0, res.stderr[-2000:]
    out = dict(kv.split("=") for kv in res.stdout.split())
    assert int(out["total"]) == N_GROUPS * ROW_GROUP
    assert int(out["checksum"]) == checksum


def test_naive_read_fails_under_the_same_limit(big_file: tuple[Path, int]) -> None:
    res = _run(big_file[0], "numpy", "naive")
    assert res.returncode != 0
    assert "MemoryError" in res.stderr or "memory" in res.stderr.lower()
