"""Sixth privacy review: the budget ledger, releases saved and loaded, the shared mechanism steps.

Each test below failed before the fix it names (see the commit messages); all are exact (no
randomness decides them), so their false-failure rate is 0. Bugs found: spends in a ledger block
were written only when it exited (lost to SIGKILL); NaN or negative LedgerEntry values disabled
or refunded a budget; bind_policy dropped each entry's neighbour relation; Accountant.parallel's
docs offered domain partitions under replace-one; a relative ledger path followed a chdir; a
removed lock file let two holders spend from one state; pickled or forked copies of a block's
accountant spent unrecorded; a nested block on one ledger hung; huge integers and duplicated
keys in a ledger file; Accountant.save over a spent ledger forgot its spends; a spend racing
the end of a block; atomic_write widened a file's mode while writing; ``--ledger ""`` charged
nothing.

Checked and found correct: the ε charged equals the ε the noise uses for numpy float16/32,
longdouble and int ε in every central, Blowfish, graph and LDP mechanism; Fraction, str, bool,
arrays and subnormals are refused before charging; many tiny spends stop exactly at the total;
no release draws noise after it is made (answers, post-processing and load are deterministic)
and no saved release holds an exact private value.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

import fugu
from fugu.budget import Accountant, LedgerEntry, create_ledger, ledger_file

pytestmark = pytest.mark.skipif(sys.platform == "win32", reason="ledger files need fcntl.flock")


# == 1. a spend made in a ledger block is on disk before the data is touched ====================
def test_a_spend_survives_the_process_being_killed_inside_the_block(tmp_path: Path) -> None:
    """Before: spends were written when the block exited. A release saved (published) inside
    the block, then SIGKILL (out of memory during the next release): the file kept 0 spent."""
    path = tmp_path / "l.json"
    out = tmp_path / "rel.npz"
    create_ledger(path, 1.0)
    code = textwrap.dedent(
        f"""
        import os, signal, fugu
        dom = fugu.Domain([fugu.Ordinal("a", 0, 3)])
        with fugu.budget.ledger_file({str(path)!r}, model="central-dp") as acct:
            rel = fugu.central.laplace(fugu.Histogram([5, 0, 2, 1], dom), 0.6, accountant=acct)
            rel.save({str(out)!r})
            os.kill(os.getpid(), signal.SIGKILL)
        """
    )
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, timeout=120)
    assert run.returncode == -9, run.stderr.decode()
    assert out.exists()
    assert Accountant.load(path).spent == pytest.approx(0.6)


def test_a_spend_whose_write_fails_is_refused_and_not_kept(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The mechanism must not run on a spend that did not reach the file."""
    path = tmp_path / "l.json"
    create_ledger(path, 1.0)
    hist = fugu.Histogram([5, 0, 2, 1], fugu.Domain([fugu.Ordinal("a", 0, 3)]))
    with ledger_file(path) as acct:

        def disk_full(self: Accountant, p: object) -> None:
            raise OSError(28, "No space left on device")

        monkeypatch.setattr(Accountant, "save", disk_full)
        with pytest.raises(OSError, match="No space"):
            fugu.central.laplace(hist, 0.5, accountant=acct)
        assert acct.ledger == []
        monkeypatch.undo()
    assert Accountant.load(path).spent == 0


# == 2. an accountant built from entries cannot be given budget back ============================
@pytest.mark.parametrize("bad", [float("nan"), -3.0, float("inf"), 0.0])
def test_a_ledger_entry_must_spend_a_finite_positive_epsilon(bad: float) -> None:
    """Before: ``Accountant(1.0, ledger=[LedgerEntry(nan, ...)])`` made every later check false
    (five spends of 1.0 went through), and a negative entry (also appended to ``acct.ledger``)
    raised what remains."""
    with pytest.raises(fugu.errors.InvalidParameterError, match="ledger entry's epsilon"):
        acct = Accountant(1.0, ledger=[LedgerEntry(bad, "edited", "2026-01-01T00:00:00Z")])
        for _ in range(5):
            acct.spend(1.0, "more")


def test_an_accountant_refuses_entries_above_its_total() -> None:
    entry = LedgerEntry(0.7, "earlier release", "2026-01-01T00:00:00Z")
    with pytest.raises(fugu.BudgetExceededError, match="more than the total"):
        Accountant(1.0, ledger=[entry, entry])
    acct = Accountant(1.5, ledger=[entry, entry])
    assert acct.remaining == pytest.approx(0.1)
    with pytest.raises(fugu.BudgetExceededError):
        acct.spend(0.2, "one more")


