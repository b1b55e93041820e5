"""BM25F over chunk content, symbols and path tokens."""

from __future__ import annotations

from ..context import SearchContext
from ..query import QueryInfo
from .base import Hit, files_from_chunks


class Bm25Branch:
    name = "bm25"

    def search(self, q: QueryInfo, ctx: SearchContext) -> list[Hit]:
        terms = ctx.lexical.rarest(q.terms, 24)
        rows = ctx.lexical.search_terms(terms, limit=400)
        hits = files_from_chunks(rows, limit=ctx.depth)
        for h in hits:
            h.note = "words match"
        return hits
