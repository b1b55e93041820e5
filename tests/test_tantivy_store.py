"""The tantivy lexical store (issue 18): the Whoosh store's answers from the same fixture, deletes and a
one-file re-index, a damaged or missing folder found and rebuilt from the manifest, a switch of
``lexical_store`` detected and rebuilt, an unavailable tantivy an error (no fallback), kill -9 mid-run."""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from delphi_ls import Engine
from delphi_ls.settings import Settings, SettingsError

FILES = {
    "shipyard/retry.py": "class RetryPolicy:\n    def delay_for(self, attempt):\n        return 2 ** attempt\n\n\n"
                         "def with_backoff(fn, policy):\n    return fn()\n",
    "shipyard/scheduler.py": "import heapq\n\n\nclass BuildScheduler:\n    def submit(self, job):\n"
                             "        heapq.heappush(self.queue, job)\n\n    def next_job(self):\n"
                             "        return heapq.heappop(self.queue)\n",
    "shipyard/uploads.py": "from shipyard.retry import RetryPolicy, with_backoff\n\n\n"
                           "def upload_artifact(client, blob):\n    return with_backoff(lambda: client.put(blob), RetryPolicy())\n",
    "tests/test_retry.py": "from shipyard.retry import RetryPolicy\n\n\ndef test_delay():\n"
                           "    assert RetryPolicy().delay_for(3) == 8\n",
    "tests/test_scheduler.py": "from shipyard.scheduler import BuildScheduler\n\n\ndef test_submit():\n"
                               "    s = BuildScheduler()\n    s.queue = []\n    s.submit(1)\n    assert s.next_job() == 1\n",
    "docs/retry.md": "# Retries\nUploads are retried with exponential backoff.\n",
    "blank.py": "   \n\n",  # no chunks: one empty lexical document
}
QUERIES = [["retrypolicy", "delay"], ["buildscheduler"], ["heapq", "queue"], ["exponential", "backoff"], ["upload"]]


def _workspace(root: Path) -> Path:
    for rel, text in FILES.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text)
    return root


def _open(ws: Path, idx: Path, store: str, **settings) -> Engine:
    return Engine(ws, index_dir=str(idx), reranker="off", vectors=False, lexical_store=store, **settings)


def _handlers(ws: Path, n: int) -> Path:
    """``n`` small Python files, ``pkg/mod{i}.py`` each defining ``handler_{i}``."""
    (ws / "pkg").mkdir(parents=True, exist_ok=True)
    for i in range(n):
        (ws / "pkg" / f"mod{i}.py").write_text(f"def handler_{i}(request):\n    return request.path + '{i}'\n")
    return ws


@pytest.fixture(scope="module")
def built(tmp_path_factory) -> tuple[Path, Path]:
    """One workspace indexed with tantivy (copied by the tests that damage it)."""
    base = tmp_path_factory.mktemp("tv")
    ws = _workspace(base / "ws")
    with _open(ws, base / "idx", "tantivy") as eng:
        assert not eng.index().errors
    return ws, base / "idx"


@pytest.fixture
def copy(built, tmp_path: Path) -> tuple[Path, Path]:
    ws, idx = built
    shutil.copytree(ws, tmp_path / "ws")
    shutil.copytree(idx, tmp_path / "idx")
    return tmp_path / "ws", tmp_path / "idx"


def _paths(eng: Engine, terms: list[str], **kw) -> list[str]:
    eng.lexical.refresh()
    seen: list[str] = []
    for _cid, p, _s in eng.lexical.search_terms(terms, 50, **kw):
        if p not in seen:
            seen.append(p)
    return seen


