"""Spans (issue 17): which lines of a ranked file are shown and packed, on small real workspaces."""

from __future__ import annotations

from pathlib import Path

import pytest

from delphi_ls import Engine
from delphi_ls.retrieval.packing import _merged, file_lines, legacy_pack, pack, tokens_of
from delphi_ls.retrieval.spans import ScoredChunk

GO_TEST = 'package shapes\n\nimport "testing"\n\nfunc TestArea(t *testing.T) {\n\tif Area(2) != 4 {\n\t\tt.Fatal("area")\n\t}\n}\n'


def _body(name: str, words: str, n: int = 14) -> str:
    # A function big enough (about 1,000 characters) to be a chunk of its own.
    lines = [f"def {name}(self, item, options=None):", f'    """{words}."""']
    lines += [f"    step_{i} = self.helper_{i}(item, options)  # {words.split()[0]} detail {i}" for i in range(n)]
    lines += ["    return item", ""]
    return "\n".join(lines) + "\n"


APP = ("class App:\n    \"\"\"The application object.\"\"\"\n\n"
       + "".join("    " + ln + "\n" if ln else "\n" for part in (
           _body("iter_blueprints", "yield every blueprint registered on the app in order"),
           _body("make_config", "build the configuration mapping from defaults"),
           _body("register_blueprint", "attach a blueprint under its url prefix and record its options"),
           _body("handle_error", "turn an exception into a response for the client"),
       ) for ln in part.splitlines()))


SCAFFOLD = """class Scaffold:
    def iter_blueprints(self):
        return iter(self._blueprints)

    def register_blueprint(self, blueprint, url_prefix=None):
        self._blueprints.append((blueprint, url_prefix))
"""


@pytest.fixture
def ws(tmp_path: Path) -> Path:
    root = tmp_path / "ws"
    (root / "shapes").mkdir(parents=True)
    (root / "shapes" / "area_test.go").write_text(GO_TEST)
    (root / "shapes" / "area.go").write_text("package shapes\n\n// Area of a square.\nfunc Area(s int) int {\n\treturn s * s\n}\n")
    (root / "app.py").write_text(APP)
    (root / "scaffold.py").write_text(SCAFFOLD)
    (root / "util.py").write_text("".join(_body(f"util_{i}", f"utility number {i} for strings") for i in range(6)))
    return root


@pytest.fixture
def eng(ws: Path, tmp_path: Path):
    e = Engine(ws, index_dir=str(tmp_path / "index"))
    e.index(vectors=False)
    yield e
    e.close()


def test_whole_file_is_the_exact_file_blank_lines_kept(eng: Engine, ws: Path) -> None:
    ans = eng.context("TestArea area test in shapes", budget_tokens=4000)
    whole = [p for p in ans["packed"] if p["path"] == "shapes/area_test.go"]
    assert whole and whole[0]["whole"] is True
    assert whole[0]["text"] == GO_TEST  # the blank line between the import and the func is there
    assert (whole[0]["startLine"], whole[0]["endLine"]) == (1, GO_TEST.count("\n"))


def test_the_old_packer_dropped_those_lines(eng: Engine) -> None:
    # The bug this replaces, pinned so the test above is known to be able to fail.
    res = [{"path": "shapes/area_test.go", "spans": []}]
    packed, _ = legacy_pack(res, eng.meta, 4000)
    assert packed[0]["whole"] and packed[0]["text"] != GO_TEST


def test_whole_file_rebuilt_at_its_line_numbers_when_disk_changed(eng: Engine, ws: Path) -> None:
    (ws / "shapes" / "area_test.go").write_text("// edited since indexing\n" + GO_TEST)
    chunks = eng.meta.chunks_of("shapes/area_test.go")
    lines = file_lines(ws, chunks)
    # The indexed version, line for line: every chunk sits at its own line numbers, gaps are blank lines.
    assert "".join(lines) == GO_TEST
    for c in chunks:
        assert "".join(lines[c.start_line - 1: c.end_line]).rstrip("\n") == c.text.rstrip("\n")


