"""A pasted trace's frames decide its answer (a newcomer, session 39): the file of the innermost workspace frame,
where the program failed, comes first even when other files share more of the trace's words, and a test file a
frame names is not pushed down for being a test. Small real workspaces, the real engine (no vectors)."""

from __future__ import annotations

from pathlib import Path

import pytest

from delphi_ls import Engine


def _write(root: Path, files: dict[str, str]) -> None:
    for rel, text in files.items():
        p = root / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(text)


def _answer(tmp_path: Path, files: dict[str, str], question: str) -> list[dict]:
    root = tmp_path / "ws"
    _write(root, files)
    with Engine(root, index_dir=str(tmp_path / "index"), vectors=False) as e:
        e.index(vectors=False)
        return e.context(question, limit=10, budget_tokens=600)


def _example(name: str) -> str:
    # Files no frame names whose words and names are the trace's: `error`, `index`, `status`, `integer`.
    return (f"// {name}: the error pages example; an invalid status code must be an integer\n"
            "function error(err, req, res, next) {\n  res.status(500)\n  res.send('invalid status code')\n}\n\n"
            "function index(req, res) {\n  res.sendStatus(200)\n}\n\n"
            "function status(req, res) {\n  res.status(Number.parseInt(req.query.code))\n}\n\n"
            "module.exports = { error, index, status }\n")


EXPRESS = {
    "lib/response.js": "const res = {}\n\nres.sendStatus = function sendStatus(code) {\n  return this.status(code)\n}\n\n"
                       + "\n" * 50 + "res.status = function status(code) {\n  if (!Number.isInteger(code)) {\n"
                       "    throw new TypeError('Invalid status code: ' + code)\n  }\n  this.statusCode = code\n"
                       "  return this\n}\n\nmodule.exports = res\n",
    "examples/error/index.js": _example("error"),
    "examples/error-pages/index.js": _example("error-pages"),
    "examples/web-service/index.js": _example("web-service"),
    "examples/route-map/index.js": _example("route-map"),
}
NODE_TRACE = ("TypeError: Invalid status code: \"200\". Status code must be an integer.\n"
              "    at ServerResponse.status (/usr/src/app/lib/response.js:60:11)\n"
              "    at ServerResponse.sendStatus (/usr/src/app/lib/response.js:4:15)\n"
              "    at /usr/src/app/examples/error-pages/index.js:3:7\n"
              "    at Layer.handleRequest (/usr/src/app/node_modules/router/lib/layer.js:152:17)\n")


def test_the_innermost_frames_file_leads_a_node_trace(tmp_path: Path) -> None:
    ans = _answer(tmp_path, EXPRESS, NODE_TRACE)
    top = ans["results"][0]
    assert top["path"] == "lib/response.js", [r["path"] for r in ans["results"]]
    assert "innermost frame" in top["why"], top["why"]
    # Its failing line is the first span packed.
    first = ans["packed"][0]
    assert first["path"] == "lib/response.js" and first["startLine"] <= 60 <= first["endLine"], first


def test_a_file_a_frame_names_takes_the_asked_for_kinds_bonus() -> None:
    """A trace asks for code (fusion adds a bonus to code files' ranks), but a test a frame names is what ran: `cargo
    test`'s panicking `tests/regression.rs` (path #1) came 35th on ripgrep. Such a file takes the bonus too."""
    from delphi_ls.retrieval.branches.base import Hit
    from delphi_ls.retrieval.fusion import rrf

    lists = {"bm25": [Hit("src/lib.rs", 2.0), Hit("tests/regression.rs", 1.0)],
             "path": [Hit("tests/regression.rs", 10.0), Hit("src/lib.rs", 1.0)]}
    kinds = {"src/lib.rs": "code", "tests/regression.rs": "test"}
    weights = {"bm25": 1.0, "path": 1.0}
    plain = {f.path: f.score for f in rrf(lists, weights, kinds, 60, {"code"}, set())}
    assert plain["src/lib.rs"] > plain["tests/regression.rs"]
    framed = {f.path: f.score for f in rrf(lists, weights, kinds, 60, {"code"}, set(),
                                           frozenset({"tests/regression.rs"}))}
    assert framed["tests/regression.rs"] == framed["src/lib.rs"]
    # and a kind the question avoids is not multiplied down when a frame names it
    avoided = {f.path: f.score for f in rrf(lists, weights, kinds, 60, {"code"}, {"test"},
                                            frozenset({"tests/regression.rs"}))}
    assert avoided == framed


