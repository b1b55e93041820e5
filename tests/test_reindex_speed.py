"""Issue 18: an update of named paths (an editor's save, a watcher's event) costs the file, not the index.

Structure, not wall time (the CI machine is shared): an update of one named path does not walk the
tree, does not merge segments, and leaves answers as a full run would (the new text is found, the old
is not, by BM25 and by the vector search).
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import time
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

from delphi_ls import Engine
from delphi_ls.indexing import named, pipeline
from delphi_ls.indexing.named import WalkNeeded, scan_named
from delphi_ls.session import Session
from delphi_ls.workspace.scan import scan
from tests.calls import Calls
from tests.lexical_pin import whoosh_store_only  # noqa: F401  (these tests count Whoosh's segments and merges)

EDITED = "shipyard/scheduler.py"


def _bm25_paths(eng: Engine, word: str) -> set[str]:
    eng.lexical.refresh()
    return {p for _i, p, _s in eng.lexical.search_terms([word], 20)}


def _edit(ws: Path, rel: str, old: str, new: str) -> None:
    p = ws / rel
    text = p.read_text()
    assert old in text
    p.write_text(text.replace(old, new))


def test_named_update_reads_no_tree_and_answers_as_a_full_run(engine: Engine, workspace: Path, monkeypatch):
    walks = Calls(pipeline.scan)
    monkeypatch.setattr(pipeline, "scan", walks)
    merges = Calls(engine.lexical.merge_tiers)
    monkeypatch.setattr(engine.lexical, "merge_tiers", merges)
    assert "next_job" in (workspace / EDITED).read_text()
    _edit(workspace, EDITED, "next_job", "zebracrossing_job")
    rep = engine.index(only=[EDITED], reembed=False)
    assert walks.n == 0 and merges.n == 0  # no walk of the tree, no merge on a save
    assert rep.files_indexed == 1 and rep.files_seen == 1
    # Lexical: the new word is found in the edited file, the old one is gone from it.
    assert _bm25_paths(engine, "zebracrossing_job") == {EDITED}
    assert EDITED not in _bm25_paths(engine, "next_job")
    # Vectors: the edited file's chunks are the manifest's, each searchable by its own vector, in the
    # exact search (what answers a workspace this size); Chroma, read by nothing here, is owed the
    # writes (health says so) until it answers: then the session's quiet spell (maintain) makes them.
    ids = set(engine.meta.chunk_ids_of(EDITED))
    c = engine.meta.counts()
    assert c["vectors"] == c["chunks"]
    exact = engine._exact_vectors(c["vectors"])
    assert exact is not None and {i for i, p in zip(exact.ids, exact.paths, strict=True) if p == EDITED} == ids
    new_chunk = next(r for r in engine.meta.chunks_of(EDITED) if "zebracrossing_job" in r.text)
    vec = engine.embedder.embed([pipeline.embed_text(new_chunk)])[0]
    assert exact.query(vec, 1)[0][0] == new_chunk.id
    ans = engine.context("zebracrossing_job")
    assert ans["results"][0]["path"] == EDITED and ans["branchesReady"]["vector"] == "ready"
    h = engine.health(check_staleness=False)
    assert h["ok"] and "owed to it" in h["vectorSearch"], h
    assert engine.vectors.get_vector(new_chunk.id) is None  # not written on the save
    assert engine.maintain() == 0  # nothing to merge; Chroma, which nothing reads, stays owed
    assert "owed to it" in engine.health(check_staleness=False)["vectorSearch"]
    engine.settings = dataclasses.replace(engine.settings, vector_search="hnsw")  # now Chroma answers
    assert engine.maintain() == 0  # nothing to merge yet; Chroma's writes are made
    assert engine.vector_status() == (True, "ready")
    assert engine.vectors.count() == c["vectors"]
    assert engine.vectors.query(np.asarray(vec), 1)[0][0] == new_chunk.id
    assert not (set(engine.vectors.col.get(where={"path": EDITED})["ids"]) ^ ids)  # stale ones deleted
    # A full run afterwards finds nothing left to do: the named update did what it would have done.
    rep = engine.index()
    assert (rep.files_indexed, rep.files_deleted, rep.chunks_embedded) == (0, 0, 0)


def test_named_paths_scan_as_the_walk_does(workspace: Path, engine: Engine):
    (workspace / "docs" / "empty.md").write_text("")
    (workspace / "shipyard" / "poetry.lock").write_text("lock\n")
    os.symlink(workspace / "shipyard" / "retry.py", workspace / "shipyard" / "alias.py")
    walk = scan(workspace, engine.settings.max_file_bytes, engine.settings.extra_ignores)
    listed = {f.path: f for f in walk.files}
    names = [*listed, *walk.skipped, "build/output.py", "web/dist/bundle.js", "app.log", "loop/shipyard/retry.py",
             "outside/passwd", "no/such/file.py", ".git/config", "shipyard/../README.md"]
    for rel in names:
        try:
            got = scan_named(workspace, [rel], engine.settings)
        except WalkNeeded:
            assert (workspace / rel).is_dir() and not (workspace / rel).is_symlink(), rel
            continue
        assert got.files == ([listed[rel]] if rel in listed else []), rel
        assert got.skipped == ({rel: walk.skipped[rel]} if rel in walk.skipped else {}), rel


def test_a_named_folder_walks_and_a_deleted_folder_leaves_the_index(engine: Engine, workspace: Path):
    with pytest.raises(WalkNeeded):
        scan_named(workspace, ["shipyard"], engine.settings)
    before = {p for p, _k, _n in engine.files() if p.startswith("web/")}
    assert before
    import shutil
    shutil.rmtree(workspace / "web")
    rep = engine.index(only=["web"], reembed=False)
    assert rep.files_deleted == len(before)
    assert not {p for p, _k, _n in engine.files() if p.startswith("web/")}
    assert named  # the module is the one the indexer uses


def test_saves_leave_segments_unmerged_until_maintain(engine: Engine, workspace: Path):
    sizes = engine.lexical.segment_sizes()
    saves = 17  # more than a tier holds (MERGE_FANOUT): a save used to pay for the merge
    for i in range(saves):
        _edit(workspace, EDITED, "next_job" if i == 0 else f"edit{i - 1}_job", f"edit{i}_job")
        engine.index(only=[EDITED], reembed=False)
    after = engine.lexical.segment_sizes()
    assert len(after) == len(sizes) + saves  # one small segment per save, nothing merged
    merged = engine.maintain()
    assert merged >= 16 and len(engine.lexical.segment_sizes()) == len(after) - merged + 1
    assert _bm25_paths(engine, f"edit{saves - 1}_job") == {EDITED} and not _bm25_paths(engine, "edit3_job")
    assert engine.maintain() == 0  # nothing left to merge


@contextlib.contextmanager
def _idle_session(workspace: Path, index_dir: Path, monkeypatch, maintain_after: float
                  ) -> Iterator[tuple[Session, Engine, Calls]]:
    """A session on the workspace, indexed and idle, its maintenance due ``maintain_after`` s after a
    write: the session, its engine and a count of the engine's maintain() calls."""
    import delphi_ls.session as session_mod

    monkeypatch.setattr(session_mod, "MAINTAIN_AFTER_S", maintain_after)
    s = Session(options={"indexDir": str(index_dir)})
    try:
        s.start([workspace])
        assert s.wait_idle(120)
        eng = next(iter(s.engines.values()))
        maintained = Calls(eng.maintain)
        monkeypatch.setattr(eng, "maintain", maintained)
        yield s, eng, maintained
    finally:
        s.shutdown()


