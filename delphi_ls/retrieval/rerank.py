"""Rerankers over the fused list: the learned ranker, then the cross-encoder.

Letting a cross-encoder reorder a deep window outright promotes plausible files
from the tail (DESIGN lesson 4); only its top ``window`` move, and only by a blend.
"""

from __future__ import annotations

import numpy as np

from ..models.cross_encoder import CrossEncoder
from .fusion import Fused


def rerank(query: str, fused: list[Fused], passages: dict[str, str], model: CrossEncoder, window: int,
           weight: float) -> list[Fused]:
    head, tail = fused[:window], fused[window:]
    if len(head) < 2:
        return fused
    logits = model.score(query, [passages.get(f.path, f.path) for f in head])
    ce = 1.0 / (1.0 + np.exp(-logits))
    fs = np.array([f.score for f in head])
    span = fs.max() - fs.min()
    fn = (fs - fs.min()) / span if span > 0 else np.ones_like(fs)
    blended = (1 - weight) * fn + weight * ce
    order = np.argsort(-blended, kind="stable")
    top_score = head[0].score
    new_head = [head[i] for i in order]
    # Keep scores monotone so the tail stays below the window.
    for i, f in enumerate(new_head):
        f.score = top_score * (1.0 - 0.001 * i) if i else top_score
        f.branches["rerank"] = i + 1
    floor = new_head[-1].score
    for f in tail:
        f.score = min(f.score, floor * 0.999)
    return new_head + tail


def learned_rerank(fused: list[Fused], scores: np.ndarray) -> list[Fused]:
    """Reorder the head (``len(scores)`` files) by the learned ranker's scores.

    The ranker was trained on exactly this window, with the fused rank among its
    features, so it reorders outright rather than blending.
    """
    n = len(scores)
    if n < 2:
        return fused
    head, tail = fused[:n], fused[n:]
    order = np.argsort(-scores, kind="stable")
    new_head = [head[i] for i in order]
    top_score = head[0].score
    for i, f in enumerate(new_head):
        f.score = top_score * (1.0 - 0.001 * i)
        f.branches["ltr"] = i + 1
    floor = new_head[-1].score
    for f in tail:
        f.score = min(f.score, floor * 0.999)
    return new_head + tail