def test_first_span_is_the_function_the_question_names(eng: Engine) -> None:
    ans = eng.context("register_blueprint loses the url prefix options", limit=5)
    app = next(r for r in ans["results"] if r["path"] == "app.py")
    first = app["spans"][0]
    text = "\n".join(APP.splitlines()[first["startLine"] - 1: first["endLine"]])
    assert "def register_blueprint" in text, first
    assert "register_blueprint" in first["why"]
    # The legacy order (fused evidence) is still callable, and is not what the agent sees first now.
    eng.span_mode = "legacy"  # type: ignore[attr-defined]
    try:
        old = eng.context("register_blueprint loses the url prefix options", limit=5)
    finally:
        eng.span_mode = "scored"  # type: ignore[attr-defined]
    assert [r["path"] for r in old["results"]] == [r["path"] for r in ans["results"]]  # spans only, same files


def test_preview_points_at_the_named_definition_inside_a_chunk(eng: Engine) -> None:
    # Small neighbours share one chunk; the preview line is the definition the question names, not
    # the chunk's first line (the report was `iter_blueprints` shown for a `register_blueprint` question).
    ans = eng.context("Scaffold register_blueprint drops url_prefix", limit=5)
    sc = next(r for r in ans["results"] if r["path"] == "scaffold.py")
    first = sc["spans"][0]
    assert (first["startLine"], first["symbol"]) == (1, "register_blueprint")
    assert first["preview"] == "def register_blueprint(self, blueprint, url_prefix=None):"
    assert first["previewLine"] == 5


def test_adjacent_strong_chunks_are_listed_as_one_span(eng: Engine) -> None:
    # register_blueprint and handle_error are neighbours in app.py, both named by the question: one
    # listed span covers both; a neighbour the question does not name stays out of it.
    ans = eng.context("register_blueprint then handle_error with the url prefix options", limit=5)
    app = next(r for r in ans["results"] if r["path"] == "app.py")
    chunks = {c.symbols[0] if c.symbols else "": c for c in eng.meta.chunks_of("app.py")}
    reg, err = chunks["register_blueprint"], chunks["handle_error"]
    first = app["spans"][0]
    assert (first["startLine"], first["endLine"]) == (reg.start_line, err.end_line)
    assert all(not (s["startLine"] <= reg.start_line <= s["endLine"]) for s in app["spans"][1:])


@pytest.mark.parametrize("budget", [1, 7, 40, 120, 250, 400, 700, 1000, 1500, 2500, 6000])
def test_budget_never_exceeded_and_every_span_says_why(eng: Engine, budget: int) -> None:
    ans = eng.context("blueprint options utility strings area", budget_tokens=budget, limit=10)
    assert ans["packedTokens"] <= budget
    assert ans["packedTokens"] == sum(tokens_of(p["text"]) for p in ans["packed"])
    for p in ans["packed"]:
        assert p["why"]
        assert p["text"].count("\n") == p["endLine"] - p["startLine"] + 1  # text and line numbers agree


def test_budget_prefers_the_best_part_of_each_top_file(eng: Engine) -> None:
    # 400 tokens cannot hold app.py (about 1,100): it gets its best chunk, not its head.
    ans = eng.context("register_blueprint url prefix options", budget_tokens=400, limit=5)
    spans = [p for p in ans["packed"] if p["path"] == "app.py"]
    assert spans and any("def register_blueprint" in p["text"] for p in spans)
    assert not any("def iter_blueprints" in p["text"] for p in spans)


@pytest.mark.parametrize("budget", [40, 60])
def test_a_best_part_too_large_for_the_budget_is_packed_as_its_first_lines(eng: Engine, budget: int) -> None:
    """At 100 tokens the top file's best chunk was left out and smaller chunks of other files with no word of
    the question were packed instead (an agent newcomer, session 26)."""
    ans = eng.context("make_config configuration mapping from defaults", budget_tokens=budget, limit=5)
    assert ans["results"][0]["path"] == "app.py"
    first = ans["packed"][0]
    assert first["path"] == "app.py" and "def make_config" in first["text"], ans["packed"]
    assert first["why"].endswith("its first lines: the rest did not fit the budget")
    assert ans["packedTokens"] <= budget
    whole = next(c for c in eng.meta.chunks_of("app.py") if "def make_config" in c.text)
    assert first["startLine"] == whole.start_line and first["endLine"] < whole.end_line
    lines = eng.root.joinpath("app.py").read_text().splitlines(keepends=True)
    assert first["text"] == "".join(lines[first["startLine"] - 1: first["endLine"]])


