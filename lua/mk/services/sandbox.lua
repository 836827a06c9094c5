--- mk.services.sandbox: builds the bubblewrap command line that every piece of
--- candidate code runs under: no network, a read-only view of the system,
--- a tmpfs /tmp, one private writable work directory, and nothing else of
--- the host (not $HOME, not the run directory, not the frozen expected
--- outputs). Where bubblewrap cannot run, `wrap` returns argv unchanged and
--- a loud warning is printed once: the caller's rlimits and private
--- directory are then the only protection.
local fs = require("mk.fs")
local util = require("mk.services.util")

local M = {}

-- The read-only system view. Symlinks (merged /usr: /bin -> usr/bin) are
-- recreated as symlinks; missing entries are skipped.
M.system = { "/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32", "/etc", "/opt" }

-- Hidden even inside the system view (root owns them, so DAC alone would
-- let a root sandbox read them).
M.always_hide = { "/etc/shadow", "/etc/gshadow", "/etc/sudoers" }

-- Accelerators (opts.devices): device nodes bound into the sandbox's /dev
-- (`--dev-bind`), found by these prefixes in /dev and in these directories,
-- and what their drivers read, bound read-only when present (/sys for PCI
-- and accel class lookups; NVIDIA's persistenced socket and libraries kept
-- outside /usr). Driver libraries under /usr, /lib or /opt are already in
-- the system view.
M.device_prefixes = { "nvidia", "accel" }
M.device_dirs = { "/dev/nvidia-caps", "/dev/vfio", "/dev/dri" }
M.driver_paths = { "/sys", "/run/nvidia-persistenced", "/usr/local/nvidia", "/usr/lib/wsl" }

