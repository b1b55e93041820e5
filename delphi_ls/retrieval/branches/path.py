"""Paths matched separator-stripped and lower-cased, capped per directory."""

from __future__ import annotations

import os

from ...core.tokens import stripped
from ..context import SearchContext
from ..query import QueryInfo
from .base import Hit


class PathBranch:
    name = "path"

    def search(self, q: QueryInfo, ctx: SearchContext) -> list[Hit]:
        scores: dict[str, float] = {}
        why: dict[str, str] = {}
        # Explicit mentions ("src/foo.py", frames) are the strongest evidence a path can give.
        for i, mention in enumerate(q.paths):
            m = mention.lstrip("./")
            for path in ctx.resolve_mention(m):
                s = 10.0 - 0.01 * i
                if s > scores.get(path, 0):
                    scores[path] = s
                    why[path] = f"named in the question ({mention})"
        terms = {stripped(t) for t in q.terms + q.identifiers}
        # Sorted: a set's order varies by process (hash seed), and with it the why-line and float sums.
        terms = sorted(t for t in terms if len(t) >= 3)
        if terms:
            for path, spath, sbase in ctx.stripped_paths:
                s = 0.0
                matched = []
                for t in terms:
                    if t in sbase:
                        s += 2.0 * len(t) / max(len(sbase), 1) + 1.0
                        matched.append(t)
                    elif t in spath:
                        s += 0.5
                        matched.append(t)
                # One folder word ("branches", "utils") says little; a basename match or several folder words do.
                if s >= 1.0 and s > scores.get(path, 0):
                    scores[path] = s
                    why.setdefault(path, "path matches " + ", ".join(f"'{m}'" for m in matched[:3]))
        ranked = sorted(scores.items(), key=lambda kv: (-kv[1], len(kv[0]), kv[0]))
        per_dir: dict[str, int] = {}
        out: list[Hit] = []
        for p, s in ranked:
            d = os.path.dirname(p)
            if per_dir.get(d, 0) >= ctx.settings.path_cap_per_dir and s < 10.0:
                continue
            per_dir[d] = per_dir.get(d, 0) + 1
            out.append(Hit(p, s, [], why[p]))
            if len(out) >= ctx.depth:
                break
        return out
