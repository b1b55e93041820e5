"""The retrieval pipeline of one question, with explicit inputs: branches, fusion, rerankers, spans.

The engine owns the stores, their damage checks and indexing; for a query it reads their state once
into an :class:`IndexState` and hands it here. Nothing in this module opens, repairs or writes a
store, so the pipeline can be run (and tested) on any index view: the engine is a facade over it.

Order of work for one question (docs/DESIGN.md, "The retrieval pipeline"):
1. stage-1 branches on the question; a first RRF fusion;
2. stage-2 branches seeded by the anchors and that fusion's top files; the final RRF fusion;
3. the ``kinds`` filter, the learned ranker over the fused window, the cross-encoder if configured;
4. each result's spans scored from the question, and the budgeted packing.
"""

from __future__ import annotations

import itertools
import re
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..core import Kind, Need, Shape, State, cancel, state_of
from ..core.tokens import split_identifier
from ..models.cross_encoder import CrossEncoder
from ..models.embedders import Embedder
from ..models.ltr import LearnedRanker
from ..settings import Settings
from ..stores.lexical import LexicalStore
from ..stores.meta import MetaStore
from ..stores.vectors import VectorStore
from ..workspace.kinds import file_kind, is_test_data
from . import spans as spans_mod
from .branches.base import Branch, Hit
from .branches.prf import PrfBm25Branch, PrfVectorBranch
from .branches.registry import BranchSpec
from .context import IndexView, SearchContext, plain_mention
from .features import candidate_features
from .fusion import Fused, rrf
from .packing import legacy_pack, pack
from .query import QueryInfo
from .rerank import implementation_first, innermost_first, learned_rerank, rerank
from .router import SEED_ANCHOR_WEIGHT, SEED_TOP, SEED_TOP_WEIGHT, weights_for

# The history ranker learnt from windows of up to 500 commits of long-lived repositories; a history of a few
# commits is outside what it saw. In a one-commit repository every file "changed" equally (the first commit adds
# them all) and it put an unrelated Go file second for a question about a Python cart (a newcomer, session 36).
MIN_HISTORY_COMMITS = 10
_HISTORY_COMMITS = re.compile(r"ready: (\d+) commits")


@dataclass(frozen=True)
class IndexState:
    """What one query reads, handed over by the engine before the branches run: the counts, the view,
    the searcher and the status lines are taken once; the manifest and the lexical store are live
    handles (a concurrent index run may commit between two branches' reads)."""

    meta: MetaStore
    lexical: LexicalStore
    view: IndexView
    counts: dict[str, int]
    searcher: VectorStore | Any | None  # Chroma or the exact search; None when vectors cannot answer
    embedder: Embedder | None  # None when vectors cannot answer
    vec_status: str  # the vector branch's status line (health's wording)
    lexical_ready: bool  # a finished index, or files of a running one
    partial: bool  # answers come from part of the workspace (first run still in its lexical pass)
    cochange_status: str  # the history branch's status line
    # Why the lexical store must not answer: another store indexed last, so this one is behind the
    # manifest (deleted files would come back as ghosts) until a run rebuilds it. None: it may answer.
    lexical_behind: str | None = None
    # What the trigram index lacks (health's words: chunks above its watermark), None when it holds every chunk.
    grams_behind: str | None = None
    # The file documents' search index while a large run builds it at its end (stores/filedocs.FTS_OWED_STATUS).
    docs_behind: str | None = None


@dataclass
class Retrieval:
    """One query's state between the branches and the rerankers."""

    q: QueryInfo
    ctx: SearchContext
    weights: dict[str, float]
    state: IndexState
    lists: dict[str, list[Hit]] = field(default_factory=dict)
    ready: dict[str, str] = field(default_factory=dict)
    timings: dict[str, float] = field(default_factory=dict)
    fused: list[Fused] = field(default_factory=list)
    named_anchor: str | None = None  # the file a test question named, searched as its anchor (named_anchor)
    frame_files: list[str] = field(default_factory=list)  # a trace's frames' files, innermost first (frame_files)


