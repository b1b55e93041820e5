"""The real server over stdio, while the user edits: lenses and hover of the buffer as shown, and files made or
deleted outside an editor that sends no file events (a newcomer, session 38: Neovim's recipe on flask)."""

from __future__ import annotations

import time
from pathlib import Path

from tests.conftest import copy_fixture
from tests.lsp_wire import Wire

RETRY = "shipyard/retry.py"


def _wait(check, timeout: float, what: str):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        got = check()
        if got:
            return got
        time.sleep(0.2)
    raise AssertionError(f"timed out waiting for {what}")


def _start(tmp_path: Path, ws: Path | None = None) -> tuple[Wire, Path]:
    ws = ws or copy_fixture("shipyard", tmp_path / "ws")
    w = Wire()
    # No capabilities: no dynamic file watchers, as Neovim's client on Linux and most terminal editors' clients.
    w.initialize(ws, {"indexDir": str(tmp_path / "idx"), "vectors": False, "reranker": "off"})
    _wait(lambda: w.call("delphi/status", {}, timeout=30)["result"]["workspaces"][0]["state"] == "ready", 120,
          "the first index")
    return w, ws


def _lenses_of(tmp_path: Path, files: dict[str, str], path: str) -> dict[int, str]:
    """The lenses of ``path`` in a workspace of ``files``, from a server started on it and closed after."""
    for rel, text in files.items():
        (tmp_path / "ws" / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / "ws" / rel).write_text(text)
    w, ws = _start(tmp_path, tmp_path / "ws")
    try:
        return _lenses(w, (ws / path).as_uri())
    finally:
        w.close()


def _lenses(w: Wire, uri: str) -> dict[int, str]:
    got = w.call("textDocument/codeLens", {"textDocument": {"uri": uri}}, timeout=30)["result"] or []
    return {lens["range"]["start"]["line"]: lens["command"]["title"] for lens in got}


def test_lenses_and_hover_answer_for_the_edit_just_made(tmp_path: Path) -> None:
    """Five lines inserted, then a lens request at once: the lenses came back on the pre-edit lines (blank ones
    now), and hover named a renamed method by its old name for ~0.4 s. They wait for the edit, as
    delphi/relatedTests does."""
    w, ws = _start(tmp_path)
    try:
        uri = (ws / RETRY).as_uri()
        text = (ws / RETRY).read_text()
        w.notify("textDocument/didOpen", {"textDocument": {"uri": uri, "languageId": "python", "version": 1,
                                                           "text": text}})
        before = _lenses(w, uri)
        assert before, "no lens on retry.py"
        edited = "# one\n# two\n# three\n# four\n# five\n" + text
        w.notify("textDocument/didChange", {"textDocument": {"uri": uri, "version": 2},
                                            "contentChanges": [{"text": edited}]})
        after = _lenses(w, uri)  # asked at once, inside the debounce
        assert after == {line + 5: title for line, title in before.items()}, (before, after)
        line = min(after)
        hover = w.call("textDocument/hover", {"textDocument": {"uri": uri},
                                              "position": {"line": line, "character": 4}}, timeout=30)["result"]
        assert hover and "Related tests" in hover["contents"]["value"], hover
    finally:
        w.close()


def test_files_made_or_deleted_outside_the_editor_reach_the_server(tmp_path: Path) -> None:
    """A client that registers no file watchers sends no event for a test file written from a terminal: the
    lenses never showed it, nor stopped showing a deleted one. The server watches the folder itself."""
    w, ws = _start(tmp_path)
    try:
        def related() -> set[str]:
            ans = w.call("delphi/relatedTests", {"path": str(ws / RETRY)}, timeout=30)["result"]["results"]
            return {r["path"] for r in ans}

        assert "tests/test_retry_budget.py" not in related()
        (ws / "tests/test_retry_budget.py").write_text(
            "from shipyard.retry import RetryPolicy\n\n\ndef test_budget():\n    assert RetryPolicy()\n")
        _wait(lambda: "tests/test_retry_budget.py" in related(), 30, "the new test file")
        (ws / "tests/test_retry_budget.py").unlink()
        _wait(lambda: "tests/test_retry_budget.py" not in related(), 30, "the deleted test file to go")
    finally:
        w.close()


