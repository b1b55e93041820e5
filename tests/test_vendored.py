"""Other projects' code inside the workspace: vendored copies, submodules, `.gitattributes`' linguist lines.

A newcomer's monorepo (session 41): a vendored copy of ky and the go-chi submodule were in the top 6 of most
questions and first of 15, chi's tests were listed as related tests of the project's own handler, and a generated
`openapi.ts` marked `linguist-generated` ranked first of two questions. The fixture (tests/fixtures/vendored) holds
the same shapes: the shop's own HTTP client with retries beside a vendored `requestslib` that speaks of retries in
every line, a router checked out as its own repository (`libs/router/.git` written by the test, as a submodule's is)
with a test named as the shop's own handler test, and a generated schema full of retry words."""

from __future__ import annotations

from pathlib import Path

import pytest

from delphi_ls import Engine
from delphi_ls.workspace.scan import scan
from delphi_ls.workspace.vendored import Vendored, parse_attributes, question_words
from tests.conftest import copy_fixture


@pytest.fixture(scope="module")
def eng(tmp_path_factory: pytest.TempPathFactory):
    tmp = tmp_path_factory.mktemp("vendored")
    root = copy_fixture("vendored", tmp / "ws")
    (root / "libs" / "router" / ".git").write_text("gitdir: ../../.git/modules/router\n")  # a submodule's
    with Engine(root, index_dir=str(tmp / "idx")) as e:
        e.index()
        yield e


def _paths(ans: dict) -> list[str]:
    return [r["path"] for r in ans["results"]]


def test_the_projects_own_file_comes_before_a_vendored_library_that_speaks_of_the_same_thing(eng: Engine) -> None:
    ans = eng.context("how are retries configured for requests", limit=10)
    paths = _paths(ans)
    assert paths[0] == "app/http_client.py", paths
    vendored = [r for r in ans["results"] if r["path"].startswith("vendor/")]
    assert vendored, paths  # still listed, lower
    assert all("vendored (under vendor/): ranked below the project's own files" in r["why"] for r in vendored)


def test_a_question_that_names_the_library_gets_the_library(eng: Engine) -> None:
    ans = eng.context("how does requestslib compute the backoff between retries", limit=5)
    assert _paths(ans)[0] == "vendor/requestslib/retry.py", _paths(ans)
    assert "reached by the question" in ans["results"][0]["why"]


def test_a_trace_through_the_library_reaches_it(eng: Engine) -> None:
    trace = ('Traceback (most recent call last):\n  File "/srv/shop/vendor/requestslib/adapters.py", line 16, in send\n'
             '    retry.sleep()\n  File "/srv/shop/vendor/requestslib/retry.py", line 33, in sleep\n'
             '    time.sleep(self.backoff())\nKeyboardInterrupt\n')
    rows = eng.context(trace, limit=5)["results"]
    assert rows[0]["path"] == "vendor/requestslib/retry.py", [r["path"] for r in rows]
    assert "ranked below" not in rows[0]["why"], rows[0]["why"]


def test_an_anchor_inside_the_library_reaches_it(eng: Engine) -> None:
    ans = eng.context("where is the backoff computed", anchors=["vendor/requestslib/adapters.py"], limit=5)
    assert "vendor/requestslib/retry.py" in _paths(ans)[:2], _paths(ans)


def test_a_submodules_tests_are_not_related_tests_of_the_projects_files(eng: Engine) -> None:
    tests = [t["path"] for t in eng.related_tests("app/handlers.py")]
    assert "tests/test_handlers.py" in tests
    assert "libs/router/tests/test_handlers.py" not in tests, tests
    per_symbol = [t["path"] for t in eng.related_tests("app/handlers.py", symbol="handle_checkout")]
    assert "libs/router/tests/test_handlers.py" not in per_symbol, per_symbol
    # Its own files keep theirs.
    assert "libs/router/tests/test_handlers.py" in [t["path"] for t in eng.related_tests("libs/router/handlers.py")]


