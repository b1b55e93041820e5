"""Python: ``import``/``from`` specs resolved by module path, ``test_x.py``/``x_test.py``, traceback frames."""

from __future__ import annotations

import os
import re

import tree_sitter as ts

from .base import FileIndex, Language, LanguageSpec, node_text


def _import_node(node: ts.Node, out: list[str]) -> bool:
    t = node.type
    if t == "import_from_statement":
        mod = node.child_by_field_name("module_name")
        base = node_text(mod) if mod is not None else ""
        names = node.children_by_field_name("name")
        out.append(f"py:{base}")
        if base.strip(".") == "" or base.endswith("."):
            out.extend(f"py:{base}{node_text(n).split(' as ')[0]}" for n in names)
        else:
            out.extend(f"py:{base}.{node_text(n).split(' as ')[0]}" for n in names)
        return True
    if t == "import_statement":
        for n in node.children_by_field_name("name"):
            out.append(f"py:{node_text(n).split(' as ')[0]}")
        return True
    return False


def _resolve(ix: FileIndex, importer: str, target: str) -> list[str]:
    here = os.path.dirname(importer)
    level = len(target) - len(target.lstrip("."))
    mod = target.lstrip(".").replace(".", "/")
    if level:
        base = here
        for _ in range(level - 1):
            base = os.path.dirname(base)
        rel = f"{base}/{mod}".strip("/") if mod else base
        for cand in (f"{rel}.py", f"{rel}/__init__.py"):
            if cand in ix.files:
                return [cand]
        return []
    if not mod:
        return []
    return ix.module((f"{mod}.py", f"{mod}/__init__.py"), importer)


LANGUAGE = Language(
    name="python",
    grammars=(
        LanguageSpec("python", "tree_sitter_python", "language", (".py", ".pyi"),
                     {"function_definition": "function", "class_definition": "class"},
                     frozenset({"class_definition", "decorated_definition"}),
                     frozenset({"import_statement", "import_from_statement", "future_import_statement"}),
                     chunk_units=frozenset({"decorated_definition"}),
                     literals=frozenset({"list", "set", "tuple", "dictionary", "string", "concatenated_string"}),
                     import_node=_import_node),
    ),
    resolvers={"py": _resolve},
    test_names=(r"^test_.*\.py$", r".*_test\.py$", r"^tests?\.py$"),
    stack_frames=(re.compile(r'File "([^"]+)", line (\d+)'),),
    trace_markers=(r"Traceback \(most recent call last\)",),
    fixture="shipyard",
)
