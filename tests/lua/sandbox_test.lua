-- mk.services.sandbox: what candidate code can and cannot see or touch inside
-- bubblewrap, run through proc.run(sandbox.apply{sandbox = ...}); and the loud fallback.
local t = dofile("tests/lua/lib/t.lua")
local proc = require "mk.proc"
local sandbox = require "mk.services.sandbox"
local task = require "mk.services.task"
local fs = require "mk.fs"

local root = fs.realpath(fs.tmpdir("sandbox-test"))
local work = root .. "/work"
local secret_dir = root .. "/run" -- stands for the run directory
local expected = root .. "/expected" -- frozen expected outputs
local shared = root .. "/shared"
local out_dir = root .. "/out"
fs.mkdirs(work)
fs.mkdirs(secret_dir)
fs.mkdirs(expected)
fs.mkdirs(shared)
fs.mkdirs(out_dir)
fs.write(secret_dir .. "/secret.txt", "run-secret")
fs.write(expected .. "/out.bin", "expected-output")
fs.write(shared .. "/input.txt", "shared-input")
fs.write(shared .. "/hidden.txt", "hidden")

local function need_bwrap()
  local ok, why = sandbox.available()
  if not ok then t.skip("bubblewrap unavailable: " .. tostring(why)) end
end

local function boxed(script, extra)
  local sb = { workdir = work }
  for k, v in pairs(extra or {}) do sb[k] = v end
  return proc.run(sandbox.apply { argv = { "sh", "-c", script }, sandbox = sb, timeout = 60 })
end

t.test("sandbox/available returns a boolean and a reason when false", function()
  local ok, why = sandbox.available()
  t.eq(type(ok), "boolean")
  if not ok then t.eq(type(why), "string") end
  t.eq(select(1, sandbox.available()), ok, "cached")
end)

