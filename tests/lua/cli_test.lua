-- mk.cli.parse: flags, options with a value, numbers, lists, `--`, and
-- usage errors (exit 2) that name the option as the user types it.
local t = dofile("tests/lua/lib/t.lua")
local cli = require "mk.cli"

local SPEC = { flags = { dry_run = true, quiet = true }, options = { max_nodes = "number", set = "list", model = "string" },
  short = { q = "quiet" } }

t.test("parse reads flags, options, numbers, lists and positionals", function()
  local o, pos = cli.parse({ "--dry-run", "-q", "--max-nodes=12", "--set", "a=1", "--set=b=2", "--model", "m", "beam",
    "--", "--not-an-option" }, SPEC)
  t.eq(o.dry_run, true); t.eq(o.quiet, true); t.eq(o.max_nodes, 12); t.same(o.set, { "a=1", "b=2" }); t.eq(o.model, "m")
  t.same(pos, { "beam", "--not-an-option" })
end)

t.test("usage errors name the option as typed, with dashes, and exit 2", function()
  local function err_of(args)
    local e = t.raises(function() cli.parse(args, SPEC, "usage: x") end)
    t.eq(e.exit, 2)
    return tostring(e)
  end
  t.eq(err_of({ "--dry-run=yes" }), "option --dry-run takes no value")
  t.eq(err_of({ "--max-nodes" }), "option --max-nodes needs a value")
  t.eq(err_of({ "--max-nodes", "many" }), "option --max-nodes needs a number, got 'many'")
  t.eq(err_of({ "--nope" }), "unknown option --nope")
end)

t.test("parsed: nil stays nil, a value is read, a refused text is a usage error", function()
  local budget = require("mk.search.budget")
  t.eq(cli.parsed(nil, budget.parse), nil)
  t.eq(cli.parsed("tokens=1000", budget.parse).tokens, 1000)
  local e = t.raises(function() cli.parsed("nonsense=3", budget.parse, "usage: x") end)
  t.eq(e.exit, 2); t.eq(e.hint, "usage: x")
end)

return t.run()
