"""Where the spans' share of an answer goes (issue 17, latency): warm answers at 4,000 tokens, timed.

    flock /work/notes/cpu.lock nice -n 5 python -m bench.spans_profile --samples ../shared/bench/dev_mined.jsonl \\
        --corpora /work/corpora/dev_mined --index-root DIR --n 60 --profile OUT.prof --dump OUT.jsonl

For the first ``--n`` dev samples (by corpus, as ``bench.spans`` visits them): each question is asked
``--repeat`` times per span mode (the scored spans and the legacy ones, alternately first) with
``limit=100`` and ``budget_tokens=4000``, as ``bench.spans`` times them. It prints the wall p50 per mode,
the p50 of the answer's own ``spans`` and ``packing`` stage timings, and with ``--profile`` writes a
cProfile of the scored mode's answers only. ``--timers`` wraps the functions of TIMED (inclusive wall time,
so a reader nested in a span function counts in both) and prints their mean ms per answer and calls per
answer, per mode. ``--dump`` writes every scored answer's listed spans and
packed context, so a speed change can be checked to leave every output byte-identical on real
questions (``cmp`` two dumps), beside the golden tests.
"""

from __future__ import annotations

import argparse
import cProfile
import json
import statistics
import sys
import time
from pathlib import Path
from typing import Any

from delphi_ls import Engine
from delphi_ls.evaluation.scoring import ask, corpus_dir, gold_of
from delphi_ls.retrieval import packing, retriever, spans
from delphi_ls.stores import meta

# (owner, attribute) of what --timers wraps: the span functions and the manifest's chunk reads.
TIMED = [(spans.SpanQuery, "build"), (spans, "score_chunks"), (spans, "listed_spans"), (spans, "legacy_spans"),
         (spans, "evidence_spans"), (meta.MetaStore, "chunks_of"), (meta.MetaStore, "chunks_of_paths"),
         (meta.MetaStore, "first_chunks"), (meta.MetaStore, "chunks_by_ids"), (retriever, "pack"),
         (retriever, "legacy_pack")]


