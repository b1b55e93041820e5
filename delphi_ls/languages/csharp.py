"""C#: namespaces (block and file-scoped), classes, interfaces, structs, records, enums, methods, properties
and constructors; ``using`` resolved to the files that declare the namespace; ``XTests.cs``/``XSpecs.cs``
and ``*.Tests/`` projects; .NET frames (``at Ns.C.M() in /src/C.cs:line 42``)."""

from __future__ import annotations

import re

import tree_sitter as ts

from .base import FileIndex, Language, LanguageSpec, node_text

_NAMESPACES = ("namespace_declaration", "file_scoped_namespace_declaration")
# Type declarations hold no `using`: the import walk does not enter them.
_TYPES = frozenset({"class_declaration", "struct_declaration", "interface_declaration", "record_declaration",
                    "enum_declaration", "delegate_declaration"})
_MAX_FILES = 20  # a namespace used by a file: up to this many of its files (Go's package rule)


def _namespace_name(node: ts.Node) -> str:
    """A namespace's full name, with the names of the namespaces around it (`namespace A { namespace B`)."""
    parts = []
    n: ts.Node | None = node
    while n is not None:
        if n.type in _NAMESPACES:
            name = n.child_by_field_name("name")
            if name is not None:
                parts.append(re.sub(r"\s+", "", node_text(name)))
        n = n.parent
    return ".".join(reversed(parts))


def import_node(node: ts.Node, out: list[str]) -> bool:
    """``using A.B;`` / ``using static A.B.C;`` / ``using X = A.B.C;`` -> ``cs:A.B...``; a namespace
    declaration is recorded as ``csns:A.B`` (what the file declares, for the resolver)."""
    t = node.type
    if t == "using_directive":
        if node.child_count and node.children[0].type == "global":
            # `global using X;` (GlobalUsings.cs) holds for the whole project: an edge from that one file to
            # every file of the namespace would make it look like a test of all of them
            return True
        targets = [c for i, c in enumerate(node.children) if c.type in ("qualified_name", "identifier")
                   and node.field_name_for_child(i) != "name"]  # not the alias in `using X = A.B`
        if targets:
            out.append("cs:" + re.sub(r"\s+", "", node_text(targets[-1])))
        return True
    if t in _NAMESPACES:
        name = _namespace_name(node)
        if name:
            out.append(f"csns:{name}")
        return False  # a block namespace holds usings and namespaces
    return t in _TYPES


def _namespaces(ix: FileIndex) -> dict[str, list[str]]:
    out: dict[str, list[str]] = {}
    for path, spec in ix.manifest_specs:
        kind, _, name = spec.partition(":")
        if kind == "csns" and path in ix.files:
            out.setdefault(name, []).append(path)
    return {k: sorted(set(v)) for k, v in out.items()}


def resolve(ix: FileIndex, importer: str, target: str) -> list[str]:
    """The files declaring the namespace; for ``using static A.B.C`` / an alias to a type, the file of
    type ``C`` in namespace ``A.B``."""
    spaces = ix.memo("csharp.namespaces", _namespaces)
    files = [f for f in spaces.get(target, []) if f != importer]
    if files:
        return files[:_MAX_FILES]
    parent, _, last = target.rpartition(".")
    if not parent:
        return []
    named = [f for f in spaces.get(parent, []) if f.rsplit("/", 1)[-1] == f"{last}.cs"]
    return named or ix.suffix(f"{last}.cs", importer)[:1]


def name_of(node: ts.Node) -> str | None:
    if node.type in _NAMESPACES:
        return _namespace_name(node) or None
    return node_text(node.child_by_field_name("name")) or None


# `at Serilog.Core.Logger.Write(LogEvent e) in /src/Serilog/Core/Logger.cs:line 42`
DOTNET_FRAME = re.compile(r"\bin ((?:[A-Za-z]:)?[^\s:*?\"<>|]*?[\w.-]+\.cs):line (\d+)")

LANGUAGE = Language(
    name="csharp",
    grammars=(
        LanguageSpec("csharp", "tree_sitter_c_sharp", "language", (".cs",),
                     {"class_declaration": "class", "interface_declaration": "interface",
                      "struct_declaration": "struct", "record_declaration": "class",
                      "enum_declaration": "enum", "delegate_declaration": "type",
                      "method_declaration": "method", "constructor_declaration": "constructor",
                      "destructor_declaration": "method", "property_declaration": "property",
                      "namespace_declaration": "namespace", "file_scoped_namespace_declaration": "namespace"},
                     frozenset({"namespace_declaration", "class_declaration", "struct_declaration",
                                "interface_declaration", "record_declaration"}),
                     frozenset({"using_directive"}),
                     import_node=import_node, sibling_scopes=frozenset({"file_scoped_namespace_declaration"}),
                     opaque=frozenset({"block", "arrow_expression_clause", "accessor_list"}),  # member bodies
                     name_of=name_of),
    ),
    resolvers={"cs": resolve},
    # `*Spec.cs` is a test by its folder only (an MSpec project `Acme.Specs/`, or `specs/`): in `src/` it is the
    # Specification pattern (Ardalis.Specification, the .NET Clean Architecture templates), product code that
    # was taken for a test and ranked below unrelated files (a newcomer, session 37).
    test_names=(r".*Tests?\.cs$",),
    test_suffixes=("Specs", "Spec"),
    test_dirs=(r"(^|/)[\w.-]+\.\w*(tests?|specs?)/",),  # `test/Serilog.Tests/`, `Serilog.PerformanceTests/`, `Acme.Specs/`
    stack_frames=(DOTNET_FRAME,),
    trace_markers=(r"\bin \S+\.cs:line \d+", r"--- End of stack trace"),
    manifest_kinds=("csns",),
)
