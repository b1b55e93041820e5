"""A raw stdio client for the real ``delphi-ls`` process: bytes in, framed JSON out, with timeouts.

pytest-lsp only speaks well-formed LSP; the protocol-edge and trust tests need to write any bytes
(broken headers, huge lengths, junk) and still read whatever the server answers.
"""

from __future__ import annotations

import json
import os
import queue
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any


def frame(msg: dict[str, Any] | bytes) -> bytes:
    body = msg if isinstance(msg, bytes) else json.dumps(msg).encode()
    return b"Content-Length: %d\r\n\r\n" % len(body) + body


class Wire:
    def __init__(self, env: dict[str, str] | None = None, cwd: Path | None = None) -> None:
        self.proc = subprocess.Popen([sys.executable, "-m", "delphi_ls"], stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=cwd,
                                     env={**os.environ, **(env or {})},
                                     # a suite started in the background ignores SIGINT, and so would the server
                                     preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
        self.messages: queue.Queue[dict[str, Any] | None] = queue.Queue()
        self.seen: list[dict[str, Any]] = []
        self.stderr: list[str] = []
        self._next_id = 0
        threading.Thread(target=self._read_stdout, daemon=True).start()
        threading.Thread(target=self._read_stderr, daemon=True).start()

    # ------------------------------------------------------------------ reading
    def _read_stdout(self) -> None:
        out = self.proc.stdout
        assert out is not None
        while True:
            length = None
            while True:
                line = out.readline()
                if not line:
                    self.messages.put(None)
                    return
                if line in (b"\r\n", b"\n"):
                    break
                name, _, value = line.decode().partition(":")
                if name.lower() == "content-length":
                    length = int(value)
            assert length is not None, "the server sent a frame without Content-Length"
            self.messages.put(json.loads(out.read(length)))

    def _read_stderr(self) -> None:
        assert self.proc.stderr is not None
        for line in self.proc.stderr:
            self.stderr.append(line.decode(errors="replace"))

    def next_message(self, timeout: float) -> dict[str, Any] | None:
        msg = self.messages.get(timeout=timeout)
        if msg is not None:
            self.seen.append(msg)
            if "method" in msg and "id" in msg:  # a request from the server: answer like an editor
                self.send({"jsonrpc": "2.0", "id": msg["id"], "result": None})
        return msg

    def response(self, msg_id: Any, timeout: float = 15.0) -> dict[str, Any]:
        """The response to ``msg_id``; fails (no hang) if none comes within ``timeout`` seconds."""
        for m in self.seen:
            if "method" not in m and m.get("id") == msg_id:
                return m
        deadline = time.monotonic() + timeout
        while True:
            left = deadline - time.monotonic()
            try:
                msg = self.next_message(max(left, 0.01))
            except queue.Empty:
                raise AssertionError(f"no response to request {msg_id!r} within {timeout}s; "
                                     f"stderr: {''.join(self.stderr)[-2000:]}") from None
            if msg is None:
                raise AssertionError(f"the server closed stdout (exit {self.proc.poll()}) before answering "
                                     f"{msg_id!r}; stderr: {''.join(self.stderr)[-2000:]}")
            if "method" not in msg and msg.get("id") == msg_id:
                return msg

    # ------------------------------------------------------------------ writing
    def send_raw(self, data: bytes) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write(data)
        self.proc.stdin.flush()

    def send(self, msg: dict[str, Any]) -> None:
        self.send_raw(frame(msg))

    def request(self, method: str, params: Any = None, *, omit_params: bool = False) -> int:
        self._next_id += 1
        msg: dict[str, Any] = {"jsonrpc": "2.0", "id": self._next_id, "method": method}
        if not omit_params:
            msg["params"] = params
        self.send(msg)
        return self._next_id

    def call(self, method: str, params: Any = None, timeout: float = 15.0) -> dict[str, Any]:
        return self.response(self.request(method, params), timeout)

    def notify(self, method: str, params: Any = None) -> None:
        self.send({"jsonrpc": "2.0", "method": method, "params": params})

    def initialize(self, root: Path, options: dict[str, Any]) -> dict[str, Any]:
        ans = self.call("initialize", {"processId": None, "rootUri": root.as_uri(), "capabilities": {},
                                       "workspaceFolders": [{"uri": root.as_uri(), "name": root.name}],
                                       "initializationOptions": options}, timeout=60)
        self.notify("initialized", {})
        return ans

    def close(self, timeout: float = 15.0) -> int:
        """Polite shutdown and exit; returns the exit code (kills the process if it does not exit)."""
        if self.proc.poll() is None:
            try:
                self.call("shutdown", None, timeout=timeout)
                self.notify("exit")
                self.proc.stdin.close()  # type: ignore[union-attr]
            except (AssertionError, BrokenPipeError, OSError):
                pass
        return self.wait(timeout)

    def wait(self, timeout: float = 15.0) -> int:
        try:
            return self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
            raise AssertionError(f"delphi-ls did not exit within {timeout}s") from None
