"""Java: ``import a.b.C`` by package path (Kotlin files too), ``XTest.java``/``XIT.java``, ``(X.java:12)``."""

from __future__ import annotations

import re

import tree_sitter as ts

from .base import FileIndex, Language, LanguageSpec, node_text


def _import_node(node: ts.Node, out: list[str]) -> bool:
    if node.type != "import_declaration":
        return False
    txt = node_text(node).removeprefix("import").strip().rstrip(";").strip()
    out.append(f"java:{txt.removeprefix('static ').strip()}")
    return True


def _resolve(ix: FileIndex, importer: str, target: str) -> list[str]:
    t = target.rstrip(".*")
    path = t.replace(".", "/")
    hit = ix.suffix(f"{path}.java", importer) or ix.suffix(f"{path}.kt", importer)
    if hit:
        return hit
    if target.endswith("*"):
        return [f for f in ix.dirs.get(path, []) if f.endswith((".java", ".kt"))][:20]
    # `import a.b.C.method` (static): drop the member
    parent = path.rsplit("/", 1)[0]
    return ix.suffix(f"{parent}.java", importer)


LANGUAGE = Language(
    name="java",
    grammars=(
        LanguageSpec("java", "tree_sitter_java", "language", (".java",),
                     {"class_declaration": "class", "interface_declaration": "interface",
                      "enum_declaration": "enum", "record_declaration": "class",
                      "annotation_type_declaration": "interface",
                      "method_declaration": "method", "constructor_declaration": "constructor"},
                     frozenset({"class_declaration", "interface_declaration", "enum_declaration",
                                "record_declaration"}),
                     frozenset({"import_declaration", "package_declaration"}),
                     import_node=_import_node, import_depth=1),  # imports are the program's children
    ),
    resolvers={"java": _resolve},
    # `FooTest.java`, `FooTests.java`: a capital T, so `Latest.java`, `Contest.java` are not tests (a newcomer,
    # session 37: they were, and ranked below unrelated files).
    test_names=(r".*Tests?\.java$", r".*IT\.java$"),
    # Gradle source sets named for tests (`src/jvmTest/`, `src/commonTest/`, `src/androidTest/`); paths are
    # matched lower-cased. `src/test/` is a test folder for every language already.
    test_dirs=(r"(^|/)src/(?:jvm|common|android|androidunit|androidinstrumented|ios|js|wasm\w*|native|"
               r"linux\w*|macos\w*|mingw\w*|apple|integration|functional|acceptance|e2e|unit)test/",),
    # `at com.acme.orders.OrderService.checkout(OrderService.java:25)`: the file, with its package as folders
    # (`com/acme/orders/OrderService.java`), so of two `OrderService.java` the one in that package is the frame's
    # (by the most trailing parts shared; by the name alone it was neither: a newcomer, session 37).
    # The package's parts start lower-case and the class's upper-case, so where one ends is never in doubt (a
    # pattern where the two overlapped took 65 s on a pasted `at a.a.a…` of 100 KB; review).
    stack_frames=(re.compile(r"(?:\bat (?:[\w.$-]+/)?(?P<pkg>(?:[a-z_]\w*\.)+)[A-Z$][\w$<>.-]*)?"
                             r"\((?P<file>[\w$]+\.(?:java|kt|scala)):(?P<line>\d+)\)"),),
    trace_markers=(r"^[ \t]+at [\w$.]+\(", r"Exception in thread"),
    fixture="shipyard",
)
