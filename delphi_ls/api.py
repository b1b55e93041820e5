"""The one typed request/answer of Delphi's fronts.

``delphi/context`` (LSP), the MCP ``context`` tool, ``delphi context --json`` and
``Engine.context()`` all take a :class:`ContextRequest` and give a :class:`ContextAnswer`;
the parameter list, its wire names, its validation and its JSON schema are written
here once. Related-tests, related-code and symbol requests likewise. The engine
knows nothing of LSP or MCP; this module knows nothing of either.
"""

from __future__ import annotations

import os
from dataclasses import MISSING, dataclass, field, fields
from pathlib import Path
from typing import Any, NotRequired, TypedDict
from urllib.parse import unquote_to_bytes, urlparse

from .core import KINDS

MAX_LIMIT = 500


class RequestError(ValueError):
    """A request the caller got wrong; ``field`` names the parameter (its wire name)."""

    def __init__(self, field: str, message: str) -> None:
        super().__init__(f"{field}: {message}")
        self.field = field


class IndexRepairing(RuntimeError):
    """The index was found damaged while answering (a corrupt page of its manifest): it is being moved aside and
    the folder indexed again. Not the caller's error; asking again shortly is the remedy. The fronts say this
    message (the language server as RequestFailed, an MCP tool error) instead of a traceback."""


def jsonrpc_id(x: object) -> bool:
    """A usable JSON-RPC request id: a string or an integer (a bool is neither), for the LSP and MCP fronts."""
    return isinstance(x, str) or (isinstance(x, int) and not isinstance(x, bool))


def plain_relative(p: Any) -> bool:
    """A path written relative to some folder: a non-empty string, not a URI, not absolute (what the session and the
    MCP tools look for in several folders)."""
    return isinstance(p, str) and bool(p) and not p.startswith("file:") and not os.path.isabs(p)


def uri_to_path(uri: str) -> Path:
    """A ``file:`` URI or a plain path, as a path. ``%FF`` is the byte 0xFF, as the file system names it
    (``unquote`` made it U+FFFD: another name, one the skip rules for undecodable names never saw, so an
    editor's buffer of such a file was indexed as ``\ufffdbad.py``; a security audit, session 26)."""
    if uri.startswith("file:"):
        return Path(os.fsdecode(unquote_to_bytes(urlparse(uri).path)))
    return Path(uri)


# --------------------------------------------------------------------------- answers
class Span(TypedDict):
    startLine: int
    endLine: int
    symbol: str | None
    preview: str
    previewLine: NotRequired[int]  # the line the preview shows (the named definition's, when there is one)
    score: NotRequired[float]
    why: NotRequired[str]  # why this span of the file (retrieval/spans.py)


class Result(TypedDict):
    path: str
    uri: str
    rank: int
    score: float
    kind: str
    branches: dict[str, int]  # branch -> the rank that branch gave this file
    spans: list[Span]
    why: str


class PackedSpan(TypedDict):
    path: str
    startLine: int
    endLine: int
    text: str
    whole: bool
    why: NotRequired[str]


class ContextAnswer(TypedDict):
    results: list[Result]
    query: dict[str, Any]
    branchesReady: dict[str, str]
    health: dict[str, Any]
    traceId: str
    timingsMs: dict[str, float]
    packed: NotRequired[list[PackedSpan]]
    packedTokens: NotRequired[int]
    indexing: NotRequired[dict[str, Any]]  # phase, done, total while a run is under way
    writer: NotRequired[dict[str, Any]]  # another process indexing now: pid, command, started, message


class Related(TypedDict):
    path: str
    uri: NotRequired[str]
    why: str
    score: NotRequired[float]


# --------------------------------------------------------------------------- requests
def _wire(name: str) -> str:
    head, *rest = name.split("_")
    return head + "".join(p.title() for p in rest)


def _check_int(wire: str, value: Any, lo: int, hi: int) -> int:
    if not isinstance(value, int) or isinstance(value, bool) or not lo <= value <= hi:
        raise RequestError(wire, f"must be an integer between {lo} and {hi}")
    return value


def check_limit(value: Any) -> int:
    """A request's ``limit``, as every front checks it (the Python API's related_tests took 0, -1 and "abc")."""
    return _check_int("limit", value, 1, MAX_LIMIT)


def _check_str_list(wire: str, value: Any, what: str) -> list[str]:
    if not isinstance(value, list) or not all(isinstance(v, str) and v for v in value):
        raise RequestError(wire, f"must be a list of {what}")
    return list(value)


