--- mk.search.ask: questions a strategy puts to a person, and the answers.
---
--- A question is a file of the run directory, its answer (the decision)
--- another, so whoever shows the question — the terminal of the engine,
--- `mkengine serve` in another process, `run --ui` in this one — can answer
--- it, and `mkengine resume` replays the recorded decision instead of asking
--- again:
---
---   questions/<id>.json  {id, key, kind, title, text, options, asked_at}
---   decisions/<id>.json  {id, verb, text?, choice?, by, at}
---
--- The id is derived from the strategy's step key, so a resumed run asks
--- the same questions under the same ids. The first answer wins: answers
--- are written under a lock, and a second one gets {kind = "answered"} with
--- the decision that won. Waiting polls one small file every 100 ms with
--- task.sleep (never blocks the loop) and, when the engine has a terminal
--- or a pipe on stdin and `terminal` is set, reads stdin through mk.stdin.
---
--- Kinds and their verbs:
---   review  accept | edit (text = the new content) | reject | quit
---   choose  choose (choice = one of options[].id) | quit
---   confirm accept | reject | quit
local fs = require "mk.fs"
local task = require "mk.services.task"
local json = require "cjson.safe"
local util = require "mk.services.util"

local M = {}

M.VERBS = {
  review = { accept = true, edit = true, reject = true, quit = true },
  choose = { choose = true, quit = true },
  confirm = { accept = true, reject = true, quit = true },
}
M.POLL_S = 0.1

--- A file-safe id for a step key (printable, unique per key).
---@param key string
function M.id(key)
  local readable = key:gsub("[^%w_.-]+", "_"):sub(-60)
  return readable .. "-" .. require("mk.hash").sha256(key):sub(1, 8)
end

local function qpath(dir, id) return dir .. "/questions/" .. id .. ".json" end
local function dpath(dir, id) return dir .. "/decisions/" .. id .. ".json" end

-- The JSON object in file path (nulls as nil), or nil.
local function read_json(path)
  local v = util.read_json(path)
  return type(v) == "table" and v or nil
end

--- The question `id` of the run in `dir`, or nil.
function M.question(dir, id) return read_json(qpath(dir, id)) end

--- The decision taken on question `id`, or nil.
function M.decision(dir, id) return read_json(dpath(dir, id)) end

