"""Fit Delphi's rerankers on the history of the training repositories, and only those.

    python -m bench.train all --mirrors DIR [--per-repo 40] [--seed 0]

runs the three steps below with a fixed seed; each can also run alone:

- ``mine``: for every repository in ``../shared/bench/train_repos.txt`` found under
  ``DIR/OWNER+NAME/repo`` (as the search tool's ``fetch`` lays them out), mine the
  last merged changes into ARB samples (``delphi_ls.evaluation.history``), check out
  each base commit, index it, and record the engine's fused window for each question:
  every candidate's features, its label (gold or not) and, for the top files, the
  passage a cross-encoder would read. Hard negatives are the engine's own top files
  that the change did not touch.
- ``ltr``: fit the learned ranker (``delphi_ls/models/ltr.py``) on those windows,
  choosing its size and epochs on held-out repositories, and write ``ltr.json`` and a
  model card into ``delphi_ls/models/data/ltr``.
- ``cross-encoder``: see ``bench/train_cross_encoder.py`` (needs PyTorch: a build-time tool).

Refuses any repository not named in ``train_repos.txt``: the dev sets are for evaluation.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

import numpy as np

from delphi_ls import Engine
from delphi_ls.evaluation.history import checkout, git_dir_of, mine
from delphi_ls.evaluation.scoring import ask, gold_of
from delphi_ls.models.ltr import SHIPPED_LTR
from delphi_ls.retrieval.features import FEATURE_NAMES

from .windows import TRAIN_LIST, load_windows, train_repos

DEPTH = 50  # the fused window the learned ranker reorders
PASSAGES = 20  # files per question a cross-encoder reads


# ---------------------------------------------------------------- mine
def mine_repo(repo: str, mirror: Path, out: Path, work: Path, per_repo: int) -> dict[str, Any]:
    git_dir = git_dir_of(mirror)
    samples = mine(mirror, per_repo, repo=repo)
    by_base: dict[str, list[dict[str, Any]]] = defaultdict(list)
    order: list[str] = []
    for s in samples:
        if s["base_commit"] not in by_base:
            order.append(s["base_commit"])
        by_base[s["base_commit"]].append(s)
    tree, index = work / "tree", work / "index"
    stats = {"repo": repo, "samples": 0, "gold_in_window": 0, "gold": 0, "seconds": 0.0}
    t_start = time.perf_counter()
    with (out / f"{repo.replace('/', '+')}.jsonl").open("w") as fh:
        for base in order:
            checkout(git_dir, base, tree)
            with Engine(tree, index_dir=str(index), embedder="potion-base-8M", reranker="off") as eng:
                eng.index()
                for s in by_base[base]:
                    text, anchors = ask(s)
                    gold = [g for g in gold_of(s) if (tree / g).is_file()]
                    if not gold:
                        continue
                    valid = [a for a in anchors if (tree / a).is_file()]
                    cands = eng.candidates(text, valid, depth=DEPTH, passages=PASSAGES)
                    for c in cands:
                        c["label"] = int(c["path"] in gold)
                    stats["samples"] += 1
                    stats["gold"] += len(gold)
                    stats["gold_in_window"] += sum(c["label"] for c in cands)
                    fh.write(json.dumps({"id": s["id"], "repo": repo, "task": s["task_type"], "query": text,
                                         "anchors": valid, "gold": gold, "candidates": cands}) + "\n")
    stats["seconds"] = round(time.perf_counter() - t_start, 1)
    return stats


def cmd_mine(args: argparse.Namespace) -> None:
    allowed = train_repos()
    wanted = args.repos.split(",") if args.repos else allowed
    out = Path(args.data)
    out.mkdir(parents=True, exist_ok=True)
    for repo in wanted:
        if repo not in allowed:
            raise SystemExit(f"{repo} is not in {TRAIN_LIST}: only those repositories may be trained on")
        mirror = Path(args.mirrors) / repo.replace("/", "+") / "repo"
        if not mirror.exists():
            print(f"skip {repo}: no mirror at {mirror}", file=sys.stderr)
            continue
        if (out / f"{repo.replace('/', '+')}.jsonl").exists() and not args.force:
            print(f"skip {repo}: already mined", file=sys.stderr)
            continue
        stats = mine_repo(repo, mirror, out, Path(args.work) / repo.replace("/", "+"), args.per_repo)
        print(json.dumps(stats), file=sys.stderr, flush=True)


# ---------------------------------------------------------------- ltr
class Mlp:
    """One hidden layer, ReLU, trained with a listwise softmax loss (ListNet, top-one) and Adam."""

    def __init__(self, n_in: int, hidden: int, rng: np.random.Generator) -> None:
        self.p = {"w1": rng.normal(0, (2.0 / n_in) ** 0.5, (n_in, hidden)).astype(np.float64),
                  "b1": np.zeros(hidden), "w2": rng.normal(0, (1.0 / hidden) ** 0.5, hidden), "b2": np.zeros(1)}
        self.m = {k: np.zeros_like(v) for k, v in self.p.items()}
        self.v = {k: np.zeros_like(v) for k, v in self.p.items()}
        self.t = 0

    def forward(self, x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        h = np.maximum(x @ self.p["w1"] + self.p["b1"], 0.0)
        return h @ self.p["w2"] + self.p["b2"][0], h

    def step(self, groups: list[tuple[np.ndarray, np.ndarray]], lr: float, l2: float, frozen: np.ndarray) -> float:
        grads = {k: np.zeros_like(v) for k, v in self.p.items()}
        loss = 0.0
        for x, y in groups:
            s, h = self.forward(x)
            e = np.exp(s - s.max())
            p = e / e.sum()
            target = y / y.sum()
            loss += -float(np.sum(target * np.log(p + 1e-12)))
            ds = p - target
            grads["w2"] += h.T @ ds
            grads["b2"] += ds.sum()
            dh = np.outer(ds, self.p["w2"]) * (h > 0)
            grads["w1"] += x.T @ dh
            grads["b1"] += dh.sum(0)
        self.t += 1
        for k in self.p:
            g = grads[k] / len(groups) + (l2 * self.p[k] if k.startswith("w") else 0)
            if k == "w1":
                g[frozen] = 0.0
            self.m[k] = 0.9 * self.m[k] + 0.1 * g
            self.v[k] = 0.999 * self.v[k] + 0.001 * g * g
            mh = self.m[k] / (1 - 0.9 ** self.t)
            vh = self.v[k] / (1 - 0.999 ** self.t)
            self.p[k] -= lr * mh / (np.sqrt(vh) + 1e-8)
        return loss / len(groups)

    def score(self, x: np.ndarray) -> np.ndarray:
        return self.forward(x)[0]


def _groups(rows: list[dict[str, Any]], mean: np.ndarray, std: np.ndarray) -> list[tuple[np.ndarray, np.ndarray]]:
    out = []
    for r in rows:
        x = (np.asarray([c["features"] for c in r["candidates"]], dtype=np.float64) - mean) / std
        y = np.asarray([c["label"] for c in r["candidates"]], dtype=np.float64)
        out.append((x, y))
    return out


def _window_metrics(model: Mlp | None, groups: list[tuple[np.ndarray, np.ndarray]],
                    golds: list[int]) -> dict[str, float]:
    """MRR and Recall@5 inside the window (gold outside it counts as missed), fused order when model is None."""
    mrr = r5 = 0.0
    for (x, y), n_gold in zip(groups, golds, strict=True):
        order = np.arange(len(y)) if model is None else np.argsort(-model.score(x), kind="stable")
        ranked = y[order]
        hits = np.flatnonzero(ranked)
        mrr += 1.0 / (hits[0] + 1) if len(hits) else 0.0
        r5 += ranked[:5].sum() / n_gold
    return {"mrr": mrr / len(groups), "r@5": r5 / len(groups)}


def fit(rows: list[dict[str, Any]], hidden: int, epochs: int, seed: int, lr: float = 3e-3, l2: float = 1e-4,
        batch: int = 32) -> tuple[Mlp, np.ndarray, np.ndarray, np.ndarray]:
    x_all = np.concatenate([np.asarray([c["features"] for c in r["candidates"]]) for r in rows])
    mean = x_all.mean(0)
    std = x_all.std(0)
    frozen = std < 1e-6  # never varied in training: its weights stay zero, so it cannot steer at run time
    std[frozen] = 1.0
    rng = np.random.default_rng(seed)
    model = Mlp(len(FEATURE_NAMES), hidden, rng)
    model.p["w1"][frozen] = 0.0
    groups = _groups(rows, mean, std)
    for _ep in range(epochs):
        idx = rng.permutation(len(groups))
        for i in range(0, len(idx), batch):
            model.step([groups[j] for j in idx[i:i + batch]], lr, l2, frozen)
    return model, mean, std, frozen


def cmd_ltr(args: argparse.Namespace) -> None:
    rows = load_windows(Path(args.data))
    repos = sorted({r["repo"] for r in rows})
    if len(repos) < 3:
        raise SystemExit(f"need windows from at least 3 training repositories, have {len(repos)}")
    # Choose size and epochs on whole held-out repositories (leave-repos-out folds), never on the dev sets.
    rng = np.random.default_rng(args.seed)
    folds = [list(f) for f in np.array_split(rng.permutation(repos), min(4, len(repos)))]
    grid = [(h, e) for h in (8, 16, 32) for e in (10, 25, 50)]
    scores: dict[tuple[int, int], list[float]] = {g: [] for g in grid}
    fused_mrr: list[float] = []
    for fold in folds:
        train = [r for r in rows if r["repo"] not in fold]
        test = [r for r in rows if r["repo"] in fold]
        for hidden, epochs in grid:
            model, mean, std, _ = fit(train, hidden, epochs, args.seed)
            m = _window_metrics(model, _groups(test, mean, std), [len(r["gold"]) for r in test])
            scores[(hidden, epochs)].append(m["mrr"] * len(test))
        fused_mrr.append(_window_metrics(None, _groups(test, np.zeros(len(FEATURE_NAMES)), np.ones(len(FEATURE_NAMES))),
                                         [len(r["gold"]) for r in test])["mrr"] * len(test))
    cv = {g: sum(v) / len(rows) for g, v in scores.items()}
    best = max(grid, key=lambda g: (round(cv[g], 4), -g[0], -g[1]))
    print(f"held-out MRR inside the window: fused {sum(fused_mrr) / len(rows):.4f}; "
          + ", ".join(f"h{h}/e{e} {v:.4f}" for (h, e), v in sorted(cv.items())), file=sys.stderr)
    model, mean, std, frozen = fit(rows, best[0], best[1], args.seed)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    probe_x = np.asarray(rows[0]["candidates"][0]["features"], dtype=np.float32)
    w = {"w1": model.p["w1"].astype(np.float32), "b1": model.p["b1"].astype(np.float32),
         "w2": model.p["w2"].astype(np.float32), "b2": float(model.p["b2"][0])}
    std32, mean32 = std.astype(np.float32), mean.astype(np.float32)
    h = np.maximum(((probe_x - mean32) / std32) @ w["w1"] + w["b1"], 0.0)
    probe_score = float(h @ w["w2"] + w["b2"])
    doc = {"name": "delphi-ltr-1", "features": list(FEATURE_NAMES), "window": DEPTH, "seed": args.seed,
           "mean": [round(float(v), 6) for v in mean32], "std": [round(float(v), 6) for v in std32],
           "w1": [[float(v) for v in row] for row in w["w1"]], "b1": [float(v) for v in w["b1"]],
           "w2": [float(v) for v in w["w2"]], "b2": w["b2"], "probe": {"x": [float(v) for v in probe_x], "score": probe_score}}
    (out / "ltr.json").write_text(json.dumps(doc, separators=(",", ":")))
    counts = defaultdict(lambda: defaultdict(int))
    for r in rows:
        counts[r["repo"]][r["task"]] += 1
    card = [
        "# delphi-ltr-1: the learned ranker", "",
        f"Written by `python -m bench.train ltr --seed {args.seed}` on {time.strftime('%Y-%m-%d')}.", "",
        "A one-hidden-layer network (ReLU) over the engine's per-file features "
        "(`delphi_ls/retrieval/features.py`), trained with a listwise softmax loss on the engine's own "
        f"fused top-{DEPTH} windows: positives are the files a merged change modified, hard negatives the "
        "engine's top files that it did not touch. No pretrained weights; licence: the project's (MIT).", "",
        f"Chosen on leave-repositories-out folds ({len(folds)} folds): hidden {best[0]}, epochs {best[1]}.", "",
        "| setting | held-out MRR inside the window |", "|---|---|",
        f"| fused order (no ranker) | {sum(fused_mrr) / len(rows):.4f} |",
        *[f"| hidden {h}, epochs {e} | {v:.4f} |" for (h, e), v in sorted(cv.items())], "",
        f"Features never varying in training (weights held at zero): {', '.join(n for n, f in zip(FEATURE_NAMES, frozen, strict=True) if f) or 'none'}.", "",
        f"Training data: {len(rows)} questions with a gold file inside the window, from {len(repos)} repositories "
        "(all in `../shared/bench/train_repos.txt`):", "",
        "| repository | intent2code | code2test |", "|---|---|---|",
        *[f"| {repo} | {c['intent2code']} | {c['code2test']} |" for repo, c in sorted(counts.items())], "",
        "Evaluation on the dev sets (other repositories): `bench/RESULTS.md`.", "",
    ]
    (out / "MODEL_CARD.md").write_text("\n".join(card))
    print(f"wrote {out / 'ltr.json'} (hidden {best[0]}, epochs {best[1]})", file=sys.stderr)


def build_args(argv: list[str] | None = None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("step", choices=("mine", "ltr", "all"))
    ap.add_argument("--mirrors", default="/work/.mirror", help="folder of OWNER+NAME/repo git mirrors")
    ap.add_argument("--data", default="bench/out/train/windows")
    ap.add_argument("--work", default="bench/out/train/work")
    ap.add_argument("--out", default=str(SHIPPED_LTR))
    ap.add_argument("--repos", help="comma-separated subset of the training repositories")
    ap.add_argument("--per-repo", type=int, default=40, help="merged changes to mine per repository")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--force", action="store_true", help="mine again even if a repository's windows exist")
    return ap.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = build_args(argv)
    if args.step in ("mine", "all"):
        cmd_mine(args)
    if args.step in ("ltr", "all"):
        cmd_ltr(args)
    return 0


if __name__ == "__main__":
    sys.exit(main())
