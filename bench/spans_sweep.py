"""Span-choice levers measured offline: dump what span choice reads once, then score settings in seconds.

    nice -n 5 python -m bench.spans_sweep dump --samples ../shared/bench/dev_mined.jsonl \\
        --corpora /work/corpora/dev_mined --mirrors /work/.mirror --index-root DIR --out DUMP.pkl
    nice -n 5 python -m bench.spans_sweep sweep DUMP.pkl '{"BREADTH": [0, 0.25, 0.5], "EV": [0, 1]}'

``dump`` asks the engine each question once (top 20 files, the branches' hit lists, the question's
analysis, every chunk of those files, the anchors' symbols, the changed regions); ``sweep`` re-runs
span scoring and packing (:mod:`delphi_ls.retrieval.spans`, :mod:`delphi_ls.retrieval.packing`) for
every combination of module settings given as JSON (``EV`` scales the branch-evidence weights, a name
in ``packing`` is set there, any other in ``spans``) and prints hunk_cov@2000/4000/8000, file_cov@4000
and first_span_hit per task, as ``bench.spans`` computes them. The figures differ from ``bench.spans``
by a little (results cut at 20 files) and serve to compare settings, not to report.
"""

from __future__ import annotations

import argparse
import itertools
import json
import pickle
import statistics
import sys
from pathlib import Path
from typing import Any

from bench.spans import first_hits, regions, score_pack
from delphi_ls import Engine
from delphi_ls.evaluation.scoring import ask, corpus_dir, gold_of, mean
from delphi_ls.retrieval import packing as P
from delphi_ls.retrieval import spans as S

EVIDENCE = dict(S.BRANCH_EVIDENCE)
# bench.spans's budgets and three small ones: an agent asking for a few hundred tokens (session 26)
SWEEP_BUDGETS = (250, 500, 1000, 2000, 4000, 8000)


def dump(args: argparse.Namespace) -> None:
    samples = [json.loads(ln) for ln in open(args.samples) if ln.strip()]
    by: dict[Path, list[dict[str, Any]]] = {}
    for s in samples:
        if s.get("fix_commit") and gold_of(s):
            by.setdefault(corpus_dir(Path(args.corpora), s), []).append(s)
    out = []
    for cdir, group in sorted(by.items()):
        eng = Engine(cdir, index_dir=str(Path(args.index_root) / cdir.name), embedder=args.embedder)
        for s in group:
            mirror = Path(args.mirrors) / s["repo"].replace("/", "+") / "repo"
            text, anchors = ask(s)
            valid = [eng.normalise_anchor(a) for a in anchors if (cdir / a).exists()]
            order = [x["path"] for x in eng.context(text, anchors=valid, limit=20)["results"]]
            rec = record(eng, s, text, valid, order, mirror, cdir)
            if rec is not None:
                out.append(rec)
        eng.close()
        print(cdir.name, file=sys.stderr)
    with open(args.out, "wb") as f:
        pickle.dump(out, f)


def record(eng: Engine, s: dict[str, Any], text: str, valid: list[str], order: list[str], git_dir: Path,
           root: Path) -> dict[str, Any] | None:
    """What span choice reads for one question (None when no gold file has a changed region): also what
    ``bench.train mine`` keeps from the training repositories, so a span ranker learns from the same shape."""
    regs = {g: r for g in gold_of(s) if (r := regions(git_dir, s["base_commit"], s["fix_commit"], g))}
    if not regs:
        return None
    r = eng.retrieve(text, valid)  # the same branches the answer used (deterministic)
    files = list(dict.fromkeys([*order, *(g for g in regs if (root / g).is_file())]))
    return {"id": s["id"], "task": s["task_type"], "root": str(root), "q": r.q, "lists": r.lists,
            "anchors": valid, "order": order, "chunks": {p: eng.chunks(p) for p in files},
            "syms": {a: eng.definitions(a) for a in valid}, "regs": regs,
            "defs": {p: eng.definitions(p) for p in files}, "repo": s["repo"], "base": s["base_commit"]}


class _Meta:
    def __init__(self, d: dict[str, Any]) -> None:
        self.d = d

    def symbols_of(self, path: str) -> list[Any]:
        return self.d["syms"].get(path, [])

    def chunks_of(self, path: str) -> list[Any]:
        return self.d["chunks"].get(path, [])


def evaluate(data: list[dict[str, Any]]) -> dict[str, dict[str, float]]:
    res: dict[str, dict[str, list[float]]] = {}
    for d in data:
        meta = _Meta(d)
        sq = S.SpanQuery.build(d["q"], d["lists"], d["anchors"], meta)  # type: ignore[arg-type]
        scored = {p: S.score_chunks(p, d["chunks"][p], sq) for p in d["order"]}
        S.link_files(d["order"], scored, sq)  # as the engine's results() does
        S.frames_first(d["order"], scored, sq)
        results = [{"path": p, "spans": []} for p in d["order"]]
        row = res.setdefault(d["task"], {k: [] for k in (*(f"hunk_cov@{b}" for b in SWEEP_BUDGETS),
                                                         "file_cov@4000", "first_span_hit",
                                                         "first_span_lines")})
        for b in SWEEP_BUDGETS:
            packed, used = P.pack(results, meta, b, Path(d["root"]), sq, scored)  # type: ignore[arg-type]
            assert used <= b
            sc = score_pack(packed, d["regs"])
            row[f"hunk_cov@{b}"].append(sc["hunk_cov"])
            if b == 4000:
                row["file_cov@4000"].append(sc["file_cov"])
        first = {}
        for p in d["order"]:
            ls = S.listed_spans(scored[p], set())
            first[p] = (ls[0]["startLine"], ls[0]["endLine"]) if ls else None
        row["first_span_hit"] += first_hits(first, d["regs"])
        # A longer first span overlaps more regions by its length alone: its length is reported beside.
        row["first_span_lines"] += [float(f[1] - f[0] + 1) for p, f in first.items() if f and p in d["regs"]]
    return {t: {k: round(statistics.median(v) if k == "first_span_lines" else mean(v), 3) if v else 0.0
                for k, v in row.items()} for t, row in sorted(res.items())}


def sweep(args: argparse.Namespace) -> None:
    with open(args.dump, "rb") as f:
        data = pickle.load(f)
    grid = json.loads(args.grid)
    for vals in itertools.product(*grid.values()):
        for k, v in zip(grid, vals, strict=True):
            if k == "EV":
                S.BRANCH_EVIDENCE = {b: w * v for b, w in EVIDENCE.items()}
            elif hasattr(P, k):
                setattr(P, k, v)
            else:
                setattr(S, k, v)
        print(json.dumps({"set": dict(zip(grid, vals, strict=True)), **evaluate(data)}), flush=True)


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="cmd", required=True)
    d = sub.add_parser("dump")
    d.add_argument("--samples", required=True)
    d.add_argument("--corpora", required=True)
    d.add_argument("--mirrors", required=True)
    d.add_argument("--index-root", required=True)
    d.add_argument("--embedder", default="potion-base-8M")
    d.add_argument("--out", required=True)
    s = sub.add_parser("sweep")
    s.add_argument("dump")
    s.add_argument("grid", help='JSON: {"SETTING": [values, ...], ...}')
    args = ap.parse_args(argv)
    dump(args) if args.cmd == "dump" else sweep(args)


if __name__ == "__main__":
    main()
