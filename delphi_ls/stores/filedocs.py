"""File documents: one short document per indexed file, searched by the ``filedoc`` branch (issue 19).

A file's document says what the file *is* rather than every word in it: its path split into words,
its leading comment or module docstring, its top-level definition names, the names of what it imports
and of the files that import it. "Where does the help text get built" can then reach ``help.go`` by
role, where the chunk-level BM25 spreads the same words over every file that mentions them.

Store: two tables in the manifest's SQLite file (``meta.sqlite``), a plain table keyed by path and an
FTS5 index over it (external content, kept in step by triggers, the way ``chunk_grams`` is). Why here
and not a second Whoosh index: a file document is a handful of words, so FTS5's BM25 in C answers in
about a millisecond with no second store to open, check, repair or merge; a damaged manifest is moved
aside whole (``Engine._open_meta``), taking these rows with it; and every part of a document is
derived from what the manifest already holds (the first chunk's text, top-level symbols, import
specs), so an index written before this table existed is filled from the manifest without re-reading
a file (``rebuild_from_manifest``). Words are split code-aware (``core.tokens``) before FTS5 sees them,
and FTS5's Porter stemmer folds ``parsing``/``parse``, ``errors``/``error``.

Crash order follows the pipeline's rule: a batch's documents are written before its files' manifest
rows, so a killed run leaves a file whose stored hash differs from the disk and the next run redoes
it. Removed files lose their documents with their manifest rows; a full run also drops any document
whose file the manifest no longer lists (after a rebuild, or files that became ignored).
"""

from __future__ import annotations

import heapq
import re
import sqlite3
import weakref
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass

from ..core.tokens import STOPWORDS, token_string
from .meta import MetaStore, transaction

# Bumped when what a document holds changes: a full index run refills every document from the manifest.
FILEDOCS_VERSION = 3

SCHEMA = """
CREATE TABLE IF NOT EXISTS file_docs (
  path TEXT PRIMARY KEY, pathwords TEXT, about TEXT, defs TEXT, keywords TEXT, imports TEXT, importers TEXT
);
CREATE VIRTUAL TABLE IF NOT EXISTS file_docs_fts USING fts5(
  pathwords, about, defs, keywords, imports, importers, content='file_docs', content_rowid='rowid',
  tokenize='porter unicode61'
);
CREATE TRIGGER IF NOT EXISTS file_docs_ai AFTER INSERT ON file_docs BEGIN
  INSERT INTO file_docs_fts(rowid, pathwords, about, defs, keywords, imports, importers)
  VALUES (new.rowid, new.pathwords, new.about, new.defs, new.keywords, new.imports, new.importers);
END;
CREATE TRIGGER IF NOT EXISTS file_docs_ad AFTER DELETE ON file_docs BEGIN
  INSERT INTO file_docs_fts(file_docs_fts, rowid, pathwords, about, defs, keywords, imports, importers)
  VALUES ('delete', old.rowid, old.pathwords, old.about, old.defs, old.keywords, old.imports, old.importers);
END;
CREATE TRIGGER IF NOT EXISTS file_docs_au AFTER UPDATE ON file_docs BEGIN
  INSERT INTO file_docs_fts(file_docs_fts, rowid, pathwords, about, defs, keywords, imports, importers)
  VALUES ('delete', old.rowid, old.pathwords, old.about, old.defs, old.keywords, old.imports, old.importers);
  INSERT INTO file_docs_fts(rowid, pathwords, about, defs, keywords, imports, importers)
  VALUES (new.rowid, new.pathwords, new.about, new.defs, new.keywords, new.imports, new.importers);
END;
"""

# The three triggers above that keep the FTS5 index in step with the rows, each statement alone (executescript
# would commit the caller's transaction), and the state key set while a large run writes rows without them.
TRIGGER_SQL = re.findall(r"CREATE TRIGGER IF NOT EXISTS file_docs_a[idu] .*?END;", SCHEMA, re.S)
TRIGGERS = [sql.split()[5] for sql in TRIGGER_SQL]  # their names
FTS_OWED = "filedocs_fts_owed"
FTS_OWED_STATUS = ("partial: the file documents' search index is built at the end of the run's lexical pass "
                   "(a run stopped before: the next run builds it)")

