"""The learned ranker: a bag of one-hidden-layer networks over the engine's own per-file features.

Weights live in one JSON file (``ltr.json``) written by ``python -m bench.train``;
scoring is two small matrix products in numpy (microseconds for a 50-file window).
The file records the feature names it was trained on: a model trained on other
features refuses to load instead of scoring garbage.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from ..retrieval.features import FEATURE_NAMES
from .embedders import ModelIdentity, file_sha256

SHIPPED_LTR = Path(__file__).parent / "data" / "ltr"


class LearnedRanker:
    def __init__(self, folder: Path = SHIPPED_LTR, check_probe: bool = True) -> None:
        path = folder / "ltr.json"
        if not path.is_file():
            raise FileNotFoundError(f"{path} not found")
        data = json.loads(path.read_text())
        if tuple(data["features"]) != FEATURE_NAMES:
            missing = sorted(set(FEATURE_NAMES) ^ set(data["features"]))
            raise ValueError(f"{path} was trained on other features (differs in: {', '.join(missing[:6]) or 'order'})")
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

    def score(self, x: np.ndarray) -> np.ndarray:
        z = (x - self.mean) / self.std
        return np.mean([np.maximum(z @ w1 + b1, 0.0) @ w2 + b2 for w1, b1, w2, b2 in self.members], axis=0)
