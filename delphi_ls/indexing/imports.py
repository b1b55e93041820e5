"""Import specs from tree-sitter trees, and their resolution to workspace files.

Extraction happens while chunking (the tree is at hand); resolution happens when the
file graph is built, against the current file list, so a file added later resolves
imports written earlier.
"""

from __future__ import annotations

import json
import os
import re

import tree_sitter as ts

from .languages import LanguageSpec

_STRING = re.compile(r"""^['"`](.*)['"`]$""", re.S)


def _text(n: ts.Node) -> str:
    return n.text.decode("utf-8", errors="replace") if n.text is not None else ""


def extract_imports(root: ts.Node, spec: LanguageSpec) -> list[str]:
    """Raw import specs: ``py:.models``, ``js:./util``, ``go:github.com/x/y``, ``rs:crate::a::b``, ``java:a.b.C``."""
    out: list[str] = []
    lang = spec.name

    def visit(node: ts.Node, depth: int) -> None:
        if depth > 6:
            return
        t = node.type
        if lang == "python" and t in ("import_statement", "import_from_statement"):
            if t == "import_from_statement":
                mod = node.child_by_field_name("module_name")
                base = _text(mod) if mod is not None else ""
                names = [c for c in node.children_by_field_name("name")]
                out.append(f"py:{base}")
                if base.strip(".") == "" or base.endswith("."):
                    out.extend(f"py:{base}{_text(n).split(' as ')[0]}" for n in names)
                else:
                    out.extend(f"py:{base}.{_text(n).split(' as ')[0]}" for n in names)
            else:
                for n in node.children_by_field_name("name"):
                    out.append(f"py:{_text(n).split(' as ')[0]}")
            return
        if lang in ("javascript", "typescript", "tsx"):
            if t in ("import_statement", "export_statement"):
                src = node.child_by_field_name("source")
                if src is not None:
                    m = _STRING.match(_text(src))
                    if m:
                        out.append(f"js:{m.group(1)}")
            elif t == "call_expression":
                fn = node.child_by_field_name("function")
                args = node.child_by_field_name("arguments")
                if fn is not None and _text(fn) in ("require", "import") and args is not None and args.named_child_count:
                    m = _STRING.match(_text(args.named_children[0]))
                    if m:
                        out.append(f"js:{m.group(1)}")
        if lang == "go" and t == "import_spec":
            p = node.child_by_field_name("path")
            if p is not None:
                out.append(f"go:{_text(p).strip(chr(34)).strip('`')}")
            return
        if lang == "rust":
            if t == "use_declaration":
                arg = node.child_by_field_name("argument")
                if arg is not None:
                    out.append("rs:" + re.sub(r"\s+", "", _text(arg)))
                return
            if t == "mod_item" and node.child_by_field_name("body") is None:
                name = node.child_by_field_name("name")
                if name is not None:
                    out.append(f"rsmod:{_text(name)}")
                return
        if lang == "java" and t == "import_declaration":
            txt = _text(node).removeprefix("import").strip().rstrip(";").strip()
            out.append(f"java:{txt.removeprefix('static ').strip()}")
            return
        for c in node.named_children:
            visit(c, depth + 1)

    visit(root, 0)
    return list(dict.fromkeys(out))


def manifest_imports(path: str, text: str) -> list[str]:
    """A ``package.json``'s entry point and name, so ``require('../..')`` and a package's tests that
    import it by name (``require('koa')``) resolve to the file they load."""
    if os.path.basename(path) != "package.json":
        return []
    try:
        data = json.loads(text)
    except ValueError:
        return []
    if not isinstance(data, dict):
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


