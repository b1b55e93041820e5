"""Rerankers over the fused list: the learned ranker, then the cross-encoder.

Letting a cross-encoder reorder a deep window outright promotes plausible files
from the tail (docs/DESIGN.md, lesson 4); only its top ``window`` move, and only by a blend.
"""

from __future__ import annotations

import dataclasses
import posixpath
import re
from collections.abc import Callable, Sequence

import numpy as np

from ..models.cross_encoder import CrossEncoder
from .fusion import Fused


def _reorder(fused: list[Fused], n: int, movable: list[int], order: list[int], label: str) -> list[Fused]:
    """Put the head's ``movable`` slots in ``order`` (pinned slots stay), and keep scores monotone so the
    tail stays below the head; each head file records its new place under ``label``."""
    head, tail = fused[:n], fused[n:]
    new_head = list(head)
    for slot, i in zip(movable, order, strict=True):
        new_head[slot] = head[i]
    top_score = head[0].score
    for i, f in enumerate(new_head):
        f.score = top_score * (1.0 - 0.001 * i)
        f.branches[label] = i + 1
    floor = new_head[-1].score
    for f in tail:
        f.score = min(f.score, floor * 0.999)
    return new_head + tail


def rerank(query: str, fused: list[Fused], passages: dict[str, str], model: CrossEncoder, window: int,
           weight: float, pinned: set[str] = frozenset()) -> list[Fused]:
    """Blend the cross-encoder's score into the top ``window``; ``pinned`` files keep their places
    (see ``learned_rerank``)."""
    head = fused[:window]
    movable = [i for i, f in enumerate(head) if f.path not in pinned]
    if len(movable) < 2:
        return fused
    logits = model.score(query, [passages.get(head[i].path, head[i].path) for i in movable])
    ce = 1.0 / (1.0 + np.exp(-logits))
    fs = np.array([head[i].score for i in movable])
    span = fs.max() - fs.min()
    fn = (fs - fs.min()) / span if span > 0 else np.ones_like(fs)
    blended = (1 - weight) * fn + weight * ce
    order = [movable[j] for j in np.argsort(-blended, kind="stable")]
    return _reorder(fused, len(head), movable, order, "rerank")


# Depth the learned ranker must keep: files of the fused top ``keep`` stay within this rank.
KEEP_WITHIN = 20


def learned_rerank(fused: list[Fused], scores: np.ndarray, pinned: set[str] = frozenset(),
                   keep: int = 0) -> list[Fused]:
    """Reorder the head (``len(scores)`` files) by the learned ranker's scores.

    The ranker was trained on exactly this window, with the fused rank among its
    features, so it reorders outright rather than blending. Files in ``pinned`` (the
    ones the caller handed over) keep their places: whether the file an agent holds is
    itself the answer depends on a workflow the training history cannot show (a review
    comment sits on its file; a change's tests are elsewhere), so the router decides that.
    """
    n = len(scores)
    if n < 2:
        return fused
    movable = [i for i, f in enumerate(fused[:n]) if f.path not in pinned]
    order = sorted(movable, key=lambda i: -float(scores[i]))
    if keep > 0:
        order = keep_depth(order, movable, keep)
    return _reorder(fused, n, movable, order, "ltr")


def keep_depth(order: list[int], movable: list[int], keep: int) -> list[int]:
    """``order`` rearranged so that every movable file of the fused top ``keep`` lands above rank
    KEEP_WITHIN: the movable places above that line hold those files and, in the rest of the places,
    the ranker's best others, all in the ranker's order; below the line, the ranker's order. The ranker
    still reorders the top and may promote files from deeper, but cannot drop one the fusion ranked high."""
    inside = sum(1 for slot in movable if slot < KEEP_WITHIN)  # movable places above the line
    kept = {i for i in order if i < keep}
    if len(kept) > inside:  # more to keep than places (pinned files hold some): the fusion's best first
        kept = set(sorted(kept)[:inside])
    others = inside - len(kept)
    top: list[int] = []
    for i in order:
        if i in kept:
            top.append(i)
        elif others > 0:
            top.append(i)
            others -= 1
    chosen = set(top)
    return top + [i for i in order if i not in chosen]


# Declarations and the files that implement them, by name (issue 19): a change "implements" behaviour,
# and its body lives in the implementation; the declaration shares its name and its words, so it ranks
# first by name (spdlog's `registry.h` above `registry-inl.h`, attrs' `__init__.pyi` above `_make.py`).
_HEADERS = (".h", ".hpp", ".hh", ".hxx")
_HEADER_IMPLS = ("-inl.h", "_inl.h", ".inl", "-inl.hpp", "_inl.hpp", ".c", ".cc", ".cpp", ".cxx", ".m", ".mm")
_INLINE_HEADER = re.compile(r"[-_]inl\.h(?:pp)?$")
_CSHARP_INTERFACE = re.compile(r"I[A-Z]\w*\.cs$")
TWIN_DEPTH = 20  # how deep the rule looks: the answer's first page


