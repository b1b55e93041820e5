"""An answer that only the vector branch (and what it seeded) found says so: "zz9plural" got five files "similar in
meaning" that read as an answer (an editor newcomer, session 25). Real index of the shipyard fixture, with vectors."""

from __future__ import annotations

import subprocess
import sys

import pytest

from delphi_ls import Engine


@pytest.fixture
def eng(module_engine: Engine) -> Engine:
    return module_engine


def test_a_question_no_file_holds_a_word_of_is_said_to_be_meaning_only(eng: Engine) -> None:
    ans = eng.context("zz9plural", limit=3)
    assert ans["results"] and ans["query"].get("meaningOnly") is True
    assert set(ans["results"][0]["branches"]) <= {"vector", "graph", "ltr"}
    for q in ("retry backoff", "where is TLS set up for the gRPC proxy?", "BuildScheduler"):
        assert "meaningOnly" not in eng.context(q, limit=3)["query"], q
    # Filtered to a kind, the word branches' hits may have been dropped: not claimed (review).
    assert "meaningOnly" not in eng.context("zz9plural", kinds=["test"], limit=3)["query"]
    # An anchor is context the caller gave: not "only similar in meaning".
    assert "meaningOnly" not in eng.context("zz9plural", anchors=["shipyard/retry.py"], limit=3)["query"]


def test_the_cli_says_so(eng: Engine) -> None:
    proc = subprocess.run([sys.executable, "-m", "delphi_ls.cli", "context", str(eng.root), "zz9plural",
                           "--index-dir", str(eng.index_dir), "--limit", "3"], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert "note: no file holds a word or name of the question; these files are only similar in meaning" in proc.stdout
