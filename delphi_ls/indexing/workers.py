"""Worker processes for the read + parse + chunk (+ tokenize) stage of a large index run (issue 18).

A cold index spends part of its time on work that needs no store: reading each file (without following
links), checking its bytes, hashing, decoding, the tree-sitter parse, chunking, symbols, imports, the
file's document for the filedoc branch and, for a store that takes them, the code tokens of each document. :func:`prepare_file` does all of that for one
file and returns what the writer needs; it is the same function in-process and in a worker, so the index
is the same either way. The parent stays the only writer of every store, in the order that makes a killed
run resume correctly (a batch's lexical documents committed before its files' manifest rows).

Workers are started with ``spawn`` (a fresh interpreter), never ``fork``: the parent holds SQLite,
Chroma and tantivy handles and threads, which a forked child would inherit in whatever state they were.
A worker must not outlive its parent: on Linux it asks the kernel for SIGKILL when its parent dies
(``PR_SET_PDEATHSIG``); everywhere, a thread in the worker checks once a second that its parent is
still the one that started it and exits otherwise (the only guard on macOS, where an orphaned worker
would otherwise wait on its task queue forever; on Windows ``os.getppid()`` does not change when the parent
dies, so this check would not see it: Delphi runs on POSIX systems only, fcntl and inotify too; review). Workers ignore Ctrl-C: the terminal
sends it to the whole process group, and the parent decides (it stops after the batch, as in-process).

A pool costs a process start-up (a fresh interpreter and these imports: 0.3 s until the first results),
so it is used only for runs with at least :data:`POOL_MIN_FILES` files to look at: an editor's save or a
watcher's event stays in-process.
"""

from __future__ import annotations

import contextlib
import ctypes
import hashlib
import multiprocessing
import multiprocessing.context
import os
import signal
import sys
import threading
import time
from collections import deque
from collections.abc import Iterator, Sequence
from concurrent.futures import Future, ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from dataclasses import dataclass, field
from multiprocessing import spawn
from pathlib import Path
from typing import Any

from ..core.notebooks import is_notebook
from ..stores.filedocs import FileDoc, build_doc, top_level_names
from ..stores.meta import ChunkRow
from ..workspace.indexed_text import indexed_text
from ..workspace.kinds import file_kind
from ..workspace.scan import SkipFile, byte_limit, content_skip_reason, read_no_follow, too_large
from ..workspace.secrets import in_words
from .chunker import chunk_file

# Runs with fewer files to look at than this stay in-process: a pool's start-up (0.3 s until the first
# results, ~0.15 s of CPU per worker) must never be paid by an editor's save, and it pays back only from a
# few hundred files (the work it moves is 1.5-4.5 ms a file: spring-boot's Java, black's Python).
POOL_MIN_FILES = 256
# Files per task sent to a worker: fewer round trips than one file each, small enough to share the
# work evenly and to keep the writer fed from the first batch.
TASK_FILES = 16
# Files prepared ahead of the writer at most: bounds the memory results waiting to be written take
# (a thousand-file batch of chunk texts and tokens, twice over), whatever the writer's speed.
WINDOW_FILES = 2000
PR_SET_PDEATHSIG = 1  # linux/prctl.h
WATCH_SECONDS = 1.0


@dataclass(frozen=True)
class Options:
    """What a worker needs from the settings and the store (plain values: sent to each worker once)."""

    max_file_bytes: int
    chunk_chars: int
    # Tokenize each document for the lexical store here (the store's ``field_tokens``), or leave it to
    # the store's own writer (Whoosh's analyzer runs inside its writer).
    tokens: bool = False
    # Build each file's document for the filedoc branch here (stores/filedocs.build_doc: a third of what
    # the other steps cost on spring-boot's Java, measured on 2,000 files), when the index keeps them.
    file_docs: bool = False


@dataclass
class Prepared:
    """One file as the writer needs it, or why it is not written."""

    path: str
    skip: str | None = None  # the reason the file is skipped (the same words as in-process)
    skip_for_bytes: bool = False  # the bytes decided the skip: the same bytes (size, mtime) need no new read
    unchanged: bool = False  # same bytes as the manifest's row: only its size and mtime are refreshed
    digest: str = ""
    replaced: bool = False  # decoded with replacement characters
    redacted: str = ""  # the secrets replaced in its text, in words (workspace/secrets.py)
    language: str = ""
    rows: list[ChunkRow] = field(default_factory=list)
    symbols: list[tuple[str, str, int, int, str]] = field(default_factory=list)
    imports: list[str] = field(default_factory=list)
    # Per lexical document (each row, or the one empty document of a file with no chunks): its content,
    # symbols and path fields as the store's tokens, when Options.tokens.
    tokens: list[tuple[str, str, str]] | None = None
    doc: FileDoc | None = None  # the file's document for the filedoc branch, when Options.file_docs


