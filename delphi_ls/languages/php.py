"""PHP: ``use Ns\\Cls`` resolved through composer.json's PSR-4 map (else by path), ``require``/``include``
of literal paths, ``FooTest.php``, ``#0 /path/File.php(42)`` and ``in /path/File.php on line 42`` frames.

The grammar is ``language_php`` (PHP inside HTML), not ``language_php_only``: a ``.php`` file starts with
``<?php`` and templates mix HTML with ``<?php ... ?>``; the PHP-only grammar reads both as errors.
"""

from __future__ import annotations

import os
import re

import tree_sitter as ts

from .base import FileIndex, Language, LanguageSpec, frame_file, json_object, node_text

_INCLUDES = frozenset({"require_expression", "require_once_expression", "include_expression",
                       "include_once_expression"})


def _names_no_class(node: ts.Node) -> bool:
    """``use function A\\f;`` / ``use const A\\X;`` (the keyword sits on the clause or the declaration)."""
    return any(not c.is_named and c.type in ("function", "const") for c in node.children)


def _clauses(node: ts.Node, prefix: str, out: list[str]) -> None:
    """Every ``namespace_use_clause`` under a ``use`` (grouped ``use A\\{B, C}`` adds the prefix)."""
    for c in node.named_children:
        if c.type == "namespace_use_clause" and not _names_no_class(c):
            name = next((x for x in c.named_children if x.type in ("qualified_name", "name")), None)
            if name is not None:
                out.append("php:" + (prefix + "\\" if prefix else "") + node_text(name).lstrip("\\"))
        elif c.type == "namespace_use_group":
            _clauses(c, prefix, out)


def _include_path(node: ts.Node) -> str | None:
    """The path an include expression names, relative to the including file's folder when it is built
    from ``__DIR__``/``dirname(__FILE__)``/``dirname(__DIR__, n)``; None when it is computed."""
    if node.type in ("string", "encapsed_string"):
        if any(c.type not in ("string_content", "string_value") for c in node.named_children):
            return None
        return "".join(node_text(c) for c in node.named_children)
    if node.type == "parenthesized_expression" and node.named_child_count == 1:
        return _include_path(node.named_children[0])
    if node.type != "binary_expression":
        return None
    left, right = node.child_by_field_name("left"), node.child_by_field_name("right")
    if left is None or right is None:
        return None
    tail = _include_path(right)
    if tail is None:
        return None
    base = re.sub(r"\s+", "", node_text(left))
    up = {"__DIR__": 0, "dirname(__FILE__)": 0, "dirname(__DIR__)": 1, "dirname(dirname(__FILE__))": 1}.get(base)
    m = re.fullmatch(r"dirname\(__DIR__,(\d)\)", base)
    if m:
        up = int(m.group(1))
    if up is None:
        return None
    return "./" + "../" * up + tail.lstrip("/")


def _import_node(node: ts.Node, out: list[str]) -> bool:
    t = node.type
    if t == "namespace_use_declaration":
        if _names_no_class(node):  # a function or constant lives in no file of its own name
            return True
        prefix = next((node_text(c) for c in node.named_children if c.type == "namespace_name"), "")
        _clauses(node, prefix.lstrip("\\"), out)
        return True
    if t in _INCLUDES:
        arg = node.named_children[0] if node.named_child_count else None
        path = _include_path(arg) if arg is not None else None
        if path:
            out.append(f"phpinc:{path}")
        return True
    return False


def composer_json(text: str) -> list[str]:
    """``composer.json``'s PSR-4 (and PSR-0) prefixes: ``psr4:Acme\\Invoice\\=src/`` per folder."""
    data = json_object(text)
    if data is None:
        return []
    out: list[str] = []
    for section in ("autoload", "autoload-dev"):
        auto = data.get(section)
        if not isinstance(auto, dict):
            continue
        for std in ("psr-4", "psr-0"):
            mapping = auto.get(std)
            if not isinstance(mapping, dict):
                continue
            for prefix, dirs in mapping.items():
                for d in dirs if isinstance(dirs, list) else [dirs]:
                    if isinstance(prefix, str) and isinstance(d, str):
                        out.append(f"{std.replace('-', '')}:{prefix}={d}")
    return list(dict.fromkeys(out))


