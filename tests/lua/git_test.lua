-- Behaviour of mk.git as Lua code sees it inside the engine: error tables
-- with kinds, large and binary files, symbolic HEAD, to-be-closed repos,
-- fsync mode, and agreement with the git command line.
local t = dofile("tests/lua/lib/t.lua")
local git = require "mk.git"

local function repo()
  local dir = t.tmpdir("mk-git-test") .. "/g.git"
  return assert(git.init(dir)), dir
end

local sh = t.sh

t.test("a 1 MB binary file round-trips byte for byte", function()
  local r = repo()
  local parts = {}
  for i = 0, 1024 * 1024 - 1 do parts[#parts + 1] = string.char((i * 131 + 7) % 256) end
  local big = table.concat(parts)
  local oid = assert(r:commit{ files = { ["blob.bin"] = big } })
  t.eq(r:read(oid, "blob.bin"), big)
end)

t.test("failures return nil and an error table with kind and libgit2's message", function()
  local r = repo()
  local v, err = r:read("refs/nodes/none", "x")
  t.eq(v, nil); t.eq(type(err), "table"); t.eq(err.kind, "not_found")
  t.contains(err.message, "refs/nodes/none")
  local v2, err2 = r:diff("HEAD", "HEAD")
  t.eq(v2, nil); t.eq(err2.kind, "not_found")
  local v3, err3 = r:set_ref("refs/heads/x", "0123456789012345678901234567890123456789")
  t.eq(v3, nil); t.eq(err3.kind, "not_found")
  local v4, err4 = r:commit{ files = {}, ref = "refs/heads/bad..name" }
  t.eq(v4, nil); t.eq(err4.kind, "invalid"); t.contains(err4.message, "bad..name")
end)

t.test("HEAD of a new repository is refs/heads/best", function()
  local r, dir = repo()
  t.eq(r:ref("HEAD"), nil)
  local oid = r:commit{ files = { a = "1" }, ref = "refs/heads/best" }
  t.eq(r:ref("HEAD"), oid)
  local _, out = sh("git --git-dir " .. dir .. " symbolic-ref HEAD")
  t.eq(out, "refs/heads/best\n")
  t.ok(r:symref("HEAD", "refs/heads/other"))
  t.eq(r:ref("HEAD"), nil)
end)

t.test("git reads what mk.git wrote and mk.git reads what git wrote", function()
  local r, dir = repo()
  local oid = r:commit{ files = { ["k.c"] = "int k;\n" }, message = "n0001 root ok\n", ref = "refs/nodes/n0001" }
  local rc, out = sh("git --git-dir " .. dir .. " cat-file -p nodes/n0001:k.c")
  t.eq(rc, 0); t.eq(out, "int k;\n")
  local _, tree = sh("git --git-dir " .. dir .. " rev-parse " .. oid .. "^{tree}")
  t.eq(r:info(oid).tree, tree:match("%x+"))
  local rc2 = sh("cd " .. dir .. " && git update-ref refs/nodes/n0002 " .. oid)
  t.eq(rc2, 0)
  t.eq(r:ref("refs/nodes/n0002"), oid)
end)

t.test("a repository closes at scope end and refuses use after close", function()
  local dir
  do
    local r <close>, d = repo()
    dir = d
    t.ok(r:path():find("g.git", 1, true))
  end
  local r2 = assert(git.open(dir))
  r2:close()
  r2:close()
  t.raises(function() r2:refs() end, "closed")
  t.contains(tostring(r2), "closed")
end)

t.test("fsync mode still commits and reads", function()
  git.fsync(true)
  local r = repo()
  local oid = assert(r:commit{ files = { a = "1" }, ref = "refs/nodes/n0001" })
  git.fsync(false)
  t.eq(r:read(oid, "a"), "1")
end)

t.test("version reports libgit2", function()
  t.matches(git.version(), "^%d+%.%d+%.%d+$")
end)


t.test("new_ref appends the ref to packed-refs; git and libgit2 read it, also after pack_refs sorted the file", function()
  local fs = require "mk.fs"
  local r, dir = repo()
  local a = assert(r:commit{ files = { ["k.c"] = "a" }, ref = "refs/nodes/n0002", new_ref = true })
  local b = assert(r:commit{ files = { ["k.c"] = "b" }, parents = { a }, ref = "refs/nodes/n0001", new_ref = true })
  t.ok(not fs.exists(dir .. "/refs/nodes/n0002"), "no loose ref file")
  t.eq(r:ref("refs/nodes/n0002"), a)
  t.eq(r:ref("refs/nodes/n0001"), b)
  assert(r:set_ref("refs/heads/best", b))
  assert(r:pack_refs()) -- libgit2 rewrites packed-refs, sorted
  t.contains(fs.read(dir .. "/packed-refs"), " sorted")
  r:close()
  r = assert(git.open(dir))
  local c = assert(r:commit{ files = { ["k.c"] = "c" }, parents = { b }, ref = "refs/nodes/n0000", new_ref = true })
  t.ok(not fs.read(dir .. "/packed-refs"):find(" sorted"), "the sorted trait is dropped before an append")
  local names = {}
  for _, e in ipairs(assert(r:refs("refs/nodes/*"))) do names[#names + 1] = e.name .. "=" .. e.oid end
  t.same(names, { "refs/nodes/n0000=" .. c, "refs/nodes/n0001=" .. b, "refs/nodes/n0002=" .. a })
  local rc, out = sh("git --git-dir " .. dir .. " show-ref")
  t.eq(rc, 0, out)
  t.contains(out, c .. " refs/nodes/n0000")
  t.contains(out, a .. " refs/nodes/n0002")
  t.eq(sh("git --git-dir " .. dir .. " rev-parse refs/nodes/n0000"), 0)
  rc, out = sh("git --git-dir " .. dir .. " fsck --strict --no-dangling")
  t.eq(rc, 0, out)
end)

t.test("repair_refs cuts a torn last line off packed-refs, and only that", function()
  local fs = require "mk.fs"
  local r, dir = repo()
  local a = assert(r:commit{ files = { ["k.c"] = "a" }, ref = "refs/nodes/n0001", new_ref = true })
  local good = fs.read(dir .. "/packed-refs")
  assert(fs.write(dir .. "/packed-refs", good .. a:sub(1, 17)))
  r:close()
  r = assert(git.open(dir))
  local changed, torn = r:repair_refs()
  t.eq(changed, true); t.eq(torn, true)
  t.eq(fs.read(dir .. "/packed-refs"), good)
  t.eq(r:ref("refs/nodes/n0001"), a)
  changed, torn = r:repair_refs()
  t.eq(changed, false); t.eq(torn, false)
end)

return t.run()
