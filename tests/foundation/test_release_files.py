"""Release.load on malformed files (issue 14 item 10): every failure a FileFormatError naming the
file, the header checked against its schema and the arrays' declared sizes before decompressing.
"""

from __future__ import annotations

import io
import json
import zipfile
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import fugu
from fugu.errors import FileFormatError, FuguError

SETTINGS = settings(
    max_examples=150,
    deadline=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)


def _release() -> fugu.Release:
    dom = fugu.Domain([fugu.Ordinal("a", 0, 3), fugu.Ordinal("b", 0, 2)])
    hist = fugu.Histogram(np.arange(12).reshape(4, 3), dom)
    return fugu.central.laplace(hist, 1.0, rng=fugu.RandomSource(seed=1))


def _parts(path: Path) -> tuple[dict[str, Any], dict[str, np.ndarray]]:
    with np.load(path, allow_pickle=False) as z:
        header = json.loads(bytes(z["__header__"]).decode())
        arrays = {k: z[k] for k in z.files if k != "__header__"}
    return header, arrays


def _write(path: Path, header: Any, arrays: dict[str, np.ndarray], raw_header: bytes | None = None):
    """Write an npz by hand (so headers and arrays can be anything)."""
    payload = raw_header if raw_header is not None else json.dumps(header).encode()
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as zf:
        for name, arr in {"__header__": np.frombuffer(payload, np.uint8), **arrays}.items():
            buf = io.BytesIO()
            np.lib.format.write_array(buf, np.asarray(arr), allow_pickle=True)
            zf.writestr(name + ".npy", buf.getvalue())
    return path


