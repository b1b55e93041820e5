"""Embedding a run's new chunks while the lexical pass is still writing (issue 18).

A large run used to embed in two steps: the lexical pass (this process writing every store, the worker
processes parsing), then the vector pass, where this process embedded every new chunk alone while the
workers sat idle. On spring-boot (2 cores) the lexical pass kept 1.55 cores busy and the vector pass
one: the embedding's 10 s came after the 21 s lexical pass, not beside it.

:class:`EmbedAhead` is a few more spawned processes (as many as the parse workers) at the lowest CPU
priority (``SCHED_IDLE`` on Linux, else ``nice 19``) that embed the chunks of each batch the lexical pass
wrote. They take the CPU the lexical pass leaves idle, so it keeps its pace; what they send back goes into
the manifest's embedding cache (keyed by the model's weights and the chunk's content hash, like every
cached vector). The vector pass then finds those vectors cached and only marks the chunks embedded; it
never waits for these processes: it embeds in-process what was never sent (the window was full), what they
had not started, or what is not back when it gets there. Nothing else changes: the cache is only a cache, so a run killed at any point leaves
a consistent index (the next run embeds what is not marked embedded, from the cache where it can).

spring-boot, 2 cores, ``bench.perf --quick`` (session 10): vectors complete 33.3-33.7 s -> 26.0-27.1 s,
lexical ready 20.6-20.8 s -> 21.2-21.9 s, 1.55 -> 1.93 cores used.

The vector pass feeds them too (session 33): at idle priority they are starved while the lexical pass keeps
both cores busy, so on a large workspace its window (WINDOW_CHUNKS) fills and later batches are left to the
vector pass. They used to get nothing more after the lexical pass, drain their window within seconds and sit
idle while this process embedded the rest alone; now that pass hands them the oldest chunks it has not
reached (``end_lexical``'s window) while it takes the newest.

Each process loads the same embedder by the same setting and proves it is the same model: its weights'
sha256 must equal this process's, or nothing it returns is used (the run's report says why, in ``notes``).
"""

from __future__ import annotations

import os
import time
from collections import deque
from collections.abc import Callable, Iterable
from concurrent.futures import Future, ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool

import numpy as np

from ..stores.meta import ChunkRow
from .workers import WorkerPool, _die_with_parent, _WorkerContext

# How the embedding processes yield to the lexical pass's writer and parse workers, so they take the CPU
# those leave idle, not theirs: Linux's SCHED_IDLE where there is one (the scheduler's lowest weight), else
# the lowest nice. Measured on spring-boot (2 cores): at nice 10 the lexical pass took 3 s (15%) longer.
NICE = 19
# Chunks sent and not yet back at most: bounds the texts and vectors in flight (~1.6 KB of text a chunk).
# A batch that would go past it is left to the vector pass, which embeds it in-process as before.
WINDOW_CHUNKS = 32768
TASK_CHUNKS = 512  # chunks per task: one embedding call's worth, in the order they were written
# How long the end of a run waits for the processes to finish the task in hand before killing them.
CLOSE_GRACE_S = 2.0

_embedder = None  # in the embedding process: the model, loaded once by the initializer


def _unblock(pool: ProcessPoolExecutor) -> None:
    """After its processes were killed: the result pipe's write end this process holds is closed, so a
    message a process died sending ends (the manager thread sees the pool broken and shuts it down), and the
    task queue's feeder is not joined at exit (it may be stuck writing to a pipe nobody reads). CPython's
    own attributes (3.9-3.13); absent ones are left alone."""
    writer = getattr(getattr(pool, "_result_queue", None), "_writer", None)
    try:
        if writer is not None:
            writer.close()
    except OSError:
        pass
    call_queue = getattr(pool, "_call_queue", None)
    if call_queue is not None and hasattr(call_queue, "cancel_join_thread"):
        call_queue.cancel_join_thread()


def _init(parent_pid: int, spec: str, nice: int) -> None:
    # First: every thread started from here on (the tokenizer's pool) inherits the policy and priority.
    try:
        os.sched_setscheduler(0, os.SCHED_IDLE, os.sched_param(0))  # type: ignore[attr-defined]
    except (AttributeError, OSError):
        try:
            os.nice(nice)
        except OSError:
            pass
    _die_with_parent(parent_pid)
    # One tokenizer thread per process: the processes are as many as the cores already (the tokenizer's own
    # pool, one thread per core in each, only oversubscribed them). Read when the pool first starts.
    os.environ["RAYON_NUM_THREADS"] = "1"
    os.environ["DELPHI_ONNX_THREADS"] = "1"  # the same for an ONNX model's thread pool (load_embedder reads it)
    global _embedder
    from ..models.embedders import load_embedder

    _embedder = load_embedder(spec)


def _embed(texts: list[str]) -> tuple[str, np.ndarray]:
    assert _embedder is not None
    return _embedder.identity.weights_sha256, _embedder.embed(texts)


