"""The client/server protocol: partitions merge exactly, the wire formats round-trip, bad reports
are rejected and counted, bad parameters fail clearly, releases save and load.

All deterministic (fixed seeds); no statistical tolerance.
"""

from __future__ import annotations

import json

import numpy as np
import pytest

import fugu
from fugu.errors import DomainError, EmptyDataError, InvalidParameterError, ReportError
from fugu.ldp import Reports, protocol_from_header

DOM2 = fugu.datasets.synthetic_domain(3, 8)
DOM1 = fugu.Domain([fugu.Ordinal("v", 0, 15)])


def _recs(dom: fugu.Domain, n: int = 3000, seed: int = 0) -> dict[str, np.ndarray]:
    if dom.ndim == 1:
        return {"v": np.random.default_rng(seed).integers(0, 16, n)}
    return fugu.datasets.correlated_gaussian(n, dom.ndim, 8, seed=seed)


def _methods():
    return [
        fugu.ldp.GRR(DOM1, 1.0),
        fugu.ldp.OLH(DOM1, 1.0),
        fugu.ldp.OUE(DOM1, 1.0),
        fugu.ldp.SW(DOM1, 1.0),
        fugu.ldp.Uni(DOM2, 1.0),
        fugu.ldp.MSW(DOM2, 1.0),
        fugu.ldp.HIO(DOM2, 1.0, branching=2),
        fugu.ldp.LHIO(DOM2, 1.0, branching=2),
        fugu.ldp.CALM(DOM2, 1.0),
    ]


@pytest.mark.parametrize("proto", _methods(), ids=lambda p: p.name)
def test_partitions_merge_exactly(proto) -> None:
    reports = proto.client(fugu.RandomSource(seed=5)).perturb(_recs(proto.domain))
    whole = proto.aggregator().add(reports)
    mask = np.random.default_rng(1).random(reports.n) < 0.4
    a = proto.aggregator().add(reports.take(mask))
    b = proto.aggregator().add(reports.take(~mask))
    merged = a.merge(b)
    assert merged.n_accepted == whole.n_accepted == reports.n
    w = fugu.random_workload(proto.domain, 12, n_predicates=(1, proto.domain.ndim), seed=3)
    np.testing.assert_array_equal(merged.estimate().answer_many(w), whole.estimate().answer_many(w))
    if proto.name != "hio":  # HIO keeps reports (merge = concatenation, order differs)
        for k in whole.state:
            np.testing.assert_array_equal(merged.state[k], whole.state[k])


@pytest.mark.parametrize("proto", _methods(), ids=lambda p: p.name)
@pytest.mark.parametrize("suffix", [".jsonl", ".parquet", ".arrow"])
def test_wire_formats_round_trip(proto, suffix, tmp_path) -> None:
    reports = proto.client(fugu.RandomSource(seed=6)).perturb(_recs(proto.domain, 400))
    path = reports.save(tmp_path / f"r{suffix}")
    back = Reports.load(path)
    assert (back.protocol, back.version, back.n, back.private) == (proto.name, 1, 400, False)
    assert back.params == json.loads(json.dumps(proto.params()))
    for k, v in reports.columns.items():
        np.testing.assert_array_equal(np.asarray(back.columns[k]), v)
    server = protocol_from_header(back.header())
    assert type(server) is type(proto)
    w = fugu.random_workload(proto.domain, 5, seed=1)
    np.testing.assert_array_equal(
        server.aggregate(back).answer_many(w), proto.aggregate(reports).answer_many(w)
    )


