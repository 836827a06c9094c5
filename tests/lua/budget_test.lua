-- mk.search.budget: parsing --budget, what is left, when it is exhausted.
local t = dofile("tests/lua/lib/t.lua")
local budget = require "mk.search.budget"

t.test("parse reads every limit with k/M suffixes and time units", function()
  local b = assert(budget.parse("tokens=500k,usd=2.5,device_s=10m,wall_s=1h"))
  t.eq(b.tokens, 500000)
  t.eq(math.type(b.tokens), "integer")
  t.eq(b.usd, 2.5)
  t.eq(b.device_s, 600)
  t.eq(b.wall_s, 3600)
  t.same(assert(budget.parse("tokens=2e6")), { tokens = 2000000 })
end)

t.test("parse rejects unknown names, bad numbers and empty text", function()
  local _, e1 = budget.parse("coins=3")
  t.eq(e1.kind, "bad_budget")
  t.contains(e1.message, "unknown budget 'coins'")
  local _, e2 = budget.parse("usd=lots")
  t.contains(e2.message, "usd needs a number")
  local _, e3 = budget.parse("usd=-1")
  t.eq(e3.kind, "bad_budget")
  local _, e4 = budget.parse("")
  t.eq(e4.kind, "bad_budget")
  local _, e5 = budget.parse("tokens")
  t.contains(e5.message, "NAME=VALUE")
end)

t.test("left and exhausted follow charges and the clock", function()
  local now = 0
  local b = budget.new({ tokens = 1000, usd = 1, wall_s = 60 }, { clock = function() return now end })
  t.eq(b:exhausted(), false)
  b:charge { input_tokens = 600, output_tokens = 100, usd = 0.25 }
  local l = b:left()
  t.eq(l.tokens, 300)
  t.eq(l.usd, 0.75)
  t.eq(l.device_s, math.huge)
  t.eq(l.wall_s, 60)
  now = 30
  t.eq(b:left().wall_s, 30)
  t.near(b:fraction(), 0.7, 1e-12)
  b:charge { tokens = 300 }
  local ex, why = b:exhausted()
  t.eq(ex, true)
  t.eq(why, "tokens: 1000 of 1000 used")
  t.eq(b:left().tokens, 0)
end)

t.test("wall time alone exhausts a budget", function()
  local now = 0
  local b = budget.new("wall_s=10", { clock = function() return now end })
  now = 10
  local ex, why = b:exhausted()
  t.eq(ex, true)
  t.contains(why, "wall_s")
end)

t.test("observe reads llm and device events; set_used replaces totals; carried-over use counts", function()
  local b = budget.new({ device_s = 10 }, { clock = function() return 0 end, used = { device_s = 4, tokens = 5 } })
  b:observe { type = "llm", usage = { input_tokens = 10, output_tokens = 5 }, usd = 0.5 }
  b:observe { type = "evaluation", device_s = 3 }
  local u = b:used()
  t.eq(u.tokens, 20)
  t.eq(u.usd, 0.5)
  t.eq(u.device_s, 7)
  b:set_used { input_tokens = 100, output_tokens = 1, device_s = 10 }
  t.eq(b:used().tokens, 101)
  t.eq(b:exhausted(), true)
end)

t.test("an unlimited budget is never exhausted; bad limits raise", function()
  local b = budget.new(nil)
  b:charge { tokens = 1e12 }
  t.eq(b:exhausted(), false)
  t.eq(b:limited(), false)
  t.raises(function() budget.new({ gold = 1 }) end, "unknown limit")
  t.raises(function() budget.new({ usd = -1 }) end, "usd")
  t.raises(function() budget.new("usd=x") end, "budget.new")
end)

return t.run()
