-- Behaviour of mk.services.task: spawn/await/gather, errors, cancellation, timeouts,
-- semaphores, queues, user coroutines around engine calls, misuse.
local t = dofile("tests/lua/lib/t.lua")
local task = require "mk.services.task"

local MK = (os.getenv("MKENGINE_BUILD") or "build") .. "/mkengine"

-- run a Lua snippet in a fresh engine; returns exit code, stdout+stderr
local function run_snippet(src)
  local path = os.tmpname()
  local f = assert(io.open(path, "w"))
  f:write(src)
  f:close()
  local p = io.popen(MK .. " script " .. path .. " 2>&1; echo \"rc=$?\"")
  local out = p:read("a")
  p:close()
  os.remove(path)
  return tonumber(out:match("rc=(%d+)%s*$")), out
end

t.test("await returns all results of the task", function()
  local h = task.spawn(function(a, b) task.sleep(0.001) return a + b, "x", nil, 4 end, 1, 2)
  local a, b, c, d = task.await(h)
  t.eq(a, 3); t.eq(b, "x"); t.eq(c, nil); t.eq(d, 4)
  t.eq(h:status(), "ok")
end)

t.test("await on a finished task returns its results again", function()
  local h = task.spawn(function() return 7 end)
  t.eq(task.await(h), 7)
  t.eq(task.await(h), 7)
end)

t.test("gather returns first results in handle order, not finish order", function()
  local hs = {}
  for i = 1, 5 do hs[i] = task.spawn(function() task.sleep((6 - i) * 0.002) return i * 10 end) end
  t.same(task.gather(hs), { 10, 20, 30, 40, 50 })
end)

