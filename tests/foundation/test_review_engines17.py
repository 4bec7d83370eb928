"""Review 17: how data comes into the central mechanisms (engines, domain encoding, histograms).

Each test failed before the fix it comes with (see the commit messages)."""

from __future__ import annotations

from pathlib import Path

import fugu

LABELS = fugu.Domain([fugu.Nominal("b", ["x", "a", 'b"', "a\nb"])])


# -- 1. a quoted value holding a line break, at a block boundary of the CSV reader -----------------
def test_numpy_engine_keeps_a_quoted_line_break_across_reader_blocks(tmp_path: Path) -> None:
    """pyarrow's streamed CSV reader cut the file into 16 MiB blocks at line breaks without
    looking at quotes: a record whose quoted value held a line break at a block boundary was
    read as two values (here the label ``b"`` counted, one record lost)."""
    path = tmp_path / "quoted.csv"
    rows = 3_000_000  # 17 MiB: more than one block of the reader
    with open(path, "w", newline="") as f:
        f.write("b\n")
        f.write('"a\nb"\n' * rows)
    hist = fugu.Histogram.from_file(path, LABELS, engine="numpy", out_of_domain="drop")
    assert hist.counts.tolist() == [0, 0, 0, rows]
