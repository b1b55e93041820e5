"""The structure lens both ways, on small real workspaces: related tests of a source file, and the
source a test exercises; JavaScript packages imported by folder or by name; mirroring test folders."""

import textwrap
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from delphi_ls import Engine
from delphi_ls.api import RequestError
from delphi_ls.indexing.imports import Resolver, manifest_imports

KOA_LIKE = {
    "package.json": '{"name": "tinyweb", "main": "lib/application.js"}',
    "lib/application.js": """
        const response = require('./response')
        module.exports = class Application { handle (res) { return response.finish(res) } }
        """,
    "lib/response.js": """
        module.exports = { finish (res) { res.ended = true; return res }, attachment (name) { return name } }
        """,
    "lib/request.js": """
        module.exports = { accepts (types) { return types[0] } }
        """,
    "test-helpers/context.js": """
        const Application = require('../lib/application')
        module.exports = () => new Application()
        """,
    "__tests__/application/index.test.js": """
        const Tiny = require('../..')
        test('constructs', () => { expect(new Tiny()).toBeTruthy() })
        """,
    "__tests__/response/attachment.test.js": """
        const context = require('../../test-helpers/context')
        test('attachment', () => { expect(context()).toBeTruthy() })
        """,
    "__tests__/response/finish.test.js": """
        const context = require('../../test-helpers/context')
        test('finish', () => { expect(context()).toBeTruthy() })
        """,
    "__tests__/request/accepts.test.js": """
        const tiny = require('tinyweb')
        test('accepts', () => { expect(tiny).toBeTruthy() })
        """,
}


def _write(root: Path, files: dict[str, str]) -> Path:
    for rel, text in files.items():
        p = root / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(textwrap.dedent(text).lstrip("\n"), encoding="utf-8")
    return root

@contextmanager
def _indexed(tmp_path: Path, files: dict[str, str], ws: str = "ws", idx: str = "idx") -> Iterator[Engine]:
    """A workspace of ``files`` indexed without vectors, its engine open."""
    root = _write(tmp_path / ws, files)
    with Engine(root, index_dir=str(tmp_path / idx), vectors=False) as eng:
        eng.index(vectors=False)
        yield eng



def test_package_entry_points_resolve():
    specs = manifest_imports("package.json", KOA_LIKE["package.json"])
    assert specs == ["pkgmain:lib/application.js", "pkgname:tinyweb"]
    assert manifest_imports("package.json", "{not json") == []
    assert manifest_imports("lib/x.json", KOA_LIKE["package.json"]) == []
    r = Resolver(list(KOA_LIKE), [("package.json", s) for s in specs])
    assert r.resolve("__tests__/application/index.test.js", "js:../..") == ["lib/application.js"]
    assert r.resolve("__tests__/request/accepts.test.js", "js:tinyweb") == ["lib/application.js"]
    assert r.resolve("__tests__/request/accepts.test.js", "js:tinyweb/lib/request") == ["lib/request.js"]
    assert r.resolve("__tests__/request/accepts.test.js", "js:left-pad") == []


def test_a_rust_crates_integration_tests_import_it_by_name():
    """`tests/x.rs` imports its crate by the name Cargo.toml gives (`kv-store` is written `kv_store`): it resolved
    to nothing, so `lib.rs` had no related tests (a newcomer, session 37)."""
    specs = manifest_imports("Cargo.toml", '[package]\nname = "kv-store"\n\n[dependencies]\nserde = "1"\n')
    assert specs == ["crate:kv_store"] and manifest_imports("Cargo.toml", "not = [toml") == []
    files = ["Cargo.toml", "src/lib.rs", "src/storage/mod.rs", "src/storage/mem.rs", "tests/store.rs"]
    r = Resolver(files, [("Cargo.toml", s) for s in specs])
    assert r.resolve("tests/store.rs", "rs:kv_store::{MemStore,Store}") == ["src/lib.rs"]
    assert r.resolve("tests/store.rs", "rs:kv_store::storage::mem::MemStore") == ["src/storage/mem.rs"]
    assert r.resolve("tests/store.rs", "rs:serde::Serialize") == []