--- The accelerator device nodes present on this host: /dev/nvidia*,
--- /dev/accel*, and everything in /dev/nvidia-caps, /dev/vfio, /dev/dri.
---@return string[]
function M.device_nodes()
  local out = {}
  for _, name in ipairs(fs.list("/dev") or {}) do
    for _, pre in ipairs(M.device_prefixes) do
      if name:sub(1, #pre) == pre and not fs.isdir("/dev/" .. name) then out[#out + 1] = "/dev/" .. name end
    end
  end
  for _, d in ipairs(M.device_dirs) do
    for _, name in ipairs(fs.list(d) or {}) do out[#out + 1] = d .. "/" .. name end
  end
  table.sort(out)
  return out
end

local probe -- {ok, reason} once probed

-- The first line a shell command prints (stderr dropped), nil when none.
local function output_line(cmd)
  local p = io.popen(cmd .. " 2>/dev/null")
  if not p then return nil end
  local line = p:read("l")
  p:close()
  if line and line ~= "" then return line end
  return nil
end

local function is_symlink(path)
  local st = fs.stat(path)
  if not st or st.type ~= "link" then return nil end
  return output_line("readlink " .. util.sh_quote(path))
end

local function exists(path) return fs.exists(path) end

local function isdir(path) return fs.isdir(path) end

local function find_bwrap() return output_line("command -v bwrap") end

local system_args -- cached: the flags for the read-only system view

local function system_view()
  if system_args then return system_args end
  local a = {}
  for _, dir in ipairs(M.system) do
    local target = is_symlink(dir)
    if target then
      a[#a + 1] = "--symlink"; a[#a + 1] = target; a[#a + 1] = dir
    elseif exists(dir) then
      a[#a + 1] = "--ro-bind"; a[#a + 1] = dir; a[#a + 1] = dir
    end
  end
  for _, x in ipairs { "--proc", "/proc", "--dev", "/dev", "--tmpfs", "/tmp" } do a[#a + 1] = x end
  system_args = a
  return a
end

local function base_args(network)
  -- --cap-drop ALL: run as root, bwrap would otherwise keep every capability.
  local a = { M.bwrap or "bwrap", "--die-with-parent", "--new-session", "--cap-drop", "ALL", "--unshare-pid",
    "--unshare-ipc", "--unshare-uts", "--unshare-cgroup-try" }
  if not network then a[#a + 1] = "--unshare-net" end
  for _, x in ipairs(system_view()) do a[#a + 1] = x end
  return a
end

--- Whether bubblewrap works here. Probed once (runs `bwrap ... true`) and
--- cached; MKENGINE_NO_SANDBOX=1 forces the fallback.
---@return boolean ok
---@return string|nil reason why not
function M.available()
  if probe then return probe.ok, probe.reason end
  if os.getenv("MKENGINE_NO_SANDBOX") == "1" then
    probe = { ok = false, reason = "MKENGINE_NO_SANDBOX=1" }
    return false, probe.reason
  end
  M.bwrap = find_bwrap()
  if not M.bwrap then
    probe = { ok = false, reason = "bwrap not found on PATH (apt-get install bubblewrap)" }
    return false, probe.reason
  end
  local a = base_args(false)
  a[#a + 1] = "--"
  a[#a + 1] = "/bin/true"
  local cmd = {}
  for i, x in ipairs(a) do cmd[i] = util.sh_quote(x) end
  local ok = os.execute(table.concat(cmd, " ") .. " >/dev/null 2>&1")
  if ok then
    probe = { ok = true }
  else
    probe = { ok = false, reason = "bwrap cannot create namespaces here (user namespaces disabled?)" }
  end
  return probe.ok, probe.reason
end

local root -- whether the engine runs as root (probed once)

local function is_root()
  if root == nil then
    local p = io.popen("id -u 2>/dev/null")
    root = p and p:read("l") == "0" or false
    if p then p:close() end
  end
  return root
end

-- setpriv (util-linux) drops to nobody inside the sandbox, after bubblewrap
-- has made its mounts as root.
local SETPRIV = "/usr/bin/setpriv"

local warned = false

local function warn_once(reason)
  if warned then return end
  warned = true
  io.stderr:write(string.rep("!", 72), "\n",
    "mkengine: WARNING: no sandbox (", reason, ").\n",
    "mkengine: candidate code runs with only resource limits and a private\n",
    "mkengine: work directory: it can read your files and use the network.\n",
    string.rep("!", 72), "\n")
  io.stderr:flush()
end

local function check_paths(list, name)
  if list == nil then return {} end
  if type(list) ~= "table" then error("sandbox.wrap: '" .. name .. "' must be a list of paths", 3) end
  for i, p in ipairs(list) do
    if type(p) ~= "string" or p:sub(1, 1) ~= "/" then
      error("sandbox.wrap: " .. name .. "[" .. i .. "] must be an absolute path", 3)
    end
  end
  return list
end

--- Prefix argv with bubblewrap. opts:
--- `workdir` (absolute, required): bound read-write at the same path, the
--- working directory and $HOME inside; `ro`/`rw`: extra absolute paths bound
--- read-only / read-write at the same path; `network` (default false);
--- `hide`: paths made invisible (an empty tmpfs over a directory, /dev/null
--- over a file) even where a bind above would show them.
--- Without bubblewrap, returns a copy of argv and warns once.
---@param argv string[]
--- `user = "nobody"`: when the engine runs as root, run the command as
--- nobody inside (Linux ignores RLIMIT_NPROC for root; `apply` sets this
--- when `limits.nproc` is given); a no-op for other users.
--- Returns the new argv and whether the sandbox switches the user.
---@param argv string[]
--- `devices`: `true` binds the host's accelerator nodes (M.device_nodes())
--- and the driver paths that exist (M.driver_paths, read-only); a list binds
--- exactly those nodes.
---@param opts {workdir: string, ro?: string[], rw?: string[], network?: boolean, hide?: string[], user?: string, devices?: boolean|string[]}
---@return string[] argv
---@return boolean switched true when the command runs as nobody inside
function M.wrap(argv, opts)
  if type(argv) ~= "table" or type(argv[1]) ~= "string" then
    error("sandbox.wrap: argv must be a non-empty list of strings", 2)
  end
  if type(opts) ~= "table" then error("sandbox.wrap: opts must be a table", 2) end
  local workdir = opts.workdir
  if type(workdir) ~= "string" or workdir:sub(1, 1) ~= "/" then
    error("sandbox.wrap: opts.workdir must be an absolute path", 2)
  end
  local ro, rw, hide = check_paths(opts.ro, "ro"), check_paths(opts.rw, "rw"), check_paths(opts.hide, "hide")
  local devices = {}
  if opts.devices == true then
    devices = M.device_nodes()
  elseif opts.devices then
    devices = check_paths(opts.devices, "devices")
  end
  local ok, reason = M.available()
  if not ok then
    warn_once(reason)
    local out = {}
    for i, x in ipairs(argv) do out[i] = x end
    return out, false
  end
  if opts.user ~= nil and opts.user ~= "nobody" then error("sandbox.wrap: opts.user may only be \"nobody\"", 2) end
  local switch = opts.user == "nobody" and is_root() and fs.exists(SETPRIV)
  local a = base_args(opts.network)
  if switch then
    for _, x in ipairs { "--cap-add", "CAP_SETUID", "--cap-add", "CAP_SETGID" } do a[#a + 1] = x end
  end
  local function add(...) for _, x in ipairs { ... } do a[#a + 1] = x end end
  if #devices > 0 then
    for _, p in ipairs(M.driver_paths) do
      if exists(p) then add("--ro-bind", p, p) end
    end
    for _, p in ipairs(devices) do add("--dev-bind", p, p) end
  end
  for _, p in ipairs(ro) do add("--ro-bind", p, p) end
  for _, p in ipairs(rw) do add("--bind", p, p) end
  add("--bind", workdir, workdir, "--chdir", workdir, "--setenv", "HOME", workdir, "--setenv", "TMPDIR", "/tmp")
  local hidden = {}
  for _, p in ipairs(M.always_hide) do hidden[#hidden + 1] = p end
  for _, p in ipairs(hide) do hidden[#hidden + 1] = p end
  for _, p in ipairs(hidden) do
    if isdir(p) then add("--tmpfs", p)
    elseif exists(p) then add("--ro-bind", "/dev/null", p) end
  end
  add("--")
  if switch then
    add(SETPRIV, "--reuid", "65534", "--regid", "65534", "--clear-groups", "--bounding-set", "-all",
      "--inh-caps", "-all", "--")
  end
  for _, x in ipairs(argv) do a[#a + 1] = x end
  return a, switch
end

--- The proc.run / proc.spawn options of `spec` run inside the sandbox
--- `spec.sandbox` (a table for `wrap`): argv wrapped, cwd the workdir
--- unless given, inherited secrets scrubbed from the environment, and the
--- flags mk-exec needs for `limits.nproc` under a root engine. The C side
--- (mk.proc) only sees the final command line. A spec without `sandbox`
--- is returned as it is.
---@param spec table proc.run options with `sandbox = {workdir, ro, rw, hide, network}`
---@return table spec for proc.run
function M.apply(spec)
  if type(spec) ~= "table" then error("sandbox.apply: spec must be a table", 2) end
  local sb = spec.sandbox
  if sb == nil then return spec end
  if type(sb) ~= "table" then error("sandbox.apply: spec.sandbox must be a table", 2) end
  if type(spec.argv) ~= "table" or type(spec.argv[1]) ~= "string" then
    error("sandbox.apply: spec.argv must be a non-empty list of strings", 2)
  end
  local out = {}
  for k, v in pairs(spec) do out[k] = v end
  out.sandbox = nil
  local o = {}
  for k, v in pairs(sb) do o[k] = v end
  local nproc = type(spec.limits) == "table" and tonumber(spec.limits.nproc)
  if nproc and nproc > 0 then o.user = "nobody" end
  local argv, switched = M.wrap(spec.argv, o)
  out.argv = argv
  out.cwd = spec.cwd or sb.workdir
  out.scrub_env, out.give_cwd, out.switches_user = true, true, switched
  return out
end

--- Forget the cached probe (tests).
function M._reset()
  probe, system_args, warned, root = nil, nil, false, nil
end

return M
