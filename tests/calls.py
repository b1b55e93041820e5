"""A counter around a real function (the function still runs), for tests that check what is not redone."""

from __future__ import annotations

from typing import Any


class Calls:
    """Counts the calls of a real function it wraps (the function still runs)."""

    def __init__(self, fn: Any) -> None:
        self.fn = fn
        self.n = 0

    def __call__(self, *a: Any, **k: Any) -> Any:
        self.n += 1
        return self.fn(*a, **k)
