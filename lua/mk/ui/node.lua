--- mk.ui.node: one node of a run as the viewer's node panel shows it: plan,
--- code, diff against its first parent, compile and test messages,
--- metrics (with their spread), profile, tokens and cost, and the prompts
--- when the run kept them. Read from its git commit and its record (the
--- node's index line, or the engine's graph when the viewer runs inside
--- the engine: mk.ui.runs); nothing is written.
local git = require "mk.git"
local runs = require "mk.ui.runs"

local M = {}

M.MAX_TEXT = 256 * 1024 -- longer texts are cut (with a note) before they are sent

local function cut(s)
  if type(s) ~= "string" or #s <= M.MAX_TEXT then return s end
  return s:sub(1, M.MAX_TEXT) .. string.format("\n… (%d more bytes not shown)", #s - M.MAX_TEXT)
end

-- The prompts and replies kept with the node (meta.transcript), as
-- {agent, prompt, reply} for people.
local function prompts_of(meta)
  local out = {}
  local tr = type(meta.transcript) == "table" and meta.transcript or {}
  for i, x in ipairs(tr) do
    if type(x) == "table" then
      out[#out + 1] = { n = i, agent = x.agent, prompt = cut(x.prompt), reply = cut(x.reply or x.response) }
    end
  end
  return out
end

local function read_files(repo, oid, names)
  local files = {}
  for _, f in ipairs(names) do
    files[#files + 1] = { name = f, text = cut(repo:read(oid, f)) }
  end
  return files
end

--- Details of node `id` of the watched run `w`, or nil, message.
---@param w mk.ui.Watch
---@param id string
function M.details(w, id)
  local n = w.by_id[id]
  if not n then return nil, "no node " .. tostring(id) .. " in this run" end
  local repo, err = git.open(w.dir .. "/graph.git")
  if not repo then return nil, err.message end
  local oid, t = w:oid(n), w:record(n)
  local meta = type(t.meta) == "table" and t.meta or {}
  local d = runs.public_node(n, w.pool)
  d.metrics = runs.redact(t.metrics or {})
  -- the kernel's figure (all its measurements), not the one this node's commit was made with
  local f = w.pool and w.pool:of(n.id)
  if f then
    for _, k in ipairs({ "latency_s", "speedup", "measurements", "samples", "latency_min_s", "latency_max_s" }) do
      d.metrics[k] = f[k]
    end
  end
  d.cost = runs.redact(t.cost or {})
  d.time = t.time
  d.plan = cut(repo:read(oid, "plan.md"))
  d.error = cut(repo:read(oid, "error.txt"))
  d.files = read_files(repo, oid, type(t.files) == "table" and t.files or {})
  d.profile = cut(type(meta.profile) == "string" and meta.profile or nil)
  d.direction = meta.direction
  d.knowledge = meta.knowledge
  d.prompts = prompts_of(meta)
  local parent = n.parents and w.by_id[n.parents[1]]
  if parent then
    local patch, stat = repo:diff(w:oid(parent), oid)
    d.diff = { parent = parent.id, patch = cut(patch or ""),
      insertions = type(stat) == "table" and stat.insertions or nil,
      deletions = type(stat) == "table" and stat.deletions or nil }
  end
  local other = {}
  for k, v in pairs(meta) do
    if k ~= "transcript" and k ~= "profile" and k ~= "knowledge" and k ~= "direction" then other[k] = v end
  end
  d.meta = runs.redact(other)
  repo:close()
  return d
end

return M
