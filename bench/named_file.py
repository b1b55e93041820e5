"""Code2test asked as a person types it, with no anchor: "which tests cover <the changed file>?".

    python -m bench.named_file --samples ../shared/bench/dev_mined.jsonl --corpora /work/corpora/mined \\
        --index-root /work/idx/mined [--out OUT.json]

For each code2test sample with a ``changed_file``, three questions on the same index, scored against the
sample's gold tests (MRR, Recall@5/20): ``path`` (the file's workspace path in the question, no anchor),
``base`` (its bare name, no anchor) and ``anchored`` (the path question with the file sent as the anchor,
what an editor sends). Run it with another commit's ``delphi_ls`` first on ``PYTHONPATH`` for the A/B:
the ``anchored`` row is the bar a question that names its file can reach (bench/RESULTS.md, session 25).
"""

from __future__ import annotations

import argparse
import json
import os
from pathlib import Path
from typing import Any

from delphi_ls import Engine
from delphi_ls.evaluation.scoring import _as_list, corpus_dir, gold_of, mean, metrics

FORMS = ("path", "base", "anchored")


def questions(changed: str) -> list[tuple[str, str, list[str] | None]]:
    q = f"which tests cover {changed}?"
    return [("path", q, None), ("base", f"which tests cover {os.path.basename(changed)}?", None),
            ("anchored", q, [changed])]


def run(samples: list[dict[str, Any]], corpora: Path, index_root: Path) -> dict[str, dict[str, float]]:
    by: dict[Path, list[tuple[dict[str, Any], str]]] = {}
    for s in samples:
        changed = _as_list(s["query"].get("changed_file")) if s["task_type"] == "code2test" else []
        if changed:
            by.setdefault(corpus_dir(corpora, s), []).append((s, changed[0]))
    scores: dict[str, list[dict[str, float]]] = {f: [] for f in FORMS}
    for cdir, group in sorted(by.items()):
        with Engine(cdir, index_dir=str(index_root / cdir.name)) as eng:
            for s, changed in group:
                for form, q, anchors in questions(changed):
                    ranked = [r["path"] for r in eng.context(q, anchors=anchors, limit=20)["results"]]
                    scores[form].append(metrics(ranked, gold_of(s)))
    return {f: {m: round(mean([r[m] for r in rows]), 3) for m in ("mrr", "r@5", "r@20")} | {"n": len(rows)}
            for f, rows in scores.items()}


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--samples", required=True)
    ap.add_argument("--corpora", required=True)
    ap.add_argument("--index-root", required=True)
    ap.add_argument("--out")
    args = ap.parse_args(argv)
    samples = [json.loads(ln) for ln in open(args.samples) if ln.strip()]
    summary = run(samples, Path(args.corpora), Path(args.index_root))
    print(json.dumps(summary))
    if args.out:
        Path(args.out).write_text(json.dumps(summary, indent=1) + "\n")


if __name__ == "__main__":
    main()
