"""Review 25: private k-means (ε-DP and Blowfish) after its rebuild (issue 15.2).

Unless a test says otherwise it is exact (false-failure rate 0); the audits state theirs.
"""

from __future__ import annotations

import contextlib
import importlib
import io
import itertools
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import fugu

DOM2 = fugu.Domain([fugu.Ordinal("x", 0, 19), fugu.Ordinal("y", 0, 19)])


def _points(n: int = 300, seed: int = 0) -> np.ndarray:
    return np.random.default_rng(seed).integers(0, 20, size=(n, 2))


def _csv(tmp_path: Path, X: np.ndarray) -> Path:
    p = tmp_path / "p.csv"
    p.write_text("x,y\n" + "\n".join(f"{a},{b}" for a, b in X) + "\n")
    return p


def _cli(*args: str) -> tuple[int, str]:
    """The real entry point (one-line errors, exit codes) and what it printed."""
    from fugu.cli import main

    out = io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(out):
        code = main(list(args))
    return code, out.getvalue()


def _ledger(tmp_path: Path, total: float = 5.0) -> Path:
    path = tmp_path / "ledger.json"
    code, text = _cli("ledger", "init", str(path), "--total", str(total))
    assert code == 0, text
    return path


def _spent(path: Path) -> float:
    code, text = _cli("ledger", "show", str(path))
    assert code == 0, text
    return float(text.split("spent ")[1].split(",")[0])


# == 1. fugu kmeans --report: refusals after the charge ===========================================
def test_cli_report_path_is_checked_before_the_charge(tmp_path: Path) -> None:
    """Before: ``--report /nonexistent/r.html`` fitted, charged the ledger ε = 1 and then failed
    writing the report ('cannot write ...'), so the centres paid for were never shown. (``--out``
    was already checked first.) Now the report's directory is checked before anything is read or
    spent, like ``--out``."""
    data, ledger = _csv(tmp_path, _points()), _ledger(tmp_path)
    args = ["kmeans", "--data", str(data), "-c", "x:0..19,y:0..19", "-e", "1"]
    code, text = _cli(*args, "--ledger", str(ledger), "--report", str(tmp_path / "no" / "r.html"))
    assert code != 0 and "--report" in text and "nothing was read or spent" in text, text
    assert _spent(ledger) == 0.0
    # the report may not overwrite the data, the ledger or the centres of the same run
    for target in (data, ledger):
        code, text = _cli(*args, "--ledger", str(ledger), "--report", str(target))
        assert code != 0 and "--report" in text, text
    out = tmp_path / "c.csv"
    code, text = _cli(*args, "--ledger", str(ledger), "--out", str(out), "--report", str(out))
    assert code != 0 and "--report" in text, text
    assert _spent(ledger) == 0.0


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["--repetitions", "0"], "repetitions"),
        # under a policy with ⊥ the fit takes k above n (refusing would tell whether n < k); the
        # report's non-private Lloyd cannot
        (["--k", "400", "--policy", "distance:theta=1+bottom"], "n_clusters=400"),
    ],
)
def test_cli_report_refusals_come_before_the_charge(
    tmp_path: Path, extra: list[str], message: str
) -> None:
    """Before: the report's experiment ran after the fit, so its refusals came with the ledger
    charged (ε = 1 spent, centres not shown): ``--repetitions 0``, and ``--k 400`` on 300 points
    under a policy with ⊥ (the fit accepts k > n there). Now the experiment runs first."""
    data, ledger = _csv(tmp_path, _points()), _ledger(tmp_path)
    args = ["kmeans", "--data", str(data), "-c", "x:0..19,y:0..19", "-e", "1", *extra]
    code, text = _cli(*args, "--ledger", str(ledger), "--report", str(tmp_path / "r.html"))
    assert code != 0 and message in text, text
    assert "Traceback" not in text
    assert _spent(ledger) == 0.0


def test_cli_report_clips_like_the_fit(tmp_path: Path) -> None:
    """Before: ``--clip --report`` on points outside the domain fitted the clipped points and
    then refused the report's experiment ('58 of 300 values lie outside the domain ... pass
    clip=True (fugu kmeans --clip)', which was passed), after the charge. The experiment now
    clips as the fit does (``objective_ratio_experiment(clip=True)``); without --clip both
    refuse."""
    from fugu.report.kmeans_experiment import objective_ratio_experiment

    data, ledger = _csv(tmp_path, _points()), _ledger(tmp_path)
    args = ["kmeans", "--data", str(data), "-c", "x:0..15,y:0..19", "-e", "1", "--seed", "1"]
    args += ["--repetitions", "1"]
    report = tmp_path / "r.html"
    code, text = _cli(*args, "--clip", "--ledger", str(ledger), "--report", str(report))
    assert code == 0, text
    assert report.exists() and _spent(ledger) == 1.0
    code, text = _cli(*args, "--ledger", str(ledger), "--report", str(report))
    assert code != 0 and "outside the domain" in text and _spent(ledger) == 1.0
    dom = fugu.Domain([fugu.Ordinal("x", 0, 15), fugu.Ordinal("y", 0, 19)])
    res = objective_ratio_experiment(
        _points(), dom, [None], epsilons=[1.0], repetitions=1, clip=True
    )
    assert res.n == 300


