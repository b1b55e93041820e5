"""Kotlin: ``import a.b.C`` resolved to the file that declares package ``a.b`` and ``C`` (or a path ending
``a/b/C.kt``), ``FooTest.kt``, JVM frames ``at a.b.C.m(C.kt:42)``."""

from __future__ import annotations

import re

import tree_sitter as ts

from .base import FileIndex, Language, LanguageSpec, node_text

# Declarations a file's package exports by name (what `import a.b.Name` can name).
_TOP_LEVEL = frozenset({"class_declaration", "object_declaration", "function_declaration",
                        "property_declaration", "type_alias"})
_MEMBER_PARENTS = frozenset({"source_file", "class_body", "enum_class_body"})


def _kind(node: ts.Node) -> str:
    keywords = {c.type for c in node.children if not c.is_named}
    if "interface" in keywords:
        return "interface"
    mods = next((c for c in node.named_children if c.type == "modifiers"), None)
    if mods is not None and re.search(r"\benum\b", node_text(mods)):
        return "enum"
    return "class"


def _declared_name(node: ts.Node) -> str | None:
    t = node.type
    if t == "property_declaration":
        if node.parent is None or node.parent.type not in _MEMBER_PARENTS:
            return None  # a local `val` inside a function body defines nothing others can find
        decl = next((c for c in node.named_children if c.type in ("variable_declaration",
                                                                  "multi_variable_declaration")), None)
        ident = next((c for c in decl.named_children if c.type == "identifier"), None) if decl else None
        return node_text(ident) if ident is not None else None
    if t == "companion_object":  # unnamed: its members belong to the class (`Metric.counter`)
        ident = next((c for c in node.named_children if c.type == "identifier"), None)
        return node_text(ident) if ident is not None else None
    if t == "type_alias":
        n = node.child_by_field_name("type")
        return node_text(n) if n is not None else None
    if t == "function_declaration" and node.parent is not None and node.parent.type not in _MEMBER_PARENTS:
        return None  # a local function
    n = node.child_by_field_name("name")
    return node_text(n) if n is not None else None


# Node type -> symbol kind of what `_extra_symbol` reads (None: a class, interface or enum by its keyword).
_EXTRA_KINDS: dict[str, str | None] = {"class_declaration": None, "object_declaration": "object",
                                       "companion_object": "object", "property_declaration": "property",
                                       "type_alias": "type"}


def _extra_symbol(node: ts.Node) -> tuple[str, str] | None:
    """Classes by their keyword (``interface``, ``enum class``), objects, companions, properties."""
    if node.type not in _EXTRA_KINDS:  # called for every node of the tree: keep the miss cheap
        return None
    kind = _EXTRA_KINDS[node.type]
    name = _declared_name(node)
    if name is None:
        return None
    return (kind or _kind(node)), name


def _body_of(node: ts.Node) -> ts.Node | None:
    """A class's, object's or companion's members: Kotlin's grammar gives ``class_body`` no field name."""
    return next((c for c in node.named_children if c.type in ("class_body", "enum_class_body")), None)


def _import_node(node: ts.Node, out: list[str]) -> bool:
    t = node.type
    if t == "source_file":
        # What this file declares, for the package map: `ktdecl:a.b.Name` per top-level name.
        pkg = next((c for c in node.named_children if c.type == "package_header"), None)
        ident = next((c for c in pkg.named_children if c.type == "qualified_identifier"), None) if pkg else None
        if ident is None:
            return False  # the default package: nothing can import from it
        prefix = node_text(ident) + "."
        out.append(f"ktpkg:{prefix.rstrip('.')}")
        for c in node.named_children:
            if c.type in _TOP_LEVEL:
                name = _declared_name(c)
                if name:
                    out.append(f"ktdecl:{prefix}{name}")
        return False
    if t == "import":
        ident = next((c for c in node.named_children if c.type == "qualified_identifier"), None)
        if ident is not None:
            star = any(c.type == "*" for c in node.children)
            out.append(f"kt:{node_text(ident)}{'.*' if star else ''}")
        return True
    return False


def _packages(ix: FileIndex) -> tuple[dict[str, list[str]], dict[str, list[str]]]:
    """Qualified name -> declaring files; package -> its files (from every file's ``ktdecl``/``ktpkg``)."""
    decls: dict[str, list[str]] = {}
    pkgs: dict[str, list[str]] = {}
    for path, spec in ix.manifest_specs:
        kind, _, value = spec.partition(":")
        if kind == "ktdecl":
            decls.setdefault(value, []).append(path)
        elif kind == "ktpkg":
            pkgs.setdefault(value, []).append(path)
    return decls, pkgs


def _resolve(ix: FileIndex, importer: str, target: str) -> list[str]:
    star = target.endswith(".*")
    name = target.removesuffix(".*")
    decls, pkgs = ix.memo("kotlin.packages", _packages)
    if star:
        return sorted(pkgs.get(name, []))[:20] or [f for f in ix.dirs.get(name.replace(".", "/"), [])
                                                   if f.endswith((".kt", ".java"))][:20]
    # `import a.b.C`, and `import a.b.C.Inner` / `a.b.C.member`: the longest name a file declares,
    # else a file whose path ends with the name (`a/b/C.kt`, or Java's `a/b/C.java`).
    segs = name.split(".")
    for n in range(len(segs), 1, -1):
        q = ".".join(segs[:n])
        if q in decls:
            return sorted(decls[q])[:3]
    for n in (len(segs), len(segs) - 1):
        p = "/".join(segs[:n])
        hit = (ix.suffix(f"{p}.kt", importer) or ix.suffix(f"{p}.java", importer)) if n >= 2 else []
        if hit:
            return hit
    return []


LANGUAGE = Language(
    name="kotlin",
    grammars=(
        LanguageSpec("kotlin", "tree_sitter_kotlin", "language", (".kt", ".kts"),
                     {"function_declaration": "function"},
                     frozenset({"class_declaration", "object_declaration", "companion_object"}),
                     frozenset({"import", "package_header"}),
                     chunk_units=frozenset({"property_declaration", "type_alias"}),
                     name_of=_declared_name, extra_symbol=_extra_symbol, extra_types=frozenset(_EXTRA_KINDS),
                     import_node=_import_node,
                     import_depth=2, body_of=_body_of),
    ),
    resolvers={"kt": _resolve},
    test_names=(r".*Tests?\.kts?$", r".*Spec\.kt$", r".*IT\.kt$"),
    test_suffixes=("Test", "Tests", "Spec", "IT"),
    # Gradle source sets named for tests (`src/jvmTest/`, `src/commonTest/`, `src/androidTest/`); paths are
    # matched lower-cased. `src/test/` is a test folder for every language already.
    test_dirs=(r"(^|/)src/(?:jvm|common|android|androidunit|androidinstrumented|ios|js|wasm\w*|native|"
               r"linux\w*|macos\w*|mingw\w*|apple|integration|functional|acceptance|e2e|unit)test/",),
    # `at com.example.tally.store.InMemoryStore.record(InMemoryStore.kt:42)`; a trace is recognised by Java's
    # markers (`Exception in thread`, `at a.b(`), which every JVM trace has.
    stack_frames=(re.compile(r"at [\w$.<>-]+\(([\w$-]+\.kts?):(\d+)\)"),),
    manifest_kinds=("ktdecl", "ktpkg"),
)
