import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from delphi_ls import Engine
from tests.lexical_pin import whoosh_store_only  # noqa: F401  (these tests read Whoosh's own files)


def test_counts_and_skips(chroma_engine: Engine):
    engine = chroma_engine
    c = engine.meta.counts()
    assert c["files"] >= 18 and c["chunks"] >= c["files"] and c["vectors"] == c["chunks"]
    assert engine.vectors is not None and engine.vectors.count() == c["vectors"]
    skipped = engine.meta.skipped()
    assert skipped["assets/logo.dat"].startswith("binary")
    assert "too large" in skipped["data/huge.txt"]
    assert engine.meta.replaced_files() == ["legacy/latin1.py"]  # indexed, and health says how


def test_second_run_after_one_edit_redoes_only_that_file(engine: Engine, workspace: Path):
    rep = engine.index()
    assert (rep.files_indexed, rep.chunks_embedded) == (0, 0)
    before = engine.meta.counts()
    p = workspace / "shipyard" / "scheduler.py"
    p.write_text(p.read_text() + "\n\ndef drain(s):\n    return [s.next_job() for _ in s.queue]\n")
    rep = engine.index()
    assert rep.files_indexed == 1
    assert rep.chunks_written == len(engine.meta.chunks_of("shipyard/scheduler.py"))
    # Unchanged chunks of the edited file keep their vectors; only new content is embedded.
    assert 1 <= rep.chunks_embedded <= rep.chunks_written
    after = engine.meta.counts()
    assert after["vectors"] == after["chunks"] >= before["chunks"]
    assert "drain" in {s["name"] for s in engine.symbols("drain")}


def test_touch_without_change_is_not_reindexed(engine: Engine, workspace: Path):
    p = workspace / "shipyard" / "retry.py"
    os.utime(p, None)
    rep = engine.index()
    assert rep.files_indexed == 0 and rep.files_unchanged >= 1


def test_delete_and_rename_leave_both_stores(chroma_engine: Engine, workspace: Path):
    engine = chroma_engine
    ids = engine.meta.chunk_ids_of("shipyard/scheduler.py")
    (workspace / "shipyard" / "scheduler.py").rename(workspace / "shipyard" / "planner.py")
    (workspace / "docs" / "retry.md").unlink()
    rep = engine.index()
    assert rep.files_deleted == 2 and rep.files_indexed == 1
    # Same content under a new path: vectors come from the content cache, not the model.
    assert rep.vectors_from_cache == rep.chunks_embedded > 0
    assert engine.meta.chunk_ids_of("shipyard/scheduler.py") == []
    assert all(engine.vectors.get_vector(i) is None for i in ids)
    s = engine.lexical.searcher()
    from whoosh import query
    assert s.search(query.Term("path", "docs/retry.md")).scored_length() == 0
    assert s.search(query.Term("path", "shipyard/planner.py")).scored_length() > 0
    c = engine.meta.counts()
    assert c["vectors"] == c["chunks"] == engine.vectors.count()
    paths = [r["path"] for r in engine.context("build scheduler priority queue")["results"]]
    assert "shipyard/planner.py" in paths[:3] and "shipyard/scheduler.py" not in paths


def test_identical_chunks_embedded_once(workspace: Path, tmp_path: Path):
    for i in range(5):
        (workspace / f"copy{i}.py").write_text((workspace / "shipyard" / "scheduler.py").read_text())
    eng = Engine(workspace, index_dir=str(tmp_path / "idx2"))
    rep = eng.index()
    c = eng.meta.counts()
    assert c["vectors"] == c["chunks"]
    assert rep.vectors_from_cache >= 5 * len(eng.meta.chunks_of("copy0.py"))
    eng.close()


def _counts(index_dir: Path, ws: Path) -> dict:
    eng = Engine(ws, index_dir=str(index_dir), vector_search="hnsw")
    c = eng.meta.counts()
    c["chroma"] = eng.vectors.count()
    c["whoosh"] = eng.lexical.doc_count()
    eng.close()
    return c


