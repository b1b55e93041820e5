"""A workspace (or one of its folders) whose permissions change for a moment is not a workspace whose files are
gone: a walk that could not list the root read it as empty and removed every file from the index, and the edits
made meanwhile stayed out after it was readable again (a newcomer, session 30). The real CLI; as root, under
`setpriv` without the capabilities that let root read through permissions."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from delphi_ls import Engine


def _as_user() -> list[str]:
    if os.getuid() != 0:
        return []
    if shutil.which("setpriv") is None:
        pytest.skip("root reads through permissions, and setpriv is not installed to drop that")
    return ["setpriv", "--inh-caps=-all", "--bounding-set=-dac_override,-dac_read_search", "--"]


def _index(ws: Path, idx: Path) -> subprocess.CompletedProcess[str]:
    (ws.parent / "none.toml").write_text("")  # the developer's own settings stay out of it
    return subprocess.run([*_as_user(), sys.executable, "-m", "delphi_ls.cli", "index", str(ws), "--index-dir",
                           str(idx), "--no-vectors"], capture_output=True, text=True, timeout=300,
                          env={**os.environ, "DELPHI_CONFIG": str(ws.parent / "none.toml")})


def _files(ws: Path, idx: Path) -> list[str]:
    with Engine(ws, index_dir=str(idx), vectors=False) as eng:
        return sorted(p for p, _k, _n in eng.files())


def test_an_unreadable_workspace_or_folder_keeps_its_files(tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    (ws / "pkg").mkdir(parents=True)
    (ws / "app.py").write_text("def app():\n    return 1\n")
    (ws / "pkg" / "mod.py").write_text("def mod():\n    return 2\n")
    idx = tmp_path / "idx"
    assert _index(ws, idx).returncode == 0
    assert _files(ws, idx) == ["app.py", "pkg/mod.py"]
    (ws / "pkg").chmod(0o000)
    try:
        out = _index(ws, idx)
        assert out.returncode == 0, out.stderr
    finally:
        (ws / "pkg").chmod(0o755)
    assert _files(ws, idx) == ["app.py", "pkg/mod.py"]  # the folder it could not list: its files kept
    ws.chmod(0o000)
    try:
        out = _index(ws, idx)
        assert out.returncode == 2 and "cannot be read (permission denied)" in out.stderr, out.stderr
        assert "Traceback" not in out.stderr
    finally:
        ws.chmod(0o755)
    assert _files(ws, idx) == ["app.py", "pkg/mod.py"]
    (ws / "app.py").write_text("def app_renamed():\n    return 1\n")
    assert _index(ws, idx).returncode == 0  # readable again: caught up
    with Engine(ws, index_dir=str(idx), vectors=False) as eng:
        assert eng.context("app_renamed")["results"][0]["path"] == "app.py"


SERVER_SCRIPT = r"""
import json, os, sys, time
from pathlib import Path
from delphi_ls.api import ContextRequest
from delphi_ls.session import Session

ws, idx = Path(sys.argv[1]), sys.argv[2]
s = Session(None, {"indexDir": idx, "vectors": False})
s.start([ws])
s.watch(interval=0.5)
s.wait_idle(60)
out = {"start": s.status()["workspaces"][0]["counts"]["files"]}
ws.chmod(0)
s.reindex()
time.sleep(1.5)
s.wait_idle(60)
w = s.status()["workspaces"][0]
out["unreadable"] = [w["state"], w["counts"]["files"], [p["code"] for p in w["problems"]]]
ws.chmod(0o755)
(ws / "app.py").write_text("def app_renamed():\n    return 1\n")
deadline = time.monotonic() + 30
while time.monotonic() < deadline:
    time.sleep(0.5)
    s.wait_idle(10)
    w = s.status()["workspaces"][0]
    names = [x["name"] for x in s.document_symbols(str(ws / "app.py"))]
    if w["state"] == "ready" and "app_renamed" in names:
        break
out["back"] = [w["state"], w["counts"]["files"], [p["code"] for p in w["problems"]], names]
s.shutdown()
print(json.dumps(out))
"""


def test_a_server_keeps_an_unreadable_workspace_and_catches_up_when_it_is_readable(tmp_path: Path) -> None:
    """The server path: a run on a workspace that cannot be listed writes nothing and says so; once readable, the
    watch loop sees it back and indexes what changed meanwhile (a review, session 30)."""
    ws = tmp_path / "ws"
    (ws / "pkg").mkdir(parents=True)
    (ws / "app.py").write_text("def app():\n    return 1\n")
    (ws / "pkg" / "mod.py").write_text("def mod():\n    return 2\n")
    (tmp_path / "none.toml").write_text("")
    out = subprocess.run([*_as_user(), sys.executable, "-c", SERVER_SCRIPT, str(ws), str(tmp_path / "idx")],
                         capture_output=True, text=True, timeout=300,
                         env={**os.environ, "DELPHI_CONFIG": str(tmp_path / "none.toml")})
    assert out.returncode == 0, out.stderr[-2000:]
    got = json.loads(out.stdout.strip().splitlines()[-1])
    assert got["start"] == 2
    assert got["unreadable"][1] == 2 and "workspace_unreadable" in got["unreadable"][2], got
    assert got["back"][:3] == ["ready", 2, []] and "app_renamed" in got["back"][3], got
