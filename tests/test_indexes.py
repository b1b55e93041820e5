"""`delphi indexes [--prune]`: the index folders in the user cache, and removing those of workspaces that are gone
(a newcomer's first twenty minutes, session 44: copies and deleted checkouts left 720 MB of indexes in the cache,
and nothing listed or removed them)."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from delphi_ls import Engine
from delphi_ls.cli import main
from delphi_ls.indexes import list_indexes, prune


def _ws(root: Path) -> Path:
    (root / "pkg").mkdir(parents=True)
    (root / "pkg" / "mod.py").write_text("def upload_retry(x):\n    return x + 1\n")
    return root


@pytest.fixture
def cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    return tmp_path / "cache" / "delphi"


def test_prune_removes_only_the_indexes_of_workspaces_that_are_gone_and_never_one_in_use(tmp_path: Path, cache: Path,
                                                                                          capsys):
    roots = {name: _ws(tmp_path / name) for name in ("kept", "gone", "open")}
    for root in roots.values():
        with Engine(root, vectors=False) as eng:
            eng.index()
    listed = {f.workspace: f for f in list_indexes()}
    assert set(listed) == {str(r.resolve()) for r in roots.values()} and all(f.present for f in listed.values())
    assert all(f.path.parent == cache and f.size > 0 and f.used > 0 for f in listed.values())
    shutil.rmtree(roots["gone"])
    with Engine(roots["open"], vectors=False) as held:  # a language server's, say: open while its folder goes
        shutil.rmtree(roots["open"])
        assert main(["indexes"]) == 0
        out = capsys.readouterr().out
        assert "(workspace gone)" in out and "2 of workspaces that are gone" in out and "--prune" in out
        removed, kept = prune()
        assert [f.workspace for f in removed] == [str(roots["gone"].resolve())]
        assert [(f.workspace, why.split(" (")[0]) for f, why in kept] == \
            [(str(roots["open"].resolve()), "it is open in a Delphi process")]
        assert not listed[str(roots["gone"].resolve())].path.exists()
        assert held.context("upload retry")["results"]  # the open one still answers
    assert {f.workspace for f in list_indexes()} == {str(roots["kept"].resolve()), str(roots["open"].resolve())}
    assert main(["indexes", "--prune"]) == 0
    assert "1 index folder removed" in capsys.readouterr().out
    assert [f.workspace for f in list_indexes()] == [str(roots["kept"].resolve())]
    with Engine(roots["kept"], vectors=False) as eng:  # the one kept is whole
        assert eng.context("upload retry")["results"][0]["path"] == "pkg/mod.py"


def test_a_workspace_whose_parent_folder_is_gone_too_is_not_pruned(tmp_path: Path, cache: Path):
    """An unmounted drive, a share that is down, a container's path seen from the host: the workspace's folder and
    the folder it was in are both missing, which says nothing of the workspace (review, session 44)."""
    root = _ws(tmp_path / "mnt" / "disk" / "proj")
    with Engine(root, vectors=False) as eng:
        eng.index()
    shutil.rmtree(tmp_path / "mnt" / "disk")  # the mount point's contents, the drive unplugged
    assert [f.present for f in list_indexes()] == [True]
    assert prune() == ([], [])


def test_a_workspace_that_is_gone_says_where_its_index_is_left(tmp_path: Path, cache: Path, capsys):
    root = _ws(tmp_path / "checkout")
    with Engine(root, vectors=False) as eng:
        eng.index()
        left = eng.index_dir
    shutil.rmtree(root)
    assert main(["health", str(root)]) == 2
    err = capsys.readouterr().err
    assert f"its index is still at {left}" in err and "delphi indexes --prune" in err
    with pytest.raises(FileNotFoundError, match="not found") as e:
        Engine(tmp_path / "never-indexed")
    assert "its index" not in str(e.value)