def test_adjacent_chosen_chunks_merge_into_one_span(eng: Engine, ws: Path) -> None:
    chunks = eng.meta.chunks_of("util.py")
    assert len(chunks) >= 3
    picks = [ScoredChunk(c, 1.0, ["utility"], []) for c in chunks[:2]] + [ScoredChunk(chunks[-1], 0.5, [], ["bm25"])]
    spans = _merged(picks, file_lines(ws, chunks))
    assert [(s["startLine"], s["endLine"]) for s in spans] == [(chunks[0].start_line, chunks[1].end_line),
                                                               (chunks[-1].start_line, chunks[-1].end_line)]
    lines = (ws / "util.py").read_text().splitlines(keepends=True)
    assert spans[0]["text"] == "".join(lines[chunks[0].start_line - 1: chunks[1].end_line])


def test_pack_without_a_question_still_fits(eng: Engine, ws: Path) -> None:
    res = [{"path": "util.py", "spans": []}, {"path": "app.py", "spans": []}]
    packed, used = pack(res, eng.meta, 500, ws)
    assert 0 < used <= 500 and packed[0]["path"] == "util.py"


def _linked_ws(root: Path) -> Path:
    # settings.py defines retry_limit; client.py's send_part calls it and names no word of the question.
    root.mkdir(parents=True)
    (root / "settings.py").write_text('def retry_limit(config):\n    """How many times a failed upload is retried '
                                      'before it gives up."""\n    return int(config.get("upload_retries", 3))\n')
    (root / "client.py").write_text("".join([
        _body("upload", "upload a file and wait until the upload is retried or done"),
        _body("format_headers", "format the request headers for the server"),
        _body("send_part", "send one part of the body to the server").replace(
            "step_0 = ", "step_0 = retry_limit(self.config) + "),
        _body("close", "close the connection to the server")]))
    return root


@pytest.mark.parametrize("weight", [0.3, 0.0])
def test_packer_takes_the_chunk_that_uses_another_top_files_definition(tmp_path: Path, monkeypatch, weight) -> None:
    from delphi_ls.retrieval import spans as S

    monkeypatch.setattr(S, "LINK_WEIGHT", weight)
    e = Engine(_linked_ws(tmp_path / "ws"), index_dir=str(tmp_path / "index"))
    e.index(vectors=False)
    try:
        send_part = next(c for c in e.meta.chunks_of("client.py") if "send_part" in c.symbols)
        ans = e.context("retried uploads give up too early", budget_tokens=700, limit=5)
        packed = [p for p in ans["packed"] if p["path"] == "client.py"]
        took = [p for p in packed if p["startLine"] <= send_part.start_line and p["endLine"] >= send_part.end_line]
        if weight:
            assert took and "uses `retry_limit` (settings.py)" in took[0]["why"]
        else:  # without the link, the budget's second client.py chunk is its neighbour, not send_part
            assert not took
        assert ans["packedTokens"] <= 700
    finally:
        e.close()


def test_links_lift_the_packers_value_only_and_never_for_an_anchored_question(tmp_path: Path) -> None:
    from delphi_ls.retrieval import spans as S

    e = Engine(_linked_ws(tmp_path / "ws"), index_dir=str(tmp_path / "index"))
    e.index(vectors=False)
    try:
        send_part = next(c for c in e.meta.chunks_of("client.py") if "send_part" in c.symbols)
        order = ["settings.py", "client.py"]
        for anchors, lifted in (([], True), (["settings.py"], False)):
            sq = S.SpanQuery({"retried": 1.0}, anchors=anchors)
            scored = {p: S.score_chunks(p, e.meta.chunks_of(p), sq) for p in order}
            fresh = {p: [x.score for x in S.score_chunks(p, e.meta.chunks_of(p), sq)] for p in order}
            S.link_files(order, scored, sq)
            sp = next(x for x in scored["client.py"] if x.chunk.id == send_part.id)
            assert (sp.lift > 0 and sp.links == [("retry_limit", "settings.py")]) is lifted
            # The listing reads .score: the links leave it exactly as scored.
            assert {p: [x.score for x in scored[p]] for p in order} == fresh
            values = [x.value for x in scored["client.py"]]
            S.link_files(order, scored, sq)  # a second call sets the same lift, it does not add another
            assert [x.value for x in scored["client.py"]] == values
    finally:
        e.close()


