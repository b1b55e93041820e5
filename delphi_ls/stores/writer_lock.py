"""One writer per index folder, across processes: ``fcntl.flock`` on ``<index_dir>/writer.lock``.

Readers never take it: SQLite in WAL mode and Whoosh's committed segments serve any number of
readers while one process writes. The file holds the writer's pid, command and start time as
text, so a second process can say who is writing. The kernel drops the lock when its holder dies
(kill -9 included), so a crashed writer never blocks the next one; stale text is detected by
the pid no longer running.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from ..core.locks import take_or_close
from ..core.processes import running

LOCK_FILE = "writer.lock"
POLL_S = 0.2


@dataclass(frozen=True)
class Holder:
    pid: int
    command: str
    started: float  # unix time

    def describe(self) -> str:
        when = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(self.started))
        return f"another Delphi process (pid {self.pid}, `{self.command}`, started {when}) is indexing this workspace"

    def as_dict(self) -> dict[str, object]:
        return {"pid": self.pid, "command": self.command, "started": self.started, "message": self.describe()}


class IndexBusy(RuntimeError):
    """Raised by ``Engine.index(wait=False)`` while another process holds the writer lock."""

    def __init__(self, holder: Holder | None) -> None:
        self.holder = holder
        super().__init__(holder.describe() if holder else "another Delphi process is indexing this workspace")


SUBCOMMANDS = frozenset({"index", "context", "health", "symbols", "related-tests", "related-code", "eval", "mcp",
                         "serve", "snapshot"})


def _command() -> str:
    """The holder's program and subcommand (``delphi index``), no more: the rest of the command line can
    hold a question, a pasted trace or a ``--chroma-url`` with credentials, and this file is readable by
    any process of the user and shown to MCP and LSP clients in health (a security audit, session 26)."""
    argv = [os.fsencode(a).decode("utf-8", "replace") for a in sys.argv] or ["python"]  # argv can be any bytes
    name = os.path.basename(argv[0]) or "python"
    if name in ("cli.py", "__main__.py", "-m", "-c"):
        name = "delphi"
    # Delphi's own subcommands only: the first bare word of another program's command line may be a value
    # (`pytest tests -k secretword`; review, session 26).
    sub = next((a for a in argv[1:] if not a.startswith("-")), None) if name == "delphi" else None
    return f"{name} {sub}" if sub in SUBCOMMANDS else name


def _alive(pid: int) -> bool:
    return running(pid) is not False  # another user's process exists: it may be writing


class WriterLock:
    def __init__(self, index_dir: Path) -> None:
        self.path = index_dir / LOCK_FILE
        self._fd: int | None = None
        self._mutex = threading.Lock()  # guards _fd between threads of this process

    @property
    def held(self) -> bool:
        return self._fd is not None

    def holder(self) -> Holder | None:
        """Who writes now (read from the file, without touching the lock), or None."""
        try:
            text = self.path.read_text(encoding="utf-8", errors="replace")
        except OSError:
            return None
        lines = text.splitlines()
        try:
            pid, command, started = int(lines[0]), lines[1], float(lines[2])
        except (IndexError, ValueError):
            return None
        if self._fd is not None and pid == os.getpid():
            return None  # that is us
        if not _alive(pid):
            return None  # died holding it (kill -9): the kernel has released the lock already
        return Holder(pid, command, started)

    def try_acquire(self) -> bool:
        with self._mutex:
            if self._fd is not None:
                return True
            self.path.parent.mkdir(parents=True, exist_ok=True)
            fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
            if not take_or_close(fd):
                return False
            with contextlib.suppress(OSError):
                os.fchmod(fd, 0o600)  # a lock file from before was created 0644
            os.ftruncate(fd, 0)
            os.pwrite(fd, f"{os.getpid()}\n{_command()}\n{time.time()}\n".encode(), 0)
            self._fd = fd
            return True

    def acquire(self, wait: bool = True, on_wait: Callable[[Holder | None], None] | None = None,
                should_stop: Callable[[], bool] | None = None) -> bool:
        """Take the lock. ``wait=False``: raise :class:`IndexBusy` when another process has it.
        ``wait=True``: call ``on_wait`` once with the holder, then poll until free; False when
        ``should_stop`` said stop first."""
        if self.try_acquire():
            return True
        if not wait:
            raise IndexBusy(self.holder())
        if on_wait is not None:
            on_wait(self.holder())
        while not self.try_acquire():
            if should_stop is not None and should_stop():
                return False
            time.sleep(POLL_S)
        return True

    def release(self) -> None:
        with self._mutex:
            if self._fd is None:
                return
            fd, self._fd = self._fd, None
            try:
                os.ftruncate(fd, 0)  # no stale holder text for the next reader
            finally:
                fcntl.flock(fd, fcntl.LOCK_UN)
                os.close(fd)