class _Request:
    """Shared wire handling: camelCase names, unknown fields refused, validation on build."""

    @classmethod
    def from_wire(cls, params: Any, **defaults: Any):  # type: ignore[no-untyped-def]
        if params is None:
            raise RequestError("params", "an object is required")
        if not isinstance(params, dict):
            raise RequestError("params", "must be an object")
        names = {_wire(f.name): f.name for f in fields(cls)}  # type: ignore[arg-type]
        names.update({f.name: f.name for f in fields(cls)})  # type: ignore[arg-type]
        unknown = sorted(k for k in params if k not in names)
        if unknown:
            raise RequestError(unknown[0], f"unknown field (known: {', '.join(_wire(f.name) for f in fields(cls))})")  # type: ignore[arg-type]
        kwargs = dict(defaults)
        kwargs.update({names[k]: v for k, v in params.items() if v is not None})
        missing = [_wire(f.name) for f in fields(cls) if f.name not in kwargs and f.default is MISSING  # type: ignore[arg-type]
                   and f.default_factory is MISSING]  # type: ignore[misc]
        if missing:
            raise RequestError(missing[0], "is required")
        return cls(**kwargs)


@dataclass(frozen=True)
class ContextRequest(_Request):
    """A question, with what the caller already has. Anchors: workspace-relative paths, absolute
    paths inside the workspace, or ``file://`` URIs."""

    query: str
    anchors: list[str] = field(default_factory=list)
    draft: str | None = None
    limit: int = 20
    budget_tokens: int | None = None
    kinds: list[str] | None = None
    workspace: str | None = None  # which open folder, when a front serves several

    def __post_init__(self) -> None:
        if not isinstance(self.query, str) or not self.query.strip():
            raise RequestError("query", "must be a non-empty string")
        if self.anchors is None:
            object.__setattr__(self, "anchors", [])
        if not isinstance(self.anchors, list) or not all(isinstance(a, str) and a for a in self.anchors):
            raise RequestError("anchors", "must be a list of non-empty paths or URIs")
        for a in self.anchors:
            check_path("anchors", a)
        if self.draft is not None and not isinstance(self.draft, str):
            raise RequestError("draft", "must be a string")
        if not self.anchors and not self.draft and not any(ch.isalnum() for ch in self.query):
            # `?!...` alone: the vector branch would still return three files, with nothing to say why
            raise RequestError("query", "has no letters or digits to search for")
        _check_int("limit", self.limit, 1, MAX_LIMIT)
        if self.budget_tokens is not None:
            _check_int("budgetTokens", self.budget_tokens, 1, 10_000_000)
        if self.kinds is not None:
            kinds = _check_str_list("kinds", self.kinds, "file kinds")
            bad = [k for k in kinds if k not in KINDS]
            if bad:
                raise RequestError("kinds", f"{bad[0]!r} is not a kind; must be drawn from {', '.join(KINDS)}")
        if self.workspace is not None and not isinstance(self.workspace, str):
            raise RequestError("workspace", "must be a folder path or URI")
        if self.workspace is not None:
            check_path("workspace", self.workspace)


def check_path(name: str, value: str) -> None:
    """No file name holds a NUL: one reached `os.lstat` and came back as -32603 with a traceback (LSP) or
    "ValueError: embedded null byte" (MCP), where every other bad value names its field (a hostile-input audit,
    session 46)."""
    if "\x00" in value or (value.startswith("file:") and "%00" in value):
        raise RequestError(name, "must not hold a NUL character (no file or folder name can)")


@dataclass(frozen=True)
class RelatedRequest(_Request):
    """Tests of a source file (optionally of one symbol in it), or the source a test exercises."""

    path: str
    symbol: str | None = None
    limit: int = 10
    workspace: str | None = None

    def __post_init__(self) -> None:
        if not isinstance(self.path, str) or not self.path:
            raise RequestError("path", "must be a non-empty path or URI")
        check_path("path", self.path)
        if self.symbol is not None and (not isinstance(self.symbol, str) or not self.symbol):
            raise RequestError("symbol", "must be a non-empty string")
        _check_int("limit", self.limit, 1, MAX_LIMIT)
        if self.workspace is not None and not isinstance(self.workspace, str):
            raise RequestError("workspace", "must be a folder path or URI")
        if self.workspace is not None:
            check_path("workspace", self.workspace)


@dataclass(frozen=True)
class SymbolsRequest(_Request):
    query: str
    limit: int = 50
    workspace: str | None = None

    def __post_init__(self) -> None:
        if not isinstance(self.query, str):
            raise RequestError("query", "must be a string")
        _check_int("limit", self.limit, 1, MAX_LIMIT)
        if self.workspace is not None and not isinstance(self.workspace, str):
            raise RequestError("workspace", "must be a folder path or URI")
        if self.workspace is not None:
            check_path("workspace", self.workspace)
