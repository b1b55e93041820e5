"""Issue 18: a large run's new chunks embedded beside its lexical pass (delphi_ls/indexing/embed_ahead.py).

Real files, the real potion model in real spawned processes, real stores. What must hold: the vectors are
the ones an in-process run makes (the same cache rows, byte for byte, every chunk marked embedded); a
process that loaded other weights, or died, has none of its vectors used and the run still completes,
saying so; an editor's save starts no such process; the processes are gone when the run ends.
"""

from __future__ import annotations

import os
import signal
import sqlite3
from concurrent.futures import wait
from pathlib import Path

import pytest

from delphi_ls import Engine
from delphi_ls.indexing import embed_ahead, pipeline, workers
from tests.calls import Calls
from tests.test_index_workers import _alive, _many_languages

pytestmark = pytest.mark.skipif((os.cpu_count() or 1) < 2, reason="worker processes need two cores")


def _vectors(index_dir: Path) -> tuple[dict[str, bytes], list[tuple[str, int]]]:
    db = sqlite3.connect(index_dir / "meta.sqlite")
    try:
        cache = dict(db.execute("SELECT content_hash, vec FROM embed_cache"))
        marks = db.execute("SELECT id, rowid NOT IN (SELECT rid FROM unembedded) FROM chunks ORDER BY id").fetchall()
        return cache, marks
    finally:
        db.close()


@pytest.fixture
def ws(tmp_path: Path, monkeypatch) -> Path:
    monkeypatch.setattr(pipeline, "POOL_MIN_FILES", 1)  # this small workspace uses the pools too
    return _many_languages(tmp_path / "ws", 60)


class Patient(embed_ahead.EmbedAhead):
    """As if the lexical pass had lasted until the processes were done (a real one on a workspace this small
    ends before they have loaded the model, and the vector pass, which never waits, embeds everything)."""

    def end_lexical(self, window: int) -> None:
        wait([fut for fut, _held in self._pending], timeout=120)
        super().end_lexical(window)


def test_vectors_embedded_beside_equal_the_in_process_ones(ws: Path, tmp_path: Path, monkeypatch):
    made = Calls(Patient)
    monkeypatch.setattr(pipeline, "EmbedAhead", made)
    monkeypatch.setattr(embed_ahead, "TASK_CHUNKS", 16)  # several tasks, taken back in turn
    reports = {}
    for n in (1, 2):
        with Engine(ws, index_dir=str(tmp_path / f"idx{n}"), index_workers=n) as eng:
            reports[n] = eng.index()
            assert eng.context("where is the retry backoff computed?")["results"]
    assert made.n == 1  # the run with workers only
    one, two = _vectors(tmp_path / "idx1"), _vectors(tmp_path / "idx2")
    assert one == two and one[0] and all(e == 1 for _i, e in one[1])
    assert reports[1].vectors_ahead == 0 and reports[2].vectors_ahead > 0 and not reports[2].notes
    # Every distinct chunk was embedded once, beside the lexical pass or (none left here) in the vector pass.
    assert reports[2].vectors_ahead == len(two[0])
    assert reports[1].chunks_embedded == reports[2].chunks_embedded == len(one[1])


def test_the_vector_pass_feeds_the_processes_what_the_lexical_window_left(ws: Path, tmp_path: Path, monkeypatch):
    """At 100k files the lexical pass's window filled while the processes were starved, and they sat idle beside
    the vector pass (session 33). Now that pass hands them the oldest chunks it has not reached while it takes
    the newest: here the lexical window holds one task, and the processes still embed most chunks."""
    class Lockstep(Patient):
        def collect(self):  # type: ignore[no-untyped-def]
            # As if this process embedded slowly: what was sent is back before each step of the vector pass.
            wait([fut for fut, _held in self._pending], timeout=120)
            return super().collect()

    made = Calls(Lockstep)
    monkeypatch.setattr(pipeline, "EmbedAhead", made)
    monkeypatch.setattr(embed_ahead, "TASK_CHUNKS", 16)
    monkeypatch.setattr(embed_ahead, "WINDOW_CHUNKS", 16)
    monkeypatch.setattr(pipeline, "VECTOR_PASS_ROWS", 16)
    from delphi_ls.stores.meta import MetaStore

    read, real = [], MetaStore.unembedded
    monkeypatch.setattr(MetaStore, "unembedded", lambda self, *a, **k: (lambda rows: (read.extend(rows), rows)[1])(
        real(self, *a, **k)))
    with Engine(ws, index_dir=str(tmp_path / "idx"), index_workers=2, embed_batch=16) as eng:
        rep = eng.index()
        counts = eng.meta.counts()
    assert made.n == 1 and not rep.notes and not rep.errors
    assert counts["vectors"] == counts["chunks"] > 100 and rep.chunks_embedded == counts["chunks"]
    # The lexical window holds 16; the rest the processes embedded were fed by the vector pass (it takes the
    # newest 16 a step while they take the oldest, up to 2 x 16 x 16 in flight).
    assert rep.vectors_ahead > counts["chunks"] // 3, (rep.vectors_ahead, counts)
    # The chunks fed to them were marked embedded as their vectors came back: the pass did not reach them
    # (it read every chunk once before, session 33, and marked the processes' ones last, a core idle).
    assert len({r.id for r in read}) == len(read) < counts["chunks"] - rep.vectors_ahead // 2, (len(read), counts)
    with Engine(ws, index_dir=str(tmp_path / "ref"), index_workers=1) as eng:
        eng.index()
    assert _vectors(tmp_path / "idx") == _vectors(tmp_path / "ref")


