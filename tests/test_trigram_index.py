"""The trigram index (``chunk_grams``, FTS5) built in bulk by index runs (issue 18): a run's chunks wait
above a watermark and are added after each batch; a run killed in between leaves an index that is complete
up to the watermark, health says what is missing, and the next run adds it first. Saves, removals and
rebuilds keep it exactly in step with the chunks (FTS5's own integrity check, against the chunk texts)."""

from __future__ import annotations

import signal
import sqlite3
import subprocess
import sys
import textwrap
from pathlib import Path

from delphi_ls import Engine
from delphi_ls.stores.meta import LITERAL_GRAMS, ChunkRow, MetaStore

N_FILES = 120  # batches of 25, 50, then the rest: the kill lands after the second batch's manifest rows


def _workspace(root: Path) -> Path:
    for i in range(N_FILES):
        d = root / f"pkg{i % 6}"
        d.mkdir(parents=True, exist_ok=True)
        (d / f"mod{i}.py").write_text(
            f'"""Module {i}."""\n\n\ndef check_{i}(x):\n    if x < 0:\n'
            f'        raise ValueError("quota exceeded for tenant {i:03d}")\n    return x + {i}\n')
    return root


def _literal(i: int) -> str:
    return f"quota exceeded for tenant {i:03d}"


def _intact(meta_path: Path) -> None:
    """FTS5's integrity check with rank 1: the index against the chunk texts it was made from. Run on a
    copy in which the chunks above the watermark (not added yet) are removed first, so it checks that the
    index holds exactly the chunks at or below it."""
    src = sqlite3.connect(str(meta_path))
    db = sqlite3.connect(":memory:")
    try:
        src.backup(db)
        db.execute("DELETE FROM chunks WHERE rowid > COALESCE((SELECT CAST(value AS INTEGER) FROM state "
                   "WHERE key='grams_upto'), 9223372036854775807)")  # the trigger leaves the index alone
        db.execute("INSERT INTO chunk_grams(chunk_grams, rank) VALUES ('integrity-check', 1)")
    finally:
        db.close()
        src.close()


def _found(meta: MetaStore) -> dict[int, list[tuple[str, str]]]:
    return {i: meta.find_literal(_literal(i), 500) for i in range(N_FILES)}


SETTINGS = {"vectors": False, "index_workers": 0}


def test_a_run_killed_before_its_trigram_batch_is_reported_and_the_next_run_finds_every_literal(tmp_path: Path):
    ws = _workspace(tmp_path / "ws")
    killed = tmp_path / "killed"
    Engine(ws, index_dir=str(killed), **SETTINGS).index(vectors=False)
    for f in ws.rglob("*.py"):  # every file changed: the next run rewrites all of them
        f.write_text(f.read_text() + "\n# touched\n")
    # A real kill -9 at the worst point: the second batch's manifest rows are committed, its chunks
    # not yet in the trigram index.
    script = textwrap.dedent(f"""
        import os, signal
        from delphi_ls import Engine
        from delphi_ls.stores.meta import MetaStore
        real = MetaStore.build_grams
        calls = []
        def build(self, *a, **k):
            calls.append(1)
            if len(calls) == 2:
                os.kill(os.getpid(), signal.SIGKILL)
            return real(self, *a, **k)
        MetaStore.build_grams = build
        Engine({str(ws)!r}, index_dir={str(killed)!r}, **{SETTINGS!r}).index(vectors=False)
    """)
    proc = subprocess.run([sys.executable, "-c", script], timeout=300)
    assert proc.returncode == -signal.SIGKILL

    eng = Engine(ws, index_dir=str(killed), **SETTINGS)
    behind = eng.meta.grams_behind()
    assert eng.meta.counts()["files"] == N_FILES and 0 < behind < eng.meta.counts()["chunks"]
    found = _found(eng.meta)
    # The second batch's files: old chunks removed (with their trigram rows), new ones not added yet.
    assert 0 < sum(bool(v) for v in found.values()) < N_FILES
    h = eng.health(check_staleness=False, full=False)
    assert any(p["code"] == "trigram_behind" and f"{behind} chunks" in p["message"] for p in h["problems"])
    assert h["branches"]["trigram"].startswith("partial:")
    # And an answer says so beside its results, as health does (it said "ready" before).
    asked = f'where is "{_literal(7)}" raised?'
    assert eng.context(asked)["branchesReady"]["trigram"] == h["branches"]["trigram"]
    _intact(killed / "meta.sqlite")  # complete up to the watermark, nothing more, nothing less

    rep = eng.index(vectors=False)
    assert not rep.errors
    assert eng.meta.grams_behind() == 0 and eng.meta.get_state("grams_upto") is None
    h = eng.health(check_staleness=False, full=False)
    assert not any(p["code"] == "trigram_behind" for p in h["problems"]) and h["branches"]["trigram"] == "ready"
    assert eng.context(asked)["branchesReady"]["trigram"] == "ready"
    resumed = _found(eng.meta)
    eng.close()
    _intact(killed / "meta.sqlite")

    clean = Engine(ws, index_dir=str(tmp_path / "clean"), **SETTINGS)
    clean.index(vectors=False)
    assert resumed == _found(clean.meta)  # the same chunks, every literal found in its one file
    assert all(len(v) == 1 and v[0][1].endswith(f"/mod{i}.py") for i, v in resumed.items())
    clean.close()


