"""Query analysis: a question asks for tests by its intent, not because it contains the word "test".

"How does the test client handle cookies?" asks about code (flask's `testing.py`); "where is this
tested?" asks for tests. The table is the contract; the engine test checks what a user sees.
"""

from __future__ import annotations

import textwrap

import pytest

from delphi_ls import Engine
from delphi_ls.retrieval.query import analyse

ASKS_FOR_TESTS = [
    "which tests cover the retry policy?",
    "which tests cover grpc_proxy.go?",
    "where is this tested?",
    "where is RetryPolicy tested?",
    "how is the scheduler tested?",
    "tests for the scheduler",
    "test for the retry logic",
    "is there a test for with_backoff?",
    "what tests exercise the cookie jar?",
    "find the unit tests of the session interface",
    "show me the integration test that starts the proxy",
    "the test that checks TLS settings",
    "which test fails when the upload times out?",
    "is the retry policy covered?",
    "what covers delay_for?",
    "test coverage of the blueprint registration",
    "Which tests cover this change?\nRetry uploads with backoff",
    "Retries give up too early. Which tests cover it?",
    "any regression test for the cookie path bug",
    "spec file for the formatter",
    "is the config loader tested at all",
    "where do we do testing of the cli?",
    "a flaky test in the proxy",
    "unit-tests for the parser",
    "tests that cover the parser",
    "where are the tests?",
    "which specs cover the formatter",
    "end-to-end tests for the proxy",
    "run the tests of the scheduler",
    # the review of session 38's rules: a determiner before the singular, a state after the plural
    "why does the test fail on windows?",
    "where does the test for retry live?",
    "does a test exist for retry?",
    "the retry tests fail",
    "parser tests are flaky",
    "where do the tests live?",
    "show me the unit-tests",
    # a request to fix or explain, with a request for tests in it or no runner output after it (review of session 38)
    "Investigate which tests cover the retry policy\nIt retries too often.",
    "Why does the upload fail?\nWhich tests cover it?",
    "why does the test fail on windows?\nIt passes on linux.",
    "where do we do testing?",
]
ASKS_FOR_CODE_OR_ANYTHING = [
    "how does the test client handle cookies?",
    "where are the testing utilities?",
    "where is the test client defined?",
    "how does the testing module build an environ?",
    "what does TESTING config do?",
    "test mode switches off error catching",
    "which class implements the test runner?",
    "where is test.css loaded?",
    "how is the test request context pushed?",
    "what code is covered by tests/test_retry.py?",
    "which functions are exercised by test_scheduler.py?",
    "where is TLS set up for the gRPC proxy?",
    "exponential backoff with jitter between upload attempts",
    "Which source files implement this change?\nFix tests for retries",
    "how are test fixtures loaded by the app factory?",
    "testing helpers for the cli runner",
    "the test environment variables of the app",
    "where is coverage configured?",
    "where is this covered in the docs?",
    "the FlaskClient test client open method",
    "Which source files cause this failure?\nAssertionError in test_retry",
    # A test runner's own features (pytest's repository, a newcomer in session 38: tests-only answers before).
    "add an option that prints the slowest N tests at the end of the run",
    "skip tests marked xfail when the run is strict",
    "report tests that were skipped in the summary",
    "how does clap test that argument names are unique when the command is built",
    # An agent's "fix this failing test" with the runner's output: the fix is in the code it runs (an agents'
    # newcomer, session 38: tests only, in 9 of 9 such questions).
    "Fix this failing test:\n\n  1) app\n       .render(name, options, fn)\n         should render the template:\n"
    "     TypeError: Cannot read properties of null (reading '_locals')\n      at Function.render "
    "(lib/application.js:536:46)\n      at Context.<anonymous> (test/app.render.js:21:11)\n",
    "Fix this failing test:\n\n____ test_encode_decimal ____\n\n    def test_encode_decimal():\n>       assert "
    "jsonable_encoder(Decimal('1.5')) == 1.5\nfastapi/encoders.py:52: TypeError\n",
    "Fix this failing test:\n     Running tests/rt_unstable_metrics.rs\ntest num_idle ... FAILED\nthread 'num_idle' "
    "panicked at tokio/tests/rt_unstable_metrics.rs:89:5:\nassertion `left == right` failed\n",
    "why does test_retry_budget fail?\nAssertionError: assert 3 == 2\ntests/test_retry.py:14: AssertionError\n",
    "Fix this failing test:\n\n> Task :core:test\n\nRetryTest > backsOff() FAILED\n    org.opentest4j.AssertionFailedError: "
    "expected: <3> but was: <2>\n\nExecution failed for task ':core:test'.\n> There were failing tests.\n",
    "🐛 Fix `inspect.getcoroutinefunction()` can break testing with `unittest.mock.patch()`",
]


