"""Review 16: privacy and correctness of the local-DP core outside the TDG/HDG grids.

Frequency oracles (GRR, OLH, OUE), Square Wave, HIO/LHIO, MSW, the client, the wire format and
the grouped oracle the multi-dimensional methods share. Every test here failed before the fix it
comes with (see the commit messages). Statistical checks use fixed seeds; each bound is several
times the error measured with its seed, so a test fails only if the method is broken.
"""

from __future__ import annotations

import math
from decimal import Decimal, localcontext
from fractions import Fraction
from typing import Any

import numpy as np
import pytest

import fugu
from fugu.ldp.square_wave import unit_values


# -- 1. Square Wave on a binned attribute with bins of different widths ---------------------------
def test_sw_maps_every_bin_onto_its_own_equal_share_of_the_unit_interval() -> None:
    """SW rebuilds the distribution on ``c`` equal parts of [0, 1] and reads part ``i`` as bin
    ``i``. Raw values were mapped linearly between the first and last edge, so with edges
    0, 1, 100, 1000 bin 0 landed on [0, 0.001) and the release's bin 0 held everything below
    333: the counts were those of other bins. Each bin now maps onto ``[i/c, (i+1)/c]``
    (linearly inside the bin)."""
    attr = fugu.Ordinal("x", edges=[0, 1, 100, 1000])
    x, _ = unit_values(attr, [0.0, 0.5, 1.0, 50.5, 100.0, 550.0, 1000.0])
    np.testing.assert_allclose(x, [0, 1 / 6, 1 / 3, 1 / 2, 2 / 3, 5 / 6, 1], atol=1e-15)
    # equal-width edges: the same map as before (linear between the first and last edge)
    even = fugu.Ordinal("y", edges=np.linspace(-2, 2, 9).tolist())
    raw = np.linspace(-2, 2, 101)
    np.testing.assert_allclose(unit_values(even, raw)[0], (raw + 2) / 4, atol=1e-15)


def test_sw_counts_of_unequal_bins_are_the_bins_counts() -> None:
    """End to end: 5,000 / 5,000 / 10,000 users in the bins [0, 1), [1, 100), [100, 1000] at
    ε = 4. Before: estimated shares 0.62 / 0.19 / 0.19 (L1 error 0.74). Now the L1 error of the
    shares is below 0.1 (seed 1 gives about 0.02)."""
    dom = fugu.Domain([fugu.Ordinal("x", edges=[0, 1, 100, 1000])])
    gen = np.random.default_rng(0)
    x = np.concatenate(
        [gen.uniform(0, 1, 5000), gen.uniform(1, 100, 5000), gen.uniform(100, 1000, 10000)]
    )
    rel = fugu.ldp.SW(dom, 4.0).simulate({"x": x}, rng=fugu.RandomSource(seed=1))
    share = rel.counts / x.size
    assert np.abs(share - [0.25, 0.25, 0.5]).sum() < 0.1, share


# -- 2. randomised response and OUE: the exact ratio of the probabilities the samplers use --------
class _Recorder(fugu.RandomSource):
    """A seeded source that records every Bernoulli probability and every uniform bound."""

    def __init__(self) -> None:
        super().__init__(seed=0)
        self.ps: list[float] = []
        self.bounds: list[int] = []

    def bernoulli(self, p: Any, size: Any = None) -> Any:
        self.ps.extend(np.asarray(p, dtype=np.float64).reshape(-1).tolist())
        return super().bernoulli(p, size)

    def below(self, bound: Any) -> Any:
        self.bounds.extend(int(b) for b in np.asarray(bound).reshape(-1))
        return super().below(bound)


def _used(p: float) -> Fraction:
    """P(True) of ``RandomSource.bernoulli(p)``: floor(p·2^64)/2^64 (capped; p >= 1 always)."""
    if p >= 1.0:
        return Fraction(1)
    return Fraction(int(min(math.ldexp(p, 64), float(2**64 - 2048))), 2**64)


