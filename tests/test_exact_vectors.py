"""The exact vector search over the embedding cache, and Chroma opened only when something needs it (issue 13)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from delphi_ls import Engine
from delphi_ls.settings import Settings, SettingsError
from delphi_ls.stores import exact

from .conftest import copy_fixture

QUESTION = "exponential backoff between upload attempts"


@pytest.fixture
def indexed(tmp_path: Path) -> tuple[Path, Path]:
    ws = copy_fixture("shipyard", tmp_path / "ws")
    idx = tmp_path / "index"
    with Engine(ws, index_dir=str(idx), reranker="off") as eng:
        eng.index()
    return ws, idx


def _brute_force(eng: Engine, v: np.ndarray, k: int) -> list[tuple[str, float]]:
    """Cosine over every embedded chunk's cached vector, read row by row (no shared code with the search)."""
    sha = eng.embedder.identity.weights_sha256
    out = []
    for cid, h in eng.meta.db.execute("SELECT id, content_hash FROM chunks WHERE rowid NOT IN (SELECT rid FROM unembedded)"):
        (blob,) = eng.meta.db.execute("SELECT vec FROM embed_cache WHERE model=? AND content_hash=?", (sha, h)).fetchone()
        u = np.frombuffer(blob, dtype=np.float32).astype(np.float64)
        out.append((cid, float(u @ v / (np.linalg.norm(u) * np.linalg.norm(v)))))
    out.sort(key=lambda r: (-r[1], r[0]))
    return out[:k]


def test_exact_answers_equal_a_brute_force_cosine_over_the_cache(indexed):
    ws, idx = indexed
    with Engine(ws, index_dir=str(idx), reranker="off") as eng:
        ex = eng._exact_vectors(eng.counts()["vectors"])
        n = eng.meta.counts()["vectors"]
        assert ex is not None and len(ex) == n > 20
        for text in (QUESTION, "parse the TOML settings file", "class BuildScheduler"):
            v = eng.embedder.embed([text])[0].astype(np.float64)
            got = ex.query(v, k=15)
            want = _brute_force(eng, v, 15)
            assert [g[0] for g in got] == [w[0] for w in want], text
            assert np.allclose([g[2] for g in got], [w[1] for w in want], atol=1e-5)
            paths = dict(eng.meta.db.execute("SELECT id, path FROM chunks").fetchall())
            assert all(paths[cid] == p for cid, p, _s in got)
        assert len(ex.query(v, k=10 * n)) == n  # k above the count: every vector, once


def test_exact_and_hnsw_agree_on_the_top_files(indexed):
    ws, idx = indexed
    answers = {}
    for mode in ("exact", "hnsw"):
        with Engine(ws, index_dir=str(idx), reranker="off", vector_search=mode) as eng:
            if mode == "hnsw":
                # Indexed while the exact search answered: Chroma was not written (issue 18), and says so
                # until a run writes it from the embedding cache.
                assert eng.context(QUESTION)["branchesReady"]["vector"].startswith("not ready: Chroma holds 0/")
                rep = eng.index(reembed=False)
                assert rep.chunks_embedded == 0 and eng.vectors.count() == eng.counts()["vectors"]
            res = eng.context(QUESTION)
            assert res["branchesReady"]["vector"] == "ready"
            answers[mode] = [r["path"] for r in res["results"][:3]]
            search = eng.health(check_staleness=False)["vectorSearch"]
            assert search.startswith("exact," if mode == "exact" else "Chroma HNSW"), search
    assert answers["exact"] == answers["hnsw"]


def test_the_bound_switches_to_hnsw(indexed, monkeypatch):
    ws, idx = indexed
    with Engine(ws, index_dir=str(idx), reranker="off") as eng:
        n = eng.meta.counts()["vectors"]
        assert eng.vector_search().startswith(f"exact, {n} vectors")
        eng.context(QUESTION)
        assert eng._vectors is None and eng._exact is not None  # answered without opening Chroma
    # 256 dims: a bound of one vector below the count.
    monkeypatch.setattr(exact, "EXACT_MAX_BYTES", 4 * 256 * (n - 1))
    with Engine(ws, index_dir=str(idx), reranker="off") as eng:
        assert eng.vector_search().startswith("Chroma HNSW") and "above the exact bound" in eng.vector_search()
        # Indexed below the bound, Chroma was owed every vector: not ready (and said) until a run, which
        # writes them from the embedding cache, embedding nothing.
        assert eng.vector_status()[1].startswith(f"not ready: Chroma holds 0/{n} vectors")
        rep = eng.index()
        assert rep.chunks_embedded == 0 and eng.vectors.count() == n and eng.vector_status() == (True, "ready")
        res = eng.context(QUESTION)
        assert "vector" in {b for r in res["results"] for b in r["branches"]}
        assert eng._vectors is not None and eng._exact is None  # Chroma answered


def test_exact_probe_covers_the_cache_vector(indexed):
    """The identity probe compares with what answers: a drifted cache vector disables the exact search."""
    ws, idx = indexed
    with Engine(ws, index_dir=str(idx), reranker="off") as eng:
        assert eng.probe()["status"] == "ok" and eng.probe()["compared"] == "embedding cache"
        rng = np.random.default_rng(2)
        sha = eng.embedder.identity.weights_sha256
        hashes = [h for (h,) in eng.meta.db.execute("SELECT content_hash FROM embed_cache WHERE model=?", (sha,))]
        eng.meta.cache_vectors(sha, [(h, rng.normal(size=256).astype(np.float32)) for h in hashes])
        eng._probe = None
        ok, status = eng.vector_status()
        assert not ok and "probe failed" in status


