"""Twentieth review: privacy-budget accounting and release files (adversarial).

Each test below failed before the fix it names (see the commit messages); all are exact (no
randomness decides them), so their false-failure rate is 0. Bugs found: Accountant.save raised a
ledger file's total (or changed its model, delta, policy) without a word; a Blowfish budget tied
to a policy, and a central budget tied to a neighbour relation, took spends that named none;
loading allowed an absolute 1e-9 over the total; a ledger file whose entries mix relations or
policies loaded; a hard-linked ledger split into two budgets; save wrote over a ledger it could
not read (newer or damaged); 'fugu release --out d' with a directory d.npz charged, then failed;
an older Karwa k-triangle file loaded as pure ε-DP; a guarantee without 'private' loaded as
private; a header with no version was reported as 'got 0'; create_ledger named a bad total
'epsilon'; save let the neighbour relation of recorded spends be rewritten.

Checked and found correct: three spawned processes x 60 spends of 0.01 on one ledger of 1.0
recorded exactly 100 spends (1.0), none lost or duplicated; saved releases of ten kinds
(laplace both relations, hierarchical, privelet, ordered, ordered hierarchical, graph count,
GRR, OLH, HIO) round-trip with equal guarantees (private=False kept) and equal answers and
expected errors; hierarchical, privelet and hat-tree refuse bad public options before charging.
"""

from __future__ import annotations

import io
import json
import os
import sys
import zipfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import fugu
from fugu.budget import Accountant, Budget, create_ledger, ledger_file
from fugu.errors import InvalidParameterError, LedgerError

pytestmark = pytest.mark.skipif(sys.platform == "win32", reason="ledger files need fcntl.flock")


# == 1. a ledger file's total cannot be raised by writing it again ===============================
def test_saving_a_larger_total_over_a_ledger_is_refused(tmp_path: Path) -> None:
    """Before: an accountant holding every spend of the file but declaring a larger total was
    written over it without a word (total 1 -> 100), so the budget could be reset by a call."""
    path = tmp_path / "l.json"
    create_ledger(path, 1.0)
    with ledger_file(path) as acct:
        acct.spend(0.9, "first", neighbours="replace")
    old = Accountant.load(path)
    for bigger in (Budget(100.0), Budget(1.0, delta=1e-6), Budget(1.0, model="ldp")):
        with pytest.raises(LedgerError, match="total"):
            Accountant(bigger, ledger=old.ledger).save(path)
    assert Accountant.load(path).budget == Budget(1.0)


def test_raising_the_total_inside_a_ledger_block_never_reaches_the_file(tmp_path: Path) -> None:
    """Before: ``acct.total = Budget(50)`` in a block, then a spend of 10: the file said 10
    spent of 50."""
    path = tmp_path / "l.json"
    create_ledger(path, 1.0)
    with ledger_file(path) as acct:
        acct.total = Budget(50.0)
        with pytest.raises(LedgerError, match="total"):
            acct.spend(10.0, "big", neighbours="replace")
        assert acct.ledger == []
    after = Accountant.load(path)
    assert after.budget.epsilon == 1.0 and after.spent == 0


# == 2. a Blowfish budget tied to a policy refuses a spend that names none =======================
def test_a_blowfish_spend_without_a_policy_is_refused_by_a_tied_budget() -> None:
    """Before: ``spend(1.0, ..., model="blowfish")`` with no policy was summed into a budget tied
    to the line policy (and into one whose first spend tied it), so a release under any policy
    (or none) composed with it."""
    dom = fugu.Domain([fugu.Ordinal("a", 0, 9)])
    line = fugu.blowfish.Policy.line(dom)
    tied = Accountant(Budget(2.0, model="blowfish", policy=line))
    untied = Accountant(Budget(2.0, model="blowfish"))
    untied.spend(0.5, "first ties it", model="blowfish", policy=line)
    for acct in (tied, untied):
        before = list(acct.ledger)
        with pytest.raises(InvalidParameterError, match="policy"):
            acct.spend(1.0, "no policy", model="blowfish")
        with pytest.raises(InvalidParameterError, match="policy"):
            acct.spend(1.0, "no policy, no model")
        with pytest.raises(InvalidParameterError, match="policy"):
            acct.parallel([0.5, 0.5], ["a", "b"], disjoint_by="rule", model="blowfish")
        assert acct.ledger == before
    tied.spend(0.5, "under its policy", model="blowfish", policy=line)
    assert tied.spent == 0.5