--- Questions of the run with no decision yet, oldest first.
---@param dir string
function M.pending(dir)
  local out = {}
  for _, name in ipairs(fs.list(dir .. "/questions") or {}) do
    local id = name:match("^(.+)%.json$")
    if id and not fs.exists(dpath(dir, id)) then
      local q = M.question(dir, id)
      if q then out[#out + 1] = q end
    end
  end
  table.sort(out, function(a, b) return (a.asked_at or 0) < (b.asked_at or 0) end)
  return out
end

-- Check an answer against its question: nil, err when it does not fit.
local function check_answer(q, a)
  if type(a) ~= "table" or type(a.verb) ~= "string" then
    return { kind = "bad_answer", message = "an answer needs a verb" }
  end
  local verbs = M.VERBS[q.kind] or {}
  if not verbs[a.verb] then
    local list = {}
    for v in pairs(verbs) do list[#list + 1] = v end
    table.sort(list)
    return { kind = "bad_answer", message = string.format("'%s' is not an answer to a %s question (%s)", a.verb,
      tostring(q.kind), table.concat(list, ", ")) }
  end
  if a.verb == "edit" and (type(a.text) ~= "string" or a.text == "") then
    return { kind = "bad_answer", message = "edit needs the new text" }
  end
  if a.verb == "choose" then
    for _, o in ipairs(q.options or {}) do
      if o.id == a.choice then return nil end
    end
    return { kind = "bad_answer", message = "choice must be one of the question's options" }
  end
  return nil
end

local function lock_decisions(dir)
  fs.mkdirs(dir .. "/decisions")
  for _ = 1, 50 do
    local lk = fs.lock(dir .. "/decisions/.lock")
    if lk then return lk end
    task.sleep(0.02)
  end
  return nil
end

--- Answer question `id` of the run in `dir`. The first answer wins.
---@param dir string
---@param id string
---@param a table {verb, text?, choice?}
---@param by string who answered ("browser", "terminal", ...)
---@return table|nil decision, table|nil err {kind = "no_question"|"bad_answer"|"answered"|"io", message, decision?}
function M.answer(dir, id, a, by)
  if type(id) ~= "string" or not id:match("^[%w_.-]+$") then
    return nil, { kind = "no_question", message = "no such question" }
  end
  local q = M.question(dir, id)
  if not q then return nil, { kind = "no_question", message = "no question " .. id .. " in this run" } end
  local bad = check_answer(q, a)
  if bad then return nil, bad end
  local lk = lock_decisions(dir)
  if not lk then return nil, { kind = "io", message = "cannot lock " .. dir .. "/decisions" } end
  local prev = M.decision(dir, id)
  if prev then
    lk:unlock()
    return nil, { kind = "answered", message = "already answered (" .. tostring(prev.verb) .. ", by "
      .. tostring(prev.by) .. ")", decision = prev }
  end
  local d = { id = id, verb = a.verb, text = a.verb == "edit" and a.text or nil,
    choice = a.verb == "choose" and a.choice or nil, by = by or "unknown", at = os.time() }
  local ok, err = fs.write(dpath(dir, id), json.encode(d) .. "\n", { atomic = true, sync = true })
  lk:unlock()
  if not ok then return nil, { kind = "io", message = err and err.message or "cannot write the decision" } end
  return d
end

-- The terminal's view of a question and how a typed line becomes an answer.
local function terminal_prompt(q, dir)
  local lines = { "", "----- " .. (q.title or q.kind) .. " -----" }
  if q.text and q.text ~= "" then lines[#lines + 1] = q.text end
  if q.kind == "choose" then
    for i, o in ipairs(q.options or {}) do lines[#lines + 1] = string.format("  %d) %s", i, o.label or o.id) end
    lines[#lines + 1] = "----- number to choose, [q]uit? "
  else
    local edit = q.kind == "review" and (", [e]dit (after editing " .. dir .. "/questions/" .. q.id .. ".txt)") or ""
    lines[#lines + 1] = "----- [a]ccept" .. edit .. ", [r]eject, [q]uit? "
  end
  return table.concat(lines, "\n")
end

local function terminal_answer(q, dir, line)
  line = line:lower():match("^%s*(.-)%s*$")
  if q.kind == "choose" then
    local i = tonumber(line)
    local o = i and (q.options or {})[i]
    if o then return { verb = "choose", choice = o.id } end
    return line:sub(1, 1) == "q" and { verb = "quit" } or nil
  end
  local c = line:sub(1, 1)
  if c == "e" and q.kind == "review" then
    return { verb = "edit", text = fs.read(dir .. "/questions/" .. q.id .. ".txt") or q.text }
  end
  local verb = ({ a = "accept", r = "reject", q = "quit" })[c]
  return verb and { verb = verb } or nil
end

-- Read answers typed on stdin until one is taken (or the question is
-- answered elsewhere and this task is cancelled).
local function read_terminal(q, dir, out)
  local stdin = require "mk.stdin"
  if q.kind == "review" then fs.write(dir .. "/questions/" .. q.id .. ".txt", q.text or "") end
  out:write(terminal_prompt(q, dir))
  while true do
    local line = stdin.read_line()
    if not line then return end -- end of input: the question stays open for the page
    local a = terminal_answer(q, dir, line)
    if a then
      local _, err = M.answer(dir, q.id, a, "terminal")
      if not err or err.kind == "answered" then return end
      out:write(err.message, "\n? ")
    else
      out:write("? ")
    end
  end
end

---@class mk.AskSpec
---@field key string step key (stable across resume)
---@field kind "review"|"choose"|"confirm"
---@field title string|nil
---@field text string|nil content to review (a plan, code)
---@field options table[]|nil for choose: {id =, label =}
---@field terminal boolean|nil also read the answer from stdin
---@field out file*|nil where the terminal prompt goes (default io.stderr)

--- The reason to stop when a person asked this session of the run to
--- stop (stop.json, written by the run page), else nil. A stop names the
--- session (run.json's `resumed` count) it was meant for, so a later
--- `mkengine resume` is not stopped by it again.
---@param dir string
---@param info table|nil run.json's table
function M.stop_requested(dir, info)
  local s = read_json(dir .. "/stop.json")
  if not s then return nil end
  if info and math.tointeger(s.session) ~= (math.tointeger(info.resumed) or 0) then return nil end
  return "stopped by a person (" .. tostring(s.by or "?") .. ")"
end

--- Ask a person; returns the decision {verb, text?, choice?, by}. A
--- decision recorded earlier (a resumed run) is returned at once.
---@param dir string the run directory
---@param spec mk.AskSpec
---@param event fun(e: table, q: table|nil)|nil records "question" (with the question itself
---  beside it, for whoever follows the run in this process) and "decision" events
---@param info table|nil run.json's table (a stop for this session ends the wait)
function M.ask(dir, spec, event, info)
  if type(spec) ~= "table" or type(spec.key) ~= "string" then error("ask: needs {key = ..., kind = ...}", 2) end
  if not M.VERBS[spec.kind] then error("ask: kind must be review, choose or confirm", 2) end
  local id = M.id(spec.key)
  local d = M.decision(dir, id)
  if d then return d end
  local q = { id = id, key = spec.key, kind = spec.kind, title = spec.title, text = spec.text, options = spec.options,
    asked_at = os.time() }
  fs.mkdirs(dir .. "/questions")
  assert(fs.write(qpath(dir, id), json.encode(q), { atomic = true, sync = true }))
  if event then event({ type = "question", id = id, kind = q.kind, title = q.title }, q) end
  local kind = spec.terminal and require("mk.stdin").kind()
  local reader = (kind == "tty" or kind == "pipe") and task.spawn(read_terminal, q, dir, spec.out or io.stderr) or nil
  while true do
    d = M.decision(dir, id)
    if d then break end
    if M.stop_requested(dir, info) then
      d = { id = id, verb = "quit", by = "stop" }
      break
    end
    task.sleep(M.POLL_S)
  end
  if reader then task.cancel(reader) end
  if event then event { type = "decision", id = id, verb = d.verb, by = d.by, choice = d.choice } end
  return d
end

return M
