"""The training windows ``bench.train mine`` writes, read back (no engine imports: the
cross-encoder's PyTorch environment reads them too)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

TRAIN_LIST = Path(__file__).resolve().parents[2] / "shared" / "bench" / "train_repos.txt"


def train_repos(path: Path = TRAIN_LIST) -> list[str]:
    return [ln.strip() for ln in path.read_text().splitlines() if ln.strip() and not ln.startswith("#")]


def load_windows(data: Path) -> list[dict[str, Any]]:
    """Every recorded question with a gold file inside its window; refuses data from other repositories."""
    allowed = set(train_repos())
    rows = []
    for f in sorted(data.glob("*.jsonl")):
        for line in f.open():
            r = json.loads(line)
            if r["repo"] not in allowed:
                raise SystemExit(f"{f}: {r['repo']} is not a training repository")
            if any(c["label"] for c in r["candidates"]):
                rows.append(r)
    return rows
