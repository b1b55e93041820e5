"""Files the caller holds, and the tests that go with them."""

from __future__ import annotations

import os
import re

from ...core import SymbolRecord
from ...core.tokens import split_identifier, stripped
from ...indexing.graph import FOLDER_STEMS, NameRules, dir_distance
from ...workspace.kinds import other_dotted_name, stem_of
from ..context import SearchContext
from ..query import QueryInfo
from .base import Hit, ranked_hits


def _keep_best(scores: dict[str, float], notes: dict[str, str], path: str, score: float, note: str) -> None:
    """A file's best score over the anchors, with the reason that gave it."""
    if score > scores.get(path, -1e9):
        scores[path] = score
        notes[path] = note


def names_in_words(stem: str, test: str) -> bool:
    """Whether ``stem`` (separator-stripped) is a run of whole words of the test file's name: `flag` in
    `flag_schema_type_test.go`, `grpcproxy` in `GrpcProxyIT.java`. Not a run of letters inside a word: `help` in
    `helpers_test.go`, `conf` in `test_confirm.py` (a newcomer, session 45: both "named after" files they do not
    test). Names in scripts without case or separators (Chinese, Japanese) keep the plain containment."""
    base = os.path.basename(test)
    if not stem.isascii():
        return stem in stripped(base)
    words = split_identifier(base.rsplit(".", 1)[0])
    for i in range(len(words)):
        joined = ""
        for w in words[i:]:
            joined += w
            if joined == stem:
                return True
            if len(joined) >= len(stem) or not stem.startswith(joined):
                break
    return False


class AnchorBranch:
    name = "anchor"

    def search(self, q: QueryInfo, ctx: SearchContext) -> list[Hit]:
        why = "the file the question names" if ctx.named_anchor else "you have this file open"
        return [Hit(a, 1.0 / (i + 1), [], why) for i, a in enumerate(ctx.anchors) if a in ctx.files]


class AnchorTestsBranch:
    """Tests named after an anchor (``x_test.go``, ``test_x.py``, ``x.spec.ts``, ``XTest.java``)."""

    name = "anchor_tests"

    def search(self, q: QueryInfo, ctx: SearchContext) -> list[Hit]:
        tests = ctx.view.tests()
        if not tests or not ctx.anchors:
            return []
        scores: dict[str, float] = {}
        notes: dict[str, str] = {}
        rules = NameRules(ctx.view.package_roots())  # one per question: what a path gives is kept
        g = ctx.view.graph
        for anchor in ctx.anchors:
            stem = stripped(stem_of(anchor))
            if len(stem) < 2 or ctx.files.get(anchor) == "test":
                continue
            front = stem in FOLDER_STEMS
            for t in tests:
                tstem = stripped(stem_of(t))
                if not (tstem == stem or (not front and len(stem) >= 4 and stem in stripped(os.path.basename(t))
                                          and names_in_words(stem, t))):  # (the containment first: 2.5x cheaper)
                    continue
                if other_dotted_name(anchor, t) or not rules.allows(t, anchor):
                    continue  # (after the name: 20,000 tests' package lookups doubled the loop; review)
                if front and g is not None and t not in g.tests_of.get(anchor, ()):
                    # `index.ts` names its folder: a test of that stem elsewhere is another folder's (vite's fixtures
                    # led every index.ts's tests; a monorepo newcomer, session 39). The graph tells which folder's.
                    continue
                s = 3.0 - 0.1 * dir_distance(anchor, t) + (0.5 if tstem == stem else 0.0)
                _keep_best(scores, notes, t, s, f"named after {os.path.basename(anchor)}")
        return ranked_hits(scores, notes, ctx.depth)




