"""Go: import paths resolved to a package folder's files, ``x_test.go``, ``file.go:12`` frames."""

from __future__ import annotations

import re

import tree_sitter as ts

from .base import FileIndex, Language, LanguageSpec, node_text


def _import_node(node: ts.Node, out: list[str]) -> bool:
    if node.type != "import_spec":
        return False
    p = node.child_by_field_name("path")
    if p is not None:
        out.append(f"go:{node_text(p).strip(chr(34)).strip('`')}")
    return True


def _resolve(ix: FileIndex, importer: str, target: str) -> list[str]:
    """``github.com/acme/svc/internal/store`` -> the non-test files of the longest folder suffix present."""
    segs = target.split("/")
    for i in range(len(segs)):
        d = "/".join(segs[i:])
        files = [f for f in ix.dirs.get(d, []) if f.endswith(".go") and not f.endswith("_test.go")]
        if files:
            return files[:20]
    return []


# `path/file.go:12` at the start of a line: Go's panics and test failures, and the same shape from Rust
# and C compilers and runners (the extension list is theirs too).
LINE_START_FRAME = re.compile(
    r"^\s*((?:[\w.-]+/)*[\w.-]+\.(?:go|rs|c|cc|cpp|h|py|rb|java|kt|ts|js|tsx|jsx)):(\d+)", re.M)

LANGUAGE = Language(
    name="go",
    grammars=(
        LanguageSpec("go", "tree_sitter_go", "language", (".go",),
                     {"function_declaration": "function", "method_declaration": "method", "type_spec": "type"},
                     frozenset(), frozenset({"import_declaration", "package_clause"}),
                     chunk_units=frozenset({"type_declaration"}), import_node=_import_node,
                     import_depth=3),  # source_file > import_declaration > import_spec_list > import_spec
    ),
    resolvers={"go": _resolve},
    test_names=(r".*_test\.go$",),
    stack_frames=(LINE_START_FRAME,),
    trace_markers=(r"goroutine \d+ \[",),
    fixture="shipyard",
)
