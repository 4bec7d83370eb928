"""Strict reading of report columns: every value converts exactly or its report is rejected.

The aggregator never trusts a report. Before a protocol looks at a batch, each report column is
converted to the protocol's column type (:data:`~fugu.ldp.protocol.ColumnSpec`) *exactly*: a value
that the type cannot hold is never wrapped, clipped or rounded into it. Its report is rejected and
counted under one reason:

``"malformed"``
    a missing value (null, NaN in an integer column, an unreadable JSON line, a row without the
    column).
``"wrong type"``
    a value of another kind: text in a number column, a fraction in an integer column, a bit
    vector of another length, a boolean.
``"out of type range"``
    an integer the column's type cannot hold: an OLH seed below 0 or at least 2^32, a byte of a
    bit vector above 255 or below 0, an integer beyond int64 (or, in a float column, beyond the
    float range).
``"out of range"``
    a well-typed value the protocol cannot have produced (a bucket ≥ g, a group that does not
    exist, a bit beyond the domain); decided by the protocol's ``_validate``.
``"missing column"``, ``"column lengths differ"``
    the whole batch: it lacks a report column, or its columns (or its declared number of reports)
    disagree in length, so no row can be matched with its other columns.

:func:`clean_batch` returns the converted rows that passed and a :class:`~collections.Counter` of
the rejected ones by reason. It is vectorised (numpy / Arrow buffers); only object arrays (columns
with nulls, Python lists) are checked value by value.

>>> import numpy as np
>>> cols, rejected = clean_batch({"seed": "uint32", "y": "int"},
...                              {"seed": np.array([5, -1, 2**32]), "y": np.array([0, 1, 2])})
>>> cols["seed"].tolist(), dict(rejected)
([5], {'out of type range': 2})
>>> cols, rejected = clean_batch({"y": "int"}, {"y": np.array([1, 2])}, n=3)
>>> dict(rejected)
{'column lengths differ': 3}
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Mapping
from typing import Any

import numpy as np

__all__ = [
    "REASONS",
    "ROW_REASONS",
    "BATCH_REASONS",
    "clean_batch",
    "convert_column",
]

OK, MALFORMED, WRONG_TYPE, OUT_OF_TYPE = 0, 1, 2, 3
ROW_REASONS = ("malformed", "wrong type", "out of type range")
BATCH_REASONS = ("missing column", "column lengths differ")
REASONS = (*ROW_REASONS, "out of range", *BATCH_REASONS)

_INT_RANGE = {"int": (-(2**63), 2**63 - 1), "uint32": (0, 2**32 - 1)}
_DTYPES = {"int": np.int64, "uint32": np.uint32, "float": np.float64}


def _is_arrow(values: Any) -> bool:
    return type(values).__module__.split(".")[0] == "pyarrow"


def _length(values: Any) -> int:
    if isinstance(values, np.ndarray):
        return int(values.shape[0]) if values.ndim else 1
    try:
        return len(values)
    except TypeError:
        return 1


def _arrow_to_numpy(values: Any) -> Any:
    """An Arrow array → numpy: fixed-size binary / lists of uint8 without nulls as an (n, w)
    uint8 view of the buffer, numbers without nulls directly, anything else as objects."""
    from ..engines.ldp import arrow_column

    return arrow_column(values)


# -- scalar columns ---------------------------------------------------------------------------
def _object_scalars(items: np.ndarray, spec: str) -> tuple[np.ndarray, np.ndarray]:
    """Value-by-value check of an object array (nulls, Python ints of any size, text...)."""
    n = items.shape[0]
    codes = np.zeros(n, dtype=np.uint8)
    out = np.zeros(n, dtype=_DTYPES[spec])
    lo, hi = _INT_RANGE.get(spec, (0, 0))
    for i, v in enumerate(items):
        if v is None:
            codes[i] = MALFORMED
        elif isinstance(v, bool | np.bool_) or not isinstance(
            v, int | float | np.integer | np.floating
        ):
            codes[i] = WRONG_TYPE
        elif spec == "float":
            try:
                out[i] = float(v)  # NaN / inf pass: the protocol's _validate rejects them
            except OverflowError:  # a Python int beyond the float range
                codes[i] = OUT_OF_TYPE
        elif isinstance(v, float | np.floating):
            x = float(v)
            if math.isnan(x):
                codes[i] = MALFORMED
            elif math.isinf(x) or not lo <= x <= hi:
                codes[i] = OUT_OF_TYPE
            elif x != math.floor(x):
                codes[i] = WRONG_TYPE
            else:
                out[i] = int(x)
        else:
            k = int(v)
            if lo <= k <= hi:
                out[i] = k
            else:
                codes[i] = OUT_OF_TYPE
    return out, codes


def _scalars(values: Any, spec: str) -> tuple[np.ndarray, np.ndarray]:
    arr = values if isinstance(values, np.ndarray) else np.asarray(values)
    n = _length(arr)
    if arr.ndim != 1:
        return np.zeros(n, _DTYPES[spec]), np.full(n, WRONG_TYPE, np.uint8)
    kind = arr.dtype.kind
    if kind == "O":
        return _object_scalars(arr, spec)
    codes = np.zeros(n, dtype=np.uint8)
    if kind not in "iuf":  # bool, text, bytes, dates: another kind of value
        return np.zeros(n, _DTYPES[spec]), np.full(n, WRONG_TYPE, np.uint8)
    if spec == "float":
        return arr.astype(np.float64, copy=False), codes
    lo, hi = _INT_RANGE[spec]
    if kind == "f":
        nan = np.isnan(arr)
        with np.errstate(invalid="ignore"):
            # hi + 1 (2^63, 2^32) is exact as a float; "arr > hi" rounded hi = 2^63 - 1 up to
            # 2^63, so 2.0**63 passed and the cast wrapped it to -2^63
            out_of = ~nan & ((arr < lo) | (arr >= float(hi + 1)) | np.isinf(arr))
            frac = ~nan & ~out_of & (arr != np.floor(arr))
        codes[frac] = WRONG_TYPE
        codes[out_of] = OUT_OF_TYPE
        codes[nan] = MALFORMED
        good = codes == OK
        # exact: every float64 in range that is an integer converts without rounding
        out = np.where(good, arr, 0).astype(_DTYPES[spec])
        return out, codes
    # integers of any width: compare, never cast first (a cast would wrap)
    bad = np.zeros(n, dtype=bool)
    info = np.iinfo(arr.dtype)
    if info.min < lo:
        bad |= arr < lo
    if info.max > hi:
        bad |= arr > hi
    codes[bad] = OUT_OF_TYPE
    if bad.any():
        arr = np.where(bad, 0, arr)
    return arr.astype(_DTYPES[spec], copy=False), codes


# -- bit-vector columns ---------------------------------------------------------------------
def _object_bits(items: np.ndarray, width: int) -> tuple[np.ndarray, np.ndarray]:
    n = items.shape[0]
    try:  # fast path (C-level loops): every value is bytes of the right length
        if all(isinstance(v, bytes) for v in items):
            lens = np.fromiter(map(len, items), dtype=np.int64, count=n)
            if np.all(lens == width):
                raw = b"".join(items)
                return (
                    np.frombuffer(raw, dtype=np.uint8).reshape(n, width),
                    np.zeros(n, dtype=np.uint8),
                )
    except TypeError:  # pragma: no cover - a value without len(): the careful path below
        pass
    out = np.zeros((n, width), dtype=np.uint8)
    codes = np.zeros(n, dtype=np.uint8)
    for i, v in enumerate(items):
        if v is None:
            codes[i] = MALFORMED
        elif isinstance(v, bytes | bytearray | memoryview):
            b = bytes(v)
            if len(b) != width:
                codes[i] = WRONG_TYPE
            else:
                out[i] = np.frombuffer(b, dtype=np.uint8)
        elif isinstance(v, list | tuple | np.ndarray):
            row, c = _int_matrix(np.asarray(v)[None, ...], width)
            out[i], codes[i] = row[0], c[0]
        else:
            codes[i] = WRONG_TYPE
    return out, codes


def _int_matrix(arr: np.ndarray, width: int) -> tuple[np.ndarray, np.ndarray]:
    """An (n, w) array of byte values: each must be an integer in [0, 255]."""
    n = arr.shape[0]
    if arr.ndim != 2 or arr.shape[1] != width or arr.dtype.kind not in "iufO":
        return np.zeros((n, width), np.uint8), np.full(n, WRONG_TYPE, np.uint8)
    if arr.dtype == np.uint8:
        return arr, np.zeros(n, dtype=np.uint8)
    codes = np.zeros(n, dtype=np.uint8)
    if arr.dtype.kind == "O":
        try:
            arr = arr.astype(np.float64)
        except (TypeError, ValueError):
            return np.zeros((n, width), np.uint8), np.full(n, WRONG_TYPE, np.uint8)
    if arr.dtype.kind == "f":
        nan = np.isnan(arr).any(axis=1)
        with np.errstate(invalid="ignore"):
            frac = (arr != np.floor(arr)).any(axis=1) & ~nan
            out_of = ((arr < 0) | (arr > 255)).any(axis=1) & ~nan
        codes[frac] = WRONG_TYPE
        codes[out_of] = OUT_OF_TYPE
        codes[nan] = MALFORMED
    else:
        codes[((arr < 0) | (arr > 255)).any(axis=1)] = OUT_OF_TYPE
    good = codes == OK
    return np.where(good[:, None], arr, 0).astype(np.uint8), codes


def _bits(values: Any, width: int) -> tuple[np.ndarray, np.ndarray]:
    arr = values if isinstance(values, np.ndarray) else np.asarray(values, dtype=object)
    if arr.dtype.kind == "O" and arr.ndim == 1:
        return _object_bits(arr, width)
    if arr.ndim == 2:
        return _int_matrix(arr, width)
    n = _length(arr)
    return np.zeros((n, width), np.uint8), np.full(n, WRONG_TYPE, np.uint8)


# -- public --------------------------------------------------------------------------------------
def convert_column(values: Any, spec: Any) -> tuple[np.ndarray, np.ndarray]:
    """``(converted, codes)``: one report column as the spec's numpy type and a per-row code
    (0 = fine, else an index into :data:`ROW_REASONS` plus one). Rows with a code hold zeros and
    must not be used."""
    if _is_arrow(values):
        values = _arrow_to_numpy(values)
    if isinstance(spec, tuple):
        return _bits(values, int(spec[1]))
    return _scalars(values, spec)


def clean_batch(
    specs: Mapping[str, Any],
    batch: Mapping[str, Any],
    n: int | None = None,
    *,
    structure_only: bool = False,
) -> tuple[dict[str, np.ndarray], Counter[str]]:
    """The rows of ``batch`` whose every column converts exactly, and the rejected ones by reason.

    ``n`` (optional) is the number of reports the batch declares (``Reports.n``); every column
    must have that many rows. A batch that lacks a column, or whose lengths disagree, is rejected
    whole (its largest length counts). ``structure_only``: check only that (returns no columns).
    """
    rejected: Counter[str] = Counter()
    lengths = {k: _length(batch[k]) for k in specs if k in batch}
    size = max([*lengths.values(), *([n] if n is not None else [])], default=0)
    empty = {k: np.zeros((0, s[1]) if isinstance(s, tuple) else 0, dtype=np.uint8 if isinstance(
        s, tuple) else _DTYPES[s]) for k, s in specs.items()}  # fmt: skip
    if len(lengths) < len(specs):
        if size:
            rejected["missing column"] += size
        return empty, rejected
    if len(set(lengths.values()) | ({n} if n is not None else set())) > 1:
        rejected["column lengths differ"] += size
        return empty, rejected
    if structure_only:
        return {}, rejected
    cols: dict[str, np.ndarray] = {}
    worst = np.zeros(size, dtype=np.uint8)
    for k, spec in specs.items():
        arr, codes = convert_column(batch[k], spec)
        cols[k] = arr
        # the first reason in ROW_REASONS order wins (malformed before wrong type ...)
        worst = np.where((worst == OK) | ((codes != OK) & (codes < worst)), codes, worst)
    if worst.any():
        counts = np.bincount(worst, minlength=len(ROW_REASONS) + 1)
        for i, reason in enumerate(ROW_REASONS, start=1):
            if counts[i]:
                rejected[reason] += int(counts[i])
        keep = worst == OK
        cols = {k: v[keep] for k, v in cols.items()}
    return cols, rejected