class AnchorFolderTestsBranch:
    """Tests kept in a folder named after an anchor: koa's ``__tests__/response/body.js`` for
    ``lib/response.js``, httpx's ``tests/models/`` for ``httpx/_models.py`` (the separator-stripped stem,
    so the leading underscore goes). A test layout that mirrors modules by folder, not by file name, which
    ``anchor_tests`` cannot see; every test in the folder ties (the branch cannot tell them apart)."""

    name = "anchor_folder"

    def search(self, q: QueryInfo, ctx: SearchContext) -> list[Hit]:
        if not ctx.anchors:
            return []
        # Each test's folders once (separator-stripped), not once per anchor.
        folders = {p: {stripped(part) for part in os.path.dirname(p).split("/")}
                   for p in ctx.view.tests()}
        scores: dict[str, float] = {}
        notes: dict[str, str] = {}
        for anchor in ctx.anchors:
            if ctx.files.get(anchor) == "test":
                continue
            stem = stripped(stem_of(anchor))
            if stem in FOLDER_STEMS:
                stem = stripped(os.path.basename(os.path.dirname(anchor)))
            if len(stem) < 3:
                continue
            note = f"in a test folder named after {os.path.basename(anchor)}"
            for t, parts in folders.items():
                if stem in parts:
                    _keep_best(scores, notes, t, 2.0 - 0.1 * dir_distance(anchor, t), note)
        return ranked_hits(scores, notes, ctx.depth)


# Kinds that hold a file's definitions without being what a test uses: C++/C# namespaces, packages, modules.
SPACE_KINDS = frozenset({"namespace", "package", "module"})
# The why of a test found by a namespace's name alone (related.py orders those last).
NAMESPACE_ONLY = "mentions the namespace"
STEM_ONLY = "mentions `"  # the why of a test found by the file's stem alone (related.py: last, and not always)
_TEST_MODULE = re.compile(r"(?i)^tests?$|^tests?_|_tests?$")
_TYPE_KINDS = frozenset({"class", "interface", "struct", "enum", "trait", "record", "object", "union", "type"})


# The most of a file's definitions searched for in tests, longest first (the longest say most of which file a test
# uses); up to REF_NAMES_WIDE when no test names any of those (AnchorRefsBranch).
REF_NAMES_MAX = 24
REF_NAMES_WIDE = 64


def _tests_naming(ctx: SearchContext, terms: list[str]) -> list[str]:
    """The tests whose text holds any of ``terms``, best first (once each)."""
    seen: dict[str, None] = {}
    for _cid, path, _score in (ctx.lexical.search_terms(terms, limit=200, fields=("content",), kinds={"test"})
                               if terms else []):
        seen.setdefault(path)
    return list(seen)


def _owner_name(container: str) -> str:
    """The type a member's container names, as a test would spell it: `async_logger` for C++'s
    `spdlog::async_logger` (an `-inl.h` file's members: the qualified name matched no test, so spdlog's
    `async_logger-inl.h` had no related test and test_async.cpp was the engine's first; dev_langs, session 46),
    `DirEntry` for Rust's `PartialEq for DirEntry`, `Map` for `Map<K, V>` and for `Map<K, Vec<V>>` (the innermost
    parameters go first, until none is left: one pass left `Vec`; a review, session 47)."""
    bare, prev = container, None
    while bare != prev:
        bare, prev = re.sub(r"<[^<>]*>", "", bare), bare
    words = re.findall(r"[A-Za-z_$][\w$]*", bare)
    return words[-1] if words else container


def _top_level(d: SymbolRecord, spaces: dict[str, str]) -> bool:
    """A namespace's or module's members, but not a test module's: a Rust file's inline `mod tests` put its test
    functions' long names in place of the file's API (a review, session 43). A Ruby module's methods stay (sinatra's
    `module Helpers`: on dev_langs code2test, leaving them out cost the MRR this change gained, 0.707 -> 0.686)."""
    if not d.container:
        return True
    kind = spaces.get(d.container)
    if kind is None:
        return False  # a type's member: its type is what a test names
    return kind != "module" or d.kind in _TYPE_KINDS or not _TEST_MODULE.search(d.container)


# A name this many source files define says little of which one a test uses (as retrieval/related.py's symbols).
AMBIGUOUS_DEFS = 3


def distinctive(ctx: SearchContext, names: list[str]) -> list[str]:
    """``names`` less those that AMBIGUOUS_DEFS or more source files define: an example's `main`, `cli` and `status`
    made urfave/cli's and click's main tests "use what" a hello-world example and an example app define, which no test
    touches (a newcomer, session 45)."""
    if not names:
        return names
    ctx.view.symbols.fetch([n.lower() for n in names])
    return [n for n in names if len({d.path for d in ctx.view.symbols.get(n.lower(), ())
                                     if ctx.files.get(d.path) == "code"}) < AMBIGUOUS_DEFS]


