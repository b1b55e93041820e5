"""The in-memory view saved for the next process (issue 18, a server's first answer on a big index):
loaded only for the very manifest state and code it was built from, never stale, never from a damaged
file. The workspaces here are small, so the build-time threshold for saving is set to zero."""

from __future__ import annotations

from pathlib import Path

import pytest

from delphi_ls import Engine
from delphi_ls import engine as engine_mod
from delphi_ls.stores import exact_file, view_cache

FILES = {
    "src/retry.py": "def backoff(attempt):\n    return 2 ** attempt\n\n\nclass RetryPolicy:\n    limit = 3\n",
    "src/client.py": "from src.retry import RetryPolicy\n\n\ndef fetch(url):\n    return RetryPolicy().limit\n",
    "tests/test_retry.py": "from src.retry import backoff\n\n\ndef test_backoff():\n    assert backoff(2) == 4\n",
}


@pytest.fixture(autouse=True)
def save_every_view(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(engine_mod, "VIEW_SAVE_MIN_S", 0.0)


def _workspace(tmp_path: Path) -> tuple[Path, str]:
    ws = tmp_path / "ws"
    for rel, text in FILES.items():
        (ws / rel).parent.mkdir(parents=True, exist_ok=True)
        (ws / rel).write_text(text)
    idx = str(tmp_path / "idx")
    with Engine(ws, index_dir=idx, vectors=False) as eng:
        eng.index(vectors=False)
    return ws, idx


def _tables(eng: Engine) -> tuple:
    v = eng.view()
    g = v.graph
    # The definitions as the view gives them (read from the manifest as asked: SymbolTable), while it is open.
    return (v.files, dict(v.symbols.items()), [v.chunk_lines.get(p) for p in v.files], v.stripped_paths, v.by_basename,
            dict(g.imports), dict(g.imported_by), dict(g.tests_of), dict(g.mirrors_of), g.edges)


def _answer(eng: Engine, q: str) -> list[tuple[str, float]]:
    return [(r["path"], round(r["score"], 6)) for r in eng.context(q)["results"]]


def test_a_second_process_loads_what_the_first_built(tmp_path: Path) -> None:
    ws, idx = _workspace(tmp_path)
    with Engine(ws, index_dir=idx, vectors=False) as first:
        built = _tables(first)
        answer = _answer(first, "which tests cover retry.py")
        assert first.view_source.startswith("built") and "saved" in first.view_source
    with Engine(ws, index_dir=idx, vectors=False) as second:
        assert _tables(second) == built
        assert second.view_source.startswith("loaded")
        assert _answer(second, "which tests cover retry.py") == answer
        # the loaded graph can still be patched after a save (its resolver came along)
        (ws / "src/client.py").write_text("from src.retry import backoff\n\n\ndef fetch(url):\n    return backoff(1)\n")
        second.index(vectors=False)
        assert "src/retry.py" in second.view().graph.imports["src/client.py"]


def test_a_view_of_an_older_state_is_not_loaded(tmp_path: Path) -> None:
    ws, idx = _workspace(tmp_path)
    with Engine(ws, index_dir=idx, vectors=False) as first:
        first.view()
    (ws / "src/jitter.py").write_text("def full_jitter(cap):\n    return cap\n")
    with Engine(ws, index_dir=idx, vectors=False) as writer:  # another process indexes the new file
        writer.index(vectors=False)
    with Engine(ws, index_dir=idx, vectors=False) as later:
        assert later.view_source == ""
        assert "full_jitter" in later.view().symbols and "src/jitter.py" in later.view().files
        assert later.view_source.startswith("built")


def test_another_manifest_or_other_code_is_not_loaded(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    ws, idx = _workspace(tmp_path)
    with Engine(ws, index_dir=idx, vectors=False) as first:
        first.view()
    monkeypatch.setattr(view_cache, "_code_digest", "other code")
    with Engine(ws, index_dir=idx, vectors=False) as eng:
        eng.view()
        assert eng.view_source.startswith("built")
    monkeypatch.undo()
    monkeypatch.setattr(engine_mod, "VIEW_SAVE_MIN_S", 0.0)
    # The same folder with a new manifest (deleted, re-indexed): the content version starts again, the
    # identity does not repeat.
    saved = (Path(idx) / view_cache.FILE).read_bytes()
    for name in ("meta.sqlite", "meta.sqlite-wal", "meta.sqlite-shm"):
        (Path(idx) / name).unlink(missing_ok=True)
    with Engine(ws, index_dir=idx, vectors=False) as eng:
        eng.index(vectors=False)
    (Path(idx) / view_cache.FILE).write_bytes(saved)
    with Engine(ws, index_dir=idx, vectors=False) as eng:
        eng.view()
        assert eng.view_source.startswith("built")


def test_a_damaged_file_is_built_again(tmp_path: Path) -> None:
    ws, idx = _workspace(tmp_path)
    with Engine(ws, index_dir=idx, vectors=False) as first:
        built = _tables(first)
    path = Path(idx) / view_cache.FILE
    path.write_bytes(path.read_bytes()[: path.stat().st_size // 2])
    with Engine(ws, index_dir=idx, vectors=False) as eng:
        assert _tables(eng) == built
        assert eng.view_source.startswith("built")
    with Engine(ws, index_dir=idx, vectors=False) as eng:  # and saved whole again
        assert _tables(eng) == built and eng.view_source.startswith("loaded")


def test_chunk_lines_copied_while_a_query_reads_more(tmp_path: Path) -> None:
    """A save patches the view (ChunkLines.without) while a query on it reads files not read yet: the
    copy must not iterate the dict being filled (it raised 'changed size during iteration' in 95 of 300
    copies before; review)."""
    import threading

    from delphi_ls.retrieval.context import ChunkLines
    from delphi_ls.stores.meta import MetaStore

    lines = ChunkLines(MetaStore(tmp_path / "meta.sqlite"))
    lines.fetch([f"f{i}.py" for i in range(20000)])
    errors: list[str] = []
    stop = threading.Event()

    def query() -> None:
        i = 0
        while not stop.is_set() and i < 200_000:
            lines.get(f"new{i}.py")
            i += 1

    t = threading.Thread(target=query)
    t.start()
    try:
        for _ in range(300):
            try:
                lines.without({"f1.py"})
            except RuntimeError as e:
                errors.append(str(e))
    finally:
        stop.set()
        t.join()
    assert not errors, errors[:1]


def test_a_snapshot_loaded_back_then_edited_is_not_served_a_later_view(tmp_path: Path) -> None:
    """A snapshot returns the manifest to an earlier state; the next write must not meet a view saved for
    a later state of the same manifest (a counter went back with the snapshot and repeated; review)."""
    ws = tmp_path / "ws"
    (ws / "src").mkdir(parents=True)
    (ws / "src/a.py").write_text("def one():\n    return 1\n")
    (ws / "src/b.py").write_text("def two():\n    return 2\n")
    idx = str(tmp_path / "idx")
    snap = tmp_path / "snap.tar.gz"
    with Engine(ws, index_dir=idx, vectors=False) as eng:
        eng.snapshot(snap)
    (ws / "src/a.py").write_text("def alpha():\n    return 1\n")
    with Engine(ws, index_dir=idx, vectors=False) as eng:
        eng.index(vectors=False)
        assert "alpha" in eng.view().symbols  # saved (the threshold is 0 here)
    (ws / "src/a.py").write_text("def one():\n    return 1\n")  # back to the snapshot's state
    Engine.load_snapshot(snap, ws, index_dir=idx, vectors=False)
    (ws / "src/b.py").write_text("def beta():\n    return 2\n")
    with Engine(ws, index_dir=idx, vectors=False) as eng:
        eng.index(vectors=False)
        v = eng.view()
        assert "beta" in v.symbols and "alpha" not in v.symbols, eng.view_source


def test_a_write_by_older_code_is_seen(tmp_path: Path) -> None:
    """A process running older code (a language server started before an upgrade) writes a file's rows
    without knowing of the content version; the manifest's own triggers move it (review)."""
    import sqlite3

    ws, idx = _workspace(tmp_path)
    with Engine(ws, index_dir=idx, vectors=False) as first:
        assert "backoff" in first.view().symbols  # saved
    # What an older replace_file does: a file's symbols and its row, no state written by the code.
    db = sqlite3.connect(str(Path(idx) / "meta.sqlite"))
    db.execute("DELETE FROM symbols WHERE path='src/retry.py'")
    db.execute("INSERT INTO symbols VALUES ('full_jitter', 'function', 'src/retry.py', 1, 2, NULL)")
    row = db.execute("SELECT * FROM files WHERE path='src/retry.py'").fetchone()
    db.execute("INSERT OR REPLACE INTO files VALUES (?,?,?,?,?,?,?,?,?)", ("src/retry.py", "other", *row[2:]))
    db.commit()
    db.close()
    with Engine(ws, index_dir=idx, vectors=False) as later:
        assert "full_jitter" in later.view().symbols and "backoff" not in later.view().symbols
        assert later.view_source.startswith("built")


class _Planted:
    """What a hostile view.pickle runs when unpickled: it writes a file."""

    def __init__(self, target: str) -> None:
        self.target = target

    def __reduce__(self):  # type: ignore[no-untyped-def]
        return (Path(self.target).write_text, ("ran",))


def test_a_view_file_not_signed_by_this_user_is_never_unpickled(tmp_path: Path) -> None:
    """An index folder can be one a cloned repository ships (index_dir inside a workspace): a view.pickle
    there, with the right key and a MAC made with any other secret, must not run (a pickle runs code)."""
    import hashlib
    import hmac
    import json
    import pickle

    ws, idx = _workspace(tmp_path)
    with Engine(ws, index_dir=idx, vectors=False) as eng:
        key = [*eng.meta.content_version(), view_cache.code_digest()]
    planted = tmp_path / "planted"
    head = (json.dumps(key) + "\n").encode()
    body = pickle.dumps(_Planted(str(planted)))
    forged = hmac.new(b"not this user's key", head + body, hashlib.sha256).hexdigest().encode()
    for planted_file in (forged + b"\n" + head + body, b"\n" + head + body, body):  # a bare pickle too
        (Path(idx) / view_cache.FILE).write_bytes(planted_file)
        with Engine(ws, index_dir=idx, vectors=False) as eng:
            assert "backoff" in eng.view().symbols and eng.view_source.startswith("built")
        assert not planted.exists()
        (Path(idx) / view_cache.FILE).unlink(missing_ok=True)


def test_not_saved_while_an_index_run_writes_then_saved_when_idle(tmp_path: Path) -> None:
    """Review M2: a query during an index run built a view and saved it, stale at the run's next batch (a
    cold index of the 100k workspace pickled 120 MB per batch). Now the run's writer saves nothing, and
    save_view() saves the same view once the run is over."""
    ws, idx = _workspace(tmp_path)
    pickle_file = Path(idx) / view_cache.FILE
    with Engine(ws, index_dir=idx, vectors=False) as eng:
        with eng._index_lock:  # what an index run in this engine holds
            built = eng.view()
        assert eng.view_source.startswith("built") and "saved" not in eng.view_source
        assert not pickle_file.exists()
        assert eng.save_view() and pickle_file.exists()
        assert eng.view() is built
        assert not eng.save_view()  # saved already: not written again
    with Engine(ws, index_dir=idx, vectors=False) as later:
        assert later.view_source == "" and later.view() is not None
        assert later.view_source.startswith("loaded")


def test_a_patched_view_is_saved_when_idle_and_equals_a_fresh_build(tmp_path: Path) -> None:
    """After a save patches the view in memory, the idle save writes it under the new state; the next
    process loads exactly what a build from the manifest gives."""
    ws, idx = _workspace(tmp_path)
    with Engine(ws, index_dir=idx, vectors=False) as eng:
        eng.view()
        (ws / "src/retry.py").write_text("def backoff(attempt, base=2):\n    return base ** attempt\n\n\n"
                                         "def jitter(x):\n    return x\n")
        eng.index(vectors=False, only=["src/retry.py"])  # named, as an editor's save: the view is patched
        assert "jitter" in eng.view().symbols and eng.view_source.startswith("built")
        assert eng.save_view()
    with Engine(ws, index_dir=idx, vectors=False) as loaded:
        got = _tables(loaded)
        assert loaded.view_source.startswith("loaded")
    (Path(idx) / view_cache.FILE).unlink()
    with Engine(ws, index_dir=idx, vectors=False) as fresh:
        assert _tables(fresh) == got and fresh.view_source.startswith("built")


def test_a_view_outdated_by_another_process_is_not_saved(tmp_path: Path) -> None:
    ws, idx = _workspace(tmp_path)
    with Engine(ws, index_dir=idx, vectors=False) as eng:
        with eng._index_lock:
            eng.view()  # built, not saved (a run "writes")
        (ws / "src/jitter.py").write_text("def full_jitter(cap):\n    return cap\n")
        with Engine(ws, index_dir=idx, vectors=False) as writer:
            writer.index(vectors=False)
        assert not eng.save_view()  # the manifest moved on: that view is for a state gone
        assert not (Path(idx) / view_cache.FILE).exists()


def test_warm_opens_what_the_first_question_reads(tmp_path: Path) -> None:
    ws, idx = _workspace(tmp_path)
    with Engine(ws, index_dir=idx, embedder="potion-base-8M") as eng:
        eng.index()
    with Engine(ws, index_dir=idx, embedder="potion-base-8M") as eng:
        took = eng.warm()
        assert set(took) >= {"view", "vectors", "lexical"}
        assert eng._view is not None and eng._exact is not None and eng._probe is not None
        assert eng._probe.get("status", "").startswith("ok"), eng._probe
    with Engine(ws, index_dir=idx, embedder="potion-base-8M", warm_start=False) as eng:
        assert eng.warm() == {} and eng._view is None and eng._exact is None


def test_prepare_view_at_the_end_of_delphi_index(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from delphi_ls.cli import main

    ws, idx = _workspace(tmp_path)
    monkeypatch.setattr(engine_mod, "VIEW_PREBUILD_FILES", 10**6)
    assert main(["index", str(ws), "--index-dir", idx, "--quiet"]) == 0
    assert not (Path(idx) / view_cache.FILE).exists()  # a small workspace: nothing to save
    monkeypatch.setattr(engine_mod, "VIEW_PREBUILD_FILES", 1)
    assert main(["index", str(ws), "--index-dir", idx, "--quiet"]) == 0
    with Engine(ws, index_dir=idx) as eng:
        eng.view()
        assert eng.view_source.startswith("loaded")


def test_the_exact_matrix_is_saved_and_loaded_like_the_view(tmp_path: Path) -> None:
    """Loading the exact search's matrix from the manifest took 2.8-7.3 s on the 100k workspace: a matrix
    slow to load is saved (signed, keyed) and the next process loads it; a save's patch is saved again."""
    ws, idx = _workspace(tmp_path)
    with Engine(ws, index_dir=idx, embedder="potion-base-8M") as eng:
        eng.index()
    saved = Path(idx) / exact_file.FILE
    q = "which tests cover retry.py"
    with Engine(ws, index_dir=idx, embedder="potion-base-8M") as eng:
        answer = _answer(eng, q)
        assert not saved.exists() and eng._exact_unsaved is not None  # not on the query's path
        assert "exact_saved" in eng.save_for_next() and saved.exists() and eng._exact_unsaved is None
    with Engine(ws, index_dir=idx, embedder="potion-base-8M") as eng:
        calls = []
        real = engine_mod.ExactVectors.load
        engine_mod.ExactVectors.load = classmethod(lambda cls, *a: calls.append(1) or real(*a))  # type: ignore[method-assign]
        try:
            assert _answer(eng, q) == answer and calls == []  # from the file, not the manifest
        finally:
            engine_mod.ExactVectors.load = real  # type: ignore[method-assign]
        (ws / "src/retry.py").write_text("def backoff(attempt):\n    return 3 ** attempt\n")
        eng.index(only=["src/retry.py"])  # patched in memory, saved again when idle
        assert eng._exact_unsaved is not None and eng.warm().get("exact_saved") is not None
        patched = _answer(eng, q)
    with Engine(ws, index_dir=idx, embedder="potion-base-8M") as eng:
        assert _answer(eng, q) == patched
        ex = eng._exact
        saved.unlink()
        eng._exact = None
        assert _answer(eng, q) == patched and sorted(eng._exact.ids) == sorted(ex.ids) and len(ex) > 0


def test_a_run_embedding_chunks_of_unchanged_files_reloads_the_exact_matrix(tmp_path: Path) -> None:
    """Review 9 H1: a catch-up finishing a killed run's embedding embeds chunks of files it does not change;
    patching only the changed files left those out of the matrix (and saved it so)."""
    ws, idx = _workspace(tmp_path)
    with Engine(ws, index_dir=idx, embedder="potion-base-8M") as eng:
        eng.index()
        eng.meta.db.execute("UPDATE chunks SET embedded = 0 WHERE path = 'src/client.py'")  # as a kill leaves it
        eng.meta.db.commit()
    with Engine(ws, index_dir=idx, embedder="potion-base-8M") as eng:
        eng.warm()
        assert len(eng._exact) == eng.meta.counts()["vectors"]
        rep = eng.index()
        assert rep.chunks_embedded > 0 and rep.files_indexed == 0
        n = eng.meta.counts()["vectors"]
        assert len(eng._exact_vectors(n)) == n == eng.meta.counts()["chunks"]
        eng.save_for_next()
    with Engine(ws, index_dir=idx, embedder="potion-base-8M") as eng:
        n = eng.meta.counts()["vectors"]
        assert len(eng._exact_vectors(n)) == n


def test_a_loaded_view_patched_by_a_save_is_saved_again(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Review 9 M2: a view loaded from the file counted as quick to build, so its patch was never saved and
    every other start built it again."""
    ws, idx = _workspace(tmp_path)
    with Engine(ws, index_dir=idx, vectors=False) as eng:
        eng.view()  # built and saved (the threshold is 0 here)
    monkeypatch.setattr(engine_mod, "VIEW_SAVE_MIN_S", 1000.0)  # no build here is slow: only a loaded view counts
    with Engine(ws, index_dir=idx, vectors=False) as eng:
        eng.view()
        assert eng.view_source.startswith("loaded")
        (ws / "src/retry.py").write_text("def backoff(attempt):\n    return 5 ** attempt\n\n\ndef pause():\n    pass\n")
        eng.index(vectors=False, only=["src/retry.py"])
        assert eng.view_unsaved() and "view_saved" in eng.save_for_next()
    with Engine(ws, index_dir=idx, vectors=False) as eng:
        assert "pause" in eng.view().symbols and eng.view_source.startswith("loaded")


def test_a_short_key_file_signs_nothing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Review 9: a key file left empty (a kill between creating and writing it) made b"" the key, so a file
    anyone can sign was unpickled. A key under 32 bytes is unusable: nothing is loaded or saved."""
    import platformdirs

    monkeypatch.setattr(platformdirs, "user_cache_dir", lambda *_a, **_k: str(tmp_path / "cache"))
    (tmp_path / "cache").mkdir()
    (tmp_path / "cache" / "view-cache.key").write_bytes(b"")
    assert view_cache._secret() is None
    cache = view_cache.ViewCache(tmp_path)
    assert not cache.save(("m", "v", "digest"), {"x": 1}) and cache.load(("m", "v", "digest")) is None


def test_a_killed_save_leaves_no_temporary_file_for_long(tmp_path: Path) -> None:
    import os
    import time

    old, young = tmp_path / f"{view_cache.FILE}.abc.tmp", tmp_path / f"{exact_file.FILE}.def.tmp"
    old.write_bytes(b"x" * 10)
    young.write_bytes(b"y")
    os.utime(old, (time.time() - 7200, time.time() - 7200))
    view_cache.ViewCache(tmp_path)
    exact_file.ExactFile(tmp_path)
    assert not old.exists() and young.exists()  # a young one may be another process's save under way