def _rr_distribution(p: float, bound: int, k: int) -> tuple[Fraction, Fraction]:
    """``(P(report = true value), P(report = one given other value))`` of randomised response
    over ``k`` values as drawn: a Bernoulli(p) then a uniform integer below ``bound``. Either
    *change* w.p. p to one of the other k − 1 values (``bound = k − 1``), or *keep* w.p. p,
    else a uniform value of all k (``bound = k``)."""
    used = _used(p)
    if bound == k - 1:
        return 1 - used, used / (k - 1)
    assert bound == k, (bound, k)
    return used + (1 - used) / k, (1 - used) / k


def _log_ratio_excess(a: Fraction, b: Fraction, eps: float) -> Decimal:
    """max(a/b, b/a) / e^ε − 1, exactly enough (60 digits; ε is the double itself)."""
    r = max(a / b, b / a)
    with localcontext() as ctx:
        ctx.prec = 60
        return Decimal(r.numerator) / Decimal(r.denominator) / Decimal(eps).exp() - 1


def test_grr_ratio_never_exceeds_e_eps_by_rounding() -> None:
    """(c − 1)/(e^ε + c − 1) was rounded up by one ulp, less than the error of computing it
    (exp, sum and quotient can be 2 ulps off): at ε = 3.4210477845739776e-05, c = 3 the kept
    value was e^ε·(1 + 2.3e-16) times as likely as another (found by a sweep of 4,000 random
    (ε, c)). The change probability is now raised by a relative 2^-50."""
    for eps, c in [(3.4210477845739776e-05, 3), (0.1, 3), (2.0, 2), (20.0, 2)]:
        rng = _Recorder()
        fugu.ldp.oracles.grr_perturb(np.array([0]), c, eps, rng)
        keep, other = _rr_distribution(rng.ps[0], rng.bounds[0], c)
        assert _log_ratio_excess(keep, other, eps) <= 0, (eps, c)


def test_oue_ratio_never_exceeds_e_eps_by_rounding() -> None:
    """OUE's 0-bit probability 1/(e^ε + 1) had the same one-ulp margin: at ε =
    0.5240032176852624 the ratio (1 − q)/q was e^ε·(1 + 5.4e-17) (a sweep of 20,000 ε)."""
    for eps in (0.5240032176852624, 1e-6, 1.0, 20.0):
        q = _used(fugu.ldp.oracles.oue_zero_bit_probability(eps))
        assert _log_ratio_excess(1 - q, q, eps) <= 0, eps


def test_grr_over_a_huge_domain_at_small_eps_keeps_both_ratios() -> None:
    """GRR over k values at small ε: P(keep) = e^ε/(e^ε + k − 1) was drawn as 1 − P(change),
    with P(change) a double near 1, whose spacing (2^-53) is wider than the whole admissible
    interval once k is about 2^34 at ε = 1e-6. HIO with ``oracle="grr"`` over six attributes of
    64 values reports its finest layer (2^36 cells) that way: another value was e^ε·(1 + 1.4e-5)
    times as likely as the true one (effective ε 1.5e-5 instead of 1e-6; 2.4e-4 at 2^40 cells).
    Over large domains the value is now kept with probability (e^ε − 1)/(e^ε − 1 + k), rounded
    down, else drawn uniformly from all k values, so both ratios hold by construction."""
    dom = fugu.Domain([fugu.Ordinal(f"a{i}", 0, 63) for i in range(6)])
    hio = fugu.ldp.HIO(dom, 1e-6, oracle="grr")
    last = hio.n_groups - 1
    k = int(hio.grouped.cells[last])
    assert k == 2**36
    for eps, kk in [(1e-6, 2**36), (1e-6, 2**40), (1e-4, 2**40), (1e-6, 2**31 + 7)]:
        rng = _Recorder()
        grouped = fugu.ldp.GroupedOracle(eps, [kk], "grr")
        grouped.perturb(np.array([0]), np.array([kk - 1]), rng)
        keep, other = _rr_distribution(rng.ps[0], rng.bounds[0], kk)
        assert _log_ratio_excess(keep, other, eps) <= 0, (eps, kk)
        # and the signal P(true) − P(other) is GRR's (what the estimator divides by) up to the
        # sampler's 2^-64 grid: 0.2% at α ≈ 1.5e-17 (2^36 values), 5% at 2^40 (before: a
        # double near 1 whose spacing exceeded α, all noise)
        alpha = math.expm1(eps) / (math.expm1(eps) + kk)
        assert 0 < float(keep - other) <= alpha
        assert alpha - float(keep - other) <= 2.0**-64, (eps, kk)
    rng = _Recorder()
    hio.client(rng).perturb(np.zeros((1, 6), np.int64), groups=[last])
    keep, other = _rr_distribution(rng.ps[0], rng.bounds[0], k)
    assert _log_ratio_excess(keep, other, 1e-6) <= 0
    for c in (2**29, 2**40):  # the plain GRR/OLH samplers share the rule
        rng = _Recorder()
        fugu.ldp.oracles.grr_perturb(np.array([3]), c, 1e-6, rng)
        keep, other = _rr_distribution(rng.ps[0], rng.bounds[0], c)
        assert _log_ratio_excess(keep, other, 1e-6) <= 0, c


