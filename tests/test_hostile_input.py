"""Hostile input (issue 12): names, depths, bytes and buffers that used to fail a whole index, and
links or ignored files that used to leak into it. Each case: the rest is indexed, the bad part is
skipped with a reason, and no byte of what must stay out reaches any file of the index."""

from __future__ import annotations

import os
import queue
import threading
import time
from pathlib import Path

import pytest

import delphi_ls.indexing.pipeline as pipe
from delphi_ls import Engine
from delphi_ls.settings import Settings
from delphi_ls.workspace.scan import (
    SkipFile,
    content_skip_reason,
    is_indexable,
    read_no_follow,
    scan,
    skip_reason,
)

SECRET = b"AKIA-SECRET-7f3c9e1b2a"  # a token that must never reach a store


def _ws(root: Path, files: dict[str, str | bytes]) -> Path:
    for rel, body in files.items():
        p = root / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        if isinstance(body, bytes):
            p.write_bytes(body)
        else:
            p.write_text(body, encoding="utf-8")
    return root


BASE = {
    "app/retry.py": "def retry_upload(n):\n    return n + 1\n",
    "app/sched.py": "class Scheduler:\n    def next_job(self):\n        return None\n",
    "tests/test_retry.py": "from app.retry import retry_upload\n\ndef test_it():\n    assert retry_upload(1) == 2\n",
    ".gitignore": ".env\nbuild/\n*.secret\n",
}


def _bytes_in_index(index_dir: Path, needle: bytes) -> list[str]:
    """Every file under the index folder (SQLite, its WAL, Whoosh segments, Chroma) holding ``needle``."""
    return [str(p) for p in index_dir.rglob("*") if p.is_file() and needle in p.read_bytes()]


@pytest.fixture
def ws(tmp_path: Path) -> Path:
    return _ws(tmp_path / "ws", BASE)


def _engine(ws: Path, tmp_path: Path, **kw) -> Engine:
    return Engine(ws, index_dir=str(tmp_path / "idx"), vectors=False, reranker="off", **kw)


def test_file_name_not_utf8_is_skipped_and_the_rest_indexed(ws: Path, tmp_path: Path):
    (ws / "app").joinpath(os.fsdecode(b"latin1_\xff\xfe.py")).write_text("def latin(): pass\n")
    os.mkdir(os.path.join(os.fsencode(ws), b"dir_\xe9"))
    (ws / os.fsdecode(b"dir_\xe9") / "inner.py").write_text("def inner(): pass\n")
    with _engine(ws, tmp_path) as eng:
        rep = eng.index()
        assert not rep.errors
        skipped = eng.meta.skipped()
        assert skipped["app/latin1_\\xff\\xfe.py"] == "file name is not valid UTF-8"
        assert skipped["dir_\\xe9"] == "file name is not valid UTF-8"
        assert {p for p, _k, _n in eng.meta.files()} >= {"app/retry.py", "app/sched.py", "tests/test_retry.py"}
        assert eng.context("retry upload")["results"][0]["path"] == "app/retry.py"
        assert eng.health()["ok"]
        assert not eng.index().errors  # and every later run too


def test_folder_chain_1200_deep_is_walked_without_recursion(ws: Path, tmp_path: Path):
    chain = [ws / "d"]
    for _ in range(1199):  # one level at a time: Path.mkdir(parents=True) itself recurses
        chain.append(chain[-1] / "d")
    for d in chain:
        d.mkdir()
    (chain[-1] / "bottom.py").write_text("def at_the_bottom(): pass\n")
    try:
        res = scan(ws, 1_000_000)
        bottom = "/".join(["d"] * 1200) + "/bottom.py"
        assert bottom in {f.path for f in res.files}
        with _engine(ws, tmp_path) as eng:
            assert not eng.index().errors
            assert eng.meta.chunks_of(bottom)
            assert eng.health()["staleness"]["stale"] is False  # health scans too
    finally:
        # shutil.rmtree (pytest's clean-up of old tmp folders) recurses too: take the chain down here.
        (chain[-1] / "bottom.py").unlink()
        for d in reversed(chain):
            d.rmdir()


def test_scan_order_and_nested_ignores_unchanged(tmp_path: Path):
    """The iterative walk visits in the same order as the recursive one did, nested rules included."""
    root = _ws(tmp_path / "w", {"a/x.py": "1", "a/b/y.py": "2", "a/.gitignore": "b/z.py\n", "a/b/z.py": "3",
                                "a0.py": "4", "c/.gitignore": "*\n!keep.py\n", "c/keep.py": "5", "c/drop.py": "6"})
    assert [f.path for f in scan(root, 1000).files] == ["a/.gitignore", "a/b/y.py", "a/x.py", "a0.py", "c/keep.py"]


