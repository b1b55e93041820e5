"""The engine: the one public API behind the CLI, the language server and the benchmarks.

``Engine(root).index()``, ``.context(query, ...)``, ``.symbols(query)``,
``.related_tests(path)``, ``.health()``. It knows nothing of LSP.
"""

from __future__ import annotations

import contextlib
import dataclasses
import errno
import gc
import json
import logging
import os
import re
import shutil
import sqlite3
import stat
import subprocess
import threading
import time
import unicodedata
import uuid
from collections.abc import Callable, Collection, Iterator
from pathlib import Path
from typing import Any

from . import health as health_mod
from .api import ContextAnswer, ContextRequest, RequestError, check_limit, check_path, uri_to_path
from .core import Need, State, SymbolRecord, state_of
from .core.formats import INDEX_FORMAT
from .core.git import ask_git, is_slow, slow_status
from .core.tokens import FULL_WIDTH
from .indexing.cochange import COCHANGE_VERSION, change_history, git_head
from .indexing.graph import FileGraph
from .indexing.pipeline import (
    Indexer,
    IndexReport,
    Progress,
    embed_text,
    folder_readable,
    unwalkable,
)
from .languages import MANIFEST_KINDS
from .models.cross_encoder import SHIPPED_CROSS_ENCODER, CrossEncoder
from .models.embedders import Embedder, ModelIdentity, load_embedder
from .models.ltr import SHIPPED_LTR, SHIPPED_LTR_HISTORY, LearnedRanker
from .retrieval import related
from .retrieval.branches.registry import BranchSpec, registered
from .retrieval.context import IndexView, SearchContext
from .retrieval.features import feature_names
from .retrieval.query import QueryInfo, analyse, question_read, question_read_noted
from .retrieval.retriever import MIN_HISTORY_COMMITS, IndexState, Retrieval, Retriever
from .settings import RERANKERS, Settings
from .stores.buffer_claims import BufferClaims
from .stores.exact import ExactVectors, exact_bound
from .stores.exact_file import ExactFile
from .stores.lexical import FOLDERS as LEXICAL_FOLDERS
from .stores.lexical import open_lexical
from .stores.meta import ChunkRow, DamagedManifest, MetaStore, is_corruption
from .stores.vectors import LazyVectorStore, VectorStore
from .stores.view_cache import ViewCache, code_digest
from .stores.writer_lock import Holder, IndexBusy, WriterLock  # noqa: F401  (IndexBusy: for callers of index())
from .traces import write_trace
from .workspace import roots
from .workspace.kinds import file_kind
from .workspace.scan import repository_above, utf8_name
from .workspace.scan import skip_reason as scan_skip_reason
from .workspace.tracked import tracked_but_ignored, untracked

# What a store's repair says when `delphi index --rebuild` asked for it (the CLI prints those as "rebuilt:").
REBUILD_REQUESTED = " (rebuild requested)"
# An estimate of a phase's time left is given once it has run this long: the first small batches' pace said little.
ETA_AFTER_S = 1.0


class EngineClosed(RuntimeError):
    """A closed Engine was asked something."""


def no_history(root: Path) -> str:
    """The history branches' status (co-change, commits) where git has no history to give: in git's own words
    when it is neither "no commits yet" nor "not a repository" (no `git` on PATH and a `.git` file naming a
    folder that is not there both read "no commits yet"; a newcomer, session 29)."""
    try:
        repo = (root / ".git").exists() or repository_above(root) is not None
    except OSError as e:
        return f"off: the workspace folder cannot be read ({e.strerror}; no history to read)"
    if not repo:
        return "off: not a git repository (no history to read)"
    if shutil.which("git") is None:
        return "off: git is not installed (no history to read)"
    res = ask_git(root, "rev-parse", "--verify", "HEAD")
    if res is None:
        return slow_status() if is_slow(root) else "off: git could not be started (no history to read)"
    err = (res.stderr.decode("utf-8", "replace").strip().splitlines() or [""])[0]
    low = err.lower()
    if res.returncode == 0 or "needed a single revision" in low or "unknown revision" in low or not err:
        return "off: the git repository has no commits yet (no history to read)"
    return f"off: git cannot read this repository: {err[:200]} (no history to read)"


def _file_identity(path: Path) -> tuple[int, int] | None:
    """(device, inode); None when the file is not there. Any other failure to look (a folder above it that cannot
    be entered, EIO) raises: that is no evidence the file was replaced (a review, session 30)."""
    try:
        st = os.stat(path)
    except (FileNotFoundError, NotADirectoryError):  # not there, or its folder is no longer a folder
        return None
    return st.st_dev, st.st_ino


def manifest_fails_check(path: Path) -> bool:
    """Whether SQLite's own check finds the manifest at ``path`` damaged (a read-only connection beside any open)."""
    try:
        con = sqlite3.connect(f"file:{path}?mode=ro", uri=True, timeout=10)
        try:
            row = con.execute("PRAGMA quick_check(1)").fetchone()
        finally:
            con.close()
    except sqlite3.DatabaseError as e:
        return is_corruption(e)
    return not row or row[0] != "ok"


def move_manifest_aside(path: Path) -> Path:
    """Move a damaged manifest (and its write-ahead files) aside as ``meta.sqlite.corrupt-<time>``; the next open
    starts a new one and the workspace is indexed again (the embedding cache goes with it)."""
    aside = path.with_name(f"meta.sqlite.corrupt-{time.strftime('%Y%m%d-%H%M%S')}")
    n = 1
    while any(aside.with_name(aside.name + suffix).exists() for suffix in ("", "-wal", "-shm")):
        # Two moves in one second (a server and a command that met the same damage) overwrote the first, the only
        # copy of the embedding cache (a review, session 47).
        n += 1
        aside = path.with_name(f"meta.sqlite.corrupt-{time.strftime('%Y%m%d-%H%M%S')}-{n}")
    for suffix in ("", "-wal", "-shm"):
        src = path.with_name(path.name + suffix)
        if src.exists():
            src.replace(aside.with_name(aside.name + suffix))
    return aside


def replace_damaged_manifest(index_dir: Path, error: BaseException) -> tuple[Path, MetaStore]:
    """Move the damaged manifest aside, empty the stores derived from it (Whoosh, tantivy and Chroma describe the
    lost manifest's chunks: rebuilt by the next index) and start a new manifest that records the recovery, which
    health says. Called under the writer lock."""
    aside = move_manifest_aside(index_dir / "meta.sqlite")
    for folder in LEXICAL_FOLDERS.values():
        shutil.rmtree(index_dir / folder, ignore_errors=True)
    shutil.rmtree(index_dir / "chroma", ignore_errors=True)
    meta = MetaStore(index_dir / "meta.sqlite")
    meta.set_state("recovered", {"at": time.time(), "movedTo": str(aside), "error": f"{type(error).__name__}: {error}"})
    return aside, meta


def recover_damaged_manifest(index_dir: Path, error: BaseException,
                             opened: tuple[int, int] | None = None, confirmed: bool = False) -> Path | None:
    """After a read or write found the manifest corrupt where the open's cheap checks do not look (a page inside
    the file: `delphi context` died with "database disk image is malformed", and `delphi index --rebuild` too, for
    good; a hostile-input audit, session 46): when SQLite's own check confirms the damage, the manifest is moved
    aside and a new one started, as an open that fails does. Returns where it went; None when the check does not
    confirm it (the error is then not the manifest's to mend), and when the file is no longer the one that was
    ``opened`` (its identity: another process moved it aside and started a new one meanwhile). ``confirmed``: the
    caller's own check of that same file found the damage (a page check of a 2.4 GB manifest takes 13 s: not twice).
    The engine that hit it must be closed first."""
    path = index_dir / "meta.sqlite"
    lock = WriterLock(index_dir)
    lock.acquire(wait=True)  # another process may be moving it aside, or writing, right now
    try:
        if opened is not None and _file_identity(path) != opened:
            return None
        if not path.is_file() or not ((confirmed and opened is not None) or manifest_fails_check(path)):
            return None
        aside, meta = replace_damaged_manifest(index_dir, error)
        meta.close()
        return aside
    finally:
        lock.release()


# An empty manifest younger than this may be one another process is creating (_truncated): not damage.
EMPTY_MANIFEST_AGE_S = 60.0

# The largest manifest `delphi health` checks page by page (PRAGMA quick_check reads ~180 MB/s here).
PAGE_CHECK_MAX_BYTES = 2**30

# Lexical segments a small update may leave unmerged before it merges them itself (issue 18): one
# segment per save until maintain() or a full run merges them.
MAX_SEGMENTS = 48
# The most documents one tier's merge may take in maintain() (about 0.8 ms of CPU each on spring-boot):
# a quiet spell merges the small segments of saves; larger tiers wait for a full run (`delphi index`).
MAINTAIN_MERGE_DOCS = 4096
# The most named paths whose rows an update patches into the in-memory views (more: they are rebuilt).
PATCH_MAX_PATHS = 256
# A failed search walks the lexical store's terms (damage inside a dictionary) at most this often.
DEEP_CHECK_S = 600.0
# Cached vectors no indexed chunk uses (edits since made, another branch, another model) kept for a revert or a
# switch back: as many as the index has chunks, and at least this many (about 1 KB each at 256 dimensions).
EMBED_CACHE_SPARE = 20_000
# A view that took this long to build is saved for the next process (stores/view_cache.py); a small
# workspace's builds in well under it (black: 0.05 s) and writes nothing.
VIEW_SAVE_MIN_S = 0.5
# ... which a build reaches from about this many files: it grows with the files (black's 440: 0.05 s; the
# 100,000-file workspace: 8.2 s, 0.08 ms a file, bench/RESULTS.md session 8), so 5,000 files take ~0.4 s.
VIEW_PREBUILD_FILES = 5000
# How many related tests are found for a file before they are ordered (Engine.related_tests) and cut to the limit.
RELATED_POOL = 50


def _ignore_own_files(index_dir: Path, root: Path) -> None:
    """An index folder inside the workspace (``--index-dir ws/.delphi``) must not index itself: tantivy's
    ``meta.json`` is text and changes at every commit, so each pass re-indexed it for ever. A
    ``.gitignore`` of ``*`` in the folder keeps it out of the walk (and of git), as pytest's and ruff's
    caches do. (The workspace root or a folder above it is no index folder: check_index_folder refused it.)"""
    marker = index_dir.resolve() / ".gitignore"
    if not marker.exists():
        try:
            marker.write_text(MARKER)
        except OSError:
            pass  # a read-only index (a shared snapshot) cannot hold it; the walk then skips binary files only


@contextlib.contextmanager
def _collector_paused() -> Iterator[None]:
    """Python's cycle collector off while millions of objects are made at once (a view: tuples, lists,
    dicts and strings, no cycles): it ran again and again over them, 3.9 -> 1.1 s to load the 100k
    workspace's view and 11.4 -> 8.2 s to build it (issue 18)."""
    was = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was:
            gc.enable()


def _checked_ranker(folder: Path, names: list[str]) -> LearnedRanker:
    """A learned ranker from ``folder`` whose trained columns the engine still computes; raises if not."""
    ltr = LearnedRanker(folder)
    ltr.columns(names)  # a trained column the engine no longer computes refuses here
    return ltr


def history_status(stored: dict[str, Any]) -> str:
    """The history branches' status line from what the last history read stored."""
    return (f"ready: {stored['commits']} commits up to {stored['head'][:12]}, {stored['pairs']} file pairs, "
            f"{stored.get('messages', 0)} messages")


log = logging.getLogger(__name__)

# The branches that find a file by the question's own words, names or paths (the rest: by meaning, by the
# anchors, or from what those found): none of them with a hit makes an answer "only similar in meaning".
WORD_BRANCHES = ("bm25", "symbol", "path", "trigram", "filedoc", "commits")


class IndexFolderUnusable(OSError):
    """The index folder cannot be made or written; the message says which and what to do."""


# What an index folder holds from its first open on (the locks, the manifest, the stores): a folder holding other
# things and none of these is someone else's.
INDEX_ENTRIES = frozenset({"meta.sqlite", "writer.lock", "open.lock", "tantivy", "whoosh", "chroma"})
MARKER = "# Delphi's index: nothing here is source\n*\n"  # the .gitignore an index folder gets (_ignore_own_files)


def check_index_folder(index_dir: Path, root: Path) -> None:
    """Refuse an index folder that would index itself or take over another folder (a newcomer, session 29):
    the workspace itself or a folder above it (the index indexed its own files at every run and wrote into the
    workspace), or a folder that already holds other things (another project, the home folder: Delphi filled it
    and its `.gitignore` of `*` hid that project's files from git)."""
    folder = index_dir.expanduser().resolve()
    if folder == root or folder in root.parents:
        raise IndexFolderUnusable(f"the index folder {index_dir} is the workspace {root} or a folder above it (the "
                                  f"index would index itself): give a folder outside it, or a subfolder such as "
                                  f"{root / '.delphi'}")
    try:
        names = set(os.listdir(folder))
    except OSError:
        return  # not there yet (made next), or not readable: the open says what is wrong
    if not names or names & INDEX_ENTRIES:
        return
    try:
        # Empty: another process's first open is writing it this instant (review, session 29).
        ours = names == {".gitignore"} and (folder / ".gitignore").read_text() in ("", MARKER)
    except (OSError, UnicodeDecodeError):
        ours = False
    if not ours:
        some = ", ".join(sorted(names)[:3]) + (", ..." if len(names) > 3 else "")
        raise IndexFolderUnusable(f"the index folder {index_dir} already holds other files ({some}) and is not a "
                                  "Delphi index: give an empty or new folder")