def named_anchor(q: QueryInfo, ctx: SearchContext) -> str | None:
    """The source file a question for tests names, when the caller sent no anchor: "which tests cover
    src/attr/validators.py?" is asked as the editor's related-tests question for that file. A newcomer's
    finding (session 25): with the path spelled out, its words (`src`, `attr`) ranked `test_make.py` above
    `test_validators.py`; with the bare name or `--anchor` the right file came first. Only a mention that
    resolves to one indexed file, not itself a test; never for a stack trace (its frames are not asked about)."""
    if q.shape != Shape.TEST or q.frames:
        return None
    found = set()
    for m in q.paths:
        if m.startswith(("/", "~")) or ":" in m:
            continue
        m = plain_mention(m)
        # A mention with folders names that file, not another of the same name ("lib/scheduler.py" is not
        # "shipyard/scheduler.py"; review, session 25); a bare name may be any one file of that name.
        found |= {p for p in ctx.resolve_mention(m)[:2] if "/" not in m or p == m or p.endswith("/" + m)}
    if len(found) != 1:
        return None
    path = found.pop()
    return path if ctx.files.get(path) == Kind.CODE else None  # a source file: not a test, doc or config


# Called with a branch that raised and what it raised: the engine records it for health.
BranchFailure = Callable[[BranchSpec, Exception], None]


