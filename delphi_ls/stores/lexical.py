"""Lexical fields in Whoosh: content (BM25F), symbols and path tokens; one doc per chunk.

Trigrams live in SQLite FTS5 beside the manifest (stores/meta.py): as a Whoosh field
they tripled indexing time (pure-Python postings), measured on psf/black.
"""

from __future__ import annotations

import threading
from pathlib import Path

from whoosh import index as windex
from whoosh import query, scoring
from whoosh.analysis import Token, Tokenizer
from whoosh.fields import ID, TEXT, Schema

from ..indexing.tokens import code_tokens


class CodeTokenizer(Tokenizer):
    """Whoosh tokenizer over :func:`code_tokens` (identifiers whole and split)."""

    def __call__(self, value, positions=False, chars=False, keeporiginal=False, removestops=True,  # noqa: D401
                 start_pos=0, start_char=0, tokenize=True, mode="", **kwargs):
        t = Token(positions, chars, removestops=removestops, mode=mode, **kwargs)
        for tok, pos in code_tokens(value):
            t.text = tok
            t.boost = 1.0
            t.stopped = False
            if keeporiginal:
                t.original = tok
            if positions:
                t.pos = start_pos + pos
            if chars:
                t.startchar = start_char
                t.endchar = start_char
            yield t


def schema() -> Schema:
    code = CodeTokenizer()
    return Schema(
        id=ID(stored=True, unique=True),
        path=ID(stored=True),
        kind=ID(stored=True),
        content=TEXT(analyzer=code, phrase=False),
        symbols=TEXT(analyzer=code, phrase=False, field_boost=2.0),
        pathtext=TEXT(analyzer=code, phrase=False, field_boost=1.5),
    )


class LexicalStore:
    def __init__(self, folder: Path) -> None:
        folder.mkdir(parents=True, exist_ok=True)
        self.folder = folder
        self._lock = threading.RLock()
        if windex.exists_in(str(folder)):
            self.ix = windex.open_dir(str(folder))
        else:
            self.ix = windex.create_in(str(folder), schema())
        self._searcher = None

    def writer(self):
        return self.ix.writer(limitmb=256)

    @staticmethod
    def add_chunk(writer, chunk_id: str, path: str, kind: str, text: str, symbols: list[str]) -> None:
        writer.add_document(
            id=chunk_id, path=path, kind=kind, content=text, symbols=" ".join(symbols),
            pathtext=path.replace("/", " / "),
        )

    def delete_paths(self, writer, paths: list[str]) -> None:
        for p in paths:
            writer.delete_by_term("path", p)

    def refresh(self) -> None:
        with self._lock:
            self._searcher = None

    def searcher(self):
        """A searcher over the latest commit.

        Not ``Searcher.refresh()``: it reuses segment readers whose deletion sets are stale,
        so a deleted file kept answering (seen in the server tests). A new searcher is cheap.
        """
        with self._lock:
            if self._searcher is None or not self._searcher.up_to_date():
                self._searcher = self.ix.searcher(weighting=scoring.BM25F(B=0.75, K1=1.2))
            return self._searcher

    def doc_count(self) -> int:
        with self._lock:
            return self.searcher().doc_count()

    def rarest(self, terms: list[str], n: int) -> list[str]:
        """The ``n`` terms with the fewest documents (absent terms dropped): what a long query is about."""
        if len(terms) <= n:
            return terms
        with self._lock:
            r = self.searcher().reader()
            df = {t: r.doc_frequency("content", t) + r.doc_frequency("symbols", t) for t in terms}
        present = [t for t in terms if df[t] > 0]
        return sorted(present, key=lambda t: df[t])[:n]

    def search_terms(self, terms: list[str], limit: int, fields: tuple[str, ...] = ("content", "symbols", "pathtext"),
                     kinds: set[str] | None = None) -> list[tuple[str, str, float]]:
        """BM25F over the given fields for any of ``terms``: (chunk id, path, score)."""
        if not terms:
            return []
        clauses = [query.Term(f, t) for t in terms for f in fields]
        q = query.Or(clauses)
        flt = query.Or([query.Term("kind", k) for k in kinds]) if kinds else None
        with self._lock:  # Whoosh searchers are not made for concurrent use
            hits = self.searcher().search(q, limit=limit, filter=flt)
            return [(h["id"], h["path"], float(h.score)) for h in hits]

    def close(self) -> None:
        with self._lock:
            if self._searcher is not None:
                self._searcher.close()
                self._searcher = None
            self.ix.close()