def embed_text_of(symbols: list[str], text: str) -> str:
    """What the embedding model reads for a chunk: its names (the module mark left out), then its text."""
    syms = " ".join(s for s in symbols if s != "<module>")
    return f"{syms}\n{text}" if syms else text


def chunk_id(path: str, ord_: int, content_hash: str) -> str:
    return hashlib.sha1(f"{path}\0{ord_}\0{content_hash}".encode()).hexdigest()[:24]


def empty_id(path: str) -> str:
    """The id of the one document of a file without chunks (all whitespace): it still exists for the path branch."""
    return chunk_id(path, 0, "empty")


def prepare_file(root: Path, path: str, opts: Options, old_digest: str | None = None,
                 data: bytes | None = None) -> Prepared:
    """Read (unless ``data`` is given: an editor's buffer), check, hash, decode and chunk one file.

    ``old_digest``: the manifest's hash of the file (None when it must be redone whatever its bytes);
    the same bytes give ``unchanged``. Pure: no store is touched, so it runs in any process."""
    if data is None:
        try:
            data = read_no_follow(root, path, byte_limit(path, opts.max_file_bytes))
        except SkipFile as e:
            return Prepared(path, skip=e.reason)
        except FileNotFoundError:
            return Prepared(path, skip="vanished during indexing")
        except OSError as e:
            return Prepared(path, skip=f"unreadable: {e.strerror}")
    reason = content_skip_reason(path, data)
    if reason:
        return Prepared(path, skip=reason, skip_for_bytes=True)
    digest = hashlib.sha1(data).hexdigest()
    if old_digest is not None and old_digest == digest:
        return Prepared(path, unchanged=True, digest=digest)
    read = indexed_text(path, data)
    text, replaced, found = read.text, read.replaced, read.found
    if len(data) > opts.max_file_bytes and is_notebook(path):
        # Only a notebook gets past the plain limit (scan.byte_limit), for outputs that are not indexed: its cells'
        # text is held to it, and one read as JSON (minified, nbformat 3; plots and all) is held to it whole.
        size = len(text) if read.notebook_view else len(data)
        if size > opts.max_file_bytes:
            return Prepared(path, skip=too_large(path, size, opts.max_file_bytes, read.notebook_view),
                            skip_for_bytes=True)
    cf = chunk_file(path, text, opts.chunk_chars, grammar_path=read.grammar_path)
    kind = file_kind(path)
    rows = []
    for n, c in enumerate(cf.chunks):
        # The hash of what is embedded (the chunk's names, then its text), which keys the embedding cache: keyed by
        # the text alone, a chunk that gained a name kept its old vector across an upgrade, and health's model
        # check, re-embedding it, found the vectors "from another model" (an upgrade newcomer, session 37).
        h = hashlib.sha1(embed_text_of(c.symbols, c.text).encode("utf-8", errors="replace")).hexdigest()
        rows.append(ChunkRow(chunk_id(path, n, h), path, n, c.start_line, c.end_line, c.symbols, kind, h, c.text))
    out = Prepared(path, digest=digest, replaced=replaced, redacted=in_words(found), language=cf.language, rows=rows,
                   symbols=[(s.name, s.kind, s.line, s.end_line, s.container) for s in cf.symbols],
                   imports=cf.imports)
    if opts.tokens:
        from ..stores.tantivy_store import field_tokens

        out.tokens = [field_tokens(r.text, r.symbols, path) for r in rows] or [field_tokens("", [], path)]
    if opts.file_docs:
        out.doc = build_doc(path, [r.text for r in rows], top_level_names(out.symbols), out.imports)
    return out


def _prepare_task(root: str, items: list[tuple[str, str | None]], opts: Options) -> list[Prepared]:
    """A worker's task: several files in order (top level: what a spawned worker can import by name)."""
    base = Path(root)
    return [prepare_file(base, path, opts, old) for path, old in items]


