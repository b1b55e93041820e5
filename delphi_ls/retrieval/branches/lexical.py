"""BM25F over chunk content, symbols and path tokens."""

from __future__ import annotations

from ...core.tokens import code_words, inflections, split_identifier
from ..context import SearchContext
from ..query import QueryInfo
from .base import Hit, files_from_chunks


def identifier_weights(q: QueryInfo, terms: list[str], whole: float, parts: float) -> dict[str, float] | None:
    """BM25 weights of a question's whole identifiers (`assertj` of `AssertJ`) and of their parts that the
    question never writes as words of their own (`assert`): a named identifier is what a question points
    at, its parts match every file that asserts anything. None when both weights are 1 (plain BM25)."""
    if (whole == 1.0 and parts == 1.0) or not q.identifiers:
        return None
    words = {w.lower() for w in code_words(q.text)}
    out: dict[str, float] = {}
    for ident in q.identifiers:
        for word in code_words(ident):  # `r.Route()` -> `r`, `Route`; `parse_args()` -> `parse_args`
            low, split = word.lower().strip("_"), split_identifier(word)
            if len(split) < 2:
                continue
            if whole != 1.0 and low in terms:
                out[low] = whole
            if parts != 1.0:
                for p in split:
                    if p != low and p not in words and p in terms:
                        out.setdefault(p, parts)
    return out or None


class Bm25Branch:
    name = "bm25"

    def search(self, q: QueryInfo, ctx: SearchContext) -> list[Hit]:
        terms = ctx.lexical.rarest(q.terms, 24)
        weights = identifier_weights(q, terms, ctx.settings.bm25_identifier_weight, ctx.settings.bm25_identifier_parts)
        if weights and any(v == 0.0 for v in weights.values()):
            terms = [t for t in terms if weights.get(t, 1.0) > 0.0]
        if ctx.settings.bm25_inflections > 0:
            terms, weights = with_inflections(q, terms, weights, ctx)
        rows = ctx.lexical.search_terms(terms, limit=400, weights=weights)
        hits = files_from_chunks(rows, limit=ctx.depth)
        for h in hits:
            h.note = "words match"
        return hits


def with_inflections(q: QueryInfo, terms: list[str], weights: dict[str, float] | None,
                     ctx: SearchContext) -> tuple[list[str], dict[str, float] | None]:
    """``terms`` with the other forms of the question's plain words that the index holds, each weighed
    ``bm25_inflections`` (never above the word itself): a question's own identifiers and their parts are
    names, searched as written."""
    named = {p for ident in q.identifiers for w in code_words(ident) for p in (w.lower(), *split_identifier(w))}
    have = set(terms)
    cands: dict[str, str] = {}
    for t in terms:
        if t in named:
            continue
        for v in inflections(t):
            if v not in have:
                cands.setdefault(v, t)
    if not cands:
        return terms, weights
    _n, df = ctx.lexical.doc_freqs(list(cands))
    w = ctx.settings.bm25_inflections
    out = dict(weights or {})
    added = [v for v in cands if df.get(v, 0) > 0]
    for v in added:
        out[v] = w * out.get(cands[v], 1.0)
    return terms + added, out if out else None
