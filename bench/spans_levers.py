"""Three first-span levers measured offline on a ``bench.spans_sweep`` dump (issue 17, session 6).

    nice -n 5 python -m bench.spans_sweep dump ... --out DUMP.pkl      # see bench/spans_sweep.py
    nice -n 5 python -m bench.spans_levers DUMP.pkl --mirrors /work/.mirror [--embedder minilm-l6-int8]

For the gold files in the top 20 it re-scores each file's chunks and reports ``first_span_hit`` per
task (as ``bench.spans`` computes it) under:

- ``definition``: the first listed span widened to the whole function or method the best chunk begins
  or sits inside (large definitions are cut into line windows that name no symbol), up to N lines;
- ``recency``: ``git blame`` at the base commit; a chunk's newest line (its committer time) as a
  feature, by rank within the file or as ``exp(-age / tau days)``, added to the chunk's score share;
- ``similarity``: the cosine of the question and each chunk (``path + text``) under an embedder,
  min-max scaled within the file and added with weight w (w = 1e6: the similarity alone).

Each lever is added to the shipped span score (the share of the file's best chunk, so weights read the
same in every file). The median first-span length is printed beside the definition lever, because a
longer first span overlaps more regions by its length alone.
"""

from __future__ import annotations

import argparse
import math
import pickle
import statistics
import subprocess
import time
from pathlib import Path
from typing import Any

from bench.spans import first_hits
from bench.spans_sweep import _Meta
from delphi_ls.models.embedders import load_embedder
from delphi_ls.retrieval import spans as S
from delphi_ls.retrieval.description import clean_request

FUNCS = frozenset({"function", "method"})


def widened(c: Any, defs: list[Any], cap: int) -> tuple[int, int] | None:
    """The smallest function/method the chunk begins or sits inside, joined with the chunk, if ≤ cap lines."""
    best = None
    for s in defs:
        if s.kind not in FUNCS:
            continue
        inside = s.line <= c.start_line and s.end_line >= c.end_line
        begins = c.start_line <= s.line <= c.end_line and s.end_line > c.end_line
        if (inside or begins) and s.end_line - s.line + 1 <= cap:
            span = (min(s.line, c.start_line), max(s.end_line, c.end_line))
            if best is None or span[1] - span[0] < best[1] - best[0]:
                best = span
    return best


def blame_times(mirror: Path, base: str, path: str) -> dict[int, int]:
    """Line -> committer time of the commit that last touched it, at ``base``."""
    out = subprocess.run(["git", "--git-dir", str(mirror), "blame", "--incremental", base, "--", path],
                         capture_output=True, text=True, check=False).stdout
    times: dict[str, int] = {}
    lines: dict[int, str] = {}
    cur = ""
    for ln in out.splitlines():
        parts = ln.split(" ")
        if len(parts) == 4 and len(parts[0]) == 40:
            cur = parts[0]
            for i in range(int(parts[2]), int(parts[2]) + int(parts[3])):
                lines[i] = cur
        elif ln.startswith("committer-time "):
            times[cur] = int(parts[1])
    return {i: times.get(c, 0) for i, c in lines.items()}


def recency(sc: list[S.ScoredChunk], times: dict[int, int], mode: str, tau: float) -> list[float]:
    newest = max(times.values(), default=0)
    mx = [max((times.get(i, 0) for i in range(s.chunk.start_line, s.chunk.end_line + 1)), default=0) for s in sc]
    if mode == "exp":
        return [math.exp(-(newest - m) / 86400 / tau) for m in mx]
    rank = {i: r for r, i in enumerate(sorted(range(len(mx)), key=lambda i: -mx[i]))}
    return [1.0 / (1 + rank[i]) for i in range(len(mx))]