def test_same_answers_as_whoosh_on_the_same_workspace(tmp_path: Path):
    ws = _workspace(tmp_path / "ws")
    answers = {}
    for store in ("whoosh", "tantivy"):
        with _open(ws, tmp_path / f"idx-{store}", store) as eng:
            eng.index()
            assert eng.lexical.name == store and (tmp_path / f"idx-{store}" / store).is_dir()
            rows = eng.lexical.search_terms(["retrypolicy"], 50)
            assert rows and all(isinstance(c, str) and isinstance(p, str) and isinstance(s, float) for c, p, s in rows)
            assert {c for c, _p, _s in rows} <= {r.id for p in FILES for r in eng.meta.chunks_of(p)}
            answers[store] = {
                "docs": eng.lexical.doc_count(),
                "chunks": eng.meta.counts()["chunks"],
                "found": [sorted(_paths(eng, q)) for q in QUERIES],
                "top": [_paths(eng, q)[0] for q in QUERIES],
                "tests": _paths(eng, ["retrypolicy"], fields=("content",), kinds={"test"}),
                "rarest": eng.lexical.rarest(["shipyard", "retrypolicy", "heappop", "nowhere", "job"], 2),
                "context": [r["path"] for r in eng.context("where is the build scheduler's job queue")["results"][:2]],
            }
    assert answers["tantivy"] == answers["whoosh"]
    assert answers["tantivy"]["tests"] == ["tests/test_retry.py"]  # the kind filter, not a score
    assert answers["tantivy"]["docs"] == answers["tantivy"]["chunks"] + 1  # + blank.py's empty document


def test_deletes_and_a_one_file_reindex(copy):
    ws, idx = copy
    with _open(ws, idx, "tantivy") as eng:
        docs = eng.lexical.doc_count()
        (ws / "shipyard" / "retry.py").write_text("def jittered_delay(attempt):\n    return attempt\n")
        rep = eng.index(only=["shipyard/retry.py"])
        assert rep.files_indexed == 1 and not rep.errors
        assert _paths(eng, ["jittered"]) == ["shipyard/retry.py"]
        assert "shipyard/retry.py" not in _paths(eng, ["retrypolicy"])  # the old chunk went
        assert eng.lexical.doc_count() == docs
        (ws / "docs" / "retry.md").unlink()
        rep = eng.index()
        assert rep.files_deleted == 1
        assert _paths(eng, ["exponential"]) == []
        assert eng.lexical.doc_count() == eng.meta.counts()["chunks"] + 1 < docs  # + blank.py's empty doc
    # The writer is released after each batch: another writer (another engine, another process) may open.
    with _open(ws, idx, "tantivy") as eng:
        w = eng.lexical.writer()
        w.cancel()
        assert not eng.index().errors


def _damage(folder: Path, how: str) -> None:
    if how == "missing":
        shutil.rmtree(folder)
    elif how == "meta_lost":
        (folder / "meta.json").unlink()
    elif how == "truncated":
        for p in folder.iterdir():
            if p.suffix in (".idx", ".term", ".store"):
                p.write_bytes(p.read_bytes()[:5])
    elif how == "foreign":  # another version's fields
        meta = json.loads((folder / "meta.json").read_text())
        meta["schema"][0]["name"] = "other"
        (folder / "meta.json").write_text(json.dumps(meta))


@pytest.mark.parametrize("how", ["missing", "meta_lost", "truncated", "foreign"])
def test_a_damaged_or_missing_folder_is_found_and_rebuilt(copy, how: str):
    ws, idx = copy
    _damage(idx / "tantivy", how)
    with _open(ws, idx, "tantivy") as eng:
        h = eng.health(check_staleness=False)
        assert not h["ok"] and h["lexicalStore"].startswith("tantivy 0.27")
        [p] = [p for p in h["problems"] if p["code"] == "lexical_store"]
        assert "tantivy" in p["message"] and "delphi index" in p["message"], p
        rep = eng.index()
        assert any("rebuilt from the manifest" in r for r in rep.repaired), rep.repaired
        assert eng.health(check_staleness=False)["ok"]
        assert _paths(eng, ["buildscheduler"])[0] == "shipyard/scheduler.py"
        assert eng.lexical.doc_count() == eng.meta.counts()["chunks"] + 1


