"""What a release kind saves, declared once: the fields of a release file's state.

A release file (:meth:`fugu.Release.save`) holds numpy arrays and a JSON ``meta`` object. Each
release kind lists its state as a tuple of fields in ``_state_fields``; :class:`~fugu.Release`
writes and reads every kind with the same code, which checks each field (presence, JSON type,
array shape against the domain, before any array is decompressed) and hands the values to the
kind's constructor as keyword arguments:

=====================  ===========================================================================
:class:`Array`         one array (``a_<key>.npy``), optionally of the domain's shape; ``scalar``:
                       a one-element array read back as a float
:class:`ArrayList`     arrays ``<prefix>0 … <prefix>{n-1}``, n from the domain (one per attribute)
:class:`ArrayMap`      every array whose key starts with ``<prefix>``, as a mapping
:class:`Meta`          one JSON value of ``meta``, type-checked, optionally converted
:class:`Custom`        a value spread over arrays and meta entries that belong together (say,
                       each grid's counts, edges and variance): two functions save and restore it
=====================  ===========================================================================

A field that reads one value from another (a converter raising :class:`~fugu.FuguError` or
``ValueError``) makes :meth:`~fugu.Release.load` refuse the file with a
:class:`~fugu.errors.FileFormatError` naming it, as for any other malformed file.

>>> import numpy as np
>>> f = Meta("n", float)
>>> f.load({}, {"n": 3}, None)
3.0
>>> try:
...     f.load({}, {"n": "3"}, None)
... except Exception as e:
...     print(e)
meta 'n' must be a number, got '3'
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from .domain import Domain
from .errors import InvalidParameterError

__all__ = ["Array", "ArrayList", "ArrayMap", "Custom", "Meta", "StateField"]

#: dtype kinds fugu writes into release files: bool, integers, floats
_NUMERIC = "biuf"


def _problem(text: str) -> InvalidParameterError:
    return InvalidParameterError(text)


class StateField:
    """One part of a release's saved state (see the subclasses)."""

    kwarg: str

    def meta_keys(self) -> tuple[str, ...]:
        """The keys of the file's ``meta`` this field owns."""
        return ()

    def dump(self, rel: Any) -> tuple[dict[str, np.ndarray], dict[str, Any]]:
        """The arrays and meta entries that save this field of ``rel``."""
        raise NotImplementedError

    def claims(self, key: str) -> bool:
        """Whether the array ``key`` belongs to this field."""
        return False

    def check_spec(
        self, specs: Mapping[str, tuple[tuple[int, ...], np.dtype[Any]]], domain: Domain | None
    ) -> None:
        """Check the arrays' declared shapes and dtypes (read from their headers only)."""

    def load(
        self, arrays: Mapping[str, np.ndarray], meta: Mapping[str, Any], domain: Domain | None
    ) -> Any:
        """The constructor argument this field restores."""
        raise NotImplementedError


def _get(rel: Any, attr: str | Callable[[Any], Any]) -> Any:
    return attr(rel) if callable(attr) else getattr(rel, attr)


def _check_dtype(key: str, dtype: np.dtype[Any]) -> None:
    if dtype.kind not in _NUMERIC:
        raise _problem(f"array {key!r} holds {dtype}, not numbers")


def _check_dims(key: str, spec: tuple[tuple[int, ...], np.dtype[Any]], ndim: int | None) -> None:
    _check_dtype(key, spec[1])
    if ndim is not None and len(spec[0]) != ndim:
        raise _problem(f"array {key!r} has {len(spec[0])} dimension(s), not {ndim}")


@dataclass(frozen=True)
class Array(StateField):
    """One array, stored under ``key``.

    ``attr``: the release attribute (or a function of the release) saved, default ``key``;
    ``kwarg``: the constructor keyword, default ``key``; ``shape="domain"``: must have the
    domain's shape; ``ndim``: number of dimensions; ``optional``: may be absent (restored as
    None, and not written when the attribute is None); ``scalar``: one number, saved as a
    one-element array.
    """

    key: str
    attr: str | Callable[[Any], Any] | None = None
    kwarg: str = ""
    shape: str | None = None
    ndim: int | None = None
    optional: bool = False
    scalar: bool = False

    def __post_init__(self) -> None:
        if not self.kwarg:
            object.__setattr__(self, "kwarg", self.key)

    def dump(self, rel: Any) -> tuple[dict[str, np.ndarray], dict[str, Any]]:
        value = _get(rel, self.attr or self.key)
        if value is None:
            if not self.optional:
                raise _problem(f"a {rel.kind} release has no {self.key!r} to save")
            return {}, {}
        arr = np.array([float(value)]) if self.scalar else np.ascontiguousarray(value)
        return {self.key: arr}, {}

    def claims(self, key: str) -> bool:
        return key == self.key

    def check_spec(
        self, specs: Mapping[str, tuple[tuple[int, ...], np.dtype[Any]]], domain: Domain | None
    ) -> None:
        if self.key not in specs:
            if self.optional:
                return
            raise _problem(f"array {self.key!r} is missing")
        shape, dtype = specs[self.key]
        _check_dims(self.key, specs[self.key], self.ndim)
        want: tuple[int, ...] | None = None
        if self.scalar:
            want = (1,)
        elif self.shape == "domain" and domain is not None:
            want = tuple(domain.shape)
        if want is not None and shape != want:
            if self.scalar:
                raise _problem(f"array {self.key!r} must hold one value, got shape {shape}")
            raise _problem(f"array {self.key!r} has shape {shape}, the domain needs {want}")

    def load(
        self, arrays: Mapping[str, np.ndarray], meta: Mapping[str, Any], domain: Domain | None
    ) -> Any:
        arr = arrays.get(self.key)
        if arr is None:
            return None
        return float(arr[0]) if self.scalar else arr


