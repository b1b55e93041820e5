"""C: functions, prototypes, structs/unions/enums, typedefs and macros; ``#include`` resolved to workspace
files; ``test_x.c``/``test-x.c``/``x_test.c``; gdb, sanitizer and valgrind frames.

The C-family pieces here (declarator names, include reading and resolution, test names, frames, the
export-macro mask) serve C++ too (``cpp.py``). Headers (``.h``) belong to C++: its grammar parses C
headers about as well as the C grammar does (hiredis' headers: 160 error nodes against 182), while the C
grammar fails on C++ headers (spdlog's ``.h`` files: 13,342 error nodes against 1,353), and an extension
maps to one grammar.
"""

from __future__ import annotations

import os
import re

import tree_sitter as ts

from .base import FileIndex, Language, LanguageSpec, node_text

# Declarators that wrap the one naming a function: `*f(...)`, `&f(...)`, `(f)(...)`.
_WRAPPING_DECLARATORS = frozenset({"pointer_declarator", "reference_declarator", "parenthesized_declarator",
                                   "attributed_declarator"})
_FUNCTION_NAMES = frozenset({"identifier", "field_identifier", "qualified_identifier", "destructor_name",
                             "operator_name", "template_function", "operator_cast"})
_SPECIFIERS = frozenset({"struct_specifier", "union_specifier", "enum_specifier", "class_specifier"})
_TEMPLATE_ARGS = re.compile(r"<[^<>]*>")


def _function_declarator(node: ts.Node) -> ts.Node | None:
    """The ``function_declarator`` under a definition or declaration, through pointers and parentheses."""
    d = node.child_by_field_name("declarator")
    for _ in range(8):
        if d is None:
            return None
        if d.type == "function_declarator":
            return d
        if d.type not in _WRAPPING_DECLARATORS:
            return None
        d = d.child_by_field_name("declarator") or (d.named_children[-1] if d.named_child_count else None)
    return None


def _in_body(node: ts.Node) -> bool:
    n = node.parent
    while n is not None:
        if n.type == "compound_statement":
            return True
        n = n.parent
    return False


def _first_type_identifier(node: ts.Node | None) -> str | None:
    """A typedef's new name: the first type identifier in its declarator (``typedef void (*fn_t)(int)``)."""
    stack = [node] if node is not None else []
    while stack:
        n = stack.pop(0)
        if n.type in ("type_identifier", "primitive_type"):
            return node_text(n)
        stack.extend(n.named_children)
    return None


def name_of(node: ts.Node) -> str | None:
    """The name a C/C++ definition declares, or None when it declares none worth a symbol."""
    t = node.type
    if t in ("function_definition", "declaration", "field_declaration"):
        fd = _function_declarator(node)
        if fd is None:
            return None  # a variable, or a definition a macro left unreadable
        if t == "declaration" and _in_body(node):
            return None  # `log_msg msg(a, b);` in a function body declares a variable, not a function
        inner = fd.child_by_field_name("declarator")
        if inner is None or inner.type not in _FUNCTION_NAMES:
            return None
        name = re.sub(r"\s+", "", node_text(inner))
        while "<" in name and _TEMPLATE_ARGS.search(name):  # `logger<T>::flush` -> `logger::flush`
            name = _TEMPLATE_ARGS.sub("", name)
        return name or None
    if t in _SPECIFIERS:
        n = node.child_by_field_name("name")
        if n is None or node.child_by_field_name("body") is None:
            return None  # `struct foo *p`: a use, not a definition
        name = node_text(n)
        while "<" in name and _TEMPLATE_ARGS.search(name):  # `struct formatter<spdlog::stopwatch>`
            name = _TEMPLATE_ARGS.sub("", name)
        parent = node.parent
        if parent is not None and parent.type == "type_definition" and name == name_of(parent):
            return None  # `typedef struct x {...} x;`: one symbol, the typedef's
        return name
    if t == "type_definition":
        return _first_type_identifier(node.child_by_field_name("declarator"))
    n = node.child_by_field_name("name")
    return None if n is None else node_text(n)


