"""Which lines of a ranked file to show: chunks scored from the question itself.

File ranking says *which* files; this module says *where in them*. Each chunk of a file (chunks are
definition-sized: a function, a class header, a few small neighbours) is scored by

- the question's words inside it: BM25 computed over the file's own chunks, so a word every chunk
  has (``blueprint`` in ``blueprints.py``) counts little and a rare one (``register``) counts much;
  identifiers and quoted literals of the question weigh more than plain words;
- the chunks the retrieval branches themselves hit for this file (BM25, vectors, symbols, trigram),
  by their place in each branch's evidence;
- for a question that comes with files (anchors), the anchor's own symbols used in the chunk: the
  test of a changed function names that function.

The spans a result lists are its best chunks in that order, each with the reason it was chosen.
The old order (the fused evidence, first three) stays callable as :func:`legacy_spans` so the
benchmark can run both in one process.
"""

from __future__ import annotations

import math
import re
from collections import Counter, OrderedDict
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from ..core.tokens import query_terms
from ..stores.meta import ChunkRow, MetaStore
from .branches.base import Hit
from .description import clean_request
from .query import QueryInfo, closest_by_tail, frame_names

GROUP_SHARE = 0.5  # a neighbour joins the listed span of a better chunk at this share of its score
GROUP_MAX = 2  # chunks in one listed span
GROUP_GAP = 2  # blank lines allowed between them (a chunk ends where its definition ends)
# A file's preamble (its first chunk, with no symbol of its own, in a file whose other chunks define some) is
# listed by this share of its score: imports name many of a question's words, but the change and the
# reader's interest seldom sit there (4 of 264 intent2code regions on dev_mined are at a file's head).
# first_span_hit, dev_mined / dev_langs (both sets chose it; bench/RESULTS.md, "Spans (issue 17), session
# 18"): intent2code 0.597 -> 0.639 / 0.776 -> 0.776, code2test 0.639 -> 0.653 / 0.518 -> 0.554; packing
# untouched.
PREAMBLE_SHARE = 0.3
SCORED_FILES = 20  # results below this rank keep the cheap evidence order (nobody reads that far)
LISTED_SPANS = 3
# Weights of a question word by what it is: an identifier or literal names a place in code.
W_TERM, W_IDENT, W_LITERAL, W_ANCHOR_SYMBOL = 1.0, 2.0, 2.5, 0.6
# What a branch's evidence for a chunk is worth, beside the lexical score (its first chunk counts most).
BRANCH_EVIDENCE = {"bm25": 1.0, "vector": 1.2, "symbol": 2.0, "trigram": 1.5}
K1, B = 1.2, 0.75
# The learned span ranker's weights over FEATURES (None: the hand score lex + evidence + defines), fitted
# by `python -m bench.train_spans --dumps DATA/plain/spans` (logistic, L2 0.01, chosen on leave-repositories-
# out folds) on 3,020 gold files of the 24 training repositories, mined through the engine by
# `bench.train mine`, so the branches' chunk hits are among its features. The top chunk of a held-out gold
# file is a changed one 0.497 of the time (hand score 0.477). Whole answers on the held-out folds, link
# "exp": intent2code hunk_cov@4000 0.564 -> 0.567, first_span_hit 0.636 -> 0.646, file_cov@4000 0.803 ->
# 0.786; code2test 0.520 -> 0.542, 0.471 -> 0.485 (bench/RESULTS.md, "Spans (issue 17)", session 7).
LEARNED: tuple[float, ...] | None = (
    -0.1555, 0.533, 0.3652, 0.0902, -0.1894, -0.1519, 0.0349, 0.0925, 0.178, 0.0, -0.8058, 0.0165, 0.1203,
    0.3698, 0.2722, 0.1541, 0.0689, 0.1407, 0.1089, -0.1466, -0.0097,
)
EV_LEARNED = 0.0  # the branches' evidence is among the features; adding it again double-counts it
# How a learned score becomes a chunk score: "exp", "sigmoid", "order" or "both" (see score_chunks). Chosen
# on the held-out folds: "sigmoid" and "both" scored higher (first_span_hit 0.670) only by letting a
# neighbour join nearly every first span (median 47 -> 60 lines; whole small files in the golden spans).
LEARNED_LINK = "exp"
W_DEFINES = 1.0  # a chunk that defines a symbol named by a question word, beyond mentioning it
FRAMES_FIRST = True  # a chunk holding a line a stack frame names goes first (_frames_first; RESULTS, session 26)
# Links across the answer's files, for a question without anchors (an anchored one links by the anchor's
# own symbols): the names the best chunk of each of the top LINK_FILES files defines (weight 1 / rank)
# lift, in the packer's value only, the chunks of the other top files that use them, by LINK_WEIGHT of the
# file's best value at most. A change that adds a function in one file calls it from another, in lines its
# description never names. Offline (bench/RESULTS.md, "Spans (issue 17), session 18"): intent2code
# hunk_cov@4000 paired +0.038 [-0.008, +0.093] on dev_mined (where 5 files and 0.3 were chosen) and +0.028
# [-0.001, +0.072] on dev_langs (held out); lifting the other way too (chunks defining what the top chunks
# use) gained less.
LINK_FILES, LINK_WEIGHT = 5, 0.3
LINK_SCAN_NAMES = 48  # up to this many names are found by scanning each file's text, more from its words (below)
LINK_MAX_DEFINERS = 3  # a name that more of the scored files define links none of them (a namespace)
MAX_WORDS = 32
SHORT = 4  # words shorter than this count only as whole words (`com` is not in `command`)
NOISE_WORDS = frozenset("""which cover tests test tested testing source implement change changes pull request
    issue issues close closes closed fixes resolves related description checklist summary""".split())


