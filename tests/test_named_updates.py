"""Updates of named paths (a save, a watcher's event) on a real workspace: a named folder that was
created or renamed into place is indexed, and two processes that disagree on the filedoc branch leave
its documents whole (review findings M3 and M6 of session 6)."""

from __future__ import annotations

from pathlib import Path

from delphi_ls import Engine
from delphi_ls.stores.filedocs import FileDocs


def _write(root: Path, files: dict[str, str]) -> None:
    for rel, text in files.items():
        p = root / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(text)


def _paths(eng: Engine) -> set[str]:
    return {p for p, _k, _n in eng.files()}


def test_a_named_folder_created_or_renamed_into_place_is_indexed(tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    _write(ws, {"src/main.py": "def main():\n    return 1\n", "src/util.py": "def helper():\n    return 2\n"})
    eng = Engine(ws, index_dir=str(tmp_path / "idx"), vectors=False)
    try:
        eng.index()
        _write(ws, {"pkg2/walrus.py": "def walrus_tusk_length():\n    return 3\n"})
        rep = eng.index(only=["pkg2"])
        assert rep.files_indexed == 1 and "pkg2/walrus.py" in _paths(eng)
        hits = [r["path"] for r in eng.context("walrus tusk length", limit=3)["results"]]
        assert hits[:1] == ["pkg2/walrus.py"]
        (ws / "src").rename(ws / "lib")
        rep = eng.index(only=["src", "lib"])
        assert rep.files_deleted == 2 and rep.files_indexed == 2
        assert _paths(eng) == {"lib/main.py", "lib/util.py", "pkg2/walrus.py"}
    finally:
        eng.close()


def test_a_process_with_the_filedoc_branch_off_does_not_empty_the_documents_of_one_with_it_on(
        tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    _write(ws, {"a.py": "def alpha():\n    return 1\n", "b.py": "import a\n", "c.py": "def gamma():\n    return 3\n"})
    a = Engine(ws, index_dir=str(tmp_path / "idx"), vectors=False, branch_weights={"filedoc": 0.6})
    try:
        a.index()
        assert FileDocs(a.meta).count() == 3
        # An agent's one-shot `delphi context` with the default settings (branch off) catches up: a save
        # (named) and a new file (a full run, which drops the documents this process does not keep).
        b = Engine(ws, index_dir=str(tmp_path / "idx"), vectors=False)
        try:
            _write(ws, {"c.py": "def gamma():\n    return 33\n"})
            b.index(only=["c.py"])
            _write(ws, {"d.py": "def delta():\n    return 4\n"})
            b.index()
        finally:
            b.close()
        # The server's next save: every file's document is there again, not the saved file's alone.
        _write(ws, {"a.py": "def alpha():\n    return 11\n"})
        a.index(only=["a.py"])
        assert FileDocs(a.meta).count() == 4
    finally:
        a.close()
