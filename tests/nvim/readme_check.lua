-- Runs after README.md's Neovim config (loaded as init.lua with `nvim -u`) and checks what it promises:
-- one server per project root, attached to every opened file of that root, answering requests.
-- Env: DELPHI_WS (a project: a .git folder), DELPHI_WS2 (another: a delphi.toml), DELPHI_OUT (JSON result).
local out = {}
local function finish(code)
  local f = io.open(os.getenv("DELPHI_OUT"), "w")
  f:write(vim.fn.json_encode(out))
  f:close()
  for _, c in ipairs(vim.lsp.get_active_clients()) do c.stop() end
  vim.cmd(code == 0 and "qa!" or "cq!")
end
local function fail(msg) out.error = msg; finish(1) end
local function delphi_clients()
  local ids = {}
  for _, c in ipairs(vim.lsp.get_active_clients()) do
    if c.name == "delphi" then table.insert(ids, c.id) end
  end
  table.sort(ids)
  return ids
end
local function attached(buf)
  local ids = {}
  for id, c in pairs(vim.lsp.buf_get_clients(buf)) do
    if c.name == "delphi" then table.insert(ids, id) end
  end
  return ids
end

local ws, ws2 = os.getenv("DELPHI_WS"), os.getenv("DELPHI_WS2")
vim.cmd("edit " .. ws .. "/shipyard/retry.py")
local b1 = vim.api.nvim_get_current_buf()
vim.cmd("split " .. ws .. "/shipyard/scheduler.py")
local b2 = vim.api.nvim_get_current_buf()
if b1 == b2 then fail("the two files share a buffer") end

if not vim.wait(30000, function() return #attached(b1) == 1 and #attached(b2) == 1 end, 50) then
  fail("buffers not attached: " .. vim.inspect({ attached(b1), attached(b2), delphi_clients() }))
end
out.clients_after_two_files = #delphi_clients()
out.same_client = attached(b1)[1] == attached(b2)[1]
local client = vim.lsp.get_client_by_id(attached(b1)[1])
if not vim.wait(30000, function() return client.initialized end, 50) then fail("not initialized") end
out.root_dir = client.config.root_dir

-- Wait until indexing has finished (lexical and vectors).
local ready = vim.wait(120000, function()
  local res = client.request_sync("delphi/health", {}, 5000, b1)
  if res and res.result then
    local w = res.result.workspaces[1]
    return w.counts.files > 10 and w.counts.vectors == w.counts.chunks and w.branches.vector == "ready"
  end
  return false
end, 200)
if not ready then fail("indexing did not finish") end

local uri = vim.uri_from_bufnr(b1)
local lens = client.request_sync("textDocument/codeLens", { textDocument = { uri = uri } }, 20000, b1)
out.codelens = lens and lens.result or lens
-- `class RetryPolicy:` is line 6 (0-based 5) of the fixture's shipyard/retry.py.
local hov = client.request_sync("textDocument/hover",
  { textDocument = { uri = uri }, position = { line = 5, character = 8 } }, 20000, b1)
out.hover = hov and hov.result or hov
local ctx = client.request_sync("delphi/context", { query = "where is TLS set up for the gRPC proxy?", limit = 5 },
  20000, b1)
out.context = ctx and ctx.result or ctx

-- The config's own lens refresh (on BufEnter): entering retry.py's window shows its lenses.
vim.cmd("wincmd j")
if vim.api.nvim_get_current_buf() ~= b1 then vim.cmd("wincmd k") end
out.lenses_shown = vim.wait(20000, function() return #vim.lsp.codelens.get(b1) > 0 end, 100)

-- Running the lens on `class RetryPolicy:` (the config's `<leader>l`) opens its test: the command is the
-- client's (vim.lsp.commands), the server does not define it (an editor newcomer, session 25).
vim.api.nvim_win_set_cursor(0, { 6, 0 })
local ok_run, run_err = pcall(vim.lsp.codelens.run)
out.lens_run_error = not ok_run and tostring(run_err) or nil
out.lens_opened = vim.wait(10000, function()
  if vim.api.nvim_buf_get_name(0):match("tests/test_retry%.py$") then return true end
  for _, item in ipairs(vim.fn.getqflist()) do
    if vim.api.nvim_buf_get_name(item.bufnr):match("tests/test_retry%.py$") then return true end
  end
  return false
end, 100)
vim.cmd("buffer " .. b1)

-- The lens refresh is set once per buffer, in the config's own group.
out.lens_autocmds = #vim.api.nvim_get_autocmds({ group = "delphi_lens", buffer = b1 })

-- A plugin's buffer named like a URI (fugitive's, with buftype "") starts no server of its own: the config
-- took `fugitive:///…/.git//0/…` for a path, and its made-up folder for a project (a Neovim newcomer, session 40).
local before = #delphi_clients()
vim.cmd("split fugitive://" .. ws .. "/.git//0/shipyard/retry.py")
vim.bo.buftype = ""
vim.bo.filetype = "python"
vim.wait(1500, function() return #delphi_clients() > before end, 50)
out.uri_buffer_clients = #delphi_clients() - before
out.uri_buffer_attached = #attached(vim.api.nvim_get_current_buf())
vim.cmd("bwipeout!")

-- A file of another root gets that root's own server; the first is left alone.
vim.cmd("split " .. ws2 .. "/main.py")
local b3 = vim.api.nvim_get_current_buf()
vim.wait(30000, function() return #attached(b3) == 1 end, 50)
out.other_root_client = attached(b3)[1]
out.first_client = attached(b1)[1]
out.clients_after_other_root = #delphi_clients()
finish(0)