def test_switching_stores_is_detected_and_rebuilt(copy):
    ws, idx = copy
    with _open(ws, idx, "whoosh") as eng:
        # Built with tantivy: the whoosh folder is not there (or empty), the health says which and why.
        [p] = [p for p in eng.health(check_staleness=False)["problems"] if p["code"] == "lexical_store"]
        assert 'kept in tantivy now' in p["message"] and 'lexical_store is "whoosh"' in p["message"], p
        assert (idx / "tantivy" / "meta.json").exists()  # never deleted at open: others may use it (review 7 H2)
        rep = eng.index()
        assert any("(it was tantivy)" in r for r in rep.repaired), rep.repaired
        assert eng.health(check_staleness=False)["ok"] and eng.meta.get_state("lexical_store") == "whoosh"
        assert _paths(eng, ["buildscheduler"])[0] == "shipyard/scheduler.py"
    with _open(ws, idx, "whoosh") as eng:  # no switch the second time
        assert eng.lexical_switched_from is None and eng.health(check_staleness=False)["ok"]
    with _open(ws, idx, "tantivy") as eng:  # and back
        assert eng.lexical_switched_from == "whoosh" and (idx / "whoosh").exists()
        eng.index()
        assert eng.health(check_staleness=False)["ok"] and eng.lexical.doc_count() == eng.meta.counts()["chunks"] + 1


def test_an_index_from_before_the_setting_is_whoosh(tmp_path: Path):
    ws = _workspace(tmp_path / "ws")
    with _open(ws, tmp_path / "idx", "whoosh") as eng:
        eng.index()
        eng.meta.set_state("lexical_store", None)  # what an index built before the setting holds
    with _open(ws, tmp_path / "idx", "tantivy") as eng:
        assert eng.lexical_switched_from == "whoosh"
        eng.index()
        assert eng.health(check_staleness=False)["ok"]


def test_unavailable_tantivy_is_an_error_not_a_fallback(copy, monkeypatch):
    ws, idx = copy
    monkeypatch.setitem(sys.modules, "tantivy", None)  # what `import tantivy` meets when it is not installed
    with _open(ws, idx, "tantivy") as eng:
        h = eng.health(check_staleness=False)
        assert not h["ok"] and "unavailable" in h["lexicalStore"]
        [p] = [p for p in h["problems"] if p["code"] == "lexical_store"]
        assert "tantivy is unavailable" in p["message"] and "not installed" in p["message"]
        assert eng.lexical.search_terms(["retrypolicy"], 10) == []  # nothing answers BM25, Whoosh included
        rep = eng.index()  # an error in the report, not a traceback (review 7 M4)
        assert any("tantivy is unavailable" in e for e in rep.errors), rep.errors
        assert not (idx / "whoosh").exists()
    # The CLI: a clear message and exit status 1, no traceback. A sitecustomize hides tantivy there.
    hide = idx.parent / "hide_tantivy"
    hide.mkdir()
    (hide / "sitecustomize.py").write_text("import sys\nsys.modules['tantivy'] = None\n")
    env = {**os.environ, "PYTHONPATH": f"{hide}{os.pathsep}{os.environ.get('PYTHONPATH', '')}",
           "DELPHI_LEXICAL_STORE": "tantivy", "DELPHI_VECTORS": "false", "DELPHI_RERANKER": "off"}
    r = subprocess.run([sys.executable, "-m", "delphi_ls.cli", "index", str(ws), "--index-dir", str(idx), "--quiet"],
                       env=env, capture_output=True, text=True, timeout=120)
    assert r.returncode == 1 and "Traceback" not in r.stderr, r.stderr
    assert "tantivy is unavailable" in r.stderr and "not installed" in r.stderr, r.stderr


def test_the_setting_is_validated():
    assert Settings.from_dict({"lexical_store": "tantivy"}).lexical_store == "tantivy"
    assert Settings().lexical_store in ("whoosh", "tantivy")
    with pytest.raises(SettingsError, match="lexical_store"):
        Settings.from_dict({"lexical_store": "lucene"})