def test_vector_search_setting_is_validated():
    assert Settings.from_dict({"vector_search": "exact"}).vector_search == "exact"
    with pytest.raises(SettingsError, match="vector_search"):
        Settings.from_dict({"vector_search": "annoy"})


def _cli(ws: Path, idx: Path, *args: str) -> str:
    """Run the real CLI in a fresh interpreter and report whether chromadb got imported."""
    code = ("import sys\nfrom delphi_ls.cli import main\nrc = main(sys.argv[1:])\n"
            "print('CHROMADB_IMPORTED=' + str('chromadb' in sys.modules), 'RC=' + str(rc))")
    out = subprocess.run([sys.executable, "-c", code, *args], capture_output=True, text=True, timeout=120, cwd=ws)
    assert out.returncode == 0, out.stderr
    return out.stdout


def test_a_warm_context_does_not_import_chroma_and_indexing_new_text_does(indexed):
    ws, idx = indexed
    out = _cli(ws, idx, "context", str(ws), QUESTION, "--index-dir", str(idx))
    assert "shipyard/retry.py" in out and "CHROMADB_IMPORTED=False RC=0" in out, out
    assert "CHROMADB_IMPORTED=False" in _cli(ws, idx, "symbols", str(ws), "RetryPolicy", "--index-dir", str(idx))
    # A new file: the catch-up before the query embeds it, and owes Chroma its vectors without opening it
    # (nothing reads Chroma below the exact bound, issue 18); a run where HNSW answers writes them all.
    (ws / "shipyard" / "anchors.py").write_text("def drop_anchor(depth):\n    return depth * 2\n", encoding="utf-8")
    out = _cli(ws, idx, "context", str(ws), "drop the anchor", "--index-dir", str(idx))
    assert "CHROMADB_IMPORTED=False RC=0" in out and "shipyard/anchors.py" in out, out
    with Engine(ws, index_dir=str(idx), reranker="off", vector_search="hnsw") as eng:
        eng.index()
        assert eng.vectors.count() == eng.meta.counts()["vectors"] == eng.meta.counts()["chunks"]
    # Health checks Chroma even when nothing else needed it.
    assert "CHROMADB_IMPORTED=True" in _cli(ws, idx, "health", str(ws), "--index-dir", str(idx))


def test_equal_chunks_share_a_row_and_both_loaders_agree(indexed):
    """Equal chunks (vendored copies) embed equally and share one row (the 100k workspace: 439,715 chunks,
    232,521 rows); the load by one table pass plus the cache's stream answers as the SQL join's rows do."""
    ws, idx = indexed
    for i in range(3):
        (ws / f"copy{i}.py").write_text((ws / "shipyard" / "retry.py").read_text())
    with Engine(ws, index_dir=str(idx), reranker="off") as eng:
        eng.index()
        sha, dim = eng.embedder.identity.weights_sha256, eng.embedder.identity.dim
        loaded = exact.ExactVectors.load(eng.meta, sha, dim)
        joined = exact.ExactVectors.from_rows(eng.meta.embedded_vectors(sha), dim)
        n = eng.meta.counts()["vectors"]
        distinct = eng.meta.db.execute("SELECT COUNT(DISTINCT content_hash) FROM chunks "
                                       "WHERE rowid NOT IN (SELECT rid FROM unembedded)").fetchone()[0]
        assert len(loaded) == len(joined) == n and loaded.rows == distinct < n
        for text in (QUESTION, "class BuildScheduler"):
            v = eng.embedder.embed([text])[0]
            got, want = loaded.query(v, 40), joined.query(v, 40)
            assert [g[:2] for g in got] == [w[:2] for w in want]
            assert np.allclose([g[2] for g in got], [w[2] for w in want], atol=1e-6)
        copies = {c for c, p, _s in loaded.query(eng.embedder.embed([QUESTION])[0], n) if p.startswith("copy")}
        assert len(copies) == 3 * len(eng.meta.chunks_of("copy0.py"))  # every copy is still answered


def test_a_question_does_not_wait_for_health_opening_chroma(indexed: tuple[Path, Path],
                                                             monkeypatch: pytest.MonkeyPatch) -> None:
    """After a server's catch-up, the health report opens Chroma (its import alone is 1.3 s of CPU). It did so
    under the view's lock, and the first question, answered by the exact search, waited it out: `delphi mcp`'s
    first answer took 1.37 s of which its own work was 15 ms (session 24). Here Chroma's open is held until the
    question is answered: the question must not need it."""
    import threading

    from delphi_ls import engine as engine_mod

    real = engine_mod.VectorStore
    opening, release = threading.Event(), threading.Event()

    def held_store(*args, **kwargs):  # the real store, once the test lets the open go on
        opening.set()
        release.wait(60)
        return real(*args, **kwargs)

    monkeypatch.setattr(engine_mod, "VectorStore", held_store)
    ws, idx = indexed
    with Engine(ws, index_dir=str(idx), reranker="off") as eng:
        health = threading.Thread(target=eng.health)
        health.start()
        assert opening.wait(30)
        got: dict = {}
        question = threading.Thread(target=lambda: got.update(eng.context(QUESTION)))
        question.start()
        question.join(30)
        answered = not question.is_alive()
        release.set()
        question.join()
        health.join()
        assert answered, "the question waited for Chroma's open"
        assert got["results"] and got["branchesReady"]["vector"].startswith("ready")
        assert eng.health()["vectorStore"]  # the store did open, and health names it