@pytest.fixture(scope="module")
def good(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return _release().save(tmp_path_factory.mktemp("rel") / "good.npz")


def test_round_trip_still_works(good: Path) -> None:
    rel = fugu.Release.load(good)
    np.testing.assert_array_equal(rel.counts, _release().counts)


def _refused(path: Path, *match: str) -> FileFormatError:
    with pytest.raises(FileFormatError) as info:
        fugu.Release.load(path)
    assert path.name in str(info.value)
    for m in match:
        assert m in str(info.value), str(info.value)
    return info.value


@pytest.mark.parametrize(
    ("where", "value", "expect"),
    [
        (("guarantee", "epsilon"), -5, "epsilon must be a finite number > 0, got -5"),
        (("guarantee", "epsilon"), "abc", "'epsilon' must be a float"),
        (("guarantee", "epsilon"), 0, "epsilon must be a finite number > 0"),
        (("guarantee", "epsilon"), None, "'epsilon' must be a float"),
        (("guarantee", "epsilon"), True, "'epsilon' must be a float"),
        (("guarantee", "model"), "central", "model must be one of"),
        (("guarantee", "model"), 3, "'model' must be a str"),
        (("guarantee", "private"), "yes", "'private' must be a bool"),
        (("guarantee", "sensitivity"), -1, "sensitivity must be >= 0"),
        (("guarantee", "post_processing"), [1], "post_processing must be a list of strings"),
        (("guarantee", "parameters"), [], "'parameters' must be a dict"),
        (("guarantee", "surprise"), 1, "unknown ['surprise']"),
        (("guarantee",), None, "'guarantee' must be an object"),
        (("guarantee",), [], "'guarantee' must be an object"),
        (("kind",), "nope", "unknown release kind 'nope'"),
        (("kind",), None, "unknown release kind None"),
        (("kind",), ["cube"], "unknown release kind"),
        (("format",), "other", "format is 'other'"),
        (("version",), 99, "newer fugu"),
        (("version",), "1", "version must be a positive integer"),
        (("domain",), 5, "'domain' must be an object"),
        (("domain",), {"attributes": [{"kind": "ordinal"}]}, "its domain is invalid"),
        (("domain",), {"attributes": [{"kind": "x", "name": "a"}]}, "its domain is invalid"),
        (("domain",), {"attributes": [{"kind": "ordinal", "name": "a", "low": 3, "high": 0}]}, ""),
        (("domain",), {"attributes": [{"kind": "ordinal", "name": "a", "low": 0, "high": 9}]}, ""),
        (("meta",), [], "'meta' must be an object"),
        (("extra",), 1, "unknown header fields ['extra']"),
    ],
)
def test_mutated_header_refused(
    tmp_path: Path, good: Path, where: tuple[str, ...], value: Any, expect: str
) -> None:
    header, arrays = _parts(good)
    d = header
    for k in where[:-1]:
        d = d[k]
    d[where[-1]] = value
    _refused(_write(tmp_path / "bad.npz", header, arrays), expect)


def test_missing_header_fields_refused(tmp_path: Path, good: Path) -> None:
    header, arrays = _parts(good)
    for key in ("format", "kind", "guarantee"):
        h = dict(header)
        del h[key]
        _refused(_write(tmp_path / f"no-{key}.npz", h, arrays))
    for key in ("model", "epsilon", "mechanism", "neighbours"):
        h = json.loads(json.dumps(header))
        del h["guarantee"][key]
        _refused(_write(tmp_path / f"no-g-{key}.npz", h, arrays), "missing")


def test_non_finite_epsilon_in_header_refused(tmp_path: Path, good: Path) -> None:
    header, arrays = _parts(good)
    for text in ("NaN", "Infinity", "-Infinity", "1e400"):
        raw = json.dumps(header).replace('"epsilon": 1.0', f'"epsilon": {text}').encode()
        _refused(_write(tmp_path / "nf.npz", None, arrays, raw_header=raw), "epsilon")


def test_header_not_json_or_not_object(tmp_path: Path, good: Path) -> None:
    _, arrays = _parts(good)
    for raw in (b"", b"{", b"\xff\xfe", b"[1, 2]", b"3", b"null", b"[" * 50000):
        _refused(_write(tmp_path / "h.npz", None, arrays, raw_header=raw), "header")


def test_declared_shape_checked_before_decompressing(
    tmp_path: Path, good: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A wrong or huge declared shape is refused from the .npy header, before np.load runs."""
    header, arrays = _parts(good)

    def no_load(*a: Any, **k: Any) -> None:
        raise AssertionError("arrays were decompressed before the check")

    # shape that disagrees with the domain
    p = _write(tmp_path / "shape.npz", header, {"a_estimate": np.zeros((3, 4))})
    monkeypatch.setattr(np, "load", no_load)
    _refused(p, "shape (3, 4)", "(4, 3)")
    # a header that declares more data than stored (an edited .npy header): a "zip bomb" shape
    buf = io.BytesIO()
    np.lib.format.write_array(buf, np.zeros((4, 3)))
    blob = buf.getvalue().replace(b"(4, 3)", b"(4000000000, 3)".ljust(6)[:15])
    with zipfile.ZipFile(tmp_path / "bomb.npz", "w") as zf:
        zf.writestr("__header__.npy", _npy(np.frombuffer(json.dumps(header).encode(), np.uint8)))
        zf.writestr("a_estimate.npy", blob)
    _refused(tmp_path / "bomb.npz", "'estimate' declares 12,000,000,000 elements")
    # a truncated array
    with zipfile.ZipFile(tmp_path / "trunc.npz", "w") as zf:
        zf.writestr("__header__.npy", _npy(np.frombuffer(json.dumps(header).encode(), np.uint8)))
        zf.writestr("a_estimate.npy", _npy(np.zeros((4, 3)))[:-8])
    _refused(tmp_path / "trunc.npz", "truncated or edited")


def _npy(arr: np.ndarray) -> bytes:
    buf = io.BytesIO()
    np.lib.format.write_array(buf, arr, allow_pickle=True)
    return buf.getvalue()


def test_object_arrays_and_odd_members_refused(tmp_path: Path, good: Path) -> None:
    header, arrays = _parts(good)
    obj = np.array([{"x": 1}], dtype=object)
    _refused(_write(tmp_path / "o.npz", header, {**arrays, "a_x": obj}), "Python objects")
    _refused(_write(tmp_path / "m.npz", header, {**arrays, "evil": np.zeros(2)}), "unexpected")
    _refused(_write(tmp_path / "e.npz", header, {}), "estimate")


@pytest.mark.parametrize("cut", [0, 1, 4, 22, 30, 100, 200, -200, -22, -1])
def test_truncated_file_refused(tmp_path: Path, good: Path, cut: int) -> None:
    data = good.read_bytes()
    p = tmp_path / "cut.npz"
    p.write_bytes(data[:cut])
    _refused(p)


def test_wrong_magic_and_not_a_file(tmp_path: Path, good: Path) -> None:
    data = bytearray(good.read_bytes())
    data[:4] = b"XXXX"
    p = tmp_path / "magic.npz"
    p.write_bytes(bytes(data))
    # the zip central directory is at the end, so zipfile may still open it; either way: refused
    # clearly or the (intact) release loads
    try:
        fugu.Release.load(p)
    except FileFormatError as e:
        assert "magic.npz" in str(e)
    with pytest.raises(FileFormatError, match="is not a file"):
        fugu.Release.load(tmp_path)
    with pytest.raises(FileFormatError, match="does not exist"):
        fugu.Release.load(tmp_path / "missing.npz")


@SETTINGS
@given(st.binary(max_size=2000))
def test_random_bytes_refused(tmp_path: Path, blob: bytes) -> None:
    p = tmp_path / "random.npz"
    p.write_bytes(blob)
    _refused(p)


@SETTINGS
@given(st.data())
def test_byte_flips_refused_or_identical(tmp_path: Path, good: Path, data: st.DataObject) -> None:
    """Flipping bytes anywhere: a FileFormatError naming the file, or (when the flip hit bytes the
    format ignores, e.g. a zip timestamp) a release equal to the original."""
    blob = bytearray(good.read_bytes())
    n = data.draw(st.integers(1, 4))
    for _ in range(n):
        i = data.draw(st.integers(0, len(blob) - 1))
        blob[i] = data.draw(st.integers(0, 255))
    p = tmp_path / "flip.npz"
    p.write_bytes(bytes(blob))
    try:
        rel = fugu.Release.load(p)
    except FileFormatError as e:
        assert "flip.npz" in str(e)
    else:
        ref = fugu.Release.load(good)
        np.testing.assert_array_equal(rel.counts, ref.counts)
        assert rel.guarantee == ref.guarantee


_json = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(-(2**70), 2**70)
    | st.floats(allow_nan=True, allow_infinity=True)
    | st.text(max_size=5),
    lambda kids: (
        st.lists(kids, max_size=3) | st.dictionaries(st.text(max_size=5), kids, max_size=3)
    ),
    max_leaves=8,
)


@SETTINGS
@given(st.data())
def test_header_field_replaced_by_any_json(tmp_path: Path, good: Path, data: st.DataObject) -> None:
    header, arrays = _parts(good)
    paths = [("format",), ("version",), ("kind",), ("domain",), ("meta",), ("guarantee",)]
    paths += [("guarantee", k) for k in header["guarantee"]]
    paths += [("domain", "attributes"), ("domain", "attributes", 0)]
    where = data.draw(st.sampled_from(paths))
    value = data.draw(_json)
    d: Any = header
    for k in where[:-1]:
        d = d[k]
    d[where[-1]] = value
    p = _write(tmp_path / "any.npz", header, arrays)
    try:
        rel = fugu.Release.load(p)
    except FileFormatError as e:
        assert "any.npz" in str(e)
    else:  # accepted: then the changed field was harmless and the release still answers
        assert isinstance(rel.guarantee.epsilon, float | int) and rel.guarantee.epsilon > 0
        rel.answer({"a": (0, 1)})


def test_every_failure_is_a_fugu_error(tmp_path: Path) -> None:
    assert issubclass(FileFormatError, FuguError)
    assert issubclass(FileFormatError, fugu.InvalidParameterError)


@pytest.mark.parametrize("value", [np.nan, np.inf, -np.inf])
def test_non_finite_arrays_refused(tmp_path: Path, good: Path, value: float) -> None:
    header, arrays = _parts(good)
    est = arrays["a_estimate"].copy()
    est[1, 1] = value
    _refused(_write(tmp_path / "nf.npz", header, {**arrays, "a_estimate": est}), "NaN or infinite")


def test_save_is_atomic_and_keeps_umask_permissions(tmp_path: Path) -> None:
    import os
    import stat

    old = os.umask(0o027)
    try:
        p = _release().save(tmp_path / "r.npz")
    finally:
        os.umask(old)
    assert sorted(os.listdir(tmp_path)) == ["r.npz"]
    assert stat.S_IMODE(p.stat().st_mode) == 0o640
    fugu.Release.load(p)