def test_mirrored_test_folders_and_related_both_ways(tmp_path: Path):
    ws = _write(tmp_path / "ws", KOA_LIKE)
    with Engine(ws, index_dir=str(tmp_path / "idx")) as eng:
        eng.index(vectors=False)
        g = eng.view().graph
        assert g.mirrors_of["lib/response.js"] == {"__tests__/response/attachment.test.js",
                                                   "__tests__/response/finish.test.js"}
        assert g.mirrors_of["lib/application.js"] == {"__tests__/application/index.test.js"}
        assert "lib/application.js" in g.imports["__tests__/application/index.test.js"]
        tests = [t["path"] for t in eng.related_tests("lib/response.js")]
        assert set(tests[:2]) == {"__tests__/response/attachment.test.js", "__tests__/response/finish.test.js"}
        assert [c["path"] for c in eng.related_code("__tests__/response/finish.test.js")][:1] == ["lib/response.js"]
        code = eng.related_code("__tests__/application/index.test.js")
        assert code[0]["path"] == "lib/application.js" and "imports it" in code[0]["why"]
        # Imported through a helper: the helper's own imports count, less than a direct import.
        via = {c["path"]: c for c in eng.related_code("__tests__/response/attachment.test.js")}
        assert "through context.js" in via["lib/application.js"]["why"]
        assert via["lib/response.js"]["score"] > via["lib/application.js"]["score"]


def test_related_code_golden(engine: Engine):
    """The fixture's tests map back to the modules they exercise, named link first."""
    assert [c["path"] for c in engine.related_code("tests/test_scheduler.py")][:1] == ["shipyard/scheduler.py"]
    assert [c["path"] for c in engine.related_code("tests/test_retry.py")][:1] == ["shipyard/retry.py"]
    integ = engine.related_code("tests/test_pipeline_integration.py")
    assert integ[0]["path"] == "shipyard/scheduler.py" and "imports it" in integ[0]["why"]
    go = engine.related_code("proxy/grpc_proxy_test.go")
    assert go[0]["path"] == "proxy/grpc_proxy.go"
    assert [c["path"] for c in engine.related_code("web/src/format.test.js")][:1] == ["web/src/format.js"]
    assert all(c["path"] != "tests/test_retry.py" for c in engine.related_code("tests/test_retry.py"))


GO_WS = {
    "httpx/middleware.go": """
        package httpx

        // Recover turns a panic into a 500.
        func Recover(next int) int { return next }

        // Get answers a GET.
        func Get() int { return 1 }
        """,
    "httpx/middleware_test.go": """
        package httpx

        import "testing"

        func TestRecover(t *testing.T) { Recover(1) }
        """,
    "cache/lru_test.go": """
        package cache

        import (
            "net/http"
            "testing"
        )

        func TestPanics(t *testing.T) {
            defer func() { recover() }()
            req, _ := http.NewRequest("GET", "/", nil)
            _ = req
        }
        """,
}


def test_a_symbols_tests_mention_it_as_written(tmp_path: Path):
    """Per-symbol related tests matched the lower-cased index: `Recover` was "mentioned" by a call of Go's builtin
    `recover()` in another package, `Get` by `"GET"` (a newcomer, session 37)."""
    ws = _write(tmp_path / "ws", GO_WS)
    with Engine(ws, index_dir=str(tmp_path / "idx"), vectors=False) as eng:
        eng.index()
        rec = {r["path"]: r["why"] for r in eng.related_tests("httpx/middleware.go", symbol="Recover")}
        assert "mentions `Recover`" in rec["httpx/middleware_test.go"] and "cache/lru_test.go" not in rec, rec
        got = {r["path"]: r["why"] for r in eng.related_tests("httpx/middleware.go", symbol="Get")}
        assert "cache/lru_test.go" not in got and all("mentions" not in w for w in got.values()), got


@pytest.mark.parametrize("limit", [0, -1, "abc", 2.5, True, 501])
def test_the_api_refuses_a_bad_limit_as_every_front_does(engine: Engine, limit: object):
    """`Engine.related_tests(limit=0)` answered nothing, -1 dropped the last test, "abc" raised TypeError (a
    newcomer, session 37); the LSP and MCP fronts refuse these with the same words."""
    for call, path in ((engine.related_tests, "shipyard/retry.py"), (engine.related_code, "tests/test_retry.py")):
        with pytest.raises(RequestError) as e:
            call(path, limit=limit)  # type: ignore[operator]
        assert e.value.field == "limit" and "between 1 and 500" in str(e.value)


