"""The lexical store in tantivy (Rust, through tantivy-py): the same fields and answers as the Whoosh store.

Whoosh is pure Python: at 100,000 files its writes were 46% of a cold index (bench/RESULTS.md, issue 18).
tantivy indexes in its own threads (both cores) while Python parses the next files. It cannot split
identifiers itself, so each field is tokenized here by :func:`code_tokens` (the Whoosh store's tokenizer)
and handed over as whitespace-separated tokens, which tantivy's ``whitespace`` tokenizer reads back as
they were: the same terms in both stores. BM25 with Whoosh's parameters (K1 1.2, B 0.75) over the same
fields. By default (setting ``bm25_scoring = "whoosh"``) each term and field is scored as Whoosh's BM25F
scores it: Whoosh's idf in place of Lucene's, and each field boost (symbols 2, path 1.5) as the worth Whoosh
gives it (Whoosh multiplies the term frequency before BM25 saturates it; tantivy has no per-field term
weight, so the boost is exact for a term seen once in a field of average length), both put in as per-term
query boosts. The learned ranker was trained on Whoosh's BM25 ranks; on dev_mined this scoring gives
Whoosh's file rankings (Spearman 0.998) where tantivy's own gave 0.975 (bench/RESULTS.md, session 8).

Crash safety is tantivy's: a commit writes its segment files, then replaces ``meta.json`` atomically;
files of a run killed before that are never read and are deleted by the next writer's commit.
"""

from __future__ import annotations

import functools
import json
import logging
import math
import os
import shutil
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, TypeVar

from ..core.panics import panics_as
from ..core.tokens import token_string

# Field name -> score multiplier (the Whoosh schema's field_boost).
BOOSTS = {"content": 1.0, "symbols": 2.0, "pathtext": 1.5}
# The writer's memory, split between its threads: a segment is flushed when a thread's share fills. A
# 1,000-file batch of source is a few MB of text, so this bounds the worst case, not the usual one.
WRITER_HEAP = 128 * 1024 * 1024
FOLDER_FILES = ("meta.json",)
# BM25's parameters: tantivy's constants, which are Whoosh's (the store searches with BM25F(B=0.75, K1=1.2)).
K1 = 1.2
# How a term's score is made (bench/bm25_parity.py measures each against Whoosh on the same chunks):
# "tantivy": tantivy's own (Lucene's idf; a field's boost multiplies its score);
# "idf": Whoosh's idf, log(N / (df + 1)) + 1, put in by a per-term boost of whoosh_idf / tantivy_idf;
# "whoosh": that idf and each field boost b turned into the factor Whoosh's BM25F gives a term seen once in
# a field of average length, b (K1 + 1) / (b + K1) (Whoosh multiplies the term frequency by b before BM25
# saturates it, so a boost of 2 is worth 1.375 there, not 2).
SCORINGS = ("tantivy", "idf", "whoosh")


def writer_threads() -> int:
    """Indexing threads: one per core, at most 4 (tantivy's own threads, beside Python's main thread)."""
    return max(1, min(4, os.cpu_count() or 1))


def tokens(text: str) -> str:
    """``text`` as the code tokenizer's tokens, one space between each (what the whitespace tokenizer
    splits back into the same terms)."""
    return token_string(text)


def field_tokens(text: str, symbols: list[str], path: str) -> tuple[str, str, str]:
    """A chunk's content, symbols and path fields as :meth:`TantivyStore.add_chunk` tokenizes them: an
    index worker process computes them (indexing/workers.py) and the writer hands them to ``add_tokens``."""
    return tokens(text), tokens(" ".join(symbols)), tokens(path.replace("/", " / "))


def tantivy_idf(n: int, df: int) -> float:
    """tantivy's (Lucene's) idf, as its explanations print it."""
    return math.log(1 + (n - df + 0.5) / (df + 0.5))


def whoosh_idf(n: int, df: int) -> float:
    """Whoosh's idf (``whoosh.scoring.WeightingModel.idf``)."""
    return math.log(n / (df + 1)) + 1


def version() -> str | None:
    """tantivy-py's version, or None when it is not installed."""
    try:
        from importlib.metadata import version as dist_version

        return dist_version("tantivy")
    except Exception:
        return None


