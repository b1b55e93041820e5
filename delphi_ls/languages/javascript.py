"""JavaScript: ES imports, ``require``/``import()`` calls and ``package.json`` entry points; ``x.test.js``.

The import reader, resolver and definitions here serve TypeScript too (``typescript.py``).
"""

from __future__ import annotations

import os
import re

import tree_sitter as ts

from .base import FileIndex, Language, LanguageSpec, field_name, json_object, node_text

_STRING = re.compile(r"""^['"`](.*)['"`]$""", re.S)

JS_DEFS = {
    "function_declaration": "function", "generator_function_declaration": "function",
    "class_declaration": "class", "method_definition": "method",
    "interface_declaration": "interface", "type_alias_declaration": "type", "enum_declaration": "enum",
    "abstract_class_declaration": "class", "function_signature": "function",
}
# Not definitions, but each starts its own chunk: `export ...` and `const x = ...` at the top level.
JS_CHUNK_UNITS = frozenset({"export_statement", "lexical_declaration"})
_FUNCTION_VALUES = ("arrow_function", "function_expression", "function", "class")
# Every extension an import may leave off, in the order a bundler tries them.
_EXTS = (".ts", ".tsx", ".js", ".jsx", ".mjs", ".cjs", ".mts", ".cts", ".vue", ".svelte")


# What extra_symbol answers for.
EXTRA_TYPES = frozenset({"variable_declarator", "assignment_expression", "field_definition", "public_field_definition"})
# `exports.x = …`, `module.exports = …`, `module.exports.x = …`, `Foo.prototype.x = …`: a module's or a class's
# member by assignment (CommonJS; the koa-compose and express shapes).
_EXPORTED = re.compile(r"^(?:exports|module\.exports|module)(?:\.[\w$]+)?$|^[\w$]+\.prototype\.[\w$]+$")


def extra_symbol(node: ts.Node) -> tuple[str, str] | None:
    """``const f = () => ...`` / ``const C = class ...``: a function or class by its variable's name; the same
    assigned to a module's exports or a prototype (``exports.compose = function compose…``, ``module.exports =
    class Layer…``), and a class field holding a function (``handleWebhook = async () => …``). The last three were
    no symbols: absent from outlines, lenses, hover and the symbol branch (a newcomer, session 37)."""
    t = node.type
    if t == "variable_declarator":
        value = node.child_by_field_name("value")
        if value is None or value.type not in _FUNCTION_VALUES:
            return None
        name = field_name(node)
        return ("class" if value.type == "class" else "function", name) if name else None
    if t == "assignment_expression":
        value, left = node.child_by_field_name("right"), node.child_by_field_name("left")
        if value is None or left is None or value.type not in _FUNCTION_VALUES or left.type != "member_expression":
            return None
        target = node_text(left)
        if not _EXPORTED.match(target):
            return None
        name = target.rpartition(".")[2]  # the name callers use: `exports.a = function b()` is `a`
        if name in ("exports", "module"):  # `module.exports = class Layer`: its own name, if it has one
            own = value.child_by_field_name("name")
            if own is None:
                return None
            name = node_text(own)
        return ("class" if value.type == "class" else "function", name)
    if t in ("field_definition", "public_field_definition"):
        value = node.child_by_field_name("value")
        key = node.child_by_field_name("property" if t == "field_definition" else "name")
        if value is None or key is None or value.type not in ("arrow_function", "function_expression", "function"):
            return None
        return ("method", node_text(key))
    return None


def import_node(node: ts.Node, out: list[str]) -> bool:
    """``import ... from 'x'``, ``export ... from 'x'``, ``require('x')``, ``import('x')`` -> ``js:x``."""
    t = node.type
    if t in ("import_statement", "export_statement"):
        src = node.child_by_field_name("source")
        if src is not None:
            m = _STRING.match(node_text(src))
            if m:
                out.append(f"js:{m.group(1)}")
    elif t == "call_expression":
        fn = node.child_by_field_name("function")
        args = node.child_by_field_name("arguments")
        if fn is not None and node_text(fn) in ("require", "import") and args is not None and args.named_child_count:
            m = _STRING.match(node_text(args.named_children[0]))
            if m:
                out.append(f"js:{m.group(1)}")
    return False  # an export statement or a call may hold more imports


def package_json(text: str) -> list[str]:
    """A ``package.json``'s entry point and name, so ``require('../..')`` and a package's tests that
    import it by name (``require('koa')``) resolve to the file they load."""
    data = json_object(text)
    if data is None:
        return []
    out: list[str] = []
    entries = [data.get("main"), data.get("module"), data.get("source")]
    exports = data.get("exports")
    dot = exports.get(".") if isinstance(exports, dict) else exports
    if isinstance(dot, dict):
        entries += [dot.get(k) for k in ("source", "require", "import", "default", "types")]
    elif isinstance(dot, str):
        entries.append(dot)
    for e in entries:
        if isinstance(e, str) and e and not e.startswith(("http:", "https:")):
            out.append(f"pkgmain:{e}")
    if isinstance(data.get("name"), str) and data["name"]:
        out.append(f"pkgname:{data['name']}")
    return list(dict.fromkeys(out))


def js_file(ix: FileIndex, base: str) -> str | None:
    """The file an extension-less (or ``.js``-suffixed TypeScript) import path loads."""
    if base.startswith(".."):
        return None
    stem, ext = os.path.splitext(base)
    cands = [base] if ext else []
    cands += [base + e for e in _EXTS] + [f"{base}/index{e}".lstrip("/") for e in _EXTS]
    if ext in (".js", ".mjs", ".cjs", ".jsx"):  # TS sources imported with a .js suffix
        cands += [stem + e for e in (".ts", ".tsx", ".mts", ".cts")]
    return next((c for c in cands if c in ix.files), None)


