"""Incremental indexing: scan, hash, chunk, write lexical, then embed.

Order matters for crash safety: a batch of files goes to Whoosh (old docs of
those paths deleted first) and is committed; only then are the files' rows
written to the manifest. Vectors come last, tracked per chunk, so a killed run
resumes where it stopped and ends with the same counts as an uninterrupted one.
"""

from __future__ import annotations

import contextlib
import logging
import os
import stat
import threading
import time
from collections.abc import Callable, Collection
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from ..core.formats import PARSER_VERSION  # defined there (delphi --version reads it); importable from here
from ..models.embedders import Embedder, ModelIdentity
from ..settings import Settings
from ..stores.filedocs import FILEDOCS_VERSION, FileDocs
from ..stores.lexical import LexicalStore
from ..stores.meta import ChunkRow, FileWrite, MetaStore
from ..stores.vectors import VectorStore
from ..workspace.kinds import file_kind
from ..workspace.roots import unreadable_reason
from ..workspace.scan import SKIP_RULES, FileEntry, ScanResult, scan, skip_reason
from . import embed_ahead
from .embed_ahead import EmbedAhead
from .graph import FileGraph
from .named import WalkNeeded, scan_named
from .workers import (
    POOL_MIN_FILES,
    Options,
    Prepared,
    PreparePool,
    chunk_id,  # noqa: F401  (importable from here, where it was defined before workers.py)
    embed_text_of,
    empty_id,
    prepare_in_process,
)

log = logging.getLogger(__name__)
Progress = Callable[[str, int, int, int], None]  # phase, done, total, chunks so far
BATCH_FILES = 1000  # files per lexical commit once the first small batches are in (issue 18: fewer, larger segments)
FIRST_BATCH_FILES = 25
# A large run whose vector pass follows adds its chunks to the trigram index during that pass, on a thread
# of its own (start_grams), not after each batch: the bulk build is about 14 s of CPU on spring-boot (session
# 17's profile), spent while the embedding processes wanted both cores. After the vector pass (until session
# 31) it ran on one core with the other idle: 3.3 s on spring-boot, 50 s at 100k files. Until it is done the
# trigram branch says it is partial (health.grams_status) and finds literals in what it holds; BM25, symbols
# and paths are complete at "lexical ready" as before.
GRAMS_AFTER_VECTORS = True
GRAMS_LATER_MIN_FILES = 1000
# Chunks a transaction of the trigram build beside the vector pass adds: that pass's writes wait for one
# at most (about 0.2 s; stores/meta.WriteTurns), and so does a stop (an editor closing).
GRAMS_APART_BATCH = 2000
# A run of at least this many files, and a third or more of the workspace, writes its file documents without
# their FTS5 triggers and builds that index once at its end (stores/filedocs.FileDocs.defer_fts), and its
# symbols without the name index (stores/meta.MetaStore.defer_name_index). Below, the per-row upkeep costs less
# than reading every row again.
DOCS_BULK_MIN_FILES = 1000
EMBED_BATCH = 256
# Tasks (of embed_ahead.TASK_CHUNKS chunks) each embedding process holds at most during the vector pass (and
# never more than embed_ahead.WINDOW_CHUNKS in all): enough that it does not run dry while this pass waits (its
# writes wait for a transaction of the trigram build beside it, seconds at the end of a 100k build). Where the two
# meet, the tasks the pool has handed to its processes (two a process and one more) cannot be cancelled and may be
# embedded twice: ~2,500 of the 100k workspace's 440k chunks at most. Memory: 16 x 512 chunks' texts and
# vectors a process, ~20 MB.
FEED_TASKS = 16
FED_ALL = -1  # _feed_ahead's cursor once nothing is left to feed
# Chunks a step of the vector pass reads, embeds (in calls of ``embed_batch``) and marks in one transaction: a
# step of 256 wrote 1,700 transactions at 100k files, each waiting its turn beside the trigram build (session 31).
VECTOR_PASS_ROWS = 2048
# Files whose manifest rows one transaction writes: one commit a file wrote the same index pages to the WAL
# again each time (py-spy on spring-boot: 6.9 -> 4.0 s of this process's CPU); a group bounds how long a
# query in this process waits for the lock (64 files: ~25 ms on spring-boot, 4.6 s over 181 groups).
# A vector deleted for a file of the group before its transaction (a stale chunk's) leaves that file's rows
# marked embedded if the transaction then fails: the next run deletes the same ids again and re-embeds.
WRITE_GROUP = 64
WRITE_GROUP_CHUNKS = 4096  # and at most this many chunks a group (64 large generated files hold the lock longer)


def _write_groups(prepared: list[tuple[FileEntry, Prepared]]) -> list[list[tuple[FileEntry, Prepared]]]:
    """``prepared`` cut into groups of at most WRITE_GROUP files and WRITE_GROUP_CHUNKS chunks (a file
    with more chunks than that is a group alone)."""
    groups: list[list[tuple[FileEntry, Prepared]]] = []
    size = 0
    for item in prepared:
        n = len(item[1].rows)
        if not groups or len(groups[-1]) >= WRITE_GROUP or size + n > WRITE_GROUP_CHUNKS:
            groups.append([])
            size = 0
        groups[-1].append(item)
        size += n
    return groups


