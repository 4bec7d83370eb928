"""Review 14: attribute specs, the CLI's output options, and the LDP server side (hostile
reports, report files, aggregator merges).

Every test here failed before the fix named in its docstring.
"""

from __future__ import annotations

from pathlib import Path

import pytest

import fugu
from fugu.cli import main
from fugu.cli._common import parse_attribute
from fugu.errors import InvalidParameterError


def run(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    code = main(list(args))
    out, err = capsys.readouterr()
    return code, out, err


def _csv(tmp_path: Path, text: str) -> Path:
    p = tmp_path / "data.csv"
    p.write_text(text)
    return p


# -- 1. attribute specs: nothing dropped silently, errors name the spec and the fix ---------------
# ``sex:F||M`` made a domain of F and M (the empty value was dropped without a word); an empty
# CSV field is a missing value in fugu, so the spec can only be a typo and is refused.
@pytest.mark.parametrize("spec", ["sex:F||M", "sex:|F|M", "sex:F|M|"])
def test_an_empty_nominal_value_is_refused(spec: str) -> None:
    with pytest.raises(InvalidParameterError) as info:
        parse_attribute(spec, "--attributes")
    msg = str(info.value)
    assert "--attributes" in msg and repr(spec) in msg
    assert "empty value" in msg and "sex:F|M" in msg  # the fix


@pytest.mark.parametrize("spec", ["sex:", "sex:|"])
def test_a_nominal_spec_without_values_says_so(spec: str) -> None:
    with pytest.raises(InvalidParameterError, match="has no values"):
        parse_attribute(spec, "--attributes")


def test_an_empty_nominal_value_fails_the_command(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    data = _csv(tmp_path, "sex\nF\nM\nF\n")
    code, out, err = run(
        capsys, "release", "--data", str(data), "-a", "sex:F||M", "--epsilon", "1",
        "--mechanism", "laplace", "--seed", "1",
    )  # fmt: skip
    assert code != 0 and out == ""
    assert "'sex:F||M'" in err and "empty value" in err


@pytest.mark.parametrize(
    ("spec", "words"),
    [
        # bare ValueError "could not convert string to float: ''" before
        ("gain:edges=0||10", ["bin edge ''", "gain:edges=0|100|1000"]),
        ("gain:edges=0|x", ["bin edge 'x'"]),
        # said "bounds must be integers" before
        ("age:9..1", ["low bound 9 is above the high bound 1", "age:1..9"]),
    ],
)
def test_bad_ordinal_specs_name_the_problem(spec: str, words: list[str]) -> None:
    with pytest.raises(InvalidParameterError) as info:
        parse_attribute(spec, "--attributes")
    msg = str(info.value)
    assert repr(spec) in msg
    for w in words:
        assert w in msg


def test_good_specs_still_parse() -> None:
    assert parse_attribute("sex:F|M").values == ("F", "M")
    assert parse_attribute("age:3..3").size == 1
    assert parse_attribute("gain:edges=0|100|1000").size == 2
    assert isinstance(parse_attribute("age:0..99"), fugu.Ordinal)


# -- 2. --head is honoured with --out (it was ignored without a word) ----------------------------
def _release_args(out: Path) -> list[str]:
    return [
        "release", "--data", "adult", "-a", "sex,race", "--mechanism", "laplace",
        "--epsilon", "1", "--seed", "1", "--out", str(out),
    ]  # fmt: skip


def test_release_head_with_out_prints_the_cells(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, _ = run(capsys, *_release_args(tmp_path / "r.npz"), "--head", "3")
    assert code == 0
    assert "written to" in out
    assert "3 of 10 cells shown" in out  # before: no cells at all, --head ignored
    code, out, _ = run(capsys, *_release_args(tmp_path / "s.npz"))
    assert code == 0 and "cells shown" not in out and "noisy count" not in out  # default: quiet


def test_ldp_aggregate_head_with_out_prints_the_cells(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    dom = fugu.Domain([fugu.Ordinal("v", 0, 9)])
    reports = fugu.ldp.GRR(dom, 1.0).client(fugu.RandomSource(seed=1)).perturb({"v": [1] * 50})
    path = reports.save(tmp_path / "r.jsonl")
    code, out, _ = run(
        capsys, "ldp", "aggregate", str(path), "--out", str(tmp_path / "rel.npz"), "--head", "4"
    )
    assert code == 0 and "release written to" in out
    assert "4 of 10 cells shown" in out
    # a negative --head printed no cell and said nothing; refused before any report is read
    code, out, err = run(capsys, "ldp", "aggregate", str(path), "--head", "-1")
    assert code != 0 and "--head" in err and "-1" in err


# -- 3. numbers on a binned attribute count whole bins: the CLI says which ------------------------
# RangeQuery documents that numeric bounds on Ordinal(edges=...) select whole bins; 'fugu query
# --where gain=0..100' printed "gain=0..100: <answer of [0, 100) and [100, 1000]>" with no word,
# and 'gain=150' (one number) was refused as an unknown bin label.
@pytest.fixture()
def binned_release(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> Path:
    data = _csv(tmp_path, "gain,sex\n5,F\n150,M\n900,F\n20,M\n")
    out = tmp_path / "r.npz"
    code, _, _ = run(
        capsys, "release", "--data", str(data), "-a", "gain:edges=0|100|1000,sex:F|M",
        "-m", "laplace", "-e", "1", "--seed", "1", "--out", str(out),
    )  # fmt: skip
    assert code == 0
    return out


@pytest.mark.parametrize(
    ("where", "bins", "same_as"),
    [
        ("gain=0..100", "[0, 100) to [100, 1000]", "gain=[0, 100)..[100, 1000]"),
        ("gain=150..900", "[100, 1000]", "gain=[100, 1000]"),
        ("gain=150", "[100, 1000]", "gain=[100, 1000]"),
    ],
)
def test_numeric_bounds_on_bins_name_the_bins(
    binned_release: Path, capsys: pytest.CaptureFixture[str], where: str, bins: str, same_as: str
) -> None:
    code, out, err = run(capsys, "query", str(binned_release), "--where", where, "--json")
    assert code == 0, err
    assert f"counts whole bins: {bins}" in err
    code2, out2, err2 = run(capsys, "query", str(binned_release), "--where", same_as, "--json")
    assert code2 == 0 and "whole bins" not in err2  # bin labels need no notice
    import json

    assert json.loads(out)["answer"] == json.loads(out2)["answer"]


def test_a_word_on_a_binned_attribute_lists_the_bins(
    binned_release: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, _, err = run(capsys, "query", str(binned_release), "--where", "gain=abc")
    assert code != 0 and "'gain=abc'" in err and "[0, 100)" in err


# -- 4. a boolean query bound is refused (it was read as 0 or 1) ----------------------------------
# A JSON workload's {"age": true} or RangeQuery({"age": (False, True)}) counted age 1 (or 0..1)
# without a word; on a binned attribute True picked the second bin.
@pytest.mark.parametrize("cond", [True, (False, True), (0, True)])
def test_boolean_bounds_are_refused(cond: object) -> None:
    import numpy as np

    dom = fugu.Domain([fugu.Ordinal("age", 0, 99), fugu.Ordinal("g", edges=[0, 1, 2])])
    for name in ("age", "g"):
        with pytest.raises(fugu.errors.DomainError, match="boolean"):
            fugu.RangeQuery({name: cond}).bounds(dom)
    with pytest.raises(fugu.errors.DomainError, match="boolean"):
        fugu.RangeQuery({"age": np.bool_(True)}).bounds(dom)
    # nominal labels "True" / "False" are labels, as before
    nom = fugu.Domain([fugu.Nominal("flag", ["False", "True"])])
    assert fugu.RangeQuery({"flag": True}).bounds(nom).tolist() == [[1, 2]]


def test_a_boolean_in_a_workload_file_fails_the_command(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    w = tmp_path / "w.json"
    w.write_text('[{"age": true}]')
    code, out, err = run(capsys, "recommend", "-e", "1", "-a", "age", "-w", str(w))
    assert code != 0 and "boolean" in err


# -- 5. --workload random:N:K errors name the option ----------------------------------------------
def test_random_workload_errors_name_the_option(capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = run(capsys, "recommend", "-e", "1", "-a", "age", "-w", "random:5:2")
    assert code != 0 and "--workload 'random:5:2'" in err and "K1 <= K2 <= 1" in err


# -- 6. --domain FILE errors name the option, the file and the fix --------------------------------
# A missing file said "[Errno 2] No such file or directory", bad JSON only the parser's position,
# a list "list indices must be integers or slices, not str", and a description without "low" /
# "attributes" ended in a traceback (KeyError).
@pytest.mark.parametrize(
    ("text", "words"),
    [
        (None, "cannot be read"),
        ("{bad", "is not valid JSON"),
        ("[]", 'a domain description is {"attributes": [...]}'),
        ("{}", 'a domain description is {"attributes": [...]}'),
        ('{"attributes": [{"kind": "ordinal", "name": "age"}]}', "lacks 'low', 'high'"),
        ('{"attributes": [{"kind": "nominal", "name": "s"}]}', "lacks 'hierarchy'"),
        ('{"attributes": [{"kind": "ordinal", "low": 0, "high": 9}]}', "lacks 'name'"),
        ('{"attributes": [[1]]}', "an attribute description is an object"),
    ],
)
def test_domain_file_errors_are_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], text: str | None, words: str
) -> None:
    path = tmp_path / "dom.json"
    if text is not None:
        path.write_text(text)
    code, out, err = run(capsys, "recommend", "-e", "1", "--domain", str(path))
    assert code != 0 and out == ""
    assert "Traceback" not in err and f"--domain {str(path)!r}" in err and words in err


def test_domain_from_dict_refuses_a_description_without_its_keys() -> None:
    with pytest.raises(InvalidParameterError, match="lacks 'low', 'high'"):
        fugu.Domain.from_dict({"attributes": [{"kind": "ordinal", "name": "age"}]})
    dom = fugu.Domain([fugu.Ordinal("age", 0, 9), fugu.Nominal("s", ["F", "M"])])
    assert fugu.Domain.from_dict(dom.to_dict()) == dom


# -- 7. -o budget= takes per-level shares ---------------------------------------------------------
# 'fugu release -m hierarchical -o budget=1,2,4' reached the library as the text '1,2,4' and was
# refused with "budget must be one of [...] or per-level shares", which the CLI could not give.
def test_hierarchical_budget_shares_from_the_cli(capsys: pytest.CaptureFixture[str]) -> None:
    import json

    code, out, err = run(
        capsys, "release", "-m", "hierarchical", "-a", "age", "-e", "1", "--branching", "5",
        "-o", "budget=1,2,4", "--seed", "1", "--json",
    )  # fmt: skip
    assert code == 0, err
    shares = json.loads(out)["guarantee"]["parameters"]["level_shares"][0]
    assert shares == pytest.approx([0, 1 / 7, 2 / 7, 4 / 7])
    code, _, err = run(capsys, "release", "-m", "hierarchical", "-a", "age", "-e", "1",
                       "-o", "budget=1,x")  # fmt: skip
    assert code != 0 and "-o budget=1,x" in err


# -- 8. error metrics refuse estimates and truths of different shapes -----------------------------
# mae([1, 2, 3], [1]) broadcast the one true answer to all three (1.0, no error); relative_error
# with sanity_bound NaN returned NaN errors.
def test_error_metrics_refuse_mismatched_shapes() -> None:
    from fugu.queries import mae, relative_error, rmse

    for fn in (mae, rmse):
        with pytest.raises(InvalidParameterError, match="same shape"):
            fn([1.0, 2.0, 3.0], [1.0])
        with pytest.raises(InvalidParameterError, match="empty"):
            fn([], [])
        assert fn([1.0, 3.0], [1.0, 1.0]) == pytest.approx(1.0 if fn is mae else 2**0.5)
    with pytest.raises(InvalidParameterError, match="same shape"):
        relative_error([1.0, 2.0], [[1.0, 2.0]], 1.0)
    with pytest.raises(InvalidParameterError, match="sanity_bound"):
        relative_error([1.0], [1.0], float("nan"))


# -- 9. --out in a directory that does not exist is refused before anything is spent -------------
# 'fugu ldp perturb ... --out nodir/r.jsonl --ledger L' charged the users' epsilon, then failed to
# write the reports ("[Errno 2] No such file or directory"); 'fugu ldp aggregate --out nodir/x.npz'
# and 'fugu release --out nodir/x.npz' likewise: budget spent on a release nobody received.
def test_out_in_a_missing_directory_is_refused_before_the_ledger(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    data = _csv(tmp_path, "v\n1\n2\n3\n")
    ledger = tmp_path / "l.json"
    assert run(capsys, "ledger", "init", str(ledger), "--total", "5", "--model", "ldp")[0] == 0
    dom = fugu.Domain([fugu.Ordinal("v", 0, 9)])
    reports = fugu.ldp.GRR(dom, 1.0).client(fugu.RandomSource(seed=1)).perturb({"v": [1] * 20})
    rpath = reports.save(tmp_path / "r.jsonl")
    missing = tmp_path / "nodir"
    commands = [
        ["ldp", "perturb", "--data", str(data), "-a", "v:0..9", "-m", "grr", "-e", "1",
         "--out", str(missing / "r.jsonl"), "--ledger", str(ledger)],
        ["ldp", "aggregate", str(rpath), "--out", str(missing / "x.npz"), "--ledger", str(ledger)],
    ]  # fmt: skip
    for args in commands:
        code, _, err = run(capsys, *args)
        assert code != 0 and "does not exist" in err and "'--out'" in err
    assert fugu.Accountant.load(ledger).spent == 0
    central = tmp_path / "c.json"
    assert (
        run(capsys, "ledger", "init", str(central), "--total", "5", "--model", "central-dp")[0] == 0
    )
    code, _, err = run(capsys, "release", "-a", "age", "-m", "laplace", "-e", "1",
                       "--out", str(missing / "x.npz"), "--ledger", str(central))  # fmt: skip
    assert code != 0 and "does not exist" in err
    assert fugu.Accountant.load(central).spent == 0