def test_older_parser_index_is_reparsed_once_without_reembedding(tmp_path: Path):
    """An index written before package.json entry points were read gains them on the next run;
    unchanged chunks keep their vectors (nothing is embedded again)."""
    ws = _write(tmp_path / "ws", KOA_LIKE)
    with Engine(ws, index_dir=str(tmp_path / "idx")) as eng:
        eng.index()
        eng.meta.set_state("parser_version", 1)
        eng.meta.db.execute("DELETE FROM imports WHERE path='package.json'")  # as an old parser left it
        rep = eng.index()
        assert rep.files_indexed == len(KOA_LIKE) and rep.chunks_embedded == 0
        assert ("package.json", "pkgmain:lib/application.js") in eng.meta.all_imports()
        # The run says why it parses every file (it said nothing; an upgrade newcomer, session 37).
        assert any("the index was written by chunker version 1" in n for n in rep.notes), rep.notes
        again = eng.index()
        assert again.files_indexed == 0 and again.files_unchanged == len(KOA_LIKE) and again.notes == []


def test_fusion_gives_tied_hits_one_rank():
    """A structure branch that scores twenty mirrored tests alike must not rank them by name."""
    from delphi_ls.retrieval.branches.base import ranked_hits
    from delphi_ls.retrieval.fusion import rrf

    scores = {"t/c.js": 0.5, "t/a.js": 1.0, "t/d.js": 0.2, "t/b.js": 0.5}
    hits = ranked_hits(scores, dict.fromkeys(scores, ""), 10)
    assert [h.tied for h in hits] == [False, False, True, False]
    kinds = dict.fromkeys(("t/a.js", "t/b.js", "t/c.js", "t/d.js"), "test")
    fused = {f.path: f for f in rrf({"graph": hits}, {"graph": 1.0}, kinds, 30, {"test"}, set())}
    assert [fused[p].branches["graph"] for p in ("t/a.js", "t/b.js", "t/c.js", "t/d.js")] == [1, 2, 2, 4]
    assert fused["t/b.js"].score == fused["t/c.js"].score > fused["t/d.js"].score


PYTEST_LIKE = {
    "src/_pytest/junitxml.py": "from _pytest import warning_types\n\n\nclass LogXML:\n    def add_stats(self):\n        pass\n",
    "src/_pytest/warning_types.py": "class PytestWarning(UserWarning):\n    pass\n",
    "src/_pytest/outcomes.py": "def fail(msg):\n    raise AssertionError(msg)\n",
    "src/_pytest/monkeypatch.py": "from _pytest import warning_types, outcomes\n\n\nclass MonkeyPatch:\n    pass\n",
    "src/_pytest/pytester.py": "from _pytest import outcomes, warning_types, monkeypatch\n\n\nclass Pytester:\n    pass\n",
    "src/pytest/__init__.py": "from _pytest.outcomes import fail\nfrom _pytest.warning_types import PytestWarning\n"
                              "from _pytest.monkeypatch import MonkeyPatch\n",
    "testing/test_junitxml.py": "import pytest\nfrom _pytest.junitxml import LogXML\nfrom _pytest.pytester import Pytester\n\n\n"
                                "def test_add_stats(pytester: Pytester):\n    LogXML().add_stats()\n",
}


def test_a_package_named_with_test_is_not_a_test_helper(tmp_path: Path):
    """pytest's `src/_pytest/` (and `src/pytest/`) hold "test" in their names: every module there counted as a test
    helper, so what `junitxml.py` imports ranked above it for `test_junitxml.py`, which imports it and is named
    after it (a newcomer, session 38); one indirect link counted once however many helpers lead to it."""
    ws = _write(tmp_path / "ws", PYTEST_LIKE)
    with Engine(ws, index_dir=str(tmp_path / "idx")) as eng:
        eng.index(vectors=False)
        code = eng.related_code("testing/test_junitxml.py")
        assert code[0]["path"] == "src/_pytest/junitxml.py", code
        assert "named after it" in code[0]["why"] and "the test imports it" in code[0]["why"]
        assert not any("imported through" in c["why"] for c in code), code
    # Reached through two helpers: counted once (it summed, and beat the file the test is named after).
    files = {**KOA_LIKE, "test-helpers/server.js": "const Application = require('../lib/application')\n",
             "test-helpers/agent.js": "const Application = require('../lib/application')\n",
             "__tests__/response/finish.test.js": "const a = require('../../test-helpers/server')\n"
                                                  "const b = require('../../test-helpers/agent')\n"
                                                  "const c = require('../../test-helpers/context')\n"
                                                  "test('finish', () => { expect(a).toBeTruthy() })\n"}
    ws = _write(tmp_path / "ws2", files)
    with Engine(ws, index_dir=str(tmp_path / "idx2")) as eng:
        eng.index(vectors=False)
        code = {c["path"]: c for c in eng.related_code("__tests__/response/finish.test.js")}
        app = code["lib/application.js"]
        assert app["why"].count("imported through") == 1 and app["score"] == 1.0, app
        assert all(h in app["why"] for h in ("server.js", "agent.js", "context.js")), app
        assert code["lib/response.js"]["score"] > app["score"]