# -- 3. the public randomisers refuse values outside their domain ---------------------------------
@pytest.mark.parametrize(
    ("call", "values"),
    [
        ("grr", [0, 5]),  # 5 was kept w.p. e^ε/(e^ε + 3): a report no in-domain value can give
        ("grr", [-1]),
        ("grr", [2.7]),  # truncated to 2 without a word
        ("oue", [4]),  # IndexError
        ("oue", [1.5]),
        ("olh", [2**32 + 5]),  # hashed as 5: the low 32 bits, silently
        ("olh", [-3]),
        ("olh", [float("nan")]),
    ],
)
def test_randomisers_refuse_values_outside_their_domain(call: str, values: list[Any]) -> None:
    """``grr_perturb``, ``oue_perturb`` and ``olh_perturb`` are public (``__all__``) and took
    any value: GRR sent an out-of-domain value back unchanged with the keep probability (a
    report that names it), fractions were truncated, OLH hashed the low 32 bits of a wider value
    (two values, one report distribution). They now refuse, naming the argument and the range
    but not the (private) value."""
    rng = fugu.RandomSource(seed=1)
    run = {
        "grr": lambda: fugu.ldp.oracles.grr_perturb(values, 4, 1.0, rng),
        "oue": lambda: fugu.ldp.oracles.oue_perturb(values, 4, 1.0, rng),
        "olh": lambda: fugu.ldp.oracles.olh_perturb(values, 4, 1.0, rng),
    }[call]
    with pytest.raises(fugu.errors.InvalidParameterError, match="values") as err:
        run()
    assert "2.7" not in str(err.value) and "4294967301" not in str(err.value)
    # in-domain values still work, as integers or integral floats
    assert fugu.ldp.oracles.grr_perturb([0, 3.0], 4, 1.0, rng).shape == (2,)


# -- 4. HIO's partial state (its reports) is checked like the summed states of other methods ------
def _hio() -> fugu.ldp.HIO:
    dom = fugu.Domain([fugu.Ordinal("a", 0, 7), fugu.Ordinal("b", 0, 7)])
    return fugu.ldp.HIO(dom, 1.0)


@pytest.mark.parametrize(
    ("state", "n"),
    [
        ({"group": [99, 2], "seed": [0], "y": [5, 7, 8]}, 1),  # lengths differ: IndexError later
        ({"group": [3], "seed": [0], "y": [-5]}, 1),  # a bucket no client sends
        ({"group": [-1], "seed": [0], "y": [0]}, 1),  # a group that does not exist
        ({"group": [3], "seed": [0], "y": [0]}, 5),  # n = 5 from 1 report: every answer x5
        ({"group": [3.5], "seed": [0], "y": [0]}, 1),
    ],
)
def test_hio_refuses_a_partial_state_that_partial_cannot_have_made(
    state: dict[str, list[Any]], n: int
) -> None:
    """``Aggregator.add_partial`` checks summed states (keys, shape, integer counts) but skipped
    every check for HIO, whose state is the accepted reports: columns of different lengths,
    reports its ``_validate`` rejects, and an ``n_accepted`` other than the number of reports
    were absorbed (the last gave a release scaling every layer by n = 5 from one report)."""
    hio = _hio()
    with pytest.raises(fugu.errors.ReportError):
        agg = hio.aggregator().add_partial({k: np.asarray(v) for k, v in state.items()}, n)
        agg.estimate()
    # a real partial is absorbed
    reports = hio.client(fugu.RandomSource(seed=1)).perturb({"a": [1, 2, 3], "b": [4, 5, 6]})
    st, n_ok, rejected = hio.partial(reports.columns, reports.n)
    agg = hio.aggregator().add_partial(st, n_ok, rejected)
    assert agg.n_accepted == 3 and agg.estimate().answer({}) == 3


