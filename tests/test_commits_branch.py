"""The commits branch: a question matched against the history's commit messages ranks the files those
commits changed, with the commit named in the why-line; off (and said so) outside git."""

from __future__ import annotations

from pathlib import Path

from delphi_ls import Engine
from delphi_ls.indexing.cochange import change_history
from delphi_ls.retrieval.branches.commits import MessageIndex

from .conftest import git

QUESTION = "Avoid starvation under heavy load"  # no file of the workspace says any of these words


def _history(ws: Path) -> None:
    git(ws, "init", "-q")
    git(ws, "add", "-A")
    git(ws, "commit", "-qm", "initial")
    edits = [("shipyard/scheduler.py", "Fix starvation under heavy load\n\nFairness first."),
             ("shipyard/retry.py", "Cap the backoff delay"),
             ("web/src/format.js", "Format durations in hours"),
             ("shipyard/scheduler.py", "Tidy imports")]
    for i, (path, message) in enumerate(edits):
        p = ws / path
        p.write_text(p.read_text() + f"\n// {i}\n" if path.endswith(".js") else p.read_text() + f"\n# {i}\n")
        git(ws, "commit", "-qam", message)


def test_past_commit_messages_rank_the_files_they_changed(workspace: Path, tmp_path: Path):
    with Engine(workspace, index_dir=str(tmp_path / "nogit"), reranker="off") as eng:
        eng.index(vectors=False)
        assert eng.health(check_staleness=False)["branches"]["commits"].startswith("off: not a git repository")
        res = eng.context(QUESTION)
        assert all("commits" not in r["branches"] for r in res["results"])
    _history(workspace)
    with Engine(workspace, index_dir=str(tmp_path / "git"), reranker="off") as eng:
        eng.index(vectors=False)
        assert eng.health(check_staleness=False)["branches"]["commits"].startswith("ready: 5 commits")
        res = eng.context(QUESTION)
        hit = next(r for r in res["results"] if r["path"] == "shipyard/scheduler.py")
        assert hit["branches"]["commits"] == 1
        assert "bm25" not in hit["branches"]  # found by the history alone
        assert "commits #1: changed by a past commit like this: 'Fix starvation under heavy load'" in hit["why"]
        # A file no matching commit changed gets nothing from the branch.
        assert all("commits" not in r["branches"] for r in res["results"] if r["path"] == "shipyard/retry.py")


def test_history_keeps_messages_with_their_files(tmp_path: Path):
    """Messages come back whole (subject and body) with the indexed files each commit changed; a commit
    touching more than ``max_files`` indexed files (a formatting sweep) gives no message; a path outside
    ASCII is matched as git writes it (no quoting)."""
    root = tmp_path / "repo"
    root.mkdir()
    git(root, "init", "-q")
    names = [f"m{i}.py" for i in range(5)] + ["café.py"]
    for n in names:
        (root / n).write_text("0\n")
    git(root, "add", "-A")
    git(root, "commit", "-qm", "sweep: reformat everything")
    (root / "café.py").write_text("1\n")
    git(root, "commit", "-qam", "Brew the café's coffee stronger\n\nBody line with @@commit in it.")
    h = change_history(root, set(names), max_files=4)
    assert h.commits == 2
    assert h.messages == [("Brew the café's coffee stronger\n\nBody line with @@commit in it.", ["café.py"])]


def test_message_index_ranks_by_bm25():
    index = MessageIndex.build([("Fix worker starvation", ["a.py"]), ("Cap backoff delay", ["b.py"]),
                                ("Starvation again: starvation in workers", ["c.py"])])
    found = index.search(["starvation", "worker"])
    assert [i for i, _ in found] == [0, 2] or [i for i, _ in found] == [2, 0]
    assert 1 not in {i for i, _ in found}
    assert index.subjects == ["Fix worker starvation", "Cap backoff delay", "Starvation again: starvation in workers"]