def test_per_record_path_matches_wire_format(tmp_path) -> None:
    proto = fugu.ldp.OLH(DOM1, 1.0)
    client = proto.client(fugu.RandomSource(seed=1))
    rows = [client.perturb_one({"v": v}) for v in (0, 3, 15, 7)]
    assert set(rows[0]) == {"seed", "y"} and all(0 <= r["y"] < proto.g for r in rows)
    path = tmp_path / "app.jsonl"
    path.write_text("\n".join(json.dumps(x) for x in [client.header(), *rows]) + "\n")
    agg = proto.aggregator().add(Reports.load(path))
    assert agg.n_accepted == 4 and agg.n_rejected == 0
    agg2 = proto.aggregator().add_rows(rows, client.header())
    np.testing.assert_array_equal(agg.state["support"], agg2.state["support"])
    hio = fugu.ldp.HIO(DOM2, 1.0, branching=2)
    row = hio.client(fugu.RandomSource(seed=2)).perturb_one({"a0": 1, "a1": 2, "a2": 7}, group=5)
    assert row["group"] == 5


def test_truncated_files(tmp_path) -> None:
    proto = fugu.ldp.GRR(DOM1, 1.0)
    reports = proto.client(fugu.RandomSource(seed=1)).perturb(_recs(DOM1, 100))
    path = reports.save(tmp_path / "r.jsonl")
    text = path.read_text()
    path.write_text(text[: len(text) - 4])  # cut inside the last line
    agg = proto.aggregator().add(Reports.load(path))
    assert agg.n_accepted == 99 and agg.rejected["malformed"] == 1
    pq = reports.save(tmp_path / "r.parquet")
    pq.write_bytes(pq.read_bytes()[:-20])
    with pytest.raises(ReportError, match="truncated"):
        Reports.load(pq)
    bad = tmp_path / "x.jsonl"
    bad.write_text('{"no": "header"}\n')
    with pytest.raises(ReportError):
        Reports.load(bad)


def test_reports_from_another_protocol_or_epsilon_are_refused() -> None:
    grr = fugu.ldp.GRR(DOM1, 1.0)
    reports = grr.client(fugu.RandomSource(seed=1)).perturb(_recs(DOM1, 50))
    with pytest.raises(ReportError, match="protocol 'grr'"):
        fugu.ldp.OLH(DOM1, 1.0).aggregate(reports)
    with pytest.raises(ReportError, match="epsilon"):
        fugu.ldp.GRR(DOM1, 2.0).aggregate(reports)
    other = fugu.Domain([fugu.Ordinal("v", 0, 31)])
    with pytest.raises(ReportError, match="domain"):
        fugu.ldp.GRR(other, 1.0).aggregate(reports)


def test_out_of_range_reports_are_rejected_and_counted() -> None:
    olh = fugu.ldp.OLH(DOM1, 1.0)
    reports = olh.client(fugu.RandomSource(seed=1)).perturb(_recs(DOM1, 100))
    reports.columns["y"][:3] = [olh.g, -1, 99]
    agg = olh.aggregator().add(reports)
    assert agg.n_accepted == 97 and agg.rejected["out of range"] == 3
    sw = fugu.ldp.SW(DOM1, 1.0)
    r = sw.client(fugu.RandomSource(seed=1)).perturb(_recs(DOM1, 10))
    r.columns["y"][:2] = [np.nan, 5.0]
    assert sw.aggregator().add(r).rejected["out of range"] == 2
    msw = fugu.ldp.MSW(DOM2, 1.0)
    r = msw.client(fugu.RandomSource(seed=1)).perturb(_recs(DOM2, 10))
    r.columns["group"][0] = 7
    assert msw.aggregator().add(r).n_rejected == 1
    oue = fugu.ldp.OUE(fugu.Domain([fugu.Ordinal("v", 0, 4)]), 1.0)  # 5 bits in one byte
    r = oue.client(fugu.RandomSource(seed=1)).perturb({"v": [0, 1, 2]})
    r.columns["bits"][0, 0] |= 0x80  # a bit beyond the domain
    assert oue.aggregator().add(r).n_rejected == 1
    rows = [{"y": 1}, {"y": "x"}, {"z": 2}, ["not", "a", "dict"]]
    agg = fugu.ldp.GRR(DOM1, 1.0).aggregator().add_rows(rows)
    assert agg.n_accepted == 1 and agg.rejected == {"malformed": 2, "wrong type": 1}
    with pytest.raises(EmptyDataError):
        fugu.ldp.GRR(DOM1, 1.0).aggregator().estimate()


