"""Issue 18: worker processes for the read + parse + chunk + tokenize stage (delphi_ls/indexing/workers.py).

Real files, real tree-sitter, real stores, real worker processes. What must hold: an index built with
workers is the one built in-process (same manifest rows in the same order, same chunk ids, same answers);
a bad file gives the same skip reason in a worker; a kill -9 of the indexing process leaves no worker
behind and the next run resumes to a clean run's counts; a small run (an editor's save) never starts a
pool; the setting is validated.
"""

from __future__ import annotations

import os
import signal
import sqlite3
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from delphi_ls import Engine
from delphi_ls.indexing import pipeline, workers
from delphi_ls.indexing.workers import Options, PreparePool, prepare_in_process
from delphi_ls.settings import Settings, SettingsError
from tests.calls import Calls
from tests.conftest import build_workspace

TABLES = {
    "files": "path, hash, size, mtime_ns, kind, language, n_chunks, replaced, note",
    "chunks": "id, path, ord, start_line, end_line, symbols, kind, content_hash, text, "
              "rowid NOT IN (SELECT rid FROM unembedded)",
    "symbols": "name, kind, path, line, end_line, container",
    "imports": "path, spec",
    "skipped": "path, reason",
    "file_docs": "path, pathwords, about, defs, keywords, imports, importers",
}


def _many_languages(root: Path, n: int) -> Path:
    """The shipyard fixture with its hostile files, plus ``n`` generated modules in several languages
    (classes, methods, imports), a whitespace-only file and a large file parsed through the read callback."""
    build_workspace(root)
    for i in range(n):
        d = root / "gen" / f"p{i % 7}"
        d.mkdir(parents=True, exist_ok=True)
        if i % 3 == 0:
            (d / f"mod{i}.py").write_text(f"import os\nfrom gen.p{(i + 1) % 7} import mod{i + 1}\n\n" + "\n".join(
                f"class Thing{i}_{j}:\n    def run_{j}(self, x):\n        return os.path.join(str(x), '{j}')\n"
                for j in range(6)))
        elif i % 3 == 1:
            (d / f"Mod{i}.java").write_text(f"package gen.p{i % 7};\nimport java.util.List;\n\npublic class Mod{i} {{\n" + "".join(
                f"    public int getValue{j}(List<String> xs) {{ return xs.size() + {j}; }}\n" for j in range(8)) + "}\n")
        else:
            (d / f"mod{i}.ts").write_text(f"import {{ helper }} from './mod{i - 1}';\n" + "".join(
                f"export function compute{i}_{j}(a: number): number {{ return helper(a) * {j}; }}\n" for j in range(5)))
    (root / "gen" / "blank.py").write_text("   \n\n\t\n")
    (root / "gen" / "big.py").write_text("".join(f"def big_{j}(x):\n    return x + {j}\n\n" for j in range(3000)))
    return root


def _manifest(index_dir: Path) -> dict[str, list[tuple]]:
    db = sqlite3.connect(index_dir / "meta.sqlite")
    try:
        return {t: db.execute(f"SELECT {cols} FROM {t} ORDER BY rowid").fetchall() for t, cols in TABLES.items()}
    finally:
        db.close()