def test_lone_surrogate_in_a_buffer_is_indexed_with_replacement(ws: Path, tmp_path: Path):
    buffers = {"app/sched.py": "X = '\ud800'\ndef surrogate_holder(): pass\n"}
    with _engine(ws, tmp_path) as eng:
        for _ in range(2):  # every full re-index while the buffer stays open
            rep = eng.index(buffers=buffers)
            assert not rep.errors and not rep.buffers_dropped
        assert "app/sched.py" in eng.meta.replaced_files()
        assert "surrogate_holder" in "".join(c.text for c in eng.meta.chunks_of("app/sched.py"))
        assert eng.context("surrogate_holder")["results"][0]["path"] == "app/sched.py"


def test_binary_without_nul_is_detected_by_content(ws: Path, tmp_path: Path):
    rnd = bytes(b for b in os.urandom(70_000) if b)[:65_536]
    assert b"\x00" not in rnd and len(rnd) == 65_536
    (ws / "blob.dat").write_bytes(rnd)
    with _engine(ws, tmp_path) as eng:
        eng.index()
        assert eng.meta.skipped()["blob.dat"].startswith("binary content")
        assert eng.meta.chunks_of("blob.dat") == []
    # Text in other scripts and legacy 8-bit text are still text.
    assert content_skip_reason("ru.md", "Привет, мир! Это текст.\n".encode() * 50) is None
    assert content_skip_reason("zh.md", "重试上传的策略。\n".encode() * 50) is None
    assert content_skip_reason("l1.py", "# café crème brûlée\nx = 1\n".encode("latin-1") * 30) is None


def test_a_pdf_that_reads_as_text_is_not_indexed(ws: Path, tmp_path: Path):
    """A PDF begins as text and its streams can stay under the binary share: an Illustrator logo (`.ai`, a PDF)
    was indexed as 95 chunks of drawing data (ky, session 28). Named by its first bytes, whatever its name."""
    pdf = (b"%PDF-1.6\n%\xe2\xe3\xcf\xd3\n1 0 obj\n<</Type/Catalog/Pages 2 0 R>>\nendobj\n"
           + b"2 0 obj\n<</Length 40>>stream\n0.5 0.5 m 10 10 l S q 1 0 0 1 0 0 cm Q\nendstream\nendobj\n" * 200)
    (ws / "media").mkdir()
    (ws / "media" / "logo.drawing").write_bytes(pdf)
    (ws / "media" / "print.ps").write_bytes(b"%!PS-Adobe-3.0\n%%Creator: tool\n0 0 moveto 10 10 lineto stroke\n" * 100)
    with _engine(ws, tmp_path) as eng:
        eng.index()
        skipped = eng.meta.skipped()
        assert skipped["media/logo.drawing"].startswith("document or drawing data"), skipped
        assert skipped["media/print.ps"].startswith("document or drawing data"), skipped
        assert eng.meta.chunks_of("media/logo.drawing") == [] and eng.meta.chunks_of("media/print.ps") == []
    # Text that only mentions the mark is text.
    assert content_skip_reason("notes.md", b"How we write %PDF-1.7 headers\n" * 20) is None


def test_a_file_skipped_for_its_bytes_is_not_read_again_until_it_changes(ws: Path, tmp_path: Path, monkeypatch):
    """A data file skipped for its bytes was read again by every run (and so by every question's update)."""
    (ws / "dump.txt").write_bytes(b"header\x00" + b"x" * 4000)
    (ws / "bundle.js").write_text("var a=1;" * 600, encoding="utf-8")  # one 4,800-char line: minified
    read: list[str] = []
    real = pipe.prepare_in_process

    def counting(root, opts, items):
        read.extend(path for path, _old, _buf in items)
        return real(root, opts, items)

    monkeypatch.setattr(pipe, "prepare_in_process", counting)
    with _engine(ws, tmp_path) as eng:
        eng.index()
        assert sorted(p for p in read if p in ("dump.txt", "bundle.js")) == ["bundle.js", "dump.txt"]
        read.clear()
        rep = eng.index()
        assert read == [] and rep.files_skipped == 1 + 1
        assert eng.meta.skipped()["dump.txt"] == "binary content (NUL byte)"
        assert eng.meta.skipped()["bundle.js"].startswith("minified")
        # Changed bytes are read again: text now, so indexed, and no longer listed as skipped.
        (ws / "dump.txt").write_text("def parse_dump():\n    return 1\n", encoding="utf-8")
        rep = eng.index()
        assert read == ["dump.txt"] and "dump.txt" not in eng.meta.skipped()
        assert eng.meta.chunks_of("dump.txt")
        # And skipped again when its bytes say so, with the stat of those bytes remembered.
        (ws / "dump.txt").write_bytes(b"\x00\x01" * 100)
        read.clear()
        eng.index()
        assert read == ["dump.txt"] and eng.meta.chunks_of("dump.txt") == []
        read.clear()
        eng.index()
        assert read == []
        eng.index(only=["dump.txt"])  # a save or a watcher's event names it: not read either
        assert read == []
        # Rules that decide otherwise (a Delphi update) read every such file again, once (review, session 26).
        monkeypatch.setattr(pipe, "SKIP_RULES", pipe.SKIP_RULES + 1)
        eng.index()
        assert sorted(read) == ["bundle.js", "dump.txt"]
        read.clear()
        eng.index()
        assert read == []


