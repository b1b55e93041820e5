"""A git that does not answer (a network mount, a credential helper waiting for input) made every front wait two
minutes: four questions in a row, 30 s each, and a timeout was forgotten at once (a newcomer, session 30). A real
index of a real repository, with a `git` on PATH that never answers."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from delphi_ls import Engine
from delphi_ls.core import git as git_mod
from tests.conftest import git


def test_a_git_that_hangs_is_asked_once_and_said(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    root = tmp_path / "repo"
    root.mkdir()
    (root / "app.py").write_text("def serve():\n    return 1\n")
    git(root, "init", "-q")
    git(root, "add", "-A")
    git(root, "commit", "-qm", "c")
    with Engine(root, index_dir=str(tmp_path / "idx"), vectors=False, reranker="off") as eng:
        eng.index()
        assert eng.health()["branches"]["cochange"].startswith("ready")
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    calls = tmp_path / "calls"
    (bin_dir / "git").write_text(f"#!/bin/sh\necho \"$@\" >> {calls}\nexec sleep 60\n")
    (bin_dir / "git").chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.setattr(git_mod, "QUICK_TIMEOUT_S", 0.5)
    monkeypatch.setattr(git_mod, "_slow", {})
    (root / "app.py").write_text("def serve():\n    return 2\n")
    t = time.monotonic()
    with Engine(root, index_dir=str(tmp_path / "idx"), vectors=False, reranker="off") as eng:
        eng.index()
        assert eng.context("serve")["results"][0]["path"] == "app.py"
        status = eng.health()["branches"]["cochange"]
        assert "git did not answer within" in status, status
        # the history read before is kept: a git that is only slow is no history gone
        assert eng.meta.get_state("cochange").get("head")
    took = time.monotonic() - t
    asked = calls.read_text().splitlines()
    assert len(asked) == 1, asked  # one question timed out; none after it
    assert took < 5, took
