"""The structure lens: the tests that go with a source file, and the source a test exercises.

Both read the file graph (imports, test names, mirroring test folders), the lexical index
(tests that name what a file defines) and, when the workspace is a git repository, co-change.
A Rust file with inline tests (``#[cfg(test)] mod tests``, ``#[test] fn``) is its own related test,
offered with the line where they start.
"""

from __future__ import annotations

import os
import re
from typing import Any

from ..core.tokens import split_identifier, stripped
from ..indexing.graph import FOLDER_STEMS, NameRules, dir_distance, same_package
from ..stores.lexical import LexicalStore
from ..workspace.kinds import is_test_data, names_its_source, other_dotted_name, stem_of
from .branches.anchors import (
    AMBIGUOUS_DEFS,
    NAMESPACE_ONLY,
    SPACE_KINDS,
    STEM_ONLY,
    AnchorRefsBranch,
    AnchorTestsBranch,
    distinctive,
)
from .branches.base import Hit
from .context import SearchContext
from .query import analyse

_IDENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]{3,}")
# Evidence weights for related_code: a name or an import is a deliberate link, a mirroring folder
# a convention, a shared symbol or co-change a hint.
NAMED, IMPORTED, VIA_HELPER, MIRRORED, SYMBOLS, COCHANGE = 3.0, 2.0, 1.0, 1.5, 1.0, 0.5
COCHANGE_TESTS_MIN = 0.25  # redis: t_stream.c's stream tests 0.49 and 0.33; aof.c's aof.tcl 0.28, unrelated 0.12
IN_PACKAGE, PACKAGE_FILES = 0.5, 3  # a file of a package the test imports whole (Go): one of many
NAMED_TEST_MIN = 6  # a symbol's name this long (separators aside) may be looked for inside test names
# A file's stem spelt by this many tests, or half of them, is everyone's word (the test chunks looked at for it).
COMMON_STEM_MIN, COMMON_STEM_CHUNKS = 4, 1000
NAMED_DEF_MIN = 4  # a definition's name this long (separators aside) may name a test file
NAMED_DEFS_MAX = 5  # a module's tests one per function are a handful (click's termui.py: 4)


_HELPER_DIR = re.compile(r"(^|/)fixtures(/|$)")


_REEXPORT_STEMS = frozenset({"__init__", "lib", "mod", "index"})


def _is_reexport(path: str) -> bool:
    """A package's front file: what importing the package loads."""
    return os.path.basename(path).split(".", 1)[0] in _REEXPORT_STEMS


def _is_helper(path: str) -> bool:
    """A source file the tests use as support: one in a `fixtures/` folder. Files in test folders and in
    `test-helpers/`, `testutil/`... are tests by their kind (workspace/kinds.py) and take the helper path by it.
    The word "test" inside a folder's name made pytest's whole ``src/_pytest/`` helpers, so `related-code` on
    `testing/test_junitxml.py` put `junitxml.py`, which the test imports, 6th behind what it imports (a newcomer,
    session 38)."""
    return bool(_HELPER_DIR.search(os.path.dirname(path).lower()))


# Rust inline tests: a `#[cfg(test)]` module (inline or in its own file) and `#[test]` functions.
_RS_TEST_MOD = re.compile(r"#\[cfg\(test\)\]\s*(?:#\[[^\]\n]*\]\s*)*(?:pub(?:\([^)\n]*\))?\s+)?mod\s+(\w+)\s*([{;])")
_RS_TEST_FN = re.compile(r"#\[(?:[\w:]+::)?test(?:\([^)\n]*\))?\]\s*(?:#\[[^\]\n]*\]\s*)*(?:pub\s+)?(?:async\s+)?fn\s+(\w+)")


_InlineTests = tuple[list[tuple[str, int, str]], list[tuple[str, int, str]]]
# Per index view (rebuilt whenever the index changes): lenses ask once per symbol of the same file.
_inline_cache: list[Any] = [None, {}]


