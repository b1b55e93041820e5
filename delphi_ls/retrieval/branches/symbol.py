"""Files that define a symbol the question names (exact, case-insensitive), rarest first."""

from __future__ import annotations

import math

from ..context import SearchContext
from ..query import QueryInfo
from .base import Hit


class SymbolBranch:
    name = "symbol"

    def search(self, q: QueryInfo, ctx: SearchContext) -> list[Hit]:
        table = ctx.symbols
        wanted: dict[str, float] = {}
        for ident in q.identifiers:
            for piece in ident.replace("()", "").split("."):
                if len(piece) >= 3:
                    wanted[piece.lower()] = 2.0
        for t in q.terms:
            if len(t) >= 3:
                wanted.setdefault(t, 1.0)
        scores: dict[str, float] = {}
        notes: dict[str, list[str]] = {}
        lines: dict[str, int] = {}
        n_files = max(1, len(ctx.files))
        table.fetch(wanted)  # the question's names in one read of the manifest
        for name, weight in wanted.items():
            defs = table.get(name)
            if not defs:
                continue
            paths = {d.path for d in defs}
            if len(paths) > 50:
                continue  # `new`, `init`, `get`: defined everywhere, says nothing
            idf = math.log(1 + n_files / len(paths))
            for d in defs:
                p = d.path
                scores[p] = scores.get(p, 0.0) + weight * idf / (1 + 0.1 * (len(paths) - 1))
                notes.setdefault(p, [])
                if d.name not in notes[p]:
                    notes[p].append(d.name)
                lines.setdefault(p, d.line)
        ranked = sorted(scores.items(), key=lambda kv: (-kv[1], kv[0]))[: ctx.depth]
        out = []
        for p, s in ranked:
            names = notes[p][:3]
            out.append(Hit(p, s, ctx.chunks_at_line(p, lines[p]), "defines " + ", ".join(f"`{n}`" for n in names)))
        return out
