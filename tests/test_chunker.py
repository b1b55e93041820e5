import textwrap

import pytest

from delphi_ls.indexing import chunker
from delphi_ls.indexing.chunker import chunk_file
from delphi_ls.indexing.languages import grammar_status
from tests.conftest import FILES


def _src(rel: str) -> str:
    return textwrap.dedent(FILES[rel]).lstrip("\n")


def test_all_grammars_load_offline():
    assert set(grammar_status().values()) == {"ok"}
    assert {"python", "javascript", "typescript", "tsx", "go", "rust", "java"} <= set(grammar_status())


def names(rel: str) -> dict[str, str]:
    """name -> kind; where a name is defined twice (a Rust struct and its impl), the first wins."""
    out: dict[str, str] = {}
    for s in chunk_file(rel, _src(rel)).symbols:
        out.setdefault(s.name, s.kind)
    return out


def test_symbols_per_language():
    assert names("shipyard/retry.py") == {"RetryPolicy": "class", "__init__": "method", "delay_for": "method",
                                          "with_backoff": "function"}
    go = names("proxy/grpc_proxy.go")
    assert go["GrpcProxy"] == "struct" and go["NewGrpcProxy"] == "function" and go["Listen"] == "method"
    ts = names("web/src/api.ts")
    assert ts["UploadResult"] == "interface" and ts["uploadArtifact"] == "function" and ts["ArtifactClient"] == "class"
    assert ts["list"] == "method"
    assert names("web/src/BuildBadge.tsx") == {"BuildBadge": "function"}
    js = names("web/src/format.js")
    assert js["formatDuration"] == "function" and js["humanBytes"] == "function"
    rs = names("engine/src/lib.rs")
    assert rs["BuildGraph"] == "struct" and rs["topological_order"] == "method" and rs["Step"] == "trait"
    java = names("jvm/src/main/java/dev/shipyard/CacheKey.java")
    assert java["CacheKey"] == "class" and java["fromBytes"] == "method" and java["value"] == "method"


def test_header_chunk_and_alignment():
    cf = chunk_file("shipyard/retry.py", _src("shipyard/retry.py"), max_chars=400)
    assert cf.chunks[0].kind == "header" and "import random" in cf.chunks[0].text
    assert cf.chunks[0].symbols == ["<module>"]
    # Chunks start on definition boundaries and carry their symbols.
    by_symbol = {s: c for c in cf.chunks for s in c.symbols}
    assert by_symbol["with_backoff"].text.lstrip().startswith("def with_backoff")
    assert by_symbol["delay_for"].start_line <= 15 <= by_symbol["delay_for"].end_line


def test_large_class_splits_into_members_and_small_ones_merge():
    methods = "\n".join(f"    def m{i}(self):\n        return {i} * {i}\n" for i in range(60))
    src = f"class Big:\n    '''doc'''\n{methods}\n\ndef a():\n    pass\n\ndef b():\n    pass\n"
    cf = chunk_file("big.py", src, max_chars=500)
    assert len(cf.chunks) >= 4 and cf.chunks[0].symbols[0] == "Big"
    assert all(len(c.text) <= 1000 for c in cf.chunks)
    last = cf.chunks[-1]
    assert "a" in last.symbols and "b" in last.symbols  # two small functions merged


def test_other_text_gets_line_windows():
    text = "\n".join(f"line {i}" for i in range(200))
    cf = chunk_file("notes.txt", text, max_chars=1500)
    assert cf.language == "text" and len(cf.chunks) >= 3
    assert cf.chunks[0].start_line == 1 and cf.chunks[1].start_line == cf.chunks[0].end_line + 1


def test_broken_source_still_chunks():
    cf = chunk_file("broken.py", "def f(:\n  return (\nclass\n")
    assert cf.chunks and cf.chunks[0].text.startswith("def f(")


