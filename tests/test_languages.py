"""The language registry, and C, C++ and C# through it: definition-aligned chunks, symbols with their
containers, includes and `using`s resolved to workspace files, test files by each ecosystem's naming,
and stack frames read out of traces. Real grammars on the fixture workspaces under tests/fixtures/."""

from __future__ import annotations

import importlib
import re
from pathlib import Path

import pytest

from delphi_ls import Engine
from delphi_ls.indexing.chunker import Symbol, chunk_file
from delphi_ls.indexing.graph import FileGraph
from delphi_ls.indexing.imports import Resolver
from delphi_ls.languages import LANGUAGES, grammar_status, spec_for
from delphi_ls.languages.base import FileIndex
from delphi_ls.retrieval.query import analyse
from delphi_ls.workspace.kinds import file_kind, is_test_path, stem_of
from tests.conftest import FIXTURES, copy_fixture, fixture_files

C, CPP, CS = fixture_files("c"), fixture_files("cpp"), fixture_files("csharp")


# --- the registry -----------------------------------------------------------------------------------------
@pytest.mark.parametrize("lang", LANGUAGES, ids=[lang.name for lang in LANGUAGES])
def test_every_language_has_a_fixture_and_loads(lang) -> None:
    """Adding a language is one module, one registry line and one fixture folder: the folder is there,
    every grammar it names loads offline and parses a file of the fixture without a parse error."""
    folder = FIXTURES / lang.fixture_folder
    assert folder.is_dir(), f"{lang.name}: no fixture folder {folder}"
    status = grammar_status()
    for g in lang.grammars:
        assert status.get(g.name) == "ok", (g.name, status.get(g.name))
    own = [p for p in folder.rglob("*") if p.is_file() and spec_for(p.name) in lang.grammars]
    assert own, f"{lang.name}: its fixture holds no file of the language"
    cf = chunk_file(own[0].name, own[0].read_text(encoding="utf-8"))
    assert cf.language in {g.name for g in lang.grammars} and cf.parse_error is None and cf.chunks


def test_registry_owns_extensions_and_import_kinds_once() -> None:
    exts = [e for lang in LANGUAGES for g in lang.grammars for e in g.extensions]
    assert len(exts) == len(set(exts))
    kinds = [k for lang in LANGUAGES for k in lang.resolvers]
    assert len(kinds) == len(set(kinds))
    # every language module is importable on its own and exports LANGUAGE
    for lang in LANGUAGES:
        mod = importlib.import_module(f"delphi_ls.languages.{lang.name}")
        assert mod.LANGUAGE is lang


def test_health_lists_the_new_grammars() -> None:
    status = grammar_status()
    assert {"c", "cpp", "csharp"} <= set(status) and {status[k] for k in ("c", "cpp", "csharp")} == {"ok"}
    assert spec_for("src/hash.c").name == "c" and spec_for("include/x.h").name == "cpp"
    assert spec_for("a/b.hpp").name == "cpp" and spec_for("Foo.cs").name == "csharp"


def test_readme_lists_the_new_grammars_with_version_and_licence() -> None:
    readme = (Path(__file__).resolve().parents[1] / "README.md").read_text(encoding="utf-8")
    for pkg in ("tree-sitter-c", "tree-sitter-cpp", "tree-sitter-c-sharp"):
        row = next((ln for ln in readme.splitlines() if ln.startswith(f"| `{pkg}`")), "")
        assert re.search(r"\| \d+\.\d+\.\d+ \| MIT \|", row), pkg


# --- chunks and symbols -----------------------------------------------------------------------------------
def syms(files: dict[str, str], rel: str) -> dict[str, Symbol]:
    """name -> its first symbol."""
    out: dict[str, Symbol] = {}
    for s in chunk_file(rel, files[rel]).symbols:
        out.setdefault(s.name, s)
    return out


