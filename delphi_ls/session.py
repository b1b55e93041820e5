"""A session: the open workspace folders, their engines, unsaved buffers and the debounced
background indexer, free of any transport.

The language server (``server.py``), the MCP server (``mcp/``) and ``delphi serve`` are
thin fronts over one :class:`Session`; it imports nothing from pygls, lsprotocol or mcp
(a test checks) and reports progress and problems through :class:`SessionEvents`.
Paths given to it may be absolute paths or ``file://`` URIs.
"""

from __future__ import annotations

import logging
import os
import threading
import time
import weakref
from collections import OrderedDict
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, fields, replace
from pathlib import Path
from typing import Any, TypeVar

from .api import (
    ContextAnswer,
    ContextRequest,
    IndexRepairing,
    RelatedRequest,
    RequestError,
    SymbolsRequest,
    plain_relative,
    uri_to_path,
)
from .core import cancel, fs
from .engine import (
    Engine,
    EngineClosed,
    IndexBusy,
    IndexReport,
    manifest_fails_check,
    recover_damaged_manifest,
)
from .indexing.pipeline import WorkspaceGone, folder_readable
from .settings import Settings, SettingsError
from .stores.meta import DamagedManifest, is_corruption
from .workspace import watch as watch_mod
from .workspace.roots import WorkspaceRefused
from .workspace.scan import UNDECODABLE_NAME, utf8_name
from .workspace.watch import RULE_FILES, Watcher, WatchUnavailable

log = logging.getLogger("delphi_ls")
T = TypeVar("T")
DEBOUNCE_S = 0.3
# A small update (a save) leaves its index segment unmerged; this long after it, when no update is waiting,
# the worker merges what piled up (Engine.maintain), so no save pays for a merge (issue 18).
MAINTAIN_AFTER_S = 5.0
# The most a folder's first (catch-up) run waits for its warm start (Engine.warm) before it walks the tree.
WARM_WAIT_S = 120.0
# The most a run waits for file events to be armed (`Session.watch`: a walk of every folder, seconds at 100,000 files).
ARMING_WAIT_S = 120.0
# A question asked before a folder's first run (the catch-up of what changed while no server ran) is done:
# a small folder's catch-up takes a fraction of a second, so the question waits for it (at most
# CATCH_UP_WAIT_S) and sees files added or edited meanwhile; a large folder's takes long (a 40 s walk of the
# 100,000-file workspace), so its questions are answered at once and the answer says the catch-up is pending
# (`indexing.phase = "catch-up"`). A newcomer's agent got the old index, marked ready (session 23).
CATCH_UP_WAIT_FILES = 2_000
CATCH_UP_WAIT_S = 3.0
# The catch-up's walk waits, at most this long, while questions are answered: it held the interpreter
# from the first question (0.3 s of the first answer's 2.4 s at 100,000 files, session 23).
ASKING_WAIT_S = 5.0
# A question asked right after an edit (an agent writes a file through the editor, then asks) read the index
# as it was before the edit: the edit waited out the debounce (DEBOUNCE_S) and then its run. Such a question
# cuts the debounce short and waits, at most this long, for the edited files of its folder; a small update
# takes 0.1-0.4 s (a named save on spring-boot 0.39 s, session 26). A full pass is not waited for.
FLUSH_WAIT_S = 2.0
LENS_TESTS = 20  # related tests a definition's lens lists at most (one more is asked for: its title says "20+")
LENS_CODE = 10  # source files a test file's lens lists at most (likewise "10+")
POLL_SPACING = 4.0  # a poll's next full pass waits this many times the last one's length (at most 1/5 of a core)
POLL_MAX_WAIT_S = 60.0  # ... but no longer than this
LENS_FILES_KEPT = 32
# Languages without overloads, where two definitions of one name in a row are two things: Go's methods carry no
# receiver as their container, so `func (A) String()` and `func (B) String()` looked like one run (review, session 38).
_NO_OVERLOADS = (".go", ".c", ".h")  # files whose lenses are kept for the index state they were made at
# How long an index opened again under a server (removed, replaced, damaged) waits for questions in flight on the
# old engine, and a question waits for the new one.
REOPEN_WAIT_S = 30.0
RETRY_OPEN_S = 10.0  # how often a folder whose index could not be opened again is tried again
FLUSH_MAX_FILES = 50
SHUTDOWN_DISK_FILES = 50  # open files indexed from disk again when a session ends (Session._back_to_disk)
MAX_FILE_PROBLEMS = 500
STALENESS_EVERY_S = 10.0
# With file events, a full incremental pass this often anyway: events cannot see `.git/info/exclude`
# edits or a network file system's remote writes. About 1 s of CPU on spring-boot every 10 minutes.
RESCAN_S = 600.0
DEFINITION_KINDS = ("function", "method", "class", "struct", "interface", "trait", "enum", "type")
# Skips a user expects (images, lock files, empty files, links, generated and minified code) are
# not worth a mark in the editor: the probe saw one Information diagnostic per PNG and lock file.
QUIET_SKIPS = ("symlink", "empty file", "binary", "lockfile", "generated", "minified", "not a regular file")


def run_percentage(phase: str, done: int, total: int, files_share: int, before: int) -> int:
    """A run's progress as one rising percentage: the files (phase ``lexical``) take the first ``files_share``, the
    vectors the rest; never below the one ``before``."""
    part = done / total if total else 1.0
    pct = int(files_share * part) if phase == "lexical" else files_share + int((100 - files_share) * part)
    return max(min(pct, 100), before)


@dataclass(frozen=True)
class Problem:
    """Something the user should see: about one file (``path``) or the whole workspace (None)."""

    severity: str  # "error" | "warning" | "info"
    message: str
    code: str = ""
    path: Path | None = None


class SessionEvents:
    """What a front shows. Every method may be called from the indexer thread."""

    def message(self, severity: str, text: str) -> None:
        """A one-off message (settings errors, a failed index)."""

    def progress_begin(self, root: Path, title: str) -> Any:
        """Start a progress report; returns a token (None: the front shows no progress)."""
        return None

    def progress_report(self, token: Any, message: str, percentage: int) -> None:
        pass

    def progress_end(self, token: Any, message: str) -> None:
        pass

    def problems(self, root: Path, problems: list[Problem]) -> None:
        """The complete current list of problems for one workspace (replaces the previous one)."""

    def indexed(self, root: Path) -> None:
        """An index run of ``root`` ended: what was answered from the index before it may have changed."""


# The workspace's own settings files (settings.py), and the settings a running server applies when they change:
# those that decide which files are indexed. The rest are read when a folder opens (stores, models, weights).
SETTINGS_FILES = frozenset({"delphi.toml", "pyproject.toml"})
LIVE_SETTINGS = frozenset({"extra_ignores", "max_file_bytes"})


