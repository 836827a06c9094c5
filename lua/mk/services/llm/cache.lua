--- mk.services.llm.cache: the response cache behind record and replay. Entries are
--- content-addressed: key = SHA-256 of the canonical JSON of (provider,
--- endpoint, model, request fields that change the answer, sample index),
--- stored as DIR/ab/abcdef....json. The endpoint (base URL without user or
--- password) is part of the key, so another server's answers are never
--- replayed for this one; no header, API key or URL is part of an entry.
local fs = require("mk.fs")
local json = require("mk.services.json")
local hash = require("mk.hash")

local M = { VERSION = 2 } -- 2: the endpoint is part of the key

-- request fields that never change the answer
local SKIP = { stream = true, on_delta = true, meta = true, sample = true, timeout = true }

--- Default directory: $XDG_CACHE_HOME/mkengine/llm or ~/.cache/mkengine/llm.
function M.default_dir()
  local base = os.getenv("XDG_CACHE_HOME")
  if not base or base == "" then base = (os.getenv("HOME") or ".") .. "/.cache" end
  return base .. "/mkengine/llm"
end

--- The canonical description of a request (what the key hashes).
---@param endpoint string|nil where the request goes (client:endpoint())
function M.canonical(provider, model, req, endpoint)
  local r = {}
  for k, v in pairs(req) do
    if not SKIP[k] and type(v) ~= "function" then r[k] = v end
  end
  return json.canonical({ v = M.VERSION, provider = provider, endpoint = endpoint, model = model, request = r })
end

--- Key of the sample-th answer (0-based) to a canonical request.
function M.key(canonical, sample)
  return hash.sha256(canonical .. "\n#sample=" .. tostring(sample))
end

local function path(dir, key) return dir .. "/" .. key:sub(1, 2) .. "/" .. key .. ".json" end

--- The stored entry or nil.
function M.get(dir, key)
  local data = fs.read(path(dir, key))
  if not data then return nil end
  local e = json.decode(data)
  if type(e) ~= "table" or type(e.response) ~= "table" then return nil end
  return e
end

--- Store an entry atomically (a concurrent reader sees all or nothing).
function M.put(dir, key, entry)
  local p = path(dir, key)
  local ok, err = fs.mkdirs(p:match("^(.*)/[^/]*$"))
  if not ok and err then return nil, err end
  return fs.write(p, json.canonical(entry) .. "\n", { atomic = true })
end

return M
