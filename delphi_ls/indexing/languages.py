"""Compatibility surface: the grammars now live in ``delphi_ls.languages`` (one module per language)."""

from __future__ import annotations

from ..languages import SPECS, LanguageSpec, grammar_status, parser_for, spec_for

__all__ = ["SPECS", "LanguageSpec", "grammar_status", "parser_for", "spec_for"]