def test_pytest_output_is_read_innermost_last_and_keeps_the_test_near(tmp_path: Path) -> None:
    """pytest prints the innermost frame last without Python's header: the raise leads, the failing test is near."""
    files = {
        "src/shop/app.py": "".join(f"def helper_{i}(cart):\n    return cart.total * {i}\n\n\n" for i in range(12))
        + "def make_response(rv):\n    if rv is None:\n        raise TypeError('the view returned None')\n    return rv\n",
        "src/shop/views.py": "from .app import make_response\n\n\ndef dispatch(view):\n    return make_response(view())\n",
        "tests/test_basic.py": "from shop.views import dispatch\n\n\ndef test_none_view():\n    dispatch(lambda: None)\n",
    }
    for i in range(5):  # code that shares the words of the output but is in no frame
        files[f"src/shop/response_{i}.py"] = ("def response_type_error(view):\n    '''A view returned None: a "
                                               "TypeError for the response.'''\n    return None\n")
    line = files["src/shop/app.py"].splitlines().index("        raise TypeError('the view returned None')") + 1
    out = ("____________________ test_none_view ____________________\n"
           "tests/test_basic.py:5: in test_none_view\n    dispatch(lambda: None)\n"
           "src/shop/views.py:5: in dispatch\n    return make_response(view())\n"
           f"src/shop/app.py:{line}: in make_response\n    raise TypeError('the view returned None')\n"
           "E   TypeError: the view returned None\n"
           "FAILED tests/test_basic.py::test_none_view - TypeError: the view returned None\n")
    ans = _answer(tmp_path, files, "\x1b[1m" + out.replace("src/shop/app.py", "\x1b[1msrc/shop/app.py\x1b[0m"))
    paths = [r["path"] for r in ans["results"]]
    assert paths[0] == "src/shop/app.py", paths
    assert "tests/test_basic.py" in paths[:3], paths
    first = ans["packed"][0]
    assert first["path"] == "src/shop/app.py" and first["startLine"] <= line <= first["endLine"], first


def test_a_frame_past_a_files_end_is_not_that_file(tmp_path: Path) -> None:
    """A Kotlin inline function's frame names the file by its class's package, and its line is in another file of
    that name (okio's `RealBufferedSource.kt:213`: jvmMain's file has 206 lines)."""
    short = "package okio\n\nclass RealBufferedSource {\n" + "".join(
        f"  fun read{i}(): Int = {i}\n" for i in range(10)) + "}\n"
    long = "package okio.internal\n\n" + "".join(
        f"inline fun RealBufferedSource.commonRead{i}(): String {{\n  return readUtf8Line{i}()\n}}\n\n"
        for i in range(20))
    files = {"okio/src/jvmMain/kotlin/okio/RealBufferedSource.kt": short,
             "okio/src/commonMain/kotlin/okio/internal/RealBufferedSource.kt": long}
    trace = ("java.io.EOFException: \\n not found: limit=0 content=…\n"
             "\tat okio.RealBufferedSource.readUtf8LineStrict(RealBufferedSource.kt:62)\n"
             "\tat okio.ReadUtf8LineTest.emptySourceThrows(ReadUtf8LineTest.kt:40)\n")
    ans = _answer(tmp_path, files, trace)
    assert ans["results"][0]["path"] == "okio/src/commonMain/kotlin/okio/internal/RealBufferedSource.kt", ans["results"]


def test_in_a_package_folder_a_sibling_package_s_frame_names_none_of_its_files(tmp_path: Path) -> None:
    """create-vite opened on its own: a frame of `packages/plugin-legacy/src/index.ts:210` named create-vite's
    `src/index.ts` ("holds line 210 of the trace"; a package-folder newcomer, session 39)."""
    from tests.conftest import git

    top = tmp_path / "mono"
    for pkg in ("a", "b"):
        _write(top / "packages" / pkg, {"src/index.ts": "".join(f"export function f{i}() {{\n  return {i}\n}}\n"
                                                                for i in range(40))})
    git(top, "init", "-q")
    trace = ("TypeError: x is undefined\n    at f30 (/home/dev/mono/packages/b/src/index.ts:91:7)\n"
             "    at Object.<anonymous> (/home/dev/mono/packages/b/src/main.ts:12:5)\n")
    own = trace.replace("packages/b/", "packages/a/")
    with Engine(top / "packages" / "a", index_dir=str(tmp_path / "index"), vectors=False) as e:
        e.index(vectors=False)
        spans = [s for r in e.context(trace, limit=3)["results"] for s in r["spans"]]
        assert not any("of the trace" in s["why"] for s in spans), spans
        top_spans = e.context(own, limit=3)["results"][0]["spans"]
        assert top_spans[0]["why"].startswith("holds line 91 of the trace"), top_spans