def _inline_tests(ctx: SearchContext, rel: str) -> _InlineTests:
    """A Rust file's test modules and test functions: (name, line, the text from there on)."""
    if not rel.endswith(".rs"):
        return [], []
    view, cache = _inline_cache
    if view is not ctx.view:
        cache = {}
        _inline_cache[:] = [ctx.view, cache]
    if rel not in cache:
        cache[rel] = _scan_inline_tests(ctx, rel)
    return cache[rel]


def _scan_inline_tests(ctx: SearchContext, rel: str) -> _InlineTests:
    # The file's text from its chunks (they may overlap, and split `#[test]` from its `fn`).
    lines: dict[int, str] = {}
    for c in ctx.meta.chunks_of(rel):
        for i, ln in enumerate(c.text.split("\n")):
            lines.setdefault(c.start_line + i, ln)
    if not lines:
        return [], []
    text = "\n".join(lines.get(k, "") for k in range(1, max(lines) + 1))
    found: _InlineTests = ([], [])
    for pat, out in ((_RS_TEST_MOD, found[0]), (_RS_TEST_FN, found[1])):
        ms = list(pat.finditer(text))
        for m, nxt in zip(ms, [*ms[1:], None][:len(ms)], strict=True):
            name = m.group(1) + (";" if pat is _RS_TEST_MOD and m.group(2) == ";" else "")
            end = min(nxt.start() if nxt else len(text), m.start() + 4000)  # up to the next test
            out.append((name, 1 + text.count("\n", 0, m.start(1)), text[m.start():end]))
    return found


def _defined_apart(ctx: SearchContext, rel: str, symbol: str, fns: list[tuple[str, int, str]]) -> bool:
    """Whether ``symbol`` is also defined in ``rel`` where no `#[test]` function is: ripgrep's builder method
    `heading()` shares its name with the inline `#[test] fn heading()`, and lost its inline test to it (a
    newcomer, session 38)."""
    tests = {line for name, line, _t in fns if name == symbol}
    return any(d.name == symbol and d.line not in tests for d in ctx.meta.symbols_of(rel))


def only_a_test(ctx: SearchContext, rel: str, symbol: str) -> bool:
    """``symbol`` is defined in ``rel`` only as inline `#[test]` functions: a test, which has no related tests."""
    _mods, fns = _inline_tests(ctx, rel)
    return any(symbol == n for n, _l, _t in fns) and not _defined_apart(ctx, rel, symbol, fns)


def _own_tests(ctx: SearchContext, rel: str, symbol: str | None) -> list[dict[str, Any]]:
    """The file's own inline tests (Rust), or the separate file its `#[cfg(test)] mod tests;` names."""
    mods, fns = _inline_tests(ctx, rel)
    out: list[dict[str, Any]] = []
    for name, line, _text in mods:
        if name.endswith(";"):  # `mod tests;`: tests.rs beside it (lib.rs, mod.rs) or in the module's folder
            name = name[:-1]
            d, stem = os.path.dirname(rel), os.path.splitext(os.path.basename(rel))[0]
            base = d if stem in ("lib", "main", "mod") else os.path.join(d, stem)
            for cand in (f"{base}/{name}.rs", f"{base}/{name}/mod.rs"):
                cand = cand.lstrip("/")
                if cand in ctx.files:
                    out.append({"path": cand, "why": f"the test module `mod {name}` declared at line {line}",
                                "score": 4.0, "line": 1})
                    break
    inline_mods = [(n, ln, t) for n, ln, t in mods if not n.endswith(";")]
    if symbol and any(symbol == n for n, _l, _t in fns + inline_mods) and not _defined_apart(ctx, rel, symbol, fns):
        return out  # the symbol is a test itself
    if symbol:
        # The inline test that names the symbol, in its body or its own name (`test_after_context`).
        key = stripped(symbol)
        for name, line, text in fns:
            if re.search(rf"\b{re.escape(symbol)}\b", text) or (len(key) >= 4 and key in stripped(name)):
                out.append({"path": rel, "why": f"inline test `{name}` at line {line} uses `{symbol}`",
                            "score": 4.0, "line": line})
                return out
    if inline_mods:
        name, line, _ = inline_mods[0]
        more = f" ({len(fns)} #[test] functions in the file)" if fns else ""
        out.append({"path": rel, "why": f"its inline test module `mod {name}` at line {line}{more}", "score": 4.0,
                    "line": line})
    elif fns:
        out.append({"path": rel, "why": f"{len(fns)} inline #[test] function{'s' if len(fns) != 1 else ''}, "
                    f"the first (`{fns[0][0]}`) at line {fns[0][1]}", "score": 4.0, "line": fns[0][1]})
    return out