def test_a_fixture_in_a_test_folder_and_an_example_are_not_named_links():
    """flask's `tests/test_apps/cliapp/app.py` (a test only by its folder, a 3-line fixture app) was "named after"
    `app.py` and `sansio/app.py` and led every lens of both; `tests/test_views.py` was named after the `views.py`
    of two example apps beside flask's own (a newcomer, session 38). A Python file that is a test by its folder
    alone is no test module and is named after nothing (Jest's `__tests__/retry.js` and Rust's `tests/store.rs`
    still are); a test of the product is not its examples'."""
    from delphi_ls.indexing.graph import FileGraph

    files = {"src/flask/__init__.py": "code", "src/flask/app.py": "code", "src/flask/sansio/app.py": "code",
             "src/flask/views.py": "code", "examples/celery/src/task_app/views.py": "code",
             "examples/javascript/js_example/views.py": "code", "tests/test_apps/cliapp/app.py": "test",
             "tests/test_views.py": "test", "lib/retry.js": "code", "__tests__/retry.js": "test",
             "Cargo.toml": "config", "src/lib.rs": "code", "src/store.rs": "code", "tests/store.rs": "test"}
    imports = [("src/flask/__init__.py", "py:.app"), ("tests/test_apps/cliapp/app.py", "py:flask"),
               ("tests/test_views.py", "py:flask.views"), ("__tests__/retry.js", "js:../lib/retry"),
               ("Cargo.toml", "crate:kv_store"), ("tests/store.rs", "rs:kv_store::Store")]
    g = FileGraph.build(files, imports)
    assert not g.tests_of.get("src/flask/app.py") and not g.tests_of.get("src/flask/sansio/app.py")
    assert g.tests_of["src/flask/views.py"] == {"tests/test_views.py"}
    assert not g.tests_of.get("examples/celery/src/task_app/views.py")
    assert g.tests_of["lib/retry.js"] == {"__tests__/retry.js"}
    # A Rust integration test importing its crate by name (to lib.rs) keeps its name's link (review, session 38).
    assert g.tests_of["src/store.rs"] == {"tests/store.rs"}


def test_a_name_many_files_define_counts_from_tests_that_load_its_file(tmp_path: Path):
    """Per-symbol related tests were every test spelling the name: gin's `Context.String` listed 20, one of them a
    test of `internal/bytesconv` (a newcomer, session 38). A name three or more source files define counts from
    tests that load the file or its package, sit in its folder, or are named after it."""
    files = {
        "store/kv.py": "class KV:\n    def get(self, key):\n        return key\n",
        "cache/lru.py": "class LRU:\n    def get(self, key):\n        return None\n",
        "http/client.py": "class Client:\n    def get(self, url):\n        return url\n",
        "store/unique.py": "def compact_segments(kv):\n    return kv\n",
        "tests/test_kv.py": "from store.kv import KV\n\n\ndef test_get():\n    assert KV().get(1) == 1\n",
        "tests/test_client.py": "from http.client import Client\n\n\ndef test_fetch():\n    assert Client().get('u')\n",
        "tests/test_compaction.py": "from cache.lru import LRU\n\n\ndef test_segments():\n"
                                    "    assert compact_segments(LRU().get(2)) is None\n",
    }
    with _indexed(tmp_path, files) as eng:
        assert [r["path"] for r in eng.related_tests("store/kv.py", symbol="get")] == ["tests/test_kv.py"]
        # A name one file defines: a mention is evidence enough, whatever the test imports.
        assert [r["path"] for r in eng.related_tests("store/unique.py", symbol="compact_segments")] == [
            "tests/test_compaction.py"]