def _wait_for(maintained: Calls, seconds: float) -> None:
    deadline = time.monotonic() + seconds
    while maintained.n == 0 and time.monotonic() < deadline:
        time.sleep(0.05)


def test_session_save_updates_the_named_file_and_merges_when_quiet(workspace: Path, tmp_path: Path, monkeypatch):
    with _idle_session(workspace, tmp_path / "sidx", monkeypatch, 0.2) as (s, eng, maintained):
        walks = Calls(pipeline.scan)
        monkeypatch.setattr(pipeline, "scan", walks)
        _edit(workspace, EDITED, "next_job", "zebracrossing_job")
        s.file_changed((workspace / EDITED).as_uri(), saved=True)
        time.sleep(0.05)
        assert s.wait_idle(60)
        assert walks.n == 0
        assert _bm25_paths(eng, "zebracrossing_job") == {EDITED}
        _wait_for(maintained, 10)
        assert maintained.n == 1  # after a quiet spell, once


def _graph_facts(g) -> dict:  # type: ignore[no-untyped-def]
    def norm(d: dict) -> dict:  # type: ignore[type-arg]
        return {k: set(v) for k, v in d.items() if v}
    return {"imports": norm(g.imports), "imported_by": norm(g.imported_by), "tests_of": norm(g.tests_of),
            "mirrors_of": norm(g.mirrors_of), "abbreviated": dict(g.abbreviated), "edges": g.edges}


