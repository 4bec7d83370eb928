"""Reprs of LDP objects are one line and never raise (issue 17 item 6)."""

from __future__ import annotations

import fugu

DOM2 = fugu.Domain([fugu.Ordinal("a", 0, 7), fugu.Ordinal("b", 0, 7)])


def test_reports_repr_is_one_short_line() -> None:
    oue = fugu.ldp.OUE(fugu.Domain([fugu.Ordinal("v", 0, 99)]), 1.0)
    reports = oue.client(rng=fugu.RandomSource(seed=1)).perturb({"v": list(range(100)) * 50})
    text = repr(reports)
    assert "\n" not in text and len(text) < 200, text
    assert "n=5000" in text and "private=False" in text


def test_protocol_repr_before_its_parameters_are_known() -> None:
    # HDG picks its granularities from n: before that its repr used to raise.
    text = repr(fugu.ldp.HDG(DOM2, epsilon=1.0))
    assert text.startswith("HDG(") and "\n" not in text
