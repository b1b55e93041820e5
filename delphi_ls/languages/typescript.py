"""TypeScript and TSX: two grammars; imports, resolution and test names as in JavaScript."""

from __future__ import annotations

import re

from .base import Language, LanguageSpec
from .javascript import EXTRA_TYPES, JS_CHUNK_UNITS, JS_DEFS, extra_symbol, import_node

# The compiler's errors, `packages/runtime-core/src/renderer.ts(735,30): error TS2345: …` (tsc, vue-tsc): the file was
# found by its name but its line was not packed (a newcomer, session 39).
TSC_FRAME = re.compile(r"^[ \t]*((?:[A-Za-z]:)?[\w./\\@+-]+\.(?:[cm]?tsx?|[cm]?jsx?|vue))\((\d+),\d+\): (?:error|warning)",
                       re.M)

LANGUAGE = Language(
    name="typescript",
    grammars=(
        LanguageSpec("typescript", "tree_sitter_typescript", "language_typescript", (".ts", ".mts", ".cts"),
                     JS_DEFS, frozenset({"class_declaration", "abstract_class_declaration", "export_statement",
                                         "interface_declaration", "module", "internal_module"}),
                     frozenset({"import_statement"}),
                     chunk_units=JS_CHUNK_UNITS, extra_symbol=extra_symbol,
                     extra_types=EXTRA_TYPES, import_node=import_node),
        LanguageSpec("tsx", "tree_sitter_typescript", "language_tsx", (".tsx",),
                     JS_DEFS, frozenset({"class_declaration", "abstract_class_declaration", "export_statement"}),
                     frozenset({"import_statement"}),
                     chunk_units=JS_CHUNK_UNITS, extra_symbol=extra_symbol,
                     extra_types=EXTRA_TYPES, import_node=import_node),
    ),
    # `js:` specs are resolved by javascript.py (one owner per kind): the same rules load .ts files.
    test_names=(r".*[._-](test|spec)\.(ts|tsx|mts)$", r"^tests?\.ts$"),
    stack_frames=(TSC_FRAME,),
    fixture="shipyard",
)
