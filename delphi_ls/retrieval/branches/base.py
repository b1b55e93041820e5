"""The one shape every branch has: ``search(query, ctx) -> ranked files with evidence``."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Protocol

from ..query import QueryInfo

if TYPE_CHECKING:
    from ..context import SearchContext


@dataclass
class Hit:
    path: str
    score: float
    chunk_ids: list[str] = field(default_factory=list)  # best evidence first
    note: str = ""
    tied: bool = False  # same score as the hit before it: fusion gives both the same rank


def ranked_hits(scores: dict[str, float], notes: dict[str, str], limit: int) -> list[Hit]:
    """File scores -> the best ``limit`` file hits, listed by path within a tie (so the order never depends
    on dict history) and marked tied, since a branch that cannot tell two files apart must not rank them
    apart: the structure branches score by link type, and twenty tests in one folder share a score."""
    ranked = sorted(scores.items(), key=lambda kv: (-kv[1], kv[0]))[:limit]
    return [Hit(p, s, [], notes[p], tied=i > 0 and s == ranked[i - 1][1]) for i, (p, s) in enumerate(ranked)]


class Branch(Protocol):
    name: str

    def search(self, q: QueryInfo, ctx: SearchContext) -> list[Hit]: ...


def files_from_chunks(rows: Iterable[tuple[str, str, float]], limit: int, note: str = "") -> list[Hit]:
    """Chunk hits (id, path, score), best first -> file hits ranked by their best chunk."""
    by_path: dict[str, Hit] = {}
    for cid, path, score in rows:
        h = by_path.get(path)
        if h is None:
            if len(by_path) >= limit:
                continue
            by_path[path] = Hit(path, score, [cid], note)
        elif len(h.chunk_ids) < 3:
            h.chunk_ids.append(cid)
    return list(by_path.values())