# == 3. a ledger file that spends more than its total is refused, however small the total ========
def _write_ledger(path: Path, total: float, entries: list[dict[str, object]]) -> None:
    budget = {"epsilon": total, "model": "central-dp", "policy": None, "delta": 0.0}
    doc = {"format": "fugu-ledger", "version": 1, "budget": budget, "ledger": entries}
    path.write_text(json.dumps(doc))


def test_a_ledger_overspent_by_a_small_absolute_amount_is_refused(tmp_path: Path) -> None:
    """Before: load allowed an absolute 1e-9 over the total, so a ledger of total 1e-6 whose
    entries spend 1.0009e-6 (0.09% over) loaded; spend() itself allows a relative 1e-12 only."""
    path = tmp_path / "l.json"
    entry = {"epsilon": 1.0009e-6, "what": "x", "time": "2026-01-01T00:00:00Z", "parts": []}
    _write_ledger(path, 1e-6, [entry])
    with pytest.raises(LedgerError, match="more than its total"):
        Accountant.load(path)
    # what spend() accepts still loads: 0.1 + 0.2 + 0.7 against 1
    create_ledger(tmp_path / "ok.json", 1.0)
    with ledger_file(tmp_path / "ok.json") as acct:
        for e in (0.1, 0.2, 0.7):
            acct.spend(e, "part", neighbours="replace")
    assert Accountant.load(tmp_path / "ok.json").remaining == 0


# == 4. a ledger file whose entries could not compose is refused ================================
@pytest.mark.parametrize(
    ("budget_policy", "fields"),
    [
        (None, [{"neighbours": "replace"}, {"neighbours": "add-remove"}]),
        (None, [{"policy": "line [domain 0000000000000000, graph 0000000000000000]"},
                {"policy": "full [domain 0000000000000000, graph 1111111111111111]"}]),
        ("line [domain 0000000000000000, graph 0000000000000000]",
         [{"policy": "full [domain 0000000000000000, graph 1111111111111111]"}]),
    ],
)  # fmt: skip
def test_a_ledger_whose_entries_do_not_compose_is_refused(
    tmp_path: Path, budget_policy: str | None, fields: list[dict[str, str]]
) -> None:
    """Before: a ledger (edited by hand) with entries under both neighbour relations, or under
    two Blowfish policies, loaded; its accountant then accepted spends under either, summing ε
    that compose under neither (spend() refuses to record such a ledger)."""
    path = tmp_path / "l.json"
    entries = [
        {"epsilon": 0.1, "what": f"r{i}", "time": "2026-01-01T00:00:00Z", "parts": [], **f}
        for i, f in enumerate(fields)
    ]
    model = "central-dp" if "neighbours" in fields[0] else "blowfish"
    budget = {"epsilon": 1.0, "model": model, "policy": budget_policy, "delta": 0.0}
    doc = {"format": "fugu-ledger", "version": 1, "budget": budget, "ledger": entries}
    path.write_text(json.dumps(doc))
    with pytest.raises(LedgerError, match="corrupt"):
        Accountant.load(path)


# == 5. a central-DP budget tied to a neighbour relation refuses a spend that names none ==========
def test_a_central_spend_without_a_relation_is_refused_by_a_tied_budget() -> None:
    """Before: after a replace-one spend, ``spend(0.3, "x")`` (no relation) was summed with it,
    though it may be an add/remove ε (2ε under replace-one)."""
    acct = Accountant(1.0)
    acct.spend(0.3, "replace-one cube", neighbours="replace")
    with pytest.raises(InvalidParameterError, match="neighbours"):
        acct.spend(0.3, "no relation")
    with pytest.raises(InvalidParameterError, match="neighbours"):
        acct.parallel([0.2, 0.2], ["a", "b"], disjoint_by="rule", individuals=True)
    assert acct.spent == 0.3
    acct.spend(0.3, "same relation", neighbours="replace")
    fresh = Accountant(1.0)
    fresh.spend(0.3, "untied: no relation recorded yet")  # as before
    assert fresh.spent == 0.3