def test_a_name_many_files_define_links_nothing(tmp_path: Path) -> None:
    from delphi_ls.retrieval import spans as S

    root = tmp_path / "ws"
    root.mkdir()
    # `shared_name` is defined in four files (more than LINK_MAX_DEFINERS): a namespace, not a dependency.
    for i in range(4):
        (root / f"m{i}.py").write_text(f"def shared_name():\n    return {i}\n")
    (root / "user.py").write_text("import m0\n\n\ndef caller():\n    return m0.shared_name()\n")
    e = Engine(root, index_dir=str(tmp_path / "index"))
    e.index(vectors=False)
    try:
        order = ["m0.py", "m1.py", "m2.py", "m3.py", "user.py"]
        sq = S.SpanQuery({"caller": 1.0})
        scored = {p: S.score_chunks(p, e.meta.chunks_of(p), sq) for p in order}
        S.link_files(order, scored, sq)
        assert not any(x.links or x.lift for x in scored["user.py"])
        # With three definers it is a link.
        order3 = ["m0.py", "m1.py", "m2.py", "user.py"]
        scored = {p: S.score_chunks(p, e.meta.chunks_of(p), sq) for p in order3}
        S.link_files(order3, scored, sq)
        assert any(x.links for x in scored["user.py"])
    finally:
        e.close()


def test_a_files_preamble_is_not_listed_first(tmp_path: Path) -> None:
    from delphi_ls.retrieval import spans as S

    root = tmp_path / "ws"
    root.mkdir()
    # The imports name the question's words three times; the function that does the work names them once.
    (root / "upload.py").write_text("from retry import retry_policy, retry_delay, retry_count\nimport os\n\n\n"
                                    + _body("send", "send the file with a retry policy"))
    (root / "script.py").write_text("import retry\nimport os\n\nprint(retry)\n")
    e = Engine(root, index_dir=str(tmp_path / "index"))
    e.index(vectors=False)
    try:
        sq = S.SpanQuery({"retry": 1.0})
        chunks = e.meta.chunks_of("upload.py")
        scored = S.score_chunks("upload.py", chunks, sq)
        assert S._is_preamble(scored) and scored[0].score > scored[1].score
        listed = S.listed_spans(scored, {"retry"})
        assert listed[0]["symbol"] == "send" and listed[0]["startLine"] > 1
        assert any(sp["startLine"] == 1 for sp in listed)  # still listed, after the definition
        # A file with no definitions has no preamble to set apart.
        assert not S._is_preamble(S.score_chunks("script.py", e.meta.chunks_of("script.py"), sq))
    finally:
        e.close()


def _python_trace(outer: int, inner: int) -> str:
    """A Python traceback through lib/application.py: handle_response at ``outer`` calls respond, failing at ``inner``."""
    return ("Traceback (most recent call last):\n"
            f'  File "/srv/app/lib/application.py", line {outer}, in handle_response\n'
            f'  File "/srv/app/lib/application.py", line {inner}, in respond\n'
            "TypeError: respond failed\n")


def test_the_chunk_a_stack_frame_names_is_the_files_first_span(tmp_path: Path) -> None:
    """A Node trace's `respond` at application.js:265 was listed after three chunks of the file that hold none
    of its lines (an agent newcomer, session 26): the innermost frame's chunk now comes first, then the other
    frames' (Python prints the innermost frame last)."""
    root = tmp_path / "ws"
    (root / "lib").mkdir(parents=True)
    body = "".join(_body(f"helper_{i}", f"respond helper number {i} respond respond") for i in range(4))
    body += _body("respond", "write the body") + _body("handle_response", "call respond for the context")
    (root / "lib" / "application.py").write_text(body)
    lines = body.splitlines()
    at = {name: next(i + 1 for i, ln in enumerate(lines) if ln.startswith(f"def {name}(")) for name in
          ("respond", "handle_response")}
    node = ("TypeError: Cannot set headers after they are sent\n"
            f"    at respond (/app/node_modules/x/lib/application.py:{at['respond'] + 3}:10)\n"
            f"    at handleResponse (/app/node_modules/x/lib/application.py:{at['handle_response'] + 3}:5)\n")
    python = _python_trace(at["handle_response"] + 3, at["respond"] + 3)
    with Engine(root, index_dir=str(tmp_path / "index"), vectors=False) as e:
        e.index(vectors=False)
        for q in (node, python):
            spans = e.context(q, limit=3)["results"][0]["spans"]
            assert spans[0]["symbol"] == "respond" and spans[0]["startLine"] <= at["respond"] + 3 <= spans[0]["endLine"]
            assert spans[0]["why"].startswith(f"holds line {at['respond'] + 3} of the trace"), spans[0]
            # the outer frame's chunk comes next: here it joins the first span (adjacent, as strong)
            assert any(s["startLine"] <= at["handle_response"] + 3 <= s["endLine"] for s in spans[:2]), spans
            # Packed, the file's spans that hold a frame's line come first too (they came in line order: an agents'
            # newcomer, session 38); a budget that takes the file's head chunks as well.
            packed = [p for p in e.context(q, limit=3, budget_tokens=800)["packed"] if p["path"] == "lib/application.py"]
            assert packed and "of the trace" in packed[0]["why"], packed


