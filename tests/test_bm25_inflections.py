"""The BM25 branch's search for other forms of a question's plain words (issue 19, session 21).

A description writes "Allow pushing enrichers" where the code names the method ``Push``: serilog's
``LogContext.cs`` in dev_langs (here a file that shares no other word with the question). With ``bm25_inflections`` the branch also searches ``push`` (held by the
index), weighed below the word as written. Off by default: on the dev sets it moved file ranking both ways
(bench/RESULTS.md, session 21). Real tantivy and Whoosh.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from delphi_ls import Engine
from delphi_ls.core.tokens import inflections
from delphi_ls.settings import Settings, SettingsError

QUESTION = "Allow pushing several enrichers onto the context"

FILES = {
    # The file the change edits: it names the stem only.
    "src/Scope/Stack.cs": "public static class Stack {\n    public static IDisposable Push(IItem e)"
                          " {\n        return Items.Add(e);\n    }\n}\n",
    # Files full of the question's other words, none of them a form of `pushing`.
    **{f"src/Enrichers/Enricher{i}.cs": f"// several enrichers allow the context\npublic class Enricher{i} : IEnricher"
                                        f" {{\n    // enrichers of the context allow several\n    public void Enrich()"
                                        f" {{ }}\n}}\n" for i in range(6)},
    **{f"src/Core/Item{i}.cs": f"public class Item{i} {{\n    public int Value() {{ return {i}; }}\n}}\n" for i in range(20)},
}


def test_inflections_give_the_forms_code_spells():
    assert "push" in inflections("pushing")
    assert "parse" in inflections("parsing")
    assert inflections("retries") == ["retry"]
    assert "stop" in inflections("stopped")
    assert inflections("copied") == ["copy"]
    assert inflections("errors") == ["error"]
    assert inflections("option") == ["options"]
    assert inflections("matches")[0] == "match"
    # Too short, not a plain word, or a form of none: nothing to add.
    assert inflections("run") == [] and inflections("parse_args") == [] and inflections("utf8") == []
    assert inflections("status") == [] and inflections("class") == []
    assert "pushing" not in inflections("pushing")


def test_default_is_off_and_validated(tmp_path: Path):
    assert Settings().bm25_inflections == 0.0
    with pytest.raises(SettingsError, match="bm25_inflections"):
        Settings.load(overrides={"bm25_inflections": 1.5}, env={}, user_config=tmp_path / "none.toml")


@pytest.mark.parametrize("store", ["tantivy", "whoosh"])
def test_the_stem_the_code_names_is_found(tmp_path: Path, store: str):
    ws = tmp_path / "ws"
    for rel, text in FILES.items():
        (ws / rel).parent.mkdir(parents=True, exist_ok=True)
        (ws / rel).write_text(text)
    lists = {}
    for weight in (0.0, 1.0):
        with Engine(ws, index_dir=str(tmp_path / "idx"), vectors=False, reranker="off", lexical_store=store,
                    bm25_inflections=weight) as eng:
            assert not eng.index().errors
            lists[weight] = [h.path for h in eng.retrieve(QUESTION).lists["bm25"]]
    assert "src/Scope/Stack.cs" not in lists[0.0]  # as written, `pushing` is in no file
    assert "src/Scope/Stack.cs" in lists[1.0]  # found by `push`, behind the files sharing four words
