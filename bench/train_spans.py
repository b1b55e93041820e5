"""Fit the learned span ranker on the training repositories' real hunks, and only those.

    nice -n 5 python -m bench.train_spans --mirrors /work/.mirror [--per-repo 150] [--out DIR]

For every repository in ``../shared/bench/train_repos.txt`` found under ``DIR/OWNER+NAME/repo``: mine
merged changes into ARB samples (``delphi_ls.evaluation.history``, as ``bench.train`` does), read each
gold file at the base commit straight from git, chunk it as the indexer does, score its chunks for the
sample's question (``delphi_ls.retrieval.spans``), and label a chunk 1 when it overlaps a changed region
(``bench.spans``: ``git diff -U0``, 3 lines of slack). A logistic model over ``spans.FEATURES`` is fitted
with numpy (L2 chosen on held-out repositories, by how often a file's top chunk is a changed one), and
its weights are printed for ``spans.LEARNED``, beside the hand score's figures on the same held-out files.

Refuses any repository not named in ``train_repos.txt``: the dev sets are for evaluation.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np

from bench.spans import overlaps, regions
from delphi_ls.evaluation.history import mine
from delphi_ls.evaluation.scoring import ask, gold_of
from delphi_ls.indexing.chunker import chunk_file
from delphi_ls.retrieval import spans as S
from delphi_ls.retrieval.query import analyse
from delphi_ls.stores.meta import ChunkRow

TRAIN_LIST = Path(__file__).resolve().parents[2] / "shared" / "bench" / "train_repos.txt"


class _Symbols:
    """The one MetaStore call SpanQuery.build makes (the anchor's symbols), from files read at base."""

    def __init__(self, syms: dict[str, list[tuple[str, str, str, int, int, str]]]) -> None:
        self.syms = syms

    def symbols_of(self, path: str) -> list[tuple[str, str, str, int, int, str]]:
        return self.syms.get(path, [])


def _show(git_dir: Path, commit: str, path: str) -> str | None:
    p = subprocess.run(["git", "--git-dir", str(git_dir), "show", f"{commit}:{path}"], capture_output=True, check=False)
    if p.returncode != 0 or len(p.stdout) > 400_000 or b"\0" in p.stdout[:8000]:
        return None
    return p.stdout.decode("utf-8", errors="replace")


def _rows(path: str, text: str) -> tuple[list[ChunkRow], list[tuple[str, str, str, int, int, str]]]:
    cf = chunk_file(path, text)
    rows = [ChunkRow(f"{path}:{i}", path, i, c.start_line, c.end_line, c.symbols, c.kind, "", c.text)
            for i, c in enumerate(cf.chunks)]
    return rows, [(s.name, s.kind, path, s.line, s.end_line, s.container) for s in cf.symbols]


def collect(mirrors: Path, per_repo: int) -> list[dict[str, Any]]:
    allowed = {ln.strip() for ln in TRAIN_LIST.read_text().splitlines() if ln.strip() and not ln.startswith("#")}
    files = []
    for repo in sorted(allowed):
        git_dir = mirrors / repo.replace("/", "+") / "repo"
        if not git_dir.is_dir():
            print(f"{repo}: no mirror, skipped", file=sys.stderr)
            continue
        samples = mine(git_dir, per_repo, repo=repo)
        n0 = len(files)
        for s in samples:
            if s["repo"] not in allowed:
                raise SystemExit(f"refusing {s['repo']}: not a training repository")
            text, anchors = ask(s)
            syms: dict[str, list[tuple[str, str, str, int, int, str]]] = {}
            for a in anchors:
                body = _show(git_dir, s["base_commit"], a)
                if body is not None:
                    syms[a] = _rows(a, body)[1]
            sq = S.SpanQuery.build(analyse(text), None, [a for a in anchors if a in syms], _Symbols(syms))
            for g in gold_of(s):
                body = _show(git_dir, s["base_commit"], g)
                if body is None:
                    continue
                regs = regions(git_dir, s["base_commit"], s["fix_commit"], g)
                chunks = _rows(g, body)[0]
                if not regs or len(chunks) < 3:  # a file of one or two chunks says nothing about choosing
                    continue
                sc = S.score_chunks(g, chunks, sq)
                y = [int(any(overlaps((c.start_line, c.end_line), r) for r in regs)) for c in chunks]
                if not any(y):
                    continue
                files.append({"repo": repo, "task": s["task_type"], "x": S.features(sc), "y": y,
                              "hand": [x.score for x in sc]})
        print(f"{repo}: {len(samples)} samples, {len(files) - n0} files", file=sys.stderr)
    return files


def fit(files: list[dict[str, Any]], l2: float, epochs: int = 400, lr: float = 0.5) -> np.ndarray:
    x = np.array([r for f in files for r in f["x"]], dtype=np.float64)
    y = np.array([v for f in files for v in f["y"]], dtype=np.float64)
    # Each file weighs the same, whatever its number of chunks: the metric is per file.
    w_s = np.concatenate([np.full(len(f["y"]), 1.0 / len(f["y"])) for f in files])
    w_s /= w_s.mean()
    w = np.zeros(x.shape[1])
    for _ in range(epochs):
        p = 1.0 / (1.0 + np.exp(-(x @ w)))
        g = x.T @ ((p - y) * w_s) / len(y) + l2 * np.r_[0.0, w[1:]]
        w -= lr * g
    return w


def top_hit(files: list[dict[str, Any]], score: Any) -> float:
    hits = []
    for f in files:
        s = score(f)
        hits.append(f["y"][int(np.argmax(s))])
    return float(np.mean(hits)) if hits else 0.0


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--mirrors", required=True)
    ap.add_argument("--per-repo", type=int, default=150)
    ap.add_argument("--out", default="bench/out/train_spans")
    args = ap.parse_args(argv)
    files = collect(Path(args.mirrors), args.per_repo)
    repos = sorted({f["repo"] for f in files})
    held = set(repos[::3])  # every third repository is held out to choose L2
    train = [f for f in files if f["repo"] not in held]
    val = [f for f in files if f["repo"] in held]
    report: dict[str, Any] = {"files": len(files), "train": len(train), "heldOut": len(val), "heldRepos": sorted(held),
                              "hand": top_hit(val, lambda f: f["hand"])}
    best = None
    for l2 in (0.0, 0.001, 0.01, 0.1):
        w = fit(train, l2)
        hit = top_hit(val, lambda f, w=w: np.array(f["x"]) @ w)
        report[f"l2={l2}"] = hit
        if best is None or hit > best[0]:
            best = (hit, l2)
    assert best is not None
    w = fit(files, best[1])  # the chosen L2 on every training repository
    report["chosenL2"] = best[1]
    report["weights"] = dict(zip(S.FEATURES, [round(float(v), 4) for v in w], strict=True))
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "report.json").write_text(json.dumps(report, indent=2))
    print(json.dumps(report, indent=2))
    print("LEARNED = (" + ", ".join(f"{v:.4f}" for v in w) + ")")


if __name__ == "__main__":
    main()