# == 6. a ledger with a second hard link is refused: writes would split it into two budgets ======
def test_a_hard_linked_ledger_is_refused(tmp_path: Path) -> None:
    """Before: a ledger with two hard-linked names took a lock per name, and its first atomic
    write (rename) split the names into two files: 0.9 spent through each of a total of 1."""
    first, second = tmp_path / "a.json", tmp_path / "b.json"
    create_ledger(first, 1.0)
    os.link(first, second)
    for name in (first, second):
        with pytest.raises(LedgerError, match="hard link"):
            with ledger_file(name) as acct:
                acct.spend(0.9, f"via {name.name}", neighbours="replace")
        with pytest.raises(LedgerError, match="hard link"):
            Accountant.load(name).save(name)
    assert Accountant.load(first).spent == 0 and os.path.samefile(first, second)
    os.unlink(second)  # one name again: usable
    with ledger_file(first) as acct:
        acct.spend(0.9, "one name", neighbours="replace")
    assert Accountant.load(first).spent == 0.9


# == 7. save never writes over a file that is not a ledger it can read ===========================
@pytest.mark.parametrize("damage", ["newer", "corrupt"])
def test_save_over_an_unreadable_ledger_is_refused(tmp_path: Path, damage: str) -> None:
    """Before: a file that did not load as a ledger (written by a newer fugu, or damaged) was
    taken to record no spend, and a fresh accountant with a new total was written over it."""
    path = tmp_path / "l.json"
    entry = {"epsilon": 0.9, "what": "x", "time": "2026-01-01T00:00:00Z", "parts": []}
    _write_ledger(path, 1.0, [entry])
    text = path.read_text()
    text = text.replace('"version": 1', '"version": 2') if damage == "newer" else text[:-3]
    path.write_text(text)
    with pytest.raises(LedgerError):
        Accountant.load(path)
    with pytest.raises(LedgerError, match="not a ledger this fugu can read"):
        Accountant(5.0).save(path)
    assert path.read_text() == text


