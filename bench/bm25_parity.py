"""BM25 parity: tantivy's answers to the engine's BM25 queries against Whoosh's, on the same chunks.

For each sample, the question is analysed as the engine does (``analyse``, the 24 rarest terms), then
searched in a corpus index's Whoosh store and in its tantivy store (two copies of one manifest, e.g. a
``bench.arb`` index root with ``CORPUS`` and ``CORPUS-whoosh``), each ranking read as the bm25 branch reads it
(files by their best chunk, top 50). Reported per tantivy scoring mode: rank agreement with Whoosh's files
(Spearman over Whoosh's top 50, a file missing from the other list counted at rank 51; overlap of the top 10),
the top score against Whoosh's top score, each ranking's MRR of the gold files, and the time of a search
(Whoosh's first call, tantivy's second: compare the tantivy modes with each other).

    python -m bench.bm25_parity --samples ../shared/bench/dev_mined.jsonl --corpora /work/corpora/dev_mined \
        --index-root /work/bench_out/s7_train/arb_idx
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path
from typing import Any

from delphi_ls.evaluation.scoring import ask, corpus_dir, gold_of
from delphi_ls.retrieval.branches.base import files_from_chunks
from delphi_ls.retrieval.query import analyse
from delphi_ls.stores.lexical import LexicalStore
from delphi_ls.stores.tantivy_store import SCORINGS, TantivyStore

DEPTH = 50


def spearman(ref: list[str], other: list[str], depth: int = DEPTH) -> float:
    """Spearman's rho over ``ref``'s files (ranks in ``other``; absent = depth + 1)."""
    if len(ref) < 2:
        return 1.0
    pos = {p: i + 1 for i, p in enumerate(other[:depth])}
    a = list(range(1, len(ref) + 1))
    b = [pos.get(p, depth + 1) for p in ref]
    ma, mb = statistics.fmean(a), statistics.fmean(b)
    cov = sum((x - ma) * (y - mb) for x, y in zip(a, b, strict=True))
    va = sum((x - ma) ** 2 for x in a) ** 0.5
    vb = sum((y - mb) ** 2 for y in b) ** 0.5
    return cov / (va * vb) if va and vb else 1.0


def rr(ranked: list[str], gold: list[str]) -> float:
    for i, p in enumerate(ranked):
        if p in gold:
            return 1.0 / (i + 1)
    return 0.0


def files(rows: list[tuple[str, str, float]]) -> list[str]:
    return [h.path for h in files_from_chunks(rows, limit=DEPTH)]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--samples", required=True)
    ap.add_argument("--corpora", required=True)
    ap.add_argument("--index-root", required=True, help="holds CORPUS/tantivy and CORPUS-whoosh/whoosh")
    ap.add_argument("--modes", default=",".join(SCORINGS))
    args = ap.parse_args(argv)
    import json

    samples = [json.loads(line) for line in Path(args.samples).read_text().splitlines() if line.strip()]
    modes = args.modes.split(",")
    root = Path(args.index_root)
    stats: dict[str, dict[str, list[float]]] = {m: {"rho": [], "top10": [], "scale": [], "rr": [], "ms": []}
                                               for m in ["Whoosh store", *modes]}
    tasks: list[str] = []
    by_corpus: dict[Path, list[dict[str, Any]]] = {}
    for s in samples:
        d = corpus_dir(Path(args.corpora), s)
        if gold_of(s) and (root / d.name / "tantivy").is_dir() and (root / f"{d.name}-whoosh" / "whoosh").is_dir():
            by_corpus.setdefault(d, []).append(s)
    for d, group in sorted(by_corpus.items()):
        wh = LexicalStore(root / f"{d.name}-whoosh" / "whoosh")
        tv = TantivyStore(root / d.name / "tantivy")
        for s in group:
            text, _anchors = ask(s)
            q = analyse(text)
            gold = gold_of(s)
            terms = wh.rarest(q.terms, 24)
            t0 = time.perf_counter()
            w_rows = wh.search_terms(terms, limit=400)
            stats["Whoosh store"]["ms"].append((time.perf_counter() - t0) * 1000)
            w_files = files(w_rows)
            tasks.append(s["task_type"])
            stats["Whoosh store"]["rr"].append(rr(w_files, gold))
            for m in modes:
                tv.search_terms(terms, limit=400, scoring=m)  # warm: the second call is timed
                t0 = time.perf_counter()
                t_rows = tv.search_terms(terms, limit=400, scoring=m)
                stats[m]["ms"].append((time.perf_counter() - t0) * 1000)
                t_files = files(t_rows)
                st = stats[m]
                st["rho"].append(spearman(w_files, t_files))
                st["top10"].append(len(set(w_files[:10]) & set(t_files[:10])) / max(1, min(10, len(w_files))))
                if w_rows and t_rows and w_rows[0][2]:
                    st["scale"].append(t_rows[0][2] / w_rows[0][2])
                st["rr"].append(rr(t_files, gold))
        wh.close()
        tv.close()
        print(f"{d.name}: {len(group)}", file=sys.stderr)
    print(f"{len(tasks)} questions, {len(by_corpus)} corpora; rankings of files (best chunk), top {DEPTH}\n")
    print("| scoring | Spearman vs Whoosh (median / mean) | top-10 overlap | top score / Whoosh's (median) "
          "| MRR all | MRR intent2code | MRR code2test | search p50 / p95 (ms) |")
    print("|---|---|---|---|---|---|---|---|")
    for m, st in stats.items():
        def mrr(task: str | None, st: dict[str, list[float]] = st) -> float:
            v = [x for x, t in zip(st["rr"], tasks, strict=True) if task is None or t == task]
            return statistics.fmean(v) if v else 0.0
        rho = f"{statistics.median(st['rho']):.3f} / {statistics.fmean(st['rho']):.3f}" if st["rho"] else "1 / 1"
        top = f"{statistics.fmean(st['top10']):.3f}" if st["top10"] else "1"
        scale = f"{statistics.median(st['scale']):.3f}" if st["scale"] else "1"
        q = statistics.quantiles(st["ms"], n=20)
        ms = f"{statistics.median(st['ms']):.2f} / {q[-1]:.2f}"
        print(f"| {m} | {rho} | {top} | {scale} | {mrr(None):.4f} | {mrr('intent2code'):.4f} | {mrr('code2test'):.4f} | {ms} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
