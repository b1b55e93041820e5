"""Pack the best spans, and whole small files, into a token budget in rank order."""

from __future__ import annotations

from typing import Any

from ..stores.meta import MetaStore

CHARS_PER_TOKEN = 4  # a coarse, tokenizer-free estimate; callers budget conservatively


def tokens_of(text: str) -> int:
    return (len(text) + CHARS_PER_TOKEN - 1) // CHARS_PER_TOKEN


def pack(results: list[dict[str, Any]], meta: MetaStore, budget: int) -> tuple[list[dict[str, Any]], int]:
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
            out.append({"path": r["path"], "startLine": c.start_line, "endLine": c.end_line, "text": c.text, "whole": False})
            used += cost
        if used >= budget:
            break
    return out, used