# == 2. a private n is never refused on =========================================================
def test_private_n_is_clamped_not_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    """Before: ``check_sum_range`` refused (before the charge, but on the data) whenever
    n·width/2 exceeded q_sum's noise grid, also when n is private. Explicit secret graph on a
    binned x (midpoints ±1e12, ±5e11, 0, 1; box centre 0) with edges (0, 1) and (0, ⊥) — a
    record at 0 may be added or removed: q_sum sensitivity 1, the grid holds 4.398 points of
    reach 1e12. Four far points fitted; the same four plus one record added at 0 (a neighbour)
    were refused: the refusal told the two apart with probability 1. Now a private n is never
    refused on: the exact centred sums are clamped to the grid's exact range (1-Lipschitz, so
    the sensitivity still holds; in the guarantee as ``q_sum_clamp``), and both neighbours
    fit. A public n (no ⊥) is still checked before the charge."""
    from fugu.blowfish.kmeans import KMeans, SecretGraph

    kq = importlib.import_module("fugu.blowfish.kmeans_queries")
    edges = [-1e12, -1e12 + 1, -0.5, 0.5, 1.5, 1e12 - 1, 1e12]
    dom = fugu.Domain([fugu.Ordinal("x", edges=edges)])
    mids = [(a + b) / 2 for a, b in itertools.pairwise(edges)]
    graph = SecretGraph("explicit", edges=np.array([[2, 3], [2, -1]]))
    seen: list[np.ndarray] = []
    real = kq.grid_laplace

    def spy(values: Any, *a: Any, **kw: Any) -> Any:
        seen.append(np.array(values, dtype=np.float64, copy=True))
        return real(values, *a, **kw)

    monkeypatch.setattr(kq, "grid_laplace", spy)
    far = [[mids[0]]] * 2 + [[mids[5]]] * 2
    outs, caps = [], []
    for X in (far, [*far, [mids[2]]], [[mids[0]]] * 5):
        acct = fugu.Accountant(fugu.Budget(5.0, model="blowfish"))
        km = KMeans(
            2, 1.0, policy=graph, domain=dom, init=[[-5e11], [5e11]], accountant=acct,
            rng=fugu.RandomSource(seed=0),
        )  # fmt: skip
        km.fit(np.array(X))
        outs.append(seen[-km.n_iter_ :])
        caps.append(km.guarantee_.parameters.get("q_sum_clamp"))
        assert acct.spent == 1.0
    cap = caps[0]
    assert caps == [cap] * 3 and 4e12 < cap < 4.4e12
    for out in outs:
        assert all(np.all(np.abs(v) <= cap) for v in out)
    # the first iteration starts from the same public centres: the neighbours' sums differ by
    # the added record's centred value, 0
    np.testing.assert_array_equal(outs[0][0], outs[1][0])
    # five points at -1e12 (sum -5e12) reach the noise as the cap
    assert outs[2][0][0, 0] == -cap
    # a public n (the same graph without ⊥) is still refused before the charge
    public = SecretGraph("explicit", edges=np.array([[2, 3]]))
    acct = fugu.Accountant(fugu.Budget(5.0, model="blowfish"))
    with pytest.raises(fugu.errors.InvalidParameterError, match="noise grid"):
        KMeans(2, 1.0, policy=public, domain=dom, n_iter=2, accountant=acct).fit(
            np.array([*far, [0.0]])
        )
    assert acct.spent == 0


# == 3. wrong results and errors after the charge ===============================================
def test_grid_start_on_a_domain_reaching_1e300() -> None:
    """Before: the grid start's weighted k-means squared coordinates of bin midpoints near
    5e299 (x binned on [0, 1, 2, 1e300]): inf distances, NaN k-means++ probabilities and
    'ValueError: Probabilities contain NaN' from numpy after ε = 1 was charged. It now works in
    units of a power of two (exact: the same choices on ordinary domains) and returns centres
    inside the box."""
    from fugu.blowfish.kmeans import KMeans, KMeansGrid

    dom = fugu.Domain([fugu.Ordinal("x", edges=[0, 1, 2, 1e300]), fugu.Ordinal("y", 0, 9)])
    grid = KMeansGrid.from_domain(dom)
    X = np.array([[grid.coords[0][i % 3], i % 10] for i in range(200)])
    acct = fugu.Accountant(fugu.Budget(5.0))
    km = KMeans(2, 1.0, domain=dom, accountant=acct, rng=fugu.RandomSource(seed=1)).fit(X)
    c = km.cluster_centers_
    assert km.init_.startswith("private grid start") and acct.spent == 1.0
    assert np.all(np.isfinite(c)) and np.all((c >= grid.low) & (c <= grid.high))


@pytest.mark.parametrize("high", [2**24, 2**40])
def test_attribute_with_too_many_values_is_refused_clearly(high: int) -> None:
    """Before: the k-means grid was ``np.arange`` of every value of every attribute, so
    ``Ordinal('t', 0, 2**40)`` (a timestamp) asked numpy for 8 TiB ('Unable to allocate'), and
    ``0..10^9`` allocated 8 GB and then k times that per iteration's counts. An attribute with
    more than 2^24 values is now refused, before anything is spent, naming it, its size and the
    fix (bin it); 2^24 values still work."""
    from fugu.blowfish.kmeans import KMeans, KMeansGrid

    dom = fugu.Domain([fugu.Ordinal("t", 0, high)])
    acct = fugu.Accountant(fugu.Budget(5.0))
    with pytest.raises(fugu.errors.DomainTooLargeError, match=r"'t' has [\d,]+ values.*edges="):
        KMeans(2, 1.0, domain=dom, accountant=acct).fit(np.array([[0], [high]]))
    assert acct.spent == 0
    assert KMeansGrid.from_domain(fugu.Domain([fugu.Ordinal("t", 1, 2**24)])).sizes == (2**24,)
