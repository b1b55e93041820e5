"""Lexical fields in Whoosh: content (BM25F), symbols and path tokens; one doc per chunk.

Trigrams live in SQLite FTS5 beside the manifest (stores/meta.py): as a Whoosh field
they tripled indexing time (pure-Python postings), measured on psf/black.
"""

from __future__ import annotations

import shutil
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from whoosh import index as windex
from whoosh import query, scoring
from whoosh.analysis import Token, Tokenizer
from whoosh.fields import ID, TEXT, Schema
from whoosh.filedb.filestore import RamStorage
from whoosh.writing import SegmentWriter

from ..core.tokens import code_tokens


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


class _FieldLengths:
    """A new segment's field lengths, read once per field into a list.

    Writing a segment's postings asks for the length of the document of every posting (for each
    block's shortest and longest document, which bound the scores the searcher may skip). Whoosh
    answers each ask from the column file (one struct read and several calls): 6.4 million asks, a
    third of the postings writer's time on spring-boot (bench/RESULTS.md, issue 18). The values and
    hence the files written are the same; only the reads are batched."""

    def __init__(self, reader) -> None:  # type: ignore[no-untyped-def]
        self._reader = reader
        self._n = reader.doc_count_all()
        self._by_field: dict[str, list[int]] = {}

    def doc_field_length(self, docnum: int, fieldname: str, default: int = 0) -> int:
        lengths = self._by_field.get(fieldname)
        if lengths is None:
            read = self._reader.doc_field_length
            lengths = self._by_field[fieldname] = [read(d, fieldname, 0) for d in range(self._n)]
        return lengths[docnum] or default


class BulkSegmentWriter(SegmentWriter):
    """Whoosh's segment writer with the field lengths read once per field when a segment is flushed."""

    def _flush_segment(self) -> None:
        self.perdocwriter.close()
        pdr = self.per_document_reader() if self.codec.length_stats else None
        postings = self.pool.iter_postings()
        self.fieldwriter.add_postings(self.schema, _FieldLengths(pdr) if pdr else None, postings)
        self.fieldwriter.close()
        if pdr:
            pdr.close()

    def cancel(self) -> None:
        # After commit() (a Ctrl-C between the commit and the end of its try lands in the caller's
        # cancel): Whoosh raises "This writer is closed" over the interrupt. Nothing is left to cancel.
        if not self.is_closed:
            super().cancel()


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


# Segments of like size (the same power of MERGE_FANOUT documents) allowed to pile up before they
# merge. 16: a cold spring-boot (36,500 chunks in 1,000-file commits) ends with 16 segments and no
# merge; a steady run of one-file edits merges its small segments every 16 edits.
MERGE_FANOUT = 16


def _tier(n: int, fanout: int) -> int:
    t = 0
    while n >= fanout:
        n //= fanout
        t += 1
    return t


def _tiers_to_merge(sizes: list[int], fanout: int, max_docs: int | None = None) -> list[list[int]]:
    """Indexes of the segments to merge, one list per tier that holds ``fanout`` or more segments (and,
    with ``max_docs``, whose segments hold at most that many documents together)."""
    by_tier: dict[int, list[int]] = {}
    for i, n in enumerate(sizes):
        by_tier.setdefault(_tier(n, fanout), []).append(i)
    return [ix for _t, ix in sorted(by_tier.items())
            if len(ix) >= fanout and (max_docs is None or sum(sizes[i] for i in ix) <= max_docs)]


def _merge_tiers(writer: SegmentWriter, segments: list, fanout: int,  # type: ignore[type-arg]
                 max_docs: int | None = None) -> list:  # type: ignore[type-arg]
    """A Whoosh merge policy: the segments of each full tier go into the segment being written."""
    from whoosh.reading import SegmentReader

    merge = {i for tier in _tiers_to_merge([s.doc_count_all() for s in segments], fanout, max_docs) for i in tier}
    for i in sorted(merge):
        reader = SegmentReader(writer.storage, writer.schema, segments[i])
        writer.add_reader(reader)
        reader.close()
    return [s for i, s in enumerate(segments) if i not in merge]