def test_workers_build_the_index_the_in_process_run_builds(tmp_path: Path, monkeypatch):
    ws = _many_languages(tmp_path / "ws", 90)
    monkeypatch.setattr(pipeline, "POOL_MIN_FILES", 1)  # this small workspace uses the pool too
    pools = Calls(workers.PreparePool)
    monkeypatch.setattr(pipeline, "PreparePool", pools)
    answers = {}
    for n in (1, 2):
        with Engine(ws, index_dir=str(tmp_path / f"idx{n}"), index_workers=n, vectors=False) as eng:
            rep = eng.index()
            assert pools.n == (1 if n == 2 and (os.cpu_count() or 1) >= 2 else 0)  # a pool at 2 (one per core)
            answers[n] = {
                "report": (rep.files_indexed, rep.files_skipped, rep.chunks_written, rep.files_unchanged),
                # tantivy's writer threads place documents in segments in no fixed order, in-process too:
                # equal scores are compared as a set, not in their order.
                "bm25": [sorted((-round(sc, 4), i, p) for i, p, sc in eng.lexical.search_terms([w], 50))
                         for w in ("compute", "getvalue3", "thing", "retry")],
                "context": [[c["path"] for c in eng.context(q)["results"]]
                            for q in ("where is the retry backoff computed?", "Mod4 getValue")],
                "docs": eng.lexical.doc_count(),
            }
    one, two = _manifest(tmp_path / "idx1"), _manifest(tmp_path / "idx2")
    assert one["files"] and one["chunks"] and one["skipped"] and one["imports"] and one["file_docs"]
    for table in TABLES:
        assert one[table] == two[table], table
    assert answers[1] == answers[2]
    assert all(answers[1]["bm25"]) and answers[1]["report"][0] > 90


def test_a_second_run_with_workers_changes_only_what_changed(tmp_path: Path, monkeypatch):
    """Unchanged bytes with a new mtime are recognised in the worker (the manifest's hash goes with the
    task), and an edited file is redone: the same rows as the in-process run of the same edits."""
    ws = _many_languages(tmp_path / "ws", 30)
    monkeypatch.setattr(pipeline, "POOL_MIN_FILES", 1)
    reports = {}
    for n in (1, 2):
        idx = tmp_path / f"idx{n}"
        with Engine(ws, index_dir=str(idx), index_workers=1, vectors=False) as eng:
            eng.index()
        os.utime(ws / "gen" / "p0" / "mod0.py")  # same bytes, new mtime
        edited = ws / "gen" / "p1" / "Mod1.java"
        original = edited.read_text()
        edited.write_text(original.replace("getValue3", "fetchTotal3"))
        with Engine(ws, index_dir=str(idx), index_workers=n, vectors=False) as eng:
            rep = eng.index()
            reports[n] = (rep.files_indexed, rep.files_unchanged, rep.chunks_written)
            assert {p for _i, p, _s in eng.lexical.search_terms(["fetchtotal3"], 5)} == {"gen/p1/Mod1.java"}
        edited.write_text(original)
    assert reports[1] == reports[2] and reports[1][0] == 1 and reports[1][1] > 30
    one, two = _manifest(tmp_path / "idx1"), _manifest(tmp_path / "idx2")
    assert {t: v for t, v in one.items() if t != "files"} == {t: v for t, v in two.items() if t != "files"}
    # mtimes differ between the two rounds (each round touched the file again); the rest is the same
    assert [r[:3] + r[4:] for r in one["files"]] == [r[:3] + r[4:] for r in two["files"]]


