"""Ruby: ``require``/``require_relative``/``autoload`` resolved through the load path (``lib/``),
``x_test.rb``/``x_spec.rb``/``test_x.rb``, ``from lib/x.rb:12:in 'meth'`` frames."""

from __future__ import annotations

import os
import re

import tree_sitter as ts

from .base import FileIndex, Language, LanguageSpec, frame_file, node_text

# `require "x"` finds x.rb under a load path root; these are the folders gems, minitest and rspec put there.
_LOAD_ROOTS = frozenset({"lib", "test", "spec", "app", "ext"})
_REQUIRES = {"require": "rb", "require_relative": "rbrel", "load": "rb", "autoload": "rb", "require_dependency": "rb"}


def _name_of(node: ts.Node) -> str | None:
    n = node.child_by_field_name("name")
    if n is None:
        return None
    if n.type == "scope_resolution":  # `class Shop::Cart`: the class is Cart
        inner = n.child_by_field_name("name")
        return node_text(inner) if inner is not None else node_text(n)
    return node_text(n)


def _body_of(node: ts.Node) -> ts.Node | None:
    """A class's or module's members; for ``module M`` wrapping a single class or module (the usual shape of a
    gem's file), the members of what it wraps, so a large file splits into methods, not line windows."""
    body = node.child_by_field_name("body")
    if body is None:
        return None
    inner = [c for c in body.named_children if c.type != "comment"]
    if len(inner) == 1 and inner[0].type in ("class", "module"):
        return _body_of(inner[0]) or body
    return body


def _string(node: ts.Node) -> str | None:
    """A plain string literal's value; None for one with interpolation (``"#{dir}/x"``)."""
    if node.type != "string" or any(c.type == "interpolation" for c in node.named_children):
        return None
    return "".join(node_text(c) for c in node.named_children if c.type == "string_content")


def _expand_path(node: ts.Node) -> str | None:
    """``File.expand_path("../x", __FILE__)`` / ``File.expand_path("x", __dir__)`` / ``File.join(__dir__, "x")``:
    the required path relative to the requiring file's folder."""
    if node.type != "call":
        return None
    recv, meth, args = (node.child_by_field_name(f) for f in ("receiver", "method", "arguments"))
    if recv is None or node_text(recv) != "File" or meth is None or args is None:
        return None
    parts = list(args.named_children)
    name = node_text(meth)
    if name == "expand_path" and len(parts) == 2:
        rel, base = _string(parts[0]), node_text(parts[1])
        if rel is None:
            return None
        if base == "__FILE__":  # relative to the file itself: its first `..` is its folder
            return rel[3:] if rel.startswith("../") else (None if rel == ".." else rel)
        return rel if base in ("__dir__", "File.dirname(__FILE__)") else None
    if name == "join" and len(parts) >= 2 and node_text(parts[0]) in ("__dir__", "File.dirname(__FILE__)"):
        segs = [_string(p) for p in parts[1:]]
        return "/".join(segs) if all(s is not None for s in segs) else None  # type: ignore[misc]
    return None


def _import_node(node: ts.Node, out: list[str]) -> bool:
    if node.type != "call" or node.child_by_field_name("receiver") is not None:
        return False
    meth = node.child_by_field_name("method")
    kind = _REQUIRES.get(node_text(meth)) if meth is not None else None
    args = node.child_by_field_name("arguments")
    if kind is None or args is None or not args.named_child_count:
        return False
    arg = args.named_children[-1] if node_text(meth) == "autoload" else args.named_children[0]
    value = _string(arg)
    if value is not None:
        out.append(f"{kind}:{value}")
    else:
        rel = _expand_path(arg)
        if rel is not None:
            out.append(f"rbrel:{rel}")
    return True


def _rb(path: str) -> str:
    return path if path.endswith(".rb") else f"{path}.rb"


def _resolve(ix: FileIndex, importer: str, target: str) -> list[str]:
    """``require "mailbag/message"``: a file ``<root>/mailbag/message.rb`` whose root is a load path
    folder (``lib/``, ``test/``, ``spec/``) or the workspace root; the one nearest the importer."""
    rel = _rb(target.strip())
    if rel.startswith(("/", ".")):
        return _resolve_relative(ix, importer, target) if rel.startswith(".") else []
    cands = [f for f in ix.by_suffix.get(rel, ())
             if f == rel or os.path.basename(f[: -len(rel) - 1]) in _LOAD_ROOTS]
    if len(cands) <= 1:
        return cands
    near = set(ix.suffix(rel, importer))
    return [c for c in cands if c in near][:3]


def _resolve_relative(ix: FileIndex, importer: str, target: str) -> list[str]:
    base = os.path.normpath(os.path.join(os.path.dirname(importer), target)).replace(os.sep, "/")
    hit = _rb(base)
    return [hit] if hit in ix.files else []


LANGUAGE = Language(
    name="ruby",
    grammars=(
        LanguageSpec("ruby", "tree_sitter_ruby", "language", (".rb", ".rake", ".gemspec", ".ru"),
                     {"class": "class", "module": "module", "method": "function", "singleton_method": "function"},
                     frozenset({"class", "module", "singleton_class"}),
                     frozenset({"call"}),
                     chunk_units=frozenset({"singleton_class"}),
                     name_of=_name_of, import_node=_import_node, import_depth=8, body_of=_body_of),
    ),
    resolvers={"rb": _resolve, "rbrel": _resolve_relative},
    test_names=(r".*_test\.rb$", r".*_spec\.rb$", r"^test_.*\.rb$"),
    test_prefixes=("test_",),
    test_suffixes=("_test", "_spec"),
    # `lib/x.rb:12:in 'meth'` (Ruby 3.4), `` lib/x.rb:12:in `meth' `` (older), with or without `from `.
    stack_frames=(re.compile(frame_file("rb|rake|ru|gemspec") + r":(\d+):in [`']"),),
    trace_markers=(r"^[ \t]+from \S+\.rb:\d+:in [`']", r"\.rb:\d+:in [`'][^\n]*\([\w:]+\)$"),
)
