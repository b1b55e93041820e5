"""Pseudo-relevance feedback (issue 19): the first fusion's top files fed back once, as words and as a vector.

A change description speaks of behaviour; the file it edits may never use those words. The files the first
fusion ranks highest (and the anchors) are probably about the right thing, and their own vocabulary is the
repository's: the words they share are searched again beside the question's (:class:`PrfBm25Branch`), and
the question's vector is moved toward theirs (:class:`PrfVectorBranch`, Rocchio). The retriever runs them
after the first fusion (they read its top files from ``ctx.seeds``) when the setting ``prf`` asks, and each
list replaces the bm25 or vector branch's own in the final fusion ("off" by default: bench/RESULTS.md,
session 8).

General, not fitted to any sample: the expansion is a relevance model (each feedback file's term
frequencies, normalised by its length and weighed by its place, summed) times Whoosh's idf.
"""

from __future__ import annotations

import functools
import math
from collections import Counter

import numpy as np

from ...core.tokens import STOPWORDS, code_tokens, words_of
from ..context import SearchContext
from ..query import QueryInfo
from .base import Hit, files_from_chunks

FEEDBACK_FILES = 3  # the first fusion's top files read (anchors first: the seeds' order)
CHUNKS_PER_FILE = 40  # a big module's first chunks are enough to know its vocabulary
CANDIDATES = 200  # terms looked up in the index (by feedback weight) before idf ranks them
EXPANSION_TERMS = 10
EXPANSION_WEIGHT = 0.5  # the best added term's weight against a question term's 1
ROCCHIO_BETA = 0.5  # the feedback centroid's share against the question vector's 1


@functools.lru_cache(maxsize=1 << 16)
def _word_terms(word: str) -> tuple[str, ...]:
    """The index's tokens of one word that may be fed back (3 letters or more, not a number nor a stop
    word). Cached: a repository's files share their words, and splitting them was most of the time."""
    return tuple(t for t, _pos in code_tokens(word) if len(t) >= 3 and not t.isdigit() and t not in STOPWORDS)


def feedback_files(ctx: SearchContext, n: int = FEEDBACK_FILES) -> list[str]:
    """The files fed back: the seeds (anchors, then the first fusion's top files), in their order."""
    return [p for p in ctx.seeds if p in ctx.files][:n]


def expansion_terms(q: QueryInfo, ctx: SearchContext, files: list[str], n: int = EXPANSION_TERMS) -> dict[str, float]:
    """Up to ``n`` words of ``files`` not in the question, each with its weight (the best is 1): the sum over
    the files of the word's share of the file (weighed 1, 1/2, 1/3 by place) times its idf. Words found in
    one document only are dropped: they find the feedback file again, nothing new."""
    asked = {t.lower() for t in q.terms} | {i.lower() for i in q.identifiers}
    rel: Counter[str] = Counter()
    for place, path in enumerate(files):
        # The index's tokens (code_tokens), counted per distinct word first: a file repeats its words,
        # and splitting each occurrence again was most of this branch's time.
        words: Counter[str] = Counter()
        for row in ctx.meta.chunks_of(path)[:CHUNKS_PER_FILE]:
            words.update(words_of(row.text))
            words.update(row.symbols)
        tf: Counter[str] = Counter()
        for word, c in words.items():
            for tok in _word_terms(word):
                if tok not in asked:
                    tf[tok] += c
        total = sum(tf.values())
        if not total:
            continue
        for t, c in tf.items():
            rel[t] += c / total / (place + 1)
    if not rel:
        return {}
    cands = [t for t, _w in rel.most_common(CANDIDATES)]
    docs, df = ctx.lexical.doc_freqs(cands)
    if not docs:
        return {}
    scored = {t: rel[t] * (math.log(docs / (df[t] + 1)) + 1) for t in cands if df.get(t, 0) >= 2}
    best = sorted(scored.items(), key=lambda kv: (-kv[1], kv[0]))[:n]
    top = best[0][1] if best else 1.0
    return {t: w / top for t, w in best}


class PrfBm25Branch:
    """BM25 for the question's rarest terms and the feedback files' words (weighed down)."""

    name = "prf_bm25"

    def search(self, q: QueryInfo, ctx: SearchContext) -> list[Hit]:
        files = feedback_files(ctx)
        extra = expansion_terms(q, ctx, files)
        if not extra:
            return []
        terms = ctx.lexical.rarest(q.terms, 24)
        weights = {t: EXPANSION_WEIGHT * w for t, w in extra.items()}
        rows = ctx.lexical.search_terms(terms + [t for t in extra if t not in terms], limit=400, weights=weights)
        hits = files_from_chunks(rows, limit=ctx.depth)
        note = "words of the top files match: " + ", ".join(list(extra)[:3])
        for h in hits:
            h.note = note
        return hits


class PrfVectorBranch:
    """The question's vector moved toward the feedback files' best chunks (Rocchio), searched again."""

    name = "prf_vector"

    def search(self, q: QueryInfo, ctx: SearchContext) -> list[Hit]:
        if ctx.vectors is None or ctx.embedder is None:
            return []
        files = feedback_files(ctx)
        if not files:
            return []
        v = ctx.embedder.embed([q.text[:4000]])[0]
        v = v / (np.linalg.norm(v) or 1.0)
        # Each feedback file's chunk nearest the question stands for it (a long file's other chunks are
        # about other things). Their vectors come from the embedding cache (by content hash); a chunk not
        # cached there is embedded again.
        ident = getattr(ctx.embedder, "identity", None)
        best = []
        for path in files:
            rows = ctx.meta.chunks_of(path)[:CHUNKS_PER_FILE]
            if not rows:
                continue
            cached = ctx.meta.cached_vectors(ident.weights_sha256, [r.content_hash for r in rows]) if ident else {}
            miss = [r for r in rows if r.content_hash not in cached]
            if miss:
                for r, e in zip(miss, ctx.embedder.embed([r.text[:4000] for r in miss]), strict=True):
                    cached[r.content_hash] = e
            m = np.stack([cached[r.content_hash] for r in rows]).astype(np.float32)
            m = m / np.maximum(np.linalg.norm(m, axis=1, keepdims=True), 1e-9)
            best.append(m[int(np.argmax(m @ v))])
        if not best:
            return []
        c = np.mean(best, axis=0)
        v2 = v + ROCCHIO_BETA * c / (np.linalg.norm(c) or 1.0)
        v2 = v2 / (np.linalg.norm(v2) or 1.0)
        hits = files_from_chunks(ctx.vectors.query(v2, k=300), limit=ctx.depth)
        for h in hits:
            h.note = "similar meaning to the question and its top files"
        return hits
