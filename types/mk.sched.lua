---@meta mk.sched
-- engine/sched.c: the coroutine scheduler under mk.services.task (docs/api/task.md);
-- strategies use mk.services.task, which wraps these.

---@class mk.sched.task
local task = {}
function task:cancel() end
---@return "pending"|"ready"|"running"|"waiting"|"ok"|"error"|"cancelled"
function task:status() end
---@return boolean
function task:done() end

---@class mk.sched
---@field CANCELLED any the error a cancelled task is resumed with
---@field WAIT any
local sched = {}
---@param fn function
---@return mk.sched.task
function sched.spawn(fn, ...) end
---@param t mk.sched.task
function sched.cancel(t) end
---@return mk.sched.task|nil
function sched.current() end
---@return number seconds (monotonic)
function sched.now() end
---@param seconds number
function sched.sleep(seconds) end
function sched.suspend() end
--- Resume a task waiting in suspend() with these values; false when it was not waiting.
---@param t mk.sched.task
---@return boolean
function sched.wake(t, ...) end
--- Wait for a task; returns true and its results, or false and its error.
---@param t mk.sched.task
---@return boolean ok
function sched.join(t) end
---@return {tasks: integer, ops: integer, ready: integer}
function sched.stats() end
--- Called by a task that is being torn down (mk.services.task uses it).
function sched.abandon() end

return sched
