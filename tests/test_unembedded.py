"""The chunks to embed are a table of their own (``unembedded``, stores/meta.py), not a flag rewritten in each
chunk's row (issue 18, session 34): a vector pass leaves the chunk rows alone; an index from before the table is
upgraded from its flags at the first open that can write, and read by its flags where it cannot be written; an
older Delphi that still writes the flag on the same index stays understood."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from delphi_ls import Engine
from delphi_ls.stores.meta import ChunkRow, MetaStore
from tests.conftest import copy_fixture

TARGET = "shipyard/retry.py"


def _truth(meta_path: Path) -> dict[str, int]:
    """Each chunk's id -> 1 when embedded, read from the table (not through MetaStore)."""
    db = sqlite3.connect(str(meta_path))
    try:
        return dict(db.execute("SELECT id, rowid NOT IN (SELECT rid FROM unembedded) FROM chunks"))
    finally:
        db.close()


def _as_before_the_table(meta_path: Path, unembedded_path: str) -> int:
    """Make the manifest what a Delphi before the table wrote: the truth in each row's flag, with the flag's
    index, one file's chunks not embedded. Returns how many chunks that file has."""
    db = sqlite3.connect(str(meta_path), isolation_level=None)
    try:
        db.execute("BEGIN")
        db.execute("UPDATE chunks SET embedded = 1")  # (its triggers empty the table; dropped next)
        db.execute("UPDATE chunks SET embedded = 0 WHERE path = ?", (unembedded_path,))
        for name in ("chunks_unembedded_ai", "chunks_unembedded_ad", "chunks_unembedded_au0", "chunks_unembedded_au1"):
            db.execute(f"DROP TRIGGER {name}")
        db.execute("DROP TABLE unembedded")
        db.execute("CREATE INDEX chunks_embedded ON chunks(embedded)")
        db.execute("COMMIT")
        return db.execute("SELECT COUNT(*) FROM chunks WHERE path = ?", (unembedded_path,)).fetchone()[0]
    finally:
        db.close()


def _indexed(tmp_path: Path) -> tuple[Path, Path, int, str]:
    """The shipyard fixture indexed with vectors: (workspace, index folder, chunks, the model's sha)."""
    ws = copy_fixture("shipyard", tmp_path / "ws")
    idx = tmp_path / "idx"
    with Engine(ws, index_dir=str(idx), reranker="off") as eng:
        eng.index()
        return ws, idx, eng.counts()["chunks"], eng.embedder.identity.weights_sha256


def _indexed_then_older(tmp_path: Path) -> tuple[Path, Path, int, int, str]:
    """:func:`_indexed`, its manifest then made as before the table (:func:`_as_before_the_table`): (workspace,
    index folder, chunks, chunks of TARGET, the model's sha)."""
    ws, idx, n, sha = _indexed(tmp_path)
    k = _as_before_the_table(idx / "meta.sqlite", TARGET)
    assert 0 < k < n
    return ws, idx, n, k, sha


def test_a_vector_pass_marks_chunks_without_rewriting_their_rows(tmp_path: Path):
    ws = copy_fixture("shipyard", tmp_path / "ws")
    idx = tmp_path / "idx"
    with Engine(ws, index_dir=str(idx), reranker="off") as eng:
        eng.index(vectors=False)
        n = eng.counts()["chunks"]
        assert eng.counts()["vectors"] == 0 and set(_truth(idx / "meta.sqlite").values()) == {0}
        eng.meta.db.execute("CREATE TEMP TABLE rewritten (n INTEGER)")
        eng.meta.db.execute("CREATE TEMP TRIGGER count_rewrites AFTER UPDATE ON main.chunks BEGIN "
                            "INSERT INTO rewritten VALUES (1); END")
        rep = eng.index()
        assert rep.chunks_embedded == n and eng.counts()["vectors"] == n
        assert eng.meta.db.execute("SELECT COUNT(*) FROM rewritten").fetchone()[0] == 0
    assert set(_truth(idx / "meta.sqlite").values()) == {1}


def test_an_index_from_before_the_table_is_upgraded_from_its_flags(tmp_path: Path):
    ws, idx, n, k, _sha = _indexed_then_older(tmp_path)
    with Engine(ws, index_dir=str(idx), reranker="off") as eng:
        names = {r[0] for r in eng.meta.db.execute("SELECT name FROM sqlite_master")}
        assert "unembedded" in names and "chunks_embedded" not in names
        assert eng.counts()["vectors"] == n - k
        assert eng.meta.embedded_ids_of(TARGET) == set()
        rep = eng.index()
        assert rep.chunks_embedded == k and rep.vectors_from_cache == k  # the file's vectors were cached
        assert eng.counts()["vectors"] == n
    assert set(_truth(idx / "meta.sqlite").values()) == {1}


