"""An index folder inside the workspace (`--index-dir ws/.delphi`) never indexes itself (review of session 7:
tantivy's meta.json is text and changes at every commit, so every pass re-indexed it for ever)."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from delphi_ls import Engine
from delphi_ls.engine import IndexFolderUnusable
from tests.conftest import copy_fixture


@pytest.mark.parametrize("store", ["tantivy", "whoosh"])
def test_index_folder_inside_the_workspace_is_not_indexed(tmp_path: Path, store: str):
    ws = copy_fixture("ledger", tmp_path / "ws")
    idx = ws / ".delphi-index"
    for run in range(3):
        with Engine(ws, index_dir=str(idx), vectors=False, lexical_store=store) as eng:
            rep = eng.index()
            paths = [p for p, _k, _n in eng.meta.files()]
        assert not [p for p in paths if p.startswith(".delphi-index/")], paths
        if run:
            assert rep.files_indexed == 0, f"run {run} re-indexed {rep.files_indexed} files"


def _two_workspaces(tmp_path: Path) -> tuple[Path, Path]:
    """The ledger fixture and a one-file workspace that shares none of its files."""
    b = tmp_path / "b"
    b.mkdir()
    (b / "other.py").write_text("def other_fn():\n    return 1\n")
    return copy_fixture("ledger", tmp_path / "a"), b


@pytest.mark.parametrize("where", ["the workspace", "above it"])
def test_the_workspace_or_a_folder_above_it_is_refused_as_index_folder(tmp_path: Path, where: str):
    """`--index-dir ws` was accepted: the index indexed its own files at every run (its skipped list grew each
    time) and wrote into the workspace (a newcomer, session 29)."""
    ws = copy_fixture("ledger", tmp_path / "ws")
    before = sorted(p.name for p in ws.iterdir())
    idx = ws if where == "the workspace" else tmp_path
    with pytest.raises(IndexFolderUnusable, match="is the workspace .* or a folder above it"):
        Engine(ws, index_dir=str(idx), vectors=False)
    assert sorted(p.name for p in ws.iterdir()) == before  # nothing written


def test_a_folder_holding_other_things_is_refused_as_index_folder(tmp_path: Path):
    """`--index-dir other-project` filled another project with index files and a `.gitignore` of `*` that hid its
    untracked files from git; `--index-dir ~` did the same to the home folder (a newcomer, session 29)."""
    ws = copy_fixture("ledger", tmp_path / "ws")
    other = tmp_path / "other"
    other.mkdir()
    (other / "lib.py").write_text("def other_fn():\n    pass\n")
    with pytest.raises(IndexFolderUnusable, match="already holds other files .lib.py. and is not a Delphi index"):
        Engine(ws, index_dir=str(other), vectors=False)
    assert sorted(p.name for p in other.iterdir()) == ["lib.py"]
    empty = tmp_path / "empty"
    empty.mkdir()
    with Engine(ws, index_dir=str(empty), vectors=False) as eng:  # an empty folder, and then its own index, are fine
        eng.index()
    with Engine(ws, index_dir=str(empty), vectors=False) as eng:
        assert eng.counts()["files"] > 0


def test_one_index_folder_serves_one_workspace(tmp_path: Path):
    """One `index_dir` for every workspace: each one opened wiped and re-indexed the other's index without a word
    (a newcomer, session 29). Refused while the other workspace is there; taken over once it is gone (moved)."""
    a, b = _two_workspaces(tmp_path)
    idx = tmp_path / "idx"
    with Engine(a, index_dir=str(idx), vectors=False) as eng:
        eng.index()
        files = eng.counts()["files"]
    with pytest.raises(IndexFolderUnusable, match=f"holds the index of another workspace, {a.resolve()}"):
        Engine(b, index_dir=str(idx), vectors=False)
    with Engine(a, index_dir=str(idx), vectors=False) as eng:  # untouched
        assert eng.counts()["files"] == files and eng.index().files_indexed == 0
    shutil.copytree(a, tmp_path / "a-copy")  # a copy of the workspace with a copy of its index: taken over
    shutil.copytree(idx, tmp_path / "idx-copy")
    with Engine(tmp_path / "a-copy", index_dir=str(tmp_path / "idx-copy"), vectors=False) as eng:
        assert eng.index().files_indexed == 0
    a.rename(tmp_path / "a-moved")
    with Engine(tmp_path / "a-moved", index_dir=str(idx), vectors=False) as eng:
        assert eng.index().files_indexed == 0  # the moved workspace keeps its index
    with pytest.raises(IndexFolderUnusable, match="a-moved"):  # its workspace lives on, moved: refused again
        Engine(b, index_dir=str(idx), vectors=False)


def test_a_copied_index_taken_over_on_purpose_and_a_snapshot_load_over_another_s(tmp_path: Path):
    """The benchmark seeds a commit's index with a copy of the previous commit's, whose folder is still there: it
    says so (take_over_index) and the copy opens. A snapshot load into another workspace's index folder is
    refused as an open is (review, session 29)."""
    from delphi_ls.engine import take_over_index

    a, b = _two_workspaces(tmp_path)
    idx = tmp_path / "idx"
    with Engine(a, index_dir=str(idx), vectors=False) as eng:
        eng.index()
        eng.snapshot(tmp_path / "a.snap")
    shutil.copytree(idx, tmp_path / "seed")
    take_over_index(tmp_path / "seed", b)
    with Engine(b, index_dir=str(tmp_path / "seed"), vectors=False) as eng:
        eng.index()
        assert [p for p, _k, _n in eng.meta.files()] == ["other.py"]
    with pytest.raises(IndexFolderUnusable, match="holds the index of another workspace"):
        Engine.load_snapshot(tmp_path / "a.snap", b,
                             index_dir=str(idx), vectors=False)