# == 3. binding a ledger's old policy name keeps each entry's neighbour relation =================
def test_binding_a_policy_keeps_the_neighbour_relation_of_its_entries() -> None:
    """Before: bind_policy rebuilt the entries without ``neighbours``, so a budget spent under
    replace-one then took an add/remove spend (the two epsilons do not compose)."""
    dom = fugu.Domain([fugu.Ordinal("age", 0, 9)])
    pol = fugu.blowfish.Policy.line(dom)
    acct = Accountant(fugu.Budget(2.0, model="blowfish", policy="line"))
    acct.spend(0.5, "first", policy="line", neighbours="replace")
    assert acct.bind_policy(pol) == ["line"]
    assert acct.ledger[0].neighbours == "replace" and acct.ledger[0].policy == pol.identifier
    with pytest.raises(fugu.errors.InvalidParameterError, match="neighbours='replace'"):
        acct.spend(0.5, "second", policy=pol, neighbours="add-remove")


# == 4. parallel composition over a domain partition needs add/remove neighbours ================
def test_replace_one_releases_on_a_domain_partition_tell_neighbours_apart() -> None:
    """The claim in fugu.budget's notes on Accountant.parallel: two hierarchical releases on the
    halves of an age domain under replace-one (the default) publish each half's count exactly,
    so moving one record from age 1 to age 6 (a replace-one neighbour) changes both releases
    with certainty. ``parallel`` would have charged max(0.5, 0.5); the docs said a partition of
    the domain qualifies. Exact (no randomness decides it)."""
    lo, hi = fugu.Domain([fugu.Ordinal("age", 0, 3)]), fugu.Domain([fugu.Ordinal("age", 4, 7)])

    def totals(ages: list[int]) -> tuple[float, float]:
        c = [ages.count(a) for a in range(8)]
        a = fugu.central.hierarchical(fugu.Histogram(c[:4], lo), 0.5)
        b = fugu.central.hierarchical(fugu.Histogram(c[4:], hi), 0.5)
        return float(a.counts.sum()), float(b.counts.sum())

    assert totals([1, 2, 2, 3, 5, 6]) == (4.0, 2.0)
    assert totals([6, 2, 2, 3, 5, 6]) == (3.0, 3.0)
    doc = " ".join((fugu.budget.__doc__ or "").split())
    assert 'neighbours="add-remove"' in doc
    assert "partition of the *domain*" in doc


def test_central_parallel_needs_add_remove_or_a_partition_of_individuals() -> None:
    """Accountant.parallel charged max(eps) for any central-DP 'partition' (the demonstration
    above: a domain partition under replace-one tells neighbours apart). Now the relation is
    required, and replace-one needs individuals=True (a partition of people fixed in advance);
    a refused call records nothing. Failed before: max charged with no relation given."""
    acct = fugu.Accountant(1.0)
    with pytest.raises(fugu.errors.InvalidParameterError, match="neighbour relation"):
        acct.parallel([0.5, 0.5], ["age < 4", "age >= 4"], disjoint_by="age halves")
    with pytest.raises(fugu.errors.InvalidParameterError, match="replace-one"):
        acct.parallel(
            [0.5, 0.5], ["age < 4", "age >= 4"], disjoint_by="age halves", neighbours="replace"
        )
    with pytest.raises(fugu.errors.InvalidParameterError, match="individuals must be"):
        acct.parallel([0.5], ["x"], disjoint_by="ids", neighbours="replace", individuals="yes")
    assert acct.spent == 0 and acct.ledger == []
    acct.parallel([0.5, 0.7], ["a", "b"], disjoint_by="age halves", neighbours="add-remove")
    assert acct.spent == pytest.approx(0.7)
    people = fugu.Accountant(1.0)
    people.parallel(
        [0.5, 0.5], ["even ids", "odd ids"], disjoint_by="user id parity",
        neighbours="replace", individuals=True,
    )  # fmt: skip
    assert people.spent == pytest.approx(0.5)
    ldp_acct = fugu.Accountant(fugu.Budget(1.0, model="ldp"))
    ldp_acct.parallel([0.5, 0.5], ["group 1", "group 2"], disjoint_by="users split in groups")
    assert ldp_acct.spent == pytest.approx(0.5)


