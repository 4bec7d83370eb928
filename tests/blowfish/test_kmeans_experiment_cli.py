"""The objective-ratio experiment helper and the ``fugu kmeans`` command."""

from __future__ import annotations

import json

import numpy as np
import pytest

import fugu
from fugu.report.kmeans_experiment import PAPER_EPSILONS, objective_ratio_experiment

DOM = fugu.Domain([fugu.Ordinal("lat", 0, 99), fugu.Ordinal("lon", 0, 79)])


def points(n: int = 1500, seed: int = 0) -> np.ndarray:
    gen = np.random.default_rng(seed)
    centres = np.array([[15, 15], [80, 20], [50, 65], [20, 70]])
    pts = centres[gen.integers(0, 4, n)] + gen.normal(0, 5, (n, 2))
    return np.clip(np.rint(pts), 0, [99, 79])


def test_experiment_shapes_and_paper_trend() -> None:
    """Paper mode, small θ: Blowfish ratios below Laplace at small ε (8 repetitions; the gap at
    ε = 0.1 is an order of magnitude, so the seeded test is far from its threshold)."""
    res = objective_ratio_experiment(
        points(),
        DOM,
        [None, "distance:theta=5", "partition:lat=10,lon=10"],
        epsilons=[0.1, 1.0],
        repetitions=8,
        sensitivity="paper",
        seed=3,
        dataset="blobs",
    )
    assert res.policies == ["laplace", "distance:theta=5", "partition:lat=10,lon=10"]
    assert len(res.rows) == 6
    assert res.sensitivities["laplace"] == (2.0, 178.0)
    assert res.sensitivities["distance:theta=5"] == (2.0, 5.0)
    for r in res.rows:
        assert r.q25 <= r.median <= r.q75 and r.mean > 0.5
    assert res.row("distance:theta=5", 0.1).mean < res.row("laplace", 0.1).mean / 3
    assert res.laplace_gain("distance:theta=5", 0.1) > 3
    assert res.row("laplace", 0.1).mean > res.row("laplace", 1.0).mean
    text = res.table()
    assert "laplace" in text and "0.1" in text
    assert "[" in res.quartile_table()
    json.dumps(res.to_dict())
    rep = fugu.report.Report("t")
    res.add_to_report(rep)
    assert "<img" in rep.render()


def test_experiment_is_reproducible_and_validates() -> None:
    a = objective_ratio_experiment(points(200), DOM, [None], epsilons=[0.5], repetitions=2, seed=1)
    b = objective_ratio_experiment(points(200), DOM, [None], epsilons=[0.5], repetitions=2, seed=1)
    assert a.rows == b.rows
    assert PAPER_EPSILONS == (0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 1.0)
    with pytest.raises(fugu.errors.InvalidParameterError):
        objective_ratio_experiment(points(200), DOM, [], repetitions=1)
    with pytest.raises(fugu.errors.InvalidParameterError):
        objective_ratio_experiment(points(200)[:, :1], DOM, [None], repetitions=1)


@pytest.fixture()
def csv_file(tmp_path):
    p = tmp_path / "pts.csv"
    X = points(400)
    p.write_text("lat,lon,name\n" + "\n".join(f"{a:.0f},{b:.0f},x" for a, b in X))
    return p


def _run(*args: str) -> tuple[int, str]:
    """Run the real entry point (one-line errors, exit codes) and capture what it prints."""
    import contextlib
    import io

    from fugu.cli import main

    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(list(args))
    return code, out.getvalue() + err.getvalue()


def test_cli_prints_and_writes_centres(csv_file, tmp_path) -> None:
    out_csv, out_json, report = tmp_path / "c.csv", tmp_path / "c.json", tmp_path / "r.html"
    code, text = _run(
        "kmeans",
        "--data",
        str(csv_file),
        "--columns",
        "lat:0..99,lon:0..79",
        "--k",
        "4",
        "--epsilon",
        "1",
        "--policy",
        "distance:theta=5",
        "--seed",
        "2",
        "--out",
        str(out_csv),
        "--report",
        str(report),
        "--repetitions",
        "2",
    )
    assert code == 0, text
    assert "cluster" in text and "distance:theta=5" in text and "NOT PRIVATE" in text
    rows = out_csv.read_text().strip().splitlines()
    assert rows[0] == "cluster,lat,lon" and len(rows) == 5
    assert "<img" in report.read_text()
    code, text = _run(
        "kmeans",
        "--data",
        str(csv_file),
        "-c",
        "lat:0..99,lon:0..79",
        "--k",
        "3",
        "-e",
        "0.5",
        "--out",
        str(out_json),
        "--json",
    )
    assert code == 0, text
    data = json.loads(out_json.read_text())
    assert len(data["centres"]) == 3 and data["guarantee"]["model"] == "central-dp"


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--columns", "lat:0..9,lon:0..79"], "outside the domain"),
        (["--columns", "lat:0..99,lon:0..79", "--k", "0"], "n_clusters"),
        (["--columns", "lat:0..99,nope:0..5"], "nope"),
        ([], "--columns"),
        (["--columns", "lat:0..99,lon:0..79", "--policy", "distance:theta=0"], "theta"),
    ],
)
def test_cli_errors_are_one_line(csv_file, args, message) -> None:
    code, text = _run("kmeans", "--data", str(csv_file), "--epsilon", "1", *args)
    assert code != 0
    assert message in text
    assert "Traceback" not in text