def test_a_save_keeps_the_trigram_index_in_step(tmp_path: Path):
    ws = _workspace(tmp_path / "ws")
    eng = Engine(ws, index_dir=str(tmp_path / "idx"), **SETTINGS)
    eng.index(vectors=False)
    p = ws / "pkg1" / "mod7.py"
    p.write_text(p.read_text().replace(_literal(7), "disk quota gone for tenant seven"))
    rep = eng.index(vectors=False, only=["pkg1/mod7.py"])
    assert rep.files_indexed == 1
    assert eng.meta.find_literal(_literal(7), 500) == []
    assert [path for _c, path in eng.meta.find_literal("quota gone for tenant seven", 500)] == ["pkg1/mod7.py"]
    p.unlink()
    eng.index(vectors=False, only=["pkg1/mod7.py"])
    assert eng.meta.find_literal("quota gone for tenant seven", 500) == []
    assert eng.meta.grams_behind() == 0
    eng.close()
    _intact(tmp_path / "idx" / "meta.sqlite")


def test_rebuild_empties_the_trigram_index_at_once_and_refills_it(tmp_path: Path):
    ws = _workspace(tmp_path / "ws")
    eng = Engine(ws, index_dir=str(tmp_path / "idx"), **SETTINGS)
    eng.index(vectors=False)
    before = _found(eng.meta)
    eng.meta.clear_index()
    assert eng.meta.get_state("grams_upto") == 0 and eng.meta.find_literal(_literal(3), 500) == []
    _intact(tmp_path / "idx" / "meta.sqlite")
    eng.index(vectors=False)
    assert {i: [p for _c, p in v] for i, v in _found(eng.meta).items()} == {i: [p for _c, p in v] for i, v in before.items()}
    eng.close()
    _intact(tmp_path / "idx" / "meta.sqlite")


def _row(path: str, i: int, text: str) -> ChunkRow:
    return ChunkRow(f"{path}#{i}", path, i, 1, 3, [], "source", f"h{path}{i}", text)


def test_removals_while_deferred_leave_the_index_exact(tmp_path: Path):
    """The watermark's rule, row by row: a chunk at or below it is removed from the trigram index with its
    row; one above it (written since the deferral) was never added and is not removed."""
    meta = MetaStore(tmp_path / "meta.sqlite")
    for n in range(3):
        meta.replace_file(f"a{n}.py", "h", 1, 1, "source", "python", [_row(f"a{n}.py", 0, f"old text number {n}")],
                          [], False, set())
    meta.defer_grams()
    for n in range(3):
        meta.replace_file(f"b{n}.py", "h", 1, 1, "source", "python", [_row(f"b{n}.py", 0, f"new text number {n}")],
                          [], False, set())
    assert meta.grams_behind() == 3 and meta.find_literal("new text number 1", 10) == []
    meta.remove_files(["a1.py", "b1.py"])  # one below the watermark, one above
    meta.replace_file("a2.py", "h2", 1, 1, "source", "python", [_row("a2.py", 0, "replaced text")], [], False, set())
    _intact(tmp_path / "meta.sqlite")
    assert meta.build_grams() == 3  # b0, b2 and the new a2
    assert meta.grams_behind() == 0
    _intact(tmp_path / "meta.sqlite")
    assert [p for _c, p in meta.find_literal("text number", 10)] == ["a0.py", "b0.py", "b2.py"]
    assert meta.find_literal("old text number 2", 10) == [] and len(meta.find_literal("replaced text", 10)) == 1
    meta.close()