def test_bad_parameters_and_records() -> None:
    for eps in (0, -1.0, float("nan"), float("inf")):
        with pytest.raises(InvalidParameterError):
            fugu.ldp.OLH(DOM1, eps)
    tiny = fugu.Domain([fugu.Ordinal("v", 0, 0)])
    for cls in (fugu.ldp.GRR, fugu.ldp.OLH, fugu.ldp.OUE, fugu.ldp.SW):
        with pytest.raises(InvalidParameterError):
            cls(tiny, 1.0)
    with pytest.raises(InvalidParameterError):
        fugu.ldp.HIO(fugu.Domain([fugu.Ordinal("a", 0, 0), fugu.Ordinal("b", 0, 3)]), 1.0)
    with pytest.raises(InvalidParameterError):
        fugu.ldp.CALM(DOM1, 1.0)
    with pytest.raises(DomainError):
        fugu.ldp.GRR(DOM1, 1.0).client().perturb({"v": [3, 16]})
    with pytest.raises(DomainError):
        fugu.ldp.OLH(DOM1, 1.0).client().perturb(np.array([[0], [-1]]))
    with pytest.raises(InvalidParameterError):
        fugu.ldp.MSW(DOM2, 1.0).client().perturb(_recs(DOM2, 5), groups=[0, 1, 2, 3, 4])


def test_seeded_clients_mark_the_release_not_private() -> None:
    proto = fugu.ldp.GRR(DOM1, 1.0)
    rel = proto.simulate(_recs(DOM1, 50), rng=fugu.RandomSource(seed=1))
    assert rel.guarantee.private is False and rel.guarantee.model == "ldp"
    rel2 = proto.simulate(_recs(DOM1, 50))
    assert rel2.guarantee.private is True
    mixed = proto.aggregator()
    mixed.add(proto.client().perturb(_recs(DOM1, 20)))
    mixed.add(proto.client(fugu.RandomSource(seed=2)).perturb(_recs(DOM1, 20)))
    assert mixed.estimate().guarantee.private is False


@pytest.mark.parametrize("proto", _methods(), ids=lambda p: p.name)
def test_releases_save_and_load(proto, tmp_path) -> None:
    rel = proto.simulate(_recs(proto.domain, 500), rng=fugu.RandomSource(seed=9))
    back = fugu.Release.load(rel.save(tmp_path / "rel.npz"))
    assert type(back) is type(rel) and back.guarantee == rel.guarantee
    w = fugu.random_workload(proto.domain, 8, seed=2)
    np.testing.assert_allclose(back.answer_many(w), rel.answer_many(w))


@pytest.mark.parametrize("proto", _methods(), ids=lambda p: p.name)
def test_engine_style_partial_states(proto) -> None:
    """What an engine does: validate + count per partition, sum the states, hand them over."""
    reports = proto.client(fugu.RandomSource(seed=8)).perturb(_recs(proto.domain, 900))
    cols = {k: v.copy() for k, v in reports.columns.items()}
    bad = next((k for k in ("y", "group", "v") if k in cols), None)
    if bad is not None:  # one bad report
        cols[bad][0] = np.nan if cols[bad].dtype.kind == "f" else -5
    parts = np.array_split(np.arange(900), 3)
    states = [proto.partial({k: v[p] for k, v in cols.items()}) for p in parts]
    total = states[0][0]
    for st, _, _ in states[1:]:
        total = proto.merge_state(total, st)
    agg = proto.aggregator().add_partial(
        total, sum(s[1] for s in states), sum((s[2] for s in states), start=type(states[0][2])())
    )
    direct = proto.aggregator().add(Reports(proto.name, proto.version, proto.params(), cols, 900))
    assert agg.n_accepted == direct.n_accepted and agg.rejected == direct.rejected
    w = fugu.random_workload(proto.domain, 6, seed=4)
    np.testing.assert_allclose(agg.estimate().answer_many(w), direct.estimate().answer_many(w))