def _named_why(g: Any, test: str, rel: str) -> str:
    prefix = g.abbreviated.get(test) if g is not None else None
    base = os.path.basename(test)
    if prefix:
        return f"{base} is named after it (`{prefix}` for {os.path.basename(rel)})"
    return f"named after {os.path.basename(rel)}"


def related_tests(ctx: SearchContext, lexical: LexicalStore, rel: str, symbol: str | None,
                  limit: int) -> list[dict[str, Any]]:
    q = analyse(f"tests for {rel}")
    g = ctx.view.graph
    named = AnchorTestsBranch().search(q, ctx)
    if g is not None:
        # A test the graph linked by name to other files only is theirs: `app.use.js` shares a stem with
        # examples/.../app.js but was given to application.js; copy 2.0's `RetryTests.java` shares one
        # with copy 1.0's `Retry.java` but was given to its own copy's.
        # Nor is a fixture in a Python test folder (`tests/test_apps/cliapp/app.py`; kinds.names_its_source).
        named = [h for h in named if h.path in g.tests_of.get(rel, ())
                 or (not g.named_code.get(h.path) and names_its_source(h.path))]
    seen = {n.path for n in named}
    # Tests the graph links by name beyond the anchor's stem: `res.cookie.js` for lib/response.js.
    named += [Hit(t, 0.9, [], _named_why(g, t, rel))
              for t in sorted(g.tests_of.get(rel, set()) if g else set()) if t not in seen]
    if symbol and only_a_test(ctx, rel, symbol):
        return []  # an inline `#[test]` function had a lens of "related tests" of its own
    # A vendored library's tests (a submodule's, a vendored copy's) test that library, not the project's files that
    # share its names: chi's `mux_test.go` and eight more were related tests of a project's own Go `handler.go`
    # (a newcomer's monorepo, session 41). The project's own tests of a vendored file stay.
    vendored = ctx.view.vendored
    home = vendored.root_of(rel)

    def ours(p: str) -> bool:
        root = vendored.root_of(p)
        return root is None or root == home

    own = _own_tests(ctx, rel, symbol)
    importers = sorted(p for p in (g.imported_by.get(rel, set()) if g else set()) if ctx.files.get(p) == "test")
    seen = {n.path for n in named}
    imported = [Hit(p, 1.0, [], f"imports {os.path.basename(rel)}") for p in importers if p not in seen]
    seen |= set(importers)
    imported += _through_header(ctx, rel, seen)
    seen |= {h.path for h in imported}
    # A front file (`optimizer/index.ts`) by its folder's name, which the test folder bears.
    named_as = (os.path.basename(os.path.dirname(rel)) + "/" if stripped(stem_of(rel)) in FOLDER_STEMS
                and os.path.dirname(rel) else os.path.basename(rel))
    mirrored = [Hit(p, 0.8, [], f"in a test folder named after {named_as}")
                for p in sorted(g.mirrors_of.get(rel, set()) if g else set()) if p not in seen]
    seen |= {h.path for h in mirrored}
    if not symbol:
        mirrored += _named_after_definitions(ctx, rel, seen)
        seen |= {h.path for h in mirrored}
        # Tests naming what the file defines: one lexical search per file (a quarter second on a big
        # module), so not run for per-symbol requests, which search for the symbol itself below.
        refs = [h for h in AnchorRefsBranch().search(q, ctx) if h.path not in seen]
        spaced = [h for h in refs if h.note.startswith(NAMESPACE_ONLY)]
        # A test that spells the file's stem and nothing it defines: the weakest evidence, with the namespace's
        # name, and none where the word is everyone's (a newcomer, session 45: every Go test "mentions `package`",
        # so docs/package.go, which no test touches, had five; `import textwrap` made a test click's `_textwrap.py`'s
        # second).
        worded = [h for h in refs if h.note.startswith(STEM_ONLY)]
        refs = [h for h in refs if not h.note.startswith((NAMESPACE_ONLY, STEM_ONLY))]
        spaced += _stem_mentions(ctx, rel, worded)
        linked = {h.path for h in named + imported + mirrored + refs}
        together = _changed_together(ctx, rel, linked)
        middle = together + _through_includer(ctx, rel, linked | {h.path for h in together})
        middle += _program_tests(ctx, rel, linked | {h.path for h in middle})
        later = {h.path for h in middle}
        # The evidence's strength, for the order (Engine.related_tests orders within it): a link to the file itself
        # (its name, an import, its folder), then a use of what it defines, then a shared history or the file that
        # includes it, then a namespace's name alone. (A copy's own test, named after it, came after another copy's
        # that only uses its names when uses and links were one tier: tests/test_graph_copies.py.) Each list holds
        # none of the lists before it.
        tiers = [named + imported + mirrored, refs, middle, [h for h in spaced if h.path not in later]]
        # What tests read comes after the tests, whatever linked it (a golden output changes with the code it
        # records: listed, last; the sort keeps each part's order).
        rows = [{"path": h.path, "why": h.note, "score": round(h.score, 4),
                 "tier": len(tiers) if is_test_data(h.path) else tier}
                for tier, hits in enumerate(tiers) for h in hits if ours(h.path)]
        rows.sort(key=lambda r: r["tier"] == len(tiers))
        return (own + [r for r in rows if r["path"] not in {o["path"] for o in own}])[:limit]
    out: dict[str, dict[str, Any]] = {}
    hits = [(cid, p, score) for cid, p, score in
            lexical.search_terms([symbol.lower()], limit=200, fields=("content",), kinds={"test"})
            if p != rel]
    # The index is lower-cased and splits `NewRequest` into `new`, `request`: a test "mentioned `Recover`" by
    # calling Go's builtin `recover()`, `Get` by `"GET"`, `New` by `httptest.NewRequest` (a newcomer, session 37).
    # A mention is the name as written, a whole word; the hits' chunk texts are read once.
    spelt = re.compile(rf"(?<![\w$]){re.escape(symbol)}(?![\w$])")
    rows = ctx.meta.chunks_by_ids([cid for cid, _p, _s in hits]) if hits else {}
    for cid, p, score in hits:
        row = rows.get(cid)
        if p not in out and row is not None and spelt.search(row.text):
            out[p] = {"path": p, "why": f"mentions `{symbol}`", "score": round(score, 4)}
    spelt_anywhere = bool(out)  # some test spells it (before the filter below): no search by test names then
    roots = ctx.view.package_roots()
    if out and roots and g is not None:
        # Another package's test that spells the name, without importing the file or its folder, spells its own:
        # create-vite's private `start()` and `editFile()` had 19 and 20+ lenses from vite's and the playground's
        # tests (`server.start()`, their own test-utils `editFile`; a monorepo newcomer, session 39).
        folder = os.path.dirname(rel)
        out = {p: r for p, r in out.items() if same_package(p, rel, roots)
               or any(i == rel or os.path.dirname(i) == folder for i in g.imports.get(p, ()))}
    if out and g is not None:
        # A name many files define (`get`, `new`, `default`, `String`, `Error`) is spelt by tests of all of them:
        # gin's `Context.String` listed 20 tests, `internal/bytesconv`'s among them, and ripgrep's crate-private
        # `new()` tests of other crates (a newcomer, session 38). For such a name a mention counts from a test that
        # loads the file or its package (a file of its folder), sits in its folder, or is linked to it by name or
        # folder.
        ctx.view.symbols.fetch([symbol.lower()])
        defined_in = {d.path for d in ctx.view.symbols.get(symbol.lower(), ()) if ctx.files.get(d.path) == "code"}
        if len(defined_in) >= AMBIGUOUS_DEFS:
            folder = os.path.dirname(rel)
            linked = {h.path for h in named} | set(g.mirrors_of.get(rel, ())) | {
                p for p in out if os.path.dirname(p) == folder  # a Go test of the package, a sibling test
                or any(os.path.dirname(i) == folder for i in g.imports.get(p, ()))}
            out = {p: r for p, r in out.items() if p in linked}
    if not out and not spelt_anywhere and len(stripped(symbol)) >= NAMED_TEST_MIN:
        out = _tests_named_for(ctx, lexical, rel, symbol)
    mentioning = set(out)  # tests that spell the symbol out (ordered before those that only share the name)
    # The tests named after the file are the module's own: offered for every symbol in it, first, whether
    # or not they spell the symbol out (flask's tests/test_testing.py drives FlaskClient via app.test_client()).
    by_name = {h.path: h.note for h in named}
    own_stem = stripped(stem_of(rel))
    for p, note in by_name.items():
        if p in out:
            out[p]["why"] += f"; {note}"
        elif stripped(stem_of(p)) == own_stem:  # exactly its name; `res.*.js` stay per symbol
            out[p] = {"path": p, "why": note, "score": 0.0}
    ranked = sorted((r for r in out.values() if ours(r["path"])),
                    key=lambda r: (is_test_data(r["path"]), r["path"] not in by_name, r["path"] not in mentioning,
                                   -r["score"]))
    return (own + [r for r in ranked if r["path"] not in {o["path"] for o in own}])[:limit]