def test_c_symbols_functions_types_and_macros() -> None:
    h = syms(C, "src/hash.c")
    assert h["fnv1a"].kind == "function" and h["resize"].kind == "function" and h["probe"].container == ""
    assert h["LOAD_NUM"].kind == "macro"
    kv = syms(C, "include/minikv/kv.h")
    assert kv["kv_open"].kind == "function"  # a prototype in a header
    assert kv["kv_stats"].kind == "type" and kv["KV_ERR_NOTFOUND"].kind == "macro"
    assert "MINIKV_KV_H" not in kv  # an include guard defines nothing
    # a typedef'd struct of the same name is one symbol; a body-less `struct x` use is none
    assert [s.name for s in chunk_file("src/hash.h", C["src/hash.h"]).symbols].count("hash_table") == 1
    # `hash_entry *e = probe(t, key);` inside a body is a variable, not a prototype
    assert "e" not in h and "bigger" not in h


def test_c_chunks_follow_definitions() -> None:
    cf = chunk_file("src/hash.c", C["src/hash.c"], max_chars=400)
    assert cf.chunks[0].kind == "header" and "#include \"hash.h\"" in cf.chunks[0].text
    by_symbol = {s: c for c in cf.chunks for s in c.symbols}
    # A definition's comment is in its chunk (packing is greedy: a large function may begin inside a chunk that
    # holds the end of the one before; keeping its head with its first lines lowered hunk_cov, session 37).
    assert "/* Doubles" in by_symbol["resize"].text and "static int resize" in by_symbol["resize"].text
    assert by_symbol["hash_put"].text.lstrip().startswith("int hash_put")
    # the guarded header is chunked by what the guard holds, not as one block of line windows
    cf = chunk_file("include/minikv/kv.h", C["include/minikv/kv.h"], max_chars=300)
    assert len(cf.chunks) >= 2 and any("kv_open" in c.symbols for c in cf.chunks)
    assert all(c.kind != "text" for c in cf.chunks)
    # chunks do not repeat a line: a preprocessor line's own newline does not pull in the next line
    lines = [n for c in cf.chunks for n in range(c.start_line, c.end_line + 1)]
    assert len(lines) == len(set(lines))


def test_cpp_symbols_namespaces_classes_and_out_of_line_methods() -> None:
    lg = syms(CPP, "include/tinylog/logger.h")
    assert lg["tinylog"].kind == "namespace"
    # `class TINYLOG_API logger`: the export macro is blanked before parsing
    assert lg["logger"].kind == "class" and lg["logger"].container == "tinylog"
    assert lg["dump_backtrace"].kind == "method" and lg["dump_backtrace"].container == "logger"
    assert lg["sink_ptr"].kind == "type"
    cpp = {(s.name, s.container): s for s in chunk_file("src/logger.cpp", CPP["src/logger.cpp"]).symbols}
    assert cpp[("flush", "logger")].kind == "method"  # void logger::flush() { ... }
    assert cpp[("level_name", "tinylog")].kind == "function"  # a namespace's function stays a function
    rb = syms(CPP, "include/tinylog/details/ring_buffer.hpp")
    assert rb["ring_buffer"].kind == "class" and rb["ring_buffer"].container == "details"
    assert rb["push_back"].container == "ring_buffer" and rb["push_back"].kind == "method"
    rf = syms(CPP, "include/tinylog/sinks/rotating_file_sink.hpp")
    assert rf["rotating_file_sink"].kind == "class" and rf["calc_filename"].container == "rotating_file_sink"


def test_cpp_large_template_class_splits_into_members() -> None:
    methods = "\n".join(f"    int m{i}() const {{ return {i} * {i} + size_; }}" for i in range(60))
    src = (f"#include <vector>\n\nnamespace big {{\ntemplate <typename T>\nclass box {{\npublic:\n{methods}\n"
           "private:\n    int size_ = 0;\n};\n}  // namespace big\n")
    cf = chunk_file("big.hpp", src, max_chars=500)
    assert len(cf.chunks) >= 4 and all(len(c.text) <= 1000 for c in cf.chunks)
    assert any("box" in c.symbols for c in cf.chunks)
    m30 = next(c for c in cf.chunks if "m30" in c.symbols)
    assert "int m30()" in m30.text and "class box" not in m30.text