def test_a_file_marked_linguist_generated_is_skipped_and_said(eng: Engine) -> None:
    h = eng.health()
    assert h["skipped"].get("app/generated/schema.py") == "generated file (.gitattributes: linguist-generated)"
    assert "app/generated/schema.py" not in _paths(eng.context("RetryConfig retry_backoff_factor", limit=20))


def test_health_counts_the_vendored_files_by_folder(eng: Engine) -> None:
    h = eng.health()
    assert h["vendored"]["folders"] == {"vendor": 4, "libs/router": 3}, h["vendored"]
    assert h["vendored"]["repositories"] == ["libs/router"]
    [p] = [p for p in h["problems"] if p["code"] == "vendored"]
    assert "7 indexed files are other projects' code" in p["message"]


def test_the_rules_follow_git_and_github() -> None:
    lines = parse_attributes("""# linguist
* text=auto eol=lf
vendor/** linguist-vendored
vendor/ours/** -linguist-vendored
third_party/* linguist-vendored=true
docs/vendored.js linguist-vendored
!*.js linguist-vendored
legacy/** linguist-vendored
legacy/** !linguist-vendored
src/api/*.ts linguist-generated=false
""")
    v = Vendored(lines, ("services/gateway/chi",))
    assert v.root_of("vendor/github.com/go-chi/chi/v5/mux.go") == "vendor"
    assert v.root_of("vendor/ours/x.go") is None  # `-linguist-vendored`: the project's own
    assert v.root_of("third_party/x.c") == "third_party"
    assert v.root_of("third_party/lib/x.c") == "third_party"  # not by the pattern (`*` stops at `/`): by its name
    assert v.root_of("docs/vendored.js") == "docs"
    # A project's own tests and docs marked to fix GitHub's language bar (truffleruby's `/spec/*`, `/test/*`) stay its own.
    spec = Vendored(parse_attributes("/spec/** linguist-vendored\n/test/* linguist-vendored\n/tool/* linguist-vendored\n"))
    assert spec.root_of("spec/ruby/core/array_spec.rb") is None and spec.root_of("test/test_x.rb") is None
    assert spec.root_of("tool/jt.rb") == "tool"
    assert v.root_of("legacy/a.py") is None  # `!attr`: unspecified again, and `legacy/` is no vendor folder
    assert v.root_of("services/gateway/chi/middleware/logger.go") == "services/gateway/chi"
    assert v.root_of("deps/lua/src/lgc.c") == "deps" and v.root_of("src/deps/resolve.py") is None
    assert v.root_of("web/node_modules/left-pad/index.js") == "web/node_modules"
    assert v.generated("src/api/client.ts") is False and v.generated("src/api/x/client.ts") is None
    # The words a question names a library by: its own name, not its internals or its host.
    assert v.names("services/gateway/chi/middleware/logger.go") == {"chi"}
    assert v.names("vendor/github.com/gdamore/tcell/v3/mouse.go") == {"gdamore", "tcell"}
    assert v.names("vendor/gopkg.in/yaml.v3/decode.go") == {"yaml"}
    assert v.names("vendor/k8s.io/client-go/rest/request.go") == {"client-go"}  # not "client" (a review, session 42)
    # A folder named `vendor` inside a source tree is the project's own package; the unmistakable names are not.
    assert v.root_of("src/main/java/com/shop/vendor/PayoutService.java") is None
    assert v.root_of("app/models/vendor/payout.rb") is None
    assert v.root_of("src/third_party/zlib/inflate.c") == "src/third_party"
    # A pattern git takes and Python's regular expressions do not is left out, never a failed run.
    assert Vendored(parse_attributes("static/[z-a]*.js linguist-vendored\n")).root_of("static/x.js") is None
    assert "chi" in question_words("how does go-chi's tree.go match routes?")