class Session:
    def __init__(self, events: SessionEvents | None = None, options: dict[str, Any] | None = None) -> None:
        self.events = events or SessionEvents()
        self.options: dict[str, Any] = {}
        self.option_errors: list[str] = []
        self.engines: dict[Path, Engine] = {}
        self.open_failures: dict[Path, str] = {}  # folders given that could not be opened, and why
        self.buffers: dict[Path, str] = {}  # absolute path -> unsaved text
        # A folder the editor named through a symbolic link (macOS's /tmp and /var, a linked checkout): its
        # real path -> the path as named. Engines are keyed by the real path; the editor sends and expects
        # paths under the named one (every buffer, save and anchor there was "outside the workspace": a
        # newcomer, session 31).
        self._named: dict[Path, Path] = {}
        # root -> {workspace path: why} of open buffers the last run could not index (problems_of says so)
        self.buffers_dropped: dict[Path, dict[str, str]] = {}
        self.pending: dict[Path, set[str] | None] = {}  # root -> paths to redo (None: everything)
        lock = threading.RLock()
        self._cv = threading.Condition(lock)
        # Its own condition on the same lock: a run's end wakes the questions waiting for their edits, not the
        # watch loop (which sleeps on _cv and, polling, would start a full pass at every wake-up).
        self._ran = threading.Condition(lock)
        self._last_change = 0.0
        self._stopping = False
        self._stopped = False
        self._busy = False  # the worker holds work taken from `pending`
        self._running: dict[Path, set[str] | None] = {}  # that work, while it runs
        self._seen_changes: set[Path] = set()  # roots whose pending or running work comes from file events
        self._elsewhere: dict[Path, int | None] = {}  # root -> pid of the other process whose run this one awaits
        self._flush = False  # a question waits for pending edits: the debounce ends now
        self._maintain_due: dict[Path, float] = {}  # root -> when its merges may run (after small updates)
        self._polling = False  # watch()'s full passes catch up (no editor): see there
        self._watching = False  # a watch() loop looks for changes and for folders that come back
        self._full_pass: dict[Path, tuple[float, float]] = {}  # root -> (when its last full pass ended, its seconds)
        # (root, file) -> (the manifest's content version, the view they were made from, its definitions' lenses)
        self._lens_cache: OrderedDict[tuple[Path, str], tuple[Any, Any, list[Any]]] = OrderedDict()
        self._lens_lock = threading.Lock()
        self._lens_building: dict[tuple[Path, str], threading.Lock] = {}  # one maker per file's lenses at a time
        self._staleness: dict[Path, tuple[float, Any]] = {}  # root -> (when scanned, what it found)
        self._worker: threading.Thread | None = None
        self._watchers: dict[Path, Watcher] = {}  # root -> its file events (delphi serve / mcp only)
        self.watch_state: dict[Path, str] = {}  # root -> why it polls (file events unavailable), for status
        # Roots whose folder went away under a server (moved, removed, unmounted): not indexed (that would
        # empty the index) and not polled until the folder is back, then watched again and caught up.
        self._gone: dict[Path, str | None] = {}  # root -> how changes were learnt of before (watch_state)
        self._full_failed: dict[Path, bool] = {}  # root -> its last full pass failed (until one succeeds)
        self._reopen_due: set[Path] = set()  # roots whose index a question or poll found removed (_replaced)
        self._reopening: dict[Path, threading.Event] = {}  # roots being closed and opened again (_reopen)
        self._retry_open: dict[Path, float] = {}  # roots whose reopen failed -> when to try again (_retry_lost)
        self._watch_lock = threading.Lock()
        self._arming: set[Path] = set()  # roots whose watcher is walking its folders (Watcher.start)
        self._armed = threading.Event()  # the watch loop's first arming is done (wait_idle waits for it)
        self._armed.set()
        self._watch_interval = 5.0
        self._engines_lock = threading.Lock()
        self._warming: dict[Path, threading.Event] = {}  # root -> set when its warm start is done
        self._caught_up: dict[Path, threading.Event] = {}  # root -> set when its first run is done
        self._asking = 0  # questions being answered (the catch-up's walk lets them finish first)
        self._ask_cv = threading.Condition()
        if options:
            self.configure(options)

    # ------------------------------------------------------------------ lifecycle
    def configure(self, options: Any) -> None:
        """Settings from the front (editor settings, command line): a bad key alone falls back to its
        default, and the user is told which."""
        if options is None or options == []:
            options = {}  # Lua's empty table is encoded as [] (Neovim's `init_options = {}`)
        if not isinstance(options, dict):
            self.option_errors.append("Delphi: settings must be an object; using defaults")
            options = {}
        for key, value in options.items():
            try:
                Settings.from_dict({key: value})
                self.options[key] = value
            except SettingsError as e:
                self.option_errors.append(f"Delphi: {e}; using the default for '{key}'")

    @property
    def started(self) -> bool:
        """Whether :meth:`start` ran (the LSP front starts the session on `initialized`)."""
        return self._worker is not None

    def start(self, folders: list[Path | str]) -> None:
        for msg in self.option_errors:
            self.events.message("error", msg)
        for f in folders:
            self.add_folder(f)
        if self._worker is None:
            self._worker = threading.Thread(target=self._run, name="delphi-indexer", daemon=True)
            self._worker.start()

    def add_folder(self, folder: Path | str) -> Engine | None:
        given = uri_to_path(str(folder))
        root = given.resolve()
        with self._engines_lock:
            named = Path(_normpath(given)) if given.is_absolute() else root
            if named != root:
                self._named[root] = named
            if root in self.engines:
                return self.engines[root]
            try:
                self.engines[root] = Engine(root, Settings.load(root, self.options))
            except Exception as e:
                self._open_failed(root, e)
                return None
            self.open_failures.pop(root, None)
        with self._engines_lock:
            self._caught_up[root] = threading.Event()
        self._schedule(root, None)
        eng = self.engines[root]
        if eng.settings.warm_start and eng.is_indexed():
            # The first question would otherwise open what it reads itself (issue 18: 3.8 s on the 100,000-file
            # workspace with a saved view). The catch-up run scheduled above waits for it: its walk took the
            # interpreter from the loads a question waits for.
            done = self._warming[root] = threading.Event()
            threading.Thread(target=self._warm, args=(eng, done), name="delphi-warm", daemon=True).start()
        return eng

    def _open_failed(self, root: Path, e: Exception, retry: bool = False) -> None:
        """Any failure to open one folder is said and leaves the others served: an unforeseen one (a settings file's
        UnicodeDecodeError, session 29) escaped `initialized`, and the language server then refused every request
        as "not initialized". Said again by each request that finds no folder open ("no workspace folder is open"
        read as if none had been given: a newcomer's read-only index folder, session 27). ``retry``: a folder
        that was open (its index removed or damaged, then a full disk at the reopen) is tried again (_retry_lost).
        Called with ``_engines_lock`` held."""
        if not isinstance(e, SettingsError | FileNotFoundError | OSError | RequestError | WorkspaceRefused):
            log.exception("opening %s failed", root)
        self.open_failures[root] = str(e)
        if retry:
            self._retry_open[root] = time.monotonic() + RETRY_OPEN_S
        self.events.message("error", f"Delphi cannot open {root}: {e}"
                                     + (f"; trying again every {RETRY_OPEN_S:g} s" if retry else ""))

    def _present(self, root: Path) -> bool:
        """Not gone and readable: a folder that is neither takes an index inside it along, and the walk says so."""
        return root not in self._gone and folder_readable(root)

    def _replaced(self, eng: Engine) -> None:
        """A question or a status poll that finds the folder's index removed, replaced or damaged has the indexing
        thread open it again (_reopen). Scheduled once: a poll every 0.2 s re-arming the debounce kept the run
        from ever starting (a review, session 30)."""
        root = eng.root
        if (root in self._reopen_due or self.engines.get(root) is not eng or not eng.index_replaced()
                or not self._present(root)):
            # An engine already replaced (a poll that took it before the reopen) is not: its root stayed in
            # _reopen_due with no reopen to come, and a later damage was never acted on (CI, session 36).
            return
        self._reopen_due.add(root)
        self._schedule(root, None)

    def _reopen(self, root: Path, eng: Engine) -> Engine | None:
        """The index folder was removed or its manifest replaced under this server (or found damaged in use): the
        engine is closed first (its SQLite connection then removes the old write-ahead log by name, which would
        else be applied to a new file there), a manifest SQLite's own check finds damaged is moved aside, and
        the folder is opened again under the same key (first folder stays first) and indexed. Questions wait
        for it (``_reopening``). A damage that check does not confirm (another store's, a passing error) is a
        problem in status, not a reopen, so it cannot loop. Called from the indexing thread."""
        self._reopen_due.discard(root)
        if not self._present(root):
            return eng  # the walk below says gone or unreadable; the index is looked at again when it is back
        replaced = eng.manifest_moved()
        damaged = eng.manifest_damaged and manifest_fails_check(eng.index_dir / "meta.sqlite")
        if not replaced and not damaged:
            eng.manifest_damaged = False
            eng.problems["store_error"] = ("a store reported damage while in use, which SQLite's check of the manifest "
                                           "does not confirm; `delphi index` checks and rebuilds the derived stores")
            return eng
        with self._engines_lock:
            if self._stopping or self.engines.get(root) is not eng:
                return None  # removed (or shutting down) meanwhile: not brought back
            done = self._reopening[root] = threading.Event()
        try:
            what = "found damaged" if damaged and not replaced else "removed or replaced"
            self.events.message("warning", f"Delphi: the index of {root} at {eng.index_dir} was {what} under the "
                                           "server; opening it again and indexing the folder")
            self._questions_answered(REOPEN_WAIT_S)
            try:
                eng.close()
            except Exception:  # its files are gone: what it holds is lost either way
                log.exception("closing the replaced index of %s failed", root)
            if damaged and not replaced:
                # Under the writer lock, checked again, and only the file this engine opened: a command that met the
                # same damage may have moved it aside and started a new one while questions were waited for, and
                # that one was moved aside as corrupt (a review, session 47). Health then says the recovery.
                err = DamagedManifest("SQLite's check found it damaged while the server answered from it")
                # Confirmed above on the same file (its identity is checked under the lock): not checked twice.
                aside = recover_damaged_manifest(eng.index_dir, err, eng.manifest_identity, confirmed=True)
                if aside is not None:
                    log.warning("moved the damaged manifest aside to %s", aside)
            try:
                new = Engine(root, Settings.load(root, self.options))
            except Exception as e:
                with self._engines_lock:
                    self.engines.pop(root, None)
                    self._open_failed(root, e, retry=True)
                return None
            with self._engines_lock:
                self.engines[root] = new
                self._caught_up[root] = threading.Event()
            self._schedule(root, None)
            return new
        finally:
            with self._engines_lock:
                self._reopening.pop(root, None)
            done.set()

    def _retry_lost(self) -> None:
        """Folders whose index could not be opened again after it was removed or damaged: tried again when due (from
        the watch loop and status polls)."""
        now = time.monotonic()
        for root, due in list(self._retry_open.items()):
            if now < due or self._stopping:
                continue
            with self._engines_lock:
                self._retry_open.pop(root, None)
                self.open_failures.pop(root, None)
            if self.add_folder(root) is None:
                with self._engines_lock:
                    self._retry_open[root] = time.monotonic() + RETRY_OPEN_S
            else:
                self.events.message("info", f"Delphi: {root} is open again; indexing it")

    def _warm(self, eng: Engine, done: threading.Event | None = None) -> None:
        try:
            took = eng.warm()
            if took:
                log.info("warmed %s: %s", eng.root, ", ".join(f"{k} {v:.2f} s" for k, v in took.items()))
        except Exception:  # closed under it (the folder was removed, the server stops), or a store failed:
            if not self._stopping and eng.root in self.engines:  # the first question meets the same and says so
                log.exception("warming %s failed", eng.root)
        finally:
            if done is not None:
                done.set()

    def remove_folder(self, folder: Path | str) -> Engine | None:
        """Stop serving a folder; returns its (closed) engine, or None if it was not open."""
        root = uri_to_path(str(folder)).resolve()
        with self._engines_lock:
            eng = self.engines.pop(root, None)
            self.open_failures.pop(root, None)
            self._named.pop(root, None)
        with self._watch_lock:
            watcher = self._watchers.pop(root, None)
            self.watch_state.pop(root, None)
        if watcher is not None:
            watcher.stop()
        self.buffers_dropped.pop(root, None)
        caught_up = self._caught_up.pop(root, None)
        if caught_up is not None:
            caught_up.set()  # a question waiting for its catch-up goes on (and meets the closed engine)
        if eng is not None:
            eng.stop_indexing()
            eng.close()
        return eng

    def shutdown(self) -> None:
        """Stop the indexer at its next batch boundary and close every store (idempotent)."""
        with self._cv:
            if self._stopped:
                return
            self._stopping = True
            self._cv.notify_all()
            self._ran.notify_all()
        self._armed.set()  # a run waiting for file events to be armed starts nothing now
        self._stop_watchers()
        with self._engines_lock:  # add_folder may add one meanwhile
            waiting = list(self._caught_up.values())
        for ev in waiting:
            ev.set()
        with self._ask_cv:  # the worker's wait for questions in flight ends now, not after ASKING_WAIT_S
            self._ask_cv.notify_all()
        for eng in list(self.engines.values()):
            eng.stop_indexing()
        if self._worker is not None and self._worker is not threading.current_thread():
            self._worker.join(timeout=30)
        with self._engines_lock:
            for eng in self.engines.values():
                self._back_to_disk(eng)
                if eng.settings.warm_start and eng.view_unsaved():
                    # A server stopped soon after a catch-up (whose views are not saved while it runs) would
                    # leave the next start to build them again (18 s on the 100k workspace). A temporary
                    # file renamed into place: a kill midway leaves the old file or none.
                    try:
                        eng.save_for_next()
                    except Exception:
                        log.exception("saving the view of %s failed", eng.root)
                eng.close()
            self.engines.clear()
        self._stopped = True

    def _back_to_disk(self, eng: Engine) -> None:
        """The files open in the editor as they are on disk again, at the end: the index held each open buffer's
        text with no size or time of its own, so the next `delphi health` called every file left open "changed"
        (two editors on one index, each other's), and a new file never saved stayed in it with its text (a Neovim
        newcomer, session 40). A few files (SHUTDOWN_DISK_FILES at most), as a save indexes them."""
        rels = sorted(self._buffers_of(eng))
        if not rels or len(rels) > SHUTDOWN_DISK_FILES:
            return
        if self._worker is not None and self._worker.is_alive():
            return  # the indexing thread did not stop in time: the store is its
        try:
            # Never waits for another process's writer (the editor's quit would wait on it: a review), and
            # embeds nothing (quitting during a first index's embedding would embed its whole backlog).
            eng.index(only=rels, reembed=False, vectors=False, wait=False)
        except IndexBusy:
            log.info("open files of %s not indexed from disk at the end: another process is indexing", eng.root)
        except Exception:  # the end of a session: said in the log, the next run redoes them
            log.exception("indexing the open files of %s from disk at the end failed", eng.root)

    # ------------------------------------------------------------------ routing
    def locate(self, path_or_uri: str | Path) -> tuple[Engine, str] | None:
        """The engine whose folder holds this path (the innermost one), and the path relative to it."""
        found = self.locate_all(path_or_uri)
        return found[0] if found else None

    def locate_all(self, path_or_uri: str | Path) -> list[tuple[Engine, str]]:
        """Every engine whose folder holds this path, the innermost first, each with the path relative to it
        (folders nested in one another both index the inner one's files). A folder is matched by its real
        path and by the path the editor named it by."""
        raw = str(path_or_uri)
        if not raw:
            return []
        path = uri_to_path(raw)
        if not path.is_absolute():
            return []
        path = Path(_normpath(path))
        # The path under each folder's real path: as given, and through each name a folder was given by (so a
        # folder named by its real path inside one named through a link gets it too).
        seen = [path]
        for root, named in list(self._named.items()):
            if path.is_relative_to(named):
                seen.append(root / path.relative_to(named))
        out: list[tuple[Engine, str]] = []
        for root, eng in sorted(self.engines.items(), key=lambda kv: -len(str(kv[0]))):
            rel = next((p.relative_to(root).as_posix() for p in seen if p.is_relative_to(root)), None)
            if rel is None:
                continue
            if not utf8_name(rel):
                return []  # a name that is not UTF-8 (`%FF` in a URI): never indexed (the scan skips it too)
            if rel != ".":  # a folder's own root is no file of it
                out.append((eng, rel))
        return out

    def shown_root(self, eng: Engine) -> Path:
        """The folder as the editor named it (its real path unless named through a link): answers' URIs."""
        return self._named.get(eng.root, eng.root)

    def engine_for(self, workspace: str | None, paths: list[str] | tuple[str, ...] = ()) -> Engine:
        """The engine a request is about: its ``workspace``, else the folder of its first absolute path, else the one
        open folder that holds its first relative path, else the only (or first) open folder."""
        if not self.engines:
            if self.open_failures:
                raise RequestError("workspace", "no workspace folder is open: " + "; ".join(
                    f"Delphi cannot open {root}: {why}" for root, why in self.open_failures.items()))
            raise RequestError("workspace", "no workspace folder is open")
        if workspace is not None:
            engines = list(self.engines.items())
            root = uri_to_path(workspace).resolve()  # a relative path: from the server's working folder ("." )
            if root in self.engines:
                return self.engines[root]
            if "://" not in workspace and not os.path.isabs(workspace):
                # A folder's name ("proj"): resolved against the server's own working folder it named whatever
                # folder the editor was started in (a newcomer, session 36). Matched by name among those open.
                named = [e for r, e in engines if workspace.strip("/") in (r.name, self.shown_root(e).name)]
                if len(named) == 1:
                    return named[0]
            shown = ", ".join(str(self.shown_root(e)) for _r, e in engines)
            raise RequestError("workspace", f"{workspace!r} is not an open workspace folder (open: {shown}; "
                                            "give its path, its file:// URI or, when unique, its name)")
        for p in paths:
            found = self.locate(p)
            if found:
                return found[0]
        if len(self.engines) > 1:
            # A workspace-relative path (what VS Code's agent tools send) in a multi-root window: the one open folder
            # that holds it. The first folder answered "does not exist in the workspace <first>" for a file of the
            # second (a monorepo newcomer, session 39).
            for p in paths:
                # Not through `..`: a stat outside every folder chose the folder an error then named (session 40).
                if plain_relative(p) and ".." not in p.replace("\\", "/").split("/"):
                    # On disk: asking each folder's index what it holds built every other folder's view (review).
                    holders = [e for r, e in list(self.engines.items()) if fs.is_file(r / p)]
                    if len(holders) == 1:
                        return holders[0]
        return next(iter(self.engines.values()))

    # ------------------------------------------------------------------ changes
    # An edit goes to every folder that holds the file: a folder nested in another is indexed by both, and the
    # outer one's answers kept the old text for good (a newcomer, session 31).
    def buffer_changed(self, path_or_uri: str | Path, text: str) -> None:
        for eng, rel in self.locate_all(path_or_uri):
            self.buffers[eng.root / rel] = text
            self._schedule(eng.root, {rel})

    def buffer_closed(self, path_or_uri: str | Path) -> None:
        for eng, rel in self.locate_all(path_or_uri):
            self.buffers.pop(eng.root / rel, None)
            self._schedule(eng.root, {rel})

    def file_changed(self, path_or_uri: str | Path, saved: bool = False) -> None:
        for eng, rel in self.locate_all(path_or_uri):
            self._file_changed(eng, rel, saved)

    def _file_changed(self, eng: Engine, rel: str, saved: bool) -> None:
        if saved:
            # The disk now holds what the buffer held; the disk is the truth again.
            self.buffers.pop(eng.root / rel, None)
        if rel.rsplit("/", 1)[-1] in RULE_FILES:
            # An ignore file changed: which files it covers cannot be told from its name, so a full pass (as the
            # file events of `delphi mcp` do). A file the user just ignored stayed in every answer, its open
            # buffer too, until it changed itself (a newcomer, session 28).
            self._schedule(eng.root, None, seen=True)
            return
        self._schedule(eng.root, {rel}, seen=True)

    def reindex(self, workspace: str | None = None) -> list[str]:
        """Schedule a full pass (of one folder, or all); returns the folders scheduled."""
        roots = [self.engine_for(workspace).root] if workspace is not None else list(self.engines)
        for root in roots:
            self._schedule(root, None)
        return [str(r) for r in roots]

    def _schedule(self, root: Path, paths: set[str] | None, seen: bool = False) -> None:
        """``seen``: files are known to have changed (file events), not looked for (a poll, a rescan)."""
        with self._cv:
            if seen:
                self._seen_changes.add(root)
            if paths is None or (root in self.pending and self.pending[root] is None):
                self.pending[root] = None  # a full pass covers any single files asked for
            else:
                self.pending[root] = (self.pending.get(root) or set()) | paths
            self._last_change = time.monotonic()
            self._cv.notify_all()

    # ------------------------------------------------------------------ the indexing worker
    def _run(self) -> None:
        # When runs stop waiting for file events to be armed: one deadline for the whole arming, not one wait per
        # batch (after one 120 s wait each later batch waited 120 s again while the walk went on; a review, s47).
        arming_until: float | None = None
        while True:
            with self._cv:
                due: list[Path] = []
                while not self.pending and not self._stopping:
                    now = time.monotonic()
                    due = [r for r, at in self._maintain_due.items() if at <= now]
                    if due:
                        break
                    self._cv.wait(timeout=min(self._maintain_due.values()) - now if self._maintain_due else None)
                if self._stopping:
                    return
                maintain = bool(due) and not self.pending
                if maintain:  # a quiet spell after small updates: merge what they left
                    for r in due:
                        self._maintain_due.pop(r, None)
                    self._busy = True
            if maintain:
                try:
                    self._maintain(due)
                finally:
                    with self._cv:
                        self._busy = False
                continue
            with self._cv:
                # Debounce: let a burst of edits settle before indexing.
                while (time.monotonic() - self._last_change < DEBOUNCE_S and not self._stopping
                       and not self._flush):
                    self._cv.wait(timeout=DEBOUNCE_S)
                if self._stopping:
                    return
                arming = not self._armed.is_set()
            if not arming:
                arming_until = None
            else:
                if arming_until is None:
                    arming_until = time.monotonic() + ARMING_WAIT_S
                if (left := arming_until - time.monotonic()) > 0:
                    # File events being armed (`watch`): a run now would look at folders before their events are
                    # watched, and an edit between the two would be seen by neither. It runs once they are armed
                    # (its work stays pending meanwhile, so the arming knows it is still to come).
                    self._armed.wait(left)
                    continue
            with self._cv:
                work, self.pending = self.pending, {}
                self._flush = False
                self._busy = True
                self._running = dict(work)  # a copy: each root leaves it when its run ends (_run_work)
            try:
                self._run_work(work)
            except Exception:  # the one indexing thread must not die of one folder's failure
                log.exception("indexing failed")
            finally:
                with self._cv:
                    self._busy = False
                    self._running = {}
                    self._ran.notify_all()  # questions waiting for their edits (_flush_edits)

    def _run_work(self, work: dict[Path, set[str] | None]) -> None:
        for root, paths in work.items():
            if self._stopping:  # shutdown asked between two folders: start no new run
                return
            eng = self.engines.get(root)
            if eng is None:
                continue
            if eng.index_replaced():
                eng = self._reopen(root, eng)
                if eng is None or self._stopping:
                    continue
            else:
                self._reopen_due.discard(root)  # nothing to reopen: a later damage must schedule its own
            warming = self._warming.pop(root, None)
            if warming is not None:
                warming.wait(timeout=WARM_WAIT_S)
                if self._stopping:  # shut down meanwhile: start no run (review 9)
                    return
            first = self._caught_up.get(root)
            try:
                if first is not None and not first.is_set():
                    self._questions_answered(ASKING_WAIT_S)
                if self._reread_settings(eng, paths):
                    paths = None  # what is indexed changed (extra_ignores, max_file_bytes): every file is looked at
                started = time.monotonic()
                rep = self._index(eng, paths)
                if paths is None:
                    self._full_pass[root] = (time.monotonic(), time.monotonic() - started)
                if paths is None or not self._full_failed.get(root):
                    # A failed full pass is cleared by a full pass only: a buffer's one-file run after it said
                    # "ready" with the files that pass missed still unindexed (a review, session 30).
                    eng.problems.pop("index_run", None)
                    self._full_failed.pop(root, None)
                if root in self._gone:  # back, and told by an editor's events (no watch loop looks)
                    with self._watch_lock:
                        self._back(root, full_pass=paths is not None)
                wrote = bool(rep.files_indexed or rep.files_deleted)
                if wrote or (eng.settings.warm_start and eng.view_unsaved()):
                    # A run wrote: a small update's merges (and Chroma's writes) wait for a quiet spell. And
                    # the view is made again and saved for the next process then (warm), also one built while
                    # a run that changed nothing went on (the catch-up at start): not saved during runs. Not
                    # put off by later updates: a poll every few seconds would put it off for ever.
                    # A run that wrote nothing left nothing to merge: its view is saved at once.
                    with self._cv:
                        self._maintain_due.setdefault(root, time.monotonic() + (MAINTAIN_AFTER_S if wrote else 0.0))
            except WorkspaceGone as e:
                with self._watch_lock:
                    self._went(root, str(e))
            except Exception as e:  # an indexing failure must show, and not kill the worker
                self._found_damaged(eng, e)
                log.exception("indexing %s failed", root)
                self.events.message("error", f"Delphi: indexing {root} failed: {type(e).__name__}: {e}")
                # And in status and health until a run succeeds: an agent sees no stderr, and `index_status` said
                # "ready" after `Too many open files` (a newcomer, session 30).
                eng.problems["index_run"] = f"the last index run failed: {type(e).__name__}: {e}"
                if paths is None:
                    self._full_failed[root] = True
            finally:
                with self._cv:
                    # The run is done: what follows (problems, lenses) must not count as a full pass under way,
                    # or a question after an editor's first buffer did not wait for that buffer's run and
                    # answered without it (a newcomer, session 36: the first didOpen after the start).
                    self._running.pop(root, None)
                    if root not in self.pending:
                        self._seen_changes.discard(root)
                if first is not None:
                    first.set()
            self._staleness.pop(root, None)  # a run just brought it up to date: look afresh next time
            if not self._stopping:
                try:
                    self.publish_problems(eng)
                    self.events.indexed(root)
                except Exception as e:  # a damaged manifest here killed the indexing thread (session 30)
                    self._found_damaged(eng, e)
                    log.exception("after indexing %s", root)

    def _reread_settings(self, eng: Engine, paths: set[str] | None) -> bool:
        """The workspace's settings file (``delphi.toml``, ``pyproject.toml``) read again when it changed (and
        at each full pass): a running server kept the settings it opened with, so an ``extra_ignores`` added
        for a secret folder left it in answers until a restart (a hostile newcomer, session 28). What decides
        which files are indexed applies at once; any other changed key is said to need a restart (stores,
        models and weights are built from it when a folder opens). True: a full pass is due."""
        if (paths is not None and not paths & SETTINGS_FILES) or not folder_readable(eng.root):
            return False  # a folder gone or unreadable has no settings file: not read as "back to the defaults"
        try:
            new = Settings.load(eng.root, self.options)
        except SettingsError as e:
            eng.warnings["settings_file"] = (f"{e}; the settings read when Delphi opened this folder stay in use "
                                             "until it is fixed")
            return False
        eng.warnings.pop("settings_file", None)
        old = eng.settings
        differ = [f.name for f in fields(Settings) if getattr(new, f.name) != getattr(old, f.name)]
        live = [k for k in differ if k in LIVE_SETTINGS]
        for key in live:
            setattr(old, key, getattr(new, key))
        old.refused, old.unknown, old.own = new.refused, new.unknown, new.own  # what is now refused or unknown
        restart = sorted(k for k in differ if k not in LIVE_SETTINGS)
        if restart:
            eng.warnings["settings_changed"] = (f"the settings changed ({', '.join(restart)}) since Delphi opened "
                                                "this folder; they take effect when the server restarts")
        else:
            eng.warnings.pop("settings_changed", None)
        if live:
            log.info("settings of %s changed: %s applied", eng.root, ", ".join(live))
            with self._watch_lock:  # its folders follow extra_ignores: a fresh watcher with the new list
                w = self._watchers.pop(eng.root, None)
            if w is not None:
                w.stop()
                self._sync_watchers()  # at once: edits before the next tick would wait for the rescan
        return bool(live)

    def _maintain(self, roots: list[Path]) -> None:
        for root in roots:
            eng = self.engines.get(root)
            if eng is None or self._stopping:
                continue
            try:
                eng.maintain()
            except Exception:  # a merge that fails leaves the committed segments as they were
                log.exception("merging the index segments of %s failed", root)
            if eng.settings.warm_start and not self._stopping:
                self._warm(eng)

    def _buffers_of(self, eng: Engine) -> dict[str, str]:
        out = {}
        for path, text in list(self.buffers.items()):
            rel = next((r for e, r in self.locate_all(path) if e is eng), None)  # a nested folder's file too
            if rel is not None:
                out[rel] = text
        return out

    def _index(self, eng: Engine, paths: set[str] | None) -> IndexReport:
        only = None if paths is None else sorted(paths)
        token = self.events.progress_begin(eng.root, f"Delphi: indexing {eng.root.name}") if paths is None else None
        last = [0.0, 0]  # when the last report went, and its percentage
        # One percentage across the run, rising (LSP: clients may ignore a lower one): it ran 0-100 for the files,
        # then from about 5 again for the vectors, and sat at 100 through spring-boot's 18 s of embedding (a
        # monorepo newcomer, session 39). The files take the first part when vectors follow.
        files_share = 60 if eng.embeds else 100

        def progress(phase: str, done: int, total: int, chunks: int) -> None:
            now = time.monotonic()
            if token is None or (now - last[0] < 0.2 and done < total):
                return
            last[0] = now
            pct = last[1] = run_percentage(phase, done, total, files_share, last[1])
            what = "files" if phase == "lexical" else "chunks embedded"
            self.events.progress_report(token, f"{phase}: {done}/{total} {what}, {chunks} chunks", pct)

        def waiting(holder: Any) -> None:
            # Another process (a terminal's `delphi index`, a second editor) writes this index: say so
            # and wait; answers keep coming from what it has committed meanwhile.
            what = holder.describe() if holder is not None else "another Delphi process is indexing this workspace"
            self._elsewhere[eng.root] = holder.pid if holder is not None else None
            self.events.message("info", f"Delphi: {what}; waiting for it to finish ({eng.root.name})")

        try:
            rep = eng.index(progress=progress, only=only, buffers=self._buffers_of(eng),
                            reembed=paths is None and not self._polling and not self._polled_again(eng.root),
                            on_wait=waiting)
        finally:
            self._elsewhere.pop(eng.root, None)
            if token is not None:
                c = eng.counts() if not self._stopping else {"files": 0, "chunks": 0, "vectors": 0}
                self.events.progress_end(token, f"{c['files']} files, {c['chunks']} chunks, {c['vectors']} vectors")
        for path, reason in rep.buffers_dropped.items():
            # An unsaved buffer of a file the ignore rules exclude (a .env opened in the editor): never
            # indexed, nothing of it written to disk; logged once so the user can tell why it is not found.
            log.info("not indexing the unsaved buffer of %s: %s", path, reason)
        self.buffers_dropped[eng.root] = dict(rep.buffers_dropped)  # every open buffer of it went to this run
        if rep.errors and not self._stopping:
            self.events.message("warning", f"Delphi: indexing {eng.root.name}: {'; '.join(rep.errors)}")
        return rep

    def _polled_again(self, root: Path) -> bool:
        """A language server's own watch loop (its client registers no file watchers) after the folder's first
        run: its full passes catch up like a poll (reembed=False); the first stays the server's full run. With
        full runs every 5 s on a large repository, each probed the model and opened the vector store (review)."""
        first = self._caught_up.get(root)
        return self._watching and first is not None and first.is_set()

    def watch(self, interval: float = 5.0, events: bool = True, catch_up: bool = True) -> None:
        """Without an editor to report changes (``delphi serve``, ``delphi mcp``), learn of them: from
        the operating system's file events where it has them (:mod:`delphi_ls.workspace.watch`; an edit
        costs the paths it names), with a full incremental pass every ``RESCAN_S`` as a safety net for
        what events cannot see (``.git/info/exclude``, a network file system's remote writes); else an
        incremental pass every ``interval`` seconds (a scan and a stat per file), and status says so.
        ``events=False`` polls (tests of the fallback). ``catch_up``: every full pass catches up like `delphi context`
        does (reembed=False); without it (a language server whose editor sends no file events) the folder's first
        run stays the server's full run and the later ones catch up (:meth:`_polled_again`)."""
        self._polling = catch_up  # the poll's full passes catch up like `delphi context` does (reembed=False)
        self._watching = True
        self._watch_interval = interval
        last_full: dict[Path, float] = {}

        def tick() -> None:
            self._retry_lost()
            with self._cv:
                busy = bool(self.pending) or self._busy
            if events:
                self._sync_watchers()
            else:
                with self._watch_lock:
                    self._check_gone()
            if busy:
                return
            now = time.monotonic()
            for root in list(self.engines):
                if root in self._gone:
                    continue  # nothing to look at until it is back (_sync_watchers looks)
                if root not in self._watchers:
                    # A poll's pass walks and stats every file: on a large tree it outlasted the interval and the
                    # process never rested. Passes are spaced by POLL_SPACING times the last one's length, at most
                    # a fifth of a core (review of session 38: the language server now polls where an editor
                    # registers no file watchers and the system gives no events).
                    ended, took = self._full_pass.get(root, (-1e9, 0.0))
                    # Capped: a first index or a long wait for another process's lock is no walk's length (review).
                    if now - ended >= min(POLL_SPACING * took, POLL_MAX_WAIT_S):
                        self._schedule(root, None)
                elif now - last_full.setdefault(root, now) >= RESCAN_S:
                    last_full[root] = now
                    self._schedule(root, None)

        def loop() -> None:
            if events:
                try:
                    self._sync_watchers()
                except Exception:
                    log.exception("starting file events failed")
                finally:
                    self._armed.set()
            while True:
                with self._cv:
                    self._cv.wait(timeout=interval)
                    if self._stopping:
                        break
                try:
                    tick()
                except Exception:  # the thread that polls and rescans must not die of one bad tick
                    log.exception("looking for changes failed")
            self._stop_watchers()

        if events:
            # The first arming walks every folder: in the loop's thread, not the caller's. The language server calls
            # this from its `initialized` handler, and at 100,000 files its first answer waited 13 s for the walk
            # (1.97 s before the server watched folders itself; bench.after_100k, session 46); `delphi mcp`'s calls
            # waited for it too.
            self._armed.clear()
        else:
            with self._watch_lock:
                for root in self.engines:
                    self.watch_state[root] = f"polling every {interval:g} s (file events not used)"
        threading.Thread(target=loop, name="delphi-watch", daemon=True).start()

    def _sync_watchers(self) -> None:
        """File events for every open folder that has none yet; none for folders no longer open; a
        watcher that failed is replaced by polling (said in status), or by a fresh watcher when the
        workspace folder was only replaced (moved away and made again, a re-clone)."""
        with self._watch_lock:
            if self._stopping:
                return
            for root, w in list(self._watchers.items()):
                if root not in self.engines:
                    self._watchers.pop(root, None)
                    self.watch_state.pop(root, None)
                    w.stop()
                elif w.failed is not None:
                    self._watchers.pop(root, None)
                    w.stop()
                    if w.replaced:
                        if not root.is_dir():
                            self._went(root)
                        continue  # watched afresh below, now or once the folder is back
                    self._fall_back(root, w.failed)
            self._check_gone()
            arming = []
            for root, eng in list(self.engines.items()):
                if (root in self._watchers or root in self.watch_state or root in self._gone
                        or root in self._arming):
                    continue  # watched, already found unable to be (it polls; said once), or being armed
                self._arming.add(root)
                arming.append((root, Watcher(root, lambda paths, root=root: self._schedule(root, paths, seen=True),
                                             extra_ignores=eng.settings.extra_ignores, skip=eng.index_dir)))
        # Armed outside the lock: a watcher's start walks every folder (seconds at 100,000 files), and status reads
        # the lock (`_changes`), so a question waited for the walk (session 46).
        for root, w in arming:
            try:
                w.start()
            except WatchUnavailable as e:
                with self._watch_lock:
                    self._arming.discard(root)
                    if not self._stopping and root in self.engines:
                        self._fall_back(root, str(e))
                continue
            with self._watch_lock:
                self._arming.discard(root)
                if self._stopping or root not in self.engines:
                    w.stop()  # shut down or the folder removed during the walk
                    continue
                self._watchers[root] = w
            with self._cv:
                covered = root in self.pending and self.pending[root] is None and root not in self._running
            if not covered:
                # An edit between the last run's look at a folder and its watch being armed has no event: one
                # full pass after arming sees it (runs wait for the arming: `_run`), unless one is still to start.
                self._schedule(root, None)

    def _went(self, root: Path, why: str | None = None) -> None:
        """The folder is gone: said once (not at every poll), and status says it until it is back.
        Called with ``_watch_lock`` held."""
        if root in self._gone:
            return
        self._gone[root] = self.watch_state.get(root)
        why = why or str(WorkspaceGone(root))
        self.watch_state[root] = f"waiting for the workspace folder to come back: {why}"
        self.events.message("warning", f"Delphi: {why}")

    def _look_for_gone(self) -> None:
        """From questions and status polls: a language server has no watch loop, and a folder that came back (a
        re-clone) while the editor sent no file events was never indexed again; its answers kept the deleted
        files (a newcomer, session 36)."""
        if self._gone and not self._watching:  # a watch loop looks itself, and arms the folder's events with it
            with self._watch_lock:
                self._check_gone()

    def _check_gone(self) -> None:
        """Gone folders that are back (moved back, re-cloned, remounted): changes learnt of as before (events
        again, or the poll), and one full pass for what changed while away. Called with ``_watch_lock`` held."""
        for root in list(self._gone):
            if root not in self.engines:
                self._gone.pop(root, None)
            elif folder_readable(root):
                self.events.message("info", f"Delphi: the workspace folder {root} is back; bringing the index up to date")
                self._back(root)

    def _back(self, root: Path, full_pass: bool = True) -> None:
        """A gone folder is back: changes learnt of as before it went, and (``full_pass``) one full pass for what
        changed while it was away. Called with ``_watch_lock`` held."""
        if root not in self._gone:
            return
        before = self._gone.pop(root)
        if before is None:
            self.watch_state.pop(root, None)  # _sync_watchers arms a fresh watcher
        else:
            self.watch_state[root] = before
        if full_pass:
            with self._engines_lock:
                # A catch-up as at the start: a question waits for it on a small folder, and answers say it. One
                # still to come is kept (a question may wait on it).
                held = self._caught_up.get(root)
                if held is None or held.is_set():
                    self._caught_up[root] = threading.Event()
            self._schedule(root, None)

    def _fall_back(self, root: Path, why: str) -> None:
        self.watch_state[root] = f"polling every {self._watch_interval:g} s: {why}"
        self.events.message("warning", f"Delphi: no file events for {root.name}, polling instead: {why}")

    def _changes(self, root: Path) -> str | None:
        """How changes to this folder are learnt of, for status (None: an editor reports them)."""
        with self._watch_lock:
            w = self._watchers.get(root)
            if w is not None and w.failed is None:
                return f"file events (inotify, {w.count} folders watched)"
            if root in self._arming:
                return "file events starting (listing the folders to watch)"
            return self.watch_state.get(root)

    def _stop_watchers(self) -> None:
        with self._watch_lock:
            watchers = list(self._watchers.values())
            self._watchers.clear()
        for w in watchers:
            w.stop()

    def wait_idle(self, timeout: float = 60.0) -> bool:
        """Block until nothing is pending or running, nor held by a watcher as events not yet reported (tests,
        benchmarks, `delphi serve --wait`): idle with a burst in hand, and status said "indexing (changes)" right
        after (CI, session 43: a file created, then written while the watcher was already gathering)."""
        deadline = time.monotonic() + timeout
        if not self._armed.wait(timeout):  # file events being armed: an edit now could go unseen
            return False
        while time.monotonic() < deadline:
            # The watchers first: one reports its burst (pending filled) before it stops being busy, so a report
            # between the two reads is seen in `pending` (read after), never missed (review, session 44).
            in_hand = any(self._events_in_hand(root) for root in list(self._watchers))
            with self._cv:
                idle = not self.pending and not self._busy
            if idle and not in_hand and all(e.indexing is None for e in self.engines.values()):
                return True
            time.sleep(0.05)
        return False

    # ------------------------------------------------------------------ requests
    def _await_first(self, eng: Engine) -> None:
        """Hold a question briefly for the folder's first run: its catch-up on an existing index of at most
        CATCH_UP_WAIT_FILES files, or a first index while it is that small (a 94-file folder's first answer was
        "0 files" at 1.8 s, its index ready 2 s later; an agent newcomer, session 26). A large first index is
        not waited for: its answers say how far it is."""
        first = self._caught_up.get(eng.root)
        if first is None or first.is_set():
            return
        if eng.is_indexed():
            if eng.counts()["files"] <= CATCH_UP_WAIT_FILES:
                cancel.wait(first, CATCH_UP_WAIT_S)
            return
        deadline = time.monotonic() + CATCH_UP_WAIT_S
        while not first.wait(0.05) and time.monotonic() < deadline:
            cancel.check()
            run = eng.indexing
            if run is not None and run.get("total", 0) > CATCH_UP_WAIT_FILES:
                return

    def indexing_of(self, eng: Engine) -> dict[str, Any] | None:
        """How far the folder's index is from what is on disk while that is not known to be none: a run under
        way, or a first run still to come (``queued``: no index yet; ``catch-up``: an index from an earlier run)."""
        run = eng.indexing
        if run is not None:
            return dict(run)
        first = self._caught_up.get(eng.root)
        if eng.root in self._elsewhere:
            # Another process writes the index and this one waits for it: the answer comes from what that one has
            # committed so far, not from an index "not started" (a second agent session during the first's first
            # index was told its three results were an empty answer, session 43).
            pid = self._elsewhere.get(eng.root)
            try:
                files = eng.counts()["files"]
            except Exception:  # closed or damaged under us: the phase is what matters
                files = 0
            return {"phase": "elsewhere", "done": files, "total": 0, "chunks": 0,
                    **({"pid": pid} if pid is not None else {})}
        if first is not None and not first.is_set():
            return {"phase": "catch-up" if eng.is_indexed() else "queued", "done": 0, "total": 0, "chunks": 0}
        with self._cv:
            # Work taken from file events that questions do not wait for (a checkout, a folder made or removed:
            # a full pass, or more files than a flush waits for), before its run has begun: answers in that
            # second came from the old tree, with deleted files and moved lines, marked ready (a newcomer
            # switching branches, session 43: 3 of 4 checkouts).
            # Only changes seen (file events), not a poll's or a rescan's look that usually finds none.
            seen = eng.root in self._seen_changes
            work = self.pending.get(eng.root, set()) if eng.root in self.pending else (
                self._running.get(eng.root, set()) if self._busy and eng.root in self._running else set())
        if seen and (work is None or len(work) > FLUSH_MAX_FILES):
            return {"phase": "changes", "done": 0, "total": 0 if work is None else len(work), "chunks": 0}
        return None

    def _found_damaged(self, eng: Engine, e: BaseException) -> bool:
        """A manifest found corrupt in use (overwritten in place under the server): the indexing thread opens the
        folder again (_reopen), which moves a damaged manifest aside and rebuilds it, as an open always did."""
        if is_corruption(e):
            eng.manifest_damaged = True
            self._replaced(eng)
            return True
        return False

    @contextmanager
    def _reading(self, eng: Engine) -> Iterator[None]:
        """A request's reads of ``eng``: a corrupt manifest found there is said in words (IndexRepairing), not as
        sqlite's "database disk image is malformed" with a traceback to the editor or agent (a hostile-input audit,
        session 46), and the folder is opened again and indexed (_found_damaged)."""
        try:
            yield
        except Exception as e:
            if self._found_damaged(eng, e):
                raise IndexRepairing(f"the index of {eng.root} was found damaged ({e}); Delphi is checking it, and "
                                     "moving it aside and indexing the folder again if SQLite confirms the damage: "
                                     "ask again in a few seconds") from None
            raise

    def _editor_read(self, eng: Engine, read: Callable[[], T], empty: T) -> T:
        """An editor's view of one file (lenses, hover, outline) read under :meth:`_reading`: a damaged index found
        there is opened again and indexed as for a question, and the view is ``empty`` meanwhile (the reopen says
        it once, in a message): a lens or hover failed with a traceback at every keystroke (a review, session
        47)."""
        try:
            with self._reading(eng):
                return read()
        except IndexRepairing:
            return empty

    def _events_in_hand(self, root: Path) -> Watcher | None:
        """The folder's watcher while it holds events not yet reported (a burst being gathered, at most
        MAX_BATCH_S, or events still unread), unless its writer never pauses (then nothing is waited for)."""
        w = self._watchers.get(root)
        return w if w is not None and not w.continuous and w.busy() else None

    def _await_events(self, root: Path) -> None:
        """File events in hand but not yet reported: waited for, so that the edits they name are flushed or the
        answer says indexing is under way."""
        w = self._watchers.get(root)
        if w is None:
            return
        burst = w.drains
        if self._events_in_hand(root) is None:
            return
        # Until the burst in hand (or the one the unread events start) is reported.
        deadline = time.monotonic() + watch_mod.MAX_BATCH_S + 0.5 + 0.5  # + the thread's select wake-up
        while w.drains == burst and not self._stopping and time.monotonic() < deadline:
            time.sleep(0.01)

    def _flush_edits(self, eng: Engine) -> None:
        """Let the folder's pending edits (a few files: buffers, saves) be indexed before a question is
        answered, at most FLUSH_WAIT_S: the debounce is cut short. A full pass pending or running is not
        waited for (a catch-up can take minutes); the answer then says indexing is under way."""
        root = eng.root
        deadline = time.monotonic() + FLUSH_WAIT_S

        def small(paths: set[str] | None) -> bool:
            return paths is not None and len(paths) <= FLUSH_MAX_FILES

        with self._cv:
            while not self._stopping:
                queued = root in self.pending
                running = self._busy and root in self._running
                if not queued and not running:
                    return
                if (queued and not small(self.pending[root])) or (running and not small(self._running[root])):
                    return
                if queued:
                    self._flush = True
                    self._cv.notify_all()
                left = deadline - time.monotonic()
                if left <= 0:
                    return
                self._ran.wait(min(left, 0.1))  # in slices: a cancelled question stops waiting
                cancel.check()

    def context(self, req: ContextRequest) -> ContextAnswer:
        return self.context_in(req)[0]

    def context_in(self, req: ContextRequest) -> tuple[ContextAnswer, Path]:
        """The answer and the folder that gave it, as the editor named it (the MCP tool names it when several
        are open: it asked ``engine_for`` again after answering, which a folder added or reopened meanwhile
        could change, and named the link's target for a folder opened through a link)."""
        self._look_for_gone()
        eng = self.engine_for(req.workspace, req.anchors)
        self._replaced(eng)  # found removed, replaced or damaged: the indexing thread opens it again (_reopen)
        reopening = self._reopening.get(eng.root)
        if reopening is not None:  # asked while it is closed and opened again: the new one answers
            cancel.wait(reopening, REOPEN_WAIT_S)
            eng = self.engine_for(req.workspace, req.anchors)
        self._await_events(eng.root)
        self._await_first(eng)
        self._flush_edits(eng)
        if eng.root in self._named and req.anchors:  # paths under the folder as the editor named it
            req = replace(req, anchors=[self._rel(eng, a) for a in req.anchors])
        cancel.check()
        with self._ask_cv:
            self._asking += 1
        try:
            with self._reading(eng):
                ans = eng.answer(req)
        finally:
            with self._ask_cv:
                self._asking -= 1
                self._ask_cv.notify_all()
        if eng.root in self._named:
            self._with_uris(eng, ans.get("results", []))  # type: ignore[arg-type]
        if "indexing" not in ans and (pending := self.indexing_of(eng)) is not None:
            # Asked before the first run began ("queued": the empty answer is "not yet", not "nothing"), or
            # on an index from an earlier run before the catch-up found what changed since.
            ans["indexing"] = pending  # type: ignore[typeddict-item]
        return ans, self.shown_root(eng)

    def _questions_answered(self, timeout: float) -> None:
        """Wait until no question is being answered, at most ``timeout`` seconds."""
        deadline = time.monotonic() + timeout
        with self._ask_cv:
            while self._asking and not self._stopping and (left := deadline - time.monotonic()) > 0:
                self._ask_cv.wait(left)

    # related_tests, related_code and symbols wait for a first run as context does: they answered "0 tests"
    # and "0 definitions" from an empty or old index, with nothing saying so (an agent newcomer, session 26).
    def related_tests(self, req: RelatedRequest) -> list[dict[str, Any]]:
        self._look_for_gone()
        eng = self.engine_for(req.workspace, (req.path,))
        self._await_first(eng)
        self._flush_edits(eng)
        with self._reading(eng):
            rows = eng.related_tests(self._rel(eng, req.path), symbol=req.symbol, limit=req.limit)
        return self._with_uris(eng, rows)

    def related_code(self, req: RelatedRequest) -> list[dict[str, Any]]:
        self._look_for_gone()
        eng = self.engine_for(req.workspace, (req.path,))
        self._await_first(eng)
        self._flush_edits(eng)
        with self._reading(eng):
            rows = eng.related_code(self._rel(eng, req.path), limit=req.limit)
        return self._with_uris(eng, rows)

    def engines_for(self, workspace: str | None) -> list[Engine]:
        """The folder a request names, or every open folder (symbols are searched in all)."""
        return [self.engine_for(workspace)] if workspace else list(self.engines.values())

    def symbols(self, req: SymbolsRequest, wait: bool = True) -> list[dict[str, Any]]:
        """``wait=False``: an editor's `workspace/symbol`, asked again at each keystroke, is not held for a
        first run (up to 3 s a request, per folder; review, session 26)."""
        out: list[dict[str, Any]] = []
        for eng in self.engines_for(req.workspace):
            if wait:
                self._await_first(eng)
                self._flush_edits(eng)
            with self._reading(eng):
                rows = eng.symbols(req.query, limit=req.limit)
            out.extend(self._with_uris(eng, rows) if eng.root in self._named else rows)
        return out[: req.limit]

    def health(self) -> dict[str, Any]:
        return {"workspaces": [self._health_of(eng, buffered=self._buffers_of(eng)) for eng in list(self.engines.values())],
                "settingsErrors": self.option_errors}

    def _health_of(self, eng: Engine, **kw: Any) -> dict[str, Any]:
        with self._reading(eng):
            return eng.health(**kw)

    def status(self) -> dict[str, Any]:
        """Per folder: indexing progress, readiness, staleness (scanned at most every 10 s) and problems;
        no model re-probe, no Chroma check (those are `health()`'s)."""
        self._retry_lost()
        self._look_for_gone()
        out = []
        for root, eng in list(self.engines.items()):
            self._replaced(eng)  # said, and opened again by the indexing thread (_reopen)
            # Staleness scans the folder: polled every 0.2 s by an agent, it is redone at most every 10 s
            # (and after each run); between scans the last one stands.
            when, last = self._staleness.get(root, (-1e9, None))
            due = time.monotonic() - when >= STALENESS_EVERY_S
            try:
                h = self._health_of(eng, check_staleness=due, full=False, buffered=self._buffers_of(eng))
            except EngineClosed:
                if root in self._reopening or self.engines.get(root) is not eng:
                    continue  # closed by its reopen (_reopen) during this poll: the next poll sees the new one
                raise
            except IndexRepairing as e:
                # This folder's, said as its own state: the other folders' status was lost with it (a review,
                # session 47). Its counts are those of the index about to be made.
                out.append({"root": str(root), "state": "repairing", "indexing": None,
                            "counts": {"files": 0, "chunks": 0, "vectors": 0, "symbols": 0, "skipped": 0},
                            "branches": {}, "staleness": None, "indexAgeSeconds": None, "changes": self._changes(root),
                            "problems": [{"severity": "error", "code": "manifest_damaged", "message": str(e)}]})
                continue
            if due:
                self._staleness[root] = (time.monotonic(), h.get("staleness"))
            else:
                h["staleness"] = last
            running = eng.indexing
            pending = self.indexing_of(eng)
            if running is None and pending is not None and pending["phase"] == "changes":
                running = pending  # file events in hand, their run about to begin: not "ready" (session 43)
            if running is None and self._events_in_hand(root) is not None:
                # A burst being gathered (up to a second): a question waits for it (_await_events); a poll of the
                # status said "ready" meanwhile, for the old tree (a newcomer's checkout, session 43).
                running = {"phase": "changes", "done": 0, "total": 0, "chunks": 0}
            # Never indexed, no run under way and its first run not done: that run is still to start (the worker
            # waits for warm start and for questions in flight first). It said "ready" with 0 files in that
            # window (session 25); a first run that failed is "degraded" with its problems, not queued for ever.
            holder = h.get("writer")
            state = (f"indexing (by another process, pid {holder['pid']})" if not running and holder else
                     "queued" if not running and pending is not None and pending["phase"] == "queued"
                     else
                     f"indexing ({running['phase']}: {running['done']}/{running['total']})" if running else
                     "ready" if h["ok"] and not (h.get("staleness") or {}).get("stale") else
                     "stale" if (h.get("staleness") or {}).get("stale") else "degraded")
            out.append({"root": str(root), "state": state, "indexing": dict(running) if running else None,
                        "counts": h["counts"], "branches": h["branches"], "staleness": h.get("staleness"),
                        "problems": h["problems"], "indexAgeSeconds": h.get("indexAgeSeconds"),
                        "changes": self._changes(root)})
        # pid: which process answers (a `delphi mcp` forwarding to a daemon reports the daemon's).
        return {"workspaces": out, "settingsErrors": self.option_errors, "pid": os.getpid()}

    def _rel(self, eng: Engine, path: str) -> str:
        """``path`` relative to ``eng``'s folder when it lies there (by its real path or the one the editor
        named it by), else as given (the engine says what is wrong with it)."""
        return next((rel for e, rel in self.locate_all(path) if e is eng), path)

    def _with_uris(self, eng: Engine, rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
        root = self.shown_root(eng)
        for r in rows:
            r["uri"] = (root / r["path"]).as_uri()
        return rows

    # ------------------------------------------------------------------ editor views of one file
    def document_symbols(self, path_or_uri: str) -> list[dict[str, Any]]:
        # On the buffer's lines as shown, as lenses and hover: an outline asked right after an edit was one edit
        # behind, every line off by the edit's shift (a newcomer typing in a large file, session 42).
        found = self._editor_file(path_or_uri)
        if found is None:
            return []
        eng, rel = found
        defs = self._editor_read(eng, lambda: eng.definitions(rel), [])
        return [{"name": s.name, "kind": s.kind, "path": s.path, "line": s.line, "endLine": s.end_line,
                 "container": s.container, "uri": (self.shown_root(eng) / rel).as_uri()} for s in defs]

    def _editor_file(self, path_or_uri: str) -> tuple[Engine, str] | None:
        """The folder and path of a file a lens or hover asks about, once its folder's first small index and the
        buffer's pending edit are in: lenses on the first file opened come after a small first index, and on the
        buffer's lines as shown (a lens of the pre-edit index sat on blank lines; session 38)."""
        found = self.locate(path_or_uri)
        if found is not None:
            self._await_first(found[0])
            self._flush_edits(found[0])
        return found

    def related_tests_by_symbol(self, path_or_uri: str) -> list[tuple[dict[str, Any], list[dict[str, Any]]]]:
        """For a source file: each definition with its related tests (definitions without any are left out)."""
        found = self._editor_file(path_or_uri)
        if found is None:
            return []
        eng, rel = found
        if self._editor_read(eng, lambda: eng.kind_of(rel), "test") == "test":
            return []
        # The same file at the same index state gives the same lenses: an editor asks again at each refresh and
        # leaving insert mode, and ripgrep's 8,161-line defs.rs took 1.3-1.5 s each time (session 38).
        # Keyed by the in-memory view too: lenses are made from it, and it can lag the manifest (briefly after a write,
        # or while another process writes), so a version alone kept lenses made from an older view (review).
        key = (eng.root, rel)
        with self._lens_lock:
            building = self._lens_building.setdefault(key, threading.Lock())
        # One request of a file's lenses makes them at a time; the others wait and take them: an editor sends several
        # while the user types, and each made all of them alone (4,000 definitions: 2.7 s each, six at once filled
        # the server's threads and hover and questions queued behind; a newcomer typing in a large file, session 42).
        while not building.acquire(timeout=0.1):
            cancel.check()
        try:
            return self._editor_read(eng, lambda: self._lenses_made(eng, rel, key), [])
        finally:
            building.release()

    def _lenses_made(self, eng: Engine, rel: str, key: tuple[Path, str]) -> list[tuple[dict[str, Any], list[dict[str, Any]]]]:
        version, view = eng.content_version(), eng.view()
        with self._lens_lock:
            kept = self._lens_cache.get(key)
            if kept is not None and kept[0] == version and kept[1]() is view:
                self._lens_cache.move_to_end(key)
                return kept[2]
        out = []
        defs = [s for s in eng.definitions(rel) if s.kind in DEFINITION_KINDS]
        functions = [(s.line, s.end_line) for s in defs if s.kind in ("function", "method")]
        prev: tuple[str, str] | None = None
        for s in defs:
            cancel.check()  # a dropped request stops here, not after thousands of definitions (and so does shutdown)
            # One lens for a run of definitions of one name in one container: `@overload` stubs and their
            # implementation had three identical lenses; none on a closure inside a function (flask's `wrapper`
            # twice in app.py; session 38). Apart, two of a name keep theirs (Go's `A.String` and `B.String`).
            if any(a < s.line and s.end_line <= b for a, b in functions):
                continue
            if (s.name, s.container) == prev and not rel.endswith(_NO_OVERLOADS):
                continue
            prev = (s.name, s.container)
            # Two more than shown: one to know there are more ("20+"), one for the row a test may be of itself.
            tests = self._with_uris(eng, eng.related_tests(rel, symbol=s.name, limit=LENS_TESTS + 2))
            # A Rust `#[test] fn` named like a method of the file found itself: no lens that opens where it is.
            tests = [t for t in tests if not (t["path"] == rel and t.get("line") == s.line)]
            if tests:
                out.append(({"name": s.name, "line": s.line}, tests))
        with self._lens_lock:
            self._lens_cache[key] = (version, weakref.ref(view), out)
            while len(self._lens_cache) > LENS_FILES_KEPT:
                self._lens_cache.popitem(last=False)
        return out

    def related_code_of(self, path_or_uri: str) -> list[dict[str, Any]] | None:
        """For a test file: the source files it exercises. None for any other file."""
        found = self._editor_file(path_or_uri)
        if found is None:
            return None
        eng, rel = found
        if self._editor_read(eng, lambda: eng.kind_of(rel), None) != "test":
            return None
        # One more than shown: the lens says "10+".
        return self._editor_read(eng, lambda: self._with_uris(eng, eng.related_code(rel, limit=LENS_CODE + 1)), None)

    def related_tests_at(self, path_or_uri: str, line: int) -> tuple[str, list[dict[str, Any]]] | None:
        found = self._editor_file(path_or_uri)
        if found is None:
            return None
        eng, rel = found
        syms = [s for s in self._editor_read(eng, lambda: eng.definitions(rel), []) if s.line <= line <= s.end_line]
        if not syms:
            return None
        name = max(syms, key=lambda s: s.line).name  # the innermost definition around the line
        rows = self._editor_read(eng, lambda: eng.related_tests(rel, symbol=name, limit=10), None)
        return None if rows is None else (name, self._with_uris(eng, rows))

    # ------------------------------------------------------------------ problems
    def publish_problems(self, eng: Engine) -> None:
        shown = self.shown_root(eng)
        problems = self.problems_of(eng)
        if shown != eng.root:
            problems = [replace(pr, path=shown / pr.path.relative_to(eng.root))
                        if pr.path is not None and pr.path.is_relative_to(eng.root) else pr for pr in problems]
        self.events.problems(shown, problems)

    def problems_of(self, eng: Engine) -> list[Problem]:
        h = eng.health(check_staleness=False, full=False)
        out: list[Problem] = []
        for path, reason in sorted(h["skipped"].items()):
            if len(out) >= MAX_FILE_PROBLEMS:
                break
            if reason.startswith(QUIET_SKIPS) or "binary" in reason:
                continue
            if reason == UNDECODABLE_NAME:  # `path` is a printable spelling (`bad\xffname.py`), not the file's name:
                # a URI made of it named another file, or none (a security audit, session 26)
                out.append(Problem("info", f"Delphi did not index {path}: {reason}", "skipped", None))
                continue
            out.append(Problem("info", f"Delphi did not index this file: {reason}", "skipped", eng.root / path))
        for path in h["decodedWithReplacement"]:
            out.append(Problem("info", "Delphi indexed this file with replacement characters: it is not valid UTF-8",
                               "replaced", eng.root / path))
        for path, what in h["redactedSecrets"].items():
            # The developer learns the file holds a credential (it may be committed); agents never see it.
            out.append(Problem("info", f"Delphi redacted secrets in this file before indexing ({what}): they are "
                               "not stored and not shown in answers", "redacted", eng.root / path))
        for path, reason in sorted(self.buffers_dropped.get(eng.root, {}).items()):
            # A buffer grown past max_file_bytes: answers still read the file as saved, which no longer matches
            # what the editor shows; it said nothing (an editor newcomer, session 25). An ignored or secret
            # buffer stays quiet, as its file does.
            if reason.startswith("too large") and (eng.root / path) in self.buffers:
                out.append(Problem("info", f"Delphi did not index this unsaved buffer: {reason}; answers read the "
                                           "file as last saved", "buffer_skipped", eng.root / path))
        for p in h["problems"]:
            if p["code"] != "not_indexed":
                out.append(Problem(p["severity"], p["message"], p["code"], None))
        return out


def _normpath(p: Path) -> str:
    return os.path.normpath(str(p))
