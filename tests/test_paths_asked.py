"""Files asked about by path that Delphi did not index, and paths written with their line (an agents' newcomer,
session 40): an anchor or a related-tests path that was skipped answered around nothing ("0 tests for
zq_blob.bin"), and `lines.py:120` got "does not exist" with no hint."""

from __future__ import annotations

import pytest

from delphi_ls import Engine
from delphi_ls.api import RequestError
from delphi_ls.shown import query_notes


@pytest.fixture(scope="module")
def eng(tmp_path_factory: pytest.TempPathFactory):
    ws = tmp_path_factory.mktemp("ws")
    (ws / "pkg").mkdir()
    (ws / "pkg" / "lines.py").write_text("def split_lines(text):\n    return text.splitlines()\n", encoding="utf-8")
    (ws / "tests").mkdir()
    (ws / "tests" / "test_lines.py").write_text("from pkg.lines import split_lines\n\n\ndef test_split():\n"
                                                "    assert split_lines('a\\nb') == ['a', 'b']\n", encoding="utf-8")
    (ws / "pkg" / "blob.bin").write_bytes(bytes(range(256)) * 16)
    (ws / ".gitignore").write_text("build/\n", encoding="utf-8")
    (ws / "build").mkdir()
    (ws / "build" / "lines_gen.py").write_text("def split_lines_fast(text):\n    return text.split('\\n')\n",
                                               encoding="utf-8")
    with Engine(ws, index_dir=str(tmp_path_factory.mktemp("idx")), vectors=False, reranker="off") as e:
        e.index()
        yield e


def test_related_tests_of_a_skipped_file_is_an_error_that_says_why(eng: Engine):
    with pytest.raises(RequestError) as err:
        eng.related_tests("pkg/blob.bin")
    assert "pkg/blob.bin is not indexed (binary" in str(err.value) and "delphi health" in str(err.value)
    with pytest.raises(RequestError, match="not indexed"):
        eng.related_code("pkg/blob.bin")
    assert eng.related_tests("pkg/lines.py")[0]["path"] == "tests/test_lines.py"  # an indexed file still answers


def test_a_skipped_anchor_is_said_in_the_answer(eng: Engine):
    ans = eng.context("what does this file do", anchors=["pkg/blob.bin"])
    assert ans["query"]["anchorsNotIndexed"]["pkg/blob.bin"].startswith("binary")
    assert any("the anchor pkg/blob.bin is not indexed (binary" in n for n in query_notes(ans["query"]))
    assert "anchorsNotIndexed" not in eng.context("split lines", anchors=["pkg/lines.py"])["query"]


def test_an_ignored_file_asked_about_says_it_is_ignored(eng: Engine):
    # An ignored file is never walked, so no run records it as skipped: it got "no related tests found" (exit 1, as
    # if it had none) and, as an anchor, an answer around nothing with nothing said (a hostile-input audit, s46).
    with pytest.raises(RequestError) as err:
        eng.related_tests("build/lines_gen.py")
    assert "build/lines_gen.py is not indexed (ignored by .gitignore" in str(err.value)
    assert "delphi health" not in str(err.value)  # health lists what a run skipped, not what the rules hide
    ans = eng.context("split lines fast", anchors=["build/lines_gen.py"])
    assert ans["query"]["anchorsNotIndexed"]["build/lines_gen.py"].startswith("ignored by .gitignore")
    assert all(r["path"] != "build/lines_gen.py" for r in ans["results"])


def test_a_path_with_its_line_is_hinted_to_the_path(eng: Engine):
    with pytest.raises(RequestError, match=r"did you mean pkg/lines\.py\?"):
        eng.related_tests("pkg/lines.py:120")
    with pytest.raises(RequestError, match=r"did you mean pkg/lines\.py\?"):
        eng.context("split", anchors=["pkg/lines.py:2:5"])
    with pytest.raises(RequestError, match=r"did you mean pkg/lines\.py\?"):
        eng.related_tests("pkg/lines.py:1-2")  # the form answers print


def test_branches_in_one_state_are_one_note():
    from delphi_ls.shown import branch_notes

    ready = {b: "partial: indexing in progress (75 files so far)" for b in ("bm25", "path", "symbol", "filedoc")}
    ready |= {"vector": "off: vectors = false", "graph": "ready", "trigram": "error: OSError: gone"}
    notes = branch_notes(ready, lambda s: s.startswith(("ready", "off")))
    assert notes == ["branches bm25, path, symbol, filedoc: partial: indexing in progress (75 files so far)",
                     "branch trigram: error: OSError: gone"]


def test_an_empty_folder_indexed_is_not_waiting_for_vectors(tmp_path):
    # "note: branch vector: not ready: no vectors yet" under "no files match" read as "wait", where nothing is to
    # come (a newcomer, session 47). Before its first run it is still not ready.
    ws = tmp_path / "empty"
    ws.mkdir()
    with Engine(ws, index_dir=str(tmp_path / "idx"), reranker="off") as e:
        assert e.vector_status()[1] == "not ready: no vectors yet"
        e.index()
        ok, line = e.vector_status()
        assert ok and line.startswith("ready: no files to embed"), line
        assert e.context("where is main")["branchesReady"]["vector"].startswith("ready"), "said as not ready"
        e.meta.clear_index()  # a rebuild's first step: not "ready" then
        assert e.vector_status()[1] == "not ready: no vectors yet"
