"""`delphi index | context | health | symbols | related-tests | related-code | eval`: argv in, engine calls, text or JSON out."""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Any

from .engine import Engine, RequestError
from .settings import SettingsError


class ProgressBar:
    """files and chunks per second with an ETA, on stderr, redrawn in place."""

    def __init__(self, stream=sys.stderr) -> None:
        self.stream = stream
        self.t0 = time.perf_counter()
        self.phase = ""
        self.phase_t0 = self.t0
        self.last = 0.0

    def __call__(self, phase: str, done: int, total: int, chunks: int) -> None:
        now = time.perf_counter()
        if phase != self.phase:
            if self.phase:
                self.stream.write("\n")
            self.phase, self.phase_t0 = phase, now
        if now - self.last < 0.2 and done < total:
            return
        self.last = now
        el = max(now - self.phase_t0, 1e-6)
        rate = done / el
        eta = (total - done) / rate if rate > 0 else 0
        width = 24
        fill = int(width * done / total) if total else width
        bar = "#" * fill + "-" * (width - fill)
        unit = "files" if phase == "lexical" else "chunks"
        extra = f" {chunks / el:,.0f} chunks/s" if phase == "lexical" else ""
        self.stream.write(f"\r{phase:8} [{bar}] {done}/{total} {unit} {rate:,.0f} {unit}/s{extra} ETA {eta:,.0f}s   ")
        self.stream.flush()

    def close(self) -> None:
        if self.phase:
            self.stream.write("\n")


def _overrides(args: argparse.Namespace) -> dict[str, Any]:
    overrides: dict[str, Any] = {}
    if getattr(args, "index_dir", None):
        overrides["index_dir"] = args.index_dir
    if getattr(args, "embedder", None):
        overrides["embedder"] = args.embedder
    if getattr(args, "no_vectors", False):
        overrides["vectors"] = False
    if getattr(args, "chroma_url", None):
        overrides["chroma_url"] = args.chroma_url
    if getattr(args, "reranker", None):
        overrides["reranker"] = args.reranker
    return overrides


def _engine(args: argparse.Namespace) -> Engine:
    return Engine(args.path, **_overrides(args))


def cmd_index(args: argparse.Namespace) -> int:
    with _engine(args) as eng:
        bar = ProgressBar() if not args.quiet else None
        t0 = time.perf_counter()
        rep = eng.index(progress=bar)
        if bar:
            bar.close()
        el = time.perf_counter() - t0
        counts = eng.meta.counts()
        summary = {"seconds": round(el, 2), **rep.__dict__, "counts": counts, "indexDir": str(eng.index_dir)}
        if args.json:
            print(json.dumps(summary, indent=2))
        else:
            print(f"indexed {rep.files_indexed} files ({rep.files_unchanged} unchanged, {rep.files_deleted} removed, "
                  f"{rep.files_skipped} skipped) in {el:.1f}s: {counts['files']} files, {counts['chunks']} chunks, "
                  f"{counts['vectors']} vectors; embedded {rep.chunks_embedded} ({rep.vectors_from_cache} from cache)")
            print(f"index: {eng.index_dir}")
    return 0


def cmd_context(args: argparse.Namespace) -> int:
    with _engine(args) as eng:
        rep = eng.index(progress=None if args.json else ProgressBar(), reembed=False)
        if not args.json and (rep.files_indexed or rep.chunks_embedded):
            sys.stderr.write("\n")
        draft = Path(args.draft).read_text(encoding="utf-8", errors="replace") if args.draft else None
        ans = eng.context(args.question, anchors=args.anchor or None, draft=draft, limit=args.limit,
                          budget_tokens=args.budget_tokens, kinds=args.kind or None, trace_file=args.trace)
        if args.json:
            print(json.dumps(ans, indent=2))
            return 0
        q = ans["query"]
        print(f"query shape: {q['shape']}" + (f" (prefers {', '.join(q['prefer'])})" if q["prefer"] else ""))
        for r in ans["results"]:
            branches = " ".join(f"{b}:{k}" for b, k in r["branches"].items())
            print(f"{r['rank']:>3}. {r['path']}  [{r['kind']}] ({branches})")
            print(f"      {r['why']}")
            if r["spans"]:
                s = r["spans"][0]
                print(f"      L{s['startLine']}-{s['endLine']}: {s['preview'][:100]}")
        not_ready = {b: s for b, s in ans["branchesReady"].items() if not s.startswith("ready")}
        if not_ready:
            for b, s in not_ready.items():
                print(f"note: branch {b}: {s}")
        print(f"({ans['timingsMs']['total']:.0f} ms)")
    return 0


def cmd_health(args: argparse.Namespace) -> int:
    with _engine(args) as eng:
        h = eng.health()
        if args.json:
            print(json.dumps(h, indent=2))
        else:
            print(f"workspace: {h['root']}\nindex:     {h['indexDir']}")
            c = h["counts"]
            print(f"counts:    {c['files']} files, {c['chunks']} chunks, {c['vectors']} vectors, {c['symbols']} symbols, {c['skipped']} skipped")
            m = h["model"]
            print(f"model:     serving {m['serving']['name'] if m['serving'] else '-'}; index built with "
                  f"{m['stored']['name'] if m['stored'] else '-'}; match={m['match']}; probe={m['probe'] and m['probe']['status']}")
            for b, s in h["branches"].items():
                print(f"branch {b:12} {s}")
            for p in h["problems"]:
                print(f"{p['severity']:7} {p['message']}")
            if h["skipped"]:
                print("skipped files:")
                for p, r in list(h["skipped"].items())[:50]:
                    print(f"  {p}: {r}")
                if len(h["skipped"]) > 50:
                    print(f"  ... and {len(h['skipped']) - 50} more (--json lists all)")
        return 0 if h["ok"] else 1