def _named_after_definitions(ctx: SearchContext, rel: str, seen: set[str]) -> list[Hit]:
    """Tests named after a function or type ``rel`` defines (`test_confirm.py` for click's `termui.py`, which
    defines `confirm`; `test_sentinel.py` for `_utils.py`'s `Sentinel`), a test per function being a common layout:
    they were 18th and 5th, "uses what it defines" among the module's every user (a newcomer, session 45). Not a
    test named after a file (`test_parser.py` is `parser.py`'s), nor after a name several files define."""
    g = ctx.view.graph
    symbols = ctx.meta.symbols_of(rel)
    spaces = {s.name for s in symbols if s.kind in SPACE_KINDS}
    names: dict[str, str] = {}
    for s in symbols:  # a namespace's members count as top-level, and a module itself (Ruby's `module Helpers`)
        if (not s.container or s.container in spaces) and len(stripped(s.name)) >= NAMED_DEF_MIN:
            names.setdefault(stripped(s.name), s.name)
    by_stem = ctx.view.tests_by_stem()
    rules = NameRules(ctx.view.package_roots())  # the rules of every name link: language, package, Go's folder
    tests = {n: [t for t in by_stem.get(n, ()) if t not in seen and t != rel and names_its_source(t)
                 and not (g is not None and g.named_code.get(t)) and not other_dotted_name(rel, t)
                 and rules.allows(t, rel)] for n in names}
    tests = {n: ts for n, ts in tests.items() if ts}
    if not tests:
        return []
    kept = distinctive(ctx, [names[n] for n in tests])
    if sum(len(tests[stripped(n)]) for n in kept) > NAMED_DEFS_MAX:
        # A framework's core file: sinatra's `base.rb` defines `markdown`, `haml`, `Request`... and sixteen tests are
        # named after those; first, they pushed the tests of the changes asked about out of the top 20 (dev_langs
        # code2test R@20 0.85 -> 0.39 on sinatra, bench.related, session 45). They stay among its users, below.
        return []
    base = os.path.basename(rel)
    return [Hit(t, 0.8, [], f"named after `{name}`, which {base} defines")
            for name in kept for t in sorted(tests[stripped(name)])]


