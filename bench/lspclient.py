"""A minimal synchronous LSP client over stdio, for timing the server as an editor sees it."""

from __future__ import annotations

import json
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any


class LspClient:
    def __init__(self, cmd: list[str] | None = None) -> None:
        self.proc = subprocess.Popen(cmd or [sys.executable, "-m", "delphi_ls"], stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
        self._id = 0
        self._pending: dict[int, Any] = {}
        self._cv = threading.Condition()
        self.notifications: list[dict[str, Any]] = []
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _send(self, msg: dict[str, Any]) -> None:
        body = json.dumps(msg).encode()
        assert self.proc.stdin is not None
        self.proc.stdin.write(b"Content-Length: %d\r\n\r\n" % len(body) + body)
        self.proc.stdin.flush()

    def _read(self) -> None:
        out = self.proc.stdout
        assert out is not None
        while True:
            length = 0
            while True:
                line = out.readline()
                if not line:
                    return
                if line in (b"\r\n", b"\n"):
                    break
                if line.lower().startswith(b"content-length:"):
                    length = int(line.split(b":")[1])
            msg = json.loads(out.read(length))
            if "id" in msg and "method" in msg:  # a request from the server: accept it
                self._send({"jsonrpc": "2.0", "id": msg["id"], "result": None})
                continue
            with self._cv:
                if "id" in msg:
                    self._pending[msg["id"]] = msg
                else:
                    self.notifications.append(msg)
                self._cv.notify_all()

    def request(self, method: str, params: Any, timeout: float = 120) -> Any:
        with self._cv:
            self._id += 1
            mid = self._id
        self._send({"jsonrpc": "2.0", "id": mid, "method": method, "params": params})
        with self._cv:
            if not self._cv.wait_for(lambda: mid in self._pending, timeout=timeout):
                raise TimeoutError(f"{method} got no answer in {timeout} s")
            msg = self._pending.pop(mid)
        if "error" in msg:
            raise RuntimeError(msg["error"])
        return msg.get("result")

    def notify(self, method: str, params: Any) -> None:
        self._send({"jsonrpc": "2.0", "method": method, "params": params})

    def initialize(self, root: Path, options: dict[str, Any]) -> None:
        self.request("initialize", {"processId": None, "rootUri": root.as_uri(), "capabilities": {},
                                    "workspaceFolders": [{"uri": root.as_uri(), "name": root.name}],
                                    "initializationOptions": options})
        self.notify("initialized", {})

    def close(self) -> None:
        try:
            self.request("shutdown", None, timeout=30)
            self.notify("exit", None)
            self.proc.wait(timeout=30)
        except Exception:
            self.proc.kill()
