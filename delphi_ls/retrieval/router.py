"""Branch weights for one question, and the constants of fusion and stage-2 seeding.

Each branch's weight per question shape sits beside the branch in the registry
(``branches/registry.py``); settings' ``branch_weights`` override it for every shape.
Checked on both dev sets (dev_mined and ARB v0_1); see bench/RESULTS.md.
"""

from __future__ import annotations

from collections.abc import Iterable

from ..settings import Settings
from .branches.registry import BranchSpec, registered
from .query import QueryInfo

# Extra weight a branch's ranking restricted to the asked-for kinds adds (kind-aware fusion).
PREFER_WEIGHT = 1.0
# Seeds of the stage-2 (structure) branches: anchors, then the first fusion's top files.
SEED_TOP = 5
SEED_ANCHOR_WEIGHT = 1.0
SEED_TOP_WEIGHT = 0.5
# Multiplier on the fused score of a file of a kind the question does not want.
AVOID_FACTOR = 0.3


def weights_for(q: QueryInfo, settings: Settings, specs: Iterable[BranchSpec] | None = None) -> dict[str, float]:
    """Each branch's weight for the question's shape, in order: ``specs`` (a retriever's branches),
    by default every registered branch."""
    return {spec.name: settings.branch_weights.get(spec.name, spec.weights[q.shape])
            for spec in (registered() if specs is None else specs)}