def _stem_mentions(ctx: SearchContext, rel: str, hits: list[Hit]) -> list[Hit]:
    """The tests that spell ``rel``'s stem (and nothing it defines) whose word can be the file's: none when half the
    tests or more spell it (Go's `package`, a JavaScript `index`), nor a test that imports another module of that
    name (Python's `import textwrap` for click's `_textwrap.py`, a test's own `tests/utils.py`)."""
    if not hits:
        return []
    stem = stripped(stem_of(rel))
    found = ctx.lexical.search_terms([stem], limit=COMMON_STEM_CHUNKS, fields=("content",), kinds={"test"})
    spelling = {p for _c, p, _s in found}
    # (A search that fills its limit counts as everyone's: past 2,000 tests half of them could never be seen.)
    if len(found) >= COMMON_STEM_CHUNKS or len(spelling) >= max(COMMON_STEM_MIN, len(ctx.view.tests()) / 2):
        return []
    g = ctx.view.graph
    specs = ctx.meta.imports_of([h.path for h in hits])
    out = []
    for h in hits:
        named = [sp for sp in specs.get(h.path, ()) if stripped(re.split(r"[.:/\\]", sp)[-1]) == stem]
        if named and (g is None or rel not in g.imports.get(h.path, ())):
            continue  # the word is another module's, imported by that name
        out.append(h)
    return out


