-- mk.proc: results, spawn errors, limits, timeouts, cancellation, and the
-- hostile processes a candidate kernel may turn into. Every test ends with
-- the engine still running; the last one checks that later calls work.
local t = dofile("tests/lua/lib/t.lua")
local proc = require "mk.proc"
local task = require "mk.services.task"
local fs = require "mk.fs"

local function sh(script, opts)
  opts = opts or {}
  opts.argv = { "sh", "-c", script }
  return proc.run(opts)
end

local function alive(pid)
  return os.execute("kill -0 " .. math.tointeger(pid) .. " 2>/dev/null") == true
end

-- Waits (bounded) until every operation in flight has finished, i.e. the
-- wrapper exited and the pipes closed after a cancel.
local function settle(base)
  for _ = 1, 800 do
    if task.stats().ops <= base then return true end
    task.sleep(0.025)
  end
  return false
end

local function read_pid(path)
  for _ = 1, 500 do
    local s = fs.read(path)
    if s and s:match("%d+") then return tonumber(s:match("%d+")) end
    task.sleep(0.02)
  end
  error("no pid written to " .. path)
end

local tmp = t.tmpdir("proc-test")
local base_ops = task.stats().ops

t.test("proc/exit code, stdout and stderr come back", function()
  local r = sh("echo out; echo err >&2; exit 3")
  t.eq(r.status, "exited")
  t.eq(r.code, 3)
  t.eq(r.signal, nil)
  t.eq(r.stdout, "out\n")
  t.eq(r.stderr, "err\n")
  t.eq(r.truncated, false)
  t.ok(r.wall_s >= 0 and r.wall_s < 60, "wall_s")
  t.ok(r.cpu_s >= 0, "cpu_s")
  t.ok(math.type(r.max_rss_kb) == "integer" and r.max_rss_kb > 0, "max_rss_kb")
  t.ok(math.type(r.pid) == "integer" and r.pid > 0, "pid")
end)

t.test("proc/argv passes arguments verbatim, no shell", function()
  local r = proc.run { argv = { "printf", "%s|", "a b", "$HOME", "'q'", "" } }
  t.eq(r.stdout, "a b|$HOME|'q'||")
end)

t.test("proc/stdin is fed to the child", function()
  local r = proc.run { argv = { "wc", "-c" }, stdin = string.rep("x", 1000000) }
  t.eq(r.stdout:match("%d+"), "1000000")
  t.eq(proc.run { argv = { "cat" }, stdin = "" }.stdout, "")
end)

t.test("proc/unread stdin larger than a pipe does not hang or kill the engine", function()
  local r = proc.run { argv = { "true" }, stdin = string.rep("y", 8 << 20) }
  t.eq(r.status, "exited")
  t.eq(r.code, 0)
end)

t.test("proc/the child starts clean: no signal ignored or blocked, no engine fd, a session of its own", function()
  local st = proc.run { argv = { "cat", "/proc/self/status" } }.stdout
  t.eq(st:match("SigIgn:%s*(%x+)"), "0000000000000000") -- the engine ignores SIGPIPE
  t.eq(st:match("SigBlk:%s*(%x+)"), "0000000000000000")
  -- ls lists its own directory handle (3) too; of the engine's fds only
  -- those it inherited without close-on-exec (from whoever started it)
  local want = { ["0"] = true, ["1"] = true, ["2"] = true, ["3"] = true }
  for _, fd in ipairs(fs.list("/proc/self/fd")) do
    local flags = tonumber(((fs.read("/proc/self/fdinfo/" .. fd) or ""):match("flags:%s*(%d+)")) or "2000000", 8)
    if tonumber(fd) > 3 and flags & 0x80000 == 0 then want[fd] = true end
  end
  for fd in proc.run { argv = { "ls", "/proc/self/fd" } }.stdout:gmatch("%d+") do
    t.ok(want[fd], "fd " .. fd .. " of the engine is open in the child")
  end
  local function session(stat) return tonumber(stat:match("%) %S+ %d+ %d+ (%d+)")) end
  local child = session(proc.run { argv = { "cat", "/proc/self/stat" } }.stdout)
  t.ok(child and child ~= session(fs.read("/proc/self/stat")), "the child is not in the engine's session")
end)

