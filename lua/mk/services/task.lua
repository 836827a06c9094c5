--- mk.services.task: concurrent tasks on the engine's loop. Engine calls (sleep,
--- HTTP, processes, ...) read as synchronous code; any number of tasks wait
--- at once. Built on the C scheduler `mk.sched`; everything here is policy
--- in Lua: await, gather, timeout, semaphores, queues.
local sched = require("mk.sched")
local util = require("mk.services.util")

local task = {}
local pack, unpack = table.pack, table.unpack
local WAIT = sched.WAIT

--- The error value raised inside a task that was cancelled. Catching it
--- with pcall is allowed for cleanup, but rethrow it.
task.CANCELLED = sched.CANCELLED

-- Engine primitives suspend by yielding WAIT. A coroutine created by user
-- code must pass that yield on to the task (and resume its body when the
-- task is resumed), so coroutine.resume/wrap are wrapped once per engine.
local co_resume, co_yield, co_status, co_create = coroutine.resume, coroutine.yield, coroutine.status, coroutine.create
local co_isyieldable, co_close = coroutine.isyieldable, coroutine.close

local function resume(co, ...)
  local r = pack(co_resume(co, ...))
  while r[1] and r[2] == WAIT and co_status(co) == "suspended" do
    if not co_isyieldable() then
      sched.abandon()
      return false, "engine operation cannot wait here: the coroutine that called it was resumed from "
        .. "a place that cannot yield (a metamethod, an iterator or a C function such as table.sort)"
    end
    co_yield(WAIT)
    r = pack(co_resume(co))
  end
  return unpack(r, 1, r.n)
end

if not rawget(coroutine, "mk_wrapped") then
  coroutine.resume = resume
  coroutine.wrap = function(f)
    local co = co_create(f)
    return function(...)
      local r = pack(resume(co, ...))
      if r[1] then return unpack(r, 2, r.n) end
      if co_status(co) == "dead" then co_close(co) end
      error(r[2], 0)
    end
  end
  rawset(coroutine, "mk_wrapped", true)
end

--- Start fn(...) as a new task; it runs from the next loop iteration.
---@param fn function
---@return userdata handle with :cancel(), :status(), :done(), .id
function task.spawn(fn, ...)
  if type(fn) ~= "function" then error("task.spawn: argument 1 must be a function, got " .. type(fn), 2) end
  return sched.spawn(fn, ...)
end

--- Seconds on a monotonic clock (for measuring intervals).
task.now = sched.now

--- Suspend the calling task for `seconds` (>= 0).
---@param seconds number
function task.sleep(seconds)
  if seconds ~= nil and (type(seconds) ~= "number" or seconds < 0 or seconds ~= seconds) then
    error("task.sleep: seconds must be a number >= 0, got " .. tostring(seconds), 2)
  end
  return sched.sleep(seconds or 0)
end

--- Let other ready tasks run, then continue.
function task.yield() return sched.sleep(0) end

--- The running task's handle (nil outside tasks).
task.current = sched.current

--- "SIGINT", "SIGTERM" or "SIGHUP" once the engine received one (every task was then
--- cancelled and the exit code will be 128 + the signal), else nil.
task.signal = sched.signal

local function awaited_error(h, err, tb)
  if type(err) == "string" then
    return string.format("%s\n(in %s)\n%s", err, tostring(h):gsub(" %(.*", ""), (tb or ""):gsub("^[^\n]*\n?", ""))
  end
  if type(err) == "table" and err.traceback == nil and tb then
    pcall(function() err.traceback = tb end)
  end
  return err
end

local function cancelled_error(h)
  return util.error({ kind = "cancelled", message = "awaited " .. tostring(h):gsub(" %(.*", "") .. " was cancelled" })
end

