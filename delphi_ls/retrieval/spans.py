"""Which lines of a ranked file to show: chunks scored from the question itself.

File ranking says *which* files; this module says *where in them*. Each chunk of a file (chunks are
definition-sized: a function, a class header, a few small neighbours) is scored by

- the question's words inside it: BM25 computed over the file's own chunks, so a word every chunk
  has (``blueprint`` in ``blueprints.py``) counts little and a rare one (``register``) counts much;
  identifiers and quoted literals of the question weigh more than plain words;
- the chunks the retrieval branches themselves hit for this file (BM25, vectors, symbols, trigram),
  by their place in each branch's evidence;
- for a question that comes with files (anchors), the anchor's own symbols used in the chunk: the
  test of a changed function names that function.

The spans a result lists are its best chunks in that order, each with the reason it was chosen.
The old order (the fused evidence, first three) stays callable as :func:`legacy_spans` so the
benchmark can run both in one process.
"""

from __future__ import annotations

import math
from collections import OrderedDict
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from ..stores.meta import ChunkRow, MetaStore
from .branches.base import Hit
from .query import QueryInfo

SCORED_FILES = 20  # results below this rank keep the cheap evidence order (nobody reads that far)
LISTED_SPANS = 3
# Weights of a question word by what it is: an identifier or literal names a place in code.
W_TERM, W_IDENT, W_LITERAL, W_ANCHOR_SYMBOL = 1.0, 2.0, 2.5, 0.6
# What a branch's evidence for a chunk is worth, beside the lexical score (its first chunk counts most).
BRANCH_EVIDENCE = {"bm25": 1.0, "vector": 1.2, "symbol": 2.0, "trigram": 1.5}
K1, B = 1.2, 0.75


@dataclass
class SpanQuery:
    """Everything span scoring needs from one question, built once per answer."""

    words: dict[str, float]  # lower-case word -> weight
    evidence: dict[str, dict[str, tuple[float, list[str]]]] = field(default_factory=dict)  # path -> id -> (w, branches)
    anchors: list[str] = field(default_factory=list)

    @classmethod
    def build(cls, q: QueryInfo, lists: dict[str, list[Hit]] | None = None, anchors: Iterable[str] = (),
              meta: MetaStore | None = None) -> SpanQuery:
        words: dict[str, float] = {}
        idents = {i.lower() for i in q.identifiers}
        for t in q.terms:
            if len(t) < 3 and t not in idents:
                continue
            words[t] = max(words.get(t, 0.0), W_IDENT if t in idents else W_TERM)
        for ident in q.identifiers:
            low = ident.lower()
            words[low] = max(words.get(low, 0.0), W_IDENT)
        for lit in q.literals:
            low = lit.lower().strip()
            if len(low) >= 3:
                words[low] = max(words.get(low, 0.0), W_LITERAL)
        anchor_list = list(anchors)
        if meta is not None:
            for a in anchor_list:
                # The anchor's own definitions: a test of the changed file calls them by name.
                for name, kind, *_ in meta.symbols_of(a):
                    low = name.lower()
                    if len(low) < 4 or kind in ("module",):
                        continue
                    words[low] = max(words.get(low, 0.0), W_IDENT if low in words else W_ANCHOR_SYMBOL)
        evidence: dict[str, dict[str, tuple[float, list[str]]]] = {}
        for branch, hits in (lists or {}).items():
            w = BRANCH_EVIDENCE.get(branch)
            if not w:
                continue
            for h in hits:
                per = evidence.setdefault(h.path, {})
                for i, cid in enumerate(h.chunk_ids):
                    old, names = per.get(cid, (0.0, []))
                    per[cid] = (old + w / (1 + i), names + [branch])
        return cls(words, evidence, anchor_list)


_LOWER: OrderedDict[str, str] = OrderedDict()  # chunk id -> lower-cased text (ids are content-addressed)
_LOWER_MAX = 20000


def _lower(c: ChunkRow) -> str:
    got = _LOWER.get(c.id)
    if got is None:
        got = _LOWER[c.id] = c.text.lower()
        if len(_LOWER) > _LOWER_MAX:
            _LOWER.popitem(last=False)
    return got


