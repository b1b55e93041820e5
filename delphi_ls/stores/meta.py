"""The manifest: files with their content hashes, chunks, symbols, skips, state.

SQLite in WAL mode is the source of truth for what is indexed. A file's row is
written only after its chunks reached the lexical store, so a run killed at any
point leaves files whose stored hash differs from the disk, and the next run
redoes exactly those.
"""

from __future__ import annotations

import json
import logging
import random
import re
import sqlite3
import threading
import time
import uuid
from collections import defaultdict
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, NamedTuple

import numpy as np

from ..core import SymbolRecord

SCHEMA = """
CREATE TABLE IF NOT EXISTS files (
  path TEXT PRIMARY KEY, hash TEXT NOT NULL, size INTEGER, mtime_ns INTEGER, kind TEXT,
  language TEXT, n_chunks INTEGER, replaced INTEGER DEFAULT 0, note TEXT
);
CREATE TABLE IF NOT EXISTS chunks (
  id TEXT PRIMARY KEY, path TEXT NOT NULL, ord INTEGER, start_line INTEGER, end_line INTEGER,
  symbols TEXT, kind TEXT, content_hash TEXT, text TEXT, embedded INTEGER DEFAULT 0
);
CREATE INDEX IF NOT EXISTS chunks_path ON chunks(path);
UNEMBEDDED
-- Trigram index over chunk text (SQLite FTS5, C speed): literal substring search for
-- error messages and quoted strings. It holds exactly the chunks whose rowid is at most the state
-- 'grams_upto' (every chunk when that key is absent); the triggers keep that true row by row, and an
-- index run adds the chunks above it in bulk (MetaStore.defer_grams / build_grams, issue 18).
-- detail=none: no positions, so a literal is looked up as its trigrams ANDed and each candidate's text is
-- checked (find_literal). 4.7x smaller than with positions and 0.68x the build time; a lookup within a
-- millisecond of a phrase query's (bench/RESULTS.md, "Session 12"; it was 1.13 of a 3.25 GB manifest at 100k files).
CREATE VIRTUAL TABLE IF NOT EXISTS chunk_grams USING fts5(
  text, content='chunks', content_rowid='rowid', tokenize='trigram', detail=none
);
CREATE TRIGGER IF NOT EXISTS files_content_ai AFTER INSERT ON files BEGIN
  INSERT OR REPLACE INTO state VALUES ('content_version', '"' || lower(hex(randomblob(16))) || '"');
END;
CREATE TRIGGER IF NOT EXISTS files_content_ad AFTER DELETE ON files BEGIN
  INSERT OR REPLACE INTO state VALUES ('content_version', '"' || lower(hex(randomblob(16))) || '"');
END;
CREATE TRIGGER IF NOT EXISTS files_content_au AFTER UPDATE OF hash, kind, language, n_chunks ON files BEGIN
  INSERT OR REPLACE INTO state VALUES ('content_version', '"' || lower(hex(randomblob(16))) || '"');
END;
GRAMS_TRIGGERS
-- The parser version (indexing.pipeline.PARSER_VERSION) that wrote each file's chunks, symbols and imports.
-- Any insert into files removes the file's row and only this code adds it back after its own, so a file that
-- another Delphi wrote (an editor or daemon of an older version still running after an upgrade) has none,
-- and the next full run parses it again: its old chunks were served as current, a secret the old chunker did
-- not redact included (a newcomer, session 31). The state's parser_version covers an index as a whole.
CREATE TABLE IF NOT EXISTS parsed (path TEXT PRIMARY KEY, version INTEGER);
CREATE TRIGGER IF NOT EXISTS files_parsed_ai AFTER INSERT ON files BEGIN
  DELETE FROM parsed WHERE path = new.path;
END;
CREATE TRIGGER IF NOT EXISTS files_parsed_ad AFTER DELETE ON files BEGIN
  DELETE FROM parsed WHERE path = old.path;
END;
CREATE TABLE IF NOT EXISTS symbols (
  name TEXT, kind TEXT, path TEXT, line INTEGER, end_line INTEGER, container TEXT
);
CREATE INDEX IF NOT EXISTS symbols_path ON symbols(path);
-- Case-insensitive lookups by name (the view's SymbolTable asks for the few names a question holds).
CREATE INDEX IF NOT EXISTS symbols_name_nocase ON symbols(name COLLATE NOCASE);
CREATE TABLE IF NOT EXISTS imports (path TEXT, spec TEXT);
CREATE INDEX IF NOT EXISTS imports_path ON imports(path);
CREATE TABLE IF NOT EXISTS cochange (a TEXT, b TEXT, weight REAL, PRIMARY KEY (a, b));
-- Each file's weighted change count over the same commits (the learned ranker's churn columns).
CREATE TABLE IF NOT EXISTS changes (path TEXT PRIMARY KEY, weight REAL);
-- The same commits' messages, each with the indexed files it changed (a JSON list: a path may hold a newline).
CREATE TABLE IF NOT EXISTS commit_messages (message TEXT, files TEXT);
CREATE TABLE IF NOT EXISTS skipped (path TEXT PRIMARY KEY, reason TEXT);
-- The size and mtime of the skipped files whose bytes decided it (binary, generated, minified): while they
-- stay the same the file is not read again (a folder of data files was re-read by every question's update).
CREATE TABLE IF NOT EXISTS skipped_seen (path TEXT PRIMARY KEY, size INTEGER, mtime_ns INTEGER);
CREATE TABLE IF NOT EXISTS state (key TEXT PRIMARY KEY, value TEXT);
-- Chroma writes an update of named paths left for later (issue 18): 'add' (upsert the embedded chunk from
-- the embedding cache) or 'del' (delete the id). Written before the manifest marks a chunk embedded.
CREATE TABLE IF NOT EXISTS chroma_pending (id TEXT PRIMARY KEY, op TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS embed_cache (
  model TEXT, content_hash TEXT, vec BLOB, PRIMARY KEY (model, content_hash)
);
"""

# The trigram index's triggers. A chunk at or below the watermark is added (or removed) with its row; one
# above it waits for build_grams. Row by row in a transaction per file they cost 15 of the 17 s of
# spring-boot's manifest writes (37k chunks; 4.5-6 s in bulk: RESULTS, "The trigram index in bulk").
GRAMS_UPTO = ("COALESCE((SELECT CAST(value AS INTEGER) FROM state WHERE key = 'grams_upto'), "
              "9223372036854775807)")
GRAMS_TRIGGERS = f"""CREATE TRIGGER IF NOT EXISTS chunks_ai AFTER INSERT ON chunks WHEN new.rowid <= {GRAMS_UPTO} BEGIN
  INSERT INTO chunk_grams(rowid, text) VALUES (new.rowid, new.text);
END;
CREATE TRIGGER IF NOT EXISTS chunks_ad AFTER DELETE ON chunks WHEN old.rowid <= {GRAMS_UPTO} BEGIN
  INSERT INTO chunk_grams(chunk_grams, rowid, text) VALUES ('delete', old.rowid, old.text);
END;"""
SCHEMA = SCHEMA.replace("GRAMS_TRIGGERS", GRAMS_TRIGGERS)
# The chunks not embedded yet, by rowid: a table of their own, not only the `embedded` flag in each chunk's row
# (issue 18). Setting the flag rewrote the row, its text included, and the index on it: a vector pass marking a
# 100k workspace's 440k chunks wrote each of their pages to the WAL again (and checkpointed them), 2,048 chunks
# a step, while the embedding processes and the trigram build waited on it (session 34, RESULTS). The table is
# the truth this code reads; the column is what a chunk was written with (0: to embed; 1: its vector reused)
# and what a write of it says, which the triggers carry over (an older Delphi on the same index marks and
# resets chunks by the column: it stays understood; this code does not keep the column current).
UNEMBEDDED = """CREATE TABLE IF NOT EXISTS unembedded (rid INTEGER PRIMARY KEY);
CREATE TRIGGER IF NOT EXISTS chunks_unembedded_ai AFTER INSERT ON chunks WHEN new.embedded = 0 BEGIN
  INSERT OR IGNORE INTO unembedded VALUES (new.rowid);
END;
CREATE TRIGGER IF NOT EXISTS chunks_unembedded_ad AFTER DELETE ON chunks BEGIN
  DELETE FROM unembedded WHERE rid = old.rowid;
END;
CREATE TRIGGER IF NOT EXISTS chunks_unembedded_au0 AFTER UPDATE OF embedded ON chunks WHEN new.embedded = 0 BEGIN
  INSERT OR IGNORE INTO unembedded VALUES (new.rowid);
END;
CREATE TRIGGER IF NOT EXISTS chunks_unembedded_au1 AFTER UPDATE OF embedded ON chunks WHEN new.embedded != 0 BEGIN
  DELETE FROM unembedded WHERE rid = new.rowid;
END;"""
# An existing manifest gets the table only from its upgrade (MetaStore._upgrade_unembedded, which fills it): this
# schema, run on one whose upgrade could not take the lock, would make it empty (every chunk embedded; a review).
SCHEMA_EXISTING = SCHEMA.replace("UNEMBEDDED", "")
SCHEMA = SCHEMA.replace("UNEMBEDDED", UNEMBEDDED)
GRAMS_BATCH = 20000  # chunks added to the trigram index per transaction by build_grams
GRAMS_CREATE = re.search(r"CREATE VIRTUAL TABLE IF NOT EXISTS chunk_grams .*?\);", SCHEMA, re.S).group(0)  # type: ignore[union-attr]
# A literal is looked up by at most this many of its trigrams (spread along it; the text check does the rest),
# and at most this many candidates per result asked for are checked: a literal whose trigrams are all common
# but rarely adjacent cannot make one question read the whole table.
LITERAL_GRAMS = 16
CHECKED_PER_RESULT = 50

log = logging.getLogger(__name__)


@dataclass
class ChunkRow:
    id: str
    path: str
    ord: int
    start_line: int
    end_line: int
    symbols: list[str]
    kind: str
    content_hash: str
    text: str


class ChunkKey(NamedTuple):
    """A chunk without its text: what marking it embedded and writing its vector need."""

    id: str
    path: str
    kind: str
    content_hash: str


@dataclass
class FileWrite:
    """What :meth:`MetaStore.replace_files` writes for one file."""

    path: str
    hash: str
    size: int
    mtime_ns: int
    kind: str
    language: str
    chunks: list[ChunkRow]
    symbols: list[tuple[str, str, int, int, str]]
    replaced: bool
    reuse_embedded: set[str]
    imports: list[str] = field(default_factory=list)
    redacted: str = ""  # the secrets replaced in its text, in words (workspace/secrets.py); kept as the file's note
    parser: int = 0  # the PARSER_VERSION that made ``chunks`` (0: unknown, parsed again by the next full run)