def test_csharp_symbols_namespaces_types_members() -> None:
    bus = syms(CS, "src/Pulse/Core/EventBus.cs")
    # a file-scoped namespace holds the declarations after it
    assert bus["Pulse.Core"].kind == "namespace" and bus["EventBus"].container == "Pulse.Core"
    assert bus["PublishAsync"].kind == "method" and bus["PublishAsync"].container == "EventBus"
    assert bus["DeadLetters"].kind == "property" and bus["EventBus"].kind == "class"
    ctors = [s for s in chunk_file("src/Pulse/Core/EventBus.cs", CS["src/Pulse/Core/EventBus.cs"]).symbols
             if s.kind == "constructor"]
    assert [c.name for c in ctors] == ["EventBus"]
    retry = syms(CS, "src/Pulse/Retry/RetryPolicy.cs")  # a block namespace
    assert retry["RetryPolicy"].container == "Pulse.Retry" and retry["ExecuteAsync"].container == "RetryPolicy"
    assert syms(CS, "src/Pulse/Core/IEventHandler.cs")["IEventHandler"].kind == "interface"
    assert syms(CS, "src/Pulse/Configuration/PulseOptions.cs")["PulseOptions"].kind == "class"  # a record
    cf = chunk_file("src/Pulse/Core/EventBus.cs", CS["src/Pulse/Core/EventBus.cs"], max_chars=600)
    assert cf.chunks[0].kind == "header" and "using Pulse.Retry;" in cf.chunks[0].text
    pub = next(c for c in cf.chunks if "PublishAsync" in c.symbols)
    assert "public async Task PublishAsync" in pub.text


# --- imports ----------------------------------------------------------------------------------------------
def _graph(files: dict[str, str]) -> FileGraph:
    imports = [(p, s) for p, text in files.items() for s in chunk_file(p, text).imports]
    return FileGraph.build({p: file_kind(p) for p in files}, imports)


def test_c_includes_resolve_relative_then_include_roots() -> None:
    g = _graph(C)
    assert g.imports["src/kv.c"] == {"include/minikv/kv.h", "src/hash.h"}  # "minikv/kv.h" via include/
    assert g.imports["tests/test-hash.c"] == {"src/hash.h"}  # "../src/hash.h" relative to the test
    assert g.imports["src/net.c"] == {"src/net.h"}  # <netdb.h> and friends resolve to nothing
    r = Resolver(["src/a.c", "src/a.h", "include/lib/a.h", "vendor/stdio.h", "third/x/y.h"])
    assert r.resolve("src/a.c", "inc:a.h") == ["src/a.h"]  # the including file's folder first
    assert r.resolve("src/a.c", "incsys:lib/a.h") == ["include/lib/a.h"]
    assert r.resolve("src/a.c", "incsys:vector") == []
    assert r.resolve("src/a.c", "incsys:x/y.h") == ["third/x/y.h"]  # an -I folder we cannot see
    assert r.resolve("src/a.c", "inc:../../etc/passwd") == []


def test_cpp_includes_angle_brackets_resolve_only_to_workspace_files() -> None:
    g = _graph(CPP)
    assert g.imports["tests/logger_test.cc"] == {"include/tinylog/logger.h"}  # <tinylog/logger.h>
    assert g.imports["include/tinylog/sinks/rotating_file_sink.hpp"] == {"include/tinylog/sinks/sink.hpp"}
    assert "include/tinylog/details/ring_buffer.hpp" in g.imports["include/tinylog/logger.h"]