t.test("sandbox/wrap prefixes bwrap and keeps argv verbatim at the end", function()
  need_bwrap()
  local a = sandbox.wrap({ "prog", "a b", "--" }, { workdir = work })
  t.matches(a[1], "bwrap$")
  t.eq(a[#a - 3], "--")
  t.eq(a[#a - 2], "prog")
  t.eq(a[#a - 1], "a b")
  t.eq(a[#a], "--")
  local s = table.concat(a, " ")
  t.contains(s, "--unshare-net")
  t.contains(s, "--die-with-parent")
  t.contains(s, "--unshare-pid")
  t.ok(not table.concat(sandbox.wrap({ "x" }, { workdir = work, network = true }), " "):find("--unshare-net", 1, true),
    "network = true keeps the network")
end)

t.test("sandbox/wrap argument mistakes raise", function()
  t.raises(function() sandbox.wrap({}, { workdir = work }) end, "argv")
  t.raises(function() sandbox.wrap({ "x" }) end, "opts")
  t.raises(function() sandbox.wrap({ "x" }, { workdir = "relative" }) end, "workdir")
  t.raises(function() sandbox.wrap({ "x" }, { workdir = work, ro = { "rel" } }) end, "ro")
end)

t.test("sandbox/the workdir is writable, the cwd and HOME", function()
  need_bwrap()
  local r = boxed("pwd; echo $HOME; echo made > made.txt")
  t.eq(r.status, "exited")
  t.eq(r.code, 0, r.stderr)
  t.eq(r.stdout, work .. "\n" .. work .. "\n")
  t.eq(fs.read(work .. "/made.txt"), "made\n")
end)

t.test("sandbox/reading files outside the sandbox fails", function()
  need_bwrap()
  local home = os.getenv("HOME") or "/root"
  for _, path in ipairs { secret_dir .. "/secret.txt", secret_dir, expected .. "/out.bin", expected, home, "/work" } do
    local r = boxed("cat " .. path .. " 2>/dev/null; ls -d " .. path .. " >/dev/null 2>&1 && echo visible")
    t.ok(not r.stdout:find("run-secret") and not r.stdout:find("expected-output"), "leaked " .. path)
    t.ok(not r.stdout:find("visible"), path .. " must not be visible")
  end
  local r = boxed("cat /etc/shadow 2>/dev/null")
  t.ok(not r.stdout:find("root:"), "/etc/shadow is hidden")
end)

t.test("sandbox/writing outside the workdir fails and /tmp is private", function()
  need_bwrap()
  local r = boxed("for f in /usr/mk-x /etc/mk-x " .. out_dir .. "/x " .. secret_dir .. "/secret.txt; do " ..
    "echo pwned > $f 2>/dev/null && echo WROTE $f; done; echo tmp > /tmp/mk-sandbox-leak && echo tmp-ok")
  t.eq(r.stdout, "tmp-ok\n")
  t.ok(not fs.exists("/usr/mk-x") and not fs.exists("/etc/mk-x") and not fs.exists(out_dir .. "/x"))
  t.eq(fs.read(secret_dir .. "/secret.txt"), "run-secret")
  t.ok(not fs.exists("/tmp/mk-sandbox-leak"), "sandbox /tmp is a private tmpfs")
end)

t.test("sandbox/ro paths are readable not writable, rw paths writable, hide hides", function()
  need_bwrap()
  local r = boxed("cat " .. shared .. "/input.txt; echo x > " .. shared .. "/input.txt 2>/dev/null && echo WROTE; " ..
    "cat " .. shared .. "/hidden.txt 2>/dev/null || echo hidden-gone; echo ok > " .. out_dir .. "/y",
    { ro = { shared }, rw = { out_dir }, hide = { shared .. "/hidden.txt" } })
  t.eq(r.stdout, "shared-inputhidden-gone\n")
  t.eq(fs.read(out_dir .. "/y"), "ok\n")
  t.eq(fs.read(shared .. "/hidden.txt"), "hidden")
end)

t.test("sandbox/network is blocked unless asked for", function()
  need_bwrap()
  local py = "import socket\ns = socket.socket()\ns.settimeout(3)\n" ..
    "try:\n  s.connect(('1.1.1.1', 80)); print('connected')\nexcept OSError as e:\n  print('blocked', e.errno)\n"
  local r = proc.run(sandbox.apply { argv = { "python3", "-c", py }, sandbox = { workdir = work }, timeout = 30 })
  t.matches(r.stdout, "^blocked")
  r = boxed("cat /proc/net/dev")
  t.ok(not r.stdout:find("eth%d") and not r.stdout:find("ens"), "only loopback inside: " .. r.stdout)
end)

t.test("sandbox/other processes of the host are invisible", function()
  need_bwrap()
  local r = boxed("ls /proc | grep -c '^[0-9]'")
  t.ok(tonumber(r.stdout) <= 4, "pid namespace shows only the sandbox: " .. r.stdout)
end)

t.test("sandbox/timeout and limits still apply inside, nothing survives", function()
  need_bwrap()
  local r = proc.run(sandbox.apply { argv = { "sh", "-c", "sleep 1000.4242 & while :; do :; done" },
    sandbox = { workdir = work }, timeout = 0.5, limits = { mem_mb = 256 } })
  t.eq(r.status, "timeout")
  r = proc.run(sandbox.apply { argv = { "python3", "-c", "x = bytearray(4 * 1024 ** 3)" },
    sandbox = { workdir = work }, limits = { mem_mb = 512 }, timeout = 60 })
  t.ok(r.status ~= "exited" or r.code ~= 0, "allocation fails inside the sandbox")
  local n = 0
  for _ = 1, 100 do
    local p = io.popen("pgrep -f 'sleep 1000[.]4242' | wc -l")
    n = tonumber(p:read("a"))
    p:close()
    if n == 0 then break end
    task.sleep(0.05)
  end
  t.eq(n, 0, "the background sleep did not survive")
end)

t.test("sandbox/with an nproc limit the workdir stays writable and the limit holds", function()
  need_bwrap()
  local py = "import os\nn = 0\nfor i in range(100):\n  try:\n    if os.fork() == 0:\n" ..
    "      import time; time.sleep(20); os._exit(0)\n    n += 1\n  except OSError:\n    pass\n" ..
    "open('forks.txt', 'w').write(str(n))\n"
  local r = proc.run(sandbox.apply { argv = { "python3", "-c", py }, sandbox = { workdir = work },
    limits = { nproc = 12 }, timeout = 60 })
  t.eq(r.status, "exited")
  t.eq(r.code, 0, r.stderr)
  t.ok(tonumber(fs.read(work .. "/forks.txt")) < 12, "forks bounded by nproc")
end)

t.test("sandbox/secrets in the engine's environment do not reach sandboxed code", function()
  local exe = (os.getenv("MKENGINE_BUILD") or "build") .. "/mkengine"
  local script = root .. "/env.lua"
  fs.write(script, "local r = require('mk.proc').run(require('mk.services.sandbox').apply{argv = {'env'}, " ..
    "sandbox = {workdir = " .. string.format("%q", work) .. "}, env = {PASSED_TOKEN = 'given'}})\nio.write(r.stdout)\n")
  local r = proc.run { argv = { exe, "script", script }, timeout = 60,
    env = { OPENAI_API_KEY = "sk-leak", gh_token = "t-leak", MY_SECRET_X = "s-leak", KEEP_ME = "kept" } }
  t.eq(r.code, 0, r.stderr)
  t.ok(not r.stdout:find("leak", 1, true), "no secret inherited: " .. r.stdout)
  t.contains(r.stdout, "KEEP_ME=kept")
  t.contains(r.stdout, "PASSED_TOKEN=given")
end)

t.test("sandbox/without bubblewrap: argv unchanged and one loud warning", function()
  local exe = (os.getenv("MKENGINE_BUILD") or "build") .. "/mkengine"
  local script = root .. "/fallback.lua"
  fs.write(script, [[
local sandbox = require "mk.services.sandbox"
local ok, why = sandbox.available()
local a = sandbox.wrap({ "echo", "hi" }, { workdir = "/tmp" })
sandbox.wrap({ "echo", "again" }, { workdir = "/tmp" })
print(ok, why, #a, a[1], a[2])
]])
  local r = proc.run { argv = { exe, "script", script }, env = { MKENGINE_NO_SANDBOX = "1" }, timeout = 60 }
  t.eq(r.code, 0, r.stderr)
  t.eq(r.stdout, "false\tMKENGINE_NO_SANDBOX=1\t2\techo\thi\n")
  local _, warnings = r.stderr:gsub("WARNING: no sandbox", "")
  t.eq(warnings, 1)
end)

t.test("sandbox/cleanup", function() fs.rm_rf(root) end)

return t.run()