def test_a_frame_names_a_file_only_when_it_can_be_told_apart() -> None:
    """A bare `Foo.java:5` named every `*/Foo.java` of the top files, and a library frame
    (`.../site-packages/x/models.py`) the workspace's root-level `models.py` (review, session 26)."""
    from delphi_ls.retrieval.query import analyse
    from delphi_ls.retrieval.spans import SpanQuery, frames_first
    from delphi_ls.stores.meta import ChunkRow

    def scored(path: str) -> list[ScoredChunk]:
        return [ScoredChunk(ChunkRow(f"{path}{i}", path, i, 1 + 10 * i, 10 + 10 * i, [], "code", "h", "x"), 1.0 - i / 10,
                            [], []) for i in range(3)]

    def lifted(question: str, paths: list[str]) -> dict[str, list[int]]:
        got = {p: scored(p) for p in paths}
        frames_first(paths, got, SpanQuery.build(analyse(question)))
        return {p: [ln for s in sc for ln in s.frame_lines] for p, sc in got.items()}

    java = ("java.lang.IllegalStateException: boom\n\tat com.acme.Foo.run(Foo.java:15)\n"
            "\tat com.acme.Main.main(Main.java:25)\n")
    assert lifted(java, ["a/Foo.java", "b/Foo.java", "a/Main.java"]) == {"a/Foo.java": [], "b/Foo.java": [],
                                                                        "a/Main.java": [25]}
    assert lifted(java, ["a/Foo.java"]) == {"a/Foo.java": [15]}
    py = ('Traceback (most recent call last):\n  File "/usr/lib/python3/site-packages/django/db/models.py", line 15, '
          'in save\n  File "/srv/app/shop/models.py", line 25, in save\nValueError: x\n')
    assert lifted(py, ["models.py", "shop/models.py"]) == {"models.py": [], "shop/models.py": [25]}
    # The workspace is the installed package's source (a user of the library pasted the trace; a newcomer, session
    # 38): site-packages beside a src layout, Go's module cache, cargo's registry, node_modules. Two parts at least.
    installed = [
        ('  File "/home/ci/.venv/lib/python3.12/site-packages/_pytest/cacheprovider.py", line 15, in get\n',
         {"src/_pytest/cacheprovider.py": [15], "testing/cacheprovider.py": []}),
        ("goroutine 87 [running]:\n\t/home/dev/go/pkg/mod/github.com/gin-gonic/gin@v1.11.0/tree.go:15 +0x7e5\n"
         "\t/home/dev/go/pkg/mod/github.com/gin-gonic/gin@v1.11.0/binding/json.go:25 +0x7e5\n",
         {"tree.go": [15], "binding/json.go": [25], "internal/json/json.go": []}),
        ("thread 'main' panicked at /home/dev/.cargo/registry/src/index.crates.io-1949cf8c6b5b557f/"
         "clap_builder-4.5.60/src/builder/debug_asserts.rs:15:13:\n",
         {"clap_builder/src/builder/debug_asserts.rs": [15], "clap_lex/src/lib.rs": []}),
        ("TypeError: x\n    at Layer.handle (/srv/app/node_modules/express/lib/router/layer.js:15:5)\n",
         {"lib/router/layer.js": [15], "lib/router/index.js": []}),
    ]
    for trace, want in installed:
        assert lifted(trace, list(want)) == want, trace
    assert lifted(py.replace("/srv/app/shop/models.py", "/srv/app/models.py"), ["models.py"]) == {"models.py": [25]}


