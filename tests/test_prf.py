"""Pseudo-relevance feedback (issue 19, session 8): the first fusion's top files fed back once.

A small real workspace where the question's words are in one file (``cli/help.py``) and the file doing the
work (``cli/formatter.py``) never uses them: BM25 alone cannot reach it; the words the top file shares with
it (the formatter's names) can. Real stores (tantivy and Whoosh), real index, real potion vectors.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from delphi_ls import Engine
from delphi_ls.retrieval.branches.prf import expansion_terms, feedback_files
from delphi_ls.settings import Settings, SettingsError

FILES = {
    "cli/help.py": '"""Help output for the command line."""\nfrom cli.formatter import UsageFormatter\n\n\n'
                   "def print_help(parser):\n    \"\"\"Print the help output of the parser.\"\"\"\n"
                   "    formatter = UsageFormatter(width=80)\n    return formatter.wrap_columns(parser.options)\n",
    "cli/formatter.py": "class UsageFormatter:\n    def __init__(self, width):\n        self.width = width\n\n"
                        "    def wrap_columns(self, options):\n        return [o.ljust(self.width) for o in options]\n",
    "net/client.py": "import socket\n\n\nclass Client:\n    def connect(self, host, port):\n"
                     "        self.sock = socket.create_connection((host, port))\n",
    "db/store.py": "import sqlite3\n\n\nclass Store:\n    def open(self, path):\n        self.db = sqlite3.connect(path)\n",
    "util/log.py": "import logging\n\n\ndef log_output(message):\n    logging.getLogger('app').info(message)\n",
    "tests/test_client.py": "from net.client import Client\n\n\ndef test_connect():\n    assert Client()\n",
}
QUESTION = "Where is the help output built?"


def _workspace(root: Path) -> Path:
    for rel, text in FILES.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text)
    return root


def _branches(ans: dict, path: str) -> dict[str, int]:
    return next((r["branches"] for r in ans["results"] if r["path"] == path), {})


def test_off_by_default_and_validated(tmp_path: Path):
    assert Settings().prf == "off"
    with pytest.raises(SettingsError, match="prf"):
        Settings.load(overrides={"prf": "rocchio"}, env={}, user_config=tmp_path / "none.toml")


@pytest.mark.parametrize("store", ["tantivy", "whoosh"])
def test_feedback_words_reach_a_file_the_question_never_names(tmp_path: Path, store: str):
    ws = _workspace(tmp_path / "ws")
    with Engine(ws, index_dir=str(tmp_path / "idx"), vectors=False, reranker="off", lexical_store=store) as eng:
        assert not eng.index().errors
        plain = eng.context(QUESTION, limit=10)
        assert "bm25" not in _branches(plain, "cli/formatter.py")  # the question's words are not in it
        assert not any("prf_bm25" in r["branches"] for r in plain["results"])  # off by default
        r = eng.retrieve(QUESTION)
        files = feedback_files(r.ctx)
        assert files[0] == "cli/help.py"
        extra = expansion_terms(r.q, r.ctx, files)
        # The top file's words shared with another document, the question's own words left out.
        assert "usageformatter" in extra and "wrap_columns" in extra
        assert not {"help", "output"} & set(extra)
        assert "print_help" not in extra  # in one document only: it would find the feedback file again
        assert max(extra.values()) == 1.0
    with Engine(ws, index_dir=str(tmp_path / "idx"), vectors=False, reranker="off", lexical_store=store,
                prf="bm25") as eng:
        ans = eng.context(QUESTION, limit=10)
        # The bm25 list is the fed-back search's now: it reaches the formatter through the top file's words.
        assert "bm25" in _branches(ans, "cli/formatter.py")
        assert "prf_bm25" in ans["timingsMs"]
        r = eng.retrieve(QUESTION)
        assert [h.path for h in r.lists["bm25"]][0] == "cli/help.py"  # the question's own words still lead


def test_rocchio_moves_the_question_toward_the_top_files(tmp_path: Path):
    """prf = "vector": with real potion vectors, the vector list is searched again with the question's vector
    moved toward the feedback file's chunk (Rocchio): that file's similarity rises against another file's."""
    ws = _workspace(tmp_path / "ws")
    with Engine(ws, index_dir=str(tmp_path / "idx"), reranker="off") as eng:
        assert not eng.index().errors
        plain = {h.path: h.score for h in eng.retrieve(QUESTION).lists["vector"]}
    with Engine(ws, index_dir=str(tmp_path / "idx"), reranker="off", prf="vector") as eng:
        r = eng.retrieve(QUESTION)
        assert feedback_files(r.ctx)[0] == "cli/help.py"
        moved = {h.path: h.score for h in r.lists["vector"]}
        assert set(moved) <= set(FILES) and "prf_vector" in r.timings
        assert moved["cli/help.py"] - moved["db/store.py"] > plain["cli/help.py"] - plain["db/store.py"]
