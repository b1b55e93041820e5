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
    """Raise :class:`NotATraceLog` unless ``path`` is absent, empty or a trace log (its first line a trace). The
    README calls a pasted stack trace `trace.txt`; `--trace trace.txt` appended a JSON line to it, unsaid, and
    answered without it (a newcomer pasting traces, session 44)."""
    try:
        with open(path, "rb") as f:
            head = f.read(1 << 16)
    except FileNotFoundError:
        return
    except IsADirectoryError:
        raise NotATraceLog(21, "a folder, not a trace log") from None
    if not head.strip():
        return
    first = head.split(b"\n", 1)[0]
    try:
        ok = isinstance(json.loads(first), dict) and "traceId" in json.loads(first)
    except ValueError:
        ok = False
    if not ok:
        raise NotATraceLog(22, "it holds other text than Delphi's traces (JSON lines); traces are appended only "
                               "to a new file or a trace log")


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
