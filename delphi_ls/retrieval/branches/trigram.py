"""Literal strings from the question (error messages, quoted text) found verbatim."""

from __future__ import annotations

from ...stores.lexical import normalise_literal
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
            needle = normalise_literal(lit.strip())
            if len(needle) < 4:
                continue
            cands = ctx.lexical.search_grams(needle, limit=500)
            if not cands:
                continue
            rows = ctx.meta.chunks_by_ids([c for c, _ in cands])
            found = {}
            for cid, row in rows.items():
                if needle in normalise_literal(row.text):
                    found.setdefault(row.path, []).append(cid)
            if not found:
                continue
            weight = 1.0 / (1 + 0.2 * (len(found) - 1))  # a string found in one file says the most
            for p, cids in found.items():
                scores[p] = scores.get(p, 0.0) + weight
                evidence.setdefault(p, []).extend(cids[:2])
                notes.setdefault(p, f"contains \"{lit.strip()[:60]}\"")
        ranked = sorted(scores.items(), key=lambda kv: (-kv[1], kv[0]))[: ctx.depth]
        return [Hit(p, s, evidence[p][:3], notes[p]) for p, s in ranked]