@dataclass(frozen=True)
class ArrayList(StateField):
    """Arrays ``<prefix>0 … <prefix>{n-1}`` as a list, ``n = count(domain)`` (default: one per
    attribute); ``attr`` names the list attribute saved."""

    prefix: str
    kwarg: str
    attr: str | Callable[[Any], Any] | None = None
    count: Callable[[Domain | None], int] = lambda d: 0 if d is None else d.ndim
    ndim: int | None = None

    def dump(self, rel: Any) -> tuple[dict[str, np.ndarray], dict[str, Any]]:
        values = _get(rel, self.attr or self.kwarg)
        return {f"{self.prefix}{j}": np.ascontiguousarray(v) for j, v in enumerate(values)}, {}

    def claims(self, key: str) -> bool:
        return key.startswith(self.prefix) and key[len(self.prefix) :].isdigit()

    def check_spec(
        self, specs: Mapping[str, tuple[tuple[int, ...], np.dtype[Any]]], domain: Domain | None
    ) -> None:
        n = self.count(domain)
        want = {f"{self.prefix}{j}" for j in range(n)}
        have = {k for k in specs if self.claims(k)}
        if have != want:
            raise _problem(
                f"arrays {self.prefix}0 … {self.prefix}{n - 1} expected ({n}), found {sorted(have)}"
            )
        for k in sorted(want):
            _check_dims(k, specs[k], self.ndim)

    def load(
        self, arrays: Mapping[str, np.ndarray], meta: Mapping[str, Any], domain: Domain | None
    ) -> Any:
        return [arrays[f"{self.prefix}{j}"] for j in range(self.count(domain))]


@dataclass(frozen=True)
class ArrayMap(StateField):
    """Every array whose key is ``<prefix><name>``, as a mapping ``{parse(name): array}``.

    ``fmt`` turns a mapping key into ``name`` when saving (default ``str``); ``parse`` turns
    ``name`` back (default: the string itself) and raises ``ValueError`` on a malformed one.
    """

    prefix: str
    kwarg: str
    attr: str | Callable[[Any], Any] | None = None
    fmt: Callable[[Any], str] = str
    parse: Callable[[str], Any] = str
    ndim: int | None = None

    def dump(self, rel: Any) -> tuple[dict[str, np.ndarray], dict[str, Any]]:
        values = _get(rel, self.attr or self.kwarg)
        return {f"{self.prefix}{self.fmt(k)}": np.asarray(v) for k, v in values.items()}, {}

    def claims(self, key: str) -> bool:
        return key.startswith(self.prefix)

    def check_spec(
        self, specs: Mapping[str, tuple[tuple[int, ...], np.dtype[Any]]], domain: Domain | None
    ) -> None:
        for k, spec in specs.items():
            if self.claims(k):
                try:
                    self.parse(k[len(self.prefix) :])
                except (ValueError, TypeError):
                    raise _problem(f"array {k!r} has a malformed name") from None
                _check_dims(k, spec, self.ndim)

    def load(
        self, arrays: Mapping[str, np.ndarray], meta: Mapping[str, Any], domain: Domain | None
    ) -> Any:
        n = len(self.prefix)
        return {self.parse(k[n:]): v for k, v in arrays.items() if self.claims(k)}


def _is_number(v: Any) -> bool:
    return isinstance(v, int | float) and not isinstance(v, bool) and math.isfinite(v)