_IMPLEMENTATIONS = (".c", ".cc", ".cpp", ".cxx", ".c++", ".m", ".mm")
_HEADERS = (".h", ".hh", ".hpp", ".hxx", ".h++")


def _through_header(ctx: SearchContext, rel: str, seen: set[str]) -> list[Hit]:
    """For a C, C++ or Objective-C source file: the tests that include its header (the file of its stem that is a
    header), which is how a test reaches what the source file defines. hiredis's `net.c` and `sds.c` had no related
    test, though `test.c` includes `net.h` and `sds.h` (bench.related, dev_langs, session 44)."""
    g = ctx.view.graph
    if g is None or not rel.endswith(_IMPLEMENTATIONS):
        return []
    name = os.path.splitext(os.path.basename(rel))[0]
    out: list[Hit] = []
    for header in (name + ext for ext in _HEADERS):
        cands = ctx.view.by_basename.get(header, [])
        for h in sorted(cands, key=lambda c: (dir_distance(rel, c), c))[:1]:  # the nearest of that name
            out += [Hit(p, 1.0, [], f"imports {header}, {os.path.basename(rel)}'s header")
                    for p in sorted(g.imported_by.get(h, ())) if ctx.files.get(p) == "test" and p not in seen]
            seen = seen | {x.path for x in out}  # a test that includes `x.h` and `x.hpp` once
    return out


def _program_tests(ctx: SearchContext, rel: str, seen: set[str]) -> list[Hit]:
    """A Rust binary crate's integration tests (its `tests/`) for a file of its `src/`: such a crate has no library
    for a test to import, so each of its integration tests runs the whole program and every module is theirs. fd's
    `src/dir_entry.rs` had no related test (its tests run `fd` and name no Rust item; dev_mined, session 46), though
    `tests/tests.rs` is what a change to it is checked by."""
    if not rel.endswith(".rs"):
        return []
    root, _sep, inside = rel.partition("src/")
    if inside == "" or (root and not root.endswith("/")):
        return []
    files = ctx.files
    if f"{root}Cargo.toml" not in files or f"{root}src/lib.rs" in files:
        return []
    if f"{root}src/main.rs" not in files and not any(p.startswith(f"{root}src/bin/") for p in files):
        return []
    crate = f"the binary crate {root.rstrip('/')}" if root else "this binary crate"
    tests = sorted(p for p in ctx.view.tests() if p.startswith(f"{root}tests/") and p.endswith(".rs") and p not in seen)
    return [Hit(t, 0.4, [], f"an integration test of {crate}, which runs the whole program") for t in tests]


