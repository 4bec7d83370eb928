"""Fuzz / property suite over fugu's public entry points (issue 14, "Must show").

For hostile ε, data, domains, queries, reports and files every entry point must either raise a
:class:`fugu.errors.FuguError` subclass or return a *correct* result (checked here: the ε in the
guarantee is the one given, a histogram holds exactly the counts given, a range answer equals
the brute-force sum) - never another exception, never a silent change.

Nothing is marked xfail: an input that once escaped (``Domain(None)``, ``Nominal("c", None)``
raised TypeError; ``Nominal("c", "xy")`` was read as the values ``["x", "y"]``) is now among
the inputs tried.
"""

from __future__ import annotations

import json
import math
import os
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import fugu
from fugu.errors import MAX_EPSILON, MIN_EPSILON, FuguError, InvalidParameterError
from fugu.mechanism import check_epsilon_range, epsilon_range

# Deterministic in CI (derandomize); FUGU_FUZZ_RANDOM=1 explores new inputs on every run.
_DERANDOMIZE = os.environ.get("FUGU_FUZZ_RANDOM") != "1"
FAST = settings(
    max_examples=40,
    deadline=None,
    derandomize=_DERANDOMIZE,
    suppress_health_check=list(HealthCheck),
)
MEDIUM = settings(
    max_examples=100,
    deadline=None,
    derandomize=_DERANDOMIZE,
    suppress_health_check=list(HealthCheck),
)