@dataclass
class SpanQuery:
    """Everything span scoring needs from one question, built once per answer."""

    words: dict[str, float]  # lower-case word -> weight
    exact: set[str] = field(default_factory=set)  # words counted as whole words only (anchor symbols)
    evidence: dict[str, dict[str, tuple[float, list[str]]]] = field(default_factory=dict)  # path -> id -> (w, branches)
    anchors: list[str] = field(default_factory=list)
    frames: list[tuple[str, int]] = field(default_factory=list)  # a trace's (file as written, line)
    _heavy: set[str] | None = field(default=None, repr=False, compare=False)
    _order: dict[str, int] | None = field(default=None, repr=False, compare=False)
    _kinds: tuple[list[str], set[str]] | None = field(default=None, repr=False, compare=False)

    def order(self) -> dict[str, int]:
        """Each word's place in ``words`` (taken once per question)."""
        if self._order is None:
            self._order = {w: i for i, w in enumerate(self.words)}
        return self._order

    def counted(self) -> tuple[list[str], set[str]]:
        """The words counted as substrings (four letters or more, not an anchor's symbol), in ``words``'
        order, and those counted as whole words: split once per question, not once per file (an anchor
        brings hundreds of symbol names, and an answer scores 20 files)."""
        if self._kinds is None:
            self._kinds = ([w for w in self.words if len(w) >= SHORT and w not in self.exact],
                           {w for w in self.words if len(w) < SHORT or w in self.exact})
        return self._kinds

    def heavy(self) -> set[str]:
        """The identifier- and literal-weight words (a learned feature counts them per chunk), taken once
        per question: ``words`` is not changed after :meth:`build`."""
        if self._heavy is None:
            self._heavy = {w for w, v in self.words.items() if v >= W_IDENT}
        return self._heavy

    @classmethod
    def build(cls, q: QueryInfo, lists: dict[str, list[Hit]] | None = None, anchors: Iterable[str] = (),
              meta: MetaStore | None = None) -> SpanQuery:
        words: dict[str, float] = {}
        idents = {i.lower() for i in q.identifiers}
        # Words that come only from links, e-mail addresses or bot boilerplate (`github`, `com`, `https`)
        # name no place in the code; they matched licence headers and URLs in comments. The question's
        # own cleaner (a trace's text is kept whole by analysis, so it is cleaned here); spans had a
        # looser copy of it whose `\S+@\S+` took 0.6 s per answer on a 20 KB pasted token.
        plain = set(query_terms(clean_request(q.text, "basic")))  # as before "squash" (issue 19): spans unchanged
        for t in q.terms:
            if (len(t) < 3 and t not in idents) or t not in plain or t in NOISE_WORDS:
                continue
            words[t] = max(words.get(t, 0.0), W_IDENT if t in idents else W_TERM)
        for ident in q.identifiers:
            low = ident.lower()
            words[low] = max(words.get(low, 0.0), W_IDENT)
        for lit in q.literals:
            low = lit.lower().strip()
            if len(low) >= 3:
                words[low] = max(words.get(low, 0.0), W_LITERAL)
        if len(words) > MAX_WORDS:
            # A long PR body brings a hundred words; the title's and the named identifiers say where. Keep
            # the heaviest, then the earliest (terms come in the order the question uses them).
            order = {w: i for i, w in enumerate(words)}
            keep = sorted(words, key=lambda w: (-words[w], order[w]))[:MAX_WORDS]
            words = {w: words[w] for w in keep}
        anchor_list = list(anchors)
        exact: set[str] = set()
        if meta is not None:
            for a in anchor_list:
                # The anchor's own definitions: a test of the changed file calls them by name.
                for name, kind, *_ in meta.symbols_of(a):
                    low = name.lower()
                    if len(low) < 4 or kind in ("module",) or not _TOKEN.fullmatch(low):
                        continue
                    if low not in words:
                        exact.add(low)
                    words[low] = max(words.get(low, 0.0), W_IDENT if low in words else W_ANCHOR_SYMBOL)
        evidence: dict[str, dict[str, tuple[float, list[str]]]] = {}
        for branch, hits in (lists or {}).items():
            w = BRANCH_EVIDENCE.get(branch)
            if not w:
                continue
            for h in hits:
                per = evidence.setdefault(h.path, {})
                for i, cid in enumerate(h.chunk_ids):
                    old, names = per.get(cid, (0.0, []))
                    per[cid] = (old + w / (1 + i), names + [branch])
        # Innermost frame first, where the program failed, as the question's analysis orders them.
        return cls(words, exact, evidence, anchor_list, list(q.frames))


_LOWER: OrderedDict[str, str] = OrderedDict()  # chunk id -> lower-cased text (ids are content-addressed)
_LOWER_MAX = 20000