def test_the_symbol_walk_skips_data_literals_and_finds_what_follows_them():
    """Data literals cannot hold a definition: the walk does not enter them (a generated 900 KB list cost every
    save 0.12 s, issue 18). The definitions before, between and after them are all found, and a lambda in a
    table is not a symbol, as before."""
    table = ",\n".join(f"    'key_{i}': (lambda x: x + {i}, [{i}, {{'n': {i}}}])" for i in range(3000))
    src = (f"def before():\n    pass\n\nTABLE = {{\n{table}\n}}\n\n"
           "class Between:\n    ROWS = [(1, 2), (3, 4)]\n\n    def method(self):\n        return {'a': [1]}\n\n"
           f"ITEMS = set([{', '.join(repr(f'v{i}') for i in range(3000))}])\n\ndef after():\n    pass\n")
    cf = chunk_file("gen/tables.py", src, 2000)
    assert [(s.name, s.kind, s.container) for s in cf.symbols] == [
        ("before", "function", ""), ("Between", "class", ""), ("method", "method", "Between"), ("after", "function", "")]


def _walks(path: str, src: str):
    """(the query-guided walk, the walk of every node, the marks) for one file."""
    from delphi_ls.indexing import chunker
    from delphi_ls.languages import spec_for
    from delphi_ls.languages.base import SOURCE

    spec = spec_for(path)
    data = src.encode()
    tree = chunker._parse(spec.name, data)
    token = SOURCE.set(data)
    try:
        marks = chunker._marks(tree, spec)
        guided = chunker.extract_symbols(tree.root_node, spec, marks)
        full = chunker.extract_symbols(tree.root_node, spec, None)
    finally:
        SOURCE.reset(token)
    return guided, full, marks


NESTED = {
    # Definitions the guided walk must still reach deep inside bodies it otherwise skips.
    "Nested.java": ("class Outer {\n  int x = 1;\n  void run() {\n    int y = 2;\n"
                    "    Object r = new Object() { public void anonymous() { helper(); } };\n"
                    "    class Local { void inner() {} }\n  }\n}\n",
                    ["Outer", "run", "anonymous", "Local", "inner"]),
    "nested.js": "function outer() {\n  const a = 1;\n  const inner = () => a;\n  return inner;\n}\n",
    "exports.js": ("exports.compose = function compose(mw) {\n  return function (ctx) { ctx.x = () => 1; };\n}\n"
                   "module.exports = class Layer {\n  match = (p) => p;\n  handle() { this.cb = function () {}; }\n}\n"
                   "Router.prototype.route = function route(path) {};\n"),
    "fields.ts": "export class S {\n  handleWebhook = async (p: number) => p;\n  private n = 1;\n  go() {}\n}\n",
    "nested.kt": ("class K {\n  val p = 1\n  fun f(): Int {\n    val local = 1\n    return local\n  }\n"
                  "  companion object {\n    fun g() = 1\n  }\n}\n\nfun top() {\n  class Local {\n    fun inner() = 1\n  }\n}\n"),
    "macro.c": "#define LIMIT 10\nint f(void) {\n  return LIMIT;\n}\n#ifdef X\n#define INNER 2\n#endif\n",
    "ns.cs": "namespace A.B;\nclass C { void M() { } }\n",
}


def test_the_guided_symbol_walk_finds_what_the_walk_of_every_node_finds():
    """The walk enters only subtrees where a definition (or a type the language's extra_symbol reads, or a
    sibling scope) starts, found by a tree-sitter query (issue 18: 4.4 -> 1.0 s of CPU on 12,309 files of 13
    repositories, the same chunks, symbols and imports). Every fixture file of every language, and nested
    definitions, give the same symbols both ways, and the guided walk is the one that ran (marks given)."""
    from pathlib import Path

    from delphi_ls.languages import spec_for

    files = [(str(p), p.read_text(encoding="utf-8", errors="replace"))
             for p in sorted(Path(__file__).parent.joinpath("fixtures").rglob("*")) if p.is_file() and spec_for(str(p))]
    files += [(name, v[0] if isinstance(v, tuple) else v) for name, v in NESTED.items()]
    guided_runs = 0
    for path, src in files:
        guided, full, marks = _walks(path, src)
        assert guided == full, path
        guided_runs += marks is not None
    assert guided_runs >= len(files) * 0.9  # trees with errors are walked whole
    for name, v in NESTED.items():  # each nested case is one the guided walk ran on (no parse errors)
        assert _walks(name, v[0] if isinstance(v, tuple) else v)[2] is not None, name
    guided, _full, marks = _walks("Nested.java", NESTED["Nested.java"][0])
    assert [s.name for s in guided] == NESTED["Nested.java"][1]
    # A local class inside a function body is still reached; a local variable is not a property.
    assert [(s.name, s.kind, s.container) for s in _walks("nested.kt", NESTED["nested.kt"])[0]] == [
        ("K", "class", ""), ("p", "property", "K"), ("f", "method", "K"), ("g", "method", "K"),
        ("top", "function", ""), ("Local", "class", ""), ("inner", "method", "Local")]
    assert [s.name for s in _walks("nested.js", NESTED["nested.js"])[0]] == ["outer", "inner"]
    assert {s.name for s in _walks("macro.c", NESTED["macro.c"])[0]} >= {"LIMIT", "f", "INNER"}
    assert [(s.name, s.container) for s in _walks("ns.cs", NESTED["ns.cs"])[0]][-1] == ("M", "C")