# == 5. the ledger written is the ledger locked =================================================
def test_a_relative_ledger_path_survives_a_change_of_working_folder(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Before: the spend was written to 'l.json' in the new working folder (a fresh ledger
    there, unlocked) and the real ledger kept 0 spent."""
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    monkeypatch.chdir(tmp_path / "a")
    create_ledger("l.json", 1.0)
    with ledger_file("l.json") as acct:
        os.chdir(tmp_path / "b")
        acct.spend(0.7, "release")
    assert Accountant.load(tmp_path / "a" / "l.json").spent == pytest.approx(0.7)
    assert not (tmp_path / "b" / "l.json").exists()


# == 6. a lock file removed while held ===========================================================
def test_a_lock_file_removed_while_held_does_not_let_two_holders_overspend(tmp_path: Path) -> None:
    """A cleaner (tmpfiles, 'rm *.lock') deletes PATH.lock while process A holds it; process B
    then creates a new one and gets its lock at once. Before: both spent 0.6 of 1.0 from the same
    state, the last write won (0.6 recorded, 1.2 spent). Now A's holder sees its lock file is
    gone and refuses to spend (before its mechanism runs); B's spend is the one recorded."""
    path = tmp_path / "l.json"
    create_ledger(path, 1.0)
    import threading

    def b_releases() -> None:
        with ledger_file(path) as b:  # B does not wait: its lock file is new
            b.spend(0.6, "B's release")

    with ledger_file(path) as a:
        (tmp_path / "l.json.lock").unlink()
        t = threading.Thread(target=b_releases)
        t.start()
        t.join(10)
        assert not t.is_alive()
        with pytest.raises(fugu.errors.LedgerError, match="removed or replaced"):
            a.spend(0.6, "A's release")
    assert [e.what for e in Accountant.load(path).ledger] == ["B's release"]


def test_a_waiter_whose_lock_file_was_replaced_locks_the_new_one(tmp_path: Path) -> None:
    """B opened the old lock file and waited; it was replaced (C holds the new one). When the
    old one is released, B must not enter beside C."""
    import fcntl
    import threading
    import time

    path = tmp_path / "l.json"
    create_ledger(path, 1.0)
    lock = tmp_path / "l.json.lock"
    entered = threading.Event()
    with open(lock, "a+b") as old:
        fcntl.flock(old.fileno(), fcntl.LOCK_EX)  # A holds the old lock file

        def waiter() -> None:
            with ledger_file(path):
                entered.set()

        t = threading.Thread(target=waiter)
        t.start()
        time.sleep(0.3)  # B has opened the old file and waits on it
        lock.unlink()
        with ledger_file(path):  # C creates and holds the new lock file
            fcntl.flock(old.fileno(), fcntl.LOCK_UN)  # A lets go of the old one
            assert not entered.wait(0.5), "B entered while C held the ledger"
    t.join(10)
    assert entered.is_set()


# == 7. an accountant of a ledger block spends only in the process that holds the lock ==========
def test_a_pickled_copy_of_a_ledger_accountant_cannot_spend(tmp_path: Path) -> None:
    """Before: a copy sent to a worker (multiprocessing spawn / forkserver pickles it) took
    spends that reached no file."""
    import pickle

    path = tmp_path / "l.json"
    create_ledger(path, 1.0)
    with ledger_file(path) as acct:
        copy = pickle.loads(pickle.dumps(acct))
        with pytest.raises(fugu.errors.LedgerError, match="copy in another process"):
            copy.spend(0.6, "in a worker")
        acct.spend(0.6, "here")
    assert Accountant.load(path).spent == pytest.approx(0.6)
    plain = pickle.loads(pickle.dumps(Accountant(1.0)))  # an in-memory accountant still spends
    plain.spend(0.5, "x")


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs fork")
@pytest.mark.filterwarnings("ignore:.*multi-threaded.*fork:DeprecationWarning")
def test_a_forked_child_cannot_spend_behind_the_parent(tmp_path: Path) -> None:
    """Before: a forked child's spend of 0.6 was written, then overwritten by the parent's own
    spend of 0.6 (the parent never saw it): 1.2 of 1.0 spent, 0.6 recorded."""
    path = tmp_path / "l.json"
    create_ledger(path, 1.0)
    with ledger_file(path) as acct:
        pid = os.fork()
        if pid == 0:  # pragma: no cover - the child
            code = 1
            try:
                acct.spend(0.6, "forked child")
            except fugu.errors.LedgerError as exc:
                code = 3 if "forked from it" in str(exc) else 2
            finally:
                os._exit(code)
        _, status = os.waitpid(pid, 0)
        acct.spend(0.6, "parent")
    assert os.waitstatus_to_exitcode(status) == 3
    assert [e.what for e in Accountant.load(path).ledger] == ["parent"]


# == 8. a ledger block inside another on the same ledger ========================================
def test_a_nested_block_on_the_same_ledger_is_refused_not_a_hang(tmp_path: Path) -> None:
    """Before: the inner block waited for the outer one's lock forever (same thread)."""
    import threading

    path = tmp_path / "l.json"
    create_ledger(path, 1.0)
    outcome: list[str] = []

    def nested() -> None:
        with ledger_file(path) as outer:
            outer.spend(0.25, "outer")
            try:
                with ledger_file(tmp_path / "." / "l.json"):
                    outcome.append("entered")
            except fugu.errors.LedgerError as exc:
                outcome.append(str(exc))

    t = threading.Thread(target=nested, daemon=True)
    t.start()
    t.join(10)
    assert not t.is_alive(), "the nested block hung"
    assert len(outcome) == 1 and "already open in this thread" in outcome[0]
    assert Accountant.load(path).spent == pytest.approx(0.25)
    with ledger_file(path) as again:  # released: the next block opens
        again.spend(0.25, "next")


# == 9. a ledger file with an integer beyond float's range ======================================
@pytest.mark.parametrize("where", ["total", "entry", "delta", "entry delta"])
def test_a_huge_integer_in_a_ledger_file_is_a_ledger_error(tmp_path: Path, where: str) -> None:
    """Before: OverflowError (a traceback from 'fugu ledger show' and every --ledger command)."""
    huge = "1" + "0" * 400
    budget = {"total": f'{{"epsilon": {huge}}}', "delta": f'{{"epsilon": 1, "delta": {huge}}}'}
    entry = {
        "entry": f'{{"epsilon": {huge}, "what": "x", "time": "t"}}',
        "entry delta": f'{{"epsilon": 0.1, "delta": {huge}, "what": "x", "time": "t"}}',
    }
    one = '{"epsilon": 1}'
    text = '{"budget": ' + budget.get(where, one) + ', "ledger": [' + entry.get(where, "") + "]}"
    path = tmp_path / "l.json"
    path.write_text(text)
    with pytest.raises(fugu.errors.LedgerError, match="corrupt") as info:
        Accountant.load(path)
    assert len(str(info.value)) < 400


# == 10. a key given twice in a ledger file =====================================================
@pytest.mark.parametrize(
    "text",
    [
        '{"budget": {"epsilon": 1, "epsilon": 5}, "ledger": []}',
        '{"budget": {"epsilon": 1}, "ledger": [{"epsilon": 0.9, "epsilon": 0.1, "what": "x", '
        '"time": "t"}]}',
        '{"budget": {"epsilon": 1}, "ledger": [], "ledger": []}',
    ],
    ids=["total", "entry", "ledger"],
)
def test_a_key_given_twice_in_a_ledger_file_is_refused(tmp_path: Path, text: str) -> None:
    """Before: JSON kept the last value silently (an entry reading 0.9 to a person counted 0.1;
    a second 'ledger' list dropped every spend of the first)."""
    path = tmp_path / "l.json"
    path.write_text(text)
    with pytest.raises(fugu.errors.LedgerError, match="appears twice"):
        Accountant.load(path)


# == 11. Accountant.save over a ledger that records spends it does not hold =====================
def test_saving_a_fresh_accountant_over_a_spent_ledger_is_refused(tmp_path: Path) -> None:
    """fugu.budget's own example created a ledger with ``Accountant(1.0).save(path)``; run
    twice (a daily script), the second run wrote a fresh ledger over the first's spends.
    Before: the 0.6 spent was forgotten and another 1.0 could be spent."""
    path = tmp_path / "l.json"
    Accountant(1.0).save(path)
    with ledger_file(path) as acct:
        acct.spend(0.6, "monday's release")
    with pytest.raises(fugu.errors.LedgerError, match="would forget them"):
        Accountant(1.0).save(path)
    assert Accountant.load(path).spent == pytest.approx(0.6)
    # an accountant that holds every recorded spend may write the file (e.g. a copy of it)
    back = Accountant.load(path)
    back.spend(0.1, "more")
    back.save(path)
    assert Accountant.load(path).spent == pytest.approx(0.7)
    doc = fugu.budget.__doc__ or ""
    assert "Accountant(1.0).save(path)" not in doc and "create_ledger(path" in doc


# == 12. a spend in another thread while the block ends ==========================================
def test_a_spend_racing_the_end_of_the_block_is_written_or_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A worker thread is inside spend (past the open-block check) when the main thread leaves
    the block. Before: the block's end cleared the writer unlocked, the worker's spend was
    appended without a write and its mechanism went on (lost). Now the block's end waits for
    the spend, which is written."""
    import threading

    path = tmp_path / "l.json"
    create_ledger(path, 1.0)
    in_check, go = threading.Event(), threading.Event()
    real_check = Accountant.check

    def slow_check(self: Accountant, epsilon: float, what: str) -> None:
        if what == "worker":
            in_check.set()
            go.wait(10)
        real_check(self, epsilon, what)

    monkeypatch.setattr(Accountant, "check", slow_check)
    errors: list[BaseException] = []

    def worker(acct: Accountant) -> None:
        try:
            acct.spend(0.4, "worker")
        except BaseException as exc:  # noqa: BLE001 - reported below
            errors.append(exc)

    with ledger_file(path) as acct:
        t = threading.Thread(target=worker, args=(acct,))
        t.start()
        assert in_check.wait(10)
        threading.Timer(0.3, go.set).start()
    t.join(10)
    assert not errors, errors
    assert Accountant.load(path).spent == pytest.approx(0.4)


# == 13. a file written atomically is never more open than the file it replaces ==================
def test_atomic_write_never_widens_the_permissions_while_writing(tmp_path: Path) -> None:
    """Before: the temporary file was created 0o666 & ~umask (0o644 here) and narrowed to the
    old file's 0o600 only after the contents were written, so another user could open it and
    read a private release or ledger while it was written."""
    from fugu._files import atomic_write

    path = tmp_path / "rel.npz"
    path.write_bytes(b"old")
    os.chmod(path, 0o600)
    seen: list[int] = []

    def write(fh: object) -> None:
        seen.append(os.fstat(fh.fileno()).st_mode & 0o777)  # type: ignore[attr-defined]
        fh.write(b"new")  # type: ignore[attr-defined]

    old_umask = os.umask(0o022)
    try:
        atomic_write(path, write)
    finally:
        os.umask(old_umask)
    assert seen == [0o600]
    assert path.read_bytes() == b"new" and path.stat().st_mode & 0o777 == 0o600


# == 14. --ledger "" (an unset shell variable) ===================================================
@pytest.mark.parametrize(
    "args",
    [
        ["release", "-m", "laplace", "-a", "age", "--epsilon", "1", "--head", "1"],
        ["graph", "count", "--epsilon", "1"],
        ["kmeans", "--k", "2", "--epsilon", "1"],
        ["ldp", "perturb", "-a", "age", "--epsilon", "1", "--out", "REPORTS"],
        ["ldp", "aggregate", "REPORTS"],
    ],
    ids=["release", "graph count", "kmeans", "ldp perturb", "ldp aggregate"],
)
@pytest.mark.parametrize("empty", ["", "  "])
def test_an_empty_ledger_path_is_refused_not_ignored(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], args: list[str], empty: str
) -> None:
    """Before: ``fugu release --ledger "$LEDGER"`` with LEDGER unset released the cells and
    charged no ledger, silently."""
    from fugu.cli import main

    args = [str(tmp_path / "r.jsonl") if a == "REPORTS" else a for a in args]
    code = main([*args, "--ledger", empty])
    out, err = capsys.readouterr()
    assert code == 2, out + err
    assert "ledger path is empty" in err


def test_an_epsilon_beyond_float_range_is_a_clear_error() -> None:
    """check_epsilon(10**400) raised a bare OverflowError from float() (review 6); every
    mechanism and Budget inherit the check. Failed before: OverflowError."""
    for huge in (10**400, 10**5000):
        with pytest.raises(fugu.errors.InvalidParameterError, match="at most 1000"):
            fugu.errors.check_epsilon(huge)
    with pytest.raises(fugu.errors.InvalidParameterError, match="must be > 0"):
        fugu.errors.check_epsilon(-(10**400))
    with pytest.raises(fugu.errors.InvalidParameterError, match="total must be at most"):
        fugu.Accountant(10**400)