def _lower(c: ChunkRow) -> str:
    got = _LOWER.get(c.id)
    if got is None:
        got = _LOWER[c.id] = c.text.lower()
        if len(_LOWER) > _LOWER_MAX:
            _LOWER.popitem(last=False)
    return got


_TOKS: OrderedDict[str, Counter[str]] = OrderedDict()  # chunk id -> its lower-case words and their parts
_TOKEN = re.compile(r"[a-z0-9_]+")
# Every ASCII character that is not in _TOKEN's class becomes a space: on ASCII text, ``translate`` then
# ``split`` gives exactly ``_TOKEN.findall``'s list, about twice as fast (this splits every chunk of an
# answer's top files the first time they are seen).
_NOT_TOKEN = str.maketrans({chr(i): " " for i in range(128) if not _TOKEN.fullmatch(chr(i))})


def _tokens(c: ChunkRow, low: str) -> Counter[str]:
    got = _TOKS.get(c.id)
    if got is None:
        got = Counter(low.translate(_NOT_TOKEN).split() if low.isascii() else _TOKEN.findall(low))
        for t in [t for t in got if "_" in t]:
            for part in t.split("_"):
                if part:
                    got[part] += got[t]
        _TOKS[c.id] = got
        if len(_TOKS) > _LOWER_MAX:
            _TOKS.popitem(last=False)
    return got


def _counts(chunks: list[ChunkRow], sq: SpanQuery) -> list[dict[str, int]]:
    """Occurrences of each question word in each chunk. Words of four letters or more are counted as
    substrings (``blueprint`` is found in ``registerBlueprint``, as the index's word parts would), with
    C-speed ``str.count`` after dropping words absent from the whole file; shorter words (``com`` is not
    in ``command``) and the anchor's symbol names (hundreds of them) are counted as whole words, from a
    per-chunk word count cached by chunk id."""
    lows = [_lower(c) for c in chunks]
    whole = "\n".join(lows)
    long_, short = sq.counted()
    long_ = [w for w in long_ if w in whole]
    out = [{w: n for w in long_ if (n := t.count(w))} for t in lows]
    if short:
        at = sq.order()
        for c, t, cs in zip(chunks, lows, out, strict=True):
            toks = _tokens(c, t)
            found = toks.keys() & short  # a set intersection: an anchor brings hundreds of names
            # In the question's order, not the set's: a set of strings iterates in an order that changes
            # with each process's hash seed, and the BM25 sum runs in this order, so its last bits (and a
            # tie between two chunks) moved from one process to the next.
            for w in sorted(found, key=at.__getitem__) if len(found) > 1 else found:
                cs[w] = toks[w]
    return out


@dataclass
class ScoredChunk:
    chunk: ChunkRow
    score: float
    matched: list[str]  # question words found, heaviest first
    branches: list[str]
    lex: float = 0.0  # the parts of the score, kept for the learned ranker's features
    ev: float = 0.0
    defines: float = 0.0
    pack: float | None = None  # the packer's value when it differs from the listing score (LEARNED_LINK)
    links: list[tuple[str, str]] = field(default_factory=list)  # (symbol, path): other top files' names it uses
    # what those links add to the packer's value (not to the listing: a listed span's why-line leaves them out)
    lift: float = 0.0
    trimmed: bool = False  # packed as its first lines only: the whole did not fit the budget (packing._trimmed)
    frame_lines: list[int] = field(default_factory=list)  # lines of this chunk a stack frame of the question names

    @property
    def value(self) -> float:
        return (self.score if self.pack is None else self.pack) + self.lift


def frames_first(order: list[str], scored: dict[str, list[ScoredChunk]], sq: SpanQuery) -> None:
    """A frame's line is where the program was when it failed: the chunk holding it is the place to read
    first, whatever the words say (a Node trace's `respond` at application.js:265 was listed after three other
    chunks of the file, none holding line 265; an agent newcomer, session 26). Such chunks go above the file's
    best, by score (the listing) and by value (the packer), the innermost frame's first (``sq.frames`` comes
    innermost first). Run after :func:`link_files`, so no lift puts another chunk above them. A frame names the
    one file of ``order`` that shares most of its path, and none when two share as much (a bare `Foo.java:42`
    and two `*/Foo.java`; review, session 26)."""
    if not FRAMES_FIRST or not sq.frames:
        return
    owner: dict[int, str] = {}  # frame index -> the file it names
    for i, (f, _ln) in enumerate(sq.frames):
        best = closest_by_tail(f, [p for p in order if frame_names(f, p)])  # as the path branch resolves a frame
        if len(best) == 1:
            owner[i] = best[0]
    for path in order:
        out = scored.get(path)
        if not out:
            continue
        lines = [ln for i, (_f, ln) in enumerate(sq.frames) if owner.get(i) == path]
        if not lines:
            continue
        top = max(max(sc.score for sc in out), max(sc.value for sc in out), 0.0)
        for k, ln in enumerate(lines):
            for sc in out:
                if sc.chunk.start_line <= ln <= sc.chunk.end_line and ln not in sc.frame_lines:
                    if not sc.frame_lines:
                        sc.score = top + 1.0 + 0.01 * (len(lines) - k)
                        if sc.pack is not None:
                            sc.pack = sc.score
                    sc.frame_lines.append(ln)
                    break


