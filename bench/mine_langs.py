"""Dev samples for the languages of issue 16 (C#, Kotlin, C++, C, PHP, Ruby), mined like ``dev_mined``.

    .venv/bin/python -m bench.mine_langs --mirrors /work/.mirror --out bench/samples/dev_langs.jsonl

Reuses :func:`delphi_ls.evaluation.history.mine` on each fetched mirror (``fetch github:OWNER/NAME``
leaves ``MIRRORS/OWNER+NAME/repo``) and keeps, per repository, the most recent ``--per-task``
intent2code and the most recent ``--per-task`` code2test samples: about 20 per repository, the way
``dev_mined.jsonl`` holds 10 + 10. A repository whose recent history has fewer test-touching changes
gives fewer code2test samples; the summary printed to stderr says how many, with the miner's skip
counts. Samples keep the ``dev_mined`` schema (no ``time``) plus a ``language`` field. Every gold
file is checked against the base commit; a sample whose gold is missing there is dropped and counted.

Which files are tests and which are source comes from ``delphi_ls.workspace.kinds.file_kind`` at the
time of mining, so re-mining after a change there can change the samples; the committed
``bench/samples/dev_langs.jsonl`` was mined with the kinds of commit 1a5ac4e.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from collections import Counter
from pathlib import Path
from typing import Any

from delphi_ls.evaluation.history import git_dir_of, mine

# The repositories issue 16 asks for, one per new language.
REPOS: dict[str, str] = {
    "serilog/serilog": "csharp",
    "square/okio": "kotlin",
    "gabime/spdlog": "cpp",
    "redis/hiredis": "c",
    "slimphp/Slim": "php",
    "sinatra/sinatra": "ruby",
}
TASKS = ("intent2code", "code2test")
# Grow the window of changes read until both tasks have enough samples; the last step reads
# 6 * 400 = 2400 first-parent changes, more than any of these repositories has.
LIMITS = (30, 60, 120, 240, 400)


def gold_at(git_dir: Path, commit: str, path: str) -> bool:
    done = subprocess.run(["git", f"--git-dir={git_dir}", "cat-file", "-e", f"{commit}:{path}"],
                          capture_output=True)
    return done.returncode == 0


def mine_repo(repo: str, mirror: Path, per_task: int) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    skipped: Counter[str] = Counter()
    samples: list[dict[str, Any]] = []
    for limit in LIMITS:
        skipped = Counter()
        # need_source: a change that touched no source file is skipped, so `limit` counts changes
        # that give at least an intent2code question.
        samples = mine(mirror, limit, repo=repo, skipped=skipped, need_source=True)
        counts = Counter(s["task_type"] for s in samples)
        if all(counts[t] >= per_task for t in TASKS):
            break
    git_dir = git_dir_of(mirror)
    kept: list[dict[str, Any]] = []
    dropped_gold = 0
    for task in TASKS:
        newest = sorted((s for s in samples if s["task_type"] == task), key=lambda s: (-s["time"], s["id"]))
        n = 0
        for s in newest:
            if n >= per_task:
                break
            gold = s["gold"]["related_tests" if task == "code2test" else "root_cause_files"]
            if not all(gold_at(git_dir, s["base_commit"], p) for p in gold):
                dropped_gold += 1
                continue
            kept.append(s)
            n += 1
    kept.sort(key=lambda s: (s["time"], s["id"]))
    out = [{"repo": s["repo"], "base_commit": s["base_commit"], "fix_commit": s["fix_commit"],
            "task_type": s["task_type"], "query": s["query"], "gold": s["gold"], "id": s["id"],
            "language": REPOS[repo]} for s in kept]
    changes = len({s["fix_commit"] for s in samples})
    stats = {"repo": repo, "language": REPOS[repo], "changes_used": changes, "limit": limit,
             "mined": dict(Counter(s["task_type"] for s in samples)),
             "kept": dict(Counter(s["task_type"] for s in out)), "dropped_gold_missing": dropped_gold,
             "skipped": dict(skipped)}
    return out, stats


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--mirrors", required=True, help="folder of OWNER+NAME/repo mirrors, as `fetch` lays them out")
    ap.add_argument("--out", required=True)
    ap.add_argument("--per-task", type=int, default=10)
    args = ap.parse_args(argv)
    rows: list[dict[str, Any]] = []
    for repo in REPOS:
        mirror = Path(args.mirrors) / repo.replace("/", "+") / "repo"
        if not mirror.exists():
            print(f"skip {repo}: no mirror at {mirror} (fetch github:{repo} first)", file=sys.stderr)
            continue
        got, stats = mine_repo(repo, mirror, args.per_task)
        rows += got
        print(json.dumps(stats), file=sys.stderr, flush=True)
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text("".join(json.dumps(r) + "\n" for r in rows))
    print(f"{len(rows)} samples written to {out}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