@pytest.mark.parametrize("question", ASKS_FOR_TESTS)
def test_asks_for_tests(question: str):
    q = analyse(question)
    assert q.shape == "test" and "test" in q.prefer, (q.shape, q.prefer)


@pytest.mark.parametrize("question", ASKS_FOR_CODE_OR_ANYTHING)
def test_the_word_alone_does_not_ask_for_tests(question: str):
    q = analyse(question)
    assert q.shape != "test" and "test" not in q.prefer, (q.shape, q.prefer)


def test_where_is_it_defined_still_prefers_code():
    assert analyse("where is the test client defined?").prefer == {"code"}
    assert analyse("what code is covered by tests/test_retry.py?").prefer == {"code"}


# A flask-shaped workspace: the test client lives in `testing.py`, and many test files talk about clients
# and cookies. Only the code question for it should be answered by the module.
FLASK_LIKE = {
    "src/flask/__init__.py": '''
        from .app import Flask
        from .testing import FlaskClient
        ''',
    "src/flask/app.py": '''
        class Flask:
            """The application object."""

            test_client_class = None

            def test_client(self, use_cookies=True):
                """Create a test client for this application."""
                from .testing import FlaskClient
                return FlaskClient(self, use_cookies=use_cookies)
        ''',
    "src/flask/sessions.py": '''
        class SecureCookieSessionInterface:
            """Stores the session in a signed cookie."""

            def open_session(self, app, request):
                return request.cookies.get(app.session_cookie_name)
        ''',
    "src/flask/testing.py": '''
        """Test helpers: the test client that drives an app without a server."""


        class FlaskClient:
            """A test client that keeps cookies between requests, like a browser would."""

            def __init__(self, app, use_cookies=True):
                self.application = app
                self._cookies = {} if use_cookies else None

            def set_cookie(self, key, value):
                """Store a cookie the client sends with every later request."""
                self._cookies[key] = value

            def get_cookie(self, key):
                return self._cookies.get(key)

            def open(self, path, method="GET"):
                """Send a request, with the stored cookies in its Cookie header."""
                header = "; ".join(f"{k}={v}" for k, v in self._cookies.items())
                return self.application.handle(path, method, {"Cookie": header})
        ''',
    "tests/test_testing.py": '''
        def test_client_cookies(app):
            client = app.test_client()
            client.set_cookie("flavor", "oatmeal")
            assert client.get_cookie("flavor") == "oatmeal"
        ''',
    "tests/test_basic.py": '''
        def test_session_cookie(app):
            client = app.test_client()
            rv = client.get("/")
            assert "session" in rv.headers["Set-Cookie"]
        ''',
    "tests/test_session_interface.py": '''
        def test_cookie_session(app):
            client = app.test_client()
            assert client.get("/").status_code == 200
        ''',
    "tests/test_cookies.py": '''
        def test_cookies_are_kept(app):
            with app.test_client() as client:
                client.set_cookie("a", "b")
                client.get("/")
        ''',
    "tests/static/test.css": "body { color: red; } /* test client cookies */\n",
}


@pytest.fixture(scope="module")
def flask_like(tmp_path_factory: pytest.TempPathFactory):
    root = tmp_path_factory.mktemp("flasklike")
    ws = root / "ws"
    for rel, text in FLASK_LIKE.items():
        p = ws / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(textwrap.dedent(text).lstrip("\n"), encoding="utf-8")
    eng = Engine(ws, index_dir=str(root / "index"))
    eng.index()
    yield eng
    eng.close()