t.test("proc/mk-exec: an unknown option or a missing program is a usage error, never run", function()
  local exe = os.getenv("MKENGINE_EXEC") or ((os.getenv("MKENGINE_BUILD") or "build") .. "/engine/exec/mk-exec")
  local made = tmp .. "/made-by-mk-exec"
  for _, args in ipairs { { "-x", "touch", made }, { "-m" }, { "-m", "64" }, { "-m", "6x", "--", "touch", made }, { "--" } } do
    local argv = { exe, table.unpack(args) }
    local r = proc.run { argv = argv }
    t.eq(r.code, 125, table.concat(args, " "))
    t.ok(r.stderr:match("usage") or r.stderr:match("option"), "a reason on stderr: " .. r.stderr)
  end
  t.eq(fs.exists(made), false)
  -- options end at the program: its own options are its own
  t.eq(proc.run { argv = { exe, "-m", "64", "sh", "-c", "ulimit -v; echo \"$1\"", "sh", "-m" } }.stdout, "65536\n-m\n")
end)

t.test("proc/a timeout counts from the call, even after a long stretch of work without waiting", function()
  local t0 = task.now()
  while task.now() - t0 < 1.3 do end -- the loop's clock stands still meanwhile
  local r = proc.run { argv = { "true" }, timeout = 1 }
  t.eq(r.status, "exited")
  t.eq(r.code, 0)
end)

t.test("proc/no stdin reads as /dev/null", function()
  t.eq(proc.run { argv = { "cat" } }.stdout, "")
end)

t.test("proc/cwd and env: env overrides, false removes, clear_env starts empty", function()
  local r = proc.run { argv = { "sh", "-c", "pwd; echo \"$A|$HOME|${PATH:+p}\"" }, cwd = tmp,
    env = { A = "1", HOME = false } }
  t.eq(r.stdout, fs.realpath(tmp) .. "\n1||p\n")
  r = proc.run { argv = { "/usr/bin/env" }, clear_env = true, env = { ONLY = "x" } }
  t.eq(r.stdout, "ONLY=x\n")
end)

t.test("proc/a missing program is a spawn error, not an exit status", function()
  local r, err = proc.run { argv = { "no-such-program-mk" } }
  t.eq(r, nil)
  t.eq(err.kind, "spawn")
  t.contains(err.message, "no-such-program-mk")
  r, err = proc.run { argv = { tmp .. "/missing" } }
  t.eq(r, nil)
  t.eq(err.kind, "spawn")
  r, err = proc.run { argv = { "true" }, cwd = tmp .. "/no-such-dir" }
  t.eq(r, nil)
  t.eq(err.kind, "spawn")
  t.contains(err.message, "no-such-dir")
  fs.write(tmp .. "/noexec", "#!/bin/sh\n", { mode = 420 })
  r, err = proc.run { argv = { tmp .. "/noexec" } }
  t.eq(r, nil)
  t.eq(err.kind, "spawn")
end)

t.test("proc/a program found on PATH runs; a script without #! runs under /bin/sh (as execvp)", function()
  fs.mkdirs(tmp .. "/bin")
  fs.write(tmp .. "/bin/mk-noshebang", "echo from-sh \"$1\"\n", { mode = 493 })
  local r = proc.run { argv = { "mk-noshebang", "x y" }, env = { PATH = tmp .. "/bin:/usr/bin:/bin" } }
  t.eq(r.code, 0)
  t.eq(r.stdout, "from-sh x y\n")
  r = proc.run { argv = { tmp .. "/bin/mk-noshebang", "z" } }
  t.eq(r.stdout, "from-sh z\n")
end)