OLD_TRIGGERS = """
CREATE TRIGGER chunks_ai AFTER INSERT ON chunks BEGIN
  INSERT INTO chunk_grams(rowid, text) VALUES (new.rowid, new.text);
END;
CREATE TRIGGER chunks_ad AFTER DELETE ON chunks BEGIN
  INSERT INTO chunk_grams(chunk_grams, rowid, text) VALUES ('delete', old.rowid, old.text);
END;
"""


def test_an_index_from_before_the_watermark_is_upgraded_in_place(tmp_path: Path):
    """The triggers of session 8's manifests (every chunk added row by row) are replaced at open; their
    trigram index holds every chunk, so it is kept, not rebuilt, and bulk runs work on it from then on."""
    path = tmp_path / "meta.sqlite"
    meta = MetaStore(path)
    meta.db.executescript("DROP TRIGGER chunks_ai; DROP TRIGGER chunks_ad;" + OLD_TRIGGERS)
    meta.replace_file("old.py", "h", 1, 1, "source", "python", [_row("old.py", 0, "written by old code")], [], False, set())
    meta.close()

    meta = MetaStore(path)
    sql = dict(meta.db.execute("SELECT name, sql FROM sqlite_master WHERE type='trigger' AND name LIKE 'chunks_a_'"))
    assert "grams_upto" in sql["chunks_ai"] and "grams_upto" in sql["chunks_ad"]
    assert meta.grams_behind() == 0 and len(meta.find_literal("written by old code", 10)) == 1
    meta.defer_grams()
    meta.replace_file("new.py", "h", 1, 1, "source", "python", [_row("new.py", 0, "written by new code")], [], False, set())
    meta.remove_files(["old.py"])
    meta.build_grams()
    assert meta.find_literal("written by old code", 10) == [] and len(meta.find_literal("written by new code", 10)) == 1
    meta.close()
    _intact(path)


def test_a_literal_with_a_nul_character_is_found_and_fails_nothing(tmp_path: Path):
    """FTS5's query parser ends a phrase at a NUL ("unterminated string"), so such a literal failed the
    trigram branch for the whole question. A NUL past the first 8 KB does not make a file binary, so a
    chunk can hold one; the literal is found there, and only there."""
    ws = tmp_path / "ws"
    ws.mkdir()
    filler = "".join(f"def pad_{i}(x):\n    return x + {i}\n\n" for i in range(400))  # > 8 KB of text first
    (ws / "codec.py").write_text(filler + 'SEP = "frame\x00marker seen"\n')
    (ws / "other.py").write_text('NOTE = "frame marker seen"\n')  # the same words without the NUL
    with Engine(ws, index_dir=str(tmp_path / "idx"), **SETTINGS) as eng:
        eng.index(vectors=False)
        assert {p for _i, p in eng.meta.find_literal("frame\x00marker seen", 50)} == {"codec.py"}
        assert {p for _i, p in eng.meta.find_literal("FRAME\x00MARKER", 50)} == {"codec.py"}  # case folded
        assert eng.meta.find_literal("me\x00marker seen", 50) == []  # in codec.py, but 2 characters before the NUL
        assert eng.meta.find_literal("frame\x00other", 50) == []  # the part found, the whole literal not
        assert {p for _i, p in eng.meta.find_literal("frame marker seen", 50)} == {"other.py"}
        answer = eng.context('why is "frame\x00marker seen" never matched?')
        assert "trigram" not in eng.branch_errors, eng.branch_errors
        assert answer["results"] and answer["results"][0]["path"] == "codec.py"


FULL_GRAMS = ("CREATE VIRTUAL TABLE chunk_grams USING fts5(text, content='chunks', content_rowid='rowid', "
              "tokenize='trigram')")