def test_stop_during_a_cold_index_returns_and_resumes(tmp_path: Path):
    files: dict[str, str | bytes] = {f"pkg/m{i:03}.py": f"def f{i}():\n    return {i}\n" for i in range(120)}
    ws = _ws(tmp_path / "ws", {**files, "yarn.lock": "x\n"})  # a skipped file: the stop path records it
    calls = []
    with _engine(ws, tmp_path) as eng:
        def stop_on_first_batch(phase: str, done: int, total: int, chunks: int) -> None:
            calls.append(done)
            eng.stop_indexing()

        rep = eng.index(progress=stop_on_first_batch)  # used to raise TypeError ('NoneType' not iterable)
        assert rep.errors and "stopped" in rep.errors[0]
        assert 0 < eng.meta.counts()["files"] < 120
        assert not eng.is_indexed()
        rep = eng.index()
        assert not rep.errors and eng.meta.counts()["files"] == 120 and eng.is_indexed()


def test_file_swapped_for_a_link_after_the_scan_is_not_followed(ws: Path, tmp_path: Path, monkeypatch):
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "creds.py").write_bytes(b"TOKEN = '" + SECRET + b"'\n")
    (outside / "sched.py").write_bytes(b"TOKEN = '" + SECRET + b"'\n")
    real_scan = pipe.scan

    def scan_then_swap(*a, **kw):
        res = real_scan(*a, **kw)
        # The race: after the scan listed them, a file becomes a link out, and a folder does too.
        (ws / "app" / "retry.py").unlink()
        os.symlink(outside / "creds.py", ws / "app" / "retry.py")
        os.rename(ws / "tests", tmp_path / "tests_moved")
        os.symlink(outside, ws / "tests")
        return res

    monkeypatch.setattr(pipe, "scan", scan_then_swap)
    with _engine(ws, tmp_path) as eng:
        assert not eng.index().errors
        skipped = eng.meta.skipped()
        assert skipped["app/retry.py"] == "symlink (not followed)"
        assert skipped["tests/test_retry.py"] == "symlink (not followed)"
        assert eng.meta.chunks_of("app/sched.py")  # the rest is indexed
    assert _bytes_in_index(tmp_path / "idx", SECRET) == []


def test_read_no_follow_refuses_links_fifos_and_growth(tmp_path: Path):
    root = _ws(tmp_path / "r", {"a/ok.py": "x = 1\n", "big.txt": "y" * 100})
    (tmp_path / "out.txt").write_text("outside")
    os.symlink(tmp_path / "out.txt", root / "link.py")
    os.symlink(tmp_path, root / "dirlink")
    os.mkfifo(root / "pipe.py")
    assert read_no_follow(root, "a/ok.py", 1000) == b"x = 1\n"
    for rel, reason in [("link.py", "symlink"), ("dirlink/out.txt", "symlink"), ("pipe.py", "not a regular"),
                        ("big.txt", "too large"), ("../out.txt", "outside")]:
        with pytest.raises(SkipFile, match=reason):
            read_no_follow(root, rel, 50)
    with pytest.raises(FileNotFoundError):
        read_no_follow(root, "a/gone.py", 1000)


