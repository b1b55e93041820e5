"""What a language module defines, and the pieces every language shares.

A language is one module under ``delphi_ls/languages/`` exporting ``LANGUAGE``, a :class:`Language`:
its tree-sitter grammar(s) (:class:`LanguageSpec`: which nodes define symbols, which are containers,
how imports are read off the tree), how its import specs resolve to workspace files, how its test
files are named, and what its stack frames look like. ``registry.py`` lists the languages; nothing
outside this package branches on a language's name.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Callable
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import Any

import tree_sitter as ts

# (kind, name) of a node that is not in ``definitions`` but still defines something
# (``const f = () => ...`` in JavaScript).
ExtraSymbol = Callable[[ts.Node], tuple[str, str] | None]
# Appends the raw import specs a node holds (``py:.models``) to ``out``; True when the node was an import
# and its children need no visit.
ImportNode = Callable[[ts.Node, list[str]], bool]
# Maps one import spec's target (the part after ``kind:``) from ``importer`` to workspace files.
Resolve = Callable[["FileIndex", str, str], list[str]]


# The bytes the tree being read was parsed from, set by the chunker for the length of one file. A tree
# parsed through a read callback (chunker._parse, for large files) answers `node.text` by calling it again,
# and py-tree-sitter 0.26 keeps what its callbacks return (see chunker.CALLBACK_MIN_BYTES); slicing the
# bytes gives the same text, faster, and calls nothing back.
SOURCE: ContextVar[bytes | None] = ContextVar("delphi_tree_source", default=None)


def node_text(node: ts.Node | None) -> str:
    """A node's source text (the one helper for it: chunker and import readers share it)."""
    if node is None:
        return ""
    source = SOURCE.get()
    if source is not None:
        return source[node.start_byte: node.end_byte].decode("utf-8", errors="replace")
    if node.text is None:
        return ""
    return node.text.decode("utf-8", errors="replace")


def json_object(text: str) -> dict[str, Any] | None:
    """A manifest's JSON object (``package.json``, ``composer.json``), or None when it is not one."""
    try:
        data = json.loads(text)
    except ValueError:
        return None
    return data if isinstance(data, dict) else None


def frame_file(extensions: str) -> str:
    """The file group of a stack-frame pattern: a path ending in one of ``extensions`` (``"rb|rake"``).
    The look-behind starts a match only where a path can start: unanchored, a 20 KB pasted token took
    10 s in the Ruby and PHP patterns."""
    return rf"(?<![\w./\\@+-])((?:[A-Za-z]:)?[\w./\\@+-]+\.(?:{extensions}))"


def field_name(node: ts.Node) -> str | None:
    """The usual definition name: the node's ``name`` field."""
    n = node.child_by_field_name("name")
    return None if n is None else node_text(n)


@dataclass(frozen=True)
class LanguageSpec:
    """One tree-sitter grammar (a language may have several: TypeScript and TSX) and how its trees read."""

    name: str
    module: str  # the grammar's PyPI package, imported offline
    entry: str  # function in the module returning the grammar pointer
    extensions: tuple[str, ...]
    definitions: dict[str, str]  # node type -> symbol kind
    containers: frozenset[str] = field(default_factory=frozenset)  # nodes whose bodies split into members
    imports: frozenset[str] = field(default_factory=frozenset)  # import node types (documentation)
    # Node types that start their own chunk although they define no symbol themselves
    # (``export_statement``, Python's ``decorated_definition``, Go's ``type_declaration``).
    chunk_units: frozenset[str] = field(default_factory=frozenset)
    # A definition's name where the ``name`` field is not it (Rust's ``impl X for Y``, C's declarators);
    # None means the ``name`` field.
    name_of: Callable[[ts.Node], str | None] | None = None
    extra_symbol: ExtraSymbol | None = None
    # The node types ``extra_symbol`` can answer for. The symbol walk finds these, the definitions and the
    # sibling scopes by a tree-sitter query and enters only the subtrees that hold one; None (not said)
    # makes it visit every node, as it did before (issue 18: the walk was 6 of spring-boot's ~26 s of
    # parse-worker CPU, most of it inside method bodies that hold no definition).
    extra_types: frozenset[str] | None = None
    import_node: ImportNode | None = None
    import_depth: int = 6  # how deep the import walk goes (imports sit near the top of a file)
    # A large definition's member list where no ``body`` field names it (Kotlin's ``class_body``), or a deeper
    # one (Ruby's ``module M`` around one ``class C``: C's members); None falls back to the fields.
    body_of: Callable[[ts.Node], ts.Node | None] | None = None
    # Node types chunked as if their children stood in their place (C's `#ifndef X_H` include guard
    # around a whole header, C++'s `template <...>` before a class).
    transparent: frozenset[str] = field(default_factory=frozenset)
    # Node types that wrap one definition, their last named child (C++'s `template <...> class X {...}`):
    # a large one splits at the wrapped definition's body.
    wrappers: frozenset[str] = field(default_factory=frozenset)
    # A qualified definition name (`logger::flush` defined outside its class) splits at this separator
    # into its container and its name; "" = names are never qualified.
    scope_separator: str = ""
    # Declarations whose name is the container of the siblings after them (C#'s `namespace X;`).
    sibling_scopes: frozenset[str] = field(default_factory=frozenset)
    # Node types the symbol walk does not enter when they are a definition's child: statement blocks that
    # hold no definition worth a symbol (C's function bodies), which are most of a tree's nodes.
    opaque: frozenset[str] = field(default_factory=frozenset)
    # Node types the symbol walk never enters: data literals, which cannot hold a definition. A generated
    # 900 KB list (black's profiling/list_huge.py) was 90,000 nodes walked in 0.12 s on every save (issue 18).
    literals: frozenset[str] = field(default_factory=frozenset)
    # Rewrites the source before parsing without moving a byte (same length, newlines kept), e.g. blanks
    # C++ export macros (`class SPDLOG_API logger`) the grammar cannot know; chunk text stays the original.
    prepare_source: Callable[[bytes], bytes] | None = None


