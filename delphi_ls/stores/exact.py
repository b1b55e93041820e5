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

# The most chunks the exact search answers, in bytes of their vectors as if none were equal: 512 MiB is
# 524,288 chunks of potion-base-8M (256 dims), 349,525 of MiniLM (384). Above it Chroma's HNSW answers,
# and only then is Chroma written (Engine._chroma_wanted). The trade, measured on the 100,000-file workspace
# (439,715 chunks, 232,521 distinct vectors, bench/RESULTS.md session 9): loading 2.8-3.7 s (a server
# does it in the background at start, Engine.warm) and 15.5 ms a query, against Chroma's adds in every
# cold index (235 s of its 821 s), importing and loading Chroma (2-3 s) and its HNSW in memory, which
# holds every chunk's vector, equal or not, plus its graph. The earlier bound (200 MiB, issue 13) was set by the
# load time of the SQL join it used then (1.9 s at 204,800; 13.8 s at 439,715 through the index). Not
# measured: a workspace at the bound with no equal chunks (524,288 rows, about twice the load and query).
EXACT_MAX_BYTES = 512 * 2**20


def exact_bound(dim: int) -> int:
    """The most vectors of ``dim`` floats the exact search holds; above it Chroma's HNSW answers."""
    return EXACT_MAX_BYTES // (4 * max(dim, 1))


