"""What a team sharing one snapshot is told (a team newcomer, session 42): the answers and health of an index loaded
and not yet compared with this checkout, a teammate's untracked files travelling in the snapshot, a snapshot of
another repository, `--out` into a folder that does not exist; and what `delphi eval --history` measures.

Real git repositories in tmp_path (the infra fixture committed), the real engine and snapshot files."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from delphi_ls import Engine
from delphi_ls.evaluation.runner import render
from delphi_ls.indexing.snapshot import SnapshotError
from tests.conftest import copy_fixture, git


def _repo(path: Path) -> Path:
    root = copy_fixture("infra", path)
    git(root, "init", "-q", "-b", "main")
    git(root, "add", "-A")
    git(root, "commit", "-q", "-m", "first")
    return root


def test_a_loaded_snapshot_says_it_is_unchecked_until_a_run_compares_it(tmp_path: Path) -> None:
    a = _repo(tmp_path / "alice")
    (a / "app" / "scratch_notes.py").write_text('DB_PASSWORD = "alice-only-9931"  # local notes\n')
    snap = tmp_path / "shared" / "repo.delphi-snapshot"
    snap.parent.mkdir()
    with Engine(a, index_dir=str(tmp_path / "idx_a")) as e:
        head = e.snapshot(snap)
    assert head["untracked"] == ["app/scratch_notes.py"]  # said at create: it travels

    b = tmp_path / "bob"
    shutil.copytree(a, b)
    (b / "app" / "scratch_notes.py").unlink()  # Bob never had it
    got = Engine.load_snapshot(snap, b, index_dir=str(tmp_path / "idx_b"))
    assert got is not None and got["note"] is None  # the same repository: its commit is here
    with Engine(b, index_dir=str(tmp_path / "idx_b")) as e:
        h = e.health()
        # Not every file "changed" (their mtimes are not known here): the one Bob lacks is gone, the rest unchecked.
        assert h["staleness"]["changed"] == 0 and h["staleness"]["deleted"] == 1, h["staleness"]
        assert h["staleness"]["unchecked"] > 0
        [p] = [p for p in h["problems"] if p["code"] == "snapshot_unchecked"]
        assert "repo.delphi-snapshot" in p["message"]
        ans = e.context("DB_PASSWORD local notes", limit=5)
        assert ans["query"]["snapshotUnchecked"] == "repo.delphi-snapshot"
        e.index()
        ans = e.context("DB_PASSWORD local notes", limit=5)
        assert "snapshotUnchecked" not in ans["query"]
        assert "app/scratch_notes.py" not in [r["path"] for r in ans["results"]]
        assert not any(p["code"] == "snapshot_unchecked" for p in e.health()["problems"])


def test_a_snapshot_of_another_repository_loads_with_a_warning(tmp_path: Path) -> None:
    a = _repo(tmp_path / "alice")
    snap = tmp_path / "a.delphi-snapshot"
    with Engine(a, index_dir=str(tmp_path / "idx_a")) as e:
        e.snapshot(snap)
    other = tmp_path / "other"
    other.mkdir()
    (other / "main.go").write_text("package main\n\nfunc main() {}\n")
    git(other, "init", "-q", "-b", "main")
    git(other, "add", "-A")
    git(other, "commit", "-q", "-m", "other")
    got = Engine.load_snapshot(snap, other, index_dir=str(tmp_path / "idx_o"))
    assert got is not None and "this repository has no such commit" in got["note"], got


def test_out_into_a_folder_that_does_not_exist_is_refused_before_any_work(tmp_path: Path) -> None:
    a = _repo(tmp_path / "alice")
    with Engine(a, index_dir=str(tmp_path / "idx_a")) as e:
        with pytest.raises(SnapshotError, match="does not exist"):
            e.snapshot(tmp_path / "nonexist" / "dir" / "s.delphi-snapshot")
        assert not e.is_indexed()  # refused before the index run
    assert not (tmp_path / "nonexist").exists()


def _result(n: int) -> dict:
    row = {"n": n, "mrr": 1.0, "d_mrr": 1.0, "ci_mrr": [1.0, 1.0], "wins": 1, "ties": 0, "losses": 0,
           **{f"r@{k}": 1.0 for k in (1, 5, 10, 20)}}
    return {"repository": "/r", "questions": n, "changes": n, "requested": n, "changesRead": n, "skipped": [],
            "summary": {"overall": {"engine": row, "grep": row}}, "baselines": ["grep"]}


def test_eval_prints_no_interval_for_a_handful_of_questions_and_says_history_is_off() -> None:
    few = render(_result(1))
    assert "[+1.000, +1.000]" not in few and "[too few questions]" in few
    assert "[+1.000, +1.000]" in render(_result(30))
    assert "without the history branches (commits, cochange)" in few


def test_a_manifest_cut_by_another_chunker_is_refused_whatever_its_header_says(tmp_path: Path) -> None:
    import sqlite3
    import tarfile

    from delphi_ls.indexing.pipeline import PARSER_VERSION
    from tests.test_snapshot import rewrite

    a = _repo(tmp_path / "alice")
    snap = tmp_path / "a.delphi-snapshot"
    with Engine(a, index_dir=str(tmp_path / "idx_a")) as e:
        e.snapshot(snap)
    with tarfile.open(snap, "r:gz") as tar:
        manifest = tar.extractfile("index/meta.sqlite").read()
    db_path = tmp_path / "m.sqlite"
    db_path.write_bytes(manifest)
    db = sqlite3.connect(db_path)
    db.execute("UPDATE state SET value=? WHERE key='parser_version'", (str(PARSER_VERSION - 1),))
    db.commit()
    db.close()
    forged = rewrite(snap, tmp_path / "forged.delphi-snapshot", replace={"index/meta.sqlite": db_path.read_bytes()})
    with pytest.raises(SnapshotError, match="cut by chunker version"):
        Engine.load_snapshot(forged, a, index_dir=str(tmp_path / "idx_b"))
