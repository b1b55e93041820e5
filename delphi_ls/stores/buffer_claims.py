"""Which indexed files hold another live process's unsaved editor buffer: ``<index_dir>/buffers/``.

An index is shared by every Delphi process on the workspace (two editor windows, an editor and an agent's
``delphi mcp``). A process that indexes an open buffer writes the file's row from the buffer's text; another
process's full pass saw that row differ from the disk and indexed the disk's bytes over it, so the first
window's unsaved definitions left every answer, its own outline included, until its next keystroke (a
newcomer with two windows, session 43). Each process that has buffers in the index lists their paths in a
file of its own, locked (``flock``) for as long as it lives: a full pass leaves those rows alone while the
lock is held, and the kernel drops the lock when the process dies (kill -9 included), so a crashed editor's
rows go back to the disk's bytes at the next pass. A lock, not a pid: a pid reused after a crash does not
keep rows held.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import stat
import threading
import uuid
from pathlib import Path

FOLDER = "buffers"


class BufferClaims:
    def __init__(self, index_dir: Path) -> None:
        self.folder = index_dir / FOLDER
        self._name = f"{os.getpid()}-{uuid.uuid4().hex[:8]}.json"
        self._fd: int | None = None
        self._mine: frozenset[str] = frozenset()
        self._lock = threading.Lock()

    def claim(self, paths: set[str]) -> None:
        """This process's buffers in the index are now ``paths`` (all of them: each index run passes every
        open buffer). Written in place under the held lock; none left, the file goes."""
        with self._lock:
            if frozenset(paths) == self._mine:
                return
            if not paths:
                self._release()
                return
            data = json.dumps(sorted(paths)).encode()
            if self._fd is None:
                # Made under another name, locked and written, then renamed into place: a reader never finds it
                # unlocked (it would take it for a dead process's and remove it; a review, session 43).
                self.folder.mkdir(mode=0o700, parents=True, exist_ok=True)
                tmp = self.folder / (self._name + ".new")
                fd = os.open(tmp, os.O_RDWR | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
                try:
                    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                    os.write(fd, data)
                    os.replace(tmp, self.folder / self._name)
                except OSError:
                    os.close(fd)
                    with contextlib.suppress(OSError):
                        os.unlink(tmp)
                    raise
                self._fd = fd
            else:
                os.pwrite(self._fd, data, 0)
                os.ftruncate(self._fd, len(data))
            self._mine = frozenset(paths)

    def _release(self) -> None:
        if self._fd is not None:
            with contextlib.suppress(OSError):
                os.unlink(self.folder / self._name)
            os.close(self._fd)
            self._fd = None
        self._mine = frozenset()

    def close(self) -> None:
        with self._lock:
            self._release()

    def held_elsewhere(self) -> set[str]:
        """Paths whose rows hold a live other process's buffer. A claim whose process is gone is removed."""
        out: set[str] = set()
        try:
            names = os.listdir(self.folder)
        except OSError:
            return out
        for name in names:
            if name == self._name or not name.endswith(".json"):
                continue
            path = self.folder / name
            try:
                fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
            except OSError:
                continue
            try:
                if not stat.S_ISREG(os.fstat(fd).st_mode):
                    continue  # a pipe or device named like a claim: never read (it could block a run for good)
                try:
                    fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
                except BlockingIOError:  # its process lives and holds it
                    raw = os.pread(fd, 1 << 22, 0)
                    try:
                        got = json.loads(raw or b"[]")
                    except (ValueError, RecursionError):  # caught being written, or not ours: nothing held
                        got = []
                    if isinstance(got, list):
                        out.update(p for p in got if isinstance(p, str))
                    continue
                except OSError:
                    continue
                with contextlib.suppress(OSError):  # its process died: nothing holds those rows now
                    os.unlink(path)
            finally:
                os.close(fd)
        return out
