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
import pickle
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np

from bench.spans import overlaps, regions
from bench.spans_sweep import _Meta
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


def collect_dumps(folders: list[Path]) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """Labelled files from the span records ``bench.train mine`` keeps (``DATA/spans/REPO.pkl``): the
    question went through the engine, so the branches' chunk hits are live features. Returns the files
    and the records (for scoring whole answers with :func:`bench.spans_sweep.evaluate`)."""
    allowed = {ln.strip() for ln in TRAIN_LIST.read_text().splitlines() if ln.strip() and not ln.startswith("#")}
    files, records = [], []
    for folder in folders:
        for pkl in sorted(folder.glob("*.pkl")):
            with pkl.open("rb") as fh:
                recs = pickle.load(fh)
            for d in recs:
                if d["repo"] not in allowed:
                    raise SystemExit(f"refusing {d['repo']}: not a training repository")
                records.append(d)
                files.extend(labelled(d))
    return files, records


def labelled(d: dict[str, Any]) -> list[dict[str, Any]]:
    """One record's gold files as (features, labels) rows; files of fewer than 3 chunks say nothing."""
    sq = S.SpanQuery.build(d["q"], d["lists"], d["anchors"], _Meta(d))  # type: ignore[arg-type]
    out = []
    for g, regs in d["regs"].items():
        chunks = d["chunks"].get(g) or []
        if len(chunks) < 3:
            continue
        sc = S.score_chunks(g, chunks, sq)
        y = [int(any(overlaps((c.start_line, c.end_line), r) for r in regs)) for c in chunks]
        if any(y):
            out.append({"repo": d["repo"], "task": d["task"], "x": S.features(sc, sq), "y": y,
                        "hand": [x.score for x in sc]})
    return out


def fit_listwise(files: list[dict[str, Any]], l2: float, epochs: int = 300, lr: float = 0.05) -> np.ndarray:
    """A linear score trained with a softmax over each file's chunks (ListNet top-one): what is measured
    is whether a file's top chunk is a changed one, not each chunk's calibrated probability."""
    groups = [(np.asarray(f["x"], dtype=np.float64), np.asarray(f["y"], dtype=np.float64)) for f in files]
    w = np.zeros(groups[0][0].shape[1])
    m, v = np.zeros_like(w), np.zeros_like(w)
    for t in range(1, epochs + 1):
        g = np.zeros_like(w)
        for x, y in groups:
            s = x @ w
            e = np.exp(s - s.max())
            p = e / e.sum()
            g += x.T @ (p - y / y.sum())
        g = g / len(groups) + l2 * np.r_[0.0, w[1:]]
        m = 0.9 * m + 0.1 * g
        v = 0.999 * v + 0.001 * g * g
        w -= lr * (m / (1 - 0.9 ** t)) / (np.sqrt(v / (1 - 0.999 ** t)) + 1e-8)
    return w


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


def by_task(files: list[dict[str, Any]], score: Any) -> dict[str, float]:
    tasks = sorted({f["task"] for f in files})
    return {t: round(top_hit([f for f in files if f["task"] == t], score), 4) for t in tasks} | {
        "all": round(top_hit(files, score), 4)}