def test_extra_symbol_answers_only_for_the_types_it_declares():
    """The guided walk finds the nodes ``extra_symbol`` reads by the types ``extra_types`` declares: a type
    it answers for and does not declare would be skipped without a sign. Checked on every node of every
    fixture file of the languages that have one."""
    from pathlib import Path

    from delphi_ls.indexing import chunker
    from delphi_ls.languages import spec_for
    from delphi_ls.languages.base import SOURCE

    seen = 0
    for p in sorted(Path(__file__).parent.joinpath("fixtures").rglob("*")):
        spec = spec_for(str(p)) if p.is_file() else None
        if spec is None or spec.extra_symbol is None:
            continue
        assert spec.extra_types is not None, spec.name
        data = p.read_bytes()
        tree = chunker._parse(spec.name, data)
        token = SOURCE.set(data)
        try:
            stack = [tree.root_node]
            while stack:
                node = stack.pop()
                if node.type not in spec.extra_types:
                    assert spec.extra_symbol(node) is None, (str(p), node.type)
                else:
                    seen += spec.extra_symbol(node) is not None
                stack.extend(node.named_children)
        finally:
            SOURCE.reset(token)
    assert seen > 0  # the fixtures hold what extra_symbol reads, so the check covers something


def test_a_line_longer_than_two_windows_is_kept_whole_in_pieces():
    """A file whose lines are short on average (so not skipped as minified) but with one very long line (a data
    table, an embedded string): the line's tail past 3,000 characters was dropped, and a word there was never
    found. Every character of it is in some chunk now, each piece on that line."""
    table = ", ".join(f"entry_{i:05d}" for i in range(2000)) + ", zebra_tail_marker"
    for path, text in (("data/table.py", f"def lookup():\n    return 1\n\nTABLE = [{table}]\n\ndef after():\n    return 2\n"),
                       ("notes/table.txt", f"header\n{table}\nfooter\n")):
        chunks = chunk_file(path, text).chunks
        joined = "".join(c.text for c in chunks)
        assert "zebra_tail_marker" in joined and table in joined.replace("\n", ""), path
        pieces = [c for c in chunks if "entry_" in c.text]
        assert len(pieces) > 1 and all(c.start_line == c.end_line == text.splitlines().index(
            next(ln for ln in text.splitlines() if "entry_00000" in ln)) + 1 for c in pieces), path
        assert max(len(c.text) for c in chunks) <= 3000


def test_javascript_definitions_by_assignment_and_class_fields_are_symbols():
    """`exports.compose = function compose…` (koa-compose), `module.exports = class Layer…` (express) and a class
    field holding a function (`handleWebhook = async () => …`) were no symbols: missing from outlines, lenses,
    hover and the symbol branch (a newcomer, session 37). A field holding a value, a function assigned to
    `this.x` or a local object's member, and `module.exports = function () {}` give none."""
    got = {(s.name, s.kind, s.container) for name in ("exports.js", "fields.ts")
           for s in chunker.chunk_file(name, NESTED[name], 1500).symbols}
    assert got == {("compose", "function", ""), ("Layer", "class", ""), ("match", "method", "Layer"),
                   ("handle", "method", "Layer"), ("route", "function", ""), ("S", "class", ""),
                   ("handleWebhook", "method", "S"), ("go", "method", "S")}