def test_moving_the_innermost_frame_s_file_leaves_the_fused_list_as_it_was() -> None:
    """The fused list is also the trace's and the candidates': moving it rewrote their scores, and a second call
    added the note twice (review, session 39)."""
    from delphi_ls.retrieval.fusion import Fused
    from delphi_ls.retrieval.rerank import innermost_first

    fused = [Fused("a.js", 3.0), Fused("b.js", 2.0), Fused("lib/response.js", 1.0)]
    once = innermost_first(fused, ["lib/response.js"])
    twice = innermost_first(fused, ["lib/response.js"])
    assert [f.path for f in once] == ["lib/response.js", "a.js", "b.js"] and [f.score for f in once] == [3.0, 2.0, 1.0]
    assert [(f.path, f.score, f.notes) for f in fused] == [("a.js", 3.0, []), ("b.js", 2.0, []),
                                                           ("lib/response.js", 1.0, [])]
    assert twice[0].notes == once[0].notes and len(once[0].notes) == 1


def test_a_path_too_long_for_the_file_system_is_a_request_error(tmp_path: Path) -> None:
    """`related_tests {"path": "a" * 300}` was an OSError ("Delphi failed on this call"; review, session 39)."""
    from delphi_ls.api import RequestError

    _write(tmp_path / "ws", {"a.py": "x = 1\n"})
    with Engine(tmp_path / "ws", index_dir=str(tmp_path / "index"), vectors=False) as e:
        e.index(vectors=False)
        with pytest.raises(RequestError, match="cannot be a file here"):
            e.related_tests("a" * 300)


def test_colour_codes_do_not_count_toward_the_question_s_cut(tmp_path: Path) -> None:
    """A coloured paste that fits once its codes are gone was said to be cut (review, session 39)."""
    from delphi_ls.retrieval.query import QUESTION_HEAD_CHARS, QUESTION_TAIL_CHARS

    _write(tmp_path / "ws", {"app.py": "def make_response(rv):\n    raise TypeError('none')\n"})
    line = "\x1b[1m\x1b[31mE   TypeError: none\x1b[0m\n"
    plain = len("E   TypeError: none\n")
    n = (QUESTION_HEAD_CHARS + QUESTION_TAIL_CHARS) // plain - 10
    question = line * n
    assert len(question) > QUESTION_HEAD_CHARS + QUESTION_TAIL_CHARS >= n * plain
    with Engine(tmp_path / "ws", index_dir=str(tmp_path / "index"), vectors=False) as e:
        e.index(vectors=False)
        assert "cut" not in e.context(question, limit=3)["query"]


def test_the_cli_reads_a_coloured_paste_without_its_codes(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                          capsys: pytest.CaptureFixture[str]) -> None:
    """`delphi context . - < coloured.log` kept head and tail before the codes went: they took the room (review)."""
    import io
    import json
    import sys

    from delphi_ls.cli import main
    from delphi_ls.retrieval.query import QUESTION_HEAD_CHARS, QUESTION_TAIL_CHARS

    _write(tmp_path / "ws", {"app.py": "def make_response(rv):\n    raise TypeError('none')\n"})
    line = "\x1b[1m\x1b[31mE   TypeError: none\x1b[0m\n"
    n = (QUESTION_HEAD_CHARS + QUESTION_TAIL_CHARS) // len("E   TypeError: none\n") - 10
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO((line * n).encode())))
    code = main(["context", str(tmp_path / "ws"), "-", "--json", "--index-dir", str(tmp_path / "index"),
                 "--no-vectors"])
    out = json.loads(capsys.readouterr().out)
    assert code == 0 and "cut" not in out["query"], out["query"]