# BM25 weight of each column: the path and the defined names say most about a file's role; its most
# frequent words say what it mostly handles; what it imports and who imports it are hints shared by many.
COLUMN_WEIGHTS = (3.0, 1.0, 2.0, 1.0, 0.5, 0.5)
KEYWORDS = 30  # a file's most frequent words kept (identifier parts, 3+ letters, stop words out)
MAX_ABOUT_CHARS = 1500
MAX_DEFS = 200
MAX_IMPORTERS = 40
_EXT_WORDS = re.compile(r"\.[A-Za-z0-9]{1,5}$")
# Identifier parts of 3+ letters: ``getUserName`` -> get, User, Name; ``HTTPServer`` -> HTTP, Server.
_WORD_PART = re.compile(r"[A-Z][a-z]{2,}|[a-z]{3,}|[A-Z]{3,}(?![a-z])")
# A comment line (//, #, /*, *, --, ;, %) or a docstring's quotes, at the start of a line.
# Lines that may sit between a file's head comment and its code: package clauses, imports, pragmas.
_PREAMBLE = re.compile(r"^(package|import|from\s+\S+\s+import|use|using|namespace|require|#include|#!|\)|\"use strict\"|'use strict'|\"[^\"]*\"$)")
_COMMENT = re.compile(r"^\s*(?://+!?|#+!?|/\*+!?|\*+/?|--|;+|%+|\"\"\"|''')")


@dataclass
class FileDoc:
    path: str
    pathwords: str
    about: str
    defs: str
    keywords: str
    imports: str
    importers: str = ""


def words(text: str) -> str:
    """Code-aware words (identifiers whole and split), space-joined for FTS5's tokenizer."""
    return token_string(text)


def path_words(path: str) -> str:
    return words(_EXT_WORDS.sub("", path).replace("/", " "))


def leading_comment(text: str) -> str:
    """The comments and docstring at the head of a file: what the file says it is for.

    Comment and docstring lines are kept until the first line of code that is not a package clause or
    an import (so Go's ``// Package x`` above ``package x`` and a licence header both count, and the
    comments of a test data file's cases do not)."""
    out: list[str] = []
    kept = 0  # the length of out's lines (summed again per line, that sum was a third of this function)
    in_doc = False
    for line in text.splitlines()[:80]:
        s = line.strip()
        if in_doc:
            out.append(s.replace('"""', " ").replace("'''", " "))
            kept += len(out[-1])
            if '"""' in s or "'''" in s:
                in_doc = False
            continue
        if s.startswith(('"""', "'''", 'r"""')):
            body = s.lstrip("r")[3:]
            out.append(body.replace('"""', " ").replace("'''", " "))
            kept += len(out[-1])
            in_doc = '"""' not in body and "'''" not in body
            continue
        m = _COMMENT.match(line)
        if m:
            out.append(line[m.end():])
            kept += len(out[-1])
        elif s and not _PREAMBLE.match(s):
            break
        if kept > MAX_ABOUT_CHARS:
            break
    return words(" ".join(out)[:MAX_ABOUT_CHARS])


def import_words(specs: Iterable[str]) -> str:
    """Names of what a file imports: the specs' words without their language prefix (``py:``, ``go:``)."""
    return words(" ".join(s.partition(":")[2] or s for s in specs))


def keywords(texts: Iterable[str]) -> str:
    """A file's most frequent words (identifier parts of 3+ letters, stop words out), most frequent first:
    what a file mostly handles even when its name and header do not say it (``help`` in a CLI module)."""
    # One regex pass for the parts (``code_tokens`` per word cost 2.5 ms a file, 7-10% of a cold index).
    # One pass over the chunks joined (no part spans a newline), lower-cased by map: 15% less than a
    # generator per chunk on 12,309 files of 13 repositories, the same words (session 13).
    counts = Counter(map(str.lower, _WORD_PART.findall("\n".join(texts))))
    for stop in STOPWORDS & counts.keys():
        del counts[stop]
    # The first KEYWORDS in (count desc, word) order without sorting every distinct word (keys are unique:
    # the same words as sorted()[:KEYWORDS]).
    return " ".join(heapq.nsmallest(KEYWORDS, counts, key=lambda t: (-counts[t], t)))