def score_chunks(path: str, chunks: list[ChunkRow], sq: SpanQuery) -> list[ScoredChunk]:
    """Every chunk of one file with its score, in file order. Callers then lift the chunks other top files link
    to (:func:`link_files`) and put first those a stack frame names (:func:`frames_first`).

    This runs for each of an answer's top files on every question, so it is written for speed, with
    every float computed by the same operations in the same order as the plain formulas (the golden
    spans pin the result to the bit): BM25 ``weight * idf * tf * (K1 + 1) / (tf + K1 * (1 - B + B *
    len / avg))`` with ``weight * idf`` taken once per word and the length term once per chunk, and the
    learned score summed term by term in FEATURES order, as ``sum(w * x for w, x in zip(LEARNED, row))``
    over :func:`features`' row would (tests/test_spans_fast.py checks both against the plain forms)."""
    if not chunks:
        return []
    counts = _counts(chunks, sq)
    n = len(chunks)
    df: dict[str, int] = {}
    for cs in counts:
        for w in cs:
            df[w] = df.get(w, 0) + 1
    words = sq.words
    # weight * idf per word (+0.1: a one-chunk file still counts); the product BM25 starts with.
    wi = {w: words.get(w, W_TERM) * (math.log(1 + (n - k + 0.5) / (k + 0.5)) + 0.1) for w, k in df.items()}
    lengths = [max(len(c.text), 1) for c in chunks]
    avg = sum(lengths) / n
    ev = sq.evidence.get(path, {})
    k1p = K1 + 1
    dlog = math.log(1 + n) + 0.1
    out = []
    for c, cs, ln in zip(chunks, counts, lengths, strict=True):
        lex = 0.0
        matched: list[str] = []
        if cs:
            norm = K1 * (1 - B + B * ln / avg)
            contrib: list[tuple[float, str]] = []
            for w, tf in cs.items():
                v = wi[w] * tf * k1p / (tf + norm)
                lex += v
                contrib.append((v, w))
            contrib.sort(reverse=True)
            matched = [w for _v, w in contrib]
        e, names = ev.get(c.id, (0.0, []))
        defines = 0.0
        for sym in c.symbols:
            low = sym.lower()
            if low in words:  # the question names what this chunk defines
                defines += W_DEFINES * words[low] * dlog
        out.append(ScoredChunk(c, lex + e + defines, matched, sorted(set(names)) if names else [], lex, e, defines))
    if LEARNED is not None:
        zs = _learned_z(out, sq, LEARNED)
        if LEARNED_LINK in ("order", "both"):
            # The learned order with the hand score's shape: the k-th best chunk by the model gets the
            # k-th best hand score, so the packer spreads the budget over files as before.
            hand = sorted((sc.score for sc in out), reverse=True)
            n = len(out)
            for k, i in enumerate(sorted(range(n), key=lambda i: (-zs[i], i))):
                # + a vanishing step, so chunks the hand score leaves at zero still follow the model
                # (else a file matching no word of the question shows its first chunk first).
                out[i].pack = hand[k] + 1e-6 * (n - k)
                # "both": the listed spans read the model's probability (its neighbours join the first
                # span by their share of it); the packer reads the hand-shaped value above.
                out[i].score = out[i].pack if LEARNED_LINK == "order" else 1.0 / (1.0 + math.exp(-zs[i]))
            return out
        for sc, z in zip(out, zs, strict=True):
            if LEARNED_LINK == "exp":
                # A listwise (softmax) score: exp(z) / exp(z_best) is the chunk's share of the file's best
                # in the model's own terms, which is how the packer compares chunks of one file.
                sc.score = math.exp(max(min(z, 30.0), -30.0)) + EV_LEARNED * sc.ev
            else:
                # A probability (not a logit): the packer compares chunks of a file as shares of the best.
                sc.score = 1.0 / (1.0 + math.exp(-z)) + EV_LEARNED * sc.ev
    return out


_LOG1P = [math.log1p(k) for k in range(1024)]  # log1p of the small counts the features take, looked up


def _log1p_int(k: int) -> float:
    return _LOG1P[k] if k < 1024 else math.log1p(k)