def fugu_error_or_result(fn: Callable[[], Any]) -> tuple[Any, FuguError | None]:
    """Call ``fn``: a FuguError is fine, a result is returned for checking, anything else fails."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            return fn(), None
        except FuguError as e:
            assert str(e), "a FuguError must say what is wrong"
            return None, e
        except Exception as e:  # pragma: no cover - this is the failure being tested for
            pytest.fail(f"{type(e).__name__} (not a FuguError): {e}")


# ---------------------------------------------------------------------------------------------
# ε
# ---------------------------------------------------------------------------------------------

BAD_EPSILONS: list[Any] = [
    0,
    0.0,
    -1,
    -1e-300,
    float("nan"),
    float("inf"),
    -float("inf"),
    np.float64("nan"),
    "1",
    "abc",
    None,
    True,
    [1.0],
    {"epsilon": 1},
    complex(1, 0),
    1e-300,
    1e-17,
    5e-324,
    1e6,
    1e308,
]

any_epsilon = st.one_of(
    st.sampled_from(BAD_EPSILONS),
    st.floats(allow_nan=True, allow_infinity=True),
    st.floats(min_value=1e-3, max_value=5.0),
    st.integers(-5, 5),
    st.text(max_size=4),
)


def _valid(eps: Any) -> bool:
    return (
        isinstance(eps, int | float | np.floating)
        and not isinstance(eps, bool)
        and math.isfinite(eps)
        and MIN_EPSILON <= eps <= MAX_EPSILON
    )


def _dom2() -> fugu.Domain:
    return fugu.Domain([fugu.Ordinal("a", 0, 7), fugu.Nominal("c", ["x", "y"])])


def _hist2() -> fugu.Histogram:
    return fugu.Histogram(np.arange(16).reshape(8, 2), _dom2())


def _hist1() -> fugu.Histogram:
    return fugu.Histogram(np.arange(8), fugu.Domain([fugu.Ordinal("a", 0, 7)]))


def _rng() -> fugu.RandomSource:
    return fugu.RandomSource(seed=1)


@pytest.mark.parametrize("eps", BAD_EPSILONS, ids=repr)
def test_check_epsilon_refuses_every_bad_epsilon(eps: Any) -> None:
    with pytest.raises(FuguError):
        fugu.errors.check_epsilon(eps)


def test_epsilon_floor_and_range_helper() -> None:
    assert fugu.errors.check_epsilon(MIN_EPSILON) == MIN_EPSILON
    with pytest.raises(InvalidParameterError, match="from 2.2e-16 to 1000"):
        fugu.errors.check_epsilon(1e-17)
    assert epsilon_range() == (2.0**-52, 1000.0)
    assert check_epsilon_range(0.5, mechanism="m") == 0.5
    with pytest.raises(
        InvalidParameterError, match=r"too small for tree: .* from 2.84e-14 to 1000"
    ):
        check_epsilon_range(1e-14, mechanism="tree", sensitivity=8, splits=16)
    with pytest.raises(InvalidParameterError, match="OLH needs e"):
        check_epsilon_range(1e-9, mechanism="OLH", minimum=1e-6, why="OLH needs e^eps - 1 > 0")
    with pytest.raises(FuguError):
        check_epsilon_range(float("nan"), mechanism="m")
    # the shared start() of every mechanism checks it before charging the accountant
    from fugu.mechanism import start

    acct = fugu.Accountant(1.0)
    with pytest.raises(InvalidParameterError, match="too small for my tree"):
        start(1e-13, None, acct, "my tree", sensitivity=4, splits=2**10)
    assert acct.spent == 0
    assert start(0.5, _rng(), acct, "x")[0] == 0.5 and acct.spent == 0.5


CENTRAL: dict[str, Callable[[Any], Any]] = {
    "central.laplace": lambda e: fugu.central.laplace(_hist2(), e, rng=_rng()),
    # 1-D, fixed branching: planning a tree costs seconds on a 2-D domain (treeplan L-BFGS)
    "central.hierarchical": lambda e: fugu.central.hierarchical(
        _hist1(), e, branching=2, rng=_rng()
    ),
    "central.privelet": lambda e: fugu.central.privelet(_hist2(), e, rng=_rng()),
    "blowfish.laplace": lambda e: fugu.blowfish.laplace(
        _hist1(), e, fugu.blowfish.Policy.line(_hist1().domain), rng=_rng()
    ),
    "blowfish.ordered": lambda e: fugu.blowfish.ordered(
        _hist1(), e, fugu.blowfish.Policy.line(_hist1().domain), rng=_rng()
    ),
}


@pytest.mark.parametrize("name", sorted(CENTRAL))
@FAST
@given(eps=any_epsilon)
def test_mechanisms_refuse_bad_epsilon_or_release_at_that_epsilon(name: str, eps: Any) -> None:
    rel, err = fugu_error_or_result(lambda: CENTRAL[name](eps))
    if err is None:
        assert _valid(eps), f"{name} accepted epsilon={eps!r}"
        assert rel.guarantee.epsilon == pytest.approx(float(eps))
        assert np.all(np.isfinite(rel.counts))


@FAST
@given(eps=any_epsilon)
def test_ordered_hierarchical_epsilon(eps: Any) -> None:
    pol = fugu.blowfish.Policy.line(_hist1().domain)
    rel, err = fugu_error_or_result(
        lambda: fugu.blowfish.ordered_hierarchical(_hist1(), eps, pol, rng=_rng())
    )
    if err is None:
        assert _valid(eps) and rel.guarantee.epsilon == pytest.approx(float(eps))


@pytest.mark.parametrize("mechanism", ["laplace", "karwa", "smooth"])
@FAST
@given(eps=any_epsilon)
def test_graph_count_epsilon(mechanism: str, eps: Any) -> None:
    nx = pytest.importorskip("networkx")
    g = nx.karate_club_graph()
    pattern = "2-star" if mechanism == "karwa" else "triangle"
    rel, err = fugu_error_or_result(
        lambda: fugu.graph.count(g, pattern, eps, unit="edge", mechanism=mechanism, rng=_rng())
    )
    if err is None:
        assert _valid(eps) and rel.guarantee.epsilon == pytest.approx(float(eps))


LDP = ["GRR", "OLH", "OUE", "SW", "HIO", "LHIO", "CALM", "MSW", "Uni", "HDG", "TDG"]


@pytest.mark.parametrize("method", LDP)
@FAST
@given(eps=any_epsilon)
def test_ldp_protocols_epsilon(method: str, eps: Any) -> None:
    dom = fugu.Domain([fugu.Ordinal("a", 0, 7), fugu.Ordinal("b", 0, 3)])
    if method in ("GRR", "OLH", "OUE", "SW"):
        dom = fugu.Domain([fugu.Ordinal("a", 0, 7)])
    proto, err = fugu_error_or_result(lambda: getattr(fugu.ldp, method)(dom, epsilon=eps))
    if err is None:
        assert _valid(eps), f"{method} accepted epsilon={eps!r}"
        assert proto.epsilon == pytest.approx(float(eps))


@FAST
@given(total=any_epsilon, spend=any_epsilon)
def test_accountant_epsilons(total: Any, spend: Any) -> None:
    acct, err = fugu_error_or_result(lambda: fugu.Accountant(total))
    if err is not None:
        return
    assert _valid(total)
    _, err = fugu_error_or_result(lambda: acct.spend(spend, "x"))
    if err is None:
        assert _valid(spend) and acct.spent <= acct.budget.epsilon + 1e-9


# ---------------------------------------------------------------------------------------------
# data: histograms and records
# ---------------------------------------------------------------------------------------------

_dtypes = st.sampled_from(
    [np.int8, np.int16, np.int32, np.int64, np.uint8, np.uint32, np.uint64, np.float32, np.float64]
)


@st.composite
def _count_arrays(draw: st.DrawFn) -> np.ndarray:
    dtype = np.dtype(draw(_dtypes))
    shape = draw(st.sampled_from([(8, 2), (16,), (3, 3), (0,), (8, 2, 1)]))
    n = int(np.prod(shape))
    if dtype.kind == "f":
        vals = draw(st.lists(st.floats(width=dtype.itemsize * 8), min_size=n, max_size=n))
    else:
        info = np.iinfo(dtype)
        vals = draw(st.lists(st.integers(int(info.min), int(info.max)), min_size=n, max_size=n))
    return np.array(vals, dtype=dtype).reshape(shape)


@MEDIUM
@given(counts=_count_arrays())
def test_histogram_holds_exactly_the_counts_given_or_refuses(counts: np.ndarray) -> None:
    h, err = fugu_error_or_result(lambda: fugu.Histogram(counts, _dom2()))
    if err is None:
        flat = counts.reshape(-1)
        assert flat.size == 16
        assert h.counts.dtype == np.int64
        # nothing wrapped, clipped or rounded
        assert [int(x) for x in h.counts.reshape(-1)] == [int(x) for x in flat]
        assert all(float(x) == int(x) and x >= 0 for x in flat)
        assert sum(int(x) for x in flat) <= fugu.histogram.MAX_COUNT


@pytest.mark.parametrize(
    "counts",
    [
        None,
        "abc",
        3,
        [[1, 2]] * 7,
        np.zeros((8, 2), dtype=object),
        np.full((8, 2), True),
        np.array([["1", "2"]] * 8),
        [2**70] * 16,
    ],  # fmt: skip
    ids=lambda c: type(c).__name__,
)
def test_histogram_odd_counts(counts: Any) -> None:
    fugu_error_or_result(lambda: fugu.Histogram(counts, _dom2()))


def test_histogram_bad_domain() -> None:
    for d in (None, [3], "a", 3):
        _, err = fugu_error_or_result(lambda: fugu.Histogram(np.zeros(3), d))  # noqa: B023
        assert err is not None


_cell = st.one_of(
    st.integers(-3, 12),
    st.integers(-(2**64), 2**64),
    st.floats(allow_nan=True, allow_infinity=True),
    st.sampled_from(["x", "y", "z", "", None]),
    st.booleans(),
)


@MEDIUM
@given(
    a=st.lists(_cell, max_size=6),
    c=st.lists(_cell, max_size=6),
    drop=st.sampled_from([None, "a", "c"]),
    ood=st.sampled_from(["error", "clip", "drop"]),
)
def test_from_records_counts_exactly_or_refuses(
    a: list[Any], c: list[Any], drop: str | None, ood: str
) -> None:
    records: dict[str, Any] = {"a": a, "c": c}
    if drop:
        del records[drop]
    h, err = fugu_error_or_result(
        lambda: fugu.Histogram.from_records(records, _dom2(), out_of_domain=ood)  # type: ignore[arg-type]
    )
    if err is None:
        assert len(a) == len(c)
        assert h.total() <= len(a)
        if ood == "error":  # nothing dropped or moved: each record counted once, in its own cell
            assert h.total() == len(a)
            for x, y in zip(a, c, strict=True):
                assert x is not None and y in ("x", "y")
                assert float(x) == int(float(x)) and 0 <= float(x) <= 7


# ---------------------------------------------------------------------------------------------
# domains
# ---------------------------------------------------------------------------------------------

_bound = st.one_of(
    st.integers(-5, 12), st.floats(allow_nan=True, allow_infinity=True), st.just("3"), st.none()
)


@MEDIUM
@given(low=_bound, high=_bound, name=st.one_of(st.text(max_size=3), st.integers(0, 3)))
def test_ordinal_attribute(low: Any, high: Any, name: Any) -> None:
    a, err = fugu_error_or_result(lambda: fugu.Ordinal(name, low, high))
    if err is None:
        assert isinstance(a.name, str) and a.name
        assert a.size >= 1 and a.low == low and a.high == high


@MEDIUM
@given(
    edges=st.lists(st.floats(allow_nan=True, allow_infinity=True, width=32), max_size=5),
)
def test_binned_attribute(edges: list[float]) -> None:
    a, err = fugu_error_or_result(lambda: fugu.Ordinal("a", edges=edges))
    if err is None:
        e = np.asarray(a.edges, dtype=float)
        assert np.all(np.isfinite(e)) and np.all(np.diff(e) > 0) and a.size == len(e) - 1


@MEDIUM
@given(
    values=st.one_of(
        st.lists(st.one_of(st.text(max_size=3), st.integers(0, 3)), max_size=5),
        st.none(),
        st.text(max_size=3),
        st.integers(),
    ),
)
def test_nominal_attribute(values: Any) -> None:
    a, err = fugu_error_or_result(lambda: fugu.Nominal("c", values))
    if isinstance(values, str | int) or values is None:
        assert err is not None, values  # a bare string is not a list of its letters
    if err is None:
        assert a.size == len(values) == len(set(map(str, values)))


def test_domain_of_repeated_or_no_attributes() -> None:
    for attrs in (
        [],
        [fugu.Ordinal("a", 0, 1), fugu.Ordinal("a", 0, 1)],
        "ab",
        [3],
        None,
        3,
        fugu.Ordinal("a", 0, 1),
    ):
        _, err = fugu_error_or_result(lambda: fugu.Domain(attrs))  # noqa: B023
        assert err is not None, attrs


# ---------------------------------------------------------------------------------------------
# queries: refused, or exactly the brute-force sum
# ---------------------------------------------------------------------------------------------

_qval = st.one_of(
    st.integers(-3, 10),
    st.floats(allow_nan=True, allow_infinity=True),
    st.sampled_from(["x", "y", "z", "any", "", "3"]),
    st.none(),
)
_cond = st.one_of(_qval, st.tuples(_qval, _qval), st.lists(_qval, max_size=3))


@MEDIUM
@given(
    conds=st.dictionaries(st.sampled_from(["a", "c", "zzz"]), _cond, max_size=2),
)
def test_range_query_answer_is_brute_force_or_refused(conds: dict[str, Any]) -> None:
    dom = _dom2()
    cube = np.arange(16, dtype=float).reshape(8, 2)
    rel = fugu.release.CubeRelease(
        dom,
        fugu.Guarantee(model="central-dp", epsilon=1.0, neighbours="x", mechanism="test"),
        cube,
        cell_variance=1.0,
    )
    got, err = fugu_error_or_result(lambda: rel.answer(fugu.RangeQuery(conds)))
    if err is None:
        b = fugu.RangeQuery(conds).bounds(dom)
        assert np.all(b[:, 0] < b[:, 1])
        want = cube[b[0, 0] : b[0, 1], b[1, 0] : b[1, 1]].sum()
        assert got == want
        # and every condition really was on the domain, in order, without clipping
        for k, v in conds.items():
            assert k in ("a", "c")
            if k == "a":
                lo, hi = (v, v) if not isinstance(v, tuple | list) else v
                # numeric strings ("3") are read as numbers, as the CLI writes them
                assert b[0, 0] == float(lo) and b[0, 1] == float(hi) + 1


@pytest.mark.parametrize("bad", [None, 5, "a=1", [1, 2], [[("a", 1)]], {"a"}])
def test_answer_and_answer_many_odd_arguments(bad: Any) -> None:
    rel = fugu.central.laplace(_hist2(), 1.0, rng=_rng())
    _, e1 = fugu_error_or_result(lambda: rel.answer(bad))
    _, e2 = fugu_error_or_result(lambda: rel.answer_many(bad))
    assert e1 is not None and e2 is not None
    _, e3 = fugu_error_or_result(lambda: fugu.RangeQuery(bad))
    assert e3 is not None or bad is None


# ---------------------------------------------------------------------------------------------
# LDP reports
# ---------------------------------------------------------------------------------------------

_bad_column = st.sampled_from(
    ["empty", "short", "strings", "huge", "negative", "nan", "missing", "float"]
)


@pytest.mark.parametrize("method", ["GRR", "OLH", "OUE", "HIO", "SW"])
@FAST
@given(kind=_bad_column, which=st.integers(0, 5), data=st.data())
def test_ldp_aggregate_malformed_reports(method: str, kind: str, which: int, data: Any) -> None:
    dom = fugu.Domain([fugu.Ordinal("a", 0, 7)])
    if method == "HIO":
        dom = fugu.Domain([fugu.Ordinal("a", 0, 7), fugu.Ordinal("b", 0, 3)])
    if method == "SW" and kind == "float":
        return  # Square Wave reports are real numbers: 0.5 is a valid report
    proto = getattr(fugu.ldp, method)(dom, epsilon=1.0)
    recs = {n: np.arange(40) % 4 for n in dom.names}
    good = proto.client(_rng()).perturb(recs)
    cols = dict(good.columns)
    key = sorted(cols)[which % len(cols)]
    v = cols[key]
    bad = {
        "empty": v[:0],
        "short": v[:-5],
        "strings": np.array(["q"] * len(v)),
        "huge": np.full(v.shape, 2**40),
        "negative": np.full(v.shape, -1),
        "nan": np.full(v.shape, np.nan),
        "float": np.full(v.shape, 0.5),
        "missing": None,
    }[kind]
    new = {k: x for k, x in cols.items() if k != key}
    if bad is not None:
        new[key] = bad
    rel, err = fugu_error_or_result(
        lambda: proto.aggregate(new, header=good.header(), on_invalid="raise")
    )
    if err is None and kind == "short" and len(cols) == 1:
        # one column: a shorter one is just a smaller batch (nothing to disagree with)
        assert rel.guarantee.data_options["reports_accepted"] == len(v) - 5
        return
    if err is None:
        pytest.fail(f"{method}: a report set with column {key!r} {kind} was accepted: {rel}")


@pytest.mark.parametrize("method", ["GRR", "OLH", "OUE"])
def test_ldp_aggregate_odd_arguments(method: str) -> None:
    proto = getattr(fugu.ldp, method)(fugu.Domain([fugu.Ordinal("a", 0, 7)]), epsilon=1.0)
    other = fugu.ldp.GRR(fugu.Domain([fugu.Ordinal("a", 0, 7)]), epsilon=2.0)
    foreign = other.client(_rng()).perturb({"a": np.arange(8)})
    for reports in (None, 5, "nofile.parquet", {}, foreign):
        _, err = fugu_error_or_result(lambda: proto.aggregate(reports))  # noqa: B023
        assert err is not None, reports
    _, err = fugu_error_or_result(lambda: proto.aggregate(foreign, on_invalid="foo"))
    assert err is not None


# ---------------------------------------------------------------------------------------------
# files: releases of every kind, and ledgers
# ---------------------------------------------------------------------------------------------


def _releases() -> dict[str, fugu.Release]:
    h1 = _hist1()
    pol = fugu.blowfish.Policy.line(h1.domain)
    out = {
        "hierarchical": fugu.central.hierarchical(_hist2(), 1.0, rng=_rng()),
        "privelet": fugu.central.privelet(_hist2(), 1.0, rng=_rng()),
        "blowfish-ordered": fugu.blowfish.ordered(h1, 1.0, pol, rng=_rng()),
        "blowfish-linear": fugu.blowfish.laplace(h1, 1.0, pol, rng=_rng()),
        "ldp-frequency": fugu.ldp.OLH(h1.domain, epsilon=1.0).simulate(
            {"a": np.arange(200) % 8}, rng=_rng()
        ),
    }
    try:
        import networkx as nx

        out["graph-count"] = fugu.graph.count(
            nx.karate_club_graph(), "triangle", 1.0, unit="edge", mechanism="laplace", rng=_rng()
        )
    except ImportError:  # pragma: no cover
        pass
    return out


@pytest.fixture(scope="module")
def saved(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    d = tmp_path_factory.mktemp("kinds")
    return {k: r.save(d / f"{k}.npz") for k, r in _releases().items()}


@pytest.mark.parametrize(
    "kind",
    [
        "hierarchical",
        "privelet",
        "blowfish-ordered",
        "blowfish-linear",
        "ldp-frequency",
        "graph-count",
    ],
)
@FAST
@given(data=st.data())
def test_release_files_of_every_kind_refused_or_identical(
    saved: dict[str, Path], kind: str, data: Any, tmp_path_factory: pytest.TempPathFactory
) -> None:
    if kind not in saved:
        pytest.skip("networkx missing")
    blob = bytearray(saved[kind].read_bytes())
    for _ in range(data.draw(st.integers(1, 3))):
        blob[data.draw(st.integers(0, len(blob) - 1))] = data.draw(st.integers(0, 255))
    if data.draw(st.booleans()):
        blob = blob[: data.draw(st.integers(0, len(blob)))]
    p = tmp_path_factory.mktemp("fz") / "fuzzed.npz"
    p.write_bytes(bytes(blob))
    rel, err = fugu_error_or_result(lambda: fugu.Release.load(p))
    if err is not None:
        assert "fuzzed.npz" in str(err)
    else:
        ref = fugu.Release.load(saved[kind])
        assert rel.guarantee == ref.guarantee and rel.kind == ref.kind


@pytest.mark.parametrize("kind", ["hierarchical", "privelet", "blowfish-ordered", "ldp-frequency"])
@FAST
@given(value=st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=4),
    lambda k: st.lists(k, max_size=3) | st.dictionaries(st.text(max_size=4), k, max_size=3),
    max_leaves=6,
), which=st.integers(0, 50))  # fmt: skip
def test_release_meta_fields_replaced(
    saved: dict[str, Path],
    kind: str,
    value: Any,
    which: int,
    tmp_path_factory: pytest.TempPathFactory,
) -> None:
    """Each kind's own metadata (tree shapes, plain attributes, oracle parameters) replaced by any
    JSON value: refused with a FileFormatError, or loaded into a release that still answers."""
    import io
    import zipfile

    with np.load(saved[kind], allow_pickle=False) as z:
        header = json.loads(bytes(z["__header__"]).decode())
        arrays = {k: z[k] for k in z.files if k != "__header__"}
    keys = sorted(header["meta"]) or ["x"]
    header["meta"][keys[which % len(keys)]] = value
    p = tmp_path_factory.mktemp("meta") / "meta.npz"
    with zipfile.ZipFile(p, "w") as zf:
        payload = {"__header__": np.frombuffer(json.dumps(header).encode(), np.uint8), **arrays}
        for name, arr in payload.items():
            buf = io.BytesIO()
            np.lib.format.write_array(buf, arr)
            zf.writestr(name + ".npy", buf.getvalue())
    rel, err = fugu_error_or_result(lambda: fugu.Release.load(p))
    if err is None:
        fugu_error_or_result(lambda: rel.answer({"a": (0, 3)}))


_ledger_json = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(-(2**65), 2**65)
    | st.floats(allow_nan=True, allow_infinity=True)
    | st.text(max_size=4),
    lambda k: st.lists(k, max_size=3) | st.dictionaries(st.text(max_size=8), k, max_size=3),
    max_leaves=8,
)


@MEDIUM
@given(
    where=st.sampled_from(
        [
            ("budget", "epsilon"),
            ("budget", "model"),
            ("budget", "policy"),
            ("budget",),
            ("ledger",),
            ("ledger", 0),
            ("ledger", 0, "epsilon"),
            ("ledger", 0, "what"),
            ("ledger", 0, "time"),
            ("ledger", 0, "parts"),
            ("format",),
            ("version",),
        ]
    ),  # fmt: skip
    value=_ledger_json,
)
def test_ledger_files_refused_or_valid(tmp_path_factory: Any, where: tuple, value: Any) -> None:
    d: Any = {
        "format": "fugu-ledger",
        "version": 1,
        "budget": {"epsilon": 1.0, "model": "central-dp", "policy": None},
        "ledger": [{"epsilon": 0.5, "what": "x", "time": "t", "parts": []}],
    }
    node = d
    for k in where[:-1]:
        node = node[k]
    node[where[-1]] = value
    p = tmp_path_factory.mktemp("led") / "ledger.json"
    p.write_text(json.dumps(d, allow_nan=True))
    acct, err = fugu_error_or_result(lambda: fugu.Accountant.load(p))
    if err is not None:
        assert "ledger.json" in str(err)
    else:
        assert 0 < acct.budget.epsilon <= 1000 and math.isfinite(acct.budget.epsilon)
        assert all(math.isfinite(e.epsilon) and e.epsilon > 0 for e in acct.ledger)
        assert acct.spent <= acct.budget.epsilon + 1e-9
        assert all(isinstance(e.what, str) and isinstance(e.time, str) for e in acct.ledger)