def take_over_index(index_dir: str | Path, root: str | Path) -> None:
    """Make a copied index folder the index of ``root`` (which the copy's manifest does not name): for a caller
    that copied another workspace's index on purpose to start from it (the benchmark seeding one commit's index
    from the previous commit's). The next open then brings it up to date incrementally."""
    meta = MetaStore(Path(index_dir) / "meta.sqlite")
    try:
        meta.set_state("root", str(Path(root).resolve()))
    finally:
        meta.close()


def stored_root(index_dir: Path) -> str | None:
    """The workspace an existing index folder was built for (read only; None when there is no manifest)."""
    path = index_dir / "meta.sqlite"
    if not path.is_file():
        return None
    try:
        # immutable: no -shm or -wal file made beside it (a refused load leaves the folder as it was); the root is
        # written at the first open and read here only to compare.
        db = sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro&immutable=1", uri=True)
        try:
            row = db.execute("SELECT value FROM state WHERE key='root'").fetchone()
        finally:
            db.close()
        value = json.loads(row[0]) if row else None
    except (sqlite3.Error, ValueError):
        return None  # a damaged manifest: the open says so
    return value if isinstance(value, str) else None


def _writable(folder: Path) -> None:
    """Raise the OSError that writing in ``folder`` would (a read-only mount, a folder of another user)."""
    if os.statvfs(folder).f_flag & os.ST_RDONLY:
        raise OSError(errno.EROFS, os.strerror(errno.EROFS), str(folder))
    if not os.access(folder, os.W_OK | os.X_OK):
        raise PermissionError(errno.EACCES, os.strerror(errno.EACCES), str(folder))


