"""The real server over stdio as an impatient developer and a dying editor use it (a newcomer, session 42): an
outline asked right after an edit, cancelled requests, and an editor whose process is gone while the pipes stay."""

from __future__ import annotations

import subprocess
import time
from pathlib import Path

from tests.lsp_wire import Wire
from tests.test_lsp_editing import RETRY, _start


def _open(w: Wire, ws: Path) -> tuple[str, str]:
    """retry.py opened in the editor: its URI and text."""
    uri, text = (ws / RETRY).as_uri(), (ws / RETRY).read_text()
    w.notify("textDocument/didOpen", {"textDocument": {"uri": uri, "languageId": "python", "version": 1, "text": text}})
    return uri, text


def test_the_outline_right_after_an_edit_is_on_the_buffers_lines(tmp_path: Path) -> None:
    w, ws = _start(tmp_path)
    try:
        uri, text = _open(w, ws)

        def outline() -> dict[str, int]:
            got = w.call("textDocument/documentSymbol", {"textDocument": {"uri": uri}}, timeout=30)["result"]
            return {s["name"]: s["location"]["range"]["start"]["line"] for s in got}

        before = outline()
        assert before
        w.notify("textDocument/didChange", {"textDocument": {"uri": uri, "version": 2},
                                            "contentChanges": [{"text": "\n\n\n" + text}]})
        assert outline() == {name: line + 3 for name, line in before.items()}  # asked at once: not one edit behind
    finally:
        w.close()


def test_a_cancelled_request_is_answered_without_a_traceback(tmp_path: Path) -> None:
    w, ws = _start(tmp_path)
    try:
        uri, text = _open(w, ws)
        cancelled = 0
        for version in range(2, 7):  # each lens request waits for the edit just sent: cancelled while it waits
            w.notify("textDocument/didChange", {"textDocument": {"uri": uri, "version": version},
                                                "contentChanges": [{"text": "\n" * version + text}]})
            rid = w.request("textDocument/codeLens", {"textDocument": {"uri": uri}})
            w.notify("$/cancelRequest", {"id": rid})
            got = w.response(rid, timeout=30)
            cancelled += got.get("error", {}).get("code") == -32800
        assert cancelled, "no request was cancelled: the test shows nothing"
        w.call("delphi/status", {}, timeout=30)
        time.sleep(1.5)  # stderr is read by its own thread
        assert not any("Traceback" in line or "JsonRpcRequestCancelled" in line for line in w.stderr), w.stderr[-20:]
    finally:
        w.close()


def test_an_editor_pid_not_visible_here_is_not_watched(tmp_path: Path) -> None:
    """An editor in a container or on another host names a pid of its own namespace: the server stays."""
    gone = subprocess.Popen(["true"])
    gone.wait()  # a pid no process has now
    w = Wire()
    try:
        ws = tmp_path / "ws"
        ws.mkdir()
        w.call("initialize", {"processId": gone.pid, "rootUri": ws.as_uri(), "capabilities": {},
                              "initializationOptions": {"indexDir": str(tmp_path / "idx"), "vectors": False}},
               timeout=60)
        w.notify("initialized", {})
        time.sleep(5)
        assert w.proc.poll() is None
    finally:
        w.close()


def test_the_server_leaves_when_the_editors_process_is_gone(tmp_path: Path) -> None:
    editor = subprocess.Popen(["sleep", "600"])
    w = Wire()
    try:
        ws = tmp_path / "ws"
        ws.mkdir()
        (ws / "a.py").write_text("def a():\n    return 1\n")
        w.call("initialize", {"processId": editor.pid, "rootUri": ws.as_uri(), "capabilities": {},
                              "initializationOptions": {"indexDir": str(tmp_path / "idx"), "vectors": False}},
               timeout=60)
        w.notify("initialized", {})
        time.sleep(1.0)
        assert w.proc.poll() is None  # the editor is alive: the server stays
        editor.kill()
        editor.wait()
        assert w.wait(timeout=20) == 1  # pipes still open: gone by the editor's pid alone
    finally:
        editor.kill()
        if w.proc.poll() is None:
            w.proc.kill()


def test_a_shutdown_before_the_editor_answers_progress_create_logs_no_traceback(tmp_path: Path) -> None:
    # pygls cancels every pending future at `shutdown`, the server's own `window/workDoneProgress/create` among them,
    # and its callback read the cancelled result: "exception calling callback ... CancelledError" and a traceback in
    # the editor's log (1 run in 45 of a hostile-input audit, session 46: an editor closed as indexing began).
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "a.py").write_text("def a():\n    return 1\n")
    w = Wire()
    try:
        w.call("initialize", {"processId": None, "rootUri": ws.as_uri(),
                              "capabilities": {"window": {"workDoneProgress": True}},
                              "initializationOptions": {"indexDir": str(tmp_path / "idx"), "vectors": False}},
               timeout=60)
        w.notify("initialized", {})
        time.sleep(1.5)  # the server asks to create its progress; nothing is read, so nothing answers it yet
        assert w.proc.poll() is None
        assert w.close() == 0
        time.sleep(0.5)  # stderr is read by its own thread
        asked = [m for m in w.seen if m.get("method") == "window/workDoneProgress/create"]
        assert asked, "the server asked for no progress: the test shows nothing"
        assert not any("Traceback" in line or "exception calling callback" in line for line in w.stderr), \
            "".join(w.stderr[-20:])
    finally:
        if w.proc.poll() is None:
            w.proc.kill()
