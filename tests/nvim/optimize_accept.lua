-- Headless Neovim 0.11 drives forge-lsp's optimize -> accept flow like a user would:
-- code action "Optimize `Model`" -> $/progress -> "faster-candidate" diagnostic -> Accept code lens
-- -> the buffer becomes the rewritten module -> :write.
--
-- Run: nvim --headless -u NONE -i NONE -n -l tests/nvim/optimize_accept.lua
-- Environment (set by tests/test_neovim_e2e.py):
--   FORGE_NVIM_WORKSPACE   workspace root (root_dir)
--   FORGE_NVIM_FILE        the task file to open
--   FORGE_NVIM_SERVER_CMD  JSON list: the server command
--   FORGE_NVIM_BASE_URL    the scripted chat-completions server
--   FORGE_NVIM_TIMEOUT_S   how long to wait for the proposal (default 120)
-- Prints exactly one line on stdout, `FORGE-NVIM-E2E PASS` or `FORGE-NVIM-E2E FAIL: <reason>`,
-- and exits 0 / 1. Progress notes go to stderr.

local function note(msg)
  io.stderr:write("[nvim-e2e] " .. msg .. "\n")
  io.stderr:flush()
end

local client -- set once started
local server_exit -- {code, signal} once the server process has exited

local function finish(ok, reason)
  -- shutdown + exit, then wait for the process itself (Client:is_stopped() turns true at once in 0.11)
  if client and server_exit == nil then
    client:stop()
    if not vim.wait(15000, function() return server_exit ~= nil end, 50) then
      note("the server did not exit after shutdown/exit; terminating it")
      client:stop(true)
      vim.wait(5000, function() return server_exit ~= nil end, 50)
      if ok then
        ok, reason = false, "the server did not exit within 15 s of shutdown/exit"
      end
    end
  end
  if ok and server_exit and (server_exit[1] ~= 0 or server_exit[2] ~= 0) then
    ok, reason = false, ("the server exited with code %s, signal %s after shutdown/exit"):format(
      server_exit[1], server_exit[2])
  end
  if ok then
    io.stdout:write("FORGE-NVIM-E2E PASS\n")
  else
    io.stdout:write("FORGE-NVIM-E2E FAIL: " .. tostring(reason):gsub("\n", " ") .. "\n")
  end
  io.stdout:flush()
  os.exit(ok and 0 or 1)
end

local function fail(reason)
  finish(false, reason)
end

local function env(name)
  local v = os.getenv(name)
  if not v or v == "" then
    fail("missing environment variable " .. name)
  end
  return v
end

-- Wait for `cond` or fail with `what` (every wait ends: no hanging).
local function wait_for(ms, what, cond)
  local ok = vim.wait(ms, cond, 50)
  if not ok then
    fail("timed out after " .. ms .. " ms waiting for " .. what)
  end
end

