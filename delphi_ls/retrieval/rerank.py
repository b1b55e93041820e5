"""Rerankers over the fused list: the learned ranker, then the cross-encoder.

Letting a cross-encoder reorder a deep window outright promotes plausible files
from the tail (docs/DESIGN.md, lesson 4); only its top ``window`` move, and only by a blend.
"""

from __future__ import annotations

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
        order = _keep_depth(order, movable, keep)
    return _reorder(fused, n, movable, order, "ltr")


def _keep_depth(order: list[int], movable: list[int], keep: int) -> list[int]:
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