def _methods(lang: str, n: int) -> str:
    body = "\n".join(f"        let v{i} = {i} * 2;" for i in range(6))
    if lang == "go":
        return "\n".join(f"// Handle{i} handles case {i}.\n// It doubles.\nfunc (b *Big) Handle{i}() int {{\n"
                         f"{body.replace('let ', '').replace(' = ', ' := ').replace(';', '')}\n        return 0\n}}\n"
                         for i in range(n))
    if lang == "ts":
        return "\n".join(f"  /** Handles case {i}. */\n  @Log('case{i}')\n  handle{i}(x: number): number {{\n"
                         f"{body.replace('let ', 'const ')}\n    return x;\n  }}\n" for i in range(n))
    return "\n".join(f"    /// Handles case {i}.\n    #[inline]\n    pub fn handle_{i}(&self) -> i32 {{\n{body}\n        0\n    }}\n"
                     for i in range(n))


@pytest.mark.parametrize("name,text", [
    ("big.go", "package big\n\nimport \"fmt\"\n\n" + _methods("go", 14)),
    ("big.service.ts", "import { Log } from './log';\n\n/** The big service. */\nexport class Big {\n" + _methods("ts", 14) + "}\n"),
    ("big.rs", "use std::fmt;\n\n/// A big store.\npub struct Big;\n\n/// Its cases.\nimpl Big {\n" + _methods("rs", 14) + "}\n"),
])
def test_doc_comments_decorators_and_attributes_open_their_definitions_chunk(name: str, text: str):
    """At a chunk break, a method's doc comment and `@decorator` / `#[attribute]` ended the chunk before its own,
    and a split container's first line was in two chunks (Rust: `impl Big {` after the imports); a newcomer,
    session 37. Every chunk starts at a doc comment, a decorator or the module's first line; no line is in two
    chunks; every line of the file is in one."""
    chunks = chunker.chunk_file(name, text, 1500).chunks
    assert len(chunks) >= 3
    lines = text.split("\n")
    for c in chunks:
        first = lines[c.start_line - 1].strip()
        assert c.start_line == 1 or first.startswith(("//", "/**", "@", "#[")), (name, c.start_line, first)
    covered = [n for c in chunks for n in range(c.start_line, c.end_line + 1)]
    assert len(covered) == len(set(covered))
    assert {n for n, line in enumerate(lines, 1) if line.strip()} <= set(covered)


@pytest.mark.parametrize("name,text", [
    ("Big.java", "package a;\n\npublic class Big {\n"
     + "".join(f"  private int field{i} = {i}; // the field number {i} xxxxxxxxxxxxxxx\n" for i in range(60)) + "}\n"),
    ("big.ts", "export class Big {\n"
     + "".join(f"  field{i}: number = {i}; // the field number {i} xxxxxxxxxxxxxxx\n" for i in range(60)) + "}\n"),
    ("big.c", "".join(f"int field{i} = {i}; // the field number {i} xxxxxxxxxxxxxxx\n" for i in range(60))),
    ("big.rs", "".join(f"const F{i}: i32 = {i}; // the field number {i} xxxxxxxxxxxxxxx\n" for i in range(60))),
])
def test_a_trailing_comment_stays_on_its_line(name: str, text: str):
    """`int a = 1; // note`: the comment began the next chunk, which then began on the line the last one ended on
    (review, session 37: Java's newly; TypeScript's and C's before too)."""
    chunks = chunker.chunk_file(name, text, 1500).chunks
    covered = [n for c in chunks for n in range(c.start_line, c.end_line + 1)]
    assert len(chunks) >= 2 and len(covered) == len(set(covered)), [(c.start_line, c.end_line) for c in chunks]