def _learned_z(scored: list[ScoredChunk], sq: SpanQuery, weights: tuple[float, ...]) -> list[float]:
    """The learned ranker's logit of every chunk: exactly ``sum(w * x for w, x in zip(weights, row))``
    over :func:`features`' rows (the same products, summed by the same ``sum`` in FEATURES order), with
    the per-file parts taken once and no row lists built (tests/test_spans_fast.py pins the equality)."""
    if len(weights) != len(FEATURES):
        return [sum(w * v for w, v in zip(weights, row, strict=True)) for row in features(scored, sq)]
    (w0, w1, w2, w3, w4, w5, w6, w7, w8, w9, w10, w11, w12, w13, w14, w15, w16, w17, w18, w19, w20) = weights
    n = len(scored)
    lexes = [s.lex for s in scored]
    mx = max(lexes, default=0.0) or 1.0
    mev = max((s.ev for s in scored), default=0.0) or 1.0
    # Rank by lex (stable), as features() takes it: only chunks with lex > 0 read their rank, and they all
    # come before the zeros, so ranking those alone gives the same ranks.
    hit = [i for i in range(n) if lexes[i] > 0]
    hit.sort(key=lambda i: -lexes[i])
    rank = {i: r for r, i in enumerate(hit)}
    last = max((s.chunk.end_line for s in scored), default=1) or 1
    heavy = sq.heavy()
    exact = sq.exact
    ln_n = _log1p_int(n)
    zs = []
    for i, s in enumerate(scored):
        c = s.chunk
        lex = lexes[i]
        nb = max(lexes[i - 1] if i else 0.0, lexes[i + 1] if i + 1 < n else 0.0)
        br = s.branches
        m = s.matched
        zs.append(sum((
            w0 * 1.0, w1 * (lex / mx), w2 * (1.0 / (1 + rank[i]) if lex > 0 else 0.0),
            w3 * (1.0 if s.defines else 0.0), w4 * _log1p_int(len(m)), w5 * (c.start_line / last),
            w6 * float(i == 0), w7 * float(i == n - 1), w8 * _log1p_int(c.end_line - c.start_line + 1),
            w9 * float(c.kind == "header"), w10 * ln_n, w11 * (nb / mx), w12 * math.log1p(lex),
            w13 * (s.ev / mev), w14 * float("bm25" in br), w15 * float("vector" in br),
            w16 * float("symbol" in br), w17 * float("trigram" in br),
            w18 * _log1p_int(sum(map(heavy.__contains__, m)) if m else 0),
            w19 * _log1p_int(sum(map(exact.__contains__, m)) if m else 0),
            w20 * float(c.symbols.count("<module>") != len(c.symbols)))))  # any symbol but <module>
    return zs


FEATURES = ("bias", "lex/max", "1/(1+lex rank)", "defines", "log1p words matched", "relative position",
            "first chunk", "last chunk", "log lines", "header", "log chunks in file", "neighbour lex/max",
            "log1p lex", "ev/max", "hit by bm25", "hit by vector", "hit by symbol", "hit by trigram",
            "log1p identifiers matched", "log1p anchor symbols matched", "defines a symbol")


def features(scored: list[ScoredChunk], sq: SpanQuery | None = None) -> list[list[float]]:
    """One row per chunk (names in FEATURES): what the learned span ranker reads. The branch-evidence
    columns are zero for a ranker trained from git alone (session 4's); session 7's is trained on
    windows mined through the engine, so its branches' chunk hits are among its features."""
    n = len(scored)
    mx = max((s.lex for s in scored), default=0.0) or 1.0
    mev = max((s.ev for s in scored), default=0.0) or 1.0
    order = sorted(range(n), key=lambda i: -scored[i].lex)
    rank = {i: r for r, i in enumerate(order)}
    last = max((s.chunk.end_line for s in scored), default=1) or 1
    heavy = {w for w, v in sq.words.items() if v >= W_IDENT} if sq is not None else set()
    exact = sq.exact if sq is not None else set()
    rows = []
    for i, s in enumerate(scored):
        c = s.chunk
        nb = max(scored[i - 1].lex if i else 0.0, scored[i + 1].lex if i + 1 < n else 0.0)
        br = set(s.branches)
        rows.append([1.0, s.lex / mx, 1.0 / (1 + rank[i]) if s.lex > 0 else 0.0, 1.0 if s.defines else 0.0,
                     math.log1p(len(s.matched)), c.start_line / last, float(i == 0), float(i == n - 1),
                     math.log1p(c.end_line - c.start_line + 1), float(c.kind == "header"), math.log1p(n),
                     nb / mx, math.log1p(s.lex), s.ev / mev, float("bm25" in br), float("vector" in br),
                     float("symbol" in br), float("trigram" in br),
                     math.log1p(sum(1 for w in s.matched if w in heavy)),
                     math.log1p(sum(1 for w in s.matched if w in exact)),
                     float(any(x != "<module>" for x in c.symbols))])
    return rows