def _with_positions(path: Path, texts: list[str]) -> None:
    """A manifest as session 11 wrote it: the trigram index with positions (detail=full), holding every chunk."""
    meta = MetaStore(path)
    meta.db.executescript(f"DROP TABLE chunk_grams; {FULL_GRAMS};")
    for n, text in enumerate(texts):
        meta.replace_file(f"m{n}.py", "h", 1, 1, "source", "python", [_row(f"m{n}.py", 0, text)], [], False, set())
    assert meta.find_literal(texts[0], 10) == [("m0.py#0", "m0.py")]  # the lookup works on the old table too
    meta.close()


def test_a_trigram_index_with_positions_is_rebuilt_without_them_by_the_next_run(tmp_path: Path):
    """Positions made the trigram index 4.7x larger (issue 18): an index written with them is dropped at the
    first open that can write, said to be behind (every chunk), and filled again by the next build."""
    path = tmp_path / "meta.sqlite"
    texts = [f"raise KeyError('missing shard {n}')" for n in range(5)]
    _with_positions(path, texts)
    meta = MetaStore(path)
    sql = meta.db.execute("SELECT sql FROM sqlite_master WHERE name='chunk_grams'").fetchone()[0]
    assert "detail=none" in sql
    assert meta.grams_behind() == 5 and meta.find_literal(texts[2], 10) == []
    assert meta.build_grams() == 5 and meta.grams_behind() == 0
    _intact(path)
    assert meta.find_literal("missing shard 3", 10) == [("m3.py#0", "m3.py")]
    assert [p for _c, p in meta.find_literal("MISSING SHARD", 10)] == [f"m{n}.py" for n in range(5)]
    meta.close()


def test_an_index_with_positions_that_cannot_be_written_is_searched_as_it_is(tmp_path: Path, monkeypatch):
    """Another process holds the write lock at open: the old trigram index stays, and literals are found in it."""
    path = tmp_path / "meta.sqlite"
    _with_positions(path, ["a literal kept", "another literal"])
    blocker = sqlite3.connect(str(path), isolation_level=None)
    blocker.execute("BEGIN IMMEDIATE")
    real = sqlite3.connect
    monkeypatch.setattr(sqlite3, "connect", lambda *a, **k: real(*a, **{**k, "timeout": 0.2}))
    try:
        meta = MetaStore(path)
        assert "detail=none" not in meta.db.execute("SELECT sql FROM sqlite_master WHERE name='chunk_grams'").fetchone()[0]
        assert meta.grams_behind() == 0
        assert [p for _c, p in meta.find_literal("LITERAL", 10)] == ["m0.py", "m1.py"]
        meta.close()
    finally:
        blocker.execute("ROLLBACK")
        blocker.close()


def test_a_literal_is_found_by_its_trigrams_and_its_text_checked(tmp_path: Path):
    """Without positions the trigrams of a literal can all be in a chunk that does not hold it: the text
    check drops such a chunk. A long literal is looked up by some of its trigrams, not all."""
    meta = MetaStore(tmp_path / "meta.sqlite")
    long = "connection reset by peer while reading the response headers from upstream server"
    rows = {"scrambled.py": "abc bcd cde", "exact.py": "x = 'abcde'", "long.py": f"log.error({long!r})",
            "near.py": long.replace("upstream", "downstream")}
    for p, text in rows.items():
        meta.replace_file(p, "h", 1, 1, "source", "python", [_row(p, 0, text)], [], False, set())
    assert [p for _c, p in meta.find_literal("abcde", 10)] == ["exact.py"]  # scrambled.py has every trigram
    assert [p for _c, p in meta.find_literal(long, 10)] == ["long.py"]
    assert [p for _c, p in meta.find_literal(long.upper()[:40], 10)] == ["long.py", "near.py"]
    assert meta.find_literal("ab", 10) == [] and meta.find_literal("abcde", 0) == []
    sent: list[str] = []
    meta.db.set_trace_callback(sent.append)
    meta.find_literal(long, 10)
    meta.db.set_trace_callback(None)
    match = next(q for q in sent if "MATCH" in q)
    assert match.count(" AND ") == LITERAL_GRAMS - 1  # 79 distinct trigrams in the literal, 16 looked up
    meta.close()


