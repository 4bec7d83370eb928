"""Ledger files: locked read-check-spend-write, atomic writes, validation of every field.

Issue 14 items 5 and 6. The concurrency tests use real processes (``subprocess``), not threads:
the bug was two ``fugu release --ledger L.json`` processes both succeeding with one spend recorded.
"""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

import fugu
from fugu.budget import Accountant, Budget, ledger_file
from fugu.errors import BudgetExceededError, FuguError, LedgerError

pytestmark = pytest.mark.skipif(sys.platform == "win32", reason="ledger files need fcntl.flock")


def _init(path: Path, total: float = 1.0, model: str = "central-dp") -> Path:
    Accountant(Budget(total, model=model)).save(path)
    return path


# ---------------------------------------------------------------------------------------------
# the API
# ---------------------------------------------------------------------------------------------


def test_ledger_file_records_and_writes_back(tmp_path: Path) -> None:
    p = _init(tmp_path / "l.json")
    with ledger_file(p, model="central-dp") as acct:
        acct.spend(0.25, "a", model="central-dp")
        acct.spend(0.25, "b")
    back = Accountant.load(p)
    assert [e.what for e in back.ledger] == ["a", "b"]
    assert back.remaining == 0.5
    assert (tmp_path / "l.json.lock").exists()


def test_ledger_file_missing_file_says_how_to_create(tmp_path: Path) -> None:
    p = tmp_path / "nope.json"
    with pytest.raises(LedgerError, match=r"fugu ledger init .*nope.json --total EPS"):
        with ledger_file(p):
            pass
    assert not p.exists()


def test_ledger_file_refuses_another_model(tmp_path: Path) -> None:
    p = _init(tmp_path / "l.json", model="ldp")
    with pytest.raises(LedgerError, match=r"tracks 'ldp' budget, not 'central-dp'"):
        with ledger_file(p, model="central-dp"):
            pytest.fail("the block must not run")
    with ledger_file(p, model="ldp") as acct:
        acct.spend(0.1, "ldp release", model="ldp")
    assert len(Accountant.load(p).ledger) == 1


def test_ledger_file_refuses_another_policy(tmp_path: Path) -> None:
    p = tmp_path / "l.json"
    Accountant(Budget(1.0, model="blowfish", policy="line")).save(p)
    with pytest.raises(LedgerError, match="policy 'line', not 'grid'"):
        with ledger_file(p, model="blowfish", policy="grid"):
            pass


def test_ledger_file_writes_spend_even_when_the_block_fails(tmp_path: Path) -> None:
    """A spend made before a crash still counts: the noisy data may already have been seen."""
    p = _init(tmp_path / "l.json")
    with pytest.raises(RuntimeError, match="boom"):
        with ledger_file(p) as acct:
            acct.spend(0.3, "charged then crashed")
            raise RuntimeError("boom")
    assert Accountant.load(p).spent == pytest.approx(0.3)


def test_ledger_file_untouched_when_nothing_spent(tmp_path: Path) -> None:
    p = _init(tmp_path / "l.json")
    before = p.stat().st_mtime_ns
    with pytest.raises(BudgetExceededError):
        with ledger_file(p) as acct:
            acct.spend(5.0, "too much")
    assert p.stat().st_mtime_ns == before
    assert Accountant.load(p).ledger == []


def test_save_is_atomic_and_leaves_no_temp_files(tmp_path: Path) -> None:
    p = _init(tmp_path / "l.json")
    os.chmod(p, 0o640)
    acct = Accountant.load(p)
    acct.spend(0.5, "x")
    acct.save(p)
    assert sorted(os.listdir(tmp_path)) == ["l.json"]
    assert (p.stat().st_mode & 0o777) == 0o640
    assert json.loads(p.read_text())["format"] == "fugu-ledger"


def test_old_ledger_files_without_format_still_load(tmp_path: Path) -> None:
    p = tmp_path / "old.json"
    p.write_text(
        json.dumps(
            {
                "budget": {"epsilon": 1.0, "model": "central-dp", "policy": None},
                "ledger": [{"epsilon": 0.5, "what": "x", "time": "2026-01-01T00:00:00Z"}],
            }
        )
    )
    assert Accountant.load(p).remaining == 0.5


# ---------------------------------------------------------------------------------------------
# real concurrent processes
# ---------------------------------------------------------------------------------------------

_WORKER = textwrap.dedent(
    """
    import sys, time
    from fugu.budget import ledger_file
    from fugu.errors import BudgetExceededError
    path, who, n, eps = sys.argv[1], sys.argv[2], int(sys.argv[3]), float(sys.argv[4])
    # start together
    while time.time() < float(sys.argv[5]):
        time.sleep(0.001)
    ok = 0
    for i in range(n):
        try:
            with ledger_file(path, model="central-dp") as acct:
                acct.spend(eps, f"{who}-{i}", model="central-dp")
                time.sleep(0.002)  # widen the race window the lock must close
            ok += 1
        except BudgetExceededError:
            pass
    print(ok)
    """
)