def link_files(order: list[str], scored: dict[str, list[ScoredChunk]], sq: SpanQuery) -> None:
    """Lift, in place, the chunks that use what the other top files' best chunks define (see LINK_FILES);
    nothing for an anchored question. ``order`` is the files' rank order; every path in it is scored."""
    if sq.anchors or LINK_WEIGHT <= 0:
        return
    defined: dict[str, dict[str, float]] = {}  # path -> lower-case name -> weight (1 / the file's rank)
    spelt: dict[str, str] = {}  # lower-case name -> as defined, for the why-line
    for rank, path in enumerate(order[:LINK_FILES], start=1):
        sc = scored.get(path)
        if not sc:
            continue
        got: dict[str, float] = {}
        for name in ranked(sc)[0].chunk.symbols:
            low = name.lower()
            if name != "<module>" and len(low) >= 4 and _TOKEN.fullmatch(low):
                got[low] = max(got.get(low, 0.0), 1.0 / rank)
                spelt.setdefault(low, name)
        if got:
            defined[path] = got
    if not defined:
        return
    if LINK_MAX_DEFINERS:
        # A name that many of the scored files define (a C++ namespace, a package) says nothing of which
        # file a chunk depends on. Offline, dropping names of 4+ files: hunk_cov@4000 0.710 -> 0.707 on
        # dev_mined, 0.694 -> 0.700 on dev_langs; of 2+ files (a header's declaration and its definition
        # too): 0.675 / 0.696, so a name two or three files define still links.
        seen: Counter[str] = Counter()
        for path in order:
            names: set[str] = set()
            for sc_ in scored.get(path) or ():
                names.update(n.lower() for n in sc_.chunk.symbols)
            seen.update(names)
        defined = {p: kept for p, got in defined.items()
                   if (kept := {k: v for k, v in got.items() if seen[k] <= LINK_MAX_DEFINERS})}
        if not defined:
            return
    for path in order:
        sc = scored.get(path)
        if not sc:
            continue
        other: dict[str, tuple[float, str]] = {}  # name -> (weight, the file defining it)
        for src, got in defined.items():
            if src != path:
                for k, v in got.items():
                    if v > other.get(k, (0.0, ""))[0]:
                        other[k] = (v, src)
        if not other:
            continue
        lows = [_lower(x.chunk) for x in sc]
        whole = "\n".join(lows)
        if len(other) <= LINK_SCAN_NAMES:
            present = [k for k in other if k in whole]  # a C-speed scan of the file per name
        else:
            # Many names (a header's declarations, an enum): the file's words once, and their `_` parts. On
            # the dev dumps link_files takes p50 2.2-3.0 / p95 7.7-8.4 ms per answer either way; on a synthetic
            # answer of 20 files x 300 chunks with 40 names per best chunk, 0.51 s by scanning, 0.39 s so.
            words = set(whole.translate(_NOT_TOKEN).split() if whole.isascii() else _TOKEN.findall(whole))
            words.update(part for w in [w for w in words if "_" in w] for part in w.split("_") if part)
            present = [k for k in other if k in words]
        if not present:
            continue
        # The preamble is lifted too: a change that calls another file's function adds its import there
        # (not lifting it: intent2code hunk_cov@4000 0.707 -> 0.672 on dev_mined, 0.700 -> 0.697 on dev_langs).
        xs: list[float] = [0.0] * len(sc)
        uses: list[list[tuple[str, str]]] = [[] for _ in sc]
        for i, low in enumerate(lows):
            cand = [k for k in present if k in low]  # substring first; the chunk's word count only on a hit
            if not cand:
                continue
            c = sc[i].chunk
            toks = _tokens(c, low)
            own = {n.lower() for n in c.symbols}
            # In `other`'s order, so the float sum is the same in every process.
            used = [k for k in cand if k in toks and k not in own]  # a use (a word or a `_` part), not the definition
            x = 0.0
            for k in used:
                x += other[k][0]
            xs[i] = x
            uses[i] = [(spelt[k], other[k][1]) for k in sorted(used, key=lambda k: (-other[k][0], k))]
        mx = max(xs)
        if mx <= 0:
            continue
        base = [s.value - s.lift for s in sc]
        best = max(base) or 1.0
        for s, x, u in zip(sc, xs, uses, strict=True):
            # Set, not added: a second call gives the same values.
            s.lift, s.links = (LINK_WEIGHT * best * x / mx, u) if x > 0 else (0.0, [])


def why_of(sc: ScoredChunk, packed: bool = False, head: ChunkRow | None = None) -> str:
    """A span's reason; a ``packed`` span's also says which of the other top files' names it uses. ``head``:
    the first chunk of a span merged from several (``sc`` is the one that earned it its place)."""
    bits = []
    if sc.frame_lines:
        bits.append("holds line " + ", ".join(str(n) for n in sc.frame_lines[:3]) + " of the trace")
    if sc.matched:
        bits.append("names " + ", ".join(f"`{w}`" for w in sc.matched[:3]))
    links = [(k, src) for k, src in sc.links if k.lower() not in sc.matched] if packed else []
    if links:
        bits.append("uses " + ", ".join(f"`{k}` ({src.rsplit('/', 1)[-1]})" for k, src in links[:2]))
    if sc.branches:
        bits.append("hit by " + ", ".join(sc.branches))
    if packed and sc.trimmed:
        bits.append("its first lines: the rest did not fit the budget")
    if bits:
        return "; ".join(bits)
    # No word, name or branch in it: the first chunk is the file's start (imports, the module's head); any
    # other is the span model's pick by shape alone, and says so (it was labelled "start of the file"
    # wherever it was, a newcomer's report, session 23).
    first = head or sc.chunk
    start = first.ord == 0 or first.start_line <= 1
    return "start of the file" if start else "no word of the question in it (picked by its shape)"


def _preview(c: ChunkRow) -> str:
    """The chunk's first non-blank line, stripped, at most 160 characters. Read from the chunk's head:
    every line of ``text[:2048]`` but the last is a whole line of the text; only when none of those holds a
    character is the whole text split. Lines end at ``\n`` only, as the index counts them (core/text.py)."""
    head = c.text[:2048]
    lines = head.split("\n")
    if len(head) < len(c.text):
        lines = lines[:-1]
    got = next((ln.strip() for ln in lines if ln.strip()), None)
    if got is None and len(head) < len(c.text):
        got = next((ln.strip() for ln in c.text.split("\n") if ln.strip()), None)
    return (got or "")[:160]