# -- 5. bad input: clear errors naming the argument -----------------------------------------------
@pytest.mark.parametrize("tol", [float("nan"), -1.0, float("inf"), "x", True, None])
@pytest.mark.parametrize("method", ["SW", "MSW"])
def test_sw_and_msw_check_tol(method: str, tol: Any) -> None:
    """``tol`` (the EM stopping rule) was taken as ``float(tol)`` unchecked: NaN or a negative
    tolerance silently disabled the log-likelihood stop (every release ran max_iter = 10,000
    EM rounds), "x" raised a bare ValueError naming nothing."""
    dom = fugu.Domain([fugu.Ordinal("a", 0, 7), fugu.Ordinal("b", 0, 7)])
    if method == "SW":
        dom = fugu.Domain([fugu.Ordinal("a", 0, 7)])
    with pytest.raises(fugu.errors.FuguError, match="tol"):
        getattr(fugu.ldp, method)(dom, 1.0, tol=tol)
    assert getattr(fugu.ldp, method)(dom, 1.0, tol=0).tol == 0.0


@pytest.mark.parametrize("method", ["GRR", "SW"])
def test_a_record_without_an_attribute_is_refused_by_name(method: str) -> None:
    """``perturb_one({"w": 1})`` raised a bare ``KeyError: 'v'`` (and SW's ``perturb`` too);
    a record that is not a mapping raised TypeError. Both now name the attribute and the fix."""
    dom = fugu.Domain([fugu.Ordinal("v", 0, 7)])
    client = getattr(fugu.ldp, method)(dom, 1.0).client(fugu.RandomSource(seed=1))
    with pytest.raises(fugu.errors.DomainError, match="'v'"):
        client.perturb_one({"w": 1})
    with pytest.raises(fugu.errors.DomainError, match="'v'"):
        client.perturb({"w": [1, 2]})
    with pytest.raises(fugu.errors.InvalidTypeError, match="record"):
        client.perturb_one([1])  # type: ignore[arg-type]
    assert set(client.perturb_one({"v": 3})) == {"y"}


def test_hio_refuses_a_layer_too_large_to_index() -> None:
    """HIO over eleven attributes of 64 values with branching 64 has a finest layer of 2^66
    cells: the grouped oracle's int64 cell counts raised a bare OverflowError. Now a clear
    error names the layer size and what to use instead."""
    dom = fugu.Domain([fugu.Ordinal(f"a{i}", 0, 63) for i in range(11)])
    with pytest.raises(fugu.errors.InvalidParameterError, match="cells"):
        fugu.ldp.HIO(dom, 1.0, branching=64)
    with pytest.raises(fugu.errors.InvalidParameterError, match="cells"):
        fugu.ldp.GroupedOracle(1.0, [4, 2**66])