def test_a_go_package_import_weighs_less_than_the_files_a_test_uses(tmp_path: Path):
    """A Go import names a package, and every file of it was "imported" as much as the file under test (gin's
    context_test.go listed binding/msgpack.go and header.go; a newcomer, session 38)."""
    files = {
        "go.mod": "module example.com/shop\n\ngo 1.22\n",
        "api/handler.go": "package api\n\nfunc Handle() string { return \"ok\" }\n",
        "binding/form.go": "package binding\n\nfunc ParseForm() {}\n",
        "binding/json.go": "package binding\n\nfunc DecodeJSON(b []byte) error { return nil }\n",
        "binding/xml.go": "package binding\n\nfunc DecodeXML() {}\n",
        "api/handler_test.go": "package api\n\nimport (\n\t\"testing\"\n\n\t\"example.com/shop/binding\"\n)\n\n"
                               "func TestHandle(t *testing.T) {\n\t_ = binding.DecodeJSON(nil)\n\tif Handle() != \"ok\" "
                               "{\n\t\tt.Fatal()\n\t}\n}\n",
    }
    with _indexed(tmp_path, files) as eng:
        code = eng.related_code("api/handler_test.go")
        order = [c["path"] for c in code]
        assert order[:2] == ["api/handler.go", "binding/json.go"], code
        assert {c["path"]: c for c in code}["binding/xml.go"]["why"] == "the test imports its package"


def test_a_function_tested_through_another_is_found_by_its_tests_names(tmp_path: Path):
    """fastapi's `decimal_encoder` is exercised through `jsonable_encoder` by `test_decimal_encoder_int` and
    `test_decimal_encoder_float`, which never spell it: its related tests were none (an agents' newcomer, session
    38). When no test spells a symbol out, tests whose own name holds it are its tests."""
    files = {
        "pkg/encoders.py": "def decimal_encoder(d):\n    return float(d)\n\n\ndef jsonable_encoder(o):\n"
                           "    return decimal_encoder(o)\n",
        "tests/test_jsonable.py": "from pkg.encoders import jsonable_encoder\n\n\ndef test_decimal_encoder_int():\n"
                                  "    assert jsonable_encoder(1) == 1.0\n",
        "tests/test_other.py": "def test_decimals_round():\n    assert round(1.5) == 2\n",
    }
    with _indexed(tmp_path, files) as eng:
        rows = eng.related_tests("pkg/encoders.py", symbol="decimal_encoder")
        assert [r["path"] for r in rows] == ["tests/test_jsonable.py"], rows
        assert "test_decimal_encoder_int" in rows[0]["why"]


def test_a_test_matched_by_the_files_stem_alone_is_not_said_to_use_its_definitions(tmp_path: Path):
    """Tests importing their own `tests/utils.py` were listed for `fastapi/security/utils.py` as "uses what utils.py
    defines", though they use none of its names (an agents' newcomer, session 38): the why-line says what matched."""
    files = {
        "app/security/utils.py": "def get_authorization_scheme_param(header):\n    return header.partition(' ')\n",
        "tests/utils.py": "def needs_pydanticv2(f):\n    return f\n",
        "tests/test_settings.py": "from .utils import needs_pydanticv2\n\n\n@needs_pydanticv2\ndef test_settings():\n"
                                  "    assert True\n",
        "tests/test_scheme.py": "from app.security.http import check\n\n\ndef test_scheme():\n"
                                "    assert get_authorization_scheme_param('Bearer x')\n",
        "tests/test_logs.py": "def test_logs(caplog):\n    assert 'utils' in caplog.text  # the module's logger\n",
    }
    with _indexed(tmp_path, files) as eng:
        why = {r["path"]: r["why"] for r in eng.related_tests("app/security/utils.py")}
        assert why["tests/test_scheme.py"] == "uses what utils.py defines", why
        assert why["tests/test_logs.py"] == "mentions `utils`", why
        # Its `utils` is the module it imports by that name, its own (a newcomer, session 45: click's `_textwrap.py`
        # had a test of `import textwrap` second).
        assert "tests/test_settings.py" not in why, why
        assert list(why)[-1] == "tests/test_logs.py", why  # the stem alone: the weakest evidence, last