def test_killed_mid_run_resumes_to_the_same_counts(tmp_path: Path):
    """kill -9 during a tantivy write: the next run finds a whole committed index and finishes it."""
    ws = tmp_path / "ws"
    for i in range(300):
        d = ws / "gen" / f"m{i % 12}"
        d.mkdir(parents=True, exist_ok=True)
        body = "\n".join(f"def f{i}_{j}(x):\n    return x * {j} + {i}\n" for j in range(30))
        (d / f"mod{i}.py").write_text(f'"""module {i}"""\n' + body)
    env = {**os.environ, "DELPHI_LEXICAL_STORE": "tantivy", "DELPHI_VECTORS": "false"}
    killed = tmp_path / "killed"
    cmd = [sys.executable, "-m", "delphi_ls.cli", "index", str(ws), "--index-dir", str(killed), "--quiet"]
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env)
    deadline = time.time() + 120
    while time.time() < deadline and proc.poll() is None:
        if any((killed / "tantivy").glob("*.store")):  # a segment is being written or was committed
            break
        time.sleep(0.02)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    with _open(ws, killed, "tantivy") as eng:  # what the kill left: a committed index, behind the workspace
        partial = eng.meta.counts()["chunks"]
        assert eng.check_stores() == {} or partial == 0
    subprocess.run(cmd, check=True, timeout=300, env=env)
    subprocess.run([*cmd[:-3], "--index-dir", str(tmp_path / "clean"), "--quiet"], check=True, timeout=300, env=env)
    facts = []
    for idx in (killed, tmp_path / "clean"):
        with _open(ws, idx, "tantivy") as eng:
            assert eng.health(check_staleness=False)["ok"]
            facts.append((eng.meta.counts()["chunks"], eng.lexical.doc_count(), _paths(eng, ["f7_3"])))
    assert facts[0] == facts[1] and facts[0][2] == ["gen/m7/mod7.py"]
    assert partial < facts[0][0]  # the kill really interrupted the run


def test_a_snapshot_made_with_whoosh_loads_into_tantivy(tmp_path: Path):
    """No lexical file travels in a snapshot: the loader builds its own store from the manifest, so a
    teammate on tantivy loads a snapshot made on Whoosh and answers the same, with no switch left to do."""
    ws = _workspace(tmp_path / "a" / "ws")
    with _open(ws, tmp_path / "idx-a", "whoosh") as eng:
        eng.index()
        eng.snapshot(tmp_path / "ws.delphi-snapshot")
        answers = [_paths(eng, q)[0] for q in QUERIES]
    other = tmp_path / "b" / "ws"
    shutil.copytree(ws, other)
    Engine.load_snapshot(tmp_path / "ws.delphi-snapshot", other, index_dir=tmp_path / "idx-b",
                         vectors=False, lexical_store="tantivy")
    assert (tmp_path / "idx-b" / "tantivy" / "meta.json").is_file() and not (tmp_path / "idx-b" / "whoosh").exists()
    with _open(other, tmp_path / "idx-b", "tantivy") as eng:
        assert eng.lexical_switched_from is None and eng.check_stores() == {}
        assert eng.lexical.doc_count() == eng.meta.counts()["chunks"] + 1
        assert [_paths(eng, q)[0] for q in QUERIES] == answers


def test_another_store_opened_beside_a_live_engine_deletes_nothing(copy):
    """Review 7 H2: a one-shot process with the other lexical_store (here an engine that indexes, as
    `DELPHI_LEXICAL_STORE=whoosh delphi context` does) used to delete the live tantivy folder at open:
    the live engine's searches and re-index then failed."""
    ws, idx = copy
    with _open(ws, idx, "tantivy") as live:
        assert _paths(live, ["buildscheduler"])[0] == "shipyard/scheduler.py"
        with _open(ws, idx, "whoosh") as other:
            other.index()
        assert (idx / "tantivy" / "meta.json").exists()
        assert _paths(live, ["buildscheduler"])[0] == "shipyard/scheduler.py"  # searching still works
        (ws / "shipyard" / "retry.py").write_text("def jitter_zz():\n    pass\n")
        rep = live.index(only=["shipyard/retry.py"])
        assert not rep.errors, rep.errors
        assert _paths(live, ["jitter_zz"]) == ["shipyard/retry.py"]
        assert live.health(check_staleness=False)["ok"]