def _paths(eng: Engine, question: str) -> list[str]:
    return [r["path"] for r in eng.context(question)["results"]]


def test_test_client_question_finds_the_module(flask_like: Engine):
    paths = _paths(flask_like, "how does the test client handle cookies?")
    assert "src/flask/testing.py" in paths[:3], paths


def test_where_tested_question_finds_tests(flask_like: Engine):
    res = flask_like.context("where is the test client's cookie handling tested?")
    assert res["query"]["shape"] == "test"
    assert res["results"][0]["kind"] == "test", [r["path"] for r in res["results"]]
    assert "tests/test_testing.py" in [r["path"] for r in res["results"][:3]]


@pytest.mark.parametrize("name", ["Logger.cs", "tinylog.hpp", "sds.c", "app.rb", "Slim.php", "Okio.kt", "cli.rs"])
def test_a_bare_file_name_of_any_parsed_language_is_a_path(name: str) -> None:
    assert analyse(f"which tests cover {name}?").paths == [name]


def test_a_sentence_with_a_dot_is_not_a_path() -> None:
    assert analyse("see e.g. this: the retry.count is wrong").paths == []


@pytest.mark.parametrize("text", [
    "x\n" + "\n" * 16000 + "y",          # `^\s*` under re.M ran from every blank line over the rest: 27 s
    "at " + "a." * 8000,                 # a JVM frame pattern whose package and class overlapped: 65 s at 100 KB
    "at " + "_." * 8000,
    "Error: x\n" + "    \n" * 4000,
    " ❯ " * 5000 + "a.ts:1",              # session 38's patterns and rules: Vitest frames, module-cache folders,
    "\t/" + "a@v1.1/" * 2000 + "x.go:1",  # the plural's test intent
    "the slowest tests " * 900,
    'File "/a/' + "a-1.1" * 3000 + '/x.py", line 1, in f\n',  # a versioned folder's name, quadratic before
    "Traceback (most recent call last):\n" + "note: " * 2600,
])
def test_a_hostile_question_is_analysed_in_linear_time(text: str):
    """Questions reach analyse() cut to 16,000 characters; each of these took seconds to a minute (review,
    session 37)."""
    import time

    start = time.perf_counter()
    analyse(text)
    assert time.perf_counter() - start < 1.0


def test_a_traces_words_leave_out_its_framing_and_the_folders_outside_the_workspace() -> None:
    """`Traceback`, `goroutine`, `panicked` and the folders of an installed copy (`home`, `cargo`, `registry`,
    `index` of index.crates.io) were searched as the question's words: `index` matched a function of that name
    and `Traceback` a class (a newcomer, session 38). The frames and paths are read as pasted."""
    rust = ("thread 'main' panicked at /home/dev/.cargo/registry/src/index.crates.io-1949cf8c6b5b557f/"
            "clap_builder-4.5.60/src/builder/debug_asserts.rs:99:13:\nArgument names must be unique\n"
            "note: run with `RUST_BACKTRACE=1` environment variable to display a backtrace\n")
    q = analyse(rust)
    assert q.shape == "trace" and q.frames[0][1] == 99 and "registry" in q.paths[0]
    assert not {"thread", "main", "panicked", "home", "cargo", "registry", "index", "crates", "backtrace",
                "environment"} & set(q.terms), q.terms
    assert {"clap_builder", "debug_asserts", "argument", "unique"} <= set(q.terms), q.terms
    py = ('Traceback (most recent call last):\n  File "/home/ci/.venv/lib/python3.12/site-packages/_pytest/'
          'cacheprovider.py", line 202, in get\nValueError: bad cache\n')
    q = analyse(py)
    assert not {"traceback", "recent", "home", "venv", "site", "packages"} & set(q.terms), q.terms
    assert {"cacheprovider", "valueerror", "bad", "cache"} <= set(q.terms), q.terms
    go = "goroutine 87 [running]:\nmain.main()\n\t/home/dev/shop/cmd/server/main.go:17 +0x5a\n"
    assert "goroutine" not in analyse(go).terms and "server" in analyse(go).terms