def test_views_patched_after_a_named_update_equal_a_rebuild(engine: Engine, workspace: Path, monkeypatch):
    from delphi_ls.retrieval.context import IndexView
    from delphi_ls.stores.exact import ExactVectors

    engine.context("build scheduler")  # the view and the exact matrix are in memory
    engine.view().chunk_lines.fetch(list(engine.view().files))  # every file's chunk lines read: a stale one would show
    builds = Calls(IndexView.build)
    monkeypatch.setattr(IndexView, "build", builds)
    loads = Calls(ExactVectors.load)
    monkeypatch.setattr(ExactVectors, "load", loads)
    # New and removed definitions, a new import (retry.py), a removed one (heapq), new chunk lines.
    _edit(workspace, EDITED, "import heapq\n", "from shipyard.retry import RetryPolicy\nimport heapq as hq\n")
    _edit(workspace, EDITED, "def next_job(self)", "def pop_next_zebra_job(self)")
    (workspace / EDITED).write_text((workspace / EDITED).read_text() + "\n\nclass ZebraQueue:\n    pass\n")
    engine.index(only=[EDITED], reembed=False)
    ans = engine.context("ZebraQueue pop_next_zebra_job")
    assert builds.n == 0 and loads.n == 0  # patched, not rebuilt
    assert ans["results"][0]["path"] == EDITED
    view = engine.view()
    fresh = IndexView.build.fn(engine.meta)
    assert view.files == fresh.files and view.stripped_paths == fresh.stripped_paths
    assert view.by_basename == fresh.by_basename
    assert [view.chunk_lines.get(p) for p in fresh.files] == [fresh.chunk_lines.get(p) for p in fresh.files]
    assert view.symbols == fresh.symbols and "zebraqueue" in view.symbols and "next_job" not in view.symbols
    assert _graph_facts(view.graph) == _graph_facts(fresh.graph)
    assert "shipyard/retry.py" in view.graph.imports[EDITED]
    ident = engine.embedder.identity
    exact = engine._exact_vectors(engine.meta.counts()["vectors"])
    reloaded = ExactVectors.load.fn(engine.meta, ident.weights_sha256, ident.dim)
    assert loads.n == 0 and sorted(exact.ids) == sorted(reloaded.ids)
    order = {cid: i for i, cid in enumerate(reloaded.ids)}
    assert np.allclose(exact.matrix, reloaded.matrix[[order[c] for c in exact.ids]])
    q = engine.embedder.embed(["priority queue of zebra jobs"])[0]
    # The same hits in the same order; scores equal up to float32 rounding (a patched matrix holds a row elsewhere,
    # and BLAS may sum a row's products in another order by its place: 0.467154324 against 0.467154264).
    got, want = exact.query(q, 5), reloaded.query(q, 5)
    assert [h[:2] for h in got] == [h[:2] for h in want]
    assert np.allclose([h[2] for h in got], [h[2] for h in want], rtol=0, atol=1e-6)
    # A catch-up (no path named: `delphi context`, the MCP poll) patches the files it found changed too.
    _edit(workspace, EDITED, "class ZebraQueue", "class OkapiQueue")
    rep = engine.index(reembed=False)
    assert rep.files_indexed == 1 and builds.n == 0 and loads.n == 0
    assert "okapiqueue" in engine.view().symbols and "zebraqueue" not in engine.view().symbols
    assert engine.view().symbols == IndexView.build.fn(engine.meta).symbols
    # A new file changes the file list: the view is rebuilt, and holds it.
    (workspace / "shipyard" / "zebra.py").write_text("def zebra_stripes():\n    return 2\n")
    engine.index(only=["shipyard/zebra.py"], reembed=False)
    assert "zebra_stripes" in engine.view().symbols and builds.n == 1


def test_exact_rows_replaced_answer_as_a_reload_ties_included():
    from delphi_ls.stores.exact import ExactVectors

    rng = np.random.default_rng(7)
    base = rng.normal(size=(40, 8)).astype(np.float32)
    twin = base[3].tobytes()  # identical chunks embed identically: ties across the k-th place
    rows = [(f"c{i:02d}", f"f{i % 10}.py", base[i].tobytes()) for i in range(40)]
    rows += [(f"t{i}", "twins.py", twin) for i in range(6)]
    ex = ExactVectors.from_rows(rows, 8)
    q = base[3] + 0.01
    assert [r[0] for r in ex.query(q, 3)] == ["c03", "t0", "t1"]  # ties by id, not row order
    # Replace f3.py's rows (c03, c13, c23, c33) with new ones, several times (blocks, then compaction).
    current = list(rows)
    for round_ in range(20):
        new = [(f"n{round_}_{j}", "f3.py", rng.normal(size=8).astype(np.float32).tobytes()) for j in range(3)]
        current = [r for r in current if r[1] != "f3.py"] + new
        ex = ex.replaced({"f3.py"}, new, 8)
        reloaded = ExactVectors.from_rows(list(reversed(current)), 8)  # another row order
        assert len(ex) == len(reloaded) == len(current)
        for k in (1, 3, 7, 60):
            got, want = ex.query(q, k), reloaded.query(q, k)
            assert [r[:2] for r in got] == [r[:2] for r in want]
            assert np.allclose([r[2] for r in got], [r[2] for r in want], atol=1e-6)
        assert ex.get_vector(new[0][0]) is not None and ex.get_vector("c03") is None
    assert len(ex._blocks) <= 17