def _die_with_parent(parent_pid: int) -> None:
    """Worker initializer: never outlive the parent (module docstring), never take the terminal's Ctrl-C."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    if sys.platform.startswith("linux"):
        try:
            libc = ctypes.CDLL(None, use_errno=True)
            libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
        except (OSError, AttributeError):
            pass  # the watch thread below still ends an orphan, within a second
    if os.getppid() != parent_pid:  # the parent died before prctl took effect
        os._exit(1)

    def watch() -> None:
        while True:
            time.sleep(WATCH_SECONDS)
            if os.getppid() != parent_pid:
                os._exit(1)

    threading.Thread(target=watch, name="delphi-parent-watch", daemon=True).start()


def parent_death_guard() -> str:
    """How a worker is made to die with its parent here, in words (health and docs)."""
    if sys.platform.startswith("linux"):
        return "PR_SET_PDEATHSIG (SIGKILL when the parent dies) and a check of the parent each second"
    return "a check of the parent each second (no PR_SET_PDEATHSIG on this system)"


def describe(index_workers: int, vectors: bool = True) -> str:
    """What a large index run does with ``index_workers`` on this machine, in words (health's ``indexWorkers``)."""
    n = min(index_workers, os.cpu_count() or 1)
    if n <= 1:
        return f"in-process (index_workers = {index_workers}, {os.cpu_count() or 1} core(s))"
    embed = f", and {n} more at idle priority embedding their chunks beside them" if vectors else ""
    return (f"{n} worker processes for runs of {POOL_MIN_FILES}+ files (read, parse, chunk, tokenize; this process "
            f"writes every store){embed}; they end with this process: {parent_death_guard()}")


WORKER_NAME = "delphi-index-worker"


HANDOFF_SIGNALS = {signal.SIGINT, signal.SIGTERM}  # held while a pool starts a worker (_signals_held)


class WorkerDied(RuntimeError):
    """A worker process ended in the middle of a run (killed, out of memory, a crash in a parser)."""


class _WorkerProcess(multiprocessing.context.SpawnProcess):
    """A spawned worker that does not run the parent's main module again.

    ``spawn`` normally imports the parent's ``__main__`` in each child (so that functions defined there
    can be sent): a script calling ``Engine.index()`` without an ``if __name__ == "__main__"`` guard would
    index again in every worker (and wait there forever on the index's writer lock), and a heavy main
    module costs each worker its imports (``bench.perf``: 0.7 s). Everything a worker runs is in this
    module, so its preparation data leaves the main module out (:func:`_preparation_data`)."""

    def __init__(self, *args: object, **kwargs: object) -> None:
        super().__init__(*args, **kwargs)  # type: ignore[arg-type]
        self.name = f"{WORKER_NAME}-{self.name}"


class _WorkerContext(multiprocessing.context.SpawnContext):
    Process = _WorkerProcess  # type: ignore[assignment]


@contextlib.contextmanager
def _signals_held() -> Iterator[None]:
    """Ctrl-C (or SIGTERM) waits while a worker is started and registered: arriving in between, the parent
    left a child it had not handed its data, or one its pool did not know to wait for, and that child printed
    spawn's traceback (`EOFError: Ran out of input`, `FileNotFoundError` for a semaphore) under "delphi:
    interrupted" (1 run in about 50 of the Ctrl-C test, session 29). Held by a Python handler (a signal mask
    would not do: the kernel hands the signal to another thread, whose C handler still wakes the main one) and
    passed on to the handler before it on the way out. Python's handlers run in the main thread only."""
    # Blocked in the starting thread as well: a child starts with its parent's signal mask, the signals stay
    # blocked through its start and imports until its first code ignores Ctrl-C and unblocks them
    # (worker_start.py): a terminal's Ctrl-C reaches the workers too, and one in a worker's start printed its
    # traceback (session 44). The parent's own Ctrl-C meanwhile goes to another thread, or waits for the unblock.
    mask = getattr(signal, "pthread_sigmask", None)
    old_mask = mask(signal.SIG_BLOCK, HANDOFF_SIGNALS) if mask is not None else None
    if threading.current_thread() is not threading.main_thread():
        try:
            yield
        finally:
            if mask is not None and old_mask is not None:
                mask(signal.SIG_SETMASK, old_mask)
        return
    held: list[int] = []
    before = {sig: signal.signal(sig, lambda signum, _frame: held.append(signum)) for sig in HANDOFF_SIGNALS}
    try:
        yield
    finally:
        if mask is not None and old_mask is not None:
            mask(signal.SIG_SETMASK, old_mask)  # a signal that waited is taken by the handler that holds it
        for sig, handler in before.items():
            signal.signal(sig, handler)
        for signum in dict.fromkeys(held):
            handler = before[signum]
            if callable(handler):
                handler(signum, None)  # KeyboardInterrupt (Ctrl-C), the CLI's Terminated (SIGTERM)
            elif handler == signal.SIG_DFL:
                os.kill(os.getpid(), signum)


class WorkerPool(ProcessPoolExecutor):
    """The stdlib pool with each ``submit`` (which starts workers, registers them and starts the thread that
    ``shutdown(wait=True)`` joins to wait for them) done with the signals held (:func:`_signals_held`)."""

    def submit(self, fn: Any, /, *args: Any, **kwargs: Any) -> Future[Any]:
        with _signals_held():
            return super().submit(fn, *args, **kwargs)


_stdlib_preparation_data = spawn.get_preparation_data


def _preparation_data(name: str) -> dict[str, object]:
    d = _stdlib_preparation_data(name)
    if name.startswith(WORKER_NAME):
        d.pop("init_main_from_path", None)
        # Run as the worker's main module, before the imports the worker's task brings (worker_start.py says why).
        d["init_main_from_name"] = "delphi_ls.indexing.worker_start"
    return d


# Only this module's workers (by their name) are affected; every other spawned process is prepared as before.
if getattr(spawn.get_preparation_data, "__name__", "") != "_preparation_data":
    spawn.get_preparation_data = _preparation_data


class PreparePool:
    """Worker processes preparing files in order, at most :data:`WINDOW_FILES` ahead of the writer.

    ``stream`` yields one :class:`Prepared` per item, in the items' order (the writer's order is the
    in-process order). Items that carry their bytes (editor buffers) are prepared here, in turn."""

    def __init__(self, workers: int, root: Path, opts: Options) -> None:
        self.root = root
        self.opts = opts
        self.workers = workers
        self._pool = WorkerPool(max_workers=workers, mp_context=_WorkerContext(),
                                         initializer=_die_with_parent, initargs=(os.getpid(),))

    def stream(self, items: Sequence[tuple[str, str | None, bytes | None]]) -> Iterator[Prepared]:
        try:
            yield from self._stream(items)
        except BrokenProcessPool as e:
            # Killed from outside or out of memory: the run stops here as a crash would (what was
            # committed stays; the next run resumes), with the reason and the way around it.
            raise WorkerDied(f"an index worker process died ({e}); the next run resumes where this one "
                             "stopped; index_workers = 1 indexes in-process") from e

    def _stream(self, items: Sequence[tuple[str, str | None, bytes | None]]) -> Iterator[Prepared]:
        pending: deque[tuple[Future[list[Prepared]] | None, list[tuple[str, str | None, bytes | None]]]] = deque()
        ahead = 0
        i = 0
        while i < len(items) or pending:
            while i < len(items) and ahead < WINDOW_FILES:
                task = list(items[i: i + TASK_FILES])
                i += len(task)
                ahead += len(task)
                if any(d is not None for _p, _o, d in task):
                    pending.append((None, task))  # buffers: prepared here when their turn comes
                else:
                    pending.append((self._pool.submit(_prepare_task, str(self.root),
                                                      [(p, o) for p, o, _d in task], self.opts), task))
            fut, task = pending.popleft()
            ahead -= len(task)
            if fut is None:
                for p, o, d in task:
                    yield prepare_file(self.root, p, self.opts, o, d)
            else:
                yield from fut.result()

    def close(self) -> None:
        """Cancel what is not started and wait for the workers to exit (their CPU is then the parent's
        children's in getrusage)."""
        self._pool.shutdown(wait=True, cancel_futures=True)


def prepare_in_process(root: Path, opts: Options,
                       items: Sequence[tuple[str, str | None, bytes | None]]) -> Iterator[Prepared]:
    """The same stream as :meth:`PreparePool.stream`, in this process, one file when asked for."""
    for p, o, d in items:
        yield prepare_file(root, p, opts, o, d)