@dataclass
class IndexReport:
    files_seen: int = 0
    files_indexed: int = 0
    files_unchanged: int = 0
    files_deleted: int = 0
    files_skipped: int = 0
    chunks_written: int = 0
    chunks_embedded: int = 0
    vectors_from_cache: int = 0
    # Of the chunks embedded, those embedded during the lexical pass by the low-priority embedding process
    # (indexing/embed_ahead.py); counted in vectors_from_cache too (the vector pass reads them from the cache).
    vectors_ahead: int = 0
    seconds_lexical: float = 0.0
    waited_s: float = 0.0  # for another process's run to end before this one could begin
    seconds_vectors: float = 0.0
    reembedded_all: bool = False
    errors: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)  # what went otherwise than planned without failing the run
    # Editor buffers not indexed, with the reason (ignored by the rules, too large, ...). Kept in
    # memory only: the path of an ignored file is not written to the index either.
    buffers_dropped: dict[str, str] = field(default_factory=dict)
    repaired: list[str] = field(default_factory=list)  # stores rebuilt before this run, in words
    vendored_changed: bool = False  # a walk found other projects' folders or `.gitattributes` lines changed


class WorkspaceGone(FileNotFoundError):
    """The workspace folder is not there (moved, removed, unmounted) or was replaced during a scan: the
    index is kept as it is, and brought up to date when the folder is back."""

    def __init__(self, root: Path) -> None:
        super().__init__(f"the workspace folder {root} is gone (moved, removed or unmounted); the index is kept "
                         "as it was and brought up to date when the folder is back")
        self.root = root


class WorkspaceUnreadable(WorkspaceGone):
    """The workspace folder is there but cannot be listed (its permissions changed): read as empty, every file
    left the index, and the edits made meanwhile stayed out after it was readable again (a newcomer, session 30).
    Treated as gone: nothing is written, and it is caught up when it can be read again."""

    def __init__(self, root: Path, why: str = "") -> None:
        why = why or unreadable_reason(root) or "it could be read a moment ago"
        FileNotFoundError.__init__(self, f"the workspace folder {root} cannot be read ({why}); the index is kept "
                                         "as it was and brought up to date when it can be read")
        self.root = root


def folder_readable(root: Path) -> bool:
    """Whether ``root`` is a folder this process can list (what a walk needs)."""
    return unreadable_reason(root) is None


def unwalkable(root: Path) -> WorkspaceGone | None:
    """What keeps the workspace folder from being walked: gone (moved, removed, unmounted) or unreadable."""
    if not os.path.isdir(root):
        return WorkspaceGone(root)
    why = unreadable_reason(root)
    return WorkspaceUnreadable(root, why) if why else None


def _folder_identity(root: Path) -> tuple[int, int] | None:
    try:
        st = os.stat(root)
    except OSError:
        return None
    return (st.st_dev, st.st_ino) if stat.S_ISDIR(st.st_mode) else None


def embed_text(row: ChunkRow) -> str:
    return embed_text_of(row.symbols, row.text)  # what row.content_hash is the hash of (workers.prepare_file)


