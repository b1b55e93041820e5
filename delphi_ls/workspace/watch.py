"""Told of changes instead of looking for them: the operating system's file events for a workspace.

``delphi serve`` and ``delphi mcp`` have no editor to report edits. They used to walk the whole tree
every 2 seconds (about 1 s of CPU per walk on spring-boot's 11,700 files, half a core all day; on a
100,000-file tree a walk outlasts the interval, so the process never rested). On Linux this asks
inotify instead, and a change costs only the few paths it names (:mod:`delphi_ls.indexing.named`).

Watched are exactly the folders the indexer's walk enters (:func:`~delphi_ls.workspace.scan.scan`):
never an ignored folder (``node_modules``, build output: thousands of watches saved), never through a
symbolic link (a link to ``/`` must not watch the machine), each added with ``IN_DONT_FOLLOW`` so a
folder swapped for a link after the walk is not followed either. Events only *name* paths; whether a
named path is indexed, and how it is read, stays the indexer's decision, with the same rules as a walk.

What a named path cannot say is reported as "walk everything" (``None``): a folder created, deleted or
moved (which files came or went under it?), an ignore file changed (which files does it now cover?),
and a queue overflow (events were lost). Where inotify is missing (not Linux) or its watch limit is
reached, :class:`Watcher.start` says why and the caller polls instead, and says so.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import errno
import os
import select
import struct
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path

from .scan import ALWAYS_SKIPPED_DIRS, _Ignores, _read_lines, _top_ignores, utf8_name

IN_MODIFY, IN_ATTRIB, IN_CLOSE_WRITE = 0x2, 0x4, 0x8
IN_MOVED_FROM, IN_MOVED_TO, IN_CREATE, IN_DELETE = 0x40, 0x80, 0x100, 0x200
IN_DELETE_SELF, IN_MOVE_SELF = 0x400, 0x800
IN_Q_OVERFLOW, IN_IGNORED = 0x4000, 0x8000
IN_ONLYDIR, IN_DONT_FOLLOW, IN_EXCL_UNLINK, IN_ISDIR = 0x01000000, 0x02000000, 0x04000000, 0x40000000
IN_NONBLOCK, IN_CLOEXEC = 0o4000, 0o2000000
MASK = (IN_MODIFY | IN_ATTRIB | IN_CLOSE_WRITE | IN_MOVED_FROM | IN_MOVED_TO | IN_CREATE | IN_DELETE
        | IN_DELETE_SELF | IN_MOVE_SELF | IN_ONLYDIR | IN_DONT_FOLLOW | IN_EXCL_UNLINK)
HEADER = struct.Struct("iIII")
RULE_FILES = frozenset({".gitignore", ".delphiignore"})  # a change here changes what is indexed
BATCH_S = 0.05  # events arriving within this of each other are reported together
MAX_BATCH_S = 1.0  # ... but a report waits no longer than this for a burst to end


def watched_folders(root: Path, extra_ignores: list[str] | None = None) -> list[str]:
    """The workspace-relative folders (``""`` for the root) that the indexer's walk enters, in walk
    order: the same ignore rules, no links followed, no version-control folders."""
    root = Path(root)
    out: list[str] = []
    stack: list[tuple[str, _Ignores]] = [("", _top_ignores(root, extra_ignores))]
    while stack:
        rel, ign = stack.pop()
        absolute = root / rel if rel else root
        ign = ign.child(rel, _read_lines(absolute / ".gitignore"))
        out.append(rel)
        try:
            with os.scandir(absolute) as it:
                entries = sorted(it, key=lambda e: e.name, reverse=True)
        except OSError:
            continue  # unreadable: the walk records it; nothing to watch inside
        for e in entries:
            try:
                if not utf8_name(e.name) or e.is_symlink() or not e.is_dir(follow_symlinks=False):
                    continue
            except OSError:
                continue
            sub = f"{rel}/{e.name}" if rel else e.name
            if e.name in ALWAYS_SKIPPED_DIRS or ign.ignored(sub, True):
                continue
            stack.append((sub, ign))
    return out


class WatchUnavailable(Exception):
    """Why events cannot be had here (the caller polls instead and says so)."""


class _Inotify:
    """The three inotify calls, through libc (no package needed; Linux only)."""

    def __init__(self) -> None:
        if not sys.platform.startswith("linux"):
            raise WatchUnavailable(f"file events are implemented with inotify (Linux); this is {sys.platform}")
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)
        self._add = libc.inotify_add_watch
        self._add.argtypes = (ctypes.c_int, ctypes.c_char_p, ctypes.c_uint32)
        self._rm = libc.inotify_rm_watch
        self._rm.argtypes = (ctypes.c_int, ctypes.c_int)
        fd = libc.inotify_init1(IN_NONBLOCK | IN_CLOEXEC)
        if fd < 0:
            e = ctypes.get_errno()
            raise WatchUnavailable(f"inotify_init1 failed: {os.strerror(e)}" + _limit_hint(e, "max_user_instances"))
        self.fd = fd

    def add(self, path: Path) -> int:
        wd = self._add(self.fd, os.fsencode(path), MASK)
        if wd < 0:
            e = ctypes.get_errno()
            raise OSError(e, os.strerror(e))
        return int(wd)

    def rm(self, wd: int) -> None:
        self._rm(self.fd, wd)

    def close(self) -> None:
        os.close(self.fd)


def _limit_hint(err: int, name: str) -> str:
    if err not in (errno.ENOSPC, errno.EMFILE):
        return ""
    try:
        limit = Path(f"/proc/sys/fs/inotify/{name}").read_text().strip()
    except OSError:
        limit = "?"
    return f" (the limit fs.inotify.{name} = {limit} is reached; raise it with sysctl)"


class Watcher:
    """Reports changed workspace-relative paths (a set), or ``None`` for "walk everything", to
    ``on_change`` from a thread of its own, until :meth:`stop` or until it fails (then ``failed`` says
    why, one last ``None`` is reported so nothing is missed, and the caller polls or starts again)."""

    def __init__(self, root: Path, on_change: Callable[[set[str] | None], None],
                 extra_ignores: list[str] | None = None, skip: Path | None = None) -> None:
        self.root = Path(root).resolve()
        self.on_change = on_change
        self.extra_ignores = extra_ignores
        self.skip = skip  # the index folder, when it lies inside the workspace: our own writes
        self.folders: dict[int, str] = {}  # watch descriptor -> folder (workspace-relative)
        self.failed: str | None = None
        self.replaced = False  # the workspace folder itself was removed or moved (a fresh watcher may do)
        # Events are in hand and not reported yet (a burst is drained for up to MAX_BATCH_S): a question asked
        # now would read the index as it was, with nothing to say so (a newcomer, session 30: deleted files of a
        # checkout named in answers for 0.1-0.4 s). The session waits for the report of the burst in hand (counted
        # by ``drains``: a writer that never pauses starts the next one at once, and is not waited for again).
        self.draining = False
        self.drains = 0
        self.continuous = False  # the last burst did not pause within MAX_BATCH_S
        self._ino: _Inotify | None = None
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    @property
    def count(self) -> int:
        return len(self.folders)

    def busy(self) -> bool:
        """Events in hand or still unread: a burst being drained, or events the kernel queued that the watching
        thread has not woken for yet (an agent that writes a file and asks at once got the index before the
        write in 19 of 20 tries, within 20-50 ms of it: a newcomer, session 40). inotify queues an event inside
        the writer's own call, so a write that returned is seen here."""
        if self.draining:
            return True
        ino = self._ino
        if ino is None:
            return False
        try:  # poll, not select: a server holding many files may have its inotify fd past select's 1024 (review)
            poller = select.poll()
            poller.register(ino.fd, select.POLLIN)
            return bool(poller.poll(0))
        except (OSError, ValueError):  # closed under us (stopping)
            return False

    def start(self) -> None:
        """Watch every folder the walk enters; raises :class:`WatchUnavailable` (nothing left running)."""
        self._ino = _Inotify()
        try:
            self._sync()
        except Exception as e:
            self._ino.close()
            self._ino = None
            if isinstance(e, WatchUnavailable):
                raise
            # Any failure of the walk is one the caller falls back from (it polls, and says so): one it did not
            # expect left the folder "file events starting" for good, unwatched and not retried (a review,
            # session 47).
            raise WatchUnavailable(f"file events could not start: {type(e).__name__}: {e}") from e
        self._thread = threading.Thread(target=self._run, name=f"delphi-events-{self.root.name}", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        """Ask the thread to end and wait for it; the thread owns the descriptor and closes it (a walk in
        ``_sync`` at 100,000 files takes seconds and must not find it closed under it)."""
        self._stop.set()
        if self._thread is not None and self._thread is not threading.current_thread():
            self._thread.join(timeout=10)

    def _run(self) -> None:
        ino = self._ino
        assert ino is not None
        try:
            self._loop(ino)
        except WatchUnavailable as e:
            self.failed = str(e)
        except Exception as e:  # a watcher that dies must say so: the caller then polls
            self.failed = f"file events stopped: {type(e).__name__}: {e}"
        finally:
            ino.close()
            self._ino = None
        if self.failed is not None and not self._stop.is_set():
            self.on_change(None)  # what happened since the last report is unknown: one full pass

    def _sync(self) -> None:
        """Bring the watches in line with the folders the walk enters now (after a folder came or went
        or the ignore rules changed)."""
        ino = self._ino
        assert ino is not None
        want = set(watched_folders(self.root, self.extra_ignores))
        if self.skip is not None:
            try:
                inside = self.skip.resolve().relative_to(self.root).as_posix()
                want = {f for f in want if f != inside and not f.startswith(inside + "/")}
            except ValueError:
                pass
        have = {rel: wd for wd, rel in self.folders.items()}
        for rel in sorted(set(have) - want):
            ino.rm(have[rel])
            self.folders.pop(have[rel], None)
        for rel in sorted(want - set(have)):
            if self._stop.is_set():
                return
            path = self.root / rel if rel else self.root
            try:
                wd = ino.add(path)
            except OSError as e:
                if e.errno in (errno.ENOSPC, errno.ENOMEM):
                    raise WatchUnavailable(f"cannot watch {len(want)} folders: {e.strerror}"
                                           + _limit_hint(e.errno, "max_user_watches")) from e
                continue  # gone, unreadable or now a link (IN_DONT_FOLLOW): the walk says what it is
            if os.path.realpath(path) != str(path):
                # A parent swapped for a link after the walk (IN_DONT_FOLLOW guards the last part only):
                # no watch outside the workspace, even a stray one.
                ino.rm(wd)
                continue
            self.folders[wd] = rel

    def _loop(self, ino: _Inotify) -> None:
        fd = ino.fd
        while not self._stop.is_set():
            ready, _, _ = select.select([fd], [], [], 0.5)
            if not ready:
                continue
            changed: set[str] | None = set()
            # Drain what arrives together: one report for a burst (a checkout, a formatter over a tree),
            # but never held back longer than MAX_BATCH_S by a writer that never pauses (a log file).
            self.draining = True
            try:
                first = time.monotonic()
                paused = False
                while time.monotonic() - first < MAX_BATCH_S:
                    try:
                        data = os.read(fd, 1 << 16)
                    except BlockingIOError:
                        if self._stop.wait(BATCH_S) or not select.select([fd], [], [], 0)[0]:
                            paused = True
                            break
                        continue
                    changed = self._parse(data, changed)
                # A burst cut off at MAX_BATCH_S is a writer that never pauses (a log file, ignored or not): not
                # waited for by questions, which it would hold a second each (a review, session 30).
                self.continuous = not paused
                if self._stop.is_set():
                    return
                if self.replaced:
                    raise WatchUnavailable("the workspace folder itself was removed, moved or replaced")
                if changed is None:
                    self._sync()
                if changed is None or changed:
                    self.on_change(changed)
            finally:
                self.draining = False
                self.drains += 1

    def _parse(self, data: bytes, changed: set[str] | None) -> set[str] | None:
        off = 0
        while off + HEADER.size <= len(data):
            wd, mask, _cookie, size = HEADER.unpack_from(data, off)
            name = os.fsdecode(data[off + HEADER.size: off + HEADER.size + size].rstrip(b"\0"))
            off += HEADER.size + size
            if mask & IN_Q_OVERFLOW:
                changed = None
                continue
            folder = self.folders.get(wd)
            if mask & IN_IGNORED:
                self.folders.pop(wd, None)
                if folder == "":
                    self.replaced = True
                continue
            if folder is None:
                continue
            if mask & (IN_DELETE_SELF | IN_MOVE_SELF):
                changed = None  # the folder itself went: which indexed files went with it?
                if folder == "":
                    self.replaced = True
                continue
            if not name or not utf8_name(name):
                continue  # the walk never indexes a name that is not UTF-8; the indexer could not store it
            rel = f"{folder}/{name}" if folder else name
            if mask & IN_ISDIR or name in RULE_FILES:
                if mask & (IN_CREATE | IN_DELETE | IN_MOVED_FROM | IN_MOVED_TO) or name in RULE_FILES:
                    changed = None
                continue
            if changed is not None:
                changed.add(rel)
        return changed
