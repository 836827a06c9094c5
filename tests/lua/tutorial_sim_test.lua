-- docs/tutorial-sim.md runs as written: every ```sh block of the page, in
-- order, in a scratch directory where `build` and `examples` are the
-- engine's (so the page's relative paths work and its runs/ land in the
-- scratch directory); then `compare` must print the verdict the page
-- quotes, and the benches must say they are a simulation. ```shell blocks
-- (the real-model commands) are not run.
local t = dofile("tests/lua/lib/t.lua")
local fs = require "mk.fs"
local home = require "mk.home"
local proc = require "mk.proc"

local DOC = home.path("docs/tutorial-sim.md")
local tmp = t.tmpdir("mk-tutorial-sim-")

local function blocks(text, lang)
  local out = {}
  for info, body in text:gmatch("```(%w*)\n(.-)\n```") do
    if info == lang then out[#out + 1] = body end
  end
  return out
end

t.test("the tutorial's sh blocks run and compare prints the verdict the page quotes", function()
  local doc = assert(fs.read(DOC))
  local sh = blocks(doc, "sh")
  t.ok(#sh >= 3, "the page has its run, bench and compare blocks")
  t.eq(#blocks(doc, "shell"), 1, "the real-model commands are a shell block, not run here")
  -- ~125,000 small files (two benches' git objects): on a RAM file system when there is one
  local dir = tmp
  if fs.isdir("/dev/shm") then
    local m = assert(proc.run { argv = { "mktemp", "-d", "/dev/shm/mk-tutorial-sim-XXXXXX" } })
    if m.code == 0 then dir = m.stdout:gsub("%s+$", "") end
  end
  local _ <close> = setmetatable({}, { __close = function() if dir ~= tmp then fs.rm_rf(dir) end end })
  local build = fs.realpath(os.getenv("MKENGINE_BUILD") or home.path("build"))
  for link, to in pairs { build = build, examples = home.path("examples") } do
    t.eq(assert(proc.run { argv = { "ln", "-s", to, dir .. "/" .. link } }).code, 0)
  end
  assert(fs.mkdirs(dir .. "/runs"))
  for i, body in ipairs(sh) do
    local r = assert(proc.run { argv = { "sh", "-ec", body }, cwd = dir, timeout = 1200, env = { TMPDIR = dir } })
    t.eq(r.code, 0, "block " .. i .. " failed:\n" .. body .. "\n" .. r.stdout .. r.stderr)
  end
  local out = assert(fs.read(dir .. "/runs/tut-compare.txt"))
  local printed = {}
  for line in out:gmatch("[^\n]+") do printed[(line:gsub("%s+$", ""))] = true end
  local quoted = blocks(doc, "text")[1]
  t.ok(quoted and quoted:find("\nverdict: "), "the page quotes compare's output, verdict included")
  for line in quoted:gmatch("[^\n]+") do
    t.ok(printed[(line:gsub("%s+$", ""))], "compare prints the line the page quotes: " .. line)
  end
  t.contains(out, "SIMULATION: simulated model and device")
  for _, b in ipairs { "tut-parallel", "tut-ucb" } do
    t.contains(assert(fs.read(dir .. "/runs/" .. b .. ".txt")), "SIMULATION: simulated model and device")
  end
end)

return t.run()