def cmd_symbols(args: argparse.Namespace) -> int:
    with _engine(args) as eng:
        eng.index(reembed=False, vectors=False)
        for s in eng.symbols(args.query, args.limit):
            print(f"{s['name']}  {s['kind']}  {s['path']}:{s['line']}")
    return 0


def _print_related(args: argparse.Namespace, which: str) -> int:
    with _engine(args) as eng:
        eng.index(reembed=False, vectors=False)
        found = eng.related_tests(args.file) if which == "tests" else eng.related_code(args.file)
        for r in found:
            print(f"{r['path']}  ({r['why']})")
    return 0


def cmd_related_tests(args: argparse.Namespace) -> int:
    return _print_related(args, "tests")


def cmd_related_code(args: argparse.Namespace) -> int:
    return _print_related(args, "code")


def cmd_eval(args: argparse.Namespace) -> int:
    from .evaluation.history import HistoryError
    from .evaluation.runner import evaluate_history, render

    baselines = tuple(b for b in args.baselines.split(",") if b)
    unknown = [b for b in baselines if b not in ("bm25", "grep", "heuristic", "lexical")]
    if unknown:
        raise RequestError("baselines", f"unknown baseline(s) {', '.join(unknown)} (known: bm25, grep, heuristic, lexical)")
    try:
        result = evaluate_history(args.history, args.changes, baselines, args.work,
                                  log=lambda m: print(m, file=sys.stderr), **_overrides(args))
    except (HistoryError, ValueError) as e:
        print(f"delphi: error: {e}", file=sys.stderr)
        return 2
    if args.out:
        Path(args.out).write_text(json.dumps(result, indent=1))
    print(json.dumps(result["summary"], indent=1) if args.json else render(result))
    return 0


def build_parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(prog="delphi", description="Delphi: a local context engine for code")
    sub = ap.add_subparsers(dest="cmd", required=True)

    def engine_options(p: argparse.ArgumentParser) -> None:
        p.add_argument("--embedder", help="potion-base-8M (default), minilm-l6-int8, or a model2vec folder")
        p.add_argument("--no-vectors", action="store_true", help="lexical branches only")
        p.add_argument("--reranker", help="off, ltr (default), cross-encoder, ltr+cross-encoder, or a folder")
        p.add_argument("--json", action="store_true", help="machine-readable output")

    def common(p: argparse.ArgumentParser) -> None:
        p.add_argument("path", help="the workspace folder")
        p.add_argument("--index-dir", help="where the index lives (default: the user cache dir)")
        p.add_argument("--chroma-url", help="a `chroma run` server to hold the vectors")
        engine_options(p)

    p = sub.add_parser("index", help="index a folder (incremental)")
    common(p)
    p.add_argument("--quiet", action="store_true")
    p.set_defaults(fn=cmd_index)

    p = sub.add_parser("context", help="ask a question; ranked files with reasons")
    common(p)
    p.add_argument("question")
    p.add_argument("--anchor", action="append", help="a file you already have (repeatable)")
    p.add_argument("--draft", help="a file holding code you think the answer looks like")
    p.add_argument("--limit", type=int, default=10)
    p.add_argument("--budget-tokens", type=int)
    p.add_argument("--kind", action="append", choices=["code", "test", "doc", "config", "other"])
    p.add_argument("--trace", help="append this query's trace (JSONL) to a file")
    p.set_defaults(fn=cmd_context)

    p = sub.add_parser("health", help="index health report (exit 1 on errors)")
    common(p)
    p.set_defaults(fn=cmd_health)

    p = sub.add_parser("symbols", help="fuzzy workspace symbol search")
    common(p)
    p.add_argument("query")
    p.add_argument("--limit", type=int, default=20)
    p.set_defaults(fn=cmd_symbols)

    p = sub.add_parser("related-tests", help="tests that go with a source file")
    common(p)
    p.add_argument("file")
    p.set_defaults(fn=cmd_related_tests)

    p = sub.add_parser("related-code", help="source files a test exercises")
    common(p)
    p.add_argument("file", metavar="test")
    p.set_defaults(fn=cmd_related_code)

    p = sub.add_parser("eval", help="score Delphi and baselines on a git repository's own merged changes")
    p.add_argument("--history", required=True, metavar="PATH", help="a git repository (only read)")
    p.add_argument("-n", "--changes", type=int, default=50, help="how many recent merged changes to mine")
    p.add_argument("--baselines", default="bm25,grep,heuristic", help="comma-separated; empty for none")
    p.add_argument("--work", help="scratch folder for trees and the index (default: a temporary one, removed)")
    p.add_argument("--out", help="write every question's record and the summary as JSON here")
    engine_options(p)
    p.set_defaults(fn=cmd_eval)
    return ap


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return int(args.fn(args) or 0)
    except (SettingsError, RequestError, FileNotFoundError) as e:
        print(f"delphi: error: {e}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("\ndelphi: interrupted; the index stays consistent and the next run resumes", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
