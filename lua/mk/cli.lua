--- mk.cli: the `mkengine` command line. Each command is a module
--- `mk.cli.<name>` (file lua/mk/cli/<name>.lua) returning
---   { summary = "one line for --help", usage = "mkengine name ARGS...",
---     run = function(args) ... return exit_code end }
--- Commands are discovered from that directory, so `mkengine --help` lists
--- exactly the commands that exist.
local fs = require("mk.fs")
local util = require("mk.services.util")
local cjson = require("cjson")
local home = require("mk.home")
local utf8_text = require("mk.services.text")

local cli = {}

--- Raise a usage error: printed as one line plus a hint, exit code 2.
---@param msg string
---@param usage string|nil
function cli.usage_error(msg, usage)
  util.raise({ exit = 2, message = msg, hint = usage })
end

--- Raise an input error (bad task, bad run dir): one line, exit code 2.
function cli.input_error(msg)
  util.raise({ exit = 2, message = msg })
end

--- Parse options. spec.flags = {name = true}; spec.options = {name = "string"|
--- "number"|"list"}; spec.short = {k = "name"}. `--name=value` and `--name
--- value` both work; `--` ends options. Returns opts, positionals.
---@param args string[]
---@param spec table
---@param usage string|nil
function cli.parse(args, spec, usage)
  local opts, pos = {}, {}
  local flags, options, short = spec.flags or {}, spec.options or {}, spec.short or {}
  local i = 1
  while i <= #args do
    local a = args[i]
    if a == "--" then
      for j = i + 1, #args do pos[#pos + 1] = args[j] end
      break
    end
    local name, value = a:match("^%-%-([%w%-_]+)=(.*)$")
    if not name then name = a:match("^%-%-([%w%-_]+)$") end
    if not name and a:match("^%-%a$") then name = short[a:sub(2)] or a:sub(2) end
    if name then
      name = name:gsub("%-", "_")
      local shown = "--" .. name:gsub("_", "-") -- as the user types it
      if flags[name] then
        if value then cli.usage_error("option " .. shown .. " takes no value", usage) end
        opts[name] = true
      elseif options[name] then
        if not value then
          i = i + 1
          value = args[i]
          if value == nil then cli.usage_error("option " .. shown .. " needs a value", usage) end
        end
        local kind = options[name]
        if kind == "number" then
          local n = tonumber(value)
          if not n then cli.usage_error("option " .. shown .. " needs a number, got '" .. value .. "'", usage) end
          opts[name] = n
        elseif kind == "list" then
          opts[name] = opts[name] or {}
          table.insert(opts[name], value)
        else
          opts[name] = value
        end
      else
        cli.usage_error("unknown option " .. a, usage)
      end
    else
      pos[#pos + 1] = a
    end
    i = i + 1
  end
  return opts, pos
end

local function commands()
  local dir = home.path("lua/mk/cli")
  local names = {}
  for _, f in ipairs(fs.list(dir) or {}) do
    local n = f:match("^([%w_]+)%.lua$")
    if n then names[#names + 1] = n end
  end
  return names
end

function cli.help()
  local lines = {
    "mkengine " .. home.version .. " — a Lua-scriptable agent engine for generating and optimising kernels",
    "",
    "usage: mkengine COMMAND [ARGS...]",
    "",
    "commands:",
  }
  for _, n in ipairs(commands()) do
    local ok, m = pcall(require, "mk.cli." .. n)
    if ok and type(m) == "table" and m.summary then
      lines[#lines + 1] = string.format("  %-10s %s", n, m.summary)
    end
  end
  lines[#lines + 1] = ""
  lines[#lines + 1] = "options: --help, --version.  'mkengine COMMAND --help' describes one command."
  return table.concat(lines, "\n")
end

--- `text` read by `parse` (a function returning value | nil, {message}),
--- nil when text is nil; a text parse refuses is a usage error (exit 2).
---@param text string|nil
---@param parse function
---@param usage string|nil
function cli.parsed(text, parse, usage)
  if text == nil then return nil end
  local v, err = parse(text)
  if v == nil then cli.usage_error(err.message, usage) end
  return v
end

--- Fail with one line (a run or engine failure, not bad input): exit code 1.
function cli.fail(msg)
  util.raise({ exit = 1, message = msg:match("^[^\n]*") })
end

--- JSON text for stdout: valid UTF-8 whatever a model, a compiler or a
--- kernel wrote (invalid bytes become U+FFFD).
---@param v any
function cli.json(v)
  return cjson.encode(utf8_text.clean(v))
end

--- Entry point called by the C main with the raw argv (without argv[0]).
function cli.main(args)
  local cmd = args[1]
  if cmd == nil then
    io.stderr:write(cli.help(), "\n")
    return 2
  end
  if cmd == "--help" or cmd == "-h" or cmd == "help" then
    io.stdout:write(cli.help(), "\n")
    return 0
  end
  if cmd == "--version" or cmd == "-V" then
    io.stdout:write("mkengine ", home.version, "\n")
    return 0
  end
  if not cmd:match("^[%w_]+$") or not fs.exists(home.path("lua/mk/cli/" .. cmd .. ".lua")) then
    cli.usage_error("unknown command '" .. cmd .. "'", "run 'mkengine --help' for the list of commands")
  end
  local m = require("mk.cli." .. cmd)
  local rest = table.move(args, 2, #args, 1, {})
  if rest[1] == "--help" or rest[1] == "-h" then
    io.stdout:write(m.usage or ("mkengine " .. cmd), "\n")
    if m.help then io.stdout:write("\n", m.help, "\n") end
    return 0
  end
  local code = m.run(rest)
  return math.tointeger(code) or 0
end

return cli