def build_doc(path: str, chunks: list[str], top_level: Iterable[str], imports: Iterable[str]) -> FileDoc:
    """``chunks``: the file's chunk texts in order (the first holds its head: comment, package, imports)."""
    names: dict[str, None] = {}
    for n in top_level:
        if n and n != "<module>":
            names.setdefault(n, None)
        if len(names) >= MAX_DEFS:
            break
    return FileDoc(path, path_words(path), leading_comment(chunks[0] if chunks else ""), words(" ".join(names)),
                   keywords(chunks), import_words(imports))


def importer_words(importers: Iterable[str]) -> str:
    """The files that import this one, named by their path's last two parts (``cli/command``)."""
    stems = sorted({"/".join(_EXT_WORDS.sub("", p).split("/")[-2:]) for p in importers})[:MAX_IMPORTERS]
    return words(" ".join(s.replace("/", " ") for s in stems))


def fts_query(terms: Iterable[str]) -> str:
    """Terms ORed, each quoted (a term is a code token: letters, digits, underscores)."""
    return " OR ".join('"' + t.replace('"', "") + '"' for t in terms if t.strip('"'))


class FileDocs:
    """The file documents in ``meta``'s database (same connection and lock: one writer, WAL readers)."""

    def __init__(self, meta: MetaStore) -> None:
        self.meta = meta

    def exists(self) -> bool:
        with self.meta._lock:
            return self.meta.db.execute(
                "SELECT 1 FROM sqlite_master WHERE name='file_docs_fts'").fetchone() is not None

    def ensure(self, fresh: bool = False) -> None:
        """Create the tables (writers only: a reader opening an index must not need the write lock);
        ``fresh``: made again, empty (documents of an older version may lack columns; the run's end
        refills them from the manifest)."""
        with self.meta._lock:
            if fresh:
                self.meta.db.executescript("DROP TABLE IF EXISTS file_docs_fts; DROP TABLE IF EXISTS file_docs;")
            if fresh or not self.exists():
                self.meta.db.executescript(SCHEMA)
                self.meta.db.execute("DELETE FROM state WHERE key=?", (FTS_OWED,))  # new tables, their triggers

    # A large run's documents go in without the FTS5 triggers, and the index is built once from the rows at
    # the end: with the triggers, each document was indexed when written and again when its importers were
    # set (an update is a delete and an insert). Replaying the 100k workspace's 104,789 documents (session 32):
    # 20.5-24.9 s -> 7.3-10.0 s, 4.7-6.3 s of it the build. Searches skip the branch until then (fts_owed).
    def defer_fts(self) -> None:
        """Until :meth:`finish_fts`, rows are written without touching the FTS5 index. The state key is set in
        the same transaction as the triggers go: a run killed meanwhile leaves the next one the build."""
        with self.meta._lock:
            with transaction(self.meta.db, "IMMEDIATE"):
                for name in TRIGGERS:
                    self.meta.db.execute(f"DROP TRIGGER IF EXISTS {name}")
                self.meta.db.execute("INSERT OR REPLACE INTO state VALUES (?, 'true')", (FTS_OWED,))

    def fts_owed(self) -> bool:
        return bool(self.meta.get_state(FTS_OWED))

    def finish_fts(self) -> bool:
        """The FTS5 index built from every row, and the triggers back, in one transaction (when owed)."""
        if not self.fts_owed():
            return False
        with self.meta._lock:
            with transaction(self.meta.db, "IMMEDIATE"):
                self.meta.db.execute("INSERT INTO file_docs_fts(file_docs_fts) VALUES('rebuild')")
                for sql in TRIGGER_SQL:
                    self.meta.db.execute(sql)
                self.meta.db.execute("DELETE FROM state WHERE key=?", (FTS_OWED,))
        return True

    def drop(self) -> None:
        """No file documents (the branch is off): the tables go, and so does their version, so that a later
        full run with the branch on builds them again from the manifest. Nothing is written when absent."""
        if self.exists():
            with self.meta._lock:
                self.meta.db.executescript("DROP TABLE IF EXISTS file_docs_fts; DROP TABLE IF EXISTS file_docs;")
        if self.meta.get_state("filedocs_version") is not None or self.meta.get_state(FTS_OWED) is not None:
            with self.meta._lock:
                self.meta.db.execute("DELETE FROM state WHERE key IN ('filedocs_version', ?)", (FTS_OWED,))

    def put(self, docs: list[FileDoc]) -> bool:
        """Replace the documents of these paths in one transaction; importers kept from the old row
        (another file's imports set them, see ``set_importers``). True when a path is new or its
        import names changed (then who-imports-whom must be worked out again)."""
        if not docs:
            return False
        db = self.meta.db
        moved = False
        with self.meta._lock:
            with transaction(db):
                for d in docs:
                    old = db.execute("SELECT importers, imports FROM file_docs WHERE path=?", (d.path,)).fetchone()
                    moved = moved or old is None or old[1] != d.imports
                    # DELETE then INSERT: INSERT OR REPLACE would not fire the delete trigger.
                    db.execute("DELETE FROM file_docs WHERE path=?", (d.path,))
                    db.execute("INSERT INTO file_docs VALUES (?,?,?,?,?,?,?)",
                               (d.path, d.pathwords, d.about, d.defs, d.keywords, d.imports,
                                old[0] if old else d.importers))
        return moved

    def remove(self, paths: Iterable[str]) -> None:
        db = self.meta.db
        with self.meta._lock:
            with transaction(db):
                db.executemany("DELETE FROM file_docs WHERE path=?", [(p,) for p in paths])

    def prune(self) -> int:
        """Drop documents of files the manifest does not list (a full run's last step)."""
        with self.meta._lock:
            cur = self.meta.db.execute("DELETE FROM file_docs WHERE path NOT IN (SELECT path FROM files)")
            return cur.rowcount

    def set_importers(self, importers: dict[str, set[str]], only: set[str] | None = None) -> int:
        """Write each file's importer words where they changed (of the files in ``only`` when given);
        returns rows updated."""
        db = self.meta.db
        with self.meta._lock:
            if only is None:
                stored = dict(db.execute("SELECT path, importers FROM file_docs").fetchall())
            else:
                stored = {}
                names = sorted(only)
                for i in range(0, len(names), 500):
                    part = names[i: i + 500]
                    stored.update(db.execute(f"SELECT path, importers FROM file_docs WHERE path IN "
                                             f"({','.join('?' * len(part))})", part).fetchall())
            changed = [(w, p) for p, old in stored.items()
                       if (w := importer_words(importers.get(p, ()))) != (old or "")]
            if changed:
                with transaction(db):
                    db.executemany("UPDATE file_docs SET importers=? WHERE path=?", changed)
        return len(changed)

    def rebuild_from_manifest(self) -> int:
        """Every indexed file's document again, from the manifest alone (first chunk, top-level symbols,
        import specs): an index written before this table existed, or a new ``FILEDOCS_VERSION``."""
        db = self.meta.db
        with self.meta._lock:
            paths = [r[0] for r in db.execute("SELECT path FROM files")]
            texts: dict[str, list[str]] = {}
            for path, text in db.execute("SELECT path, text FROM chunks ORDER BY path, ord"):
                texts.setdefault(path, []).append(text)
            defs: dict[str, list[str]] = {}
            for name, path in db.execute(
                    "SELECT name, path FROM symbols WHERE container IS NULL OR container='' ORDER BY path, line"):
                defs.setdefault(path, []).append(name)
            imps: dict[str, list[str]] = {}
            for path, spec in db.execute("SELECT path, spec FROM imports"):
                imps.setdefault(path, []).append(spec)
            with transaction(db):
                db.execute("DELETE FROM file_docs")
                for p in paths:
                    d = build_doc(p, texts.get(p, []), defs.get(p, []), imps.get(p, []))
                    db.execute("INSERT INTO file_docs VALUES (?,?,?,?,?,?,'')",
                               (d.path, d.pathwords, d.about, d.defs, d.keywords, d.imports))
        return len(paths)

    def count(self) -> int:
        with self.meta._lock:
            try:
                return int(self.meta.db.execute("SELECT COUNT(*) FROM file_docs").fetchone()[0])
            except sqlite3.OperationalError:
                return 0

    def get(self, path: str) -> FileDoc | None:
        with self.meta._lock:
            r = self.meta.db.execute("SELECT * FROM file_docs WHERE path=?", (path,)).fetchone()
        return FileDoc(*r) if r else None

    def search(self, terms: list[str], limit: int) -> list[tuple[str, float]]:
        """(path, score) best first; score is FTS5's BM25 negated (higher is better). Empty when the
        table does not exist yet (an index from before it; the next full index run fills it)."""
        terms = [t for t in terms if t.strip('"')]
        if not terms:
            return []
        w = ", ".join(str(x) for x in COLUMN_WEIGHTS)
        sql = ("SELECT d.path, h.s FROM (SELECT rowid AS id, bm25(file_docs_fts, "
               f"{w}) AS s FROM file_docs_fts WHERE file_docs_fts MATCH ? ORDER BY s LIMIT ?) h "
               "JOIN file_docs d ON d.rowid = h.id ORDER BY h.s, d.path")
        with self.meta._lock:
            try:
                weighed = self._weighed(terms)
                rows = self.meta.db.execute(sql, (fts_query(weighed), limit)).fetchall()
                if len(rows) < limit and len(weighed) < len(terms):
                    # Fewer than asked for: the documents only the weightless terms match fill the rest, as
                    # before (a small folder; at 100k files the weighted terms fill it).
                    rows = self.meta.db.execute(sql, (fts_query(terms), limit)).fetchall()
            except sqlite3.OperationalError as e:
                if "no such table" in str(e):
                    return []
                raise
        return [(p, -s) for p, s in rows]

    # FTS5's BM25 gives a term found in half the documents or more an idf of 1e-6 (log((N - n + 0.5) / (n + 0.5))
    # is not positive; fts5_aux.c floors it), yet an OR query scores every document that matches any term: on the
    # 100,000-file workspace "test" is in 61,340 and "version" in 71,806 of 104,789 documents, and the branch
    # was 96-124 ms of the four slowest warm questions (session 35). Such terms are left out of the MATCH when a
    # term with weight remains; what changes is only what 1e-6 decided: ties, and documents matched by nothing
    # else, which fill the list only when the weighted terms match fewer than it holds.
    def _weighed(self, terms: list[str]) -> list[str]:
        """The terms with a weight in FTS5's BM25 (in fewer than half the documents); all of them when none has.
        Called with the lock held."""
        n_docs, df = self._df(terms)
        kept = [t for t in terms if 2 * df[t] < n_docs]
        return kept or terms

    def _df(self, terms: list[str]) -> tuple[int, dict[str, int]]:
        """The number of documents FTS5 counts (its averages record) and each term's document count, the
        latter as FTS5 counts it for BM25 (a phrase query: its stemming, its columns). Kept until this
        connection writes or another commits: a common term's count is a few milliseconds at 100k files."""
        db = self.meta.db
        key = (int(db.execute("PRAGMA data_version").fetchone()[0]), db.total_changes)
        held = _DF.get(self.meta)
        if held is None or held[0] != key:
            row = db.execute("SELECT block FROM file_docs_fts_data WHERE id=1").fetchone()
            held = (key, _varint(row[0]) if row and row[0] else 0, {})
            _DF[self.meta] = held
        counts = held[2]
        for t in terms:
            if t not in counts:
                counts[t] = int(db.execute("SELECT count(*) FROM file_docs_fts WHERE file_docs_fts MATCH ?",
                                           (fts_query([t]),)).fetchone()[0])
        return held[1], {t: counts[t] for t in terms}


# Per manifest connection: (its write key, FTS5's document count, term -> document count); see FileDocs._df.
_DF: weakref.WeakKeyDictionary[MetaStore, tuple[tuple[int, int], int, dict[str, int]]] = weakref.WeakKeyDictionary()


def _varint(b: bytes) -> int:
    """The first SQLite varint of ``b`` (big-endian 7-bit groups, a ninth byte of 8 bits): the number of rows
    in an FTS5 index's averages record (id 1 of its ``_data`` table)."""
    v = 0
    for i, c in enumerate(b[:9]):
        if i == 8:
            return (v << 8) | c
        v = (v << 7) | (c & 0x7F)
        if not c & 0x80:
            return v
    return v


def top_level_names(symbols: Iterable[tuple[str, str, int, int, str]]) -> list[str]:
    """Names defined at a file's top level, from the pipeline's symbol tuples (name, kind, line, end, container)."""
    return [n for n, _k, _l, _e, cont in symbols if not cont]

