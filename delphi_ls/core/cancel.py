"""Cooperative cancellation of one request, free of any transport.

A front that learns a request was cancelled (LSP's ``$/cancelRequest``) sets the request's event; the thread
answering it runs inside :func:`cancellable` and stops at the next :func:`check` (the session's waits, between
the retrieval branches), raising :class:`Cancelled`. An editor cancels a hover or a question it no longer
needs while the first index is still being caught up with: the thread went on waiting for it, up to seconds,
and answered a request nobody read (a newcomer, session 36). Outside a cancellable request, check does nothing.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager

_local = threading.local()


class Cancelled(Exception):
    """The request this thread answers was cancelled by its client."""


@contextmanager
def cancellable(event: threading.Event) -> Iterator[None]:
    before = getattr(_local, "event", None)
    _local.event = event
    try:
        yield
    finally:
        _local.event = before


def cancelled() -> bool:
    event = getattr(_local, "event", None)
    return event is not None and event.is_set()


def check() -> None:
    if cancelled():
        raise Cancelled("the request was cancelled by the client")


def wait(event: threading.Event, timeout: float) -> bool:
    """``event.wait(timeout)``, stopping early (Cancelled) when the request is cancelled meanwhile."""
    if getattr(_local, "event", None) is None:
        return event.wait(timeout)
    deadline = time.monotonic() + timeout
    while True:
        check()
        left = deadline - time.monotonic()
        if left <= 0:
            return event.is_set()
        if event.wait(min(left, 0.05)):
            return True