@dataclass(frozen=True)
class Language:
    """Everything language-specific about one language; ``registry.py`` lists them."""

    name: str
    grammars: tuple[LanguageSpec, ...]
    # import spec kind (the part before ``:``) -> resolver; a language may resolve another's kinds too
    # (``java:`` specs find Kotlin files), but each kind has one owner.
    resolvers: dict[str, Resolve] = field(default_factory=dict)
    # Whole-name regexes (matched against a file's base name, and against its lower-cased base name) of
    # this ecosystem's test files: ``test_.*\.py$``.
    test_names: tuple[str, ...] = ()
    # Name parts that make a test's name from its subject's (``test_``, ``_test``, ``Tests``), applied by
    # ``stem_of`` to this language's files only, after the shared ones.
    test_prefixes: tuple[str, ...] = ()
    test_suffixes: tuple[str, ...] = ()
    # Regexes searched in a lower-cased path that make this language's files tests by their folder, beyond
    # the shared `test/`, `tests/`, `spec/` ... (.NET test projects: `Serilog.Tests/`).
    test_dirs: tuple[str, ...] = ()
    # Stack-frame regexes: group 1 the file, group 2 the line. Kept in registry order (frames earlier in a
    # trace's pattern list come first in a question's paths).
    stack_frames: tuple[re.Pattern[str], ...] = ()
    # Regex alternatives that mark a text as a trace (``Traceback \(most recent call last\)``), re.M.
    trace_markers: tuple[str, ...] = ()
    # Manifests this language reads imports from (base name -> text -> specs), e.g. ``package.json``;
    # their spec kinds are listed in ``manifest_kinds`` (they describe the workspace, they are no edges).
    manifests: dict[str, Callable[[str], list[str]]] = field(default_factory=dict)
    manifest_kinds: tuple[str, ...] = ()
    fixture: str = ""  # the folder under tests/fixtures/ holding a workspace in this language ("" = name)

    @property
    def fixture_folder(self) -> str:
        return self.fixture or self.name


class _Suffixes:
    """Files by every path suffix they end with at a folder boundary (``a/b.py`` under ``b.py`` and
    ``a/b.py``), looked up lazily: indexing every suffix of every path up front took 1.5 s and 840k
    entries on the 100k workspace, where resolvers ask for a small part of them."""

    def __init__(self, files: list[str]) -> None:
        self._by_name: dict[str, list[str]] = {}
        for f in files:
            self._by_name.setdefault(f.rpartition("/")[2], []).append(f)
        self._memo: dict[str, list[str]] = {}

    def __getstate__(self) -> dict[str, Any]:
        return {"_by_name": self._by_name, "_memo": {}}  # what was asked is not saved with a view

    def get(self, rel: str, default: Any = None) -> Any:
        hit = self._memo.get(rel)
        if hit is None:
            tail = "/" + rel
            hit = self._memo[rel] = [f for f in self._by_name.get(rel.rpartition("/")[2], ())
                                     if f == rel or f.endswith(tail)]
        return hit if hit else default


