"""Languages: one module per language, listed in ``registry.py`` (see ``base.py`` for what one defines)."""

from .base import FileIndex, Language, LanguageSpec, node_text
from .registry import (
    FRAME_PATTERNS,
    LANGUAGES,
    MANIFEST_KINDS,
    SPECS,
    TEST_NAME_PATTERNS,
    TRACE_MARKERS,
    extract_imports,
    grammar_status,
    in_test_folder,
    language_of,
    manifest_imports,
    parser_for,
    resolve,
    spec_for,
    test_affixes,
)

__all__ = [
    "FRAME_PATTERNS", "LANGUAGES", "MANIFEST_KINDS", "SPECS", "TEST_NAME_PATTERNS", "TRACE_MARKERS",
    "FileIndex", "Language", "LanguageSpec", "extract_imports", "grammar_status", "in_test_folder", "language_of",
    "manifest_imports", "node_text", "parser_for", "resolve", "spec_for", "test_affixes",
]