_CHUNK_COLS = "id,path,ord,start_line,end_line,symbols,kind,content_hash,text"
SAMPLE_TRIES = 32  # random rowids sample_embedded looks up before it walks
_CHUNK_COLS_C = ",".join("c." + k for k in _CHUNK_COLS.split(","))  # the same, of a table named c


@contextmanager
def transaction(db: sqlite3.Connection, mode: str = "") -> Iterator[None]:
    """``BEGIN [mode]`` … ``COMMIT``; on any exception, an interrupt included, ``ROLLBACK`` while a
    transaction is still open. A Ctrl-C can land after COMMIT took effect, with none left to roll back: a
    bare ROLLBACK then raised "no transaction is active" over the KeyboardInterrupt (a newcomer's
    finding, session 25), and a block without one left the connection inside a transaction."""
    try:
        db.execute(f"BEGIN {mode}".rstrip())  # inside: an interrupt just after BEGIN rolls back too
        yield
        db.execute("COMMIT")
    except BaseException:
        if db.in_transaction:
            db.execute("ROLLBACK")
        raise


def _rollback(db: sqlite3.Connection) -> None:
    """ROLLBACK where a block's own try does it: only while a transaction is open (see transaction)."""
    if db.in_transaction:
        db.execute("ROLLBACK")


def _chunk(r: tuple) -> ChunkRow:
    return ChunkRow(r[0], r[1], r[2], r[3], r[4], json.loads(r[5]), r[6], r[7], r[8])


# SQLITE_CORRUPT and SQLITE_NOTADB: the file is damaged or not a database at all. Anything else
# (locked, read-only, disk full) is not corruption and must not make us move the manifest aside.
_CORRUPT_CODES = {11, 26}


_SCHEMA_NAMES = set(re.findall(r"IF NOT EXISTS (\w+)", SCHEMA))
NAME_INDEX = "symbols_name_nocase"  # a large run builds it at its end (MetaStore.defer_name_index)
NAME_INDEX_SQL = re.search(rf"CREATE INDEX IF NOT EXISTS {NAME_INDEX} .*?;", SCHEMA).group(0)  # type: ignore[union-attr]
# Added to older manifests when they are opened for writing; a read-only one answers without them (slower).
# Older read-only manifests: no churn, no messages, no record of which parser wrote each file.
_SCHEMA_OPTIONAL = {"symbols_name_nocase", "changes", "commit_messages", "parsed", "files_parsed_ai", "files_parsed_ad"}
# An older manifest opened read-only keeps its `embedded` flag as the truth (MetaStore._flag_column).
_SCHEMA_OPTIONAL |= set(re.findall(r"IF NOT EXISTS (\w+)", UNEMBEDDED))


def _locked(e: sqlite3.OperationalError) -> bool:
    return "locked" in str(e) or getattr(e, "sqlite_errorcode", None) in (5, 6)  # SQLITE_BUSY, SQLITE_LOCKED


class DamagedManifest(sqlite3.DatabaseError):
    """A manifest SQLite opens whose content this Delphi cannot read (a table missing, a state value that is
    not JSON): damaged like a corrupt page, moved aside and rebuilt the same way (a security audit, session
    26: a state value of ``{`` made every command a traceback, for good)."""


def unreadable_state(db: sqlite3.Connection) -> str | None:
    """The key of a state value that is not JSON (the engine reads every one as JSON), or None."""
    for k, v in db.execute("SELECT key, value FROM state"):
        try:
            json.loads(v)
        except (TypeError, ValueError):
            return str(k)
    return None


def is_corruption(e: BaseException) -> bool:
    return isinstance(e, DamagedManifest) or (
        isinstance(e, sqlite3.DatabaseError) and getattr(e, "sqlite_errorcode", None) in _CORRUPT_CODES)


def _readonly(e: BaseException) -> bool:
    return "readonly" in str(e)


class _Fold(dict):  # type: ignore[type-arg]
    """``str.translate`` table folding case one character to one, as FTS5's trigram tokenizer compares
    (``ς``/``σ``, ``µ``/``μ``, ``ſ``/``s`` alike; a character whose fold is longer, ``İ``, stays itself): Python's
    ``lower()`` looks at context (a final sigma) and lengthens ``İ``, and lost true matches (review 12).
    Filled as characters are met."""

    def __missing__(self, code: int) -> int:
        c = chr(code)
        f = c.casefold()
        if len(f) != 1:
            f = c.lower()
        self[code] = out = ord(f) if len(f) == 1 else code
        return out


_FOLD = _Fold()


def fold(text: str) -> str:
    """``text`` with its case folded as the trigram index compares it."""
    return text.lower() if text.isascii() else text.translate(_FOLD)


def _phrase(text: str) -> str:
    """``text`` as one FTS5 phrase (its double quotes doubled)."""
    return '"' + text.replace('"', '""') + '"'


