"""The training windows ``bench.train mine`` writes, read back (no engine imports: the
cross-encoder's PyTorch environment reads them too)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

TRAIN_LIST = Path(__file__).resolve().parents[2] / "shared" / "bench" / "train_repos.txt"


def train_repos(path: Path = TRAIN_LIST) -> list[str]:
    return [ln.strip() for ln in path.read_text().splitlines() if ln.strip() and not ln.startswith("#")]


def load_windows(data: Path, features: tuple[str, ...] | None = None) -> list[dict[str, Any]]:
    """Every recorded question with a gold file inside its window; refuses data from other repositories.

    With ``features``, each candidate's vector is projected onto those names (the data folder's
    ``features.json`` names the columns it was mined with), so dropping a feature does not mean mining again."""
    allowed = set(train_repos())
    cols = None
    if features is not None:
        mined = json.loads((data / "features.json").read_text())
        missing = [f for f in features if f not in mined]
        if missing:
            raise SystemExit(f"{data} was mined without features {', '.join(missing)}: mine again")
        cols = [mined.index(f) for f in features]
    rows = []
    for f in sorted(data.glob("*.jsonl")):
        for line in f.open():
            r = json.loads(line)
            if r["repo"] not in allowed:
                raise SystemExit(f"{f}: {r['repo']} is not a training repository")
            if cols is not None:
                for c in r["candidates"]:
                    c["features"] = [c["features"][i] for i in cols]
            if any(c["label"] for c in r["candidates"]):
                rows.append(r)
    return rows