def _symbol(c: ChunkRow, asked: set[str], matched: list[str] | None = None) -> str | None:
    named = [s for s in c.symbols if s.lower() in asked]
    if named and matched:
        # The most telling name first (`register_blueprint` before its class `Scaffold`).
        rank = {w: i for i, w in enumerate(matched)}
        named.sort(key=lambda s: rank.get(s.lower(), len(rank)))
    if named:
        return named[0]
    if matched:
        hit = [s for s in c.symbols if any(w in s.lower() for w in matched[:3])]
        if hit:
            return hit[0]
    return next((s for s in c.symbols if s != "<module>"), None)


_DEF_WORDS = ("def ", "func ", "function ", "fn ", "class ", "struct ", "type ", "interface ", "trait ", "impl ",
              "enum ", "async def ", "async function ")
_MODIFIERS = ("pub ", "export ", "default ", "async ", "static ", "public ", "private ", "protected ", "get ",
              "set ", "const ", "let ", "var ")


def _defines(low: str, sym: str) -> bool:
    """Whether a lower-cased line defines ``sym`` (``def sym(``, ``func (r *T) sym(``, ``sym (a, b) {``,
    ``const sym = ``), by plain string tests: this runs for every line of every listed span."""
    t = low.lstrip()
    changed = True
    while changed:
        changed = False
        for m in _MODIFIERS:
            if t.startswith(m):
                t, changed = t[len(m):].lstrip(), True
    if t.startswith(_DEF_WORDS):
        return sym in t
    if t.startswith(sym):
        rest = t[len(sym):].lstrip()
        return rest[:1] in ("(", "=", ":", "<")
    return False


def _best_line(sc: ScoredChunk, symbol: str | None, whole: set[str] | None = None) -> tuple[int, str]:
    """The line a preview should show: where the chosen symbol is defined, else the line naming the most
    of the question's heaviest words (a chunk of small neighbours starts with whichever came first).
    ``whole``: the question's words, when the symbol only labels the chunk (the question neither names nor
    matches it): a line holding every one of them outranks the label's definition. A one-word question found
    at line 75 of a Java file was previewed at its interface's declaration, line 27 (a re-index check at
    100,000 files, session 47).

    Only a line holding one of those words (or the symbol) can score above zero, so those lines are
    found from the words' occurrences in the chunk's lower-cased text and scored, in line order, as a
    walk over every line would score them (lower-casing never adds or removes a newline)."""
    c = sc.chunk
    if sc.frame_lines and c.start_line <= sc.frame_lines[0] <= c.end_line:
        # The line the trace names, innermost first: the preview showed the line with most of the question's
        # words, often another function's (`def visit_NUMBER` for a failure at line 578 in `visit_STRING`; a
        # newcomer pasting traces, session 44).
        at = sc.frame_lines[0] - c.start_line
        return sc.frame_lines[0], c.text.split("\n")[at].strip()[:160]
    low_text = _lower(c)
    top = [w for w in sc.matched[:5] if w in low_text]
    sym = symbol.lower() if symbol else None
    if sym and not _TOKEN.fullmatch(sym):
        sym = None
    cand: set[int] = set()
    for w in top + ([sym] if sym is not None else []):
        i, line, at = low_text.find(w), 0, 0
        while i >= 0:
            line += low_text.count("\n", at, i)
            cand.add(line)
            at = low_text.find("\n", i)  # the rest of this line adds nothing: go to the next line
            if at < 0:
                break
            i = low_text.find(w, at)
    best, best_v = None, 0.0
    if cand:
        lows = low_text.split("\n")
        for i in sorted(cand):
            low = lows[i]
            v = 0.0
            for k, w in enumerate(top):
                if w in low:
                    v += 1.0 / (1 + k)
            if sym is not None and sym in low and _defines(low, sym):
                v += 3.0  # where the symbol the span is named by is defined
            elif whole and all(w in low for w in whole):
                v += 3.0
            if v > best_v:
                best, best_v = i, v
    if best is None:
        return c.start_line, _preview(c)
    return c.start_line + best, c.text.split("\n")[best].strip()[:160]


def span_of(sc: ScoredChunk, asked: set[str], first: bool = True) -> dict[str, Any]:
    """A listed span; only the ``first`` (the one every front shows) looks for its best preview line."""
    c = sc.chunk
    sym = _symbol(c, asked, sc.matched)
    named = sym is not None and (sym.lower() in asked or any(w in sym.lower() for w in sc.matched[:3]))
    line, preview = _best_line(sc, sym, None if named else asked) if first else (c.start_line, _preview(c))
    return {"startLine": c.start_line, "endLine": c.end_line, "symbol": sym, "preview": preview,
            "previewLine": line, "why": why_of(sc), "score": round(sc.score, 3)}


