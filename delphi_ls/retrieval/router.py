"""Branch weights by query shape: the one place they live.

Checked on both dev sets (dev_mined and ARB v0_1); see bench/RESULTS.md.
"""

from __future__ import annotations

from ..settings import Settings
from .query import QueryInfo

ROUTES: dict[str, dict[str, float]] = {
    "english": {"bm25": 1.0, "vector": 0.8, "symbol": 0.6, "path": 0.6, "trigram": 0.5, "anchor": 2.0,
                "anchor_tests": 0.2, "anchor_refs": 0.0, "graph": 0.3, "cochange": 0.3},
    "identifier": {"bm25": 1.0, "vector": 0.5, "symbol": 1.2, "path": 0.8, "trigram": 0.6, "anchor": 2.0,
                   "anchor_tests": 0.2, "anchor_refs": 0.0, "graph": 0.3, "cochange": 0.3},
    "trace": {"bm25": 0.7, "vector": 0.4, "symbol": 1.0, "path": 1.5, "trigram": 1.0, "anchor": 2.0,
              "anchor_tests": 0.0, "anchor_refs": 0.0, "graph": 0.3, "cochange": 0.2},
    "test": {"bm25": 1.0, "vector": 0.6, "symbol": 0.5, "path": 0.6, "trigram": 0.4, "anchor": 0.1,
             "anchor_tests": 2.0, "anchor_refs": 1.0, "graph": 0.5, "cochange": 0.5},
}
# Extra weight a branch's ranking restricted to the asked-for kinds adds (kind-aware fusion).
PREFER_WEIGHT = 1.0
# Seeds of the stage-2 (structure) branches: anchors, then the first fusion's top files.
SEED_TOP = 5
SEED_ANCHOR_WEIGHT = 1.0
SEED_TOP_WEIGHT = 0.5
# Multiplier on the fused score of a file of a kind the question does not want.
AVOID_FACTOR = 0.3


def weights_for(q: QueryInfo, settings: Settings) -> dict[str, float]:
    base = dict(ROUTES[q.shape])
    for b in base:
        if b in settings.branch_weights:
            base[b] = settings.branch_weights[b]
    return base