def test_case_is_folded_as_the_trigram_tokenizer_folds_it(tmp_path: Path):
    """Python's lower() turns a final sigma into another letter than a medial one and lengthens İ; the trigram
    tokenizer folds one character to one (and µ to μ, ς to σ): the check folds the same way (review 12)."""
    meta = MetaStore(tmp_path / "meta.sqlite")
    rows = {"greek.py": "name = 'ΟΔΟΣΑ ΚΑΙ'", "city.py": "city = 'İSTANBUL'", "unit.py": "unit = 'μs per call'",
            "sas.py": "x = 'ΣΑΣ'"}
    for p, text in rows.items():
        meta.replace_file(p, "h", 1, 1, "source", "python", [_row(p, 0, text)], [], False, set())
    for literal, path in [("ΟΔΟΣ", "greek.py"), ("οδοσα", "greek.py"), ("İST", "city.py"), ("İSTANBUL", "city.py"),
                          ("µs per", "unit.py"), ("σας", "sas.py"), ("ΣΑΣ", "sas.py")]:
        assert [p for _c, p in meta.find_literal(literal, 10)] == [path], literal
    meta.close()


def test_a_read_only_index_with_positions_opens_and_is_searched(tmp_path: Path, monkeypatch):
    """A file SQLite opens read-only lets BEGIN IMMEDIATE through and refuses the first write: the old table
    stays, the open does not fail, literals are found."""
    path = tmp_path / "meta.sqlite"
    _with_positions(path, ["a literal kept", "another literal"])
    real = sqlite3.connect
    monkeypatch.setattr(sqlite3, "connect", lambda db, *a, **k: real(f"file:{db}?mode=ro", *a, **{**k, "uri": True}))
    meta = MetaStore(path)
    assert "detail=none" not in meta.db.execute("SELECT sql FROM sqlite_master WHERE name='chunk_grams'").fetchone()[0]
    assert [p for _c, p in meta.find_literal("LITERAL", 10)] == ["m0.py", "m1.py"]
    meta.close()


def test_an_index_whose_old_triggers_stay_keeps_its_table_with_positions(tmp_path: Path, monkeypatch):
    """When the triggers from before the watermark could not be upgraded (a writer held the file for 30 s),
    they add every chunk themselves: the table is not rebuilt under them (a watermark of 0 beside them added
    chunks twice and deleted rows the empty index never held: a malformed index, review 12)."""
    path = tmp_path / "meta.sqlite"
    _with_positions(path, ["written before the watermark"])
    db = sqlite3.connect(str(path))  # the session 8 triggers back, as an old manifest has them
    db.executescript("DROP TRIGGER chunks_ai; DROP TRIGGER chunks_ad;" + OLD_TRIGGERS)
    db.close()

    def failed_upgrade(self: MetaStore) -> None:
        self.bulk_grams = False

    monkeypatch.setattr(MetaStore, "_upgrade_grams_triggers", failed_upgrade)
    meta = MetaStore(path)
    assert "detail=none" not in meta.db.execute("SELECT sql FROM sqlite_master WHERE name='chunk_grams'").fetchone()[0]
    meta.replace_file("m0.py", "h2", 1, 1, "source", "python", [_row("m0.py", 0, "written again")], [], False, set())
    meta.replace_file("n.py", "h", 1, 1, "source", "python", [_row("n.py", 0, "a new file")], [], False, set())
    meta.build_grams()
    _intact(path)
    assert len(meta.find_literal("written again", 10)) == 1 and meta.find_literal("before the watermark", 10) == []
    meta.close()