-- An asynchronous request that we wait for with a timeout (the event loop keeps running,
-- so the server's own requests - workspace/applyEdit - are answered meanwhile).
local function request(method, params, bufnr, ms)
  local done, err, result = false, nil, nil
  local ok, id = client:request(method, params, function(e, r)
    done, err, result = true, e, r
  end, bufnr)
  if not ok then
    fail(method .. ": request could not be sent (client stopped?)")
  end
  wait_for(ms or 20000, "the reply to " .. method, function() return done end)
  if err then
    fail(method .. " failed: " .. vim.inspect(err))
  end
  return result
end

local function main()
  local workspace = env("FORGE_NVIM_WORKSPACE")
  local file = env("FORGE_NVIM_FILE")
  local cmd = vim.json.decode(env("FORGE_NVIM_SERVER_CMD"))
  local base_url = env("FORGE_NVIM_BASE_URL")
  local proposal_ms = math.floor(tonumber(os.getenv("FORGE_NVIM_TIMEOUT_S") or "120") * 1000)

  -- progress notifications, recorded per token
  local progress = {}
  vim.api.nvim_create_autocmd("LspProgress", {
    callback = function(ev)
      local params = ev.data and ev.data.params or {}
      local token, value = params.token, params.value or {}
      if type(token) == "string" and value.kind then
        progress[token] = progress[token] or {}
        table.insert(progress[token], value.kind)
        note(("progress %s %s %s"):format(token, value.kind, tostring(value.message or value.title or "")))
      end
    end,
  })

  local messages = {}
  vim.cmd.edit(vim.fn.fnameescape(file))
  local bufnr = vim.api.nvim_get_current_buf()
  vim.bo[bufnr].filetype = "python"
  local original = table.concat(vim.api.nvim_buf_get_lines(bufnr, 0, -1, false), "\n")

  local client_id = vim.lsp.start({
    name = "forge",
    cmd = cmd,
    root_dir = workspace,
    init_options = {
      forge = { model = "scripted", baseUrl = base_url, device = "cpu", search = "linear", rounds = 1,
                offline = false, profile = false },
    },
    on_exit = function(code, signal)
      server_exit = { code, signal }
      note(("server exited: code %s, signal %s"):format(code, signal))
    end,
    handlers = {
      ["window/showMessage"] = function(_, result)
        table.insert(messages, result.message)
        note("showMessage: " .. tostring(result.message))
      end,
    },
  }, { bufnr = bufnr })
  if not client_id then
    fail("vim.lsp.start returned nil")
  end
  client = vim.lsp.get_client_by_id(client_id)
  if not client then
    fail("no client with id " .. client_id)
  end

  wait_for(30000, "the client to initialize and attach", function()
    return client.initialized and vim.lsp.buf_is_attached(bufnr, client_id)
  end)
  note(("attached; offset encoding %s"):format(client.offset_encoding))

  local uri = vim.uri_from_bufnr(bufnr)
  local model_line
  for i, line in ipairs(vim.api.nvim_buf_get_lines(bufnr, 0, -1, false)) do
    if line:match("^class Model") then
      model_line = i - 1
      break
    end
  end
  if not model_line then
    fail("no `class Model` line in " .. file)
  end

  -- 1. the "Optimize `Model`" code action (the index is built just after `initialized`: retry briefly)
  local optimize
  local pos = { line = model_line, character = 0 }
  local deadline = vim.uv.now() + 20000
  while not optimize do
    local actions = request("textDocument/codeAction", {
      textDocument = { uri = uri },
      range = { start = pos, ["end"] = pos },
      context = { diagnostics = {} },
    }, bufnr) or {}
    for _, a in ipairs(actions) do
      if a.title == "Optimize `Model`" then
        optimize = a
      end
    end
    if not optimize then
      if vim.uv.now() > deadline then
        fail("no \"Optimize `Model`\" code action within 20 s; got " .. vim.inspect(actions))
      end
      vim.wait(200)
    end
  end
  local command = optimize.command
  if type(command) ~= "table" or command.command ~= "forge.optimize" then
    fail("the Optimize action carries no forge.optimize command: " .. vim.inspect(optimize))
  end
  local started = request("workspace/executeCommand",
    { command = command.command, arguments = command.arguments }, bufnr)
  if type(started) ~= "table" or not started.job then
    fail("forge.optimize did not start a job: " .. vim.inspect(started))
  end
  local token = "forge/" .. started.job
  note("optimize started: " .. started.job)

  -- 2. the proposal diagnostic (or the job's end without one: then fail at once, not after the timeout)
  local diag
  local function find_diag()
    for _, d in ipairs(vim.diagnostic.get(bufnr)) do
      if d.code == "faster-candidate" and d.source == "forge" then
        diag = d
        return true
      end
    end
    return false
  end
  -- the job is over when its progress ended or `forge/runs` says so (a job can fail before it begins progress)
  local job_status, polled_at, polling = nil, 0, false
  local function ended()
    local kinds = progress[token]
    if kinds ~= nil and kinds[#kinds] == "end" then
      return true
    end
    if not polling and vim.uv.now() - polled_at > 1000 then
      polling = true
      client:request("forge/runs", vim.NIL, function(_, res)
        polling, polled_at = false, vim.uv.now()
        for _, j in ipairs(type(res) == "table" and res.runs or {}) do
          if j.id == started.job then
            job_status = j.status
          end
        end
      end, bufnr)
    end
    return job_status == "done" or job_status == "failed" or job_status == "cancelled"
  end
  wait_for(proposal_ms, "a faster-candidate diagnostic from forge", function()
    return find_diag() or ended()
  end)
  if not diag and not vim.wait(5000, find_diag, 50) then
    fail(("the job ended (%s) without a faster-candidate diagnostic; server messages: %s"):format(
      tostring(job_status or "progress end"), vim.inspect(messages)))
  end
  note("diagnostic: " .. diag.message)

  -- 3. $/progress begin ... end for the job's token
  wait_for(10000, "$/progress begin, report and end for " .. token, function()
    local kinds = progress[token]
    return kinds ~= nil and kinds[1] == "begin" and vim.list_contains(kinds, "report") and kinds[#kinds] == "end"
  end)

  -- 4. the Accept code lens
  local accept
  local lenses = request("textDocument/codeLens", { textDocument = { uri = uri } }, bufnr) or {}
  for _, lens in ipairs(lenses) do
    if lens.command and lens.command.command == "forge.accept" then
      accept = lens.command
    end
  end
  if not accept then
    fail("no forge.accept code lens: " .. vim.inspect(lenses))
  end
  local result = request("workspace/executeCommand",
    { command = accept.command, arguments = accept.arguments }, bufnr, 30000)
  note("forge.accept replied: " .. vim.inspect(result))
  if type(result) ~= "table" or result.applied ~= true then
    fail("forge.accept did not apply: " .. vim.inspect(result))
  end

  -- 5. the buffer holds the rewritten module
  local text
  wait_for(10000, "the buffer to change to the rewritten module", function()
    text = table.concat(vim.api.nvim_buf_get_lines(bufnr, 0, -1, false), "\n")
    return text ~= original and text:find("\nclass Model%(") ~= nil
      and text:find("# --- forge: begin optimized Model", 1, true) ~= nil
  end)

  -- 6. the proposal is gone once accepted
  wait_for(10000, "the faster-candidate diagnostic to clear", function()
    for _, d in ipairs(vim.diagnostic.get(bufnr)) do
      if d.code == "faster-candidate" then
        return false
      end
    end
    return true
  end)

  vim.cmd.write()
  if vim.bo[bufnr].modified then
    fail(":write left the buffer modified")
  end
  finish(true)
end

local ok, err = xpcall(main, debug.traceback)
if not ok then
  fail("error in the script: " .. tostring(err))
end
