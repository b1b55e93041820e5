"""A file git tracks that a later `.gitignore` matches: not indexed (the ignore rules win, as in ripgrep), and
listed by a full health report instead of "0 skipped" (a hostile newcomer, session 28). Real git, real engine."""

from __future__ import annotations

import subprocess
from pathlib import Path

from delphi_ls.engine import Engine
from tests.conftest import git as _git


def _committed(ws: Path, files: dict[str, str]) -> Path:
    """A git repository at ``ws`` holding ``files`` in one commit."""
    ws.mkdir(parents=True, exist_ok=True)
    _git(ws, "init", "-q")
    for rel, text in files.items():
        (ws / rel).parent.mkdir(parents=True, exist_ok=True)
        (ws / rel).write_text(text)
    _git(ws, "add", "-A")
    _git(ws, "commit", "-qm", "c")
    return ws


def test_tracked_files_the_ignore_rules_exclude_are_listed_not_indexed(tmp_path: Path) -> None:
    ws = _committed(tmp_path / "ws", {"build/keep.py": "def tracked_build_helper():\n    return 1\n",
                                      "main.py": "def main_entry():\n    return 2\n",
                                      "forced.log.py": "def forced_in():\n    return 3\n"})
    (ws / ".gitignore").write_text("build/\n*.log.py\n")
    (ws / "other.log.py").write_text("def untracked_ignored():\n    return 4\n")  # ignored, never tracked: not listed
    _git(ws, "add", ".gitignore")
    _git(ws, "commit", "-qm", "ignore")
    with Engine(ws, index_dir=tmp_path / "idx", vectors=False) as eng:
        eng.index()
        assert eng.symbols("tracked_build_helper") == []
        assert [r["path"] for r in eng.symbols("main_entry")] == ["main.py"]
        h = eng.health()
        assert h["trackedButIgnored"] == {"count": 2, "paths": ["build/keep.py", "forced.log.py"]}
        notes = [p for p in h["problems"] if p["code"] == "tracked_but_ignored"]
        assert len(notes) == 1 and notes[0]["severity"] == "info" and "build/keep.py" in notes[0]["message"]
        assert eng.health(full=False)["trackedButIgnored"] is None  # a status poll does not run git


def test_a_folder_without_git_lists_nothing(tmp_path: Path) -> None:
    ws = tmp_path / "plain"
    ws.mkdir()
    (ws / "a.py").write_text("x = 1\n")
    with Engine(ws, index_dir=tmp_path / "idx", vectors=False) as eng:
        eng.index()
        assert eng.health()["trackedButIgnored"] is None


def test_history_off_is_said_in_git_s_words_when_the_repository_cannot_be_read(tmp_path: Path) -> None:
    """A `.git` file naming a folder that is not there read "no commits yet" (a newcomer, session 29)."""
    from delphi_ls.engine import no_history

    empty = tmp_path / "empty"
    empty.mkdir()
    _git(empty, "init", "-q")
    assert no_history(empty) == "off: the git repository has no commits yet (no history to read)"
    dangling = tmp_path / "dangling"
    dangling.mkdir()
    (dangling / ".git").write_text("gitdir: /nonexistent/x\n")
    assert no_history(dangling).startswith("off: git cannot read this repository: fatal: not a git repository")
    assert no_history(tmp_path) == "off: not a git repository (no history to read)"


def test_a_bare_repository_or_a_git_folder_is_refused_as_workspace(tmp_path: Path) -> None:
    """`delphi index bare.git` indexed hook samples, `config` and `description` as a tree (a newcomer, session 29)."""
    import pytest

    from delphi_ls.workspace.roots import WorkspaceRefused

    src = _committed(tmp_path / "src", {"a.py": "x = 1\n"})
    subprocess.run(["git", "clone", "-q", "--bare", str(src), str(tmp_path / "bare.git")], check=True)
    for folder in (tmp_path / "bare.git", src / ".git"):
        with pytest.raises(WorkspaceRefused, match="it is a git folder"):
            Engine(folder, index_dir=tmp_path / "idx", vectors=False)
    with Engine(src, index_dir=tmp_path / "idx2", vectors=False) as eng:  # its checkout is fine
        eng.index()
        assert eng.counts()["files"] == 1


def test_a_git_log_that_fails_is_said_by_the_next_process_too(tmp_path: Path) -> None:
    """A damaged object store: the run's `git log` failed, and `delphi health` (another process) said "not
    computed yet" after every run (a newcomer, session 29)."""
    import shutil

    ws = _committed(tmp_path / "ws", {"a.py": "x = 1\n"})
    for obj in (ws / ".git" / "objects").iterdir():
        if len(obj.name) == 2:
            shutil.rmtree(obj)
    with Engine(ws, index_dir=tmp_path / "idx", vectors=False) as eng:
        eng.index()
        assert eng.cochange_status.startswith("error: git log failed")
    with Engine(ws, index_dir=tmp_path / "idx", vectors=False) as eng:  # the next process
        assert eng.cochange_status.startswith("error: git log failed") and "(as of the last index)" in eng.cochange_status
        assert any(p["code"] == "cochange" for p in eng.health(full=False)["problems"])


def test_an_empty_index_dir_flag_is_an_error(tmp_path: Path, capsys) -> None:
    from delphi_ls.cli import main

    (tmp_path / "a.py").write_text("x = 1\n")
    assert main(["index", str(tmp_path), "--index-dir", "", "--no-vectors"]) == 2
    assert "index_dir" in capsys.readouterr().err
