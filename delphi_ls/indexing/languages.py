"""Tree-sitter grammars, each from its own registry package, loaded offline.

For each language: which node types define something (and what kind of symbol),
and which node types are containers whose body may be split further.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass, field
from functools import cache

import tree_sitter as ts


@dataclass(frozen=True)
class LanguageSpec:
    name: str
    module: str
    entry: str  # function in the module returning the grammar pointer
    extensions: tuple[str, ...]
    definitions: dict[str, str]  # node type -> symbol kind
    containers: frozenset[str] = field(default_factory=frozenset)  # nodes whose bodies split into members
    imports: frozenset[str] = field(default_factory=frozenset)


_JS_DEFS = {
    "function_declaration": "function", "generator_function_declaration": "function",
    "class_declaration": "class", "method_definition": "method",
    "interface_declaration": "interface", "type_alias_declaration": "type", "enum_declaration": "enum",
    "abstract_class_declaration": "class", "function_signature": "function",
}

SPECS: tuple[LanguageSpec, ...] = (
    LanguageSpec("python", "tree_sitter_python", "language", (".py", ".pyi"),
                 {"function_definition": "function", "class_definition": "class"},
                 frozenset({"class_definition", "decorated_definition"}),
                 frozenset({"import_statement", "import_from_statement", "future_import_statement"})),
    LanguageSpec("javascript", "tree_sitter_javascript", "language", (".js", ".jsx", ".mjs", ".cjs"),
                 _JS_DEFS, frozenset({"class_declaration", "export_statement"}),
                 frozenset({"import_statement"})),
    LanguageSpec("typescript", "tree_sitter_typescript", "language_typescript", (".ts", ".mts", ".cts"),
                 _JS_DEFS, frozenset({"class_declaration", "abstract_class_declaration", "export_statement",
                                      "interface_declaration", "module", "internal_module"}),
                 frozenset({"import_statement"})),
    LanguageSpec("tsx", "tree_sitter_typescript", "language_tsx", (".tsx",),
                 _JS_DEFS, frozenset({"class_declaration", "abstract_class_declaration", "export_statement"}),
                 frozenset({"import_statement"})),
    LanguageSpec("go", "tree_sitter_go", "language", (".go",),
                 {"function_declaration": "function", "method_declaration": "method", "type_spec": "type"},
                 frozenset(), frozenset({"import_declaration", "package_clause"})),
    LanguageSpec("rust", "tree_sitter_rust", "language", (".rs",),
                 {"function_item": "function", "struct_item": "struct", "enum_item": "enum",
                  "trait_item": "trait", "impl_item": "impl", "mod_item": "module",
                  "macro_definition": "macro", "type_item": "type", "union_item": "struct",
                  "function_signature_item": "function"},
                 frozenset({"impl_item", "trait_item", "mod_item"}),
                 frozenset({"use_declaration", "extern_crate_declaration"})),
    LanguageSpec("java", "tree_sitter_java", "language", (".java",),
                 {"class_declaration": "class", "interface_declaration": "interface",
                  "enum_declaration": "enum", "record_declaration": "class",
                  "annotation_type_declaration": "interface",
                  "method_declaration": "method", "constructor_declaration": "constructor"},
                 frozenset({"class_declaration", "interface_declaration", "enum_declaration", "record_declaration"}),
                 frozenset({"import_declaration", "package_declaration"})),
)

_BY_EXT = {ext: spec for spec in SPECS for ext in spec.extensions}


def spec_for(path: str) -> LanguageSpec | None:
    dot = path.rfind(".")
    return _BY_EXT.get(path[dot:].lower()) if dot >= 0 else None


@cache
def parser_for(name: str) -> ts.Parser:
    spec = next(s for s in SPECS if s.name == name)
    module = importlib.import_module(spec.module)
    return ts.Parser(ts.Language(getattr(module, spec.entry)()))


def grammar_status() -> dict[str, str]:
    """Each grammar: 'ok' or why it cannot load (reported by health)."""
    out: dict[str, str] = {}
    for spec in SPECS:
        try:
            parser_for(spec.name)
            out[spec.name] = "ok"
        except Exception as e:  # a broken grammar package must show, not crash indexing
            out[spec.name] = f"unavailable: {e}"
    return out
