"""An index folder inside the workspace (`--index-dir ws/.delphi`) never indexes itself (review of session 7:
tantivy's meta.json is text and changes at every commit, so every pass re-indexed it for ever)."""

from __future__ import annotations

from pathlib import Path

import pytest

from delphi_ls import Engine
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


def test_no_ignore_file_is_written_into_the_workspace_itself(tmp_path: Path):
    ws = copy_fixture("ledger", tmp_path / "ws")
    with Engine(ws, index_dir=str(ws), vectors=False):
        pass
    assert not (ws / ".gitignore").exists() or "Delphi's index" not in (ws / ".gitignore").read_text()
