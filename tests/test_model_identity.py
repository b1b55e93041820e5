"""Lesson 1: vectors from another model compare without error and rank as noise; catch it."""

import shutil
from pathlib import Path

import numpy as np
import pytest
from safetensors.numpy import load_file, save_file

from delphi_ls import Engine
from delphi_ls.models.embedders import DATA


def _perturbed_potion(dest: Path) -> Path:
    """Same name, same width, different weights: the case that fails silently elsewhere."""
    dest.mkdir(parents=True)
    shutil.copy(DATA / "potion-base-8M" / "tokenizer.json", dest / "tokenizer.json")
    table = load_file(str(DATA / "potion-base-8M" / "model.safetensors"))["embeddings"]
    rng = np.random.default_rng(0)
    save_file({"embeddings": table[rng.permutation(table.shape[0])]}, str(dest / "model.safetensors"))
    return dest


def test_mismatched_model_disables_vector_branch(workspace: Path, tmp_path: Path):
    idx = tmp_path / "index"
    with Engine(workspace, index_dir=str(idx)) as eng:
        eng.index()
        assert eng.vector_status() == (True, "ready")
    other = _perturbed_potion(tmp_path / "models" / "potion-base-8M")
    with Engine(workspace, index_dir=str(idx), embedder=str(other)) as eng:
        assert eng.embedder.identity.name == "potion-base-8M"
        assert eng.embedder.identity.dim == 256
        ok, status = eng.vector_status()
        assert not ok and "model mismatch" in status
        res = eng.context("exponential backoff between upload attempts")
        assert "vector" not in {b for r in res["results"] for b in r["branches"]}
        assert res["branchesReady"]["vector"].startswith("disabled: model mismatch")
        assert res["results"][0]["path"] == "shipyard/retry.py"  # lexical branches still answer
        h = eng.health(check_staleness=False)
        assert not h["ok"] and h["model"]["match"] is False
        assert any(p["code"] == "vector_branch" and "mismatch" in p["message"] for p in h["problems"])
        # `delphi index` with the new model re-embeds everything and clears the problem.
        rep = eng.index()
        assert rep.reembedded_all and eng.vector_status() == (True, "ready")


def test_probe_catches_stored_vectors_that_drifted(chroma_engine: Engine):
    engine = chroma_engine  # Chroma answers, so the probe compares Chroma's vector
    assert engine.probe()["status"] == "ok" and engine.probe()["cosine"] > 0.999
    rows = engine.meta.db.execute("SELECT id, path, kind FROM chunks").fetchall()
    rng = np.random.default_rng(1)
    noise = rng.normal(size=(len(rows), engine.embedder.identity.dim)).astype(np.float32)
    engine.vectors.upsert([r[0] for r in rows], noise, [r[1] for r in rows], [r[2] for r in rows])
    h = engine.health(check_staleness=False)
    assert h["model"]["probe"]["cosine"] < 0.99
    ok, status = engine.vector_status()
    assert not ok and "probe failed" in status
    assert any("probe failed" in p["message"] for p in h["problems"])


def test_minilm_onnx_embedder_runs_offline():
    from delphi_ls.models.embedders import load_embedder

    e = load_embedder("minilm-l6-int8")
    assert e.identity.dim == 384
    assert e.identity.weights_sha256 == "8199be6f699a395f99f89df973f9dc5285fbcfcdb2ae1a4e1201dab014f3d2a6"
    v = e.embed(["retry an upload with exponential backoff", "wait longer after each failed attempt", "parse a TOML file"])
    assert np.allclose(np.linalg.norm(v, axis=1), 1.0, atol=1e-4)
    assert v[0] @ v[1] > v[0] @ v[2]


def test_weights_hash_is_remembered_across_processes_and_redone_when_the_file_changes(tmp_path: Path, monkeypatch):
    import hashlib
    import json
    import os

    from delphi_ls.models import embedders

    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    weights = tmp_path / "model.safetensors"
    weights.write_bytes(b"A" * 4096)
    embedders._sha256.cache_clear()
    first = embedders.file_sha256(weights)
    assert first == hashlib.sha256(b"A" * 4096).hexdigest()
    remembered = json.loads(embedders._hash_cache_path().read_text())
    assert list(remembered.values()) == [first]
    # A new process (in-process cache cleared) reads the remembered hash instead of hashing...
    key = next(iter(remembered))
    embedders._hash_cache_path().write_text(json.dumps({key: "f" * 64}))
    embedders._sha256.cache_clear()
    assert embedders.file_sha256(weights) == "f" * 64
    # ...and a replaced file (new content, new mtime) is hashed again.
    weights.write_bytes(b"B" * 4096)
    os.utime(weights, ns=(1, 2))
    embedders._sha256.cache_clear()
    assert embedders.file_sha256(weights) == hashlib.sha256(b"B" * 4096).hexdigest()


