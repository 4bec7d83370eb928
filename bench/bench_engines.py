"""Benchmark of the counting engines: histograms of 10^7 rows x 3 attributes (domain 64 each)
from memory and from Parquet, per engine, and HDG-style aggregation of 10^7 LDP reports, numpy
vs Spark. Every time is printed with its ratio to ``np.bincount`` on the flat cell index, run in
the same process on the same data; every engine's result is checked cell by cell.

    python bench/bench_engines.py            # 10^7 rows (a few minutes with Spark)
    python bench/bench_engines.py --quick    # 10^6 rows
    python bench/bench_engines.py --no-spark

Times are the best of ``--repeat`` runs (Spark: the first, cold run is shown separately).
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

import fugu
from fugu.engines import histogram_counts, partial_counts

CELLS = 64


def make_data(n: int, seed: int = 0) -> dict[str, np.ndarray]:
    """Skewed a (geometric), b correlated with a, c uniform: the survey's workload."""
    rng = np.random.default_rng(seed)
    a = np.minimum(rng.geometric(0.08, n) - 1, CELLS - 1).astype(np.int32)
    b = ((a + rng.integers(-4, 5, n)) % CELLS).astype(np.int32)
    c = rng.integers(0, CELLS, n).astype(np.int32)
    return {"a": a, "b": b, "c": c}


def best(fn: Callable[[], Any], repeat: int) -> tuple[float, Any]:
    times, out = [], None
    for _ in range(repeat):
        t = time.perf_counter()
        out = fn()
        times.append(time.perf_counter() - t)
    return min(times), out


class Table:
    def __init__(self, baseline: float) -> None:
        self.baseline = baseline
        self.rows: list[tuple[str, float, str]] = []

    def add(self, name: str, seconds: float, ok: bool, note: str = "") -> None:
        self.rows.append((name, seconds, ("" if ok else "MISMATCH ") + note))
        print(f"  {name:<52} {seconds:8.3f} s  x{seconds / self.baseline:7.1f}  {note}", flush=True)


# HDG-style reports: m groups (3 one-dimensional grids of 64 cells, 3 pair grids of 8x8), each
# report (group, y) with y a cell of its group's grid; support = bincount(offset[group] + y).
GRID_CELLS = np.array([64, 64, 64, 64, 64, 64])
OFFSETS = np.concatenate([[0], np.cumsum(GRID_CELLS)[:-1]])


def hdg_key(batch: Any) -> np.ndarray:
    return OFFSETS[np.asarray(batch["group"])] + np.asarray(batch["y"])


