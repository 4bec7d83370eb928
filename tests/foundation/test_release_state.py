"""The declarative release state (issue 19): every kind saves and loads through its
``_state_fields``; files written by the code before it (tests/foundation/data/releases_v1, made by
make_release_fixtures.py with the code of 3033565) still load and answer exactly as they did."""

from __future__ import annotations

import io
import json
import zipfile
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import fugu
from fugu.errors import FileFormatError
from fugu.release import Release

DATA = Path(__file__).parent / "data" / "releases_v1"
ANSWERS = json.loads((DATA / "answers.json").read_text())


@pytest.mark.parametrize("name", sorted(ANSWERS))
def test_files_saved_by_the_old_code_load_and_answer_the_same(name: str) -> None:
    rec = ANSWERS[name]
    rel = fugu.Release.load(DATA / f"{name}.npz")
    assert rel.kind == rec["kind"]
    for q, a in zip(rec["queries"], rec["answers"], strict=True):
        q = {k: tuple(v) if isinstance(v, list) else v for k, v in q.items()}
        assert rel.answer(q) == pytest.approx(a, rel=1e-12, abs=1e-9)
    if name.startswith("graph-count"):
        assert rel.value == rec["value"]  # type: ignore[attr-defined]
        assert rel.expected_error() == rec["errors"][0]  # type: ignore[attr-defined]
    else:
        for q, e in zip(rec["queries"], rec["errors"], strict=True):
            q = {k: tuple(v) if isinstance(v, list) else v for k, v in q.items()}
            got = rel.expected_error(q)
            assert (got is None) == (e is None)
            if e is not None:
                assert got == pytest.approx(e, rel=1e-12)
    if "counts" in rec:
        np.testing.assert_allclose(np.asarray(rel.counts).ravel(), rec["counts"], rtol=1e-12)
    if name == "blowfish-linear":
        np.testing.assert_array_equal(rel.values, rec["values"])  # type: ignore[attr-defined]
        np.testing.assert_array_equal(rel.variance, rec["variance"])  # type: ignore[attr-defined]


@pytest.mark.parametrize("name", sorted(ANSWERS))
def test_old_files_saved_again_hold_the_same_state(name: str, tmp_path: Path) -> None:
    """Loading an old file and saving it writes the same arrays and meta (the format is kept)."""
    old = DATA / f"{name}.npz"
    new = fugu.Release.load(old).save(tmp_path / "again.npz")
    with np.load(old) as a, np.load(new) as b:
        ha, hb = (json.loads(bytes(z["__header__"]).decode()) for z in (a, b))
        assert ha == hb
        assert sorted(a.files) == sorted(b.files)
        for k in a.files:
            if k != "__header__":  # the same JSON (compared above), keys perhaps in another order
                np.testing.assert_array_equal(a[k], b[k])
                assert a[k].dtype == b[k].dtype


def test_every_kind_declares_its_state_once() -> None:
    """No kind of the converted modules writes its own _from_state or _state any more."""
    from fugu.release import _import_all_release_kinds

    _import_all_release_kinds()
    for kind, cls in Release._registry.items():
        assert cls._state_fields, kind
        assert "_from_state" not in cls.__dict__ and "_state" not in cls.__dict__, kind


def _rewrite(src: Path, dst: Path, edit: Any) -> Path:
    with np.load(src, allow_pickle=False) as z:
        header = json.loads(bytes(z["__header__"]).decode())
        arrays = {k: z[k] for k in z.files if k != "__header__"}
    edit(header, arrays)
    with zipfile.ZipFile(dst, "w") as zf:
        payload = {"__header__": np.frombuffer(json.dumps(header).encode(), np.uint8), **arrays}
        for k, v in payload.items():
            buf = io.BytesIO()
            np.lib.format.write_array(buf, np.asarray(v))
            zf.writestr(k + ".npy", buf.getvalue())
    return dst


