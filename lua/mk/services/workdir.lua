--- mk.services.workdir: private temporary directories an engine owns while
--- it lives (the evaluator's builds and frozen tests). Each carries a marker
--- file the engine holds locked: an flock, which the kernel releases however
--- the process ends. A directory whose marker nobody holds was left by an
--- engine that was killed (SIGKILL, a crash) and is swept by the next engine
--- that starts one; directories without the marker are never touched.
local fs = require("mk.fs")

local M = {}

M.MARKER = ".mkengine-work"

--- The directory temporary work goes under: $TMPDIR or /tmp.
function M.base()
  local t = os.getenv("TMPDIR")
  return (t and t ~= "") and t:gsub("/+$", "") or "/tmp"
end

-- RAM file system for large transient files (output blobs), when present.
M.RAM = "/dev/shm"

-- A new directory `<base>/<prefix>-XXXXXXXX` (fs.tmpdir knows only $TMPDIR).
local function dir_under(base, prefix)
  local f = io.open("/dev/urandom", "rb")
  local raw = f and f:read(4) or tostring(os.time())
  if f then f:close() end
  local dir = string.format("%s/%s-%s", base, prefix, (raw:gsub(".", function(c) return string.format("%02x", c:byte()) end)))
  if fs.exists(dir) then return nil, { kind = "io", message = dir .. " exists" } end
  local ok, err = fs.mkdirs(dir)
  if not ok then return nil, err end
  return dir
end

--- A new private directory `<base>/<prefix>-XXXXXX`, marked and locked.
--- `base` defaults to M.base(). Returns dir, lock (release with M.release)
--- or nil, err.
---@param prefix string
---@param base string|nil
function M.new(prefix, base)
  local dir, err
  if base then dir, err = dir_under(base, prefix) else dir, err = fs.tmpdir(prefix) end
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

--- Sweep once per process (the first evaluator of an engine calls it):
--- M.base() and the RAM file system.
function M.sweep_once()
  if swept then return {} end
  swept = true
  local removed = M.sweep()
  if fs.isdir(M.RAM) then
    for _, d in ipairs(M.sweep(M.RAM)) do removed[#removed + 1] = d end
  end
  return removed
end

return M