def _packages(ix: FileIndex) -> tuple[dict[str, str], dict[str, str]]:
    """package folder -> entry file (the first that exists), package name -> folder (from package.json)."""
    pkg_main: dict[str, str] = {}
    pkg_name: dict[str, str] = {}
    for path, spec in ix.manifest_specs:
        if os.path.basename(path) != "package.json":
            continue
        folder = os.path.dirname(path)
        kind, _, value = spec.partition(":")
        if kind == "pkgname":
            pkg_name.setdefault(value, folder)
        elif kind == "pkgmain":
            entry = js_file(ix, os.path.normpath(os.path.join(folder, value)).replace(os.sep, "/"))
            if entry:
                pkg_main.setdefault(folder, entry)
    return pkg_main, pkg_name


def resolve(ix: FileIndex, importer: str, target: str) -> list[str]:
    pkg_main, pkg_name = ix.memo("javascript.packages", _packages)
    if not target.startswith("."):
        # the workspace's own package imported by name: `require('koa')`, `from 'ky/x'`
        name, rest = target, ""
        parts = target.split("/")
        for n in (2, 1):
            if "/".join(parts[:n]) in pkg_name:
                name, rest = "/".join(parts[:n]), "/".join(parts[n:])
                break
        folder = pkg_name.get(name)
        if folder is None:
            return []
        if not rest:
            return [pkg_main[folder]] if folder in pkg_main else []
        hit = js_file(ix, f"{folder}/{rest}".lstrip("/"))
        return [hit] if hit else []
    base = os.path.normpath(os.path.join(os.path.dirname(importer), target)).replace(os.sep, "/")
    if base == ".":
        base = ""
    hit = js_file(ix, base)
    if hit:
        return [hit]
    return [pkg_main[base]] if base in pkg_main else []  # a package folder: its entry point


# `at fn (file.js:12:5)` / `at file.js:12`: Node's frames, and the same shape from other runtimes; an awaited
# frame (`at async Foo.bar (…)`, every frame of async code), a constructor's (`at new Foo (…)`), an aliased
# method's (`at Foo.bar [as baz] (…)`) and an ES module's URL (`at file:///app/src/main.ts:12:3`) were
# skipped, so an async trace lost most of its frames (a newcomer, session 37).
# A browser's frames name a dev server's URL (`at insert (http://localhost:5173/packages/x/src/nodeOps.ts:46:12)`,
# a module Vite reloaded with `?t=1712…` after it) or a source map's (`webpack:///./src/x.ts`): read as the path
# after the host, the query left out (Chrome's trace gave no frame: a newcomer, session 39).
# A private method's frame (`at Ky.#readResponseText (…)`) and an accessor's (`at Object.set status [as status] (…)`)
# were skipped, and the frame where the error happened with them (a newcomer pasting traces, session 44).
AT_FRAME = re.compile(r"at (?:async )?(?:new )?(?:[\w$.<>\[\]#]+(?: [\w$#]+)? )?(?:\[as [\w$#]+\] )?\(?"
                      r"(?:file://(?:/(?=[A-Za-z]:))?|"
                      r"(?:https?|webpack(?:-internal)?)://[\w.:@-]*(?=/))?"
                      r"((?:[A-Za-z]:)?[\w./\\@+-]+\.\w+)(?:\?[\w=&.%-]*)?:(\d+)(?::\d+)?\)?")
# Firefox's and Safari's frames: `insert@http://localhost:5173/packages/runtime-dom/src/nodeOps.ts:46:12`, `@file.js:3:1`
# (an anonymous function's); read as a trace's words only before (a newcomer, session 39).
# A path with a folder: `user@host.example.com:2222` is a login, not a frame (review).
AT_SIGN_FRAME = re.compile(r"^[ \t]*[\w$.<>/\[\]*-]*@(?:file://(?:/(?=[A-Za-z]:))?|(?:https?|webpack(?:-internal)?)://"
                           r"[\w.:@-]*(?=/))?((?:[A-Za-z]:)?[\w.\\@+-]*[/\\][\w./\\@+-]*\.\w+)(?:\?[\w=&.%-]*)?:(\d+)"
                           r"(?::\d+)?[ \t]*$", re.M)
# Vitest's frames (`❯ patchBlockChildren packages/runtime-core/src/renderer.ts:994:13`), its default reporter's: a
# pasted Vitest failure gave no frame at all (a newcomer, session 38, on vue's repository).
VITEST_FRAME = re.compile(r"^[ \t]*❯ (?:[\w$.<>\[\]]+ )?((?:[A-Za-z]:)?[\w./\\@+-]+\.\w+):(\d+)(?::\d+)?", re.M)

LANGUAGE = Language(
    name="javascript",
    grammars=(
        LanguageSpec("javascript", "tree_sitter_javascript", "language", (".js", ".jsx", ".mjs", ".cjs"),
                     JS_DEFS, frozenset({"class_declaration", "export_statement"}),
                     frozenset({"import_statement"}),
                     chunk_units=JS_CHUNK_UNITS, extra_symbol=extra_symbol,
                     extra_types=EXTRA_TYPES, import_node=import_node),
    ),
    resolvers={"js": resolve},
    test_names=(r".*[._-](test|spec)\.(js|jsx|mjs|cjs)$", r"^tests?\.js$"),
    stack_frames=(AT_FRAME, AT_SIGN_FRAME, VITEST_FRAME),
    manifests={"package.json": package_json},
    manifest_kinds=("pkgmain", "pkgname"),
    fixture="shipyard",
)