def test_a_store_left_behind_is_rebuilt_not_served(copy):
    """Review 7 H2 (tv3): files deleted while another store kept the index must not come back as ghosts
    when the first store is used again, nor may a live engine of that store answer from it meanwhile."""
    ws, idx = copy
    with _open(ws, idx, "tantivy") as live:
        _ = live.health(check_staleness=False)
        with _open(ws, idx, "whoosh") as other:
            other.index()
            (ws / "shipyard" / "scheduler.py").unlink()
            assert other.index().files_deleted == 1
        # The live tantivy engine's folder still holds the deleted file: behind, so BM25 does not answer
        # from it (the next query sees that another process indexed) and health says why.
        assert "shipyard/scheduler.py" in _paths(live, ["buildscheduler"])  # the stale folder itself
        assert not live.retrieve("build scheduler").lists.get("bm25")
        h = live.health(check_staleness=False)
        [p] = [p for p in h["problems"] if p["code"] == "lexical_store"]
        assert not h["ok"] and 'kept in whoosh now' in p["message"], p
        with _open(ws, idx, "tantivy") as peer:  # another tantivy process rebuilds it: live answers again
            peer.index()
        hits = live.retrieve("build scheduler").lists.get("bm25") or []
        assert [h.path for h in hits] == ["tests/test_scheduler.py"]
        assert live.health(check_staleness=False)["ok"]
        live.meta.set_state("lexical_store", "whoosh")  # as it was before the peer's run, for what follows
    with _open(ws, idx, "tantivy") as back:
        assert back.lexical_switched_from == "whoosh" and back.check_stores()
        rep = back.index()
        assert any("(it was whoosh)" in r for r in rep.repaired), rep.repaired
        assert _paths(back, ["buildscheduler"]) == ["tests/test_scheduler.py"]
        assert back.health(check_staleness=False)["ok"] and back.meta.get_state("lexical_store") == "tantivy"
    with _open(ws, idx, "whoosh") as again:  # and whoosh, left behind in its turn, is rebuilt too
        assert again.lexical_switched_from == "tantivy"
        again.index()
        assert _paths(again, ["buildscheduler"]) == ["tests/test_scheduler.py"]


def test_a_commit_in_the_same_clock_tick_with_the_same_size_is_seen(copy):
    """Review 7 L4: another process's searcher is reloaded when meta.json changes; on a coarse clock two
    commits can leave it with the same mtime and size. tantivy replaces it by a rename: a new inode."""
    from delphi_ls.stores.tantivy_store import TantivyStore

    _ws, idx = copy
    reader = TantivyStore(idx / "tantivy")
    first = reader.searcher()
    meta = idx / "tantivy" / "meta.json"
    st = meta.stat()
    staged = meta.with_name("meta.json.next")
    staged.write_bytes(meta.read_bytes())  # what a commit of the same size writes, then renames
    os.replace(staged, meta)
    os.utime(meta, ns=(st.st_atime_ns, st.st_mtime_ns))  # in the same tick
    assert meta.stat().st_size == st.st_size and meta.stat().st_mtime_ns == st.st_mtime_ns
    assert reader.searcher() is not first


def _other_writer_opens(folder: Path) -> bool:
    """Whether another store on ``folder`` can take tantivy's writer (one writer per index: a writer still
    held anywhere refuses it), releasing it at once."""
    from delphi_ls.stores.tantivy_store import TantivyStore

    other = TantivyStore(folder)
    try:
        w = other.writer()
    except ValueError as e:
        if "LockBusy" not in str(e):
            raise
        return False
    w.cancel()
    return True


