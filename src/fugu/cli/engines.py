"""``fugu engines``: which counting engines are available, and a Spark cluster check."""

from __future__ import annotations

import importlib
from typing import Any

import click
import numpy as np

from ._common import emit, table


def _version(module: str) -> str | None:
    try:
        mod = importlib.import_module(module)
    except ImportError:
        return None
    return str(getattr(mod, "__version__", "installed"))


def _executor_probe(batch: Any) -> Any:
    """Runs on executors: counts rows and proves fugu, numpy and pyarrow import there."""
    import numpy as np

    import fugu

    assert fugu.__version__
    return np.array([len(batch["id"])], dtype=np.int64)


def register(cli: click.Group) -> None:
    @cli.group(invoke_without_command=True)
    @click.option("--json", "as_json", is_flag=True)
    @click.pass_context
    def engines(ctx: click.Context, as_json: bool) -> None:
        """Counting engines (numpy, duckdb, spark): what is installed, and a cluster check."""
        if ctx.invoked_subcommand is not None:
            return
        rows = {
            "numpy": _version("numpy"),
            "duckdb": _version("duckdb"),
            "spark": _version("pyspark"),
        }
        uses = {
            "numpy": "default: in-memory tables, CSV/Parquet files (bounded memory)",
            "duckdb": "SQL input (--sql), files, in-memory tables",
            "spark": "Spark DataFrames and files on a cluster (pip install 'fugu[spark]')",
        }
        emit(
            {k: {"version": v, "use": uses[k]} for k, v in rows.items()},
            as_json,
            lambda: table(
                [[k, v or "not installed", uses[k]] for k, v in rows.items()],
                ["engine", "version", "use"],
            ),
        )

    @engines.command("check")
    @click.option("--spark-master", default="local[2]", show_default=True, help="Spark master URL.")
    @click.option(
        "--partitions",
        type=click.IntRange(min=1),
        default=4,
        show_default=True,
        help="Partitions of the probe data (each runs fugu's counting on an executor).",
    )
    def check(spark_master: str, partitions: int) -> None:
        """Start Spark on MASTER and run fugu's counting on its executors (no data is read)."""
        from ..engines import partial_sums
        from ..engines import spark as spark_engine

        spark = spark_engine.session(spark_master)
        df = spark.range(0, 10_000, numPartitions=partitions)
        out = partial_sums(df, _executor_probe, columns=["id"], engine="spark")
        click.echo(
            f"spark {spark.version} on {spark.sparkContext.master}: executors ran fugu's counting "
            f"on {partitions} partitions ({int(np.asarray(out)[0]):,} rows counted)"
        )
