"""The registered languages, and everything derived from them that other packages read.

Adding a language: write ``delphi_ls/languages/<name>.py`` exporting ``LANGUAGE`` (see ``base.py`` and
/work/notes/languages_interface.md), add one line to ``LANGUAGES`` below, and a small workspace in that
language under ``tests/fixtures/<name>/``. Order matters only for stack frames (a question's paths list
the frames of earlier languages' patterns first), so new languages go at the end.
"""

from __future__ import annotations

import importlib
import os
import re
from collections.abc import Callable
from functools import cache

import tree_sitter as ts

from . import c, cpp, csharp, go, java, javascript, kotlin, php, python, ruby, rust, typescript
from .base import FileIndex, Language, LanguageSpec, Resolve, read_imports

LANGUAGES: tuple[Language, ...] = (
    python.LANGUAGE,
    javascript.LANGUAGE,
    typescript.LANGUAGE,
    go.LANGUAGE,
    rust.LANGUAGE,
    java.LANGUAGE,
    ruby.LANGUAGE,
    php.LANGUAGE,
    kotlin.LANGUAGE,
    c.LANGUAGE,
    cpp.LANGUAGE,
    csharp.LANGUAGE,
)

SPECS: tuple[LanguageSpec, ...] = tuple(g for lang in LANGUAGES for g in lang.grammars)


def _unique(pairs: list[tuple[str, object]], what: str) -> dict:
    out: dict = {}
    for key, value in pairs:
        if key in out:
            raise ValueError(f"two languages claim the {what} {key!r}")
        out[key] = value
    return out


_BY_EXT: dict[str, LanguageSpec] = _unique([(ext, s) for s in SPECS for ext in s.extensions], "extension")
_LANG_BY_EXT: dict[str, Language] = {ext: lang for lang in LANGUAGES for s in lang.grammars for ext in s.extensions}
_BY_GRAMMAR: dict[str, LanguageSpec] = _unique([(s.name, s) for s in SPECS], "grammar name")
RESOLVERS: dict[str, Resolve] = _unique([(k, f) for lang in LANGUAGES for k, f in lang.resolvers.items()],
                                        "import kind")
MANIFESTS: dict[str, Callable[[str], list[str]]] = _unique(
    [(base, f) for lang in LANGUAGES for base, f in lang.manifests.items()], "manifest")
MANIFEST_KINDS: frozenset[str] = frozenset(k for lang in LANGUAGES for k in lang.manifest_kinds)
# Every language's test-file names, one regex matched against a base name.
TEST_NAME_PATTERNS: tuple[str, ...] = tuple(p for lang in LANGUAGES for p in lang.test_names)
# Stack-frame patterns in registry order, each once (languages may share one).
FRAME_PATTERNS: tuple[re.Pattern[str], ...] = tuple(
    {p.pattern: p for lang in LANGUAGES for p in lang.stack_frames}.values())
TRACE_MARKERS: tuple[str, ...] = tuple(dict.fromkeys(m for lang in LANGUAGES for m in lang.trace_markers))


def _ext(path: str) -> str:
    dot = path.rfind(".")
    return path[dot:].lower() if dot >= 0 else ""


def spec_for(path: str) -> LanguageSpec | None:
    """The grammar that parses ``path``, by extension; None for files cut into line windows."""
    return _BY_EXT.get(_ext(path))


def language_of(path: str) -> Language | None:
    return _LANG_BY_EXT.get(_ext(path))


_TEST_DIRS: dict[str, re.Pattern[str]] = {
    lang.name: re.compile("|".join(lang.test_dirs)) for lang in LANGUAGES if lang.test_dirs}


def in_test_folder(path: str) -> bool:
    """``path`` sits in a folder its own language's ecosystem keeps tests in (``Serilog.Tests/``)."""
    lang = language_of(os.path.basename(path))
    pat = _TEST_DIRS.get(lang.name) if lang is not None else None
    return pat is not None and pat.search(path.lower()) is not None


def test_affixes(path: str) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """The extra (prefixes, suffixes) a test's name adds to its subject's in ``path``'s language."""
    lang = language_of(os.path.basename(path))
    return (lang.test_prefixes, lang.test_suffixes) if lang is not None else ((), ())


@cache
def parser_for(name: str) -> ts.Parser:
    spec = _BY_GRAMMAR[name]
    module = importlib.import_module(spec.module)
    return ts.Parser(ts.Language(getattr(module, spec.entry)()))


def grammar_status() -> dict[str, str]:
    """Each grammar: 'ok' or why it cannot load (reported by health)."""
    out: dict[str, str] = {}
    for spec in SPECS:
        try:
            parser_for(spec.name)
            out[spec.name] = "ok"
        except Exception as e:  # a broken grammar package must show, not crash indexing
            out[spec.name] = f"unavailable: {e}"
    return out


def extract_imports(root: ts.Node, spec: LanguageSpec) -> list[str]:
    """Raw import specs of a parse tree: ``py:.models``, ``js:./util``, ``go:github.com/x/y``, ``rs:crate::a::b``."""
    return read_imports(root, spec)


def manifest_imports(path: str, text: str) -> list[str]:
    """Specs read from a manifest file (``package.json``), or [] for any other file."""
    reader = MANIFESTS.get(os.path.basename(path))
    return reader(text) if reader is not None else []


def resolve(ix: FileIndex, importer: str, spec: str) -> list[str]:
    """Workspace files an import spec of ``importer`` refers to ([] for a library outside the workspace)."""
    kind, _, target = spec.partition(":")
    fn = RESOLVERS.get(kind)
    return fn(ix, importer, target) if fn is not None else []
