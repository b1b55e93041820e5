"""Delphi: a local context engine for code, delivered as a language server."""

from .engine import Engine, RequestError
from .settings import Settings, SettingsError

__all__ = ["Engine", "RequestError", "Settings", "SettingsError"]
__version__ = "0.1.0"
