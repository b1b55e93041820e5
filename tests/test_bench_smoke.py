"""CI-sized runs of both benchmarks so the tools cannot rot."""

import json
import shutil
from pathlib import Path

import pytest

from bench import arb, perf
from delphi_ls.evaluation import scoring
from tests.conftest import build_workspace


@pytest.fixture
def corpora(tmp_path: Path) -> tuple[Path, Path]:
    base = "a" * 40
    root = tmp_path / "corpora"
    build_workspace(root / f"acme__shipyard__{base[:12]}")
    samples = [
        {"id": "s1", "repo": "acme/shipyard", "base_commit": base, "task_type": "code2test",
         "query": {"pr_title": "Cap the retry backoff at max_delay", "pr_body": "", "changed_file": "shipyard/retry.py"},
         "gold": {"related_tests": ["tests/test_retry.py"], "root_cause_files": ["shipyard/retry.py"]}},
        {"id": "s2", "repo": "acme/shipyard", "base_commit": base, "task_type": "intent2code",
         "query": {"pr_title": "Load TLS certificates for the gRPC proxy from a key pair", "pr_body": ""},
         "gold": {"root_cause_files": ["proxy/grpc_proxy.go"], "related_tests": []}},
        {"id": "s3", "repo": "acme/missing", "base_commit": base, "task_type": "intent2code",
         "query": {"pr_title": "x"}, "gold": {"root_cause_files": ["a.py"]}},
    ]
    path = tmp_path / "samples.jsonl"
    path.write_text("".join(json.dumps(s) + "\n" for s in samples))
    return path, root


def test_arb_benchmark_small_run(corpora, tmp_path: Path):
    samples, root = corpora
    if shutil.which("rg") is None:
        pytest.fail("ripgrep is required for the grep baseline (.ci/run installs it)")
    out = tmp_path / "out"
    summary = arb.run(arb.build_args(["--samples", str(samples), "--corpora", str(root), "--out", str(out), "--ablate"]))
    assert set(summary["overall"]) >= {"engine", "lexical", "bm25", "grep", "heuristic", "engine-no-vector"}
    assert summary["overall"]["engine"]["n"] == 2
    assert summary["overall"]["engine"]["mrr"] == 1.0  # both known answers ranked first
    report = (out / "report.md").read_text()
    assert "| overall | engine | 2 |" in report and "corpus missing" in report
    recs = [json.loads(x) for x in (out / "records.jsonl").read_text().splitlines()]
    assert recs[0]["systems"]["engine"]["goldRanks"] == {"tests/test_retry.py": 1}
    assert recs[0]["anchors"] == ["shipyard/retry.py"] and recs[0]["top"][0]["branches"]


def test_arb_fresh_indexes_index_from_scratch_again(corpora, tmp_path: Path):
    """``--fresh-indexes`` indexes every corpus from scratch, even where a run before left its index under
    ``--index-root`` (that index was taken up with nothing to do: 0 files, whatever code had built it)."""
    samples, root = corpora
    common = ["--samples", str(samples), "--corpora", str(root), "--index-root", str(tmp_path / "idx"),
              "--baselines", "lexical"]
    files = []
    for n, extra in enumerate([[], ["--fresh-indexes"], []]):
        arb.run(arb.build_args([*common, "--out", str(tmp_path / f"out{n}"), *extra]))
        stats = json.loads((tmp_path / f"out{n}" / "summary.json").read_text())["index"]
        files.append(sum(s.get("files", 0) for s in stats if s["variant"] == "engine"))
    assert files[0] > 0 and files[1] == files[0] and files[2] == 0


def test_arb_scoring_rules():
    assert scoring.metrics(["a", "b", "c"], ["c", "z"]) == {"mrr": 1 / 3, "r@5": 0.5, "r@10": 0.5, "r@20": 0.5}
    assert scoring.gold_of({"task_type": "code2test", "gold": {"related_tests": ["t"], "root_cause_files": ["r"]}}) == ["t"]
    assert scoring.gold_of({"task_type": "trace2code", "gold": {"related_tests": ["t"], "root_cause_files": []}}) == ["t"]
    assert scoring.gold_of({"task_type": "x", "gold": {"no_gold": True, "root_cause_files": ["r"]}}) == []
    text, anchors = scoring.ask({"task_type": "trace2code", "query": {"raw_signal": "boom", "trace_paths": "['a/b.py']"}})
    assert anchors == ["a/b.py"] and text.startswith("Which source files cause this failure?")
    lo, hi = scoring.bootstrap([0.1, 0.2, 0.3, 0.0])
    assert lo <= 0.15 <= hi


def test_perf_benchmark_small_run(tmp_path: Path):
    ws = build_workspace(tmp_path / "ws")
    r = perf.run(ws, "potion-base-8M")
    assert r["index"]["files"] > 10 and r["index"]["chunks_per_s"] > 0
    assert 0 < r["model"]["efficiency"] <= 1.5
    assert r["query"]["p50_ms"] > 0 and r["reindex_one_file"]["files_indexed"] == 1
    assert "| warm query p50 (ms) |" in perf.render(r)
    assert r["server"]["p50_ms"] > 0 and r["server"]["cold_start"]["first_answer_with_results_s"] > 0