# -- 6. a user group without reports --------------------------------------------------------------
def test_hio_layer_without_reports_is_the_uniform_guess_and_recorded() -> None:
    """A HIO layer that received no report (few users, many layers: 4,095 layers at d = 6)
    had every cell estimated as 0, silently: a query answered from it was 0. Such cells are now
    the uniform guess (n times the cell's share of the domain) and the release says how many
    layers had no report."""
    dom = fugu.Domain([fugu.Ordinal("a", 0, 7), fugu.Ordinal("b", 0, 5)])
    hio = fugu.ldp.HIO(dom, 2.0, branching=2)
    empty = hio.layers.index((1, 0))  # a's halves, b's root
    groups = np.array([g for g in range(hio.n_groups) if g != empty] * 40)
    n = groups.size
    codes = np.zeros((n, 2), np.int64)
    reports = hio.client(fugu.RandomSource(seed=3)).perturb(codes, groups=groups)
    rel = hio.aggregate(reports)
    assert rel.answer({"a": (0, 3)}) == n / 2  # one node of the empty layer
    assert any("no report" in s for s in rel.guarantee.post_processing)
    # b has 6 values in a tree of 8 leaves: [4, 5] is node 2 of level 2 (2 of the 6 values)
    empty_b = hio.layers.index((0, 2))
    groups = np.array([g for g in range(hio.n_groups) if g != empty_b] * 40)
    reports = hio.client(fugu.RandomSource(seed=3)).perturb(codes, groups=groups)
    rel = hio.aggregate(reports)
    assert rel.answer({"b": (4, 5)}) == groups.size * 2 / 6


def test_lhio_layer_without_reports_does_not_pull_the_tree_to_zero() -> None:
    """LHIO's empty layers entered the 2-D least-squares consistency as measured zeros: with
    every user at (0, 0), ε = 10 and the layer (a's halves × b's root) empty, a in [0, 3] came
    out 2,373 of 2,800 (2,799.7 now). An empty layer is now left out of the consistency
    (unmeasured), its cells come from the other layers, and the release says how many layers
    had no report."""
    dom = fugu.Domain([fugu.Ordinal("a", 0, 7), fugu.Ordinal("b", 0, 7)])
    lhio = fugu.ldp.LHIO(dom, 10.0, branching=2)
    for empty_layer in [(0, 1, 1, 0), (0, 1, 3, 3), (0, 1, 0, 2)]:  # inner, finest, b only
        empty = lhio.groups.index(empty_layer)
        groups = np.array([g for g in range(lhio.n_groups) if g != empty] * 200)
        n = groups.size
        codes = np.zeros((n, 2), np.int64)
        rel = lhio.aggregate(lhio.client(fugu.RandomSource(seed=3)).perturb(codes, groups=groups))
        # at ε = 10 every measured layer is within a few counts of the truth
        assert abs(rel.answer({"a": (0, 3)}) - n) < 0.01 * n, empty_layer
        if empty_layer[2:] != (3, 3):  # the finest cells need the finest layer
            assert abs(rel.answer({"a": (0, 0), "b": (0, 0)}) - n) < 0.01 * n, empty_layer
        assert any("no report" in s for s in rel.guarantee.post_processing)


def test_msw_attribute_without_reports_is_recorded() -> None:
    """MSW with fewer users than attributes (or unlucky groups): an attribute whose group sent
    no report got the uniform distribution without a word. The release now says which."""
    dom = fugu.Domain([fugu.Ordinal(f"a{i}", 0, 7) for i in range(3)])
    msw = fugu.ldp.MSW(dom, 1.0)
    codes = np.zeros((40, 3), np.int64)
    reports = msw.client(fugu.RandomSource(seed=1)).perturb(codes, groups=[0, 1] * 20)
    rel = msw.aggregate(reports)
    assert rel.answer({"a2": (0, 3)}) == pytest.approx(20.0)  # the uniform guess
    assert any("no report" in s and "a2" in s for s in rel.guarantee.post_processing)


@pytest.mark.parametrize(("eps", "b"), [(-1.0, 0.25), (50.0, 0.1), (1.0, -0.1), (1.0, np.nan)])
def test_sw_perturb_checks_epsilon_and_half_width(eps: float, b: float) -> None:
    """``sw_perturb`` (public) checked ε only when it computed b itself: with b given, ε = −1
    randomised with the far points e times as likely as the near ones and ε = 50 (outside
    the LDP range) ran; b < 0 gave "probabilities must lie in [0, 1]", b = NaN a bare
    ValueError. Both are now checked and named."""
    from fugu.ldp.square_wave import sw_perturb

    with pytest.raises(fugu.errors.InvalidParameterError, match="epsilon|half-width b"):
        sw_perturb(np.array([0.5]), eps, fugu.RandomSource(seed=1), b)


