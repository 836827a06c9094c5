--- mk.services.retrieve: the one place agents get knowledge-base passages from.
--- `retrieve.passages(query, opts)` ranks chunks of the engine's kb/ (which
--- includes kb/learned/), configured extra directories and
--- $MKENGINE_KB_DIRS with BM25 (mk.kb) and trims them to a character
--- budget; `retrieve.format` turns them into prompt text; `retrieve.learn`
--- appends what a run found out to kb/learned/ so later runs retrieve it.
--- Indexes are cached per directory set for the whole process and rebuilt
--- when a file under them changes (mtime or size), is added or removed.
local kb = require("mk.kb")
local fs = require("mk.fs")
local home = require("mk.home")
local util = require("mk.services.util")

local retrieve = {}

local config = { extra_dirs = {}, learn_dir = nil, k = 4, max_chars = 3000 }
local cache, ncached = {}, 0 -- key (dirs joined by "\0") -> index
local MAX_CACHED = 8 -- distinct directory sets kept open at once

local function check_dirs(v, fname, what)
  if v == nil then return {} end
  if type(v) ~= "table" then error(fname .. ": " .. what .. " must be a list of directories", 3) end
  for i, d in ipairs(v) do
    if type(d) ~= "string" or d == "" then
      error(string.format("%s: %s[%d] must be a non-empty string", fname, what, i), 3)
    end
  end
  return v
end

