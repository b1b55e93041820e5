"""Mining a real git history into samples, and `delphi eval --history` on it."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from delphi_ls.cli import main
from delphi_ls.evaluation.history import HistoryError, checkout, git_dir_of, mine
from tests.conftest import git


def _append(path: Path, text: str) -> None:
    path.write_text(path.read_text() + text)


@pytest.fixture
def repo(workspace: Path) -> Path:
    git(workspace, "init", "-q", "-b", "main")
    git(workspace, "add", "-A")
    git(workspace, "commit", "-qm", "initial")
    _append(workspace / "shipyard/retry.py", "\n\ndef jitter(x):\n    return x\n")
    _append(workspace / "tests/test_retry.py", "\n\ndef test_jitter():\n    assert jitter(1) == 1\n")
    git(workspace, "commit", "-qam", "Add jitter to the retry backoff (#12)\n\nUploads retried in lockstep; spread them.")
    _append(workspace / "shipyard/scheduler.py", "\n# priority ties break by age\n")
    git(workspace, "commit", "-qam", "Break scheduler priority ties by job age")
    _append(workspace / "CHANGELOG.md", "\n- 1.3.0\n")
    git(workspace, "commit", "-qam", "Bump version to 1.3.0")  # a release bump: skipped
    git(workspace, "-c", "user.name=dependabot[bot]", "commit", "-q", "--allow-empty", "-m", "chore: deps")
    return workspace


def test_mine_turns_changes_into_samples(repo: Path) -> None:
    samples = mine(repo, 10, repo="acme/shipyard")
    by_task = {(s["task_type"], s["query"]["pr_title"]): s for s in samples}
    jitter_code = by_task[("intent2code", "Add jitter to the retry backoff")]  # "(#12)" stripped
    assert jitter_code["gold"]["root_cause_files"] == ["shipyard/retry.py"]
    assert "lockstep" in jitter_code["query"]["pr_body"]
    jitter_test = by_task[("code2test", "Add jitter to the retry backoff")]
    assert jitter_test["query"]["changed_file"] == "shipyard/retry.py"
    assert jitter_test["gold"]["related_tests"] == ["tests/test_retry.py"]
    assert ("intent2code", "Break scheduler priority ties by job age") in by_task
    assert ("code2test", "Break scheduler priority ties by job age") not in by_task  # no test changed
    assert not any("1.3.0" in t or "deps" in t for _k, t in by_task)
    assert samples == sorted(samples, key=lambda s: (s["time"], s["id"]))


def test_checkout_writes_the_base_tree_without_touching_the_repo(repo: Path, tmp_path: Path) -> None:
    sample = next(s for s in mine(repo, 10) if s["task_type"] == "code2test")
    dest = tmp_path / "tree"
    assert checkout(git_dir_of(repo), sample["base_commit"], dest) == []
    assert "def jitter" not in (dest / "shipyard/retry.py").read_text()  # the tree before the change
    assert "def jitter" in (repo / "shipyard/retry.py").read_text()
    status = subprocess.run(["git", "-C", str(repo), "status", "--porcelain"], capture_output=True, text=True).stdout
    assert status == ""


def test_not_a_repository_is_a_clear_error(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(HistoryError, match="not a git repository"):
        git_dir_of(tmp_path)
    assert main(["eval", "--history", str(tmp_path)]) == 2
    assert "not a git repository" in capsys.readouterr().err


def test_eval_history_scores_engine_and_baselines(repo: Path, tmp_path: Path,
                                                  capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "eval.json"
    assert main(["eval", "--history", str(repo), "-n", "10", "--out", str(out), "--work", str(tmp_path / "w")]) == 0
    said = capsys.readouterr()
    printed = said.out
    assert "| overall | engine |" in printed and "| overall | heuristic |" in printed
    result = json.loads(out.read_text())
    assert result["questions"] == 3 and result["changes"] == 2
    code2test = next(r for r in result["records"] if r["task"] == "code2test")
    # The test named after the anchor answers "which tests cover this change?" first.
    assert code2test["systems"]["engine"]["mrr"] == 1.0
    # What was ranked is kept, and the progress names the change beside the parent it is asked at (session 26).
    assert code2test["systems"]["engine"]["top"][0] in code2test["gold"]
    assert f"change {code2test['commit'][:12]} asked at its parent" in said.err + said.out
    assert set(result["summary"]["overall"]) == {"engine", "bm25", "grep", "heuristic"}


def test_a_work_folder_that_is_not_delphi_s_is_refused_before_anything_is_written(
        repo: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """`--work` on the repository (or any folder with a `tree/`) had that folder emptied for every base commit,
    uncommitted files lost, exit 0 (a newcomer, session 29). `--out` naming a folder lost the run's results."""
    (repo / "tree").mkdir()
    (repo / "tree" / "draft.txt").write_text("uncommitted work\n")
    mine_ = tmp_path / "w"
    (mine_ / "tree").mkdir(parents=True)
    (mine_ / "tree" / "mine.txt").write_text("precious\n")
    a_file = tmp_path / "afile"
    a_file.write_text("x")
    for work, said in ((repo, "is inside the repository"), (repo / "scratch", "is inside the repository"),
                       (mine_, "already holds other files"), (a_file, "is not a folder")):
        assert main(["eval", "--history", str(repo), "-n", "1", "--work", str(work), "--baselines", ""]) == 2
        err = capsys.readouterr().err
        assert f"--work: {work}" in err and said in err, err
    assert (repo / "tree" / "draft.txt").read_text() == "uncommitted work\n" and not (repo / "scratch").exists()
    assert (mine_ / "tree" / "mine.txt").read_text() == "precious\n"
    assert main(["eval", "--history", str(repo), "-n", "1", "--out", str(tmp_path), "--baselines", ""]) == 2
    assert f"--out: {tmp_path} is a folder" in capsys.readouterr().err
    fresh = tmp_path / "fresh"  # a new folder is made Delphi's, and can be given again
    for _ in range(2):
        assert main(["eval", "--history", str(repo), "-n", "1", "--work", str(fresh), "--baselines", ""]) == 0
    assert (fresh / ".delphi-eval").is_file() and (fresh / "tree").is_dir()


def test_a_shallow_clone_is_said_to_be_shallow(repo: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A `--depth` clone's oldest commit read as "the repository's first commit" and its end as "the history has no
    more changes" (a newcomer, session 29)."""
    shallow = tmp_path / "shallow"
    subprocess.run(["git", "clone", "-q", "--depth", "4", repo.resolve().as_uri(), str(shallow)], check=True,
                   capture_output=True)
    assert main(["eval", "--history", str(shallow), "-n", "5", "--baselines", ""]) == 0
    out = capsys.readouterr().out
    assert "the oldest commit of a shallow clone" in out and "the clone is shallow" in out, out
    assert "the repository's first commit" not in out