def test_a_packages_front_file_is_not_what_its_test_tests(tmp_path: Path):
    """A test importing `fastapi` (its `__init__.py`) and `fastapi.encoders` had the `__init__.py` (or a Rust
    `lib.rs`, a `mod.rs`) in related-code's first places (an agents' newcomer, session 38): a package's front file is
    how the test reaches the package."""
    files = {
        "pkg/__init__.py": "from .encoders import jsonable_encoder\nfrom .routing import route\n",
        "pkg/encoders.py": "def jsonable_encoder(o):\n    return o\n",
        "pkg/routing.py": "def route(p):\n    return p\n",
        "tests/test_encode.py": "import pkg\nfrom pkg.encoders import jsonable_encoder\n\n\ndef test_encode():\n"
                                "    assert jsonable_encoder(pkg) is pkg\n",
    }
    with _indexed(tmp_path, files) as eng:
        code = {c["path"]: c for c in eng.related_code("tests/test_encode.py")}
        assert list(code)[0] == "pkg/encoders.py", code
        assert code["pkg/__init__.py"]["why"].startswith("the test imports its package"), code


def test_tests_named_for_a_symbol_hold_its_whole_parts_and_do_not_undo_the_common_name_filter(tmp_path: Path):
    """The review of session 38: `get_user` was matched to `test_get_username_is_text` (a substring), and a name three
    files define, whose spelling tests the filter had dropped, came back through the tests' names."""
    files = {
        "accounts/users.py": "def get_user(uid):\n    return uid\n",
        "tests/test_names.py": "def test_get_username_is_text():\n    assert 'x'\n",
        "a/views.py": "def render(x):\n    return x\n",
        "b/views.py": "def render(x):\n    return x\n",
        "c/views.py": "def render(x):\n    return x\n",
        "tests/test_b.py": "from b.views import render\n\n\ndef test_render_triples():\n    assert render(3) == 3\n",
    }
    with _indexed(tmp_path, files) as eng:
        assert eng.related_tests("accounts/users.py", symbol="get_user") == []
        assert eng.related_tests("a/views.py", symbol="render") == []
        assert [r["path"] for r in eng.related_tests("b/views.py", symbol="render")] == ["tests/test_b.py"]


def test_a_headers_namespace_is_not_what_its_tests_use_and_out_of_line_members_name_their_type(tmp_path: Path):
    """spdlog's `rotating_file_sink-inl.h` defines only members of `spdlog::sinks::rotating_file_sink`: the one name
    without a container was the namespace `spdlog`, which every test mentions, so all tests tied as "uses what it
    defines" and the two rotation tests came 12th and 16th (an agents' newcomer, session 43). Tests that name only
    the namespace still follow, as such."""
    files = {
        "include/kvlog/sinks/rotating_sink.h": "namespace kvlog {\nnamespace sinks {\nclass rotating_sink {\n public:\n"
                                               "  void rotate_now();\n};\n}\n}\n",
        "include/kvlog/sinks/rotating_sink-inl.h": "namespace kvlog {\nnamespace sinks {\n"
                                                   "void rotating_sink::rotate_now() {\n  files_ = 0;\n}\n}\n}\n",
        "include/kvlog/logger.h": "namespace kvlog {\nclass logger {\n public:\n  void info();\n};\n}\n",
        "tests/test_rotation.cpp": '#include "kvlog/logger.h"\nTEST_CASE("rotates") {\n'
                                   "  kvlog::sinks::rotating_sink s;\n  s.rotate_now();\n}\n",
    } | {f"tests/test_misc{i}.cpp": f'#include "kvlog/logger.h"\nTEST_CASE("misc{i}") {{\n  kvlog::logger l;\n'
                                    "  l.info();\n}\n" for i in range(6)}
    with _indexed(tmp_path, files) as eng:
        got = [(r["path"], r["why"]) for r in eng.related_tests("include/kvlog/sinks/rotating_sink-inl.h")]
        assert got and got[0] == ("tests/test_rotation.cpp", "uses what rotating_sink-inl.h defines"), got
        misc = [why for p, why in got if p.startswith("tests/test_misc")]
        assert misc and all(why.startswith("mentions the namespace") for why in misc), got


def test_a_rust_files_inline_tests_do_not_stand_for_its_api(tmp_path: Path):
    """Members of a module were taken as the file's top-level names: a Rust file's inline `mod tests` put its long
    test-function names in place of the API its integration tests use (a review, session 43)."""
    tests_mod = "".join(f"    #[test]\n    fn checks_walking_case_number_{i}() {{\n        assert!(true);\n    }}\n"
                        for i in range(30))
    files = {
        "src/walk.rs": "pub fn scan_entries(root: &str) -> usize {\n    root.len()\n}\n\n"
                       f"#[cfg(test)]\nmod tests {{\n{tests_mod}}}\n",
        "tests/scanning.rs": "#[test]\nfn scans() {\n    scan_entries(\"x\");\n}\n",
        "tests/other.rs": "#[test]\nfn other() {\n    assert!(true);\n}\n",
    }
    with _indexed(tmp_path, files) as eng:
        got = [(r["path"], r["why"]) for r in eng.related_tests("src/walk.rs")]
        assert ("tests/scanning.rs", "uses what walk.rs defines") in got, got


