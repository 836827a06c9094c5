-- scripts/fnlen.py, the function-length check of the test command, on
-- hand-written files: C braces in strings, comments, character literals,
-- initialisers and macros do not count; each language's functions are
-- measured from their first line to their last; over the limit fails
-- unless allowed, an allowed function is still printed, and a stale or
-- reasonless allow-list entry is an error.
local t = dofile("tests/lua/lib/t.lua")
local fs = require "mk.fs"
local proc = require "mk.proc"

local dir = fs.realpath(t.tmpdir("fnlen-test"))

-- n lines of body
local function body(n, line)
  local l = {}
  for i = 1, n do l[i] = line end
  return table.concat(l, "\n")
end

local C = dir .. "/x.c"
fs.write(C, table.concat({
  "/* a { in a comment } { */",
  "#define OPEN {",
  "struct pair { int a, b; };",
  "static const int table[] = {1, 2, 3};",
  "static int short_one(int x) { return x + '{'; }",
  "int long_one(int n) {", -- line 6: 1 + 1 + 78 + 1 = 81 lines
  '  const char *s = "}}} \\" {";',
  body(78, "  n++; // }"),
  "}",
  "static int",
  "eighty(int n) {", -- the name's line counts: 1 + 78 + 1 = 80 lines
  body(78, "  n++;"),
  "}",
}, "\n") .. "\n")

local LUA = dir .. "/x.lua"
fs.write(LUA, table.concat({
  "local M = {}",
  "function M.small() return 1 end",
  "local function long_lua()", -- 1 + 79 + 1 = 81
  body(79, "  local _ = '}' -- end"),
  "end",
  "M.long = long_lua",
  "return M",
}, "\n") .. "\n")

local PY = dir .. "/x.py"
fs.write(PY, table.concat({
  "import functools",
  "",
  "",
  "@functools.lru_cache()", -- the decorator is the first line: 1 + 1 + 79 = 81
  "def long_py():",
  body(79, "    x = '}'"),
  "",
  "",
  "def short_py():",
  "    return 1",
}, "\n") .. "\n")

local FILES = { C, LUA, PY }

local function fnlen(args, allow)
  local argv = { "python3", "scripts/fnlen.py", "--files", "--top", "50", "--allow", allow or (dir .. "/none.txt") }
  for _, a in ipairs(args) do argv[#argv + 1] = a end
  for _, f in ipairs(FILES) do argv[#argv + 1] = f end
  return assert(proc.run { argv = argv, timeout = 60 })
end

-- {"path:name" = length} from the printed rows
local function lengths(out)
  local m = {}
  for n, path, name in out:gmatch("\n?%s*(%d+)  [ overa]+  ([^:\n]+):%d+  ([%w_.:]+)") do m[path .. ":" .. name] = tonumber(n) end
  return m
end

t.test("fnlen/functions are measured from first to last line in C, Lua and Python", function()
  local r = fnlen { "--report" }
  t.eq(r.code, 0, r.stderr)
  local m = lengths(r.stdout)
  t.eq(m[C .. ":long_one"], 81)
  t.eq(m[C .. ":eighty"], 80)
  t.eq(m[C .. ":short_one"], 1)
  t.eq(m[C .. ":pair"], nil, "a struct is no function")
  t.eq(m[LUA .. ":long_lua"], 81)
  t.eq(m[LUA .. ":M.small"], 1)
  t.eq(m[PY .. ":long_py"], 81)
  t.eq(m[PY .. ":short_py"], 2)
  t.contains(r.stdout, "fnlen: 7 functions measured, 3 over 80 lines (0 allowed)")
end)

t.test("fnlen/a function over the limit fails the check; --limit moves it", function()
  local r = fnlen {}
  t.eq(r.code, 1, r.stderr)
  t.matches(r.stdout, "   81  over  [^\n]*x%.c:6  long_one")
  t.matches(r.stdout, "   80        [^\n]*x%.c:88  eighty")
  t.eq(fnlen({ "--limit", "81" }).code, 0)
end)

t.test("fnlen/an allowed function is still printed with its reason", function()
  local allow = dir .. "/allow.txt"
  fs.write(allow, "# why each is long\n" .. C .. ":long_one  one table\n" .. LUA .. ":long_lua  a dispatch\n"
    .. PY .. ":long_py  generated\n")
  local r = fnlen({}, allow)
  t.eq(r.code, 0, r.stdout .. r.stderr)
  t.matches(r.stdout, "   81  over  [^\n]*x%.c:6  long_one  allowed: one table")
  t.contains(r.stdout, "3 over 80 lines (3 allowed)")
end)

t.test("fnlen/a stale or reasonless allow-list entry is an error", function()
  local allow = dir .. "/stale.txt"
  fs.write(allow, C .. ":long_one  x\n" .. LUA .. ":long_lua  x\n" .. PY .. ":long_py  x\n" .. C .. ":eighty  x\n")
  local r = fnlen({}, allow)
  t.eq(r.code, 1)
  t.contains(r.stdout, "allow-list entry " .. C .. ":eighty matches no function over 80 lines; remove it")
  fs.write(allow, C .. ":long_one\n")
  r = fnlen({}, allow)
  t.eq(r.code, 2)
  t.contains(r.stderr, "want `path:function  reason`")
end)

return t.run()
