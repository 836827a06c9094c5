--- targets/c/suite.lua: a frozen suite's cases: its record (frozen.json),
--- the cases of each group (search, heldout, bench: ids, sizes, seeds) and
--- a case's lines in mkc-run's plan (where each argument's data comes from
--- and goes to).
local need = ...
local fs = require("mk.fs")
local cjson = require("cjson.safe")
local task_mod = need "task"
local SHORT, dims_of, scalar_value, size_label = task_mod.SHORT, task_mod.dims_of, task_mod.scalar_value, task_mod.size_label

local S = {}

--- The suite's record in tests_dir/frozen.json, or nil when not frozen.
function S.read_meta(tests_dir)
  local s = fs.read(tests_dir .. "/frozen.json")
  return s and cjson.decode(s)
end

--- The cases of `group` ("search", "heldout", "bench"; the bench's sets
--- from the suite's record `meta`).
function S.case_list(task, group, meta)
  local cases = {}
  local function add(id, sizes, seed, set)
    cases[#cases + 1] = { id = id, sizes = sizes, seed = seed, group = group, set = set }
  end
  if group == "search" then
    for _, s in ipairs(task.test_sizes) do
      for _, seed in ipairs(task.seeds) do add("search_" .. size_label(task, s) .. "_s" .. seed, s, seed) end
    end
  elseif group == "heldout" then
    for _, s in ipairs(task.heldout_sizes) do
      for _, seed in ipairs(task.heldout_seeds) do add("heldout_" .. size_label(task, s) .. "_s" .. seed, s, seed) end
    end
  elseif group == "bench" then
    local sizes = (meta and meta.bench_sizes) or task.sizes
    for j = 1, (meta and meta.sets or 2) do
      add("bench_" .. size_label(task, sizes) .. "_set" .. j, sizes, task.bench_seed + j - 1, j)
    end
  end
  return cases
end

-- Plan lines for one case. `inputs`: "gen" (with save under tests_dir) or
-- "file" (frozen inputs).
function S.case_plan(task, c, tests_dir, inputs, save_outputs)
  local lines = { "case " .. c.id }
  for _, a in ipairs(task.args) do
    if a.kind == "int" then
      lines[#lines + 1] = string.format("arg int %s %d", a.name, math.tointeger(scalar_value(a, c.sizes)))
    elseif a.kind == "float" then
      lines[#lines + 1] = string.format("arg float %s %.9g", a.name, scalar_value(a, c.sizes))
    else
      local n = dims_of(a, c.sizes)
      local head = string.format("arg %s %s %s %d", a.kind, a.name, SHORT[a.dtype], math.tointeger(n))
      local inrel = "inputs/" .. c.id .. "/" .. a.name .. ".bin"
      if a.kind == "out" then
        if save_outputs then head = head .. " save " .. tests_dir .. "/expected/" .. c.id .. "/" .. a.name .. ".bin" end
      elseif inputs == "fresh" then
        head = head .. string.format(" gen %d %s %.17g %.17g", c.seed, a.init[1], a.init[2], a.init[3])
      elseif inputs == "gen" then
        head = head .. string.format(" gen %d %s %.17g %.17g save %s/%s", c.seed, a.init[1], a.init[2], a.init[3],
          tests_dir, inrel)
      else
        head = head .. " file " .. tests_dir .. "/" .. inrel
      end
      if a.kind == "inout" and save_outputs then
        head = head .. " save " .. tests_dir .. "/expected/" .. c.id .. "/" .. a.name .. ".bin"
      end
      lines[#lines + 1] = head
    end
  end
  lines[#lines + 1] = "end"
  return table.concat(lines, "\n")
end

return S
