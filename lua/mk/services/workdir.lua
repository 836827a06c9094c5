--- mk.services.workdir: private temporary directories an engine owns while
--- it lives (the evaluator's builds and frozen tests). Each carries a marker
--- file the engine holds locked: an flock, which the kernel releases however
--- the process ends. A directory whose marker nobody holds was left by an
--- engine that was killed (SIGKILL, a crash) and is swept by the next engine
--- that starts one; directories without the marker are never touched.
local fs = require "mk.fs"

local M = {}

M.MARKER = ".mkengine-work"

--- The directory temporary work goes under: $TMPDIR or /tmp.
function M.base()
  local t = os.getenv("TMPDIR")
  return (t and t ~= "") and t:gsub("/+$", "") or "/tmp"
end

--- A new private directory `<base>/<prefix>-XXXXXX`, marked and locked.
--- Returns dir, lock (release with M.release) or nil, err.
---@param prefix string
function M.new(prefix)
  local dir, err = fs.tmpdir(prefix)
  if not dir then return nil, err end
  -- lock under a temporary name, then rename: a sweeper only ever sees the
  -- marker already locked
  local lock, lerr = fs.lock(dir .. "/" .. M.MARKER .. ".new")
  if not lock then
    fs.rm_rf(dir)
    return nil, lerr
  end
  assert(fs.rename(dir .. "/" .. M.MARKER .. ".new", dir .. "/" .. M.MARKER))
  return dir, lock
end

--- Remove a directory made by M.new and drop its lock.
function M.release(dir, lock)
  if dir then fs.rm_rf(dir) end
  if lock then lock:unlock() end
end

--- Remove the marked directories under `base` (default M.base()) whose
--- owner is gone. Returns the list of removed paths.
---@param base string|nil
function M.sweep(base)
  base = base or M.base()
  local removed = {}
  for _, name in ipairs(fs.list(base) or {}) do
    local dir = base .. "/" .. name
    local marker = dir .. "/" .. M.MARKER
    if name:sub(1, 2) == "mk" and fs.exists(marker) then
      local lock = fs.lock(marker)
      if lock then -- nobody holds it: the engine that made it is dead
        fs.rm_rf(dir)
        lock:unlock()
        if not fs.exists(dir) then removed[#removed + 1] = dir end
      end
    end
  end
  return removed
end

local swept = false

--- Sweep once per process (the first evaluator of an engine calls it).
function M.sweep_once()
  if swept then return {} end
  swept = true
  return M.sweep()
end

return M