def test_exact_rows_replaced_for_any_paths_answer_as_a_reload_and_older_copies_stay_right():
    """Session 31: replaced() finds a path's chunks by a map it carries to its copies (it looked at every
    chunk). Random saves of any files (new ones, emptied ones), each against a matrix loaded afresh; and a
    copy made earlier, replaced again, still answers for its own rows (the map is shared by the copies: it only
    grows, and each copy's own codes say which of its chunks hold a path)."""
    from delphi_ls.stores.exact import ExactVectors

    rng = np.random.default_rng(11)
    vec = lambda: rng.normal(size=8).astype(np.float32).tobytes()  # noqa: E731
    current = [(f"c{i:02d}", f"f{i % 7}.py", vec()) for i in range(35)]
    ex = ExactVectors.from_rows(current, 8)
    q = rng.normal(size=8).astype(np.float32)
    kept: tuple[ExactVectors, list] | None = None
    for round_ in range(40):
        paths = {f"f{j}.py" for j in rng.choice(10, size=int(rng.integers(1, 4)), replace=False)}
        new = [(f"n{round_}_{j}", sorted(paths)[j % len(paths)], vec()) for j in range(int(rng.integers(0, 5)))]
        current = [r for r in current if r[1] not in paths] + new
        ex = ex.replaced(paths, new, 8)
        reloaded = ExactVectors.from_rows(current, 8)
        assert len(ex) == len(reloaded) and sorted(ex.ids) == sorted(r[0] for r in current)
        for k in (1, 5, 100):
            assert [r[:2] for r in ex.query(q, k)] == [r[:2] for r in reloaded.query(q, k)]
        if round_ == 10:
            kept = (ex, list(current))
    old, rows = kept  # type: ignore[misc]
    again = old.replaced({"f1.py"}, [("z", "f1.py", vec())], 8)
    want = ExactVectors.from_rows([r for r in rows if r[1] != "f1.py"] + [("z", "f1.py", again.get_vector("z").tobytes())], 8)
    assert [r[:2] for r in again.query(q, 100)] == [r[:2] for r in want.query(q, 100)]

def test_reindex_benchmark_runs_on_a_small_workspace(workspace: Path, tmp_path: Path):
    import json

    from bench import reindex

    out = tmp_path / "r.json"
    assert reindex.main([str(workspace), "--index-dir", str(tmp_path / "bidx"), "--edits", "2",
                         "--target", EDITED, "--json", str(out), "--identity"]) == 0
    r = json.loads(out.read_text())
    modes = {m["mode"]: m for m in r["modes"]}
    assert set(modes) == {"named", "catchup", "full"}
    assert all(e["files_indexed"] == 1 for m in modes.values() for e in m["edits"])
    assert all(m["all_found"] for m in modes.values())
    assert "scan" not in modes["named"]["phases_per_edit"] and "scan" in modes["catchup"]["phases_per_edit"]
    i = r["identity"]
    assert i["view_equal"] and i["graph_equal"] and i["answers_identical"] == i["questions"] > 0


def test_polling_session_merges_although_polls_keep_coming(workspace: Path, tmp_path: Path, monkeypatch):
    """`delphi serve` / `delphi mcp` look for changes every few seconds: a change's maintenance is not put
    off by the polls that follow it (they change nothing)."""
    with _idle_session(workspace, tmp_path / "pidx", monkeypatch, 0.5) as (s, eng, maintained):
        s.watch(interval=0.1)
        _edit(workspace, EDITED, "next_job", "zebracrossing_job")
        _wait_for(maintained, 20)
        assert maintained.n == 1
        assert _bm25_paths(eng, "zebracrossing_job") == {EDITED}
        time.sleep(1.0)
        assert maintained.n == 1  # polls that changed nothing owe no maintenance
