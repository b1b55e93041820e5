"""The embedding cache keeps vectors no chunk uses any more (a revert, a branch or a model switched back costs no
embedding), bounded (session 39): each indexed edit adds its chunks' new vectors, and the manifest grew by every
edit ever made, which the exact search's load also streams. A full run drops the oldest written beyond the bound."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from delphi_ls import Engine, engine
from tests.conftest import copy_fixture

GEN = "shipyard/generated_steps.py"


def _version(k: int) -> str:
    # Eight functions of about 1,000 characters: each its own chunk, each new in every version.
    body = "".join(f"    total += cargo.part({j}).weight * {k * 100 + j}  # plan {k}, part {j}\n" for j in range(16))
    return "".join(f"def step_{i}(cargo):\n    \"\"\"Step {i} of plan {k}.\"\"\"\n    total = {i}\n{body}    return total\n\n\n"
                   for i in range(8))


def _unused(idx: Path, model: str) -> list[str]:
    db = sqlite3.connect(str(idx / "meta.sqlite"))
    try:
        return [h for (h,) in db.execute("SELECT content_hash FROM embed_cache WHERE model IS NOT ? OR content_hash "
                                         "NOT IN (SELECT content_hash FROM chunks) ORDER BY rowid", (model,))]
    finally:
        db.close()


def test_unused_cached_vectors_are_bounded_oldest_first(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    ws = copy_fixture("shipyard", tmp_path / "ws")
    idx = tmp_path / "idx"
    monkeypatch.setattr(engine, "EMBED_CACHE_SPARE", 0)  # the bound is then the index's chunk count
    with Engine(ws, index_dir=str(idx), reranker="off") as eng:
        model = eng.embedder.identity.weights_sha256
        hashes: list[set[str]] = []
        for k in range(12):
            (ws / GEN).write_text(_version(k))
            eng.index()
            db = sqlite3.connect(str(idx / "meta.sqlite"))
            hashes.append({h for (h,) in db.execute("SELECT content_hash FROM chunks WHERE path = ?", (GEN,))})
            db.close()
        chunks = eng.counts()["chunks"]
        unused = _unused(idx, model)
        # 11 versions' chunks are unused now, more than the index's chunks: the bound holds, not one more or less.
        assert sum(len(h) for h in hashes[:-1]) > chunks
        assert len(unused) == chunks, (len(unused), chunks)
        assert not hashes[0] & set(unused), "the oldest written go first"
        assert hashes[-2] <= set(unused), "the newest are kept"
        # A revert to the previous version embeds nothing: its vectors come from the cache.
        (ws / GEN).write_text(_version(10))
        rep = eng.index()
        assert rep.vectors_from_cache >= len(hashes[-2]) and rep.chunks_embedded - rep.vectors_from_cache == 0, rep
        # The index still answers from vectors for the file, through its cached rows.
        assert eng.counts()["vectors"] == eng.counts()["chunks"]


def test_a_question_catch_up_does_not_prune(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Only a full run (`delphi index`, the language server's) prunes: a save's named run stays as cheap as before."""
    ws = copy_fixture("shipyard", tmp_path / "ws")
    idx = tmp_path / "idx"
    monkeypatch.setattr(engine, "EMBED_CACHE_SPARE", 0)
    with Engine(ws, index_dir=str(idx), reranker="off") as eng:
        model = eng.embedder.identity.weights_sha256
        for k in range(12):
            (ws / GEN).write_text(_version(k))
            eng.index(only=[GEN])
        assert len(_unused(idx, model)) > eng.counts()["chunks"]