def test_bad_files_give_the_same_skip_reasons_in_a_worker(tmp_path: Path):
    root = tmp_path / "ws"
    root.mkdir()
    (root / "ok.py").write_text("def fine():\n    return 1\n")
    (root / "blob.py").write_bytes(b"\x00\x01\x02binary" * 100)
    (root / "noise.txt").write_bytes(bytes(range(1, 32)) * 100)
    (root / "big.txt").write_text("x" * 5000)
    (root / "latin1.py").write_bytes("# caf\xe9\ndef f():\n    return 2\n".encode("latin-1"))
    (root / "blank.md").write_text("  \n\n")
    (root / "gen.go").write_text("// Code generated by protoc-gen-go. DO NOT EDIT.\npackage a\n")
    os.mkfifo(root / "pipe.py")
    os.symlink(root / "ok.py", root / "link.py")
    os.symlink(root, root / "loopdir")
    (root / "sub").mkdir()
    (root / "sub" / "a.py").write_text("x = 1\n")
    locked = root / "locked.py"
    locked.write_text("secret = 1\n")
    locked.chmod(0)
    paths = ["ok.py", "blob.py", "noise.txt", "big.txt", "latin1.py", "blank.md", "gen.go", "pipe.py", "link.py",
             "loopdir/ok.py", "sub", "sub/a.py", "locked.py", "vanished.py", "x" * 300 + ".py", "../outside.py"]
    items = [(p, None, None) for p in paths] + [("ok.py", _sha1(root / "ok.py"), None)]
    opts = Options(max_file_bytes=4000, chunk_chars=1500, tokens=True)
    here = list(prepare_in_process(root, opts, items))
    pool = PreparePool(2, root, opts)
    try:
        there = list(pool.stream(items))
    finally:
        pool.close()
    assert there == here
    got = {p.path: p.skip for p in here}
    assert got["ok.py"] is None and here[0].rows and here[0].tokens
    assert got["blob.py"].startswith("binary content") and got["noise.txt"].startswith("binary content")
    assert got["big.txt"].startswith("too large") and got["gen.go"].startswith("generated file")
    assert got["pipe.py"] == "not a regular file" and got["sub"] == "not a regular file"
    assert got["link.py"] == got["loopdir/ok.py"] == "symlink (not followed)"
    assert got["vanished.py"] == "vanished during indexing"
    assert got["x" * 300 + ".py"] == "unreadable: File name too long"
    assert got["../outside.py"] == "outside the workspace"
    if os.geteuid() != 0:  # root reads a file of mode 000
        assert got["locked.py"] == "unreadable: Permission denied"
    assert next(p for p in here if p.path == "latin1.py").replaced
    blank = next(p for p in here if p.path == "blank.md")
    assert blank.skip is None and not blank.rows and blank.tokens == [("", "", "blank md")]
    assert here[-1].unchanged and not here[-1].rows


def test_a_worker_killed_mid_run_stops_the_run_with_the_reason(tmp_path: Path, monkeypatch):
    """A worker killed from outside (out of memory, say): the run stops as a crash would, saying why, with
    its batches committed; the next run resumes to the clean run's rows."""
    ws = _many_languages(tmp_path / "ws", 60)
    monkeypatch.setattr(pipeline, "POOL_MIN_FILES", 1)
    monkeypatch.setattr(workers, "TASK_FILES", 2)
    monkeypatch.setattr(workers, "WINDOW_FILES", 4)  # the later tasks are not sent yet when the workers die

    class KillingPool(workers.PreparePool):
        def stream(self, items):  # type: ignore[no-untyped-def]
            for n, got in enumerate(super().stream(items)):
                if n == 30:  # the first batch (25 files) is written by now
                    for proc in list(self._pool._processes.values()):  # type: ignore[union-attr]
                        os.kill(proc.pid, signal.SIGKILL)
                yield got

    monkeypatch.setattr(pipeline, "PreparePool", KillingPool)
    idx = tmp_path / "idx"
    with Engine(ws, index_dir=str(idx), index_workers=2, vectors=False) as eng:
        with pytest.raises(workers.WorkerDied, match="index worker process died"):
            eng.index()
    assert 0 < len(_manifest(idx)["files"]) < 60
    monkeypatch.setattr(pipeline, "PreparePool", workers.PreparePool)
    with Engine(ws, index_dir=str(idx), index_workers=2, vectors=False) as eng:
        rep = eng.index()
        assert not rep.errors
    with Engine(ws, index_dir=str(tmp_path / "clean"), index_workers=1, vectors=False) as eng:
        eng.index()
    resumed, clean = _manifest(idx), _manifest(tmp_path / "clean")
    assert sorted(resumed["chunks"]) == sorted(clean["chunks"])
    assert sorted(resumed["skipped"]) == sorted(clean["skipped"])


def _sha1(p: Path) -> str:
    import hashlib

    return hashlib.sha1(p.read_bytes()).hexdigest()


