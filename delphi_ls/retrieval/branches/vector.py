"""Nearest chunks by embedding; a caller's draft moves the question into code's vocabulary."""

from __future__ import annotations

import numpy as np

from ..context import SearchContext
from ..query import QueryInfo
from .base import Hit, files_from_chunks


class VectorBranch:
    name = "vector"

    def search(self, q: QueryInfo, ctx: SearchContext) -> list[Hit]:
        if ctx.vectors is None or ctx.embedder is None:
            return []
        texts = [q.text[:4000]]
        use_draft = bool(ctx.draft) and q.shape not in ("identifier", "trace")
        if use_draft:
            texts.append(ctx.draft[:4000])  # type: ignore[index]
        vecs = ctx.embedder.embed(texts)
        v = vecs.mean(axis=0)
        v = v / (np.linalg.norm(v) or 1.0)
        rows = ctx.vectors.query(v, k=300)
        hits = files_from_chunks(rows, limit=ctx.depth)
        for h in hits:
            h.note = "similar meaning" + (" (with draft)" if use_draft else "")
        return hits