class Retriever:
    """Runs the registered branches and the rerankers over an :class:`IndexState`."""

    def __init__(self, settings: Settings, branches: Sequence[tuple[BranchSpec, Branch]],
                 ltr: LearnedRanker | None = None, cross_encoder: CrossEncoder | None = None,
                 on_failure: BranchFailure | None = None, ltr_history: LearnedRanker | None = None) -> None:
        self.settings = settings
        self.branches = list(branches)
        self.ltr = ltr
        self.ltr_history = ltr_history  # used instead of ``ltr`` where the history branch is ready
        self.cross_encoder = cross_encoder
        self.on_failure = on_failure
        self.errors: dict[str, str] = {}  # branch -> its last failure, until it answers again

    # ------------------------------------------------------------------ branches and fusion
    def retrieve(self, q: QueryInfo, state: IndexState, anchors: list[str], draft: str | None) -> Retrieval:
        """Both stages of branches and the fusion: everything before the rerankers."""
        ctx = SearchContext(self.settings, state.meta, state.lexical, state.searcher, state.embedder,
                            state.view, anchors, draft)
        r = Retrieval(q, ctx, weights_for(q, self.settings, [spec for spec, _b in self.branches]), state)
        ctx.read_question(q.text)
        ctx.how_to = q.how_to
        if not anchors and (named := named_anchor(q, ctx)) is not None:
            anchors = ctx.anchors = [named]
            ctx.named_anchor, r.named_anchor = True, named
        # A trace asks for code, but a file its frames name is what ran: the failing test among them (the test that
        # panicked, `tests/regression.rs:886`, came 35th; a pytest run's test file 10th; a newcomer, session 39).
        if q.shape == Shape.TRACE and Kind.CODE in q.prefer:
            r.frame_files = ctx.frame_files(q)
        framed = ctx.framed = frozenset(r.frame_files)
        stage1 = [(spec, b) for spec, b in self.branches if spec.stage == 1]
        stage2 = [(spec, b) for spec, b in self.branches if spec.stage == 2]
        self._run(stage1, r)
        if stage2:
            first = rrf(r.lists, r.weights, ctx.files, self.settings.rrf_k, q.prefer, q.avoid, framed, ctx.demoted)
            ctx.seeds = {a: SEED_ANCHOR_WEIGHT for a in anchors if a in ctx.files}
            for i, f in enumerate(first[:SEED_TOP]):
                ctx.seeds.setdefault(f.path, SEED_TOP_WEIGHT / (1 + 0.5 * i))
            self._feedback(r)
            self._run(stage2, r)
        t0 = time.perf_counter()
        r.fused = rrf(r.lists, r.weights, ctx.files, self.settings.rrf_k, q.prefer, q.avoid, framed, ctx.demoted)
        r.timings["fusion"] = _ms(t0)
        return r

    def _feedback(self, r: Retrieval) -> None:
        """Pseudo-relevance feedback (setting ``prf``): the bm25 and/or vector branch searched once more
        with the first fusion's top files fed back (retrieval/branches/prf.py); the second list replaces
        the first in the final fusion, so the learned ranker reads it as that branch's ranks."""
        mode = self.settings.prf
        if mode == "off":
            return
        for name, branch in (("bm25", PrfBm25Branch()), ("vector", PrfVectorBranch())):
            if mode not in (name, "both") or not r.lists.get(name):
                continue  # the branch did not run (or found nothing) for this question
            t0 = time.perf_counter()
            try:
                hits = branch.search(r.q, r.ctx)
            except Exception as e:  # the first list stands; the failure shows in health
                self.errors[f"prf_{name}"] = f"{type(e).__name__}: {e}"
                hits = []
            else:
                self.errors.pop(f"prf_{name}", None)
            if hits:
                r.lists[name] = hits
            r.timings[f"prf_{name}"] = _ms(t0)

    def _run(self, branches: list[tuple[BranchSpec, Branch]], r: Retrieval) -> None:
        q, ctx, s = r.q, r.ctx, r.state
        for spec, b in branches:
            if Need.VECTORS in spec.needs and s.searcher is None:
                r.ready[b.name] = s.vec_status
                continue
            if Need.INDEX in spec.needs and not s.lexical_ready:
                r.ready[b.name] = "not ready: lexical index not written yet"
                continue
            if Need.LEXICAL in spec.needs and s.lexical_behind:
                r.ready[b.name] = "error: " + s.lexical_behind
                continue
            if Need.FILEDOCS in spec.needs and s.docs_behind:
                r.ready[b.name] = s.docs_behind  # an index of part of the files would rank those alone
                continue
            if r.weights.get(b.name, 0) <= 0:
                r.ready[b.name] = "ready (not used for this query shape)"
                continue
            cancel.check()  # outside the try: a cancelled request is not a failing branch
            t0 = time.perf_counter()
            try:
                r.lists[b.name] = b.search(q, ctx)
                if Need.VECTORS in spec.needs:
                    r.ready[b.name] = s.vec_status
                elif Need.HISTORY in spec.needs and state_of(s.cochange_status) != State.READY:
                    r.ready[b.name] = s.cochange_status  # off outside git, or not computed: not "ready"
                elif Need.TRIGRAMS in spec.needs and s.grams_behind:
                    r.ready[b.name] = s.grams_behind  # literals in the chunks it lacks are not found
                elif s.partial:
                    r.ready[b.name] = f"partial: indexing in progress ({len(ctx.files)} files so far)"
                else:
                    r.ready[b.name] = "ready"
            except Exception as e:  # one failing branch must not sink the answer; it shows, here and in health
                r.lists[b.name] = []
                r.ready[b.name] = f"error: {type(e).__name__}: {e}"
                self.errors[b.name] = f"{type(e).__name__}: {e}"
                if self.on_failure is not None:
                    self.on_failure(spec, e)
            else:
                self.errors.pop(b.name, None)
            r.timings[b.name] = _ms(t0)

    # ------------------------------------------------------------------ rerankers
    def order(self, r: Retrieval, query: str, anchors: list[str], kinds: list[str] | None) -> list[Fused]:
        """The fused list filtered to ``kinds``, then reordered by the learned ranker and the cross-encoder."""
        q, ctx, fused = r.q, r.ctx, r.fused
        if kinds:
            fused = [f for f in fused if ctx.files.get(f.path, file_kind(f.path)) in kinds]
        if r.frame_files:
            fused = innermost_first(fused, r.frame_files)
        ltr = self.ranker_for(r.state)
        # Not for a question asking for config: the ranker learned from changes to source files and their tests, so
        # it pushes config files down (a Helm template ranked first by bm25 for `livenessProbe` fell to 5th; of 16
        # questions for workflows, Terraform, nginx, k8s, 7 had their file in the top 10 without it, none with it;
        # a newcomer, session 41).
        if ltr is not None and fused and q.shape in ltr.shapes and Kind.CONFIG not in q.prefer:
            t0 = time.perf_counter()
            head = fused[: ltr.window]
            names = ltr.features  # the columns it was trained on, counted as in training
            scores = ltr.score(candidate_features(head, q, ctx, names), names)
            fused = learned_rerank(fused, scores, set(anchors), keep=self.settings.ltr_keep_top)
            r.timings["ltr"] = _ms(t0)
        if self.settings.implementation_first and asks_for_code(q) and not speaks_of_declarations(q):
            fused = implementation_first(fused, lambda p: names_file(q, p), set(anchors))
        if self.cross_encoder is not None and fused:
            t0 = time.perf_counter()
            passages = {f.path: passage(ctx.meta, f) for f in fused[: self.settings.reranker_window]}
            # The trace's innermost frame's file keeps its place, as a file the caller handed over does.
            pinned = set(anchors) | ({fused[0].path} if r.frame_files and fused[0].path == r.frame_files[0] else set())
            fused = rerank(query, fused, passages, self.cross_encoder, self.settings.reranker_window,
                           self.settings.reranker_weight, pinned)
            r.timings["rerank"] = _ms(t0)
        if q.how_to and not kinds:
            fused = self._guide_first(r, fused, ltr)
        return rare_word_first(r, fused, anchors)

    def _guide_first(self, r: Retrieval, fused: list[Fused], ltr: LearnedRanker | None) -> list[Fused]:
        """For a request for instructions: the project's guide placed among the first answers. Which document is
        the guide is what `--kind doc` would answer (the learned ranker over the documents alone): the first
        document of the mixed order was the one whose path matched (a one-line "see new docs here" stub before
        lazygit's integration-test README, click's command-line reference before its testing guide; a newcomer,
        session 45). Not a vendored copy's README, a changelog, a file of test data or a one-line pointer."""
        q, ctx = r.q, r.ctx
        vendored = ctx.view.vendored
        docs = list(itertools.islice((f for f in fused if (ctx.files.get(f.path) or file_kind(f.path)) == "doc"
                                      and not ctx.demoted(f.path) and not vendored.is_vendored(f.path)
                                      and not is_test_data(f.path)), GUIDE_CANDIDATES))
        rows = ctx.meta.digests([f.path for f in docs])
        small = [f.path for f in docs if 0 <= rows.get(f.path, ("", -1))[1] < GUIDE_MIN_BYTES]
        texts = ctx.meta.chunks_of_paths(small) if small else {}
        pointers = {p for p in small if any(_LINK.search(c.text) for c in texts.get(p, ()))}
        docs = [f for f in docs if f.path not in pointers]
        if not docs:
            return fused
        best = docs[0]
        if ltr is not None and q.shape in ltr.shapes and len(docs) > 1:
            head = docs[: ltr.window]
            scores = ltr.score(candidate_features(head, q, ctx, ltr.features), ltr.features)
            best = head[max(range(len(head)), key=lambda i: scores[i])]
        return guide_at(fused, best)

    def ranker_for(self, state: IndexState) -> LearnedRanker | None:
        """The history ranker where the workspace's history was read (co-change ready: its change counts
        are live) and holds at least MIN_HISTORY_COMMITS commits, the plain one elsewhere: on a plain tree those
        columns are zero, and the plain ranker was measured better there."""
        if self.ltr_history is not None and state_of(state.cochange_status) == State.READY:
            read = _HISTORY_COMMITS.match(state.cochange_status)
            if read is not None and int(read.group(1)) >= MIN_HISTORY_COMMITS:
                return self.ltr_history
        return self.ltr

    def candidates(self, r: Retrieval, depth: int, passages: int) -> list[dict[str, Any]]:
        """The fused window before any reranker with each file's learned-ranker features (and, for the
        first ``passages`` files, the passage a cross-encoder would read): what training records."""
        head = r.fused[:depth]
        x = candidate_features(head, r.q, r.ctx)
        return [{"path": f.path, "features": [round(float(v), 5) for v in x[i]],
                 **({"passage": passage(r.ctx.meta, f)} if i < passages else {})} for i, f in enumerate(head)]

    # ------------------------------------------------------------------ results and spans
    def results(self, r: Retrieval, fused: list[Fused], anchors: list[str], limit: int, root: Path,
                legacy_spans: bool = False) -> Answered:
        """The top ``limit`` files as answer rows, each with its spans scored from the question.

        ``legacy_spans`` keeps the spans and packer from before issue 17 callable for the benchmark."""
        meta, ctx = r.ctx.meta, r.ctx
        fused, copies = fold_copies(fused, meta, set(anchors), ctx.files)
        asked = {t.lower() for t in r.q.terms} | {i.lower() for i in r.q.identifiers}
        sq = None if legacy_spans else spans_mod.SpanQuery.build(r.q, r.lists, anchors, meta)
        scored: dict[str, list[spans_mod.ScoredChunk]] = {}
        t0 = time.perf_counter()
        top = fused[:limit]
        if sq is None:  # the spans before issue 17, as they were read: one file at a time
            listed = [spans_mod.legacy_spans(meta, f.path, f.evidence, asked) for f in top]
        else:
            # The top files' chunks in one query, and the rest's evidence spans in two: a query per file
            # was 3-5 ms of a 23 ms answer (bench/RESULTS.md, "Spans (issue 17)", session 9).
            head = top[: spans_mod.SCORED_FILES]
            chunks = meta.chunks_of_paths([f.path for f in head])
            for f in head:
                scored[f.path] = spans_mod.score_chunks(f.path, chunks.get(f.path, []), sq)  # the packer reuses them
            spans_mod.link_files([f.path for f in head], scored, sq)
            spans_mod.frames_first([f.path for f in head], scored, sq)
            listed = [spans_mod.listed_spans(scored[f.path], asked) for f in head]
            for f, spans in zip(head, listed, strict=True):
                if any(sc.frame_lines for sc in scored[f.path]):  # a trace's files only: one query each
                    spans_mod.name_frames(spans, scored[f.path], meta.symbols_of(f.path))
            listed += spans_mod.evidence_spans(meta, [(f.path, f.evidence) for f in top[len(head):]], asked)
        rows = []
        vendored = ctx.view.vendored
        for rank, (f, spans) in enumerate(zip(top, listed, strict=True), start=1):
            other = vendored.root_of(f.path)
            rows.append({
                "path": f.path,
                "uri": (root / f.path).as_uri(),
                "rank": rank,
                "score": round(f.score, 6),
                "kind": ctx.files.get(f.path, file_kind(f.path)),
                "branches": dict(sorted(f.branches.items(), key=lambda kv: kv[1])),
                "spans": spans,
                "why": (why(f) if other is None else f"{why(f)}; {vendored_note(other, ctx.demoted(f.path))}")
                + (f"; {copies_said(copies[f.path])}" if f.path in copies else ""),
            })
        r.timings["spans"] = _ms(t0)
        return Answered(rows, sq, scored)

    def pack(self, r: Retrieval, answered: Answered, budget_tokens: int, root: Path) -> tuple[list[dict[str, Any]], int]:
        """The answer's spans packed into ``budget_tokens`` (chars/4), never over it."""
        t0 = time.perf_counter()
        meta = r.ctx.meta
        out = (legacy_pack(answered.rows, meta, budget_tokens) if answered.span_query is None else
               pack(answered.rows, meta, budget_tokens, root, answered.span_query, answered.scored))
        r.timings["packing"] = _ms(t0)
        return out