def test_csharp_usings_resolve_to_the_files_declaring_the_namespace() -> None:
    g = _graph(CS)
    assert g.imports["src/Pulse/Core/EventBus.cs"] == {"src/Pulse/Retry/RetryPolicy.cs",
                                                       "src/Pulse/Configuration/PulseOptions.cs"}
    assert "src/Pulse/Core/EventBus.cs" in g.imports["test/Pulse.Tests/Core/EventBusTests.cs"]
    assert "test/Pulse.Tests/Support/OrderPlaced.cs" in g.imports["test/Pulse.Tests/Core/EventBusTests.cs"]
    # namespace declarations are facts for the resolver, not edges; `using Xunit;` resolves to nothing
    assert not g.imports.get("src/Pulse/Retry/RetryPolicy.cs")
    ix = FileIndex(["a/Core/Logger.cs", "a/Core/Sink.cs"], [("a/Core/Logger.cs", "csns:A.Core"),
                                                            ("a/Core/Sink.cs", "csns:A.Core")])
    from delphi_ls.languages import resolve
    assert resolve(ix, "t/T.cs", "cs:A.Core.Logger") == ["a/Core/Logger.cs"]  # using static / an alias
    assert resolve(ix, "t/T.cs", "cs:A.Core") == ["a/Core/Logger.cs", "a/Core/Sink.cs"]
    assert resolve(ix, "t/T.cs", "cs:System.Linq") == []
    # a project-wide `global using` is no edge from GlobalUsings.cs
    src = "global using Pulse.Core;\nglobal using static System.Math;\nusing Pulse.Retry;\n"
    assert chunk_file("test/GlobalUsings.cs", src).imports == ["cs:Pulse.Retry"]


# --- test files by each ecosystem's naming ----------------------------------------------------------------
@pytest.mark.parametrize("path,stem", [
    ("tests/test_kv.c", "kv"), ("test-hash.c", "hash"), ("src/read_test.c", "read"),
    ("src/logger_test.cc", "logger"), ("src/file_sink-test.cc", "file_sink"),
    ("src/ring_buffer_unittest.cc", "ring_buffer"), ("LoggerTest.cpp", "Logger"), ("test.c", "test"),
    ("test/Serilog.Tests/Core/LoggerTests.cs", "Logger"), ("src/Foo/BarTest.cs", "Bar"),
    ("spec/RetryPolicySpecs.cs", "RetryPolicy"), ("Serilog.PerformanceTests/Support/Some.cs", "Some"),
    ("test/Acme.Specs/OverdueInvoiceSpec.cs", "OverdueInvoice"), ("src/test/java/a/CartTest.java", "Cart"),
])
def test_test_files_by_ecosystem_naming(path: str, stem: str) -> None:
    assert is_test_path(path) and file_kind(path) == "test", path
    assert stem_of(path) == stem


def test_cpp_inl_headers_are_named_after_their_header() -> None:
    """spdlog's `registry-inl.h` implements `registry.h`: `test_registry.cpp` is named after both."""
    assert stem_of("include/spdlog/details/registry-inl.h") == "registry" and stem_of("x/a-inl.c") == "a-inl"
    files = {"include/lib/registry.h": "code", "include/lib/registry-inl.h": "code", "tests/test_registry.cpp": "test"}
    g = FileGraph.build(files, [])
    assert g.tests_of["include/lib/registry-inl.h"] == {"tests/test_registry.cpp"}


@pytest.mark.parametrize("path", ["src/latest.c", "src/contest.cpp", "include/test.h", "src/Serilog/Core/Logger.cs",
                                  "src/Testing.Abstractions/Attestation.cs", "src/unittest_helpers.h",
                                  # a newcomer, session 37: taken for tests by name, ranked below unrelated files
                                  "src/main/java/com/acme/release/Latest.java", "src/main/java/a/Contest.java",
                                  "src/Acme.Billing/Specifications/OverdueInvoiceSpec.cs"])
def test_code_files_are_not_tests(path: str) -> None:
    assert not is_test_path(path), path


def test_dotted_names_link_only_their_own_tests() -> None:
    """Angular and NestJS name files `<name>.<role>.ts`: the stem cut at the first dot made every `orders.*.spec.ts`
    the test of every `orders.*.ts`, and the controller's spec was listed first for the service (a newcomer,
    session 37). express's `res.send.js` still tests `response.js` (a one-part name on one side)."""
    files = {"src/orders/orders.service.ts": "code", "src/orders/orders.controller.ts": "code",
             "src/orders/orders.module.ts": "code", "src/orders/orders.service.spec.ts": "test",
             "src/orders/orders.controller.spec.ts": "test", "test/app.e2e-spec.ts": "test", "src/app.ts": "code",
             "src/orders/orders.service.integration.spec.ts": "test"}
    g = FileGraph.build(files, [])
    assert g.tests_of["src/orders/orders.service.ts"] == {"src/orders/orders.service.spec.ts",
                                                          "src/orders/orders.service.integration.spec.ts"}  # review
    assert g.tests_of["src/orders/orders.controller.ts"] == {"src/orders/orders.controller.spec.ts"}
    assert not g.tests_of.get("src/orders/orders.module.ts")
    assert g.tests_of["src/app.ts"] == {"test/app.e2e-spec.ts"}


