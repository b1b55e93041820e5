"""File-level documents (path words, leading comment, top-level names, imports, importers) by BM25.

One document per file (``stores/filedocs.py``): a question that describes a file's role ("where does
the help text get built") can reach ``help.go`` through its name and its definitions, where chunk-level
BM25 ranks every file that shares one of the question's words.
"""

from __future__ import annotations

from ...stores.filedocs import FileDocs
from ..context import SearchContext
from ..query import QueryInfo
from .base import Hit

# Terms searched: the question's rarest (by the chunk index's document frequency), as the bm25 branch
# does, so a pasted description's boilerplate words do not decide the ranking.
MAX_TERMS = 24


class FileDocBranch:
    name = "filedoc"

    def search(self, q: QueryInfo, ctx: SearchContext) -> list[Hit]:
        terms = ctx.lexical.rarest(q.terms, MAX_TERMS)
        # Asked for a kind (source files, tests), it proposes only that kind, as the structure branches do:
        # a file's name and header match role words in test and data files as readily as in the source.
        want = q.prefer
        rows = FileDocs(ctx.meta).search(terms, limit=ctx.depth * (3 if want else 1))
        hits = [Hit(p, s, [], "the file's name, names and header match") for p, s in rows
                if p in ctx.files and (not want or ctx.files[p] in want)]
        return hits[: ctx.depth]
