--- targets/c/machine.lua: this machine as the target sees it: what a
--- frozen suite's bytes depend on besides the task (CPU, compiler,
--- last-level cache; suite_facts), its key for baselines (machine_key),
--- and the facts the prompts state (CPU, ISA extensions, caches, sizes).
local _, M = ...
local fs = require("mk.fs")
local proc = require("mk.proc")

local H = {}

-- The last-level cache's size in bytes (32 MB when /sys does not say).
local function llc_bytes()
  for _, idx in ipairs { 3, 2 } do
    local s = fs.read("/sys/devices/system/cpu/cpu0/cache/index" .. idx .. "/size")
    if s then
      local n, unit = s:match("(%d+)%s*([KMG]?)")
      if n then return tonumber(n) * (unit == "K" and 1024 or unit == "M" and 1048576 or unit == "G" and 1073741824 or 1) end
    end
  end
  return 32 * 1048576
end
H.llc_bytes = llc_bytes

local function cpu_model()
  local model = "cpu"
  local f = io.open("/proc/cpuinfo")
  if f then
    local s = f:read("a") or ""
    f:close()
    model = s:match("model name%s*:%s*([^\n]+)") or s:match("CPU part%s*:%s*([^\n]+)") or model
  end
  return model
end

local function cpu_key(threads)
  local host = (fs.read("/etc/hostname") or "host"):gsub("%s", "")
  return (host .. "-" .. cpu_model() .. "-t" .. tostring(threads or "all")):gsub("[^%w%-_.]", "_")
end
H.cpu_key = cpu_key

local cc_line
local function cc_version()
  if not cc_line then
    local r = proc.run { argv = { os.getenv("CC") or "cc", "--version" }, timeout = 30 }
    cc_line = r and r.status == "exited" and (r.stdout or ""):match("^[^\n]*") or "cc"
  end
  return cc_line
end

-- Frozen suites can be shared through mk.eval.suites: what their bytes
-- follow besides the task is the CPU (the reference is compiled with
-- -march=native), the compiler and the cache size (the input sets).
M.suite_cache = true

--- Machine facts a frozen suite depends on (part of its cache key).
function M.suite_facts(_, opts)
  return { cpu = cpu_model(), cc = cc_version(), llc = (opts and opts.llc_bytes) or llc_bytes(),
    format = "mkc-suite-4" }
end

--- Key of this machine for a baseline measured with `threads` threads.
function M.machine_key(threads) return (cpu_key(threads)) end

-- ISA extensions worth telling a kernel writer about, in /proc/cpuinfo spelling
local ISA = { "sse4_2", "avx", "avx2", "fma", "f16c", "avx512f", "avx512bw", "avx512vl", "avx512_vnni",
  "avx512_bf16", "avx512_fp16", "amx_tile", "asimd", "sve" }

local machine_facts
-- The machine part of the facts, read once: CPU model, logical CPUs, ISA
-- extensions and cache sizes (Linux /proc and /sys; "unknown" elsewhere).
local function machine()
  if machine_facts then return machine_facts end
  local info = fs.read("/proc/cpuinfo") or ""
  local model = info:match("model name%s*:%s*([^\n]+)") or info:match("Hardware%s*:%s*([^\n]+)") or "unknown"
  local cpus = 0
  for _ in info:gmatch("\nprocessor%s*:") do cpus = cpus + 1 end
  if info:match("^processor%s*:") then cpus = cpus + 1 end
  local flags = " " .. (info:match("\nflags%s*:%s*([^\n]+)") or info:match("\nFeatures%s*:%s*([^\n]+)") or "") .. " "
  local isa = {}
  for _, f in ipairs(ISA) do
    if flags:find(" " .. f .. " ", 1, true) then isa[#isa + 1] = f end
  end
  local caches = {}
  for i = 0, 7 do
    local d = "/sys/devices/system/cpu/cpu0/cache/index" .. i
    local size = fs.read(d .. "/size")
    if not size then break end
    local level, kind = (fs.read(d .. "/level") or "?"):match("%S+"), (fs.read(d .. "/type") or ""):match("%S+")
    local name = "L" .. tostring(level) .. (kind == "Data" and "d" or kind == "Instruction" and "i" or "")
    local shared = (fs.read(d .. "/shared_cpu_list") or ""):match("%S+")
    local by = shared and shared:find("[,-]") and (" (shared by CPUs " .. shared .. ")") or ""
    caches[#caches + 1] = name .. " " .. size:match("%S+") .. by
  end
  machine_facts = {
    model = model, cpus = cpus > 0 and cpus or "unknown",
    isa = #isa > 0 and table.concat(isa, " ") or "unknown",
    caches = #caches > 0 and table.concat(caches, "; ") or "unknown",
  }
  return machine_facts
end

local function sizes_text(s)
  local names = {}
  for k in pairs(s or {}) do names[#names + 1] = k end
  table.sort(names)
  local parts = {}
  for _, k in ipairs(names) do parts[#parts + 1] = k .. "=" .. tostring(math.tointeger(s[k]) or s[k]) end
  return "{" .. table.concat(parts, ", ") .. "}"
end

--- Facts for the prompts ({label, value} list): the CPU, its ISA
--- extensions and caches, and the task's benchmark and test sizes.
---@param task table
---@return table
function M.facts(task, _)
  local m = machine()
  local tests = {}
  for _, s in ipairs(task.test_sizes or {}) do tests[#tests + 1] = sizes_text(s) end
  return {
    { "CPU", m.model },
    { "logical CPUs", m.cpus },
    { "ISA extensions (-march=native enables them)", m.isa },
    { "caches (per core unless shared)", m.caches },
    { "benchmark size (timed)", sizes_text(task.sizes) },
    { "test sizes (correctness)", #tests > 0 and table.concat(tests, " ") or "the benchmark size" },
  }
end

return H