# -- review 14: nothing absorbed twice ------------------------------------------------------------
# Reports carry no identity, but a batch or file given twice, an aggregator merged with itself,
# or two aggregators that absorbed the same batch were summed without a word: every report
# counted twice (estimates doubled; the release said twice as many reports).
def _grr_batch():
    grr = fugu.ldp.GRR(DOM1, 1.0)
    return grr, grr.client(fugu.RandomSource(seed=1)).perturb(_recs(DOM1, 200))


def test_an_aggregator_cannot_merge_itself() -> None:
    grr, rep = _grr_batch()
    agg = grr.aggregator().add(rep)
    with pytest.raises(ReportError, match="merge itself"):
        agg.merge(agg)
    assert agg.n_accepted == 200


def test_the_same_batch_twice_is_refused() -> None:
    grr, rep = _grr_batch()
    with pytest.raises(ReportError, match="already absorbed"):
        grr.aggregate([rep, rep])
    agg = grr.aggregator().add(rep)
    with pytest.raises(ReportError, match="already absorbed"):
        agg.add(rep)
    with pytest.raises(ReportError, match="already absorbed"):
        grr.aggregator_for([rep, rep], engine="duckdb")
    # two aggregators that share a batch
    other = grr.aggregator().add(rep)
    with pytest.raises(ReportError, match="count those reports twice"):
        grr.aggregator().add(rep.take(np.arange(5))).merge(other).merge(grr.aggregator().add(rep))
    # disjoint parts of one batch still merge
    a = grr.aggregator().add(rep.take(np.arange(100)))
    b = grr.aggregator().add(rep.take(np.arange(100, 200)))
    assert a.merge(b).n_accepted == 200


@pytest.mark.parametrize("suffix", [".jsonl", ".parquet"])
def test_the_same_file_twice_is_refused(tmp_path, suffix) -> None:
    grr, rep = _grr_batch()
    path = rep.save(tmp_path / f"r{suffix}")
    link = tmp_path / f"link{suffix}"
    link.symlink_to(path)
    for engine in ("numpy", "duckdb"):
        with pytest.raises(ReportError, match="already absorbed"):
            grr.aggregate([path, str(tmp_path / "." / path.name)], engine=engine)
        with pytest.raises(ReportError, match="already absorbed"):
            grr.aggregate([path, link], engine=engine)
        a = grr.aggregator_for(path, engine=engine)
        with pytest.raises(ReportError, match="count those reports twice"):
            a.merge(grr.aggregator_for(link, engine=engine))


def test_a_pickled_aggregator_merges_by_its_counts() -> None:
    import pickle

    grr, rep = _grr_batch()
    a = grr.aggregator().add(rep.take(np.arange(100)))
    b = pickle.loads(pickle.dumps(grr.aggregator().add(rep.take(np.arange(100, 200)))))
    assert a.merge(b).n_accepted == 200


def test_cli_aggregate_refuses_a_file_named_twice(tmp_path, capsys) -> None:
    from fugu.cli import main

    grr, rep = _grr_batch()
    path = rep.save(tmp_path / "r.jsonl")
    ledger = tmp_path / "l.json"
    assert main(["ledger", "init", str(ledger), "--total", "5", "--model", "ldp"]) == 0
    for engine in ([], ["--engine", "duckdb"]):
        for second in (str(path), str(tmp_path / "." / "r.jsonl")):
            code = main(["ldp", "aggregate", str(path), second, "--ledger", str(ledger), *engine])
            _, err = capsys.readouterr()
            assert code != 0 and "named twice" in err
    assert fugu.Accountant.load(ledger).spent == 0  # refused before the ledger is charged


