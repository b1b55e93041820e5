"""A real editor client: headless Neovim starts delphi-ls and asks it questions.

Required in CI (.ci/run installs Debian's neovim): a missing `nvim` fails there instead of skipping.
The README's Neovim config is run exactly as written (extracted from README.md), so the recipe a
newcomer copies is the one that is tested.
"""

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

HERE = Path(__file__).parent
SCRIPT = HERE / "nvim" / "lsp_client.lua"
README_CHECK = HERE / "nvim" / "readme_check.lua"
README = HERE.parent / "README.md"


def _nvim() -> str:
    nvim = shutil.which("nvim")
    if nvim is None:
        if os.environ.get("CI"):
            pytest.fail("nvim is not installed: .ci/run must install Debian's neovim")
        pytest.skip("nvim not installed (CI installs it)")
    return nvim


def readme_nvim_config() -> str:
    """The Lua block of README.md between the `<!-- nvim-config -->` markers."""
    m = re.search(r"<!-- nvim-config -->\s*```lua\n(.*?)```\s*<!-- /nvim-config -->", README.read_text(), re.S)
    assert m, "README.md lost its <!-- nvim-config --> ```lua ... ``` <!-- /nvim-config --> block"
    return m.group(1)


def test_neovim_builtin_client(workspace: Path, tmp_path: Path):
    nvim = _nvim()
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


def test_readme_config_attaches_one_server_per_root(workspace: Path, tmp_path: Path):
    nvim = _nvim()
    init = tmp_path / "init.lua"
    init.write_text(readme_nvim_config())
    # Two projects, each marked the way the config looks for: a git checkout, and a folder with delphi.toml.
    subprocess.run(["git", "init", "-q", str(workspace)], check=True)
    other = tmp_path / "other"
    other.mkdir()
    (other / "delphi.toml").write_text("# settings for this project\n")
    (other / "main.py").write_text("def main():\n    return 0\n")
    out = tmp_path / "out.json"
    # The config runs `delphi-ls` from PATH, as an installed Delphi would; the index goes to the user cache.
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}",
           "DELPHI_WS": str(workspace), "DELPHI_WS2": str(other), "DELPHI_OUT": str(out),
           "HOME": str(tmp_path), "XDG_CACHE_HOME": str(tmp_path / "cache"),
           "XDG_CONFIG_HOME": str(tmp_path / "config"), "XDG_DATA_HOME": str(tmp_path / "data")}
    proc = subprocess.run([nvim, "--headless", "-u", str(init), "-i", "NONE", "-c", f"luafile {README_CHECK}",
                           "-c", "cq 3"],  # exits even if the check script stops on an error
                          env=env, capture_output=True, text=True, timeout=240, cwd=tmp_path)
    result = json.loads(out.read_text()) if out.exists() else {}
    assert proc.returncode == 0 and "error" not in result, (proc.returncode, result, proc.stderr[-2000:])
    # Two files of one project: one server, attached to both buffers, rooted at the project.
    assert result["clients_after_two_files"] == 1 and result["same_client"], result
    assert Path(result["root_dir"]).resolve() == workspace.resolve()
    # It answers: lenses over retry.py's definitions, hover on RetryPolicy, a context question.
    titles = [lens["command"]["title"] for lens in result["codelens"]]
    assert any(t.endswith("related tests") or t.endswith("related test") for t in titles), titles
    assert "tests/test_retry.py" in result["hover"]["contents"]["value"], result["hover"]
    assert result["context"]["results"][0]["path"] == "proxy/grpc_proxy.go"
    assert result["lenses_shown"], "the config's BufEnter refresh showed no lenses"
    assert result["lens_opened"] and not result.get("lens_run_error"), result
    assert result["lens_autocmds"] == 3, result  # BufEnter, InsertLeave, BufWritePost; once each
    assert result["uri_buffer_clients"] == 0 and result["uri_buffer_attached"] == 0, result
    # A file of another project gets its own server; the first one stays attached to its files.
    assert result["clients_after_other_root"] == 2
    assert result["other_root_client"] != result["first_client"]