t.test("proc/argument mistakes raise", function()
  t.raises(function() proc.run() end)
  t.raises(function() proc.run { argv = {} } end, "argv")
  t.raises(function() proc.run { argv = "ls" } end, "argv")
  t.raises(function() proc.run { argv = { "ls" }, timeout = "x" } end, "timeout")
  t.raises(function() proc.run { argv = { "ls" }, timeout = -1 } end, "timeout")
  t.raises(function() proc.run { argv = { "ls" }, limits = 3 } end, "limits")
  t.raises(function() proc.run { argv = { "ls" }, env = { A = {} } } end, "env")
end)

t.test("proc/calling where the task cannot wait raises a clear error", function()
  local err = t.raises(function()
    table.sort({ 2, 1 }, function(a, b) proc.run { argv = { "true" } } return a < b end)
  end)
  t.contains(tostring(err), "proc.run")
end)

t.test("proc/a user coroutine around proc.run keeps working", function()
  local co = coroutine.wrap(function() return sh("echo co").stdout end)
  t.eq(co(), "co\n")
end)

t.test("hostile/infinite loop is stopped by the timeout", function()
  local r = sh("while :; do :; done", { timeout = 0.5 })
  t.eq(r.status, "timeout")
  t.eq(r.signal, 9)
  t.ok(r.wall_s >= 0.5 and r.wall_s < 10, "wall_s within bound: " .. r.wall_s)
  t.ok(type(r.cpu_s) == "number" and r.cpu_s >= 0, "the loop's cpu time is reported")
end)

t.test("a timeout is never shorter than asked, on the clock wall_s is measured with", function()
  -- the loop's timers count whole milliseconds behind the high-resolution
  -- clock; a child stopped by its timeout must still have run the full time
  for i = 1, 20 do
    local r = sh("while :; do :; done", { timeout = 0.02 })
    t.eq(r.status, "timeout")
    t.ok(r.wall_s >= 0.02, string.format("run %d: wall_s %.6f < timeout 0.02", i, r.wall_s))
  end
end)

t.test("hostile/a background grandchild holding the pipes does not hang the run", function()
  local pidfile = tmp .. "/bg.pid"
  local r = sh("sleep 1000 & echo $! > " .. pidfile .. "; echo done", { timeout = 60 })
  t.eq(r.status, "exited")
  t.eq(r.code, 0)
  t.eq(r.stdout, "done\n")
  t.ok(r.wall_s < 30, "returned long before the grandchild would end")
  t.ok(not alive(read_pid(pidfile)), "the grandchild was killed with the group")
end)

t.test("hostile/a setsid escapee is still killed (wrapper is subreaper)", function()
  local pidfile = tmp .. "/esc.pid"
  local r = sh("setsid sleep 1000 </dev/null & echo $! > " .. pidfile, { timeout = 60 })
  t.eq(r.status, "exited")
  t.ok(not alive(read_pid(pidfile)), "escaped process was killed")
end)

t.test("hostile/closing stdout then hanging still times out", function()
  local r = sh("exec >&- 2>&-; sleep 1000", { timeout = 0.3 })
  t.eq(r.status, "timeout")
end)

t.test("hostile/fork bomb under an nproc limit is contained", function()
  local py = [[
import os, time
ok = failed = 0
for i in range(200):
    try:
        if os.fork() == 0:
            time.sleep(30)
            os._exit(0)
        ok += 1
    except OSError:
        failed += 1
print(ok, failed)
]]
  local r = proc.run { argv = { "python3", "-c", py }, limits = { nproc = 16 }, timeout = 20 }
  t.eq(r.status, "exited")
  local ok, failed = r.stdout:match("(%d+) (%d+)")
  t.ok(tonumber(ok) < 16, "at most nproc processes: " .. r.stdout)
  t.ok(tonumber(failed) > 150, "the rest failed to fork: " .. r.stdout)
  r = sh("b() { b | b & }; b", { limits = { nproc = 24 }, timeout = 1 })
  t.ok(r.status == "timeout" or r.status == "exited", "status " .. r.status)
  t.eq(sh("echo alive").stdout, "alive\n")
end)

