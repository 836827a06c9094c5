--- A tiny test runner for Lua tests run by `mkengine script`. Tests run one
--- after another inside the main task, so they may call engine primitives.
--- A test file ends with `return t.run()`; the last line printed is the
--- summary "N passed, N failed" that ctest and CI read.
local t = { cases = {} }

local function fmt(v)
  if type(v) == "string" then return string.format("%q", v) end
  return tostring(v)
end

--- Register a test case. Name it after the behaviour it pins down.
function t.test(name, fn) t.cases[#t.cases + 1] = { name = name, fn = fn } end

function t.fail(msg) error(msg, 3) end

--- Run a shell command (stderr merged into stdout); returns its exit code
--- and its output.
function t.sh(cmd)
  local p = io.popen(cmd .. " 2>&1; echo \"rc=$?\"")
  local out = p:read("a")
  p:close()
  return tonumber(out:match("rc=(%d+)%s*$")), (out:gsub("rc=%d+%s*$", ""))
end

function t.ok(v, msg)
  if not v then error((msg or "expected a true value") .. ", got " .. fmt(v), 2) end
  return v
end

function t.eq(got, want, msg)
  if got ~= want then
    error(string.format("%sexpected %s, got %s", msg and (msg .. ": ") or "", fmt(want), fmt(got)), 2)
  end
end

function t.near(got, want, tol, msg)
  if type(got) ~= "number" or math.abs(got - want) > tol then
    error(string.format("%sexpected %s ± %s, got %s", msg and (msg .. ": ") or "", fmt(want), fmt(tol), fmt(got)), 2)
  end
end

local function same(a, b, path)
  if type(a) ~= type(b) then return false, path end
  if type(a) ~= "table" then return a == b, path end
  for k, v in pairs(a) do
    local ok, p = same(v, b[k], path .. "." .. tostring(k))
    if not ok then return false, p end
  end
  for k in pairs(b) do
    if a[k] == nil then return false, path .. "." .. tostring(k) end
  end
  return true
end

--- Deep equality of tables (and plain equality of other values).
function t.same(got, want, msg)
  local ok, where = same(got, want, "")
  if not ok then error((msg and (msg .. ": ") or "") .. "values differ at " .. (where == "" and "top" or where), 2) end
end

function t.contains(s, sub, msg)
  if type(s) ~= "string" or not s:find(sub, 1, true) then
    error(string.format("%sexpected %s to contain %s", msg and (msg .. ": ") or "", fmt(s), fmt(sub)), 2)
  end
end

function t.matches(s, pat, msg)
  if type(s) ~= "string" or not s:match(pat) then
    error(string.format("%sexpected %s to match %s", msg and (msg .. ": ") or "", fmt(s), fmt(pat)), 2)
  end
end

--- Assert fn raises; returns the error value. pattern (plain text) must
--- appear in tostring(err) when given.
function t.raises(fn, pattern, ...)
  local ok, err = pcall(fn, ...)
  if ok then error("expected an error" .. (pattern and (" containing " .. fmt(pattern)) or ""), 2) end
  if pattern and not tostring(err):find(pattern, 1, true) then
    error(string.format("expected error containing %s, got %s", fmt(pattern), fmt(tostring(err))), 2)
  end
  return err
end

local made = {}

--- A new private directory for this test file (under $TMPDIR or /tmp),
--- removed when `t.run` ends, whatever the verdict. Use it instead of
--- fs.tmpdir so a run of the suite leaves nothing behind.
---@param prefix string|nil
---@return string
function t.tmpdir(prefix)
  local d = assert(require("mk.fs").tmpdir(prefix or "mk-test"))
  made[#made + 1] = d
  return d
end

-- Frozen tests are read-only files in writable directories: rm_rf removes them.
local function clean()
  local fs = require "mk.fs"
  for _, d in ipairs(made) do fs.rm_rf(d) end
  made = {}
end

--- Skip the current test with a printed reason (only for missing hardware
--- or software such as JAX or a GPU).
function t.skip(reason) error({ skip = reason }, 0) end

function t.run()
  local passed, failed, skipped = 0, 0, 0
  local only = os.getenv("MK_TEST_ONLY")
  for _, c in ipairs(t.cases) do
    if not only or c.name:find(only, 1, true) then
      local ok, err = xpcall(c.fn, function(e)
        if type(e) == "table" and e.skip then return e end
        return debug.traceback(tostring(e), 2)
      end)
      if ok then
        passed = passed + 1
        print("ok   " .. c.name)
      elseif type(err) == "table" and err.skip then
        skipped = skipped + 1
        print("skip " .. c.name .. ": " .. err.skip)
      else
        failed = failed + 1
        print("FAIL " .. c.name .. "\n  " .. tostring(err):gsub("\n", "\n  "))
      end
    end
  end
  clean()
  print(string.format("%d passed, %d failed, %d skipped", passed, failed, skipped))
  return failed == 0 and 0 or 1
end

return t