def test_cli_clip_flag(csv_file) -> None:
    code, text = _run(
        "kmeans",
        "--data",
        str(csv_file),
        "-c",
        "lat:0..9,lon:0..79",
        "-e",
        "1",
        "--clip",
        "--seed",
        "1",
    )
    assert code == 0, text
    assert "cluster" in text


def test_cli_engine_gives_the_same_centres(tmp_path) -> None:  # type: ignore[no-untyped-def]
    """The DuckDB engine streams the file and gives the numpy path's centres exactly."""
    import json as _json

    import numpy as _np

    from fugu.cli import main

    rng = _np.random.default_rng(0)
    pts = tmp_path / "pts.csv"
    rows = zip(rng.integers(0, 40, 800), rng.integers(0, 30, 800), strict=True)
    pts.write_text("lat,lon\n" + "\n".join(f"{a},{b}" for a, b in rows))
    outs = []
    for extra in ([], ["--engine", "duckdb"]):
        out = tmp_path / f"c{len(extra)}.json"
        args = [
            "kmeans",
            "--data",
            str(pts),
            "-c",
            "lat:0..39,lon:0..29",
            "--k",
            "3",
            "-e",
            "1",
            "--seed",
            "4",
            "--out",
            str(out),
            *extra,
        ]
        assert main(args) == 0
        outs.append(_json.loads(out.read_text())["centres"])
    assert outs[0] == outs[1]


def test_cli_uses_the_planned_defaults(csv_file, tmp_path) -> None:  # type: ignore[no-untyped-def]
    # --iterations/--size-fraction used to default to 10 / 0.5, bypassing Su et al.'s plan.
    out_json = tmp_path / "c.json"
    args = ["kmeans", "--data", str(csv_file), "--columns", "lat:0..99,lon:0..79", "--k", "4"]
    args += ["--epsilon", "0.5", "--seed", "2", "--out", str(out_json)]
    code, text = _run(*args)
    assert code == 0, text
    km = fugu.blowfish.KMeans(4, 0.5, domain=DOM, rng=fugu.RandomSource(seed=2))
    km.fit(np.loadtxt(csv_file, delimiter=",", skiprows=1, usecols=(0, 1)))
    rows = json.loads(out_json.read_text())["centres"]
    centres = np.array([[r["lat"], r["lon"]] for r in rows], dtype=float)
    assert np.allclose(centres, km.cluster_centers_)
    code, text = _run(
        *args[:-2], "--iterations", "3", "--size-fraction", "auto", "--init", "spread"
    )
    assert code == 0, text
    code, text = _run(*args[:-2], "--iterations", "many")
    assert code != 0 and "'auto'" in text


def test_not_private_reason_is_described() -> None:
    g = fugu.release.Guarantee.from_dict(
        fugu.central.laplace(
            fugu.Histogram(np.array([1, 2]), fugu.Domain([fugu.Ordinal("x", 0, 1)])), 1.0
        ).guarantee.to_dict()
    )
    from dataclasses import replace

    g = replace(g, private=False, parameters={**g.parameters, "not_private_reason": "why not"})
    assert "NOT PRIVATE: why not; do not publish." in g.describe()


def test_kmeans_progress_bar_only_when_asked(capsys) -> None:  # type: ignore[no-untyped-def]
    X = points(300)
    km = fugu.blowfish.KMeans(3, 1.0, domain=DOM, n_iter=3, rng=fugu.RandomSource(seed=1))
    km.fit(X)
    assert "k-means iterations" not in capsys.readouterr().err
    km = fugu.blowfish.KMeans(
        3, 1.0, domain=DOM, n_iter=3, rng=fugu.RandomSource(seed=1), progress=True
    )
    km.fit(X)
    err = capsys.readouterr().err
    assert "k-means iterations" in err and "3/3" in err


def test_cli_kmeans_is_quiet_when_piped(csv_file) -> None:  # type: ignore[no-untyped-def]
    code, text = _run(
        "kmeans",
        "--data",
        str(csv_file),
        "--columns",
        "lat:0..99,lon:0..79",
        "-e",
        "1",
        "--seed",
        "1",
    )
    assert code == 0, text
    assert "k-means iterations" not in text
