"""Paths matched separator-stripped and lower-cased, capped per directory."""

from __future__ import annotations

import heapq
import os

import numpy as np

from ...core.tokens import stripped
from ..context import SearchContext, plain_mention
from ..query import QueryInfo
from .base import Hit


class PathBranch:
    name = "path"

    def search(self, q: QueryInfo, ctx: SearchContext) -> list[Hit]:
        scores: dict[str, float] = {}
        why: dict[str, str] = {}
        # Explicit mentions ("src/foo.py", frames) are the strongest evidence a path can give.
        for i, mention in enumerate(q.paths):
            for path in ctx.resolve_mention(plain_mention(mention)):
                s = 10.0 - 0.01 * i
                if s > scores.get(path, 0):
                    scores[path] = s
                    why[path] = f"named in the question ({mention})"
        # A name no file has, one letter off a file's: typed by hand in a title ("Fixed regisry-inl.h").
        for i, mention, path in ctx.misspelt_named(q):
            s = 9.0 - 0.01 * i
            if s > scores.get(path, 0):
                scores[path] = s
                why[path] = f"named in the question ({mention}, spelt {os.path.basename(path)})"
        terms = {stripped(t) for t in q.terms + q.identifiers}
        # Sorted: a set's order varies by process (hash seed), and with it the why-line and float sums.
        terms = sorted(t for t in terms if len(t) >= 3)
        paths = ctx.stripped_paths
        order: list[int] = []
        total = np.zeros(len(paths))
        found: list[np.ndarray] = []
        if terms and len(paths):
            # Only rows that hold a term are found (path_index.py: a text search, not a check of every path in
            # Python, 176 ms a query at 100k files); the score is summed over the terms in the same order and
            # in the same float operations as that check did, so scores and ties are the same.
            base_len, rank = paths.ranks()
            for t in terms:
                in_path, in_base = paths.rows_with(t), paths.rows_with(t, basename=True)
                add = np.zeros(len(paths))
                add[in_path] = 0.5
                add[in_base] = 2.0 * len(t) / base_len[in_base] + 1.0
                total += add
                found.append(in_path)
            # A named file matched too keeps the larger score (and the named why-line), ranked once.
            for path in list(scores):
                r = paths.row_of(path)
                if r is not None:
                    if total[r] >= 1.0 and total[r] > scores[path]:
                        scores[path] = float(total[r])
                    total[r] = 0.0
            # One folder word ("branches", "utils") says little; a basename match or several folder words do.
            rows = np.flatnonzero(total >= 1.0)
            order = rows[np.lexsort((rank[rows], paths.path_len()[rows], -total[rows]))].tolist()

        def matched(r: int) -> str:
            hit = [t for t, rows in zip(terms, found, strict=True) if _holds(rows, r)]
            return "path matches " + ", ".join(f"'{m}'" for m in hit[:3])

        # The named files merge in by the order a sort of them all gives: score, then path length, then path.
        named = sorted(((p, s, -1) for p, s in scores.items()), key=_rank_key)
        ranked = heapq.merge(named, ((paths[r][0], float(total[r]), r) for r in order), key=_rank_key)
        per_dir: dict[str, int] = {}
        out: list[Hit] = []
        for p, s, r in ranked:
            d = os.path.dirname(p)
            if per_dir.get(d, 0) >= ctx.settings.path_cap_per_dir and s < 10.0:
                continue
            per_dir[d] = per_dir.get(d, 0) + 1
            out.append(Hit(p, s, [], why[p] if r < 0 else matched(r)))
            if len(out) >= ctx.depth:
                break
        return out


def _rank_key(e: tuple[str, float, int]) -> tuple[float, int, str]:
    return (-e[1], len(e[0]), e[0])


def _holds(rows: np.ndarray, r: int) -> bool:
    i = int(np.searchsorted(rows, r))
    return i < len(rows) and int(rows[i]) == r