t.test("hostile/allocating 10 GB under mem_mb fails", function()
  local r = proc.run { argv = { "python3", "-c", "x = bytearray(10 * 1024 ** 3); print('allocated')" },
    limits = { mem_mb = 512 }, timeout = 60 }
  t.ok(r.status == "signaled" or (r.status == "exited" and r.code ~= 0), "status " .. r.status)
  t.ok(not r.stdout:find("allocated"), "allocation must not succeed")
end)

t.test("hostile/SIGSEGV is reported as signaled 11", function()
  local r = sh("kill -SEGV $$")
  t.eq(r.status, "signaled")
  t.eq(r.signal, 11)
  t.eq(r.code, nil)
  r = proc.run { argv = { "python3", "-c", "import ctypes; ctypes.string_at(0)" } }
  t.eq(r.status, "signaled")
  t.eq(r.signal, 11)
end)

t.test("hostile/cpu_s limit stops a spinning process", function()
  local r = sh("while :; do :; done", { limits = { cpu_s = 1 }, timeout = 300 })
  t.eq(r.status, "signaled")
  t.ok(r.signal == 24 or r.signal == 9, "SIGXCPU or SIGKILL, got " .. tostring(r.signal))
end)

t.test("hostile/fsize_mb limit stops a file writer", function()
  local r = sh("head -c 5000000 /dev/zero > big", { cwd = tmp, limits = { fsize_mb = 1 } })
  t.ok(r.status == "signaled" and r.signal == 25 or (r.status == "exited" and r.code ~= 0), "status")
  t.ok(fs.stat(tmp .. "/big").size <= 1 << 20, "file capped at 1 MB")
end)

