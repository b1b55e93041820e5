"""Import specs from tree-sitter trees, and their resolution to workspace files.

Extraction happens while chunking (the tree is at hand); resolution happens when the
file graph is built, against the current file list, so a file added later resolves
imports written earlier. What each language reads and how it resolves lives in its module
under ``delphi_ls/languages/``; this is the surface the indexer uses.
"""

from __future__ import annotations

from ..languages import MANIFEST_KINDS, FileIndex, extract_imports, manifest_imports, resolve

__all__ = ["Resolver", "extract_imports", "manifest_imports"]


class Resolver:
    """Maps import specs to workspace files, each spec kind by the language that owns it."""

    def __init__(self, files: list[str], imports: list[tuple[str, str]] | None = None) -> None:
        # The manifests' facts go along (composer.json's PSR-4 prefixes), not the other 734k import pairs
        # of the 100k workspace (they were kept, and saved with every view).
        self.index = FileIndex(files, [(p, s) for p, s in imports or () if s.partition(":")[0] in MANIFEST_KINDS])
        self.files = self.index.files

    def resolve(self, importer: str, spec: str) -> list[str]:
        return resolve(self.index, importer, spec)