def test_a_long_folder_name_in_a_frame_is_cheap_to_match_to_files() -> None:
    """A frame is matched to each top file (query.frame_names): the versioned-folder pattern was quadratic in one
    folder name's length, 8.9 s for one 15 KB trace (review, session 38)."""
    import time

    from delphi_ls.retrieval.query import frame_names

    frame = "/a/" + "a-1.1" * 3000 + "/src/x.py"
    start = time.perf_counter()
    for i in range(20):
        frame_names(frame + str(i), f"src/x{i}.py")
    assert time.perf_counter() - start < 0.5


@pytest.mark.parametrize("text,first", [
    # Chrome's frames name the dev server's URL; Firefox's `fn@url`; a source map's `webpack:///./`; a reloaded
    # module's `?t=` query (a newcomer, session 39: none of these gave a frame).
    ("TypeError: x is null\n    at insert (http://localhost:5173/packages/runtime-dom/src/nodeOps.ts:46:12)\n"
     "    at mountElement (http://localhost:5173/packages/runtime-core/src/renderer.ts?t=1712:735:5)\n",
     ("/packages/runtime-dom/src/nodeOps.ts", 46)),
    ("TypeError: x is null\ninsert@http://localhost:5173/packages/runtime-dom/src/nodeOps.ts:46:12\n"
     "mountElement@http://localhost:5173/packages/runtime-core/src/renderer.ts:735:5\n",
     ("/packages/runtime-dom/src/nodeOps.ts", 46)),
    ("TypeError: x is null\n    at insert (webpack:///./packages/runtime-dom/src/nodeOps.ts:46:12)\n",
     ("/./packages/runtime-dom/src/nodeOps.ts", 46)),
    # Node's frames of a private method and of an accessor (a newcomer pasting traces, session 44: both skipped, the
    # innermost frame lost)
    ("TypeError: Cannot read properties of undefined (reading 'getReader')\n"
     "    at Ky.#readResponseText (/home/runner/work/ky/ky/source/core/Ky.ts:765:18)\n"
     "    at Ky.#getResponseData (/home/runner/work/ky/ky/source/core/Ky.ts:612:27)\n",
     ("/home/runner/work/ky/ky/source/core/Ky.ts", 765)),
    ("AssertionError [ERR_ASSERTION]: invalid status code: 1000\n"
     "    at Object.set status [as status] (/home/dev/shop/node_modules/koa/lib/response.js:88:5)\n"
     "    at Object.status (/home/dev/shop/node_modules/delegates/index.js:92:31)\n",
     ("/home/dev/shop/node_modules/koa/lib/response.js", 88)),
    # chi's Recoverer marks the panicking frame with an arrow (session 44: no frame, its line in no span)
    ("panic: runtime error: slice bounds out of range [:5] with length 3\n\n"
     " -> github.com/go-chi/chi/v5.(*node).findRoute\n"
     " ->   /home/ci/go/pkg/mod/github.com/go-chi/chi/v5@v5.0.12/tree.go:458\n\n"
     "    github.com/go-chi/chi/v5.(*node).findRoute\n"
     "      /home/ci/go/pkg/mod/github.com/go-chi/chi/v5@v5.0.12/tree.go:478\n",
     ("/home/ci/go/pkg/mod/github.com/go-chi/chi/v5@v5.0.12/tree.go", 458)),
    # tsc's and rustc's locations
    ("packages/runtime-core/src/renderer.ts(735,30): error TS2345: Argument of type 'X | null' is not assignable.\n",
     ("packages/runtime-core/src/renderer.ts", 735)),
    ("error[E0308]: mismatched types\n    --> crates/ignore/src/walk.rs:1221:31\n     |\n",
     ("crates/ignore/src/walk.rs", 1221)),
    # pytest on a Windows runner, and pytest's order (outermost first, without Python's header), with colours
    ("tests\\test_basic.py:1262: in test_x\n    c.get('/none')\nsrc\\flask\\app.py:1597: in wsgi_app\n"
     "    response = self.full_dispatch_request(ctx)\nsrc\\flask\\app.py:1307: TypeError\n",
     ("src/flask/app.py", 1307)),
    ("\x1b[1m\x1b[31mtests/test_basic.py\x1b[0m:1262: in test_x\n    c.get('/none')\n"
     "\x1b[1m\x1b[31msrc/flask/app.py\x1b[0m:1307: in make_response\n    raise TypeError(\nE   TypeError: bad\n",
     ("src/flask/app.py", 1307)),
    # pytest's default (long) style: a frame's location line alone, the last naming the exception (review)
    ("    def test_direct():\n>       make_response(None)\n\ntests/test_basic.py:6: \n_ _ _ _\n\n"
     "    def make_response(rv):\n>           raise TypeError('none')\nE           TypeError: none\n\n"
     "src/shop/app.py:3: TypeError\n", ("src/shop/app.py", 3)),
    # frames of two patterns come in the order written: PHP's `in …:57` is read by one, `#0 …(37)` by another
    ("PHP Fatal error:  Uncaught InvalidArgumentException: no in /var/www/src/Money.php:57\nStack trace:\n"
     "#0 /var/www/src/Money.php(37): Money->assertSameCurrency()\n", ("/var/www/src/Money.php", 57)),
])
def test_frames_are_read_innermost_first(text: str, first: tuple[str, int]) -> None:
    from delphi_ls.retrieval.query import question_read
    q = analyse(question_read(text))
    assert q.frames and q.frames[0] == first, q.frames
    assert q.paths[0] == first[0]


