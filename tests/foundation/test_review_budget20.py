"""Twentieth review: privacy-budget accounting and release files (adversarial).

Each test below failed before the fix it names (see the commit messages); all are exact (no
randomness decides them), so their false-failure rate is 0.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from fugu.budget import Accountant, Budget, create_ledger, ledger_file
from fugu.errors import LedgerError

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
