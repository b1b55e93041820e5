"""The structure lens: the tests that go with a source file, and the source a test exercises.

Both read the file graph (imports, test names, mirroring test folders), the lexical index
(tests that name what a file defines) and, when the workspace is a git repository, co-change.
"""

from __future__ import annotations

import os
import re
from typing import Any

from ..stores.lexical import LexicalStore
from .branches.anchors import AnchorRefsBranch, AnchorTestsBranch
from .branches.base import Hit
from .context import SearchContext
from .query import analyse

_IDENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]{3,}")
# Evidence weights for related_code: a name or an import is a deliberate link, a mirroring folder
# a convention, a shared symbol or co-change a hint.
NAMED, IMPORTED, VIA_HELPER, MIRRORED, SYMBOLS, COCHANGE = 3.0, 2.0, 1.0, 1.5, 1.0, 0.5


def _is_helper(path: str) -> bool:
    """Support code for tests (``test-helpers/context.js``, ``testutil/fake.go``) by its folder."""
    return "test" in os.path.dirname(path).lower()


def related_tests(ctx: SearchContext, lexical: LexicalStore, rel: str, symbol: str | None,
                  limit: int) -> list[dict[str, Any]]:
    q = analyse(f"tests for {rel}")
    named = AnchorTestsBranch().search(q, ctx)
    g = ctx.view.graph
    importers = sorted(p for p in (g.imported_by.get(rel, set()) if g else set()) if ctx.files.get(p) == "test")
    seen = {n.path for n in named}
    imported = [Hit(p, 1.0, [], f"imports {os.path.basename(rel)}") for p in importers if p not in seen]
    seen |= set(importers)
    mirrored = [Hit(p, 0.8, [], f"in a test folder named after {os.path.basename(rel)}")
                for p in sorted(g.mirrors_of.get(rel, set()) if g else set()) if p not in seen]
    seen |= {h.path for h in mirrored}
    refs = [h for h in AnchorRefsBranch().search(q, ctx) if h.path not in seen]
    file_level = named + imported + mirrored + refs
    if not symbol:
        return [{"path": h.path, "why": h.note, "score": round(h.score, 4)} for h in file_level[:limit]]
    out: dict[str, dict[str, Any]] = {}
    for _cid, p, score in lexical.search_terms([symbol.lower()], limit=200, fields=("content",), kinds={"test"}):
        if p not in out and p != rel:
            out[p] = {"path": p, "why": f"mentions `{symbol}`", "score": round(score, 4)}
    by_name = {h.path for h in file_level if h.note.startswith("named after")}
    # Tests named after the file come first among those that name the symbol.
    ranked = sorted(out.values(), key=lambda r: (r["path"] not in by_name, -r["score"]))
    return ranked[:limit]


def related_code(ctx: SearchContext, test: str, limit: int) -> list[dict[str, Any]]:
    """Source files a test exercises, best first, each with why."""
    g = ctx.view.graph
    files = ctx.files
    scores: dict[str, float] = {}
    why: dict[str, list[str]] = {}

    def add(path: str, w: float, reason: str) -> None:
        if path == test or files.get(path) != "code":
            return
        scores[path] = scores.get(path, 0.0) + w
        why.setdefault(path, []).append(reason)

    if g is not None:
        for code, tests in g.tests_of.items():
            if test in tests:
                add(code, NAMED, f"{os.path.basename(test)} is named after it")
        for code, tests in g.mirrors_of.items():
            if test in tests:
                add(code, MIRRORED, "the test's folder is named after it")
        for imp in sorted(g.imports.get(test, ())):
            if files.get(imp) == "code" and not _is_helper(imp):
                add(imp, IMPORTED, "the test imports it")
            else:  # a test helper or fixture module: what it imports is what the test drives
                for deeper in sorted(g.imports.get(imp, ())):
                    add(deeper, VIA_HELPER, f"imported through {os.path.basename(imp)}")
    # Names the test uses that exactly one or a few source files define.
    used: set[str] = set()
    for c in ctx.meta.chunks_of(test):
        used.update(m.lower() for m in _IDENT.findall(c.text))
    per_file: dict[str, int] = {}
    for name in used:
        defs = {d[2] for d in ctx.view.symbols.get(name, ()) if files.get(d[2]) == "code"}
        if 0 < len(defs) <= 3:
            for p in defs:
                per_file[p] = per_file.get(p, 0) + 1
    if per_file:
        top = max(per_file.values())
        for p, n in per_file.items():
            if n >= 2 or n == top:
                add(p, SYMBOLS * n / top, f"defines {n} name{'s' if n != 1 else ''} the test uses")
    cochanged = ctx.meta.cochanged_with(test, limit=20)
    if cochanged:
        best = cochanged[0][1] or 1.0
        for p, w in cochanged:
            add(p, COCHANGE * w / best, "changed together with the test")
    ranked = sorted(scores, key=lambda p: (-scores[p], p))[:limit]
    return [{"path": p, "why": "; ".join(why[p][:3]), "score": round(scores[p], 4)} for p in ranked]