def test_killed_mid_run_resumes_to_the_same_counts(tmp_path: Path):
    from tests.conftest import build_workspace

    ws = build_workspace(tmp_path / "big")
    for i in range(400):  # enough work that the kill lands mid-run
        d = ws / "gen" / f"m{i % 20}"
        d.mkdir(parents=True, exist_ok=True)
        body = "\n".join(f"def f{i}_{j}(x):\n    return x * {j} + {i}\n" for j in range(30))
        (d / f"mod{i}.py").write_text(f'"""module {i}"""\n' + body)
    killed = tmp_path / "killed"
    cmd = [sys.executable, "-m", "delphi_ls.cli", "index", str(ws), "--index-dir", str(killed), "--quiet"]
    env = {**os.environ, "DELPHI_VECTOR_SEARCH": "hnsw"}  # Chroma answers, so it holds every vector
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env)
    # Wait until the manifest shows progress, then kill hard (no cleanup handlers run).
    deadline = time.time() + 120
    while time.time() < deadline and proc.poll() is None:
        if (killed / "whoosh").exists() and any((killed / "whoosh").glob("*.seg")):
            break
        time.sleep(0.05)
    time.sleep(0.3)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    partial = _counts(killed, ws)
    subprocess.run(cmd, check=True, timeout=600, env=env)
    clean = tmp_path / "clean"
    subprocess.run([*cmd[:-3], "--index-dir", str(clean), "--quiet"], check=True, timeout=600, env=env)
    resumed, full = _counts(killed, ws), _counts(clean, ws)
    assert resumed == full, (partial, resumed, full)
    assert full["files"] > 400 and full["chroma"] == full["vectors"] == full["chunks"]
    assert partial["vectors"] < full["vectors"]  # the kill really interrupted the run


def test_a_stopped_first_run_resumes_instead_of_starting_over(tmp_path: Path):
    """Ctrl-C during the first index: the next run redoes only what was not committed."""
    ws = tmp_path / "ws"
    for i in range(120):
        d = ws / f"pkg{i % 6}"
        d.mkdir(parents=True, exist_ok=True)
        (d / f"mod{i}.py").write_text(f"def f{i}(x):\n    return x + {i}\n")
    with Engine(ws, index_dir=str(tmp_path / "index"), vectors=False) as eng:
        batches = []

        def stop_after_first_batch(phase: str, done: int, total: int, chunks: int) -> None:
            batches.append(done)
            eng.stop_indexing()

        first = eng.index(progress=stop_after_first_batch)
        assert first.errors and 0 < first.files_indexed < 120
        second = eng.index()
    assert second.files_unchanged == first.files_indexed
    assert second.files_indexed == 120 - first.files_indexed


def test_a_run_that_changes_nothing_keeps_the_warm_view(engine: Engine, workspace: Path):
    """The MCP processes poll with a full pass every 2 s: one that finds nothing must not drop the view."""
    view = engine.view()
    gen = engine.meta.get_state("generation", 0)
    rep = engine.index()
    assert rep.files_indexed == 0 and rep.files_deleted == 0
    assert engine.view() is view and engine.meta.get_state("generation", 0) == gen
    (workspace / "shipyard" / "retry.py").write_text("def retry_forever():\n    return None\n")
    engine.index()
    assert engine.view() is not view and engine.meta.get_state("generation", 0) == gen + 1


def test_a_new_index_folder_is_private(workspace: Path, tmp_path: Path):
    """The index holds the workspace's text: a folder Delphi creates is readable by this user only."""
    with Engine(workspace, index_dir=str(tmp_path / "fresh-index"), vectors=False) as eng:
        assert (eng.index_dir.stat().st_mode & 0o777) == 0o700


def test_a_run_under_way_says_about_how_long_it_has_left(tmp_path: Path, monkeypatch) -> None:
    """An agent told "indexing in progress (lexical 25/2314)" could not tell whether to ask again in a second or an
    hour (a newcomer, session 44): past its first reports a phase carries an estimate from its pace so far, and the
    MCP door's note says when to ask again."""
    import delphi_ls.engine as engine_mod
    from delphi_ls.mcp.tools import indexing_line

    monkeypatch.setattr(engine_mod, "ETA_AFTER_S", 0.0)  # the pace from the second report on, not after a second
    for i in range(120):
        (tmp_path / "ws" / f"pkg{i // 30}").mkdir(parents=True, exist_ok=True)
        (tmp_path / "ws" / f"pkg{i // 30}" / f"m{i}.py").write_text(f"def f{i}(x):\n    return x + {i}\n")
    seen: list[dict] = []
    with Engine(tmp_path / "ws", index_dir=str(tmp_path / "idx")) as e:
        def report(phase: str, done: int, total: int, chunks: int) -> None:
            if phase == "lexical":
                seen.append(dict(e.indexing or {}))

        e.index(progress=report, vectors=False)
    assert "secondsLeft" not in seen[0], seen  # one report gives no pace
    mid = [s for s in seen if s["done"] < s["total"]]
    assert len(mid) >= 2 and all(s["secondsLeft"] >= 1 for s in mid[1:]), seen
    assert "secondsLeft" not in seen[-1], seen  # done: nothing left
    line = indexing_line(mid[-1])
    assert f"ask again in about {mid[-1]['secondsLeft']} s" in line, line
    assert "ask again" not in indexing_line({k: v for k, v in mid[-1].items() if k != "secondsLeft"})