def name_frames(spans: list[dict[str, Any]], scored: list[ScoredChunk], symbols: list[Any]) -> None:
    """A listed span that holds a trace's line is named by the definition that line is in (the innermost around it),
    and previews it: it was named by a word of the question, often another function's (`visit_NUMBER` for a failure
    at line 578 in `visit_STRING`, whose chunk began above; a newcomer pasting traces, session 44). ``symbols``: the
    file's definitions (``MetaStore.symbols_of``)."""
    held = sorted(((sc.score, ln) for sc in scored for ln in sc.frame_lines[:1]), reverse=True)
    for sp in spans:
        line = next((ln for _s, ln in held if sp["startLine"] <= ln <= sp["endLine"]), None)
        if line is None:
            continue
        around = [d for d in symbols if d.line <= line <= d.end_line and d.name != "<module>"]
        if around:
            sp["symbol"] = max(around, key=lambda d: (d.line, -d.end_line)).name


def listed_spans(scored: list[ScoredChunk], asked: set[str], n: int = LISTED_SPANS) -> list[dict[str, Any]]:
    """A result's spans, best first. A strong chunk right next to a better one (only blank lines between,
    at least GROUP_SHARE of its score) joins it, up to GROUP_MAX chunks: a function and the helper
    beside it read as one block, and the first span is then that block. A file's preamble (see
    PREAMBLE_SHARE) is listed by a share of its score."""
    eff = {id(s): s.score for s in scored}
    if PREAMBLE_SHARE != 1.0 and len(scored) > 1 and _is_preamble(scored):
        eff[id(scored[0])] = scored[0].score * PREAMBLE_SHARE
    order = ranked(scored, eff)
    taken: set[int] = set()
    out: list[dict[str, Any]] = []
    for s in order:
        if id(s) in taken:
            continue
        taken.add(id(s))
        lo, hi, size = s.chunk.start_line, s.chunk.end_line, 1
        grew = True
        while grew and size < GROUP_MAX:
            grew = False
            for o in order:
                # Against the leader's own score: a preamble that still leads (by its share) would else let
                # its neighbour join at 0.15 of its score and list the whole file head as one span.
                if id(o) in taken or eff[id(o)] < GROUP_SHARE * s.score or o.score <= 0:
                    continue
                c = o.chunk
                if c.start_line <= hi + 1 + GROUP_GAP and c.end_line >= lo - 1 - GROUP_GAP:
                    lo, hi, size, grew = min(lo, c.start_line), max(hi, c.end_line), size + 1, True
                    taken.add(id(o))
                    break
        if any(o["startLine"] == lo and o["endLine"] == hi for o in out):
            continue  # another piece of a line too long for one chunk: the line is listed once (a newcomer, s30)
        span = span_of(s, asked, first=not out)
        span["startLine"], span["endLine"] = lo, hi
        out.append(span)
        if len(out) >= n:
            break
    return out


def _is_preamble(scored: list[ScoredChunk]) -> bool:
    """Whether the file's first chunk is its preamble (imports, package line, licence: no symbol of its
    own) in a file whose other chunks define something."""
    if any(n != "<module>" for n in scored[0].chunk.symbols):
        return False
    return any(n != "<module>" for s in scored[1:] for n in s.chunk.symbols)


def ranked(scored: list[ScoredChunk], by: dict[int, float] | None = None) -> list[ScoredChunk]:
    """Best first (by score, or by ``by``: ``id(chunk)`` -> the value to rank it by); ties keep file order
    (the header before the body)."""
    if by is None:
        return [sc for _i, sc in sorted(enumerate(scored), key=lambda t: (-t[1].score, t[0]))]
    return [sc for _i, sc in sorted(enumerate(scored), key=lambda t: (-by[id(t[1])], t[0]))]


def legacy_spans(meta: MetaStore, path: str, evidence: list[str], asked: set[str]) -> list[dict[str, Any]]:
    """The spans before issue 17: the fused evidence chunks in branch order, first three. Kept as it was,
    one file and its queries at a time, for the benchmark's ``engine-legacy`` (the latency reference)."""
    ids = evidence[:3]
    rows = meta.chunks_by_ids(ids) if ids else {}
    chunks = [rows[i] for i in ids if i in rows]
    if not chunks:
        chunks = meta.chunks_of(path)[:1]
    return [_evidence_span(c, asked) for c in chunks]


def evidence_spans(meta: MetaStore, files: list[tuple[str, list[str]]], asked: set[str]) -> list[list[dict[str, Any]]]:
    """:func:`legacy_spans` of every ``(path, evidence)`` in ``files``, the same lists, read in two queries
    for all of them (the evidence chunks, then the first chunk of each file without any) instead of one
    or two per file: the results below SCORED_FILES list their spans this way."""
    ids = [i for _p, ev in files for i in ev[:3]]
    rows = meta.chunks_by_ids(ids) if ids else {}
    per = [[rows[i] for i in ev[:3] if i in rows] for _p, ev in files]
    bare = [p for (p, _ev), chunks in zip(files, per, strict=True) if not chunks]
    if bare:
        first = meta.first_chunks(bare)
        for (p, _ev), chunks in zip(files, per, strict=True):
            if not chunks and p in first:
                chunks.append(first[p])
    return [[_evidence_span(c, asked) for c in chunks] for chunks in per]


def _evidence_span(c: ChunkRow, asked: set[str]) -> dict[str, Any]:
    return {"startLine": c.start_line, "endLine": c.end_line, "symbol": _symbol(c, asked), "preview": _preview(c)}