def test_a_budget_nothing_fits_in_says_so(eng: Engine) -> None:
    """`budget_tokens: 1` gave the ranked list and no code, without a word (an agents' newcomer, session 38)."""
    from delphi_ls.shown import query_notes

    ans = eng.context("TestArea area test in shapes", budget_tokens=1)
    assert ans["results"] and ans["packed"] == [] and ans["query"]["packedNone"] == 1
    assert any("no part of the ranked files fits in 1 token:" in n for n in query_notes(ans["query"]))
    assert "packedNone" not in eng.context("TestArea area test in shapes", budget_tokens=4000)["query"]


def test_a_chunk_of_punctuation_alone_is_not_packed(tmp_path: Path) -> None:
    """A lone `}` was packed as a file's last span, "picked by its shape" (mockito's GenericMetadataSupport.java
    line 744; an agents' newcomer, session 38): a span without a letter or a digit says nothing."""
    from delphi_ls.stores.meta import ChunkRow

    body = "".join(f"    int f{i}(int x) {{\n        return x + {i};\n    }}\n" for i in range(12))
    text = "class A {\n" + body + "}\n"
    (tmp_path / "A.java").write_text(text)
    n = text.count("\n")
    big = ChunkRow("c0", "A.java", 0, 1, n - 1, ["A"], "code", "h0", "".join(text.splitlines(True)[:n - 1]))
    brace = ChunkRow("c1", "A.java", 1, n, n, [], "code", "h1", "}\n")
    scored = {"A.java": [ScoredChunk(big, 1.0, [], []), ScoredChunk(brace, 0.5, [], [])]}
    out, _used = pack([{"path": "A.java"}], None, 120, tmp_path, scored=scored)  # type: ignore[arg-type]
    assert out and all(p["endLine"] < n for p in out), out


def test_a_functions_last_lines_picked_by_shape_are_not_packed(tmp_path: Path) -> None:
    """redis's evict.c: `    return count;` `}` (a function's tail, split from it) was the first span packed,
    "no word of the question in it (picked by its shape)", even as the file's best chunk by value (a newcomer's
    first use, session 44). The file's next chunk stands for it; a short chunk that names a question's word stays."""
    from delphi_ls.stores.meta import ChunkRow

    head = "".join(f"int pool_{i} = {i};\n" for i in range(10))
    text = head + "int evictionPoolPopulate(void) {\n    count = maxmemory_keys();\n    return count;\n}\n"
    (tmp_path / "evict.c").write_text(text)
    n = text.count("\n")
    body = ChunkRow("c0", "evict.c", 0, 1, n - 2, ["evictionPoolPopulate"], "code", "h0",
                    "".join(text.splitlines(True)[:n - 2]))
    tail = ChunkRow("c1", "evict.c", 1, n - 1, n, [], "code", "h1", "    return count;\n}\n")
    for tail_words, kept in (([], False), (["count"], True)):
        scored = {"evict.c": [ScoredChunk(body, 0.4, ["maxmemory"], ["bm25"]), ScoredChunk(tail, 0.9, tail_words, [])]}
        out, _used = pack([{"path": "evict.c"}], None, 200, tmp_path, scored=scored)  # type: ignore[arg-type]
        assert out and any(p["startLine"] == 1 for p in out), out
        assert any(p["endLine"] == n for p in out) == kept, (tail_words, out)


def test_packed_frame_spans_come_innermost_first(tmp_path: Path) -> None:
    """Two spans of one file that each hold a frame's line came in line order when packed (session 38's note):
    the innermost frame's, where the program failed, now comes first whatever its place in the file."""
    root = tmp_path / "ws"
    (root / "lib").mkdir(parents=True)
    body = _body("handle_response", "call respond for the context")
    body += "".join(_body(f"helper_{i}", f"unrelated helper number {i}") for i in range(4))
    body += _body("respond", "write the body")
    (root / "lib" / "application.py").write_text(body)
    lines = body.splitlines()
    at = {name: next(i + 1 for i, ln in enumerate(lines) if ln.startswith(f"def {name}(")) + 3 for name in
          ("respond", "handle_response")}
    python = _python_trace(at["handle_response"], at["respond"])
    with Engine(root, index_dir=str(tmp_path / "index"), vectors=False) as e:
        e.index(vectors=False)
        packed = [p for p in e.context(python, limit=3, budget_tokens=700)["packed"]
                  if p["path"] == "lib/application.py"]
        holds = [name for p in packed for name, ln in at.items() if p["startLine"] <= ln <= p["endLine"]]
        assert holds[:2] == ["respond", "handle_response"], packed