def _changed_together(ctx: SearchContext, rel: str, seen: set[str]) -> list[Hit]:
    """Tests that changed with ``rel`` in its history (``cochange``: the cosine of their change histories, at least
    COCHANGE_TESTS_MIN). redis's `t_stream.c` had no related test (its Tcl tests name commands, not C functions),
    though `stream.tcl` and `stream-cgroups.tcl` changed with it in most of its changes (a newcomer, session 44)."""
    return [Hit(p, w, [], f"changed together with {os.path.basename(rel)} in its history")
            for p, w in ctx.meta.cochanged_with(rel, limit=100)
            if w >= COCHANGE_TESTS_MIN and ctx.files.get(p) == "test" and p not in seen and p != rel]


def _through_includer(ctx: SearchContext, rel: str, seen: set[str]) -> list[Hit]:
    """The tests of the file ``rel`` is a part of: the one code file that imports it, or the one named before it
    that does (a C++ `-inl.h`, an `_impl.py` kept apart from its module), through which tests reach it. Listed after
    the tests found for ``rel`` itself, before those that only mention its namespace. spdlog's `basic_file_sink-inl.h` defines the sink's members, which
    tests reach through `basic_file_sink.h`: its tests (`test_file_logging.cpp`) were missing, after eight that only
    mention the namespace (an agents' newcomer, session 43)."""
    g = ctx.view.graph
    if g is None:
        return []
    parents = sorted(p for p in g.imported_by.get(rel, ()) if ctx.files.get(p) == "code")
    # Or the one named before it (`basic_file_sink.h` of `basic_file_sink-inl.h`, which spdlog's compiled library,
    # `src/file_sinks.cpp`, includes as well).
    stem = stem_of(rel)
    front = [p for p in parents if len(stem_of(p)) >= 4 and stem.startswith(stem_of(p))]
    if len(parents) != 1 and len(front) != 1:
        return []
    parent = parents[0] if len(parents) == 1 else front[0]
    pb = os.path.basename(parent)
    via = f"through {pb}, which imports it: "
    out = [Hit(p, 0.5, [], f"{via}imports {pb}")
           for p in sorted(g.imported_by.get(parent, ())) if ctx.files.get(p) == "test"]
    out += [Hit(t, 0.5, [], f"{via}named after {pb}") for t in sorted(g.tests_of.get(parent, ()))]
    up = SearchContext(ctx.settings, ctx.meta, ctx.lexical, None, None, ctx.view, [parent])
    out += [Hit(h.path, 0.5, [], f"{via}{h.note}") for h in AnchorRefsBranch().search(analyse(f"tests for {parent}"), up)
            if not h.note.startswith((NAMESPACE_ONLY, STEM_ONLY))]  # its name alone is twice removed
    kept: dict[str, Hit] = {}
    for h in out:
        if h.path not in seen and h.path != rel:
            kept.setdefault(h.path, h)
    return list(kept.values())


def _tests_named_for(ctx: SearchContext, lexical: LexicalStore, rel: str, symbol: str) -> dict[str, dict[str, Any]]:
    """Tests whose own name holds ``symbol`` (`test_decimal_encoder_int` for `decimal_encoder`, `testParseArgs`
    for `parseArgs`), asked only when no test spells the symbol out: fastapi's `decimal_encoder` is exercised
    through `jsonable_encoder` by tests named after it, and had no related test (an agents' newcomer, session 38)."""
    parts = split_identifier(symbol)
    hits = lexical.search_terms(parts, limit=100, fields=("symbols",), kinds={"test"})
    rows = ctx.meta.chunks_by_ids([cid for cid, p, _s in hits if p != rel]) if hits else {}
    out: dict[str, dict[str, Any]] = {}
    for cid, p, score in hits:
        row = rows.get(cid)
        if p in out or row is None:
            continue
        # Whole parts, in a row: `test_get_username` is no test of `get_user` (review, session 38).
        name = next((n for n in row.symbols if _holds_parts(split_identifier(n), parts)), None)
        if name is not None:
            out[p] = {"path": p, "why": f"its test `{name}` is named after `{symbol}`", "score": round(score, 4)}
    return out


