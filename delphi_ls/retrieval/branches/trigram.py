"""Literal strings from the question (error messages, quoted text) found verbatim."""

from __future__ import annotations

from ..context import SearchContext
from ..query import QueryInfo
from .base import Hit


class TrigramBranch:
    name = "trigram"

    def search(self, q: QueryInfo, ctx: SearchContext) -> list[Hit]:
        scores: dict[str, float] = {}
        evidence: dict[str, list[str]] = {}
        notes: dict[str, str] = {}
        for lit in q.literals[:8]:
            needle = " ".join(lit.split())
            if len(needle) < 4:
                continue
            found: dict[str, list[str]] = {}
            for cid, path in ctx.meta.find_literal(needle, limit=500):
                found.setdefault(path, []).append(cid)
            if not found:
                continue
            weight = 1.0 / (1 + 0.2 * (len(found) - 1))  # a string found in one file says the most
            for p, cids in found.items():
                scores[p] = scores.get(p, 0.0) + weight
                evidence.setdefault(p, []).extend(cids[:2])
                notes.setdefault(p, f"contains \"{needle[:60]}\"")
        ranked = sorted(scores.items(), key=lambda kv: (-kv[1], kv[0]))[: ctx.depth]
        return [Hit(p, s, evidence[p][:3], notes[p]) for p, s in ranked]
