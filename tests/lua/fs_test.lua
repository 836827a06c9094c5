-- mk.fs locks: exclusive between holders, released by :unlock() and by the
-- end of a `<close>` scope, an error leaving the scope included.
local t = dofile("tests/lua/lib/t.lua")
local fs = require "mk.fs"

t.test("a held lock refuses a second holder until :unlock()", function()
  local p = t.tmpdir("mk-fs-test") .. "/a.lock"
  local a = assert(fs.lock(p))
  local b, err = fs.lock(p)
  t.eq(b, nil); t.eq(err.kind, "locked")
  a:unlock()
  assert(fs.lock(p)):unlock()
end)

t.test("a <close> lock is released when an error leaves its scope", function()
  local p = t.tmpdir("mk-fs-test") .. "/b.lock"
  local ok, err = pcall(function()
    local lk <close> = assert(fs.lock(p)) -- luacheck: ignore 211
    t.eq(select(2, fs.lock(p)).kind, "locked", "held inside the scope")
    error("boom", 0)
  end)
  t.eq(ok, false); t.eq(err, "boom")
  local again = fs.lock(p) -- no collection ran: only __close can have released it
  t.ok(again, "the lock is free once the scope is left")
  again:unlock()
  do
    local lk <close> = assert(fs.lock(p))
    t.ok(lk)
  end
  assert(fs.lock(p)):unlock()
end)

return t.run()
