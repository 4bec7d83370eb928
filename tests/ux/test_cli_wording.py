"""Two CLI wordings from review 26's notes: `fugu recommend`'s options column and the graph
command's refusal of options another mechanism reads."""

from __future__ import annotations

import pytest

from fugu.cli import main


def test_recommend_options_column_is_words_not_a_python_dict(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """It printed `{'note': 'planned ...'}`, `{}` and `{'plain': None}`."""
    assert main(["recommend", "-a", "age", "-e", "1"]) == 0
    out = capsys.readouterr().out
    assert "{" not in out and "}" not in out, out
    assert "note=planned for this workload" in out and "plain=None" in out


@pytest.mark.parametrize(
    ("mechanism", "option", "reader"),
    [("recursive", ["--degree-bound", "3"], "laplace"), ("laplace", ["--delta", "0.1"], "karwa")],
)
def test_graph_unused_option_names_the_mechanism_that_reads_it(
    mechanism: str, option: list[str], reader: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """It said '--degree-bound has no effect with --mechanism recursive (laplace)'."""
    code = main(["graph", "count", "-e", "1", "--mechanism", mechanism, *option])
    err = capsys.readouterr().err
    assert code != 0
    assert f"only --mechanism {reader} reads it" in err, err
