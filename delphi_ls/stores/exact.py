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
    """The embedded chunks' vectors as row-normalised float32 rows (in the manifest's order when loaded).

    After an update of a few files (:meth:`replaced`) the rows of those files are marked dead and their
    new rows appended as a small block, so an update costs its files, not a copy of the whole matrix
    (37 MB on spring-boot: 0.06-0.15 s a save, issue 18); the blocks are joined again once dead rows or
    blocks pile up."""

    def __init__(self, ids: list[str], paths: list[str], matrix: np.ndarray,
                 blocks: list[np.ndarray] | None = None, alive: np.ndarray | None = None) -> None:
        self._ids = ids  # every row's, dead ones included (rows of all blocks, in order)
        self._paths = paths
        self._blocks = blocks if blocks is not None else [matrix]
        self._alive = alive  # None: every row is alive

    @classmethod
    def load(cls, meta: MetaStore, model: str, dim: int) -> ExactVectors:
        """``model``: the embedder's weights sha (the cache's key); vectors of another width are left
        out (a cache written by a model of the same sha cannot have them, but a damaged blob could)."""
        return cls.from_rows(meta.embedded_vectors(model), dim)

    @classmethod
    def from_rows(cls, rows: list[tuple[str, str, bytes]], dim: int) -> ExactVectors:
        """From (chunk id, path, float32 blob) rows; blobs of another width are left out."""
        width = 4 * dim
        rows = [r for r in rows if len(r[2]) == width]
        mat = np.frombuffer(b"".join(r[2] for r in rows), dtype=np.float32).reshape(len(rows), dim)
        norms = np.linalg.norm(mat, axis=1, keepdims=True)
        norms[norms == 0] = 1.0
        mat = mat / norms  # a new, writable array; Chroma's cosine space compares normalised vectors too
        return cls([r[0] for r in rows], [r[1] for r in rows], mat)

    def replaced(self, paths: set[str], rows: list[tuple[str, str, bytes]], dim: int) -> ExactVectors:
        """A copy with the rows of ``paths`` replaced by ``rows`` (what :meth:`MetaStore.embedded_vectors`
        gives for those paths now), for an update of a few files instead of reading every vector again
        (0.33-0.41 s of CPU on spring-boot's 36,567). Row order does not matter: the search breaks ties
        by chunk id. This object is not modified (a query may be reading it)."""
        alive = np.ones(len(self._ids), dtype=bool) if self._alive is None else self._alive.copy()
        for i, p in enumerate(self._paths):
            if p in paths:
                alive[i] = False
        fresh = ExactVectors.from_rows(rows, dim)
        out = ExactVectors(self._ids + fresh._ids, self._paths + fresh._paths, fresh._blocks[0],
                           [*self._blocks, fresh._blocks[0]], np.concatenate([alive, np.ones(len(fresh._ids), bool)]))
        dead = len(out._ids) - int(out._alive.sum())  # type: ignore[union-attr]
        if len(out._blocks) > 16 or dead > len(out._ids) // 8:
            out = out.compacted()
        return out

    def compacted(self) -> ExactVectors:
        """One block of the live rows."""
        keep = np.flatnonzero(self._alive) if self._alive is not None else np.arange(len(self._ids))
        mat = self._blocks[0] if len(self._blocks) == 1 else np.concatenate(self._blocks)
        return ExactVectors([self._ids[i] for i in keep], [self._paths[i] for i in keep], mat[keep])

    @property
    def ids(self) -> list[str]:
        """The live rows' chunk ids."""
        return self._ids if self._alive is None else [c for c, a in zip(self._ids, self._alive, strict=True) if a]

    @property
    def paths(self) -> list[str]:
        return self._paths if self._alive is None else [p for p, a in zip(self._paths, self._alive, strict=True) if a]

    @property
    def matrix(self) -> np.ndarray:
        """The live rows, in the order of :attr:`ids`."""
        return self.compacted()._blocks[0] if self._alive is not None or len(self._blocks) > 1 else self._blocks[0]

    def __len__(self) -> int:
        return len(self._ids) if self._alive is None else int(self._alive.sum())

    def query(self, vector: np.ndarray, k: int) -> list[tuple[str, str, float]]:
        """(chunk id, path, cosine similarity), best first; ties in chunk-id order (deterministic)."""
        n = len(self)
        if n == 0 or k <= 0:
            return []
        v = np.asarray(vector, dtype=np.float32)
        v = v / (np.linalg.norm(v) or 1.0)
        scores = self._blocks[0] @ v if len(self._blocks) == 1 else np.concatenate([b @ v for b in self._blocks])
        if self._alive is not None:
            scores[~self._alive] = -np.inf  # dead rows: never among the k best while k <= live rows
        k = min(k, n)
        top = np.argpartition(-scores, k - 1)[:k] if k < len(scores) else np.arange(len(scores))
        if k < len(scores):
            # Equal scores across the k-th place (identical chunks embed identically): which of them come
            # in is decided by chunk id, not by row order, so a matrix patched after an update answers
            # as a reloaded one does.
            kth = scores[top].min()
            tied = np.flatnonzero(scores == kth)
            if len(tied) > int((scores[top] == kth).sum()):
                above = top[scores[top] > kth]
                top = np.concatenate([above, sorted(tied, key=lambda i: self._ids[i])[: k - len(above)]])
        best = sorted((-float(scores[i]), self._ids[i], int(i)) for i in top if scores[i] > -np.inf)
        return [(cid, self._paths[i], -neg) for neg, cid, i in best]

    def get_vector(self, chunk_id: str) -> np.ndarray | None:
        for i, c in enumerate(self._ids):
            if c == chunk_id and (self._alive is None or self._alive[i]):
                for b in self._blocks:
                    if i < len(b):
                        return b[i]
                    i -= len(b)
        return None
