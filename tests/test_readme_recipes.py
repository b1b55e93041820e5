"""Every agent recipe in the README, run as written: each block is read out of README.md, its
command line started, and the SDK's real MCP client (or headless Neovim) asks it a question.

The clients themselves (Claude Code, Codex, Cursor, VS Code, mcphub.nvim) cannot run here; what
they would launch can, so docs cannot drift from what works.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import subprocess
import sys
import time
import tomllib
from pathlib import Path

import anyio
import pytest
from mcp import Client
from mcp.client.stdio import StdioServerParameters
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client

from tests.conftest import build_workspace
from tests.test_neovim import _nvim, readme_nvim_config

README = Path(__file__).parent.parent / "README.md"
BIN = Path(sys.executable).parent  # the venv's console scripts: `delphi` as the README's PATH has it
PLACEHOLDERS = ("/path/to/your/repo", "${workspaceFolder}")
pytestmark = pytest.mark.timeout(300)


def recipe(name: str) -> tuple[str, str]:
    m = re.search(rf"<!-- recipe:{re.escape(name)} -->\s*```(\w+)\n(.*?)```", README.read_text(), re.S)
    assert m, f"README.md lost its <!-- recipe:{name} --> block"
    return m.group(1), m.group(2)


def command_of(name: str) -> list[str]:
    """The command line a client would start for this recipe."""
    lang, text = recipe(name)
    if lang == "sh":
        line = next(ln for ln in text.splitlines() if ln.strip() and not ln.startswith("#"))
        words = shlex.split(line, comments=True)
        return words[words.index("--") + 1:] if "--" in words else words
    if lang == "toml":
        (server,) = tomllib.loads(text)["mcp_servers"].values()
        return [server["command"], *server["args"]]
    data = json.loads(text)
    (server,) = (data.get("mcpServers") or data.get("servers")).values()
    return [server["command"], *server["args"]]


def materialise(cmd: list[str], ws: Path) -> list[str]:
    out = []
    for word in cmd:
        for ph in PLACEHOLDERS:
            word = word.replace(ph, str(ws))
        out.append(word)
    assert out[0] == "delphi", f"the recipe should start Delphi's own command, not {out[0]!r}"
    return [str(BIN / "delphi"), *out[1:]]


@pytest.fixture
def env(tmp_path: Path) -> dict[str, str]:
    # The recipes pass no --index-dir: the index goes to the user cache, here a temporary one.
    return {**os.environ, "XDG_CACHE_HOME": str(tmp_path / "cache"), "XDG_CONFIG_HOME": str(tmp_path / "config"),
            "HOME": str(tmp_path)}


@pytest.fixture
def ws(tmp_path: Path) -> Path:
    return build_workspace(tmp_path / "ws")


async def ask_until_ready(client: Client) -> dict:
    deadline = time.monotonic() + 150
    while time.monotonic() < deadline:
        res = await client.call_tool("context", {"query": "BuildGraph", "limit": 3})
        assert not res.is_error, res
        data = res.structured_content
        if data["results"] and not data.get("indexing"):
            return data
        await anyio.sleep(0.3)
    pytest.fail("no answer before the deadline")


@pytest.mark.parametrize("name", ["claude-code", "codex", "cursor", "vscode", "neovim-mcp"])
async def test_mcp_client_recipe(name: str, ws: Path, env: dict[str, str]):
    cmd = materialise(command_of(name), ws)
    assert cmd[1] == "mcp"
    async with Client(StdioServerParameters(command=cmd[0], args=cmd[1:], env=env)) as client:
        data = await ask_until_ready(client)
    assert data["results"][0]["path"] == "engine/src/lib.rs"


async def test_serve_recipe(ws: Path, env: dict[str, str]):
    cmd = materialise(command_of("serve"), ws)
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    try:
        lines = [proc.stdout.readline() for _ in range(2)]
        url = re.search(r"(http://\S+)", lines[0]).group(1)
        token_file = Path(re.search(r"token in (\S+)", lines[1]).group(1))
        http = create_mcp_http_client(headers={"Authorization": f"Bearer {token_file.read_text().strip()}"})
        async with http, Client(streamable_http_client(url, http_client=http)) as client:
            data = await ask_until_ready(client)
        assert data["results"][0]["path"] == "engine/src/lib.rs"
    finally:
        proc.terminate()
        proc.wait(timeout=30)


def test_neovim_lua_recipe(workspace: Path, tmp_path: Path):
    """The README's Lua snippet, as written, inside Neovim running the README's config."""
    nvim = _nvim()
    lang, snippet = recipe("neovim-lua")
    assert lang == "lua"
    (tmp_path / "init.lua").write_text(readme_nvim_config())
    (tmp_path / "snippet.lua").write_text(snippet)
    out = tmp_path / "printed.json"
    driver = tmp_path / "driver.lua"
    driver.write_text(f"""
local printed = {{}}
print = function(...) table.insert(printed, table.concat(vim.tbl_map(tostring, {{...}}), " ")) end
vim.notify = function(msg) table.insert(printed, "notify: " .. tostring(msg)) end
vim.cmd("edit " .. vim.fn.fnameescape("{workspace}/proxy/grpc_proxy.go"))
local ok = vim.wait(60000, function() return #vim.lsp.buf_get_clients(0) > 0 end, 100)
assert(ok, "no client attached")
-- Wait for the first index (an answer with results and no indexing under way), then run the snippet.
vim.wait(120000, function()
  local res = vim.lsp.buf_request_sync(0, "delphi/context", {{ query = "grpc proxy" }}, 5000) or {{}}
  for _, r in pairs(res) do
    if r.result and #r.result.results > 0 and (r.result.indexing == nil or r.result.indexing == vim.NIL) then
      return true
    end
  end
  return false
end, 200)
table.insert(printed, "status-waited")
dofile("{tmp_path}/snippet.lua")
vim.wait(30000, function() return #printed > 1 end, 50)
local f = io.open("{out}", "w"); f:write(vim.fn.json_encode(printed)); f:close()
vim.cmd("qa!")
""")
    env = {**os.environ, "PATH": f"{BIN}{os.pathsep}{os.environ.get('PATH', '')}", "HOME": str(tmp_path),
           "XDG_CACHE_HOME": str(tmp_path / "cache"), "XDG_CONFIG_HOME": str(tmp_path / "config"),
           "XDG_DATA_HOME": str(tmp_path / "data")}
    subprocess.run(["git", "init", "-q", str(workspace)], check=True)
    proc = subprocess.run([nvim, "--headless", "-u", str(tmp_path / "init.lua"), "-i", "NONE", "-c",
                           f"luafile {driver}", "-c", "cq 3"], env=env, capture_output=True, text=True,
                          timeout=240, cwd=tmp_path)
    printed = json.loads(out.read_text()) if out.exists() else []
    assert printed, (proc.returncode, proc.stderr[-2000:], proc.stdout[-2000:])
    assert printed[0] == "status-waited" and len(printed) > 1, printed
    rank, path, *_why = printed[1].split(" ")
    # The snippet asks where the retry policy is decided: the fixture defines RetryPolicy in these two.
    assert rank == "1" and path in ("shipyard/retry.py", "web/src/policy.ts"), printed
