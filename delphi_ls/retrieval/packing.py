"""Pack the best lines of the ranked files into a token budget.

Every candidate is a chunk of a ranked file (scored by :mod:`.spans`) or a whole small file; its
value is the file's weight (by rank) times the chunk's score relative to the file's best chunk, so
the budget goes first to the best part of each of the top files (breadth) and then deeper into the
best files (depth). Chosen chunks that touch are merged into one span, spans are shown in file order
with the reason each was chosen, and the budget is never exceeded.

A whole file's text is the file as indexed, line for line: read from disk when every stored chunk
still matches it, else rebuilt from the stored chunks at their line numbers (lines between chunks
are blank there), so no line is ever dropped.
"""

from __future__ import annotations

import dataclasses
import re
from pathlib import Path
from typing import Any

from ..core.text import lines_of
from ..stores.meta import ChunkRow, MetaStore
from ..workspace.indexed_text import head_indexed, indexed_text
from ..workspace.scan import SkipFile, read_no_follow
from .spans import ScoredChunk, SpanQuery, frames_first, score_chunks, why_of

CHARS_PER_TOKEN = 4  # a coarse, tokenizer-free estimate; callers budget conservatively
WHOLE_SHARE = 4  # a whole file may take at most a quarter of the budget
RANK_DECAY = 0.5  # file weight 1 / (1 + RANK_DECAY * (rank - 1))
MIN_VALUE = 0.02  # below this a chunk is not worth its tokens even with budget left
BREADTH = 0.25  # share of the budget first spent on each top file's best chunk (or whole small file)
BREADTH_CHUNKS = 1  # how many of each file's best chunks the breadth share takes, file by file
BREADTH_BONUS = 10.0  # lifts those candidates above every depth candidate
MERGE_GAP = 2  # chosen chunks separated by at most this many blank lines read as one span
# A file's best chunk that does not fit what is left of the budget is packed as its first lines that do (at
# least TRIM_MIN_TOKENS of them) instead of leaving the room to smaller chunks of lower value: at 100 tokens
# the top file's best part (375 tokens) was left out and two 1-line chunks of other files with no word of the
# question were packed instead (an agent newcomer, session 26; measured in bench/RESULTS.md, session 26).
TRIM_BEST = True
TRIM_MIN_TOKENS = 24


MAX_READ_BYTES = 4_000_000  # beyond any indexed file (max_file_bytes defaults to 1 MB)


def tokens_of(text: str) -> int:
    return (len(text) + CHARS_PER_TOKEN - 1) // CHARS_PER_TOKEN


def file_lines(root: Path | None, chunks: list[ChunkRow]) -> list[str]:
    """The file's lines (with their endings) as indexed; see the module note."""
    if not chunks:
        return []
    if root is not None:
        try:
            # Never through a symlink, a FIFO or a file grown huge since it was indexed: the file may have
            # changed since (an editor that sends no file events), and the stored chunks are the fallback.
            data = read_no_follow(root, chunks[0].path, MAX_READ_BYTES)
            # Redacted as indexing redacts it (workspace/secrets.py): a secret in the file is never packed; a
            # notebook as its cells (core/notebooks.py).
            lines = lines_of(indexed_text(chunks[0].path, data).text)  # read as indexing reads it
        except (SkipFile, OSError):
            lines = None
        if lines is not None and all(_matches(lines, c) for c in chunks):
            return lines
    last = max(c.end_line for c in chunks)
    out = ["\n"] * last
    # A line too long for one chunk is stored as pieces, in order; two definitions on that line each hold all of
    # it (as pieces again). So one-line chunks of the same line are read as runs over that line's text: a piece
    # that continues where the run is matches or extends it, one that begins it again restarts the run.
    piece_of, pos = 0, 0  # the line being assembled, and how far into it the current run has come
    for c in sorted(chunks, key=lambda c: c.ord):
        if c.start_line == c.end_line == piece_of:
            acc = out[piece_of - 1]
            if acc.startswith(c.text, pos):
                pos += len(c.text)
            elif acc.startswith(c.text):
                pos = len(c.text)
            elif pos == len(acc):
                out[piece_of - 1] = acc + c.text
                pos = len(acc) + len(c.text)
            else:
                out[piece_of - 1], pos = c.text, len(c.text)
            continue
        for i, ln in enumerate(c.text.split("\n")[: c.end_line - c.start_line + 1]):
            out[c.start_line - 1 + i] = ln + "\n"
        if c.start_line == c.end_line:
            out[c.start_line - 1], piece_of, pos = c.text, c.start_line, len(c.text)
        else:
            piece_of = 0
    return [ln if ln.endswith("\n") else ln + "\n" for ln in out]


