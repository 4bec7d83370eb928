"""Review 18: TDG / HDG grids (client, Phase 2, answers, release files, engine path).

Each test failed before the fix named in its docstring.
"""

from __future__ import annotations

import numpy as np
import pytest

import fugu
from fugu.ldp import HDG


def test_hdg_on_one_attribute_aggregates() -> None:
    """HDG on a single attribute (documented: "HDG works with one") raised a bare
    ``ValueError: math domain error``: with no 2-D grid the predicted noise of a 2-D cell is
    infinite and the "auto" weight took log(0). Any HDG release whose pair groups all had no
    report (a handful of users) failed the same way."""
    dom = fugu.Domain([fugu.Ordinal("a", 0, 9)])
    data = {"a": np.arange(400) % 10}
    rel = HDG(dom, 1.0, g1=2).simulate(data, rng=fugu.RandomSource(seed=1))
    assert abs(rel.answer({"a": (0, 4)}) - 200) < 150
    assert rel.full_weight == 0.0  # no 2-D grid: nothing is known about a 2-D cell


def test_hdg_with_every_pair_group_empty_aggregates() -> None:
    """Two users in the two 1-D groups of a two-attribute HDG (the pair group gets no report):
    the same log(0) crash as above."""
    dom = fugu.Domain([fugu.Ordinal("a", 0, 3), fugu.Ordinal("b", 0, 3)])
    p = HDG(dom, 1.0, g1=2, g2=2)
    reports = p.client(fugu.RandomSource(seed=1)).perturb(
        {"a": np.array([0, 3]), "b": np.array([1, 2])}, groups=np.array([0, 1])
    )
    rel = p.aggregate(reports)
    assert rel.answer({}) == 2.0
    assert np.isfinite(rel.answer({"a": (0, 1), "b": (0, 1)}))


def test_chunked_bit_vectors_of_two_widths_are_rejected_not_a_crash() -> None:
    """engines/ldp.arrow_column: a chunked binary column whose chunks each hold values of one
    width, but different widths (2 and 3 bytes), raised a bare numpy ValueError from
    np.concatenate; in one chunk the same reports became Python bytes and the wrong-width ones
    were rejected and counted (as on DuckDB). Now both give the same release."""
    import pyarrow as pa

    from fugu.engines.ldp import arrow_column

    col = pa.chunked_array(
        [pa.array([b"\x01\x00"] * 3, pa.binary()), pa.array([b"\x01\x00\x00"] * 2, pa.binary())]
    )
    out = arrow_column(col)
    assert [bytes(v) for v in out] == [b"\x01\x00"] * 3 + [b"\x01\x00\x00"] * 2

    dom = fugu.Domain([fugu.Ordinal("a", 0, 9), fugu.Ordinal("b", 0, 4)])
    p = HDG(dom, 1.0, g1=4, g2=2)
    rep = p.client(fugu.RandomSource(seed=1)).perturb(
        {"a": np.arange(50) % 10, "b": np.arange(50) % 5}
    )
    g, bits = rep.columns["group"], rep.columns["bits"]
    vals = [bytes(b) for b in bits[:40]] + [bytes(b) + b"\x00" for b in bits[40:]]
    chunked = {
        "group": pa.chunked_array([pa.array(g[:40]), pa.array(g[40:])]),
        "bits": pa.chunked_array([pa.array(vals[:40], pa.binary()), pa.array(vals[40:])]),
    }
    whole = {"group": pa.chunked_array([pa.array(g)]), "bits": pa.chunked_array([pa.array(vals)])}
    with pytest.warns(fugu.ldp.RejectedReportsWarning):
        a = p.aggregate(chunked, header=rep.header())
    with pytest.warns(fugu.ldp.RejectedReportsWarning):
        b = p.aggregate(whole, header=rep.header())
    assert a.guarantee.data_options["rejected_reports"] == {"wrong type": 10}
    assert a.answer({"a": (0, 4)}) == b.answer({"a": (0, 4)})


def test_hdg_refuses_a_too_large_response_matrix_before_any_report() -> None:
    """HDG over two attributes of 4,097 values: the protocol was built, users' reports were
    made (their ε spent) and only aggregate() refused, because the pair's response matrix
    would exceed 2^24 cells (with normalisation="norm" the matrix was instead dropped
    silently). The sizes are public, so the refusal now comes when the HDG is made."""
    dom = fugu.Domain([fugu.Ordinal("x", 0, 4096), fugu.Ordinal("y", 0, 4096)])
    for norm in ("norm-sub", "norm"):
        with pytest.raises(fugu.errors.InvalidParameterError, match=r"\(x, y\).*coarsen"):
            HDG(dom, 1.0, g1=8, g2=2, normalisation=norm)
    fugu.ldp.TDG(dom, 1.0, g2=2)  # TDG needs no matrix (uniform guess for such a pair)


