-- Headless Neovim (0.7+) as a real LSP client of delphi-ls.
-- Env: DELPHI_CMD (python executable), DELPHI_WS (workspace), DELPHI_INDEX, DELPHI_OUT (JSON result file).
local out = {}
local function finish(code)
  local f = io.open(os.getenv("DELPHI_OUT"), "w")
  f:write(vim.fn.json_encode(out))
  f:close()
  vim.cmd(code == 0 and "qa!" or "cq!")
end

local ws = os.getenv("DELPHI_WS")
local id = vim.lsp.start_client({
  name = "delphi",
  cmd = { os.getenv("DELPHI_CMD"), "-m", "delphi_ls" },
  root_dir = ws,
  workspace_folders = { { uri = vim.uri_from_fname(ws), name = "ws" } },
  init_options = { indexDir = os.getenv("DELPHI_INDEX") },
})
if not id then out.error = "start_client failed"; finish(1) end

vim.cmd("edit " .. ws .. "/shipyard/retry.py")
vim.lsp.buf_attach_client(0, id)
local client = vim.lsp.get_client_by_id(id)

local ok = vim.wait(30000, function() return client.initialized end, 50)
if not ok then out.error = "not initialized"; finish(1) end

-- Wait until indexing has finished (lexical and vectors).
local ready = vim.wait(120000, function()
  local res = client.request_sync("delphi/health", {}, 5000, 0)
  if res and res.result then
    local w = res.result.workspaces[1]
    return w.counts.files > 10 and w.counts.vectors == w.counts.chunks and w.branches.vector == "ready"
  end
  return false
end, 200)
if not ready then out.error = "indexing did not finish"; finish(1) end

local sym = client.request_sync("workspace/symbol", { query = "BuildSched" }, 10000, 0)
out.symbols = sym and sym.result or sym
local ctx = client.request_sync("delphi/context", { query = "where is TLS set up for the gRPC proxy?", limit = 5 }, 20000, 0)
out.context = ctx and ctx.result or ctx
client.stop()
finish(0)