# Identical documents fill one place: lazygit ships `docs/` and `docs-master/` (the same trees), urfave/cli its godoc
# text twice, and each answer of a newcomer's had both copies of a page (a newcomer, session 45). The later copy is
# said in the first's why-line. Not code and tests: identical sources in two source sets (okio's `appleMain` and
# `nonAppleMain`) are edited together, and folding them cost dev_langs a gold file (bench.arb, session 45); nor config,
# whose path is often the answer ("which Dockerfile builds the api image"). Files this small are often the same by
# chance and stay apart.
COPY_MIN_BYTES, COPY_WINDOW, COPIES_SAID = 200, 100, 3


def rare_word_first(r: Retrieval, fused: list[Fused], anchors: list[str]) -> list[Fused]:
    """For a question of one searchable word or one identifier (``where is FLASK_SKIP_DOTENV used?``) that few
    chunks hold (a unique string, a rare name or code): the files that hold it, word for word, first, in the order
    they had. The learned ranker, trained on whole change descriptions, put files only similar in meaning above
    the one file holding the word: at 100,000 files a word appended to a Java file came third, after a file of
    similar-looking random words and `renderer.ts` (session 47); on flask `FLASK_SKIP_DOTENV` answered `cli.py`,
    which never spells it, above the four files that do (a newcomer, session 47)."""
    q = r.q
    word = one_word(q)
    if word is None or anchors or r.frame_files or q.how_to:  # a how-to's guide has its own place (_guide_first)
        return fused
    try:
        _n, df = r.ctx.lexical.doc_freqs([word])
        if not 0 < df.get(word, 0) <= RARE_WORD_CHUNKS:
            return fused
        # In the text and names only: a word rare in text but common in paths (`src`, `md`) lifted files whose path
        # alone held it (a review, session 47).
        rows = r.ctx.lexical.search_terms([word], limit=4 * RARE_WORD_CHUNKS, fields=("content", "symbols"))
    except Exception:  # a lexical store that fails is the bm25 branch's error, said there
        return fused
    # Not a kind the question avoids (a code question's docs and changelog stay where the rankers put them).
    # A file named by the word holds it too (`docs/retry.md` for "retry"); a folder of that name does not.
    named = {f.path for f in fused if f.path.rpartition("/")[2].partition(".")[0].lower() == word}
    holding = {p for p in {p for _id, p, _s in rows} | named if (r.ctx.files.get(p) or file_kind(p)) not in q.avoid}
    if not holding or all(f.path in holding for f in fused[: len(holding)]):
        return fused
    return [f for f in fused if f.path in holding] + [f for f in fused if f.path not in holding]