class AnchorRefsBranch:
    """Tests that mention what an anchor defines: a lexical stand-in for reference edges."""

    name = "anchor_refs"

    def search(self, q: QueryInfo, ctx: SearchContext) -> list[Hit]:
        scores: dict[str, float] = {}
        notes: dict[str, str] = {}
        for anchor in ctx.anchors:
            if ctx.files.get(anchor) == "test":
                continue
            stem = stripped(stem_of(anchor))
            symbols = ctx.meta.symbols_of(anchor)
            # What a test would name: top-level definitions, a namespace's members counted as top-level. Not the
            # namespace itself: spdlog's `-inl.h` files define only members, and the one name left, `spdlog`, is in
            # every test, so all twenty tied as "uses what it defines" and the rotation tests came 12th and 16th
            # (an agents' newcomer, session 43). Members defined out of their type's file (a C++ `-inl.h`'s)
            # name that type too.
            spaces = {s.name: s.kind for s in symbols if s.kind in SPACE_KINDS}
            defs = [s for s in symbols if s.kind not in SPACE_KINDS]
            here = {s.name for s in defs}
            names = [s.name for s in defs if len(s.name) >= 4 and _top_level(s, spaces)]
            owners = {s.container: _owner_name(s.container) for s in defs
                      if s.container and s.container not in spaces}
            names += [o for o in owners.values() if len(o) >= 4 and o not in here]
            ordered = sorted(set(names), key=lambda n: (-len(n), n))  # ties by name: set order varies by process
            names = distinctive(ctx, ordered[:REF_NAMES_MAX])
            terms = [n.lower() for n in names] + ([stem] if len(stem) >= 4 else [])
            wide = sorted(n.lower() for n in spaces if len(n) >= 4)
            if not terms and not wide:
                continue
            seen = _tests_naming(ctx, terms)
            if not seen and len(ordered) > REF_NAMES_MAX:
                # No test names the longest: the shorter ones too. hiredis's test.c uses sds.c's `sdsfree` and
                # `sdsempty` (sds.c defines sixty longer names), and the file had no related test. Only then: all 64
                # names at once put sinatra's code2test gold from rank ~2 to ~3 on base.rb, whose names every test
                # uses (bench.related on dev_langs, session 46: related MRR 0.321 -> 0.315, context 0.541 -> 0.474).
                names += distinctive(ctx, ordered[REF_NAMES_MAX:REF_NAMES_WIDE])
                terms = [n.lower() for n in names] + ([stem] if len(stem) >= 4 else [])
                seen = _tests_naming(ctx, terms)
            # Depth kept: tests that only name the namespace follow the others, as the namespace alone ranked them
            # before (dev_langs code2test, session 43: sinatra-contrib's `capture.rb` lost both gold tests from the
            # top 20 without them; MRR rose either way).
            spaced: dict[str, str] = {}
            if wide and len(seen) < ctx.depth:
                for _cid, path, _score in ctx.lexical.search_terms(wide, limit=200, fields=("content",),
                                                                   kinds={"test"}):
                    if path not in seen:
                        seen.append(path)
                        spaced[path] = f"{NAMESPACE_ONLY} `{' '.join(wide[:2])}`"
            # Which of them name a definition, for the why-line only (the order is the search's): a test matched by
            # the stem alone ("utils", from its own `tests/utils.py`) was said to use what fastapi/security/utils.py
            # defines (an agents' newcomer, session 38).
            if len(terms) == len(names) or any(stripped(d.name) == stem for d in symbols):
                by_name = set(seen)  # no stem term, or the stem is a definition's name (`class EventBus`)
            else:
                by_name = {p for _c, p, _s in ctx.lexical.search_terms(terms[:len(names)], limit=200,
                                                                       fields=("content",), kinds={"test"})} if names else set()
            for rank, t in enumerate(seen[: ctx.depth]):
                _keep_best(scores, notes, t, 1.0 / (rank + 1) - 0.01 * dir_distance(anchor, t),
                           spaced.get(t) or (f"uses what {os.path.basename(anchor)} defines" if t in by_name
                                             else f"{STEM_ONLY}{stem}`"))
        return ranked_hits(scores, notes, ctx.depth)
