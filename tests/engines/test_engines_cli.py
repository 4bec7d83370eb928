"""``fugu engines`` (listing and the Spark executor check). Deterministic."""

from __future__ import annotations

import json
from typing import Any

import click
import pytest
from click.testing import CliRunner


def _cli() -> click.Group:
    from fugu.cli import cli
    from fugu.cli import engines as engines_cli

    if "engines" not in cli.commands:
        engines_cli.register(cli)
    return cli


def test_engines_lists_versions() -> None:
    res = CliRunner().invoke(_cli(), ["engines", "--json"])
    assert res.exit_code == 0, res.output
    info = json.loads(res.output)
    assert set(info) == {"numpy", "duckdb", "spark"}
    assert info["numpy"]["version"]


@pytest.mark.spark
def test_engines_check_runs_on_executors(spark: Any) -> None:
    res = CliRunner().invoke(_cli(), ["engines", "check", "--spark-master", "local[2]"])
    assert res.exit_code == 0, res.output
    assert "10,000 rows counted" in res.output