def one_word(q: QueryInfo) -> str | None:
    """The one thing a question searches for, as the index holds it: its only word, or its only identifier whole
    when its other words are that identifier's parts (`flask_skip_dotenv` of `FLASK_SKIP_DOTENV`); else None."""
    terms = set(q.terms)
    if len(terms) == 1:
        return q.terms[0]
    if len(q.identifiers) == 1:
        whole = q.identifiers[0].lower()
        if whole in terms and terms <= {whole, *split_identifier(q.identifiers[0])}:
            return whole
    return None


# A word this few chunks hold is what a one-word question looks for (a file holding it is an exact answer).
RARE_WORD_CHUNKS = 10


def fold_copies(fused: list[Fused], meta: Any, keep: set[str],
                kinds: dict[str, str]) -> tuple[list[Fused], dict[str, list[str]]]:
    """``fused`` less the documents whose text one listed before them has (among the first COPY_WINDOW), and each kept
    file's copies. ``keep``: files the caller holds, never folded away; a copy of one is folded into it. ``kinds``:
    path -> kind, as the index holds them."""
    docs = [f.path for f in fused[:COPY_WINDOW] if (kinds.get(f.path) or file_kind(f.path)) == "doc"]
    if len(docs) < 2:
        return fused, {}
    rows = meta.digests(docs)
    first: dict[str, str] = {}
    for p in keep:
        if p in rows and rows[p][1] >= COPY_MIN_BYTES:
            first.setdefault(rows[p][0], p)
    copies: dict[str, list[str]] = {}
    out: list[Fused] = []
    for f in fused[:COPY_WINDOW]:
        digest, size = rows.get(f.path, ("", 0))  # (code, tests and config have none here)
        if digest and size >= COPY_MIN_BYTES and f.path not in keep:
            kept = first.setdefault(digest, f.path)
            if kept != f.path:
                copies.setdefault(kept, []).append(f.path)
                continue
        out.append(f)
    return ([*out, *fused[COPY_WINDOW:]], copies) if copies else (fused, {})


