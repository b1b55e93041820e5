"""Issue 18: the view's definitions are read from the manifest for the names a question holds
(retrieval/context.py, SymbolTable), not built, saved and loaded for every name up front.

Real workspace, real tree-sitter, real manifest. What must hold: every lookup gives what the whole-table
build gave (the same definitions in the same order, case-insensitively, non-ASCII letters folded too);
definitions of files the view does not list are not given; the saved view carries none of them and a
loaded view answers the same; the workspace symbol search gives what it gave when it walked every name.
"""

from __future__ import annotations

import pickle
from pathlib import Path

from delphi_ls import Engine
from delphi_ls.core import SymbolRecord
from delphi_ls.engine import _fuzzy
from delphi_ls.retrieval.context import IndexView, SymbolTable
from tests.conftest import build_workspace

EXTRA = {
    "pkg/units.py": "class Ölwert:\n    def Größe(self):\n        return 1\n\n\ndef retryPolicyFor(x):\n    return x\n",
    "pkg/Mixed.java": "package pkg;\npublic class RetryPolicyFor {\n  public int DELAY_FOR() { return 1; }\n}\n",
}


def _workspace(tmp_path: Path) -> Path:
    ws = build_workspace(tmp_path / "ws")
    for rel, text in EXTRA.items():
        (ws / rel).parent.mkdir(parents=True, exist_ok=True)
        (ws / rel).write_text(text)
    return ws


def _whole_table(eng: Engine, files: dict[str, str]) -> dict[str, list[SymbolRecord]]:
    """What the view held before: every definition by lower-cased name, in row order."""
    out: dict[str, list[SymbolRecord]] = {}
    for r in eng.meta.all_symbols():
        if r.path in files:
            out.setdefault(r.name.lower(), []).append(r)
    return out


def test_lookups_give_what_the_whole_table_gave(tmp_path: Path):
    ws = _workspace(tmp_path)
    with Engine(ws, index_dir=str(tmp_path / "idx"), vectors=False) as eng:
        eng.index(vectors=False)
        view = eng.view()
        whole = _whole_table(eng, view.files)
        assert len(whole) > 20 and "ölwert" in whole and "größe" in whole
        assert len(whole["retrypolicyfor"]) == 2  # a Python function and a Java class, one key
        table = SymbolTable(eng.meta, view.files)
        table.fetch(list(whole)[: len(whole) // 2])  # half in one read, the rest one by one
        for name, recs in whole.items():
            assert table.get(name) == recs, name
            assert name in table
        for missing in ("no_such_name", "ölwertx", ""):
            assert table.get(missing) is None and missing not in table
        assert dict(table.items()) == whole and sorted(table.names()) == sorted(whole)
        # Only the view's files: a definition the manifest holds for a file the view does not list is not given.
        narrower = SymbolTable(eng.meta, {p: k for p, k in view.files.items() if p != "pkg/units.py"})
        assert narrower.get("ölwert") is None and [r.path for r in narrower.get("retrypolicyfor")] == ["pkg/Mixed.java"]


def test_the_saved_view_holds_no_definitions_and_a_loaded_one_answers_the_same(tmp_path: Path):
    ws = _workspace(tmp_path)
    with Engine(ws, index_dir=str(tmp_path / "idx"), vectors=False) as eng:
        eng.index(vectors=False)
        built = IndexView.build(eng.meta)
        built.symbols.fetch(["retrypolicy", "delay_for", "ölwert"])  # looked up before the save
        blob = pickle.dumps(built)
        assert b"delay_for" not in blob and "Ölwert".encode() not in blob
        loaded = pickle.loads(blob).bind(eng.meta)
        whole = _whole_table(eng, built.files)
        assert all(loaded.symbols.get(n) == recs for n, recs in whole.items())
        assert loaded.symbols == built.symbols


def test_workspace_symbol_search_gives_what_walking_every_name_gave(tmp_path: Path):
    ws = _workspace(tmp_path)
    with Engine(ws, index_dir=str(tmp_path / "idx"), vectors=False) as eng:
        eng.index(vectors=False)
        whole = _whole_table(eng, eng.view().files)
        for query in ("retry", "RetryPolicy", "dlf", "größe", "sched", "zzz"):
            ql = query.lower().strip()
            ref: list[tuple[float, SymbolRecord]] = []
            for name, defs in whole.items():  # the search as it was, over the whole table
                score = _fuzzy(ql, name)
                if score is not None:
                    ref += [(score + (0.1 if d.kind in ("class", "struct", "interface", "trait") else 0), d) for d in defs]
            ref.sort(key=lambda x: (-x[0], len(x[1].name), x[1].path, x[1].line))
            got = eng.symbols(query, limit=50)
            assert [(s["name"], s["path"], s["line"]) for s in got] == [(d.name, d.path, d.line) for _s, d in ref[:50]], query
        assert eng.symbols("größe", limit=5)[0]["name"] == "Größe"


def test_many_names_at_once_are_read_in_one_pass_and_give_the_same(tmp_path: Path, monkeypatch):
    from delphi_ls.retrieval import context

    ws = _workspace(tmp_path)
    with Engine(ws, index_dir=str(tmp_path / "idx"), vectors=False) as eng:
        eng.index(vectors=False)
        files = eng.view().files
        whole = _whole_table(eng, files)
        monkeypatch.setattr(context, "FETCH_SCAN_NAMES", 3)
        table = SymbolTable(eng.meta, files)
        table.fetch([*whole, "no_such_name"])
        assert dict(table.items()) == whole and all(table.get(n) == recs for n, recs in whole.items())
        assert table.get("no_such_name") is None
