"""A file's bytes as every reader of the index reads them: decoded, a notebook as its cells, secrets redacted.

One function for the indexer (``indexing.workers.prepare_file``, editors' buffers included) and the packer
(``retrieval.packing.file_lines``): the packer checks the file on disk against the stored chunks line by line, so
both must read the same text from the same bytes.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..core.notebooks import is_notebook, notebook_view
from ..core.text import decode
from .secrets import redact


@dataclass(frozen=True)
class IndexedText:
    text: str
    replaced: bool  # decoded with replacement characters
    found: dict[str, int]  # the secrets redacted, by kind
    # The path whose extension picks the grammar: the file's own; for a notebook read as its cells, its language's
    # ("" when no grammar parses it: line windows).
    grammar_path: str
    notebook_view: bool = False  # a notebook read as its cells (not as JSON)


def indexed_text(path: str, data: bytes) -> IndexedText:
    text, replaced = decode(data)
    view = notebook_view(text) if is_notebook(path) else None
    if view is not None:
        text = view.text
    text, found = redact(text)
    return IndexedText(text, replaced, found, view.grammar_path if view else path, view is not None)