def make_reports(n: int, seed: int = 1) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    group = rng.permutation(np.arange(n) % len(GRID_CELLS)).astype(np.int64)
    y = rng.integers(0, 64, n).astype(np.int64)
    return {"group": group, "y": y}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="10^6 rows instead of 10^7")
    ap.add_argument("--rows", type=int, default=None)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--no-spark", action="store_true")
    args = ap.parse_args(argv)
    n = args.rows or (10**6 if args.quick else 10**7)
    dom = fugu.Domain([fugu.Ordinal(x, 0, CELLS - 1) for x in "abc"])
    data = make_data(n)
    print(
        f"fugu engine benchmark: {n:,} rows x 3 attributes, domain {CELLS}^3 = {dom.size:,} cells; "
        f"load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs"
    )

    def np_bincount() -> np.ndarray:
        flat = (data["a"].astype(np.int64) * CELLS + data["b"]) * CELLS + data["c"]
        return np.bincount(flat, minlength=dom.size)

    t0, ref = best(np_bincount, args.repeat)
    tab = Table(t0)
    print("\nfrom memory")
    tab.add("np.bincount on the flat index (baseline)", t0, True)
    t, out = best(lambda: histogram_counts(data, dom), args.repeat)
    tab.add("fugu numpy engine (Domain.encode + chunked bincount)", t, np.array_equal(out, ref))
    table = pa.table(data)
    t, out = best(lambda: histogram_counts(table, dom, engine="duckdb"), args.repeat)
    tab.add("fugu duckdb engine (Arrow table, GROUP BY ALL)", t, np.array_equal(out, ref))

    tmp = Path(tempfile.mkdtemp(prefix="fugu-bench-"))
    path = tmp / "data.parquet"
    pq.write_table(table, path, row_group_size=max(n // 10, 1))
    print(f"\nfrom Parquet ({path.stat().st_size / 2**20:.1f} MiB, 10 row groups)")
    t, out = best(lambda: histogram_counts(path, dom), args.repeat)
    tab.add("fugu numpy engine (row group by row group)", t, np.array_equal(out, ref))
    t, out = best(lambda: histogram_counts(path, dom, engine="duckdb"), args.repeat)
    tab.add("fugu duckdb engine (read_parquet, GROUP BY ALL)", t, np.array_equal(out, ref))

    import pyarrow.csv as pcsv

    cpath = tmp / "data.csv"
    pcsv.write_csv(table, cpath)
    print(f"\nfrom CSV ({cpath.stat().st_size / 2**20:.1f} MiB)")
    t, out = best(lambda: histogram_counts(cpath, dom), args.repeat)
    tab.add("fugu numpy engine (pyarrow streaming CSV reader)", t, np.array_equal(out, ref))
    t, out = best(lambda: histogram_counts(cpath, dom, engine="duckdb"), args.repeat)
    tab.add("fugu duckdb engine (read_csv, GROUP BY ALL)", t, np.array_equal(out, ref))

    reports = make_reports(n)
    rpath = tmp / "reports.parquet"
    pq.write_table(pa.table(reports), rpath, row_group_size=max(n // 10, 1))
    size = int(GRID_CELLS.sum())
    ref_support = np.bincount(hdg_key(reports), minlength=size)
    print(
        f"\nHDG-style aggregation of {n:,} reports "
        f"(toy key offset[group] + y over {size} grid cells)"
    )
    t, out = best(
        lambda: partial_counts(reports, hdg_key, size, columns=["group", "y"]), args.repeat
    )
    tab.add("numpy engine, in memory", t, np.array_equal(out, ref_support))
    t, out = best(lambda: partial_counts(rpath, hdg_key, size, columns=["group", "y"]), args.repeat)
    tab.add("numpy engine, Parquet", t, np.array_equal(out, ref_support))

    if not args.no_spark:
        run_spark(args, dom, data, table, path, rpath, ref, ref_support, size, tab)
    return 0


def run_spark(
    args: Any,
    dom: Any,
    data: Any,
    table: Any,
    path: Path,
    rpath: Path,
    ref: np.ndarray,
    ref_support: np.ndarray,
    size: int,
    tab: Table,
) -> None:
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    from pyspark.sql import SparkSession

    from fugu.engines import spark as se

    t = time.perf_counter()
    spark = (
        SparkSession.builder.master("local[2]")
        .appName("fugu-bench")
        .config("spark.driver.memory", "4g")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.shuffle.partitions", "4")
        .getOrCreate()
    )
    spark.sparkContext.setLogLevel("ERROR")
    print(f"\nSpark local[2] session start: {time.perf_counter() - t:.1f} s")

    def spark_runs(label: str, fn: Callable[[], Any], expect: np.ndarray) -> None:
        t = time.perf_counter()
        out = fn()
        cold = time.perf_counter() - t
        tab.add(f"{label}, first run", cold, np.array_equal(out, expect))
        t, out = best(fn, args.repeat)
        tab.add(f"{label}, warm", t, np.array_equal(out, expect))

    df = spark.read.parquet(str(path))
    print("Spark from Parquet")
    spark_runs("spark jvm groupBy", lambda: se.histogram(df, dom, method="jvm"), ref)
    spark_runs("spark mapInArrow + bincount", lambda: se.histogram(df, dom, method="arrow"), ref)
    print("HDG-style aggregation on Spark (reports from Parquet)")
    rdf = spark.read.parquet(str(rpath))
    spark_runs(
        "spark mapInArrow partial counts",
        lambda: partial_counts(rdf, hdg_key, size, columns=["group", "y"], engine="spark"),
        ref_support,
    )
    print("Spark from memory (createDataFrame of the Arrow table, cached)")
    try:
        t = time.perf_counter()
        mem = se.to_dataframe(table, spark).cache()
        mem.count()
        tab.add("createDataFrame + cache (not counting)", time.perf_counter() - t, True)
        spark_runs("spark jvm groupBy (cached)", lambda: se.histogram(mem, dom, method="jvm"), ref)
        spark_runs(
            "spark mapInArrow + bincount (cached)",
            lambda: se.histogram(mem, dom, method="arrow"),
            ref,
        )
        mem.unpersist()
    except Exception as exc:  # noqa: BLE001 - report and go on
        # (before issue 16.5 was fixed, the cached mapInArrow run exhausted the 4 GiB heap here:
        # 1,000 partitions each sent a 2 MiB partial to the driver at once)
        print(f"  failed: {type(exc).__name__}: {str(exc).splitlines()[0][:200]}")
    spark.stop()


if __name__ == "__main__":
    sys.exit(main())