def test_buffer_of_an_ignored_secret_never_reaches_the_index(ws: Path, tmp_path: Path):
    (ws / ".env").write_bytes(b"API_KEY=" + SECRET + b"\n")
    secret_text = "API_KEY=" + SECRET.decode() + "\n"
    buffers = {
        ".env": secret_text,                         # gitignored (VS Code sends didOpen for it)
        "build/gen.py": secret_text,                 # inside an ignored folder
        "keys.secret": secret_text,                  # ignored by a pattern
        "package-lock.json": secret_text,            # a lockfile
        "logo.png": secret_text,                     # a binary type
        "../outside.py": secret_text,                # outside the workspace
        "/etc/passwd": secret_text,
        ".git/config": secret_text,
        "app/huge.py": "x = 1\n" * 400_000,          # too large
        "app/new_unsaved.py": "def brand_new_helper(): pass\n",  # a normal new file: indexed
    }
    with _engine(ws, tmp_path) as eng:
        rep = eng.index(buffers=buffers)
        assert set(rep.buffers_dropped) == set(buffers) - {"app/new_unsaved.py"}
        assert rep.buffers_dropped[".env"].startswith("ignored")
        assert rep.buffers_dropped["../outside.py"] == "outside the workspace"
        assert rep.buffers_dropped["package-lock.json"] == "lockfile"
        assert rep.buffers_dropped["app/huge.py"].startswith("too large")
        # The language server's path: one file at a time.
        rep = eng.index(only=[".env"], buffers={".env": secret_text})
        assert ".env" in rep.buffers_dropped
        assert eng.context("API_KEY")["results"] == [] or all(
            r["path"] != ".env" for r in eng.context("API_KEY")["results"])
        assert eng.context("brand_new_helper")["results"][0]["path"] == "app/new_unsaved.py"
        assert ".env" not in eng.meta.skipped()  # not even the ignored file's name is written
        eng.index()  # the buffer closed: back to the disk
    assert _bytes_in_index(tmp_path / "idx", SECRET) == []


def test_skip_reason_is_the_scan_rule(ws: Path):
    """The function the language server may call before sending a buffer: same verdicts as the scan."""
    s = Settings(max_file_bytes=1000)
    (ws / "build").mkdir()
    (ws / "build" / "x.py").write_text("x")
    os.symlink(ws / "app", ws / "applink")
    assert skip_reason(ws, "app/retry.py", s) is None and is_indexable(ws, "app/retry.py", s)
    assert skip_reason(ws, "app/not_yet_saved.py", s) is None
    assert skip_reason(ws, ".env", s).startswith("ignored")
    assert skip_reason(ws, "build/x.py", s).startswith("ignored")
    assert skip_reason(ws, "build/new/deeper.py", s).startswith("ignored")
    assert skip_reason(ws, "applink/retry.py", s) == "symlink (not followed)"
    assert skip_reason(ws, "app", s) == "not a regular file"
    assert skip_reason(ws, "../x.py", s) == "outside the workspace"
    assert skip_reason(ws, "yarn.lock", s) == "lockfile"
    assert skip_reason(ws, "app/a.py", s, size=5000).startswith("too large")
    assert skip_reason(ws, os.fsdecode(b"\xff.py"), s) == "file name is not valid UTF-8"
    scanned = {f.path for f in scan(ws, 1000).files}
    for rel in ["app/retry.py", ".gitignore", ".env", "build/x.py", "tests/test_retry.py"]:
        assert is_indexable(ws, rel, s) == (rel in scanned), rel


def test_lsp_shutdown_during_the_first_index_is_clean(tmp_path: Path):
    """The real server over stdio: `shutdown` while the first index runs stops it without an error
    shown to the user (it used to show TypeError: argument of type 'NoneType' is not iterable)."""
    from tests.lsp_wire import Wire

    files: dict[str, str | bytes] = {f"pkg/m{i:03}.py": f"def f{i}():\n    return {i}\n" for i in range(600)}
    ws = _ws(tmp_path / "ws", {**files, "yarn.lock": "x\n"})
    wire = Wire()
    try:
        wire.initialize(ws, {"indexDir": str(tmp_path / "idx"), "vectors": False, "reranker": "off"})
        time.sleep(1.0)  # the first index is under way (600 files take several seconds)
        assert wire.close(timeout=60) == 0
    finally:
        if wire.proc.poll() is None:
            wire.proc.kill()
    shown = [m["params"]["message"] for m in wire.seen if m.get("method") == "window/showMessage"]
    assert not [m for m in shown if "failed" in m or "Error" in m], shown
    assert "Traceback" not in "".join(wire.stderr), "".join(wire.stderr)[-3000:]


def test_generated_code_nested_deeper_than_the_stack_is_indexed_as_windows(tmp_path: Path):
    """1,500 nested `#ifdef`s and 1,200 nested Ruby modules raised RecursionError and stopped the run."""
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "ok.c").write_text("int ok_function(void) { return 1; }\n")
    (ws / "gen.c").write_text("".join(f"#ifdef A{i}\n" for i in range(1500)) + "int deep_c;\n" + "#endif\n" * 1500)
    (ws / "deep.rb").write_text("module A\n" * 1200 + "def deep_ruby; end\n" + "end\n" * 1200)
    with Engine(ws, index_dir=str(tmp_path / "idx"), reranker="off", vectors=False) as eng:
        rep = eng.index()
        assert rep.files_indexed == 3 and not rep.errors
        assert [r["path"] for r in eng.context("deep_ruby")["results"]][:1] == ["deep.rb"]
        assert "ok.c" in [r["path"] for r in eng.context("ok_function")["results"]]