def _counts(chunks: list[ChunkRow], sq: SpanQuery) -> list[dict[str, int]]:
    """Occurrences of each question word in each chunk (substring counts: ``blueprint`` is found in
    ``register_blueprint``, as the index's word parts would). ``str.count`` is C-speed, and words absent
    from the whole file are dropped first, so this costs a few milliseconds for twenty files."""
    lows = [_lower(c) for c in chunks]
    whole = "\n".join(lows)
    present = [w for w in sq.words if w in whole]
    return [{w: n for w in present if (n := t.count(w))} for t in lows]


@dataclass
class ScoredChunk:
    chunk: ChunkRow
    score: float
    matched: list[str]  # question words found, heaviest first
    branches: list[str]


def score_chunks(path: str, chunks: list[ChunkRow], sq: SpanQuery) -> list[ScoredChunk]:
    """Every chunk of one file with its score, in file order."""
    if not chunks:
        return []
    counts = _counts(chunks, sq)
    n = len(chunks)
    df: dict[str, int] = {}
    for cs in counts:
        for w in cs:
            df[w] = df.get(w, 0) + 1
    lengths = [max(len(c.text), 1) for c in chunks]
    avg = sum(lengths) / n
    ev = sq.evidence.get(path, {})
    out = []
    for c, cs, ln in zip(chunks, counts, lengths, strict=True):
        s = 0.0
        contrib: list[tuple[float, str]] = []
        for w, tf in cs.items():
            weight = sq.words.get(w, W_TERM)
            idf = math.log(1 + (n - df[w] + 0.5) / (df[w] + 0.5)) + 0.1  # +0.1: a one-chunk file still counts
            v = weight * idf * tf * (K1 + 1) / (tf + K1 * (1 - B + B * ln / avg))
            s += v
            contrib.append((v, w))
        e, names = ev.get(c.id, (0.0, []))
        s += e
        contrib.sort(reverse=True)
        out.append(ScoredChunk(c, s, [w for _v, w in contrib], sorted(set(names))))
    return out


def why_of(sc: ScoredChunk) -> str:
    bits = []
    if sc.matched:
        bits.append("names " + ", ".join(f"`{w}`" for w in sc.matched[:3]))
    if sc.branches:
        bits.append("hit by " + ", ".join(sc.branches))
    return "; ".join(bits) or "start of the file"


def _preview(c: ChunkRow) -> str:
    return next((ln.strip() for ln in c.text.splitlines() if ln.strip()), "")[:160]


def _symbol(c: ChunkRow, asked: set[str], matched: list[str] | None = None) -> str | None:
    named = [s for s in c.symbols if s.lower() in asked]
    if named:
        return named[0]
    if matched:
        hit = [s for s in c.symbols if any(w in s.lower() for w in matched[:3])]
        if hit:
            return hit[0]
    return next((s for s in c.symbols if s != "<module>"), None)


def span_of(sc: ScoredChunk, asked: set[str]) -> dict[str, Any]:
    c = sc.chunk
    return {"startLine": c.start_line, "endLine": c.end_line, "symbol": _symbol(c, asked, sc.matched),
            "preview": _preview(c), "why": why_of(sc), "score": round(sc.score, 3)}


def ranked(scored: list[ScoredChunk]) -> list[ScoredChunk]:
    """Best first; ties keep file order (the header before the body)."""
    return [sc for _i, sc in sorted(enumerate(scored), key=lambda t: (-t[1].score, t[0]))]


def legacy_spans(meta: MetaStore, path: str, evidence: list[str], asked: set[str]) -> list[dict[str, Any]]:
    """The spans before issue 17: the fused evidence chunks in branch order, first three."""
    ids = evidence[:3]
    rows = meta.chunks_by_ids(ids) if ids else {}
    chunks = [rows[i] for i in ids if i in rows]
    if not chunks:
        chunks = meta.chunks_of(path)[:1]
    return [{"startLine": c.start_line, "endLine": c.end_line, "symbol": _symbol(c, asked),
             "preview": _preview(c)} for c in chunks]