# -- review 14: a partial state from elsewhere must fit this aggregator -------------------------
# add_partial summed whatever it was given: a support vector of length 1 was broadcast into every
# cell (+5 on each of 10 cells), a negative count or fractional support was absorbed, a missing
# key raised a bare KeyError and a vector of another domain's length numpy's ValueError.
@pytest.mark.parametrize(
    ("state", "n", "words"),
    [
        ({"support": np.array([5])}, 5, "of shape (16,)"),
        ({"support": np.arange(3)}, 3, "of shape (16,)"),
        ({"support": np.full(16, 0.5)}, 8, "integer counts"),
        ({"support": -np.ones(16, np.int64)}, 0, "non-negative"),
        ({"support": np.ones(16, np.int64)}, -5, "n_accepted must be a count"),
        ({}, 5, "must have the keys ['support']"),
    ],
)
def test_add_partial_refuses_a_state_of_another_shape(state, n, words) -> None:
    grr = fugu.ldp.GRR(DOM1, 1.0)
    agg = grr.aggregator()
    with pytest.raises(ReportError) as info:
        agg.add_partial(state, n)
    assert words in str(info.value)
    assert agg.n_accepted == 0 and agg.state["support"].sum() == 0
    state, n_ok, rejected = grr.partial({"y": np.array([1, 2, 3, 99])})
    assert agg.add_partial(state, n_ok, rejected).n_accepted == 3  # a real partial is absorbed


def test_concat_refuses_the_same_batch_twice() -> None:
    grr, rep = _grr_batch()
    with pytest.raises(ReportError, match="appears twice"):
        Reports.concat([rep, rep])
    assert Reports.concat([rep.take(np.arange(3)), rep.take(np.arange(3, 9))]).n == 9


def test_olh_refuses_a_hash_range_beyond_64_bit_buckets() -> None:
    # g = 2^33: (h * g) >> 32 wrapped in 64 bits, buckets were not uniform, estimates biased
    with pytest.raises(InvalidParameterError, match="g <= 2"):
        fugu.ldp.OLH(DOM1, 1.0, g=2**33)
    assert fugu.ldp.OLH(DOM1, 1.0, g=2**31).g == 2**31


# -- review 14: a client's group is an integer, never a truncated fraction ----------------------
def test_client_groups_must_be_integers() -> None:
    hio = fugu.ldp.HIO(DOM2, 1.0, branching=2)
    client = hio.client(fugu.RandomSource(seed=1))
    recs = _recs(DOM2, 2)
    with pytest.raises(InvalidParameterError, match="groups must be 2 integers"):
        client.perturb(recs, groups=[0.5, 1.7])  # was groups 0 and 1
    one = {k: int(v[0]) for k, v in recs.items()}
    for bad in (1.7, True, "1"):
        with pytest.raises(InvalidParameterError, match="group must be an integer"):
            client.perturb_one(one, group=bad)
    assert client.perturb(recs, groups=np.array([0, 1], np.int32)).columns["group"].tolist() == [
        0,
        1,
    ]
    assert client.perturb_one(one, group=np.int64(2))["group"] == 2


# -- the guarantee names the oracle each group used (review 21's note) ---------------------------
@pytest.mark.parametrize("method", ["HIO", "LHIO", "CALM"])
def test_adaptive_guarantee_names_each_groups_oracle(method: str) -> None:
    """With ``oracle="adaptive"`` the guarantee said only 'adaptive'; it now lists, per group,
    the oracle that group's users report through (GRR for small groups, OLH for large ones),
    as TDG/HDG's guarantees do."""
    dom = fugu.datasets.synthetic_domain(3, 32)
    data = fugu.datasets.correlated_gaussian(3000, 3, 32, seed=1)
    mech = getattr(fugu.ldp, method)(dom, 1.0)
    rel = mech.simulate(data, rng=fugu.RandomSource(seed=1))
    params = rel.guarantee.parameters
    assert params["oracle"] == "adaptive"
    assert params["oracles"] == list(mech.grouped.kinds)
    assert len(params["oracles"]) == len(mech.grouped.cells)
    kinds = {
        int(k): fugu.ldp.choose_oracle(int(k), 1.0) for k in mech.grouped.cells
    }  # the documented rule, group by group
    assert params["oracles"] == [kinds[int(k)] for k in mech.grouped.cells]
    if method != "CALM":  # HIO/LHIO mix tiny and large groups
        assert {"grr", "olh"} <= set(params["oracles"])
    assert json.loads(json.dumps(params["oracles"])) == params["oracles"]
