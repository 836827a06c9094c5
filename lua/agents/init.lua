--- The sub-agents, one module each (`agents.<name>`, with `run(ctx, args)`).
--- This table is what the commands hand to the runner and `ctx`: a
--- researcher swaps an agent by handing in a table with another module in
--- its place (see docs/api/agents.md). `defaults` are the agents'
--- settings (token limits, temperatures, error lengths), each overridable
--- per run with --set NAME=VALUE.
return {
  defaults = require("agents.common").DEFAULTS,
  plan = require("agents.plan"),
  implement = require("agents.implement"),
  fix = require("agents.fix"),
  tests = require("agents.tests"),
  tune = require("agents.tune"),
  profile = require("agents.profile"),
}