def implementation_twins(path: str, listed: Sequence[str]) -> list[str]:
    """The files of ``listed`` that implement the declaration ``path``: a `.pyi` stub's `.py`, a `.d.ts`'s
    `.js`/`.ts`, a C/C++ header's `-inl.h`/`.c`/`.cc`/`.cpp` of the same name (in its folder, or anywhere
    when the header sits under an `include/` folder), a PHP `FooInterface.php`'s `Foo.php`, a C# `IFoo.cs`'s
    `Foo.cs`. Empty for anything else."""
    folder, base = posixpath.split(path)
    by_name: dict[str, list[str]] = {}
    for p in listed:
        by_name.setdefault(posixpath.basename(p), []).append(p)

    def here(*names: str) -> list[str]:
        return [p for n in names for p in by_name.get(n, ()) if posixpath.dirname(p) == folder]

    if base.endswith(".pyi"):
        return here(base[:-4] + ".py")
    if base.endswith(".d.ts"):
        return here(*(base[:-5] + e for e in (".js", ".mjs", ".cjs", ".ts")))
    if base.endswith(_HEADERS) and not _INLINE_HEADER.search(base):
        stem = base.rsplit(".", 1)[0]
        names = [stem + e for e in _HEADER_IMPLS]
        if "/include/" in f"/{folder}/":
            return [p for n in names for p in by_name.get(n, ())]
        return here(*names)
    if base.endswith("Interface.php") and len(base) > len("Interface.php"):
        return [p for p in by_name.get(base[: -len("Interface.php")] + ".php", ())]
    if _CSHARP_INTERFACE.match(base):
        return list(by_name.get(base[1:], ()))
    return []


def innermost_first(fused: list[Fused], frame_files: list[str]) -> list[Fused]:
    """The file of a trace's innermost workspace frame, where the program failed, first. Fusion rewards files many
    branches find: express's `lib/response.js` (path #1, bm25 #1) came 4th, below `examples/*/index.js` that no frame
    names but whose words (`error`, `index`) the frames' paths share; a Windows Rust backtrace put its panicking
    file 2nd below the outer frames' (a newcomer, session 39). The other files keep their order; the places'
    scores are kept, so scores stay monotone."""
    at = next((i for i, f in enumerate(fused) if f.path in frame_files[:1]), None)
    if not at:
        return fused  # first already, or not among the answers (of kinds not asked for)
    scores = [f.score for f in fused[: at + 1]]
    # Copies: the fused list is also the trace's and the candidates' (a second call duplicated the note; review).
    head = [dataclasses.replace(f, branches=dict(f.branches), notes=list(f.notes)) for f in [fused[at], *fused[:at]]]
    for f, sc in zip(head, scores, strict=True):
        f.score = sc
    lead = head[0]
    lead.branches["frame"] = 1
    lead.notes.append(("frame", "holds the trace's innermost frame in the workspace"))
    return head + fused[at + 1:]


def implementation_first(fused: list[Fused], named: Callable[[str], bool],
                         pinned: set[str] = frozenset()) -> list[Fused]:
    """Each declaration in the top ``TWIN_DEPTH`` that ranks above one of its implementation twins moves
    to just below the highest such twin; the files between move up one place. A declaration the question
    names (``named``) or the caller handed over (``pinned``) stays. Scores stay monotone (the places'
    scores are kept, the files move)."""
    head = list(fused[:TWIN_DEPTH])
    paths = [f.path for f in head]
    moved: dict[str, str] = {}  # declaration -> the twin it now sits below
    changed = True
    while changed:
        changed = False
        for i, path in enumerate(paths):
            if path in moved or path in pinned or named(path):
                continue
            below = [paths.index(t) for t in implementation_twins(path, paths) if paths.index(t) > i]
            if below:
                j = min(below)
                moved[path] = paths[j]
                paths.insert(j, paths.pop(i))  # after the pop the twin is at j - 1: the declaration lands below it
                changed = True
                break
    if not moved:
        return fused
    by_path = {f.path: f for f in head}
    scores = [f.score for f in head]
    new_head = [by_path[p] for p in paths]
    for rank, (f, s) in enumerate(zip(new_head, scores, strict=True), start=1):
        f.score = s
        if f.path in moved:  # the answer says why a declaration sits below where its branches put it
            f.branches["twin"] = rank
            f.notes.append(("twin", f"a declaration; its implementation {moved[f.path]} ranks above it"))
    return new_head + fused[TWIN_DEPTH:]