def test_tests_link_to_the_code_they_are_named_after() -> None:
    g = _graph(C)
    assert g.tests_of["src/hash.c"] == {"tests/test-hash.c"} and g.tests_of["src/kv.c"] == {"tests/test_kv.c"}
    g = _graph(CPP)
    assert g.tests_of["include/tinylog/details/ring_buffer.hpp"] == {"tests/ring_buffer_unittest.cc"}
    assert g.tests_of["src/rotating_file_sink.cpp"] == {"tests/rotating_file_sink-test.cc"}
    g = _graph(CS)
    assert g.tests_of["src/Pulse/Retry/RetryPolicy.cs"] == {"test/Pulse.Tests/Retry/RetryPolicySpecs.cs"}


@pytest.mark.parametrize("fixture,source,test", [
    ("c", "src/hash.c", "tests/test-hash.c"),
    ("cpp", "include/tinylog/details/ring_buffer.hpp", "tests/ring_buffer_unittest.cc"),
    ("csharp", "src/Pulse/Core/EventBus.cs", "test/Pulse.Tests/Core/EventBusTests.cs"),
])
def test_related_tests_on_a_real_index(tmp_path: Path, fixture: str, source: str, test: str) -> None:
    ws = copy_fixture(fixture, tmp_path / "ws")
    eng = Engine(ws, index_dir=str(tmp_path / "index"), vectors=False)
    try:
        eng.index()
        got = eng.related_tests(source)
        assert got and got[0]["path"] == test, got
        # the code a test exercises: the source file (in C, its header may come first: the test includes it)
        code = [c["path"] for c in eng.related_code(test)]
        assert source in code[:2], code
    finally:
        eng.close()


# --- stack frames -----------------------------------------------------------------------------------------
def test_sanitizer_gdb_and_valgrind_frames() -> None:
    asan = ("==4242==ERROR: AddressSanitizer: heap-use-after-free on address 0x602000000010\n"
            "    #0 0x55d4c3a1b2c4 in probe /home/ci/minikv/src/hash.c:43:12\n"
            "    #1 0x55d4c3a1b5e0 in spdlog::logger::log(spdlog::level, char const*) /src/logger.cpp:49:20\n")
    q = analyse(asan)
    assert ("/home/ci/minikv/src/hash.c", 43) in q.frames and ("/src/logger.cpp", 49) in q.frames
    assert q.shape.value == "trace"
    gdb = ("#1  0x0000555555561f3a in tinylog::sinks::rotating_file_sink::log (this=0x5555, msg=...) "
           "at src/rotating_file_sink.cpp:41\n#2  0x000055555555f2d1 in main () at tests/main.cc:9\n")
    assert ("src/rotating_file_sink.cpp", 41) in analyse(gdb).frames
    vg = ("==12== Invalid read of size 4\n==12==    at 0x4C2FB0F: hash_find (hash.c:49)\n"
          "==12==    by 0x10868B: main (test_kv.c:12)\n")
    q = analyse(vg)
    assert ("hash.c", 49) in q.frames and ("test_kv.c", 12) in q.frames and q.shape.value == "trace"
    cc = analyse("include/tinylog/details/ring_buffer.hpp:31:5: error: no member named 'front'")
    assert ("include/tinylog/details/ring_buffer.hpp", 31) in cc.frames
    assert ("src\\net.cpp".replace("\\", "/"), 12) in analyse("src\\net.cpp(12): error C2065").frames


