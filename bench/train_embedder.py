"""Fit potion-base-8M's token table to code questions (issue 19's first lever), with numpy alone.

    python -m bench.train_embedder --dumps DATA/plain/spans [--out FOLDER] [--epochs 3] [--lr 0.5]

A static (model2vec) embedder is a token table: a text's vector is the mean of its tokens' rows,
normalised. So contrastive fine-tuning needs no deep-learning framework: the gradient of a cosine
reaches only the rows of the tokens involved. Pairs come from the span records ``bench.train mine``
keeps for the 24 training repositories (and only those): the question (as the vector branch embeds it,
``q.text[:4000]``) against the chunks its change edited (as the index embeds them, ``embed_text``), with
hard negatives from the engine's own window (chunks of its top files that the change did not touch) and
the other questions' positives in the batch. Loss: softmax cross-entropy over the cosines / tau; plain
Adagrad on the touched rows (one accumulator per row: a token in every text, `self`, `the`, slows down)
with a pull back to potion's rows (L2), so tokens the training repositories never use keep potion's
meaning. (Plain SGD moved nothing at lr <= 30 and wrecked the table at 300: rows' norms are ~100.)

Chosen on four leave-repositories-out folds by a proxy of the vector branch (each held-out question's
window of files ranked by their best chunk's cosine: MRR of the gold files), beside potion's own
figure; the final table is fitted on all 24 repositories and written as a model2vec folder (the
engine loads it with ``embedder = "FOLDER"``; its identity is its weights' sha256 like any other).
"""

from __future__ import annotations

import argparse
import glob
import json
import pickle
import shutil
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

from bench.spans import overlaps
from delphi_ls.indexing.pipeline import embed_text
from delphi_ls.models.embedders import DATA, StaticEmbedder

TRAIN_LIST = Path(__file__).resolve().parents[2] / "shared" / "bench" / "train_repos.txt"
POTION = DATA / "potion-base-8M"
MAX_TOKENS = StaticEmbedder.max_tokens


def _ids(tok: Any, unk: int, texts: list[str]) -> list[np.ndarray]:
    return [np.asarray([t for t in e.ids[:MAX_TOKENS] if t != unk], dtype=np.int64)
            for e in tok.encode_batch(texts, add_special_tokens=False)]


def examples(folders: list[str], tok: Any, unk: int, hard: int, seed: int) -> list[dict[str, Any]]:
    allowed = {ln.strip() for ln in TRAIN_LIST.read_text().splitlines() if ln.strip() and not ln.startswith("#")}
    rng = np.random.default_rng(seed)
    out = []
    for folder in folders:
        for pkl in sorted(glob.glob(str(Path(folder) / "*.pkl"))):
            with open(pkl, "rb") as fh:
                recs = pickle.load(fh)
            for d in recs:
                if d["repo"] not in allowed:
                    raise SystemExit(f"refusing {d['repo']}: not a training repository")
                pos = [c for g, regs in d["regs"].items() for c in d["chunks"].get(g, [])
                       if any(overlaps((c.start_line, c.end_line), r) for r in regs)]
                neg = [c for p in d["order"] if p not in d["regs"] for c in d["chunks"].get(p, [])]
                if not pos or not neg:
                    continue
                if len(neg) > hard:
                    neg = [neg[i] for i in rng.choice(len(neg), hard, replace=False)]
                # The window as the proxy ranks it: every chunk of the top files and the gold files.
                window = [(p, c) for p, cs in d["chunks"].items() for c in cs]
                texts = [d["q"].text[:4000]] + [embed_text(c) for c in pos] + [embed_text(c) for c in neg]
                ids = _ids(tok, unk, texts)
                wids = _ids(tok, unk, [embed_text(c) for _p, c in window])
                out.append({"repo": d["repo"], "task": d["task"], "q": ids[0], "pos": ids[1:1 + len(pos)],
                            "neg": ids[1 + len(pos):], "win": wids, "win_paths": [p for p, _c in window],
                            "gold": set(d["regs"])})
    return out


def _embed(table: np.ndarray, ids: np.ndarray) -> tuple[np.ndarray, float]:
    if len(ids) == 0:
        return np.zeros(table.shape[1], dtype=np.float32), 1.0
    u = table[ids].mean(axis=0)
    n = float(np.linalg.norm(u)) or 1.0
    return u / n, n


