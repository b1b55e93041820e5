"""Branches fed by the repository's structure, seeded by anchors and the other branches' top files."""

from __future__ import annotations

from ..context import SearchContext
from ..query import QueryInfo
from .base import Hit, ranked_hits


def of_wanted_kinds(scores: dict[str, float], q: QueryInfo, ctx: SearchContext) -> dict[str, float]:
    """Only files of the kinds the question asks for, when it asks: a neighbour or a co-changed file
    of another kind (the anchor's imports, the changelog) is not an answer to "which tests cover this?"."""
    if not q.prefer:
        return scores
    return {p: s for p, s in scores.items() if ctx.files.get(p) in q.prefer}


class GraphBranch:
    """One step on the file graph from the seeds (measured: a second step spread noise)."""

    name = "graph"  # stage 2 in the registry: it runs after the first fusion, which supplies seeds

    def search(self, q: QueryInfo, ctx: SearchContext) -> list[Hit]:
        g = ctx.view.graph
        if g is None or not ctx.seeds:
            return []
        scores: dict[str, float] = {}
        why: dict[str, str] = {}
        seeds = dict(ctx.seeds)
        for seed, w in seeds.items():
            for n, s in g.neighbours(seed).items():
                add = w * s
                if add > scores.get(n, 0.0) * 0.5:
                    why.setdefault(n, f"linked to {seed}")
                scores[n] = scores.get(n, 0.0) + add
        for a in ctx.anchors:  # files in hand are the anchor branch's business
            scores.pop(a, None)
        return ranked_hits(of_wanted_kinds(scores, q, ctx), why, ctx.depth)


class CochangeBranch:
    """Files that changed together with the anchors in recent git history."""

    name = "cochange"

    def search(self, q: QueryInfo, ctx: SearchContext) -> list[Hit]:
        scores: dict[str, float] = {}
        why: dict[str, str] = {}
        for a in ctx.anchors:
            for b, w in ctx.meta.cochanged_with(a, limit=100):
                scores[b] = scores.get(b, 0.0) + w
                why.setdefault(b, f"changed together with {a}")
        for a in ctx.anchors:
            scores.pop(a, None)
        return ranked_hits(of_wanted_kinds(scores, q, ctx), why, ctx.depth)
