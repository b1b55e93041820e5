"""Per-query traces: one JSON line per query, for later analysis of what each branch did.

A trace carries strings that come from the workspace (paths, the question, a draft). The lines are
written so that no shell can expand anything in them even if the file ends up sourced (a trace
appended to ``~/.bashrc`` once ran ``$(...)`` from a file name): every character a shell treats
specially inside double quotes is written as a JSON ``\\uXXXX`` escape, which is still valid JSON
and decodes to the same text.
"""

from __future__ import annotations

import json
import os
import stat
import time
from pathlib import Path
from typing import Any

from .retrieval.branches.base import Hit

# Outside JSON strings, json.dumps never emits these, so a plain replace only touches string contents.
# $ and ` expand in sh/bash/zsh double quotes, ! is history expansion; ensure_ascii already escapes
# control characters and line separators, so one record is always one line.
_SHELL_INERT = str.maketrans({"$": "\\u0024", "`": "\\u0060", "!": "\\u0021"})


def dumps_inert(record: Any) -> str:
    """One JSON line in which a shell finds nothing to expand."""
    return json.dumps(record, ensure_ascii=True).translate(_SHELL_INERT)


class NotATraceLog(OSError):
    """The file holds other text than traces: appending to it would change a file of the user's."""


def check_trace_log(path: Path) -> None:
    """Raise :class:`NotATraceLog` when ``path`` is a regular file that holds other text than traces. The README
    calls a pasted stack trace `trace.txt`; `--trace trace.txt` appended a JSON line to it, unsaid, and answered
    without it (a newcomer pasting traces, session 44). Absent, empty, a trace log (its first record opens with the
    time and the trace id, however long the record) or not a regular file (a pipe, `/dev/stderr`: written to as
    before, never read, which would wait on it; a folder: its open says so) pass."""
    try:
        st = os.stat(path)
    except OSError:
        return  # absent, or unreadable here: the write says what is wrong
    if not stat.S_ISREG(st.st_mode) or st.st_size == 0 or (st.st_dev, st.st_ino) in _TRACE_LOGS:
        return
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
        try:
            head = os.read(fd, 4096).lstrip()
        finally:
            os.close(fd)
    except OSError:
        return
    if head and not (head.startswith(b'{"time": ') and b'"traceId": ' in head[:200]):
        raise NotATraceLog(22, "it holds other text than Delphi's traces (JSON lines); traces are appended only "
                               "to a new file or a trace log")


# The files (device, inode) this process has written traces to: known trace logs, whose head is not read again at
# each question (a `trace_file` setting read 4 KB of it before every answer).
_TRACE_LOGS: set[tuple[int, int]] = set()


def write_trace(path: Path, answer: dict[str, Any], lists: dict[str, list[Hit]], weights: dict[str, float],
                params: dict[str, Any]) -> None:
    record = {
        "time": time.time(),
        "traceId": answer["traceId"],
        "params": params,
        "query": answer["query"],
        "weights": weights,
        "branches": {b: [{"rank": i + 1, "path": h.path, "score": round(h.score, 6)} for i, h in enumerate(hits[:50])]
                     for b, hits in lists.items()},
        "final": [{"rank": r["rank"], "path": r["path"], "score": r["score"], "branches": r["branches"]}
                  for r in answer["results"]],
        "branchesReady": answer["branchesReady"],
        "timingsMs": answer["timingsMs"],
    }
    path.parent.mkdir(parents=True, exist_ok=True)
    check_trace_log(path)
    # 0600 when created: a trace holds the question (a pasted stack trace) and the workspace's paths.
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_CLOEXEC, 0o600)
    with os.fdopen(fd, "a", encoding="utf-8") as f:
        f.write(dumps_inert(record) + "\n")
        st = os.fstat(fd)
    if stat.S_ISREG(st.st_mode):
        _TRACE_LOGS.add((st.st_dev, st.st_ino))
