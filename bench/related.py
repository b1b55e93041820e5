"""`related-tests FILE` (the CLI, MCP's `related_tests` and `delphi/relatedTests` of a file) against the code2test gold.

    python -m bench.related --samples ../shared/bench/dev_mined.jsonl --corpora /work/corpora/mined \\
        --index-root DIR [--out bench/out/related]

For each code2test sample, the tests `Engine.related_tests(changed_file, limit=20)` lists, scored as the
engine's answers are (``evaluation.scoring.metrics``: MRR without cutoff, Recall@5/10/20), beside the engine's
own answers from the same index in the same run, tests only: to the same file alone (``by file``: "which tests
cover FILE" with FILE as the anchor, what `related-tests` is given) and to the sample's question (``context``:
the change's title and description as well).
The indexes here are lexical only (vectors off, the learned ranker on): the engine's order for the file,
which `related_tests` takes, then lacks the vector branch that a user's index has. ``listed`` is the share of
samples with any related test (a lens that says "0 related tests" when the change's
test exists), ``mean n`` how many are listed, ``p50 ms`` the median time of a ``related_tests`` call (warm; the
machine is shared: compare trees in one run). ``context`` here is the engine without its vector branch: read it
as the bar, not as the engine's figure.

Compare two trees by running this with each on ``PYTHONPATH`` (the figures are the tree's, not a flag's).
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from pathlib import Path
from typing import Any

from delphi_ls import Engine
from delphi_ls.api import RequestError
from delphi_ls.evaluation.scoring import ask, corpus_dir, gold_of, metrics

LIMIT = 20


def run(args: argparse.Namespace) -> list[dict[str, Any]]:
    samples = [json.loads(ln) for ln in open(args.samples) if ln.strip()]
    samples = [s for s in samples if s["task_type"] == "code2test" and gold_of(s) and s["query"].get("changed_file")]
    by_corpus: dict[Path, list[dict[str, Any]]] = {}
    for s in samples:
        by_corpus.setdefault(corpus_dir(Path(args.corpora), s), []).append(s)
    records = []
    for n, (corpus, group) in enumerate(sorted(by_corpus.items()), start=1):
        idx = Path(args.index_root) / corpus.name
        with Engine(corpus, index_dir=str(idx), vectors=False) as eng:
            eng.index()
            for s in group:
                gold = gold_of(s)
                changed = s["query"]["changed_file"]
                changed = changed[0] if isinstance(changed, list) else changed
                t0 = time.perf_counter()
                try:
                    rows = eng.related_tests(changed, limit=LIMIT)
                    listed = [r["path"] for r in rows]
                except RequestError as e:  # the changed file is not indexed (skipped, binary): nothing listed
                    listed, rows = [], [{"error": str(e)}]
                took = time.perf_counter() - t0
                q, anchors = ask(s)
                ans = eng.context(q, anchors=anchors, limit=LIMIT, kinds=["test"])
                engine = [r["path"] for r in ans["results"]]
                by_file = eng.context(f"which tests cover {changed}", anchors=[changed], limit=LIMIT, kinds=["test"])
                records.append({"id": s["id"], "repo": s["repo"], "changed": changed, "gold": gold,
                                "related": metrics(listed, gold), "n": len(listed), "ms": round(took * 1000, 1), "listed": listed[:20],
                                "whys": [r.get("why") or r.get("error") for r in rows[:20]],
                                "by_file": metrics([r["path"] for r in by_file["results"]], gold),
                                "context": metrics(engine, gold)})
        print(f"[{n}/{len(by_corpus)}] {corpus.name}: {len(group)}", flush=True)
    return records


def report(records: list[dict[str, Any]]) -> str:
    lines = ["| repo | n | related MRR | R@5 | R@20 | listed | mean n | p50 ms | by file MRR | R@5 | R@20 | context MRR "
             "| R@20 |", "|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    repos = sorted({r["repo"] for r in records})
    for repo in [*repos, "overall"]:
        rs = [r for r in records if repo in ("overall", r["repo"])]
        m = {k: statistics.mean(r["related"][k] for r in rs) for k in ("mrr", "r@5", "r@20")}
        c = {k: statistics.mean(r["context"][k] for r in rs) for k in ("mrr", "r@5", "r@20")}
        b = {k: statistics.mean(r["by_file"][k] for r in rs) for k in ("mrr", "r@5", "r@20")}
        listed = sum(1 for r in rs if r["n"]) / len(rs)
        lines.append(f"| {repo} | {len(rs)} | {m['mrr']:.3f} | {m['r@5']:.3f} | {m['r@20']:.3f} | {listed:.2f} | "
                     f"{statistics.mean(r['n'] for r in rs):.1f} | {statistics.median(r['ms'] for r in rs):.0f} | {b['mrr']:.3f} | {b['r@5']:.3f} | {b['r@20']:.3f} | "
                     f"{c['mrr']:.3f} | {c['r@20']:.3f} |")
    return "\n".join(lines)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--samples", required=True)
    ap.add_argument("--corpora", required=True)
    ap.add_argument("--index-root", required=True)
    ap.add_argument("--out", default="bench/out/related")
    args = ap.parse_args()
    records = run(args)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    with open(out / "records.jsonl", "w") as f:
        for r in records:
            f.write(json.dumps(r) + "\n")
    text = report(records)
    (out / "report.md").write_text(text + "\n")
    print(text)


if __name__ == "__main__":
    main()
