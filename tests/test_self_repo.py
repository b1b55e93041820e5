"""`delphi context` on Delphi's own source (issue 2's acceptance checks)."""

from pathlib import Path

import pytest

from delphi_ls import Engine

REPO = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def own(tmp_path_factory):
    eng = Engine(REPO, index_dir=str(tmp_path_factory.mktemp("own")))
    eng.index()
    yield eng
    eng.close()


@pytest.mark.parametrize("question,answer", [
    ("where is the function split_identifier?", "delphi_ls/core/tokens.py"),
    ("what does content_skip_reason check?", "delphi_ls/workspace/scan.py"),
    ("how does rrf combine the branches?", "delphi_ls/retrieval/fusion.py"),
])
def test_named_function_in_top3(own: Engine, question, answer):
    top = [r["path"] for r in own.context(question)["results"][:3]]
    assert answer in top, top


@pytest.mark.parametrize("question,answer", [
    ("where are gitignore rules applied when walking the workspace folder?", "delphi_ls/workspace/scan.py"),
    ("how is a stored vector compared with a fresh embedding to catch a model mismatch?", "delphi_ls/health.py"),
    ("code that turns camelCase identifiers into separate lower-case words", "delphi_ls/core/tokens.py"),
])
def test_plain_english_in_top10(own: Engine, question, answer):
    top = [r["path"] for r in own.context(question)["results"][:10]]
    assert answer in top, top
