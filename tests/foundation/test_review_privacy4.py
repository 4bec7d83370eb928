"""Fourth privacy review: the local-DP clients (multi-dimensional methods, Square Wave, the wire
report), the Spark engine's record counting, and what reports and the LDP CLI print.

Every test recomputes a claim from first principles. Unless a test says otherwise it is exact
(the whole output distribution, or every record of a small input), so its false-failure rate is
0. Bugs found (each test failed before its fix):

* Square Wave drew reports from 53-bit uniform floats rounded to a 2^-20 grid: a grid point held
  about 2^33 floats, give or take one, and the exact worst ratio of a report's probabilities
  under two inputs was e^ε·(1 + 2.1e-10) at ε = 1 (e^ε·(1 + 1.8e-10) at ε = 0.5). Now reports
  are drawn on the grid with integer draws, each near point exactly e^ε times as likely as each
  far point.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pytest

import fugu
from fugu.ldp import square_wave as SWM


# == 1. Square Wave: the exact probability of every report ======================================
class _Probe(fugu.RandomSource):
    """Drives one branch of a Square Wave draw. ``bernoulli`` (the near/far choice) returns
    ``branch`` for every user and records its probability; the one uniform draw that follows —
    a 53-bit float (``random``) or an integer (``below``) — returns ``probe`` (user i gets the
    i-th probe value), and the size of its range is recorded."""

    def __init__(self, branch: bool, probe: np.ndarray) -> None:
        super().__init__(seed=0)
        self.branch, self.probe = branch, np.asarray(probe, dtype=np.int64)
        self.p: list[float] = []
        self.range: int | None = None

    def bernoulli(self, p: Any, size: Any = None) -> Any:
        arr = np.asarray(p, dtype=np.float64)
        self.p.append(float(arr.reshape(-1)[0]))
        shape = arr.shape if size is None else ((size,) if isinstance(size, int) else size)
        return np.full(shape, self.branch)

    def random(self, size: Any = ()) -> Any:
        n = int(np.prod(size)) if size != () else 1
        self.range = 2**53
        return (self.probe[:n].astype(np.float64) * (1.0 / 2**53)).reshape(size)

    def below(self, bound: Any) -> Any:
        b = np.asarray(bound, dtype=np.uint64)
        assert np.all(b == b.reshape(-1)[0]), "one bound per branch"
        self.range = int(b.reshape(-1)[0])
        return np.minimum(self.probe[: b.size].astype(np.uint64), b - np.uint64(1)).reshape(b.shape)


def _sampler_p(p: float) -> float:
    """P(True) of ``RandomSource.bernoulli(p)``: floor(p·2^64)/2^64."""
    return 1.0 if p >= 1.0 else math.floor(np.ldexp(p, 64)) / 2.0**64


def _branch(x: float, eps: float, branch: bool, targets: np.ndarray) -> tuple[float, np.ndarray]:
    """(P(branch), count of the branch's uniform draws giving each target report).

    Within a branch the report is a non-decreasing function of the uniform draw (checked on a
    sample), so the draws giving each report form one run, found by binary search over the
    whole range of the draw (2^53 floats or the integer bound)."""
    b = SWM.sw_half_width(eps)
    m = targets.size

    def report(k: np.ndarray) -> tuple[np.ndarray, _Probe]:
        rng = _Probe(branch, k)
        return SWM.sw_perturb(np.full(k.size, x), eps, rng, b), rng

    _, first = report(np.zeros(1, np.int64))
    assert len(first.p) == 1 and first.range is not None, "one Bernoulli, one uniform draw"
    p_branch = _sampler_p(first.p[0]) if branch else 1.0 - _sampler_p(first.p[0])
    top = first.range
    sample = np.sort(np.random.default_rng(0).integers(0, top, 200_000))
    ys, _ = report(sample)
    assert np.all(np.diff(ys) >= 0), "report not monotone in the uniform draw"
    lo, hi = np.zeros(m + 1, np.int64), np.full(m + 1, top, np.int64)
    goal = np.concatenate([targets, [np.inf]])
    while np.any(lo < hi):
        act = lo < hi
        mid = (lo + hi) // 2
        ok = report(np.minimum(mid, top - 1))[0] >= goal
        hi = np.where(act & ok, mid, hi)
        lo = np.where(act & ~ok, mid + 1, lo)
    counts = np.diff(lo)
    assert lo[0] == 0 and counts.sum() == top, "a report outside the targets"
    return p_branch, counts / top


def _report_pmf(x: float, eps: float) -> np.ndarray:
    """Exact probability of every possible report (grid points and the clip bounds ±b)."""
    b = SWM.sw_half_width(eps)
    g = 2.0**20
    grid = np.arange(math.floor(-b * g) - 1, math.ceil((1 + b) * g) + 2) / g
    targets = np.unique(np.concatenate([grid, [-b, 1 + b]]))
    p_near, near = _branch(x, eps, True, targets)
    p_far, far = _branch(x, eps, False, targets)
    return p_near * near + p_far * far


@pytest.mark.parametrize("eps", [0.5, 1.0])
def test_square_wave_report_ratio_is_at_most_e_eps(eps: float) -> None:
    """Codes 0 and 3 of c = 4 (x = 0.125, 0.875: windows apart). The exact worst ratio over
    every report must be ≤ e^ε (relative slack 1e-12 for the float64 arithmetic of this test).
    Before the fix it was e^ε·(1 + 1.8e-10) at ε = 0.5 and e^ε·(1 + 2.1e-10) at ε = 1."""
    a, b = _report_pmf(0.125, eps), _report_pmf(0.875, eps)
    assert np.array_equal(a > 0, b > 0)
    m = a > 0
    worst = float(np.max(np.maximum(a[m] / b[m], b[m] / a[m])))
    assert worst <= math.exp(eps) * (1 + 1e-12), worst / math.exp(eps) - 1
    assert worst >= math.exp(eps) * (1 - 1e-9)  # the square wave still spends its ε


def test_square_wave_reports_stay_in_range_and_follow_the_input() -> None:
    """Reports lie in [−b, 1 + b] on the 2^-20 grid, and inputs outside [0, 1] are refused on
    the device (no report is made) instead of giving a report the server would reject."""
    b = SWM.sw_half_width(1.0)
    y = SWM.sw_perturb(np.linspace(0, 1, 1001), 1.0, fugu.RandomSource(seed=1), b)
    assert y.min() >= -b and y.max() <= 1 + b
    assert np.all(y * 2**20 == np.round(y * 2**20))
    with pytest.raises(fugu.errors.InvalidParameterError):
        SWM.sw_perturb(np.array([1.5]), 1.0, fugu.RandomSource(seed=1), b)


# == 2. data paths: a line DuckDB's CSV sniffer takes for a comment ================================
@pytest.mark.xfail(
    strict=True,
    reason="duckdb_engine.py (not owned by this review): read_csv lets the sniffer choose a "
    "comment character; pass comment='' (fix requested in the review report)",
)
def test_duckdb_does_not_skip_a_line_it_takes_for_a_comment(tmp_path: Any) -> None:
    """Excel writes a missing number as ``#N/A``. DuckDB's CSV sniffer then picks ``#`` as the
    comment character (it makes the column numeric) and skips the line: the record is dropped
    silently, so 53 of 54 records are counted where the numpy engine refuses the file. Under
    replace-one neighbours n is public and the hierarchical release publishes the counted total
    exactly, so replacing one record by this line is seen with probability 1 (the case review 2
    fixed for empty lines). Fix: ``read_csv(..., header=true, comment='')`` (the column is then
    text and refused as non-numeric)."""
    pytest.importorskip("duckdb")
    rows = "".join(f"{20 + i % 50},F\n" for i in range(50))
    path = tmp_path / "excel.csv"
    path.write_text("age,sex\n30,F\n31,M\n#N/A,M\n40,F\n" + rows)
    dom = fugu.Domain([fugu.Ordinal("age", 0, 99), fugu.Nominal("sex", ["F", "M"])])
    with pytest.raises(fugu.FuguError):
        fugu.Histogram.from_file(path, dom, engine="numpy")
    with pytest.raises(fugu.FuguError):
        fugu.Histogram.from_file(path, dom, engine="duckdb")