class FileIndex:
    """The workspace's files, indexed for import resolution (shared by every language's resolver).

    ``manifest_specs`` are the specs read from manifests (``package.json``): (path, spec) pairs.
    ``memo`` keeps what a resolver derives once per index (a language's package map).
    """

    def __init__(self, files: list[str], manifest_specs: list[tuple[str, str]] | None = None) -> None:
        self.files = set(files)
        self.manifest_specs = list(manifest_specs or ())
        self.by_suffix = _Suffixes(files)
        self.dirs: dict[str, list[str]] = {}
        for f in files:
            self.dirs.setdefault(os.path.dirname(f), []).append(f)
        self._memo: dict[str, Any] = {}
        self._near: dict[tuple[str, str], list[str]] = {}

    def memo(self, key: str, build: Callable[[FileIndex], Any]) -> Any:
        if key not in self._memo:
            self._memo[key] = build(self)
        return self._memo[key]

    def __getstate__(self) -> dict[str, Any]:
        return {**self.__dict__, "_near": {}}  # saved with a view: not what was asked of it

    def module(self, rels: tuple[str, ...], near: str) -> list[str]:
        """Files whose path ends with one of ``rels`` (the forms one module takes: ``flask.py``, ``flask/__init__.py``),
        where an import from ``near`` finds it: the module's root (the folder its path is taken from) the fewest
        folders below one above ``near`` (the importer's own folders, then a top-level `src/`), then those sharing
        most of ``near``'s path. By suffix alone, flask's 3-line test fixture
        `tests/test_apps/cliapp/inner1/inner2/flask.py` shared `tests/` with every test and took their `import
        flask` from `src/flask/__init__.py` (a newcomer, session 47): Python finds a module at a folder on its
        path, and a folder four below the tests' is not."""
        lists = [self.by_suffix.get(r, []) for r in rels]
        if sum(map(len, lists)) <= 1:
            return [c for cs in lists for c in cs]
        own = any(near == r or near.endswith("/" + r) for r in rels)  # the importer is a candidate (suffix's rule)
        key = ("\0".join(rels), near if own else near.rpartition("/")[0])
        hit = self._near.get(key)
        if hit is None:
            cands = [(c, r) for r, cs in zip(rels, lists, strict=True) for c in cs]
            parts = near.split("/")
            folder = parts[:-1]

            def shared(a: list[str], b: list[str]) -> int:
                n = 0
                for x, y in zip(a, b, strict=False):
                    if x != y:
                        break
                    n += 1
                return n

            def rank(c: str, r: str) -> tuple[int, int, int]:
                root = [p for p in c[: len(c) - len(r)].split("/") if p]
                below = len(root) - shared(root, folder)
                # Below none of the importer's folders, the shallower root (`src/` before `tests/fixtures/`, which
                # shares `tests/` with a test: a review, session 47).
                return below, len(root) if below else 0, -shared(c.split("/"), parts)

            scored = [(rank(c, r), c) for c, r in cands]
            best = min(k for k, _c in scored)
            hit = self._near[key] = list(dict.fromkeys(c for k, c in scored if k == best))[:3]
        return hit

    def suffix(self, rel: str, near: str) -> list[str]:
        """Files whose path ends with ``rel``; among several, those sharing most of ``near``'s path."""
        cands: list[str] = self.by_suffix.get(rel, [])
        if len(cands) <= 1:
            return cands
        # Once per (suffix, importer's folder): the files of one folder import much the same (on the 100k
        # workspace, seven copies of spring-boot: 1.6 M calls here, 2.0 M path comparisons).
        # The importer's folder decides, unless the importer is itself a candidate (`myapp/logging.py`
        # importing `logging`): then it shares one part more than its folder's other files (review).
        key = (rel, near if near in cands else near.rpartition("/")[0])
        hit = self._near.get(key)
        if hit is None:
            parts = near.split("/")

            def shared(c: str) -> int:
                n = 0
                for a, b in zip(c.split("/"), parts, strict=False):
                    if a != b:
                        break
                    n += 1
                return n
            scored = [(shared(c), c) for c in cands]
            best = max(n for n, _c in scored)
            hit = self._near[key] = [c for n, c in scored if n == best][:3]
        return hit


def read_imports(root: ts.Node, spec: LanguageSpec) -> list[str]:
    """Raw import specs of a parse tree (``py:.models``, ``js:./util``, ``go:github.com/x/y``), in order, once each."""
    out: list[str] = []
    reader = spec.import_node
    if reader is None:
        return out

    def visit(node: ts.Node, depth: int) -> None:
        if depth > spec.import_depth:
            return
        if reader(node, out):
            return
        for c in node.named_children:
            visit(c, depth + 1)

    visit(root, 0)
    return list(dict.fromkeys(out))