def test_groups_given_to_a_method_without_groups_are_refused() -> None:
    """``GRR.client().perturb(records, groups=...)`` and ``perturb_one(record, group=3)``
    ignored the groups without a word (the caller believed users were split)."""
    dom = fugu.Domain([fugu.Ordinal("v", 0, 7)])
    client = fugu.ldp.GRR(dom, 1.0).client(fugu.RandomSource(seed=1))
    with pytest.raises(fugu.errors.InvalidParameterError, match="groups"):
        client.perturb({"v": [1, 2]}, groups=[0, 1])
    with pytest.raises(fugu.errors.InvalidParameterError, match="group"):
        client.perturb_one({"v": 1}, group=0)
    assert len(client.perturb({"v": [1, 2]})) == 2


# -- 7. Square Wave: the server models the reports the client draws ------------------------------
@pytest.mark.parametrize("eps", [0.5, 1.0, 10.0, 14.0, 16.0, 20.0])
def test_sw_server_model_is_the_grid_the_client_draws_from(eps: float) -> None:
    """The client draws on a 2^-20 grid with W = 2w + 1 near points, w = ⌊b·2^20⌋; the server
    modelled the continuous wave of half-width b. At large ε b·2^20 is small (0.89 at ε = 16,
    so w = 0): the model put 0.9375 of the mass near the input where the client puts 0.8945
    (and 0.95 vs 0.998 at ε = 20), so EM rebuilt a wrong distribution (L1 error 0.05 at
    ε = 16 on a binomial marginal, against 0.01 now). SW and MSW now use the half-width the
    grid realises, (w + 1/2)/2^20: the same reports, and the near mass of the model is the
    client's."""
    from fugu.ldp.square_wave import sw_densities, sw_grid, sw_near_probability

    for proto in (
        fugu.ldp.SW(fugu.Domain([fugu.Ordinal("v", 0, 15)]), eps),
        fugu.ldp.MSW(fugu.Domain([fugu.Ordinal("v", 0, 15), fugu.Ordinal("u", 0, 3)]), eps),
    ):
        b = proto.b
        p, _ = sw_densities(eps, b)
        assert sw_grid(b) == sw_grid(fugu.ldp.square_wave.sw_half_width(eps))  # same reports
        assert 2 * b * p == pytest.approx(sw_near_probability(eps, b), rel=1e-12)


def test_sw_rebuilds_a_marginal_at_large_epsilon() -> None:
    dom = fugu.Domain([fugu.Ordinal("v", 0, 15)])
    vals = np.random.default_rng(5).binomial(15, 0.3, 40_000)
    true = np.bincount(vals, minlength=16) / vals.size
    rel = fugu.ldp.SW(dom, 16.0, reconstruction="em").simulate(
        {"v": vals}, rng=fugu.RandomSource(seed=0)
    )
    assert np.abs(rel.counts / vals.size - true).sum() < 0.025


# -- 8. Reports.take: a partition, never a report twice --------------------------------------------
@pytest.mark.parametrize(
    "index",
    [[0, 0, 1], np.array([True, False]), [3], [1.5], [-1, 2]],
)
def test_reports_take_refuses_anything_but_a_partition(index: Any) -> None:
    """``Reports.take`` ("a partition") took any numpy index: ``take([0, 0, 1])`` held report
    0 twice and an aggregator counted it twice; a mask of another length or an index past the
    end raised a bare IndexError; a negative index silently meant one from the end (so
    ``take([-1, 2])`` of 3 reports was report 2 twice). Indices must now be distinct
    positions in [0, n) or a boolean mask of length n."""
    dom = fugu.Domain([fugu.Ordinal("v", 0, 7)])
    reports = fugu.ldp.GRR(dom, 1.0).client(fugu.RandomSource(seed=1)).perturb({"v": [1, 2, 3]})
    with pytest.raises(fugu.errors.InvalidParameterError, match="index"):
        reports.take(index)
    assert reports.take([2, 0]).n == 2 and reports.take(np.array([True, False, True])).n == 2
    assert reports.take([]).n == 0
