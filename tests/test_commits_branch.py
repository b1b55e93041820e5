"""The commits branch: a question matched against the history's commit messages ranks the files those
commits changed, with the commit named in the why-line; off (and said so) outside git."""

from __future__ import annotations

from pathlib import Path

from delphi_ls import Engine
from delphi_ls.indexing.cochange import change_history
from delphi_ls.retrieval.branches.commits import MessageIndex

from .conftest import git
from .test_cli_newcomer import delphi

QUESTION = "Avoid starvation under heavy load"  # no file of the workspace says any of these words


def _commit(ws: Path, path: str, message: str, n: int) -> None:
    p = ws / path
    p.write_text(p.read_text() + (f"\n// {n}\n" if path.endswith(".js") else f"\n# {n}\n"))
    git(ws, "commit", "-qam", message)


def _history(ws: Path) -> None:
    git(ws, "init", "-q")
    git(ws, "add", "-A")
    git(ws, "commit", "-qm", "initial")
    edits = [("shipyard/scheduler.py", "Fix starvation under heavy load\n\nFairness first."),
             ("shipyard/retry.py", "Cap the backoff delay"),
             ("web/src/format.js", "Format durations in hours"),
             ("shipyard/scheduler.py", "Tidy imports")]
    for i, (path, message) in enumerate(edits):
        _commit(ws, path, message, i)


def _found_by_commits(res: dict) -> set[str]:
    return {r["path"] for r in res["results"] if "commits" in r["branches"]}


def test_past_commit_messages_rank_the_files_they_changed(workspace: Path, tmp_path: Path):
    with Engine(workspace, index_dir=str(tmp_path / "nogit"), reranker="off") as eng:
        eng.index(vectors=False)
        assert eng.health(check_staleness=False)["branches"]["commits"].startswith("off: not a git repository")
        assert _found_by_commits(eng.context(QUESTION)) == set()
    _history(workspace)
    with Engine(workspace, index_dir=str(tmp_path / "git"), reranker="off") as eng:
        eng.index(vectors=False)
        assert eng.health(check_staleness=False)["branches"]["commits"].startswith("ready: 5 commits")
        res = eng.context(QUESTION)
        assert _found_by_commits(res) == {"shipyard/scheduler.py"}  # the only file a matching commit changed
        hit = next(r for r in res["results"] if r["path"] == "shipyard/scheduler.py")
        assert hit["branches"]["commits"] == 1
        assert "bm25" not in hit["branches"]  # found by the history alone
        assert "commits #1: changed by a past commit like this: 'Fix starvation under heavy load'" in hit["why"]
        # A new commit is read on the next index, and the same engine answers from it (no stale messages).
        _commit(workspace, "shipyard/retry.py", "Retry loop: no starvation of slow jobs", 9)
        eng.index(vectors=False)
        assert _found_by_commits(eng.context(QUESTION)) == {"shipyard/scheduler.py", "shipyard/retry.py"}


def test_a_history_read_by_an_older_version_is_not_ready(workspace: Path, tmp_path: Path):
    """An index whose history was read before messages were kept says so until the next index reads it again."""
    from delphi_ls.indexing.cochange import COCHANGE_VERSION

    _history(workspace)
    with Engine(workspace, index_dir=str(tmp_path / "idx"), reranker="off") as eng:
        eng.index(vectors=False)
        eng.meta.set_cochange({}, "abc", 5, COCHANGE_VERSION - 1, {})
    with Engine(workspace, index_dir=str(tmp_path / "idx"), reranker="off") as eng:
        assert eng.health(check_staleness=False)["branches"]["commits"] == "not computed yet (runs with indexing)"
        eng.index(vectors=False)
        assert eng.health(check_staleness=False)["branches"]["commits"].startswith("ready: 5 commits")


def test_a_commit_subject_cannot_drive_the_terminal(workspace: Path, tmp_path: Path):
    """A cloned repository's commit subject reaches the why-line as text: escape sequences are shown, not run."""
    _history(workspace)
    _commit(workspace, "shipyard/retry.py", "Starvation \x1b]0;pwned\x07\x1b[31mfixed", 7)
    out = delphi("context", str(workspace), QUESTION, "--index-dir", str(tmp_path / "cli"), "--no-vectors")
    assert out.returncode == 0, out.stderr
    assert "\x1b" not in out.stdout and "\x07" not in out.stdout
    assert "\\x1b]0;pwned" in out.stdout