_TYPES: dict[Any, tuple[str, Callable[[Any], bool], Callable[[Any], Any]]] = {
    float: ("a number", _is_number, float),
    int: ("an integer", lambda v: isinstance(v, int) and not isinstance(v, bool), int),
    str: ("a string", lambda v: isinstance(v, str), str),
    bool: ("true or false", lambda v: isinstance(v, bool), bool),
    list: ("a list", lambda v: isinstance(v, list), list),
    dict: ("an object", lambda v: isinstance(v, dict), dict),
    "str-list": (
        "a list of strings",
        lambda v: isinstance(v, list) and all(isinstance(x, str) for x in v),
        list,
    ),
    "number-list": (
        "a list of numbers",
        lambda v: isinstance(v, list) and all(_is_number(x) for x in v),
        lambda v: [float(x) for x in v],
    ),
}

_MISSING = object()


@dataclass(frozen=True)
class Meta(StateField):
    """One JSON value of the file's ``meta``, stored under ``key``.

    ``type``: ``float`` (a finite number), ``int``, ``str``, ``bool``, ``list``, ``dict``,
    ``"str-list"`` or ``"number-list"``; ``nullable``: None is allowed too; ``default``: the value
    when the key is absent (absent and no default: the file is refused); ``attr``: the release
    attribute (or a function of the release) saved, default ``key``; ``kwarg``: the constructor
    keyword, default ``key``; ``convert``: applied to the checked value (and ``to_json`` to the
    attribute before saving), e.g. a dict to a dataclass.
    """

    key: str
    type: Any = float
    nullable: bool = False
    default: Any = _MISSING
    attr: str | Callable[[Any], Any] | None = None
    kwarg: str = ""
    convert: Callable[[Any], Any] | None = None
    to_json: Callable[[Any], Any] | None = None

    def __post_init__(self) -> None:
        if not self.kwarg:
            object.__setattr__(self, "kwarg", self.key)
        if self.type not in _TYPES:
            raise TypeError(f"unknown meta type {self.type!r}")

    def meta_keys(self) -> tuple[str, ...]:
        return (self.key,)

    def dump(self, rel: Any) -> tuple[dict[str, np.ndarray], dict[str, Any]]:
        value = _get(rel, self.attr or self.key)
        if value is not None and self.to_json is not None:
            value = self.to_json(value)
        return {}, {self.key: value}

    def load(
        self, arrays: Mapping[str, np.ndarray], meta: Mapping[str, Any], domain: Domain | None
    ) -> Any:
        value = meta.get(self.key, _MISSING)
        if value is _MISSING:
            if self.default is _MISSING:
                raise _problem(f"meta {self.key!r} is missing")
            return self.default
        if value is None and self.nullable:
            return None
        what, ok, cast = _TYPES[self.type]
        if not ok(value):
            raise _problem(
                f"meta {self.key!r} must be {what}{' or null' if self.nullable else ''}, "
                f"got {value!r}"
            )
        value = cast(value)
        if self.convert is None:
            return value
        try:
            return self.convert(value)
        except (TypeError, ValueError, KeyError, IndexError, AttributeError) as exc:
            raise _problem(
                f"meta {self.key!r} cannot be read: {type(exc).__name__}: {exc}"
            ) from None


@dataclass(frozen=True)
class Custom(StateField):
    """A value saved by ``dump(release) -> (arrays, meta)`` and restored by
    ``load(arrays, meta, domain)``, for state the other fields cannot describe one by one.

    ``arrays``: the key prefixes of the arrays it owns; ``meta``: the meta keys it owns (absent
    ones are ``load``'s to refuse). ``load`` raises ``KeyError``, ``ValueError``, ``TypeError`` or
    a :class:`~fugu.FuguError` on a malformed file; each becomes a FileFormatError naming it.
    """

    kwarg: str
    save: Callable[[Any], tuple[dict[str, np.ndarray], dict[str, Any]]]
    restore: Callable[[Mapping[str, np.ndarray], Mapping[str, Any], Domain | None], Any]
    arrays: tuple[str, ...] = ()
    meta: tuple[str, ...] = ()

    def meta_keys(self) -> tuple[str, ...]:
        return self.meta

    def dump(self, rel: Any) -> tuple[dict[str, np.ndarray], dict[str, Any]]:
        return self.save(rel)

    def claims(self, key: str) -> bool:
        return any(key.startswith(p) for p in self.arrays)

    def check_spec(
        self, specs: Mapping[str, tuple[tuple[int, ...], np.dtype[Any]]], domain: Domain | None
    ) -> None:
        for k, spec in specs.items():
            if self.claims(k):
                _check_dims(k, spec, None)

    def load(
        self, arrays: Mapping[str, np.ndarray], meta: Mapping[str, Any], domain: Domain | None
    ) -> Any:
        try:
            return self.restore(arrays, meta, domain)
        except (TypeError, ValueError, KeyError, IndexError, AttributeError) as exc:
            raise _problem(
                f"its {self.kwarg} cannot be read: {type(exc).__name__}: {exc}"
            ) from None