class EmbedAhead:
    """Low-priority processes embedding chunks sent to them; what is done is taken back in the order sent,
    and nothing ever waits for them (review: at idle priority, a busy machine could starve them for as long
    as it stays busy, and the vector pass holds the writer's lock).

    As many as the run's parse workers: they share the idle CPU during the lexical pass. When it ends they
    go on with their tasks in the order sent, fed the oldest chunks not embedded, while the vector pass embeds
    from the newest chunk back; it takes their results as they come, and before it embeds chunks they still
    hold it cancels those tasks if not started (the last sent, which they would reach last): the two meet
    once, the last vectors are made on every core, and nothing waits for an idle-priority process. (In the order written, the vector
    pass reached each task as they did and embedded it again: 40-45k embeddings for spring-boot's 35k
    distinct chunks in some runs, session 13.)"""

    def __init__(self, spec: str, weights_sha256: str, embed_text: Callable[[ChunkRow], str],
                 processes: int = 1, nice: int = NICE) -> None:
        self.sha = weights_sha256
        self.embed_text = embed_text
        self.processes = processes
        self.window = WINDOW_CHUNKS  # chunks in flight at most (end_lexical)
        self._pool = WorkerPool(max_workers=processes, mp_context=_WorkerContext(), initializer=_init,
                                         initargs=(os.getpid(), spec, nice))
        self._pending: deque[tuple[Future[tuple[str, np.ndarray]], list[str]]] = deque()
        # Content hashes sent and not taken back yet; with the cache, what makes equal chunks embedded once.
        self._flying: set[str] = set()
        self._stopped = False
        self.embedded = 0  # vectors taken back and usable
        self.error: str | None = None  # why results stopped being used, in words

    @property
    def in_flight(self) -> int:
        """Chunks sent and not taken back yet."""
        return len(self._flying)

    def end_lexical(self, window: int) -> None:
        """The lexical pass has sent its last batch: from now on the vector pass feeds the processes the
        oldest chunks it has not reached, at most ``window`` in flight (what they hold goes on meanwhile)."""
        self.window = window

    def submit(self, rows: list[ChunkRow], cached: Callable[[list[str]], set[str]]) -> None:
        """Send the chunks of ``rows`` whose vector is neither cached (``cached``: the hashes of those
        given that the embedding cache holds) nor in flight, unless that would put more than ``window``
        chunks in flight (the vector pass embeds those)."""
        if self.error is not None or self._stopped:
            return
        fresh: dict[str, ChunkRow] = {}
        for r in rows:
            if r.content_hash not in self._flying:
                fresh.setdefault(r.content_hash, r)
        if not fresh:
            return
        have = cached(list(fresh))
        todo = [r for h, r in fresh.items() if h not in have]
        if len(self._flying) + len(todo) > self.window:
            return  # the window is full: the vector pass embeds these
        for i in range(0, len(todo), TASK_CHUNKS):
            part = todo[i: i + TASK_CHUNKS]
            try:
                fut = self._pool.submit(_embed, [self.embed_text(r) for r in part])
            except BrokenProcessPool as e:  # died since the last batch: the vector pass embeds the rest
                self._fail(f"the embedding process failed ({type(e).__name__}: {e}); the rest was embedded in-process")
                return
            self._pending.append((fut, [r.content_hash for r in part]))
            self._flying.update(r.content_hash for r in part)

    def collect(self) -> list[tuple[str, np.ndarray]]:
        """(content hash, vector) of every task done, in the order sent (a task still running holds up
        none after it: when one of several was, the vector pass embedded chunks already done; session 10)."""
        out: list[tuple[str, np.ndarray]] = []
        done: list[tuple[Future[tuple[str, np.ndarray]], list[str]]] = []
        keep: deque[tuple[Future[tuple[str, np.ndarray]], list[str]]] = deque()
        for task in self._pending:  # one look at each: one that finishes meanwhile waits for the next call
            (done if task[0].done() else keep).append(task)
        self._pending = keep
        for fut, hashes in done:
            self._flying.difference_update(hashes)
            if fut.cancelled():
                continue
            try:
                sha, vecs = fut.result()
            except Exception as e:  # the process died or the model failed: the vector pass embeds the rest
                self._fail(f"the embedding process failed ({type(e).__name__}: {e}); the rest was embedded in-process")
                break
            if sha != self.sha:
                self._fail(f"the embedding process loaded other weights (sha256 {sha[:12]}, this process "
                           f"{self.sha[:12]}); its vectors were not used")
                break
            out.extend(zip(hashes, vecs, strict=True))
        self.embedded += len(out)
        return out

    def stop(self) -> None:
        """Send nothing more (the results are not used, or the run ends)."""
        self._stopped = True

    def cancel_for(self, hashes: Iterable[str]) -> None:
        """The vector pass is about to embed these itself: the tasks holding any of them that have not
        started are cancelled (a started one finishes; its vectors are the same, cached twice at worst)."""
        want = set(hashes)
        for fut, held in self._pending:
            if not want.isdisjoint(held):
                fut.cancel()

    def _fail(self, why: str) -> None:
        """Use nothing more from the processes: what they still hold is cancelled or left to finish unread."""
        if self.error is None:
            self.error = why
        self.stop()
        for fut, _held in self._pending:
            fut.cancel()
        self._pending.clear()
        self._flying.clear()

    def close(self) -> None:
        """End the processes: what they still hold is only a cache's worth (the vector pass has embedded it
        in-process, or a later run will). Each finishes the task in hand (a fraction of a second) and exits;
        one that has not within CLOSE_GRACE_S (stopped, or starved at idle priority) is killed.

        Killed at once (session 10), a process could die halfway through sending its result: the pool's
        manager thread then waited for the rest of that message for ever, and the run with it (a 600 s
        timeout in the suite, session 11). After a kill, the pipes' ends this process holds are closed so its
        threads see the end of them instead."""
        self.stop()
        for fut, _held in self._pending:
            fut.cancel()
        procs = list((getattr(self._pool, "_processes", None) or {}).values())
        self._pool.shutdown(wait=False, cancel_futures=True)
        deadline = time.monotonic() + CLOSE_GRACE_S
        for proc in procs:
            proc.join(max(0.0, deadline - time.monotonic()))
        left = [proc for proc in procs if proc.is_alive()]
        for proc in left:
            proc.kill()  # SIGKILL: a stopped (SIGSTOP) or starved process ends too
        for proc in left:
            proc.join(5)
        if left:
            _unblock(self._pool)
        self._pending.clear()
        self._flying.clear()