def test_concurrent_processes_never_overspend_and_record_every_spend(tmp_path: Path) -> None:
    """8 processes x 4 spends of 0.1 against a total of 2.0: exactly 20 succeed, 20 recorded.

    On the old code (load, spend, save without a lock) spends were lost. Measured with the lock
    replaced by a no-op: 32 of 32 spends "succeeded" (3.2 spent of 2.0) and the file recorded 14.
    """
    import time

    p = _init(tmp_path / "l.json", total=2.0)
    script = tmp_path / "worker.py"
    script.write_text(_WORKER)
    t0 = repr(time.time() + 1.5)
    procs = [
        subprocess.Popen(
            [sys.executable, str(script), str(p), f"w{k}", "4", "0.1", t0],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for k in range(8)
    ]
    outs = [pr.communicate(timeout=120) for pr in procs]
    for pr, (_, err) in zip(procs, outs, strict=True):
        assert pr.returncode == 0, err
    successes = sum(int(out.strip()) for out, _ in outs)
    acct = Accountant.load(p)
    assert successes == 20
    assert len(acct.ledger) == successes
    assert len({e.what for e in acct.ledger}) == successes
    assert math.isclose(acct.spent, 2.0, abs_tol=1e-9)
    assert acct.spent <= 2.0 + 1e-9


# ---------------------------------------------------------------------------------------------
# validation on load (item 6)
# ---------------------------------------------------------------------------------------------


def _good() -> dict:
    return {
        "format": "fugu-ledger",
        "version": 1,
        "budget": {"epsilon": 1.0, "model": "central-dp", "policy": None},
        "ledger": [{"epsilon": 0.25, "what": "x", "time": "2026-01-01T00:00:00Z", "parts": []}],
    }


def _mutations() -> list[tuple[str, object]]:
    out: list[tuple[str, object]] = []
    for bad in (-10, 0, "0.5", None, True, [0.1], 1e6):
        d = _good()
        d["ledger"][0]["epsilon"] = bad
        out.append((f"entry epsilon {bad!r}", d))
        d = _good()
        d["budget"]["epsilon"] = bad
        out.append((f"total {bad!r}", d))
    for field_, bad in (("what", 3), ("time", None), ("parts", "ab"), ("parts", [1])):
        d = _good()
        d["ledger"][0][field_] = bad
        out.append((f"entry {field_} {bad!r}", d))
    d = _good()
    d["budget"]["model"] = "centrl-dp"
    out.append(("unknown model", d))
    d = _good()
    d["budget"]["policy"] = 7
    out.append(("policy not a string", d))
    d = _good()
    d["ledger"] = [d["ledger"][0]] * 5
    out.append(("entries exceed the total", d))
    d = _good()
    del d["ledger"][0]["time"]
    out.append(("entry without time", d))
    d = _good()
    d["ledger"][0]["epsilonn"] = 1
    out.append(("unknown entry field", d))
    d = _good()
    d["ledger"] = {"a": 1}
    out.append(("ledger not a list", d))
    d = _good()
    d["ledger"] = [3]
    out.append(("entry not an object", d))
    d = _good()
    del d["budget"]
    out.append(("no budget", d))
    d = _good()
    d["format"] = "fugu-release"
    out.append(("other format", d))
    d = _good()
    d["version"] = "1"
    out.append(("version a string", d))
    out += [("a list", [1, 2]), ("a number", 3), ("null", None)]
    return out


@pytest.mark.parametrize(("problem", "content"), _mutations(), ids=lambda x: str(x)[:30])
def test_corrupt_ledger_is_refused_naming_the_file(
    tmp_path: Path, problem: str, content: object
) -> None:
    p = tmp_path / "bad-ledger.json"
    p.write_text(json.dumps(content))
    with pytest.raises(LedgerError, match="bad-ledger.json"):
        Accountant.load(p)
    with pytest.raises(LedgerError, match="bad-ledger.json"):
        with ledger_file(p):
            pass


@pytest.mark.parametrize(
    "text",
    [
        "",
        "{",
        '{"budget": {"epsilon": NaN}, "ledger": []}',
        '{"budget": {"epsilon": 1}, "ledger": [{"epsilon": Infinity, "what": "x", "time": "t"}]}',
        '{"budget": {"epsilon": 1}, "ledger": [{"epsilon": -Infinity, "what": "x", "time": "t"}]}',
        "\x00\xff garbage",
        "[" * 100000,
    ],
    ids=["empty", "truncated", "nan-total", "inf-entry", "-inf-entry", "binary", "deep"],
)
def test_unparseable_ledger_is_refused_naming_the_file(tmp_path: Path, text: str) -> None:
    p = tmp_path / "bad-ledger.json"
    p.write_bytes(text.encode("utf-8", "surrogateescape"))
    with pytest.raises(LedgerError, match="bad-ledger.json"):
        Accountant.load(p)


def test_negative_entry_no_longer_grows_remaining(tmp_path: Path) -> None:
    """The reported bug: an entry with epsilon -10 made 'remaining' 11 of a total of 1."""
    d = _good()
    d["ledger"][0]["epsilon"] = -10
    p = tmp_path / "l.json"
    p.write_text(json.dumps(d))
    with pytest.raises(LedgerError, match=r"entry 0 epsilon must be a finite number > 0, got -10"):
        Accountant.load(p)


def test_ledger_error_is_a_fugu_error_and_value_error() -> None:
    assert issubclass(LedgerError, FuguError)
    assert issubclass(LedgerError, ValueError)
    assert fugu.errors.FileFormatError in LedgerError.__mro__


def test_budget_refuses_unknown_model() -> None:
    with pytest.raises(fugu.errors.InvalidParameterError, match="model must be one of"):
        Budget(1.0, model="central")


@pytest.mark.slow
def test_concurrent_cli_releases_share_one_ledger(tmp_path: Path) -> None:
    """4 concurrent ``fugu release --ledger L.json`` of 0.3 against a total of 1.0.

    Exactly 3 succeed (exit 0) and the ledger records exactly those 3; the 4th is refused with a
    budget message. Before: both of two concurrent releases succeeded and the file recorded one.
    """
    ledger = tmp_path / "L.json"
    init = subprocess.run(
        [sys.executable, "-m", "fugu", "ledger", "init", str(ledger), "--total", "1.0"],
        capture_output=True,
        text=True,
        cwd=tmp_path,
    )
    assert init.returncode == 0, init.stderr
    procs = [
        subprocess.Popen(
            [
                sys.executable,
                "-m",
                "fugu",
                "release",
                "--data",
                "adult",
                "-a",
                "age",
                "--mechanism",
                "laplace",
                "--epsilon",
                "0.3",
                "--ledger",
                str(ledger),
                "--out",
                str(tmp_path / f"r{k}.npz"),
            ],  # fmt: skip
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            cwd=tmp_path,
        )
        for k in range(4)
    ]
    outs = [pr.communicate(timeout=300) for pr in procs]
    codes = [pr.returncode for pr in procs]
    assert sorted(codes) == [0, 0, 0, codes[codes.index(max(codes))]] and max(codes) != 0, outs
    failed = outs[codes.index(max(codes))]
    assert "cannot spend" in failed[0] + failed[1]
    acct = Accountant.load(ledger)
    assert len(acct.ledger) == 3
    assert acct.spent == pytest.approx(0.9)
    assert sum((tmp_path / f"r{k}.npz").exists() for k in range(4)) == 3


def test_local_dp_is_the_ldp_model(tmp_path: Path) -> None:
    """fugu.ldp charges model 'local-dp' and suggests Budget(..., model='local-dp'); the CLI and
    releases say 'ldp'. Both name one model, in memory and in ledger files."""
    acct = Accountant(Budget(1.0, model="local-dp"))
    acct.spend(0.1, "x", model="ldp")
    p = _init(tmp_path / "l.json", model="ldp")
    with ledger_file(p, model="local-dp") as a:
        a.spend(0.2, "y", model="local-dp")
    assert Accountant.load(p).spent == pytest.approx(0.2)


def test_create_ledger_never_overwrites(tmp_path: Path) -> None:
    """Re-initialising a ledger forgot its spends ('fugu ledger init' on an existing file)."""
    from fugu.budget import create_ledger

    p = tmp_path / "l.json"
    create_ledger(p, 1.0)
    with ledger_file(p) as acct:
        acct.spend(0.4, "published")
    with pytest.raises(LedgerError, match=r"already exists: total 1 \(central-dp\), 1 spend"):
        create_ledger(p, 5.0)
    assert Accountant.load(p).spent == pytest.approx(0.4)
    p.write_text("garbage")
    with pytest.raises(LedgerError, match="not a valid ledger"):
        create_ledger(p, 5.0)
    with pytest.raises(fugu.errors.InvalidParameterError):
        create_ledger(tmp_path / "m.json", 1.0, model="nope")
    assert not (tmp_path / "m.json").exists()


def test_threads_of_one_process_also_exclude_each_other(tmp_path: Path) -> None:
    """flock locks belong to the open file, and each ledger_file opens its own: threads of one
    process serialise too. 6 threads x 5 spends of 0.1 against 2.0: exactly 20 recorded."""
    import threading
    import time

    p = _init(tmp_path / "l.json", total=2.0)
    ok: list[int] = []

    def work(k: int) -> None:
        for i in range(5):
            try:
                with ledger_file(p) as acct:
                    acct.spend(0.1, f"t{k}-{i}")
                    time.sleep(0.001)
                ok.append(1)
            except BudgetExceededError:
                pass

    threads = [threading.Thread(target=work, args=(k,)) for k in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(ok) == 20 and len(Accountant.load(p).ledger) == 20


def test_one_accountant_shared_by_threads_never_overspends() -> None:
    """Before the lock: 8 threads x 400 spends of 0.001 against 1.0 recorded 1001-1002 spends."""
    import copy
    import pickle
    import threading

    old = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)  # switch threads as often as possible
    try:
        acct = Accountant(1.0)

        def work() -> None:
            for _ in range(400):
                try:
                    acct.spend(0.001, "x")
                except BudgetExceededError:
                    pass

        threads = [threading.Thread(target=work) for _ in range(8)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    finally:
        sys.setswitchinterval(old)
    assert len(acct.ledger) == 1000
    assert acct.spent <= 1.0 + 1e-9
    again = pickle.loads(pickle.dumps(acct))
    assert again == acct and copy.deepcopy(acct) == acct
    with pytest.raises(BudgetExceededError):  # the unpickled copy has a working lock
        again.spend(1e-3, "after unpickling")


def test_symlinked_ledger_shares_the_lock_and_stays_a_link(tmp_path: Path) -> None:
    real = _init(tmp_path / "real.json")
    link = tmp_path / "link.json"
    link.symlink_to(real)
    with ledger_file(link) as acct:
        acct.spend(0.5, "via the link")
    assert link.is_symlink()
    assert Accountant.load(real).spent == pytest.approx(0.5)
    assert (tmp_path / "real.json.lock").exists() and not (tmp_path / "link.json.lock").exists()


def test_blowfish_budget_without_policy_is_tied_to_its_first_policy(tmp_path: Path) -> None:
    # Sequential composition holds under one policy: a second policy's spend would make the
    # ledger state a total that no policy enjoys. It used to be accepted.
    acct = Accountant(Budget(2.0, model="blowfish"))
    acct.spend(0.5, "ordered", model="blowfish", policy="line [abc]")
    acct.spend(0.5, "ordered again", model="blowfish", policy="line [abc]")
    with pytest.raises(fugu.FuguError, match="one ledger per policy"):
        acct.spend(0.5, "k-means", model="blowfish", policy="distance:theta=5")
    with pytest.raises(fugu.FuguError, match="one ledger per policy"):
        acct.parallel([0.1], ["part"], disjoint_by="rows", policy="full")
    assert acct.spent == 1.0
    path = tmp_path / "bf.json"
    acct.save(path)
    again = Accountant.load(path)
    assert [e.policy for e in again.ledger] == ["line [abc]", "line [abc]"]
    with pytest.raises(fugu.FuguError, match="one ledger per policy"):
        again.spend(0.1, "other", model="blowfish", policy="full")


def test_ledger_entry_policy_must_be_a_string(tmp_path: Path) -> None:
    path = tmp_path / "bad.json"
    acct = Accountant(Budget(1.0, model="blowfish"))
    acct.spend(0.1, "x", model="blowfish", policy="line")
    data = acct.to_dict()
    data["ledger"][0]["policy"] = 3
    path.write_text(json.dumps(data))
    with pytest.raises(fugu.FuguError, match="policy"):
        Accountant.load(path)


def test_ledger_delta_total_is_kept_and_validated(tmp_path: Path) -> None:
    path = tmp_path / "d.json"
    fugu.budget.create_ledger(path, 1.0, model="edge-dp", delta=1e-5)
    with ledger_file(path, model="edge-dp") as acct:
        acct.spend(0.2, "k-triangle", model="edge-dp", delta=4e-6)
    again = Accountant.load(path)
    assert again.budget.delta == 1e-5 and again.spent_delta == pytest.approx(4e-6)
    assert "total delta 1e-05, spent 4e-06" in again.report()
    for bad in (-1e-6, 1.0, float("nan"), "0.1"):
        data = json.loads(path.read_text())
        data["ledger"][0]["delta"] = bad
        path.write_text(json.dumps(data))
        with pytest.raises(LedgerError, match="delta"):
            Accountant.load(path)
    data["ledger"][0]["delta"] = 2e-5  # more than the declared total
    path.write_text(json.dumps(data))
    with pytest.raises(LedgerError, match="delta"):
        Accountant.load(path)