def _holds_parts(name: list[str], parts: list[str]) -> bool:
    """``parts`` run inside ``name``'s parts, which hold more (a test's own name, not the symbol's)."""
    n = len(parts)
    return len(name) > n and any(name[i:i + n] == parts for i in range(len(name) - n + 1))


def related_code(ctx: SearchContext, test: str, limit: int) -> list[dict[str, Any]]:
    """Source files a test exercises, best first, each with why."""
    g = ctx.view.graph
    files = ctx.files
    scores: dict[str, float] = {}
    why: dict[str, list[str]] = {}

    via: set[str] = set()

    def add(path: str, w: float, reason: str, indirect: bool = False) -> None:
        if path == test or files.get(path) != "code":
            return
        if indirect:  # one indirect link, through however many helpers: not a sum that beats a named file
            if path in via:  # and one reason ("imported through a.py, b.py"), not three that crowd out the rest
                i = next(i for i, r in enumerate(why[path]) if r.startswith("imported through "))
                why[path][i] += ", " + reason.removeprefix("imported through ")
                return
            via.add(path)
        scores[path] = scores.get(path, 0.0) + w
        why.setdefault(path, []).append(reason)

    if g is not None:
        for code, tests in g.tests_of.items():
            if test in tests:
                prefix = g.abbreviated.get(test)
                add(code, NAMED, f"{os.path.basename(test)} is named after it"
                    + (f" (`{prefix}` for {os.path.basename(code)})" if prefix else ""))
        for code, tests in g.mirrors_of.items():
            if test in tests:
                add(code, MIRRORED, "the test's folder is named after it")
        imports = sorted(g.imports.get(test, ()))
        # A Go import names a package, a folder of files, and reaches every file of it: gin's context_test.go
        # "imported" binding/msgpack.go and header.go as much as the file it tests (a newcomer, session 38). Three
        # or more files of one folder are a package's: each weighs less; the names the test uses tell them apart.
        # (Other languages import files one by one: three modules of a folder are three imports.)
        per_folder: dict[str, int] = {}
        for imp in imports:
            per_folder[os.path.dirname(imp)] = per_folder.get(os.path.dirname(imp), 0) + 1
        packaged = test.endswith(".go")
        for imp in imports:
            if files.get(imp) == "code" and not _is_helper(imp) and (
                    (packaged and per_folder[os.path.dirname(imp)] >= PACKAGE_FILES) or _is_reexport(imp)):
                # A package's front file (`__init__.py`, `lib.rs`, `mod.rs`, `index.ts`) is how a test reaches the
                # package, not what it tests: it took related-code's first places (an agents' newcomer, session 38).
                add(imp, IN_PACKAGE, "the test imports its package")
            elif files.get(imp) == "code" and not _is_helper(imp):
                add(imp, IMPORTED, "the test imports it")
            else:  # a test helper or fixture module: what it imports is what the test drives
                for deeper in sorted(g.imports.get(imp, ())):
                    add(deeper, VIA_HELPER, f"imported through {os.path.basename(imp)}", indirect=True)
    # Names the test uses that exactly one or a few source files define.
    used: set[str] = set()
    for c in ctx.meta.chunks_of(test):
        used.update(m.lower() for m in _IDENT.findall(c.text))
    per_file: dict[str, int] = {}
    ctx.view.symbols.fetch(used)  # the test's names in a read of the manifest per 500
    for name in used:
        defs = {d.path for d in ctx.view.symbols.get(name, ()) if files.get(d.path) == "code"}
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