def test_a_save_and_a_small_run_never_start_a_pool(tmp_path: Path, monkeypatch):
    ws = _many_languages(tmp_path / "ws", 12)
    pools = Calls(workers.PreparePool)
    monkeypatch.setattr(pipeline, "PreparePool", pools)
    with Engine(ws, index_dir=str(tmp_path / "idx"), index_workers=8, vectors=False) as eng:
        first = eng.index()  # a cold run of fewer files than POOL_MIN_FILES
        (ws / "gen" / "p0" / "mod0.py").write_text("def saved():\n    return 'zebracrossing'\n")
        saved = eng.index(only=["gen/p0/mod0.py"])
        assert {p for _i, p, _s in eng.lexical.search_terms(["zebracrossing"], 5)} == {"gen/p0/mod0.py"}
    assert first.files_indexed > 12 and first.files_indexed < pipeline.POOL_MIN_FILES
    assert saved.files_indexed == 1 and pools.n == 0


def test_health_says_how_large_runs_are_indexed(tmp_path: Path):
    ws = _many_languages(tmp_path / "ws", 3)
    for n, words in ((1, "in-process (index_workers = 1"), (2, "worker processes for runs of")):
        with Engine(ws, index_dir=str(tmp_path / f"idx{n}"), index_workers=n, vectors=False) as eng:
            said = eng.health()["indexWorkers"]
        if n == 1 or (os.cpu_count() or 1) >= 2:
            assert said.startswith(words) if n == 1 else words in said, said
    if sys.platform.startswith("linux") and (os.cpu_count() or 1) >= 2:
        assert "PR_SET_PDEATHSIG" in said


def test_the_setting_is_validated():
    assert Settings().index_workers == 2
    assert Settings.from_dict({"indexWorkers": "3"}).index_workers == 3
    assert Settings.load(None, env={"DELPHI_INDEX_WORKERS": "0"}, user_config=Path("/nonexistent")).index_workers == 0
    for bad in (-1, 33, "two", 1.5, True):
        with pytest.raises(SettingsError, match="index_workers"):
            Settings.from_dict({"index_workers": bad})


def _descendants(pid: int) -> set[int]:
    """Live processes under ``pid`` (from /proc: each process's parent)."""
    parents: dict[int, int] = {}
    for d in Path("/proc").iterdir():
        if d.name.isdigit():
            try:
                stat = (d / "stat").read_text()
            except OSError:
                continue
            parents[int(d.name)] = int(stat.rsplit(")", 1)[1].split()[1])
    out: set[int] = set()
    todo = [pid]
    while todo:
        p = todo.pop()
        kids = {c for c, pp in parents.items() if pp == p}
        out |= kids
        todo.extend(kids)
    return out


