"""What a branch may read while answering one query."""

from __future__ import annotations

import bisect
import os
from dataclasses import dataclass, field

from ..core import SymbolRecord
from ..core.tokens import stripped
from ..indexing.graph import FileGraph
from ..models.embedders import Embedder
from ..settings import Settings
from ..stores.lexical import LexicalStore
from ..stores.meta import MetaStore
from ..stores.vectors import VectorStore


@dataclass
class IndexView:
    """In-memory tables derived from the manifest, rebuilt when the index changes."""

    files: dict[str, str]  # path -> kind
    symbols: dict[str, list[SymbolRecord]]  # lower name -> definitions
    stripped_paths: list[tuple[str, str, str]]  # (path, stripped path, stripped basename)
    chunk_lines: dict[str, tuple[list[int], list[str]]]  # path -> (start lines, chunk ids)
    by_basename: dict[str, list[str]] = field(default_factory=dict)
    graph: FileGraph | None = None

    @classmethod
    def build(cls, meta: MetaStore) -> IndexView:
        files = {p: k for p, k, _n in meta.files()}
        symbols: dict[str, list[SymbolRecord]] = {}
        for rec in meta.all_symbols():
            symbols.setdefault(rec.name.lower(), []).append(rec)
        sp = [(p, stripped(p), stripped(os.path.basename(p))) for p in files]
        lines: dict[str, tuple[list[int], list[str]]] = {}
        for cid, path, start in meta.chunk_starts():
            entry = lines.setdefault(path, ([], []))
            entry[0].append(start)
            entry[1].append(cid)
        by_base: dict[str, list[str]] = {}
        for p in files:
            by_base.setdefault(os.path.basename(p), []).append(p)
        graph = FileGraph.build(files, meta.all_imports())
        return cls(files, symbols, sp, lines, by_base, graph)


@dataclass
class SearchContext:
    settings: Settings
    meta: MetaStore
    lexical: LexicalStore
    vectors: VectorStore | None
    embedder: Embedder | None
    view: IndexView
    anchors: list[str]
    draft: str | None = None
    depth: int = 100
    seeds: dict[str, float] = field(default_factory=dict)  # for stage-2 branches: anchors + first-pass top files

    @property
    def files(self) -> dict[str, str]:
        return self.view.files

    @property
    def symbols(self) -> dict[str, list[SymbolRecord]]:
        return self.view.symbols

    @property
    def stripped_paths(self) -> list[tuple[str, str, str]]:
        return self.view.stripped_paths

    def chunks_at_line(self, path: str, line: int) -> list[str]:
        entry = self.view.chunk_lines.get(path)
        if not entry:
            return []
        i = bisect.bisect_right(entry[0], line) - 1
        return [entry[1][max(i, 0)]]

    def resolve_mention(self, mention: str) -> list[str]:
        """Workspace files a mentioned path refers to: exact, or by suffix (frames carry absolute paths)."""
        if mention in self.view.files:
            return [mention]
        base = os.path.basename(mention)
        cands = self.view.by_basename.get(base, [])
        if not cands:
            return []
        best = []
        best_len = 0
        parts = mention.split("/")
        for c in cands:
            cp = c.split("/")
            n = 0
            while n < min(len(cp), len(parts)) and cp[-1 - n] == parts[-1 - n]:
                n += 1
            if n > best_len:
                best, best_len = [c], n
            elif n == best_len:
                best.append(c)
        return best[:3]
