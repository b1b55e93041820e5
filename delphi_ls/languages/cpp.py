"""C++ (and every ``.h`` header, see ``c.py``): namespaces, classes, structs, methods inside them and out
of line (``void logger::flush()`` is ``flush`` in ``logger``); includes, test names and frames as in C."""

from __future__ import annotations

from . import c
from .base import Language, LanguageSpec

CPP_DEFS = {
    **c.C_DEFS,
    "field_declaration": "function",  # method prototypes inside a class (name_of skips data members)
    "class_specifier": "class", "alias_declaration": "type", "concept_definition": "type",
    "namespace_definition": "namespace",
}

LANGUAGE = Language(
    name="cpp",
    grammars=(
        LanguageSpec("cpp", "tree_sitter_cpp", "language",
                     (".h", ".cc", ".cpp", ".cxx", ".c++", ".hpp", ".hh", ".hxx", ".h++", ".ipp", ".inl", ".tpp"),
                     CPP_DEFS,
                     frozenset({"class_specifier", "struct_specifier", "union_specifier", "namespace_definition",
                                "linkage_specification"}),
                     frozenset({"preproc_include"}),
                     chunk_units=frozenset({"template_declaration", "linkage_specification"}),
                     name_of=c.name_of, extra_symbol=c.extra_symbol, extra_types=c.EXTRA_TYPES, import_node=c.import_node,
                     transparent=c.PREPROC_BLOCKS, wrappers=frozenset({"template_declaration"}),
                     scope_separator="::", prepare_source=c.mask_export_macros,
                     opaque=frozenset({"compound_statement"})),  # function bodies (a local class is rare)
    ),
    # `inc:`/`incsys:` specs are resolved by c.py (one owner per kind).
    test_names=(r"^test[_-].*\.(cc|cpp|cxx)$", r".*[_-](test|tests|unittest)\.(cc|cpp|cxx)$", r"^tests?\.(cc|cpp)$",
                r".*[a-z0-9]Tests?\.(cc|cpp|cxx)$"),  # GoogleTest's `LoggerTest.cpp`
    test_prefixes=c.C_TEST_PREFIXES,
    # `registry-inl.h` implements `registry.h` (header-only libraries): both are named after `registry`
    test_suffixes=(*c.C_TEST_SUFFIXES, "-inl"),
    stack_frames=c.C_FRAMES,
    trace_markers=c.C_TRACE_MARKERS,
)