def test_a_long_run_of_comment_lines_is_chunked_in_linear_time():
    """Each comment line carried the whole run before it to the next chunk, never flushed: 8,000 lines of a Go
    file took a minute (review, session 37); at most half a chunk is carried now."""
    import time

    text = "package p\n\n" + "".join(f"// line {i} of a long commented-out block xxxxxxxxxxxxxxxxx\n" for i in range(8000))
    start = time.perf_counter()
    chunks = chunker.chunk_file("a.go", text + "func F() int {\n\treturn 1\n}\n", 1500).chunks
    assert time.perf_counter() - start < 3.0  # 0.08 s here; 58 s before
    assert max(len(c.text) for c in chunks) <= 1500 * 2


def test_go_types_by_what_they_are_and_package_level_names():
    """Go types were all `type` (an outline showed structs as type parameters), and `var ErrNotFound = …` was no
    symbol (a newcomer, session 37); `var _ Iface = (*T)(nil)` is a compile-time check, not a name (review)."""
    src = ("package cache\n\nvar ErrNotFound = errors.New(\"x\")\nvar _ Store = (*LRU)(nil)\n\nconst (\n\tA = 1\n)\n\n"
           "type LRU struct{ n int }\n\ntype Store interface{ Get() }\n\ntype Key string\n\n"
           "func (l *LRU) Get() { var local = 1; _ = local }\n")
    got = {(s.name, s.kind) for s in chunker.chunk_file("cache/lru.go", src, 1500).symbols}
    assert got == {("ErrNotFound", "variable"), ("A", "constant"), ("LRU", "struct"), ("Store", "interface"),
                   ("Key", "type"), ("Get", "method")}


def _getter(i: int) -> str:
    body = "\n".join(f"    const v{j} = this.res.getHeader('x-{i}-{j}') || this.ctx.state.fallback{j};" for j in range(6))
    return f"  /**\n   * Header {i}.\n   */\n  get header{i} () {{\n{body}\n    return v0 + v1;\n  }},\n"


def _test_case(i: int, it: str = "it", opener: str = "() => {", closer: str = "})") -> str:
    body = "\n".join(f"    assert.strictEqual(ctx.response.header{i}, 'value {i} {j} for the header');" for j in range(6))
    return f"  {it}('reads header {i} from the response', {opener}\n    const ctx = context()\n{body}\n  {closer}\n"


def _starts_on_a_member(cf, marker: str) -> None:
    """Every chunk past the opening line (line 5) starts on a member's first line (its doc comment)."""
    for c in cf.chunks:
        if c.start_line <= 5:
            continue
        first = c.text.lstrip("\n").splitlines()[0].strip()
        assert first.startswith(marker) or first in ("}",), (c.start_line, c.end_line, first)


@pytest.mark.parametrize("opening", ["module.exports = {", "const proto = module.exports = {", "export default {"])
def test_a_large_object_of_methods_is_chunked_by_its_methods(opening: str):
    """Koa's `lib/response.js` is one `module.exports = {…}` of getters: it was cut into windows of 60 lines, each
    holding the tail of one getter and the head of the next (a chunk, a span, a hit began mid-method)."""
    src = "'use strict'\n\nconst vary = require('vary')\n\n" + opening + "\n" + "\n".join(
        _getter(i) for i in range(30)) + "}\n"
    cf = chunk_file("lib/response.js", src)
    assert len(cf.chunks) > 4
    _starts_on_a_member(cf, "/**")
    by_symbol = {s: c for c in cf.chunks for s in c.symbols}
    for i in range(30):  # each getter whole in the chunk its symbol is in
        c = by_symbol[f"header{i}"]
        assert f"get header{i} ()" in c.text and "this.ctx.state.fallback5;\n    return v0 + v1;\n  }," in \
            c.text.split(f"get header{i} ()", 1)[1], i


