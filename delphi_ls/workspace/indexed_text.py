"""A file's bytes as every reader of the index reads them: decoded, a notebook as its cells, secrets redacted.

One function for the indexer (``indexing.workers.prepare_file``, editors' buffers included) and the packer
(``retrieval.packing.file_lines``): the packer checks the file on disk against the stored chunks line by line, so
both must read the same text from the same bytes.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from ..core.notebooks import is_notebook, notebook_view
from ..core.text import decode
from .secrets import redact

# Tabular data: rows of a CSV, a JSON-lines log. Past DATA_FULL_BYTES only its head is indexed (the header and the
# first rows: what a question about the data can name), as a preview is. A newcomer's 605 KB `customers.csv` was
# 411 chunks of rows and a data-science repository of CSVs just under the size limit indexes mostly rows (session 41).
DATA_EXTENSIONS = (".csv", ".tsv", ".psv", ".jsonl", ".ndjson")
DATA_FULL_BYTES = 64_000
DATA_HEAD_LINES = 50
DATA_HEAD_CHARS = 16_000


def is_data(path: str) -> bool:
    return os.path.splitext(path)[1].lower() in DATA_EXTENSIONS


def head_indexed(root: Path | None, path: str) -> bool:
    """Whether ``path`` is a data file indexed as its head (its size on disk decides; False when it cannot be read)."""
    if root is None or not is_data(path):
        return False
    try:
        return os.lstat(root / path).st_size > DATA_FULL_BYTES
    except OSError:
        return False


@dataclass(frozen=True)
class IndexedText:
    text: str
    replaced: bool  # decoded with replacement characters
    found: dict[str, int]  # the secrets redacted, by kind
    # The path whose extension picks the grammar: the file's own; for a notebook read as its cells, its language's
    # ("" when no grammar parses it: line windows).
    grammar_path: str
    notebook_view: bool = False  # a notebook read as its cells (not as JSON)
    head_only: bool = False  # a large data file, of which its head is indexed


def indexed_text(path: str, data: bytes) -> IndexedText:
    text, replaced = decode(data)
    view = notebook_view(text) if is_notebook(path) else None
    if view is not None:
        text = view.text
    head = len(data) > DATA_FULL_BYTES and is_data(path)
    if head:
        text = "".join(text.splitlines(keepends=True)[:DATA_HEAD_LINES])[:DATA_HEAD_CHARS]
    text, found = redact(text)
    return IndexedText(text, replaced, found, view.grammar_path if view else path, view is not None, head)
