"""Delphi's shared vocabulary: the words more than one layer speaks, typed once, at the bottom.

File kinds, question shapes, what a retrieval branch needs to run, and the symbol record. The
enums are ``StrEnum``: a member *is* its string, so JSON answers, settings files and the learned
ranker's feature names read exactly as before; code compares and spells them through the enum.
``tokens`` (code-aware tokenisation) lives here too, since the stores and the queries must split alike.
"""

from __future__ import annotations

from enum import StrEnum
from typing import NamedTuple


class Kind(StrEnum):
    """What a file is, decided from its path alone (``workspace.kinds.file_kind``)."""

    CODE = "code"
    TEST = "test"
    DOC = "doc"
    CONFIG = "config"
    OTHER = "other"


KINDS: tuple[str, ...] = tuple(k.value for k in Kind)


class Shape(StrEnum):
    """The shape of a question (``retrieval.query.analyse``); branch weights are set per shape."""

    ENGLISH = "english"
    IDENTIFIER = "identifier"
    TRACE = "trace"
    TEST = "test"


SHAPES: tuple[str, ...] = tuple(s.value for s in Shape)


class Need(StrEnum):
    """What a retrieval branch needs before it can answer (health and readiness read it)."""

    INDEX = "index"  # the manifest of a finished (or running) index and the tables derived from it
    LEXICAL = "lexical"  # the Whoosh store (BM25F): a damaged one is an error for the branches that read it
    VECTORS = "vectors"  # embeddings from the model that answers queries
    HISTORY = "history"  # co-change computed from git history
    TRIGRAMS = "trigrams"  # the manifest's trigram index: partial while chunks wait above its watermark
    FILEDOCS = "filedocs"  # the file documents' FTS5 index: built at the end of a large run's lexical pass


class State(StrEnum):
    """The state a status line opens with: ``ready``, ``partial: 3/5 chunks embedded``, ``error: ...``.

    Status lines stay human text on the wire (health, ``branchesReady``); code that acts on one
    reads its state through :func:`state_of`, never by matching the wording itself.
    """

    READY = "ready"
    PARTIAL = "partial"
    OFF = "off"
    NOT_READY = "not ready"
    DISABLED = "disabled"
    ERROR = "error"


def state_of(status: str) -> State | None:
    """The :class:`State` a status line opens with (the word, then nothing, ':' or ' '), or None."""
    for s in State:
        if status == s.value or status.startswith((s.value + ":", s.value + " ")):
            return s
    return None


class SymbolRecord(NamedTuple):
    """One definition from the manifest's symbol table."""

    name: str
    kind: str  # function, method, class, struct, interface, trait, enum, type, ...
    path: str
    line: int
    end_line: int
    container: str