def first_span_hit(data: list[dict[str, Any]], extra: Any = None, cap: int = 0) -> tuple[dict[str, float], dict[str, float]]:
    """first_span_hit per task, and the median first-span length over gold files."""
    hits: dict[str, list[int]] = {}
    lengths: dict[str, list[int]] = {}
    for d in data:
        sq = S.SpanQuery.build(d["q"], d["lists"], d["anchors"], _Meta(d))  # type: ignore[arg-type]
        first = {}
        for g in d["regs"]:
            if g not in d["order"]:
                continue
            sc = S.score_chunks(g, d["chunks"][g], sq)
            if extra is not None:
                best = max((s.score for s in sc), default=1.0) or 1.0
                add, alone = extra(d, g, sc)
                for s, x in zip(sc, add, strict=True):
                    s.score = (0.0 if alone else s.score / best) + x
            ls = S.listed_spans(sc, set())
            if not ls:
                first[g] = None
                continue
            lo, hi = ls[0]["startLine"], ls[0]["endLine"]
            if cap:
                w = widened(S.ranked(sc)[0].chunk, d["defs"].get(g, []), cap)
                if w:
                    lo, hi = min(lo, w[0]), max(hi, w[1])
            first[g] = (lo, hi)
            lengths.setdefault(d["task"], []).append(hi - lo + 1)
        hits.setdefault(d["task"], []).extend(first_hits(first, d["regs"]))
    return ({t: round(statistics.mean(v), 3) for t, v in sorted(hits.items())},
            {t: statistics.median(v) for t, v in sorted(lengths.items())})


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("dump")
    ap.add_argument("--mirrors", required=True)
    ap.add_argument("--embedder", action="append", default=None,
                    help="embedders for the similarity lever (default: potion-base-8M)")
    args = ap.parse_args(argv)
    with open(args.dump, "rb") as f:
        data = pickle.load(f)
    print("shipped", *first_span_hit(data), flush=True)
    for cap in (100, 150, 250):
        print(f"definition ≤{cap} lines", *first_span_hit(data, cap=cap), flush=True)
    t0 = time.perf_counter()
    blame = {(d["id"], g): blame_times(Path(args.mirrors) / d["repo"].replace("/", "+") / "repo", d["base"], g)
             for d in data for g in d["regs"] if g in d["order"]}
    print(f"git blame: {len(blame)} files, {1000 * (time.perf_counter() - t0) / max(len(blame), 1):.0f} ms each")
    for mode, taus in (("rank", (0.0,)), ("exp", (7.0, 30.0, 180.0))):
        for tau in taus:
            for w in (0.1, 0.3, 0.5, 1.0, 1e6):
                def rec(d: dict[str, Any], g: str, sc: list[S.ScoredChunk], w: float = w, mode: str = mode,
                        tau: float = tau) -> tuple[list[float], bool]:
                    return [w * x for x in recency(sc, blame[(d["id"], g)], mode, tau)], w >= 1e6
                print(f"recency {mode} tau={tau:g} w={w:g}", first_span_hit(data, rec)[0], flush=True)
    for name in args.embedder or ["potion-base-8M"]:
        emb = load_embedder(name)
        t0 = time.perf_counter()
        sims = {}
        n = 0
        for d in data:
            qv = emb.embed([clean_request(d["q"].text)])[0]
            for g in d["regs"]:
                if g in d["order"]:
                    sims[(d["id"], g)] = emb.embed([c.path + "\n" + c.text for c in d["chunks"][g]]) @ qv
                    n += len(d["chunks"][g])
        print(f"{name}: {n} chunks embedded, {1000 * (time.perf_counter() - t0) / max(n, 1):.1f} ms per chunk")
        for w in (0.25, 0.5, 1.0, 2.0, 1e6):
            def sim(d: dict[str, Any], g: str, sc: list[S.ScoredChunk], w: float = w,
                    sims: dict[tuple[str, str], Any] = sims) -> tuple[list[float], bool]:
                v = sims[(d["id"], g)]
                lo, hi = float(v.min()), float(v.max())
                return [w * ((float(x) - lo) / (hi - lo) if hi > lo else 0.0) for x in v], w >= 1e6
            print(f"similarity {name} w={w:g}", first_span_hit(data, sim)[0], flush=True)


if __name__ == "__main__":
    main()