def test_a_parse_that_runs_too_long_falls_back_to_windows(monkeypatch):
    """tree-sitter-kotlin's error recovery is superlinear on malformed input (imports between classes)."""
    import delphi_ls.indexing.chunker as chunker

    monkeypatch.setattr(chunker, "PARSE_SECONDS", 0.2)
    bad = "package a.b\n" + "".join(f"class C{i} {{ fun m{i}(a: Int) = a }}\nimport x.y.Z{i}\n" for i in range(3000))
    t0 = time.perf_counter()
    cf = chunker.chunk_file("big.kt", bad)
    assert time.perf_counter() - t0 < 2.0
    assert cf.parse_error and "line windows" in cf.parse_error and cf.chunks
    ok = chunker.chunk_file("ok.kt", "package a\nclass A { fun f() = 1 }\n")  # the parser is usable after
    assert ok.parse_error is None and [s.name for s in ok.symbols] == ["A", "f"]


def test_read_no_follow_allocates_the_file_not_the_limit(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    """A small file read under a large limit costs its own size (the packer reads ~15 files an answer
    with a 4 MB limit); a file that grew after its fstat is still read on to the limit, and refused past it."""
    import tracemalloc

    root = _ws(tmp_path / "r", {"small.py": "x = 1\n", "grown.py": "z" * 30})
    tracemalloc.start()
    try:
        assert read_no_follow(root, "small.py", 64_000_000) == b"x = 1\n"
        _cur, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 1_000_000, peak
    real_fstat = os.fstat

    def fstat_before_growth(fd: int) -> os.stat_result:  # the size the file had when it was stat'ed
        st = real_fstat(fd)
        return os.stat_result((st.st_mode, st.st_ino, st.st_dev, st.st_nlink, st.st_uid, st.st_gid, 6,
                               st.st_atime, st.st_mtime, st.st_ctime))

    monkeypatch.setattr(os, "fstat", fstat_before_growth)
    assert read_no_follow(root, "grown.py", 1000) == b"z" * 30
    assert read_no_follow(root, "grown.py", 30) == b"z" * 30
    with pytest.raises(SkipFile, match="too large"):
        read_no_follow(root, "grown.py", 29)


def test_lsp_front_options_of_the_wrong_type_are_said_and_ignored(tmp_path: Path):
    """`initializationOptions.mcpHttp: "yes"` started no daemon and said nothing, while a bad `rrfK` was shown (an
    editor newcomer, session 25): the front's own options are checked by type like the settings."""
    from tests.lsp_wire import Wire

    ws = _ws(tmp_path / "ws", {"pkg/a.py": "def a():\n    return 1\n"})
    wire = Wire()
    try:
        wire.initialize(ws, {"indexDir": str(tmp_path / "idx"), "vectors": False, "mcpHttp": "yes",
                             "mcpPort": "80"})
        deadline = time.monotonic() + 30
        shown: list[str] = []
        while time.monotonic() < deadline and len(shown) < 2:
            try:
                wire.next_message(0.5)
            except queue.Empty:
                pass
            shown = [m["params"]["message"] for m in wire.seen if m.get("method") == "window/showMessage"]
        assert any("'mcpHttp' must be true or false, not 'yes'; ignored" in m for m in shown), shown
        assert any("'mcpPort' must be a whole number, not '80'; ignored" in m for m in shown), shown
        assert not (tmp_path / "idx" / "daemon.json").exists()  # no daemon was started on a guess
        assert wire.close(timeout=60) == 0
    finally:
        if wire.proc.poll() is None:
            wire.proc.kill()


def test_a_request_before_initialized_is_server_not_initialized(tmp_path: Path):
    """Between `initialize` and `initialized` (and before `initialize`) the folders are not open yet: the answer is
    LSP's ServerNotInitialized, not an InvalidParams blaming the request (an editor newcomer, session 25)."""
    from tests.lsp_wire import Wire

    ws = _ws(tmp_path / "ws", {"pkg/a.py": "def alpha_function():\n    return 1\n"})
    wire = Wire()
    try:
        early = wire.call("delphi/context", {"query": "alpha_function"})
        assert early["error"]["code"] == -32002, early
        wire.call("initialize", {"processId": None, "rootUri": ws.as_uri(), "capabilities": {},
                                 "workspaceFolders": [{"uri": ws.as_uri(), "name": "ws"}],
                                 "initializationOptions": {"indexDir": str(tmp_path / "idx"), "vectors": False}},
                  timeout=60)
        between = wire.call("delphi/context", {"query": "alpha_function"})
        assert between["error"]["code"] == -32002 and "initialized" in between["error"]["message"], between
        wire.notify("initialized", {})
        deadline = time.monotonic() + 60
        while True:
            ans = wire.call("delphi/context", {"query": "alpha_function"}, timeout=60)
            if "result" in ans and ans["result"]["results"]:
                break
            assert time.monotonic() < deadline, ans
            time.sleep(0.3)
        assert ans["result"]["results"][0]["path"] == "pkg/a.py"
        assert wire.close(timeout=60) == 0
        # The client's mistake is logged in one line, not a traceback per request (session 27's note).
        log = "".join(wire.stderr)
        assert "Traceback" not in log and "-32002" in log, log[-2000:]
    finally:
        if wire.proc.poll() is None:
            wire.proc.kill()


def test_an_anchor_through_a_linked_folder_is_refused_whatever_lies_there(ws: Path, tmp_path: Path):
    """normpath is lexical: through `src/linkdir -> /outside` an anchor answered, a missing one said "does not
    exist" and a folder "is a folder", telling what lies outside the workspace (a security audit, session 26)."""
    from delphi_ls.api import RequestError

    outside = tmp_path / "outside"
    (outside / "sub").mkdir(parents=True)
    (outside / "out.py").write_text("def secret_thing():\n    return 1\n")
    (ws / "src").mkdir()
    (ws / "src" / "linkdir").symlink_to(outside, target_is_directory=True)
    (ws / "app" / "alias.py").symlink_to(outside / "out.py")
    with _engine(ws, tmp_path) as eng:
        eng.index()
        for anchor in ("src/linkdir/out.py", "src/linkdir/nonexist.py", "src/linkdir/sub", "app/alias.py",
                       f"file://{ws}/src/linkdir/out.py", str(ws / "src" / "linkdir" / "out.py")):
            with pytest.raises(RequestError, match="symbolic link") as e:
                eng.context("x", anchors=[anchor])
            assert "does not exist" not in str(e.value) and "folder" not in str(e.value)
            with pytest.raises(RequestError, match="symbolic link"):
                eng.related_tests(anchor)
        assert eng.context("x", anchors=["app/retry.py"])["results"] is not None  # a plain file still answers


def test_a_fifo_anchor_is_named_for_what_it_is_and_a_closed_engine_says_so(tmp_path: Path):
    """An anchor that is a FIFO was "does not exist in the workspace"; an Engine used after its `with` block
    raised sqlite's "Cannot operate on a closed database" (a hostile newcomer, session 28)."""
    from delphi_ls.api import RequestError
    from delphi_ls.engine import EngineClosed

    root = _ws(tmp_path / "ws", {"a.py": "def alpha():\n    return 1\n"})
    os.mkfifo(root / "live_fifo.py")
    with Engine(root, index_dir=tmp_path / "idx", vectors=False) as eng:
        eng.index()
        with pytest.raises(RequestError, match=r"'live_fifo.py' is not a regular file \(a FIFO\)"):
            eng.context("alpha", anchors=["live_fifo.py"])
        with pytest.raises(RequestError, match="does not exist"):
            eng.context("alpha", anchors=["nothing_here.py"])
    for call in (lambda: eng.context("alpha"), lambda: eng.symbols("alpha"), lambda: eng.health(),
                 lambda: eng.index(), lambda: eng.related_tests("a.py"), lambda: eng.counts()):
        with pytest.raises(EngineClosed, match="was closed"):
            call()


def test_an_index_run_on_a_folder_gone_or_swapped_writes_nothing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    """A folder moved away (or swapped for another during the walk) was taken as "every file deleted"."""
    from delphi_ls.indexing.pipeline import WorkspaceGone

    root = _ws(tmp_path / "ws", {"a.py": "def alpha():\n    return 1\n", "b.py": "def beta():\n    return 2\n"})
    with Engine(root, index_dir=tmp_path / "idx", vectors=False) as eng:
        eng.index()
        root.rename(tmp_path / "away")
        with pytest.raises(WorkspaceGone, match="is gone"):
            eng.index()
        assert eng.counts()["files"] == 2
        assert any(p["code"] == "workspace_gone" for p in eng.health()["problems"])
        (tmp_path / "away").rename(root)
        real_scan = pipe.scan

        def swapped_during_the_walk(*a, **k):  # the folder replaced by an empty one mid-walk (`mv`, `mkdir`)
            out = real_scan(*a, **k)
            root.rename(tmp_path / "old")
            root.mkdir()
            return out

        monkeypatch.setattr(pipe, "scan", swapped_during_the_walk)
        with pytest.raises(WorkspaceGone):
            eng.index()
        monkeypatch.setattr(pipe, "scan", real_scan)
        assert eng.counts()["files"] == 2
        rep = eng.index()  # the empty folder is the workspace now: a run on it is believed
        assert rep.files_deleted == 2 and eng.counts()["files"] == 0


def test_a_trace_that_cannot_be_written_costs_no_answer(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                        monkeypatch: pytest.MonkeyPatch):
    """`--trace DIR` or a `trace_file` setting naming a folder threw the answer away with a traceback, and the
    language server failed every question with -32603 (a newcomer, session 29)."""
    from delphi_ls.cli import main

    root = _ws(tmp_path / "ws", {"a.py": "def alpha():\n    return 1\n"})
    folder = tmp_path / "traces"
    folder.mkdir()
    with Engine(root, index_dir=tmp_path / "idx", vectors=False, trace_file=str(folder)) as eng:
        eng.index()
        assert [r["path"] for r in eng.context("alpha")["results"]][:1] == ["a.py"]
        warned = [p for p in eng.health()["problems"] if p["code"] == "trace_file"]
        assert warned and warned[0]["severity"] == "warning" and str(folder) in warned[0]["message"]
    args = ["context", str(root), "alpha", "--index-dir", str(tmp_path / "idx"), "--no-vectors"]
    assert main([*args, "--trace", str(folder)]) == 2
    assert f"--trace: {folder} is a folder" in capsys.readouterr().err
    assert main([*args, "--trace", str(tmp_path / "no" / "t.jsonl")]) == 2
    assert "--trace: the folder of" in capsys.readouterr().err
    assert main([*args, "--trace", str(tmp_path / "t.jsonl")]) == 0
    assert (tmp_path / "t.jsonl").read_text().count("\n") == 1
    home = tmp_path / "home"
    home.mkdir()
    monkeypatch.setenv("HOME", str(home))
    assert main([*args, "--trace=~/t.jsonl"]) == 0  # no shell expands `~` after `=`: the check and the write agree
    assert (home / "t.jsonl").read_text().count("\n") == 1


def test_a_trace_log_is_never_appended_to_a_file_of_other_text(tmp_path: Path, capsys: pytest.CaptureFixture[str]):
    """The README calls a pasted stack trace `trace.txt`; `delphi context . "why" --trace trace.txt` answered without
    it and appended a JSON line to the user's file (a newcomer pasting traces, session 44). Refused, the file as it
    was; the `trace_file` setting the same (health says why); a trace log of Delphi's own still grows."""
    from delphi_ls.cli import main

    root = _ws(tmp_path / "ws", {"a.py": "def alpha():\n    return 1\n"})
    pasted = tmp_path / "trace.txt"
    pasted.write_text('Traceback (most recent call last):\n  File "a.py", line 2, in alpha\nValueError: x\n')
    before = pasted.read_bytes()
    args = ["context", str(root), "why does this crash", "--index-dir", str(tmp_path / "idx"), "--no-vectors"]
    assert main([*args, "--trace", str(pasted)]) == 2
    err = capsys.readouterr().err
    assert "--trace" in err and "other text" in err and "- < FILE" in err
    assert pasted.read_bytes() == before
    log = tmp_path / "t.jsonl"
    assert main([*args, "--trace", str(log)]) == 0 and main([*args, "--trace", str(log)]) == 0
    assert log.read_text().count("\n") == 2
    with Engine(root, index_dir=tmp_path / "idx", vectors=False, trace_file=str(pasted)) as eng:
        assert [r["path"] for r in eng.context("alpha")["results"]][:1] == ["a.py"]
        warned = [p for p in eng.health()["problems"] if p["code"] == "trace_file"]
        assert warned and "other text" in warned[0]["message"], warned
    assert pasted.read_bytes() == before
    # A trace log whose first record is long (a draft of 100 KB), or that starts with a blank line, keeps growing.
    from delphi_ls.traces import dumps_inert

    big = tmp_path / "big.jsonl"
    big.write_text("\n" + dumps_inert({"time": 1.0, "traceId": "f" * 16, "params": {"draft": "x" * 100_000}}) + "\n")
    assert main([*args, "--trace", str(big)]) == 0 and big.read_text().count("\n") == 3
    # A pipe is written to, never read (reading it waited for ever; review, session 44).
    fifo = tmp_path / "trace.fifo"
    os.mkfifo(fifo)
    got: list[bytes] = []
    reader = threading.Thread(target=lambda: got.append(open(fifo, "rb").read()), daemon=True)
    reader.start()
    assert main([*args, "--trace", str(fifo)]) == 0
    reader.join(10)
    assert got and b'"traceId"' in got[0]


def test_the_python_api_takes_path_objects_and_checks_a_symbols_limit(tmp_path: Path):
    """`anchors=[Path(...)]` and `related_code(Path(...))` were refused though the constructor takes a Path;
    `symbols(q, limit=-1)` answered [] (a newcomer, session 29)."""
    from delphi_ls.api import RequestError

    root = _ws(tmp_path / "ws", {"app.py": "def alpha():\n    return 1\n",
                                 "tests/test_app.py": "from app import alpha\n\ndef test_alpha():\n    assert alpha()\n"})
    with Engine(root, index_dir=tmp_path / "idx", vectors=False) as eng:
        eng.index()
        ans = eng.context("alpha", anchors=[Path("tests/test_app.py")])
        assert ans["query"]["anchors"] == ["tests/test_app.py"]
        assert [r["path"] for r in eng.related_code(Path("tests/test_app.py"))] == ["app.py"]
        assert [r["path"] for r in eng.related_tests(root / "app.py")] == ["tests/test_app.py"]
        with pytest.raises(RequestError, match="limit"):
            eng.symbols("alpha", limit=-1)
        # One path where the list goes was read as its letters: "anchors: 't' does not exist" (session 36).
        for one in ("tests/test_app.py", Path("tests/test_app.py")):
            with pytest.raises(RequestError, match=r"not one path: anchors=\['tests/test_app.py'\]"):
                eng.context("alpha", anchors=one)  # type: ignore[arg-type]


def test_a_refused_snapshot_setting_is_said_by_the_cli(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                       monkeypatch: pytest.MonkeyPatch):
    """`DELPHI_SNAPSHOT=/missing.snap delphi index ws` built from scratch and said nothing (a newcomer, session 29)."""
    from delphi_ls.cli import main

    root = _ws(tmp_path / "ws", {"a.py": "def alpha():\n    return 1\n"})
    monkeypatch.setenv("DELPHI_SNAPSHOT", str(tmp_path / "missing.snap"))
    assert main(["index", str(root), "--index-dir", str(tmp_path / "idx"), "--no-vectors", "--quiet"]) == 0
    err = capsys.readouterr().err
    assert f"delphi: warning: snapshot {tmp_path / 'missing.snap'} not loaded, indexing the workspace instead" in err


def test_a_rebuild_of_a_folder_gone_empties_nothing(tmp_path: Path):
    """`delphi index --rebuild` empties the manifest before its walk: with the folder gone it lost the index."""
    from delphi_ls.indexing.pipeline import WorkspaceGone

    root = _ws(tmp_path / "ws", {"a.py": "def alpha():\n    return 1\n"})
    with Engine(root, index_dir=tmp_path / "idx", vectors=False) as eng:
        eng.index()
        root.rename(tmp_path / "away")
        with pytest.raises(WorkspaceGone):
            eng.index(rebuild=True)
        assert eng.counts()["files"] == 1


def test_chunks_left_unembedded_with_no_run_under_way_are_a_warning_that_says_what_to_do(tmp_path: Path):
    """A Ctrl-C in the vector phase (or a run without vectors) left every chunk unembedded: health said "no vectors
    yet", no warning, nothing to do (a newcomer's first use, session 44). It is a warning naming the count and the
    command; the next run embeds them and it is gone."""
    root = _ws(tmp_path / "ws", {f"m{i}.py": f"def fn_{i}():\n    return {i}\n" for i in range(6)})
    with Engine(root, index_dir=tmp_path / "idx", vectors=False) as eng:
        eng.index()
    with Engine(root, index_dir=tmp_path / "idx") as eng:  # vectors on: the setting a user has
        ok, status = eng.vector_status()
        assert not ok and "none of the 6 chunks is embedded" in status and "`delphi index`" in status, status
        warned = [p for p in eng.health()["problems"] if p["code"] == "vectors_behind"]
        assert warned and warned[0]["severity"] == "warning" and "delphi index" in warned[0]["message"], warned
        assert eng.health()["ok"]  # a warning, not an error
        eng.index()
        assert eng.vector_status() == (True, "ready")
        assert not [p for p in eng.health()["problems"] if p["code"] == "vectors_behind"]
        # Some chunks left by a catch-up without vectors (`delphi symbols` runs one): said, not warned of.
        (root / "m0.py").write_text("def fn_0_changed():\n    return 0\n")
        eng.index(vectors=False)
        ok, status = eng.vector_status()
        assert ok and "5 of 6 chunks are embedded" in status and "`delphi index`" in status, status
        assert not [p for p in eng.health()["problems"] if p["code"] == "vectors_behind"]