def copies_said(copies: list[str]) -> str:
    """The why-line's words for a file's folded copies."""
    more = f" and {len(copies) - COPIES_SAID} more" if len(copies) > COPIES_SAID else ""
    return f"the same text as {', '.join(copies[:COPIES_SAID])}{more}"


def asks_for_code(q: QueryInfo) -> bool:
    """A question for source code written as prose or names (not a trace, not a test question)."""
    return q.shape in ("english", "identifier") and "code" in q.prefer and "test" not in q.prefer


# A change to declarations says so: "fix(types): ...", "type hints", "stubs", "overloads", "header".
# On axios (a training repository), 91 of the 99 commits that changed only `index.d.ts` carry one of these
# words in their subject, and 39 of the 46 that changed it with the code carry none.
_DECLARATION_WORDS = re.compile(
    r"\b(?:types?|typings?|typed|typescript|ts|type[ -]hints?|stubs?|annotations?|declarations?|declare[sd]?|"
    r"headers?|signatures?|prototypes?|interfaces?|overloads?|generics?|mypy|pyright|d\.ts)\b", re.I)


def speaks_of_declarations(q: QueryInfo) -> bool:
    """The question is about types, stubs, headers or signatures: the declaration may be the answer."""
    return bool(_DECLARATION_WORDS.search(q.text))