def test_a_large_run_with_a_vector_pass_adds_its_trigrams_after_it(tmp_path: Path, monkeypatch):
    """Session 25 (issue 18): a large run whose vector pass follows leaves its chunks out of the trigram index
    until that pass is done (the bulk build competed with the embedding processes for the cores). Meanwhile the
    trigram branch says it is partial and the other lexical branches are complete; at the end every literal
    is found, as a run that builds them per batch finds them."""
    from delphi_ls.indexing import pipeline

    monkeypatch.setattr(pipeline, "GRAMS_LATER_MIN_FILES", 50)  # N_FILES = 120: a "large" run here
    ws = _workspace(tmp_path / "ws")
    seen: dict[str, object] = {}
    real = pipeline.Indexer.start_grams  # called just before the vector pass (session 31: the build beside it)

    def at_vectors(self, *a, **k):
        eng_ = seen["eng"]
        seen["behind"] = self.meta.grams_behind()
        seen["lexical_ready"] = self.meta.get_state("lexical_ready")
        seen["trigram"] = eng_.health(check_staleness=False, full=False)["branches"]["trigram"]
        seen["bm25"] = [r["path"] for r in eng_.context("check_7 quota tenant", limit=3)["results"]]
        return real(self, *a, **k)

    monkeypatch.setattr(pipeline.Indexer, "start_grams", at_vectors)
    eng = Engine(ws, index_dir=str(tmp_path / "idx"), index_workers=0)
    seen["eng"] = eng
    rep = eng.index()
    assert not rep.errors and eng.counts()["vectors"] == eng.counts()["chunks"]
    assert seen["lexical_ready"] is True and seen["behind"] == eng.counts()["chunks"]
    assert str(seen["trigram"]).startswith("partial:"), seen["trigram"]
    assert "pkg1/mod7.py" in seen["bm25"]  # BM25 answered in full while the trigram index waited
    assert eng.meta.grams_behind() == 0 and eng.meta.get_state("grams_upto") is None
    assert all(len(v) == 1 and v[0][1].endswith(f"/mod{i}.py") for i, v in _found(eng.meta).items())
    assert eng.health(check_staleness=False, full=False)["branches"]["trigram"] == "ready"
    eng.close()
    _intact(tmp_path / "idx" / "meta.sqlite")
    # Below the bound, or without a vector pass, a run adds them per batch as before.
    for name, kwargs in (("small", {"vectors": True}), ("novec", {"vectors": False})):
        if name == "small":
            monkeypatch.setattr(pipeline, "GRAMS_LATER_MIN_FILES", 10_000)
        seen.clear()
        e = Engine(ws, index_dir=str(tmp_path / name), index_workers=0, **kwargs)
        seen["eng"] = e
        e.index()
        if name == "small":
            assert seen["behind"] == 0 and seen["trigram"] == "ready"
        assert e.meta.grams_behind() == 0
        e.close()


def test_a_stopped_large_run_leaves_its_trigrams_to_the_next_run(tmp_path: Path, monkeypatch):
    """Review of session 25: a large run stopped midway (an editor closing during a first index) built the
    trigram rows of everything it had written before returning, holding the shutdown. It now leaves them: the
    watermark stays, health says partial, and the next run adds them first."""
    from delphi_ls.indexing import pipeline

    monkeypatch.setattr(pipeline, "GRAMS_LATER_MIN_FILES", 50)
    ws = _workspace(tmp_path / "ws")
    eng = Engine(ws, index_dir=str(tmp_path / "idx"), index_workers=0)
    indexer = eng._indexer()
    indexer.embed_ahead = True
    batches = []
    rep = indexer.index_lexical(should_stop=lambda: len(batches) >= 2, on_batch=lambda: batches.append(1))
    assert rep.errors and not indexer.grams_owed
    written = eng.meta.counts()["chunks"]
    assert 0 < written < N_FILES * 2 and eng.meta.grams_behind() == written  # none built on the way out
    indexer.close_ahead()
    eng.close()
    eng = Engine(ws, index_dir=str(tmp_path / "idx"), index_workers=0)
    assert not eng.index().errors
    assert eng.meta.grams_behind() == 0
    assert all(len(v) == 1 for v in _found(eng.meta).values())
    eng.close()


def test_a_failed_vector_pass_still_completes_the_trigram_index(tmp_path: Path, monkeypatch):
    """Review of session 25: the trigram index owed by a large run is added when its vector pass fails too,
    not left for the next save to add inside its own latency."""
    from delphi_ls.indexing import pipeline

    monkeypatch.setattr(pipeline, "GRAMS_LATER_MIN_FILES", 50)

    def broken(self, *a, **k):
        raise RuntimeError("the embedder ran out of memory")

    monkeypatch.setattr(pipeline.Indexer, "index_vectors", broken)
    ws = _workspace(tmp_path / "ws")
    eng = Engine(ws, index_dir=str(tmp_path / "idx"), index_workers=0)
    try:
        eng.index()
    except RuntimeError:
        pass
    else:
        raise AssertionError("the vector pass's failure was swallowed")
    assert eng.meta.grams_behind() == 0
    assert all(len(v) == 1 for v in _found(eng.meta).values())
    eng.close()