def test_history_keeps_messages_with_their_files(tmp_path: Path):
    """Messages come back whole (subject and body) with the indexed files each commit changed; a commit
    touching more than ``max_files`` indexed files (a formatting sweep) gives no message; paths outside
    ASCII or with a space are matched as written (no quoting)."""
    root = tmp_path / "repo"
    root.mkdir()
    git(root, "init", "-q")
    names = [f"m{i}.py" for i in range(5)] + ["café.py", "with space.py"]
    for n in names:
        (root / n).write_text("0\n")
    git(root, "add", "-A")
    git(root, "commit", "-qm", "sweep: reformat everything")
    (root / "café.py").write_text("1\n")
    (root / "with space.py").write_text("1\n")
    git(root, "commit", "-qam", "Brew the café's coffee stronger\n\nBody line with @@commit in it.")
    h = change_history(root, set(names), max_files=4)
    assert h.commits == 2
    assert h.messages == [("Brew the café's coffee stronger\n\nBody line with @@commit in it.",
                           ["café.py", "with space.py"])]


def test_message_index_ranks_by_bm25():
    index = MessageIndex.build([("Fix worker starvation", ["a.py"]), ("Cap backoff delay", ["b.py"]),
                                ("Starvation again: starvation in workers", ["c.py"])])
    # Both words beat one word twice: "worker" is rarer than "starvation" here.
    assert [i for i, _ in index.search(["starvation", "worker"])] == [0, 2]
    assert [i for i, _ in index.search(["backoff"])] == [1]
    assert index.subjects == ["Fix worker starvation", "Cap backoff delay", "Starvation again: starvation in workers"]


def test_stored_messages_keep_paths_with_newlines(tmp_path: Path):
    """A path may hold a newline (git reads it whole with -z); the manifest gives it back whole."""
    from delphi_ls.stores.meta import MetaStore

    meta = MetaStore(tmp_path / "meta.sqlite")
    meta.set_cochange({}, "abc", 1, 5, {}, [("Fix odd names", ["a\nb.py", "c.py"])])
    assert meta.commit_messages() == [("Fix odd names", ["a\nb.py", "c.py"])]


def test_a_secret_in_a_commit_message_is_in_no_store_and_no_answer(workspace: Path, tmp_path: Path):
    """A key pasted into a commit message was stored in the manifest and shown in the commits branch's why-line
    (a newcomer, session 36): messages are redacted as a file's text is."""
    key_id, secret = "AKIAZ7QW4XJ2LMNB5PRT", "q8Wm3Zx7Lp2Vn5Rt9Ys4Bk6Hd1Fg0Jc8Ea3Ku7Ni"
    _history(workspace)
    _commit(workspace, "shipyard/retry.py", f"Rotate the uploader's credentials {key_id} {secret} zebra quokka", 7)
    assert change_history(workspace, {"shipyard/retry.py"}).messages[0][0] == (
        "Rotate the uploader's credentials [redacted AWS access key id] [redacted AWS secret access key] "
        "zebra quokka")
    with Engine(workspace, index_dir=str(tmp_path / "idx"), reranker="off") as eng:
        eng.index(vectors=False)
        res = eng.context("zebra quokka credentials")
        hit = next(r for r in res["results"] if r["path"] == "shipyard/retry.py")
        assert "[redacted AWS access key id]" in hit["why"]
        assert key_id not in str(res) and secret not in str(res)
    for p in (tmp_path / "idx").rglob("*"):
        if p.is_file():
            assert key_id.encode() not in p.read_bytes() and secret.encode() not in p.read_bytes(), p


def test_messages_stored_before_redaction_are_redacted_when_read(workspace: Path, tmp_path: Path):
    """An index whose history was read by an older Delphi holds its messages as written until its next run reads
    the history again (after the run's lexical pass): answers meanwhile show them redacted (a review, session 36)."""
    key_id = "AKIAZ7QW4XJ2LMNB5PRT"
    _history(workspace)
    with Engine(workspace, index_dir=str(tmp_path / "idx"), reranker="off") as eng:
        eng.index(vectors=False)
        eng.meta.set_cochange({}, "old-head", 1, 5, {}, [(f"Rotate credentials {key_id} zebra quokka",
                                                          ["shipyard/retry.py"])])
        res = eng.context("zebra quokka credentials")
        hit = next(r for r in res["results"] if r["path"] == "shipyard/retry.py")
        assert "[redacted AWS access key id]" in hit["why"] and key_id not in str(res)