class ExactVectors:
    """The embedded chunks' vectors as row-normalised float32 rows, one row per distinct vector: identical
    chunks (vendored copies, old releases side by side, licence headers) embed identically, and on the
    100,000-file workspace 439,715 chunks had 232,520 distinct texts. Each chunk points at its row.

    After an update of a few files (:meth:`replaced`) the chunks of those files are marked dead and their
    new rows appended as a small block, so an update costs its files, not a copy of the whole matrix
    (37 MB on spring-boot: 0.06-0.15 s a save, issue 18); the blocks are joined again once dead chunks or
    blocks pile up."""

    def __init__(self, ids: list[str], paths: list[str], rowix: np.ndarray, blocks: list[np.ndarray],
                 alive: np.ndarray | None = None) -> None:
        self._ids = ids  # every chunk's, dead ones included (in order)
        self._paths = paths
        self._rowix = rowix  # each chunk's row in the blocks stacked
        self._blocks = blocks
        self._alive = alive  # None: every chunk is alive
        # Each chunk's path as a number (``_code_of``: path -> number, shared by the copies replaced() makes;
        # it only grows, and a number never changes), made by the first replaced(): a save compared every
        # chunk's path in Python (40-50 ms a save at 100,000 files, session 31).
        self._codes: np.ndarray | None = None
        self._code_of: dict[str, int] | None = None

    def _path_codes(self) -> tuple[np.ndarray, dict[str, int]]:
        if self._codes is None or self._code_of is None:
            code_of: dict[str, int] = {}
            self._codes = np.fromiter((code_of.setdefault(p, len(code_of)) for p in self._paths), dtype=np.int64,
                                      count=len(self._paths))
            self._code_of = code_of
        return self._codes, self._code_of

    @classmethod
    def load(cls, meta: MetaStore, model: str, dim: int) -> ExactVectors:
        """``model``: the embedder's weights sha (the cache's key); vectors of another width are left
        out (a cache written by a model of the same sha cannot have them, but a damaged blob could)."""
        chunks = meta.embedded_chunk_hashes()
        want: dict[str, int] = {}
        for _c, _p, h in chunks:
            want.setdefault(h, len(want))
        mat = np.zeros((len(want), dim), dtype=np.float32)
        got = np.zeros(len(want), dtype=bool)
        width = 4 * dim
        for h, blob in meta.cached_vector_rows(model):  # a stream: only the matrix is held, not the rows
            i = want.get(h)
            if i is not None and len(blob) == width:
                mat[i] = np.frombuffer(blob, dtype=np.float32)
                got[i] = True
        if not got.all():  # a chunk whose vector is not in the cache (damaged): left out, as the join did
            keep = [k for k, (_c, _p, h) in enumerate(chunks) if got[want[h]]]
            chunks = [chunks[k] for k in keep]
        rowix = np.fromiter((want[h] for _c, _p, h in chunks), dtype=np.int64, count=len(chunks))
        norms = np.linalg.norm(mat, axis=1, keepdims=True)
        norms[norms == 0] = 1.0
        mat /= norms
        return cls([c for c, _p, _h in chunks], [p for _c, p, _h in chunks], rowix, [mat])

    @classmethod
    def from_rows(cls, rows: list[tuple[str, str, bytes]], dim: int) -> ExactVectors:
        """From (chunk id, path, float32 blob) rows; blobs of another width are left out. Equal blobs
        share one row."""
        width = 4 * dim
        rows = [r for r in rows if len(r[2]) == width]
        seen: dict[bytes, int] = {}
        rowix = np.fromiter((seen.setdefault(r[2], len(seen)) for r in rows), dtype=np.int64, count=len(rows))
        mat = np.frombuffer(b"".join(seen), dtype=np.float32).reshape(len(seen), dim)
        norms = np.linalg.norm(mat, axis=1, keepdims=True)
        norms[norms == 0] = 1.0
        mat = mat / norms  # a new, writable array; Chroma's cosine space compares normalised vectors too
        return cls([r[0] for r in rows], [r[1] for r in rows], rowix, [mat])

    def replaced(self, paths: set[str], rows: list[tuple[str, str, bytes]], dim: int) -> ExactVectors:
        """A copy with the chunks of ``paths`` replaced by ``rows`` (what :meth:`MetaStore.embedded_vectors`
        gives for those paths now), for an update of a few files instead of reading every vector again
        (0.33-0.41 s of CPU on spring-boot's 36,567). Order does not matter: the search breaks ties by
        chunk id. What queries read of this object is not modified (they may be reading it; its path codes are made on first use)."""
        alive = np.ones(len(self._ids), dtype=bool) if self._alive is None else self._alive.copy()
        codes, code_of = self._path_codes()
        gone = [code_of[p] for p in paths if p in code_of]
        if gone:
            alive &= ~np.isin(codes, gone)
        fresh = ExactVectors.from_rows(rows, dim)
        base = sum(len(b) for b in self._blocks)
        out = ExactVectors(self._ids + fresh._ids, self._paths + fresh._paths,
                           np.concatenate([self._rowix, fresh._rowix + base]), [*self._blocks, fresh._blocks[0]],
                           np.concatenate([alive, np.ones(len(fresh._ids), bool)]))
        out._codes = np.concatenate([codes, np.array([code_of.setdefault(p, len(code_of)) for p in fresh._paths],
                                                     dtype=np.int64)])
        out._code_of = code_of
        dead = len(out._ids) - int(out._alive.sum())  # type: ignore[union-attr]
        if len(out._blocks) > 16 or dead > len(out._ids) // 8:
            out = out.compacted()
        return out

    def _stacked(self) -> np.ndarray:
        return self._blocks[0] if len(self._blocks) == 1 else np.concatenate(self._blocks)

    def compacted(self) -> ExactVectors:
        """One block of the rows the live chunks use."""
        keep = np.flatnonzero(self._alive) if self._alive is not None else np.arange(len(self._ids))
        used, rowix = np.unique(self._rowix[keep], return_inverse=True)
        out = ExactVectors([self._ids[i] for i in keep], [self._paths[i] for i in keep],
                           rowix.astype(np.int64), [self._stacked()[used]])
        if self._codes is not None:
            out._codes, out._code_of = self._codes[keep], self._code_of
        return out

    def parts(self) -> tuple[list[str], list[str], np.ndarray, list[np.ndarray]]:
        """The live chunks' ids, paths and rows, and the blocks they index (rows of dead chunks stay in them)."""
        rowix = self._rowix if self._alive is None else self._rowix[self._alive]
        return self.ids, self.paths, rowix, self._blocks

    @property
    def ids(self) -> list[str]:
        """The live rows' chunk ids."""
        return self._ids if self._alive is None else [c for c, a in zip(self._ids, self._alive, strict=True) if a]

    @property
    def paths(self) -> list[str]:
        return self._paths if self._alive is None else [p for p, a in zip(self._paths, self._alive, strict=True) if a]

    @property
    def matrix(self) -> np.ndarray:
        """The live chunks' vectors, one row each, in the order of :attr:`ids`."""
        keep = np.flatnonzero(self._alive) if self._alive is not None else np.arange(len(self._ids))
        return self._stacked()[self._rowix[keep]]

    @property
    def rows(self) -> int:
        """Rows held (distinct vectors, and those of dead chunks until compaction): the memory it takes."""
        return sum(len(b) for b in self._blocks)

    def __len__(self) -> int:
        return len(self._ids) if self._alive is None else int(self._alive.sum())

    def query(self, vector: np.ndarray, k: int) -> list[tuple[str, str, float]]:
        """(chunk id, path, cosine similarity), best first; ties in chunk-id order (deterministic)."""
        n = len(self)
        if n == 0 or k <= 0:
            return []
        v = np.asarray(vector, dtype=np.float32)
        v = v / (np.linalg.norm(v) or 1.0)
        per_row = self._blocks[0] @ v if len(self._blocks) == 1 else np.concatenate([b @ v for b in self._blocks])
        scores = per_row[self._rowix]
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
                r = int(self._rowix[i])
                for b in self._blocks:
                    if r < len(b):
                        return b[r]
                    r -= len(b)
        return None