def _matches(lines: list[str], c: ChunkRow) -> bool:
    got = "".join(lines[c.start_line - 1: c.end_line]).rstrip("\r\n")
    return got == c.text.rstrip("\r\n")


def legacy_pack(results: list[dict[str, Any]], meta: MetaStore, budget: int) -> tuple[list[dict[str, Any]], int]:
    """The packer before issue 17 (kept so the benchmark runs old and new in one process): whole small
    files, else each result's listed spans, in rank order. Its whole files drop the lines between chunks."""
    used = 0
    out: list[dict[str, Any]] = []
    for r in results:
        chunks = meta.chunks_of(r["path"])
        whole = "".join(c.text if c.text.endswith("\n") else c.text + "\n" for c in chunks)
        if chunks and tokens_of(whole) <= min(budget - used, max(budget // 4, 1)):
            out.append({"path": r["path"], "startLine": chunks[0].start_line, "endLine": chunks[-1].end_line,
                        "text": whole, "whole": True})
            used += tokens_of(whole)
            continue
        by_start = {(c.start_line, c.end_line): c for c in chunks}
        for span in r["spans"]:
            c = by_start.get((span["startLine"], span["endLine"]))
            if c is None:
                continue
            cost = tokens_of(c.text)
            if used + cost > budget:
                continue
            out.append({"path": r["path"], "startLine": c.start_line, "endLine": c.end_line, "text": c.text,
                        "whole": False})
            used += cost
        if used >= budget:
            break
    return out, used


def pack(results: list[dict[str, Any]], meta: MetaStore, budget: int, root: Path | None = None,
         sq: SpanQuery | None = None, scored: dict[str, list[ScoredChunk]] | None = None,
         max_files: int = 20) -> tuple[list[dict[str, Any]], int]:
    """The packed context: ``(spans, tokens used)``, ``tokens used <= budget`` always."""
    if budget <= 0:
        return [], 0
    sq = sq or SpanQuery({})
    scored = scored if scored is not None else {}
    # (value, -rank, order, kind, path, payload): candidates across files, best value first.
    items: list[tuple[float, int, int, str, str, Any]] = []
    per_file: dict[str, tuple[int, list[ChunkRow]]] = {}
    for rank, r in enumerate(results[:max_files], start=1):
        path = r["path"]
        sc = scored.get(path)
        chunks = [s.chunk for s in sc] if sc else meta.chunks_of(path)
        if not chunks:
            continue
        per_file[path] = (rank, chunks)
        fw = 1.0 / (1.0 + RANK_DECAY * (rank - 1))
        if not sc:
            sc = score_chunks(path, chunks, sq)
            frames_first([path], {path: sc}, sq)
        order = sorted(sc, key=lambda s: -s.value)  # stable: ties keep file order, as ranked() does
        # A chunk lifted by the cross-file links (spans.link_files) may be the best, and the rest of its file
        # then counts a little less; taking the best before the lift instead: intent2code hunk_cov@4000
        # 0.707 -> 0.696 on dev_mined, 0.700 -> 0.703 on dev_langs (session 18), so the lifted best stays.
        # A chunk a stack frame names leads its file by a margin (spans.frames_first), and the rest of the file
        # is weighed against it, so counts for less: the budget goes to the other files' frame chunks first (the
        # rest weighed against the best of the others packed all of src/hash.c before kv.c's frame chunk, C golden).
        best = order[0].value if order and order[0].value > 0 else 1.0
        size = sum(len(c.text) + 1 for c in chunks)
        if (size + CHARS_PER_TOKEN - 1) // CHARS_PER_TOKEN <= max(budget // WHOLE_SHARE, 1) \
                and not head_indexed(root, path):  # a large data file's head is not the whole file (review, s42)
            # A small file is read whole: worth as much as its best chunk, and a little more.
            items.append((fw * 1.05 + BREADTH_BONUS, -rank, 0, "whole", path, None))
            continue
        # A fragment is no candidate, not even as the file's best: a function's last two lines (`return count;`
        # `}`, picked by shape) were packed for redis's evict.c (a newcomer's first use, session 44); the file's next
        # chunk stands for it instead (j counts the candidates kept).
        j = -1
        for s in order:
            if j >= 0 and not _HAS_WORD.search(s.chunk.text):
                continue  # a lone `}` packed as "picked by its shape" says nothing (an agents' newcomer, session 38)
            if _tail_by_shape(s):
                continue
            j += 1
            rel = s.value / best if s.value > 0 else 0.0
            # The file's best chunk always stands for the file, even with no word matched; while the
            # breadth share lasts, every top file's best chunk comes before any file's second.
            v = fw * (1.0 - 0.01 * j) + BREADTH_BONUS if j < BREADTH_CHUNKS else fw * rel
            items.append((v, -rank, j, "chunk", path, s))
    items.sort(key=lambda t: (-t[0], -t[1], t[2]))
    used = 0
    chosen: dict[str, list[ScoredChunk]] = {}
    whole: dict[str, str] = {}
    breadth_cap = int(budget * BREADTH)
    deferred = []
    for it in items:
        v = it[0]
        if v >= BREADTH_BONUS and used >= breadth_cap:
            deferred.append((v - BREADTH_BONUS, *it[1:]))  # the rest compete on their own value
            continue
        if v < BREADTH_BONUS:
            break
        used = _take(it, used, budget, root, per_file, whole, chosen, trim=TRIM_BEST)
    rest = sorted(deferred + [it for it in items if it[0] < BREADTH_BONUS], key=lambda t: (-t[0], -t[1], t[2]))
    for it in rest:
        if used >= budget:
            break
        if it[0] < MIN_VALUE and used > 0:
            break
        used = _take(it, used, budget, root, per_file, whole, chosen)
    out: list[dict[str, Any]] = []
    used = 0
    read: dict[str, list[str]] = {}  # the lines of each file read to merge its chunks
    for path, (_rank, chunks) in per_file.items():
        if path in whole:
            text = whole[path]
            n = text.count("\n") + (0 if text.endswith("\n") else 1)
            out.append({"path": path, "startLine": 1, "endLine": n, "text": text, "whole": True,
                        "why": "whole file (small)"})
            used += tokens_of(text)
            continue
        picks = chosen.get(path)
        if not picks:
            continue
        # One chosen chunk is shown as its own text: the file is read (and checked against every stored
        # chunk) only where two chunks may merge and the lines between them are needed.
        lines = read[path] = file_lines(root, chunks) if len(picks) > 1 else []
        for span in _merged(picks, lines):
            used += tokens_of(span["text"])
            out.append({"path": path, **span})
    # Merging shares lines, so it shrinks what was taken, except for the pieces of a line too long for a chunk:
    # merged, they are the whole line (a line is packed whole or not at all, session 30), which may not fit. The
    # largest span goes, not the last file's: the spans were popped from the end, and one 600 KB line among the
    # ranked files emptied the whole packed context at every budget (an agents' newcomer, session 40). Of a span
    # that holds such a line and chunks beside it, only the line goes: a notebook's 500 KB plot between two cells
    # took the top file's cells with it, from 6,000 tokens up (a newcomer, session 41).
    while out and used > budget:
        i = max(range(len(out)), key=lambda k: len(out[k]["text"]))
        span = out.pop(i)
        used -= tokens_of(span["text"])
        lines = read.get(span["path"], [])
        picks = span.get("_picks", [])
        keep = [s for s in picks if not _piece_of_longer_line(s, lines)]
        if keep and len(keep) < len(picks):
            rest = [{"path": span["path"], **sp} for sp in _merged(keep, lines)]
            out[i:i] = rest
            used += sum(tokens_of(sp["text"]) for sp in rest)
    for span in out:
        span.pop("_picks", None)
    return out, used


def _piece_of_longer_line(s: ScoredChunk, lines: list[str]) -> bool:
    """A chunk that is a piece of one line too long for a chunk (indexing/chunker.py cuts such a line)."""
    c = s.chunk
    return c.start_line == c.end_line and 0 < c.start_line <= len(lines) and len(lines[c.start_line - 1]) > len(c.text) + 1


_HAS_WORD = re.compile(r"[^\W_]")  # a letter or a digit
# A chunk of at most this many lines and characters, with nothing to say for it, is a fragment (_tail_by_shape).
TAIL_LINES, TAIL_CHARS = 3, 200


def _tail_by_shape(s: ScoredChunk) -> bool:
    """A short chunk that holds no word of the question, no frame, no branch's hit and no definition: the tail of a
    function split into its statements, which the span model's shape alone picked. (Not a piece of a line too
    long for a chunk: those are packed with the rest of their line or not at all.)"""
    c = s.chunk
    return (c.end_line - c.start_line + 1 <= TAIL_LINES and len(c.text) <= TAIL_CHARS and not s.matched
            and not s.frame_lines and not s.branches and not s.links and not c.symbols)


def _cost(sc: ScoredChunk) -> int:
    # tokens_of(text + its blank separator, if merged), from the length alone: this runs for every
    # candidate the packer weighs, and building the string copied each chunk's text
    return (len(sc.chunk.text) + 1 + MERGE_GAP + CHARS_PER_TOKEN - 1) // CHARS_PER_TOKEN


def _take(it: tuple[float, int, int, str, str, Any], used: int, budget: int, root: Path | None,
          per_file: dict[str, tuple[int, list[ChunkRow]]], whole: dict[str, str],
          chosen: dict[str, list[ScoredChunk]], trim: bool = False) -> int:
    """Take one candidate if it fits (``trim``: a chunk that does not, as its first lines that do); the
    tokens used after it."""
    _v, _nr, _j, kind, path, payload = it
    if kind == "whole":
        text = "".join(file_lines(root, per_file[path][1]))
        cost = tokens_of(text)
        if used + cost <= budget:
            whole[path] = text
            used += cost
        return used
    cost = _cost(payload)
    if used + cost <= budget:
        chosen.setdefault(path, []).append(payload)
        used += cost
    elif trim and budget - used >= TRIM_MIN_TOKENS and path not in chosen:
        cut = _trimmed(payload, budget - used)
        if cut is not None:
            chosen[path] = [cut]
            used += _cost(cut)
    return used


def _trimmed(sc: ScoredChunk, room: int) -> ScoredChunk | None:
    """``sc`` cut to its first whole lines that cost at most ``room`` tokens (None when not even one does)."""
    keep: list[str] = []
    size = 1 + MERGE_GAP + CHARS_PER_TOKEN - 1  # as _cost counts: the text, its separator, rounded up
    for line in lines_of(sc.chunk.text):
        if (size + len(line)) // CHARS_PER_TOKEN > room:
            break
        keep.append(line)
        size += len(line)
    if not keep or len(keep) == sc.chunk.end_line - sc.chunk.start_line + 1:
        return None
    c = sc.chunk
    # Its own id and hash: caches keyed by chunk id take ids as content-addressed (spans._LOWER; review).
    cut = dataclasses.replace(c, id=f"{c.id}:first{len(keep)}", end_line=c.start_line + len(keep) - 1,
                              content_hash=f"{c.content_hash}:first{len(keep)}", text="".join(keep))
    return dataclasses.replace(sc, chunk=cut, trimmed=True)


def _merged(picks: list[ScoredChunk], lines: list[str]) -> list[dict[str, Any]]:
    """Chosen chunks of one file in line order; chunks that touch, overlap or are parted only by a blank
    line or two become one span."""
    picks = sorted(picks, key=lambda s: (s.chunk.start_line, s.chunk.end_line))
    groups: list[list[ScoredChunk]] = []
    for s in picks:
        end = max(g.chunk.end_line for g in groups[-1]) if groups else 0
        gap = lines[end: s.chunk.start_line - 1] if groups else []
        if groups and s.chunk.start_line - 1 - end <= MERGE_GAP and all(not ln.strip() for ln in gap):
            groups[-1].append(s)
        else:
            groups.append([s])
    out = []
    for g in groups:
        start = g[0].chunk.start_line
        end = max(s.chunk.end_line for s in g)
        if len(g) == 1:
            text = g[0].chunk.text if g[0].chunk.text.endswith("\n") else g[0].chunk.text + "\n"
        else:
            text = "".join(lines[start - 1: end])
        best = max(g, key=lambda s: s.value)  # the chunk that earned the span its place (links included)
        out.append({"startLine": start, "endLine": end, "text": text, "whole": False,
                    "why": why_of(best, packed=True, head=g[0].chunk), "_picks": g})
    # A span holding a line of the pasted trace comes first in its file, as the listing has it (README); packed in
    # line order, it came last of three in express's test/app.render.js (an agents' newcomer, session 38).
    # Among them the innermost frame's (where the program failed) leads: spans.frames_first scores a frame's
    # chunk higher the more inner its frame; in line order, a caller defined above came first (session 39).
    lead = [max((s.score for s in g if s.frame_lines), default=None) for g in groups]
    return [sp for _k, sp in sorted(zip(lead, out, strict=True), key=lambda t: (t[0] is None, -(t[0] or 0.0)))]