def test_an_index_from_before_the_table_that_cannot_be_written_is_read_by_its_flags(tmp_path: Path, monkeypatch):
    _ws, idx, n, k, sha = _indexed_then_older(tmp_path)
    real = sqlite3.connect
    monkeypatch.setattr(sqlite3, "connect", lambda db, *a, **kw: real(f"file:{db}?mode=ro", *a, **{**kw, "uri": True}))
    meta = MetaStore(idx / "meta.sqlite")
    try:
        assert "unembedded" not in {r[0] for r in meta.db.execute("SELECT name FROM sqlite_master")}
        assert meta.counts()["vectors"] == n - k
        assert len(meta.embedded_vectors(sha)) == n - k and len(meta.embedded_chunk_hashes()) == n - k
        assert {r.path for r in meta.unembedded(n)} == {TARGET} and len(meta.unembedded(n)) == k
        other = "shipyard/scheduler.py"
        assert meta.embedded_ids_of(TARGET) == set()
        assert meta.embedded_ids_of(other) == {r.id for r in meta.chunks_of(other)} != set()
        assert meta.sample_embedded() is not None
    finally:
        meta.close()


def test_an_older_delphi_writing_the_flag_is_understood(tmp_path: Path):
    """An older Delphi on the same index inserts chunks with the flag, resets it (a new model) and sets it
    (marks a chunk embedded); the triggers carry each into the table, and a deleted chunk leaves it."""
    ws = copy_fixture("shipyard", tmp_path / "ws")
    idx = tmp_path / "idx"
    with Engine(ws, index_dir=str(idx), reranker="off") as eng:
        eng.index()
        n = eng.counts()["chunks"]
    path = idx / "meta.sqlite"
    db = sqlite3.connect(str(path), isolation_level=None)
    try:
        db.execute("UPDATE chunks SET embedded = 0 WHERE path = ?", (TARGET,))  # what its reset does, here for one file
        k = sum(1 for v in _truth(path).values() if v == 0)
        assert 0 < k < n
        one = db.execute("SELECT id FROM chunks WHERE path = ? LIMIT 1", (TARGET,)).fetchone()[0]
        db.execute("UPDATE chunks SET embedded = 1 WHERE id = ?", (one,))  # its vector pass marking one
        assert _truth(path)[one] == 1 and sum(1 for v in _truth(path).values() if v == 0) == k - 1
        row = db.execute("SELECT * FROM chunks WHERE id = ?", (one,)).fetchone()
        db.execute("DELETE FROM chunks WHERE path = ?", (TARGET,))  # its save of the file: rows out, rows in
        assert db.execute("SELECT COUNT(*) FROM unembedded").fetchone()[0] == 0
        db.execute("INSERT INTO chunks VALUES (?,?,?,?,?,?,?,?,?,?)", (*row[:9], 0))
        assert _truth(path)[one] == 0
        db.execute("DELETE FROM chunks WHERE id = ?", (one,))
        db.execute("INSERT INTO chunks VALUES (?,?,?,?,?,?,?,?,?,?)", (*row[:9], 1))  # a vector it reused
        assert _truth(path)[one] == 1
    finally:
        db.close()


def _plan(meta: MetaStore, sql: str, args: tuple = ()) -> str:
    return " | ".join(r[-1] for r in meta.db.execute("EXPLAIN QUERY PLAN " + sql, args))


def test_the_queries_on_the_table_seek_instead_of_reading_every_chunk(tmp_path: Path, monkeypatch):
    """What each open, each step of a vector pass and the model probe ask must not sort or read every chunk row
    (a review: the feed's ORDER BY on the chunk's rowid sorted all chunks above its cursor at each step; the
    check at each open scanned the table once the flag's index was gone; the probe's walk read it all)."""
    meta = MetaStore(tmp_path / "meta.sqlite")
    meta.replace_file("a.py", "h", 1, 1, "source", "python",
                      [ChunkRow(f"c{i}", "a.py", i, i, i, [], "source", f"h{i}", f"text {i}") for i in range(50)],
                      [], False, set())
    seen: list[tuple[str, tuple]] = []
    monkeypatch.setattr(meta, "db", _Recording(meta.db, seen))
    meta.unembedded_after(0, 10, "m")
    meta.check()
    meta.store_embedded("m", [], [f"c{i}" for i in range(25)], owe_chroma=False)
    assert meta.sample_embedded() is not None
    monkeypatch.undo()
    plans = {sql: _plan(meta, sql, args) for sql, args in seen if sql.lstrip().upper().startswith("SELECT")}
    assert len(plans) >= 5
    for sql, plan in plans.items():
        assert "TEMP B-TREE" not in plan, (sql, plan)
        assert not any(step.strip() in ("SCAN chunks", "SCAN c") for step in plan.split("|")), (sql, plan)
    meta.close()