def test_a_walk_finds_other_repositories_and_drops_generated_files(tmp_path: Path) -> None:
    root = copy_fixture("vendored", tmp_path / "ws")
    (root / "libs" / "router" / ".git").write_text("gitdir: ../../.git/modules/router\n")
    (root / "libs" / "clone" / ".git").mkdir(parents=True)  # a nested clone
    (root / "libs" / "clone" / "x.py").write_text("x = 1\n")
    (root / "app" / "api.pb.go").write_text("package api\n")
    (root / ".gitattributes").write_text((root / ".gitattributes").read_text() + "app/*.pb.go -linguist-generated\n")
    res = scan(root, 1_000_000)
    assert res.vendored is not None and res.vendored.repos == ("libs/clone", "libs/router")
    assert res.skipped["app/generated/schema.py"] == "generated file (.gitattributes: linguist-generated)"
    assert "app/api.pb.go" in {f.path for f in res.files}  # the repository says it is not generated


def test_a_change_to_gitattributes_reaches_the_answers(tmp_path: Path) -> None:
    root = copy_fixture("vendored", tmp_path / "ws")
    q = "how are retries configured for requests"
    with Engine(root, index_dir=str(tmp_path / "idx")) as e:
        e.index()
        assert "ranked below" in next(r["why"] for r in e.context(q, limit=10)["results"]
                                      if r["path"] == "vendor/requestslib/retry.py")
        # "vendor/ is ours, and so is the schema": saved in an editor, which names the one file it saved.
        (root / ".gitattributes").write_text("vendor/** -linguist-vendored\n")
        e.index(only=[".gitattributes"], reembed=False)
        rows = e.context(q, limit=10)["results"]
        assert all("vendored" not in r["why"] for r in rows), [r["why"] for r in rows]
        assert "app/generated/schema.py" in e.meta.file_hashes()


def test_a_hostile_pattern_costs_no_walk_its_time() -> None:
    """`*a*a*a…b` backtracks for seconds per path (in git too); a cloned repository's `.gitattributes` is read on every
    walk, so such a pattern is left out (a review, session 42)."""
    import time

    v = Vendored(parse_attributes("*a" * 14 + "*b linguist-vendored\nvendor/** linguist-vendored\n"))
    t0 = time.perf_counter()
    assert v.root_of("x/" + "a" * 60 + ".go") is None and v.root_of("vendor/x.go") == "vendor"
    assert time.perf_counter() - t0 < 0.5


def test_a_first_index_writes_the_projects_own_files_before_vendored_ones(tmp_path: Path) -> None:
    """redis walks `deps/` before `src/`: answers asked during its first index (another process's, an agent's first
    call) came all from jemalloc, each "ranked below the project's own files" that were not indexed yet (a newcomer,
    session 44). Stopped after its first batch, the index holds the project's own files."""
    root = tmp_path / "ws"
    for i in range(40):  # more than a first batch, all walked before `src/`
        (root / "deps" / "jemalloc" / "src").mkdir(parents=True, exist_ok=True)
        (root / "deps" / "jemalloc" / "src" / f"extent{i:02}.c").write_text(
            f"/* evict extents from arena {i} */\nint extent_evict_{i}(void) {{ return {i}; }}\n")
    (root / "src").mkdir()
    (root / "src" / "evict.c").write_text("/* Evict keys when maxmemory is reached. */\n"
                                          "int performEvictions(void) { return evictKeys(); }\n")
    (root / "src" / "server.c").write_text("int main(void) { return 0; }\n")
    with Engine(root, index_dir=str(tmp_path / "idx")) as e:
        def first_batch_only(phase: str, done: int, total: int, chunks: int) -> None:
            if phase == "lexical" and done < total:
                e.stop_indexing()

        rep = e.index(progress=first_batch_only, vectors=False)
        assert rep.files_indexed < 42, rep  # stopped after the first batch
        held = set(e.meta.file_hashes())
        assert {"src/evict.c", "src/server.c"} <= held, sorted(held)
        assert _paths(e.context("how are keys evicted when maxmemory is reached", limit=3))[0] == "src/evict.c"
