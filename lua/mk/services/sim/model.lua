--- mk.services.sim.model: the rules of the simulated model, as pure
--- functions of a task's parameters (mk.services.sim.task), a seeded
--- generator and what the prompt showed. mk.services.llm.providers.sim
--- reads the prompts and writes the replies; this module decides what the
--- reply holds:
---
---   fresh      a kernel drawn from the task's prior (zero-shot, or a plan
---              with no kernel to start from)
---   plan       which optimisation to try next: the beam's direction, the
---              bottleneck the profile named, or the model's own idea
---   implement  the parent's state with the planned optimisation applied,
---              which may break it (odds grow with the change's complexity
---              and with how optimised the parent already is)
---   fix        the error shown repaired, or not, or another one
---   tune       the block size declared as a tunable
---   hint       the bottleneck a profile names (the device's side)
--- docs/simulator.md states every rule with its parameter.
local kernel = require("mk.services.sim.kernel")
local simtask = require("mk.services.sim.task")

local M = {}

local function hex(r) return string.format("%08x", r:next() & 0xffffffff) end

-- The kernel's length in tokens: the task's size, +-15 %.
local function size_of(p, r) return math.max(200, math.floor(p.size * math.exp(0.15 * simtask.normal(r)) + 0.5)) end

local function add_defect(st, class, r)
  st.defects[#st.defects + 1] = r:pick(kernel.CLASSES[class])
end

--- A kernel drawn from the task's prior: each useful optimisation with
--- probability prior_opt (botched with probability botch); a compile error
--- (sometimes two) with probability 1 - compile; a wrong result with
--- probability 1 - correct; a crash and a held-out-only bug now and then.
---@param p table task parameters
---@param r table generator (mk.services.rng)
function M.fresh(p, r)
  local st = { task = p.name, draw = hex(r), size = size_of(p, r), opts = {}, defects = {}, tunables = {},
    block = r:pick { 128, 256, 512 } }
  for _, name in ipairs(p.useful) do
    if r:float() < p.prior_opt then st.opts[#st.opts + 1] = { name = name, botched = r:float() < p.botch } end
  end
  if r:float() >= p.compile then
    add_defect(st, "compile", r)
    if r:float() < 0.4 then add_defect(st, "compile", r) end
  end
  if r:float() >= p.correct then add_defect(st, "incorrect", r) end
  if r:float() < p.crash then add_defect(st, "crash", r) end
  if r:float() < p.heldout then add_defect(st, "heldout", r) end
  return st
end

-- Whether a plan of `name` failed before ({opt, ok} list of tried plans).
local function failed_before(tried, name)
  for _, t in ipairs(tried or {}) do
    if t.opt == name and not t.ok then return true end
  end
  return false
end

-- The model's own idea: with probability insight a useful optimisation the
-- kernel lacks, else any optimisation of the catalogue.
local function own_idea(p, r, st)
  local lacking = st and simtask.missing(p, st) or p.useful
  if #lacking > 0 and r:float() < p.insight then return r:pick(lacking), "insight" end
  return r:pick(kernel.OPTS).name, "guess"
end

--- Which optimisation a plan proposes. `a`: {parent = state|nil, hint =
--- name|nil (the profile's bottleneck), direction = name|nil, tried =
--- {{opt, ok}}}. Returns the name and why ("direction", "hint",
--- "insight", "guess"). A plan that failed before is avoided, most times.
function M.plan(p, r, a)
  if a.direction and kernel.OPT[a.direction] and r:float() < p.direction then return a.direction, "direction" end
  if a.hint and kernel.OPT[a.hint] and r:float() < p.hint then return a.hint, "hint" end
  local name, why = own_idea(p, r, a.parent)
  if failed_before(a.tried, name) and r:float() < 0.7 then name, why = own_idea(p, r, a.parent) end
  return name, why
end

-- Apply one optimisation to a state (in place): a new one is botched with
-- probability botch; a botched one is redone; a clean one stays.
local function apply(p, r, st, name)
  local o = kernel.applied(st, name)
  if not o then
    st.opts[#st.opts + 1] = { name = name, botched = r:float() < p.botch }
  elseif o.botched then
    o.botched = r:float() < p.botch
  end
end

-- The risks of a change of complexity cx to a kernel of quality q.
local function risk(p, r, st, cx, q)
  local scale = cx * (1 + 0.5 * math.max(0, q))
  if r:float() < math.min(0.95, p.break_compile * scale) then add_defect(st, "compile", r) end
  if r:float() < math.min(0.95, p.break_correct * scale) then add_defect(st, "incorrect", r) end
  if r:float() < math.min(0.95, p.crash * cx) then add_defect(st, "crash", r) end
  if r:float() < p.heldout then add_defect(st, "heldout", r) end
end

--- The implementer's kernel. `a`: {opt = name|nil (the plan's), parent =
--- state|nil (the kernel to start from), second = state|nil (crossover)}.
--- Without a parent the kernel is drawn fresh (and the plan's optimisation
--- applied to it); with one it is the parent changed, at the risk of the
--- change (complexity of the optimisation, 2 for a crossover); a defect
--- the parent's status shows (all but a held-out-only one) is mended with
--- probability fix.
function M.implement(p, r, a)
  local st
  if not a.parent then
    st = M.fresh(p, r)
    if a.opt and kernel.OPT[a.opt] then apply(p, r, st, a.opt) end
    return st
  end
  st = kernel.copy(a.parent)
  st.task, st.draw, st.size, st.reference = p.name, hex(r), size_of(p, r), nil
  -- the prompt shows the parent's status: a defect it reports is mended with probability fix
  for i = #st.defects, 1, -1 do
    if kernel.DEFECTS[st.defects[i]].class ~= "heldout" and r:float() < p.fix then table.remove(st.defects, i) end
  end
  if st.block == nil then st.block = r:pick { 128, 256, 512 } end
  local q, cx = simtask.quality(p, st), 1
  if a.second then
    for _, o in ipairs(a.second.opts) do
      if not kernel.applied(st, o.name) and r:float() < 0.7 then st.opts[#st.opts + 1] = { name = o.name, botched = o.botched } end
    end
    cx = 2
  end
  if a.opt and kernel.OPT[a.opt] then
    apply(p, r, st, a.opt)
    cx = math.max(cx, kernel.OPT[a.opt].cx)
  end
  risk(p, r, st, cx, q)
  return st
end

--- The defect an error text reports (the device's message for it), or nil.
function M.defect_in(text)
  if type(text) ~= "string" then return nil end
  local names = {}
  for name in pairs(kernel.DEFECTS) do names[#names + 1] = name end
  table.sort(names)
  for _, name in ipairs(names) do
    if text:find(kernel.DEFECTS[name].msg:sub(1, 40), 1, true) then return name end
  end
  return nil
end

--- The fixer's kernel and its "Changed:" line. `a`: {error = text,
--- change_approach = bool}. The defect the error names is repaired with
--- probability fix (+0.25 when told to change approach, which also drops
--- the newest optimisation half the time); an unrepaired one turns into
--- another compile error 30 % of the time; a fix adds a compile error with
--- probability fix_new.
function M.fix(p, r, st, a)
  st = kernel.copy(st)
  st.draw, st.size = hex(r), size_of(p, r)
  local shown = M.defect_in(a.error)
  if not shown then shown = kernel.of_class(st, "compile")[1] or kernel.of_class(st, "crash")[1] end
  local chance = p.fix + (a.change_approach and 0.25 or 0)
  local changed
  if a.change_approach and #st.opts > 0 and r:float() < 0.5 then
    local dropped = table.remove(st.opts)
    changed = "rewrote the kernel without " .. dropped.name .. ", a simpler construct"
  end
  if shown and r:float() < math.min(0.98, chance) then
    kernel.remove_defect(st, shown)
    changed = changed or ("repaired the " .. shown .. " error the device reported")
  elseif shown and kernel.DEFECTS[shown].class == "compile" and r:float() < 0.3 then
    kernel.remove_defect(st, shown)
    add_defect(st, "compile", r)
    changed = changed or ("reworked the part the " .. shown .. " error pointed at")
  else
    changed = changed or ("tried to repair the " .. tostring(shown or "reported") .. " error")
  end
  if r:float() < p.fix_new then add_defect(st, "compile", r) end
  return st, changed
end

--- The tuner's kernel: the block size declared as a tunable over four
--- consecutive sizes, which include the task's best with probability
--- tune_good.
function M.tune(p, r, st)
  st = kernel.copy(st)
  st.draw = hex(r)
  local B, best_i = kernel.BLOCKS, 3
  for i, b in ipairs(B) do if b == p.tune.best then best_i = i end end
  local first
  if r:float() < p.tune_good then
    first = math.max(1, math.min(#B - 3, best_i - r:int(0, 3)))
  else -- four sizes that miss the best one where the list allows
    first = best_i > 4 and 1 or math.min(#B - 3, best_i + 1)
  end
  local values = {}
  for i = first, first + 3 do values[#values + 1] = B[i] end
  st.tunables = { { name = "block", values = values } }
  st.block = st.block or values[1]
  return st
end

--- The bottleneck a device profile names for a state: the heaviest useful
--- optimisation it lacks with probability profile_truth, else another one
--- it lacks; nil when it lacks none.
function M.hint(p, r, st)
  local lacking = simtask.missing(p, st)
  if #lacking == 0 then return nil end
  if r:float() < p.profile_truth then return lacking[1] end
  return r:pick(lacking)
end

--- What the profile agent passes on from a profile naming `hint`: the same
--- with probability profile_read, else one of the task's useful
--- optimisations at random.
function M.read_profile(p, r, hint)
  if hint and r:float() < p.profile_read then return hint end
  return r:pick(p.useful)
end

return M