class Timers:
    """Inclusive wall time and calls of each TIMED function, charged to the mode being asked."""

    def __init__(self) -> None:
        self.mode = ""
        self.ms: dict[tuple[str, str], float] = {}
        self.calls: dict[tuple[str, str], int] = {}
        for owner, name in TIMED:
            fn = getattr(owner, name, None)
            if fn is None:
                continue  # a function this commit does not have
            if isinstance(owner, type) and isinstance(owner.__dict__.get(name), classmethod):
                fn = fn.__func__
                setattr(owner, name, classmethod(self._wrap(f"{owner.__name__}.{name}", fn)))
            else:
                label = f"{getattr(owner, '__name__', owner).rsplit('.', 1)[-1]}.{name}"
                setattr(owner, name, self._wrap(label, fn))
        packing.score_chunks = spans.score_chunks  # the packer's own name for it

    def _wrap(self, label: str, fn: Any) -> Any:
        def timed(*a: Any, **k: Any) -> Any:
            t0 = time.perf_counter()
            try:
                return fn(*a, **k)
            finally:
                key = (self.mode, label)
                self.ms[key] = self.ms.get(key, 0.0) + (time.perf_counter() - t0) * 1000
                self.calls[key] = self.calls.get(key, 0) + 1
        return timed

    def report(self, answers: dict[str, int]) -> str:
        labels = sorted({lb for _m, lb in self.ms})
        out = ["| function | " + " | ".join(f"{m}: ms / answer (calls)" for m in answers) + " |",
               "|---|" + "---|" * len(answers)]
        for lb in labels:
            cells = [f"{self.ms.get((m, lb), 0.0) / max(n, 1):.2f} ({self.calls.get((m, lb), 0) / max(n, 1):.1f})"
                     for m, n in answers.items()]
            out.append(f"| `{lb}` | " + " | ".join(cells) + " |")
        return "\n".join(out)


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--samples", required=True)
    ap.add_argument("--corpora", required=True)
    ap.add_argument("--index-root", required=True)
    ap.add_argument("--embedder", default="potion-base-8M")
    ap.add_argument("--n", type=int, default=60)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--limit", type=int, default=100)
    ap.add_argument("--budget", type=int, default=4000)
    ap.add_argument("--profile", help="write the scored mode's cProfile here")
    ap.add_argument("--timers", action="store_true", help="time the span functions and chunk reads (TIMED)")
    ap.add_argument("--dump", help="write the scored answers' spans and packed context here (JSON lines)")
    args = ap.parse_args(argv)
    samples = [json.loads(ln) for ln in open(args.samples) if ln.strip()]
    samples = [s for s in samples if s.get("fix_commit") and gold_of(s)]
    by_corpus: dict[Path, list[dict[str, Any]]] = {}
    for s in samples:
        by_corpus.setdefault(corpus_dir(Path(args.corpora), s), []).append(s)
    prof = cProfile.Profile() if args.profile else None
    timers = Timers() if args.timers else None
    wall: dict[str, list[float]] = {"scored": [], "legacy": []}
    stage: dict[str, dict[str, list[float]]] = {m: {"spans": [], "packing": [], "total": []} for m in wall}
    dump = open(args.dump, "w") if args.dump else None
    asked = 0
    for cdir, group in sorted(by_corpus.items()):
        if asked >= args.n:
            break
        eng = Engine(cdir, index_dir=str(Path(args.index_root) / cdir.name), embedder=args.embedder)
        eng.index()
        eng.context("warm up", limit=1, budget_tokens=1000)
        for s in group:
            if asked >= args.n:
                break
            asked += 1
            text, anchors = ask(s)
            valid = [a for a in anchors if (cdir / a).exists()]
            modes = ["scored", "legacy"] if asked % 2 else ["legacy", "scored"]
            per: dict[str, list[float]] = {m: [] for m in modes}
            for _ in range(args.repeat):
                for mode in modes:
                    eng.span_mode = mode  # type: ignore[attr-defined]
                    if timers is not None:
                        timers.mode = mode
                    if prof is not None and mode == "scored":
                        prof.enable()
                    t0 = time.perf_counter()
                    ans = eng.context(text, anchors=valid, limit=args.limit, budget_tokens=args.budget)
                    dt = time.perf_counter() - t0
                    if prof is not None and mode == "scored":
                        prof.disable()
                    per[mode].append(dt)
                    for k in stage[mode]:
                        stage[mode][k].append(float(ans["timingsMs"].get(k, 0.0)))
                    if dump is not None and mode == "scored" and len(per[mode]) == 1:
                        rows = [{"path": r["path"], "spans": r["spans"]} for r in ans["results"]]
                        dump.write(json.dumps({"id": s["id"], "results": rows, "packed": ans["packed"],
                                               "tokens": ans["packedTokens"]}, sort_keys=True) + "\n")
            for mode in modes:
                wall[mode].append(statistics.median(per[mode]))  # a question's own median of its repeats
            print(f"  {s['id']} scored {statistics.median(per['scored']) * 1000:.1f} ms, "
                  f"legacy {statistics.median(per['legacy']) * 1000:.1f} ms", file=sys.stderr)
        eng.close()
    if dump is not None:
        dump.close()
    p50 = {m: statistics.median(v) for m, v in wall.items()}
    print(f"{asked} questions, {args.repeat} repeats, budget {args.budget}, limit {args.limit}")
    print(f"wall p50: scored {p50['scored'] * 1000:.1f} ms, legacy {p50['legacy'] * 1000:.1f} ms, "
          f"ratio {p50['scored'] / p50['legacy']:.3f}")
    for m in wall:
        print(f"{m}: stage p50 (ms) " + ", ".join(f"{k} {statistics.median(v):.2f}" for k, v in stage[m].items()))
    if timers is not None:
        print(timers.report({m: len(v) * args.repeat for m, v in wall.items()}))
    if prof is not None:
        prof.dump_stats(args.profile)
        import pstats

        pstats.Stats(prof).sort_stats("cumulative").print_stats(45)


if __name__ == "__main__":
    main()
