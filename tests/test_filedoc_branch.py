"""The file-level branch (issue 19): one document per file in SQLite FTS5 beside the manifest, kept in step
by the indexing pipeline (changed, added, removed and newly ignored files), searched as the ``filedoc`` branch.

A small real workspace is written into tmp_path and indexed with the real stores (SQLite, Whoosh,
tree-sitter); vectors are off, as nothing here is about them.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from delphi_ls import Engine
from delphi_ls.core import Shape
from delphi_ls.retrieval.branches.filedoc import FileDocBranch
from delphi_ls.retrieval.branches.registry import registered
from delphi_ls.retrieval.context import SearchContext
from delphi_ls.retrieval.query import analyse
from delphi_ls.retrieval.router import weights_for
from delphi_ls.settings import Settings
from delphi_ls.stores.filedocs import FileDocs, leading_comment

FILES = {
    "cli/usage.py": '"""Builds the usage screen shown for --help: sections, flags and examples."""\n\n'
                    "def render_sections(spec):\n    return [s.title for s in spec]\n\n\n"
                    "def wrap_flags(flags):\n    return ' '.join(flags)\n",
    "cli/command.py": '"""The command object: runs a parsed invocation."""\n\nfrom cli import usage\n'
                      "from cli.options import Options\n\n\n"
                      "class Command:\n    def run(self, argv):\n        if '--help' in argv:\n"
                      "            return usage.render_sections(argv)\n        return Options(argv)\n",
    "cli/options.py": '"""Flag parsing into an options record."""\n\n\nclass Options:\n'
                      "    def __init__(self, argv):\n        self.argv = argv\n",
    "net/retry.go": "// Package net retries requests that time out, with backoff.\npackage net\n\n"
                    "import \"time\"\n\n// Backoff is the wait before the next try.\n"
                    "func Backoff(n int) time.Duration { return time.Duration(n) * time.Second }\n",
    "README.md": "# tool\n\nA command-line tool. Run it with --help to see the usage screen.\n",
    ".gitignore": "scratch/\n",
    "scratch/usage_draft.py": '"""Draft of the usage screen: must never be stored (ignored)."""\n',
}
# Other modules, so that BM25's document frequencies mean something (in six files every word is common).
for _topic in ("cache", "colour", "config", "archive", "locale", "metrics", "plugin", "signal"):
    FILES[f"lib/{_topic}.py"] = (f'"""The {_topic} layer."""\n\n\ndef open_{_topic}(path):\n'
                                  f"    return load_{_topic}(path)\n\n\ndef load_{_topic}(path):\n    return path\n")


def write(root: Path, files: dict[str, str]) -> None:
    for rel, text in files.items():
        p = root / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(text, encoding="utf-8")


ON = {"filedoc": 0.6}  # the default weight since session 7 (bench/RESULTS.md, "Retrained ranker")
OFF = {"filedoc": 0.0}


@pytest.fixture()
def engine(tmp_path: Path):  # type: ignore[no-untyped-def]
    ws = tmp_path / "ws"
    write(ws, FILES)
    eng = Engine(ws, index_dir=str(tmp_path / "index"), vectors=False, branch_weights=ON)
    eng.index()
    yield eng
    eng.close()


def docs(eng: Engine) -> FileDocs:
    return FileDocs(eng.meta)


def test_every_indexed_file_has_one_document_and_ignored_files_none(engine: Engine) -> None:
    fd = docs(engine)
    indexed = {p for p, _k, _n in engine.files()}
    assert "scratch/usage_draft.py" not in indexed
    assert fd.count() == len(indexed)
    assert fd.get("scratch/usage_draft.py") is None
    usage = fd.get("cli/usage.py")
    assert usage is not None
    assert usage.pathwords == "cli usage"
    assert "screen" in usage.about.split() and "help" in usage.about.split()
    assert {"render_sections", "render", "sections", "wrap_flags"} <= set(usage.defs.split())
    assert "command" in usage.importers.split()  # cli/command.py imports it
    command = fd.get("cli/command.py")
    assert command is not None and "options" in command.imports.split() and command.importers == ""
    go = fd.get("net/retry.go")
    assert go is not None and {"retries", "backoff", "time"} <= set(go.about.split()) and go.defs == "backoff"


def test_the_branch_finds_a_file_by_its_role(engine: Engine, tmp_path: Path) -> None:
    """No file but usage.py says "usage screen" in its name and header; README.md says it in prose."""
    with Engine(engine.root, index_dir=str(tmp_path / "index"), vectors=False, branch_weights=OFF) as off:
        res = off.context("where does the usage screen get built?", limit=5)
    assert res["branchesReady"]["filedoc"] == "ready (not used for this query shape)"  # turned off
    assert all("filedoc" not in r["branches"] for r in res["results"])
    res = engine.context("where does the usage screen get built?", limit=5)
    top = res["results"][0]
    assert top["path"] == "cli/usage.py" and top["branches"].get("filedoc") == 1
    view = engine.view()
    ctx = SearchContext(engine.settings, engine.meta, engine.lexical, None, None, view, [])
    hits = FileDocBranch().search(analyse("retry requests that time out"), ctx)
    assert hits and hits[0].path == "net/retry.go"
    assert "scratch/usage_draft.py" not in {h.path for h in hits}


def test_a_term_in_half_the_documents_or_more_is_not_matched_beside_a_term_with_weight(engine: Engine) -> None:
    """FTS5's BM25 gives such a term an idf of 1e-6, yet the OR query scored every document it matched (61,340 of
    104,789 for "test" at 100k files): it is left out while a weighted term fills the list, and used when none
    does (the list is then what it was: the weighted matches first, the rest after)."""
    fd = docs(engine)
    n = fd.count()
    lib = sorted(p for p, _k, _n in engine.files() if p.startswith("lib/"))
    assert 2 * len(lib) >= n  # "lib" (a path word) is in half the documents or more
    ranked: list[str] = []
    engine.meta.db.set_trace_callback(ranked.append)
    try:
        top = fd.search(["lib", "backoff"], limit=1)
        ranked_one = [s for s in ranked if "bm25(" in s]
        ranked.clear()
        filled = fd.search(["lib", "backoff"], limit=50)
        ranked_all = [s for s in ranked if "bm25(" in s]
    finally:
        engine.meta.db.set_trace_callback(None)
    assert [p for p, _s in top] == ["net/retry.go"]
    assert len(ranked_one) == 1 and '"lib"' not in ranked_one[0]  # the code before matched "lib" OR "backoff"
    assert [p for p, _s in filled][0] == "net/retry.go" and sorted(p for p, _s in filled[1:]) == lib
    assert '"lib"' in ranked_all[-1]  # one weighted match for 50 places: the full query fills the rest
    assert sorted(p for p, _s in fd.search(["lib"], limit=50)) == lib  # no weighted term: all of them
    with engine.meta._lock:
        assert fd._df(["lib"]) == (n, {"lib": len(lib)})  # FTS5's own row count, read from its averages record
    # The counts follow writes: remove six of the eight lib documents, and "lib" weighs again.
    fd.remove([f"lib/{t}.py" for t in ("cache", "colour", "config", "archive", "locale", "metrics")])
    ranked.clear()
    engine.meta.db.set_trace_callback(ranked.append)
    try:
        again = fd.search(["lib", "backoff"], limit=2)
    finally:
        engine.meta.db.set_trace_callback(None)
    assert [p for p, _s in again][0] == "net/retry.go"
    assert '"lib"' in [s for s in ranked if "bm25(" in s][0]


def test_documents_follow_edits_additions_removals_and_new_ignores(engine: Engine) -> None:
    ws = engine.root
    fd = docs(engine)
    # An edit: the header changes, so does the document (and nothing else is redone).
    (ws / "cli/options.py").write_text('"""Reads environment variables into settings."""\n\n\nclass Settings:\n    pass\n')
    rep = engine.index()
    assert rep.files_indexed == 1
    opts = fd.get("cli/options.py")
    assert opts is not None and "environment" in opts.about.split() and "settings" in opts.defs.split()
    assert "flag" not in opts.about.split()
    # An added importer: the imported file's importer words follow.
    write(ws, {"cli/main.py": "from cli import usage\n\n\ndef main():\n    usage.wrap_flags([])\n"})
    engine.index()
    usage = fd.get("cli/usage.py")
    assert usage is not None and {"command", "main"} <= set(usage.importers.split())
    # A removal: the file's document goes, and it is no longer anyone's importer.
    (ws / "cli/command.py").unlink()
    rep = engine.index()
    assert rep.files_deleted == 1 and fd.get("cli/command.py") is None
    usage = fd.get("cli/usage.py")
    assert usage is not None and usage.importers.split() == ["cli", "main"]
    # Newly ignored: out of the index, documents included; the search no longer returns it.
    (ws / ".gitignore").write_text("scratch/\nnet/\n")
    engine.index()
    assert fd.get("net/retry.go") is None
    assert all(p != "net/retry.go" for p, _s in fd.search(["retries", "backoff"], 10))
    assert fd.count() == len(engine.files())


def test_an_index_from_before_file_documents_is_filled_from_the_manifest(engine: Engine) -> None:
    fd = docs(engine)
    before = {p: fd.get(p) for p, _k, _n in engine.files()}
    # What an older index looks like: no tables, no version. Queries find nothing there, without error.
    engine.meta.db.executescript("DROP TABLE file_docs_fts; DROP TABLE file_docs;")
    engine.meta.db.execute("DELETE FROM state WHERE key='filedocs_version'")
    assert fd.search(["usage"], 10) == [] and fd.count() == 0
    rep = engine.index()
    assert rep.files_indexed == 0  # nothing re-read or re-parsed
    after = {p: fd.get(p) for p, _k, _n in engine.files()}
    assert after == before


def test_a_rebuild_leaves_no_document_of_a_file_that_went_away(engine: Engine) -> None:
    (engine.root / "README.md").unlink()
    engine.index(rebuild=True)  # the manifest is emptied first, so the removal is not seen as one
    assert docs(engine).get("README.md") is None
    assert docs(engine).count() == len(engine.files())


def test_leading_comment_takes_docstrings_and_comment_headers() -> None:
    assert leading_comment('"""Parse flags.\n\nMore words.\n"""\nimport os\n') == "parse flags more words"
    assert leading_comment("// Package cli builds help.\npackage cli\n") == "package cli builds help"
    assert leading_comment("/**\n * Retry policy.\n */\nexport const x = 1;\n") == "retry policy"
    assert leading_comment("x = 1\ny = 2\n") == ""


def test_registered_on_by_default_and_turned_off_by_settings() -> None:
    spec = next(s for s in registered() if s.name == "filedoc")
    assert set(spec.weights) == set(Shape) and all(w == 0.6 for w in spec.weights.values())
    q = analyse("where does the usage screen get built?")
    assert weights_for(q, Settings())["filedoc"] == 0.6
    assert weights_for(q, Settings.from_dict({"branch_weights": OFF}))["filedoc"] == 0.0


def test_documents_are_kept_only_while_the_branch_can_run(tmp_path: Path) -> None:
    """Turned off, indexing stores no file document; turned on (the default), the next full run builds them
    from the manifest without re-reading a file; turned off again, they are dropped rather than left to go
    stale."""
    ws = tmp_path / "ws"
    write(ws, FILES)
    index = str(tmp_path / "index")
    with Engine(ws, index_dir=index, vectors=False, branch_weights=OFF) as off:
        off.index()
        assert not FileDocs(off.meta).exists() and off.meta.get_state("filedocs_version") is None
        n = len(off.files())
    with Engine(ws, index_dir=index, vectors=False) as on:
        rep = on.index()
        assert rep.files_indexed == 0 and FileDocs(on.meta).count() == n
        usage = FileDocs(on.meta).get("cli/usage.py")
        assert usage is not None and "command" in usage.importers.split()
    with Engine(ws, index_dir=index, vectors=False, branch_weights=OFF) as off:
        off.index()
        assert not FileDocs(off.meta).exists() and FileDocs(off.meta).search(["usage"], 5) == []


def test_a_pasted_test_name_longer_than_64_characters_is_found_by_its_words(tmp_path: Path) -> None:
    """Such a name gave no token: bm25 and the file documents found nothing and the one file defining it ranked
    17th on this repository (a newcomer, session 36)."""
    name = "test_a_broken_history_ranker_is_an_error_in_health_and_the_plain_one_answers"
    files = {"tests/test_rerankers.py": f"def {name}():\n    assert health()['ranker'] == 'error'\n",
             "tests/test_history.py": "def test_history_is_read():\n    assert read_history()\n",
             "tests/test_health.py": "def test_health_lists_errors():\n    assert health()\n"}
    for topic in ("cache", "colour", "config", "archive", "locale", "metrics"):
        files[f"tests/test_{topic}.py"] = f"def test_{topic}_opens():\n    assert open_{topic}()\n"
    write(tmp_path / "ws", files)
    with Engine(tmp_path / "ws", index_dir=str(tmp_path / "index"), vectors=False, branch_weights=ON) as eng:
        eng.index()
        top = eng.context(f"why does {name} fail?", limit=5)["results"][0]
    assert top["path"] == "tests/test_rerankers.py"
    assert top["branches"].get("bm25") == 1 and top["branches"].get("filedoc") == 1, top["branches"]