def _texts() -> list[str]:
    import random

    rng = random.Random(7)
    repo = Path(__file__).resolve().parents[1]
    # Real code of this repository, plus what the fast path must hand to the full tokenizer: control
    # characters, DEL, accents, CJK, a vertical tab, mixed case, a text past the 512-token cut.
    out = [p.read_text(encoding="utf-8", errors="replace")[:3000] for p in sorted((repo / "delphi_ls").rglob("*.py"))[:40]]
    out += ["Héllo Wörld café", "日本語のテキスト and ASCII", "tab\there\r\nCRLF", "nul\x00byte", "bell\x07 and del\x7f",
            "vertical\x0btab", "form\x0cfeed", "x = \"[CLS] hello [MASK]\"", "[cls] and [Sep] lower", "CamelCaseName snake_case_name HTTPServer", "", "   ", "x" * 300,
            " ".join(f"Word{i}" for i in range(2000)), "emoji 🙂 ok", "\u00a0non-breaking space"]
    alphabet = [chr(i) for i in range(128)] + ["é", "ß", "中", "\u200b"]
    out += ["".join(rng.choice(alphabet) for _ in range(rng.randint(1, 400))) for _ in range(300)]
    return out


def test_static_embedder_fast_path_gives_the_full_tokenizers_ids() -> None:
    from delphi_ls.models.embedders import load_embedder

    emb = load_embedder("potion-base-8M")
    assert emb.bare is not None  # potion's normalizer is the lower-casing BERT one: the fast path is on
    texts = _texts()
    want = [enc.ids[: emb.max_tokens] for enc in emb.tokenizer.encode_batch(texts, add_special_tokens=False)]
    assert emb.token_ids(texts) == want
    # And so the vectors: the same ids, the same mean of the same rows.
    bare, emb.bare = emb.bare, None
    try:
        slow = emb.embed(texts)
    finally:
        emb.bare = bare
    assert np.array_equal(emb.embed(texts), slow)


def test_static_embedder_piece_cache_refilled_when_full_gives_the_same_ids(monkeypatch: pytest.MonkeyPatch) -> None:
    """The pieces' cache is bounded: emptied when a batch would overflow it, then refilled with that batch's
    pieces (the first version emptied it after picking the new pieces, and the next lookup raised KeyError)."""
    from delphi_ls.models import embedders

    emb = embedders.load_embedder("potion-base-8M")
    texts = _texts()
    want = [enc.ids[: emb.max_tokens] for enc in emb.tokenizer.encode_batch(texts, add_special_tokens=False)]
    monkeypatch.setattr(embedders, "PIECE_CACHE", 600)
    got = [ids for k in range(0, len(texts), 16) for ids in emb.token_ids(texts[k:k + 16])]
    assert got == want
    assert 0 < len(emb._pieces) < len(set(embedders._PLAIN_PIECE.findall(" ".join(texts).lower())))  # it was emptied


def test_static_embedder_from_several_threads_gives_the_same_vectors(monkeypatch: pytest.MonkeyPatch) -> None:
    """One engine's embedder serves the index run and the questions: a thread that emptied the pieces' cache while
    another read it made that one raise KeyError (review, session 37). New words in every batch and a small bound
    make it refill all the time."""
    import random
    import threading

    from delphi_ls.models import embedders

    emb = embedders.load_embedder("potion-base-8M")
    monkeypatch.setattr(embedders, "PIECE_CACHE", 2000)
    errors: list[str] = []
    done: list[tuple[list[str], np.ndarray]] = []

    def work(seed: int) -> None:
        rng = random.Random(seed)
        try:
            for _ in range(60):
                texts = [" ".join(f"w{rng.randrange(10**6)}x" for _ in range(200)) for _ in range(4)]
                done.append((texts, emb.embed(texts)))
        except Exception as e:  # noqa: BLE001 (what the race raised)
            errors.append(repr(e))

    threads = [threading.Thread(target=work, args=(s,)) for s in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    alone = embedders.load_embedder("potion-base-8M")
    assert all(np.array_equal(v, alone.embed(texts)) for texts, v in done[::20])


def test_a_chunks_cache_key_is_the_hash_of_what_is_embedded(engine: Engine) -> None:
    """The embedding cache was keyed by a chunk's text while the model reads its names and its text: a chunk that
    gained a name on upgrade (a Go `var`, a class field holding a function) kept its old vector, and health's
    model check, re-embedding it, called the vectors another model's (an upgrade newcomer, session 37)."""
    import hashlib

    from delphi_ls.indexing.pipeline import embed_text

    rows = engine.meta.all_chunks()
    assert any(r.symbols and r.symbols != ["<module>"] for r in rows)
    for r in rows:
        if r.text:
            assert r.content_hash == hashlib.sha1(embed_text(r).encode("utf-8", errors="replace")).hexdigest(), r.path
