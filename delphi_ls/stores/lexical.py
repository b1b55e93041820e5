"""Lexical fields in Whoosh: content (BM25F), path, symbols, trigrams; one doc per chunk."""

from __future__ import annotations

import re
import threading
from pathlib import Path

from whoosh import index as windex
from whoosh import qparser, query, scoring
from whoosh.analysis import Token, Tokenizer
from whoosh.fields import ID, KEYWORD, TEXT, Schema

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


_WS = re.compile(r"\s+")


def normalise_literal(text: str) -> str:
    return _WS.sub(" ", text.lower())


def trigrams(text: str, cap: int = 4000) -> set[str]:
    norm = normalise_literal(text)
    grams = {norm[i: i + 3] for i in range(len(norm) - 2)}
    grams = {g for g in grams if any(ch.isalnum() for ch in g)}
    return set(list(grams)[:cap]) if len(grams) > cap else grams


def _gram_term(g: str) -> str:
    # Whoosh KEYWORD splits on spaces: encode the three characters as hex so any gram is one term.
    return g.encode("utf-8").hex()


def schema() -> Schema:
    code = CodeTokenizer()
    return Schema(
        id=ID(stored=True, unique=True),
        path=ID(stored=True),
        kind=ID(stored=True),
        content=TEXT(analyzer=code, phrase=False),
        symbols=TEXT(analyzer=code, phrase=False, field_boost=2.0),
        pathtext=TEXT(analyzer=code, phrase=False, field_boost=1.5),
        trigrams=KEYWORD(scorable=False),
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
            pathtext=path.replace("/", " / "), trigrams=" ".join(_gram_term(g) for g in trigrams(text)),
        )

    def delete_paths(self, writer, paths: list[str]) -> None:
        for p in paths:
            writer.delete_by_term("path", p)

    def refresh(self) -> None:
        with self._lock:
            if self._searcher is not None:
                self._searcher = self._searcher.refresh()

    def searcher(self):
        with self._lock:
            if self._searcher is None:
                self._searcher = self.ix.searcher(weighting=scoring.BM25F(B=0.75, K1=1.2))
            else:
                self._searcher = self._searcher.refresh()
            return self._searcher

    def doc_count(self) -> int:
        return self.searcher().doc_count()

    def search_terms(self, terms: list[str], limit: int, fields: tuple[str, ...] = ("content", "symbols", "pathtext"),
                     kinds: set[str] | None = None) -> list[tuple[str, str, float]]:
        """BM25F over the given fields for any of ``terms``: (chunk id, path, score)."""
        if not terms:
            return []
        clauses = [query.Term(f, t) for t in terms for f in fields]
        q = query.Or(clauses)
        flt = query.Or([query.Term("kind", k) for k in kinds]) if kinds else None
        s = self.searcher()
        hits = s.search(q, limit=limit, filter=flt)
        return [(h["id"], h["path"], float(h.score)) for h in hits]

    def search_grams(self, literal: str, limit: int) -> list[tuple[str, str]]:
        """Chunks containing every trigram of ``literal`` (candidates; the caller verifies)."""
        grams = trigrams(literal)
        if not grams:
            return []
        q = query.And([query.Term("trigrams", _gram_term(g)) for g in grams])
        s = self.searcher()
        hits = s.search(q, limit=limit, scored=False, sortedby=None)
        return [(h["id"], h["path"]) for h in hits]

    def parse(self, text: str):  # pragma: no cover - debugging aid
        return qparser.QueryParser("content", self.ix.schema).parse(text)

    def close(self) -> None:
        with self._lock:
            if self._searcher is not None:
                self._searcher.close()
                self._searcher = None
            self.ix.close()
