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
# and C compilers and runners (the extension list is theirs too). Absolute too: a panic prints each frame's
# file as `\t/home/dev/shop/cache/lru.go:49 +0x2c` (only `-trimpath` builds print module paths), and such a
# trace gave no frame at all (a newcomer, session 37). `[ \t]*`, not `\s*`: at each of 8,000 blank lines `\s*` ran
# over all the rest (5 s; review).
# `@` and `+` in folders: the module cache's `.../github.com/gin-gonic/gin@v1.11.0/tree.go:511` was no frame (a
# newcomer, session 38).
# Windows' separators too: pytest on a Windows runner prints `src\flask\app.py:1307: TypeError` (no frame; a newcomer,
# session 39).
# An arrow before the frame: chi's `middleware.Recoverer` marks the panicking frame ` ->   /…/tree.go:458`, which was
# no frame, and its line was in no span (a newcomer pasting traces, session 44).
LINE_START_FRAME = re.compile(
    r"^[ \t]*(?:(?:-+|=)>[ \t]*)?((?:[A-Za-z]:)?[/\\]?(?:[\w.@+-]+[/\\])*[\w.-]+\.(?:go|rs|c|cc|cpp|h|py|rb|java|kt|ts|js|tsx|jsx)):(\d+)",
    re.M)

_TYPE_KINDS = {"struct_type": "struct", "interface_type": "interface"}
_PACKAGE_LEVEL = frozenset({"var_declaration", "var_spec_list", "const_declaration"})
EXTRA_TYPES = frozenset({"type_spec", "var_spec", "const_spec"})  # what _extra_symbol answers for


def _extra_symbol(node: ts.Node) -> tuple[str, str] | None:
    """A type by what it is (a struct, an interface; else a type), and a package-level ``var`` or ``const`` (its
    first name): types were all "type" (an editor's outline showed structs as type parameters) and ``var
    ErrNotFound = errors.New(…)`` was no symbol (a newcomer, session 37)."""
    name = node.child_by_field_name("name") if node.type in EXTRA_TYPES else None
    if name is None or node_text(name) == "_":  # `var _ Iface = (*T)(nil)`: a compile-time check, no name
        return None
    if node.type == "type_spec":
        t = node.child_by_field_name("type")
        return (_TYPE_KINDS.get(t.type, "type") if t is not None else "type"), node_text(name)
    up = node.parent
    while up is not None and up.type in _PACKAGE_LEVEL:
        up = up.parent
    if up is None or up.type != "source_file":
        return None  # a function's local
    return ("constant" if node.type == "const_spec" else "variable"), node_text(name)


LANGUAGE = Language(
    name="go",
    grammars=(
        LanguageSpec("go", "tree_sitter_go", "language", (".go",),
                     {"function_declaration": "function", "method_declaration": "method"},
                     frozenset(), frozenset({"import_declaration", "package_clause"}),
                     chunk_units=frozenset({"type_declaration"}), import_node=_import_node,
                     extra_symbol=_extra_symbol, extra_types=EXTRA_TYPES,
                     import_depth=3),  # source_file > import_declaration > import_spec_list > import_spec
    ),
    resolvers={"go": _resolve},
    test_names=(r".*_test\.go$",),
    stack_frames=(LINE_START_FRAME,),
    trace_markers=(r"goroutine \d+ \[",),
    fixture="shipyard",
)
