"""Exact cosine search over the embedding cache, for indexes small enough to hold in memory.

Every embedded chunk's vector is already in the manifest (``embed_cache``, keyed by the embedder's
weights sha and the chunk's content hash), so the vector branch of a small or mid-sized workspace
needs neither Chroma nor its import (0.65-0.8 s CPU, bench/RESULTS.md issue 13): one SQL join fills a
float32 matrix, and a query is one matrix-vector product. Unlike HNSW it answers the same in every
process (no per-process graph noise). Above :func:`exact_bound` vectors Chroma's HNSW answers instead.
"""

from __future__ import annotations

import numpy as np

from .meta import MetaStore

# Memory the matrix may take: 200 MiB holds 204,800 vectors of potion-base-8M (256 dims) or 136,533
# of MiniLM (384 dims). Measured on this project's shared 2-core box (bench/RESULTS.md, "One-shot
# speed"), CPU: loading 6 ms at 1,035 vectors, 0.15 s at 20,000, 1.9 s at 204,800 (SQLite's join is
# 1.1 s of it); a query 0.4 ms, 8 ms, 26 ms. Past that a one-shot process pays more loading the
# matrix than importing and opening Chroma, and a long-lived one holds too much memory twice.
EXACT_MAX_BYTES = 200 * 2**20


def exact_bound(dim: int) -> int:
    """The most vectors of ``dim`` floats the exact search holds; above it Chroma's HNSW answers."""
    return EXACT_MAX_BYTES // (4 * max(dim, 1))


class ExactVectors:
    """The embedded chunks' vectors as one row-normalised float32 matrix (rows in the manifest's order)."""

    def __init__(self, ids: list[str], paths: list[str], matrix: np.ndarray) -> None:
        self.ids = ids
        self.paths = paths
        self.matrix = matrix

    @classmethod
    def load(cls, meta: MetaStore, model: str, dim: int) -> ExactVectors:
        """``model``: the embedder's weights sha (the cache's key); vectors of another width are left
        out (a cache written by a model of the same sha cannot have them, but a damaged blob could)."""
        rows = meta.embedded_vectors(model)
        width = 4 * dim
        rows = [r for r in rows if len(r[2]) == width]
        mat = np.frombuffer(b"".join(r[2] for r in rows), dtype=np.float32).reshape(len(rows), dim)
        norms = np.linalg.norm(mat, axis=1, keepdims=True)
        norms[norms == 0] = 1.0
        mat = mat / norms  # a new, writable array; Chroma's cosine space compares normalised vectors too
        return cls([r[0] for r in rows], [r[1] for r in rows], mat)

    def __len__(self) -> int:
        return len(self.ids)

    def query(self, vector: np.ndarray, k: int) -> list[tuple[str, str, float]]:
        """(chunk id, path, cosine similarity), best first; ties in chunk-id order (deterministic)."""
        n = len(self.ids)
        if n == 0 or k <= 0:
            return []
        v = np.asarray(vector, dtype=np.float32)
        v = v / (np.linalg.norm(v) or 1.0)
        scores = self.matrix @ v
        k = min(k, n)
        top = np.argpartition(-scores, k - 1)[:k] if k < n else np.arange(n)
        best = sorted((-float(scores[i]), self.ids[i], int(i)) for i in top)
        return [(cid, self.paths[i], -neg) for neg, cid, i in best]

    def get_vector(self, chunk_id: str) -> np.ndarray | None:
        try:
            return self.matrix[self.ids.index(chunk_id)]
        except ValueError:
            return None