def test_the_feed_asks_once_when_every_chunk_is_cached(ws: Path, tmp_path: Path, monkeypatch):
    """A large run over a warm cache: nothing to feed. The feed's query passes over every cached chunk above its
    cursor, so asked again at each step it would read them all again (quadratic; a review)."""
    from delphi_ls.indexing.pipeline import FED_ALL, embed_text
    from delphi_ls.stores.meta import MetaStore

    with Engine(ws, index_dir=str(tmp_path / "idx"), index_workers=2) as eng:
        eng.index()
        eng.meta.reset_embedded()  # every chunk to mark again, every vector cached
        asked, real = [], MetaStore.unembedded_after
        monkeypatch.setattr(MetaStore, "unembedded_after", lambda self, *a: (asked.append(a), real(self, *a))[1])
        ix = eng._indexer()
        ix._ahead = embed_ahead.EmbedAhead(eng.settings.embedder, eng.embedder.identity.weights_sha256, embed_text)
        try:
            ix._ahead.end_lexical(4 * embed_ahead.TASK_CHUNKS)
            assert ix._feed_ahead(0) == FED_ALL and len(asked) == 1
            assert ix._feed_ahead(FED_ALL) == FED_ALL and len(asked) == 1
            assert ix._ahead.in_flight == 0
        finally:
            ix.close_ahead()


def test_other_weights_are_refused_and_the_run_still_completes(ws: Path, tmp_path: Path, monkeypatch):
    class Mistaken(Patient):
        def __init__(self, spec, sha, *a, **k):  # type: ignore[no-untyped-def]
            super().__init__(spec, "f" * 64, *a, **k)  # as if the process had loaded another model

    monkeypatch.setattr(pipeline, "EmbedAhead", Mistaken)
    with Engine(ws, index_dir=str(tmp_path / "idx"), index_workers=2) as eng:
        rep = eng.index()
        counts = eng.meta.counts()
    assert rep.vectors_ahead == 0 and not rep.errors
    assert any("loaded other weights" in n and "not used" in n for n in rep.notes), rep.notes
    assert counts["vectors"] == counts["chunks"] > 0
    with Engine(ws, index_dir=str(tmp_path / "ref"), index_workers=1) as eng:
        eng.index()
    assert _vectors(tmp_path / "idx") == _vectors(tmp_path / "ref")


def test_a_killed_embedding_process_leaves_the_vectors_to_the_vector_pass(ws: Path, tmp_path: Path, monkeypatch):
    pids: list[int] = []

    class Killed(Patient):
        def submit(self, rows, cached):  # type: ignore[no-untyped-def]
            super().submit(rows, cached)
            procs = list((self._pool._processes or {}).values())  # type: ignore[attr-defined]
            if procs and not pids:
                pids.extend(p.pid for p in procs)
                for pid in pids:
                    os.kill(pid, signal.SIGKILL)

    monkeypatch.setattr(pipeline, "EmbedAhead", Killed)
    with Engine(ws, index_dir=str(tmp_path / "idx"), index_workers=2) as eng:
        rep = eng.index()
        counts = eng.meta.counts()
    assert pids and not any(_alive(p) for p in pids)
    assert not rep.errors and any("embedding process failed" in n for n in rep.notes), rep.notes
    assert counts["vectors"] == counts["chunks"] > 0
    with Engine(ws, index_dir=str(tmp_path / "ref"), index_workers=1) as eng:
        eng.index()
    assert _vectors(tmp_path / "idx") == _vectors(tmp_path / "ref")