class WriteTurns:
    """Turns at SQLite's write lock between this process's connections: a writer of the main connection goes
    ahead of the trigram build beside the vector pass (``first``), which takes the next turn only when no
    such writer waits (``after``, as a ``with`` block). SQLite alone made the main connection wait in its busy
    handler's sleeps (up to 100 ms a try) behind build transactions of seconds: at 100k files the vector pass
    took 46 s longer beside the build (session 31)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._cv = threading.Condition()
        self._waiting = 0

    @contextmanager
    def first(self) -> Iterator[None]:
        with self._cv:
            self._waiting += 1
        self._lock.acquire()
        with self._cv:
            self._waiting -= 1
        try:
            yield
        finally:
            self._lock.release()
            with self._cv:
                self._cv.notify_all()

    def __enter__(self) -> None:  # ``after``: the build's turn
        with self._cv:
            while self._waiting:
                self._cv.wait(0.05)
        self._lock.acquire()

    def __exit__(self, *exc: object) -> None:
        self._lock.release()


def _build_grams(db: sqlite3.Connection, lock: threading.RLock | WriteTurns, batch: int, finish: bool,
                 stop: threading.Event | None = None) -> int:
    """MetaStore.build_grams on ``db`` (each transaction under ``lock``)."""
    added = 0
    first = True
    while not (stop is not None and stop.is_set()):
        with lock:
            db.execute("BEGIN IMMEDIATE")
            try:
                if first:  # stored in the index's own config: the saves' row-by-row writes keep it
                    db.execute("INSERT INTO chunk_grams(chunk_grams, rank) VALUES ('automerge', ?)", (GRAMS_AUTOMERGE,))
                    first = False
                row = db.execute("SELECT CAST(value AS INTEGER) FROM state WHERE key='grams_upto'").fetchone()
                if row is None:
                    db.execute("COMMIT")
                    return added
                upto = row[0]
                top = db.execute("SELECT rowid FROM chunks WHERE rowid > ? ORDER BY rowid LIMIT 1 OFFSET ?",
                                 (upto, batch - 1)).fetchone()
                hi = top[0] if top is not None else None
                cur = db.execute("INSERT INTO chunk_grams(rowid, text) SELECT rowid, text FROM chunks "
                                 "WHERE rowid > ? AND rowid <= ?", (upto, hi if hi is not None else 1 << 62))
                added += cur.rowcount
                if hi is None and finish:
                    db.execute("DELETE FROM state WHERE key='grams_upto'")
                elif hi is None:
                    db.execute("UPDATE state SET value=(SELECT CAST(COALESCE(MAX(rowid), ?) AS TEXT) "
                               "FROM chunks) WHERE key='grams_upto'", (upto,))
                else:
                    db.execute("UPDATE state SET value=? WHERE key='grams_upto'", (str(hi),))
                db.execute("COMMIT")
            except BaseException:
                _rollback(db)
                raise
        if hi is None:
            return added
        if stop is not None and (added // batch) % GRAMS_PAUSE_EVERY == 0:
            # A writer outside WriteTurns (set_state, another process) waits in SQLite's busy handler, which
            # sleeps up to 100 ms between tries: the build's next BEGIN came within microseconds, and such a
            # writer waited for the whole build, or failed "database is locked" after 30 s (a review).
            stop.wait(GRAMS_PAUSE_S)
    return added


# FTS5 merges a level's segments once it holds this many (its default: 4). A bulk build commits a segment per
# batch, and with 4 it rewrote each chunk's trigrams at every level they climbed: building 100,000 / 200,000 of the
# 100k workspace's chunk texts in 2,000-chunk transactions took 19.7 / 34.4 s of CPU, with 16 15.3 / 25.0 s (8:
# 28.8 s at 200,000); a literal's lookup over the more segments left, median of 30, 4.7 -> 6.4 ms (session 34,
# bench/RESULTS.md). After the vector pass took less, this build was the last thing a 100k cold index waited for.
GRAMS_AUTOMERGE = 16
GRAMS_PAUSE_EVERY = 4  # batches of the build beside the vector pass between pauses (about 0.8 s at 100k files)
GRAMS_PAUSE_S = 0.12  # longer than SQLite's longest busy-handler sleep (100 ms)



# Pages the WAL grows to before a commit copies it into the database, during a large run (SQLite's default,
# 1,000, otherwise). A cold run's transaction of 64 files writes more than 1,000 pages, so each commit was
# followed by a checkpoint and its two fsyncs, and index pages written again by the next transactions were
# copied again each time. Replaying the 100k workspace's manifest writes (60,000 files, groups of 64, 2-core
# host; session 32): 30.5 -> 23 s. Only during a large run: a save that met a WAL of 10,000 pages would copy
# 40 MB before answering; the run's end checkpoints (MetaStore.bulk_writes).
WAL_CHECKPOINT_PAGES = 10_000
WAL_CHECKPOINT_DEFAULT = 1_000
# After a checkpoint the WAL file is cut back to this size (it stays at its largest otherwise).
WAL_SIZE_LIMIT = 64 << 20


def _checkpoint_less_often(db: sqlite3.Connection) -> None:
    """Per connection: the WAL checkpoints of bulk writes (see WAL_CHECKPOINT_PAGES)."""
    db.execute(f"PRAGMA wal_autocheckpoint={WAL_CHECKPOINT_PAGES}")


class MetaStore:
    def _set_wal(self) -> None:
        """Switch to WAL. SQLite does not call the busy handler for this switch: two processes opening a
        new index at once got "database is locked" at once (seen in CI). Retried for up to 30 s."""
        deadline = time.monotonic() + 30
        while True:
            try:
                self.db.execute("PRAGMA journal_mode=WAL")
                return
            except sqlite3.OperationalError as e:
                if not _locked(e) or time.monotonic() > deadline:
                    raise
                time.sleep(0.05)

    def __init__(self, path: Path) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        self.path = path
        self._lock = threading.RLock()
        self.turns = WriteTurns()  # the vector pass's writes and the trigram build beside it (build_grams_apart)
        self._parsed_other: tuple[tuple[Any, int], set[str]] | None = None  # parsed_by_other's last answer, keyed
        self._counts: tuple[tuple[int, int], dict[str, int]] | None = None  # (state key, counts)
        # Moved by every write of this connection that changes what counts() counts without adjusting it
        # (the writes of files, chunks, symbols and the embedded flag are all in this class: each either
        # adjusts the counts, :meth:`_counted`, or moves this). Other connections move data_version.
        self._moved = 0
        self._bulk = False  # a large run's spaced WAL checkpoints (bulk_writes)
        # chroma_owed() by (data_version, total_changes): any commit of another connection, any row this one
        # writes. Counting joins every pending 'add' with its chunk: on the 100k workspace, where the exact search
        # answers and all 439,715 adds are owed, 2.6-4.7 s a call, and health called it twice (session 24).
        self._owed: tuple[tuple[int, int], int] | None = None
        # timeout: a reader waits for a writer's short transaction instead of failing at once.
        self.db = sqlite3.connect(str(path), check_same_thread=False, isolation_level=None, timeout=30)
        try:
            self._set_wal()
            self.db.execute("PRAGMA synchronous=NORMAL")
            self.db.execute(f"PRAGMA journal_size_limit={WAL_SIZE_LIMIT}")
            # A deleted row's bytes are zeroed, not left in free pages: a removed or newly ignored file's text
            # must not stay readable in the file (the snapshot's scrub does the same).
            self.db.execute("PRAGMA secure_delete=ON")
            have = {r[0] for r in self.db.execute("SELECT name FROM sqlite_master")}
            if "chunks" in have and "unembedded" not in have:  # before the schema below makes the table empty
                self._upgrade_unembedded()
                have = {r[0] for r in self.db.execute("SELECT name FROM sqlite_master")}
            # The symbol-name index is left out: a large run drops it while it writes (defer_name_index), and
            # any process opening the index meanwhile (`delphi context`, an MCP front) would build it in the middle
            # of that run and lose its gain (a review). Every index run builds it when absent (finish_name_index).
            if not _SCHEMA_NAMES - {NAME_INDEX} <= have:
                try:
                    # New or older file; a complete one is not written by opening it.
                    self.db.executescript(SCHEMA_EXISTING if "chunks" in have else SCHEMA)
                except sqlite3.OperationalError as e:
                    if _SCHEMA_NAMES - have - _SCHEMA_OPTIONAL or not (_locked(e) or "readonly" in str(e)):
                        raise
                    log.warning("%s: index %s not added (%s); a writer that opens it adds them (until then symbol "
                                "lookups scan the table, and files another Delphi wrote are not told apart)",
                                self.path, ", ".join(sorted(_SCHEMA_NAMES - have)), e)
            self._parsed_kept = "parsed" in {r[0] for r in self.db.execute(
                "SELECT name FROM sqlite_master WHERE name='parsed'")}
            self._flag_schema, self._flag_column = -1, True  # until _flagged() has looked
            if not self._flagged():
                self._drop_flag_index()
            if self._parsed_kept:
                self._seed_parsed()
            self._upgrade_grams_triggers()
            self._upgrade_grams_table()
        except BaseException:
            self.db.close()
            raise

    def _seed_parsed(self) -> None:
        """An index from before the ``parsed`` table: its files are taken as made by the parser its state names
        (a full run parses every file again when that is not this one's). Once, in one transaction with the
        state key saying it is done: a seed that failed midway (a lock held for 30 s, a full disk) made every
        file count as another Delphi's (a review, session 31)."""
        def needed() -> bool:
            return self.db.execute("SELECT 1 FROM state WHERE key='parsed_seeded'").fetchone() is None

        def seed() -> None:
            self.db.execute("INSERT OR IGNORE INTO parsed SELECT path, COALESCE((SELECT CAST(value AS INTEGER) "
                            "FROM state WHERE key='parser_version'), 1) FROM files")
            self.db.execute("INSERT OR REPLACE INTO state VALUES ('parsed_seeded', 'true')")

        if needed():
            self._upgrade(needed, seed, "files written before this version are not recorded as parsed by it")

    def _upgrade_unembedded(self) -> None:
        """A manifest from before the ``unembedded`` table: the table made from its flag column, and the index on
        that column dropped (nothing reads it now), in one transaction."""
        def needed() -> bool:
            return self.db.execute("SELECT 1 FROM sqlite_master WHERE name='unembedded'").fetchone() is None

        def change() -> None:
            table, triggers = UNEMBEDDED.split(";\n", 1)
            self.db.execute(table)
            for stmt in triggers.split("END;")[:-1]:
                self.db.execute(stmt + "END;")
            self.db.execute("INSERT OR IGNORE INTO unembedded SELECT rowid FROM chunks WHERE embedded = 0")
            self.db.execute("DROP INDEX IF EXISTS chunks_embedded")

        self._upgrade(needed, change, "the table of chunks to embed not made; the flag in each chunk's row is read")

    def _flagged(self) -> bool:
        """Whether this manifest says what is embedded by its flag column: an older one that could not be
        upgraded (read-only, or its writer held the lock). Asked again when its schema changes: another process
        may upgrade it meanwhile, and the flag is not kept current after that (a review)."""
        if not self._flag_column:
            return False
        version = self.db.execute("PRAGMA schema_version").fetchone()[0]
        if version != self._flag_schema:
            self._flag_schema = version
            self._flag_column = self.db.execute(
                "SELECT 1 FROM sqlite_master WHERE name='unembedded'").fetchone() is None
        return self._flag_column

    def _drop_flag_index(self) -> None:
        """The flag's index, which an older Delphi's schema makes again on the same manifest: it costs every
        chunk insert an index write and nothing reads it now. Only when it is there (opening takes no lock)."""
        def there() -> bool:
            return self.db.execute("SELECT 1 FROM sqlite_master WHERE name='chunks_embedded'").fetchone() is not None

        if there():
            self._upgrade(there, lambda: self.db.execute("DROP INDEX chunks_embedded"),
                          "the index of the embedded flag, which an older Delphi made, not dropped")

    def _emb(self, alias: str = "chunks") -> str:
        """SQL that holds for an embedded chunk of the table named ``alias``."""
        if self._flagged():
            return f"{alias}.embedded = 1"
        return f"NOT EXISTS (SELECT 1 FROM unembedded u WHERE u.rid = {alias}.rowid)"

    def _upgrade(self, needed: Callable[[], bool], change: Callable[[], None], refused: str) -> bool:
        """``change`` in one write transaction when ``needed`` still holds inside it (another process may have
        made it meanwhile). False, with ``refused`` logged, when the file cannot be written: held by a writer
        for 30 s, or read-only (BEGIN IMMEDIATE succeeds there and the first write fails)."""
        try:
            self.db.execute("BEGIN IMMEDIATE")
        except sqlite3.OperationalError as e:
            log.warning("%s: %s (%s)", self.path, refused, e)
            return False
        try:
            if needed():
                change()
            self.db.execute("COMMIT")
        except sqlite3.OperationalError as e:
            _rollback(self.db)
            if not _readonly(e):
                raise
            log.warning("%s: %s (%s)", self.path, refused, e)
            return False
        except BaseException:
            _rollback(self.db)
            raise
        return True

    def _upgrade_grams_triggers(self) -> None:
        """An index written before the watermark (issue 18) has triggers that add every chunk: they are
        replaced, once, by the ones above. Its trigram index holds every chunk already (no watermark is
        set), so nothing is rebuilt."""
        def old() -> bool:
            row = self.db.execute("SELECT sql FROM sqlite_master WHERE type='trigger' AND name='chunks_ai'").fetchone()
            return row is not None and "grams_upto" not in row[0]

        def change() -> None:
            self.db.execute("DROP TRIGGER chunks_ai")
            self.db.execute("DROP TRIGGER IF EXISTS chunks_ad")
            for stmt in GRAMS_TRIGGERS.split("END;")[:-1]:
                self.db.execute(stmt + "END;")
            log.info("%s: trigram index triggers upgraded (chunks are added in bulk by index runs now); "
                     "the trigram index itself is kept", self.path)

        # Kept as they are, their triggers add every chunk: deferring would add chunks twice.
        self.bulk_grams = not old() or self._upgrade(
            old, change, "trigram index triggers not upgraded; chunks are added row by row")

    def _upgrade_grams_table(self) -> None:
        """A trigram index written with positions (before session 12) is dropped and made again without them,
        once, at the first open that can write: watermark 0, so the next index run (a server's catch-up
        run too) adds every chunk in bulk, and health says the trigram branch is behind until then. Read-only,
        it stays as it is: :meth:`find_literal`'s query works on both. Nor while the triggers from before the
        watermark are still there (their upgrade failed): they add every chunk themselves, and a watermark of 0
        beside them would add chunks twice and delete rows the empty index never held (review 12)."""
        def old() -> bool:
            row = self.db.execute("SELECT sql FROM sqlite_master WHERE name='chunk_grams'").fetchone()
            return row is not None and "detail=none" not in row[0]

        def change() -> None:
            self.db.execute("DROP TABLE chunk_grams")
            self.db.execute(GRAMS_CREATE)
            self.db.execute("INSERT OR REPLACE INTO state VALUES ('grams_upto', '0')")
            log.info("%s: trigram index dropped to be rebuilt without positions (about a fifth of the size); "
                     "the next index run adds every chunk", self.path)

        if self.bulk_grams and old():
            self._upgrade(old, change, "trigram index not rebuilt without positions; it is used as it is")

    def check(self) -> None:
        """Cheap signs of a damaged file (``PRAGMA quick_check`` reads every page: too slow for a big
        index at every open): the schema, every state value, and the two main tables' b-trees."""
        with self._lock:
            names = {r[0] for r in self.db.execute("SELECT name FROM sqlite_master")}
            missing = {"files", "chunks", "state", "embed_cache", "symbols"} - names
            if missing:
                raise DamagedManifest(f"tables missing: {', '.join(sorted(missing))}")
            bad = unreadable_state(self.db)
            if bad is not None:
                raise DamagedManifest(f"the state value {bad!r} is not JSON")
            self.db.execute("SELECT COUNT(*), MAX(n_chunks) FROM files").fetchone()
            # COUNT(*) through the smallest index (not every chunk's text: the flag's index answered it before).
            self.db.execute("SELECT COUNT(*) FROM chunks").fetchone()
            if not self._flagged():
                self.db.execute("SELECT COUNT(*), MAX(rid) FROM unembedded").fetchone()

    def close(self) -> None:
        with self._lock:
            self.db.close()

    # --- state -------------------------------------------------------------
    def get_state(self, key: str, default: Any = None) -> Any:
        with self._lock:
            row = self.db.execute("SELECT value FROM state WHERE key=?", (key,)).fetchone()
        return json.loads(row[0]) if row else default

    def set_state(self, key: str, value: Any) -> None:
        with self._lock:
            self.db.execute("INSERT OR REPLACE INTO state VALUES (?, ?)", (key, json.dumps(value)))

    def ensure_state(self, key: str, value: Any) -> None:
        """Write only when it differs: a reader opening the index must not need the write lock."""
        if self.get_state(key) != value:
            self.set_state(key, value)

    def content_version(self) -> tuple[str | None, str | None]:
        """This manifest's identity (a random token set once per file, :meth:`ensure_identity`) and a
        random token set anew by every write of a file's row (triggers in the file itself, so a process
        running older code moves it too; a file's chunks, symbols and imports are written with its row):
        together they name what it holds, for what is derived from it and kept elsewhere (the saved view,
        ``stores/view_cache.py``). A token, not a counter: a snapshot loaded back returns to an earlier
        state with that state's token, and the next write must not repeat a token some later state had
        (review: a counter went back with the snapshot and the next write met a saved view of other content)."""
        with self._lock:
            rows = dict(self.db.execute(
                "SELECT key, value FROM state WHERE key IN ('manifest_id', 'content_version')").fetchall())
        return (json.loads(rows["manifest_id"]) if "manifest_id" in rows else None,
                json.loads(rows["content_version"]) if "content_version" in rows else None)

    def set_vendored(self, state: dict[str, Any]) -> bool:
        """Which files are other projects' code (workspace/vendored.py), as a full scan found it; a change moves the
        content version too (the saved views and answers made from the old rules are stale). True when it changed."""
        if self.get_state("vendored") == state:
            return False
        with self._lock:
            with transaction(self.db):
                self.db.execute("INSERT OR REPLACE INTO state VALUES ('vendored', ?)", (json.dumps(state),))
                self.db.execute("INSERT OR REPLACE INTO state VALUES ('content_version', ?)",
                                (json.dumps(uuid.uuid4().hex),))
        return True

    def ensure_identity(self) -> None:
        with self._lock:
            self.db.execute("INSERT OR IGNORE INTO state VALUES ('manifest_id', ?)", (json.dumps(uuid.uuid4().hex),))

    def clear_index(self) -> None:
        """Forget every indexed file (for a rebuild); the embedding cache and model identity stay, so
        the rebuild embeds nothing that was embedded before."""
        with self._lock:
            with transaction(self.db):
                # The trigram index emptied at once (no row-by-row delete by the trigger): watermark 0, so the
                # deletes below leave it alone and the rebuild's chunks are added in bulk (build_grams).
                self.db.execute("INSERT INTO chunk_grams(chunk_grams) VALUES ('delete-all')")
                self.db.execute("INSERT OR REPLACE INTO state VALUES ('grams_upto', '0')")
                for table in ("files", "chunks", "symbols", "imports", "skipped", "skipped_seen", "cochange",
                              "changes", "commit_messages", "chroma_pending"):
                    self.db.execute(f"DELETE FROM {table}")
                self.db.execute("DELETE FROM state WHERE key IN ('lexical_ready', 'parser_version', 'cochange')")
            self.purge_removed_text()
            self._moved += 1

    def purge_removed_text(self) -> None:
        """Merge every FTS5 table (`optimize`): a deleted row's terms stay in old segments until a merge, so the
        words of a removed or newly ignored file (a password among them) were still in the file after
        `delphi index --rebuild` (a newcomer, session 28). With secure_delete on, the freed pages are zeroed."""
        with self._lock:
            merge_fts_tables(self.db)

    # --- files -------------------------------------------------------------
    def file_hashes(self, paths: Iterable[str] | None = None) -> dict[str, tuple[str, int, int]]:
        """(hash, size, mtime) by path: of every indexed file, or of ``paths`` and the indexed files under
        them as folders (an update of named paths reads their rows only, not a row per file)."""
        with self._lock:
            if paths is None:
                rows = self.db.execute("SELECT path, hash, size, mtime_ns FROM files").fetchall()
            else:
                rows = []
                for p in dict.fromkeys(paths):
                    # A range on the primary key: the folder's files sort between "p/" and "p0".
                    rows += self.db.execute("SELECT path, hash, size, mtime_ns FROM files WHERE path = ? "
                                            "OR (path > ? AND path < ?)", (p, p + "/", p + "0")).fetchall()
        return {p: (h, s, m) for p, h, s, m in rows}

    def sample_files(self, n: int) -> list[tuple[str, int]]:
        """(path, size) of at most ``n`` indexed files, spread evenly over the manifest in path order (the same
        sample every time; saved buffers have size -1)."""
        with self._lock:
            total = self.db.execute("SELECT count(*) FROM files").fetchone()[0]
            step = max(1, total // max(n, 1))
            rows = self.db.execute("SELECT path, size FROM files ORDER BY path").fetchall() if total <= n else [
                r for i, r in enumerate(self.db.execute("SELECT path, size FROM files ORDER BY path")) if i % step == 0]
            return rows[:n]

    def files(self) -> list[tuple[str, str, int]]:
        """(path, kind, n_chunks) for every indexed file."""
        with self._lock:
            return self.db.execute("SELECT path, kind, n_chunks FROM files ORDER BY path").fetchall()

    def digests(self, paths: list[str]) -> dict[str, tuple[str, int]]:
        """Each indexed path's content hash and size (-1: from an editor's unsaved buffer); one query, where
        :meth:`file_hashes` reads each path as a folder too."""
        if not paths:
            return {}
        with self._lock:
            rows = self.db.execute(f"SELECT path, hash, size FROM files WHERE path IN ({','.join('?' * len(paths))})",
                                   list(paths)).fetchall()
        return {p: (h, size) for p, h, size in rows}

    def has_files(self) -> bool:
        with self._lock:
            return self.db.execute("SELECT 1 FROM files LIMIT 1").fetchone() is not None

    def parsed_by_other(self, version: int) -> set[str]:
        """Files whose chunks an older parser than ``version`` wrote (or an unknown one: a Delphi from before the
        per-file record). A newer parser's files are left as it cut them: re-parsed by an older server still
        running after an upgrade, and back by the new one, each full pass undid the other's (session 37's upgrade
        newcomer); the newer one re-parses what the older one writes, once."""
        if not self._parsed_kept:
            return set()
        # Asked by every full run, a run that changes nothing included (an agent's poll every 2 s, each `delphi
        # context`): the join is made again only when a file's row was written since (the content version moves
        # with any insert into files, whichever Delphi makes it).
        key = (self.content_version(), version)
        if self._parsed_other is not None and self._parsed_other[0] == key:
            return set(self._parsed_other[1])
        with self._lock:
            found = {r[0] for r in self.db.execute(
                "SELECT f.path FROM files f LEFT JOIN parsed p ON p.path = f.path WHERE p.version IS NULL OR p.version < ?",
                (version,))}
        self._parsed_other = (key, found)
        return set(found)

    def file_info(self, path: str) -> tuple[str, str, int] | None:
        with self._lock:
            return self.db.execute("SELECT kind, language, size FROM files WHERE path=?", (path,)).fetchone()

    def replace_file(self, path: str, hash_: str, size: int, mtime_ns: int, kind: str, language: str,
                     chunks: list[ChunkRow], symbols: list[tuple[str, str, int, int, str]], replaced: bool,
                     reuse_embedded: set[str], imports: list[str] | None = None) -> None:
        self.replace_files([FileWrite(path, hash_, size, mtime_ns, kind, language, chunks, symbols, replaced,
                                      reuse_embedded, imports or [])])

    def replace_files(self, writes: list[FileWrite]) -> None:
        """Each file's row, chunks, symbols and imports made what ``writes`` says, all in one transaction: a
        cold run's batch of files commits once, not once a file (issue 18: per-file commits were most of
        spring-boot's manifest time, each writing the same index pages to the WAL again)."""
        if not writes:
            return
        with self._lock, self._counted() as tally:
            delta = {"files": 0, "chunks": 0, "vectors": 0, "symbols": 0}
            # IMMEDIATE: the write lock first (with the busy timeout), since the transaction reads before it
            # writes: a deferred one fails at once when another connection committed in between (review).
            with transaction(self.db, "IMMEDIATE"):
                for w in writes:
                    self._replace_one(w, delta)
            if tally is not None:
                for k, v in delta.items():
                    tally[k] += v

    def _replace_one(self, w: FileWrite, delta: dict[str, int]) -> None:
        path = w.path
        old = self.db.execute("SELECT rowid, id, ord, start_line, end_line, symbols, kind, content_hash, "
                              f"text, {self._emb()} FROM chunks WHERE path=?", (path,)).fetchall()
        old_chunks, old_embedded = len(old), sum(r[9] for r in old)
        listed = self.db.execute("SELECT 1 FROM files WHERE path=?", (path,)).fetchone() is not None
        self._write_chunks(old, w.chunks, w.reuse_embedded)
        old_symbols = self.db.execute("DELETE FROM symbols WHERE path=?", (path,)).rowcount
        self.db.execute("DELETE FROM imports WHERE path=?", (path,))
        self.db.executemany("INSERT INTO imports VALUES (?, ?)", [(path, i) for i in w.imports])
        self.db.executemany("INSERT INTO symbols VALUES (?,?,?,?,?,?)",
                            [(n, k, path, ln, en, cont) for n, k, ln, en, cont in w.symbols])
        self.db.execute("DELETE FROM skipped WHERE path=?", (path,))
        self.db.execute("DELETE FROM skipped_seen WHERE path=?", (path,))
        self.db.execute(
            "INSERT OR REPLACE INTO files VALUES (?,?,?,?,?,?,?,?,?)",
            (path, w.hash, w.size, w.mtime_ns, w.kind, w.language, len(w.chunks), int(w.replaced), w.redacted or None),
        )
        if self._parsed_kept:  # after the insert: its trigger removed the file's row
            self.db.execute("INSERT OR REPLACE INTO parsed VALUES (?, ?)", (path, w.parser))
        delta["files"] += 0 if listed else 1
        delta["chunks"] += len(w.chunks) - old_chunks
        delta["vectors"] += sum(1 for c in w.chunks if c.id in w.reuse_embedded) - old_embedded
        delta["symbols"] += len(w.symbols) - old_symbols

    def _write_chunks(self, old: list[tuple[Any, ...]], chunks: list[ChunkRow], reuse_embedded: set[str]) -> None:
        """A file's chunk rows made ``chunks``, inside the caller's transaction. An old row whose text a new
        chunk has again is kept (its id, place and flags updated in place when they moved): the trigram index
        is kept in step by the rows' inserts and deletes only, and a save of a large file rewrote every chunk's
        trigram rows for one changed function (0.40 of 0.72 s for a 900 KB file at 100k files, issue 18)."""
        by_id = {r[1]: r for r in old}
        kept: dict[int, tuple[Any, ...]] = {}  # new chunk's index -> the old row it keeps
        for n, c in enumerate(chunks):  # first the rows whose id comes again (same path, place and text)
            r = by_id.get(c.id)
            if r is not None and r[8] == c.text:
                kept[n] = r
        taken = {r[0] for r in kept.values()}
        spare: dict[str, list[tuple[Any, ...]]] = defaultdict(list)
        for r in old:
            if r[0] not in taken:
                spare[r[7]].append(r)
        for n, c in enumerate(chunks):  # then a moved chunk takes a row of the same text
            if n not in kept and (same := spare.get(c.content_hash)):
                k = next((k for k, r in enumerate(same) if r[8] == c.text), None)
                if k is not None:
                    kept[n] = same.pop(k)
        moved = []  # (id, ord, start, end, symbols, kind, embedded, rowid)
        renamed = []  # (placeholder, rowid) of the moving rows whose id changes
        for n, r in kept.items():
            c = chunks[n]
            want = (c.id, c.ord, c.start_line, c.end_line, json.dumps(c.symbols), c.kind,
                    1 if c.id in reuse_embedded else 0)
            if want != (r[1], r[2], r[3], r[4], r[5], r[6], r[9]):
                moved.append((*want, r[0]))
                if c.id != r[1]:
                    renamed.append((f"moving:{r[0]}", r[0]))
        fresh = [c for n, c in enumerate(chunks) if n not in kept]
        self.db.executemany("DELETE FROM chunks WHERE rowid=?", [(r[0],) for rows in spare.values() for r in rows])
        # Ids are unique. With ids that hash the text (workers.chunk_id), a new chunk whose id an old row holds
        # kept that row in the first pass, so no moving row's new id is another's; ids that do not (an old row
        # with a new chunk's id but other text) could collide while rows move, so a moving row whose id changes
        # first takes a placeholder no chunk id can be (ids are hex digests). The rest are gone before the inserts.
        self.db.executemany("UPDATE chunks SET id=? WHERE rowid=?", renamed)
        self.db.executemany("UPDATE chunks SET id=?, ord=?, start_line=?, end_line=?, symbols=?, kind=?, embedded=? "
                            "WHERE rowid=?", moved)
        self.db.executemany(
            "INSERT INTO chunks VALUES (?,?,?,?,?,?,?,?,?,?)",
            [(c.id, c.path, c.ord, c.start_line, c.end_line, json.dumps(c.symbols), c.kind,
              c.content_hash, c.text, 1 if c.id in reuse_embedded else 0) for c in fresh],
        )

    def touch_file(self, path: str, size: int, mtime_ns: int) -> None:
        with self._lock:
            self.db.execute("UPDATE files SET size=?, mtime_ns=? WHERE path=?", (size, mtime_ns, path))

    def remove_files(self, paths: Iterable[str]) -> None:
        with self._lock, self._counted() as tally:
            gone = {"files": 0, "chunks": 0, "vectors": 0, "symbols": 0}
            with transaction(self.db, "IMMEDIATE"):  # reads before it writes (replace_file)
                for p in paths:
                    n, emb = self.db.execute(f"SELECT COUNT(*), COALESCE(SUM({self._emb()}), 0) FROM chunks "
                                             "WHERE path=?", (p,)).fetchone()
                    gone["files"] += self.db.execute("DELETE FROM files WHERE path=?", (p,)).rowcount
                    self.db.execute("DELETE FROM chunks WHERE path=?", (p,))
                    gone["chunks"] += n
                    gone["vectors"] += emb
                    gone["symbols"] += self.db.execute("DELETE FROM symbols WHERE path=?", (p,)).rowcount
                    self.db.execute("DELETE FROM imports WHERE path=?", (p,))
            if tally is not None:
                for k, v in gone.items():
                    tally[k] -= v

    def chunk_ids_of(self, path: str) -> list[str]:
        with self._lock:
            return [r[0] for r in self.db.execute("SELECT id FROM chunks WHERE path=?", (path,))]

    # --- skipped -----------------------------------------------------------
    def set_skipped(self, skipped: dict[str, str], seen: dict[str, tuple[int, int]] | None = None) -> None:
        """Every skipped file with its reason; ``seen``: (size, mtime_ns) of those skipped for their bytes."""
        with self._lock:
            with transaction(self.db):
                self.db.execute("DELETE FROM skipped")
                self.db.execute("DELETE FROM skipped_seen")
                self.db.executemany("INSERT OR REPLACE INTO skipped VALUES (?, ?)", list(skipped.items()))
                self.db.executemany("INSERT OR REPLACE INTO skipped_seen VALUES (?, ?, ?)",
                                    [(p, st[0], st[1]) for p, st in (seen or {}).items() if p in skipped])

    def add_skipped(self, path: str, reason: str, seen: tuple[int, int] | None = None) -> None:
        with self._lock:
            with transaction(self.db):
                self.db.execute("INSERT OR REPLACE INTO skipped VALUES (?, ?)", (path, reason))
                self.db.execute("DELETE FROM skipped_seen WHERE path=?", (path,))
                if seen is not None:
                    self.db.execute("INSERT INTO skipped_seen VALUES (?, ?, ?)", (path, seen[0], seen[1]))

    def skipped_for_bytes(self, paths: Iterable[str] | None = None) -> dict[str, tuple[str, int, int]]:
        """(reason, size, mtime_ns) of the files skipped for what their bytes held, as last read: every one, or
        those of ``paths`` (a save names one file: not a read of the whole list)."""
        sql = "SELECT s.path, s.reason, t.size, t.mtime_ns FROM skipped s JOIN skipped_seen t ON s.path = t.path"
        with self._lock:
            if paths is None:
                rows = self.db.execute(sql).fetchall()
            else:
                rows = []
                wanted = list(paths)
                for i in range(0, len(wanted), 500):
                    part = wanted[i: i + 500]
                    rows += self.db.execute(sql + f" WHERE s.path IN ({','.join('?' * len(part))})", part).fetchall()
        return {p: (r, size, mtime) for p, r, size, mtime in rows}

    def skip_reason(self, path: str) -> str | None:
        """Why a file is not indexed, when the last run skipped it (binary, too large, a secret file...)."""
        with self._lock:
            row = self.db.execute("SELECT reason FROM skipped WHERE path=?", (path,)).fetchone()
        return row[0] if row else None

    def skipped(self) -> dict[str, str]:
        with self._lock:
            return dict(self.db.execute("SELECT path, reason FROM skipped ORDER BY path").fetchall())

    def redacted_files(self) -> dict[str, str]:
        """path → the secrets redacted in its text, in words, for each file that had any."""
        with self._lock:
            return dict(self.db.execute("SELECT path, note FROM files WHERE note IS NOT NULL AND note != '' "
                                        "ORDER BY path").fetchall())

    def replaced_files(self) -> list[str]:
        with self._lock:
            return [r[0] for r in self.db.execute("SELECT path FROM files WHERE replaced=1 ORDER BY path")]

    # --- chunks ------------------------------------------------------------
    def chunks_by_ids(self, ids: list[str]) -> dict[str, ChunkRow]:
        out: dict[str, ChunkRow] = {}
        with self._lock:
            for i in range(0, len(ids), 500):
                part = ids[i: i + 500]
                q = f"SELECT {_CHUNK_COLS} FROM chunks WHERE id IN ({','.join('?' * len(part))})"
                for r in self.db.execute(q, part):
                    out[r[0]] = _chunk(r)
        return out

    def all_chunks(self) -> list[ChunkRow]:
        with self._lock:
            return [_chunk(r) for r in self.db.execute(f"SELECT {_CHUNK_COLS} FROM chunks ORDER BY path, start_line")]

    def chunks_of(self, path: str) -> list[ChunkRow]:
        with self._lock:
            rows = self.db.execute(f"SELECT {_CHUNK_COLS} FROM chunks WHERE path=? ORDER BY ord", (path,)).fetchall()
        return [_chunk(r) for r in rows]

    def last_lines(self, paths: list[str]) -> dict[str, int]:
        """Each of ``paths`` with chunks -> the last line its chunks reach (where its text ends, blank lines after
        aside)."""
        want = list(dict.fromkeys(paths))
        out: dict[str, int] = {}
        with self._lock:
            for i in range(0, len(want), 500):
                part = want[i: i + 500]
                out.update(self.db.execute(f"SELECT path, MAX(end_line) FROM chunks WHERE path IN "
                                           f"({','.join('?' * len(part))}) GROUP BY path", part).fetchall())
        return out

    def chunks_of_paths(self, paths: list[str]) -> dict[str, list[ChunkRow]]:
        """:meth:`chunks_of` for many files in one query per 500 paths: each path with chunks -> its chunks
        in ``ord`` order (a path without chunks is absent). An answer reads its top files' chunks at once."""
        want = list(dict.fromkeys(paths))
        out: dict[str, list[ChunkRow]] = {}
        with self._lock:
            rows = []
            for i in range(0, len(want), 500):
                part = want[i: i + 500]
                rows += self.db.execute(f"SELECT {_CHUNK_COLS} FROM chunks WHERE path IN ({','.join('?' * len(part))}) "
                                        "ORDER BY path, ord", part).fetchall()
        for r in rows:
            got = out.get(r[1])
            if got is None:
                got = out[r[1]] = []
            got.append(_chunk(r))
        return out

    def first_chunks(self, paths: list[str]) -> dict[str, ChunkRow]:
        """Each path's first chunk (lowest ``ord``, ``chunks_of(path)[0]``), one query per 500 paths; a path
        without chunks is absent. SQLite takes a bare column's value from the row holding ``MIN(ord)``."""
        want = list(dict.fromkeys(paths))
        out: dict[str, ChunkRow] = {}
        with self._lock:
            rows = []
            for i in range(0, len(want), 500):
                part = want[i: i + 500]
                rows += self.db.execute(f"SELECT {_CHUNK_COLS}, MIN(ord) FROM chunks WHERE path IN "
                                        f"({','.join('?' * len(part))}) GROUP BY path", part).fetchall()
        for r in rows:
            out[r[1]] = _chunk(r)
        return out

    def _unembedded(self, cols: str, limit: int, newest_first: bool) -> list[tuple[Any, ...]]:
        """``cols`` (names in the chunk table) of the chunks not yet embedded, in the order written or the last
        written first, read off the ``unembedded`` table, which holds the rowids in order (no sort); an
        older manifest read only (``_flagged``) by its flags."""
        order = "DESC" if newest_first else "ASC"
        with self._lock:
            sql = (f"SELECT {cols} FROM chunks WHERE embedded=0 ORDER BY rowid {order} LIMIT ?" if self._flagged()
                   else f"SELECT {','.join('c.' + k for k in cols.split(','))} FROM unembedded u CROSS JOIN chunks c "
                        f"ON c.rowid = u.rid ORDER BY u.rid {order} LIMIT ?")
            return self.db.execute(sql, (limit,)).fetchall()

    def unembedded(self, limit: int, newest_first: bool = False) -> list[ChunkRow]:
        """Chunks not yet embedded, in the order written or (``newest_first``) the last written first."""
        return [_chunk(r) for r in self._unembedded(_CHUNK_COLS, limit, newest_first)]

    def unembedded_keys(self, limit: int, newest_first: bool = False) -> list[ChunkKey]:
        """:meth:`unembedded`'s chunks without their text and symbols: what the vector pass needs of the chunks
        whose vectors are cached or came from the embedding processes (most of them, after a lexical pass
        with embedding beside it); it reads the text of the others alone (:meth:`chunks_by_ids`). Reading every
        chunk this way at 100k files, 2,048 a step: 1.35 s of CPU against 3.2-3.7 s with texts and symbols
        (session 35, bench/RESULTS.md)."""
        return [ChunkKey(*r) for r in self._unembedded("id,path,kind,content_hash", limit, newest_first)]

    def unembedded_after(self, rowid: int, limit: int, model: str) -> tuple[list[ChunkRow], int]:
        """Chunks above ``rowid`` neither embedded nor with a vector of ``model`` cached, in the order written,
        and the last one's rowid (``rowid`` when none): the embedding processes' feed during the vector pass,
        which walks from the other end. The cached ones are passed over here: at 100k files the first 32k
        chunks were, 4,096 a step, and the processes sat idle for 10 s at the start of the pass (session 33)."""
        with self._lock:
            rows = self.db.execute(
                f"SELECT c.rowid,{_CHUNK_COLS_C} FROM "
                # Ordered by the table's own key: ORDER BY c.rowid sorted every chunk above the cursor (a review).
                + ("chunks c WHERE c.embedded=0 AND c.rowid>? " if self._flagged() else
                   "unembedded u CROSS JOIN chunks c ON c.rowid = u.rid WHERE u.rid>? ")
                + "AND NOT EXISTS (SELECT 1 FROM embed_cache e WHERE e.model=? AND e.content_hash=c.content_hash) "
                + ("ORDER BY c.rowid LIMIT ?" if self._flagged() else "ORDER BY u.rid LIMIT ?"),
                (rowid, model, limit)).fetchall()
        return [_chunk(r[1:]) for r in rows], (rows[-1][0] if rows else rowid)

    def store_embedded(self, model: str, fresh: list[tuple[str, np.ndarray]], ids: list[str],
                       owe_chroma: bool) -> int:
        """One vector-pass batch in one transaction: ``fresh`` vectors into the embedding cache, Chroma owed
        an 'add' of ``ids`` (``owe_chroma``: the exact search answers, Chroma is written later), and ``ids``
        marked embedded. Three transactions a batch before (session 31): a commit rewrites the pages it
        touched to the write-ahead log, and a cold index's 2-3 s of COMMIT were more than half in these;
        one also means a kill never leaves a chunk marked embedded without its owed 'add'. The turn is taken
        before the counts are keyed: the build beside this pass cannot commit in between, so the adjusted counts
        stay current and a question's counts() is not counted anew after each such write. Returns how many of
        ``ids`` were not marked before."""
        with self._lock, self.turns.first(), self._counted() as tally:
            with transaction(self.db):
                if fresh:
                    self.db.executemany("INSERT OR REPLACE INTO embed_cache VALUES (?,?,?)",
                                        [(model, h, v.astype(np.float32).tobytes()) for h, v in fresh])
                if owe_chroma:
                    self.db.executemany("INSERT OR REPLACE INTO chroma_pending VALUES (?, 'add')", [(i,) for i in ids])
                marked = self.db.executemany(
                    "UPDATE chunks SET embedded=1 WHERE id=? AND embedded=0" if self._flagged() else
                    "DELETE FROM unembedded WHERE rid = (SELECT rowid FROM chunks WHERE id=?)",
                    [(i,) for i in ids]).rowcount
            if tally is not None:
                tally["vectors"] += marked
        return marked

    def reset_embedded(self) -> None:
        with self._lock:
            with transaction(self.db):
                self.db.execute("UPDATE chunks SET embedded=0" if self._flagged() else
                                "INSERT OR IGNORE INTO unembedded SELECT rowid FROM chunks")
                self.db.execute("DELETE FROM chroma_pending")  # Chroma is emptied and refilled: nothing is owed
            self._moved += 1

    # --- Chroma writes left for later ----------------------------------------
    def defer_chroma(self, ids: list[str], op: str) -> None:
        """Owe Chroma ``op`` ('add' or 'del') for ``ids``; the later word for an id wins."""
        with self._lock:
            with transaction(self.db):
                self.db.executemany("INSERT OR REPLACE INTO chroma_pending VALUES (?, ?)",
                                    [(i, op) for i in ids])

    def chroma_pending(self) -> tuple[list[str], list[ChunkRow]]:
        """What Chroma is owed, as it stands now: ids to delete (no longer in the manifest: a 'del' for a
        chunk that is back, or never left, is void) and embedded chunks to add."""
        with self._lock:
            dels = [r[0] for r in self.db.execute(
                "SELECT p.id FROM chroma_pending p WHERE p.op='del' AND NOT EXISTS "
                "(SELECT 1 FROM chunks c WHERE c.id = p.id)")]
            adds = [_chunk(r) for r in self.db.execute(
                f"SELECT {', '.join('c.' + c for c in _CHUNK_COLS.split(','))} FROM chroma_pending p "
                f"CROSS JOIN chunks c ON c.id = p.id WHERE p.op='add' AND {self._emb('c')}")]  # see chroma_owed
        return dels, adds

    def chroma_owed(self) -> int:
        """Chunks marked embedded that Chroma does not hold yet (their 'add' is pending)."""
        with self._lock:
            key = (int(self.db.execute("PRAGMA data_version").fetchone()[0]), self.db.total_changes)
            if self._owed is not None and self._owed[0] == key:
                return self._owed[1]
            # CROSS JOIN keeps the (usually empty) pending table outside: with a plain JOIN SQLite walked
            # every embedded chunk through its index first (0.40 s of spring-boot's first answer, 37k chunks).
            n = int(self.db.execute("SELECT COUNT(*) FROM chroma_pending p CROSS JOIN chunks c ON c.id = p.id "
                                    f"WHERE p.op='add' AND {self._emb('c')}").fetchone()[0])
            self._owed = (key, n)
            return n

    def chroma_behind(self) -> bool:
        with self._lock:
            return self.db.execute("SELECT 1 FROM chroma_pending LIMIT 1").fetchone() is not None

    def clear_chroma_pending(self) -> None:
        with self._lock:
            self.db.execute("DELETE FROM chroma_pending")

    def embedded_ids_of(self, path: str) -> set[str]:
        with self._lock:
            # Through the path's few rows (an older manifest's index on its flag walked every embedded chunk,
            # 40 ms on spring-boot's 36,567 at every update of a file, hence `+`: issue 18).
            emb = self._emb().replace("chunks.embedded", "+chunks.embedded")
            return {r[0] for r in self.db.execute(f"SELECT id FROM chunks WHERE path=? AND {emb}", (path,))}

    def iter_chunks(self, batch: int = 2000) -> Iterator[list[ChunkRow]]:
        """Every chunk, in batches (rebuilding the lexical store from the manifest)."""
        last = ""
        while True:
            with self._lock:
                rows = self.db.execute(f"SELECT {_CHUNK_COLS} FROM chunks WHERE id > ? ORDER BY id LIMIT ?",
                                       (last, batch)).fetchall()
            if not rows:
                return
            last = rows[-1][0]
            yield [_chunk(r) for r in rows]

    def empty_files(self) -> list[tuple[str, str]]:
        """(path, kind) of indexed files without chunks (all whitespace): one empty lexical doc each."""
        with self._lock:
            return self.db.execute("SELECT path, kind FROM files WHERE n_chunks=0").fetchall()

    def chunk_starts(self, paths: list[str] | None = None) -> list[tuple[str, str, int]]:
        """(chunk id, path, start line), ordered by path then line: of every chunk, or of ``paths``."""
        with self._lock:
            if paths is None:
                return self.db.execute("SELECT id, path, start_line FROM chunks ORDER BY path, start_line").fetchall()
            marks = ",".join("?" * len(paths))
            return self.db.execute(f"SELECT id, path, start_line FROM chunks WHERE path IN ({marks}) "
                                   "ORDER BY path, start_line", list(paths)).fetchall()

    def counts(self) -> dict[str, int]:
        """Files, chunks, embedded chunks and symbols. Every query reads them, and counting grows with
        the index (2-4 ms on spring-boot's 36,567 chunks, ~90 ms on the 100k workspace), so they are
        counted again only when another connection committed (``data_version``) or this one wrote them
        without adjusting them (``_moved``)."""
        with self._lock:
            key = (self.data_version(), self._moved)
            if self._counts is not None and self._counts[0] == key:
                return dict(self._counts[1])
            files = self.db.execute("SELECT COUNT(*) FROM files").fetchone()[0]
            chunks = self.db.execute("SELECT COUNT(*) FROM chunks").fetchone()[0]
            emb = (self.db.execute("SELECT COUNT(*) FROM chunks WHERE embedded=1").fetchone()[0] if self._flagged()
                   else chunks - self.db.execute("SELECT COUNT(*) FROM unembedded").fetchone()[0])
            syms = self.db.execute("SELECT COUNT(*) FROM symbols").fetchone()[0]
            out = {"files": files, "chunks": chunks, "vectors": emb, "symbols": syms}
            self._counts = (key, out)
            return dict(out)

    @contextmanager
    def _counted(self) -> Iterator[dict[str, int] | None]:
        """Around a write that knows what it does to :meth:`counts` (the caller holds the lock): yields the
        counts to adjust when they are current (None when not: the next call counts anew), and keys the
        adjusted ones to the state after the write, unless another connection committed in between. A
        save recounted every table (0.09 s on the 100k workspace's 439,715 chunks, and again for the
        first question after it). A write that raises keys nothing, so the next call counts."""
        key = (self.data_version(), self._moved)
        tally = dict(self._counts[1]) if self._counts is not None and self._counts[0] == key else None
        try:
            yield tally
        except BaseException:
            self._moved += 1
            raise
        after = self.data_version()
        self._moved += 1
        # Another connection committed meanwhile (data_version moved): its rows are not in the tally.
        if tally is not None and after == key[0]:
            self._counts = ((after, self._moved), tally)

    def sample_embedded(self) -> ChunkRow | None:
        """An embedded chunk, picked at random (the model probe's): the first embedded row from a random
        rowid on. ``ORDER BY RANDOM()`` read and sorted every embedded row, 0.27 s of the first question at
        100,000 files (bench/RESULTS.md, session 23)."""
        if self.counts()["vectors"] == 0:
            return None
        with self._lock:
            emb = self._emb()
            sql = f"SELECT {_CHUNK_COLS} FROM chunks WHERE {emb} AND rowid >= ? ORDER BY rowid LIMIT 1"
            top = self.db.execute("SELECT MAX(rowid) FROM chunks").fetchone()[0]
            if top is None:
                return None
            # Point lookups first: the walk below reads chunk rows until an embedded one, which is the whole
            # table while a first vector pass has marked few (the flag's index answered it in one seek before).
            for _ in range(SAMPLE_TRIES):
                r = self.db.execute(f"SELECT {_CHUNK_COLS} FROM chunks WHERE rowid = ? AND {emb}",
                                    (random.randint(1, top),)).fetchone()
                if r:
                    return _chunk(r)
            r = self.db.execute(sql, (random.randint(1, top),)).fetchone() or self.db.execute(sql, (0,)).fetchone()
        return _chunk(r) if r else None

    # --- the symbol-name index of a large run (issue 18) -----------------------
    # Of the manifest's indexes, the case-insensitive one on symbol names is the one whose inserts land at
    # random places: each 64-file transaction dirtied hundreds of its pages, each written to the WAL again.
    # A large run writes its symbols without it and builds it once at the lexical pass's end. Replaying the
    # 100k workspace's manifest writes (665,708 symbols; two interleaved rounds, session 33): 39.8 / 41.5 s
    # -> 30.4 / 36.9 s, plus 0.9 s for the build. Meanwhile a lookup by name scans the table (same answers);
    # a run killed before the build leaves it to the next index run, of any size (a server's catch-up at its
    # start; a manifest older than the index gets it the same way). (The index on the embedded flag, measured
    # then at 2-4 s, was replaced by the table of chunks to embed in session 34.)
    def defer_name_index(self) -> None:
        with self._lock:
            self.db.execute(f"DROP INDEX IF EXISTS {NAME_INDEX}")

    def finish_name_index(self) -> bool:
        """The symbol-name index built when absent (True when it was); a failure is logged, not raised (a
        run's own error is the one to report; the next run builds it)."""
        with self._lock:
            try:
                if self.db.execute("SELECT 1 FROM sqlite_master WHERE name=?", (NAME_INDEX,)).fetchone():
                    return False
                with transaction(self.db, "IMMEDIATE"):
                    self.db.execute(NAME_INDEX_SQL)
                return True
            except sqlite3.Error as e:
                log.warning("%s: symbol-name index not built (%s); lookups by name scan the table until the "
                            "next index run", self.path, e)
                return False

    # --- trigram index (issue 18) --------------------------------------------
    def defer_grams(self) -> None:
        """From now on, chunks written are not added to the trigram index one by one (a transaction per
        file made FTS5 write and merge a segment per file): ``build_grams`` adds them in bulk. Removals
        of chunks already in it still happen row by row. A no-op when already deferred, or when the
        manifest's triggers could not be upgraded at open (they add every chunk themselves)."""
        if not self.bulk_grams:
            return
        with self._lock:
            with transaction(self.db, "IMMEDIATE"):
                self.db.execute("INSERT OR IGNORE INTO state SELECT 'grams_upto', CAST(COALESCE(MAX(rowid), 0) "
                                "AS TEXT) FROM chunks")

    def build_grams(self, batch: int = GRAMS_BATCH, finish: bool = True) -> int:
        """Add every chunk above the watermark to the trigram index, ``batch`` chunks per transaction, each
        moving the watermark with it (a kill leaves an index that is complete up to it; the next call goes
        on from there). ``finish``: the last one removes it, so chunks are added row by row again; else it
        stays, at the last chunk, and the run's next chunks wait for the next call. Returns chunks added."""
        return _build_grams(self.db, self._lock, batch, finish)

    def bulk_writes(self, on: bool) -> None:
        """A large run's writes: checkpoints every WAL_CHECKPOINT_PAGES pages (``on``); then (off) the default
        again and a checkpoint now, at the run's end rather than in a later save. A no-op when already so."""
        if on == self._bulk:
            return
        with self._lock:
            self._bulk = on
            if on:
                _checkpoint_less_often(self.db)
                return
            self.db.execute(f"PRAGMA wal_autocheckpoint={WAL_CHECKPOINT_DEFAULT}")
            try:
                self.db.execute("PRAGMA wal_checkpoint(PASSIVE)")  # never waits for readers or writers
            except sqlite3.OperationalError as e:  # busy: the next commit past the default does it
                log.info("%s: checkpoint at the end of a large run: %s", self.path, e)

    def build_grams_apart(self, stop: threading.Event, batch: int = GRAMS_BATCH) -> int:
        """:meth:`build_grams` (``finish``) on a connection of its own, for a thread beside this one's
        writes: FTS5 builds in C with the GIL released, so a run's trigram index is made while its vector
        pass runs instead of after it, on one core with the other idle (issue 18: the last 3.3 s of
        spring-boot's cold index, 50 s at 100k files). The two connections' write transactions take
        turns (SQLite's write lock, waited for up to 30 s). ``stop``: checked between batches; the
        watermark stays where it is, and the next build goes on from there."""
        db = sqlite3.connect(str(self.path), check_same_thread=False, isolation_level=None, timeout=30)
        try:
            db.execute("PRAGMA synchronous=NORMAL")
            _checkpoint_less_often(db)
            db.execute("PRAGMA secure_delete=ON")  # a per-connection setting, as in __init__
            return _build_grams(db, self.turns, batch, True, stop)
        finally:
            db.close()

    def grams_behind(self, cap: int | None = None) -> int:
        """Chunks the trigram index does not hold yet (0 when it holds every one): a run is adding them,
        or one was stopped or killed before it did (the next index run adds them first). ``cap``: count at
        most that many plus one (every question asks while a run is under way: counting all of a large run's
        chunks read their rows, 240 ms warm and 15 s cold at 100k files)."""
        with self._lock:
            row = self.db.execute("SELECT CAST(value AS INTEGER) FROM state WHERE key='grams_upto'").fetchone()
            if row is None:
                return 0
            if cap is None:
                return int(self.db.execute("SELECT COUNT(*) FROM chunks WHERE rowid > ?", (row[0],)).fetchone()[0])
            return int(self.db.execute("SELECT COUNT(*) FROM (SELECT 1 FROM chunks WHERE rowid > ? LIMIT ?)",
                                       (row[0], cap + 1)).fetchone()[0])

    def find_literal(self, literal: str, limit: int) -> list[tuple[str, str]]:
        """(chunk id, path) of chunks containing ``literal`` verbatim, case-insensitively, in rowid order.

        The trigram index has no positions (detail=none), so the chunks holding all of the literal's
        trigrams (up to ``LITERAL_GRAMS`` of them, spread along it) are candidates and each one's text is
        checked for the whole literal, its case folded as the trigram tokenizer folds it (:func:`fold`). Past
        ``CHECKED_PER_RESULT`` candidates per result asked for it stops and logs it, so a literal whose trigrams
        are all common but rarely adjacent may find fewer chunks than hold it. FTS5's query parser
        ends a phrase at a NUL character and its tokenizer ends a chunk's indexed text at its first NUL, so
        only the part before a NUL is looked up (fewer than 3 characters there: nothing is found) and the
        check reads the whole literal."""
        part = literal.split("\0", 1)[0]
        if len(part) < 3 or limit <= 0:
            return []
        # The trigrams as written: FTS5 folds the query's tokens itself, the way it folded the chunks'.
        grams = list(dict.fromkeys(part[k: k + 3] for k in range(len(part) - 2)))
        if len(grams) > LITERAL_GRAMS:
            step = (len(grams) - 1) / (LITERAL_GRAMS - 1)
            grams = [grams[round(k * step)] for k in range(LITERAL_GRAMS)]
        want = fold(literal)
        out: list[tuple[str, str]] = []
        checked = 0
        cap = CHECKED_PER_RESULT * limit
        with self._lock:
            cur = self.db.execute("SELECT c.id, c.path, c.text FROM chunk_grams g JOIN chunks c ON c.rowid = g.rowid "
                                  "WHERE chunk_grams MATCH ? ORDER BY g.rowid",
                                  (" AND ".join(_phrase(g) for g in grams),))
            while len(out) < limit and (rows := cur.fetchmany(256)):
                if checked >= cap:
                    log.info("%s: literal %r: stopped after %d chunks holding its trigrams, %d of them holding it",
                             self.path, literal[:60], checked, len(out))
                    break
                checked += len(rows)
                out += [(i, p) for i, p, text in rows if want in fold(text)]
        return out[:limit]

    # --- structure ---------------------------------------------------------
    def all_imports(self) -> list[tuple[str, str]]:
        with self._lock:
            return self.db.execute("SELECT path, spec FROM imports").fetchall()

    def imports_of(self, paths: list[str]) -> dict[str, list[str]]:
        """Each path's import specs, in the order :meth:`all_imports` gives them (every path a key)."""
        out: dict[str, list[str]] = {p: [] for p in paths}
        with self._lock:
            rows = self.db.execute(f"SELECT path, spec FROM imports WHERE path IN ({','.join('?' * len(paths))}) "
                                   "ORDER BY rowid", list(paths)).fetchall()
        for p, spec in rows:
            out[p].append(spec)
        return out

    def set_cochange(self, pairs: dict[tuple[str, str], float], head: str, commits: int, version: int = 1,
                     changes: dict[str, float] | None = None,
                     messages: list[tuple[str, list[str]]] | None = None) -> None:
        with self._lock:
            with transaction(self.db):
                self.db.execute("DELETE FROM cochange")
                self.db.execute("DELETE FROM changes")
                self.db.execute("DELETE FROM commit_messages")
                self.db.executemany("INSERT INTO cochange VALUES (?,?,?)",
                                    [(a, b, w) for (a, b), w in pairs.items()])
                self.db.executemany("INSERT INTO changes VALUES (?,?)", list((changes or {}).items()))
                self.db.executemany("INSERT INTO commit_messages VALUES (?,?)",
                                    [(m, json.dumps(files)) for m, files in messages or ()])
                self.db.execute("INSERT OR REPLACE INTO state VALUES ('cochange', ?)",
                                (json.dumps({"head": head, "commits": commits, "pairs": len(pairs),
                                             "messages": len(messages or ()), "version": version,
                                             "read": uuid.uuid4().hex}),))  # readers' caches key on it

    def change_weights(self, paths: list[str]) -> dict[str, float]:
        """Each path's weighted change count in the history read for co-change (absent: never changed there)."""
        out: dict[str, float] = {}
        with self._lock:
            for i in range(0, len(paths), 500):
                part = paths[i:i + 500]
                try:
                    out.update(self.db.execute(
                        f"SELECT path, weight FROM changes WHERE path IN ({','.join('?' * len(part))})", part).fetchall())
                except sqlite3.OperationalError as e:
                    if "no such table" not in str(e):
                        raise
                    return {}  # an older manifest opened read-only: no change counts, as outside git
        return out

    def commit_messages(self) -> list[tuple[str, list[str]]]:
        """The history's commit messages, newest first, each with the indexed files it changed."""
        with self._lock:
            try:
                rows = self.db.execute("SELECT message, files FROM commit_messages ORDER BY rowid").fetchall()
            except sqlite3.OperationalError as e:
                if "no such table" not in str(e):
                    raise
                return []  # an older manifest opened read-only: no messages, as outside git
        return [(m, json.loads(f)) for m, f in rows]

    def cochanged_with(self, path: str, limit: int = 50) -> list[tuple[str, float]]:
        with self._lock:
            return self.db.execute("SELECT b, weight FROM cochange WHERE a=? ORDER BY weight DESC LIMIT ?",
                                   (path, limit)).fetchall()

    # --- symbols -----------------------------------------------------------
    def all_symbols(self, paths: dict[str, str] | None = None) -> list[SymbolRecord]:
        """Every definition; ``paths`` (path -> the same string) gives each record its file's one path
        object instead of a copy per row."""
        with self._lock:
            rows = self.db.execute("SELECT name, kind, path, line, end_line, container FROM symbols").fetchall()
        if paths is None:
            return [SymbolRecord(*r) for r in rows]
        return [SymbolRecord(n, k, paths.get(p, p), ln, e, c) for n, k, p, ln, e, c in rows]

    def symbols_named(self, names: list[str]) -> list[SymbolRecord]:
        """The definitions whose name equals one of ``names`` with ASCII case folded (SQLite's NOCASE: the
        caller folds the rest), 500 names a query: the definitions of one name in row order."""
        out: list[SymbolRecord] = []
        with self._lock:
            for i in range(0, len(names), 500):
                part = names[i: i + 500]
                rows = self.db.execute("SELECT name, kind, path, line, end_line, container FROM symbols WHERE name "
                                       f"COLLATE NOCASE IN ({','.join('?' * len(part))}) ORDER BY rowid", part).fetchall()
                out.extend(SymbolRecord(*r) for r in rows)
        return out

    def symbol_names(self, non_ascii: bool = False) -> list[str]:
        """Every distinct definition name (one read of the name index); ``non_ascii``: only those with a
        character outside printable ASCII (what SQLite's NOCASE does not fold)."""
        where = " WHERE name GLOB '*[^ -~]*'" if non_ascii else ""
        with self._lock:
            return [r[0] for r in self.db.execute(f"SELECT DISTINCT name FROM symbols{where}")]

    def symbols_in(self, paths: list[str]) -> list[SymbolRecord]:
        """The definitions of ``paths`` in the order :meth:`all_symbols` gives them (row order)."""
        with self._lock:
            rows = self.db.execute("SELECT name, kind, path, line, end_line, container FROM symbols "
                                   f"WHERE path IN ({','.join('?' * len(paths))}) ORDER BY rowid", list(paths)).fetchall()
        return [SymbolRecord(*r) for r in rows]

    def symbols_of(self, path: str) -> list[SymbolRecord]:
        with self._lock:
            rows = self.db.execute(
                "SELECT name, kind, path, line, end_line, container FROM symbols WHERE path=? ORDER BY line",
                (path,)).fetchall()
        return [SymbolRecord(*r) for r in rows]

    # --- embedding cache (content-addressed: identical chunks embed once) ---
    def _cache_rows(self, cols: str, model: str, hashes: list[str]) -> Iterator[tuple[Any, ...]]:
        """``cols`` of the embedding cache's rows for ``model`` and ``hashes`` (500 a query)."""
        with self._lock:
            for i in range(0, len(hashes), 500):
                part = hashes[i: i + 500]
                q = f"SELECT {cols} FROM embed_cache WHERE model=? AND content_hash IN ({','.join('?' * len(part))})"
                yield from self.db.execute(q, [model, *part]).fetchall()

    def cached_vectors(self, model: str, hashes: list[str]) -> dict[str, np.ndarray]:
        return {h: np.frombuffer(blob, dtype=np.float32) for h, blob in self._cache_rows("content_hash, vec", model, hashes)}

    def cached_hashes(self, model: str, hashes: list[str]) -> set[str]:
        """Which of ``hashes`` the embedding cache holds a vector of for ``model`` (their blobs unread)."""
        return {h for (h,) in self._cache_rows("content_hash", model, hashes)}

    def cache_vectors(self, model: str, items: Iterator[tuple[str, np.ndarray]] | list[tuple[str, np.ndarray]]) -> None:
        with self._lock, self.turns.first():
            with transaction(self.db):
                self.db.executemany("INSERT OR REPLACE INTO embed_cache VALUES (?,?,?)",
                                    [(model, h, v.astype(np.float32).tobytes()) for h, v in items])

    def drop_cached(self, model: str, width: int | None = None) -> int:
        """Remove ``model``'s cached vectors: those whose blob is not ``width`` bytes, or all of them (None)."""
        with self._lock:
            with transaction(self.db):
                if width is None:
                    return self.db.execute("DELETE FROM embed_cache WHERE model=?", (model,)).rowcount
                return self.db.execute("DELETE FROM embed_cache WHERE model=? AND length(vec) != ?",
                                       (model, width)).rowcount

    def prune_embed_cache(self, model: str, keep: int, chunks: int) -> int:
        """Drop the oldest cached vectors no indexed chunk of ``model`` uses (other models' included) beyond the
        ``keep`` newest such; returns how many went. The cache keeps them for a revert, a branch switched back or
        a model switched back, but each edit an editor indexes adds its chunks' new vectors, and without a bound
        the manifest grew by every edit ever made (and the exact search's load streams every row of the model).
        A rowid is when the vector was written: the oldest written go first. ``chunks``: the index's chunk count.
        The bound kept is on the whole cache: at most ``chunks + keep`` rows (then at most ``keep`` unused when no two
        chunks share a text; copies make it more, review). Reading which are unused took 1.5-2.1 s on the 100k
        workspace (233k cached, 440k chunks), so it is read only past that bound (the count: 0.02-0.09 s there)."""
        with self._lock, self.turns.first():
            total = self.db.execute("SELECT COUNT(*) FROM embed_cache").fetchone()[0]
            if total <= chunks + keep:
                return 0
            unused = [r for (r,) in self.db.execute(
                "SELECT rowid FROM embed_cache WHERE model IS NOT ? "
                "OR content_hash NOT IN (SELECT content_hash FROM chunks) ORDER BY rowid", (model,))]
            drop = unused[: max(len(unused) - keep, 0)]
            if not drop:
                return 0
            with transaction(self.db):
                for i in range(0, len(drop), 500):
                    part = drop[i: i + 500]
                    self.db.execute(f"DELETE FROM embed_cache WHERE rowid IN ({','.join('?' * len(part))})", part)
        return len(drop)

    def embedded_vectors(self, model: str, paths: list[str] | None = None) -> list[tuple[str, str, bytes]]:
        """(chunk id, path, float32 blob) of every embedded chunk (or those of ``paths``) whose vector
        ``model`` (weights sha) cached: the exact vector search's matrix, in one join. Unordered (an
        ORDER BY id cost 0.6 s of 1.7 s at 200,000 vectors); the search breaks ties by id itself."""
        with self._lock:
            sql = ("SELECT c.id, c.path, e.vec FROM chunks c JOIN embed_cache e "
                   f"ON e.model = ? AND e.content_hash = c.content_hash WHERE {self._emb('c')}")
            if paths is None:
                return self.db.execute(sql, (model,)).fetchall()
            # `+c.embedded` (an older manifest's flag): no index on it, so SQLite takes the path index.
            return self.db.execute(sql.replace("c.embedded", "+c.embedded") + f" AND c.path IN "
                                   f"({','.join('?' * len(paths))})", (model, *paths)).fetchall()

    def embedded_chunk_hashes(self) -> list[tuple[str, str, str]]:
        """(chunk id, path, content hash) of every embedded chunk, by one pass over the table (`+embedded`:
        through the index on it, each row was a random lookup: 13.8 s for 439,715 chunks on the 100k
        workspace, with their vectors joined in)."""
        with self._lock:
            emb = self._emb().replace("chunks.embedded", "+chunks.embedded")
            return self.db.execute(f"SELECT id, path, content_hash FROM chunks WHERE {emb}").fetchall()

    def cached_vector_rows(self, model: str) -> Iterator[tuple[str, bytes]]:
        """(content hash, float32 blob) of every vector ``model`` cached, in key order, as a stream of
        batches read under the lock (the whole cache at once was 240 MB on the 100k workspace)."""
        with self._lock:
            cur = self.db.execute("SELECT content_hash, vec FROM embed_cache WHERE model = ?", (model,))
        while True:
            with self._lock:
                part = cur.fetchmany(4096)
            if not part:
                return
            yield from part

    def data_version(self) -> int:
        """Changes whenever another connection (process) commits to the file; not for our own writes."""
        with self._lock:
            return int(self.db.execute("PRAGMA data_version").fetchone()[0])


def merge_fts_tables(db: sqlite3.Connection) -> None:
    """`optimize` every FTS5 table of ``db``: a deleted row's terms stay in old segments until a merge (the
    rebuild's scrub and the snapshot's both)."""
    names = [r[0] for r in db.execute("SELECT name FROM sqlite_master WHERE type='table' "
                                      "AND sql LIKE 'CREATE VIRTUAL TABLE%USING fts5%'").fetchall()]
    for name in names:
        db.execute(f'INSERT INTO "{name}"("{name}") VALUES (\'optimize\')')
