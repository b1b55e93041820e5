import json
import re
import subprocess
import sys
from pathlib import Path


def delphi(*args: str, check: bool = True) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "delphi_ls.cli", *args], capture_output=True, text=True, check=check,
                          timeout=300)


def test_index_context_health(workspace: Path, tmp_path: Path):
    idx = str(tmp_path / "idx")
    out = delphi("index", str(workspace), "--index-dir", idx)
    assert "files" in out.stdout and "chunks" in out.stdout
    # stderr is a pipe here: one summary line per phase, no carriage-return redraws (those are for terminals)
    # (the rate, "N files/s", only when the phase lasted 50 ms or more: this fixture's now takes less)
    assert re.search(r"^lexical\s+\d+/\d+ files in [\d.]+s", out.stderr, re.M) and "\r" not in out.stderr, out.stderr
    out = delphi("context", str(workspace), "where is TLS set up for the gRPC proxy?", "--index-dir", idx)
    first = out.stdout.splitlines()[1]
    assert "1. proxy/grpc_proxy.go" in first
    out = delphi("context", str(workspace), "which tests cover this?", "--anchor", "shipyard/retry.py",
                 "--index-dir", idx, "--json", "--limit", "3")
    ans = json.loads(out.stdout)
    assert ans["results"][0]["path"] == "tests/test_retry.py" and len(ans["results"]) == 3
    out = delphi("health", str(workspace), "--index-dir", idx, "--json")
    h = json.loads(out.stdout)
    assert h["counts"]["files"] > 10 and h["model"]["match"] and h["branches"]["vector"] == "ready"
    out = delphi("related-tests", str(workspace), "proxy/grpc_proxy.go", "--index-dir", idx)
    assert out.stdout.startswith("proxy/grpc_proxy_test.go")
    out = delphi("related-code", str(workspace), "tests/test_pipeline_integration.py", "--index-dir", idx)
    assert out.stdout.startswith("shipyard/scheduler.py  (the test imports it")
    out = delphi("symbols", str(workspace), "BuildSched", "--index-dir", idx)
    assert out.stdout.startswith("BuildScheduler  class  shipyard/scheduler.py")


def test_context_indexes_first_when_needed(workspace: Path, tmp_path: Path):
    out = delphi("context", str(workspace), "formatDuration", "--index-dir", str(tmp_path / "fresh"), "--json")
    assert json.loads(out.stdout)["results"][0]["path"] == "web/src/format.js"


def test_errors_are_clear(workspace: Path, tmp_path: Path):
    out = delphi("context", str(workspace), "x", "--anchor", "/etc/passwd", "--index-dir", str(tmp_path / "i"), check=False)
    assert out.returncode == 2 and "outside the workspace" in out.stderr
    out = delphi("index", str(tmp_path / "missing"), check=False)
    assert out.returncode == 2 and "workspace folder not found" in out.stderr
    out = delphi("index", str(workspace), "--embedder", "nonsense", "--index-dir", str(tmp_path / "i"), check=False)
    assert out.returncode == 2 and "setting 'embedder'" in out.stderr