EXTRA_TYPES = frozenset({"preproc_def"})  # what extra_symbol answers for


def extra_symbol(node: ts.Node) -> tuple[str, str] | None:
    """An object-like macro with a value (``#define REDIS_ERR -1``); include guards define nothing."""
    if node.type == "preproc_def" and node.child_by_field_name("value") is not None:
        name = node.child_by_field_name("name")
        if name is not None:
            return "macro", node_text(name)
    return None


def import_node(node: ts.Node, out: list[str]) -> bool:
    """``#include "x.h"`` -> ``inc:x.h``, ``#include <x/y.h>`` -> ``incsys:x/y.h``."""
    t = node.type
    if t == "preproc_include":
        path = node.child_by_field_name("path")
        if path is not None:
            if path.type == "string_literal":
                out.append("inc:" + node_text(path).strip().strip('"'))
            elif path.type == "system_lib_string":
                out.append("incsys:" + node_text(path).strip().strip("<>"))
        return True
    return t in ("function_definition", "compound_statement")  # no includes inside function bodies


def _include(ix: FileIndex, importer: str, target: str, quoted: bool) -> list[str]:
    target = os.path.normpath(target).replace(os.sep, "/")
    if target.startswith("/"):
        return []  # an absolute path is outside the workspace
    here = os.path.dirname(importer)
    if quoted:  # `#include "x.h"`: the including file's folder first
        cand = os.path.normpath(os.path.join(here, target)).replace(os.sep, "/")
        if cand in ix.files:
            return [cand]
    if target.startswith("../"):
        return []  # `"../x.h"` is relative to the includer only
    # Include roots: every folder from the includer's up to the workspace root, and its include/ and src/.
    folder = here
    while True:
        for root in (f"{folder}/include", f"{folder}/src", folder):
            cand = f"{root}/{target}".lstrip("/")
            if cand in ix.files:
                return [cand]
        if not folder:
            break
        folder = os.path.dirname(folder)
    # An -I folder we cannot see (`<spdlog/common.h>` from tests/): a workspace file ending in that path.
    return ix.suffix(target, importer)


def resolve_quoted(ix: FileIndex, importer: str, target: str) -> list[str]:
    return _include(ix, importer, target, quoted=True)


def resolve_system(ix: FileIndex, importer: str, target: str) -> list[str]:
    """``<x.h>``: only a workspace file of that path (``<stdio.h>`` resolves to nothing here)."""
    return _include(ix, importer, target, quoted=False)


# Export and attribute macros the grammar reads as types or names: `class SPDLOG_API logger`,
# `SPDLOG_INLINE void logger::flush()`, `) SPDLOG_NOEXCEPT {`. Blanked before parsing.
_CLASS_MACRO = re.compile(rb"\b(class|struct|union)(\s+)([A-Z][A-Z0-9_]{2,})(?=\s+[A-Za-z_])")
_LEAD_MACRO = re.compile(
    # Bounded repetitions: the look-ahead's classes overlap, and unbounded it was quadratic on one long
    # line (8 KB: 1.3 s); a declaration's return type and name are far shorter than 200 characters.
    rb"^([ \t]*)([A-Z][A-Z0-9]*_[A-Z0-9_]+)(?=[ \t]+[A-Za-z_][\w:<>,* \t&]{0,200}[ \t*&]{1,20}[~\w:]{1,200}[ \t]*\()",
    re.M)
_TRAIL_MACRO = re.compile(
    rb"\)([ \t]*(?:const[ \t]*)?)([A-Z][A-Z0-9]*_[A-Z0-9_]+)(?=[ \t]*(?:\{|;|=|override\b|final\b|\r?\n))")


def _blank(m: re.Match[bytes], keep: tuple[int, ...], blank: int) -> bytes:
    return b"".join(m.group(i) if i != blank else b" " * len(m.group(i)) for i in keep)


