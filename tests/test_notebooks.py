"""Jupyter notebooks read as their cells, line for line (core/notebooks.py), on a small real workspace
(tests/fixtures/notebooks: a Python notebook as Jupyter writes it, with a plot, printed output and a traceback; a
minified Kaggle download; an R notebook). Before, a notebook was indexed as JSON: escaped strings, outputs and
metadata in its chunks, no symbols, and skipped whole once a plot took it past max_file_bytes."""

from __future__ import annotations

import json
from pathlib import Path

from delphi_ls import Engine
from delphi_ls.core.notebooks import notebook_view
from delphi_ls.core.text import lines_of
from tests.conftest import FIXTURES, copy_fixture

NB = "analysis/churn.ipynb"
OUTPUT_WORD = "zanzibarquokka"  # only in the notebook's outputs (printed text, a traceback)


def _engine(root: Path, tmp: Path, **kw: object) -> Engine:
    eng = Engine(root, index_dir=str(tmp / "idx"), vectors=False, reranker="off", **kw)
    eng.index()
    return eng


def _line_of(path: Path, needle: str) -> int:
    """The 1-based line of the file on disk whose JSON string holds ``needle``."""
    return next(i for i, ln in enumerate(path.read_text(encoding="utf-8").splitlines(), 1) if needle in ln)


def test_the_view_puts_each_cell_line_on_its_own_line_of_the_file():
    text = (FIXTURES / "notebooks" / NB).read_text(encoding="utf-8")
    view = notebook_view(text)
    assert view is not None and view.cells == 6 and view.grammar_path.endswith(".py")
    disk, shown = lines_of(text), lines_of(view.text)
    assert len(shown) == len(disk)
    code = 0
    for d, v in zip(disk, shown, strict=True):
        v = v.rstrip("\n")
        if not v or v.startswith("# "):  # keys, outputs and metadata are blank; prose and cell marks are comments
            continue
        assert json.loads(d.strip().rstrip(",")).rstrip("\n") == v  # the cell line that file line holds
        code += 1
    assert code == 14  # every non-blank code line of the cells, none missing
    assert "# ## Größe der Konfusionsmatrix — 混淆矩阵" in shown[[i for i, d in enumerate(disk) if "Größe" in d][0]]
    assert OUTPUT_WORD not in view.text and "iVBORw0KGgo" not in view.text
    assert sum(v.startswith("# %%") for v in shown) == 6  # each cell begins where its `"cell_type"` key stands


def test_a_notebook_is_code_with_its_definitions_where_the_file_has_them(tmp_path: Path):
    root = copy_fixture("notebooks", tmp_path / "ws")
    with _engine(root, tmp_path) as eng:
        line = _line_of(root / NB, "def train_churn_model(")
        found = {s["name"]: s for s in eng.symbols("train_churn_model")}
        assert found["train_churn_model"]["path"] == NB and found["train_churn_model"]["line"] == line
        assert any(s["name"] == "plot_confusion_matrix" for s in eng.symbols("plot_confusion_matrix"))

        ans = eng.context("where do we train the churn model", budget_tokens=1000)
        top = ans["results"][0]
        assert top["path"] == NB and top["kind"] == "code", ans["results"]
        assert any(s["startLine"] <= line <= s["endLine"] for s in top["spans"])
        packed = "".join(p["text"] for p in ans["packed"] if p["path"] == NB)
        # The cell's code as written, not JSON-escaped strings; outputs are not part of the answer.
        assert 'model.fit(X, customers["churned"])\n' in packed and '\\n",' not in packed
        assert OUTPUT_WORD not in packed and "iVBORw0KGgo" not in packed
        # Nothing from the outputs reached the index: the words printed by a cell find no file.
        assert not [r for r in eng.context(OUTPUT_WORD)["results"] if r["path"] == NB]