def test_no_related_tests_rather_than_everyones_word_a_word_inside_a_name_or_test_data(tmp_path: Path):
    """A newcomer judging related tests on urfave/cli, click, express and fmt (session 45): `docs/package.go`, which no
    test touches, had five tests that "mention `package`" (every Go file does); `helpers_test.go` was "named after
    help.go" (`help` inside `helpers`); click's `_textwrap.py` had a test of Python's `import textwrap` second; a
    golden output under `testdata/` came before the tests that read it."""
    go_test = "package cli\n\nimport \"testing\"\n\n"
    files = {
        "go.mod": "module example.com/cli\n\ngo 1.22\n",
        "docs/package.go": "// Package docs only imports modules for the docs' build.\npackage docs\n",
        "help.go": "package cli\n\nfunc ShowAppHelp(name string) string {\n\treturn \"usage: \" + name\n}\n",
        "help_test.go": go_test + "func TestShowAppHelp(t *testing.T) {\n\t_ = ShowAppHelp(\"x\")\n}\n",
        "helpers_test.go": go_test + "func init() {\n\t_ = \"CLI_TEST_ENV\"\n}\n",
        "fish.go": "package cli\n\nfunc ToFishCompletion() string {\n\treturn \"complete -c fish\"\n}\n",
        "fish_test.go": go_test + "func TestToFishCompletion(t *testing.T) {\n\t_ = ToFishCompletion()\n}\n",
        "testdata/expected-fish-full.fish": "# fish completion for the app\ncomplete -c app -n fish\n",
        "flag_test.go": go_test + "func TestFlags(t *testing.T) {}\n",
        "command_test.go": go_test + "func TestCommand(t *testing.T) {}\n",
        "src/pkg/_textwrap.py": "import textwrap\n\n\nclass TextWrapper(textwrap.TextWrapper):\n    pass\n",
        "tests/test_compat.py": "from pkg._textwrap import TextWrapper\n\n\ndef test_wraps():\n"
                                "    assert TextWrapper(width=3)\n",
        "tests/test_shell.py": "import textwrap\n\n\ndef test_script():\n    assert textwrap.dedent(' a') == 'a'\n",
    }
    with _indexed(tmp_path, files) as eng:
        assert eng.related_tests("docs/package.go") == []
        help_tests = {r["path"]: r["why"] for r in eng.related_tests("help.go")}
        assert list(help_tests)[0] == "help_test.go", help_tests
        assert "named after" not in help_tests.get("helpers_test.go", ""), help_tests
        fish = [r["path"] for r in eng.related_tests("fish.go")]
        assert fish[0] == "fish_test.go" and fish[-1] == "testdata/expected-fish-full.fish", fish  # what it reads: last
        assert [r["path"] for r in eng.related_tests("src/pkg/_textwrap.py")] == ["tests/test_compat.py"]


def test_a_name_many_files_define_links_no_test_to_one_of_them(tmp_path: Path):
    """urfave/cli's hello-world example defines only `main`, and click's aliases example `cli` and `status`: the main
    tests were said to "use what" each defines, though none touches them (a newcomer, session 45)."""
    files = {
        "examples/hello/hello.py": "def main():\n    print('hello world')\n",
        "examples/greet/greet.py": "def main():\n    print('greetings')\n",
        "pkg/cli.py": "def main():\n    return run_cli()\n\n\ndef run_cli():\n    return 0\n",
        "tests/test_cli.py": "from pkg.cli import main, run_cli\n\n\ndef test_main():\n    assert main() == run_cli()\n",
    }
    with _indexed(tmp_path, files) as eng:
        assert eng.related_tests("examples/hello/hello.py") == []
        assert [r["path"] for r in eng.related_tests("pkg/cli.py")] == ["tests/test_cli.py"]