def test_no_process_for_a_save_a_lexical_only_run_or_a_run_without_vectors(ws: Path, tmp_path: Path, monkeypatch):
    made = Calls(embed_ahead.EmbedAhead)
    monkeypatch.setattr(pipeline, "EmbedAhead", made)
    with Engine(ws, index_dir=str(tmp_path / "idx"), index_workers=2) as eng:
        eng.index(vectors=False)  # the lexical pass alone (a query's catch-up with vectors off)
        assert made.n == 0
        monkeypatch.setattr(pipeline, "POOL_MIN_FILES", workers.POOL_MIN_FILES)  # as shipped, for the save
        (ws / "gen" / "p0" / "mod0.py").write_text("def saved():\n    return 'zebracrossing'\n")
        rep = eng.index(only=["gen/p0/mod0.py"])  # a save: in-process, no pool
        assert rep.files_indexed == 1 and made.n == 0
    monkeypatch.setattr(pipeline, "POOL_MIN_FILES", 1)
    with Engine(ws, index_dir=str(tmp_path / "novec"), index_workers=2, vectors=False) as eng:
        eng.index()
    assert made.n == 0


def test_the_processes_end_with_the_run(ws: Path, tmp_path: Path, monkeypatch):
    seen: list[int] = []

    class Watched(embed_ahead.EmbedAhead):
        def close(self) -> None:
            seen.extend(p.pid for p in (self._pool._processes or {}).values())  # type: ignore[attr-defined]
            super().close()

    monkeypatch.setattr(pipeline, "EmbedAhead", Watched)
    with Engine(ws, index_dir=str(tmp_path / "idx"), index_workers=2) as eng:
        eng.index()
        assert seen and not any(_alive(p) for p in seen)


def test_the_vector_pass_never_waits_for_a_process_that_does_not_run(ws: Path, tmp_path: Path, monkeypatch):
    """Review 10: at idle priority a busy machine can starve these processes indefinitely, and the vector
    pass holds the writer's lock. Here they are stopped outright (SIGSTOP) with work in hand: the run still
    ends, with every vector made in-process, and the stopped processes are ended with it."""
    import threading

    stopped: list[int] = []

    class Frozen(embed_ahead.EmbedAhead):
        def submit(self, rows, cached):  # type: ignore[no-untyped-def]
            super().submit(rows, cached)
            for p in (self._pool._processes or {}).values():  # type: ignore[attr-defined]
                if p.pid not in stopped:
                    os.kill(p.pid, signal.SIGSTOP)
                    stopped.append(p.pid)

    monkeypatch.setattr(pipeline, "EmbedAhead", Frozen)
    done: dict[str, object] = {}

    def run() -> None:
        with Engine(ws, index_dir=str(tmp_path / "idx"), index_workers=2) as eng:
            done["rep"] = eng.index()
            done["counts"] = eng.meta.counts()

    t = threading.Thread(target=run, daemon=True)
    t.start()
    t.join(120)
    assert not t.is_alive(), "the run waited for stopped embedding processes"
    assert stopped and not any(_alive(p) for p in stopped)
    counts = done["counts"]
    assert counts["vectors"] == counts["chunks"] > 0  # type: ignore[index]
    with Engine(ws, index_dir=str(tmp_path / "ref"), index_workers=1) as eng:
        eng.index()
    assert _vectors(tmp_path / "idx") == _vectors(tmp_path / "ref")


def test_processes_that_cannot_start_leave_the_run_to_the_vector_pass_and_say_so(ws: Path, tmp_path: Path, monkeypatch):
    """Their pool failing to start (a limit on processes, no memory) failed the run and left the parse workers'
    pool open (noticed, sessions 32-33); the run goes on, the vector pass embeds every chunk, and the report says
    why."""
    from delphi_ls.indexing.workers import PreparePool

    pools: list[PreparePool] = []
    real = PreparePool.__init__

    def kept(self, *a, **k):  # type: ignore[no-untyped-def]
        real(self, *a, **k)
        pools.append(self)

    def refuse(*_a, **_k):  # type: ignore[no-untyped-def]
        raise OSError(11, "Resource temporarily unavailable")

    monkeypatch.setattr(PreparePool, "__init__", kept)
    monkeypatch.setattr(pipeline, "EmbedAhead", refuse)
    with Engine(ws, index_dir=str(tmp_path / "idx"), index_workers=2) as eng:
        rep = eng.index()
        counts = eng.meta.counts()
    assert not rep.errors and rep.vectors_ahead == 0
    assert any("embedding beside the lexical pass not started" in n and "Errno 11" in n for n in rep.notes), rep.notes
    assert counts["vectors"] == counts["chunks"] > 0
    assert pools and all(p._pool._shutdown_thread for p in pools)  # noqa: SLF001