@pytest.mark.parametrize("bad", [2.0, "2", b"2", {"a": 2}])
def test_granularity_that_is_not_an_int_or_a_list_is_named(bad) -> None:
    """g2=2.0 raised a bare TypeError ("'float' object is not iterable"); g2="2" was read as
    the list ["2"] and refused for its length ("needs one granularity per attribute")."""
    dom = fugu.Domain([fugu.Ordinal("a", 0, 9), fugu.Ordinal("b", 0, 4), fugu.Ordinal("c", 0, 6)])
    with pytest.raises(fugu.errors.InvalidParameterError, match="g2 must be a positive integer"):
        fugu.ldp.TDG(dom, 1.0, g2=bad)
    with pytest.raises(fugu.errors.InvalidParameterError, match="g1 must be a positive integer"):
        HDG(dom, 1.0, g1=bad, g2=2)


def test_tdg_one_attribute_expected_error_ignores_a_grid_without_reports() -> None:
    """TDG's λ = 1 expected error averaged the margins' variances plainly (Σv/k²), while
    Phase 2 pools the margins with inverse-variance weights: a pair group without reports
    (variance 1e30, no weight in the answer) made the error of every interval on its
    attributes about 10^14 instead of the few dozen users of the informative margin. Equal
    group sizes give the same value as before."""
    dom = fugu.Domain([fugu.Ordinal("a", 0, 9), fugu.Ordinal("b", 0, 4), fugu.Ordinal("c", 0, 6)])
    p = fugu.ldp.TDG(dom, 1.0, g2=2, partitions="aligned")  # equal partitions: pooled margins
    n = 600
    codes = {"a": np.arange(n) % 10, "b": np.arange(n) % 5, "c": np.arange(n) % 7}
    groups = np.arange(n) % 2  # pairs (a, b) and (a, c); (b, c) gets no report
    rel = p.aggregate(p.client(fugu.RandomSource(seed=1)).perturb(codes, groups=groups))
    err_b = rel.expected_error({"b": (0, 1)})  # b: one informative margin, one empty grid
    assert err_b is not None and err_b < n
    # equal groups: the inverse-variance value is the plain mean's
    full = p.aggregate(p.client(fugu.RandomSource(seed=1)).perturb(codes, groups=np.arange(n) % 3))
    g = full.grids
    v = [gr.variance for gr in g if "a" in gr.attributes]
    assert v[0] == pytest.approx(v[1])
    f = min(max(full.answer({"a": (0, 4)}) / n, 0.0), 1.0)
    sampling = n**2 * 2 / (n - 1) * f * (1 - f)
    noise = (2 * v[0] + 2 * v[1]) / 4  # each margin's cell inside: 2 grid cells, Σv/k²
    assert full.expected_error({"a": (0, 4)}) ** 2 == pytest.approx(noise + sampling, rel=1e-9)


def test_hdg_on_one_attribute_takes_any_g1() -> None:
    """HDG over one attribute has no 2-D grid, yet g1 = 5 (c = 10) was refused as "not a
    multiple of g2 = 2", a g2 the guideline had chosen for grids that do not exist (and a
    g1 below that g2 was silently raised to it)."""
    dom = fugu.Domain([fugu.Ordinal("a", 0, 9)])
    rel = HDG(dom, 1.0, g1=5).simulate({"a": np.arange(500) % 10}, rng=fugu.RandomSource(seed=1))
    assert rel.guarantee.parameters["g1"] == [5]
    assert HDG(dom, 1.0, g1=2, g2=4).g1 == [2]


def test_release_from_grids_checks_the_grids_against_the_layout() -> None:
    """GridProtocol.release_from_grids (public, for experiments) took any list of grids: an
    HDG list without its 1-D grids raised a bare KeyError ('a0'), and grids with other cell
    edges or in another order were used as if they were the protocol's."""
    import sys
    from pathlib import Path

    sys.path.insert(0, str(Path(__file__).parent))
    from ldp_helpers import exact_grids

    dom = fugu.datasets.synthetic_domain(3, 8)
    codes = np.random.default_rng(0).integers(0, 8, (500, 3))
    p = HDG(dom, 1.0, g1=4, g2=2)
    g = exact_grids(p, dom, codes)
    gu = p.guarantee(private=False, n=500)
    assert p.release_from_grids(g, 500, gu).answer({}) == 500
    other = exact_grids(HDG(dom, 1.0, g1=8, g2=2), dom, codes)
    for bad in (g[1:], g[::-1], g + g[:1], other):
        with pytest.raises(fugu.errors.InvalidParameterError, match="grid"):
            p.release_from_grids(bad, 500, gu)


