"""A file's chunk rows rewritten by a save keep the rows whose text comes again (issue 18): the manifest ends
exactly as if every row had been written anew, and the trigram index stays exact (FTS5's own check), while the
unchanged chunks' rows, and so their trigram rows, are not touched."""

from __future__ import annotations

import random
import sqlite3
from pathlib import Path

import pytest

from delphi_ls.indexing.workers import chunk_id
from delphi_ls.stores.meta import ChunkRow, MetaStore

COLS = ("id, path, ord, start_line, end_line, symbols, kind, content_hash, text, "
        "rowid NOT IN (SELECT rid FROM unembedded)")


def _rows(path: str, texts: list[str]) -> list[ChunkRow]:
    out, line = [], 1
    for n, t in enumerate(texts):
        h = f"h:{t}"
        out.append(ChunkRow(chunk_id(path, n, h), path, n, line, line + 2, [f"s{n}"], "code", h, t))
        line += 3
    return out


def _table(meta: MetaStore, path: str) -> list[tuple]:
    return sorted(meta.db.execute(f"SELECT {COLS} FROM chunks WHERE path=?", (path,)).fetchall())


def _intact(meta: MetaStore) -> None:
    """FTS5's integrity check against the chunk texts, on a copy without the chunks above the watermark (not
    added yet): the trigram index holds exactly the chunks at or below it."""
    db = sqlite3.connect(":memory:")
    try:
        meta.db.backup(db)
        db.execute("DELETE FROM chunks WHERE rowid > COALESCE((SELECT CAST(value AS INTEGER) FROM state "
                   "WHERE key='grams_upto'), 9223372036854775807)")
        db.execute("INSERT INTO chunk_grams(chunk_grams, rank) VALUES ('integrity-check', 1)")
    finally:
        db.close()


def _write(meta: MetaStore, path: str, texts: list[str], embedded: set[int] = frozenset()) -> list[ChunkRow]:
    rows = _rows(path, texts)
    meta.replace_file(path, "h", 1, 1, "code", "python", rows, [], False, {rows[i].id for i in embedded if i < len(rows)})
    return rows


def test_a_save_keeps_the_rows_of_unchanged_chunks_and_ends_as_a_fresh_write(tmp_path: Path):
    meta, fresh = MetaStore(tmp_path / "a.sqlite"), MetaStore(tmp_path / "b.sqlite")
    texts = [f"def handler_{i}(request):\n    return respond({i})" for i in range(40)]
    _write(meta, "app.py", texts)
    before = dict(meta.db.execute("SELECT text, rowid FROM chunks"))
    edited = texts[:10] + ["def inserted(request):\n    raise QuotaExceeded('tenant over limit')"] + texts[10:39]
    _write(meta, "app.py", edited, embedded={3, 20})  # one chunk in, the last one out, every later ord moved
    _write(fresh, "app.py", edited, embedded={3, 20})
    assert _table(meta, "app.py") == _table(fresh, "app.py")
    after = dict(meta.db.execute("SELECT text, rowid FROM chunks"))
    assert all(after[t] == before[t] for t in edited if t in before)  # 39 rows kept, ids and places moved
    assert texts[39] not in after
    _intact(meta)
    assert [p for _c, p in meta.find_literal("tenant over limit", 10)] == ["app.py"]
    assert meta.find_literal("respond(39)", 10) == [] and len(meta.find_literal("respond(12)", 10)) == 1
    got = dict(meta.db.execute("SELECT id, rowid NOT IN (SELECT rid FROM unembedded) FROM chunks"))
    assert sum(got.values()) == 2 and meta.counts()["chunks"] == 40 and meta.counts()["vectors"] == 2
    meta.close()
    fresh.close()


def test_random_saves_end_as_fresh_writes_with_the_trigram_index_exact(tmp_path: Path):
    """Duplicated chunks, swaps, deletions and insertions, with and without a deferred trigram index."""
    rnd = random.Random(7)
    words = [f"w{i} literal_{i}" for i in range(12)]
    for deferred in (False, True):
        meta = MetaStore(tmp_path / f"m{deferred}.sqlite")
        if deferred:
            meta.defer_grams()
        texts = [rnd.choice(words) for _ in range(8)]
        for step in range(60):
            texts = list(texts)
            op = rnd.randrange(4)
            if op == 0 and texts:
                texts.pop(rnd.randrange(len(texts)))
            elif op == 1:
                texts.insert(rnd.randrange(len(texts) + 1), rnd.choice(words))
            elif op == 2 and len(texts) > 1:
                i, j = rnd.sample(range(len(texts)), 2)
                texts[i], texts[j] = texts[j], texts[i]
            else:
                rnd.shuffle(texts)
            path, embedded = f"f{step % 3}.py", {rnd.randrange(10)}
            _write(meta, path, texts, embedded)
            ref = MetaStore(tmp_path / "ref.sqlite")
            _write(ref, path, texts, embedded)
            assert _table(meta, path) == _table(ref, path), (step, texts)
            ref.close()
            (tmp_path / "ref.sqlite").unlink()
            for suffix in ("-wal", "-shm"):
                (tmp_path / f"ref.sqlite{suffix}").unlink(missing_ok=True)
            if deferred and rnd.random() < 0.3:  # as a run does after each batch: kept rows now on both sides
                meta.build_grams(finish=False)
            _intact(meta)
        meta.build_grams()
        _intact(meta)
        for w in words:
            lit = w.split()[1]
            want = sorted(p for p, in meta.db.execute("SELECT path FROM chunks WHERE instr(text, ?) > 0", (lit,)))
            assert sorted(p for _c, p in meta.find_literal(lit, 1000)) == want
        meta.close()