t.test("map: results in item order, started in list order, never more than n at once", function()
  local active, most, started = 0, 0, {}
  local out = task.map({ 5, 4, 3, 2, 1 }, 2, function(x, i)
    started[#started + 1] = i
    active = active + 1
    most = math.max(most, active)
    for _ = 1, x do task.yield() end -- the first items take longest
    active = active - 1
    return x * 10
  end)
  t.same(out, { 50, 40, 30, 20, 10 })
  t.same(started, { 1, 2, 3, 4, 5 })
  t.eq(most, 2)
  t.same(task.map({}, 3, function() error("never called") end), {})
  t.raises(function() task.map({ 1 }, 0, tostring) end, "n must be an integer >= 1")
  t.raises(function() task.map({ 1 }, 1) end, "(items, n, fn) expected")
end)

t.test("map: a raising call starts no further item and cancels the calls still running", function()
  local started, cancelled = {}, false
  local gate = task.queue()
  local err = t.raises(function()
    task.map({ "wait", "fail", "c", "d" }, 2, function(x)
      started[#started + 1] = x
      if x == "wait" then
        local ok, e = pcall(gate.get, gate)
        if not ok and e == task.CANCELLED then cancelled = true end
        error(e, 0)
      end
      if x == "fail" then error({ kind = "boom" }, 0) end
    end)
  end)
  t.eq(err.kind, "boom")
  t.same(started, { "wait", "fail" })
  t.ok(cancelled, "the waiting call saw task.CANCELLED")
end)

t.test("tasks run concurrently: 50 sleeps of 0.1 s take about 0.1 s", function()
  local t0 = task.now()
  local hs = {}
  for i = 1, 50 do hs[i] = task.spawn(task.sleep, 0.1) end
  task.gather(hs)
  local dt = task.now() - t0
  t.ok(dt >= 0.099 and dt < 1.0, "elapsed " .. dt)
end)

t.test("sleep never returns before its time on task.now's clock", function()
  for i = 1, 20 do
    local t0 = task.now()
    task.sleep(0.003)
    local dt = task.now() - t0
    t.ok(dt >= 0.003, string.format("sleep %d: %.6f s < 0.003 s", i, dt))
  end
end)

t.test("an error inside a task is re-raised by await with the task's traceback", function()
  local h = task.spawn(function()
    task.sleep(0.001)
    error("kaboom")
  end)
  local err = t.raises(function() task.await(h) end, "kaboom")
  t.contains(err, "task_test.lua")
  t.contains(err, "stack traceback")
  t.eq(h:status(), "error")
end)

t.test("error tables keep their identity and fields through await", function()
  local e = { kind = "quota", message = "no money" }
  local h = task.spawn(function() error(e) end)
  local ok, got = pcall(task.await, h)
  t.eq(ok, false)
  t.eq(got, e)
  t.eq(got.kind, "quota")
end)

t.test("gather cancels the remaining tasks when one fails", function()
  local slow = task.spawn(function() task.sleep(5) end)
  local bad = task.spawn(function() error("first fails") end)
  t.raises(function() task.gather({ bad, slow }) end, "first fails")
  task.sleep(0)
  t.eq(slow:status(), "cancelled")
end)

t.test("cancel stops a task waiting on a timer and frees the operation", function()
  local reached = false
  local h = task.spawn(function()
    task.sleep(10)
    reached = true
  end)
  task.sleep(0.01)
  t.eq(h:status(), "waiting")
  local before = task.stats().ops
  h:cancel()
  task.sleep(0.01)
  t.eq(h:status(), "cancelled")
  t.eq(reached, false)
  t.eq(task.stats().ops, before - 1)
end)

t.test("a cancelled task can clean up with pcall and sees task.CANCELLED", function()
  local seen
  local h = task.spawn(function()
    local ok, err = pcall(task.sleep, 10)
    seen = (not ok) and err == task.CANCELLED
    error(err, 0)
  end)
  task.sleep(0.01)
  h:cancel()
  task.sleep(0.01)
  t.eq(seen, true)
  t.eq(h:status(), "cancelled")
end)

t.test("awaiting a cancelled task raises a clear cancelled error", function()
  local h = task.spawn(task.sleep, 10)
  task.sleep(0)
  h:cancel()
  local err = t.raises(function() task.await(h) end, "was cancelled")
  t.eq(err.kind, "cancelled")
end)

t.test("cancelling a task before it starts means it never runs", function()
  local ran = false
  local h = task.spawn(function() ran = true end)
  h:cancel()
  task.sleep(0.01)
  t.eq(ran, false)
  t.eq(h:status(), "cancelled")
end)

t.test("timeout returns nil, 'timeout' and cancels what fn was waiting on", function()
  local after = false
  local t0 = task.now()
  local ok, why = task.timeout(0.05, function()
    task.sleep(10)
    after = true
  end)
  t.eq(ok, nil); t.eq(why, "timeout")
  t.ok(task.now() - t0 < 1, "timeout took too long")
  task.sleep(0.01)
  t.eq(after, false)
end)

t.test("timeout passes results through when fn finishes in time", function()
  local ok, a, b = task.timeout(1, function(x) task.sleep(0.001) return x, x * 2 end, 21)
  t.eq(ok, true); t.eq(a, 21); t.eq(b, 42)
end)

t.test("timeout re-raises errors of fn", function()
  t.raises(function() task.timeout(1, function() error("inner") end) end, "inner")
end)

t.test("cancelling the caller of timeout cancels the child too", function()
  local child_done = false
  local h = task.spawn(function()
    task.timeout(10, function()
      task.sleep(5)
      child_done = true
    end)
  end)
  task.sleep(0.01)
  h:cancel()
  task.sleep(0.02)
  t.eq(h:status(), "cancelled")
  t.eq(child_done, false)
  t.eq(task.stats().tasks, 1) -- only this test's main task is left
end)

t.test("semaphore serves waiters first come, first served", function()
  local sem = task.semaphore(1)
  local order = {}
  sem:acquire()
  local hs = {}
  for i = 1, 5 do
    hs[i] = task.spawn(function()
      sem:acquire()
      order[#order + 1] = i
      task.sleep(0.001)
      sem:release()
    end)
    task.sleep(0) -- make sure they queue in order
  end
  sem:release()
  task.gather(hs)
  t.same(order, { 1, 2, 3, 4, 5 })
end)

t.test("semaphore bounds concurrency", function()
  local sem = task.semaphore(3)
  local inside, peak = 0, 0
  local hs = {}
  for i = 1, 20 do
    hs[i] = task.spawn(function()
      sem:with(function()
        inside = inside + 1
        peak = math.max(peak, inside)
        task.sleep(0.002)
        inside = inside - 1
      end)
    end)
  end
  task.gather(hs)
  t.eq(peak, 3)
  t.eq(sem.count, 3)
end)

t.test("semaphore:with releases the permit when fn raises", function()
  local sem = task.semaphore(1)
  t.raises(function() sem:with(function() error("oops") end) end, "oops")
  t.eq(sem.count, 1)
end)

t.test("a cancelled waiter leaves the semaphore queue", function()
  local sem = task.semaphore(0)
  local h = task.spawn(function() sem:acquire() end)
  task.sleep(0.001)
  t.eq(#sem.waiters, 1)
  h:cancel()
  task.sleep(0.001)
  t.eq(#sem.waiters, 0)
  sem:release()
  t.eq(sem.count, 1)
end)

t.test("queue delivers items in order to waiting and later getters", function()
  local q = task.queue()
  local got = {}
  local consumer = task.spawn(function()
    for _ = 1, 4 do got[#got + 1] = q:get() end
  end)
  task.sleep(0.001)
  q:put("a"); q:put("b")
  task.sleep(0.001)
  q:put("c"); q:put("d")
  task.await(consumer)
  t.same(got, { "a", "b", "c", "d" })
end)

t.test("engine calls work inside coroutine.wrap created by user code", function()
  local gen = coroutine.wrap(function(n)
    for i = 1, n do
      task.sleep(0.001)
      coroutine.yield(i)
    end
    return "end"
  end)
  t.eq(gen(3), 1); t.eq(gen(), 2); t.eq(gen(), 3); t.eq(gen(), "end")
end)

t.test("engine calls work inside nested user coroutines with resume", function()
  local inner = coroutine.create(function()
    task.sleep(0.001)
    coroutine.yield("inner-yield")
    task.sleep(0.001)
    return "inner-done"
  end)
  local outer = coroutine.create(function()
    local _, a = coroutine.resume(inner)
    local _, b = coroutine.resume(inner)
    coroutine.yield(a)
    return b
  end)
  t.same({ coroutine.resume(outer) }, { true, "inner-yield" })
  t.same({ coroutine.resume(outer) }, { true, "inner-done" })
end)

t.test("waiting inside table.sort's comparator is a clear error", function()
  t.raises(function()
    table.sort({ 3, 1, 2 }, function(a, b)
      task.sleep(0)
      return a < b
    end)
  end, "cannot wait here")
  t.eq(task.stats().ops, 0)
end)

t.test("waiting inside a string.gsub callback is a clear error", function()
  t.raises(function() return ("ab"):gsub(".", function(c) task.sleep(0) return c end) end, "cannot wait here")
end)

t.test("waiting inside a Lua metamethod works (5.4 metamethods can yield)", function()
  local obj = setmetatable({}, { __index = function() task.sleep(0.001) return 1 end })
  t.eq(obj.x, 1)
end)

t.test("user coroutine resumed from a non-yieldable place gets an error, not a hang", function()
  local co = coroutine.wrap(function() task.sleep(0.001) return 1 end)
  t.raises(function()
    table.sort({ 2, 1 }, function(a, b)
      co()
      return a < b
    end)
  end, "cannot wait here")
  task.sleep(0.001) -- the abandoned timer closes on the next loop turn
  t.eq(task.stats().ops, 0)
end)

t.test("sleep rejects negative and NaN durations", function()
  t.raises(function() task.sleep(-1) end, ">= 0")
  t.raises(function() task.sleep(0 / 0) end, ">= 0")
end)

t.test("a task cannot await itself", function()
  local h
  h = task.spawn(function()
    task.sleep(0)
    return task.await(h)
  end)
  t.raises(function() task.await(h) end, "cannot await itself")
end)

t.test("10,000 concurrent tasks all finish with correct results", function()
  local hs = {}
  for i = 1, 10000 do hs[i] = task.spawn(function(k) task.sleep(0.01) return k end, i) end
  local r = task.gather(hs)
  t.eq(#r, 10000)
  local sum = 0
  for _, v in ipairs(r) do sum = sum + v end
  t.eq(sum, 10000 * 10001 // 2)
  t.eq(task.stats().ops, 0)
end)

t.test("engine exits 1 and names file:line for an error in an unawaited task", function()
  local code, out = run_snippet([[
local task = require "mk.services.task"
task.spawn(function() task.sleep(0.001) error("lost child") end)
task.sleep(0.02)
return 0]])
  t.eq(code, 1)
  t.contains(out, ":2: lost child")
end)

t.test("engine reports a deadlock instead of hanging", function()
  local code, out = run_snippet([[return require("mk.services.task").queue():get()]])
  t.eq(code, 1)
  t.contains(out, "deadlock")
end)

t.test("script exit codes: runtime error 1, syntax error 1, missing file 2", function()
  local code, out = run_snippet("local x = nil; return x.y")
  t.eq(code, 1); t.contains(out, ":1: attempt to index")
  code, out = run_snippet("local = 1")
  t.eq(code, 1); t.contains(out, ":1:")
  local p = io.popen(MK .. " script /nonexistent/x.lua 2>&1; echo rc=$?")
  out = p:read("a"); p:close()
  t.contains(out, "rc=2"); t.contains(out, "cannot open script")
end)

t.test("main returning leaves no task running: pending tasks are cancelled", function()
  local code, out = run_snippet([[
local task = require "mk.services.task"
task.spawn(function() task.sleep(100) print("should not print") end)
task.sleep(0.01)
print("main done")
return 0]])
  t.eq(code, 0)
  t.contains(out, "main done")
  t.ok(not out:find("should not print"), "pending task ran")
end)

return t.run()
