"""Weighted reciprocal rank fusion at file level, kind-aware.

Ranks, not scores: a cosine and a BM25 score are different units (docs/DESIGN.md, lesson 2).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from .branches.base import Hit
from .router import AVOID_FACTOR, PREFER_WEIGHT


@dataclass
class Fused:
    path: str
    score: float
    branches: dict[str, int] = field(default_factory=dict)  # branch -> 1-based rank
    evidence: list[str] = field(default_factory=list)  # chunk ids
    notes: list[tuple[str, str]] = field(default_factory=list)  # (branch, note)


def rrf(lists: dict[str, list[Hit]], weights: dict[str, float], kinds: dict[str, str], k: int,
        prefer: set[str], avoid: set[str], preferred: frozenset[str] = frozenset(),
        demoted: Callable[[str], bool] | None = None) -> list[Fused]:
    """``preferred``: files that take the asked-for kinds' bonus whatever their kind (a trace's frames' files);
    ``demoted``: files scored as an avoided kind's whatever their kind (vendored code the question does not name)."""
    out: dict[str, Fused] = {}
    for branch, hits in lists.items():
        w = weights.get(branch, 0.0)
        if w <= 0 or not hits:
            continue
        pref_pos = pref_rank = rank = 0
        pref_score: float | None = None
        for pos, h in enumerate(hits, start=1):
            rank = rank if h.tied else pos  # ties share the best rank of their group
            f = out.get(h.path)
            if f is None:
                f = out[h.path] = Fused(h.path, 0.0)
            f.score += w / (k + rank)
            if prefer and (kinds.get(h.path) in prefer or h.path in preferred):
                pref_pos += 1
                pref_rank = pref_rank if h.tied and h.score == pref_score else pref_pos
                pref_score = h.score
                f.score += PREFER_WEIGHT * w / (k + pref_rank)
            f.branches[branch] = rank
            for c in h.chunk_ids:
                if c not in f.evidence:
                    f.evidence.append(c)
            if h.note:
                f.notes.append((branch, h.note))
    for f in out.values():
        if f.path in preferred:
            continue
        if (avoid and kinds.get(f.path) in avoid) or (demoted is not None and demoted(f.path)):
            f.score *= AVOID_FACTOR
    return sorted(out.values(), key=lambda f: (-f.score, f.path))
