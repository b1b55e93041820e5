"""ARB scoring (../shared/bench/ARB_SCORING.md): gold field per task, the question an agent sends, file-level metrics.

Shared by ``bench.arb`` and ``delphi eval --history`` so both score the same way.
"""

from __future__ import annotations

import ast
import random
import statistics
from pathlib import Path
from typing import Any

KS = (5, 10, 20)


def gold_of(sample: dict[str, Any]) -> list[str]:
    g = sample.get("gold", {})
    if g.get("no_gold"):
        return []
    if g.get("files"):
        return list(g["files"])
    t = sample.get("task_type")
    if t == "code2test":
        return list(g.get("related_tests") or [])
    if t == "comment2context" and (g.get("must_context_files") or g.get("context_files")):
        return list(g.get("must_context_files") or g.get("context_files"))
    return list(g.get("root_cause_files") or g.get("related_tests") or [])


def _as_list(v: Any) -> list[str]:
    if v is None:
        return []
    if isinstance(v, list):
        return [str(x) for x in v]
    if isinstance(v, str):
        try:
            parsed = ast.literal_eval(v)
            if isinstance(parsed, list):
                return [str(x) for x in parsed]
        except (ValueError, SyntaxError):
            pass
        return [v] if v else []
    return []


def ask(sample: dict[str, Any]) -> tuple[str, list[str]]:
    """The question text and anchors an agent would send (bench README table)."""
    q = sample["query"]
    t = sample["task_type"]
    title, body = q.get("pr_title", ""), q.get("pr_body", "")
    if t == "code2test":
        return f"Which tests cover this change?\n{title}\n{body}".strip(), _as_list(q.get("changed_file"))
    if t == "comment2context":
        return (f"What else must I read to act on this review comment?\n{q.get('review_comment', '')}\n"
                f"{q.get('diff_hunk_context', '')}").strip(), _as_list(q.get("path"))
    if t == "trace2code":
        return f"Which source files cause this failure?\n{q.get('raw_signal', '')}".strip(), _as_list(q.get("trace_paths"))
    return f"Which source files implement this change?\n{title}\n{body}".strip(), []


def corpus_dir(corpora: Path, sample: dict[str, Any]) -> Path:
    return corpora / f"{sample['repo'].replace('/', '__')}__{sample['base_commit'][:12]}"


def metrics(ranked: list[str], gold: list[str]) -> dict[str, float]:
    g = set(gold)
    out = {"mrr": 0.0}
    for i, p in enumerate(ranked, start=1):
        if p in g:
            out["mrr"] = 1.0 / i
            break
    for k in KS:
        out[f"r@{k}"] = len(g & set(ranked[:k])) / len(g)
    return out


def mean(xs: list[float]) -> float:
    return sum(xs) / len(xs) if xs else 0.0


def p95(xs: list[float]) -> float:
    if not xs:
        return 0.0
    s = sorted(xs)
    return s[min(len(s) - 1, int(round(0.95 * (len(s) - 1))))]


def bootstrap(diffs: list[float], n: int = 2000, seed: int = 0) -> tuple[float, float]:
    if not diffs:
        return (0.0, 0.0)
    rng = random.Random(seed)
    means = sorted(mean([diffs[rng.randrange(len(diffs))] for _ in diffs]) for _ in range(n))
    return means[int(0.025 * n)], means[int(0.975 * n) - 1]


def summarise(records: list[dict[str, Any]], systems: list[str], versus: str | None = None) -> dict[str, Any]:
    """Means per task and overall, and paired differences with bootstrap CIs and W/T/L (by reciprocal rank).

    By default every other system is compared with the engine (Δ = engine − system, wins are the
    engine's); with ``versus``, every system is compared with that one (Δ = system − versus, wins
    are the system's), as an ablation against a reference configuration reads."""
    tasks = ["overall"] + sorted({r["task"] for r in records})
    out: dict[str, Any] = {}
    for t in tasks:
        rs = [r for r in records if t == "overall" or r["task"] == t]
        out[t] = {}
        for s in systems:
            vals = [r["systems"][s] for r in rs if s in r["systems"]]
            if not vals:
                continue
            row = {m: mean([v[m] for v in vals]) for m in ("mrr", "r@5", "r@10", "r@20")}
            lat = [v["latency"] for v in vals]
            row.update({"n": len(vals), "lat_mean": mean(lat), "lat_p95": p95(lat), "lat_median": statistics.median(lat)})
            ref = versus or "engine"
            if s != ref:
                paired = [(r["systems"][ref], r["systems"][s]) for r in rs if s in r["systems"] and ref in r["systems"]]
                if versus:
                    paired = [(b, e) for e, b in paired]
                for m in ("mrr", "r@5", "r@10", "r@20"):
                    diffs = [e[m] - b[m] for e, b in paired]
                    row[f"d_{m}"] = mean(diffs)
                    row[f"ci_{m}"] = bootstrap(diffs)
                row["wins"] = sum(1 for e, b in paired if e["mrr"] > b["mrr"])
                row["ties"] = sum(1 for e, b in paired if e["mrr"] == b["mrr"])
                row["losses"] = sum(1 for e, b in paired if e["mrr"] < b["mrr"])
            out[t][s] = row
    return out