def _autoload(ix: FileIndex) -> list[tuple[str, str, str]]:
    """(namespace prefix, folder, standard) from every composer.json, longest prefix first."""
    out = []
    for path, spec in ix.manifest_specs:
        if os.path.basename(path) != "composer.json":
            continue
        kind, _, value = spec.partition(":")
        prefix, _, d = value.partition("=")
        folder = os.path.normpath(os.path.join(os.path.dirname(path), d)).replace(os.sep, "/")
        out.append((prefix.strip("\\"), "" if folder == "." else folder, kind))
    return sorted(out, key=lambda x: -len(x[0]))


def _resolve_use(ix: FileIndex, importer: str, target: str) -> list[str]:
    """``Acme\\Invoice\\Money\\Money``: the file PSR-4 maps it to, else a file whose path ends with the
    name's last segments (``Money/Money.php``; Laravel's ``app/`` for ``App\\``)."""
    name = target.strip("\\")
    for prefix, folder, std in ix.memo("php.autoload", _autoload):
        if prefix and not name.startswith(prefix + "\\"):
            continue
        rest = name if std == "psr0" else name[len(prefix):].lstrip("\\")
        cand = f"{folder}/{rest.replace(chr(92), '/')}.php".lstrip("/")
        if cand in ix.files:
            return [cand]
    segs = name.split("\\")
    for n in range(len(segs), min(2, len(segs)) - 1, -1):
        hit = ix.suffix("/".join(segs[-n:]) + ".php", importer)
        if hit:
            return hit
    return []


def _resolve_include(ix: FileIndex, importer: str, target: str) -> list[str]:
    """``require __DIR__ . '/../src/helpers.php'``: relative to the file; a bare ``'x.php'`` also from the root."""
    here = os.path.dirname(importer)
    cands = [os.path.normpath(os.path.join(here, target)).replace(os.sep, "/")]
    if not target.startswith("."):
        cands.append(os.path.normpath(target).replace(os.sep, "/"))
    return [c for c in cands if c in ix.files][:1]


_PHP_FILE = frame_file("php|phtml|inc")
LANGUAGE = Language(
    name="php",
    grammars=(
        LanguageSpec("php", "tree_sitter_php", "language_php", (".php",),
                     {"namespace_definition": "namespace", "class_declaration": "class",
                      "interface_declaration": "interface", "trait_declaration": "trait",
                      "enum_declaration": "enum", "function_definition": "function",
                      "method_declaration": "method"},
                     frozenset({"namespace_definition", "class_declaration", "interface_declaration",
                                "trait_declaration", "enum_declaration"}),
                     frozenset({"namespace_use_declaration", *_INCLUDES}),
                     sibling_scopes=frozenset({"namespace_definition"}),  # `namespace A\B;` holds what follows
                     import_node=_import_node, import_depth=9),
    ),
    resolvers={"php": _resolve_use, "phpinc": _resolve_include},
    test_names=(r".*Test\.php$",),
    test_suffixes=("Test",),
    # `#0 /srv/app/src/Invoice.php(42): Acme\Invoice->total()`, `... in /srv/app/src/Money.php:57`,
    # `PHP Fatal error: ... in /srv/app/src/Money.php on line 57` (and `thrown in ... on line 57`).
    stack_frames=(re.compile(_PHP_FILE + r"\((\d+)\): "),
                  re.compile(r"\bin " + _PHP_FILE + r"(?::| on line )(\d+)")),
    trace_markers=(r"^PHP (?:Fatal error|Warning|Notice|Parse error):", r"^#\d+ \S+\.php\(\d+\): "),
    manifests={"composer.json": composer_json},
    manifest_kinds=("psr4", "psr0"),
)