class Resolver:
    """Maps import specs to workspace files by path suffix, per language's conventions."""

    def __init__(self, files: list[str], imports: list[tuple[str, str]] | None = None) -> None:
        self.files = set(files)
        # package folder -> entry file (the first that exists), package name -> folder (package.json)
        self.pkg_main: dict[str, str] = {}
        self.pkg_name: dict[str, str] = {}
        for path, spec in imports or ():
            if os.path.basename(path) != "package.json":
                continue
            folder = os.path.dirname(path)
            kind, _, value = spec.partition(":")
            if kind == "pkgname":
                self.pkg_name.setdefault(value, folder)
            elif kind == "pkgmain":
                entry = self._js_file(os.path.normpath(os.path.join(folder, value)).replace(os.sep, "/"))
                if entry:
                    self.pkg_main.setdefault(folder, entry)
        self.by_suffix: dict[str, list[str]] = {}
        self.dirs: dict[str, list[str]] = {}
        for f in files:
            parts = f.split("/")
            for i in range(len(parts)):
                self.by_suffix.setdefault("/".join(parts[i:]), []).append(f)
            self.dirs.setdefault(os.path.dirname(f), []).append(f)

    def _suffix(self, rel: str, near: str) -> list[str]:
        cands = self.by_suffix.get(rel, [])
        if len(cands) <= 1:
            return cands
        # Several files end the same way: prefer the one sharing most of the importer's path.
        def shared(c: str) -> int:
            n = 0
            for a, b in zip(c.split("/"), near.split("/"), strict=False):
                if a != b:
                    break
                n += 1
            return n
        best = max(shared(c) for c in cands)
        return [c for c in cands if shared(c) == best][:3]

    def _js_file(self, base: str) -> str | None:
        if base.startswith(".."):
            return None
        stem, ext = os.path.splitext(base)
        cands = [base] if ext else []
        exts = (".ts", ".tsx", ".js", ".jsx", ".mjs", ".cjs", ".mts", ".cts", ".vue", ".svelte")
        cands += [base + e for e in exts] + [f"{base}/index{e}".lstrip("/") for e in exts]
        if ext in (".js", ".mjs", ".cjs", ".jsx"):  # TS sources imported with a .js suffix
            cands += [stem + e for e in (".ts", ".tsx", ".mts", ".cts")]
        return next((c for c in cands if c in self.files), None)

    def resolve(self, importer: str, spec: str) -> list[str]:
        kind, _, target = spec.partition(":")
        here = os.path.dirname(importer)
        if kind == "py":
            level = len(target) - len(target.lstrip("."))
            mod = target.lstrip(".").replace(".", "/")
            if level:
                base = here
                for _ in range(level - 1):
                    base = os.path.dirname(base)
                rel = f"{base}/{mod}".strip("/") if mod else base
                for cand in (f"{rel}.py", f"{rel}/__init__.py"):
                    if cand in self.files:
                        return [cand]
                return []
            if not mod:
                return []
            return self._suffix(f"{mod}.py", importer) or self._suffix(f"{mod}/__init__.py", importer)
        if kind == "js":
            if not target.startswith("."):
                # the workspace's own package imported by name: `require('koa')`, `from 'ky/x'`
                name, rest = target, ""
                parts = target.split("/")
                for n in (2, 1):
                    if "/".join(parts[:n]) in self.pkg_name:
                        name, rest = "/".join(parts[:n]), "/".join(parts[n:])
                        break
                folder = self.pkg_name.get(name)
                if folder is None:
                    return []
                if not rest:
                    return [self.pkg_main[folder]] if folder in self.pkg_main else []
                hit = self._js_file(f"{folder}/{rest}".lstrip("/"))
                return [hit] if hit else []
            base = os.path.normpath(os.path.join(here, target)).replace(os.sep, "/")
            if base == ".":
                base = ""
            hit = self._js_file(base)
            if hit:
                return [hit]
            return [self.pkg_main[base]] if base in self.pkg_main else []  # a package folder: its entry point
        if kind == "go":
            segs = target.split("/")
            for i in range(len(segs)):
                d = "/".join(segs[i:])
                files = [f for f in self.dirs.get(d, []) if f.endswith(".go") and not f.endswith("_test.go")]
                if files:
                    return files[:20]
            return []
        if kind == "rsmod":
            for c in (f"{here}/{target}.rs", f"{here}/{target}/mod.rs"):
                if c.lstrip("/") in self.files:
                    return [c.lstrip("/")]
            return []
        if kind == "rs":
            segs = [s for s in re.split(r"::", target.split("{")[0]) if s and s not in ("self", "*")]
            if not segs:
                return []
            root = segs[0]
            if root == "crate":
                padded = f"/{here}/"
                cut = padded.find("/src/")
                crate_src = padded[: cut + 4].strip("/") if cut >= 0 else "src"
                segs = segs[1:]
                base = crate_src
            elif root == "super":
                base = os.path.dirname(here)
                segs = segs[1:]
            else:
                base = None
            for n in range(len(segs), 0, -1):
                path = "/".join(segs[:n])
                for c in (f"{path}.rs", f"{path}/mod.rs"):
                    full = f"{base}/{c}".lstrip("/") if base is not None else None
                    if full and full in self.files:
                        return [full]
                    if base is None:
                        hit = self._suffix(c, importer)
                        if hit:
                            return hit
            return []
        if kind == "java":
            t = target.rstrip(".*")
            path = t.replace(".", "/")
            hit = self._suffix(f"{path}.java", importer) or self._suffix(f"{path}.kt", importer)
            if hit:
                return hit
            if target.endswith("*"):
                return [f for f in self.dirs.get(path, []) if f.endswith((".java", ".kt"))][:20]
            # `import a.b.C.method` (static): drop the member
            parent = path.rsplit("/", 1)[0]
            return self._suffix(f"{parent}.java", importer)
        return []