def _schema(tv: Any) -> Any:
    sb = tv.SchemaBuilder()
    sb.add_text_field("id", stored=True, tokenizer_name="raw", index_option="basic")
    sb.add_text_field("path", stored=True, tokenizer_name="raw", index_option="basic")
    sb.add_text_field("kind", tokenizer_name="raw", index_option="basic")
    # No positions: nothing searches phrases (the Whoosh fields are phrase=False too).
    for f in BOOSTS:
        sb.add_text_field(f, tokenizer_name="whitespace", index_option="freq")
    return sb.build()


SCHEMA_FIELDS = ("id", "path", "kind", *BOOSTS)
F = TypeVar("F", bound=Callable[..., Any])
log = logging.getLogger(__name__)


class TantivyPanic(RuntimeError):
    """A panic inside tantivy (a damaged file trips an assertion): pyo3 raises those as a BaseException,
    which the engine's failure handling (``except Exception``) would not see."""


def _panics_as_errors(fn: F) -> F:
    @functools.wraps(fn)
    def wrapped(*args: Any, **kwargs: Any) -> Any:
        with panics_as(TantivyPanic, "tantivy panicked"):
            return fn(*args, **kwargs)
    return wrapped  # type: ignore[return-value]


class TantivyWriter:
    """One batch of writes: adds and deletes in order, then ``commit`` or ``cancel`` (the Whoosh writer's
    calls the pipeline makes). tantivy allows one writer per index; it is released at the end of each
    batch, as the engine's writer lock may pass to another process between runs."""

    def __init__(self, store: TantivyStore) -> None:
        self._store = store
        self._tv = store._tv
        self._w = store.ix.writer(heap_size=WRITER_HEAP, num_threads=writer_threads())

    @_panics_as_errors
    def add_document(self, id: str, path: str, kind: str, content: str = "", symbols: str = "",  # noqa: A002
                     pathtext: str = "") -> None:
        """The Whoosh store's fields, raw: tokenized here as Whoosh's analyzer would."""
        self._w.add_document(self._tv.Document(
            id=id, path=path, kind=kind, content=tokens(content), symbols=tokens(symbols), pathtext=tokens(pathtext)))

    @_panics_as_errors
    def add_tokenized(self, id: str, path: str, kind: str, content: str, symbols: str, pathtext: str) -> None:  # noqa: A002
        """The fields already tokenized (:func:`field_tokens`)."""
        self._w.add_document(self._tv.Document(id=id, path=path, kind=kind, content=content, symbols=symbols,
                                               pathtext=pathtext))

    @_panics_as_errors
    def delete_path(self, path: str) -> None:
        self._w.delete_documents_by_term("path", path)

    @_panics_as_errors
    def delete_all(self) -> None:
        self._w.delete_all_documents()

    @property
    def _kept(self) -> bool:
        """This is a run's writer (:meth:`TantivyStore.run_writer`): commit and cancel keep it; the run's end
        releases it."""
        return self._store._run is self

    @_panics_as_errors
    def commit(self, merge: bool = True, **_kw: Any) -> None:
        """Commit, wait for the merges tantivy's merge policy started (its own threads), release the
        writer. ``merge`` is the Whoosh writer's keyword: tantivy decides its merges itself. The writer
        of a run commits and stays: its merges go on in their threads."""
        try:
            self._w.commit()
        finally:
            if not self._kept:
                self._release()
        self._store.refresh()

    @_panics_as_errors
    def cancel(self) -> None:
        """Back to the last commit; a batch's writer is released, a run's stays for its next batch."""
        if self._w is None:  # commit() released it already (a Ctrl-C inside commit lands here: session 25)
            return
        try:
            self._w.rollback()
        finally:
            if not self._kept:
                self._release()

    def _release(self) -> None:
        w, self._w = self._w, None
        if w is not None:
            w.wait_merging_threads()  # consumes the writer: its lock on the folder goes with it


