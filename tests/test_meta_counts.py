"""The manifest's counts are cached per file state: every query reads them, and counting grows with the index."""

from __future__ import annotations

import sqlite3
from pathlib import Path

from delphi_ls import Engine
from delphi_ls.stores.meta import MetaStore


def test_counts_follow_own_writes_and_other_connections(tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "a.py").write_text("def alpha():\n    return 1\n")
    with Engine(ws, index_dir=str(tmp_path / "idx"), vectors=False, reranker="off") as eng:
        eng.index()
        assert eng.counts()["files"] == 1 and eng.counts()["symbols"] == 1
        (ws / "b.py").write_text("def beta():\n    return 2\n\ndef gamma():\n    return 3\n")
        eng.index()  # this connection writes
        assert eng.counts()["files"] == 2 and eng.counts()["symbols"] == 3
    meta = MetaStore(tmp_path / "idx" / "meta.sqlite")
    assert meta.counts()["files"] == 2
    other = sqlite3.connect(str(tmp_path / "idx" / "meta.sqlite"))  # another process's commit
    other.execute("DELETE FROM symbols WHERE name = 'gamma'")
    other.commit()
    other.close()
    assert meta.counts()["symbols"] == 2
    got = meta.counts()
    got["files"] = 99  # a caller's copy: the cache is not shared with it
    assert meta.counts()["files"] == 2
    meta.close()


def _recount(index_dir: Path) -> dict[str, int]:
    db = sqlite3.connect(str(index_dir / "meta.sqlite"))
    try:
        q = {"files": "SELECT COUNT(*) FROM files", "chunks": "SELECT COUNT(*) FROM chunks",
             "vectors": "SELECT COUNT(*) FROM chunks WHERE rowid NOT IN (SELECT rid FROM unembedded)", "symbols": "SELECT COUNT(*) FROM symbols"}
        return {k: db.execute(sql).fetchone()[0] for k, sql in q.items()}
    finally:
        db.close()


def test_writes_that_know_their_effect_keep_the_counts_without_counting(tmp_path: Path) -> None:
    """Issue 18: a save, a removal and the vector pass adjust the counts they change instead of making the
    next call count every table (0.09 s a save on the 100k workspace, and again for the next question).
    After each, the counts equal a count from scratch, and no COUNT(*) over a whole table ran."""
    ws = tmp_path / "ws"
    ws.mkdir()
    for i in range(6):
        (ws / f"m{i}.py").write_text("".join(f"def f{i}_{j}(x):\n    return x + {j}\n\n\n" for j in range(150)))
    idx = tmp_path / "idx"
    with Engine(ws, index_dir=str(idx), reranker="off") as eng:
        eng.index()
        assert eng.counts() == _recount(idx) and eng.counts()["vectors"] == eng.counts()["chunks"] > 6
        statements: list[str] = []
        eng.meta.db.set_trace_callback(statements.append)
        steps = [
            lambda: (ws / "m0.py").write_text("def only():\n    return 0\n"),  # fewer chunks and symbols
            lambda: (ws / "m1.py").write_text((ws / "m1.py").read_text() + "def more(y):\n    return y\n"),
            lambda: (ws / "new.py").write_text("class Fresh:\n    def go(self):\n        return 1\n"),  # a new file
            lambda: (ws / "m2.py").unlink(),  # a removal
        ]
        for step, path in zip(steps, ["m0.py", "m1.py", "new.py", "m2.py"], strict=True):
            step()
            statements.clear()
            eng.index(only=[path], reembed=False)  # a save: lexical rows, then this file's vectors
            got = eng.counts()  # what the next question reads
            assert not [s for s in statements if "COUNT(*) FROM files" in s or "COUNT(*) FROM symbols" in s], path
            assert got == _recount(idx), path
        eng.meta.db.set_trace_callback(None)
        assert eng.counts()["files"] == 6 and eng.counts()["vectors"] == eng.counts()["chunks"]
        other = sqlite3.connect(str(idx / "meta.sqlite"))  # another process's commit: counted anew
        other.execute("DELETE FROM symbols WHERE name = 'only'")
        other.commit()
        other.close()
        (ws / "m3.py").write_text("def changed():\n    return 3\n")
        eng.index(only=["m3.py"], reembed=False)
        assert eng.counts() == _recount(idx)


def test_a_commit_of_another_connection_during_a_write_drops_the_adjustment(tmp_path: Path) -> None:
    """The adjustment is only the writer's own rows: another connection that commits between the counts'
    check and the write's end makes the next call count anew (its rows are in no tally)."""
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "a.py").write_text("def alpha():\n    return 1\n")
    with Engine(ws, index_dir=str(tmp_path / "idx"), vectors=False, reranker="off") as eng:
        eng.index()
    meta = MetaStore(tmp_path / "idx" / "meta.sqlite")
    try:
        before = meta.counts()
        with meta._lock, meta._counted() as tally:
            assert tally == before
            other = sqlite3.connect(str(tmp_path / "idx" / "meta.sqlite"))
            other.execute("INSERT INTO symbols VALUES ('beta', 'function', 'a.py', 4, 5, NULL)")
            other.commit()
            other.close()
        assert meta.counts() == _recount(tmp_path / "idx") and meta.counts()["symbols"] == before["symbols"] + 1
    finally:
        meta.close()


def test_chroma_owed_follows_own_writes_and_other_connections(tmp_path: Path) -> None:
    """What Chroma is owed is counted once per manifest state: health counted every pending add joined with
    its chunk twice a call, 20-40 s at the 100k workspace where all 439,715 are owed (session 24)."""
    ws = tmp_path / "ws"
    ws.mkdir()
    for i in range(4):
        (ws / f"m{i}.py").write_text(f"def f{i}():\n    return {i}\n\n\ndef g{i}():\n    return {i}\n")
    with Engine(ws, index_dir=str(tmp_path / "idx"), reranker="off") as eng:
        eng.index()
        owed = eng.meta.chroma_owed()  # below the exact bound nothing reads Chroma: every add is owed
        assert owed == eng.counts()["vectors"] > 2
        seen: list[str] = []
        eng.meta.db.set_trace_callback(seen.append)
        assert eng.meta.chroma_owed() == owed
        eng.meta.db.set_trace_callback(None)
        assert not [q for q in seen if "COUNT" in q], seen  # the same state: not counted again
        some = eng.meta.embedded_ids_of("m0.py")
        eng.meta.defer_chroma(sorted(some), "del")  # this connection writes
        assert eng.meta.chroma_owed() == owed - len(some)
        other = sqlite3.connect(str(tmp_path / "idx" / "meta.sqlite"))  # another process's commit
        other.execute("DELETE FROM chroma_pending WHERE op = 'add' AND id IN "
                      "(SELECT id FROM chunks WHERE path = 'm1.py')")
        other.commit()
        other.close()
        left = owed - len(some) - len(eng.meta.embedded_ids_of("m1.py"))
        assert eng.meta.chroma_owed() == left
        db = sqlite3.connect(str(tmp_path / "idx" / "meta.sqlite"))
        assert left == db.execute("SELECT COUNT(*) FROM chroma_pending p JOIN chunks c ON c.id = p.id "
                                  "WHERE p.op = 'add' AND c.rowid NOT IN (SELECT rid FROM unembedded)").fetchone()[0]
        db.close()