def test_go_panic_frames_with_absolute_paths() -> None:
    """Go prints a panic's frames with absolute paths (only -trimpath builds print module paths): none was read."""
    panic = ("panic: runtime error: invalid memory address or nil pointer dereference\n\n"
             "goroutine 18 [running]:\nexample.com/shop/cache.(*LRU[...]).Get(0x0, {0x6b1a2c, 0x3})\n"
             "\t/home/dev/shop/cache/lru.go:49 +0x2c\nmain.main.func1({0x7f3c, 0xc000}, 0xc0001)\n"
             "\t/home/dev/shop/cmd/server/main.go:17 +0x5a\n")
    q = analyse(panic)
    assert q.frames[:2] == [("/home/dev/shop/cache/lru.go", 49), ("/home/dev/shop/cmd/server/main.go", 17)]
    assert q.shape.value == "trace" and q.paths[0] == "/home/dev/shop/cache/lru.go"


def test_node_async_constructor_and_esm_frames() -> None:
    """`at async …` (every awaited frame), `at new …`, `[as …]` and `file:///` frames were skipped."""
    trace = ("Error: boom\n    at async OrderService.handleWebhook (/app/src/services/order.service.ts:30:7)\n"
             "    at async Promise.all (index 0)\n    at new Cart (/app/src/cart.ts:8:11)\n"
             "    at Layer.handle [as handle_request] (/app/lib/router/layer.js:95:5)\n"
             "    at async file:///app/src/main.ts:12:3\n    at file:///C:/app/src/win.mjs:4:1\n")
    assert analyse(trace).frames == [("/app/src/services/order.service.ts", 30), ("/app/src/cart.ts", 8),
                                     ("/app/lib/router/layer.js", 95), ("/app/src/main.ts", 12),
                                     ("C:/app/src/win.mjs", 4)]


def test_vitest_and_module_cache_frames() -> None:
    """Vitest's `❯ fn path:line:col` frames were no frames, nor a Go module-cache path with `@v1.11.0` (session 38)."""
    vitest = ("TypeError: Cannot read properties of null (reading 'parentNode')\n"
              " ❯ Object.parentNode packages/runtime-dom/src/nodeOps.ts:85:27\n"
              " ❯ packages/runtime-core/src/renderer.ts:994:13\n")
    assert analyse(vitest).frames == [("packages/runtime-dom/src/nodeOps.ts", 85),
                                      ("packages/runtime-core/src/renderer.ts", 994)]
    go = "goroutine 87 [running]:\n\t/home/dev/go/pkg/mod/github.com/gin-gonic/gin@v1.11.0/tree.go:511 +0x7e5\n"
    assert analyse(go).frames == [("/home/dev/go/pkg/mod/github.com/gin-gonic/gin@v1.11.0/tree.go", 511)]


def test_jvm_frames_carry_their_package_as_folders() -> None:
    """A JVM frame names its file bare (`OrderService.java`); with two such files neither was the frame's. The
    package before the class gives the folders, and the file sharing most of them is the frame's (session 37)."""
    from delphi_ls.retrieval.query import closest_by_tail

    trace = ("java.lang.IllegalStateException: oops\n"
             "\tat com.acme.orders.service.OrderService.lambda$checkout$0(OrderService.java:26)\n"
             "\tat java.base/java.util.Optional.orElseThrow(Optional.java:403)\n"
             "\tat Main.main(Main.java:3)\n")
    frames = analyse(trace).frames
    assert frames == [("com/acme/orders/service/OrderService.java", 26), ("java/util/Optional.java", 403),
                      ("Main.java", 3)]
    two = ["src/main/java/com/acme/legacy/OrderService.java", "src/main/java/com/acme/orders/service/OrderService.java"]
    assert closest_by_tail(frames[0][0], two) == [two[1]]


def test_dotnet_frames() -> None:
    trace = ("System.InvalidOperationException: boom\n"
             "   at Pulse.Retry.RetryPolicy.ExecuteAsync(Func`2 action) in /src/Pulse/Retry/RetryPolicy.cs:line 33\n"
             "   at Pulse.Core.EventBus.PublishAsync[TEvent](TEvent evt) in C:\\src\\Pulse\\Core\\EventBus.cs:line 44\n")
    q = analyse(trace)
    assert ("/src/Pulse/Retry/RetryPolicy.cs", 33) in q.frames
    assert ("C:/src/Pulse/Core/EventBus.cs", 44) in q.frames
    assert q.shape.value == "trace" and q.paths[0] == "/src/Pulse/Retry/RetryPolicy.cs"