def test_a_lens_opens_a_rust_inline_test_at_its_line(tmp_path: Path) -> None:
    """A Rust file's inline tests are the file itself: the lens carried the URI alone, so running it opened the
    file where it was (891 of 903 lenses of ripgrep's defs.rs). Each URI now comes with its line, path and why."""
    ws = tmp_path / "crate"
    (ws / "src").mkdir(parents=True)
    (ws / "Cargo.toml").write_text('[package]\nname = "walker"\nversion = "0.1.0"\n')
    code = ("pub fn walk_tree(depth: u32) -> u32 {\n    depth + 1\n}\n\n#[cfg(test)]\nmod tests {\n    use super::*;\n\n"
            "    #[test]\n    fn walks_one_level() {\n        assert_eq!(walk_tree(1), 2);\n    }\n}\n")
    (ws / "src/lib.rs").write_text(code)
    at = code.splitlines().index("    fn walks_one_level() {") + 1
    w, ws = _start(tmp_path, ws)
    try:
        uri = (ws / "src/lib.rs").as_uri()
        lenses = w.call("textDocument/codeLens", {"textDocument": {"uri": uri}}, timeout=30)["result"]
        walk = next(lens for lens in lenses if lens["range"]["start"]["line"] == 0)
        uris, title, details = walk["command"]["arguments"]
        assert uris == [uri] and "walk_tree" in title, walk
        assert details[0]["path"] == "src/lib.rs" and details[0]["line"] == at, (details, at)
        assert "walks_one_level" in details[0]["why"] or "inline test" in details[0]["why"], details
    finally:
        w.close()


def test_a_capped_lens_count_says_so() -> None:
    """"20 related tests" read as a count where the list had stopped at its cap of 20 (session 38); exactly 20 is
    20 (the lens asks for one more)."""
    from delphi_ls.server import _count
    from delphi_ls.session import LENS_TESTS

    assert _count([{}] * 3, LENS_TESTS) == "3" and _count([{}] * LENS_TESTS, LENS_TESTS) == str(LENS_TESTS)
    assert _count([{}] * (LENS_TESTS + 1), LENS_TESTS) == f"{LENS_TESTS}+"


def test_one_lens_per_definition_not_per_overload_or_closure(tmp_path: Path) -> None:
    """`@overload` stubs and their implementation had a lens each, all alike, and so did every closure inside a
    function (flask's app.py: `wrapper` twice, `template_filter` three times; session 38)."""
    code = ("from typing import overload\n\n\n@overload\ndef load(x: int) -> int: ...\n\n\n@overload\n"
            "def load(x: str) -> str: ...\n\n\ndef load(x):\n    def helper():\n        return x\n    return helper()\n")
    lenses = _lenses_of(tmp_path, {"loader.py": code, "tests/test_loader.py": "from loader import load\n\n\n"
                                   "def test_load():\n    assert load(1) == 1  # helper\n"}, "loader.py")
    first = code.splitlines().index("def load(x: int) -> int: ...")
    assert lenses == {first: "1 related test"}, lenses


def test_two_go_methods_of_one_name_keep_a_lens_each(tmp_path: Path) -> None:
    """Only an overload run is one lens: Go's `A.String` and `B.String` (a method's receiver is not its container)
    lost the second's lens to a dedup by name, and by run when they were next to each other (reviews, session 38);
    Go has no overloads."""
    code = ("package shop\n\ntype A struct{}\n\ntype B struct{}\n\nfunc (A) String() string { return \"a\" }\n\n"
            "func (B) String() string { return \"b\" }\n\nfunc helper() int { return 1 }\n")
    test = ("package shop\n\nimport \"testing\"\n\nfunc TestString(t *testing.T) {\n"
            "\tif A{}.String()+B{}.String() != \"ab\" || helper() != 1 {\n\t\tt.Fatal()\n\t}\n}\n")
    lenses = _lenses_of(tmp_path, {"go.mod": "module example.com/shop\n\ngo 1.22\n", "shop.go": code,
                                   "shop_test.go": test}, "shop.go")
    strings = [i for i, ln in enumerate(code.splitlines()) if "String() string" in ln]
    assert len(strings) == 2 and all(i in lenses for i in strings), (lenses, strings)
