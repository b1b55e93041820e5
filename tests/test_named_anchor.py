"""A question for tests that names its source file is asked around that file, as if the caller had sent
it as the anchor (a newcomer's finding, session 25: "which tests cover src/attr/validators.py" ranked
`test_make.py` first, while the bare name or `--anchor` put `test_validators.py` first). Real index of the
shipyard fixture."""

from __future__ import annotations

from pathlib import Path

import pytest

from delphi_ls import Engine


@pytest.fixture
def eng(module_engine: Engine) -> Engine:
    return module_engine


def paths(ans) -> list[str]:
    return [r["path"] for r in ans["results"]]


@pytest.mark.parametrize("question", ["which tests cover shipyard/scheduler.py?",
                                      "Which tests exercise ./shipyard/scheduler.py"])
def test_the_named_file_is_the_anchor_and_the_answer_is_the_anchored_one(eng: Engine, question: str) -> None:
    ans = eng.context(question, limit=5)
    assert ans["query"]["namedAnchor"] == "shipyard/scheduler.py"
    assert ans["query"]["anchors"] == ["shipyard/scheduler.py"]
    assert paths(ans) == paths(eng.context(question, anchors=["shipyard/scheduler.py"], limit=5))
    assert paths(ans)[0] == "tests/test_scheduler.py"
    assert "anchor_tests" in ans["results"][0]["branches"]


@pytest.mark.parametrize("question", [
    "which tests cover shipyard/scheduler.py and shipyard/retry.py?",  # two files: no one anchor
    "which tests cover tests/test_retry.py?",  # a test is not the file under test
    "where is shipyard/scheduler.py used?",  # not a question for tests
    "which tests cover shipyard/nothing_here.py?",  # no such file
    "which tests cover lib/scheduler.py?",  # no such file, though shipyard/scheduler.py has its name (review)
    "which tests cover the example in README.md?",  # a doc, not a source file (review)
    "which tests load config/settings.yaml?",  # a config file
])
def test_no_anchor_is_implied(eng: Engine, question: str) -> None:
    ans = eng.context(question, limit=5)
    assert "namedAnchor" not in ans["query"] and ans["query"]["anchors"] == []


def test_an_anchor_the_caller_sent_is_kept(eng: Engine) -> None:
    ans = eng.context("which tests cover shipyard/scheduler.py?", anchors=["shipyard/retry.py"], limit=5)
    assert ans["query"]["anchors"] == ["shipyard/retry.py"] and "namedAnchor" not in ans["query"]


def test_the_cli_says_which_file_it_asked_around(eng: Engine, tmp_path: Path) -> None:
    import subprocess
    import sys

    proc = subprocess.run([sys.executable, "-m", "delphi_ls.cli", "context", str(eng.root),
                           "which tests cover shipyard/scheduler.py?", "--index-dir", str(eng.index_dir),
                           "--limit", "3"], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert "asked around shipyard/scheduler.py, named in the question" in proc.stdout.splitlines()[0]


def test_the_trace_records_what_the_caller_sent(eng: Engine, tmp_path: Path) -> None:
    """The answer's anchors are the ones searched (namedAnchor marks the implied one); a trace keeps the request
    as sent, so a replay or a miner of traces can tell the two apart (review, session 25)."""
    import json

    trace = tmp_path / "trace.jsonl"
    ans = eng.context("which tests cover shipyard/scheduler.py?", limit=3, trace_file=trace)
    assert ans["query"]["anchors"] == ["shipyard/scheduler.py"]
    rec = json.loads(trace.read_text().splitlines()[-1])
    assert rec["params"]["anchors"] == [] and rec["query"]["namedAnchor"] == "shipyard/scheduler.py", rec