def test_a_runs_writer_commits_each_batch_and_is_released_at_its_end(tmp_path: Path):
    """Inside run_writer every batch gets the same writer; each commit is seen by a searcher at once and kept
    (a cancel goes back to it); the writer stays held until the block ends, an exception's end included."""
    from delphi_ls.stores.tantivy_store import TantivyStore

    store = TantivyStore(tmp_path / "tv")
    with store.run_writer():
        first = store.writer()
        TantivyStore.add_chunk(first, "c1", "a.py", "code", "def alpha(): pass", ["alpha"])
        first.commit(merge=False)
        assert store.doc_count() == 1  # committed: seen now, not at the block's end
        second = store.writer()
        assert second is first
        TantivyStore.add_chunk(second, "c2", "b.py", "code", "def beta(): pass", ["beta"])
        second.cancel()  # back to the last commit; the writer stays for the next batch
        third = store.writer()
        assert third is first
        TantivyStore.add_chunk(third, "c3", "c.py", "code", "def gamma(): pass", ["gamma"])
        third.commit(merge=False)
        assert not _other_writer_opens(tmp_path / "tv")  # still held between batches
    assert _other_writer_opens(tmp_path / "tv")
    assert store.doc_count() == 2 and [p for _c, p, _s in store.search_terms(["beta"], 10)] == []
    with pytest.raises(RuntimeError, match="a batch failed"), store.run_writer():
        w = store.writer()
        TantivyStore.add_chunk(w, "c4", "d.py", "code", "def delta(): pass", ["delta"])
        raise RuntimeError("a batch failed")
    assert _other_writer_opens(tmp_path / "tv")
    batch = store.writer()  # outside a block: a writer per batch, released by its commit
    TantivyStore.add_chunk(batch, "c5", "e.py", "code", "def epsilon(): pass", ["epsilon"])
    batch.commit()
    assert _other_writer_opens(tmp_path / "tv") and store.doc_count() == 3


def test_a_cold_run_makes_one_lexical_writer_for_all_its_batches(tmp_path: Path, monkeypatch):
    """A run of several batches opens tantivy's writer once (a writer per batch waited for its merges each
    time: 45.7 s of the indexer's thread at 100k files, bench/RESULTS.md session 35), answers the same as a run
    with a writer per batch, and leaves the writer released for the next run."""
    from delphi_ls.stores import tantivy_store

    ws = _handlers(tmp_path / "ws", 120)
    made = []
    real_init = tantivy_store.TantivyWriter.__init__

    def counted(self, store):
        made.append(self)
        real_init(self, store)

    monkeypatch.setattr(tantivy_store.TantivyWriter, "__init__", counted)
    with _open(ws, tmp_path / "idx", "tantivy") as eng:
        batches = []
        rep = eng.index(progress=lambda stage, *_a: stage == "lexical" and batches.append(eng.lexical.doc_count()))
        assert not rep.errors and rep.files_indexed == 120
        assert len(batches) >= 3 and batches == sorted(batches) and batches[0] < 120  # several commits, seen as made
        assert len(made) == 1
        assert _other_writer_opens(tmp_path / "idx" / "tantivy")
        got = _paths(eng, ["handler_7"])
        made.clear()
        assert not eng.index().errors and made == []  # a run that writes nothing opens no writer
    monkeypatch.setattr(tantivy_store.TantivyStore, "run_writer", lambda self: contextlib.nullcontext())
    with _open(ws, tmp_path / "per_batch", "tantivy") as eng:
        assert not eng.index().errors
        assert _paths(eng, ["handler_7"]) == got == ["pkg/mod7.py"]
        assert eng.lexical.doc_count() == 120


def test_the_runs_writer_is_released_when_the_runs_end_fails(tmp_path: Path, monkeypatch):
    """Whatever fails while a run ends (its parse workers' pool closing, here), tantivy's writer is released:
    the next run or another process can write (a review of session 35: the release came after the pool's close)."""
    from delphi_ls.indexing import workers

    ws = _handlers(tmp_path / "ws", 300)  # enough files for a pool of parse workers (POOL_MIN_FILES)
    real_close = workers.PreparePool.close

    def failing(self):  # type: ignore[no-untyped-def]
        real_close(self)
        raise RuntimeError("the pool failed to close")

    monkeypatch.setattr(workers.PreparePool, "close", failing)
    with _open(ws, tmp_path / "idx", "tantivy", index_workers=2) as eng:
        with pytest.raises(RuntimeError, match="failed to close") as failed:
            eng.index()
        # The error is still held (its traceback keeps the run's frames alive, as a caller logging it would):
        # a writer released only when those are collected would still hold tantivy's lock here.
        assert failed.tb is not None and _other_writer_opens(tmp_path / "idx" / "tantivy")
        monkeypatch.setattr(workers.PreparePool, "close", real_close)
        assert not eng.index().errors and eng.lexical.doc_count() == 300
