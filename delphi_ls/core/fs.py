"""``Path.exists`` and ``Path.is_file`` that answer False where the file system raises: a name over 255 bytes (86 CJK
characters) raised ENAMETOOLONG from them, a traceback where a door names the path in one line (session 39 in the
MCP paths, 40 in routing, 41 in the CLI)."""

from __future__ import annotations

from pathlib import Path


def exists(p: Path) -> bool:
    try:
        return p.exists()
    except OSError:
        return False


def is_file(p: Path) -> bool:
    try:
        return p.is_file()
    except OSError:
        return False