def test_a_snapshot_of_an_index_whose_trigram_index_is_behind_is_refused(tmp_path: Path):
    """Review of session 25: a copy would ship the watermark, and a machine that only loads it never adds the
    chunks above it; the snapshot is refused like one of an index whose run stopped early."""
    import pytest

    from delphi_ls.engine import INDEX_FORMAT
    from delphi_ls.indexing import snapshot

    ws = _workspace(tmp_path / "ws")
    eng = Engine(ws, index_dir=str(tmp_path / "idx"), **SETTINGS)
    eng.index(vectors=False)
    eng.meta.defer_grams()  # as a run that stopped after writing its files leaves it
    eng.meta.db.execute("UPDATE state SET value='0' WHERE key='grams_upto'")
    with pytest.raises(snapshot.SnapshotError, match="not complete"):
        snapshot.create(eng.root, eng.index_dir, eng.writer, eng.settings, INDEX_FORMAT, tmp_path / "x.delphi-snapshot")
    assert not (tmp_path / "x.delphi-snapshot").exists()
    eng.close()


def test_the_count_every_question_reads_is_bounded(tmp_path: Path):
    """Every question during a run reads how far the trigram index is behind. With a large run's rows added after
    its vector pass (session 25) that count covered the whole run: 240 ms warm, 15 s cold, at 100k files. The status
    line counts at most GRAMS_COUNTED chunks and says "over" past that."""
    from delphi_ls import health

    meta = MetaStore(tmp_path / "meta.sqlite")
    meta.defer_grams()
    for n in range(7):
        meta.replace_file(f"b{n}.py", "h", 1, 1, "source", "python", [_row(f"b{n}.py", 0, f"new text number {n}")],
                          [], False, set())
    assert meta.grams_behind() == 7 and meta.grams_behind(cap=3) == 4 and meta.grams_behind(cap=10) == 7

    class Eng:  # what grams_status reads of an engine
        indexing = {"phase": "vectors"}

        def __init__(self, m: MetaStore) -> None:
            self.meta = m

        def writer_holder(self) -> None:
            return None

    old = health.GRAMS_COUNTED
    try:
        health.GRAMS_COUNTED = 3
        assert health.grams_status(Eng(meta)).startswith("partial: over 3 chunks written by the run under way")
        health.GRAMS_COUNTED = 10
        assert health.grams_status(Eng(meta)).startswith("partial: 7 chunks written by the run under way")
    finally:
        health.GRAMS_COUNTED = old
    meta.close()