def test_a_notebook_with_a_plot_past_max_file_bytes_is_still_indexed(tmp_path: Path):
    root = copy_fixture("notebooks", tmp_path / "ws")
    size = (root / NB).stat().st_size  # ~11 KB, of which ~9 KB is the plot
    with _engine(root, tmp_path, max_file_bytes=size // 2) as eng:
        assert NB not in eng.health()["skipped"]
        assert eng.symbols("train_churn_model")
    big = root / "analysis" / "huge.ipynb"
    big.write_text((root / NB).read_text(encoding="utf-8").replace("iVBORw0KGgo", "iVBORw0KGgo" + "A" * 8 * size))
    with _engine(root, tmp_path, max_file_bytes=size // 2) as eng:
        reason = eng.health()["skipped"]["analysis/huge.ipynb"]
        assert reason.startswith("too large") and "for a notebook" in reason


def test_a_secret_in_a_cell_is_redacted_as_in_any_file(tmp_path: Path):
    root = copy_fixture("notebooks", tmp_path / "ws")
    key = "ghp_" + "a1B2c3D4e5F6g7H8i9J0k1L2m3N4o5P6q7R8"
    nb = json.loads((root / NB).read_text(encoding="utf-8"))
    nb["cells"][1]["source"].append(f'\ntoken = "{key}"')
    (root / NB).write_text(json.dumps(nb, indent=1, sort_keys=True), encoding="utf-8")
    with _engine(root, tmp_path) as eng:
        ans = eng.context("github token", budget_tokens=4000)
        assert any(r["path"] == NB for r in ans["results"])
        assert key not in json.dumps(ans)


def test_other_layouts_and_languages(tmp_path: Path):
    root = copy_fixture("notebooks", tmp_path / "ws")
    assert notebook_view((root / "kaggle" / "titanic.ipynb").read_text()) is None  # one line: no line to give a cell
    r_view = notebook_view((root / "r" / "survival.ipynb").read_text())
    assert r_view is not None and r_view.grammar_path == ""  # no R grammar: line windows
    with _engine(root, tmp_path) as eng:
        # The minified one is read as JSON, as before; the R one as its cells, prose commented.
        assert eng.context("load_titanic_passengers")["results"][0]["path"] == "kaggle/titanic.ipynb"
        ans = eng.context("survival curves by cohort", budget_tokens=1000)
        assert ans["results"][0]["path"] == "r/survival.ipynb"
        packed = "".join(p["text"] for p in ans["packed"] if p["path"] == "r/survival.ipynb")
        assert "# Survival curves by cohort\n" in packed and "fit <- survfit(" in packed


def test_a_notebook_read_as_json_keeps_the_plain_size_limit(tmp_path: Path):
    """Only a notebook read as its cells leaves its outputs out, so only it may be larger on disk (a review)."""
    root = copy_fixture("notebooks", tmp_path / "ws")
    kaggle = root / "kaggle" / "titanic.ipynb"
    nb = json.loads(kaggle.read_text())
    nb["cells"][0]["outputs"] = [{"output_type": "stream", "name": "stdout", "text": "x" * 5000}]
    kaggle.write_text(json.dumps(nb, separators=(",", ":")))
    with _engine(root, tmp_path, max_file_bytes=4000) as eng:
        assert eng.health()["skipped"]["kaggle/titanic.ipynb"].startswith("too large")


def test_prose_cells_of_a_kernel_without_comments_stay_text():
    nb = {"cells": [{"cell_type": "markdown", "metadata": {}, "source": ["Load the raw events\n", "into a table"]},
                    {"cell_type": "code", "metadata": {}, "outputs": [], "execution_count": 1,
                     "source": ["SELECT * FROM events"]}],
          "metadata": {"kernelspec": {"language": "sql", "name": "sql"}}, "nbformat": 4, "nbformat_minor": 5}
    view = notebook_view(json.dumps(nb, indent=1, sort_keys=True))
    assert view is not None and "Load the raw events\n" in view.text and "SELECT * FROM events" in view.text


def test_hostile_notebooks_are_refused_not_raised():
    """JSON nested deeper than Python's stack raised RecursionError out of the view (a notebook is parsed whole);
    and a repository's own settings may raise max_file_bytes, so a notebook's larger limit has a ceiling."""
    from delphi_ls.workspace.scan import NOTEBOOK_MAX_BYTES, byte_limit

    assert notebook_view('{"cells": ' + "[" * 200_000 + "]" * 200_000 + "}") is None
    assert byte_limit("a.ipynb", 1_000_000) == 8_000_000
    assert byte_limit("a.ipynb", 10_000_000) == NOTEBOOK_MAX_BYTES and byte_limit("a.py", 10_000_000) == 10_000_000
    assert byte_limit("a.ipynb", 50_000_000) == 50_000_000  # the user's own larger limit is never lowered
