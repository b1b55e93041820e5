"""Which files of a workspace are indexed, and why the others are not.

The rule is "what git would track": nested ``.gitignore`` files, ``.git/info/exclude``
and a ``.delphiignore`` at the root, applied the way git applies them (a pattern is
relative to the folder of the file that holds it; an ignored folder is not entered).
Symlinks are never followed, so a link cannot lead out of the root or into a loop.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field
from pathlib import Path

import pathspec
from pathspec.patterns.gitignore.spec import GitIgnoreSpecPattern

LOCKFILES = {
    "package-lock.json", "pnpm-lock.yaml", "yarn.lock", "poetry.lock", "Pipfile.lock",
    "Cargo.lock", "Gemfile.lock", "go.sum", "composer.lock", "uv.lock", "bun.lockb",
}
GENERATED_SUFFIXES = (".min.js", ".min.css", ".map", ".pb.go", ".generated.go", ".g.cs", "_pb2.py", ".snap")
BINARY_EXTENSIONS = {
    ".png", ".jpg", ".jpeg", ".gif", ".bmp", ".ico", ".webp", ".tiff", ".psd", ".pdf", ".zip", ".gz",
    ".tgz", ".bz2", ".xz", ".7z", ".rar", ".tar", ".jar", ".war", ".class", ".o", ".a", ".so", ".dylib",
    ".dll", ".exe", ".bin", ".wasm", ".pyc", ".pyo", ".woff", ".woff2", ".ttf", ".otf", ".eot", ".mp3",
    ".mp4", ".mov", ".avi", ".wav", ".ogg", ".flac", ".svg", ".db", ".sqlite", ".parquet", ".npy",
    ".onnx", ".safetensors", ".pt", ".pkl",
}
ALWAYS_SKIPPED_DIRS = {".git", ".hg", ".svn"}
# Only a marker in a comment at the start of a line counts: code that *mentions* it is not generated.
GENERATED_MARK = re.compile(
    rb"^[ \t]*(?://|#|/\*|\*|<!--|--)[ \t]*(?:Code generated .* DO NOT EDIT|@generated\b|"
    rb"This file (?:is|was) (?:automatically|auto-?) ?generated)", re.M)


@dataclass(frozen=True)
class FileEntry:
    path: str  # workspace-relative, "/"-separated
    size: int
    mtime_ns: int


@dataclass
class ScanResult:
    files: list[FileEntry] = field(default_factory=list)
    skipped: dict[str, str] = field(default_factory=dict)  # path -> reason


class _Ignores:
    """A stack of gitignore specs, each anchored at the folder that holds it."""

    def __init__(self) -> None:
        self._specs: list[tuple[str, pathspec.PathSpec]] = []

    def push(self, base: str, lines: list[str]) -> bool:
        lines = [ln for ln in lines if ln.strip() and not ln.lstrip().startswith("#")]
        if not lines:
            return False
        patterns = []
        for ln in lines:
            try:
                patterns.append(GitIgnoreSpecPattern(ln))
            except ValueError:
                continue  # git ignores a line it cannot read; so do we
        if not patterns:
            return False
        self._specs.append((base, pathspec.PathSpec(patterns)))
        return True

    def pop(self) -> None:
        self._specs.pop()

    def ignored(self, rel: str, is_dir: bool) -> bool:
        # Later (deeper) files win; within a file, pathspec applies negations in order.
        verdict: bool | None = None
        for base, spec in self._specs:
            sub = rel[len(base) + 1:] if base else rel
            if base and not rel.startswith(base + "/"):
                continue
            probe = sub + "/" if is_dir else sub
            res = spec.check_file(probe)
            if res.include is not None:
                verdict = res.include
        return bool(verdict)


def _read_lines(p: Path) -> list[str]:
    try:
        return p.read_text(encoding="utf-8", errors="replace").splitlines()
    except OSError:
        return []


def scan(root: Path, max_file_bytes: int, extra_ignores: list[str] | None = None) -> ScanResult:
    root = root.resolve()
    out = ScanResult()
    ign = _Ignores()
    top = _read_lines(root / ".git" / "info" / "exclude") + _read_lines(root / ".delphiignore") + list(extra_ignores or [])
    ign.push("", top)

    def walk(dir_abs: Path, dir_rel: str) -> None:
        pushed = ign.push(dir_rel, _read_lines(dir_abs / ".gitignore"))
        try:
            entries = sorted(os.scandir(dir_abs), key=lambda e: e.name)
        except OSError as e:
            out.skipped[dir_rel or "."] = f"unreadable folder: {e.strerror}"
            entries = []
        for e in entries:
            rel = f"{dir_rel}/{e.name}" if dir_rel else e.name
            try:
                if e.is_symlink():
                    out.skipped[rel] = "symlink (not followed)"
                    continue
                if e.is_dir(follow_symlinks=False):
                    if e.name in ALWAYS_SKIPPED_DIRS or ign.ignored(rel, True):
                        continue
                    walk(Path(e.path), rel)
                    continue
                if not e.is_file(follow_symlinks=False):
                    out.skipped[rel] = "not a regular file"
                    continue
                if ign.ignored(rel, False):
                    continue
                st = e.stat(follow_symlinks=False)
            except OSError as err:
                out.skipped[rel] = f"unreadable: {err.strerror}"
                continue
            reason = _static_skip_reason(e.name, rel, st.st_size, max_file_bytes)
            if reason:
                out.skipped[rel] = reason
                continue
            out.files.append(FileEntry(rel, st.st_size, st.st_mtime_ns))
        if pushed:
            ign.pop()

    walk(root, "")
    return out


def _static_skip_reason(name: str, rel: str, size: int, max_bytes: int) -> str | None:
    if name in LOCKFILES or name.endswith(".lock"):
        return "lockfile"
    low = name.lower()
    if low.endswith(GENERATED_SUFFIXES):
        return "generated or minified file"
    if os.path.splitext(low)[1] in BINARY_EXTENSIONS:
        return "binary file type"
    if size > max_bytes:
        return f"too large ({size} bytes > max_file_bytes {max_bytes})"
    if size == 0:
        return "empty file"
    return None


def content_skip_reason(rel: str, data: bytes) -> str | None:
    """Reasons only the bytes can tell: binary, minified, generated."""
    if b"\x00" in data[:8192]:
        return "binary content (NUL byte)"
    head = data[:2048]
    if GENERATED_MARK.search(head):
        return "generated file (header says so)"
    if rel.endswith((".js", ".css", ".mjs", ".cjs")) and len(data) > 2000:
        lines = data.count(b"\n") + 1
        if len(data) / lines > 400:
            return "minified file (average line over 400 chars)"
    return None


def decode(data: bytes) -> tuple[str, bool]:
    """Text and whether replacement characters were needed (reported in health)."""
    try:
        return data.decode("utf-8"), False
    except UnicodeDecodeError:
        return data.decode("utf-8", errors="replace"), True