def test_tests_named_after_what_a_file_defines_or_in_a_test_prefixed_folder_are_its_tests(tmp_path: Path):
    """click keeps a test per function (`tests/test_utils/test__expand_args.py`, `test_confirm.py` for `termui.py`'s
    `confirm`): they came 4th to 19th for `utils.py` as "mentions `utils`", `test_confirm.py` 18th for `termui.py`
    (a newcomer, session 45)."""
    files = {
        "src/click/utils.py": "def _expand_args(args):\n    return list(args)\n\n\nclass LazyFile:\n    pass\n",
        "src/click/termui.py": "def confirm(text):\n    return input(text) == 'y'\n\n\ndef prompt(text):\n"
                               "    return input(text)\n",
        "src/click/core.py": "from click import utils, termui\n\n\ndef main():\n    return utils, termui\n",
        "tests/test_utils/test__expand_args.py": "import click.utils\n\n\ndef test_expand():\n"
                                                 "    assert click.utils._expand_args([]) == []\n",
        "tests/test_utils/test_LazyFile.py": "import click\n\n\ndef test_lazy():\n    assert click\n",
        "tests/test_confirm.py": "import click\n\n\ndef test_yes(monkeypatch):\n    assert click\n",
        "tests/test_core.py": "from click.core import main\n\n\ndef test_main():\n    assert main()\n",
    }
    with _indexed(tmp_path, files) as eng:
        utils = {r["path"]: r["why"] for r in eng.related_tests("src/click/utils.py")}
        assert set(list(utils)[:2]) == {"tests/test_utils/test__expand_args.py", "tests/test_utils/test_LazyFile.py"}
        assert utils["tests/test_utils/test_LazyFile.py"] == "in a test folder named after utils.py", utils
        termui = {r["path"]: r["why"] for r in eng.related_tests("src/click/termui.py")}
        assert list(termui)[0] == "tests/test_confirm.py", termui
        assert termui["tests/test_confirm.py"] == "named after `confirm`, which termui.py defines"


def test_a_fixture_linked_by_its_folder_comes_after_the_test_that_uses_the_file(tmp_path: Path):
    """express's `test/fixtures/users/index.html` was first for `users.js` ("in a test folder named after users.js"),
    before the test that uses it (a newcomer, session 45)."""
    files = {
        "examples/users.js": "exports.listRegisteredUsers = function () { return ['tobi', 'loki'] }\n",
        "test/fixtures/users/index.html": "<p>tobi, loki</p>\n",
        "test/acceptance/content.js": "var listRegisteredUsers = require('../../examples/users').listRegisteredUsers\n"
                                      "describe('users', function () { it('lists', function () {\n"
                                      "  listRegisteredUsers() }) })\n",
    }
    with _indexed(tmp_path, files) as eng:
        paths = [r["path"] for r in eng.related_tests("examples/users.js")]
        assert paths[-1] == "test/fixtures/users/index.html" and "test/acceptance/content.js" in paths, paths


def test_tests_named_after_definitions_are_a_handful_of_a_modules_own(tmp_path: Path):
    """sinatra's `base.rb` defines `markdown`, `haml`, `Request`... and sixteen tests are named after those: as name
    links they pushed the tests of the changes asked about out of the top 20 (bench.related, session 45). A name
    three files define names no test of one of them."""
    names = ["markdown", "haml_render", "liquid_view", "slim_view", "sass_style", "rdoc_text"]
    base = "".join(f"def {n}(x):\n    return x\n\n\n" for n in names)
    files = {"pkg/base.py": base, "pkg/one.py": "def shared_helper():\n    return 1\n",
             "pkg/two.py": "def shared_helper():\n    return 2\n",
             "pkg/three.py": "def shared_helper():\n    return 3\n\n\ndef unique_thing():\n    return 4\n"}
    files |= {f"tests/test_{n}.py": f"from pkg.base import {n}\n\n\ndef test_it():\n    assert {n}(1)\n" for n in names}
    files |= {"tests/test_shared_helper.py": "def test_it():\n    assert True\n",
              "tests/test_unique_thing.py": "def test_it():\n    assert True\n"}
    with _indexed(tmp_path, files) as eng:
        whys = [r["why"] for r in eng.related_tests("pkg/base.py")]
        assert whys and not any("which base.py defines" in w for w in whys), whys  # six: more than a handful
        three = {r["path"]: r["why"] for r in eng.related_tests("pkg/three.py")}
        assert three.get("tests/test_unique_thing.py") == "named after `unique_thing`, which three.py defines", three
        assert "tests/test_shared_helper.py" not in three, three  # `shared_helper`: three files define it
