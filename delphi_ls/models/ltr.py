"""The learned ranker: a bag of one-hidden-layer networks over the engine's own per-file features.

Weights live in one JSON file (``ltr.json``) written by ``python -m bench.train``;
scoring is two small matrix products in numpy (microseconds for a 50-file window).
The file records the feature names it was trained on, and the ranker reads its columns by those
names: a column the engine computes that it was not trained on (a new branch's ranks) is ignored,
and only a trained column the engine no longer computes refuses, instead of scoring garbage.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from .embedders import ModelIdentity, file_sha256

SHIPPED_LTR = Path(__file__).parent / "data" / "ltr"
# The ranker for workspaces with git history: the same features, trained with the change-count columns
# live (`log_changes`, `changes_rel`). It answers only where co-change is ready; elsewhere those columns
# are zero and the plain ranker keeps its behaviour (bench/RESULTS.md, session 15).
SHIPPED_LTR_HISTORY = Path(__file__).parent / "data" / "ltr-history"


class LearnedRanker:
    def __init__(self, folder: Path = SHIPPED_LTR, check_probe: bool = True) -> None:
        path = folder / "ltr.json"
        if not path.is_file():
            raise FileNotFoundError(f"{path} not found")
        data = json.loads(path.read_text())
        self.path = path
        self.features: tuple[str, ...] = tuple(data["features"])  # the columns it was trained on, in order
        self.mean = np.asarray(data["mean"], dtype=np.float32)
        self.std = np.asarray(data["std"], dtype=np.float32)
        # A bag of small networks trained with different seeds; the score is their mean.
        self.members = [(np.asarray(m["w1"], dtype=np.float32), np.asarray(m["b1"], dtype=np.float32),
                         np.asarray(m["w2"], dtype=np.float32), float(m["b2"])) for m in data["members"]]
        self.window = int(data.get("window", 50))
        # Question shapes it saw in training; it leaves the others in fused order rather than guess.
        self.shapes = frozenset(data.get("shapes", ()))
        self.identity = ModelIdentity(data.get("name", folder.name), 0, file_sha256(path))
        probe = data.get("probe")
        if probe is not None and check_probe:
            got = self.score(np.asarray([probe["x"]], dtype=np.float32))[0]
            if abs(got - probe["score"]) > 1e-3:
                raise ValueError(f"{path}: probe score {got:.5f} != recorded {probe['score']:.5f} (corrupted weights)")

    def columns(self, names: Sequence[str]) -> list[int]:
        """Where each trained column sits among ``names`` (the engine's features); a trained column
        missing from them is an error naming it, since scoring without it would be garbage."""
        at = {n: i for i, n in enumerate(names)}
        missing = [f for f in self.features if f not in at]
        if missing:
            raise ValueError(f"{self.path} was trained on features the engine does not compute: "
                             f"{', '.join(missing[:6])}{' ...' if len(missing) > 6 else ''}")
        return [at[f] for f in self.features]

    def unused_columns(self, names: Sequence[str]) -> list[str]:
        """The engine's columns it was not trained on: ignored when scoring (health says which)."""
        trained = set(self.features)
        return [n for n in names if n not in trained]

    def score(self, x: np.ndarray, names: Sequence[str] | None = None) -> np.ndarray:
        """Scores of the rows of ``x``; with ``names``, x's columns are picked by name, else they are
        the trained columns in their trained order."""
        if names is not None:
            x = x[:, self.columns(names)]
        z = (x - self.mean) / self.std
        return np.mean([np.maximum(z @ w1 + b1, 0.0) @ w2 + b2 for w1, b1, w2, b2 in self.members], axis=0)
