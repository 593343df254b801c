-- Headless Neovim 0.11 opens a run's report through forge-lsp: `forge.openReport` -> the server's
-- `window/showDocument` (external) with the page's URL on 127.0.0.1 -> the URL is handed to the test, which
-- loads the page while the session lives.
--
-- Run: nvim --headless -u NONE -i NONE -n -l tests/nvim/open_report.lua
-- Environment (set by tests/test_report_server.py):
--   FORGE_NVIM_WORKSPACE   workspace root (root_dir), with a run in .forge/runs.sqlite
--   FORGE_NVIM_SERVER_CMD  JSON list: the server command
--   FORGE_NVIM_RUN         the run id
--   FORGE_NVIM_URL_FILE    where to write the URL showDocument was given
--   FORGE_NVIM_DONE_FILE   the test creates it once it has loaded the page
-- Prints one line, `FORGE-NVIM-REPORT PASS` or `FORGE-NVIM-REPORT FAIL: <reason>`, and exits 0 / 1.

local client
local server_exit

local function finish(ok, reason)
  if client and server_exit == nil then
    client:stop()
    if not vim.wait(15000, function() return server_exit ~= nil end, 50) then
      client:stop(true)
      vim.wait(5000, function() return server_exit ~= nil end, 50)
    end
  end
  io.stdout:write(ok and "FORGE-NVIM-REPORT PASS\n" or ("FORGE-NVIM-REPORT FAIL: " .. tostring(reason):gsub("\n", " ") .. "\n"))
  io.stdout:flush()
  os.exit(ok and 0 or 1)
end

local function wait_for(ms, what, cond)
  if not vim.wait(ms, cond, 50) then
    finish(false, "timed out after " .. ms .. " ms waiting for " .. what)
  end
end

local workspace = os.getenv("FORGE_NVIM_WORKSPACE")
local cmd = vim.json.decode(os.getenv("FORGE_NVIM_SERVER_CMD"))
local run = os.getenv("FORGE_NVIM_RUN")
local url_file = os.getenv("FORGE_NVIM_URL_FILE")
local done_file = os.getenv("FORGE_NVIM_DONE_FILE")

local shown = nil
local client_id = vim.lsp.start({
  name = "forge",
  cmd = cmd,
  root_dir = workspace,
  init_options = { forge = { device = "cpu", profile = false } },
  on_exit = function(code, signal) server_exit = { code, signal } end,
  handlers = {
    -- what a user's Neovim does with it is vim.ui.open (a browser): here the URL goes to the test
    ["window/showDocument"] = function(_, result)
      shown = result
      return { success = true }
    end,
  },
}, { attach = false })
if not client_id then
  finish(false, "vim.lsp.start returned nil")
end
client = vim.lsp.get_client_by_id(client_id)
wait_for(30000, "the client to initialize", function() return client.initialized end)

local done, err, result = false, nil, nil
client:request("workspace/executeCommand", { command = "forge.openReport", arguments = { run } }, function(e, r)
  done, err, result = true, e, r
end)
wait_for(60000, "the reply to forge.openReport", function() return done end)
if err then
  finish(false, "forge.openReport failed: " .. vim.inspect(err))
end
if not shown then
  finish(false, "no window/showDocument came: " .. vim.inspect(result))
end
if shown.external ~= true or shown.uri ~= result.url then
  finish(false, "showDocument was not the external page URL: " .. vim.inspect(shown) .. " vs " .. vim.inspect(result))
end
local f = io.open(url_file, "w")
f:write(shown.uri)
f:close()
wait_for(60000, "the test to load the page", function() return vim.uv.fs_stat(done_file) ~= nil end)
finish(true)
