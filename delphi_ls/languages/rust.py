"""Rust: ``use`` paths and ``mod x;`` resolved through the crate's ``src/``, ``x_test.rs``, panics."""

from __future__ import annotations

import os
import re
import tomllib

import tree_sitter as ts

from .base import FileIndex, Language, LanguageSpec, node_text


def _name_of(node: ts.Node) -> str | None:
    """An ``impl`` block is named by its type, ``impl Trait for Type`` by both."""
    n = node.child_by_field_name("name")
    if n is None and node.type == "impl_item":
        n = node.child_by_field_name("type")
        trait = node.child_by_field_name("trait")
        if n is not None and trait is not None:
            return f"{node_text(trait)} for {node_text(n)}"
    return None if n is None else node_text(n)


def _import_node(node: ts.Node, out: list[str]) -> bool:
    t = node.type
    if t == "use_declaration":
        arg = node.child_by_field_name("argument")
        if arg is not None:
            out.append("rs:" + re.sub(r"\s+", "", node_text(arg)))
        return True
    if t == "mod_item" and node.child_by_field_name("body") is None:
        name = node.child_by_field_name("name")
        if name is not None:
            out.append(f"rsmod:{node_text(name)}")
        return True
    return False


def _resolve_mod(ix: FileIndex, importer: str, target: str) -> list[str]:
    """``mod parser;`` -> ``parser.rs`` or ``parser/mod.rs`` beside the declaring file."""
    here = os.path.dirname(importer)
    for c in (f"{here}/{target}.rs", f"{here}/{target}/mod.rs"):
        if c.lstrip("/") in ix.files:
            return [c.lstrip("/")]
    return []


def cargo_toml(text: str) -> list[str]:
    """A ``Cargo.toml``'s crate name as ``use`` writes it (``crate:kv_store`` for ``kv-store``; the ``[lib]``
    name when it has one), so the crate's integration tests (``tests/x.rs``: ``use kv_store::Store``) and the
    crates beside it resolve to its ``src/``. They resolved to nothing (a newcomer, session 37)."""
    try:
        data = tomllib.loads(text)
    except (tomllib.TOMLDecodeError, UnicodeError):
        return []
    for table in ("lib", "package"):
        name = data.get(table, {}).get("name") if isinstance(data.get(table), dict) else None
        if isinstance(name, str) and name:
            return [f"crate:{name.replace('-', '_')}"]
    return []


def _crates(ix: FileIndex) -> dict[str, list[str]]:
    """Crate name -> the folders of the ``Cargo.toml`` files naming it."""
    out: dict[str, list[str]] = {}
    for path, spec in ix.manifest_specs:
        kind, _, name = spec.partition(":")
        if kind == "crate":
            out.setdefault(name, []).append(os.path.dirname(path))
    return out


def _resolve_use(ix: FileIndex, importer: str, target: str) -> list[str]:
    """``crate::a::b::C`` from the crate's ``src/``, ``super::x`` from the parent folder, ``<a crate of the
    workspace>::a::C`` from that crate's ``src/`` (its ``lib.rs`` for what it re-exports), else by suffix."""
    here = os.path.dirname(importer)
    segs = [s for s in re.split(r"::", target.split("{")[0]) if s and s not in ("self", "*")]
    if not segs:
        return []
    root = segs[0]
    crates = ix.memo("rust_crates", _crates).get(root) if root not in ("crate", "super") else None
    lib = None  # a named crate's root module: what it re-exports (`use kv_store::Store`) is there
    base: str | None
    if crates:
        # The crate folder sharing most of the importer's path (a workspace of crates may repeat a name).
        folder = max(crates, key=lambda f: (len(os.path.commonpath([f"/{f}", f"/{importer}"])), f))
        base = f"{folder}/src".lstrip("/")
        segs = segs[1:]
        lib = f"{base}/lib.rs"
    elif root == "crate":
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
            if full and full in ix.files:
                return [full]
            if base is None:
                hit = ix.suffix(c, importer)
                if hit:
                    return hit
    return [lib] if lib is not None and lib in ix.files else []


RUSTC_FRAME = re.compile(r"^[ \t]*--> ((?:[A-Za-z]:)?[\w./\\@+-]+\.rs):(\d+)(?::\d+)?", re.M)

LANGUAGE = Language(
    name="rust",
    grammars=(
        LanguageSpec("rust", "tree_sitter_rust", "language", (".rs",),
                     {"function_item": "function", "struct_item": "struct", "enum_item": "enum",
                      "trait_item": "trait", "impl_item": "impl", "mod_item": "module",
                      "macro_definition": "macro", "type_item": "type", "union_item": "struct",
                      "function_signature_item": "function"},
                     frozenset({"impl_item", "trait_item", "mod_item"}),
                     frozenset({"use_declaration", "extern_crate_declaration"}),
                     name_of=_name_of, import_node=_import_node),
    ),
    resolvers={"rs": _resolve_use, "rsmod": _resolve_mod},
    manifests={"Cargo.toml": cargo_toml},
    manifest_kinds=("crate",),
    test_names=(r".*_tests?\.rs$", r"^tests?\.rs$"),
    # `path/file.rs:12` frames are read by go.py's line-start pattern (it lists .rs); a compiler's or clippy's
    # `--> crates/x/src/walk.rs:1221:31` here (its line was found by words alone; a newcomer, session 39).
    stack_frames=(RUSTC_FRAME,),
    trace_markers=(r"panicked at",),
    fixture="shipyard",
)
