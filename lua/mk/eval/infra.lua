--- mk.eval.infra: failures of the machine, never a candidate's verdict.
--- A full disk, memory the engine or the harness cannot get, a tool that
--- cannot be run, a frozen suite that was modified: nothing is learned
--- about the candidate, so its step is not committed; the run stops with
--- one line and `mkengine resume` computes the step again once the cause is
--- gone. Targets report such failures as `status = "error"`; the evaluator
--- hands them on as `status = "infra"`; the context raises `M.raise`.
local task = require("mk.services.task")
local util = require("mk.services.util")

local M = {}

M.KIND = "infra"

-- what the C library says when the machine, not the code, failed
M.PATTERNS = {
  "No space left on device", "Disk quota exceeded", "Read%-only file system", "Input/output error",
  "Cannot allocate memory", "Too many open files", "not enough memory",
}

--- Whether an error text names a failure of the machine (ENOSPC, EIO, ...).
---@param msg any
function M.text(msg)
  if type(msg) == "table" then msg = msg.message end
  if type(msg) ~= "string" then return false end
  for _, p in ipairs(M.PATTERNS) do
    if msg:find(p) then return true end
  end
  return false
end

--- Whether `err` is an infrastructure error raised by M.raise.
function M.is(err) return type(err) == "table" and err.kind == M.KIND end

local function first_line(s)
  s = tostring(s or "")
  return (s:match("^[^\n]*"):gsub("^stack traceback:.*", ""))
end

--- An infrastructure error value: {kind = "infra", exit = 1, message}.
---@param message string
function M.error(message)
  return util.error({ kind = M.KIND, exit = 1, message = first_line(message) })
end

--- Raise an infrastructure error (see the module comment).
function M.raise(message) error(M.error(message), 0) end

--- Raise `err` again when it must stop a whole batch of runs (a bench, a
--- sweep, an evaluation of many files), not only the one it came from: the
--- task was cancelled, a signal is stopping the engine, or the machine
--- failed (M.is), so the next runs would fail alike. Returns otherwise.
function M.rethrow(err)
  if err == task.CANCELLED or task.signal() or M.is(err) then error(err, 0) end
end

--- `err` as an infrastructure error when it is one or its text names a
--- machine failure (a disk-full `assert` deep in a write); else nil.
function M.wrap(err)
  if M.is(err) then return err end
  if M.text(err) then
    local msg = type(err) == "table" and err.message or err
    -- "file.lua:12: cannot write ...: No space left on device" -> the message
    return M.error((first_line(msg):gsub("^[^%s:]+%.lua:%d+: ", "")))
  end
  return nil
end

return M
