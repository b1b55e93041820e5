"""A Jupyter notebook read as the code and prose its cells hold, line for line with the file on disk.

A notebook is JSON: indexed as such, its chunks were escaped strings (``"    return x\\n",``) beside cell metadata
and outputs (base64 plots, tracebacks), the grammar never saw its code (no symbols, no definition chunks), and a
notebook with one plot was over ``max_file_bytes`` and skipped. Jupyter, JupyterLab, VS Code and Colab write
nbformat 4 with one source line per JSON line (``"source": [`` then one string per line), so each cell line can
stand on the line it occupies in the file: the view keeps the file's line count and every line number, so spans,
editors' jumps and the packer's reads of the file agree with the index. Lines that are not cell source (keys,
metadata, outputs) are blank in the view. Markdown and raw cells become comments of the notebook's language, so
their prose is searched and leads the code below it. A notebook in another layout (one string per cell, minified,
nbformat 3) gets no view and is read as JSON, as before.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass

from .text import lines_of

NOTEBOOK_SUFFIX = ".ipynb"
# The extension whose grammar parses the notebook's code, by the kernel's language (metadata); a language with no
# grammar here is read as line windows. Comment marks for prose cells: Python's `#` also serves R and Julia.
_LANGUAGE_EXT = {"python": ".py", "python3": ".py", "ipython": ".py"}
_COMMENT = {"python": "# ", "python3": "# ", "ipython": "# ", "r": "# ", "julia": "# ", "scala": "// ",
            "javascript": "// ", "typescript": "// ", "c++": "// ", "java": "// ", "go": "// ", "rust": "// "}
_SOURCE_OPEN = re.compile(r'^\s*"source"\s*:\s*\[\s*(\]\s*,?)?\s*$')
_SOURCE_ONE = re.compile(r'^\s*"source"\s*:\s*(".*")\s*,?\s*$')  # a cell whose source is one string, on one line
_CLOSE = re.compile(r"^\s*\]\s*,?\s*$")
_CELL_TYPE = re.compile(r'^\s*"cell_type"\s*:')


@dataclass(frozen=True)
class NotebookView:
    text: str  # the view: the file's lines, cell source where it stands, blank elsewhere
    grammar_path: str  # a path whose extension picks the grammar for the view ("" when none parses it)
    cells: int


def is_notebook(path: str) -> bool:
    return path.lower().endswith(NOTEBOOK_SUFFIX)


def _language(nb: dict[str, object]) -> str:
    meta = nb.get("metadata")
    if isinstance(meta, dict):
        for key, field in (("kernelspec", "language"), ("language_info", "name")):
            sub = meta.get(key)
            if isinstance(sub, dict) and isinstance(sub.get(field), str) and sub[field]:
                return str(sub[field]).lower()
    return "python"  # nbformat's default, and what a notebook without the key almost always is


def _string(line: str) -> str | None:
    """The JSON string literal a source line holds (``"x = 1\\n",``), decoded; None when the line is not one."""
    s = line.strip()
    if s.endswith(","):
        s = s[:-1].rstrip()
    if len(s) < 2 or s[0] != '"' or s[-1] != '"':
        return None
    try:
        value = json.loads(s)
    except ValueError:
        return None
    return value if isinstance(value, str) else None


def notebook_view(text: str) -> NotebookView | None:
    """The view of a notebook's JSON text (module note), or None when it is not a notebook in nbformat's layout."""
    if '"cells"' not in text:
        return None
    try:
        nb = json.loads(text)
    except (ValueError, RecursionError):  # RecursionError: JSON nested deeper than Python's stack (hostile input)
        return None
    cells = nb.get("cells") if isinstance(nb, dict) else None
    if not isinstance(cells, list) or not all(isinstance(c, dict) for c in cells):
        return None
    lines = lines_of(text)
    # Per source block in file order: the line of its `"source"` key, and (line index, decoded string) per string.
    found: list[tuple[int, list[tuple[int, str]]]] = []
    i = 0
    while i < len(lines):
        line = lines[i]
        if '"source"' not in line:
            i += 1
            continue
        m = _SOURCE_OPEN.match(line)
        if m:
            key, block = i, []
            if not m.group(1):  # not `"source": []`: strings follow, one per line, until `]`
                i += 1
                while i < len(lines) and not _CLOSE.match(lines[i]):
                    s = _string(lines[i])
                    if s is None:
                        return None
                    block.append((i, s))
                    i += 1
            found.append((key, block))
        else:
            one = _SOURCE_ONE.match(line)
            s = _string(one.group(1)) if one else None
            if s is not None:  # else a key of that name elsewhere: the count below tells whether it mattered
                found.append((i, [(i, s)]))
        i += 1
    if len(found) != len(cells):
        return None
    lang = _language(nb)
    mark = _COMMENT.get(lang, "")
    out = [""] * len(lines)
    after = 0  # the line after the previous cell's source
    for cell, (key, block) in zip(cells, found, strict=True):
        src = cell.get("source", "")
        if "".join(s for _, s in block) != ("".join(src) if isinstance(src, list) else src):
            return None  # the strings found are not this cell's source: some other layout
        prose = cell.get("cell_type") != "code"
        if mark:
            # The cell's `"cell_type"` line shows where it begins, as Jupytext's, VS Code's and Spyder's percent
            # format marks cells (`# %%`, `# %% [markdown]`): the blank run of keys and outputs between cells
            # reads as one cell ending and the next beginning.
            for k in range(key, after - 1, -1):
                if _CELL_TYPE.match(lines[k]):
                    out[k] = f"{mark}%%" + (f" [{cell.get('cell_type')}]" if prose else "")
                    break
        after = (block[-1][0] if block else key) + 1
        for n, s in block:
            body = s[:-1] if s.endswith("\n") else s
            if "\n" in body or "\r" in body:
                return None  # several lines in one string: they cannot keep the file's line numbers
            if prose:  # as a comment where the language has a mark; as plain text where no grammar reads it
                body = f"{mark}{body}".rstrip() if body.strip() else ""
            out[n] = body
    view = "".join(v + ("\n" if lines[k].endswith("\n") else "") for k, v in enumerate(out))
    ext = _LANGUAGE_EXT.get(lang, "")
    return NotebookView(view, f"notebook{ext}" if ext else "", len(cells))