# == 8. the CLI refuses an output path it cannot write before it charges the ledger ==============
def test_release_out_naming_a_directory_is_refused_before_the_charge(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Before: ``fugu release --out d`` with a directory ``d.npz`` (Release.save adds .npz)
    charged 0.5 to the ledger, then failed to write ('Is a directory')."""
    from fugu.cli import main

    ledger = tmp_path / "l.json"
    create_ledger(ledger, 1.0)
    (tmp_path / "d.npz").mkdir()
    args = ["release", "--data", "adult", "-a", "age", "-e", "0.5", "--ledger", str(ledger)]
    assert main([*args, "--out", str(tmp_path / "d")]) != 0
    assert "directory" in capsys.readouterr().err
    assert Accountant.load(ledger).spent == 0


# == 9. a k-triangle release saved before guarantees had δ is not loaded as pure ε-DP ===========
def _rewrite_header(src: Path, dst: Path, change: Callable[[dict[str, Any]], None]) -> None:
    """The release file ``src`` written to ``dst`` with ``change`` applied to its JSON header
    (e.g. a guarantee without 'delta': a file as fugu wrote it before 92bd085)."""
    with zipfile.ZipFile(src) as zin, zipfile.ZipFile(dst, "w", zipfile.ZIP_DEFLATED) as zout:
        for info in zin.infolist():
            data = zin.read(info)
            if info.filename == "__header__.npy":
                header = json.loads(bytes(np.lib.format.read_array(io.BytesIO(data))).decode())
                change(header)
                buf = io.BytesIO()
                np.lib.format.write_array(buf, np.frombuffer(json.dumps(header).encode(), np.uint8))
                data = buf.getvalue()
            zout.writestr(info.filename, data)


def _header_without(src: Path, dst: Path, field: str) -> None:
    """``src`` with its guarantee's ``field`` removed, written to ``dst``."""
    _rewrite_header(src, dst, lambda h: h["guarantee"].pop(field))


def test_an_older_karwa_k_triangle_file_keeps_its_delta(tmp_path: Path) -> None:
    """Before: a k-triangle release saved before Guarantee.delta existed (its delta only in the
    parameters) loaded as pure ε-DP (delta 0): the loaded release claimed privacy it never had."""
    nx = pytest.importorskip("networkx")
    rel = fugu.graph.count(
        nx.karate_club_graph(), "2-triangle", epsilon=1.0, unit="edge", mechanism="karwa",
        delta=1e-6, rng=fugu.RandomSource(seed=1),
    )  # fmt: skip
    old = tmp_path / "old.npz"
    _header_without(rel.save(tmp_path / "new.npz"), old, "delta")
    loaded = fugu.Release.load(old)
    assert loaded.guarantee.delta == 1e-6
    assert loaded.guarantee == rel.guarantee


# == 10. a release file whose guarantee does not say whether it is private is refused ===========
def test_a_release_file_without_its_private_flag_is_refused(tmp_path: Path) -> None:
    """Before: a guarantee without 'private' (every file fugu writes has it) loaded as private,
    so a seeded, NOT private release became private by losing one field."""
    dom = fugu.Domain([fugu.Ordinal("a", 0, 3)])
    hist = fugu.Histogram([5, 0, 2, 1], dom)
    rel = fugu.central.laplace(hist, 1.0, rng=fugu.RandomSource(seed=1))
    assert rel.guarantee.private is False
    src, dst = rel.save(tmp_path / "seeded.npz"), tmp_path / "edited.npz"
    _header_without(src, dst, "private")
    with pytest.raises(fugu.errors.FileFormatError, match="private"):
        fugu.Release.load(dst)


# == 11. a release file without a format version says so ========================================
def test_a_release_file_without_a_version_says_it_has_none(tmp_path: Path) -> None:
    """Before: 'version must be a positive integer, got 0' for a header with no version at all
    (the 0 was the default, not in the file)."""
    dom = fugu.Domain([fugu.Ordinal("a", 0, 3)])
    rel = fugu.central.laplace(fugu.Histogram([5, 0, 2, 1], dom), 1.0)
    src, dst = rel.save(tmp_path / "r.npz"), tmp_path / "nov.npz"
    _rewrite_header(src, dst, lambda h: h.pop("version"))
    with pytest.raises(fugu.errors.FileFormatError, match="no format version") as err:
        fugu.Release.load(dst)
    assert "got 0" not in str(err.value)


# == 12. a bad ledger total is refused by the name the caller gave it ============================
@pytest.mark.parametrize("total", [0.0, -1.0, float("nan"), 2000.0])
def test_a_bad_ledger_total_is_named_total(tmp_path: Path, total: float) -> None:
    """Before: create_ledger(path, 0) and 'fugu ledger init --total 0' said 'epsilon must be
    > 0', naming an argument the caller never gave."""
    from fugu.cli import main

    with pytest.raises(InvalidParameterError, match="^total") as err:
        create_ledger(tmp_path / "l.json", total)
    assert "epsilon" not in str(err.value).split(";")[0]
    assert main(["ledger", "init", str(tmp_path / "c.json"), "--total", str(total)]) != 0
    assert not (tmp_path / "l.json").exists() and not (tmp_path / "c.json").exists()


# == 13. the record of a spend's neighbour relation cannot be rewritten by saving ================
def test_rewriting_the_relation_of_recorded_spends_is_refused(tmp_path: Path) -> None:
    """Before: entries re-labelled add/remove in a block were written over the replace-one
    spends they were (the file compared epsilon, text, time and delta only), and add/remove
    releases were then summed with them."""
    from dataclasses import replace

    path = tmp_path / "l.json"
    create_ledger(path, 1.0)
    with ledger_file(path) as acct:
        acct.spend(0.3, "replace-one cube", neighbours="replace")
    with pytest.raises(LedgerError, match="does not hold"):
        with ledger_file(path) as acct:
            acct.ledger = [replace(e, neighbours="add-remove") for e in acct.ledger]
            acct.spend(0.3, "add/remove cube", neighbours="add-remove")
    assert [e.neighbours for e in Accountant.load(path).ledger] == ["replace"]
