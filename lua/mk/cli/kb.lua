--- mkengine kb search QUERY... [-k N] [--kb DIR]... [--only] [--json]
--- mkengine kb stats [--kb DIR]... [--only]
--- Search the knowledge base the agents retrieve from, as they would.
local cli = require("mk.cli")
local retrieve = require("mk.services.retrieve")

local M = {
  summary = "search the knowledge base (kb/, kb/learned/, extra dirs) with BM25",
  usage = "usage: mkengine kb search QUERY... [-k N] [--target T] [--kb DIR]... [--only] [--no-learned]\n"
    .. "                          [--lines N] [--json]\n"
    .. "       mkengine kb stats [--kb DIR]... [--only] [--no-learned]",
  help = [==[
search   rank passages for QUERY (the words may be given unquoted) and print,
         best first, each passage's score, title (its heading path), file:line
         and first lines.
stats    print the number of files, chunks and distinct terms indexed.

options:
  -k N         number of passages (default 5)
  --target T   only notes for target T (c, pallas) and general ones, as the
               agents of a run on that target see them
  --kb DIR     also search DIR (repeatable); $MKENGINE_KB_DIRS (':'-separated)
               is always added
  --only       search only the --kb directories, not the engine's kb/
  --no-learned leave out what runs learned (kb/learned/ and learn dirs)
  --lines N    first lines shown per passage (default 3)
  --json       print the passages as JSON: [{file, title, line, score, text}]]==],
}

local spec = {
  flags = { only = true, json = true, no_learned = true },
  options = { k = "number", kb = "list", lines = "number", target = "string" },
  short = { k = "k" },
}

local function dirs_for(opts)
  if opts.only then
    if not opts.kb then cli.usage_error("--only needs at least one --kb DIR", M.usage) end
    return opts.kb
  end
  local dirs = retrieve.default_dirs { learned = not opts.no_learned }
  for _, d in ipairs(opts.kb or {}) do dirs[#dirs + 1] = d end
  return dirs
end

local function first_lines(text, n, width)
  local out = {}
  if n == 0 then return out end
  for line in text:gmatch("[^\n]+") do
    if line:find("%S") then
      if #line > width then
        line = line:sub(1, width)
        while #line > 0 and line:byte(#line) & 0xC0 == 0x80 do line = line:sub(1, -2) end
        line = line:sub(1, -2) .. "…"
      end
      out[#out + 1] = line
      if #out == n then break end
    end
  end
  return out
end

local function search(opts, words)
  local query = table.concat(words, " ")
  if not query:find("%S") then cli.usage_error("missing QUERY", M.usage) end
  local k = opts.k or 5
  if math.type(k) ~= "integer" and k == math.floor(k) then k = math.tointeger(k) end
  if math.type(k) ~= "integer" or k < 1 then cli.usage_error("-k needs a positive integer", M.usage) end
  local nlines = math.tointeger(opts.lines or 3)
  if not nlines or nlines < 0 then cli.usage_error("--lines needs a non-negative integer", M.usage) end
  local ps, err = retrieve.passages(query, { k = k, max_chars = math.huge, dirs = dirs_for(opts), target = opts.target,
    learned = not opts.no_learned })
  if not ps then cli.input_error(err.message) end
  if opts.json then
    local list = {}
    for i, p in ipairs(ps) do
      list[i] = { file = retrieve.display_path(p.file), title = p.title, line = p.line, score = p.score, text = p.text }
    end
    io.stdout:write(#list == 0 and "[]" or cli.json(list), "\n")
    return 0
  end
  if #ps == 0 then
    io.stdout:write("no passages match '", query, "'\n")
    return 1
  end
  for i, p in ipairs(ps) do
    io.stdout:write(string.format("%d. %s  (score %.2f)\n   %s:%d\n", i, p.title, p.score,
      retrieve.display_path(p.file), p.line))
    for _, l in ipairs(first_lines(p.text, nlines, 100)) do io.stdout:write("     ", l, "\n") end
    if i < #ps then io.stdout:write("\n") end
  end
  return 0
end

local function stats(opts)
  local dirs = dirs_for(opts)
  local ix, err = retrieve.index(dirs, { learned = not opts.no_learned })
  if not ix then cli.input_error(err.message) end
  local s = ix:stats()
  io.stdout:write(string.format("%d files, %d chunks, %d terms, %d tokens, %d bytes\n",
    s.files, s.chunks, s.terms, s.tokens, s.bytes))
  for _, d in ipairs(dirs) do io.stdout:write("  ", d, "\n") end
  return 0
end

function M.run(args)
  local opts, pos = cli.parse(args, spec, M.usage)
  local sub = table.remove(pos, 1)
  if sub == "search" then return search(opts, pos) end
  if sub == "stats" then
    if #pos > 0 then cli.usage_error("stats takes no arguments", M.usage) end
    return stats(opts)
  end
  if sub == nil then cli.usage_error("missing subcommand (search or stats)", M.usage) end
  cli.usage_error("unknown subcommand '" .. sub .. "'", M.usage)
end

return M