def test_duckdb_engine_reads_arrow_report_files(tmp_path) -> None:
    """Reports.save writes .arrow files and aggregate() documents them as read by the engine,
    but engine="duckdb" (and `fugu ldp aggregate --engine duckdb`) refused them: "cannot
    tell the format ... name it *.csv, *.csv.gz or *.parquet". They are now streamed by
    pyarrow, giving the numpy engine's release."""
    dom = fugu.Domain([fugu.Ordinal("a", 0, 9), fugu.Ordinal("b", 0, 4)])
    p = HDG(dom, 1.0, g1=4, g2=2)
    rep = p.client(fugu.RandomSource(seed=1)).perturb(
        {"a": np.arange(300) % 10, "b": np.arange(300) % 5}
    )
    path = rep.save(tmp_path / "r.arrow")
    q = {"a": (2, 7), "b": (1, 3)}
    want = p.aggregate(path).answer(q)
    assert p.aggregate(path, engine="duckdb").answer(q) == want
    assert p.aggregate(path, engine="duckdb", threads=1).answer(q) == want


def test_calm_and_lhio_refuse_a_too_large_pair_marginal_before_any_report() -> None:
    """CALM over two attributes of 10^5 values was built and its users' reports made; only
    aggregate() failed, with a bare MemoryError ("Unable to allocate 74.5 GiB"): CALM and
    LHIO keep a dense c_j x c_k marginal per pair. Refused when the method is made, like
    HDG's response matrices (the sizes are public)."""
    dom = fugu.Domain([fugu.Ordinal("x", 0, 99_999), fugu.Ordinal("y", 0, 99_999)])
    for make in (lambda: fugu.ldp.CALM(dom, 1.0), lambda: fugu.ldp.LHIO(dom, 1.0)):
        with pytest.raises(fugu.errors.InvalidParameterError, match=r"\(x, y\).*coarsen"):
            make()


def test_pairs_release_pair_of_one_attribute_is_named() -> None:
    """PairsRelease.pair("a", "a") raised a bare KeyError: (0, 0)."""
    dom = fugu.datasets.synthetic_domain(3, 4)
    recs = fugu.datasets.correlated_gaussian(300, 3, 4, seed=1)
    rel = fugu.ldp.CALM(dom, 1.0).simulate(recs, rng=fugu.RandomSource(seed=1))
    assert rel.pair("a2", "a0").shape == (4, 4)
    with pytest.raises(fugu.errors.InvalidParameterError, match="two different attributes"):
        rel.pair("a0", "a0")


def test_norm_guarantee_describes_the_post_processing_applied() -> None:
    """With normalisation="norm" the guarantee said "a Norm-Sub'd copy (… rounds of Norm-Sub
    and consistency) shapes cut cells only" and, for HDG, "response matrices by weighted
    update (Algorithm 1, 0 sweeps)"; neither happens: cut cells are split by the product of
    the unclipped 1-D estimates' within-cell shares (as the docs say) and no Norm-Sub'd grid
    enters the release."""
    dom = fugu.datasets.synthetic_domain(3, 8)
    recs = fugu.datasets.correlated_gaussian(3000, 3, 8, seed=1)
    for cls in (HDG, fugu.ldp.TDG):
        rel = cls(dom, 1.0, normalisation="norm").simulate(recs, rng=fugu.RandomSource(seed=1))
        text = " ".join(rel.guarantee.post_processing)
        assert "Norm-Sub" not in text and "sweeps" not in text, text
        assert "unclipped 1-D estimates" in text
    rel = HDG(dom, 1.0).simulate(recs, rng=fugu.RandomSource(seed=1))  # norm-sub: unchanged
    assert "Norm-Sub" in rel.guarantee.post_processing[0]
    assert "weighted update (Algorithm 1" in rel.guarantee.post_processing[1]


