"""Retrieval benchmark on Agent Retrieval Bench samples, engine beside baselines in one run.

    python -m bench.arb --samples ../shared/bench/dev_mined.jsonl --corpora /path/to/corpora

Scoring follows ARB (../shared/bench/ARB_SCORING.md): gold field per task type,
file-level ranks, MRR without cutoff, Recall@5/10/20, unweighted means overall and
per task. Writes per-query JSONL records and a markdown report.
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import sys
import time
from pathlib import Path
from typing import Any

from delphi_ls import Engine
from delphi_ls.engine import take_over_index
from delphi_ls.evaluation.baselines import Baselines, Corpus
from delphi_ls.evaluation.scoring import ask, corpus_dir, gold_of, metrics, p95, summarise
from delphi_ls.retrieval.branches.registry import branch_names


# ---------------------------------------------------------------- run
def run(args: argparse.Namespace) -> dict[str, Any]:
    samples = [json.loads(line) for line in open(args.samples) if line.strip()]
    if args.max_samples:
        samples = samples[: args.max_samples]
    corpora = Path(args.corpora)
    out_dir = Path(args.out)
    out_dir.mkdir(parents=True, exist_ok=True)
    index_root = Path(args.index_root) if args.index_root else out_dir / "index"
    systems = ["engine"] + [b for b in args.baselines.split(",") if b]
    extra: dict[str, Any] = {}
    for kv in args.set or []:
        k, _, v = kv.partition("=")
        try:
            extra[k] = json.loads(v)
        except json.JSONDecodeError:
            extra[k] = v
    variants: dict[str, dict[str, Any]] = {"engine": {}}
    versus = None
    if args.rerankers:
        # The reranker ablation: "engine" is the fused ranking alone, every other row is compared with it.
        names = {"ltr": "engine+ltr", "cross-encoder": "engine+ce", "ltr+cross-encoder": "engine+ltr+ce"}
        variants = {"engine": {"reranker": "off"}}
        for spec in args.rerankers.split(","):
            variants[names.get(spec, f"engine+{spec}")] = {"reranker": spec}
        versus = "engine"
    for spec in args.variant or []:
        name, _, js = spec.partition("=")
        variants[name] = json.loads(js)
    if args.ablate:
        for b in (args.ablate.split(",") if args.ablate != "all" else branch_names()):
            variants[f"engine-no-{b}"] = {"branch_weights": {b: 0.0}}
        if args.ablate == "all":
            variants["engine-no-vectors-index"] = {"vectors": False}
    systems = list(variants) + [s for s in systems if s != "engine"]

    by_corpus: dict[Path, list[dict[str, Any]]] = {}
    skipped: list[str] = []
    for s in samples:
        if not gold_of(s):
            skipped.append(f"{s.get('id')}: no gold")
            continue
        d = corpus_dir(corpora, s)
        if not d.is_dir():
            skipped.append(f"{s.get('id')}: corpus missing ({d.name})")
            continue
        by_corpus.setdefault(d, []).append(s)

    records: list[dict[str, Any]] = []
    index_stats: list[dict[str, Any]] = []
    last_index_of_repo: dict[str, Path] = {}
    for n_c, (cdir, group) in enumerate(sorted(by_corpus.items())):
        print(f"[{n_c + 1}/{len(by_corpus)}] {cdir.name}: {len(group)} samples", file=sys.stderr)
        engines: dict[str, Engine] = {}
        lex_dirs: set[str] = set()
        for name, overrides in variants.items():
            ov = {"index_dir": str(index_root / cdir.name), "embedder": args.embedder, **extra, **overrides}
            if overrides.get("vectors") is False:
                ov["index_dir"] = str(index_root / (cdir.name + "-novec"))
            # Another lexical store (issue 18, tantivy beside Whoosh): its own index folder, a copy of the
            # engine's (same manifest, chunks and vectors) whose lexical index the run rebuilds from the
            # manifest, so only the store differs (two stores cannot share one folder: a switch rebuilds).
            lex = overrides.get("lexical_store")
            own_lex = lex is not None and lex != variants["engine"].get("lexical_store", extra.get("lexical_store"))
            rebuild = False
            if own_lex and "engine" in engines:
                ov["index_dir"] = str(index_root / f"{cdir.name}-{lex}")
                rebuild = ov["index_dir"] not in lex_dirs  # the first variant of this store builds it
                if rebuild:
                    shutil.rmtree(ov["index_dir"], ignore_errors=True)
                    shutil.copytree(index_root / cdir.name, ov["index_dir"])
                    lex_dirs.add(ov["index_dir"])
            idx = Path(ov["index_dir"])
            repo_key = cdir.name.rsplit("__", 1)[0] + (":novec" if overrides.get("vectors") is False else "")
            seeded = False
            builds = (name == "engine" or overrides.get("vectors") is False) and not own_lex
            if builds and args.fresh_indexes:
                # From scratch means its folder too: a folder a run before left under --index-root was taken up
                # again with nothing to index (0 files), so a "fresh" run measured an older code's indexes
                # (session 35 found it; the rankings came out the same that time).
                shutil.rmtree(idx, ignore_errors=True)
            if not idx.exists() and repo_key in last_index_of_repo and not args.fresh_indexes:
                # The same repository at another commit: start from its index, so only the
                # files that differ are re-chunked and re-embedded.
                shutil.copytree(last_index_of_repo[repo_key], idx)
                take_over_index(idx, cdir)  # the copy names the other commit's folder, which is still there
                seeded = True
            eng = Engine(cdir, **ov)
            if rebuild:
                t0 = time.perf_counter()
                rep = eng.index()  # the switch found at open: the lexical index rebuilt from the manifest
                index_stats.append({"corpus": cdir.name, "variant": name, "seconds": round(time.perf_counter() - t0, 3),
                                    "repaired": rep.repaired})
            elif builds:
                last_index_of_repo[repo_key] = idx
                t0 = time.perf_counter()
                rep = eng.index()
                index_stats.append({"corpus": cdir.name, "variant": name, "seconds": round(time.perf_counter() - t0, 3),
                                    "files": rep.files_indexed, "chunks": rep.chunks_written,
                                    "embedded": rep.chunks_embedded, "fromCache": rep.vectors_from_cache,
                                    "unchanged": rep.files_unchanged, "seeded": seeded})
            if eng.problems:
                raise SystemExit(f"{name}: {eng.problems}")
            eng.context("warm up", limit=1)  # latency is reported warm: the in-memory view is built here
            engines[name] = eng
        t0 = time.perf_counter()
        base = Baselines(Corpus.load(cdir)) if len(systems) > len(variants) else None
        base_build = time.perf_counter() - t0
        for s in group:
            text, anchors = ask(s)
            gold = gold_of(s)
            rec: dict[str, Any] = {"id": s.get("id"), "repo": s["repo"], "task": s["task_type"], "query": text,
                                   "anchors": anchors, "gold": gold, "systems": {}}
            for name, eng in engines.items():
                valid = [a for a in anchors if (cdir / a).exists()]
                t0 = time.perf_counter()
                ans = eng.context(text, anchors=valid, limit=100)
                dt = time.perf_counter() - t0
                ranked = [r["path"] for r in ans["results"]]
                rec["systems"][name] = {**metrics(ranked, gold), "latency": dt,
                                        "rerankMs": ans["timingsMs"].get("ltr", 0.0) + ans["timingsMs"].get("rerank", 0.0),
                                        "goldRanks": {g: (ranked.index(g) + 1 if g in ranked else None) for g in gold}}
                if name == "engine":
                    rec["shape"] = ans["query"]["shape"]
                    rec["top"] = [{"path": r["path"], "branches": r["branches"]} for r in ans["results"][:20]]
                    rec["timingsMs"] = ans["timingsMs"]
            if base is not None:
                btext = text + ("\n" + "\n".join(anchors) if anchors else "")
                for b in systems[len(variants):]:
                    t0 = time.perf_counter()
                    ranked = base.heuristic(btext, anchors) if b == "heuristic" else getattr(base, b)(btext)
                    dt = time.perf_counter() - t0
                    rec["systems"][b] = {**metrics(ranked, gold), "latency": dt}
            records.append(rec)
        for eng in engines.values():
            eng.close()
        if base is not None:
            index_stats.append({"corpus": cdir.name, "variant": "baselines-load", "seconds": round(base_build, 3)})

    with (out_dir / "records.jsonl").open("w") as f:
        for r in records:
            f.write(json.dumps(r) + "\n")
    summary = summarise(records, systems, versus)
    report = render(summary, records, systems, index_stats, skipped, args)
    (out_dir / "report.md").write_text(report)
    (out_dir / "summary.json").write_text(json.dumps({"summary": summary, "index": index_stats, "skipped": skipped}, indent=2))
    print(report)
    return summary


def render(summary: dict[str, Any], records: list[dict[str, Any]], systems: list[str], index_stats: list[dict[str, Any]],
           skipped: list[str], args: argparse.Namespace) -> str:
    lines = [f"# Retrieval benchmark: {Path(args.samples).name}", "",
             f"{len(records)} samples evaluated; embedder `{args.embedder}`; skipped: {len(skipped)}.", ""]
    d = "system−engine (fused only)" if args.rerankers else "engine−system"
    lines += [f"| task | system | n | MRR | R@5 | R@10 | R@20 | median lat (s) | p95 lat (s) | ΔMRR {d} [95% CI] | ΔR@5 [95% CI] "
              "| ΔR@10 [95% CI] | ΔR@20 [95% CI] | W/T/L (RR) |",
              "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for t, rows in summary.items():
        for s in systems:
            if s not in rows:
                continue
            r = rows[s]
            d = ""
            if s != "engine":
                d = (f"| {r['d_mrr']:+.3f} [{r['ci_mrr'][0]:+.3f}, {r['ci_mrr'][1]:+.3f}] "
                     f"| {r['d_r@5']:+.3f} [{r['ci_r@5'][0]:+.3f}, {r['ci_r@5'][1]:+.3f}] "
                     f"| {r['d_r@10']:+.3f} [{r['ci_r@10'][0]:+.3f}, {r['ci_r@10'][1]:+.3f}] "
                     f"| {r['d_r@20']:+.3f} [{r['ci_r@20'][0]:+.3f}, {r['ci_r@20'][1]:+.3f}] "
                     f"| {r['wins']}/{r['ties']}/{r['losses']} |")
            else:
                d = "| | | | | |"
            lines.append(f"| {t} | {s} | {r['n']} | {r['mrr']:.3f} | {r['r@5']:.3f} | {r['r@10']:.3f} | {r['r@20']:.3f} "
                         f"| {r['lat_median']:.3f} | {r['lat_p95']:.3f} {d}")
    if args.rerankers:
        lines += ["", "Positive Δ favours the system over the fused ranking alone; W/T/L are the system's, by reciprocal rank.", ""]
    else:
        lines += ["", "Positive Δ favours the engine. W/T/L compares each sample's reciprocal rank (engine vs that system).", ""]
    if args.rerankers:
        lines += ["Time the rerankers add per query (ms, measured inside the engine, same run):", "",
                  "| system | p50 | p95 | max |", "|---|---|---|---|"]
        for s in systems:
            ms = sorted(r["systems"][s].get("rerankMs", 0.0) for r in records if s in r["systems"])
            if ms and s.startswith("engine"):
                lines.append(f"| {s} | {statistics.median(ms):.1f} | {p95(ms):.1f} | {ms[-1]:.1f} |")
        lines.append("")
    eng_idx = [s for s in index_stats if s["variant"] == "engine"]
    if eng_idx:
        tot = sum(s["seconds"] for s in eng_idx)
        lines += [f"Indexing (reported apart from query latency): {len(eng_idx)} corpora, {tot:.1f} s in all, "
                  f"{sum(s.get('files', 0) for s in eng_idx)} files, {sum(s.get('chunks', 0) for s in eng_idx)} chunks, "
                  f"{sum(s.get('embedded', 0) for s in eng_idx)} vectors embedded ({sum(s.get('fromCache', 0) for s in eng_idx)} from the content cache); "
                  f"{sum(1 for s in eng_idx if s.get('seeded'))} corpora started from the index of the same repository at another commit "
                  f"({sum(s.get('unchanged', 0) for s in eng_idx)} files reused unchanged).", ""]
    shapes: dict[str, int] = {}
    for r in records:
        shapes[f"{r['task']}→{r.get('shape')}"] = shapes.get(f"{r['task']}→{r.get('shape')}", 0) + 1
    lines += ["Router: task → detected shape: " + ", ".join(f"{k} {v}" for k, v in sorted(shapes.items())), ""]
    if skipped:
        lines += ["Skipped samples:", *[f"- {s}" for s in skipped[:20]], ""]
    return "\n".join(lines)


def build_args(argv: list[str] | None = None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--samples", required=True)
    ap.add_argument("--corpora", required=True)
    ap.add_argument("--out", default="bench/out/arb")
    ap.add_argument("--index-root", help="where corpora indexes live (reused across runs)")
    ap.add_argument("--fresh-indexes", action="store_true",
                    help="index every corpus from scratch: its folder under --index-root deleted first, and no index "
                         "seeded from the same repository at another commit: slower, but a run no longer depends on "
                         "index history (Whoosh keeps deleted documents in its BM25 statistics until segments merge, "
                         "which moved MRR by ~0.02 between runs) or on the code that built an index left there")
    ap.add_argument("--embedder", default="potion-base-8M")
    ap.add_argument("--baselines", default="lexical,bm25,grep,heuristic")
    ap.add_argument("--ablate", nargs="?", const="all",
                    help="also run the engine with each branch off in turn (all, or a comma-separated list)")
    ap.add_argument("--rerankers", nargs="?", const="ltr,cross-encoder,ltr+cross-encoder",
                    help="reranker ablation: fused only against each reranker setting listed "
                         "(default: ltr, cross-encoder, ltr+cross-encoder)")
    ap.add_argument("--variant", action="append", metavar="NAME=JSON",
                    help='another engine configuration in the same run, e.g. no-structure={"branch_weights": {"graph": 0}}')
    ap.add_argument("--max-samples", type=int, default=0)
    ap.add_argument("--set", action="append", metavar="KEY=JSON", help="engine setting override, e.g. rrf_k=20")
    return ap.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    run(build_args(argv))
    return 0


if __name__ == "__main__":
    sys.exit(main())