def names_file(q: QueryInfo, path: str) -> bool:
    """The question names ``path``: its file name appears in the text, or a path it mentions ends with it."""
    base = path.rsplit("/", 1)[-1].lower()
    return base in q.text.lower() or any(path.endswith(plain_mention(p)) for p in q.paths)


@dataclass
class Answered:
    """The answer rows and what the packer reuses from scoring their spans."""

    rows: list[dict[str, Any]]
    span_query: spans_mod.SpanQuery | None
    scored: dict[str, list[spans_mod.ScoredChunk]]


def passage(meta: MetaStore, f: Fused) -> str:
    """What a cross-encoder reads of a file: its path and best evidence chunks (else its first chunk)."""
    rows = meta.chunks_by_ids(f.evidence[:2]) if f.evidence else {}
    body = "\n".join(r.text for r in rows.values()) or "\n".join(r.text for r in meta.chunks_of(f.path)[:1])
    return f"{f.path}\n{body}"[:2000]


# A request for instructions ("how do I add an integration test") is answered by a project's guide beside its code:
# lazygit's `pkg/integration/README.md`, first for `--kind doc`, came 15th in the default answer, below every test
# the ranker preferred (a newcomer, session 44); "how do I run the tests" had the guide 21st to 44th in four
# repositories of five (a newcomer, session 45). The guide is listed at GUIDE_AT at the latest; the first answers
# stay the code's.
GUIDE_AT = 3
GUIDE_CANDIDATES = 100  # the documents looked at, in the mixed order
GUIDE_MIN_BYTES = 200  # under this, a document with a link is a pointer ("see new docs [here](…)", 60 bytes)
_LINK = re.compile(r"\]\(|https?://|\blink:|<a\s", re.I)


def guide_at(fused: list[Fused], guide: Fused) -> list[Fused]:
    """``fused`` with ``guide`` moved up to place GUIDE_AT, unless it is there or higher already."""
    i = next(i for i, f in enumerate(fused) if f is guide)
    if i < GUIDE_AT:
        return fused
    return [*fused[: GUIDE_AT - 1], guide, *fused[GUIDE_AT - 1: i], *fused[i + 1:]]


def vendored_note(root: str, demoted: bool) -> str:
    """What a result's why-line says of a vendored file (workspace/vendored.py)."""
    where = f"under {root}/" if root else "by .gitattributes"
    return f"vendored ({where}): " + ("ranked below the project's own files" if demoted else
                                      "reached by the question, an anchor or a trace")


def why(f: Fused) -> str:
    """A result's why-line: its best three branches' notes, best-ranked branch first."""
    parts = []
    seen = set()
    for branch, note in sorted(f.notes, key=lambda bn: f.branches.get(bn[0], 999)):
        if branch in seen:
            continue
        seen.add(branch)
        parts.append(f"{branch} #{f.branches[branch]}: {note}")
    return "; ".join(parts[:3]) or "found by " + ", ".join(f.branches)


def _ms(t0: float) -> float:
    return round((time.perf_counter() - t0) * 1000, 2)