def test_the_trigram_build_runs_beside_the_vector_pass_on_its_own_connection_and_stops_between_batches(
        tmp_path: Path, monkeypatch):
    """Session 31 (issue 18): the trigram index of a large run is built on a thread with its own connection
    while the vector pass runs (it ran after that pass, on one core, the other idle). Held back here until
    the vector pass is over: that pass writes every vector meanwhile (the two connections take turns at the
    write lock, nothing waits for the whole build), the run's end waits for the build, and every literal is
    found. Stopped (an editor closing): the build ends between batches, the watermark stays, and the next run
    adds the rest first."""
    import threading

    from delphi_ls.indexing import pipeline
    from delphi_ls.stores import meta as meta_mod

    monkeypatch.setattr(pipeline, "GRAMS_LATER_MIN_FILES", 50)
    monkeypatch.setattr(pipeline, "GRAMS_APART_BATCH", 7)  # many transactions
    gate = threading.Event()
    threads: set[str] = set()
    real_build = meta_mod._build_grams

    def gated(db, lock, batch, finish, stop=None):
        if stop is not None:  # the build beside the vector pass
            threads.add(threading.current_thread().name)
            gate.wait(30)
        return real_build(db, lock, batch, finish, stop)

    monkeypatch.setattr(meta_mod, "_build_grams", gated)
    real_vectors = pipeline.Indexer.index_vectors
    seen: dict[str, object] = {}

    def vectors(self, *a, **k):
        out = real_vectors(self, *a, **k)
        seen["embedded"] = self.meta.counts()["vectors"]
        seen["behind"] = self.meta.grams_behind()
        if seen.get("stop"):
            seen["eng"]._stop.set()
        gate.set()
        return out

    monkeypatch.setattr(pipeline.Indexer, "index_vectors", vectors)
    ws = _workspace(tmp_path / "ws")
    eng = Engine(ws, index_dir=str(tmp_path / "idx"), index_workers=0)
    seen["eng"] = eng
    rep = eng.index()
    chunks = eng.counts()["chunks"]
    assert not rep.errors and seen["embedded"] == chunks  # the vector pass finished with the build held back
    assert seen["behind"] == chunks and threads == {"delphi-grams"}
    assert eng.meta.grams_behind() == 0 and eng.meta.get_state("grams_upto") is None  # the run waited for it
    assert all(len(v) == 1 and v[0][1].endswith(f"/mod{i}.py") for i, v in _found(eng.meta).items())
    eng.close()
    _intact(tmp_path / "idx" / "meta.sqlite")

    # Stopped while the build waits: it adds nothing, the watermark stays, health says partial; the next
    # run (nothing changed on disk) adds them all.
    gate.clear()
    seen.clear()
    seen["stop"] = True
    eng = Engine(ws, index_dir=str(tmp_path / "stopped"), index_workers=0)
    seen["eng"] = eng
    eng.index()
    assert eng.meta.grams_behind() == eng.counts()["chunks"] > 0
    assert str(eng.health(check_staleness=False, full=False)["branches"]["trigram"]).startswith("partial:")
    seen.clear()
    eng.index()
    assert eng.meta.grams_behind() == 0
    assert all(len(v) == 1 for v in _found(eng.meta).values())
    eng.close()
    _intact(tmp_path / "stopped" / "meta.sqlite")


def test_a_write_of_the_vector_pass_goes_before_the_next_trigram_batch():
    """WriteTurns: the vector pass's writer waits for the build's batch in hand, never behind a run of them (a
    plain lock let the build take it again at once; SQLite's busy handler slept up to 100 ms a try, and at
    100k files the vector pass took 46 s longer beside the build: session 31)."""
    import threading
    import time

    from delphi_ls.stores.meta import WriteTurns

    turns = WriteTurns()
    stop = threading.Event()
    batches: list[float] = []

    def build() -> None:
        while not stop.is_set():
            with turns:
                batches.append(time.monotonic())
                time.sleep(0.05)  # a batch of the build, in C with the GIL released

    t = threading.Thread(target=build)
    t.start()
    waits = []
    try:
        time.sleep(0.05)
        for _ in range(25):
            t0 = time.monotonic()
            with turns.first():
                waits.append(time.monotonic() - t0)
            time.sleep(0.005)  # the vector pass between its writes
    finally:
        stop.set()
        t.join()
    assert max(waits) < 0.4, waits  # one batch (0.05 s) and scheduling on a loaded machine, not a run of them
    assert len(batches) > 25  # and the build went on between the writes


def test_a_bulk_build_leaves_fts5_merging_fewer_times(tmp_path: Path):
    """The build sets the index's automerge (stores/meta.py GRAMS_AUTOMERGE: a quarter less CPU at 200,000 chunks);
    the index answers the same."""
    from delphi_ls.stores.meta import GRAMS_AUTOMERGE

    meta = MetaStore(tmp_path / "meta.sqlite")
    meta.defer_grams()
    for i in range(40):
        meta.replace_file(f"m{i}.py", "h", 1, 1, "source", "python", [_row(f"m{i}.py", 0, _literal(i))], [], False, set())
    assert meta.build_grams(batch=4) == 40
    assert meta.db.execute("SELECT v FROM chunk_grams_config WHERE k = 'automerge'").fetchone()[0] == GRAMS_AUTOMERGE
    assert [p for _c, p in meta.find_literal(_literal(7), 10)] == ["m7.py"]
    meta.close()
    _intact(tmp_path / "meta.sqlite")
