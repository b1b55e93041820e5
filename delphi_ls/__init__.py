"""Delphi: a local context engine for code, delivered as a language server."""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .api import RequestError
    from .engine import Engine
    from .settings import Settings, SettingsError

__all__ = ["Engine", "RequestError", "Settings", "SettingsError"]
__version__ = "0.1.0"

# Imported on first use: `import delphi_ls.cli` (every `delphi` call) must not pay for the engine's
# imports (numpy, Whoosh, Chroma, tree-sitter) when the command does not need them.
_LAZY = {"Engine": "engine", "RequestError": "api", "Settings": "settings", "SettingsError": "settings"}


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        return getattr(importlib.import_module(f".{_LAZY[name]}", __name__), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