--- Set process-wide defaults: extra directories searched by every call (a
--- user's expert-kernel notes, say), the directory `learn` writes to, and
--- the default k and max_chars. Fields left nil keep their value.
---@param opts {extra_dirs?: string[], learn_dir?: string|false, k?: integer, max_chars?: integer}
---@return table config a copy of the configuration now in force
function retrieve.configure(opts)
  if type(opts) ~= "table" then error("retrieve.configure: opts must be a table", 2) end
  if opts.extra_dirs ~= nil then
    config.extra_dirs = { table.unpack(check_dirs(opts.extra_dirs, "retrieve.configure", "extra_dirs")) }
  end
  if opts.learn_dir ~= nil then
    if opts.learn_dir ~= false and type(opts.learn_dir) ~= "string" then
      error("retrieve.configure: learn_dir must be a string or false", 2)
    end
    config.learn_dir = opts.learn_dir or nil
  end
  if opts.k ~= nil then
    if math.type(opts.k) ~= "integer" or opts.k < 1 then error("retrieve.configure: k must be an integer >= 1", 2) end
    config.k = opts.k
  end
  if opts.max_chars ~= nil then
    if type(opts.max_chars) ~= "number" or opts.max_chars < 0 then
      error("retrieve.configure: max_chars must be a number >= 0", 2)
    end
    config.max_chars = opts.max_chars
  end
  return { extra_dirs = { table.unpack(config.extra_dirs) }, learn_dir = config.learn_dir,
           k = config.k, max_chars = config.max_chars }
end

--- The directory `learn` writes to by default: the configured learn_dir,
--- else the engine's kb/learned/.
---@return string
function retrieve.learn_dir()
  return config.learn_dir or home.path("kb/learned")
end

--- Where `learn` falls back to when kb/learned/ cannot be written (an
--- installed, read-only engine): $XDG_DATA_HOME/mkengine/learned, else
--- ~/.local/share/mkengine/learned. Searched by default once it exists.
---@return string|nil
function retrieve.user_learn_dir()
  local base = os.getenv("XDG_DATA_HOME")
  if not base or base == "" then
    local h = os.getenv("HOME")
    if not h or h == "" then return nil end
    base = h .. "/.local/share"
  end
  return base .. "/mkengine/learned"
end

--- The directories searched when a call gives no `dirs`: kb/ (with
--- kb/learned/), the notes of every shipped target (targets/<t>/kb/), a
--- configured learn_dir and the user learn dir outside it if they exist,
--- the configured extra_dirs, then each entry of $MKENGINE_KB_DIRS
--- (':'-separated). With `{learned = false}` the learn
--- directories are left out (kb/learned/ is then skipped by retrieve.index).
---@param opts? {learned?: boolean}
---@return string[]
function retrieve.default_dirs(opts)
  local learned = not (opts and opts.learned == false)
  local dirs, seen = {}, {}
  local function add(d)
    d = d:gsub("(.)/+$", "%1")
    if not seen[d] then
      seen[d] = true
      dirs[#dirs + 1] = d
    end
  end
  local base = home.path("kb")
  add(base)
  local tdir = home.path("targets")
  for _, t in ipairs(fs.list(tdir) or {}) do
    if fs.isdir(tdir .. "/" .. t .. "/kb") then add(tdir .. "/" .. t .. "/kb") end
  end
  for _, ld in ipairs { config.learn_dir or false, retrieve.user_learn_dir() or false } do
    if learned and ld and fs.isdir(ld) and (ld .. "/"):sub(1, #base + 1) ~= base .. "/" then add(ld) end
  end
  for _, d in ipairs(config.extra_dirs) do add(d) end
  for d in (os.getenv("MKENGINE_KB_DIRS") or ""):gmatch("[^:]+") do add(d) end
  return dirs
end

--- The index over `dirs` (default: retrieve.default_dirs()), cached for the
--- process and rebuilt when any file under them changed. With
--- `{learned = false}` the `learned/` subdirectory of each dir is skipped.
---@param dirs? string[]
---@param opts? {learned?: boolean}
---@return userdata|nil index, table|nil err {kind = "not_found"|"io", message}
function retrieve.index(dirs, opts)
  local learned = not (opts and opts.learned == false)
  dirs = dirs and check_dirs(dirs, "retrieve.index", "dirs") or retrieve.default_dirs { learned = learned }
  local key = table.concat(dirs, "\0") .. (learned and "" or "\1nolearned")
  local ix = cache[key]
  if ix and not ix:stale() then return ix end
  if ix then
    ix:close()
    cache[key], ncached = nil, ncached - 1
  end
  local err
  ix, err = kb.open { dirs = dirs, skip = not learned and { "learned" } or nil }
  if not ix then return nil, err end
  if ncached >= MAX_CACHED then retrieve.reset() end
  cache[key], ncached = ix, ncached + 1
  return ix
end

--- Forget every cached index (they are rebuilt on next use).
function retrieve.reset()
  for k, ix in pairs(cache) do
    ix:close()
    cache[k] = nil
  end
  ncached = 0
end

--- True when a passage from `file` is relevant to `target`: a note in a
--- target's own folder (`targets/<t>/kb/`) serves that target only, as
--- does a learned note `learned/<t>--...md`; everything else (kb/'s general
--- notes, user directories) serves every target.
---@param file string
---@param target string
---@return boolean
local owners = {} -- file -> the target its notes serve, or false for every target
function retrieve.for_target(file, target)
  local owner = owners[file]
  if owner == nil then -- asked for every hit of every prompt: worked out once per file
    local tbase = home.path("targets") .. "/"
    owner = file:sub(1, #tbase) == tbase and file:sub(#tbase + 1):match("^([^/]+)/kb/")
      or file:match("/learned/([^/]-)%-%-[^/]*$") or false
    owners[file] = owner
  end
  return not owner or owner == target
end

-- Cut text to at most n characters (marker included), at a line end when
-- one is near.
local function clip(text, n)
  if #text <= n then return text, false end
  local cut = n - 6
  local nl = text:sub(1, cut):match(".*()\n")
  if nl and nl > cut * 0.5 then cut = nl - 1 end
  -- do not split a UTF-8 sequence
  while cut > 0 and (text:byte(cut + 1) or 0) & 0xC0 == 0x80 do cut = cut - 1 end
  return text:sub(1, cut) .. "\n[...]", true
end

--- The top passages for a query, trimmed so their texts total at most
--- max_chars characters (a passage that does not fit is cut at a line end
--- if at least 200 characters remain, otherwise dropped with the rest).
---@param query string free text: a task description, an error message, a profile summary
---@param opts? {k?: integer, max_chars?: integer, dirs?: string[], extra_dirs?: string[], min_score?: number, target?: string, learned?: boolean}
---@return table[]|nil passages { {file, name, title, text, score, line, truncated}, ... }
---@return table|nil err {kind = "not_found"|"io", message} when a directory cannot be read
function retrieve.passages(query, opts)
  if type(query) ~= "string" then error("retrieve.passages: query must be a string", 2) end
  opts = opts or {}
  if type(opts) ~= "table" then error("retrieve.passages: opts must be a table", 2) end
  local k = opts.k or config.k
  if math.type(k) ~= "integer" or k < 1 then error("retrieve.passages: k must be an integer >= 1", 2) end
  local max_chars = opts.max_chars or config.max_chars
  if type(max_chars) ~= "number" or max_chars < 0 then error("retrieve.passages: max_chars must be a number >= 0", 2) end
  local learned = opts.learned ~= false
  local dirs = opts.dirs and check_dirs(opts.dirs, "retrieve.passages", "dirs")
    or retrieve.default_dirs { learned = learned }
  if opts.extra_dirs then
    local seen = {}
    for _, d in ipairs(dirs) do seen[d] = true end
    dirs = { table.unpack(dirs) }
    for _, d in ipairs(check_dirs(opts.extra_dirs, "retrieve.passages", "extra_dirs")) do
      if not seen[d] then seen[d] = true; dirs[#dirs + 1] = d end
    end
  end
  local target = opts.target
  if target ~= nil and type(target) ~= "string" then error("retrieve.passages: target must be a string", 2) end
  if not query:find("%S") then return {} end
  local ix, err = retrieve.index(dirs, { learned = learned })
  if not ix then return nil, err end
  -- long error logs: the head carries the message, the rest is mostly noise
  local hits = ix:search(query:sub(1, 4000), k * (target and 6 or 3))
  local out, left, seen = {}, max_chars, {}
  for _, h in ipairs(hits) do
    if #out == k or (opts.min_score and h.score < opts.min_score) then break end
    -- the same lesson learned by several runs differs only in its time stamp
    local key = h.title .. "\0" .. (h.text:find("\n- ", 1, true) -- only learned notes carry these lines
      and h.text:gsub("\n%- recorded: [^\n]*", ""):gsub("\n%- occurrences: [^\n]*", "") or h.text)
    if not seen[key] and (not target or retrieve.for_target(h.file, target)) then
      seen[key] = true
      local text, truncated = h.text, false
      if #text > left then
        if left < 200 then break end
        text, truncated = clip(text, left)
      end
      left = left - #text
      out[#out + 1] = { file = h.file, name = h.name, title = h.title, text = text, score = h.score,
                        line = h.line, truncated = truncated }
    end
  end
  return out
end

-- A file name for people: relative to the engine home when inside it.
local function display(file)
  local base = home.path("") .. "/"
  if file:sub(1, #base) == base then return file:sub(#base + 1) end
  return file
end
retrieve.display_path = display

--- Prompt text for passages: a header line, then each passage as
--- "[n] title (file)" followed by its text. Empty string for no passages.
---@param passages table[] as returned by retrieve.passages
---@param opts? {header?: string}
---@return string
function retrieve.format(passages, opts)
  if type(passages) ~= "table" then error("retrieve.format: passages must be a list", 2) end
  if #passages == 0 then return "" end
  opts = opts or {}
  local parts = { opts.header or "Reference notes retrieved from the knowledge base (use what applies):" }
  for i, p in ipairs(passages) do
    parts[#parts + 1] = string.format("\n[%d] %s (%s)\n%s", i, p.title, display(p.file), p.text)
  end
  return table.concat(parts, "\n") .. "\n"
end

--- What to record with a node about the passages a prompt used.
---@param passages table[]
---@return table[] refs { {file, title, line, score}, ... }
function retrieve.refs(passages)
  local out = {}
  for i, p in ipairs(passages or {}) do
    out[i] = { file = display(p.file), title = p.title, line = p.line, score = p.score }
  end
  return out
end

-- ---- learning ---------------------------------------------------------------

local function one_line(s, max)
  s = tostring(s):gsub("[\r\n\t]+", " "):gsub("%s+", " "):gsub("^ ", ""):gsub(" $", "")
  if max and #s > max then
    s = s:sub(1, max)
    while #s > 0 and s:byte(#s) & 0xC0 == 0x80 do s = s:sub(1, -2) end
    s = s:sub(1, -2) .. "…"
  end
  return s
end

local function slug(s) return util.slug(s, "task") end

-- A fence longer than any backtick run in text, so '#' lines and ``` in
-- compiler output stay inside it.
local function fenced(text)
  local longest = 2
  for run in text:gmatch("`+") do longest = math.max(longest, #run) end
  local f = string.rep("`", longest + 1)
  return f .. "text\n" .. text:gsub("\n+$", "") .. "\n" .. f
end

local function entry_markdown(e)
  local status = e.status and one_line(e.status, 40) or "result"
  local lines = {
    string.format("## %s: %s", status, one_line(e.plan_summary, 100)),
    "",
    string.format("- task: %s (target %s)", one_line(e.task, 200), one_line(e.target or "unknown", 40)),
    "- plan: " .. one_line(e.plan_summary, 2000),
    "- status: " .. status,
  }
  local effect = e.effect and tostring(e.effect) or nil
  if effect and effect:find("\n") then
    if #effect > 1500 then effect = effect:sub(1, 1500) .. "\n[...]" end
    lines[#lines + 1] = "- effect:"
    lines[#lines + 1] = ""
    lines[#lines + 1] = fenced(effect)
  elseif effect then
    lines[#lines + 1] = "- effect: " .. one_line(effect, 1500)
  end
  if e.speedup then lines[#lines + 1] = string.format("- speedup: %.3gx", tonumber(e.speedup) or 0) end
  if (e.occurrences or 1) > 1 then lines[#lines + 1] = string.format("- occurrences: %d", e.occurrences) end
  if e.run then lines[#lines + 1] = "- run: " .. one_line(e.run, 300) end
  lines[#lines + 1] = "- recorded: " .. os.date("!%Y-%m-%dT%H:%M:%SZ")
  return table.concat(lines, "\n") .. "\n\n"
end

-- Append entries to <dir>/<target>--<task>.md files; the list of files or
-- nil, err.
local function write_entries(dir, entries)
  local ok, err = fs.mkdirs(dir)
  if not ok then return nil, err end
  -- identical entries of one call (several nodes with the same plan and
  -- outcome) become one section with a count
  local merged, by_key = {}, {}
  for _, e in ipairs(entries) do
    local key = table.concat({ tostring(e.target), e.task, e.plan_summary, tostring(e.status), tostring(e.effect),
      tostring(e.speedup), tostring(e.run) }, "\0")
    if by_key[key] then
      by_key[key].occurrences = by_key[key].occurrences + 1
    else
      by_key[key] = setmetatable({ occurrences = 1 }, { __index = e })
      merged[#merged + 1] = by_key[key]
    end
  end
  local by_file, order = {}, {}
  for _, e in ipairs(merged) do
    local path = string.format("%s/%s--%s.md", dir, slug(e.target or "unknown"), slug(e.task))
    if not by_file[path] then
      order[#order + 1] = path
      by_file[path] = {}
      if not fs.exists(path) then
        by_file[path][1] = string.format("# Learned: %s (target %s)\n\n", one_line(e.task, 200),
          one_line(e.target or "unknown", 40))
      end
    end
    table.insert(by_file[path], entry_markdown(e))
  end
  for _, path in ipairs(order) do
    ok, err = fs.append(path, table.concat(by_file[path]), true)
    if not ok then return nil, err end
  end
  return order
end

--- Append what a run learned as markdown chunks the index picks up on its
--- next use: one file per (target, task) under the learn directory, one
--- "## status: plan" section per entry.
---@param entries table|table[] one entry or a list; entry = {task, target, plan_summary, effect, status, speedup?, run?}
---@param opts? {dir?: string}
---@return string[]|nil files the files appended to
---@return table|nil err {kind = "io", message}
function retrieve.learn(entries, opts)
  if type(entries) ~= "table" then error("retrieve.learn: entries must be a table", 2) end
  if entries.task ~= nil or entries.plan_summary ~= nil then entries = { entries } end
  opts = opts or {}
  for i, e in ipairs(entries) do
    if type(e) ~= "table" then error(string.format("retrieve.learn: entry %d must be a table", i), 2) end
    for _, f in ipairs { "task", "plan_summary" } do
      if type(e[f]) ~= "string" or not e[f]:find("%S") then
        error(string.format("retrieve.learn: entry %d needs a non-empty string %s", i, f), 2)
      end
    end
  end
  local dir = opts.dir or retrieve.learn_dir()
  local files, err = write_entries(dir, entries)
  if not files and not opts.dir and not config.learn_dir and retrieve.user_learn_dir() then
    -- an installed engine's kb/ is usually read-only: keep the knowledge anyway
    local err2
    files, err2 = write_entries(retrieve.user_learn_dir(), entries)
    if not files then
      err = { kind = err.kind, message = err.message .. "; also " .. err2.message }
    end
  end
  if not files then return nil, err end
  return files
end

return retrieve