def test_a_login_is_no_frame() -> None:
    """Firefox's `fn@url:line` pattern read `me@host.example.com:2222` lines as frames, turning a question into a
    trace (review, session 39)."""
    q = analyse("ssh me@host.example.com:2222 fails, then scp me@other.example.com:22 too")
    assert q.frames == [] and q.shape != "trace"


def test_a_trace_in_the_middle_of_a_long_paste_is_read() -> None:
    """A CI log handed over whole, its traceback after 300 log lines: the middle was cut out with the trace, and the
    36 KB paste was searched as English (a newcomer pasting traces, session 44). The request's head, the trace
    found past the head, and the tail are read; the note says which part."""
    from delphi_ls.retrieval.query import (
        QUESTION_HEAD_CHARS,
        QUESTION_TAIL_CHARS,
        question_cut,
        question_read,
    )
    from delphi_ls.shown import cut_note

    log = "".join(f"2024-05-14T10:{i // 60:02}:{i % 60:02} INFO worker {i} processed batch {i * 7} in 12ms\n"
                  for i in range(300))
    trace = ('ERROR job failed\nTraceback (most recent call last):\n  File "/home/ci/build/src/black/linegen.py", '
             'line 1370, in delimiter_split\n    if leaves[i].type == STANDALONE_COMMENT:\nIndexError: list index '
             'out of range\n')
    text = "why does the nightly job fail?\n" + log + trace + log[: 100 * 60]
    assert len(text) > QUESTION_HEAD_CHARS + QUESTION_TAIL_CHARS and text.index("Traceback") > QUESTION_HEAD_CHARS
    q = analyse(question_read(text))
    assert q.shape == "trace" and q.frames[0] == ("/home/ci/build/src/black/linegen.py", 1370), (q.shape, q.frames)
    kept, note = question_cut(text)
    assert note is not None and note["traceFrom"] <= text.index("ERROR job failed") < note["traceFrom"] + note["trace"]
    assert kept.startswith("why does the nightly job fail?") and len(kept) <= QUESTION_HEAD_CHARS + QUESTION_TAIL_CHARS + 2
    assert "a trace found there" in (cut_note({"cut": note}) or "")
    # Without a trace past the head, the head and the tail, as before.
    plain = "why?\n" + log * 2
    assert question_cut(plain)[1] == {"chars": len(plain), "head": QUESTION_HEAD_CHARS, "tail": QUESTION_TAIL_CHARS}


