"""A large run writes its file documents without the FTS5 triggers and builds that index once at its end
(issue 18: the documents were indexed twice, when written and when their importers were set). The index it
builds is the one the triggers build; while it is owed (a run stopped before its end) the branch says so
and the next run builds it."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from delphi_ls import Engine
from delphi_ls.api import ContextRequest
from delphi_ls.indexing import pipeline
from delphi_ls.stores.filedocs import FTS_OWED, FTS_OWED_STATUS, FileDocs
from tests.conftest import build_workspace

TERMS = [["retry", "backoff"], ["harbour"], ["ledger", "balance"], ["test"], ["config", "settings", "load"]]


def _fts(eng: Engine) -> tuple[list[list[tuple[str, float]]], list[str], list[tuple[str, ...]]]:
    fd = FileDocs(eng.meta)
    found = [fd.search(t, 50) for t in TERMS]
    triggers = [r[0] for r in eng.meta.db.execute(
        "SELECT sql FROM sqlite_master WHERE type='trigger' AND tbl_name='file_docs' ORDER BY name")]
    # The index's own rows (term, column, document count): equal only when both hold the same documents.
    eng.meta.db.execute("CREATE VIRTUAL TABLE IF NOT EXISTS temp.v USING fts5vocab(main, 'file_docs_fts', 'row')")
    vocab = eng.meta.db.execute("SELECT term, doc, cnt FROM temp.v ORDER BY term").fetchall()
    eng.meta.db.execute("DROP TABLE temp.v")
    return found, triggers, vocab


@pytest.fixture
def ws(tmp_path: Path) -> Path:
    return build_workspace(tmp_path / "ws")


def _index(ws: Path, index: Path, bulk_min: int, monkeypatch) -> tuple:
    monkeypatch.setattr(pipeline, "DOCS_BULK_MIN_FILES", bulk_min)
    deferred = []
    real = FileDocs.defer_fts
    monkeypatch.setattr(FileDocs, "defer_fts", lambda self: (deferred.append(1), real(self))[1])
    with Engine(ws, index_dir=index, vectors=False) as eng:
        eng.index()
        assert eng.meta.get_state(FTS_OWED) is None
        return _fts(eng), bool(deferred)


def test_the_index_built_at_the_end_is_the_one_the_triggers_build(ws: Path, tmp_path: Path, monkeypatch) -> None:
    by_triggers, deferred = _index(ws, tmp_path / "a", 10**9, monkeypatch)
    assert not deferred
    in_bulk, deferred = _index(ws, tmp_path / "b", 1, monkeypatch)
    assert deferred
    assert by_triggers[0] == in_bulk[0] and any(by_triggers[0])  # the searches can find something
    assert by_triggers[1] == in_bulk[1] and len(in_bulk[1]) == 3  # the triggers are back, word for word
    assert by_triggers[2] == in_bulk[2] and by_triggers[2]


def test_a_run_stopped_before_building_it_leaves_it_to_the_next(ws: Path, tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setattr(pipeline, "DOCS_BULK_MIN_FILES", 10**9)
    want = _fts_of_fresh(ws, tmp_path / "fresh")
    index = tmp_path / "index"
    with Engine(ws, index_dir=index, vectors=False) as eng:
        eng.index()
        FileDocs(eng.meta).defer_fts()  # what a run killed after its first batch leaves: triggers gone, state set
        (ws / "shipyard" / "retry.py").write_text("def brand_new_lighthouse():\n    return 1\n")
    with Engine(ws, index_dir=index, vectors=False) as eng:
        ans = eng.answer(ContextRequest(query="where is the retry backoff computed?"))
        assert ans["branchesReady"]["filedoc"] == FTS_OWED_STATUS
        assert eng.health()["branches"]["filedoc"] == FTS_OWED_STATUS
        assert any(p["code"] == "filedocs_behind" for p in eng.health()["problems"])
        eng.index()  # a small run (one file changed) builds what the stopped one owed
        assert eng.meta.get_state(FTS_OWED) is None
        ans = eng.answer(ContextRequest(query="where is the retry backoff computed?"))
        assert ans["branchesReady"]["filedoc"] == "ready"
        assert not any(p["code"] == "filedocs_behind" for p in eng.health()["problems"])
        got = _fts(eng)
    assert got[1] == want[1]
    with sqlite3.connect(index / "meta.sqlite") as db:
        assert db.execute("SELECT pathwords FROM file_docs WHERE path='shipyard/retry.py'").fetchone()
    assert [p for p, _s in FileDocs_search(index, ["lighthouse"])] == ["shipyard/retry.py"]


def _fts_of_fresh(ws: Path, index: Path) -> tuple:
    with Engine(ws, index_dir=index, vectors=False) as eng:
        eng.index()
        return _fts(eng)


def FileDocs_search(index: Path, terms: list[str]) -> list[tuple[str, float]]:
    from delphi_ls.stores.meta import MetaStore

    meta = MetaStore(index / "meta.sqlite")
    try:
        return FileDocs(meta).search(terms, 10)
    finally:
        meta.close()


def test_a_snapshot_of_an_index_whose_file_documents_are_owed_is_refused(ws: Path, tmp_path: Path) -> None:
    """As for the trigram index: a copy would ship the owed state to a machine that may only load it."""
    from delphi_ls.engine import INDEX_FORMAT
    from delphi_ls.indexing import snapshot

    with Engine(ws, index_dir=tmp_path / "idx", vectors=False) as eng:
        eng.index()
        FileDocs(eng.meta).defer_fts()
        with pytest.raises(snapshot.SnapshotError, match="not complete"):
            snapshot.create(eng.root, eng.index_dir, eng.writer, eng.settings, INDEX_FORMAT, tmp_path / "x.snap")
        assert not (tmp_path / "x.snap").exists()


def test_a_large_run_spaces_its_checkpoints_and_checkpoints_at_its_end(ws: Path, tmp_path: Path, monkeypatch) -> None:
    """During a large run the WAL is copied into the database every WAL_CHECKPOINT_PAGES pages (a checkpoint a
    transaction before); after it the default is back and the WAL is copied, so a save does not copy it."""
    from delphi_ls.stores import meta as meta_mod

    monkeypatch.setattr(pipeline, "GRAMS_LATER_MIN_FILES", 1)
    seen = []
    real = FileDocs.put

    def put(self, docs):
        seen.append(self.meta.db.execute("PRAGMA wal_autocheckpoint").fetchone()[0])
        return real(self, docs)

    monkeypatch.setattr(FileDocs, "put", put)
    with Engine(ws, index_dir=tmp_path / "idx", vectors=False) as eng:
        eng.index()
        assert seen and set(seen) == {meta_mod.WAL_CHECKPOINT_PAGES}
        assert eng.meta.db.execute("PRAGMA wal_autocheckpoint").fetchone()[0] == meta_mod.WAL_CHECKPOINT_DEFAULT
        busy, log_pages, done = eng.meta.db.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchone()
        assert busy == 0 and log_pages == done  # nothing left to copy
        seen.clear()
        monkeypatch.setattr(pipeline, "GRAMS_LATER_MIN_FILES", 1000)
        (ws / "shipyard" / "retry.py").write_text("def moored():\n    return 1\n")
        eng.index(only=["shipyard/retry.py"])  # a save: SQLite's default
        assert seen == [meta_mod.WAL_CHECKPOINT_DEFAULT]


# The symbol-name index: a large run writes its symbols without it and builds it at the lexical pass's end.
NAMES = ["RetryPolicy", "compute_backoff", "ledger", "Harbour", "load_config", "brulee", "nothing_by_this_name"]


def _name_index(eng: Engine) -> bool:
    return eng.meta.db.execute("SELECT 1 FROM sqlite_master WHERE name='symbols_name_nocase'").fetchone() is not None


def _lookups(eng: Engine) -> tuple[list, str]:
    plan = " ".join(r[-1] for r in eng.meta.db.execute(
        "EXPLAIN QUERY PLAN SELECT name FROM symbols WHERE name COLLATE NOCASE IN (?, ?)", ("a", "b")))
    return [(r.name, r.path, r.line) for r in eng.meta.symbols_named(NAMES)], plan


def test_a_large_run_builds_the_symbol_name_index_at_its_end(ws: Path, tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setattr(pipeline, "DOCS_BULK_MIN_FILES", 10**9)
    with Engine(ws, index_dir=tmp_path / "a", vectors=False) as eng:
        eng.index()
        want = _lookups(eng)
    monkeypatch.setattr(pipeline, "DOCS_BULK_MIN_FILES", 1)
    during = []
    real = FileDocs.put
    monkeypatch.setattr(FileDocs, "put", lambda self, docs: (during.append(_name_index_of(self)), real(self, docs))[1])
    with Engine(ws, index_dir=tmp_path / "b", vectors=False) as eng:
        eng.index()
        assert during and not any(during)  # the run's symbols went in without it
        assert _name_index(eng)
        got = _lookups(eng)
    assert got == want and got[0]  # the same definitions found, through the index
    assert "symbols_name_nocase" in got[1]


def _name_index_of(fd: FileDocs) -> bool:
    return fd.meta.db.execute("SELECT 1 FROM sqlite_master WHERE name='symbols_name_nocase'").fetchone() is not None


def test_a_large_run_that_fails_midway_builds_the_name_index_all_the_same(ws: Path, tmp_path: Path,
                                                                           monkeypatch) -> None:
    monkeypatch.setattr(pipeline, "DOCS_BULK_MIN_FILES", 1)
    real = FileDocs.put
    calls = []

    def put(self, docs):
        calls.append(_name_index_of(self))
        if len(calls) == 2:
            raise OSError("disk full")
        return real(self, docs)

    monkeypatch.setattr(FileDocs, "put", put)
    monkeypatch.setattr(pipeline, "FIRST_BATCH_FILES", 2)  # several batches in the small fixture
    with Engine(ws, index_dir=tmp_path / "idx", vectors=False) as eng:
        with pytest.raises(OSError, match="disk full"):
            eng.index()
        assert calls == [False, False]  # dropped while the run wrote
        assert _name_index(eng)


def test_a_run_killed_before_the_build_leaves_it_to_the_next_run(ws: Path, tmp_path: Path) -> None:
    with Engine(ws, index_dir=tmp_path / "idx", vectors=False) as eng:
        eng.index()
        want = _lookups(eng)
        eng.meta.defer_name_index()  # what a run killed midway leaves
        assert not _name_index(eng)
        assert _lookups(eng)[0] == want[0]  # meanwhile the table is scanned: the same answers
    with Engine(ws, index_dir=tmp_path / "idx", vectors=False) as eng:
        # Opening does not build it: a process opening the index during a large run would, in its middle.
        assert not _name_index(eng)
        eng.index()  # the next run, nothing changed: built
        assert _name_index(eng)
        assert _lookups(eng) == want