class _Recording:
    """A connection that records the SQL run through it (for the plans above)."""

    def __init__(self, inner: sqlite3.Connection, seen: list) -> None:
        self.inner, self.seen = inner, seen

    def execute(self, sql: str, args: tuple | list = ()) -> sqlite3.Cursor:
        self.seen.append((sql, tuple(args)))
        return self.inner.execute(sql, args)

    def __getattr__(self, name: str):  # type: ignore[no-untyped-def]
        return getattr(self.inner, name)


def test_an_upgrade_refused_for_the_lock_leaves_no_empty_table_and_reads_the_flags(tmp_path: Path, monkeypatch):
    """An older manifest whose writer holds the lock past the timeout: the upgrade is refused, and opening it must
    not make the table empty by the schema (every chunk would count as embedded, for good; a review)."""
    _ws, idx, n, k, _sha = _indexed_then_older(tmp_path)
    db = sqlite3.connect(str(idx / "meta.sqlite"), isolation_level=None)
    db.execute("DROP TABLE parsed")  # something the schema script adds too, so that it runs
    real = MetaStore._upgrade
    monkeypatch.setattr(MetaStore, "_upgrade", lambda self, needed, change, refused: (
        False if "chunks to embed" in refused else real(self, needed, change, refused)))
    meta = MetaStore(idx / "meta.sqlite")
    try:
        names = {r[0] for r in meta.db.execute("SELECT name FROM sqlite_master")}
        assert "parsed" in names and "unembedded" not in names
        assert meta.counts()["vectors"] == n - k
    finally:
        meta.close()
    monkeypatch.setattr(MetaStore, "_upgrade", real)
    meta = MetaStore(idx / "meta.sqlite")  # the next open that can write upgrades it from the flags
    try:
        assert "unembedded" in {r[0] for r in meta.db.execute("SELECT name FROM sqlite_master")}
        assert meta.counts()["vectors"] == n - k
    finally:
        meta.close()
        db.close()


def test_a_vector_pass_reads_the_text_of_the_chunks_it_embeds_only(tmp_path: Path, monkeypatch):
    """Chunks whose vectors are cached (embedded by the processes beside the lexical pass, or by an earlier run)
    are marked from their keys; only a chunk without a cached vector has its text read and embedded (reading
    every chunk's text: 3.2-3.7 s of CPU at 100k files, 1.35 s so; session 35)."""
    ws, idx, n, _sha = _indexed(tmp_path)
    db = sqlite3.connect(str(idx / "meta.sqlite"), isolation_level=None)
    try:
        db.execute("INSERT INTO unembedded SELECT rowid FROM chunks")  # every chunk to mark again
        uncached, h = db.execute("SELECT id, content_hash FROM chunks WHERE path = ? ORDER BY ord LIMIT 1",
                                 (TARGET,)).fetchone()
        assert db.execute("DELETE FROM embed_cache WHERE content_hash = ?", (h,)).rowcount == 1
        same_text = {i for (i,) in db.execute("SELECT id FROM chunks WHERE content_hash = ?", (h,))}
    finally:
        db.close()
    read: list[str] = []
    real = MetaStore.chunks_by_ids

    def recorded(self, ids):  # type: ignore[no-untyped-def]
        read.extend(ids)
        return real(self, ids)

    monkeypatch.setattr(MetaStore, "chunks_by_ids", recorded)
    monkeypatch.setattr(MetaStore, "unembedded", lambda *_a, **_k: pytest.fail("the pass read every chunk's text"))
    with Engine(ws, index_dir=str(idx), reranker="off") as eng:
        assert eng.counts()["vectors"] == 0
        rep = eng.index()
        assert rep.chunks_embedded == n and eng.counts()["vectors"] == n
        assert rep.vectors_from_cache == n - 1
    assert len(read) == 1 and read[0] in same_text and uncached in same_text
    assert set(_truth(idx / "meta.sqlite").values()) == {1}