--- Wait for a task to end and return its results. Re-raises its error
--- (string errors get the task's traceback appended); awaiting a cancelled
--- task raises {kind = "cancelled"}.
function task.await(h)
  local r = pack(sched.join(h))
  if r[1] == "ok" then return unpack(r, 2, r.n) end
  if r[1] == "error" then error(awaited_error(h, r[2], r[3]), 0) end
  error(cancelled_error(h), 0)
end

--- Like await but never raises: returns ok (boolean), results-or-error.
function task.try_await(h)
  local r = pack(sched.join(h))
  if r[1] == "ok" then return true, unpack(r, 2, r.n) end
  if r[1] == "error" then return false, awaited_error(h, r[2], r[3]) end
  return false, cancelled_error(h)
end

--- Await every handle in order; returns a table whose i-th element is the
--- first result of the i-th task. If one fails, the rest are cancelled and
--- the error is raised.
---@param handles userdata[]
---@return table
function task.gather(handles)
  local out = {}
  for i, h in ipairs(handles) do
    local ok, v = task.try_await(h)
    if not ok then
      for j = i + 1, #handles do handles[j]:cancel() end
      error(v, 0)
    end
    out[i] = v
  end
  return out
end

--- Call fn(item, i) for every item of the list `items`, at most `n` calls
--- at once, started in list order (the first items finish first); returns
--- the results in item order (a call that returned nil leaves a hole).
--- Inside a task the calls run in `n` child tasks; outside one they run
--- one after another in the caller. When a call raises, no further item
--- is started, the calls still running are cancelled and the error is raised.
---@param items table
---@param n integer
---@param fn function
---@return table
function task.map(items, n, fn)
  if type(items) ~= "table" or type(fn) ~= "function" then error("task.map: (items, n, fn) expected", 2) end
  n = math.tointeger(n)
  if not n or n < 1 then error("task.map: n must be an integer >= 1", 2) end
  local out, next_i, hs, failure = {}, 0, {}, nil
  local function worker()
    while not failure and next_i < #items do
      next_i = next_i + 1
      local i = next_i
      local ok, r = pcall(fn, items[i], i)
      if not ok then
        if not failure then -- the first error stops the others
          failure = { err = r }
          local me = sched.current()
          for _, h in ipairs(hs) do if not me or h.id ~= me.id then h:cancel() end end
        end
        error(r, 0)
      end
      out[i] = r
    end
  end
  if not sched.current() then
    worker()
    return out
  end
  for w = 1, math.min(n, #items) do hs[w] = task.spawn(worker) end
  local ok, err = pcall(task.gather, hs)
  if not ok then
    for _, h in ipairs(hs) do h:cancel() end
    for _, h in ipairs(hs) do task.try_await(h) end -- every worker's end is seen: none is left unawaited
    error(failure and failure.err or err, 0)
  end
  return out
end

--- Run fn(...) as a child task with a time limit. Returns true, results...
--- or nil, "timeout" (the child was cancelled, with whatever it was waiting
--- on). If the caller is cancelled, the child is cancelled too.
---@param seconds number
---@param fn function
function task.timeout(seconds, fn, ...)
  if type(seconds) ~= "number" or seconds < 0 or seconds ~= seconds then
    error("task.timeout: seconds must be a number >= 0, got " .. tostring(seconds), 2)
  end
  local h = sched.spawn(fn, ...)
  local fired = false
  local timer = sched.spawn(function()
    sched.sleep(seconds)
    fired = true
    h:cancel()
  end)
  local ok, r = pcall(function() return pack(sched.join(h)) end)
  timer:cancel()
  if not ok then -- we were cancelled while waiting
    h:cancel()
    error(r, 0)
  end
  if r[1] == "ok" then return true, unpack(r, 2, r.n) end
  if r[1] == "cancelled" and fired then return nil, "timeout" end
  if r[1] == "error" then error(awaited_error(h, r[2], r[3]), 0) end
  error(cancelled_error(h), 0)
end

--- Cancel a task (no-op if it has ended).
function task.cancel(h) return h:cancel() end

-- A FIFO of waiting tasks shared by semaphores and queues.
local function wait_in(waiters)
  local me = sched.current()
  if not me then error("cannot wait outside a task", 3) end
  waiters[#waiters + 1] = me
  local ok, a, b = pcall(sched.suspend)
  if not ok then
    for i, w in ipairs(waiters) do
      if w == me then table.remove(waiters, i) break end
    end
    error(a, 0)
  end
  return a, b
end

local function wake_first(waiters, ...)
  while #waiters > 0 do
    local w = table.remove(waiters, 1)
    if sched.wake(w, ...) then return true end
  end
  return false
end

local Semaphore = {}
Semaphore.__index = Semaphore

--- A counting semaphore with `n` permits; waiters are served first come,
--- first served.
---@param n integer
function task.semaphore(n)
  if math.type(n) ~= "integer" or n < 0 then error("task.semaphore: n must be an integer >= 0", 2) end
  return setmetatable({ count = n, waiters = {} }, Semaphore)
end

function Semaphore:acquire()
  if self.count > 0 and #self.waiters == 0 then
    self.count = self.count - 1
    return
  end
  wait_in(self.waiters) -- on cancellation it leaves the queue and re-raises
end

function Semaphore:release()
  -- hand the permit straight to the first waiter, so it cannot be overtaken
  if not wake_first(self.waiters, true) then self.count = self.count + 1 end
end

--- acquire, call fn(...), release (also when fn raises).
function Semaphore:with(fn, ...)
  self:acquire()
  local r = pack(pcall(fn, ...))
  self:release()
  if not r[1] then error(r[2], 0) end
  return unpack(r, 2, r.n)
end

local Queue = {}
Queue.__index = Queue

--- An unbounded channel: put never waits, get waits for an item.
function task.queue()
  return setmetatable({ items = {}, first = 1, last = 0, waiters = {} }, Queue)
end

function Queue:put(v)
  if wake_first(self.waiters, v) then return end
  self.last = self.last + 1
  self.items[self.last] = v
end

function Queue:get()
  if self.first <= self.last then
    local v = self.items[self.first]
    self.items[self.first] = nil
    self.first = self.first + 1
    return v
  end
  return (wait_in(self.waiters))
end

function Queue:len() return self.last - self.first + 1 end

--- Scheduler counters: {tasks = alive, ops = operations in flight, ready = queued}.
task.stats = sched.stats

return task
