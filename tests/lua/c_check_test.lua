-- The C target's checker (mkc-check) run as a program on hand-made frozen
-- files: its JSON stays whole whatever the length of names and shapes (the
-- message was once built with `n += snprintf` into a fixed buffer, which ran
-- past its end once a long name had truncated it); names with quotes,
-- backslashes and control bytes come back as they went in (the one JSON
-- escaper, targets/c/common.c); the failure message names the first and the
-- worst element by coordinates; a modified output is reported as tampered.
local t = dofile("tests/lua/lib/t.lua")
local fs = require "mk.fs"
local proc = require "mk.proc"
local cjson = require "cjson"
local hash = require "mk.hash"
local c = require("mk.eval.targets").get("c")

local CHECK = c.binaries().check

-- mkc_hash64 (targets/c/common.c) in Lua's wrapping 64-bit integers: the
-- hash the runner reports for each output it writes.
local M = 0x9e3779b97f4a7c15
local function mix(x, w)
  x = (x ~ w) * M
  return x ~ (x >> 29)
end
local function hash64(data)
  local n = #data
  local a, b, cc, d = 1, 2, 3, 4 ~ n
  local i = 1
  while i + 31 <= n do
    local w0, w1, w2, w3 = string.unpack("<i8i8i8i8", data, i)
    a, b, cc, d = mix(a, w0), mix(b, w1), mix(cc, w2), mix(d, w3)
    i = i + 32
  end
  for k = i, n do a = mix(a, data:byte(k)) end
  local h = a ~ (b * 3) ~ (cc * 5) ~ (d * 7)
  h = h ~ (h >> 31)
  h = h * M
  return string.format("%016x", h ~ (h >> 33))
end

local function f32s(values)
  local parts = {}
  for i, v in ipairs(values) do parts[i] = string.pack("<f", v) end
  return table.concat(parts)
end

-- A frozen expected file and its manifest, an output blob; returns the
-- plan's head (manifest, root, blob lines) and the blob's hash.
local function setup(dir, expected, got)
  fs.mkdirs(dir)
  fs.write(dir .. "/exp.bin", f32s(expected))
  local manifest = dir .. "/manifest.sha256"
  fs.write(manifest, hash.sha256_file(dir .. "/exp.bin") .. "  exp.bin\n")
  fs.write(dir .. "/blob.bin", f32s(got))
  local head = table.concat({ "manifest " .. manifest .. " " .. hash.sha256_file(manifest), "root " .. dir,
    "blob " .. dir .. "/blob.bin" }, "\n")
  return head, hash64(f32s(got))
end

local function check(plan)
  local r = assert(proc.run { argv = { CHECK }, stdin = plan, timeout = 60 })
  local ok, j = pcall(cjson.decode, r.stdout)
  t.ok(ok, "mkc-check printed JSON (status " .. r.status .. ", code " .. tostring(r.code) .. "): " .. r.stdout:sub(1, 300))
  return r, j
end

local function cmp_line(cas, name, count, h, shape)
  return table.concat({ "cmp", cas, name, "f32", count, 0, h, "exp.bin", "1e-4", "1e-4", shape }, " ")
end

t.test("c_check/a name and shape far past any fixed buffer give the whole message", function()
  local dir = t.tmpdir("c-check") .. "/long"
  local head, h = setup(dir, { 1, 2, 3, 4 }, { 1, 9, 3, 8 })
  local name, shape = ("n"):rep(5000), "2x" .. ("2"):rep(3000)
  local r, j = check(head .. "\n" .. cmp_line("case1", name, 4, h, shape) .. "\n")
  t.eq(r.code, 0, r.stderr)
  t.eq(j.ok, true)
  local x = j.results[1]
  t.eq(x.name, name)
  t.eq(x.ok, false)
  t.eq(x.bad, 2)
  t.contains(x.message, "case case1, output '" .. name .. "' (shape " .. shape .. "): 2 of 4 elements wrong")
  t.matches(x.message, "; max |error| 7, tolerance 0.0001 %+ 0.0001%*|expected| %(outputs' rms 2.74%)$")
end)

t.test("c_check/names with quotes, backslashes and control bytes round-trip through the JSON", function()
  local dir = t.tmpdir("c-check") .. "/esc"
  local head, h = setup(dir, { 1, 2 }, { 1, 2 })
  local cas, name = 'a"b\\c', 'x\1y"\\z\127'
  local r, j = check(head .. "\n" .. cmp_line(cas, name, 2, h) .. "\n")
  t.eq(r.code, 0, r.stderr)
  t.eq(j.results[1].case, cas)
  t.eq(j.results[1].name, name)
  t.eq(j.results[1].ok, true)
  t.eq(j.results[1].message, "")
  -- the error object goes through the same escaper
  local r2, j2 = check('bad"directive\\ x\n')
  t.eq(r2.code, 1)
  t.eq(j2.ok, false)
  t.eq(j2.error, 'bad checker line 1: bad"directive\\')
end)

t.test("c_check/a wrong output names its first and worst elements by coordinates", function()
  local dir = t.tmpdir("c-check") .. "/coords"
  local want = {}
  for i = 1, 15 do want[i] = i end
  local got = {}
  for i = 1, 15 do got[i] = want[i] end
  got[2] = 2.5 -- flat 1: [0, 1]
  got[8] = 100 -- flat 7: [1, 2], the worst
  local head, h = setup(dir, want, got)
  local r, j = check(head .. "\n" .. cmp_line("c", "out", 15, h, "3x5") .. "\n")
  t.eq(r.code, 0, r.stderr)
  local m = j.results[1].message
  t.contains(m, "case c, output 'out' (shape 3x5): 2 of 15 elements wrong")
  t.contains(m, "; first at [0, 1]: got 2.5, expected 2")
  t.contains(m, "; worst at [1, 2]: got 100, expected 8")
  t.near(j.results[1].max_err, 92, 1e-9)
end)

t.test("c_check/an output changed after the runner hashed it is tampered, not wrong", function()
  local dir = t.tmpdir("c-check") .. "/tamper"
  local head = setup(dir, { 1, 2 }, { 1, 2 })
  local r, j = check(head .. "\n" .. cmp_line("c", "out", 2, hash64(f32s({ 1, 3 }))) .. "\n")
  t.eq(r.code, 0, r.stderr)
  local x = j.results[1]
  t.eq(x.tampered, true)
  t.eq(x.ok, false)
  t.eq(x.bad, nil)
  t.eq(x.message, "the output file for 'out' of case c was modified after the runner wrote it")
end)

return t.run()