class Engine:
    def __init__(self, root: str | Path, settings: Settings | None = None, **overrides: Any) -> None:
        self.root = Path(root).resolve()
        if not self.root.is_dir():
            what = "is a file, not a folder" if self.root.exists() else "not found"
            # A deleted checkout's index stays in the cache, and nothing said so (a newcomer's first use, session 44).
            left = None if settings is not None or overrides.get("index_dir") else \
                Settings().index_path(self.root)
            hint = (f"; its index is still at {left} (`delphi indexes --prune` removes the indexes of workspaces "
                    "that are gone)") if left is not None and (left / "meta.sqlite").exists() else ""
            raise FileNotFoundError(f"workspace folder {what}: {root}{hint}")
        roots.check(self.root)  # not a home folder or `/` (workspace/roots.py)
        self.settings = settings or Settings.load(self.root, overrides)
        self.index_dir = self.settings.index_path(self.root)
        check_index_folder(self.index_dir, self.root)
        try:
            # 0700: the index holds the workspace's text; other local users need not read it (a new folder only).
            self.index_dir.mkdir(parents=True, exist_ok=True, mode=0o700)
            _writable(self.index_dir)
        except OSError as e:
            if e.errno not in (errno.EROFS, errno.EACCES, errno.EPERM, errno.ENOTDIR, errno.EEXIST):
                raise
            # A read-only folder was a traceback from the first lock file (a newcomer, session 27).
            raise IndexFolderUnusable(f"the index folder {self.index_dir} cannot be written ({e.strerror}): give "
                                      "another with --index-dir or the index_dir setting") from None
        _ignore_own_files(self.index_dir, self.root)
        self._lock = threading.RLock()  # guards the derived in-memory view
        self._index_lock = threading.Lock()  # one indexing run at a time; queries do not wait for it
        self._stop = threading.Event()
        self._indexing: dict[str, Any] | None = None  # phase, done, total while a run is under way (`indexing`)
        # One writer per index folder across processes; readers never take it (module docstring).
        self.writer = WriterLock(self.index_dir)
        self.claims = BufferClaims(self.index_dir)  # this process's buffers in the index, for the others' passes
        self.problems: dict[str, str] = {}
        self.warnings: dict[str, str] = {}  # code -> message, shown in health as warnings (not errors)
        self._reset_vectors = False  # the manifest was replaced: vectors in a server collection are stale
        from .indexing.snapshot import hold_open, recover

        # A snapshot load killed mid-swap (kill -9) leaves the old stores aside: put them back first.
        self.recovered_snapshot = recover(self.index_dir)
        if self.settings.snapshot is not None and not (self.index_dir / "meta.sqlite").exists():
            self._start_from_snapshot(self.settings.snapshot)
        self._open_flock = hold_open(self.index_dir)  # a snapshot load refuses while this engine is open
        self.meta = self._open_meta()
        self._check_owner()
        fmt = self.meta.get_state("format")
        self.rebuilt_from_format: int | None = None
        if fmt not in (None, INDEX_FORMAT):
            # An index written by another Delphi version cannot be trusted field by field: start over.
            self.writer.acquire(wait=True)
            try:
                self.meta.close()
                for name in ("meta.sqlite", "meta.sqlite-wal", "meta.sqlite-shm"):
                    (self.index_dir / name).unlink(missing_ok=True)
                for folder in LEXICAL_FOLDERS.values():
                    shutil.rmtree(self.index_dir / folder, ignore_errors=True)
                shutil.rmtree(self.index_dir / "chroma", ignore_errors=True)
                self.meta = MetaStore(self.index_dir / "meta.sqlite")
            finally:
                self.writer.release()
            self.rebuilt_from_format = fmt
        self.meta.ensure_state("format", INDEX_FORMAT)
        self.meta.ensure_state("root", str(self.root))
        if "snapshot" in self.problems:  # kept: health in a later process names it too (the README's promise)
            self.meta.set_state("snapshot_refused", {"file": str(self.settings.snapshot),
                                                     "why": self.problems["snapshot"]})
        elif self.settings.snapshot is not None and isinstance(refused := self.meta.get_state("snapshot_refused"), dict) \
                and refused.get("file") == str(self.settings.snapshot) and isinstance(refused.get("why"), str):
            self.warnings["snapshot"] = refused["why"] + " (when this index was made)"
        self._meta_identity = _file_identity(self.index_dir / "meta.sqlite")
        self.manifest_damaged = False  # a read or write under a running server found the manifest corrupt
        self.meta.ensure_identity()
        self._generation = self.meta.get_state("generation", 0)
        self.lexical = open_lexical(self.index_dir, self.settings.lexical_store, self.settings.bm25_scoring)
        # The store the index was built with, when the setting names another (rebuilt from the manifest).
        self.lexical_switched_from = self._lexical_identity()
        self.embedder: Embedder | None = None
        # Chroma is opened on first need (the `vectors` property): a one-shot query answered by the
        # exact search never imports chromadb (0.65-0.8 s CPU of a 1.7 s `delphi context`, issue 13).
        self._vectors: VectorStore | None = None
        self._vectors_opened = False
        # Its own lock: opening Chroma imports chromadb (1.3 s of CPU), and under the view's lock a server's
        # first question waited for the health report's open while the exact search it needed was loaded
        # (a `delphi mcp` first answer 1.37 s, the question's own work 15 ms; session 24).
        # Taken after _lock where both are held (close, the catch-up's reopen), never before it.
        self._vectors_lock = threading.RLock()
        self._vectors_closed = False  # close() ran: an open that was waiting must not leave a client behind
        self._exact: ExactVectors | None = None  # the exact search's matrix, per index generation
        self._cache_probed = False  # the embedding cache probed by a full run of this process (_check_embed_cache)
        self._exact_key: tuple[Any, ...] | None = None
        self._probe: dict[str, Any] | None = None
        if self.settings.vectors:
            try:
                self.embedder = load_embedder(self.settings.embedder)
            except Exception as e:
                self.problems["embedder"] = f"embedder {self.settings.embedder!r} failed to load: {e}"
        self.check_stores()
        self.ltr: LearnedRanker | None = None
        self.ltr_history: LearnedRanker | None = None  # the shipped ranker's twin for workspaces with history
        self.reranker: CrossEncoder | None = None
        self.reranker_status = self._load_rerankers()
        # The registry's branches, in its order: the list that runs is the list that exists.
        self.retriever = Retriever(self.settings, [(spec, spec.make()) for spec in registered()],
                                   self.ltr, self.reranker, on_failure=self._branch_failed,
                                   ltr_history=self.ltr_history)
        self._view: IndexView | None = None
        # Building or loading the view takes its own lock, not ``_lock``: a server warming up at start
        # (warm()) loads the view while the first question opens Chroma, which takes ``_lock``.
        self._view_lock = threading.Lock()
        self._view_gen = 0  # moved by every drop or patch: a build that raced one is not kept
        self._view_key: tuple[Any, ...] | None = None  # the manifest state the view in memory is for
        self._view_saved_key: tuple[Any, ...] | None = None  # the state of the view saved on disk
        self._view_build_s = 0.0  # the last full build's time: what the next process saves by loading it
        self._view_cache = ViewCache(self.index_dir)
        # The exact search's matrix, saved keyed and signed too (mapped, not unpickled: stores/exact_file.py):
        # loading it from the manifest took 2.8-7.3 s on the 100k workspace (227 MiB).
        self._exact_cache = ExactFile(self.index_dir)
        self._exact_unsaved: tuple[tuple[Any, ...], ExactVectors] | None = None
        self._exact_slow = False  # the matrix in memory took long enough to load that it is kept saved
        self._repo_lead: tuple[Path, str] | tuple[()] | None = None  # (repository top, this folder's path in it)
        self._deep_checked = -DEEP_CHECK_S  # when a failed search last walked the lexical store's terms
        self.view_source = ""  # how the view in memory came: "built in N s" / "loaded ..." (health)
        stored_cc = self.meta.get_state("cochange")
        # A history read by an older version (no messages) or emptied outside git is not "ready".
        failed = self.meta.get_state("cochange_error")  # the last run's `git log` failed (a damaged object store)
        self.cochange_status = history_status(stored_cc) + " (as of the last index)" \
            if stored_cc and stored_cc.get("head") and stored_cc.get("version") == COCHANGE_VERSION else \
            no_history(self.root) if git_head(self.root) is None else \
            f"error: git log failed: {failed} (as of the last index)" if isinstance(failed, str) else \
            "not computed yet (runs with indexing)"

    def _load_rerankers(self) -> str:
        """Fill the reranker slot from ``settings.reranker``; the returned status is what health shows."""
        spec = self.settings.reranker
        if spec == "off":
            return "off (settings: reranker = off)"
        parts: list[str] = []
        custom_ltr = spec not in RERANKERS and (Path(spec).expanduser() / "ltr.json").is_file()
        if spec in ("ltr", "ltr+cross-encoder") or custom_ltr:
            names = feature_names()
            try:
                ltr = _checked_ranker(Path(spec).expanduser() if custom_ltr else SHIPPED_LTR, names)
                self.ltr = ltr
                parts.append(f"learned ranker {ltr.identity.name} (warm, window {ltr.window})")
                unused = ltr.unused_columns(names)
                if unused:  # a branch registered after training: its columns are ignored, and we say so
                    # "it ignores the columns it was not trained on: rr_commits, …" meant nothing to a newcomer
                    # (session 44): what it means for an answer, the names kept for those who know them.
                    parts.append(f"{len(unused)} signals newer than it do not weigh in its order "
                                 f"({', '.join(unused)}); the files they find are still listed")
            except Exception as e:
                self.problems["reranker"] = f"learned ranker failed to load: {e}"
                parts.append(f"error: learned ranker failed to load: {e}")
            if not custom_ltr and self.ltr is not None:  # a folder the user names is used everywhere
                parts.append(self._load_history_ranker(names, self.ltr))
        if spec != "ltr" and not custom_ltr:
            folder = SHIPPED_CROSS_ENCODER if spec in ("cross-encoder", "ltr+cross-encoder") else Path(spec).expanduser()
            try:
                self.reranker = CrossEncoder(folder)
                self.reranker.warm()
                parts.append(f"cross-encoder {self.reranker.identity.name} (warm, window {self.settings.reranker_window})")
            except Exception as e:
                self.problems["reranker_ce"] = f"cross-encoder at {str(folder)!r} failed to load: {e}"
                parts.append(f"error: cross-encoder at {str(folder)!r} failed to load: {e}")
        if any(p.startswith("error") for p in parts):
            return "error: " + "; ".join(p.removeprefix("error: ") for p in parts)
        return "ready: " + "; ".join(parts)

    def _load_history_ranker(self, names: list[str], plain: LearnedRanker) -> str:
        """The shipped ranker for workspaces whose history co-change reads; its status part for health.
        If it cannot load, ``plain`` answers there too, and health says so as an error."""
        try:
            ltr = _checked_ranker(SHIPPED_LTR_HISTORY, names)
            self.ltr_history = ltr
            return (f"where git history is read (at least {MIN_HISTORY_COMMITS} commits): {ltr.identity.name} "
                    f"(warm, window {ltr.window})")
        except Exception as e:
            self.problems["reranker_history"] = f"history ranker failed to load: {e}"
            return (f"error: history ranker failed to load: {e}; "
                    f"{plain.identity.name} answers with history too")

    @property
    def embeds(self) -> bool:
        """Whether its index runs embed chunks (vectors on, a model loaded): a run's progress has a vector phase."""
        return bool(self.settings.vectors and self.embedder is not None)

    @property
    def branch_errors(self) -> dict[str, str]:
        """Each branch's last failure, until it answers again (health lists them)."""
        return self.retriever.errors

    # ------------------------------------------------------------------ the vector stores
    @property
    def vectors(self) -> VectorStore | None:
        """Chroma, opened here on first use: by indexing that writes or deletes vectors, by index()'s
        and health()'s damage checks, and by a query when HNSW answers (above the exact bound or
        ``vector_search = "hnsw"``). A failure to open goes into ``problems`` (health shows it)."""
        if not self._vectors_opened and self.settings.vectors:
            with self._vectors_lock:
                if not self._vectors_opened and not self._vectors_closed:
                    try:
                        self._vectors = VectorStore(self.index_dir / "chroma", self._collection_name(),
                                                    self.settings.chroma_url)
                    except Exception as e:
                        self.problems["vector_store"] = (f"Chroma unavailable ({self.settings.chroma_url or 'embedded'}): "
                                                         f"{e}")
                    finally:
                        # Set once the store is there: another thread meanwhile waits on the lock above
                        # instead of reading None (an HNSW query with no searcher, a run skipping its vectors).
                        self._vectors_opened = True
        return self._vectors

    @vectors.setter
    def vectors(self, store: VectorStore | None) -> None:
        self._vectors = store
        self._vectors_opened = True

    def _chroma_wanted(self) -> bool:
        """Whether Chroma must hold the vectors now: its HNSW answers (above the exact bound, counted in
        chunks: every chunk gets a vector), or it is a server's collection, which others read. Else nothing
        reads it and its writes are owed (``chroma_pending``), made once it must answer: Chroma's adds were
        11.1 s of spring-boot's 69.7 s cold index, where the exact search answers every query (issue 18)."""
        if self.settings.chroma_url:
            return True
        c = self.meta.counts()
        return self._hnsw_answers(max(c["chunks"], c["vectors"]))

    def _hnsw_answers(self, n_vectors: int) -> bool:
        """Whether Chroma's HNSW answers the vector branch (else the exact search over the cache)."""
        mode = self.settings.vector_search
        if mode != "auto":
            return mode == "hnsw"
        dim = self.embedder.identity.dim if self.embedder is not None else 256
        return n_vectors > exact_bound(dim)

    def _exact_vectors(self, n_vectors: int) -> ExactVectors | None:
        """The exact search's matrix, loaded once per index state: reloaded when a process wrote files
        (the manifest's content version), this one indexed (generation; invalidate() drops it) or the number
        of embedded chunks moved (vectors added while a run is under way). Not on any commit (SQLite's
        data_version): the trigram build beside the vector pass commits every batch, and each question
        meanwhile read the whole matrix again (a review, session 31)."""
        if self.embedder is None:
            return None
        ident = self.embedder.identity
        key = (self.meta.content_version(), self._generation, n_vectors, ident.weights_sha256)
        with self._lock:
            if self._exact is None or self._exact_key != key:
                self._exact = self._saved_or_loaded_exact(n_vectors)
                self._exact_key = key
            return self._exact

    def _pay_chroma(self, indexer: Indexer) -> None:
        """Make the Chroma writes owed (from the embedding cache), if any and Chroma opens."""
        if self.meta.chroma_behind() and self.vectors is not None:
            indexer.flush_chroma(self.vectors)

    def _exact_cache_key(self, n_vectors: int) -> tuple[Any, ...]:
        # The manifest's content version moves with every write of files; embedding moves the count; a
        # new model its sha.
        ident = self.embedder.identity  # type: ignore[union-attr]
        return (*self.meta.content_version(), n_vectors, ident.weights_sha256, code_digest())

    def _saved_or_loaded_exact(self, n_vectors: int) -> ExactVectors:
        """The matrix saved for this very state, else read from the manifest (and left for save_for_next
        when that was slow: a server's idle moment or shutdown, the end of a one-shot command)."""
        ident = self.embedder.identity  # type: ignore[union-attr]
        key = self._exact_cache_key(n_vectors)
        t0 = time.perf_counter()
        with _collector_paused():
            saved = self._exact_cache.load(key)
        if isinstance(saved, ExactVectors):
            self._exact_unsaved, self._exact_slow = None, True
            return saved
        exact = ExactVectors.load(self.meta, ident.weights_sha256, ident.dim)
        self._exact_unsaved = None
        self._exact_slow = time.perf_counter() - t0 >= VIEW_SAVE_MIN_S
        if self._exact_slow:  # saved by save_for_next, outside the lock a query holds here (review 9)
            self._exact_unsaved = (key, exact)
        return exact

    def _save_exact(self) -> bool:
        """Save the exact matrix left unsaved, when it is still what answers and no run writes."""
        pending = self._exact_unsaved
        if pending is None or self._exact is not pending[1] or self._writing() or self.embedder is None:
            return False
        key, exact = pending
        if key != self._exact_cache_key(self.meta.counts()["vectors"]) or not self._exact_cache.save(key, exact):
            return False
        if self._exact_unsaved is pending:  # not a newer patch that came meanwhile
            self._exact_unsaved = None
        return True

    def chroma_answers(self, counts: dict[str, int] | None = None) -> bool:
        """Whether Chroma answers the vector branch now (else the exact search, or no vectors at all)."""
        return self.settings.vectors and self._hnsw_answers((counts or self.meta.counts())["vectors"])

    def vector_search(self, counts: dict[str, int] | None = None) -> str:
        """Which search answers the vector branch, for health."""
        if not self.settings.vectors:
            return "off"
        n = (counts or self.meta.counts())["vectors"]
        if self._hnsw_answers(n):
            why = "vector_search = hnsw" if self.settings.vector_search == "hnsw" else \
                f"{n} vectors, above the exact bound of {exact_bound(self.embedder.identity.dim if self.embedder else 256)}"
            return f"Chroma HNSW ({why})"
        owed = self.meta.chroma_owed()
        behind = (f"; Chroma is not written while the exact search answers ({owed} vectors owed to it, written "
                  "once the index passes the exact bound)") if owed else ""
        return f"exact, {n} vectors (from the embedding cache in meta.sqlite){behind}"

    # ------------------------------------------------------------------ store damage and repair
    def _checked_meta(self, path: Path) -> MetaStore:
        meta = MetaStore(path)
        try:
            meta.check()
        except BaseException:
            meta.close()
            raise
        return meta

    def _check_owner(self) -> None:
        """One index folder, one workspace: with one `index_dir` for all, each workspace opened wiped and re-indexed
        the other's index without a word (a newcomer, session 29). The index of another workspace that is still
        there is refused. Taken over: one whose workspace is gone (moved, renamed), and a copy made with a copy
        of its workspace (most of the files it lists are here, the same size)."""
        stored = self.meta.get_state("root")
        if stored is None or stored == str(self.root) or not Path(stored).is_dir() or self._copy_of_this_workspace():
            return
        self.meta.close()
        self._open_flock.close()
        raise IndexFolderUnusable(f"the index folder {self.index_dir} holds the index of another workspace, {stored}: "
                                  "give each workspace an index folder of its own (or delete this one to start over)")

    def _copy_of_this_workspace(self, n: int = 64) -> bool:
        rows = [(p, size) for p, size in self.meta.sample_files(n) if size >= 0]
        if not rows:
            return True  # nothing indexed yet: nothing of another workspace's to lose
        same = 0
        for path, size in rows:
            try:
                same += os.lstat(self.root / path).st_size == size
            except (OSError, ValueError):
                pass
        return same >= 0.8 * len(rows)

    def _open_meta(self) -> MetaStore:
        """Open the manifest; a damaged one (truncated, overwritten) is moved aside and a new one started.

        The manifest is the only store that cannot be derived from the others; what it held is rebuilt
        from the workspace by the next index (its embedding cache is lost with it: health says so).
        """
        path = self.index_dir / "meta.sqlite"
        try:
            if self._truncated(path):
                raise DamagedManifest("the file is empty (0 bytes) while the stores made from it remain: it "
                                      "was cut short (a full disk, a crash, an interrupted copy)")
            return self._checked_meta(path)
        except sqlite3.DatabaseError as e:
            if not is_corruption(e):
                if isinstance(e, sqlite3.OperationalError) and "unable to open" in str(e) and path.exists() \
                        and not path.is_file():
                    # A folder (or a device, a socket) where the manifest should be: a traceback from every
                    # command before (a hostile-input newcomer, session 39). Not moved aside: not ours to move.
                    raise IndexFolderUnusable(f"the index folder's manifest {path} is not a file SQLite can open "
                                              f"({e}): move it away, or delete {self.index_dir} to start over") from e
                raise
            first = e
        # Only a writer may replace it, and another process may be doing just that right now.
        self.writer.acquire(wait=True)
        try:
            try:
                if not self._truncated(path):
                    return self._checked_meta(path)  # repaired by another process meanwhile
            except sqlite3.DatabaseError as e:
                if not is_corruption(e):
                    raise
            self._reset_vectors = bool(self.settings.chroma_url)
            return replace_damaged_manifest(self.index_dir, first)[1]
        finally:
            self.writer.release()

    def _truncated(self, path: Path) -> bool:
        """A manifest of 0 bytes beside the stores made from it. SQLite opens an empty file as a new database, so
        the index was taken for a new one: everything parsed and embedded again, the embedding cache's loss and
        its cause unsaid (a hostile-input audit, session 46). Its write-ahead log holding pages is not that, nor is
        a file made in the last EMPTY_MANIFEST_AGE_S: a new manifest is 0 bytes from its creation until SQLite
        writes its first page, which waits for the lock (up to 30 s) when another process holds it (a review,
        session 47)."""
        try:
            st = os.lstat(path)
            if st.st_size or not stat.S_ISREG(st.st_mode) or time.time() - st.st_mtime < EMPTY_MANIFEST_AGE_S:
                return False
            wal = path.with_name(path.name + "-wal")
            if wal.exists() and wal.stat().st_size:
                return False
        except OSError:
            return False
        return any((self.index_dir / name).exists() for name in (*LEXICAL_FOLDERS.values(), "chroma"))

    def _lexical_owner(self) -> str:
        """The store that holds the manifest's chunks: the one that committed last (state
        ``lexical_store``). Every run records its own store there, under the writer lock, before its
        first lexical commit (``_claim_lexical``), so another store's folder is behind the manifest
        whenever this names it. An index from before the setting is Whoosh's."""
        had = self.meta.get_state("lexical_store")
        if had is None:
            want = self.settings.lexical_store
            had = "whoosh" if (self.index_dir / LEXICAL_FOLDERS["whoosh"]).exists() and want != "whoosh" else want
        return str(had)

    def _lexical_identity(self) -> str | None:
        """Which lexical store holds the index, when ``lexical_store`` now names another; None when they
        agree. Nothing is deleted here: another process may have that store open and searching (review 7
        H2). The other store's folder stays (a few MB, derived) and this store, behind the manifest, is
        found damaged by check_stores and rebuilt from the manifest by the next run, as a lost index is:
        no chunk is re-parsed or re-embedded."""
        want = self.settings.lexical_store
        had = self._lexical_owner()
        if had == want or not self.meta.counts()["files"]:
            if self.meta.get_state("lexical_store") != want:
                if self.writer.held:  # in a run here (check_stores from _repair): not ours to release
                    self.meta.set_state("lexical_store", want)
                elif self.writer.try_acquire():
                    try:
                        self.meta.set_state("lexical_store", want)
                    finally:
                        self.writer.release()
            return None
        return had

    def _claim_lexical(self) -> None:
        """Under the writer lock, before a run's first lexical commit: record this store as the one that
        holds the index, unless another does (then check_stores has found this one behind, and _repair
        rebuilds it and records it after the rebuild). Written before the commit, so a crash after it
        leaves the other store marked behind (rebuilt if used again), never current and stale."""
        if self.lexical_switched_from is None and not self.lexical.unavailable:
            self.meta.ensure_state("lexical_store", self.settings.lexical_store)

    def _switch_message(self) -> str:
        return (f"the index is kept in {self.lexical_switched_from} now (a process with lexical_store = "
                f"\"{self.lexical_switched_from}\" indexed last) and this engine's lexical_store is "
                f"\"{self.settings.lexical_store}\"")

    def _lexical_rebuilt(self) -> None:
        """The lexical store holds the manifest again: record which store that is."""
        self.meta.set_state("lexical_store", self.settings.lexical_store)
        self.lexical_switched_from = None

    def check_manifest_pages(self, max_bytes: int = PAGE_CHECK_MAX_BYTES) -> str:
        """SQLite's own check of every page of the manifest (`PRAGMA quick_check`), for `delphi health`: the open's
        checks read the schema, the state and two b-trees, and a page damaged elsewhere left health "ok" while every
        question died (a hostile-input audit, session 46). Raises :class:`DamagedManifest` when it fails; says why
        it did not run on a manifest over ``max_bytes`` (13 s for 2.4 GB at 100,000 files on this project's
        machine)."""
        path = self.index_dir / "meta.sqlite"
        size = path.stat().st_size
        if size > max_bytes:
            return (f"pages not checked ({size / 2**30:.1f} GB, over {max_bytes / 2**30:.0f} GB); a damaged page is "
                    "found when a question reads it, then moved aside and rebuilt")
        if manifest_fails_check(path):
            raise DamagedManifest("SQLite's check of its pages (PRAGMA quick_check) found it damaged")
        return f"every page checked (PRAGMA quick_check, {size / 2**20:.1f} MB): ok"

    def check_stores(self) -> dict[str, str]:
        """Cheap checks of the derived stores against the manifest (at open, in health, before each
        index); damage goes into ``problems`` (errors in health) and is repaired by the next index."""
        counts = self.meta.counts()
        lex = self.lexical.check()
        # Re-read at every check: another process with the other lexical_store may have indexed since.
        self.lexical_switched_from = self._lexical_identity()
        if lex is None and self.lexical_switched_from:
            lex = self._switch_message()
        elif lex is None and counts["files"] and self.lexical.doc_count() == 0:
            lex = (f"it {'was missing' if self.lexical.created else 'is empty'} but the manifest lists "
                   f"{counts['files']} indexed files")
        if lex:
            self._lexical_damaged(lex)
        else:
            self.problems.pop("lexical_store", None)
        # Chroma only when open: index() and health() open it first; a one-shot query does not, as
        # importing and opening it cost 0.85-1.0 s CPU against a 0.05 s query (issue 13; the exact
        # search over the embedding cache answers such a query without it).
        if self._vectors is not None:
            vec = self._vectors.check(counts["vectors"] - self.meta.chroma_owed())  # owed: not lost
            if vec and vec.startswith("it holds") and self.writer_holder() is not None:
                vec = None  # another process is adding vectors this view has not loaded: not damage
            if vec and vec.startswith("it holds") and self.meta.get_state("vectors_refill"):
                vec = None  # a snapshot was loaded: Chroma is filled from the embedding cache (_repair)
            if vec:
                self.problems["vector_store_damaged"] = (
                    f"vector store (Chroma, {self._vectors.where}) is damaged: {vec}; "
                    "`delphi index` refills it from the embedding cache")
            else:
                self.problems.pop("vector_store_damaged", None)
        return {k: v for k, v in self.problems.items() if k in ("lexical_store", "vector_store_damaged", "vector_store")}

    def _lexical_damaged(self, why: str) -> None:
        if self.lexical.unavailable:  # no fallback to the other store: the setting asked for this one
            self.problems["lexical_store"] = f"lexical store {self.lexical.name} is unavailable: {why}; BM25 finds nothing"
            return
        state = "behind the manifest" if self.lexical_switched_from else "damaged"
        self.problems["lexical_store"] = (f"lexical index ({self.lexical.describe()}) is {state}: {why}; "
                                          "BM25 finds nothing until `delphi index` rebuilds it from the manifest")

    def _repair(self, indexer: Indexer, rebuild: bool, vectors: bool, check: bool = True) -> list[str]:
        """Rebuild what is derived, under the writer lock: everything on request (``rebuild``), else only
        the stores found damaged. Nothing is re-embedded that the embedding cache holds. ``check=False``
        (an update of named paths): repair only the damage already known (from a failed search, health,
        the last run) instead of checking every store again, a cost that grows with the index."""
        done: list[str] = []
        if rebuild:
            self.meta.clear_index()
            self.lexical.wipe()
            self.problems.pop("lexical_store", None)
            self._lexical_rebuilt()  # the run refills it from the workspace
            done.append("manifest and lexical index emptied" + REBUILD_REQUESTED)
        else:
            if not check:  # cheap (one state read), and a named-paths update must not commit into a
                self.lexical_switched_from = self._lexical_identity()  # store another one left behind
                if self.lexical_switched_from and "lexical_store" not in self.problems:
                    self._lexical_damaged(self._switch_message())
            damage = self.check_stores() if check else self.problems
            if "lexical_store" in damage:
                # Only behind (another store indexed last) and sound: cleared in place, as other
                # engines of this store may be searching it; damaged: its folder is started over.
                behind = self.lexical_switched_from is not None and self.lexical.check() is None
                if not behind:
                    self.lexical.wipe()
                n = indexer.rebuild_lexical(clear=behind)
                self.problems.pop("lexical_store", None)
                switched = self.lexical_switched_from
                self._lexical_rebuilt()
                done.append(f"lexical index rebuilt from the manifest ({n} documents)"
                            + (f" in {self.lexical.name} (it was {switched})" if switched else ""))
        self._claim_lexical()
        broken_vectors = rebuild or self._reset_vectors or "vector_store_damaged" in self.problems
        # A loaded snapshot ships no Chroma files (indexing/snapshot.py): a full run, which has Chroma
        # open by now, fills it from the embedding cache; a query's catch-up leaves it to that run.
        refill = self._vectors is not None and bool(self.meta.get_state("vectors_refill"))
        broken_vectors = broken_vectors or refill
        fresh = False
        if "vector_store" in self.problems and self.settings.vectors and vectors:
            # It failed to open: local files are derived, so start them over; a server may be back.
            if not self.settings.chroma_url:
                shutil.rmtree(self.index_dir / "chroma", ignore_errors=True)
            try:
                self.vectors = VectorStore(self.index_dir / "chroma", self._collection_name(), self.settings.chroma_url)
                self.problems.pop("vector_store", None)
                broken_vectors = True
                fresh = not self.settings.chroma_url  # a new empty folder: nothing to wipe
                done.append("vector store re-created")
            except Exception as e:
                self.problems["vector_store"] = f"Chroma unavailable ({self.settings.chroma_url or 'embedded'}): {e}"
        if broken_vectors and self.vectors is not None:
            if not fresh:
                self.vectors.wipe()
            self.meta.reset_embedded()
            self._reset_vectors = False
            self.problems.pop("vector_store_damaged", None)
            self._probe = None
            done.append("vector store filled from the embedding cache (a snapshot was loaded)" if refill and not rebuild
                        else "vector store emptied; refilled from the embedding cache"
                        + (REBUILD_REQUESTED if rebuild else ""))
        if refill:
            self.meta.set_state("vectors_refill", False)  # the flags say what Chroma holds again
        return done

    def _check_embed_cache(self, vectors: bool) -> list[str]:
        """The embedding cache probed (16 chunks re-embedded, against their cached vectors) before a full run
        trusts it: a damaged cache (blobs of the wrong width, other values) was reported by health with "run
        `delphi index` to re-embed", and every run, `--rebuild` too, refilled from it and embedded nothing
        (a security audit, session 26). Rows of the wrong width go; if the probe still fails, the model's
        whole cache goes; the chunks are then embedded again (what the cache still holds is read from it)."""
        if not (vectors and self.settings.vectors and self.embedder is not None and self.model_matches()):
            return []
        self._cache_probed = True
        model, dim = self.embedder.identity.weights_sha256, self.embedder.identity.dim
        p = health_mod.probe(self.meta, None, self.embedder, model, samples=2 * health_mod.PROBE_SAMPLES)
        if p.get("cosine") is None or p["cosine"] >= 0.99:
            return []
        first = p["status"]
        dropped, whole = 0, False
        if "missing from" not in first:  # a missing row is re-embedded by the pass below; the rest are sound
            dropped = self.meta.drop_cached(model, 4 * dim)
            p = health_mod.probe(self.meta, None, self.embedder, model, samples=2 * health_mod.PROBE_SAMPLES)
            whole = p.get("cosine") is not None and p["cosine"] < 0.99 and "missing from" not in p["status"]
            if whole:
                dropped += self.meta.drop_cached(model)
        self.meta.reset_embedded()
        if self._vectors is not None:
            self._vectors.wipe()
        self._probe = None
        self._exact = None
        return [f"embedding cache failed its probe ({first.removeprefix('failed: ')}): {dropped} cached vectors "
                f"removed{' (all of this model' + chr(39) + 's)' if whole else ''}; the chunks are embedded again"]

    def _reopen_vectors_if_written_elsewhere(self) -> None:
        """Embedded Chroma keeps its index in memory; after another process wrote, reopen before writing
        so this one does not write back its older picture."""
        gen = self.meta.get_state("generation", 0)
        with self._vectors_lock:  # an open under way finishes first, and is then reopened if it is behind
            if gen != self._generation and self._vectors is not None and not self.settings.chroma_url:
                self._vectors.close()
                try:
                    self.vectors = VectorStore(self.index_dir / "chroma", self._collection_name(), None)
                except Exception as e:
                    self.vectors = None
                    self.problems["vector_store"] = f"Chroma unavailable (embedded): {e}"
        self._generation = gen

    def _catch_up(self) -> None:
        """A reader's view after another process finished writing: reopen Chroma (its in-memory index
        is from before) and drop the cached view. One state read when nothing changed. Skipped while
        this engine's own run is under way (it is the writer then, and reopens for itself)."""
        if self.meta.get_state("generation", 0) == self._generation:
            return
        if not self._index_lock.acquire(blocking=False):
            return
        try:
            with self._lock:
                self._reopen_vectors_if_written_elsewhere()
                self._probe = None
                self._view = None
                self._view_gen += 1
                # A process with the other lexical_store indexed: this store is behind, so BM25 stops
                # answering from it (and health says why) until a run here rebuilds it.
                self.lexical_switched_from = self._lexical_identity()
                if self.lexical_switched_from:
                    self._lexical_damaged(self._switch_message())
                elif "is behind the manifest" in self.problems.get("lexical_store", ""):
                    self.problems.pop("lexical_store")  # a process with this store has rebuilt it since
        finally:
            self._index_lock.release()

    def writer_holder(self) -> Holder | None:
        """Another process (or engine) writing this index now, or None."""
        return self.writer.holder()

    def _collection_name(self) -> str:
        name = re.sub(r"[^A-Za-z0-9._-]", "_", self.root.name)[:40].strip("._-") or "root"
        return f"delphi_{name}"

    # ------------------------------------------------------------------ snapshots (indexing/snapshot.py)
    def snapshot(self, out: str | Path, progress: Progress | None = None) -> dict[str, Any]:
        """Bring the index up to date, then write it to ``out`` as a snapshot another machine can load;
        returns the snapshot's header (what built it, counts, members) and its size in ``bytes``."""
        self._open_or_raise()
        from .indexing import snapshot

        snapshot.check_out(Path(out))
        rep = self.index(progress=progress)
        if rep.errors:
            raise snapshot.SnapshotError("indexing did not finish, so no snapshot was written: " + "; ".join(rep.errors))
        with self._index_lock:  # no run of this engine starts while the stores are copied
            head = snapshot.create(self.root, self.index_dir, self.writer, self.settings, INDEX_FORMAT, Path(out))
        # Files git does not track travel too: a teammate's scratch file with a password in it went to everyone who
        # loaded the snapshot, unsaid (a team newcomer, session 42). Said, so they can be committed, ignored or removed.
        loose = untracked(self.root)
        head["untracked"] = None if loose is None else [p for p in loose if self.meta.file_info(p) is not None]
        return head

    def _start_from_snapshot(self, file: Path) -> None:
        """A new index starts from the `snapshot` setting's file. One that cannot be loaded is a problem
        health names (for this process), and the index is built from the workspace instead."""
        from .indexing.snapshot import SnapshotError

        try:
            Engine.load_snapshot(file, self.root, self.settings, only_if_new=True)
        except (SnapshotError, OSError) as e:
            self.problems["snapshot"] = f"snapshot {file} not loaded, indexing the workspace instead: {e}"

    @staticmethod
    def load_snapshot(file: str | Path, root: str | Path, settings: Settings | None = None,
                      only_if_new: bool = False, **overrides: Any) -> dict[str, Any] | None:
        """Replace the index of the workspace ``root`` with a snapshot (refused while an engine, in any
        process, has it open: its stores would split); the next ``index()`` brings it up to date, redoing only files whose content
        differs. Raises ``SnapshotError``, the existing index untouched, when the snapshot was built
        with another model, parser or index format, or is corrupt, truncated or hostile.
        ``only_if_new``: load only where there is no index yet (else None)."""
        from .indexing import snapshot

        root = Path(root).resolve()
        if not root.is_dir():
            raise FileNotFoundError(f"workspace folder not found: {root}")
        settings = settings or Settings.load(root, overrides)
        index_dir = settings.index_path(root)
        check_index_folder(index_dir, root)
        other = stored_root(index_dir)
        if other is not None and other != str(root) and Path(other).is_dir():
            # A shared index folder: the load would replace that workspace's index (review, session 29).
            raise IndexFolderUnusable(f"the index folder {index_dir} holds the index of another workspace, {other}: "
                                      "give each workspace an index folder of its own")
        if only_if_new and (index_dir / "meta.sqlite").exists():
            return None
        serving = load_embedder(settings.embedder).identity.as_dict() if settings.vectors else None
        return snapshot.load(Path(file), root, index_dir, settings, INDEX_FORMAT, serving, only_if_new)

    # ------------------------------------------------------------------ indexing
    def _indexer(self) -> Indexer:
        # Chroma opens when the run first deletes a vector (or below, before it writes one).
        usable = (self._vectors or LazyVectorStore(lambda: self.vectors)) if self.embedder is not None else None
        indexer = Indexer(self.root, self.settings, self.meta, self.lexical, usable, self.embedder,
                          file_docs=self._file_docs_wanted())
        indexer.importers_after = self._importers_after
        return indexer

    def _importers_after(self, paths: list[str], old_specs: dict[str, list[str]]) -> dict[str, set[str]] | None:
        """For the file documents after an update of ``paths`` that left the file list as it was: the
        importers of every file those paths imported before (``old_specs``, resolved as the graph did) or
        import now, from the in-memory graph with their imports resolved again (the view may already be
        patched: it is per batch). None: no view in memory, too many paths, or files came, went or changed
        kind (the indexer then builds the whole graph)."""
        with self._lock:
            view = self._view
        if view is None or view.graph is None or view.graph.resolver is None or not paths \
                or len(paths) > PATCH_MAX_PATHS or set(old_specs) - set(paths):
            return None
        patched = self._graph_with(view, paths)
        if patched is None:
            return None
        graph = patched[1]
        touched = {t for p in paths for t in graph.imports.get(p, ())}
        for p, specs in old_specs.items():
            for spec in specs:
                if spec.partition(":")[0] not in MANIFEST_KINDS:
                    touched.update(t for t in view.graph.resolver.resolve(p, spec) if t != p)
        return {t: set(graph.imported_by.get(t, ())) for t in touched}

    def _file_docs_wanted(self) -> bool:
        """Whether the filedoc branch (issue 19) can run for some question shape with these settings: only
        then does indexing keep its file documents."""
        spec = next((s for s in registered() if s.name == "filedoc"), None)
        return spec is not None and any(self.settings.branch_weights.get(spec.name, w) > 0 for w in spec.weights.values())

    def index(self, progress: Progress | None = None, vectors: bool = True, reembed: bool = True,
              only: list[str] | None = None, buffers: dict[str, str] | None = None, wait: bool = True,
              on_wait: Callable[[Holder | None], None] | None = None, rebuild: bool = False) -> IndexReport:
        """Bring the index up to date with the folder; only changed files are redone.

        Queries keep being answered while this runs, from what is committed so far. One process writes
        an index at a time: when another one is, ``wait=True`` calls ``on_wait(holder)`` and waits for it
        (``stop_indexing()`` ends the wait), ``wait=False`` raises :class:`IndexBusy` naming the holder.
        Damaged derived stores are rebuilt first; ``rebuild=True`` rebuilds all of them from the
        workspace and the embedding cache.
        """
        self._open_or_raise()
        not_here = unwalkable(self.root)
        if not_here is not None:
            # Before anything, a rebuild's emptying of the manifest included; the walk checks again (pipeline).
            raise not_here
        if self.lexical.unavailable:
            # No fallback to the other store, and no traceback: the error says what to install or set.
            return IndexReport(errors=[f"lexical store {self.lexical.name} is unavailable: {self.lexical.error}; "
                                       "nothing was indexed"])
        with self._index_lock:
            self._stop.clear()
            waited_from: list[float] = []

            def waiting(holder: Holder | None) -> None:
                waited_from.append(time.perf_counter())
                if on_wait is not None:
                    on_wait(holder)

            if not self.writer.acquire(wait=wait, on_wait=waiting, should_stop=self._stop.is_set):
                return IndexReport(errors=["stopped while waiting for another Delphi process to finish indexing"])
            # A second `delphi index` that waited for the first said "indexed 0 files … in 6.6s" of that wait.
            waited_s = time.perf_counter() - waited_from[0] if waited_from else 0.0

            began: dict[str, tuple[float, int]] = {}  # each phase's first report: when, and how far it was

            def track(phase: str, done: int, total: int, chunks: int) -> None:
                state = {"phase": phase, "done": done, "total": total, "chunks": chunks}
                now = time.monotonic()
                t0, d0 = began.setdefault(phase, (now, done))
                if d0 < done < total and now - t0 >= ETA_AFTER_S:
                    # An agent told only "indexing in progress (lexical 25/2314)" could not tell whether to ask again
                    # in a second or an hour (a newcomer, session 44): the phase's pace so far, carried on; kept as
                    # a deadline, so what is read between two reports counts down (a review).
                    state["_eta"] = now + (now - t0) * (total - done) / (done - d0)
                self._indexing = state
                if progress:
                    progress(phase, done, total, chunks)

            # Whether this run changed what queries read. A run that changes nothing (the MCP processes'
            # poll every 2 s, every `delphi context`) must not drop the in-memory view (1 s to rebuild on
            # 2,500 files) and the exact-search matrix, nor make other processes reopen their stores.
            changed = True  # until shown otherwise: a run that fails midway may have written
            patch: list[str] | None = None  # the named paths whose rows the in-memory views take in
            cochange_before = self.meta.get_state("cochange")
            indexer: Indexer | None = None
            try:
                if self.meta.get_state("generation", 0) != self._generation:
                    self.invalidate()  # another process wrote since the views were made: patch nothing old
                self._reopen_vectors_if_written_elsewhere()
                # A full run (`delphi index`, the language server's) checks Chroma for damage before the
                # lexical pass, which deletes the vectors of changed files from it. Not on a first run:
                # with no vectors there is nothing to delete or damage yet, and opening Chroma costs
                # 0.6-0.7 s CPU that a cold start's first answer would wait for (bench.first_batch);
                # it is opened after the lexical pass then. A query's catch-up (reembed=False) opens
                # it only to write or delete vectors.
                full = reembed or rebuild
                wanted = self._chroma_wanted()
                if full and wanted and self.meta.counts()["vectors"] > 0:
                    _ = self.vectors
                indexer = self._indexer()
                # The embedding cache's probe: on a full run, once per process (each costs a chunk's embedding;
                # a query's catch-up and a save never), and before a rebuild empties the manifest it samples.
                repaired = self._check_embed_cache(vectors) if full and only is None and not self._cache_probed else []
                repaired += self._repair(indexer, rebuild, vectors, check=only is None)
                if repaired:
                    self.invalidate()
                    indexer = self._indexer()
                # Chroma's writes are owed while the exact search answers queries (Chroma is not read then):
                # a save's 0.04 s of CPU and 0.1 s of I/O on spring-boot, 0.3 s for the first write after
                # opening, and a cold index's every add. Paid by the run (or maintain()) once Chroma answers.
                indexer.defer_chroma = not wanted
                if wanted:
                    self._pay_chroma(indexer)
                # What queries hold in memory is patched for the few files a run changed, not dropped (a
                # rebuild from the whole manifest cost the next answer 1.5-2 s of CPU on spring-boot, issue 18).
                view_patched = [0]  # how many of indexer.changed the view has taken in

                def on_batch() -> None:
                    if self._patch_view(indexer.changed):
                        view_patched[0] = len(indexer.changed)
                    else:
                        self.invalidate()

                # Whether a vector pass follows: then a large run's new chunks are embedded beside the lexical pass.
                embeds = bool(vectors and self.settings.vectors and self.embedder is not None
                              and (reembed or self.model_matches()))
                indexer.embed_ahead = embeds
                rep = indexer.index_lexical(track, only=only, buffers=buffers, should_stop=self._stop.is_set,
                                            on_batch=on_batch, held=self.claims.held_elsewhere())
                self._claim(buffers or {}, rep)
                if not wanted and self._chroma_wanted():  # this run's chunks took the index past the bound
                    wanted, indexer.defer_chroma = True, False
                    self._pay_chroma(indexer)
                if full and wanted and not self._vectors_opened:
                    _ = self.vectors
                    later = self._repair(indexer, False, vectors)
                    if later:
                        self.invalidate()
                        repaired += later
                rep.repaired = repaired
                self.refresh_cochange()
                if embeds:
                    c = self.meta.counts()
                    to_embed = c["vectors"] < c["chunks"] or not self.model_matches()
                    if (to_embed or self._vectors is not None) and (indexer.defer_chroma or self.vectors is not None):
                        if not indexer.defer_chroma:
                            indexer.vectors = self.vectors
                        indexer.index_vectors(track, rep, should_stop=self._stop.is_set, grams_stop=self._stop)
                        self._probe = None
                if not self._stop.is_set() and (full or len(self.lexical.segment_sizes()) > MAX_SEGMENTS):
                    # Merges, once per run, after what queries wait for. About 0.8 ms of CPU per document
                    # merged (seconds when a tier fills): a small update (a save, the catch-up before an
                    # answer) leaves them to maintain(), unless segments piled up past MAX_SEGMENTS.
                    indexer.finish_lexical()
                if (embeds and full and only is None and not rep.errors and not self._stop.is_set()
                        and self.embedder is not None and self.model_matches()):
                    # The embedding cache's vectors no chunk uses, bounded: an editor's every indexed edit adds some.
                    n = self.meta.counts()["chunks"]
                    try:
                        gone = self.meta.prune_embed_cache(self.embedder.identity.weights_sha256,
                                                           max(n, EMBED_CACHE_SPARE), n)
                    except sqlite3.Error:  # a cache kept too long costs no run (a full disk, a lock): the next run
                        log.exception("pruning the embedding cache failed; the next full run tries again")
                        gone = 0
                    if gone:
                        log.info("dropped %d cached vectors no chunk uses (the oldest written)", gone)
                if self.meta.get_state("recovered") is not None and not rep.errors and only is None:
                    self.meta.set_state("recovered_rebuilt", True)
                changed = bool(repaired or rep.files_indexed or rep.files_deleted or rep.chunks_embedded
                               or rep.reembedded_all or rep.vendored_changed
                               or self.meta.get_state("cochange") != cochange_before)
                if len(indexer.changed) <= PATCH_MAX_PATHS and not (repaired or rep.reembedded_all or rep.errors
                                                                     or rep.vendored_changed):
                    patch = indexer.changed
                if full and only is None and not rep.errors and not self._stop.is_set() \
                        and self.meta.get_state("index_failed") is not None:  # (a question's catch-up embeds none)
                    self.meta.set_state("index_failed", None)
                rep.waited_s = round(waited_s, 2)
                return rep
            except Exception as e:
                # Said by health in every process until a full run succeeds: a `delphi index` that failed on too
                # few file descriptors left the next `delphi health` saying only "not indexed yet" (a hostile-input
                # newcomer, session 39). Best effort: the failure may be the disk's.
                try:
                    self.meta.set_state("index_failed", {"at": time.time(), "error": f"{type(e).__name__}: {e}"[:500]})
                except Exception:
                    log.debug("could not record the failed run", exc_info=True)
                raise
            finally:
                if indexer is not None and not self._stop.is_set():
                    # A large run's trigram index, after what queries wait for more (pipeline.GRAMS_AFTER_VECTORS);
                    # here so that a vector pass that failed does not leave it to the next save (review). Stopped:
                    # the next run adds them first, and health says so meanwhile.
                    try:
                        indexer.finish_grams()
                    except Exception:
                        log.exception("adding this run's chunks to the trigram index failed; the next run adds them")
                elif indexer is not None:
                    indexer.stop_grams()  # its thread ends after the batch in hand (stop is set)
                self._indexing = None
                try:
                    self.meta.bulk_writes(False)  # a large run's spaced checkpoints end with it (stores/meta.py)
                except Exception:
                    log.exception("the checkpoint after a large run failed; the next commits make it")
                if indexer is not None:
                    indexer.close_ahead()  # a run that skipped its vector pass (or failed in it) ends the process
                try:
                    if changed:
                        with self._lock:
                            if patch is None:
                                self.invalidate()
                            self._generation = self.meta.get_state("generation", 0) + 1
                            self.meta.set_state("generation", self._generation)
                            if patch is not None:
                                if view_patched[0] < len(patch):  # removals after the last batch
                                    self._patch_view(patch)
                                self._patch_exact(patch)
                finally:
                    self.writer.release()

    def maintain(self, max_docs: int | None = MAINTAIN_MERGE_DOCS) -> int:
        """What small updates leave for later, for a caller that is idle (the language server's worker
        after a quiet spell): merge the lexical segments that piled up, tiers of at most ``max_docs``
        documents, and make the Chroma writes they owe. Returns the segments merged; 0 at once when a run
        here or another process writes."""
        if not self._index_lock.acquire(blocking=False):
            return 0
        try:
            if not self.writer.try_acquire():
                return 0
            try:
                merged = self.lexical.merge_tiers(max_docs=max_docs)
                if merged:
                    self.lexical.refresh()
                if self._chroma_wanted():
                    self._pay_chroma(self._indexer())  # what saves owed, once Chroma answers
                return merged
            finally:
                self.writer.release()
        finally:
            self._index_lock.release()

    def refresh_cochange(self) -> None:
        """Recompute co-change when HEAD moved since the last time (cheap when it did not)."""
        head = git_head(self.root)
        stored = self.meta.get_state("cochange") or {}
        if head is None:
            if stored.get("head") and not is_slow(self.root) and folder_readable(self.root):
                # history gone (.git removed, a snapshot unpacked without it): no stale counts. A git that only
                # did not answer in time keeps them.
                self.meta.set_cochange({}, "", 0, COCHANGE_VERSION, {})
            self.cochange_status = no_history(self.root)
            return
        if stored.get("head") != head or stored.get("version") != COCHANGE_VERSION:
            try:
                files = {p for p, _k, _n in self.meta.files()}
                h = change_history(self.root, files)
                self.meta.set_cochange(h.pairs, head, h.commits, COCHANGE_VERSION, h.changes, h.messages)
                stored = self.meta.get_state("cochange")
                if self.meta.get_state("cochange_error") is not None:
                    self.meta.set_state("cochange_error", None)
            except (OSError, RuntimeError, subprocess.SubprocessError) as e:
                self.cochange_status = f"error: git log failed: {e}"
                # Kept for the next process: `delphi health` said "not computed yet" after every run (session 29).
                self.meta.set_state("cochange_error", str(e)[:300])
                return
        self.cochange_status = history_status(stored)

    @property
    def indexing(self) -> dict[str, Any] | None:
        """The run under way: phase, done, total, chunks and, once its pace is known, ``secondsLeft``; None when no
        run is (a copy, read once: the indexing thread replaces it)."""
        run = self._indexing
        if run is None:
            return None
        out = {k: v for k, v in run.items() if k != "_eta"}
        if "_eta" in run:
            out["secondsLeft"] = max(1, round(run["_eta"] - time.monotonic()))
        return out

    def stop_indexing(self) -> None:
        """Ask a running index() to stop at the next batch boundary (state stays consistent)."""
        self._stop.set()

    def invalidate(self) -> None:
        with self._lock:
            self._view = None
            self._view_gen += 1
            self._exact = None
            self._exact_unsaved = None  # for a state gone; held on, it doubled the matrix's memory at a reload

    def _patch_view(self, paths: list[str]) -> bool:
        """After an update of a few files, the in-memory view takes those paths' rows from the manifest
        instead of being rebuilt from all of it by the next query (1.5-2 s of CPU on spring-boot after
        each save, issue 18). A new view replaces the old (a query may be reading it); it is dropped when
        it cannot be patched. False (nothing done) when the paths are too many to patch."""
        if len(paths) > PATCH_MAX_PATHS:
            return False
        with self._lock:
            if paths:
                self._view_gen += 1  # a build under way read some of these rows before they changed
            if self._view is not None and paths:
                key = self._current_view_key()  # read before the rows: see _saved_or_built_view
                self._view = self._view_with(self._view, paths)
                self._view_key = key if self._view is not None else None
            return True

    def _patch_exact(self, paths: list[str]) -> None:
        """The exact search's matrix with the rows of ``paths`` replaced, keyed to this index state."""
        with self._lock:
            if self._exact is not None and self.embedder is not None:
                ident = self.embedder.identity
                saved_key = self._exact_cache_key(self.meta.counts()["vectors"])  # before the rows it is for
                rows = self.meta.embedded_vectors(ident.weights_sha256, paths)
                self._exact = self._exact.replaced(set(paths), rows, ident.dim)
                if len(self._exact) != self.meta.counts()["vectors"]:
                    # The run embedded chunks of files it did not change (a catch-up finishing a killed run's
                    # embedding): only a reload holds them (review 9, H1: they were missing, and saved so).
                    self._exact, self._exact_unsaved = None, None
                    return
                if self._exact_slow:  # a big matrix: saved again at the next idle moment (save_view)
                    self._exact_unsaved = (saved_key, self._exact)
                self._exact_key = (self.meta.content_version(), self._generation, self.meta.counts()["vectors"],
                                   ident.weights_sha256)

    def _graph_with(self, view: IndexView, paths: list[str]) -> tuple[dict[str, str], FileGraph] | None:
        """The kinds of ``paths`` as the manifest holds them now, and ``view``'s file graph with their import
        edges resolved again; None when only a rebuild is right (a file added, removed or of another kind:
        the file list, paths and name links change; or the graph cannot be patched)."""
        kinds = {p: info[0] for p in paths if (info := self.meta.file_info(p)) is not None}
        if any(view.files.get(p) != kinds.get(p) for p in paths) or view.graph is None:
            return None
        graph = view.graph.with_imports(view.files, self.meta.imports_of(list(kinds)))
        return (kinds, graph) if graph is not None else None

    def _view_with(self, view: IndexView, paths: list[str]) -> IndexView | None:
        """``view`` with the symbols, chunk lines and import edges of ``paths`` as the manifest holds them
        now, in the order IndexView.build gives them; None when only a rebuild is right."""
        paths = list(dict.fromkeys(paths))
        patched = self._graph_with(view, paths)
        if patched is None:
            return None
        kinds, graph = patched
        # The definitions are read from the manifest as queries ask for names (SymbolTable): the patched
        # view reads every name again, so it holds these files' definitions as they are now.
        return view.patched(symbols=view.symbols.fresh(view.files),
                            chunk_lines=view.chunk_lines.without(set(kinds)), graph=graph)

    def is_indexed(self) -> bool:
        return bool(self.meta.get_state("lexical_ready", False))

    def view(self) -> IndexView:
        self._catch_up()
        view = self._view
        if view is not None:
            return view
        with self._view_lock:  # one build at a time; the others wait for it and take it
            with self._lock:
                if self._view is not None:
                    return self._view
                gen = self._view_gen
            view, key = self._saved_or_built_view()
            with self._lock:
                if self._view_gen == gen and self._view is None:  # no write landed meanwhile: keep it
                    self._view, self._view_key = view, key
                return view

    def _current_view_key(self) -> tuple[Any, ...]:
        return (*self.meta.content_version(), code_digest())

    def _writing(self) -> bool:
        """Whether an index run (here, or another process's) is under way: a view built now is for a state
        about to go."""
        return self._index_lock.locked() or self.writer_holder() is not None

    def _saved_or_built_view(self) -> tuple[IndexView, tuple[Any, ...]]:
        """The view saved by an earlier process for this very manifest state, else built (and saved when
        that was slow), with the key of the state it is for. The key is read before the tables: a write
        landing during the build leaves the key behind what was read, so the view is saved under a state
        already gone (never served), not under one it lacks."""
        key = self._current_view_key()
        t0 = time.perf_counter()
        with _collector_paused():
            view = self._view_cache.load(key)
        if view is not None:
            view.bind(self.meta)
            self._view_saved_key = key
            # Only a slow build was saved: a patch of this view is saved again (review 9, M2).
            self._view_build_s = max(self._view_build_s, VIEW_SAVE_MIN_S)
            self.view_source = f"loaded from {self._view_cache.path.name} in {time.perf_counter() - t0:.2f} s"
            return view, key
        with _collector_paused():
            view = IndexView.build(self.meta)
        took = self._view_build_s = time.perf_counter() - t0
        self.view_source = f"built in {took:.2f} s"
        self._store_view(view, key)
        return view, key

    def _store_view(self, view: IndexView, key: tuple[Any, ...]) -> bool:
        """Save ``view`` (for the state ``key``) when it was slow to build, is not saved already and no index
        run writes (review 8, M2: a cold index of the 100k workspace pickled a 120 MB view for a query in every
        batch, each stale at the next; the end of a run or an idle spell saves it then, save_view)."""
        if self._view_build_s < VIEW_SAVE_MIN_S or key == self._view_saved_key or self._writing():
            return False
        view.stripped_paths.prepare()  # saved with it: the next process's first question does not build them
        if not self._view_cache.save(key, view):
            return False
        self._view_saved_key = key
        self.view_source = self.view_source.split(", saved")[0] + f", saved to {self._view_cache.path.name}"
        return True

    def view_unsaved(self) -> bool:
        """Whether the view in memory (or the exact matrix) is one save_view() would write (cheap: no
        manifest read)."""
        return (self._view is not None and self._view_key != self._view_saved_key
                and self._view_build_s >= VIEW_SAVE_MIN_S) or self._exact_unsaved is not None

    def save_view(self) -> bool:
        """Save the view in memory for the next process, when it is for the manifest's current state, was
        slow to build, is not saved already and no index run writes. For idle callers: the end of a full
        run, the language server's quiet spell after updates (a patched view is saved again then)."""
        with self._lock:
            view, key = self._view, self._view_key
        if view is None or key is None or key != self._current_view_key():
            return False
        return self._store_view(view, key)

    def prepare_view(self) -> bool:
        """At the end of ``delphi index`` on a large workspace: the view built (or found saved) and saved for
        the next process, an editor's server, whose first answer on the 100,000-file workspace took 21.8 s
        building it and 3.8 s loading it (issue 18). Below VIEW_PREBUILD_FILES files a build takes less than
        VIEW_SAVE_MIN_S and nothing would be saved."""
        if not self.is_indexed() or self.meta.counts()["files"] < VIEW_PREBUILD_FILES \
                or self._view_cache.holds(self._current_view_key()):
            return False  # small, or saved for this very state already (not loaded just to find that out)
        self.view()
        return self.save_view()

    def warm(self) -> dict[str, float]:
        """Open what the first question reads, so that it does not wait for it (issue 18: 3.8 s to the first
        answer on the 100,000-file workspace, most of it the view, importing chromadb and Chroma loading its
        segments): the view (loaded or built), the vector search (Chroma with its probe where HNSW answers,
        else the exact matrix), the lexical searcher; then the view is saved when new. Seconds per step.
        Nothing before the first index (there is nothing to open), nothing when ``warm_start`` is off."""
        took: dict[str, float] = {}
        if not self.settings.warm_start or not self.is_indexed():
            return took
        t0 = time.perf_counter()
        self.view().stripped_paths.prepare()  # loaded with a saved view; built here for one made now
        took["view"] = time.perf_counter() - t0
        t0 = time.perf_counter()
        counts = self.meta.counts()
        ready, _status = self.vector_status(counts)  # opens Chroma and probes it where HNSW answers
        if ready and not self._hnsw_answers(counts["vectors"]):
            self._exact_vectors(counts["vectors"])
        took["vectors"] = time.perf_counter() - t0
        t0 = time.perf_counter()
        if not self.lexical.unavailable:
            self.lexical.doc_count()  # opens the searcher
        took["lexical"] = time.perf_counter() - t0
        took.update(self.save_for_next())
        return took

    def save_for_next(self) -> dict[str, float]:
        """Save what the next process would otherwise build or read again (the view, the exact matrix), where
        unsaved; seconds each took. The language server's quiet spells and its shutdown call it."""
        took: dict[str, float] = {}
        t0 = time.perf_counter()
        if self.save_view():
            took["view_saved"] = time.perf_counter() - t0
        t0 = time.perf_counter()
        if self._save_exact():
            took["exact_saved"] = time.perf_counter() - t0
        return took

    # ------------------------------------------------------------------ model identity
    def stored_identity(self) -> ModelIdentity | None:
        d = self.meta.get_state("embedder")
        return ModelIdentity.from_dict(d) if d else None

    def model_matches(self) -> bool:
        stored = self.stored_identity()
        return stored is None or (self.embedder is not None and stored == self.embedder.identity)

    def probe(self) -> dict[str, Any]:
        """Re-embed a stored chunk and compare with its stored vector (docs/DESIGN.md, lesson 1)."""
        if self._probe is None:
            n = self.meta.counts()["vectors"]
            exact = not self._hnsw_answers(n)
            # What answers queries is probed: the cache vector when exact, Chroma's when HNSW; and
            # Chroma's too whenever it is open (health opens it), as HNSW would answer from it.
            # Chroma is probed only for what it holds: not while it is owed writes (it answers nothing then).
            # Nor while a loaded snapshot's vectors are still to be refilled into it (the exact search answers),
            # nor while it is damaged and the exact search answers (a warning then, not a disabled branch).
            if not exact:
                chroma = self.vectors
            elif self._vectors is None or any(k in self.problems for k in health_mod.CHROMA_PROBLEMS):
                chroma = None  # not open: nothing to count (what Chroma is owed takes a join over the owed rows)
            else:
                owed = self.meta.chroma_owed() or bool(self.meta.get_state("vectors_refill"))
                chroma = None if owed else self._vectors
            self._probe = health_mod.probe(self.meta, chroma, self.embedder,
                                           self.embedder.identity.weights_sha256 if exact and self.embedder else None)
        return self._probe

    def vectors_behind(self, counts: dict[str, int]) -> bool:
        """Chunks left unembedded with no run under way: a run stopped in its vector phase (Ctrl-C), or one ran
        without vectors (`delphi symbols` and `related-tests` catch up so). Health said "no vectors yet" without a
        warning or what to do (a newcomer's first use, session 44)."""
        return (bool(self.settings.vectors) and counts["chunks"] > counts["vectors"] and self.indexing is None
                and self.is_indexed() and self.writer_holder() is None)

    def vector_status(self, counts: dict[str, int] | None = None) -> tuple[bool, str]:
        if not self.settings.vectors:
            return False, "off: vectors disabled by settings (vectors = false)"
        counts = counts or self.meta.counts()
        hnsw = self._hnsw_answers(counts["vectors"])
        if hnsw:
            if self.meta.get_state("vectors_refill"):
                return False, ("not ready: a snapshot was loaded and Chroma is not filled yet; "
                               "`delphi index` fills it from the embedding cache")
            _ = self.vectors  # opens Chroma; a failure to open lands in problems, read next
        # An embedded Chroma's problems disable the branch only where Chroma answers: below the exact bound the
        # search reads the embedding cache, and health called a branch "disabled" that was answering (a newcomer,
        # session 30). A Chroma server the user named is theirs to fix at once.
        for key in ("embedder", *(health_mod.CHROMA_PROBLEMS if hnsw or self.settings.chroma_url else ())):
            if key in self.problems:
                return False, "disabled: " + self.problems[key]
        if not self.model_matches():
            stored = self.stored_identity()
            serving = self.embedder.identity if self.embedder else None
            return False, (f"disabled: model mismatch: the index was built with {stored.name} "  # type: ignore[union-attr]
                           f"(sha256 {stored.weights_sha256[:12]}, dim {stored.dim}) but "  # type: ignore[union-attr]
                           f"{serving.name if serving else 'nothing'} (sha256 {serving.weights_sha256[:12] if serving else '-'}) "
                           "answers queries; run `delphi index` to re-embed")
        idle = self.vectors_behind(counts)
        owed = "the next `delphi index` embeds {} (a running Delphi server does it itself)"
        if counts["vectors"] == 0:
            if idle:
                return False, (f"not ready: {health_mod.VECTORS_BEHIND} none of the {counts['chunks']:,} chunks is "
                               f"embedded (a run stopped before embedding them, or ran without vectors); "
                               + owed.format("them"))
            if (counts["chunks"] == 0 and counts["files"] == 0 and self.indexing is None
                    and self.meta.get_state("lexical_ready") and not self.meta.get_state("full_run_open")):
                # An empty folder, indexed: "not ready: no vectors yet" read as "wait" where nothing is to come
                # (a newcomer, session 47). Not while a run writes, nor after a rebuild cleared the index (its
                # `lexical_ready` goes; `indexed_at` stayed and said "ready" then: a review).
                return True, "ready: no files to embed (the folder holds none Delphi indexes)"
            return False, "not ready: no vectors yet"
        if self._hnsw_answers(counts["vectors"]) and not self.settings.chroma_url and self.meta.chroma_behind():
            # Embedded while the exact search answered (or before `vector_search` turned to hnsw): Chroma lacks
            # them until the next index run writes them from the embedding cache.
            owed = self.meta.chroma_owed()
            if owed:
                held = counts["vectors"] - owed
                return held > 0, (f"{'partial' if held else 'not ready'}: Chroma holds {held}/{counts['vectors']} "
                                  "vectors; the next index run writes the rest from the embedding cache")
        p = self.probe()
        if p.get("cosine") is not None and p["cosine"] < 0.99:
            holder = self.writer_holder()
            if holder is not None and p.get("status", "").startswith(("failed: chunk marked", "failed: vector store error")):
                # Not damage: another process is adding vectors this view has not loaded yet.
                return True, f"partial: {holder.describe()}; what it adds shows when it is done"
            return False, f"disabled: self-consistency probe failed (cosine {p['cosine']:.4f} < 0.99 for chunk {p['chunk']}); run `delphi index` to re-embed"
        if counts["vectors"] < counts["chunks"]:
            if idle:
                return True, (f"partial: {health_mod.VECTORS_BEHIND} {counts['vectors']:,} of {counts['chunks']:,} "
                              "chunks are embedded; " + owed.format("the rest"))
            return True, f"partial: {counts['vectors']}/{counts['chunks']} chunks embedded"
        return True, "ready"

    # ------------------------------------------------------------------ queries
    def normalise_anchor(self, anchor: str, field: str = "anchors") -> str:
        """A workspace-relative path for an existing file; errors name ``field`` (the caller's parameter)."""
        if isinstance(anchor, os.PathLike):
            anchor = os.fspath(anchor)
        if not isinstance(anchor, str) or not anchor:
            raise RequestError(field, "each anchor must be a non-empty string" if field == "anchors"
                               else "must be a non-empty path")
        check_path(field, anchor)  # the Python API's callers too: a NUL was ValueError from os.lstat
        raw = anchor
        if anchor.startswith("file:"):
            anchor = str(uri_to_path(anchor))
        p = Path(anchor)
        if not p.is_absolute():
            p = self.root / p
        try:
            rel = Path(os.path.normpath(p)).relative_to(self.root)
        except ValueError:
            raise RequestError(field, f"{raw!r} is outside the workspace {self.root}") from None
        if str(rel) == ".":
            raise RequestError(field, f"{raw!r} is the workspace itself, not a file")
        if not utf8_name(rel.as_posix()):  # undecodable bytes of a command-line argument: never indexed
            raise RequestError(field, f"{raw!r} is not a valid UTF-8 name (Delphi skips such files)")
        # normpath is lexical: `src/linkdir/out.py` with linkdir -> /elsewhere was taken, and whether it
        # existed, was a folder, or had tests told what lies outside (a security audit, session 26).
        at = self.root
        for part in rel.parts:
            at = at / part
            try:
                if stat.S_ISLNK(os.lstat(at).st_mode):
                    raise RequestError(field, f"{raw!r} goes through a symbolic link ({at.relative_to(self.root)}); "
                                              "Delphi does not follow links")
            except OSError:
                break  # the rest does not exist on disk (an unsaved buffer may still be indexed)
        # A mistyped path must not quietly answer as if there were no anchor. An editor's unsaved
        # buffer is not on disk but is in the index (buffers are indexed), so it counts as existing.
        full = self.root / rel
        try:
            is_dir, is_file, exists = full.is_dir(), full.is_file(), full.exists()
        except OSError as e:  # a name too long for the file system: an OSError traceback before (review, s39)
            raise RequestError(field, f"{raw[:80]!r}... cannot be a file here: {e.strerror or e}") from None
        if is_dir:
            raise RequestError(field, f"{raw!r} is a folder, not a file")
        if not is_file and self.meta.file_info(rel.as_posix()) is None:
            if exists:  # a FIFO, socket or device was "does not exist" (a hostile newcomer, session 28)
                raise RequestError(field, f"{raw!r} is not a regular file ({_file_type(full)})")
            near = self._near_names(rel.as_posix())
            # `lines.py:120`: agents write a file with its line (an agents' newcomer, session 40).
            if (m := _WITH_LINE.fullmatch(rel.as_posix())) and self.meta.file_info(m.group(1)) is not None:
                near = [m.group(1)]
            hint = f"; did you mean {' or '.join(near)}?" if near else ""
            raise RequestError(field, f"{raw!r} does not exist in the workspace {self.root}{hint}")
        return rel.as_posix()

    def _indexed_path(self, path: str) -> str:
        """A file asked about by path (related tests or code): one Delphi skipped is an error saying why. "0 tests
        for zq_blob.bin" read as "it has none" (an agents' newcomer, session 40)."""
        rel = self.normalise_anchor(path, field="path")
        recorded = self.meta.skip_reason(rel)  # a run skipped it: health lists it (an ignored file is not listed)
        if (why := recorded or self.why_not_indexed(rel)) is not None:
            listed = "; `delphi health` lists the files skipped and why" if recorded else ""
            raise RequestError("path", f"{rel} is not indexed ({why}), so nothing is known of it{listed}")
        return rel

    def why_not_indexed(self, rel: str) -> str | None:
        """Why a workspace file is not in the index, or None (indexed, or new since the last run). A run records
        what it skipped, but an ignored file is never walked, so nothing recorded it: a `.gitignore`d file asked
        about got "no related tests found" and, as an anchor, an answer around nothing with nothing said (a
        hostile-input audit, session 46). The walk's own rules say why then."""
        if (why := self.meta.skip_reason(rel)) is not None:
            return why
        if self.meta.file_info(rel) is not None:
            return None
        return scan_skip_reason(self.root, rel, self.settings)

    def _near_names(self, rel: str) -> list[str]:
        """Indexed files a missing path may mean (at most three): its name in another folder, or a name of five
        letters or more before its extension spelt with another case or one letter off (`source/core/ky.ts` for
        source/core/Ky.ts... when the stem is long enough: IndexView.misspelt; an agent newcomer, session 26)."""
        try:
            view = self.view()
        except Exception:  # a hint only: an index that cannot give one gives none
            return []
        base = rel.rpartition("/")[2]
        near = view.by_basename.get(base) or view.misspelt(base)
        return sorted(near) if len(near) <= 3 else []

    def context(self, query: str, anchors: list[str] | None = None, draft: str | None = None, limit: int = 20,
                budget_tokens: int | None = None, kinds: list[str] | None = None,
                trace_file: str | Path | None = None) -> ContextAnswer:
        """The Python API's spelling of :meth:`answer` (keyword arguments instead of a request)."""
        # A pathlib.Path is a path here as in the constructor (it was refused: a newcomer, session 29).
        if isinstance(anchors, str | os.PathLike):
            # One path where a list goes was read as its letters ("anchors: 's' does not exist": a newcomer,
            # session 36): refused as the request refuses it, naming what to pass.
            raise RequestError("anchors", f"must be a list of non-empty paths or URIs, not one path: "
                                          f"anchors=[{os.fspath(anchors)!r}]")
        anchors = [os.fspath(a) if isinstance(a, os.PathLike) else a for a in anchors or []]
        req = ContextRequest(query=query, anchors=anchors, draft=draft, limit=limit,
                             budget_tokens=budget_tokens, kinds=kinds)
        return self.answer(req, trace_file=trace_file)

    def answer(self, req: ContextRequest, trace_file: str | Path | None = None) -> ContextAnswer:
        """Answer one validated request: ranked files with reasons (the ``delphi/context`` result)."""
        self._open_or_raise()
        t_start = time.perf_counter()
        anchors = [self.normalise_anchor(a) for a in req.anchors]
        query, cut = question_read_noted(req.query)
        r = self.retrieve(query, anchors, req.draft)
        sent = anchors  # the trace records what the caller sent; namedAnchor says what was implied
        if r.named_anchor is not None:  # a test question that names its file is asked around it
            anchors = [r.named_anchor]
        fused = self.retriever.order(r, query, anchors, req.kinds)
        # Spans (issue 17): `span_mode = "legacy"` keeps the old spans and packer for the benchmark.
        answered = self.retriever.results(r, fused, anchors, req.limit, self.root,
                                          legacy_spans=getattr(self, "span_mode", "scored") == "legacy")
        q = r.q
        out: ContextAnswer = {
            "results": answered.rows,  # type: ignore[typeddict-item]
            "query": {"shape": q.shape, "prefer": sorted(q.prefer), "avoid": sorted(q.avoid),
                      "terms": q.terms[:32], "identifiers": q.identifiers[:16], "literals": q.literals[:8],
                      "anchors": anchors, "draftUsed": bool(req.draft) and q.shape not in ("identifier", "trace"),
                      **({"namedAnchor": r.named_anchor} if r.named_anchor else {}),
                      **({"howTo": True} if q.how_to else {})},  # a request for instructions: a guide among the first
            "branchesReady": r.ready,
            "health": self.health_summary(r.state.vec_status, r.state.counts),
            "traceId": uuid.uuid4().hex[:16],
            "timingsMs": r.timings,
        }
        if (answered.rows and not anchors and not req.draft and not req.kinds
                and not any(r.lists.get(b) for b in WORD_BRANCHES)
                and all(state_of(r.ready.get(b, "off")) in (State.READY, State.OFF) for b in WORD_BRANCHES)):
            # No branch that matches the question's words or names found anything: a nonsense word or a name no
            # file has still gets the files nearest in meaning (and their graph neighbours), which read as an
            # answer unless said (an editor newcomer, session 25).
            out["query"]["meaningOnly"] = True
        # Said: a long paste is not searched whole (counted without colour codes, which are not searched; review).
        if cut is not None:
            out["query"]["cut"] = cut
        if not self.root.is_dir():  # moved or unmounted under a server: said with the answer, not only in health
            out["query"]["workspaceGone"] = str(self.root)
        if self.meta.get_state("snapshot_unchecked"):
            # Loaded from a snapshot and not yet compared with this checkout: the answer holds the snapshot's files
            # (another machine's, at another commit) until a run here has looked (a team newcomer, session 42).
            out["query"]["snapshotUnchecked"] = (self.meta.get_state("snapshot") or {}).get("file") or "a snapshot"
        # An anchor Delphi skipped (binary, too large) gave an answer around nothing, with nothing to say so (an
        # agents' newcomer, session 40); an editor sends the open file, so it is said, not refused.
        if unindexed := {a: why for a in anchors if (why := self.why_not_indexed(a))}:
            out["query"]["anchorsNotIndexed"] = unindexed
        running = self.indexing  # read once: the indexer thread sets it back to None when done
        if running is not None:
            out["indexing"] = running
        if req.budget_tokens:
            out["packed"], out["packedTokens"] = self.retriever.pack(r, answered, req.budget_tokens, self.root)
            if not out["packed"] and any(res["spans"] for res in out["results"]):
                # A budget no part of a ranked file fits in gave the list and no code, unsaid (an agents' newcomer,
                # session 38).
                out["query"]["packedNone"] = req.budget_tokens
        r.timings["total"] = round((time.perf_counter() - t_start) * 1000, 2)
        trace = trace_file or self.settings.trace_path(self.index_dir)  # settings: under the index folder
        if trace:
            try:
                write_trace(Path(trace), out, r.lists, r.weights,
                            {"query": query, "anchors": sent, "draft": req.draft, "limit": req.limit,
                             "budgetTokens": req.budget_tokens, "kinds": req.kinds})
                self.warnings.pop("trace_file", None)
            except OSError as e:
                # A trace that cannot be written (a folder, a read-only place) must not cost the answer: the
                # language server failed every question with -32603 (a newcomer, session 29). Health says why.
                if "trace_file" not in self.warnings:
                    log.warning("cannot write the trace to %s: %s", trace, e)
                self.warnings["trace_file"] = f"traces cannot be written to {trace}: {e.strerror or e}"
        return out

    def retrieve(self, query: str, anchors: list[str] | None = None, draft: str | None = None) -> Retrieval:
        """Every branch's list and their fusion, before any reranker (``anchors`` already normalised):
        the stores' state (counts, view, searcher, status lines) is read once for this query and handed
        to the retriever with the live manifest and lexical store."""
        anchors = anchors or []
        query = question_read(query)
        q = self._without_other_packages_frames(analyse(query, self.settings.clean_description))
        self._catch_up()
        indexing = self.indexing  # one read: the indexing thread sets it to None when it ends
        counts = self.meta.counts()
        ready_vec, vec_status = self.vector_status(counts)
        searcher = None
        if ready_vec:
            searcher = self.vectors if self._hnsw_answers(counts["vectors"]) else self._exact_vectors(counts["vectors"])
        view = self.view()
        indexed = self.is_indexed()
        state = IndexState(self.meta, self.lexical, view, counts, searcher, self.embedder if ready_vec else None,
                           vec_status, lexical_ready=indexed or bool(view.files),
                           partial=not indexed or (indexing is not None and indexing["phase"] == "lexical"),
                           cochange_status=self.cochange_status,
                           lexical_behind=self.problems.get("lexical_store") if self.lexical_switched_from else None,
                           grams_behind=health_mod.grams_status(self), docs_behind=health_mod.docs_status(self))
        return self.retriever.retrieve(q, state, anchors, draft)

    def _without_other_packages_frames(self, q: QueryInfo) -> QueryInfo:
        """A workspace that is a folder of a repository (a package opened on its own): a frame of a sibling folder
        (`packages/plugin-legacy/src/index.ts:210` in create-vite) named this folder's file of the same tail
        (`src/index.ts`, "holds line 210 of the trace"; a package-folder newcomer, session 39). A frame that passes
        through the folders above this one and then into another existing folder there names none of its files."""
        if not q.frames:
            return q
        if self._repo_lead is None:
            self._repo_lead = repository_above(self.root) or ()
        if not self._repo_lead:
            return q
        top, lead = self._repo_lead
        above, own = lead.split("/")[:-1], lead.split("/")[-1]
        if not above:
            return q  # a folder at the top (`pkg/`): any frame's first folder would look like a sibling

        def elsewhere(frame: str) -> bool:
            parts = frame.split("/")
            for j in range(len(parts) - len(above) - 1):
                if parts[j: j + len(above)] == above and parts[j + len(above)] not in (own, "", ".", ".."):
                    try:
                        return top.joinpath(*above, parts[j + len(above)]).is_dir()
                    except (OSError, ValueError):
                        return False
            return False

        gone = {f for f, _ln in q.frames if elsewhere(f)}
        if not gone:
            return q
        return dataclasses.replace(q, frames=[fr for fr in q.frames if fr[0] not in gone],
                                   paths=[p for p in q.paths if p not in gone and not elsewhere(p)])

    def candidates(self, query: str, anchors: list[str] | None = None, depth: int = 50,
                   passages: int = 0) -> list[dict[str, Any]]:
        """The fused window before any reranker, with each file's learned-ranker features (and, for the
        first ``passages`` files, the passage a cross-encoder would read): what the training tool records."""
        r = self.retrieve(query, [self.normalise_anchor(a) for a in (anchors or [])], None)
        return self.retriever.candidates(r, depth, passages)

    def _branch_failed(self, spec: BranchSpec, e: Exception) -> None:
        """A branch raised: a damaged Whoosh segment shows first as a failing search, so check it."""
        if Need.LEXICAL in spec.needs and "lexical_store" not in self.problems:
            # The term walk (1.8 s under the store's lock at 100k) at most every DEEP_CHECK_S: a branch that fails on
            # one odd question for another reason would otherwise walk at each (review, session 39).
            deep = time.monotonic() - self._deep_checked >= DEEP_CHECK_S
            if deep:
                self._deep_checked = time.monotonic()
            lex = self.lexical.check(deep=deep)
            if lex:
                self._lexical_damaged(lex)

    def content_version(self) -> tuple[str | None, str | None]:
        """What the index holds, as a token that moves with every file written (by any process): for what a front
        keeps derived from it (the language server's lenses)."""
        return self.meta.content_version()

    def definitions(self, path: str) -> list[SymbolRecord]:
        """The definitions in one indexed file, in line order (an editor's outline, lenses, hover)."""
        return self.meta.symbols_of(path)

    def chunks(self, path: str) -> list[ChunkRow]:
        """One indexed file's stored chunks in line order."""
        return self.meta.chunks_of(path)

    def kind_of(self, path: str) -> str | None:
        """The kind of an indexed file (code, test, doc, config, other), or None when it is not indexed."""
        return self.view().files.get(path)

    def files(self) -> list[tuple[str, str, int]]:
        """Every indexed file as (path, kind, chunk count), in path order."""
        return self.meta.files()

    def import_edges(self) -> list[tuple[str, str]]:
        """Every import the index recorded, as (importing file, imported specifier)."""
        return self.meta.all_imports()

    def embed_texts(self) -> list[str]:
        """What the model embeds for each stored chunk (benchmarks time the model alone on exactly these)."""
        return [embed_text(c) for c in self.meta.all_chunks()]

    def counts(self) -> dict[str, int]:
        """Files, chunks, vectors and symbols in the committed index."""
        self._open_or_raise()
        return self.meta.counts()

    def symbols(self, query: str, limit: int = 100) -> list[dict[str, Any]]:
        """Fuzzy workspace symbol search: exact, prefix, substring, then subsequence matches."""
        self._open_or_raise()
        if not isinstance(query, str):
            raise RequestError("query", "must be a string")
        if isinstance(limit, bool) or not isinstance(limit, int) or limit < 1:
            raise RequestError("limit", f"must be an integer from 1, got {limit!r}")
        # An empty query answers: LSP's workspace/symbol sends "" to list symbols (the CLI and MCP refuse it).
        ql = query.lower().strip()
        if not ql.isascii():
            # Full-width letters of an input method left in that mode (`ｐａｒｓｅ＿ｃｏｎｆｉｇ`), a name pasted decomposed
            # (macOS): as the code writes it (a newcomer, session 41).
            ql = unicodedata.normalize("NFC", ql.translate(FULL_WIDTH))
        table = self.view().symbols
        out: list[tuple[float, SymbolRecord]] = []
        # A qualified name as a trace or a review writes it (`OrderService.checkout`, `Polygon::area`,
        # `Invoice#total`, `pkg.mod.Class.method`): the member's name, in a container of that name. It matched
        # nothing (a newcomer, session 37); with no such member, the whole text is searched as before.
        qualified = _QUALIFIED.fullmatch(ql)
        searches = [(qualified.group(2), qualified.group(1)), (ql, None)] if qualified else [(ql, None)]
        for q, container in searches:
            scored = {name: score for name in table.names() if (score := _fuzzy(q, name)) is not None}
            table.fetch(scored)  # the matching names' definitions, a query per 500
            for name, score in scored.items():
                for d in table.get(name, ()):
                    if container is not None and not _contained(d.container, container):
                        continue
                    out.append((score + (0.1 if d.kind in ("class", "struct", "interface", "trait") else 0), d))
            if out:
                break
        out.sort(key=lambda x: (-x[0], len(x[1].name), x[1].path, x[1].line))
        return [{"name": d.name, "kind": d.kind, "path": d.path, "line": d.line, "endLine": d.end_line,
                 "container": d.container, "uri": (self.root / d.path).as_uri()} for _s, d in out[:limit]]

    def related_tests(self, path: str, symbol: str | None = None, limit: int = 10) -> list[dict[str, Any]]:
        """Tests for a source file (named after it, importing it, in a folder named after it, or using
        what it defines), or for one symbol in it (tests that name the symbol, the file's own first)."""
        check_limit(limit)
        self._open_or_raise()
        rel = self._indexed_path(path)
        ctx = SearchContext(self.settings, self.meta, self.lexical, None, None, self.view(), [rel])
        rows = related.related_tests(ctx, self.lexical, rel, symbol,
                                     limit if symbol is not None else max(limit, RELATED_POOL))
        if symbol is None and len(rows) > 1:
            # Which tests are related is the evidence's (a name, an import, a folder, a use, a shared history); their
            # order is the engine's answer to "which tests cover FILE" (every branch and the learned ranker): the
            # evidence's own order put a test that only mentions a name first and ranked the tests a change to the
            # file edits at MRR 0.465 on dev_mined's code2test, the engine asked the same at 0.614 (bench.related,
            # session 44). A file's own inline tests stay first.
            at = {p: i for i, p in enumerate(self._tests_for(rel))}
            rows.sort(key=lambda r: (r["path"] != rel, r.get("tier", 0), at.get(r["path"], len(at))))
        for r in rows:
            r.pop("tier", None)
        rows = rows[:limit]
        if symbol is not None and not rows:
            # "0 tests" for a name the file does not define read as "it has none" (an agent newcomer, session 26).
            # Only with no answer: a constant or a qualified name is no recorded definition, and its tests are found.
            names = list(dict.fromkeys(d.name for d in self.definitions(rel)))
            if symbol not in names:
                shown = ", ".join(names[:8]) + (", ..." if len(names) > 8 else "") if names else "none"
                raise RequestError("symbol", f"{rel} defines no {symbol!r} and no test names it (its definitions: "
                                             f"{shown})")
        return rows

    def _tests_for(self, rel: str) -> list[str]:
        """The engine's tests for ``rel``, best first: its fused and reranked answer to "which tests cover REL" with
        the file as the anchor (no spans made)."""
        query = f"which tests cover {rel}"
        r = self.retrieve(query, [rel])
        return [f.path for f in self.retriever.order(r, query, [rel], ["test"])]

    def related_code(self, test_path: str, limit: int = 10) -> list[dict[str, Any]]:
        """Source files a test exercises: named by it, imported by it (or through its helpers), in the
        folder it mirrors, defining names it uses, or changing together with it."""
        check_limit(limit)
        self._open_or_raise()
        rel = self._indexed_path(test_path)
        view = self.view()
        kind = view.files.get(rel, file_kind(rel))
        if kind != "test":  # a source file's answer would be its neighbours, not what it exercises
            # Front-neutral: the CLI's `related-tests` is the MCP tool `related_tests` (an agent newcomer, session 26).
            raise RequestError("path", f"{rel} is not a test file (kind: {kind}); the related code is asked of a "
                                       "test; for the tests of a source file ask for its related tests")
        ctx = SearchContext(self.settings, self.meta, self.lexical, None, None, view, [rel])
        return related.related_code(ctx, rel, limit)

    # ------------------------------------------------------------------ health
    def health_summary(self, vec_status: str, counts: dict[str, int]) -> dict[str, Any]:
        """The short health block every answer carries, from figures the query already has."""
        out: dict[str, Any] = {"ok": not self.problems and state_of(vec_status) in (State.READY, State.OFF),
                               "vector": vec_status, "reranker": self.reranker_status,
                               "files": counts["files"], "chunks": counts["chunks"], "vectors": counts["vectors"]}
        if self.problems:
            out["problems"] = sorted(self.problems.values())
        holder = self.writer_holder()
        if holder is not None:
            out["writer"] = holder.as_dict()  # answers come from the committed index meanwhile
        return out

    def _claim(self, buffers: dict[str, str], rep: IndexReport) -> None:
        """Say which of this index's rows now hold this process's buffers (stores/buffer_claims.py). A claim that
        cannot be written (a read-only index folder) costs only the protection from other processes' passes."""
        try:
            self.claims.claim({p for p in buffers if p not in rep.buffers_dropped})
        except OSError as e:
            log.debug("buffer claims not written: %s", e)

    def health(self, check_staleness: bool = True, full: bool = True, buffered: Collection[str] = ()) -> dict[str, Any]:
        """The health report. ``full`` (a `delphi health`, an LSP `delphi/health`): re-probe the model and
        open and check Chroma. Not full (what agents poll as `index_status`, diagnostics after each run):
        the last probe and what is open, so polling costs a few queries of the manifest. ``buffered``: the
        files an editor has open (indexed from its buffers), never stale."""
        self._open_or_raise()
        self._catch_up()
        # The report names the vector store, so Chroma is opened (queries may not have opened it): before the
        # view's lock, which a question waiting for its exact search would otherwise wait out (1.3 s).
        _ = self.vectors
        tracked = self._tracked_but_ignored() if full else None
        with self._lock:
            if full:
                self._probe = None  # a full health request always re-probes
                self.check_stores()
            # Another live process's unsaved buffers are no more stale here than its own are there.
            held = self.claims.held_elsewhere() if check_staleness else set()
            return health_mod.report(self, check_staleness, set(buffered) | held, tracked)

    def _tracked_but_ignored(self) -> list[str] | None:
        """Files git tracks that the ignore rules keep out of the index (workspace/tracked.py)."""
        found = tracked_but_ignored(self.root)
        if not found:
            return found
        have = self.meta.file_hashes(None if len(found) > 2000 else found)
        skipped = self.meta.skipped()
        return [p for p in found if p not in have and p not in skipped]

    def close(self) -> None:
        # A run in another thread stops at its next batch; closing under it would fail its writes.
        self.stop_indexing()
        got = self._index_lock.acquire(timeout=120)
        try:
            with self._lock, self._vectors_lock:  # an open of Chroma under way finishes, then is closed
                self._vectors_closed = True
                self.lexical.close()
                if self._vectors is not None:
                    self._vectors.close()
                self.meta.close()
                self.claims.close()
                self.writer.release()
                self._open_flock.close()
        finally:
            if got:
                self._index_lock.release()

    def index_replaced(self) -> bool:
        """Whether the manifest this engine opened is no longer the one on disk: the index folder removed
        (``rm -rf``), or ``meta.sqlite`` replaced. A long-running server went on reading and writing the deleted
        file, said "ready", and lost what it indexed at its restart (a newcomer, session 30). Or the manifest was
        found corrupt in use (overwritten in place): every question failed "malformed" until a restart."""
        return self.manifest_damaged or self.manifest_moved()

    @property
    def manifest_identity(self) -> tuple[int, int] | None:
        """The manifest file this engine opened ((device, inode)): whether it is still the one on disk."""
        return self._meta_identity

    def manifest_moved(self) -> bool:
        """Whether ``meta.sqlite`` on disk is no longer the file this engine opened (removed or replaced)."""
        try:
            return _file_identity(self.index_dir / "meta.sqlite") != self._meta_identity
        except OSError:
            return False  # cannot tell (the folder above cannot be entered): the walk says what is wrong

    def _open_or_raise(self) -> None:
        # An Engine used after its `with` block raised sqlite's "Cannot operate on a closed database" (a hostile
        # newcomer, session 28): said in words instead.
        if getattr(self, "_vectors_closed", False):
            raise EngineClosed(f"this Engine for {self.root} was closed (its `with` block ended, or close() was "
                               "called); open a new Engine(path)")

    def __enter__(self) -> Engine:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _file_type(path: Path) -> str:
    try:
        mode = os.stat(path).st_mode
    except OSError:
        return "not a file"
    for test, name in ((stat.S_ISFIFO, "a FIFO"), (stat.S_ISSOCK, "a socket"), (stat.S_ISCHR, "a character device"),
                       (stat.S_ISBLK, "a block device")):
        if test(mode):
            return name
    return "not a file"


_WITH_LINE = re.compile(r"(.+?):[0-9]+(?:[-:][0-9]+)?")  # a path and its line: `:12`, `:12:5`, `:12-40` (ours)
_QUALIFIED = re.compile(r"(\S*?[^.:#\s])(?:::|\.|#)([^.:#\s]+)")


def _contained(container: str | None, asked: str) -> bool:
    """``asked`` (lower-case, as written: `orderservice`, `com.acme.orderservice`) names ``container``."""
    c = (container or "").lower()
    return bool(c) and (asked == c or asked.endswith(("." + c, "::" + c)) or c.endswith(("." + asked, "::" + asked)))


def _fuzzy(q: str, name: str) -> float | None:
    if not q:
        return 0.5
    if name == q:
        return 4.0
    if name.startswith(q):
        return 3.0 - 0.01 * (len(name) - len(q))
    i = name.find(q)
    if i >= 0:
        return 2.0 - 0.01 * i
    it = iter(name)
    if all(ch in it for ch in q):
        return 1.0 - 0.01 * (len(name) - len(q))
    return None