def test_grid_groups_without_reports_are_recorded() -> None:
    """A TDG/HDG group that received no report got the uniform guess n/cells (variance 1e30)
    without a word in the release; HIO, LHIO and MSW say so since review 16. The guarantee
    now names the groups."""
    dom = fugu.Domain([fugu.Ordinal("a", 0, 3), fugu.Ordinal("b", 0, 3), fugu.Ordinal("c", 0, 3)])
    p = fugu.ldp.TDG(dom, 1.0, g2=2)
    n = 300
    codes = np.zeros((n, 3), np.int64)
    rel = p.aggregate(p.client(fugu.RandomSource(seed=1)).perturb(codes, groups=np.arange(n) % 2))
    said = [s for s in rel.guarantee.post_processing if "no report" in s]
    assert len(said) == 1 and "1 of 3 groups" in said[0] and "bxc" in said[0], said
    full = p.aggregate(p.client(fugu.RandomSource(seed=1)).perturb(codes))
    assert not any("no report" in s for s in full.guarantee.post_processing)


def test_arrow_record_batch_reader_is_aggregated() -> None:
    """An Arrow RecordBatchReader of reports (a stream: Flight, a dataset scanner) raised a
    bare AttributeError ('no attribute num_rows'): it was taken for one batch. Its batches
    are now streamed, giving the table's release."""
    import pyarrow as pa

    dom = fugu.Domain([fugu.Ordinal("a", 0, 9), fugu.Ordinal("b", 0, 4)])
    p = HDG(dom, 1.0, g1=4, g2=2)
    rep = p.client(fugu.RandomSource(seed=1)).perturb(
        {"a": np.arange(100) % 10, "b": np.arange(100) % 5}
    )
    t = rep.to_arrow()
    reader = pa.RecordBatchReader.from_batches(t.schema, t.to_batches(max_chunksize=30))
    assert p.aggregate(reader).answer({"a": (0, 4)}) == p.aggregate(t).answer({"a": (0, 4)})


def test_tdg_pair_answered_by_the_uniform_guess_is_recorded() -> None:
    """TDG answers the cut cells of a pair whose response matrix would exceed 2^24 cells by
    the uniform guess; the guarantee said only "cut cells answered by a response matrix …",
    as if every pair had one."""
    dom = fugu.Domain(
        [fugu.Ordinal("x", 0, 4096), fugu.Ordinal("y", 0, 4096), fugu.Ordinal("z", 0, 3)]
    )
    rng = np.random.default_rng(0)
    recs = {
        "x": rng.integers(0, 4097, 600),
        "y": rng.integers(0, 4097, 600),
        "z": rng.integers(0, 4, 600),
    }
    rel = fugu.ldp.TDG(dom, 1.0, g2=2).simulate(recs, rng=fugu.RandomSource(seed=1))
    said = [s for s in rel.guarantee.post_processing if "uniform guess" in s]
    assert len(said) == 1 and "xxy" in said[0] and "xxz" not in said[0], said
    assert set(rel.matrices) == {("x", "z"), ("y", "z")}


def test_damaged_grid_release_file_is_refused_on_load(tmp_path) -> None:
    """A release file whose response matrix has the wrong shape, or whose grid edges end
    past the attribute's size, loaded and then answered with a bare IndexError (or a wrong
    number). GridRelease now checks grids and matrices against the domain; load reports a
    FileFormatError naming the problem."""
    import json

    dom = fugu.datasets.synthetic_domain(3, 8)
    recs = fugu.datasets.correlated_gaussian(2000, 3, 8, seed=1)
    rel = HDG(dom, 1.0).simulate(recs, rng=fugu.RandomSource(seed=1))
    path = tmp_path / "h.npz"
    rel.save(path)
    z = dict(np.load(path, allow_pickle=False))

    def damaged(key, value):
        zz = dict(z)
        zz[key] = value
        bad = tmp_path / "bad.npz"
        np.savez(bad, **zz)
        return bad

    q = {"a0": (0, 3), "a1": (2, 5)}
    assert fugu.Release.load(path).answer(q) == rel.answer(q)
    assert json.loads(bytes(z["__header__"]).decode())["kind"] == "ldp-grids"
    for key, value in (("a_matrix0", z["a_matrix0"][:4]), ("a_edges3_0", np.array([0, 3, 9]))):
        with pytest.raises(fugu.errors.FileFormatError, match="does not fit|response matrix"):
            fugu.Release.load(damaged(key, value)).answer(q)


