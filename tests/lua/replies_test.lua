-- Code extraction from model replies, on a corpus of realistic replies
-- (tests/lua/replies/): prose around the code, several blocks, a usage
-- example after the kernel, a diff before the full file, a reply cut by
-- the token limit, indented fences, JSON-wrapped code, fence variants
-- (python3, Python, c++, C, ~~~, ````), CRLF line ends and a bare file.
local t = dofile("tests/lua/lib/t.lua")
local fs = require "mk.fs"
local common = require "agents.common"

local DIR = "tests/lua/replies/"
local cases = dofile(DIR .. "cases.lua")

t.test("the corpus has at least 15 replies", function()
  t.ok(#cases >= 15, #cases .. " cases")
end)

for _, c in ipairs(cases) do
  local name, lang, entry = c[1], c[2], c[3]
  t.test("reply " .. name .. " yields the expected " .. lang .. " code", function()
    local text = assert(fs.read(DIR .. name .. ".txt"))
    local got = common.extract_code(text, lang, entry)
    if c.none then
      t.eq(got, nil)
      t.ok(not fs.exists(DIR .. name .. ".expected"), "a no-code case has no .expected file")
    else
      t.eq(got, assert(fs.read(DIR .. name .. ".expected")))
    end
    t.eq(common.changed_line(text), c.changed)
  end)
end

t.test("every reply file of the corpus is a listed case", function()
  local listed = {}
  for _, c in ipairs(cases) do listed[c[1] .. ".txt"] = true end
  for _, f in ipairs(fs.list(DIR)) do
    if f:match("%.txt$") then t.ok(listed[f], f .. " is not in cases.lua") end
  end
end)

t.test("the kernel is chosen over a longer block that does not define the entry", function()
  local text = "```c\nstatic int big_table[] = {\n" .. string.rep("  1, 2, 3, 4, 5, 6, 7, 8,\n", 40) .. "};\n```\n" ..
    "```c\nvoid kernel(float *o) { o[0] = 1; }\n```\n"
  t.eq(common.extract_code(text, "c", "kernel"), "void kernel(float *o) { o[0] = 1; }\n")
end)

t.test("without a defining block the longest block in the language wins", function()
  local text = "```c\nint a;\n```\n```c\nint longer_one = 2;\n```\n```python\nprint('not c at all, and longest')\n```\n"
  t.eq(common.extract_code(text, "c", "kernel"), "int longer_one = 2;\n")
end)
return t.run()
