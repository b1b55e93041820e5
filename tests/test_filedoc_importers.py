"""A save that changes a file's imports updates the file documents' importer words from the engine's
patched file graph, not from a whole graph resolved again (issue 18: the save path at 100k files), and
the words are those a fresh index writes."""

from __future__ import annotations

from pathlib import Path

import pytest

from delphi_ls import Engine
from delphi_ls.indexing import pipeline
from delphi_ls.indexing.graph import FileGraph
from delphi_ls.stores.filedocs import FileDocs
from tests.calls import Calls

FILES = {
    "cli/usage.py": "def render(spec):\n    return spec\n",
    "cli/options.py": "class Options:\n    pass\n",
    "cli/command.py": "from cli import usage\nfrom cli.options import Options\n\n\ndef run(a):\n    return usage.render(Options())\n",
    "cli/main.py": "from cli import usage\n\n\ndef main():\n    usage.render([])\n",
    "tests/test_usage.py": "from cli.usage import render\n\n\ndef test_render():\n    assert render(1) == 1\n",
}
MAIN = "cli/main.py"
EDITED = "from cli.options import Options\nfrom cli import command\n\n\ndef main():\n    command.run(Options())\n"


def _write(ws: Path, files: dict[str, str]) -> None:
    for rel, text in files.items():
        (ws / rel).parent.mkdir(parents=True, exist_ok=True)
        (ws / rel).write_text(text)


def _importers(eng: Engine) -> dict[str, str]:
    fd = FileDocs(eng.meta)
    out = {}
    for p in sorted(eng.view().files):
        doc = fd.get(p)
        out[p] = doc.importers if doc is not None else None
    return out


@pytest.mark.parametrize("view_in_memory", [True, False])
def test_a_save_that_changes_imports_writes_what_a_fresh_index_writes(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, view_in_memory: bool) -> None:
    ws = tmp_path / "ws"
    _write(ws, FILES)
    with Engine(ws, index_dir=str(tmp_path / "idx"), vectors=False) as eng:
        eng.index(vectors=False)
        before = _importers(eng)
        assert "main" in before["cli/usage.py"].split() and before["cli/command.py"] == ""
        if not view_in_memory:
            eng.invalidate()
        builds = Calls(FileGraph.build)
        monkeypatch.setattr(pipeline.FileGraph, "build", builds)
        (ws / MAIN).write_text(EDITED)
        eng.index(only=[MAIN], vectors=False)
        # the indexer's whole graph only when no view was in memory (the view then builds its own)
        assert builds.n == (0 if view_in_memory else 1)
        monkeypatch.undo()
        after = _importers(eng)
    assert "main" not in after["cli/usage.py"].split()
    assert "main" in after["cli/command.py"].split() and "main" in after["cli/options.py"].split()
    with Engine(ws, index_dir=str(tmp_path / "fresh"), vectors=False) as fresh:
        fresh.index(vectors=False)
        assert after == _importers(fresh)