def fit(train: list[dict[str, Any]], base: np.ndarray, epochs: int, lr: float, l2: float, tau: float,
        batch: int, seed: int) -> np.ndarray:
    table = base.copy()
    sq_sum = np.zeros(len(table), dtype=np.float64)  # Adagrad, one accumulator per row: frequent tokens slow down
    rng = np.random.default_rng(seed)
    for _ep in range(epochs):
        order = rng.permutation(len(train))
        for s in range(0, len(order), batch):
            group = [train[i] for i in order[s:s + batch]]
            pos_ids = [g["pos"][rng.integers(len(g["pos"]))] for g in group]
            grads: dict[int, np.ndarray] = {}
            for gi, g in enumerate(group):
                cands = [pos_ids[gi]] + list(g["neg"]) + [p for j, p in enumerate(pos_ids) if j != gi]
                vq, nq = _embed(table, g["q"])
                embs = [_embed(table, c) for c in cands]
                vc = np.stack([e[0] for e in embs])
                logits = vc @ vq / tau
                p = np.exp(logits - logits.max())
                p /= p.sum()
                dlog = p.copy()
                dlog[0] -= 1.0  # d loss / d logits (target: the positive, first)
                dvq = (dlog[:, None] * vc).sum(axis=0) / tau
                dvc = dlog[:, None] * vq[None, :] / tau
                for ids, v, n, dv in [(g["q"], vq, nq, dvq)] + [(c, e[0], e[1], dvc[k]) for k, (c, e) in
                                                               enumerate(zip(cands, embs, strict=True))]:
                    if len(ids) == 0 or not dv.any():
                        continue
                    du = (dv - v * float(v @ dv)) / n / len(ids)  # through the normalisation and the mean
                    uniq, counts = np.unique(ids, return_counts=True)
                    for t, k in zip(uniq.tolist(), counts.tolist(), strict=True):
                        acc = grads.get(t)
                        grads[t] = du * k if acc is None else acc + du * k
            for t, gr in grads.items():
                g = gr / len(group) + l2 * (table[t] - base[t])
                sq_sum[t] += float(g @ g) / len(g)
                table[t] -= lr * g / (np.sqrt(sq_sum[t]) + 1e-8)
    return table


def proxy(ex: list[dict[str, Any]], table: np.ndarray) -> dict[str, float]:
    """Each question's window of files ranked by its best chunk's cosine: MRR and R@5 of the gold files."""
    res: dict[str, list[tuple[float, float]]] = {}
    for e in ex:
        vq, _ = _embed(table, e["q"])
        best: dict[str, float] = {}
        for p, ids in zip(e["win_paths"], e["win"], strict=True):
            s = float(_embed(table, ids)[0] @ vq)
            if s > best.get(p, -2.0):
                best[p] = s
        ranked = sorted(best, key=lambda p: -best[p])
        hits = [i for i, p in enumerate(ranked) if p in e["gold"]]
        rr = 1.0 / (hits[0] + 1) if hits else 0.0
        r5 = sum(1 for i in hits if i < 5) / max(len(e["gold"] & set(ranked)), 1)
        res.setdefault(e["task"], []).append((rr, r5))
    out = {}
    for t, v in sorted(res.items()):
        out[f"{t} mrr"] = round(float(np.mean([a for a, _ in v])), 4)
        out[f"{t} r@5"] = round(float(np.mean([b for _, b in v])), 4)
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--dumps", required=True, help="comma-separated DATA/plain/spans folders (bench.train mine)")
    ap.add_argument("--out", help="write the chosen table here as a model2vec folder")
    ap.add_argument("--grid", default='{"lr": [0.5, 2.0], "epochs": [1]}')
    ap.add_argument("--l2", type=float, default=0.01)
    ap.add_argument("--tau", type=float, default=0.05)
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--hard", type=int, default=15)
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args(argv)
    emb = StaticEmbedder(POTION, "potion-base-8M")
    base = emb.table.astype(np.float32)
    t0 = time.perf_counter()
    ex = examples(args.dumps.split(","), emb.tokenizer, emb.unk_id, args.hard, args.seed)
    repos = sorted({e["repo"] for e in ex})
    folds = [set(repos[i::4]) for i in range(4)]
    report: dict[str, Any] = {"questions": len(ex), "repos": len(repos), "potion": proxy(ex, base),
                              "prepare_s": round(time.perf_counter() - t0, 1)}
    print(json.dumps({"potion (all, no training)": report["potion"]}), file=sys.stderr, flush=True)
    grid = json.loads(args.grid)
    best = None
    for lr in grid["lr"]:
        for epochs in grid["epochs"]:
            held: list[dict[str, Any]] = []
            scores: dict[str, list[float]] = {}
            t1 = time.perf_counter()
            for fold in folds:
                table = fit([e for e in ex if e["repo"] not in fold], base, epochs, lr, args.l2, args.tau,
                            args.batch, args.seed)
                part = [e for e in ex if e["repo"] in fold]
                held += part
                for k, v in proxy(part, table).items():
                    scores.setdefault(k, []).extend([v] * len(part))
            res = {k: round(float(np.mean(v)), 4) for k, v in scores.items()}
            res["seconds"] = round(time.perf_counter() - t1, 1)
            report[f"lr={lr} epochs={epochs}"] = res
            print(json.dumps({f"lr={lr} epochs={epochs}": res}), file=sys.stderr, flush=True)
            value = res.get("intent2code mrr", 0.0) + res.get("intent2code r@5", 0.0)
            if best is None or value > best[0]:
                best = (value, lr, epochs)
    assert best is not None
    report["chosen"] = {"lr": best[1], "epochs": best[2], "l2": args.l2, "tau": args.tau}
    if args.out:
        from safetensors.numpy import save_file

        table = fit(ex, base, best[2], best[1], args.l2, args.tau, args.batch, args.seed)
        out = Path(args.out)
        out.mkdir(parents=True, exist_ok=True)
        save_file({"embeddings": table.astype(np.float32)}, str(out / "model.safetensors"))
        for name in ("tokenizer.json", "config.json"):
            shutil.copy(POTION / name, out / name)
        (out / "training.json").write_text(json.dumps(report, indent=2))
    print(json.dumps(report, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