@pytest.mark.parametrize("items", [25000, 900])  # a 300 KB line; a 12 KB one
def test_a_long_line_that_does_not_fit_leaves_the_other_files_packed(tmp_path: Path, items: int) -> None:
    """A generated table on one long line is cut into pieces at indexing; the pieces the packer chose are packed
    as the whole line or not at all (session 30). The whole line did not fit, and the budget's guard dropped spans
    from the end, the other files' first: no code packed at any budget (an agents' newcomer, session 40). The
    largest span goes now."""
    ws = tmp_path / "ws"
    (ws / "pkg").mkdir(parents=True)
    table = "WIDTH_TABLE = [" + ", ".join(f"'widthitem{i}'" for i in range(items)) + "]\n"
    (ws / "pkg" / "table.py").write_text(table, encoding="utf-8")
    (ws / "pkg" / "width.py").write_text(
        '"""Display width of a string, read from WIDTH_TABLE."""\n\nfrom .table import WIDTH_TABLE\n\n\n'
        "def str_width(text):\n    return sum(char_width(c) for c in text)\n\n\n"
        "def char_width(char):\n    return 2 if char in WIDTH_TABLE else 1\n", encoding="utf-8")
    with Engine(ws, index_dir=str(tmp_path / "idx"), vectors=False, reranker="off") as eng:
        eng.index()
        for budget in (1800, 2000, 2500, 8000):
            ans = eng.context(f"widthitem{items - 1} widthitem1 widthitem2", budget_tokens=budget, limit=5)
            assert ans["results"][0]["path"] == "pkg/table.py"  # ranked first: its span was packed first
            packed = ans["packed"]
            assert packed and ans["packedTokens"] <= budget, (budget, ans["packedTokens"])
            assert "pkg/width.py" in {p["path"] for p in packed}
            assert all(p["text"] == table for p in packed if p["path"] == "pkg/table.py")  # whole, or not at all


def test_a_long_line_between_chosen_chunks_goes_alone(tmp_path: Path) -> None:
    """Chunks on both sides of a line too long for any budget, and pieces of that line, all chosen in one file:
    merged, they were one span holding the whole line, which the budget's guard then dropped, the file's chunks
    with it. A notebook's 500 KB plot between two cells left the top file with nothing packed from 6,000 tokens up
    (a newcomer, session 41). Only the line goes now; the chunks beside it stay packed."""
    ws = tmp_path / "ws"
    (ws / "pkg").mkdir(parents=True)
    bins = "DRIFT_BINS = [" + ", ".join(f"'driftbin{i}'" for i in range(25000)) + "]\n"
    (ws / "pkg" / "drift.py").write_text(
        'def measure_drift(reference, current):\n    """Population stability index: how far current drifts."""\n'
        "    return psi(reference, current, DRIFT_BINS)\n\n" + bins +
        '\ndef report_drift(reference, current):\n    """A drift report of the measured index."""\n'
        "    return {'psi': measure_drift(reference, current)}\n", encoding="utf-8")
    (ws / "pkg" / "other.py").write_text("def unrelated():\n    return 'drift elsewhere'\n", encoding="utf-8")
    with Engine(ws, index_dir=str(tmp_path / "idx"), vectors=False, reranker="off") as eng:
        eng.index()
        for budget in (2000, 6000, 14000):
            ans = eng.context("measure drift report driftbin1 driftbin2", budget_tokens=budget, limit=5)
            assert ans["results"][0]["path"] == "pkg/drift.py"
            mine = [p for p in ans["packed"] if p["path"] == "pkg/drift.py"]
            text = "".join(p["text"] for p in mine)
            assert "def measure_drift(" in text and "def report_drift(" in text, (budget, mine)
            assert "driftbin1'" not in text and ans["packedTokens"] <= budget  # the line: whole or not at all