class LexicalStore:
    """``error`` is set when the folder could not be opened (then an empty in-memory index answers,
    and health says why) and ``created`` when no index was there, so the engine can tell a first
    run from a lost index (the manifest says files are indexed)."""

    name = "whoosh"
    unavailable = False  # Whoosh is a dependency written in Python: never missing (tantivy's store can be)

    def __init__(self, folder: Path) -> None:
        folder.mkdir(parents=True, exist_ok=True)
        self.folder = folder
        self._lock = threading.RLock()
        self._searcher = None
        self.error: str | None = None
        self.created = False
        try:
            if windex.exists_in(str(folder)):
                self.ix = windex.open_dir(str(folder))
            else:
                leftovers = [p.name for p in folder.iterdir() if p.suffix == ".seg"]
                if leftovers:
                    # Segments without a table of contents: the TOC was lost. Creating an index here
                    # would hide that; answer from an empty one and say so until a rebuild.
                    raise OSError(f"no table of contents (*.toc) beside {len(leftovers)} segment file(s)")
                self.ix = windex.create_in(str(folder), schema())
                self.created = True
        except Exception as e:  # any failure to open is reported, never a traceback for every command
            self.error = f"{type(e).__name__}: {e}"
            self.ix = RamStorage().create_index(schema())

    def describe(self) -> str:
        from importlib.metadata import version

        return f"Whoosh {version('whoosh-reloaded')}, {self.folder}"

    def check(self, deep: bool = False) -> str | None:
        """Cheap proof that the committed index reads: open a searcher (it opens every segment, which
        finds truncated ones) and read one stored document. The problem in words, or None. (``deep``: the
        tantivy store's term walk; Whoosh's segments are checked as they open.)"""
        if self.error:
            return self.error
        try:
            with self._lock:
                self._searcher = None
                s = self.searcher()
                if s.doc_count():
                    next(iter(s.reader().all_stored_fields()), None)
        except Exception as e:
            return f"{type(e).__name__}: {e}"
        return None

    def wipe(self) -> None:
        """Delete the folder's index and start an empty one (the caller refills it from the manifest)."""
        with self._lock:
            try:
                self.close()
            except Exception:
                pass  # a broken index may fail to close; it is being deleted anyway
            shutil.rmtree(self.folder, ignore_errors=True)
            self.folder.mkdir(parents=True, exist_ok=True)
            self.ix = windex.create_in(str(self.folder), schema())
            self.error = None
            self.created = True

    def writer(self) -> BulkSegmentWriter:
        return BulkSegmentWriter(self.ix, limitmb=256)

    @contextmanager
    def run_writer(self) -> Iterator[None]:
        """The tantivy store's block for a run's batches; a Whoosh writer cannot be used after its commit,
        so each batch makes its own here."""
        yield

    def segment_sizes(self) -> list[int]:
        """Documents (deleted ones included) in each committed segment."""
        with self._lock:
            return [seg.doc_count_all() for seg in self.ix._segments()]

    def merge_tiers(self, fanout: int = MERGE_FANOUT, max_docs: int | None = None) -> int:
        """Merge segments of like size once ``fanout`` of them have piled up (segments grouped by the
        power of ``fanout`` of their size; every tier holding ``fanout`` or more goes into one new
        segment). A run commits its batches without merging (each merge re-reads and re-writes every
        posting it touches: a fifth of spring-boot's cold lexical pass when Whoosh merged at every
        commit) and calls this once at its end. ``max_docs``: leave tiers holding more documents than
        that together (about 0.8 ms of CPU per document merged on spring-boot). Returns the number of
        segments merged."""
        merged = sum(len(t) for t in _tiers_to_merge(self.segment_sizes(), fanout, max_docs))
        if not merged:
            return 0
        writer = self.writer()
        try:
            writer.commit(mergetype=lambda w, segments: _merge_tiers(w, segments, fanout, max_docs))
        except BaseException:
            writer.cancel()
            raise
        return merged

    @staticmethod
    def add_chunk(writer, chunk_id: str, path: str, kind: str, text: str, symbols: list[str]) -> None:
        writer.add_document(
            id=chunk_id, path=path, kind=kind, content=text, symbols=" ".join(symbols),
            pathtext=path.replace("/", " / "),
        )

    def delete_paths(self, writer, paths: list[str]) -> None:
        """Delete every document of ``paths``. The documents are found with the searcher queries use
        when it reads the commit the writer started from (same segments, same deletions, so the same
        document numbers): Whoosh's own ``delete_by_term`` opens every segment again for each writer,
        a cost that grows with the segments (a third of a one-file update on spring-boot, issue 18)."""
        with self._lock:
            s = self.searcher()
            same = s.reader().generation() == writer.generation - 1
            for p in paths:
                writer.delete_by_term("path", p, searcher=s if same else None)

    @staticmethod
    def delete_all(writer: BulkSegmentWriter) -> None:
        """Delete every document, in the folder, at the writer's commit (readers keep their segments)."""
        writer.delete_by_query(query.Every())

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

    def doc_freqs(self, terms: list[str], field: str = "content") -> tuple[int, dict[str, int]]:
        """(documents, each term's document frequency in ``field``)."""
        with self._lock:
            r = self.searcher().reader()
            return r.doc_count_all(), {t: r.doc_frequency(field, t) for t in terms}

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
                     kinds: set[str] | None = None, weights: dict[str, float] | None = None) -> list[tuple[str, str, float]]:
        """BM25F over the given fields for any of ``terms``, each term's score times ``weights[term]``
        (default 1; the terms pseudo-relevance feedback adds weigh less): (chunk id, path, score)."""
        if not terms:
            return []
        w = weights or {}
        clauses = [query.Term(f, t, boost=w.get(t, 1.0)) for t in terms for f in fields]
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


# The lexical stores (settings.LEXICAL_STORES), each in its own folder of the index: a switch finds the
# other store's folder, not a store it cannot read.
FOLDERS = {"whoosh": "whoosh", "tantivy": "tantivy"}


def open_lexical(index_dir: Path, store: str, scoring: str = "whoosh") -> LexicalStore:
    """The lexical store ``store`` ("whoosh" or "tantivy") in its folder under ``index_dir``. ``scoring``
    (setting ``bm25_scoring``): how tantivy weighs a term, "whoosh" (Whoosh's BM25F, so both stores rank
    alike) or "tantivy" (its own); Whoosh's store always scores as Whoosh."""
    if store == "tantivy":
        from .tantivy_store import TantivyStore

        ts = TantivyStore(index_dir / FOLDERS["tantivy"])
        ts.scoring = scoring
        return ts  # type: ignore[return-value]
    if store != "whoosh":
        raise ValueError(f"unknown lexical store {store!r}")
    return LexicalStore(index_dir / FOLDERS["whoosh"])
