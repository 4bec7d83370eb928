"""Report building blocks: known answers, a property of the coarse grid, and CLI errors."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import fugu
from fugu.cli import cli, main
from fugu.report.plain import plain_words, posterior_bound
from fugu.report.plots import coarse_grid_bounds
from fugu.report.release_report import noise_scale


def _register() -> None:
    if "report" not in cli.commands:
        from fugu.cli import report

        report.register(cli)


def test_posterior_bound_known_answers() -> None:
    assert posterior_bound(1.0) == pytest.approx(math.e / (1 + math.e))
    assert posterior_bound(0.0) == pytest.approx(0.5)
    assert posterior_bound(math.log(3), prior=0.25) == pytest.approx(0.5)


@pytest.mark.parametrize(
    ("model", "who"),
    [
        ("central-dp", "every person"),
        ("blowfish", "secret pairs"),
        ("node-dp", "all of its edges"),
        ("edge-dp", "single relationship"),
        ("ldp", "before their data leaves their device"),
    ],
)
def test_plain_words_per_model(model: str, who: str) -> None:
    g = fugu.Guarantee(model, 0.5, "n", "m", parameters={"policy": "line"}, private=False)
    w = plain_words(g)
    assert who in w["protects"]
    assert "62%" in w["cannot"]  # e^0.5 / (1 + e^0.5) = 0.622
    assert "NOT PRIVATE" in w["caveats"]


def test_noise_scale_laws() -> None:
    assert noise_scale("blowfish", 0.25) == pytest.approx(4.0)
    assert noise_scale("ldp", 1.0) == pytest.approx(math.exp(0.5) / math.expm1(1.0))
    assert noise_scale("node-dp", 1.0) is None


@settings(max_examples=60, deadline=None)
@given(
    shape=st.lists(st.integers(1, 9), min_size=2, max_size=4),
    bins=st.tuples(st.integers(1, 12), st.integers(1, 12)),
    data=st.data(),
)
def test_coarse_grid_partitions_the_cube(
    shape: list[int], bins: tuple[int, int], data: st.DataObject
) -> None:
    axes = tuple(sorted(data.draw(st.permutations(range(len(shape))))[:2]))
    bounds, edges = coarse_grid_bounds(shape, axes, bins)  # type: ignore[arg-type]
    cube = np.arange(np.prod(shape), dtype=float).reshape(shape) + 1
    answers = fugu.queries.PrefixSums(cube).answer(bounds)
    assert answers.sum() == pytest.approx(cube.sum())  # bins cover every cell exactly once
    assert len(bounds) == (len(edges[0]) - 1) * (len(edges[1]) - 1)
    assert np.all(bounds[..., 0] < bounds[..., 1])


def test_report_cli_errors(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    _register()
    bad = tmp_path / "x.npz"
    bad.write_text("not a release")
    assert main(["report", str(bad), "--out", str(tmp_path / "r.html")]) == 2
    assert "is not a fugu release file" in capsys.readouterr().err
    assert main(["report", str(tmp_path / "missing.npz")]) == 2
    assert "does not exist" in capsys.readouterr().err
    assert main(["demo", "--models", "central,quantum", "--no-report"]) == 2
    assert "models must be a non-empty subset" in capsys.readouterr().err


def test_report_cli_json(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    _register()
    dom = fugu.Domain([fugu.Ordinal("a", 0, 15), fugu.Ordinal("b", 0, 7)])
    hist = fugu.Histogram(np.arange(128).reshape(16, 8), dom)
    rel = fugu.central.laplace(hist, 1.0, rng=fugu.RandomSource(seed=1))
    path = rel.save(tmp_path / "rel.npz")
    out = tmp_path / "r.html"
    assert main(["report", str(path), "--out", str(out), "--queries", "50", "--json"]) == 0
    assert '"report"' in capsys.readouterr().out
    html = out.read_text()
    assert "NOT PRIVATE" in html and html.count("data:image/png;base64,") >= 2
    assert "No true data was given" in html