t.test("hostile/100 MB of output with max_output 1 MB is truncated", function()
  local r = sh("head -c 100000000 /dev/zero; echo tail >&2", { max_output = 1000000 })
  t.eq(r.status, "exited")
  t.eq(r.code, 0)
  t.eq(#r.stdout, 1000000)
  t.eq(r.truncated, true)
  t.eq(r.stderr, "tail\n")
end)

t.test("proc/50 MB of output comes back whole", function()
  local r = sh("head -c 50000000 /dev/zero | tr '\\0' 'a'")
  t.eq(r.status, "exited")
  t.eq(#r.stdout, 50000000)
  t.eq(r.truncated, false)
  t.eq(r.stdout:sub(-3), "aaa")
end)

t.test("proc/cancel with a process in flight leaves no process behind", function()
  local pidfile = tmp .. "/cancel.pid"
  local ok, why = task.timeout(0.3, sh, "echo $$ > " .. pidfile .. "; sleep 1000 & sleep 1000")
  t.eq(ok, nil)
  t.eq(why, "timeout")
  t.ok(settle(base_ops), "the op finished after the cancel")
  t.ok(not alive(read_pid(pidfile)), "the child was killed")
  -- a task cancelled explicitly
  local h = task.spawn(sh, "echo $$ > " .. pidfile .. "2; sleep 1000")
  read_pid(pidfile .. "2")
  h:cancel()
  t.eq(select(2, task.try_await(h)).kind, "cancelled")
  t.ok(settle(base_ops), "the op finished after the cancel")
  t.ok(not alive(read_pid(pidfile .. "2")), "the child was killed")
end)

t.test("hostile/a child ignoring SIGTERM and SIGINT still times out", function()
  local r = sh("trap '' TERM INT HUP; while :; do :; done", { timeout = 0.3 })
  t.eq(r.status, "timeout")
end)

t.test("proc/if the engine itself dies, the wrapper kills the process tree", function()
  local exe = (os.getenv("MKENGINE_BUILD") or "build") .. "/mkengine"
  local script, pidfile = tmp .. "/die.lua", tmp .. "/die.pid"
  fs.write(script, "require('mk.proc').run{argv = {'sh', '-c', 'echo $$ > " .. pidfile ..
    "; sleep 1000 & sleep 1000'}}\n")
  -- started outside any wrapper of ours, so only its own wrapper can clean up
  t.ok(os.execute(exe .. " script " .. script .. " >/dev/null 2>&1 &"))
  local pid = read_pid(pidfile)
  t.ok(alive(pid), "the grandchild runs")
  t.eq(proc.run { argv = { "pkill", "-9", "-f", "^" .. exe .. " script " .. script .. "$" } }.code, 0)
  local gone = false
  for _ = 1, 500 do
    if not alive(pid) then gone = true break end
    task.sleep(0.02)
  end
  t.ok(gone, "the orphaned tree was killed")
end)

t.test("proc/a run still in flight when the engine exits does not outlive it", function()
  local exe = (os.getenv("MKENGINE_BUILD") or "build") .. "/mkengine"
  local script, pidfile = tmp .. "/inflight.lua", tmp .. "/inflight.pid"
  fs.write(script, "local task = require 'mk.services.task'\n" ..
    "task.spawn(require('mk.proc').run, {argv = {'sh', '-c', 'echo $$ > " .. pidfile .. "; exec sleep 1000'}})\n" ..
    "task.sleep(0.3)\nreturn 0\n")
  -- os.execute, not proc.run: no wrapper of ours around that engine. Its
  -- exit status is not checked: under a leak checker the op abandoned at
  -- shutdown is reported (the runtime closes handles without waiting).
  os.execute(exe .. " script " .. script)
  local pid = read_pid(pidfile)
  local gone = false
  for _ = 1, 500 do
    if not alive(pid) then gone = true break end
    task.sleep(0.02)
  end
  t.ok(gone, "the child was killed when its engine went away")
end)

t.test("proc/rusage is per child even with concurrent children", function()
  local big = task.spawn(proc.run, { argv = { "python3", "-c",
    "b = bytearray(200 * 2 ** 20)\nfor i in range(0, len(b), 4096): b[i] = 1" } })
  local small = task.spawn(proc.run, { argv = { "sh", "-c", "sleep 0.2" } })
  -- fixed work: its CPU time does not depend on the machine's load
  local busy = task.spawn(proc.run, { argv = { "python3", "-c", "sum(range(2 * 10 ** 7))" } })
  local rb, rs, ru = task.await(big), task.await(small), task.await(busy)
  t.ok(ru.cpu_s > 0.1, "cpu_s of a busy child: " .. ru.cpu_s)
  t.ok(rs.cpu_s < 0.1, "cpu_s of a sleeping child: " .. rs.cpu_s)
  t.ok(rb.max_rss_kb > 200000, "big child's rss " .. rb.max_rss_kb)
  t.ok(rs.max_rss_kb < 100000, "small child's rss " .. rs.max_rss_kb)
end)

t.test("proc/50 concurrent processes all complete", function()
  local hs = {}
  for i = 1, 50 do hs[i] = task.spawn(sh, "sleep 0.1; echo " .. i) end
  local rs = task.gather(hs)
  for i = 1, 50 do
    t.eq(rs[i].status, "exited")
    t.eq(rs[i].stdout, i .. "\n")
  end
end)

t.test("proc/spawn: a line protocol over stdin and stdout, both ways, many round trips", function()
  local h = assert(proc.spawn { argv = { "python3", "-u", "-c",
    "import sys\nfor l in sys.stdin:\n  print('echo ' + l.strip(), flush=True)\nprint('bye')" } })
  for i = 1, 200 do
    assert(h:write("msg " .. i .. "\n"))
    t.eq(h:read_line(), "echo msg " .. i)
  end
  h:close()
  t.eq(h:read_line(), "bye")
  t.eq(h:read_line(), nil)
  local r = h:wait()
  t.eq(r.status, "exited")
  t.eq(r.code, 0)
  t.ok(r.cpu_s > 0, "rusage reported")
  local ok, err = h:write("late\n")
  t.eq(ok, nil)
  t.eq(err.kind, "closed")
end)

t.test("proc/spawn: stderr is kept apart, env and cwd apply, secrets scrubbed on request", function()
  local h = assert(proc.spawn { argv = { "sh", "-c", "echo oops >&2; pwd; echo $MK_X; echo ${MK_TOKEN:-none}" },
    cwd = tmp, env = { MK_X = "x1" }, scrub_env = true })
  t.eq(h:read_line(), fs.realpath(tmp))
  t.eq(h:read_line(), "x1")
  t.eq(h:read_line(), "none")
  local r = h:wait()
  t.eq(r.stderr, "oops\n")
  t.eq(h:stderr(), "oops\n")
end)

t.test("proc/spawn: kill() ends the whole tree, background children included", function()
  local pidf = tmp .. "/spawn-bg.pid"
  local h = assert(proc.spawn { argv = { "sh", "-c", "sleep 1000 & echo $! > " .. pidf .. "; echo up; wait" } })
  t.eq(h:read_line(), "up")
  local bg = read_pid(pidf)
  t.ok(alive(bg), "background sleep runs")
  t.ok(h:kill())
  local r = h:wait()
  t.eq(r.status, "signaled")
  t.ok(not alive(bg), "background child killed with the tree")
end)

t.test("proc/spawn: kill(SIGSTOP) pauses the child, SIGCONT resumes it", function()
  local h = assert(proc.spawn { argv = { "cat" } })
  h:write("a\n")
  t.eq(h:read_line(), "a")
  t.ok(h:kill(19)) -- SIGSTOP
  h:write("b\n")
  local got = task.timeout(0.3, h.read_line, h)
  t.eq(got, nil, "a stopped child answers nothing")
  -- the timeout cancelled the read: that kills the child (as proc.run)
  local r = h:wait()
  t.eq(r.status, "signaled")
  local h2 = assert(proc.spawn { argv = { "cat" } })
  h2:write("b\n")
  t.eq(h2:read_line(), "b") -- by now the pid is known
  t.ok(h2:pid() > 0)
  t.ok(h2:kill(19))
  h2:write("c\n")
  task.sleep(0.1)
  t.ok(h2:kill(18)) -- SIGCONT
  t.eq(h2:read_line(), "c")
  h2:close()
  t.eq(h2:wait().code, 0)
end)

t.test("proc/spawn: a dropped handle takes its child with it", function()
  local pidf = tmp .. "/spawn-gc.pid"
  -- the handle lives only inside this function call: collected after it
  local function start() assert(proc.spawn { argv = { "sh", "-c", "echo $$ > " .. pidf .. "; exec sleep 1000" } }) end
  start()
  local pid = read_pid(pidf)
  t.ok(alive(pid))
  collectgarbage()
  collectgarbage()
  local gone = false
  for _ = 1, 200 do
    if not alive(pid) then gone = true; break end
    task.sleep(0.02)
  end
  t.ok(gone, "child of a collected handle is killed")
end)

t.test("proc/spawn: two readers at once is a clear error", function()
  local h = assert(proc.spawn { argv = { "sleep", "5" } })
  local r1 = task.spawn(h.read_line, h)
  task.sleep(0.05)
  local ok, err = pcall(h.read_line, h)
  t.ok(not ok)
  t.contains(tostring(err), "another task is already reading")
  h:kill()
  t.eq(task.await(r1), nil)
  h:wait()
end)

t.test("proc/the engine still runs processes after all of the above", function()
  t.ok(settle(base_ops), "no operation left in flight")
  local r = sh("echo fine")
  t.eq(r.stdout, "fine\n")
  fs.rm_rf(tmp)
end)

return t.run()
