"""bench.paired (paired bootstrap between systems of one run) and bench.train's held-out-fold records."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from bench.paired import bootstrap, compare, main
from bench.train import _write_heldout
from delphi_ls.retrieval.features import FEATURE_NAMES


def _rec(i: int, task: str, a: float, b: float) -> dict:
    return {"id": str(i), "task": task, "systems": {s: {"mrr": v, "r@5": v, "r@20": 1.0, "latency": 0.01}
                                                     for s, v in (("a", a), ("b", b))}}


def test_bootstrap_interval_brackets_the_mean_and_collapses_when_constant() -> None:
    lo, hi = bootstrap([0.0, 1.0] * 20, resamples=2000)
    assert lo < 0.5 < hi
    assert bootstrap([0.25] * 10, resamples=200) == (0.25, 0.25)


def test_compare_counts_wins_ties_losses_and_splits_by_task(tmp_path: Path, capsys) -> None:
    recs = [_rec(0, "x", 1.0, 0.5), _rec(1, "x", 0.5, 0.5), _rec(2, "y", 0.2, 1.0)]
    c = compare(recs, "a", "b", resamples=500)
    assert c["wtl"] == (1, 1, 1) and c["n"] == 3
    assert abs(c["mrr"][0] - (0.5 + 0 - 0.8) / 3) < 1e-9
    f = tmp_path / "records.jsonl"
    f.write_text("".join(json.dumps(r) + "\n" for r in recs))
    assert main([str(f), "a:b", "--resamples", "200"]) == 0
    out = capsys.readouterr().out
    assert "## x (n=2)" in out and "## y (n=1)" in out and "| a − b | +0.250" in out


def test_heldout_records_score_the_ranker_on_repositories_it_did_not_see(tmp_path: Path) -> None:
    # One column marks the gold file, which the fused order puts last: a ranker trained on the other
    # repositories learns the column, so held out it beats the fused order on every question.
    col, noise = FEATURE_NAMES.index("rr_bm25"), FEATURE_NAMES.index("rr_vector")
    rng = np.random.default_rng(0)
    rows = []
    for repo in ("o/a", "o/b", "o/c"):
        for q in range(12):
            cands = []
            for k in range(6):
                gold = k == 5
                feats = [0.0] * len(FEATURE_NAMES)
                feats[noise] = float(rng.random())
                feats[col] = 1.0 if gold else 0.0
                cands.append({"path": f"f{k}", "features": feats, "label": int(gold)})
            rows.append({"id": str(q), "repo": repo, "task": "intent2code", "source": "plain", "gold": ["f5"],
                         "anchors": [], "candidates": cands})
    out = tmp_path / "heldout.jsonl"
    _write_heldout(out, rows, [["o/a"], ["o/b"], ["o/c"]], (20, 8, 300), seed=0)  # one Adam step per epoch here
    recs = [json.loads(line) for line in out.open()]
    assert len(recs) == 36 and {r["id"] for r in recs} >= {"plain:0"}
    assert all(r["systems"]["fused"]["mrr"] == 1 / 6 for r in recs)
    assert sum(r["systems"]["ltr"]["mrr"] for r in recs) / 36 > 0.9
