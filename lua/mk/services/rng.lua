--- mk.services.rng: small deterministic random generators (splitmix64), seeded from
--- numbers or strings. Strategies derive one per step from the run seed and
--- the step key, so a resumed run makes the same choices as the original.
local rng = {}
rng.__index = rng

--- 64-bit FNV-1a of a string, as a Lua integer.
---@param s string
function rng.hash(s)
  local h = -3750763034362895579 -- 14695981039346656037 as a signed 64-bit integer
  for i = 1, #s do
    h = h ~ s:byte(i)
    h = h * 1099511628211
  end
  return h
end

--- New generator; seed may be an integer or a string, or several values
--- that are combined (rng.new(run_seed, "node3/beam/b2")).
function rng.new(...)
  local parts = table.pack(...)
  local s = {}
  for i = 1, parts.n do s[i] = tostring(parts[i]) end
  return setmetatable({ state = rng.hash(table.concat(s, "\0")) }, rng)
end

--- Next 64-bit value (splitmix64).
function rng:next()
  self.state = self.state + -7046029254386353131 -- 0x9E3779B97F4A7C15
  local z = self.state
  z = (z ~ (z >> 30)) * -4658895280553007687   -- 0xBF58476D1CE4E5B9
  z = (z ~ (z >> 27)) * -7723592293110705685   -- 0x94D049BB133111EB
  return z ~ (z >> 31)
end

--- Uniform float in [0, 1).
function rng:float() return (self:next() >> 11) * (1.0 / 9007199254740992.0) end

--- Uniform integer in [lo, hi] (like math.random(lo, hi)).
function rng:int(lo, hi)
  if hi == nil then lo, hi = 1, lo end
  assert(hi >= lo, "rng:int: empty range")
  return lo + math.floor(self:float() * (hi - lo + 1))
end

--- A uniformly chosen element of a non-empty list.
function rng:pick(list)
  assert(#list > 0, "rng:pick: empty list")
  return list[self:int(1, #list)]
end

--- Shuffle a list in place and return it.
function rng:shuffle(list)
  for i = #list, 2, -1 do
    local j = self:int(1, i)
    list[i], list[j] = list[j], list[i]
  end
  return list
end

return rng