def _refused(path: Path, *words: str) -> None:
    with pytest.raises(FileFormatError) as info:
        fugu.Release.load(path)
    assert path.name in str(info.value)
    for w in words:
        assert w in str(info.value), str(info.value)


@pytest.mark.parametrize(
    ("name", "edit", "words"),
    [
        ("privelet", lambda h, a: h["meta"].update(lam="2"), ["'lam' must be a number"]),
        ("privelet", lambda h, a: h["meta"].pop("plain"), ["'plain' is missing"]),
        ("privelet", lambda h, a: h["meta"].update(plain=[1]), ["list of strings"]),
        ("privelet", lambda h, a: h["meta"].update(extra=1), ["unknown meta fields ['extra']"]),
        ("ldp-frequency", lambda h, a: h["meta"].update(n_reports=2.5), ["an integer"]),
        ("ldp-hio", lambda h, a: h["meta"].update(branching=True), ["'branching'"]),
        ("ldp-product", lambda h, a: a.pop("a_theta2"), ["theta0 … theta2"]),
        ("ldp-pairs", lambda h, a: a.update(a_mx_y=np.zeros((4, 4))), ["malformed name"]),
        ("ldp-pairs", lambda h, a: a.update(a_m0_1=np.zeros(4)), ["dimension"]),
        ("cube", lambda h, a: a.update(a_other=np.zeros(2)), ["unexpected array(s) ['other']"]),
        ("cube", lambda h, a: a.update(a_estimate=np.full((4, 3), "x")), ["not numbers"]),
        ("graph-count", lambda h, a: a.update(a_value=np.zeros(2)), ["one value"]),
        ("graph-count", lambda h, a: h.update(domain={"attributes": [
            {"kind": "ordinal", "name": "a", "low": 0, "high": 3}]}), ["has no domain"]),
        ("blowfish-cumulative", lambda h, a: h["meta"].update(structure={"k": 1}), ["structure"]),
        ("ldp-uniform", lambda h, a: h.update(domain=None), ["needs a domain"]),
    ],
)  # fmt: skip
def test_malformed_state_refused_naming_the_file(
    tmp_path: Path, name: str, edit: Any, words: list[str]
) -> None:
    _refused(_rewrite(DATA / f"{name}.npz", tmp_path / "bad.npz", edit), *words)


def test_state_is_checked_before_decompressing(tmp_path: Path, monkeypatch: Any) -> None:
    """Missing or misshapen arrays are refused from the headers alone."""
    p = _rewrite(DATA / "ldp-product.npz", tmp_path / "p.npz", lambda h, a: a.pop("a_theta1"))

    def no_load(*a: Any, **k: Any) -> None:
        raise AssertionError("arrays were decompressed before the check")

    monkeypatch.setattr(np, "load", no_load)
    _refused(p, "theta")


def test_a_new_kind_needs_only_its_fields(tmp_path: Path) -> None:
    """What the scheme is for: a release kind declares its state and gets save/load/checks."""
    from fugu.release_state import Array, Meta

    class Scaled(Release):
        kind = "test-scaled"
        _state_fields = (Array("v", "values", ndim=1), Meta("factor", float, default=1.0))

        def __init__(self, domain: Any, guarantee: Any, v: Any, factor: float) -> None:
            super().__init__(domain, guarantee)
            self.values, self.factor = np.asarray(v, float), factor

    try:
        dom = fugu.Domain([fugu.Ordinal("a", 0, 1)])
        g = fugu.Guarantee("central-dp", 1.0, "replace one record", "test")
        p = Scaled(dom, g, [1.0, 2.0], 3.0).save(tmp_path / "s.npz")
        back = fugu.Release.load(p)
        assert isinstance(back, Scaled) and back.factor == 3.0
        np.testing.assert_array_equal(back.values, [1.0, 2.0])
        _refused(_rewrite(p, tmp_path / "b.npz", lambda h, a: h["meta"].update(factor=None)))
    finally:
        Release._registry.pop("test-scaled", None)
