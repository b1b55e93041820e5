"""Per-query traces: one JSON line per query, for later analysis of what each branch did."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

from .retrieval.branches.base import Hit


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
    with path.open("a", encoding="utf-8") as f:
        f.write(json.dumps(record) + "\n")
