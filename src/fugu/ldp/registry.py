"""Registry of LDP methods: wire name → protocol class.

The CLI (``fugu ldp …``) and :func:`fugu.ldp.protocol.protocol_from_header` look methods up here.
A module that defines a method registers it with :func:`register_method` at import time (the
grids module adds TDG and HDG this way).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:  # the protocol module looks methods up here: no import back at run time
    from .protocol import LDPProtocol

METHODS: dict[str, type[LDPProtocol]] = {}


def register_method(cls: type[LDPProtocol]) -> type[LDPProtocol]:
    """Add ``cls`` under ``cls.name`` (usable as a class decorator)."""
    METHODS[cls.name] = cls
    return cls
