"""Paired bootstrap between systems of one ``bench.arb`` run (its ``records.jsonl``).

    python -m bench.paired OUT/records.jsonl A:B [A:B ...] [--resamples 10000] [--seed 0] [--only KEY=VALUE]

For each task (and all samples), prints every system's MRR / R@5 / R@20 and, for each pair, the mean
per-sample difference A − B with a 95% percentile interval from resampling the samples with
replacement (the same samples for both systems: paired), and wins / ties / losses by reciprocal rank.
Systems are compared only inside one run, so both saw the same indexes and the same corpora.
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import sys
from pathlib import Path
from typing import Any

METRICS = ("mrr", "r@5", "r@20")


def bootstrap(diffs: list[float], resamples: int = 10000, seed: int = 0) -> tuple[float, float]:
    """95% percentile interval of the mean of ``diffs`` (resampled with replacement)."""
    if not diffs:
        return (0.0, 0.0)
    rng = random.Random(seed)
    m = len(diffs)
    means = sorted(sum(diffs[rng.randrange(m)] for _ in range(m)) / m for _ in range(resamples))
    return means[int(0.025 * resamples)], means[int(0.975 * resamples) - 1]


def compare(records: list[dict[str, Any]], a: str, b: str, resamples: int = 10000,
            seed: int = 0) -> dict[str, Any]:
    """Mean A − B per metric with its interval, and W/T/L by reciprocal rank, over ``records``."""
    rs = [r for r in records if a in r["systems"] and b in r["systems"]]
    out: dict[str, Any] = {"n": len(rs)}
    for k in METRICS:
        d = [r["systems"][a][k] - r["systems"][b][k] for r in rs]
        out[k] = (statistics.fmean(d) if d else 0.0, *bootstrap(d, resamples, seed))
    d = [r["systems"][a]["mrr"] - r["systems"][b]["mrr"] for r in rs]
    wins, losses = sum(x > 1e-12 for x in d), sum(x < -1e-12 for x in d)
    out["wtl"] = (wins, len(d) - wins - losses, losses)
    return out


def report(records: list[dict[str, Any]], pairs: list[tuple[str, str]], resamples: int = 10000,
           seed: int = 0) -> str:
    systems = list(records[0]["systems"])
    lines = ["latency p50 / p95 (ms) per system, all samples:"]
    for s in systems:
        lat = sorted(r["systems"][s]["latency"] * 1000 for r in records if s in r["systems"])
        lines.append(f"  {s}: {statistics.median(lat):.1f} / {lat[int(0.95 * (len(lat) - 1))]:.1f}")
    for task in (*sorted({r["task"] for r in records}), "all"):
        rs = [r for r in records if task == "all" or r["task"] == task]
        lines += ["", f"## {task} (n={len(rs)})", "| system | MRR | R@5 | R@20 |", "|---|---|---|---|"]
        for s in systems:
            vals = [r["systems"][s] for r in rs if s in r["systems"]]
            lines.append(f"| {s} | " + " | ".join(f"{statistics.fmean(v[k] for v in vals):.3f}" for k in METRICS) + " |")
        lines += ["", "| A − B | ΔMRR [95% CI] | ΔR@5 [95% CI] | ΔR@20 [95% CI] | W/T/L (RR) |", "|---|---|---|---|---|"]
        for a, b in pairs:
            c = compare(rs, a, b, resamples, seed)
            cells = [f"{c[k][0]:+.3f} [{c[k][1]:+.3f}, {c[k][2]:+.3f}]" for k in METRICS]
            lines.append(f"| {a} − {b} | " + " | ".join(cells) + " | {}/{}/{} |".format(*c["wtl"]))
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("records", type=Path, help="records.jsonl written by bench.arb")
    ap.add_argument("pairs", nargs="+", help="A:B, two system names of that run")
    ap.add_argument("--resamples", type=int, default=10000)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--only", action="append", default=[], metavar="KEY=VALUE",
                    help="keep the records whose KEY is VALUE (e.g. source=history for bench.train's held-out records)")
    args = ap.parse_args(argv)
    records = [json.loads(line) for line in args.records.open() if line.strip()]
    for kv in args.only:
        key, _, value = kv.partition("=")
        records = [r for r in records if str(r.get(key)) == value]
    if not records:
        raise SystemExit("no records left to compare")
    systems = set(records[0]["systems"]) if records else set()
    pairs = []
    for p in args.pairs:
        a, sep, b = p.partition(":")
        if not sep or a not in systems or b not in systems:
            raise SystemExit(f"{p!r}: expected A:B with both among the run's systems ({', '.join(sorted(systems))})")
        pairs.append((a, b))
    print(report(records, pairs, args.resamples, args.seed))
    return 0


if __name__ == "__main__":
    sys.exit(main())
