"""A real editor client: headless Neovim starts delphi-ls and asks it questions.

Required in CI (.ci/run installs Debian's neovim): a missing `nvim` fails there instead of skipping.
"""

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

SCRIPT = Path(__file__).parent / "nvim" / "lsp_client.lua"


def test_neovim_builtin_client(workspace: Path, tmp_path: Path):
    nvim = shutil.which("nvim")
    if nvim is None:
        if os.environ.get("CI"):
            pytest.fail("nvim is not installed: .ci/run must install Debian's neovim")
        pytest.skip("nvim not installed (CI installs it)")
    out = tmp_path / "out.json"
    env = {**os.environ, "DELPHI_CMD": sys.executable, "DELPHI_WS": str(workspace),
           "DELPHI_INDEX": str(tmp_path / "index"), "DELPHI_OUT": str(out), "HOME": str(tmp_path)}
    proc = subprocess.run([nvim, "--headless", "-u", "NONE", "-i", "NONE", "-c", f"luafile {SCRIPT}"],
                          env=env, capture_output=True, text=True, timeout=240)
    result = json.loads(out.read_text()) if out.exists() else {}
    assert proc.returncode == 0 and "error" not in result, (proc.returncode, result, proc.stderr[-2000:])
    assert result["symbols"][0]["name"] == "BuildScheduler"
    assert result["symbols"][0]["location"]["uri"].endswith("shipyard/scheduler.py")
    assert result["context"]["results"][0]["path"] == "proxy/grpc_proxy.go"
