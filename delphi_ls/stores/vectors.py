"""Vectors in Chroma: embedded PersistentClient by default, a `chroma run` server by URL."""

from __future__ import annotations

import os
import shutil
from collections.abc import Callable
from pathlib import Path
from urllib.parse import urlparse

import numpy as np

from ..core.panics import panics_as

os.environ.setdefault("ANONYMIZED_TELEMETRY", "False")  # offline always: no telemetry


def _chroma():  # type: ignore[no-untyped-def]
    """chromadb, imported on first use: its import alone takes about a second of CPU, which a
    command that never opens the vector store (`delphi symbols`, `--no-vectors`) must not pay."""
    import chromadb
    from chromadb.config import Settings as ChromaSettings

    return chromadb, ChromaSettings


def _forget_system(folder: Path) -> None:
    """Chroma caches one System per folder per process and keeps it even when starting it failed (a
    damaged chroma.sqlite3); every later client for that folder then fails. Drop the broken one so the
    folder can be opened again once it is repaired."""
    from chromadb.api.shared_system_client import SharedSystemClient

    SharedSystemClient._identifier_to_system.pop(str(folder), None)
    SharedSystemClient._identifier_to_refcount.pop(str(folder), None)


class ChromaPanic(RuntimeError):
    """Chroma's Rust core panicked (core/panics.py)."""


class VectorStore:
    def __init__(self, folder: Path, collection: str, url: str | None = None) -> None:
        chromadb, ChromaSettings = _chroma()
        cs = ChromaSettings(anonymized_telemetry=False, allow_reset=False)
        if url:
            u = urlparse(url)
            self.client = chromadb.HttpClient(host=u.hostname or "127.0.0.1", port=u.port or (443 if u.scheme == "https" else 8000),
                                              ssl=u.scheme == "https", settings=cs)
            self.where = url
        else:
            folder.mkdir(parents=True, exist_ok=True)
            try:
                # Chroma's Rust core panics on a damaged chroma.sqlite3 ("database disk image is malformed"): as an
                # error, the callers that say "damaged" and rebuild see it (every command, `index --rebuild` too,
                # ended in a traceback; a newcomer, session 28).
                with panics_as(ChromaPanic, "Chroma failed on its files"):
                    self.client = chromadb.PersistentClient(path=str(folder), settings=cs)
            except BaseException:
                _forget_system(folder)
                raise
            self.where = str(folder)
        self.folder = None if url else folder
        self.url = url
        self.name = collection
        try:
            with panics_as(ChromaPanic, "Chroma failed on its files"):
                self.col = self.client.get_or_create_collection(collection, embedding_function=None,
                                                                metadata={"hnsw:space": "cosine"})
        except BaseException:
            self.close()
            raise

    def check(self, expected: int) -> str | None:
        """Cheap signs of damage, with ``expected`` the manifest's count of embedded chunks: count the
        collection (a corrupt HNSW file fails here), fetch one vector and query with it (a truncated
        one fails there). Fewer vectors than the manifest expects means some were lost. None if fine."""
        try:
            with panics_as(ChromaPanic, "Chroma failed on its files"):
                n = self.count()
                if n:
                    got = self.col.get(limit=1, include=["embeddings"])
                    embs = got.get("embeddings")
                    if embs is not None and len(embs):
                        self.col.query(query_embeddings=[np.asarray(embs[0], dtype=np.float32).tolist()],
                                       n_results=1)
        except Exception as e:
            return f"{type(e).__name__}: {e}"
        if n < expected:
            return f"it holds {n} vectors but the manifest has {expected} embedded chunks"
        return None

    def close(self) -> None:
        try:
            self.client.close()
        except Exception:
            pass  # closing a client whose files are damaged may fail; nothing is left to save

    def wipe(self) -> None:
        """Drop every vector. Embedded: delete the folder and open a new one (a damaged file may not
        even allow deleting the collection); a server: delete and re-create the collection."""
        try:
            self.client.delete_collection(self.name)
            deleted = True
        except Exception:
            deleted = self.folder is None  # a server: the collection was not there
        if not deleted and self.folder is not None:
            # Only when deleting failed: closing and reopening a folder in one process races with
            # Chroma's background work of the closed client (seen: a rebuilt HNSW graph with poor recall).
            self.close()
            shutil.rmtree(self.folder, ignore_errors=True)
            self.folder.mkdir(parents=True, exist_ok=True)
            chromadb, ChromaSettings = _chroma()
            cs = ChromaSettings(anonymized_telemetry=False, allow_reset=False)
            self.client = chromadb.PersistentClient(path=str(self.folder), settings=cs)
        self.col = self.client.get_or_create_collection(self.name, embedding_function=None,
                                                        metadata={"hnsw:space": "cosine"})

    def upsert(self, ids: list[str], vectors: np.ndarray, paths: list[str], kinds: list[str]) -> None:
        if not ids:
            return
        self.col.upsert(ids=ids, embeddings=vectors.astype(np.float32).tolist(),
                        metadatas=[{"path": p, "kind": k} for p, k in zip(paths, kinds, strict=True)])

    def delete_ids(self, ids: list[str]) -> None:
        for i in range(0, len(ids), 1000):
            self.col.delete(ids=ids[i: i + 1000])

    def query(self, vector: np.ndarray, k: int) -> list[tuple[str, str, float]]:
        """(chunk id, path, cosine similarity), best first."""
        n = self.count()
        if n == 0:
            return []
        res = self.col.query(query_embeddings=[vector.astype(np.float32).tolist()], n_results=min(k, n),
                             include=["metadatas", "distances"])
        ids = res["ids"][0]
        metas = res["metadatas"][0]
        dists = res["distances"][0]
        return [(i, m["path"], 1.0 - float(d)) for i, m, d in zip(ids, metas, dists, strict=True)]

    def get_vector(self, chunk_id: str) -> np.ndarray | None:
        res = self.col.get(ids=[chunk_id], include=["embeddings"])
        embs = res.get("embeddings")
        if embs is None or len(embs) == 0:
            return None
        return np.asarray(embs[0], dtype=np.float32)

    def count(self) -> int:
        return int(self.col.count())

    def reset(self) -> None:
        self.client.delete_collection(self.name)
        self.col = self.client.get_or_create_collection(self.name, embedding_function=None,
                                                        metadata={"hnsw:space": "cosine"})


class LazyVectorStore:
    """What the indexer writes vectors through when Chroma is not open yet: it opens Chroma (through
    ``open_``, which records a failure in the engine's problems and returns None) only when a vector
    is to be deleted or written, so a catch-up run with nothing to change never imports chromadb."""

    def __init__(self, open_: Callable[[], VectorStore | None]) -> None:
        self._open = open_

    def delete_ids(self, ids: list[str]) -> None:
        if not ids:
            return
        store = self._open()
        if store is not None:  # else: Chroma failed to open; the next index re-creates and refills it
            store.delete_ids(ids)

    def _store(self) -> VectorStore:
        store = self._open()
        if store is None:
            raise RuntimeError("the vector store (Chroma) failed to open; health says why")
        return store

    def upsert(self, ids: list[str], vectors: np.ndarray, paths: list[str], kinds: list[str]) -> None:
        self._store().upsert(ids, vectors, paths, kinds)

    def reset(self) -> None:
        self._store().reset()
