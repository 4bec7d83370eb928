"""Shared steps of the privacy review tests (test_review_privacy*.py)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest


def spy_calls(monkeypatch: pytest.MonkeyPatch, module: Any, name: str) -> list[dict[str, Any]]:
    """Record every call of ``module.name`` (a noise sampler) with its arguments."""
    calls: list[dict[str, Any]] = []
    real: Callable[..., Any] = getattr(module, name)

    def spy(*args: Any, **kwargs: Any) -> Any:
        calls.append({"args": args, "kwargs": kwargs})
        return real(*args, **kwargs)

    monkeypatch.setattr(module, name, spy)
    return calls
