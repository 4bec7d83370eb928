"""One canonical policy identifier (issue 19): ``Policy.identifier`` names a Blowfish policy the
same way however it was built (CLI spec or Python) and in any process; the budget ledger records
it; ``fugu ledger init --policy SPEC --attributes ...`` computes it; ledgers that name a policy
in an older form (a bare CLI spec, or ``"line [0123456789]"`` as fugu named policies before)
keep their meaning: bound to the identifier only after the policy is checked to be the one they
name, refused otherwise."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import fugu
from fugu.blowfish import Policy, parse_policy
from fugu.budget import Accountant, Budget, create_ledger, is_policy_identifier, ledger_file
from fugu.cli import main
from fugu.errors import LedgerError

AGE = fugu.Domain([fugu.Ordinal("age", 0, 99)])
GRID = fugu.Domain([fugu.Ordinal("x", 0, 9), fugu.Ordinal("y", 0, 4)])
MIXED = fugu.Domain([fugu.Ordinal("a", 0, 5), fugu.Nominal("s", ["F", "M"])])


# -- the identifier ------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("spec", "dom", "python"),
    [
        ("line", AGE, lambda d: Policy.line(d)),
        ("distance:theta=1", AGE, lambda d: Policy.line(d)),
        ("distance:theta=5", AGE, lambda d: Policy.distance_threshold(d, 5)),
        ("distance:5", AGE, lambda d: Policy.distance_threshold(d, 5.0, weights=[1.0])),
        ("distance:theta=3,metric=linf", GRID, lambda d: Policy.distance_threshold(d, 3, "linf")),
        ("distance:theta=2,weights=1|2", GRID, lambda d: Policy.distance_threshold(
            d, 2, weights={"y": 2})),
        ("line+bottom", AGE, lambda d: Policy.line(d).with_bottom()),
        ("full", MIXED, lambda d: Policy.full(d)),
        ("dp", MIXED, lambda d: Policy.full(d)),
        ("attribute", MIXED, lambda d: Policy.attribute(d)),
        ("partition:age=10", AGE, lambda d: Policy.partition(d, {"age": 10})),
        ("partition:age=10", AGE, lambda d: Policy.partition(
            d, {"age": [list(range(i, i + 10)) for i in range(0, 100, 10)]})),
        ("partition:age=10", AGE, lambda d: Policy.partition(d, np.arange(100) // 10 + 7)),
        ("partition:x=5", GRID, lambda d: Policy.partition(d, {"x": 5, "y": 100})),
    ],
)  # fmt: skip
def test_same_policy_from_the_cli_spec_and_from_python_has_one_identifier(
    spec: str, dom: fugu.Domain, python: object
) -> None:
    a, b = parse_policy(spec, dom), python(dom)  # type: ignore[operator]
    assert a.identifier == b.identifier and a == b and hash(a) == hash(b)
    assert is_policy_identifier(a.identifier) and a.name == a.identifier
    # a round trip through a release's guarantee keeps it
    assert Policy.from_dict(a.to_dict()).identifier == a.identifier


def test_the_identifier_is_the_same_in_another_process() -> None:
    code = (
        "import fugu; from fugu.blowfish import Policy;"
        "d = fugu.Domain([fugu.Ordinal('age', 0, 99)]);"
        "print(Policy.partition(d, {'age': 10}).identifier);"
        "print(Policy.distance_threshold(d, 5).with_bottom().identifier)"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    ).stdout.split("\n")
    assert out[0] == parse_policy("partition:age=10", AGE).identifier
    assert out[1] == parse_policy("distance:theta=5+bottom", AGE).identifier


def test_known_identifier_values_are_stable() -> None:
    """Ledgers store identifiers: a change of the canonical form would orphan every ledger."""
    assert Policy.line(AGE).identifier == ("line [domain 6b717dab30a40bea, graph 434534af5ccff8ab]")
    assert parse_policy("partition:age=10+bottom", AGE).identifier.startswith(
        "partition:10 blocks+bottom [domain 6b717dab30a40bea, graph "
    )


def test_different_parameters_or_domains_give_different_identifiers() -> None:
    age50 = fugu.Domain([fugu.Ordinal("age", 0, 50)])
    years = fugu.Domain([fugu.Ordinal("years", 0, 99)])
    pols = [
        Policy.line(AGE),
        Policy.line(AGE).with_bottom(),
        Policy.line(age50),
        Policy.line(years),
        Policy.distance_threshold(AGE, 2),
        Policy.distance_threshold(AGE, 2, "linf"),
        Policy.distance_threshold(GRID, 2),
        Policy.distance_threshold(GRID, 2, weights=[1, 2]),
        Policy.full(AGE),
        Policy.attribute(GRID),
        Policy.full(GRID),
        Policy.partition(AGE, {"age": 10}),
        Policy.partition(AGE, {"age": 5}),
        Policy.partition(AGE, np.r_[np.zeros(50), np.ones(50)].astype(int)),
        Policy.partition(GRID, {"x": 5}),
        Policy.partition(GRID, {"y": 1}),
        Policy.explicit(AGE, [(0, 1)]),
        Policy.explicit(AGE, [(0, 2)]),
        Policy.explicit(AGE, [(0, 1), (1, 2)]),
        Policy.explicit(AGE, [(0, None)]),
    ]
    ids = [p.identifier for p in pols]
    assert len(set(ids)) == len(ids)
    # the domain part and the graph part each say what differs
    assert ids[0].split("[domain ")[1][:16] != ids[2].split("[domain ")[1][:16]
    assert ids[0].split("graph ")[1] == ids[2].split("graph ")[1]  # same graph, other domain
    # a nominal domain's value order is part of the domain
    ab = fugu.Domain([fugu.Nominal("s", ["a", "b", "c"])])
    ba = fugu.Domain([fugu.Nominal("s", ["b", "a", "c"])])
    assert Policy.partition(ab, [0, 0, 1]).identifier != Policy.partition(ba, [0, 0, 1]).identifier


def test_legacy_names_are_the_old_code_names() -> None:
    """``legacy_name`` is what fugu 3033565 called these policies (recorded from that code)."""
    assert Policy.line(AGE).legacy_name == "line [db3be6c3b6]"
    assert parse_policy("distance:theta=5+bottom", AGE).legacy_name == (
        "distance:theta=5+bottom [cdb418e2c8]"
    )
    assert Policy.partition(AGE, {"age": 10}).legacy_name == "partition:age=10 [8245e6d98e]"


def test_names_recognises_its_own_old_names_and_specs_only() -> None:
    p = Policy.line(AGE)
    assert p.names(p.identifier) and p.names(p.legacy_name) and p.names("line")
    assert p.names("distance:theta=1") and p.names(" line ")
    for other in ("line+bottom", "distance:theta=2", "full", "line [0000000000]",
                  Policy.line(fugu.Domain([fugu.Ordinal("age", 0, 50)])).legacy_name,
                  Policy.distance_threshold(AGE, 2).identifier, "nonsense", ""):  # fmt: skip
        assert not p.names(other), other


# -- the budget ----------------------------------------------------------------------------------
def test_a_budget_refuses_a_spend_under_another_policy() -> None:
    line, dist = Policy.line(AGE), Policy.distance_threshold(AGE, 2)
    acct = Accountant(Budget(1.0, model="blowfish", policy=line))
    assert acct.budget.policy == line.identifier
    acct.spend(0.2, "same policy built from its spec", model="blowfish",
               policy=parse_policy("line", AGE).name)  # fmt: skip
    with pytest.raises(fugu.FuguError, match="common policy"):
        acct.spend(0.2, "x", model="blowfish", policy=dist.identifier)
    with pytest.raises(fugu.FuguError, match="common policy"):
        acct.spend(0.2, "x", model="blowfish", policy=Policy.line(AGE).with_bottom())
    untied = Accountant(Budget(1.0, model="blowfish"))
    untied.spend(0.2, "first ties it", model="blowfish", policy=line)
    with pytest.raises(fugu.FuguError, match="one ledger per policy"):
        untied.spend(0.2, "x", model="blowfish", policy=dist)
    assert [e.policy for e in untied.ledger] == [line.identifier]


def test_a_blowfish_mechanism_charges_under_the_identifier(tmp_path: Path) -> None:
    hist = fugu.Histogram(np.arange(100) % 7, AGE)
    led = tmp_path / "l.json"
    create_ledger(led, 1.0, model="blowfish", policy=parse_policy("line", AGE))
    with ledger_file(led, model="blowfish", policy=Policy.line(AGE).name) as acct:
        fugu.blowfish.ordered(hist, 0.5, Policy.line(AGE), accountant=acct)
    with pytest.raises(LedgerError, match="common policy"):
        with ledger_file(led, model="blowfish", policy=Policy.distance_threshold(AGE, 2)):
            pass
    acct = Accountant.load(led)
    assert acct.spent == 0.5 and acct.ledger[0].policy == Policy.line(AGE).identifier


# -- ledgers written before identifiers ------------------------------------------------------------
def _old_ledger(path: Path, budget_policy: str | None, entries: list[str | None]) -> Path:
    """A ledger as fugu 3033565 wrote it (its JSON, by hand)."""
    path.write_text(json.dumps({
        "format": "fugu-ledger", "version": 1,
        "budget": {"epsilon": 1.0, "model": "blowfish", "policy": budget_policy, "delta": 0.0},
        "ledger": [{"epsilon": 0.25, "what": f"old {i}", "time": "2026-01-01T00:00:00Z",
                    "parts": [], **({"policy": e} if e else {})} for i, e in enumerate(entries)],
    }))  # fmt: skip
    return path


@pytest.mark.parametrize(
    ("tie", "entries"),
    [
        ("line [db3be6c3b6]", [None]),  # Budget(policy=pol.name) by the old Python API
        ("line", [None]),  # fugu ledger init --policy line (the CLI spec, no domain)
        (None, ["line [db3be6c3b6]"]),  # untied, tied by its first spend's old name
    ],
)
def test_an_old_ledger_binds_to_the_policy_it_names_and_refuses_others(
    tmp_path: Path, tie: str | None, entries: list[str | None]
) -> None:
    line = Policy.line(AGE)
    led = _old_ledger(tmp_path / "old.json", tie, entries)
    assert Accountant.load(led).spent == 0.25  # still loads, spends kept
    # a policy identifier alone cannot be checked against an old name: refused, with the fix
    with pytest.raises(LedgerError, match="older form") as info:
        with ledger_file(led, model="blowfish", policy=line.identifier):
            pass
    assert "policy=<fugu.blowfish.Policy>" in str(info.value) and "old.json" in str(info.value)
    # another policy (other parameters, with ⊥; another domain unless the old tie is a bare
    # spec, which names no domain: the old code took it on any) is refused and binds nothing
    others = [Policy.distance_threshold(AGE, 2), line.with_bottom()]
    if tie != "line":
        others.append(Policy.line(fugu.Domain([fugu.Ordinal("age", 0, 50)])))
    for other in others:
        with pytest.raises(LedgerError):
            with ledger_file(led, model="blowfish", policy=other) as acct:
                acct.spend(0.25, "other", model="blowfish", policy=other)
    assert Accountant.load(led).to_dict()["budget"]["policy"] == tie
    # the policy it names binds it (checked) and spends
    with ledger_file(led, model="blowfish", policy=line) as acct:
        acct.spend(0.25, "new", model="blowfish", policy=line.identifier)
    back = Accountant.load(led)
    assert back.spent == 0.5
    assert back.budget.policy == (None if tie is None else line.identifier)
    assert {e.policy for e in back.ledger} <= {None, line.identifier}
    with pytest.raises(fugu.FuguError, match="common policy"):
        with ledger_file(led, model="blowfish", policy=Policy.full(AGE)):
            pass


def test_an_old_in_memory_budget_refuses_an_identifier_with_the_fix() -> None:
    acct = Accountant(Budget(1.0, model="blowfish", policy="line [db3be6c3b6]"))
    with pytest.raises(LedgerError, match="older form"):
        acct.spend(0.1, "x", model="blowfish", policy=Policy.line(AGE).identifier)
    assert acct.bind_policy(Policy.line(AGE)) == ["line [db3be6c3b6]"]
    acct.spend(0.1, "x", model="blowfish", policy=Policy.line(AGE).identifier)
    assert acct.spent == 0.1


# -- the command line ----------------------------------------------------------------------------
def _run(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    code = main(list(args))
    out, err = capsys.readouterr()
    return code, out, err


def _adult_age() -> fugu.Domain:
    from fugu.datasets.adult import adult_attribute

    return fugu.Domain([adult_attribute("age")])


def test_ledger_init_with_the_domain_records_the_python_identifier(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    led = tmp_path / "l.json"
    code, out, _ = _run(capsys, "ledger", "init", str(led), "--total", "1", "--model",
                        "blowfish", "--policy", "distance:theta=3", "-a", "age")  # fmt: skip
    want = Policy.distance_threshold(_adult_age(), 3).identifier
    assert code == 0 and want in out
    assert Accountant.load(led).budget.policy == want
    # a Python release under the same policy, charged by its name, is accepted
    hist = fugu.Histogram.from_records(fugu.datasets.adult(), _adult_age())
    with ledger_file(led, model="blowfish", policy=want) as acct:
        fugu.blowfish.ordered(hist, 0.25, Policy.distance_threshold(_adult_age(), 3),
                              accountant=acct)  # fmt: skip
    # and a CLI release too; another policy is refused before anything is spent
    rel = ["release", "-a", "age", "-m", "ordered", "-e", "0.25", "--ledger", str(led)]
    assert _run(capsys, *rel, "--policy", "distance:3")[0] == 0
    code, _, err = _run(capsys, *rel, "--policy", "line")
    assert code == 2 and "common policy" in err
    code, _, err = _run(capsys, *rel, "--policy", "distance:3", "--neighbours", "add-remove")
    assert code == 2 and "+bottom" in err
    assert Accountant.load(led).spent == 0.5


def test_ledger_init_domain_options_need_a_policy(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, _, err = _run(capsys, "ledger", "init", str(tmp_path / "l.json"), "--total", "1",
                        "-a", "age")  # fmt: skip
    assert code == 2 and "--attributes has no effect without --policy" in err


def test_an_old_cli_spec_ledger_is_bound_by_the_first_cli_release(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    led = _old_ledger(tmp_path / "old.json", "line", [None])
    rel = ["release", "-a", "age", "-m", "ordered", "-e", "0.25", "--ledger", str(led)]
    code, _, err = _run(capsys, *rel, "--policy", "distance:theta=2")
    assert code == 2 and "common policy" in err
    assert Accountant.load(led).budget.policy == "line"
    assert _run(capsys, *rel, "--policy", "line")[0] == 0
    acct = Accountant.load(led)
    assert acct.budget.policy == Policy.line(_adult_age()).identifier and acct.spent == 0.5
    code, out, _ = _run(capsys, "ledger", "show", str(led))
    assert "policy line [domain" in out


def test_kmeans_cli_charges_a_policy_ledger_under_the_same_identifier(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    rs = np.random.default_rng(0)
    pts = tmp_path / "p.csv"
    pts.write_text("x,y\n" + "\n".join(f"{a},{b}" for a, b in rs.integers(0, 20, (300, 2))))
    led = tmp_path / "l.json"
    cols = "x:0..19,y:0..19"
    assert _run(capsys, "ledger", "init", str(led), "--total", "1", "--model", "blowfish",
                "--policy", "distance:theta=4", "-a", cols, "--data", str(pts))[0] == 0  # fmt: skip
    km = ["kmeans", "--data", str(pts), "-c", cols, "--k", "2", "-e", "0.5", "--ledger", str(led)]
    code, _, err = _run(capsys, *km, "--policy", "distance:theta=4", "--iterations", "2")
    assert code == 0, err
    code, _, err = _run(capsys, *km, "--policy", "attribute", "--iterations", "2")
    assert code == 2 and "common policy" in err
    acct = Accountant.load(led)
    dom = fugu.Domain([fugu.Ordinal("x", 0, 19), fugu.Ordinal("y", 0, 19)])
    assert acct.spent == 0.5
    assert acct.ledger[0].policy == Policy.distance_threshold(dom, 4).identifier


def test_concurrent_cli_releases_bind_a_spec_ledger_once(tmp_path: Path) -> None:
    """4 processes at once on a ledger made with --policy line and no domain: the first binds
    it, all four are charged under the one identifier, 3 x 0.3 of 1.0 pass, the 4th is refused."""
    led = tmp_path / "l.json"
    assert main(["ledger", "init", str(led), "--total", "1", "--model", "blowfish",
                 "--policy", "line"]) == 0  # fmt: skip
    cmd = [sys.executable, "-m", "fugu", "release", "-a", "age", "-m", "ordered", "--policy",
           "line", "-e", "0.3", "--ledger", str(led)]  # fmt: skip
    procs = [
        subprocess.Popen(cmd, cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        for _ in range(4)
    ]
    codes = [p.wait(timeout=300) for p in procs]
    errs = [p.stderr.read().decode() if p.stderr else "" for p in procs]
    assert sorted(codes) == [0, 0, 0, 2], errs
    acct = Accountant.load(led)
    ident = Policy.line(_adult_age()).identifier
    assert acct.budget.policy == ident and acct.spent == pytest.approx(0.9)
    assert [e.policy for e in acct.ledger] == [ident] * 3