def _alive(pid: int) -> bool:
    """Running (a zombie waiting for a reaper counts as gone: it runs nothing and holds no file)."""
    try:
        return (Path("/proc") / str(pid) / "stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def _wait_gone(pids: set[int], seconds: float = 10.0) -> set[int]:
    deadline = time.time() + seconds
    while time.time() < deadline and any(_alive(p) for p in pids):
        time.sleep(0.05)
    return {p for p in pids if _alive(p)}


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")
def test_workers_die_with_a_killed_parent(tmp_path: Path):
    """The pool alone, in a process killed with SIGKILL while its workers wait for work."""
    script = textwrap.dedent(f"""
        import sys, time
        from pathlib import Path
        from delphi_ls.indexing.workers import Options, PreparePool
        pool = PreparePool(2, Path({str(tmp_path)!r}), Options(1000, 1500))
        list(pool.stream([("nothing-{{}}.py".format(i), None, None) for i in range(64)]))
        print("ready", flush=True)
        time.sleep(60)
    """)
    proc = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout is not None and proc.stdout.readline().strip() == "ready"
        kids = _descendants(proc.pid)
        assert len(kids) >= 2
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait()
    assert _wait_gone(kids) == set()


def _files_in_manifest(index_dir: Path) -> int:
    try:
        db = sqlite3.connect(f"file:{index_dir / 'meta.sqlite'}?mode=ro", uri=True, timeout=0.2)
        try:
            return db.execute("SELECT COUNT(*) FROM files").fetchone()[0]
        finally:
            db.close()
    except sqlite3.Error:
        return 0


def _counts(index_dir: Path, ws: Path) -> dict:
    with Engine(ws, index_dir=str(index_dir)) as eng:
        c = dict(eng.meta.counts())
        c["chroma"] = eng.vectors.count()
        c["lexical"] = eng.lexical.doc_count()
        c["chunk_ids"] = sorted(r[0] for r in eng.meta.db.execute("SELECT id FROM chunks"))
    return c


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")
def test_kill_9_with_workers_leaves_no_orphan_and_resumes_to_a_clean_runs_counts(tmp_path: Path):
    ws = tmp_path / "ws"
    n = pipeline.POOL_MIN_FILES + 100  # a CLI run that starts the pool
    for i in range(n):
        d = ws / f"pkg{i % 10}"
        d.mkdir(parents=True, exist_ok=True)
        (d / f"mod{i}.py").write_text(f'"""module {i}"""\n' + "".join(
            f"def f{i}_{j}(x):\n    return x * {j} + {i}\n\n" for j in range(12)))
    # HNSW answers, so Chroma holds every vector (below the exact bound its writes are owed, issue 18).
    env = {**os.environ, "DELPHI_INDEX_WORKERS": "2", "DELPHI_VECTOR_SEARCH": "hnsw"}
    killed = tmp_path / "killed"
    cmd = [sys.executable, "-m", "delphi_ls.cli", "index", str(ws), "--index-dir", str(killed), "--quiet"]
    proc = subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    kids: set[int] = set()
    deadline = time.time() + 60
    try:
        # Kill once the workers run and some batches are in the manifest: mid lexical pass.
        while time.time() < deadline and proc.poll() is None:
            kids |= _descendants(proc.pid)
            if len(kids) >= 2 and _files_in_manifest(killed) > 0:
                break
            time.sleep(0.02)
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait()
    assert len(kids) >= 2, "the run ended before its workers were seen"
    assert _wait_gone(kids) == set(), "a worker outlived its killed parent"
    partial = _files_in_manifest(killed)
    assert 0 < partial < n  # the kill landed mid-run
    subprocess.run(cmd, env=env, check=True, timeout=300, stdout=subprocess.DEVNULL)
    clean = tmp_path / "clean"
    subprocess.run([*cmd[:-3], "--index-dir", str(clean), "--quiet"], env=env, check=True, timeout=300,
                   stdout=subprocess.DEVNULL)
    resumed, full = _counts(killed, ws), _counts(clean, ws)
    assert resumed == full
    assert full["files"] == n and full["chroma"] == full["vectors"] == full["chunks"] == full["lexical"]


HANDOFF = textwrap.dedent("""
    import os, signal, sys
    from pathlib import Path
    import multiprocessing.util as mpu
    from delphi_ls.indexing.workers import Options, PreparePool

    real = mpu.spawnv_passfds

    def spawned(path, args, passfds):  # Ctrl-C lands after a worker started, before the parent handed it its data
        pid = real(path, args, passfds)
        if any("spawn_main" in str(a) for a in args):  # a worker, not the resource tracker
            os.kill(os.getpid(), signal.SIGINT)
        return pid

    mpu.spawnv_passfds = spawned
    root = Path(sys.argv[1])
    pool = PreparePool(2, root, Options(1000, 1500))
    try:
        for _ in pool.stream([("a.py", None, None)] * 4):
            pass
        print("no interrupt")
    except KeyboardInterrupt:
        print("interrupted")
    finally:
        pool.close()
""")


def test_ctrl_c_while_a_worker_starts_leaves_no_half_started_child(tmp_path: Path) -> None:
    """SIGINT in the middle of a worker's start: the parent left, and the half-started child printed spawn's
    `EOFError: Ran out of input` traceback under "delphi: interrupted" (session 29, one run of the Ctrl-C test in
    about fifty). The signal now waits for the start to return."""
    (tmp_path / "a.py").write_text("def a():\n    return 1\n")
    r = subprocess.run([sys.executable, "-c", HANDOFF, str(tmp_path)], capture_output=True, text=True, timeout=120,
                       preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    assert "interrupted" in r.stdout, (r.stdout, r.stderr[-2000:])
    assert "Traceback" not in r.stderr and "EOFError" not in r.stderr, r.stderr[-2000:]
