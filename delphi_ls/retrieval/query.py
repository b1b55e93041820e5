"""What a question is made of: terms, identifiers, literals, paths and frames, and its shape."""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from ..indexing.tokens import STOPWORDS, is_identifier_like, query_terms

_QUOTED = re.compile(r"`([^`\n]{3,200})`|\"([^\"\n]{4,200})\"|'([^'\n]{4,200})'")
_PATHLIKE = re.compile(r"(?<![\w/.-])((?:[\w.-]+/)*[\w.-]+\.[A-Za-z][A-Za-z0-9]{0,9})(?::(\d+))?")
_FRAME_PATTERNS = [
    re.compile(r'File "([^"]+)", line (\d+)'),  # Python
    re.compile(r"at (?:[\w$.<>\[\]]+ )?\(?((?:[A-Za-z]:)?[\w./\\@-]+\.\w+):(\d+)(?::\d+)?\)?"),  # JS, Java-ish
    re.compile(r"^\s*((?:[\w.-]+/)*[\w.-]+\.(?:go|rs|c|cc|cpp|h|py|rb|java|kt|ts|js|tsx|jsx)):(\d+)", re.M),  # Go, Rust, C
    re.compile(r"\(([\w$]+\.(?:java|kt|scala)):(\d+)\)"),  # Java frames
]
_TRACE_WORDS = re.compile(r"Traceback \(most recent call last\)|panicked at|^\s+at [\w$.]+\(|goroutine \d+ \[|Exception in thread|^\w*(Error|Exception): ", re.M)
_ERROR_LINE = re.compile(r"^\s*(?:[\w.]*(?:Error|Exception|panic|FAIL|fatal)\b[:!]?\s*)(.{6,200})$", re.M)

_TEST_Q = re.compile(r"\b(tests?|testing|spec|specs|covers?|covered|coverage|regression tests?|unit tests?)\b", re.I)
_CODE_Q = re.compile(r"\b(source files?|implement\w*|defin\w+|where is|which function|which class|code that|root cause|cause)\b", re.I)
_DOC_Q = re.compile(r"\b(docs?|documentation|readme|changelog|guide|tutorial)\b", re.I)


@dataclass
class QueryInfo:
    text: str
    terms: list[str]
    identifiers: list[str]
    literals: list[str]
    paths: list[str]  # path-like strings mentioned, frames first
    frames: list[tuple[str, int]]
    shape: str  # english | identifier | trace | test
    prefer: set[str] = field(default_factory=set)  # file kinds the question asks for
    avoid: set[str] = field(default_factory=set)


def _question_part(text: str) -> str:
    first = re.split(r"(?<=[?.!])\s|\n", text.strip(), maxsplit=1)[0]
    return first


def analyse(text: str) -> QueryInfo:
    terms = query_terms(text)
    words = re.findall(r"[A-Za-z_][\w.]*(?:\(\))?", text)
    identifiers = list(dict.fromkeys(w.rstrip(".") for w in words if is_identifier_like(w.rstrip("."))))
    literals = [next(g for g in m.groups() if g) for m in _QUOTED.finditer(text)]
    frames: list[tuple[str, int]] = []
    for pat in _FRAME_PATTERNS:
        for m in pat.finditer(text):
            frames.append((m.group(1).replace("\\", "/"), int(m.group(2))))
    paths = [f for f, _ in frames]
    for m in _PATHLIKE.finditer(text):
        p = m.group(1)
        if "/" in p or re.search(r"\.(py|go|rs|js|ts|tsx|jsx|java|kt|rb|c|h|cc|cpp|md|toml|yaml|yml|json)$", p):
            paths.append(p)
    paths = list(dict.fromkeys(paths))
    is_trace = bool(_TRACE_WORDS.search(text)) or len(frames) >= 2
    if is_trace:
        literals += [m.group(1).strip() for m in _ERROR_LINE.finditer(text)][:5]
    literals = list(dict.fromkeys(lit for lit in literals if len(lit.strip()) >= 4))

    question = _question_part(text)
    prefer: set[str] = set()
    avoid: set[str] = set()
    if _CODE_Q.search(question) and not re.search(r"\btests?\b", question, re.I):
        shape_hint = "code"
    elif _TEST_Q.search(question):
        shape_hint = "test"
    elif re.search(r"\b(which|what|find|list)\b[^.?]*\btests?\b", text, re.I):
        shape_hint = "test"
    else:
        shape_hint = ""
    wants_docs = bool(_DOC_Q.search(question))

    content_words = [w for w in words if w.lower() not in STOPWORDS]
    if shape_hint == "test":
        shape = "test"
        prefer = {"test"}
        if not wants_docs:
            avoid = {"doc"}
    elif is_trace:
        shape = "trace"
        prefer = {"code"}
    elif identifiers and (len(identifiers) >= 3 or len(identifiers) / max(1, len(content_words)) >= 0.3):
        shape = "identifier"
    else:
        shape = "english"
    if shape_hint == "code" and shape != "test":
        prefer = {"code"}
        if not wants_docs:
            avoid = {"doc"}
    if wants_docs and shape != "test":
        prefer = prefer | {"doc"}
        avoid.discard("doc")
    return QueryInfo(text, terms, identifiers, literals, paths, frames, shape, prefer, avoid)