def main_dumps(args: argparse.Namespace) -> None:
    """Leave-repositories-out folds on the engine-mined records choose the model (logistic or listwise)
    and its L2 by held-out top-chunk hits; the chosen one is fitted on every training repository and,
    with ``--dev``, whole answers on a ``bench.spans_sweep`` dump of the dev set are scored with it and
    with the hand score (reported, never used to choose)."""
    from bench.spans_sweep import evaluate

    S.LEARNED = None  # "hand" below is the hand score, whatever the module ships
    files, _records = collect_dumps([Path(x) for x in args.dumps.split(",")])
    drop = [S.FEATURES.index(n) for n in (args.drop.split(",") if args.drop else [])]
    for f in files:  # an ablation: the dropped columns read zero, so their weights stay zero
        for row in f["x"]:
            for i in drop:
                row[i] = 0.0
    repos = sorted({f["repo"] for f in files})
    folds = [set(repos[i::4]) for i in range(4)]
    report: dict[str, Any] = {"files": len(files), "repos": len(repos), "features": list(S.FEATURES),
                              "hand": by_task(files, lambda f: f["hand"]),
                              "lex only": by_task(files, lambda f: np.asarray(f["x"])[:, 1])}
    best = None
    for kind, fitter in (("logistic", fit), ("listwise", fit_listwise)):
        for l2 in (0.0, 0.001, 0.01, 0.1):
            held: list[dict[str, Any]] = []
            scores: dict[int, np.ndarray] = {}
            for fold in folds:
                w = fitter([f for f in files if f["repo"] not in fold], l2)
                for f in files:
                    if f["repo"] in fold:
                        scores[id(f)] = np.asarray(f["x"]) @ w
                        held.append(f)
            res = by_task(held, lambda f, scores=scores: scores[id(f)])
            report[f"{kind} l2={l2}"] = res
            print(kind, l2, res, file=sys.stderr, flush=True)
            if best is None or res["all"] > best[0]:
                best = (res["all"], kind, l2, fitter)
    assert best is not None
    _hit, kind, l2, fitter = best
    # Whole answers on the held-out repositories' own questions (packing included): how a chunk score
    # becomes the packer's value (the link) is chosen here, by hunk_cov@4000 + first_span_hit.
    fold_w = [fitter([f for f in files if f["repo"] not in fold], l2) for fold in folds]
    report["held-out hand"] = evaluate(_records)
    link_best = None
    for link in ("order", "both", "exp", "sigmoid"):
        S.LEARNED_LINK, S.EV_LEARNED = link, 0.0
        rows: dict[str, dict[str, list[float]]] = {}
        for fold, fw in zip(folds, fold_w, strict=True):
            S.LEARNED = tuple(float(v) for v in fw)
            recs = [d for d in _records if d["repo"] in fold]
            for task, vals in evaluate(recs).items():
                n = sum(1 for d in recs if d["task"] == task)
                for k, v in vals.items():
                    rows.setdefault(task, {}).setdefault(k, []).extend([v] * n)  # weighted by questions
                    # (first_span_lines: a mean of the folds' medians)
        S.LEARNED = None
        res = {task: {k: round(float(np.mean(v)), 3) for k, v in vals.items()} for task, vals in rows.items()}
        report[f"held-out learned {link}"] = res
        # The goal is on intent2code; code2test breaks ties. A longer first span overlaps more
        # regions by its length alone (the "sigmoid" link lets a neighbour join nearly every first span:
        # 47 -> 60 lines, whole small files in the golden spans), so a link whose first spans grow by
        # more than 10% over the hand score's is not chosen, whatever it scores.
        value = (res["intent2code"]["hunk_cov@4000"] + res["intent2code"]["first_span_hit"]
                 + 1e-3 * (res["code2test"]["hunk_cov@4000"] + res["code2test"]["first_span_hit"]))
        longer = max(res[t]["first_span_lines"] / max(report["held-out hand"][t]["first_span_lines"], 1.0)
                     for t in res)
        print(link, res, f"first spans x{longer:.2f}", file=sys.stderr, flush=True)
        if longer > 1.10:
            report[f"held-out learned {link}"]["excluded"] = f"first spans x{longer:.2f} the hand score's"
            continue
        if link_best is None or value > link_best[0]:
            link_best = (value, link)
    assert link_best is not None
    w = fitter(files, l2)
    report["chosen"] = {"model": kind, "l2": l2, "dropped": args.drop or "", "link": link_best[1]}
    report["weights"] = dict(zip(S.FEATURES, [round(float(v), 4) for v in w], strict=True))
    if args.dev:
        with open(args.dev, "rb") as fh:
            dev = pickle.load(fh)
        report["dev hand"] = evaluate(dev)
        S.LEARNED = tuple(float(v) for v in w)
        for link in ("order", "both", "exp", "sigmoid"):
            S.LEARNED_LINK = link
            for ev in (0.0,) if link == "order" else (0.0, 1.0):
                S.EV_LEARNED = ev
                report[f"dev learned {link} ev={ev}"] = evaluate(dev)
        S.LEARNED = None
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "report.json").write_text(json.dumps(report, indent=2))
    print(json.dumps(report, indent=2))
    print("LEARNED = (" + ", ".join(f"{v:.4f}" for v in w) + ")")


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--mirrors")
    ap.add_argument("--dumps", help="comma-separated DATA/spans folders written by `bench.train mine`")
    ap.add_argument("--dev", help="a bench.spans_sweep dump of a dev set, scored with the chosen model")
    ap.add_argument("--per-repo", type=int, default=150)
    ap.add_argument("--out", default="bench/out/train_spans")
    ap.add_argument("--drop", help="comma-separated feature names to train without (ablation)")
    args = ap.parse_args(argv)
    if args.dumps:
        main_dumps(args)
        return
    S.LEARNED = None  # "hand" below is the hand score, whatever the module ships
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
