"""Files that past changes described like the question edited: BM25 over the history's commit messages.

A change's description seldom shares a word with the central module it edits ("help output" → `command.go`),
but earlier changes to that module were described in the same words ("fix help output for subcommands").
So the question is matched against the messages of the commits the co-change pass read (the last 500
non-merge commits; none that touched over 40 indexed files), and each of the best ``TOP_COMMITS`` messages
gives its score to the files it changed, shared by 1/log2(1 + files changed) as co-change weighs them. It is
bug localisation's "similar past reports" signal, computed from the user's own repository: nothing learned,
nothing outside git (the branch is off there, like co-change).
"""

from __future__ import annotations

import math
from collections import Counter
from dataclasses import dataclass

from ...core.tokens import useful_tokens
from ...workspace.secrets import redact
from ..context import SearchContext
from ..description import clean_request
from ..query import QueryInfo
from .base import Hit, ranked_hits
from .structure import of_wanted_kinds

TOP_COMMITS = 30  # messages whose files are scored (bench/RESULTS.md, session 20)
K1, B = 1.2, 0.75


def message_terms(message: str) -> list[str]:
    """A message's search tokens, by the question's own tokenizer and cleaning (trailers, links, templates go)."""
    return list(useful_tokens(clean_request(message)))


@dataclass(frozen=True)
class MessageIndex:
    """An inverted index over one history's messages, built once per history read (89 ms for black's 472)."""

    postings: dict[str, list[tuple[int, int]]]  # term -> (message, term frequency)
    lengths: list[int]
    files: list[list[str]]
    subjects: list[str]

    @classmethod
    def build(cls, messages: list[tuple[str, list[str]]]) -> MessageIndex:
        postings: dict[str, list[tuple[int, int]]] = {}
        lengths: list[int] = []
        for i, (message, _files) in enumerate(messages):
            tf = Counter(message_terms(message))
            lengths.append(sum(tf.values()))
            for t, n in tf.items():
                postings.setdefault(t, []).append((i, n))
        return cls(postings, lengths, [f for _m, f in messages], [m.split("\n", 1)[0][:80] for m, _f in messages])

    def search(self, terms: list[str]) -> list[tuple[int, float]]:
        """(message, BM25 score) for the messages that share a term with ``terms``, best first."""
        n = len(self.lengths)
        if not n:
            return []
        avg = sum(self.lengths) / n or 1.0
        scores: dict[int, float] = {}
        for t in dict.fromkeys(terms):
            post = self.postings.get(t)
            if not post:
                continue
            idf = math.log(1 + (n - len(post) + 0.5) / (len(post) + 0.5))
            for i, tf in post:
                norm = K1 * (1 - B + B * self.lengths[i] / avg)
                scores[i] = scores.get(i, 0.0) + idf * tf * (K1 + 1) / (tf + norm)
        return sorted(scores.items(), key=lambda kv: (-kv[1], kv[0]))


class CommitsBranch:
    name = "commits"

    def __init__(self) -> None:
        self._cached: tuple[object, MessageIndex] | None = None  # (the history's state, its index)

    def _index(self, ctx: SearchContext) -> MessageIndex | None:
        if ctx.meta is None:
            return None
        key = ctx.meta.get_state("cochange")  # holds a token drawn anew each time the history is read
        cached = self._cached
        if cached is not None and cached[0] == key:
            return cached[1]
        # Redacted again when read: an index whose history was read before messages were redacted (session 36)
        # holds them until its next run reads the history again, which comes after the run's lexical pass.
        index = MessageIndex.build([(redact(m)[0], f) for m, f in ctx.meta.commit_messages()])
        self._cached = (key, index)
        return index

    def search(self, q: QueryInfo, ctx: SearchContext) -> list[Hit]:
        index = self._index(ctx)
        if index is None or not q.terms:
            return []
        scores: dict[str, float] = {}
        why: dict[str, str] = {}
        for i, s in index.search(q.terms)[:TOP_COMMITS]:
            changed = [f for f in index.files[i] if f in ctx.files]
            if not changed:
                continue
            share = s / math.log2(1 + len(changed))
            for f in changed:
                if f not in scores:
                    why[f] = f"changed by a past commit like this: {index.subjects[i]!r}"
                scores[f] = scores.get(f, 0.0) + share
        return ranked_hits(of_wanted_kinds(scores, q, ctx), why, ctx.depth)