def test_an_interrupted_save_leaves_the_old_rows(tmp_path: Path):
    """The rows are rewritten in the file's one transaction: a failure inside it leaves what was there."""
    meta = MetaStore(tmp_path / "m.sqlite")
    _write(meta, "a.py", ["alpha one", "beta two", "gamma three"])
    before = _table(meta, "a.py")
    rows = _rows("a.py", ["gamma three", "alpha one", "delta four"])
    meta.db.execute("CREATE TRIGGER boom BEFORE INSERT ON chunks WHEN new.text = 'delta four' "
                    "BEGIN SELECT RAISE(ABORT, 'disk full'); END")
    with pytest.raises(sqlite3.IntegrityError, match="disk full"):
        meta.replace_file("a.py", "h2", 1, 1, "code", "python", rows, [], False, set())
    assert _table(meta, "a.py") == before
    _intact(meta)
    meta.close()


def test_chunks_that_swap_places_under_ids_without_their_text_do_not_collide(tmp_path: Path):
    """Ids that name only the place (not this project's, which hash the text too) make two chunks that swap
    places take each other's ids: the rows move through placeholders instead of failing on the unique id."""
    meta = MetaStore(tmp_path / "m.sqlite")

    def placed(texts: list[str]) -> list[ChunkRow]:
        return [ChunkRow(f"a.py#{n}", "a.py", n, n + 1, n + 1, [], "code", f"h:{t}", t) for n, t in enumerate(texts)]

    meta.replace_file("a.py", "h", 1, 1, "code", "python", placed(["first text", "second text"]), [], False, set())
    rowids = dict(meta.db.execute("SELECT text, rowid FROM chunks"))
    meta.replace_file("a.py", "h2", 1, 1, "code", "python", placed(["second text", "first text"]), [], False, set())
    assert sorted(meta.db.execute("SELECT id, text FROM chunks")) == [("a.py#0", "second text"), ("a.py#1", "first text")]
    assert dict(meta.db.execute("SELECT text, rowid FROM chunks")) == rowids  # moved, not rewritten
    _intact(meta)
    meta.close()


def test_files_written_in_one_transaction_are_all_or_nothing_and_counted(tmp_path: Path):
    """A batch's files go in one transaction (issue 18): a failure in any file leaves none of the group
    written, and the counts kept by the writes stay those of a recount."""
    from delphi_ls.stores.meta import FileWrite

    meta = MetaStore(tmp_path / "m.sqlite")
    _write(meta, "keep.py", ["kept text"])
    meta.counts()  # counts known: the group's writes adjust them

    def fw(path: str, rows: list[ChunkRow]) -> FileWrite:
        return FileWrite(path, "h", 1, 1, "code", "python", rows, [("f", "function", 1, 2, "")], False, set(), ["py:x"])

    a, b = _rows("a.py", ["first a", "second a"]), _rows("b.py", ["only b"])
    clash = [ChunkRow(a[0].id, "c.py", 0, 1, 2, [], "code", "h:x", "same id as a.py's first")]  # ids are unique
    before = {p: _table(meta, p) for p in ("a.py", "b.py", "c.py")}
    with pytest.raises(sqlite3.IntegrityError):
        meta.replace_files([fw("a.py", a), fw("b.py", b), fw("c.py", clash)])
    assert {p: _table(meta, p) for p in ("a.py", "b.py", "c.py")} == before
    assert meta.file_hashes(["a.py", "b.py"]) == {}
    meta.replace_files([fw("a.py", a), fw("b.py", b)])
    kept = meta.counts()
    meta._counts = None  # a recount from the tables
    assert kept == meta.counts() and kept["files"] == 3 and kept["chunks"] == 4 and kept["symbols"] == 2
    assert sorted(meta.imports_of(["a.py", "b.py"]).items()) == [("a.py", ["py:x"]), ("b.py", ["py:x"])]
    # The vector pass's two orders: as written, and newest first (beside the embedding processes).
    assert [r.text for r in meta.unembedded(2)] == ["kept text", "first a"]
    assert [r.text for r in meta.unembedded(2, newest_first=True)] == ["only b", "second a"]
    _intact(meta)
    meta.close()


def test_a_batch_is_written_in_groups_bounded_by_files_and_chunks():
    from delphi_ls.indexing import pipeline
    from delphi_ls.indexing.workers import Prepared

    items = []
    for n in [1] * 70 + [5000, 3, 4090, 10]:  # chunks of each prepared file
        p = Prepared.__new__(Prepared)
        p.rows = [None] * n
        items.append((None, p))
    sizes = [[len(p.rows) for _e, p in g] for g in pipeline._write_groups(items)]
    assert [len(g) for g in sizes] == [64, 6, 1, 2, 1]  # 64 files; then 6; a large file alone; a cap of chunks
    assert sizes[2] == [5000] and sizes[3] == [3, 4090] and sizes[4] == [10]
    assert sum(map(len, sizes)) == len(items)
