"""Asking git a quick question (HEAD, a config value, the ignored files), within a bound, and not again soon when
it did not answer.

A git that hangs (a network mount, a credential helper waiting for input, a wrapper script) made every front
wait: `rev-parse HEAD` then `rev-parse --verify HEAD`, 30 s each, when the engine opened and again after each
index run, so `delphi context` took two minutes and `delphi mcp`'s first call a minute (a newcomer, session 30).
A question git does not answer within QUICK_TIMEOUT_S marks the folder slow for SLOW_FOR_S: the quick
questions return None at once meanwhile, and health says why history is off.
"""

from __future__ import annotations

import shutil
import subprocess
import time
from pathlib import Path

QUICK_TIMEOUT_S = 10.0
SLOW_FOR_S = 600.0

_slow: dict[str, float] = {}  # folder -> when git last failed to answer in time


def is_slow(root: Path) -> bool:
    t = _slow.get(str(root))
    return t is not None and time.monotonic() - t < SLOW_FOR_S


def slow_status() -> str:
    return (f"off: git did not answer within {QUICK_TIMEOUT_S:.0f} s (no history to read; asked again in "
            f"{SLOW_FOR_S / 60:.0f} minutes)")


def ask_git(root: Path, *args: str, timeout: float | None = None,
            mark_slow: bool = True) -> subprocess.CompletedProcess[bytes] | None:
    """git's answer to ``git -C root ARGS``; None when git is not installed, could not start, or did not answer in
    time (the folder is then slow, unless not ``mark_slow``: a question whose cost grows with the repository, so
    that its timeout says nothing of the quick ones; see the module note). core.fsmonitor off: a cloned
    repository's config must not name a program this runs."""
    if is_slow(root):
        return None
    exe = shutil.which("git")
    if exe is None:
        return None
    try:
        return subprocess.run([exe, "-c", "core.fsmonitor=false", "-C", str(root), *args], capture_output=True,
                              timeout=timeout or QUICK_TIMEOUT_S, check=False, stdin=subprocess.DEVNULL)
    except subprocess.TimeoutExpired:
        if mark_slow:
            _slow[str(root)] = time.monotonic()
        return None
    except OSError:
        return None