def mask_export_macros(data: bytes) -> bytes:
    """The source with export/attribute macros blanked (same length: every byte keeps its offset)."""
    data = _CLASS_MACRO.sub(lambda m: _blank(m, (1, 2, 3), 3), data)
    data = _LEAD_MACRO.sub(lambda m: _blank(m, (1, 2), 2), data)
    return _TRAIL_MACRO.sub(lambda m: b")" + _blank(m, (1, 2), 2), data)


C_EXTS = r"c|h|cc|cpp|cxx|c\+\+|hpp|hh|hxx|h\+\+|inl|ipp|tpp"
# AddressSanitizer and gdb: `#0 0x4f5e3c in redisReaderFeed /src/read.c:642:5` (the function may carry spaces).
SANITIZER_FRAME = re.compile(
    rf"^[ \t]*#\d+\s+0x[0-9a-fA-F]+\s+in\s.*?\s((?:[A-Za-z]:)?[^\s:()]+\.(?:{C_EXTS})):(\d+)", re.M)
# valgrind: `==12== at 0x4C2FB0F: malloc (vg_replace_malloc.c:299)`, `==12== by 0x1086: main (test.c:40)`.
VALGRIND_FRAME = re.compile(rf"(?:at|by) 0x[0-9A-Fa-f]+: .*?\(([\w./+-]+\.(?:{C_EXTS})):(\d+)\)")
# Compiler diagnostics on C++-only extensions (`include/x.hpp:12:3: error`; `.c/.h/.cc/.cpp` are read by
# go.py's line-start pattern), and MSVC's `src\x.cpp(12): error`.
LINE_START_FRAME = re.compile(r"^[ \t]*((?:[\w.+-]+/)*[\w.+-]+\.(?:cxx|c\+\+|hpp|hh|hxx|h\+\+|inl|ipp|tpp)):(\d+)",
                              re.M)
MSVC_FRAME = re.compile(rf"^[ \t]*((?:[A-Za-z]:)?[\w./\\+-]+\.(?:{C_EXTS}))\((\d+)\)", re.M)
C_FRAMES = (SANITIZER_FRAME, VALGRIND_FRAME, LINE_START_FRAME, MSVC_FRAME)
C_TRACE_MARKERS = (r"AddressSanitizer|LeakSanitizer|UndefinedBehaviorSanitizer|ThreadSanitizer",
                   r"Segmentation fault", r"^[ \t]*#\d+\s+0x[0-9a-fA-F]+ in ", r"^==\d+== (?:Invalid|Conditional|\s+at 0x)")
C_TEST_PREFIXES = ("test-",)  # `test_` is shared
C_TEST_SUFFIXES = ("-test", "-tests", "_unittest", "_unittests", "-unittest")
# The preprocessor conditionals around whole headers and platform blocks: chunked by what they hold.
PREPROC_BLOCKS = frozenset({"preproc_ifdef", "preproc_if", "preproc_else", "preproc_elif", "preproc_elifdef"})

C_DEFS = {
    "function_definition": "function", "declaration": "function",  # prototypes only (name_of)
    "struct_specifier": "struct", "union_specifier": "struct", "enum_specifier": "enum",
    "type_definition": "type", "preproc_function_def": "macro",
}

LANGUAGE = Language(
    name="c",
    grammars=(
        LanguageSpec("c", "tree_sitter_c", "language", (".c",),
                     C_DEFS, frozenset({"struct_specifier", "union_specifier", "enum_specifier"}),
                     frozenset({"preproc_include"}),
                     name_of=name_of, extra_symbol=extra_symbol, extra_types=EXTRA_TYPES, import_node=import_node,
                     transparent=PREPROC_BLOCKS, prepare_source=mask_export_macros,
                     opaque=frozenset({"compound_statement"})),
    ),
    resolvers={"inc": resolve_quoted, "incsys": resolve_system},
    test_names=(r"^test[_-].*\.c$", r".*[_-](test|tests|unittest)\.c$", r"^tests?\.c$"),
    test_prefixes=C_TEST_PREFIXES,
    test_suffixes=C_TEST_SUFFIXES,
    stack_frames=C_FRAMES,
    trace_markers=C_TRACE_MARKERS,
)