class Indexer:
    def __init__(self, root: Path, settings: Settings, meta: MetaStore, lexical: LexicalStore,
                 vectors: VectorStore | None, embedder: Embedder | None, file_docs: bool = False) -> None:
        self.root = root
        self.settings = settings
        self.meta = meta
        self.lexical = lexical
        self.vectors = vectors
        self.embedder = embedder
        # Owe Chroma its writes (MetaStore.defer_chroma) instead of making them: an update of named paths
        # while the exact search answers queries (Engine.index); a full run or Engine.maintain pays them.
        self.defer_chroma = False
        self.changed: list[str] = []  # paths whose rows this indexer wrote or removed (Engine patches its views)
        # From the engine: the importers of the files whose importers an update of these paths may have
        # changed, from its in-memory file graph patched; None when only a whole graph will do.
        self.importers_after: Callable[[list[str], dict[str, list[str]]], dict[str, set[str]] | None] | None = None
        self.old_imports: dict[str, list[str]] = {}  # import specs of the files a named run rewrote, before it
        # One document per file beside the manifest (stores/filedocs.py), kept only while the filedoc branch
        # can run (``file_docs``, from the engine): off, they cost ~7% of a cold lexical pass for nothing.
        self.filedocs = FileDocs(meta) if file_docs else None
        # Embed a large run's new chunks beside its lexical pass (embed_ahead.py), set by the engine when the
        # run goes on to its vector pass; the process lives from the lexical pass to the vector pass.
        self.embed_ahead = False
        self._ahead: EmbedAhead | None = None
        # The chunks fed to the embedding processes during the vector pass, by content hash, until their vectors
        # come back (_feed_ahead; index_vectors marks them embedded then).
        self._fed: dict[str, list[ChunkRow]] = {}
        # Set by index_lexical when a large run leaves this run's chunks out of the trigram index until its
        # vector pass is done (the engine then calls ``finish_grams``): see GRAMS_AFTER_VECTORS.
        self.grams_owed = False
        self._grams_thread: threading.Thread | None = None

    # ------------------------------------------------------------------ lexical
    def index_lexical(self, progress: Progress | None = None, only: list[str] | None = None,
                      buffers: dict[str, str] | None = None, should_stop: Callable[[], bool] | None = None,
                      on_batch: Callable[[], None] | None = None, held: Collection[str] = ()) -> IndexReport:
        """``buffers``: unsaved editor text by path, indexed instead of the disk's bytes. ``held``: paths whose
        rows another live process wrote from its editor's buffer (stores/buffer_claims.py): left as they are."""
        t0 = time.perf_counter()
        rep = IndexReport()
        buffers, rep.buffers_dropped = self._admit_buffers(buffers or {})
        if only is not None and ".gitattributes" in only:
            # The top `.gitattributes` decides which files are generated (skipped) and vendored, whatever their
            # path: an edit to it (a save, a watcher's event) is a whole run's to apply (workspace/vendored.py).
            only = None
        result, stored = self._scan(only)
        if result.vendored is not None:
            rep.vendored_changed = self.meta.set_vendored(result.vendored.state())
        current = {f.path: f for f in result.files}
        for path in buffers:
            # A buffer of a file not yet saved is still what the user is working on.
            result.skipped.pop(path, None)
            current[path] = FileEntry(path, -1, -1)
        rep.files_seen = len(current)
        # An index written by an older parser is re-parsed once (chunks, symbols, imports); vectors
        # of unchanged chunks are reused, so this costs parsing, not embedding.
        written_by = self.meta.get_state("parser_version", 1)
        # A newer Delphi's index (an older editor or daemon still running beside it, or a downgrade): its files are
        # left as its chunker cut them and only changed files are indexed here; re-parsing them all made the two
        # versions undo each other at every full pass. `delphi index --rebuild` is the way back (health says so).
        newer = isinstance(written_by, int) and written_by > PARSER_VERSION
        reparse = only is None and written_by != PARSER_VERSION and not newer
        if not stored and (only is None or not self.meta.has_files()):
            # A new index: all it will hold is this parser's output, so say so now. Set only at the end,
            # a first run stopped by Ctrl-C was re-parsed whole by the next one instead of resuming. Not for a run
            # of named files into an index that has others (an editor's new file): their parser is not all's.
            self.meta.set_state("parser_version", PARSER_VERSION)
            if self.filedocs is not None:
                self.meta.set_state("filedocs_version", FILEDOCS_VERSION)
            reparse = False
        open_run = only is None and bool(self.meta.get_state("full_run_open"))
        if open_run and stored:
            # A run stopped before its end (Ctrl-C, a kill) is taken up where it stopped; the summary's "1431 indexed
            # (175 unchanged)" left that to be inferred (a newcomer, session 44). Its own state, set by a full run
            # with files to do until its clean end: an editor's save in between ends no full run (a review).
            rep.notes.append(f"resuming an index that stopped before its end: {len(stored)} files were indexed "
                             "already")
        if reparse:
            # `delphi index` after an upgrade said "indexed 158 files (0 unchanged ...)" and nothing of why (an
            # upgrade newcomer, session 37); `delphi index` prints a run's notes.
            rep.notes.append(f"every file is parsed again: the index was written by chunker version {written_by}, "
                             f"this Delphi's is {PARSER_VERSION} "
                             "(vectors of unchanged chunks are reused)")
        if newer and only is None:
            rep.notes.append(f"the index was written by a newer Delphi (chunker version {written_by}, this one's is "
                             f"{PARSER_VERSION}): only changed files are indexed, the rest kept as that version cut "
                             "them; stop this older Delphi, or to go back to it for good run `delphi index --rebuild`")
        if self.filedocs is None:
            if only is None:
                FileDocs(self.meta).drop()  # turned off: not kept stale (turned on again, a full run refills them)
            elif self.meta.get_state("filedocs_version") is not None:
                # Another process keeps file documents (its settings turn the branch on) and this one, with
                # the branch off, changes files without them: they are marked out of date, and that process's
                # next run remakes them from the manifest, instead of this one dropping them under it.
                self.meta.set_state("filedocs_version", None)
        else:
            self.filedocs.ensure(fresh=self.meta.get_state("filedocs_version") != FILEDOCS_VERSION)
        imports_moved = False  # a file's import names changed, or files came or went: importers to redo
        rebuilt_docs = False  # every file document written again: every one's importers to write

        # Rows written from another live process's unsaved buffer (size -1), not from this one's.
        held = {p for p in held if p not in buffers and p in stored and stored[p][1] == -1}
        deleted = sorted(set(stored) - set(current) - held)
        # A folder that cannot be listed (permissions changed for a moment) is not a folder whose files are gone.
        unlisted = tuple(f"{p}/" for p, why in result.skipped.items() if why.startswith("unreadable folder"))
        if unlisted:
            deleted = [p for p in deleted if not p.startswith(unlisted)]
        wanted = set(only or ())

        def named(p: str) -> bool:
            # A named folder stands for the files under it (a folder deleted, created or renamed in the editor).
            return only is None or p in wanted or any(p.startswith(w + "/") for w in wanted)

        if only is not None:
            deleted = [p for p in deleted if named(p)]
        if deleted:
            self._remove(deleted)
            rep.files_deleted = len(deleted)
            imports_moved = True

        skipped = dict(result.skipped)
        # Files skipped for their bytes, with the size and mtime they had: the same stat is not read again, while
        # the rules that decided it are these (SKIP_RULES: an update that changes them reads every such file again).
        rules_same = self.meta.get_state("skip_rules") == SKIP_RULES
        for_bytes = {} if reparse or not rules_same else self.meta.skipped_for_bytes(
            None if only is None else [p for p in current if named(p)])
        seen: dict[str, tuple[int, int]] = {}
        # Files another Delphi wrote (an older editor or daemon still running after an upgrade): parsed again by
        # a full run, whatever their stat says (stores/meta.py, ``parsed``).
        others = set() if reparse or only is not None else self.meta.parsed_by_other(PARSER_VERSION)
        todo = []
        for path, entry in current.items():
            # The same rule as for deletions: a named folder (created, or renamed into place) stands for
            # the files under it, or a watcher's folder event would delete the old files and index none.
            if not named(path):
                continue
            old = stored.get(path)
            if path in held:
                rep.files_unchanged += 1
                continue
            if old and old[1] == entry.size and old[2] == entry.mtime_ns and path not in buffers and not reparse \
                    and path not in others:
                rep.files_unchanged += 1
                continue
            known = for_bytes.get(path)
            if known and known[1:] == (entry.size, entry.mtime_ns) and path not in buffers and path not in stored:
                skipped[path] = known[0]
                seen[path] = known[1:]
                continue
            todo.append(entry)
        if result.vendored is not None and len(todo) > 1:
            # The project's own files first, other projects' code last: the walk's order put redis's `deps/` before
            # `src/`, and answers asked during a first index (another process's, an agent's first call) came all
            # from jemalloc's 567 files, each "ranked below the project's own files" that were not indexed yet (a
            # newcomer, session 44). A stable sort: within each part the walk's order, and batches stay folders.
            todo.sort(key=lambda e: result.vendored.is_vendored(e.path))

        if only is None and todo and not open_run:
            self.meta.set_state("full_run_open", True)  # (not by a poll that finds nothing to do: no write)
            open_run = True

        done = 0
        i = 0
        size = FIRST_BATCH_FILES
        # What each file needs (the manifest's hash, None when it must be redone whatever its bytes; an
        # editor buffer's bytes), prepared in this order in-process or by worker processes (workers.py).
        items = [(e.path, None if reparse or e.path not in stored or e.path in others else stored[e.path][0],
                  buffers.get(e.path)) for e in todo]
        if len(todo) > 1:
            # The trigram index takes this run's chunks in bulk after each batch (build_grams), not row by
            # row in each file's transaction: 15 of the 17 s of spring-boot's manifest writes (issue 18).
            # One file (a save) gains nothing by it: its chunks go in with its row, as before.
            self.meta.defer_grams()
        grams_later = GRAMS_AFTER_VECTORS and self.embed_ahead and len(todo) >= GRAMS_LATER_MIN_FILES
        if len(todo) >= GRAMS_LATER_MIN_FILES:
            self.meta.bulk_writes(True)  # until the run's end (Engine.index: bulk_writes(False))
        bulk = len(todo) >= DOCS_BULK_MIN_FILES and 3 * len(todo) >= len(current)
        if self.filedocs is not None and bulk:
            self.filedocs.defer_fts()  # built once from the rows at the end (stores/filedocs.py)
        self.grams_owed = False
        pool = self._pool(len(todo))
        stream = pool.stream(items) if pool is not None else prepare_in_process(self.root, self._options(), items)
        if pool is not None and self.embed_ahead and self.embedder is not None:
            self.close_ahead()  # one run's processes at a time
            try:
                self._ahead = EmbedAhead(self.settings.embedder, self.embedder.identity.weights_sha256, embed_text,
                                         processes=pool.workers)
            except Exception as e:  # cannot start processes (a limit on them, no memory): the vector pass embeds all
                log.warning("embedding beside the lexical pass not started: %s", e)
                rep.notes.append(f"embedding beside the lexical pass not started ({type(e).__name__}: {e}); "
                                 "the vector pass embedded every chunk in-process")
            except BaseException:
                pool.close()  # created before the try below, which closes it otherwise (Ctrl-C here)
                raise
        stopped = True
        held = contextlib.ExitStack()
        try:
            held.enter_context(self.lexical.run_writer())  # one lexical writer for the run's batches
            if bulk:
                self.meta.defer_name_index()  # built once at the end of this loop (stores/meta.py)
            while i < len(todo):
                if should_stop and should_stop():
                    rep.errors.append("stopped before the end; the next run resumes")
                    break
                # Small first batches: a cold start has something searchable within a second or two.
                batch = todo[i: i + size]
                i += size
                size = min(size * 2, BATCH_FILES)
                prepared: list[tuple[FileEntry, Prepared]] = []
                for entry in batch:
                    got = next(stream)
                    if got.skip is not None:
                        skipped[entry.path] = got.skip
                        if got.skip_for_bytes and entry.path not in buffers:
                            seen[entry.path] = (entry.size, entry.mtime_ns)
                    elif got.unchanged:
                        self.meta.touch_file(entry.path, entry.size, entry.mtime_ns)
                        rep.files_unchanged += 1
                    else:
                        prepared.append((entry, got))
                self._write_lexical([p for _e, p in prepared])
                # File documents before the manifest rows (a killed run redoes these files, documents too).
                if self.filedocs is not None:
                    imports_moved |= self.filedocs.put([p.doc for _e, p in prepared if p.doc is not None])
                if only is not None and self.importers_after is not None:
                    listed = [e.path for e, _p in prepared if e.path in stored]
                    self.old_imports.update({path: [] for path in listed} | self.meta.imports_of(listed))
                for group in _write_groups(prepared):
                    writes = []
                    for entry, p in group:
                        # A path the manifest does not list has no chunks there (a file's row and its chunks
                        # are written and removed in one transaction): nothing to reuse or delete, no queries.
                        reuse = self._reusable_vectors(entry.path, p.rows) if entry.path in stored else set()
                        writes.append(FileWrite(entry.path, p.digest, entry.size, entry.mtime_ns,
                                                file_kind(entry.path), p.language, p.rows, p.symbols, p.replaced,
                                                reuse, p.imports or [], p.redacted, PARSER_VERSION))
                    self.meta.replace_files(writes)
                    for w in writes:
                        rep.files_indexed += 1
                        rep.chunks_written += len(w.chunks)
                        self.changed.append(w.path)
                if prepared:
                    if not grams_later:
                        self.meta.build_grams(finish=False)  # queries find this batch's literals with its files
                    self._send_ahead([r for _e, p in prepared for r in p.rows])
                done += len(batch)
                if on_batch and prepared:  # only a batch that wrote something changes what queries see
                    on_batch()
                if progress:
                    progress("lexical", done, len(todo), rep.chunks_written)
            stopped = bool(rep.errors)
        finally:
            try:
                if pool is not None:
                    pool.close()
                if stopped:  # stopped or failed: no vector pass follows this run
                    self.close_ahead()
                # Every run, stopped or failed too (a lookup of a moment when present): lookups by name must not
                # scan the table from now on, and a run killed before building it (or one whose build failed)
                # left it to the next run, whatever its size.
                self.meta.finish_name_index()
            finally:
                held.close()  # whatever raised above (a Ctrl-C in pool.close): tantivy's writer is released
        # Whatever a stopped batch wrote, or a killed run left above the watermark: added now, before the
        # run says the lexical index is ready; then chunks are added row by row again (a no-op when the
        # trigram index holds every chunk and no run deferred it). A run whose vector pass follows adds
        # them after that pass instead (finish_grams).
        if grams_later:
            # Stopped (an editor closing during a first index): nothing now, the watermark stays and the next run
            # adds them first; building them here held the shutdown for most of a cold run's chunks (review).
            self.grams_owed = not stopped
        else:
            self.meta.build_grams()
        # Files skipped for content reasons that were indexed before must leave the stores.
        gone = [p for p in skipped if p in stored and p not in deleted and p not in buffers]
        if gone:
            self._remove(gone)
            rep.files_deleted += len(gone)  # removed from the index (now skipped): what queries read changed
            imports_moved = True
        if self.filedocs is not None and not rep.errors:
            if self.meta.get_state("filedocs_version") != FILEDOCS_VERSION:
                # An index from before file documents (or an older kind of them, or marked out of date by a
                # process with the branch off): filled from the manifest, by a save too (ensure() made the
                # tables fresh, so a named run would otherwise leave them holding the saved file alone).
                self.filedocs.rebuild_from_manifest()
                self.meta.set_state("filedocs_version", FILEDOCS_VERSION)
                imports_moved = rebuilt_docs = True
            if only is None and self.filedocs.prune():  # documents of files no longer listed
                imports_moved = True
        if self.filedocs is not None and imports_moved:
            # Who imports whom, redone only when some file's imports changed or files came or went. A save
            # that changed an import takes the engine's graph patched with its files (a whole graph resolved
            # every import of the workspace again: 1.6 s on spring-boot, ~8 s on the 100k workspace).
            touched = None
            if only is not None and self.importers_after is not None and not rebuilt_docs and not rep.files_deleted:
                touched = self.importers_after(list(dict.fromkeys(self.changed)), self.old_imports)
            if touched is not None:
                self.filedocs.set_importers(touched, only=set(touched))
            else:
                files = {p: k for p, k, _n in self.meta.files()}
                self.filedocs.set_importers(FileGraph.build(files, self.meta.all_imports()).imported_by)
        if self.filedocs is not None and not rep.errors:
            # Deferred by this run, or by one stopped before its end; a stopped run leaves it to the next.
            self.filedocs.finish_fts()
        if only is None and not rep.errors:
            self.meta.set_skipped(skipped, seen)
            self.meta.ensure_state("skip_rules", SKIP_RULES)
        else:
            # A partial run (some files, or a full run stopped early) adds what it saw, replacing nothing.
            for p, r in skipped.items():
                if only is None or p in only:
                    self.meta.add_skipped(p, r, seen.get(p))
        rep.files_skipped = len(skipped)
        self.lexical.refresh()
        if not rep.errors:
            self.meta.set_state("lexical_ready", True)
            if only is None and not newer:
                self.meta.set_state("parser_version", PARSER_VERSION)
            if only is None and not stopped and self.meta.get_state("snapshot_unchecked"):
                self.meta.set_state("snapshot_unchecked", None)  # every file compared with this checkout
            if open_run and not stopped:
                self.meta.set_state("full_run_open", None)
        self.meta.set_state("indexed_at", time.time())
        rep.seconds_lexical = time.perf_counter() - t0
        return rep

    def _scan(self, only: list[str] | None) -> tuple[ScanResult, dict[str, tuple[str, int, int]]]:
        """What is on disk and what the manifest holds: for the named paths only when the caller named
        them (an editor's save, a watcher's event): no walk of the tree, no read of every file's row
        (issue 18: the walk was 1.3-1.7 s of a one-file update on spring-boot). A named folder is walked."""
        before = _folder_identity(self.root)
        result = None
        if only is not None:
            try:
                result, stored = scan_named(self.root, only, self.settings), self.meta.file_hashes(only)
            except WalkNeeded:
                pass
        if result is None:
            result = scan(self.root, self.settings.max_file_bytes, self.settings.extra_ignores)
            stored = self.meta.file_hashes()
        if before is None or _folder_identity(self.root) != before:
            # The folder moved away (or was swapped) under the walk: what it saw is not the workspace, and
            # taken as such every file was deleted from the index (a `mv repo repo.old` for a few seconds
            # cost a full re-index; a hostile newcomer, session 28). Nothing is written; the next run redoes it.
            raise WorkspaceGone(self.root)
        why = result.skipped.get(".", "")
        if why.startswith("unreadable folder"):
            raise WorkspaceUnreadable(self.root, why.partition(": ")[2].lower())
        return result, stored

    def _admit_buffers(self, buffers: dict[str, str]) -> tuple[dict[str, bytes], dict[str, str]]:
        """The buffers that may be indexed, as UTF-8 bytes, and the others with the reason.

        A buffer is indexed only when the file it stands for would be (:func:`skip_reason`): an editor
        opens ignored secrets (``.env``), lockfiles and files outside the workspace too, and nothing of
        those may reach the index. Text that cannot be encoded (a lone surrogate is legal JSON) keeps
        its bytes as surrogate escapes and is decoded with replacement characters like any bad file.
        """
        ok: dict[str, bytes] = {}
        dropped: dict[str, str] = {}
        for path, text in buffers.items():
            if not isinstance(text, str):
                dropped[str(path)] = "buffer is not text"
                continue
            try:
                data = text.encode("utf-8")
            except UnicodeEncodeError:
                data = text.encode("utf-8", "surrogatepass")
            reason = skip_reason(self.root, path, self.settings, size=len(data))
            if reason:
                dropped[path if isinstance(path, str) else repr(path)] = reason
                continue
            ok[path] = data
        return ok, dropped

    def rebuild_lexical(self, progress: Progress | None = None, clear: bool = False) -> int:
        """Refill an emptied lexical store from the manifest's chunk texts (no file is re-read or
        re-parsed): the manifest is the source of truth, Whoosh is derived. Returns documents written.
        ``clear``: delete its documents in the same commit first (a sound store that is behind the
        manifest, which other processes may have open: its folder is not deleted under them)."""
        writer = self.lexical.writer()
        n = 0
        try:
            if clear:
                self.lexical.delete_all(writer)
            for rows in self.meta.iter_chunks():
                for r in rows:
                    self.lexical.add_chunk(writer, r.id, r.path, r.kind, r.text, r.symbols)
                n += len(rows)
                if progress:
                    progress("lexical", n, n, n)
            for path, kind in self.meta.empty_files():
                self.lexical.add_chunk(writer, empty_id(path), path, kind, "", [])
                n += 1
            writer.commit()
        except BaseException:
            writer.cancel()
            raise
        self.lexical.refresh()
        return n

    def _options(self) -> Options:
        return Options(self.settings.max_file_bytes, self.settings.chunk_chars,
                       tokens=bool(getattr(self.lexical, "takes_tokens", False)), file_docs=self.filedocs is not None)

    def _pool(self, files: int) -> PreparePool | None:
        """Worker processes for this run's read + parse + chunk stage, or None for in-process: one worker
        or fewer configured, or too few files to pay a pool's start-up (an editor's save never does)."""
        n = min(self.settings.index_workers, os.cpu_count() or 1)  # more workers than cores gain nothing
        if n <= 1 or files < POOL_MIN_FILES:
            return None
        return PreparePool(n, self.root, self._options())

    def _write_lexical(self, prepared: list[Prepared]) -> None:
        """One commit of the lexical store for a batch of prepared files (their old documents deleted first)."""
        if not prepared:
            return
        writer = self.lexical.writer()
        try:
            for p in prepared:
                kind = file_kind(p.path)
                self.lexical.delete_paths(writer, [p.path])
                # An all-whitespace file still exists for the path branch: one empty document.
                docs = [(r.id, r.text, r.symbols) for r in p.rows] or [(empty_id(p.path), "", [])]
                if p.tokens is not None:
                    for (cid, _text, _syms), toks in zip(docs, p.tokens, strict=True):
                        self.lexical.add_tokens(writer, cid, p.path, kind, *toks)  # type: ignore[attr-defined]
                else:
                    for cid, text, syms in docs:
                        self.lexical.add_chunk(writer, cid, p.path, kind, text, syms)
            # No merge at each batch: a merge re-writes every posting of the segments it takes, and
            # Whoosh's default policy merged again and again during a cold run (a fifth of spring-boot's
            # lexical pass). The run's end merges once, by tiers (finish_lexical).
            writer.commit(merge=False)
        except BaseException:
            writer.cancel()
            raise

    def start_grams(self, stop: threading.Event) -> None:
        """Begin adding the chunks index_lexical left out of the trigram index (``grams_owed``) on a thread of
        their own, beside the vector pass (MetaStore.build_grams_apart); ``finish_grams`` waits for it."""
        if not self.grams_owed or self._grams_thread is not None:
            return

        def build() -> None:
            try:
                self.meta.build_grams_apart(stop, GRAMS_APART_BATCH)
            except Exception as e:  # finish_grams adds what is left on this run's own connection
                log.warning("adding this run's chunks to the trigram index beside the vector pass: %s", e)

        self._grams_thread = threading.Thread(target=build, name="delphi-grams", daemon=True)
        self._grams_thread.start()

    def stop_grams(self) -> None:
        """Wait for start_grams's thread to end: done, or stopped after the batch in hand when its event is set."""
        t, self._grams_thread = self._grams_thread, None
        if t is None:
            return
        # A Ctrl-C inside `Thread.start()` (it waits for the new thread to say it runs) left a thread that join()
        # refuses, "cannot join thread before it is started", printed under "delphi: interrupted" (CI, session 44:
        # test_ctrl_c_at_any_point…, one run). Its start is waited for first.
        started = getattr(t, "_started", None)
        if started is not None and not started.wait(5):
            return
        t.join()

    def finish_grams(self) -> None:
        """The trigram index takes the chunks index_lexical left out of it (``grams_owed``): the thread
        start_grams began is waited for, and what it did not add (stopped, failed) is added here."""
        self.stop_grams()
        if self.grams_owed:
            self.meta.build_grams()
            self.grams_owed = False

    def finish_lexical(self, max_docs: int | None = None) -> int:
        """Merge the lexical segments that piled up (by tiers of like size): called once at the end of
        a run, after the vectors, so neither the lexical pass nor the vectors wait for it. Queries read
        the committed segments meanwhile. ``max_docs``: the most documents one tier's merge may take.
        Returns the number of segments merged."""
        return self.lexical.merge_tiers(max_docs=max_docs)

    def _reusable_vectors(self, path: str, rows: list[ChunkRow]) -> set[str]:
        """Chunk ids whose vectors are already in the store (same id = same path, place, content)."""
        if not rows:
            return set()
        old = set(self.meta.chunk_ids_of(path))
        new_ids = {r.id for r in rows}
        stale = sorted(old - new_ids)
        if stale and self.vectors is not None:
            self._delete_vectors(stale)
        return new_ids & self.meta.embedded_ids_of(path)

    def _remove(self, paths: list[str]) -> None:
        self.changed.extend(paths)
        ids = [i for p in paths for i in self.meta.chunk_ids_of(p)]
        writer = self.lexical.writer()
        try:
            self.lexical.delete_paths(writer, paths)
            writer.commit()
        except BaseException:
            writer.cancel()
            raise
        if self.vectors is not None and ids:
            self._delete_vectors(ids)
        if self.filedocs is not None:
            self.filedocs.remove(paths)
        self.meta.remove_files(paths)

    # ------------------------------------------------------------------ vectors
    def _send_ahead(self, rows: list[ChunkRow]) -> None:
        """Hand a written batch's chunks to the embedding process, and cache what it has sent back."""
        if self._ahead is None or self.embedder is None:
            return
        model = self.embedder.identity.weights_sha256
        self._ahead.submit(rows, lambda hashes: self.meta.cached_hashes(model, hashes))
        self._cache_ahead()

    def _cache_ahead(self) -> None:
        """Cache what the embedding processes have sent back (never waiting for them)."""
        got = self._ahead.collect() if self._ahead is not None else []
        if got and self.embedder is not None:
            self.meta.cache_vectors(self.embedder.identity.weights_sha256, got)

    def _feed_ahead(self, after: int) -> int:
        """During the vector pass, the embedding processes are kept busy with the oldest chunks not embedded
        above rowid ``after`` (this pass takes the newest first; the two meet once), at most FEED_TASKS tasks
        each in flight; returns the rowid fed up to. At 100k files the lexical pass's window (WINDOW_CHUNKS)
        filled while they were starved at idle priority, so they ran dry soon after the vector pass began and
        sat idle beside it while this process embedded alone, a core a quarter to a third idle (session 33)."""
        ahead = self._ahead
        if ahead is None or self.embedder is None or ahead.error is not None:
            return after
        room = ahead.window - ahead.in_flight
        if after == FED_ALL or room < embed_ahead.TASK_CHUNKS:
            return after
        model = self.embedder.identity.weights_sha256
        rows, last = self.meta.unembedded_after(after, room, model)
        ahead.submit(rows, lambda hashes: set())  # the query passed over the cached ones already
        for r in rows:  # marked embedded when their vectors come back (index_vectors)
            self._fed.setdefault(r.content_hash, []).append(r)
        if len(rows) < room:
            # None left to feed, now or later (no chunk is written during this pass, and one cached stays so):
            # asked again, the same query would pass over every cached chunk above the cursor at each step (a
            # large run over a warm cache: quadratic; a review).
            return FED_ALL
        return last

    def close_ahead(self, rep: IndexReport | None = None) -> None:
        """End the embedding process (what it has not sent back is embedded by a vector pass, if any)."""
        if self._ahead is None:
            return
        ahead, self._ahead = self._ahead, None
        ahead.close()
        if rep is not None:
            rep.vectors_ahead += ahead.embedded
        if ahead.error:
            # Not a run's error: the vector pass embeds the rest in-process, the same vectors, later.
            log.warning("embedding beside the lexical pass: %s", ahead.error)
            if rep is not None:
                rep.notes.append(f"embedding beside the lexical pass: {ahead.error}")

    def _delete_vectors(self, ids: list[str]) -> None:
        if self.defer_chroma:
            self.meta.defer_chroma(ids, "del")
        else:
            self.vectors.delete_ids(ids)  # type: ignore[union-attr]

    def flush_chroma(self, store: VectorStore) -> int:
        """Make the Chroma writes that updates of named paths left (from the embedding cache: nothing is
        embedded). Returns the writes made."""
        dels, adds = self.meta.chroma_pending()
        if dels:
            store.delete_ids(dels)
        model = self.embedder.identity.weights_sha256 if self.embedder is not None else None
        cached = self.meta.cached_vectors(model, sorted({r.content_hash for r in adds})) if model and adds else {}
        adds = [r for r in adds if r.content_hash in cached]
        for i in range(0, len(adds), EMBED_BATCH):
            part = adds[i: i + EMBED_BATCH]
            store.upsert([r.id for r in part], np.stack([cached[r.content_hash] for r in part]),
                         [r.path for r in part], [r.kind for r in part])
        # Every pending word is settled: made, or void (a 'del' of a chunk that is back, an 'add' of one
        # that is gone or no longer embedded, which the run that embeds it again owes anew).
        self.meta.clear_chroma_pending()
        return len(dels) + len(adds)

    def index_vectors(self, progress: Progress | None = None, rep: IndexReport | None = None,
                      should_stop: Callable[[], bool] | None = None,
                      grams_stop: threading.Event | None = None) -> IndexReport:
        """``grams_stop``: the trigram index this run owes is built beside this pass (start_grams), stopped by it."""
        rep = rep or IndexReport()
        if self.vectors is None or self.embedder is None:
            return rep
        t0 = time.perf_counter()
        ident = self.embedder.identity
        stored = self.meta.get_state("embedder")
        if stored is not None and stored != ident.as_dict():
            # A new model: vectors of the old one would compare as noise. Start over.
            self.vectors.reset()
            self.meta.reset_embedded()
            rep.reembedded_all = True
        self.meta.set_state("embedder", ident.as_dict())
        if grams_stop is not None:
            # After this pass's own writes above: the build's transactions follow each other closely, and a
            # write outside WriteTurns waits in SQLite's busy handler (a review, session 31).
            self.start_grams(grams_stop)
        if self._ahead is not None:
            self._ahead.end_lexical(min(embed_ahead.WINDOW_CHUNKS,
                                        FEED_TASKS * embed_ahead.TASK_CHUNKS * self._ahead.processes))
        total = self.meta.counts()["chunks"] - self.meta.counts()["vectors"]
        embedded_before = rep.chunks_embedded
        self._fed = {}
        # The embedding processes are fed the oldest chunks not embedded, after each step's write and once here
        # (fed after the write: a chunk whose vector just came back is cached by then, not sent again).
        fed = self._feed_ahead(0)  # the rowid up to which they were offered chunks during this pass
        while not (should_stop and should_stop()):
            # What the embedding processes finished meanwhile: cached, and the chunks fed to them marked
            # embedded, in this step's one transaction. Cached in a transaction of their own and marked when
            # this pass reached them, each step waited twice for a turn between the trigram build's batches,
            # and after the two ends met this process spent the pass's last 25-35 s marking the processes'
            # chunks, one core idle (100k workspace, py-spy and per-process CPU, sessions 33-34).
            ahead = dict(self._ahead.collect()) if self._ahead is not None else {}
            try:
                fed = self._vector_step(ident, ahead, fed, rep)
            except BaseException:
                if ahead:  # a step that failed (the model, Chroma) loses none of the processes' work
                    with contextlib.suppress(Exception):
                        self.meta.cache_vectors(ident.weights_sha256, list(ahead.items()))
                raise
            if fed is None:  # nothing left to mark: what came back last is only cached
                if ahead:
                    self.meta.cache_vectors(ident.weights_sha256, list(ahead.items()))
                break
            done = rep.chunks_embedded - embedded_before
            if progress:
                progress("vectors", done, max(total, done), done)
        self._fed = {}
        self.close_ahead(rep)
        rep.seconds_vectors += time.perf_counter() - t0
        return rep

    def _vector_step(self, ident: ModelIdentity, ahead: dict[str, np.ndarray], fed: int,
                     rep: IndexReport) -> int | None:
        """One step of the vector pass (index_vectors): the processes' vectors ``ahead`` cached and the chunks
        fed to them marked, the newest chunks not embedded embedded (or taken from the cache) and marked, in
        one transaction; then the processes fed. Returns the feed's cursor, or None when every chunk is embedded
        (then ``ahead`` is left to the caller)."""
        arrived = [r for h in ahead for r in self._fed.pop(h, ())]
        # With embedding processes still at work, from the other end: they take their tasks in the order
        # written, so a pass in that order reached each task as they did and embedded it again (spring-boot:
        # 43-45k embeddings for 35k distinct chunks, session 13). From the end, the two meet once.
        rows = self.meta.unembedded_keys(max(VECTOR_PASS_ROWS, self.settings.embed_batch),
                                         newest_first=self._ahead is not None)
        if not rows:  # every chunk is marked (the ones arrived too: they were not embedded, so read above)
            return None
        hashes = sorted({r.content_hash for r in rows} - ahead.keys())
        if self.defer_chroma:  # which are cached is enough: Chroma is written later, from the cache
            cached: dict[str, Any] = dict.fromkeys(self.meta.cached_hashes(ident.weights_sha256, hashes))
        else:
            cached = self.meta.cached_vectors(ident.weights_sha256, hashes)
        need: dict[str, str] = {}  # content hash -> the id of a chunk with that text
        for r in rows:
            if r.content_hash not in cached and r.content_hash not in ahead:
                need.setdefault(r.content_hash, r.id)
        fresh: list[tuple[str, np.ndarray]] = list(ahead.items())
        if need:
            if self._ahead is not None:
                self._ahead.cancel_for(need)  # embedded here: not again there, if not started
            # The texts of these alone: the others' vectors are cached or came from the processes.
            # (This run holds the writer lock: no chunk read above is deleted in between.)
            read = self.meta.chunks_by_ids(list(need.values()))
            texts = [embed_text(read[i]) for i in need.values()]
            step = max(1, self.settings.embed_batch)  # the model's calls stay this size (padding, memory)
            vecs = [v for i in range(0, len(texts), step) for v in self.embedder.embed(texts[i: i + step])]
            fresh += zip(need.keys(), vecs, strict=True)
        marking = list({r.id: r for r in (*rows, *arrived)}.values())
        ids = [r.id for r in marking]
        if not self.defer_chroma:  # Chroma written first: a kill before the commit leaves them unembedded
            if fresh:  # cached before, so that a Chroma that fails does not lose what was embedded
                self.meta.cache_vectors(ident.weights_sha256, fresh)
                cached.update(fresh)
                fresh = []
            mat = np.stack([cached[r.content_hash] for r in marking])
            self.vectors.upsert(ids, mat, [r.path for r in marking], [r.kind for r in marking])  # type: ignore[union-attr]
        marked = self.meta.store_embedded(ident.weights_sha256, fresh, ids, owe_chroma=self.defer_chroma)
        rep.vectors_from_cache += marked - len(need)  # a chunk whose text another embedded here: from cache
        rep.chunks_embedded += marked
        return self._feed_ahead(fed)