def test_report_table_with_a_repeated_column_is_refused(tmp_path) -> None:
    """A report table with two columns named "group" was read on the numpy engine through
    Arrow's get_field_index, which gives -1 for a repeated name, i.e. the *last* column:
    every report was silently counted in the appended column's group (DuckDB refuses such
    input). It is now refused on every path (table, Parquet file)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    dom = fugu.Domain([fugu.Ordinal("a", 0, 9), fugu.Ordinal("b", 0, 4)])
    p = HDG(dom, 1.0, g1=4, g2=2)
    rep = p.client(fugu.RandomSource(seed=1)).perturb(
        {"a": np.arange(100) % 10, "b": np.arange(100) % 5}
    )
    t = rep.to_arrow().append_column("group", pa.array(np.zeros(100, np.int64)))
    with pytest.raises(fugu.errors.ReportError, match="more than one column named"):
        p.aggregate(t)
    pq.write_table(t, tmp_path / "r.parquet")
    with pytest.raises(fugu.errors.ReportError, match="more than one column named"):
        p.aggregate(str(tmp_path / "r.parquet"))


def test_hdg_one_attribute_expected_error_without_its_1d_reports() -> None:
    """HDG's λ = 1 expected error read only the attribute's 1-D grid: when that group had no
    report (variance 1e30) every interval on the attribute got an error of about 10^15,
    though Phase 2 fills the grid from the 2-D grids' margins. It now uses the margins then,
    as for TDG."""
    dom = fugu.Domain([fugu.Ordinal("a", 0, 7), fugu.Ordinal("b", 0, 7), fugu.Ordinal("c", 0, 7)])
    p = HDG(dom, 1.0, g1=4, g2=2)
    n = 600
    codes = np.stack([np.arange(n) % 8, (np.arange(n) // 8) % 8, np.arange(n) % 5], 1)
    groups = 1 + np.arange(n) % 5  # every group but a's 1-D grid (group 0)
    rel = p.aggregate(p.client(fugu.RandomSource(seed=1)).perturb(codes, groups=groups))
    err = rel.expected_error({"a": (0, 3)})
    assert err is not None and err < n
    assert rel.expected_error({"b": (0, 3)}) < n  # b's own 1-D grid: as before


def test_bit_vectors_given_as_a_list_of_bytes_are_read_exactly() -> None:
    """A mapping of report columns whose bit vectors are a Python list of bytes: the numpy
    engine turned the list into a fixed-width 'S' array (np.asarray), which is not a report
    column type, so every report was rejected ('wrong type'; and 'S' drops trailing NUL bytes,
    turning an all-zero vector into b''). The values are now kept as Python bytes: the release
    equals the one from the Reports batch."""
    dom = fugu.Domain([fugu.Ordinal("a", 0, 9), fugu.Ordinal("b", 0, 4)])
    p = HDG(dom, 1.0, g1=4, g2=2)
    rep = p.client(fugu.RandomSource(seed=1)).perturb(
        {"a": np.arange(100) % 10, "b": np.arange(100) % 5}
    )
    bits = [bytes(x) for x in rep.columns["bits"]]
    assert b"\x00" in bits  # some all-zero vectors, which 'S' arrays turn into b''
    cols = {"group": rep.columns["group"].tolist(), "bits": bits}
    rel = p.aggregate(cols, header=rep.header())
    assert rel.guarantee.data_options["reports_accepted"] == 100
    assert rel.answer({"a": (0, 4)}) == p.aggregate(rep).answer({"a": (0, 4)})


def test_duckdb_engine_reads_bytes_lists_like_the_numpy_engine() -> None:
    """The same mapping on engine="duckdb": the list became a fixed-width 'S' array before
    Arrow, which drops trailing NUL bytes, so exactly the all-zero bit vectors (15 of 100
    here) were rejected as 'wrong type' and the release was built from the others (a biased
    selection). A column mixing bytes and numbers became b'1' strings ('out of range'). Both
    now give the numpy engine's release."""
    dom = fugu.Domain([fugu.Ordinal("a", 0, 9), fugu.Ordinal("b", 0, 4)])
    p = HDG(dom, 1.0, g1=4, g2=2)
    rep = p.client(fugu.RandomSource(seed=1)).perturb(
        {"a": np.arange(100) % 10, "b": np.arange(100) % 5}
    )
    g, bits = rep.columns["group"].tolist(), [bytes(x) for x in rep.columns["bits"]]
    q = {"a": (0, 4)}
    rel = p.aggregate({"group": g, "bits": bits}, header=rep.header(), engine="duckdb")
    assert rel.guarantee.data_options["reports_accepted"] == 100
    assert rel.answer(q) == p.aggregate(rep).answer(q)
    mixed = {"group": g, "bits": bits[:50] + [1] * 50}
    with pytest.warns(fugu.ldp.RejectedReportsWarning):
        a = p.aggregate(mixed, header=rep.header(), engine="duckdb")
    with pytest.warns(fugu.ldp.RejectedReportsWarning):
        b = p.aggregate(mixed, header=rep.header())
    assert a.guarantee.data_options["rejected_reports"] == {"wrong type": 50}
    assert a.answer(q) == b.answer(q)