def test_a_request_for_instructions_gets_the_guide_within_the_first_answers():
    """"How do I add a new integration test" was read as a request for tests alone: lazygit's
    `pkg/integration/README.md`, first with `--kind doc`, was not in the top 30 (a newcomer, session 44)."""
    from delphi_ls.core import Kind
    from delphi_ls.retrieval.fusion import Fused
    from delphi_ls.retrieval.query import Shape
    from delphi_ls.retrieval.retriever import GUIDE_AT, guide_at

    q = analyse("how do I add a new integration test")
    assert q.how_to and q.shape != Shape.TEST and {Kind.DOC, Kind.TEST} <= q.prefer and not q.avoid
    assert {"doc", "test"} <= analyse("how do I test the scheduler?").prefer  # the guide and the tests to copy
    assert not analyse("which tests cover retry.py?").how_to
    assert not analyse("docs: clarify that -e matches all entry types").how_to  # a change's title, no request
    fused = [Fused(f"t{i}_test.go", 1.0) for i in range(40)]
    moved = [f.path for f in guide_at(fused, fused[33])]
    assert moved[GUIDE_AT - 1] == "t33_test.go" and moved[:2] == ["t0_test.go", "t1_test.go"]
    assert sorted(moved) == sorted(f.path for f in fused)  # moved, nothing lost
    assert guide_at(fused, fused[1]) == fused  # already among the first: kept


def test_the_guide_is_the_projects_own_and_no_changelog_test_data_or_pointer(tmp_path):
    """The guide a how-to question gets (session 45's newcomer): not express's 3,600-line `History.md`, not a vendored
    library's README, not urfave/cli's `testdata/` text, not lazygit's one-line "see new docs here"."""
    guide = ("# Integration tests\n\nWriting tests: add a file under pkg/tests/, describe the setup, run the steps "
             "and assert on the output. Run one test with `just test NAME`; new tests are listed in test_list.go, "
             "which `go generate` writes. Each integration test starts a fresh repository in a temporary folder.\n")
    files = {
        "pkg/tests/README.md": guide,
        "docs/dev/Integration_Tests.md": "see new docs [here](../../pkg/tests/README.md)\n",
        "CHANGELOG.md": "".join(f"- add a new integration test for case {i}\n" for i in range(40)),
        "vendor/github.com/acme/testkit/README.md": "# testkit\n\nAdd a new integration test with testkit.New().\n" * 5,
        "testdata/add-a-new-integration-test.txt": "add a new integration test\n" * 20,
        "pkg/tests/test_list.go": "package tests\n\nvar Tests = []Test{CommitAmend}\n",
        "pkg/tests/commit_amend.go": "package tests\n\nvar CommitAmend = NewIntegrationTest(\"amend\")\n",
        "pkg/tests/runner_test.go": "package tests\n\nfunc TestIntegration(t *testing.T) { RunTests(Tests) }\n",
    }
    for rel, text in files.items():
        (tmp_path / "ws" / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / "ws" / rel).write_text(text)
    with Engine(tmp_path / "ws", index_dir=str(tmp_path / "idx"), vectors=False) as eng:
        eng.index(vectors=False)
        ans = eng.context("how do I add a new integration test", limit=10)
        assert ans["query"].get("howTo") is True and "howTo" not in eng.context("add a new test", limit=1)["query"]
        paths = [r["path"] for r in ans["results"]]
    assert "pkg/tests/README.md" in paths[:3], paths
    # A question that names the vendored library reaches its files, but its README is no guide of this project.
    with Engine(tmp_path / "ws", index_dir=str(tmp_path / "idx"), vectors=False) as eng:
        named = [r["path"] for r in eng.context("how do I add a new integration test with testkit", limit=10)["results"]]
    assert "pkg/tests/README.md" in named[:3] and named[2] != "vendor/github.com/acme/testkit/README.md", named
    # A question about the code that explains how something is done, a pasted issue's "How to reproduce" and a trace
    # asking how to fix it are no requests for instructions (a review, session 45).
    for text in ("where is the code that explains how to retry", "How to reproduce: run the tests",
                 'How do I fix this?\nTraceback (most recent call last):\n  File "a.py", line 3, in f\nValueError: x'):
        assert not analyse(text).how_to, text
    assert analyse("Retries give up. How do I make them wait longer?").how_to
    assert not {"CHANGELOG.md", "docs/dev/Integration_Tests.md", "testdata/add-a-new-integration-test.txt",
                "vendor/github.com/acme/testkit/README.md"} & set(paths[:3]), paths