class TantivyStore:
    """:class:`~delphi_ls.stores.lexical.LexicalStore`'s interface over tantivy. ``error`` is set when the
    folder could not be opened (an empty in-memory index answers meanwhile, and health says why) or when
    tantivy is not installed (``unavailable``: nothing answers, and nothing falls back to Whoosh)."""

    name = "tantivy"
    scoring = "whoosh"  # the default of search_terms (SCORINGS; the engine sets it from bm25_scoring)

    def __init__(self, folder: Path) -> None:
        folder.mkdir(parents=True, exist_ok=True)
        self.folder = folder
        self._lock = threading.RLock()
        self._in_run = False  # inside a run_writer block
        self._run: TantivyWriter | None = None  # that block's writer, once a batch asked for one
        self._searcher: Any = None
        self._seen: tuple[int, int, int] | None = None  # meta.json's (inode, mtime_ns, size) the searcher reads
        # Documents in the searcher's segments, deleted ones included: the N of tantivy's idf (its doc
        # frequencies count deleted documents until a merge drops them), read from meta.json at each reload.
        self._max_docs = 0
        self.error: str | None = None
        self.unavailable = False
        self.created = False
        self.ix: Any = None
        try:
            import tantivy as tv
        except ImportError as e:
            self._tv = None
            self.unavailable = True
            self.error = (f"tantivy is not installed ({e}); install tantivy=={_PINNED} or set "
                          "lexical_store = \"whoosh\"")
            return
        self._tv = tv
        try:
            self._open(tv, folder)
        except Exception as e:  # any failure to open is reported, never a traceback for every command
            self.error = f"{type(e).__name__}: {e}"
            self.ix = tv.Index(_schema(tv))

    @_panics_as_errors
    def _open(self, tv: Any, folder: Path) -> None:
        if (folder / "meta.json").exists():
            have = sorted(f.get("name", "") for f in json.loads((folder / "meta.json").read_text())["schema"])
            if have != sorted(SCHEMA_FIELDS):
                raise OSError(f"its fields {have} are not this version's {sorted(SCHEMA_FIELDS)}")
            self.ix = tv.Index.open(str(folder))
        else:
            leftovers = [p.name for p in folder.iterdir() if p.suffix in (".idx", ".store", ".term")]
            if leftovers:
                # Segments without meta.json: the commit record was lost. Creating an index here would
                # hide that; answer from an empty one and say so until a rebuild.
                raise OSError(f"no meta.json beside {len(leftovers)} segment file(s)")
            self.ix = tv.Index(_schema(tv), path=str(folder), reuse=False)
            self.created = True
        self.ix.config_reader(reload_policy="manual")

    def describe(self) -> str:
        if self.unavailable:
            return f"tantivy (unavailable: {self.error}), {self.folder}"
        return f"tantivy {version()}, {self.folder}"

    @_panics_as_errors
    def check(self, deep: bool = False) -> str | None:
        """Open a searcher over the committed index (tantivy opens every segment's files, which finds a
        truncated or missing one), read one stored document and open each field's term dictionary in every
        segment: random bytes in a `.term` file passed the rest, health said ready and every question's BM25
        failed, for good (a hostile-input newcomer, session 39). ``deep`` walks every term of every field too
        (damage inside a dictionary; 1.8 s on the 100k workspace's 440k documents, the cheap open 4 ms): after a search
        failed.
        The problem in words, or None."""
        if self.error:
            return self.error
        try:
            with self._lock:
                self.refresh()
                s = self.searcher()
                if s.num_docs:
                    hits = s.search(self._tv.Query.all_query(), 1).hits
                    if hits:
                        s.doc(hits[0][1])
                    for field in SCHEMA_FIELDS:
                        if field != "kind":  # indexed, never searched by words: not worth a walk
                            s.terms_with_prefix(field, "" if deep else "\U0010ffff", limit=1)
        except Exception as e:
            return f"{type(e).__name__}: {e}"
        return None

    @_panics_as_errors
    def wipe(self) -> None:
        """Delete the folder's index and start an empty one (the caller refills it from the manifest)."""
        if self.unavailable:
            raise RuntimeError(self.error)
        with self._lock:
            self.close()
            shutil.rmtree(self.folder, ignore_errors=True)
            self.folder.mkdir(parents=True, exist_ok=True)
            self.ix = self._tv.Index(_schema(self._tv), path=str(self.folder), reuse=False)
            self.ix.config_reader(reload_policy="manual")
            self.error = None
            self.created = True

    def writer(self) -> TantivyWriter:
        """A writer for one batch; inside :meth:`run_writer`, the run's writer (made at the run's first call:
        a run that writes nothing, a catch-up with no change, opens none)."""
        if self.unavailable:
            raise RuntimeError(f"lexical store tantivy is unavailable: {self.error}")
        if not self._in_run:
            return TantivyWriter(self)
        if self._run is None:
            self._run = TantivyWriter(self)
        return self._run

    @contextmanager
    def run_writer(self) -> Iterator[None]:
        """One writer for a run's batches (the engine's writer lock is held for the whole run): each batch
        commits (queries see it, a kill keeps it) without waiting for the merges tantivy's policy starts
        after each commit; they go on in tantivy's threads beside the next batches, and are waited for once,
        when the block ends. A writer per batch, made and released and waiting for its merges each time,
        held the indexer's thread 45.7 s of the 100k workspace's lexical pass (18.9 s so) and its peak RSS
        was 80-90 MB higher; on 2 busy cores the pass took as long either way (bench/RESULTS.md, session 35)."""
        if self._in_run:
            yield
            return
        self._in_run = True
        try:
            yield
        except BaseException:
            self._end_run(quiet=True)  # the run's own error is the one to see
            raise
        self._end_run()

    def _end_run(self, quiet: bool = False) -> None:
        """Release the run's writer (waiting for its merges); ``quiet``: a failure is logged, not raised."""
        self._in_run = False
        w, self._run = self._run, None
        if w is None:
            return
        try:
            with panics_as(TantivyPanic, "tantivy panicked"):
                w._release()
        except Exception as e:
            if not quiet:
                raise
            log.warning("%s: releasing the run's lexical writer: %s", self.folder, e)

    # The indexer may tokenize in its worker processes (field_tokens there, add_tokens here): Whoosh's
    # analyzer runs inside its own writer, tantivy's fields are tokenized in Python before they are handed over.
    takes_tokens = True

    @staticmethod
    def add_tokens(writer: TantivyWriter, chunk_id: str, path: str, kind: str, content: str, symbols: str,
                   pathtext: str) -> None:
        """A chunk whose fields :func:`field_tokens` tokenized."""
        writer.add_tokenized(chunk_id, path, kind, content, symbols, pathtext)

    @staticmethod
    def add_chunk(writer: TantivyWriter, chunk_id: str, path: str, kind: str, text: str, symbols: list[str]) -> None:
        writer.add_document(id=chunk_id, path=path, kind=kind, content=text, symbols=" ".join(symbols),
                            pathtext=path.replace("/", " / "))

    def delete_paths(self, writer: TantivyWriter, paths: list[str]) -> None:
        """Delete every document of ``paths`` (applied, in order, before the writer's later adds)."""
        for p in paths:
            writer.delete_path(p)

    @staticmethod
    def delete_all(writer: TantivyWriter) -> None:
        """Delete every document, in the folder, at the writer's commit (readers keep their segments)."""
        writer.delete_all()

    def _meta_stat(self) -> tuple[int, int, int] | None:
        """meta.json's (inode, mtime_ns, size): tantivy replaces it by a rename at each commit, so the inode
        changes even when two commits fall in one tick of a coarse clock with the same size (review 7 L4)."""
        try:
            st = (self.folder / "meta.json").stat()
        except OSError:
            return None
        return (st.st_ino, st.st_mtime_ns, st.st_size)

    @_panics_as_errors
    def refresh(self) -> None:
        with self._lock:
            self._searcher = None
            if self.ix is not None:
                self.ix.reload()

    @_panics_as_errors
    def searcher(self) -> Any:
        """A searcher over the latest commit: reloaded when ``meta.json`` changed (another process's
        commit; one stat per call), else the same one (tantivy searchers are made for concurrent use)."""
        with self._lock:
            seen = self._meta_stat()
            if self._searcher is None or seen != self._seen:
                self.ix.reload()
                self._seen = seen
                self._searcher = self.ix.searcher()
                self._max_docs = sum(self.segment_sizes())
            return self._searcher

    @_panics_as_errors
    def doc_count(self) -> int:
        if self.ix is None:
            return 0
        return int(self.searcher().num_docs)

    def segment_sizes(self) -> list[int]:
        """Documents (deleted ones included) in each committed segment, from ``meta.json``."""
        try:
            meta = json.loads((self.folder / "meta.json").read_text())
        except (OSError, ValueError):
            return []
        return [int(s.get("max_doc", 0)) for s in meta.get("segments", [])]

    def merge_tiers(self, fanout: int = 16, max_docs: int | None = None) -> int:
        """Nothing to do: tantivy's merge policy merges in its own threads after each commit (the writer
        waits for them before it is released). The Whoosh store's call, answered 0."""
        return 0

    @_panics_as_errors
    def doc_freqs(self, terms: list[str], field: str = "content") -> tuple[int, dict[str, int]]:
        """(documents, deleted ones included as in the frequencies, each term's document frequency in
        ``field``)."""
        if self.ix is None:
            return 0, {t: 0 for t in terms}
        s = self.searcher()
        return max(self._max_docs, int(s.num_docs)), {t: int(s.doc_freq(field, t)) for t in terms}

    @_panics_as_errors
    def rarest(self, terms: list[str], n: int) -> list[str]:
        """The ``n`` terms with the fewest documents (absent terms dropped): what a long query is about."""
        if len(terms) <= n:
            return terms
        if self.ix is None:
            return terms[:n]
        s = self.searcher()
        df = {t: s.doc_freq("content", t) + s.doc_freq("symbols", t) for t in terms}
        present = [t for t in terms if df[t] > 0]
        return sorted(present, key=lambda t: df[t])[:n]

    @_panics_as_errors
    def search_terms(self, terms: list[str], limit: int, fields: tuple[str, ...] = ("content", "symbols", "pathtext"),
                     kinds: set[str] | None = None, scoring: str | None = None,
                     weights: dict[str, float] | None = None) -> list[tuple[str, str, float]]:
        """BM25 over the given fields for any of ``terms``, each term and field weighed as ``scoring``
        says (default :attr:`scoring`; see :data:`SCORINGS`) and times ``weights[term]`` (default 1; the
        terms pseudo-relevance feedback adds weigh less): (chunk id, path, score)."""
        if not terms or self.ix is None:
            return []
        tv = self._tv
        Q, Occur = tv.Query, tv.Occur
        s = self.searcher()
        schema = self.ix.schema
        scoring = scoring or self.scoring
        # tantivy's N counts deleted documents (as Whoosh's doc_count_all does); never below the live count
        # (meta.json is read beside the searcher, and another process may commit in between).
        n = max(self._max_docs, s.num_docs)
        clauses = []
        for f in fields:
            fb = BOOSTS.get(f, 1.0)
            for t in terms:
                q = Q.term_query(schema, f, t)
                if scoring == "tantivy":
                    w = fb
                else:
                    df = s.doc_freq(f, t)
                    if not df:
                        continue  # matches nothing in this field
                    t_idf = tantivy_idf(max(n, df), df)
                    w = whoosh_idf(max(n, df), df) / t_idf if t_idf > 0 else 1.0
                    w *= fb if scoring == "idf" else fb * (K1 + 1) / (fb + K1)
                if weights:
                    w *= weights.get(t, 1.0)
                clauses.append((Occur.Should, Q.boost_query(q, w) if w != 1.0 else q))
        if not clauses:
            return []
        q = Q.boolean_query(clauses)
        if kinds:
            # A filter, not a score: a constant 0 added to every hit that has one of the kinds.
            flt = Q.boolean_query([(Occur.Should, Q.term_query(schema, "kind", k)) for k in sorted(kinds)])
            q = Q.boolean_query([(Occur.Must, q), (Occur.Must, Q.const_score_query(flt, 0.0))])
        out = []
        for score, addr in s.search(q, limit, count=False).hits:  # no count: lets tantivy skip blocks
            d = s.doc(addr)
            out.append((d.get_first("id"), d.get_first("path"), float(score)))
        # Equal scores in the order of their ids: tantivy breaks ties by document address, which depends on
        # which of its threads took a document; the same index built twice answers in the same order inside
        # the cut. Which of several hits tied at the ``limit`` cut are kept is still tantivy's choice
        # (review 7 L5; the branches ask for 200-400 chunks, so it touches only a list's far end).
        out.sort(key=lambda r: (-r[2], r[0]))
        return out

    def close(self) -> None:
        with self._lock:
            # A run's writer still held (an engine closed before its run ended): released, not left holding
            # tantivy's lock; a batch after this finds no index and fails, as it did before run writers.
            self._end_run(quiet=True)
            self._searcher = None
            self.ix = None  # tantivy-py has no close: its files are released with the last reference


_PINNED = "0.27.0"