@pytest.mark.parametrize(("rel", "prelude", "opener", "cases", "closer"), [
    ("test/response.test.js", "const assert = require('assert')\n\n", "describe('ctx.response', () => {",
     lambda i: _test_case(i), "})\n"),
    ("test/response.spec.ts", "import { describe, it } from 'vitest'\n\n", "describe('ctx.response', function () {",
     lambda i: _test_case(i, "test", "async () => {"), "});\n"),
    ("spec/response_spec.rb", "require 'spec_helper'\n\n", "RSpec.describe Response do",
     lambda i: f"  it 'reads header {i} from the response' do\n" + "\n".join(
         f"    expect(response.header{i}).to eq('value {i} {j} for the header')" for j in range(6)) + "\n  end\n",
     "end\n"),
])
def test_a_large_top_level_test_block_is_chunked_by_its_cases(rel, prelude, opener, cases, closer):
    """A test file that is one `describe(…)` block was cut into 60-line windows across its cases: the span an agent
    got for a case began in the one before it."""
    src = prelude + opener + "\n" + "\n".join(cases(i) for i in range(25)) + closer
    cf = chunk_file(rel, src)
    assert len(cf.chunks) > 3
    for c in cf.chunks:
        if c.start_line > 3:  # past the opener: each chunk starts on a case
            first = c.text.lstrip("\n").splitlines()[0].strip()
            assert first.startswith(("it ", "it(", "test(")), (rel, c.start_line, first)
    text = "".join(c.text for c in cf.chunks)
    for i in range(25):  # no case cut in two
        assert sum(f"header {i} from" in c.text for c in cf.chunks) == 1
        assert f"value {i} 5 for the header" in text


def test_a_large_data_literal_is_still_chunked_whole():
    """A table (no parts of any size side by side beside its rows) keeps every line, in order, in chunks under two
    windows' size."""
    rows = "\n".join(f"  ['row{i}', {i}, 'a value for row {i} that makes the line a little longer']," for i in range(400))
    src = f"const TABLE = [\n{rows}\n]\n\nfunction lookup (k) {{\n  return TABLE.find(r => r[0] === k)\n}}\n"
    cf = chunk_file("lib/table.js", src)
    text = "".join(c.text for c in cf.chunks)
    assert all(f"'row{i}'" in text for i in range(400))
    assert all(len(c.text) <= 3000 for c in cf.chunks)
    assert [c.start_line for c in cf.chunks] == sorted(c.start_line for c in cf.chunks)
    assert "lookup" in cf.chunks[-1].symbols


def test_a_doc_comment_a_blank_line_above_its_definition_opens_that_definitions_chunk():
    """Koa's and express's JSDoc style leaves a blank line between `/** … */` and the method: the comment ended the
    chunk before, and the method's chunk began without its documentation. A file's own head comment stays there."""
    getters = "\n".join(_getter(i).replace("   */\n  get", "   */\n\n  get") for i in range(30))
    src = "/**\n * Module dependencies.\n */\n\nconst vary = require('vary')\n\nmodule.exports = {\n" + getters + "}\n"
    cf = chunk_file("lib/response.js", src)
    assert "Module dependencies" in cf.chunks[0].text and cf.chunks[0].kind == "header"
    for c in cf.chunks[1:]:
        if c.start_line > 8:
            first = c.text.lstrip("\n").splitlines()[0].strip()
            assert first == "/**", (c.start_line, first)
    for i in range(30):  # each doc comment in its getter's chunk
        assert any(f"Header {i}." in c.text and f"get header{i} ()" in c.text for c in cf.chunks), i


def test_a_split_statement_keeps_every_line_once():
    """What follows the parts on lines of its own (`}, { timeout: … })` after a `describe`'s callback) was in no
    chunk, its words in no index; parts that share a line (two keys a line) were split between chunks, and that
    line was then in both (review, session 44). Every line is in exactly one chunk."""
    cases = "".join(f"  it('reads header {i}', () => {{\n" + "    expect(thing).toBe(1)\n" * 8 + "  })\n"
                    for i in range(20))
    tail = "describe('x', () => {\n" + cases + "}, {\n  timeout: 5000,\n  retries: trailing_unique_word\n})\n"
    pairs = "const o = {\n" + "".join(f"  k{i}: 'a value for key {i} long enough to count for something', "
                                      f"j{i}: 'a second key {i} on that line',\n" for i in range(40)) + "}\n"
    for rel, src in (("t.test.js", tail), ("o.js", pairs)):
        cf = chunk_file(rel, src)
        assert len(cf.chunks) > 1
        body = [ln for c in cf.chunks for ln in c.text.splitlines()]
        assert sorted(body) == sorted(src.splitlines()), rel  # each line once, none lost
    assert any("trailing_unique_word" in c.text for c in chunk_file("t.test.js", tail).chunks)
