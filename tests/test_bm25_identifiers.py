"""The BM25 branch's weights of a question's identifiers (issue 19, session 19).

A small real workspace shaped like okio's "Stop using AssertJ" (dev_langs): the three tests that import
``org.assertj`` name it once each, in an import line, while other tests are full of the question's plain
words. With plain BM25 those words outweigh the one rare identifier. Both weights are off by default: on
the dev sets neither moved file ranking beyond noise (bench/RESULTS.md, session 19). Real tantivy and Whoosh.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from delphi_ls import Engine
from delphi_ls.retrieval.branches.lexical import identifier_weights
from delphi_ls.retrieval.query import analyse
from delphi_ls.settings import Settings, SettingsError

QUESTION = "Which tests cover this change?\nStop using AssertJ in the buffer and source tests"


def _asserting(name: str, n: int) -> str:
    body = "".join(f"    assert buffer.read({i}) == source.read({i})\n    assert buffer.size == {i}\n" for i in range(n))
    return f"from okio import Buffer, Source\n\n\ndef test_{name}(buffer, source):\n{body}"


def _assertj(name: str) -> str:
    body = "".join(f"    assert_that(segment.split({i})).is_equal_to({i})\n" for i in range(8))
    return f"from org.assertj.core.api import assert_that\n\n\ndef test_{name}(segment):\n{body}"


FILES = {
    **{f"tests/test_assertj_{i}.py": _assertj(f"assertj_{i}") for i in range(3)},
    **{f"tests/test_buffer_{i}.py": _asserting(f"buffer_{i}", 12) for i in range(6)},
    # source files that assert nothing, so that `assert` is a word of the tests (as in a real repository)
    **{f"okio/segment_{i}.py": f"class Segment{i}:\n    def split(self, n):\n        return n * {i}\n" for i in range(20)},
}


def _workspace(root: Path) -> Path:
    for rel, text in FILES.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text)
    return root


def test_weights_name_the_whole_identifier_and_only_its_unwritten_parts():
    q = analyse("Stop using AssertJ; fix parse_args() and the parse step")
    assert identifier_weights(q, q.terms, 1.0, 1.0) is None  # plain BM25: nothing weighed
    got = identifier_weights(q, q.terms, 2.0, 0.0)
    assert got is not None
    assert got["assertj"] == 2.0 and got["parse_args"] == 2.0
    assert got["assert"] == 0.0 and got["args"] == 0.0
    assert "parse" not in got  # the question writes `parse` as a word of its own: it stays a plain term


def test_defaults_are_plain_bm25_and_validated(tmp_path: Path):
    s = Settings()
    assert (s.bm25_identifier_weight, s.bm25_identifier_parts) == (1.0, 1.0)
    for key, bad in (("bm25_identifier_weight", 0.0), ("bm25_identifier_parts", 1.5)):
        with pytest.raises(SettingsError, match=key):
            Settings.load(overrides={key: bad}, env={}, user_config=tmp_path / "none.toml")


@pytest.mark.parametrize("store", ["tantivy", "whoosh"])
def test_weighing_the_whole_identifier_lifts_the_files_naming_it(tmp_path: Path, store: str):
    ws = _workspace(tmp_path / "ws")
    assertj = {p for p in FILES if "assertj" in p}
    tops = {}
    for weight in (1.0, 2.0):
        with Engine(ws, index_dir=str(tmp_path / "idx"), vectors=False, reranker="off", lexical_store=store,
                    bm25_identifier_weight=weight) as eng:
            assert not eng.index().errors
            tops[weight] = [h.path for h in eng.retrieve(QUESTION).lists["bm25"]]
    assert not assertj & set(tops[1.0][:3])  # plain BM25: the tests full of the question's words come first
    assert set(tops[2.0][:3]) == assertj
