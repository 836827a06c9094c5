-- mk.services.util, the helpers every floor shares: exact values of
-- quoting, slugs, JSON reading (missing, corrupt, nulls), deep copies and
-- durations at the unit boundaries.
local t = dofile("tests/lua/lib/t.lua")
local fs = require "mk.fs"
local proc = require "mk.proc"
local util = require "mk.services.util"

t.test("sh_quote survives a round trip through sh with quotes, spaces and $", function()
  local s = "it's a $HOME `x` \"y\""
  t.eq(util.sh_quote("it's"), "'it'\\''s'")
  local r = assert(proc.run { argv = { "sh", "-c", "printf %s " .. util.sh_quote(s) } })
  t.eq(r.stdout, s)
  t.eq(util.sh_quote(42), "'42'")
end)

t.test("slug keeps letters, digits and _.=- and cuts to max", function()
  t.eq(util.slug("beam width=3 / seed 2"), "beam_width=3_seed_2")
  t.eq(util.slug("../etc"), "etc")
  t.eq(util.slug("///", "run"), "run")
  t.eq(util.slug(("a"):rep(100), nil, 60), ("a"):rep(60))
  t.eq(#util.slug(("b"):rep(100)), 80)
end)

t.test("read_json: value with nulls as nil, nil when missing, corrupt named", function()
  local d = t.tmpdir("mk-util-test")
  fs.write(d .. "/a.json", '{"x": 1, "y": null, "z": {"w": null, "v": [1, 2]}}')
  local v = util.read_json(d .. "/a.json")
  t.eq(v.x, 1); t.eq(v.y, nil); t.eq(v.z.w, nil); t.eq(v.z.v[2], 2)
  local none, err0 = util.read_json(d .. "/missing.json")
  t.eq(none, nil); t.eq(err0, nil)
  fs.write(d .. "/bad.json", "{nope")
  local bad, err = util.read_json(d .. "/bad.json")
  t.eq(bad, nil); t.eq(err.kind, "corrupt"); t.contains(err.message, d .. "/bad.json")
end)

t.test("read_jsonl: each line's value with nulls as nil, a torn last line and non-tables skipped", function()
  local d = t.tmpdir("mk-util-test")
  fs.write(d .. "/e.jsonl", '{"a": 1, "b": null}\n5\n\n[1, null, 3]\n{"a": 2, "b": {"c": nu')
  local rows = util.read_jsonl(d .. "/e.jsonl")
  t.eq(#rows, 2)
  t.eq(rows[1].a, 1); t.eq(rows[1].b, nil)
  t.eq(rows[2][1], 1); t.eq(rows[2][2], nil); t.eq(rows[2][3], 3)
  t.same(util.read_jsonl(d .. "/missing.jsonl"), {})
end)

t.test("error: the fields stay, tostring is the message (after a prefix), raise adds no position", function()
  local e = util.error({ kind = "input", exit = 2, message = "bad task" })
  t.eq(e.kind, "input"); t.eq(e.exit, 2); t.eq(tostring(e), "bad task")
  t.eq(tostring(util.error({ kind = "freeze", message = "no tests" }, "freeze: ")), "freeze: no tests")
  local ok, err = pcall(util.raise, { kind = "run", message = "stopped" })
  t.eq(ok, false); t.eq(err.kind, "run"); t.eq(tostring(err), "stopped")
end)

t.test("files_key: names sorted, name NUL content, joined by \\1", function()
  t.eq(util.files_key({ ["kernel.c"] = "int x;", ["a.h"] = "y" }), "a.h\0y\1kernel.c\0int x;")
  t.eq(util.files_key({}), "")
  t.eq(util.files_key({ b = "1", a = "2" }), util.files_key({ a = "2", b = "1" }))
end)

t.test("copy is deep: changing the copy leaves the original", function()
  local a = { x = { y = { 1, 2 } }, s = "k" }
  local b = util.copy(a)
  b.x.y[1] = 9
  t.eq(a.x.y[1], 1)
  t.same(util.copy(a), a)
  t.eq(util.copy(5), 5)
end)

t.test("fmt_s picks the unit at each boundary", function()
  t.eq(util.fmt_s(12.3e-6), "12.30 us")
  t.eq(util.fmt_s(4.512e-3), "4.512 ms")
  t.eq(util.fmt_s(3.214), "3.21 s")
  t.eq(util.fmt_s(150), "2.5 min")
  t.eq(util.fmt_s(4320), "72.0 min")
  t.eq(util.fmt_s(7200), "2.00 h")
  t.eq(util.fmt_s(nil), "–")
  t.eq(util.fmt_s(0 / 0), "–")
end)

return t.run()
