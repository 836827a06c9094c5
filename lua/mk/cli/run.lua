--- mkengine run STRATEGY TASK [options]
local cli = require "mk.cli"

local M = {
  summary = "run a search strategy on a task (writes a run directory)",
  usage = "usage: mkengine run STRATEGY TASK [--model SPEC] [--set KEY=VALUE]... [--seed N] [--run-dir DIR]\n"
    .. "                    [--budget tokens=N,usd=X,device_s=S,wall_s=S] [--jobs N] [--llm-config FILE]\n"
    .. "                    [--llm-cache rw|ro|off] [--timeout S] [--mem-mb MB] [--workers FILE] [--kb-learn]\n"
    .. "                    [--dump-prompts DIR]\n"
    .. "                    [--quiet] [--json] [--debug] [--ui [--host ADDR] [--port N]]",
  help = [[
STRATEGY  a name in lua/strategies (auto, zeroshot, parallel, beam, evolve, greedy, hitl)
          or a path to your own strategy file
TASK      a task directory (examples/tasks/c/rmsnorm, a JAXBench or MaxKernel task, ...)

--model SPEC        openai:MODEL, gemini:MODEL, anthropic:MODEL, exec:COMMAND, or
                    scripted (the offline scripted test model)
--set KEY=VALUE     strategy option (numbers, true/false, strings), or an agent setting
                    (agent_max_tokens, agent_temperature, ...: docs/api/agents.md); repeatable
--seed N            seed of every random choice (default 1)
--budget ...        stop expanding once any limit is spent
--run-dir DIR       where to write the run (default runs/<time>-<strategy>-<task>/)
--jobs N            compiles at a time (bench and profile runs are exclusive)
--timeout S         limit for each candidate process
--mem-mb MB         memory limit of each harness process (pallas; default: the memory
                    available over jobs + 1, at most 16384 MiB); past it a kernel is unchecked
--workers FILE      evaluate on the workers FILE.lua names (local, ssh, slurm;
                    see docs/workers.md)
--kb-learn          append what worked and failed to kb/learned/ at the end
--dump-prompts DIR  write every model request (system and user prompt) to DIR/NNNN-<agent>.txt
--quiet / --json    no progress line / events as JSON lines on stdout
--debug             a strategy error shows the full traceback (engine frames too)
--ui                serve the run in the browser while it runs (prints the URL; see
                    'mkengine help serve' and docs/ui.md); --host, --port as for serve

Exit code: 0 when a correct kernel was found, 1 when none was (or the run
stopped because the model endpoint did not answer after its retries:
status model_unavailable, 'mkengine resume' continues it), 2 on bad input,
128 + the signal when SIGINT, SIGTERM or SIGHUP stopped it.]],
}

--- Parse the options shared by run, bench and sweep into runner options.
function M.parse(args, usage, extra_flags, extra_options)
  local flags = { quiet = true, json = true, kb_learn = true, debug = true }
  local options = { model = "string", set = "list", seed = "number", run_dir = "string", budget = "string",
    jobs = "number", llm_config = "string", llm_cache = "string", timeout = "number", root = "string",
    workers = "string", mem_mb = "number" }
  for k, v in pairs(extra_flags or {}) do flags[k] = v end
  for k, v in pairs(extra_options or {}) do options[k] = v end
  local o, pos = cli.parse(args, { flags = flags, options = options }, usage)
  local set = {}
  for _, kv in ipairs(o.set or {}) do
    local k, v = kv:match("^([%w_]+)=(.*)$")
    if not k then cli.usage_error("--set needs KEY=VALUE, got '" .. kv .. "'", usage) end
    set[k] = v
  end
  o.set = set
  if o.seed and not math.tointeger(o.seed) then cli.usage_error("--seed must be an integer", usage) end
  o.seed = o.seed and math.tointeger(o.seed)
  if o.llm_cache and not ({ rw = true, ro = true, off = true })[o.llm_cache] then
    cli.usage_error("--llm-cache must be rw, ro or off", usage)
  end
  return o, pos
end

--- With --ui: start the viewer on the run directory once it exists, and
--- close it (after the last changes reached the page) when the run ends.
--- Returns a function that runs fn(o) that way.
function M.with_ui(o)
  if not o.ui then return function(fn) return fn(o) end end
  local server
  o.on_open = function(run)
    -- the viewer follows this run from the engine (run:listen), not from its files
    server = require("mk.cli.serve").start(run.dir, { host = o.host, port = o.port, single = "", run = run })
  end
  return function(fn)
    local ok, res = pcall(fn, o)
    if server then
      require("mk.services.task").sleep(0.3) -- one more tick of the viewer: the end reaches the page
      server:close()
      local cpu, loading, library = server:cpu()
      io.stderr:write(string.format("mkengine: the viewer used %.2f ms of CPU (loading it %.2f, the HTTP library %.2f), "
        .. "%.2f %% of this engine's %.3f s\n", cpu * 1000, loading * 1000, library * 1000,
        100 * cpu / math.max(os.clock(), 1e-9), os.clock()))
    end
    if not ok then error(res, 0) end
    return res
  end
end

M.UI_FLAGS, M.UI_OPTIONS = { ui = true }, { host = "string", port = "number" }

function M.run(args)
  local extra = { dump_prompts = "string" }
  for k, v in pairs(M.UI_OPTIONS) do extra[k] = v end
  local o, pos = M.parse(args, M.usage, M.UI_FLAGS, extra)
  if #pos ~= 2 then cli.usage_error("expected STRATEGY and TASK", M.usage) end
  o.strategy, o.task = pos[1], pos[2]
  o.agents = require "agents"
  local summary = M.with_ui(o)(require("mk.search.runner").run)
  -- the runner already printed the verdict (unless --quiet); --json ends
  -- the event stream with the summary
  if o.json then
    io.stdout:write(cli.json({ type = "summary", summary = summary }), "\n")
  end
  return type(summary.best) == "table" and 0 or 1
end

return M
