"""Ruby, PHP and Kotlin through the language registry, each on its fixture workspace
(tests/fixtures/ruby|php|kotlin): definition-aligned chunks, symbols with containers, imports resolved
to workspace files (Ruby's load path, composer's PSR-4 map, Kotlin packages), test files linked by each
ecosystem's naming, and stack frames read out of traces. Real tree-sitter grammars, a real index
(lexical branches only), no mocks.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from delphi_ls import Engine
from delphi_ls.indexing.chunker import chunk_file
from delphi_ls.indexing.graph import FileGraph
from delphi_ls.indexing.imports import Resolver
from delphi_ls.languages.registry import grammar_status, language_of
from delphi_ls.retrieval.query import analyse
from delphi_ls.workspace.kinds import file_kind, stem_of
from tests.conftest import FIXTURES, copy_fixture


@pytest.fixture(scope="module")
def engines(tmp_path_factory: pytest.TempPathFactory):
    """Each fixture indexed once (vectors off: only the deterministic branches)."""
    made: dict[str, Engine] = {}
    for name in ("ruby", "php", "kotlin"):
        base = tmp_path_factory.mktemp(name)
        eng = Engine(copy_fixture(name, base / "ws"), index_dir=str(base / "idx"), vectors=False)
        eng.index(vectors=False)
        made[name] = eng
    yield made
    for eng in made.values():
        eng.close()


def _chunked(fixture: str, rel: str, max_chars: int = 1500):
    return chunk_file(rel, (FIXTURES / fixture / rel).read_text(encoding="utf-8"), max_chars)


# --- grammars -----------------------------------------------------------------------------------------

@pytest.mark.parametrize("grammar", ["ruby", "php", "kotlin"])
def test_grammar_loads_from_its_wheel(grammar: str) -> None:
    assert grammar_status()[grammar] == "ok"


@pytest.mark.parametrize("rel,lang", [("lib/x.rb", "ruby"), ("tasks/db.rake", "ruby"), ("x.gemspec", "ruby"),
                                      ("src/X.php", "php"), ("src/X.kt", "kotlin"), ("build.gradle.kts", "kotlin")])
def test_extensions_map_to_the_language(rel: str, lang: str) -> None:
    found = language_of(rel)
    assert found is not None and found.name == lang


# --- symbols with containers ----------------------------------------------------------------------------

SYMBOLS = {
    ("ruby", "lib/mailbag/delivery/smtp.rb"): [("Mailbag", "module", ""), ("Delivery", "module", "Mailbag"),
                                               ("Smtp", "class", "Delivery"), ("deliver", "method", "Smtp"),
                                               ("send_once", "method", "Smtp")],
    ("ruby", "lib/mailbag/message.rb"): [("Message", "class", "Mailbag"), ("parse", "method", "Message")],
    ("php", "src/Money/Money.php"): [("Acme\\Invoice\\Money", "namespace", ""), ("Money", "class", "Acme\\Invoice\\Money"),
                                     ("of", "method", "Money"), ("assertSameCurrency", "method", "Money")],
    ("php", "src/Money/Currency.php"): [("Currency", "enum", "Acme\\Invoice\\Money"), ("decimals", "method", "Currency")],
    ("php", "src/Tax/TaxCalculator.php"): [("TaxCalculator", "interface", "Acme\\Invoice\\Tax"), ("taxOn", "method", "TaxCalculator")],
    ("php", "src/Support/HasTotals.php"): [("HasTotals", "trait", "Acme\\Invoice\\Support"), ("subtotal", "method", "HasTotals")],
    ("php", "src/helpers.php"): [("format_money", "function", "")],
    ("kotlin", "src/main/kotlin/com/example/tally/store/InMemoryStore.kt"): [
        ("InMemoryStore", "class", ""), ("series", "property", "InMemoryStore"), ("record", "method", "InMemoryStore"),
        ("DEFAULT_RETENTION_MILLIS", "property", "InMemoryStore")],
    ("kotlin", "src/main/kotlin/com/example/tally/store/MetricStore.kt"): [("MetricStore", "interface", ""),
                                                                           ("latest", "method", "MetricStore")],
    ("kotlin", "src/main/kotlin/com/example/tally/model/Metric.kt"): [("MetricKind", "enum", ""), ("Metric", "class", ""),
                                                                      ("counter", "method", "Metric")],
    ("kotlin", "src/main/kotlin/com/example/tally/util/Time.kt"): [("Clock", "interface", ""), ("SystemClock", "object", ""),
                                                                   ("nowMillis", "method", "SystemClock"),
                                                                   ("formatDuration", "function", "")],
}


@pytest.mark.parametrize("fixture,rel", sorted(SYMBOLS), ids=[r for _f, r in sorted(SYMBOLS)])
def test_symbols_have_kinds_and_containers(fixture: str, rel: str) -> None:
    cf = _chunked(fixture, rel)
    assert cf.parse_error is None and cf.language == fixture
    got = {(s.name, s.kind, s.container) for s in cf.symbols}
    missing = [want for want in SYMBOLS[(fixture, rel)] if want not in got]
    assert not missing, f"{rel}: missing {missing}; got {sorted(got)}"


def test_kotlin_locals_are_not_symbols() -> None:
    """A ``val`` inside a function body is no definition (Kotlin's grammar calls both property_declaration)."""
    cf = _chunked("kotlin", "src/main/kotlin/com/example/tally/store/InMemoryStore.kt")
    names = {s.name for s in cf.symbols}
    assert "now" not in names and "samples" not in names


# --- definition-aligned chunks -------------------------------------------------------------------------

ALIGNED = [("ruby", "lib/mailbag/message.rb"), ("ruby", "lib/mailbag/delivery/smtp.rb"),
           ("php", "src/Money/Money.php"), ("php", "src/Invoice.php"),
           ("kotlin", "src/main/kotlin/com/example/tally/store/InMemoryStore.kt"),
           ("kotlin", "src/main/kotlin/export/PrometheusExporter.kt")]


@pytest.mark.parametrize("fixture,rel", ALIGNED, ids=[r for _f, r in ALIGNED])
def test_small_chunks_follow_definitions(fixture: str, rel: str) -> None:
    """With a budget smaller than the class, the class splits into members and no method is cut in two."""
    max_chars = 400
    cf = _chunked(fixture, rel, max_chars)
    assert len(cf.chunks) >= 3 and all(c.kind != "text" for c in cf.chunks)
    lines = (FIXTURES / fixture / rel).read_text(encoding="utf-8").splitlines(keepends=True)
    for s in cf.symbols:
        size = sum(len(x) for x in lines[s.line - 1:s.end_line])
        if s.kind in ("method", "function") and size <= max_chars:
            assert any(c.start_line <= s.line and s.end_line <= c.end_line for c in cf.chunks), \
                f"{s.name} ({s.line}-{s.end_line}) is cut: {[(c.start_line, c.end_line) for c in cf.chunks]}"
    # a chunk starts where a member starts (not mid-way through one, as line windows would)
    starts = {c.start_line for c in cf.chunks}
    member_starts = {s.line for s in cf.symbols if s.kind in ("method", "function", "property")}
    assert len(starts & member_starts) >= 2


# --- imports resolved to workspace files ---------------------------------------------------------------

EDGES = {
    "ruby": [("lib/mailbag.rb", "lib/mailbag/message.rb"),  # require "mailbag/message" via lib/
             ("lib/mailbag.rb", "lib/mailbag/delivery/smtp.rb"),  # autoload :Smtp, "mailbag/delivery/smtp"
             ("lib/mailbag/delivery/outbox.rb", "lib/mailbag/delivery/smtp.rb"),  # require_relative "smtp"
             ("lib/mailbag/message.rb", "lib/mailbag/errors.rb"),  # require_relative "errors"
             ("test/template_test.rb", "test/test_helper.rb"),
             ("test/test_helper.rb", "lib/mailbag.rb"),
             ("spec/mailbag/delivery/smtp_spec.rb", "spec/spec_helper.rb"),  # rspec puts spec/ on the load path
             ("mailbag.gemspec", "lib/mailbag/version.rb")],
    "php": [("src/Invoice.php", "src/Money/Money.php"),  # use Acme\Invoice\Money\Money via PSR-4
            ("src/Invoice.php", "src/Tax/NoTax.php"),  # grouped use Acme\Invoice\Tax\{NoTax, ...}
            ("src/Invoice.php", "src/Tax/TaxCalculator.php"),
            ("tests/Tax/FlatRateTaxTest.php", "src/Tax/FlatRateTax.php"),
            ("tests/bootstrap.php", "src/helpers.php"),  # require_once __DIR__ . '/../src/helpers.php'
            ("src/Render/HtmlRenderer.php", "templates/invoice.html.php")],
    "kotlin": [("src/main/kotlin/com/example/tally/Tally.kt", "src/main/kotlin/com/example/tally/model/Metric.kt"),
               # MetricKind is declared in Metric.kt: found by the package map, not the path
               ("src/main/kotlin/export/PrometheusExporter.kt", "src/main/kotlin/com/example/tally/model/Metric.kt"),
               # Clock and SystemClock live in util/Time.kt
               ("src/main/kotlin/com/example/tally/store/InMemoryStore.kt",
                "src/main/kotlin/com/example/tally/util/Time.kt"),
               ("src/test/kotlin/com/example/tally/export/PrometheusExporterTest.kt",
                "src/main/kotlin/com/example/tally/Tally.kt")],
}
# What each language reads as an import, exactly (in order, once each).
READS = [
    ("lib/a.rb", 'require "json"\nrequire_relative "../b"\nautoload :C, "a/c"\n'
                 'require File.expand_path("../d", __FILE__)\nrequire File.join(__dir__, "e")\n'
                 'require "x/#{name}"\nfoo.require "not/this"\n'
                 'module A\n  def self.lazy\n    require "a/lazy"\n  end\nend\n',
     ["rb:json", "rbrel:../b", "rb:a/c", "rbrel:d", "rbrel:e", "rb:a/lazy"]),
    ("src/A.php", "<?php\nnamespace App;\nuse App\\Models\\User;\nuse App\\Tax\\{NoTax, Flat as F};\n"
                  "use function App\\helpers\\money;\nuse const App\\X;\nuse \\Closure;\n"
                  "require_once __DIR__ . '/../bootstrap.php';\ninclude dirname(__DIR__) . '/lib/x.php';\n"
                  "require $computed;\nclass A { use HasTotals; }\n",
     ["php:App\\Models\\User", "php:App\\Tax\\NoTax", "php:App\\Tax\\Flat", "php:Closure",
      "phpinc:./../bootstrap.php", "phpinc:./../lib/x.php"]),
    ("src/A.kt", "package a.b\n\nimport c.d.E\nimport c.d.*\nimport f.G as H\n\nclass A\nobject O\n"
                 "fun top() = 1\nval V = 2\ntypealias T = Int\n",
     ["ktpkg:a.b", "ktdecl:a.b.A", "ktdecl:a.b.O", "ktdecl:a.b.top", "ktdecl:a.b.V", "ktdecl:a.b.T",
      "kt:c.d.E", "kt:c.d.*", "kt:f.G"]),
]


@pytest.mark.parametrize("rel,text,want", READS, ids=[r for r, _t, _w in READS])
def test_imports_read_off_the_tree(rel: str, text: str, want: list[str]) -> None:
    assert chunk_file(rel, text).imports == want


def _edges(eng: Engine) -> set[tuple[str, str]]:
    """The index's import edges resolved to workspace files, as the retriever's file graph has them."""
    graph = FileGraph.build({path: kind for path, kind, _n in eng.files()}, eng.import_edges())
    return {(a, b) for a, targets in graph.imports.items() for b in targets}


@pytest.mark.parametrize("fixture", ["ruby", "php", "kotlin"])
def test_imports_resolve_to_workspace_files(engines: dict[str, Engine], fixture: str) -> None:
    edges = _edges(engines[fixture])
    missing = [e for e in EDGES[fixture] if e not in edges]
    assert not missing, f"missing import edges {missing}; have {sorted(edges)}"


# A library import must not land on a workspace file that merely ends the same way.
LIBRARY = [
    # `require "json"` is the standard library's, not lib/mailbag/json.rb (only a load path root counts)
    (["lib/mailbag.rb", "lib/mailbag/json.rb"], "lib/mailbag.rb", "rb:json", []),
    (["lib/mailbag.rb", "lib/mailbag/json.rb"], "lib/mailbag.rb", "rb:mailbag/json", ["lib/mailbag/json.rb"]),
    (["lib/mailbag.rb", "lib/json.rb"], "lib/mailbag.rb", "rb:json", ["lib/json.rb"]),
    # PHPUnit's TestCase is not the workspace's tests/TestCase.php (namespace and class must both match)
    (["tests/TestCase.php", "tests/FooTest.php"], "tests/FooTest.php", "php:PHPUnit\\Framework\\TestCase", []),
    (["app/Models/User.php", "app/Http/UserController.php"], "app/Http/UserController.php",
     "php:App\\Models\\User", ["app/Models/User.php"]),  # no composer.json: the path convention
    # kotlin.test.Test is the library's; a workspace Test.kt elsewhere is not it
    (["src/main/kotlin/Test.kt", "src/test/kotlin/a/FooTest.kt"], "src/test/kotlin/a/FooTest.kt",
     "kt:kotlin.test.Test", []),
    (["src/main/kotlin/a/b/C.kt", "src/main/kotlin/a/D.kt"], "src/main/kotlin/a/D.kt", "kt:a.b.C",
     ["src/main/kotlin/a/b/C.kt"]),  # no package map entry: the path ends a/b/C.kt
    (["src/main/kotlin/a/b/C.kt", "src/main/kotlin/a/D.kt"], "src/main/kotlin/a/D.kt", "kt:a.b.C.Companion",
     ["src/main/kotlin/a/b/C.kt"]),  # a member of C: C's file
]


@pytest.mark.parametrize("files,importer,spec,want", LIBRARY, ids=[f"{s}->{w}" for _f, _i, s, w in LIBRARY])
def test_resolution_keeps_to_the_ecosystems_rules(files: list[str], importer: str, spec: str,
                                                  want: list[str]) -> None:
    assert Resolver(files, []).resolve(importer, spec) == want


def test_kotlin_import_finds_a_file_by_its_package_declaration() -> None:
    """Time.kt declares package a.util with Clock: ``import a.util.Clock`` finds it although no file is named
    Clock.kt or sits in a/util/, and a star import finds every file of the package (their package headers)."""
    texts = {
        "src/x/Time.kt": "package a.util\n\nfun interface Clock {\n    fun now(): Long\n}\n\n"
                         "fun formatDuration(ms: Long) = \"\"\n",
        "src/y/Ids.kt": "package a.util\n\nobject Ids {\n    fun next() = 1\n}\n",
        "src/a/store/S.kt": "package a.store\n\nimport a.util.Clock\nimport a.util.*\n\nclass S(val c: Clock)\n",
    }
    specs = [(p, s) for p, t in texts.items() for s in chunk_file(p, t).imports]
    assert ("src/a/store/S.kt", "kt:a.util.Clock") in specs and ("src/a/store/S.kt", "kt:a.util.*") in specs
    r = Resolver(list(texts), specs)
    assert r.resolve("src/a/store/S.kt", "kt:a.util.Clock") == ["src/x/Time.kt"]
    assert r.resolve("src/a/store/S.kt", "kt:a.util.formatDuration") == ["src/x/Time.kt"]
    assert sorted(r.resolve("src/a/store/S.kt", "kt:a.util.*")) == ["src/x/Time.kt", "src/y/Ids.kt"]


def test_composer_psr4_maps_namespaces_to_folders() -> None:
    """``Acme\\Shop\\`` -> ``lib/``: a class is found where PSR-4 puts it, not where its name suggests."""
    composer = '{"autoload": {"psr-4": {"Acme\\\\Shop\\\\": "lib/"}}, "autoload-dev": {"psr-4": {"Acme\\\\Shop\\\\Tests\\\\": "t/"}}}'
    files = ["pkg/composer.json", "pkg/lib/Cart/Cart.php", "pkg/t/Cart/CartTest.php", "other/Shop/Cart/Cart.php"]
    specs = [("pkg/composer.json", s) for s in chunk_file("pkg/composer.json", composer).imports]
    assert ("pkg/composer.json", "psr4:Acme\\Shop\\=lib/") in specs
    r = Resolver(files, specs)
    assert r.resolve("pkg/t/Cart/CartTest.php", "php:Acme\\Shop\\Cart\\Cart") == ["pkg/lib/Cart/Cart.php"]
    assert r.resolve("pkg/lib/Cart/Cart.php", "php:Acme\\Shop\\Tests\\Cart\\CartTest") == ["pkg/t/Cart/CartTest.php"]


# --- test files by each ecosystem's naming -------------------------------------------------------------

RELATED = [
    ("ruby", "lib/mailbag/template.rb", "test/template_test.rb"),  # *_test.rb
    ("ruby", "lib/mailbag/message.rb", "test/test_message.rb"),  # test_*.rb
    ("ruby", "lib/mailbag/delivery/smtp.rb", "spec/mailbag/delivery/smtp_spec.rb"),  # *_spec.rb
    ("php", "src/Money/Money.php", "tests/Money/MoneyTest.php"),
    ("php", "src/Tax/FlatRateTax.php", "tests/Tax/FlatRateTaxTest.php"),
    ("kotlin", "src/main/kotlin/com/example/tally/store/InMemoryStore.kt",
     "src/test/kotlin/com/example/tally/store/InMemoryStoreTest.kt"),
    ("kotlin", "src/main/kotlin/export/PrometheusExporter.kt",
     "src/test/kotlin/com/example/tally/export/PrometheusExporterTest.kt"),
]


@pytest.mark.parametrize("fixture,code,test", RELATED, ids=[t for _f, _c, t in RELATED])
def test_related_tests_by_naming(engines: dict[str, Engine], fixture: str, code: str, test: str) -> None:
    assert file_kind(test) == "test" and file_kind(code) == "code"
    assert stem_of(test) == stem_of(code)
    got = [r["path"] for r in engines[fixture].related_tests(code)]
    assert got and got[0] == test, got
    back = [r["path"] for r in engines[fixture].related_code(test)]
    assert code in back[:2], back


def test_helpers_are_named_after_nothing(engines: dict[str, Engine]) -> None:
    """test_helper.rb / spec_helper.rb / bootstrap.php are test support: in test folders, linked to no source
    file by name (their imports still link them), and a source file called testing.rb stays code."""
    assert file_kind("lib/mailbag/testing.rb") == "code" and file_kind("test/test_helper.rb") == "test"
    for fixture, helpers in (("ruby", ("test/test_helper.rb", "spec/spec_helper.rb")), ("php", ("tests/bootstrap.php",))):
        eng = engines[fixture]
        graph = FileGraph.build({path: kind for path, kind, _n in eng.files()}, eng.import_edges())
        named = {t for tests in graph.tests_of.values() for t in tests}
        assert not named & set(helpers), (fixture, named & set(helpers))
        assert all(graph.imports.get(h) for h in helpers)


# --- stack frames -----------------------------------------------------------------------------------------

RUBY_TRACE = """/srv/mailbag/lib/mailbag/template.rb:22:in 'block in Mailbag::Template#render': no value for placeholder {{who}} (Mailbag::MissingPlaceholder)
\tfrom /srv/mailbag/lib/mailbag/template.rb:20:in 'String#gsub'
\tfrom lib/mailbag/delivery/outbox.rb:30:in `block in flush'
"""
PHP_TRACE = """PHP Fatal error:  Uncaught InvalidArgumentException: cannot add USD to EUR in /var/www/invoice/src/Money/Money.php:57
Stack trace:
#0 /var/www/invoice/src/Money/Money.php(37): Acme\\Invoice\\Money\\Money->assertSameCurrency()
#1 /var/www/invoice/src/Support/HasTotals.php(23): Acme\\Invoice\\Money\\Money->plus()
#2 {main}
  thrown in /var/www/invoice/src/Money/Money.php on line 57
"""
KOTLIN_TRACE = """Exception in thread "main" java.lang.IllegalArgumentException: a counter only goes up, got -1.0
\tat com.example.tally.Counter.increment(Tally.kt:17)
\tat com.example.tally.TallyTest.a counter refuses to go down(TallyTest.kt:10)
"""

FRAMES = [
    ("ruby", RUBY_TRACE, [("/srv/mailbag/lib/mailbag/template.rb", 22), ("/srv/mailbag/lib/mailbag/template.rb", 20),
                          ("lib/mailbag/delivery/outbox.rb", 30)]),
    ("php", PHP_TRACE, [("/var/www/invoice/src/Money/Money.php", 57), ("/var/www/invoice/src/Money/Money.php", 37),
                        ("/var/www/invoice/src/Support/HasTotals.php", 23)]),
    # Read by the JVM pattern with its package's folders (the Kotlin pattern reads the bare name at the same place).
    ("kotlin", KOTLIN_TRACE, [("com/example/tally/Tally.kt", 17), ("TallyTest.kt", 10)]),
]


@pytest.mark.parametrize("fixture,trace,frames", FRAMES, ids=[f for f, _t, _x in FRAMES])
def test_stack_frames_are_read(fixture: str, trace: str, frames: list[tuple[str, int]]) -> None:
    q = analyse(trace)
    assert q.shape == "trace"
    missing = [f for f in frames if f not in q.frames]
    assert not missing, f"missing {missing}; got {q.frames}"


TRACE_ANSWERS = [("ruby", RUBY_TRACE, "lib/mailbag/template.rb"), ("php", PHP_TRACE, "src/Money/Money.php"),
                 ("kotlin", KOTLIN_TRACE, "src/main/kotlin/com/example/tally/Tally.kt")]


@pytest.mark.parametrize("fixture,trace,answer", TRACE_ANSWERS, ids=[f for f, _t, _a in TRACE_ANSWERS])
def test_trace_finds_the_failing_file(engines: dict[str, Engine], fixture: str, trace: str, answer: str) -> None:
    res = engines[fixture].context(trace, limit=5)
    assert res["results"] and res["results"][0]["path"] == answer, [r["path"] for r in res["results"]]


# --- the grammars are dependencies, and the README says which -------------------------------------------

@pytest.mark.parametrize("pkg", ["tree-sitter-ruby", "tree-sitter-php", "tree-sitter-kotlin"])
def test_grammar_is_a_dependency_listed_in_the_readme(pkg: str) -> None:
    repo = Path(__file__).resolve().parents[1]
    assert re.search(rf'^\s*"{pkg}>=[\d.]+",$', (repo / "pyproject.toml").read_text(encoding="utf-8"), re.M)
    readme = (repo / "README.md").read_text(encoding="utf-8")
    row = next((ln for ln in readme.splitlines() if ln.startswith(f"| `{pkg}`")), "")
    assert re.search(r"\| \d+\.\d+\.\d+ \| MIT \|", row), row


@pytest.mark.parametrize("path,kind", [
    ("okio/src/jvmTest/kotlin/okio/Stopwatch.kt", "test"), ("src/commonTest/kotlin/X.kt", "test"),
    ("src/androidInstrumentedTest/kotlin/A.kt", "test"), ("src/integrationTest/java/a/B.java", "test"),
    ("okio/src/jvmMain/kotlin/okio/Buffer.kt", "code"), ("src/latest/A.kt", "code")])
def test_gradle_test_source_sets_are_test_folders(path: str, kind: str) -> None:
    from delphi_ls.workspace.kinds import file_kind
    assert file_kind(path) == kind
