-- Real daemons for the worker tests and bench, started and stopped by the
-- caller: an OpenSSH server on 127.0.0.1 (random port, temporary host and
-- user keys, a temporary client config) and a single-node Slurm cluster
-- (munged, slurmctld, slurmd with a generated slurm.conf, every file under
-- one temporary directory). Each daemon runs in the foreground under
-- proc.spawn, so it dies with its handle, with stop(), or with the test.
local fs = require "mk.fs"
local proc = require "mk.proc"
local task = require "mk.services.task"

local M = {}

local function sh(cmd)
  local r = proc.run { argv = { "sh", "-c", cmd }, timeout = 60 }
  return r.code == 0, r.stdout .. r.stderr
end

local function free_port()
  local r = proc.run { argv = { "python3", "-c",
    "import socket\ns = socket.socket()\ns.bind(('127.0.0.1', 0))\nprint(s.getsockname()[1])" } }
  return math.tointeger(tonumber(r.stdout))
end

local function whoami()
  local r = proc.run { argv = { "id", "-un" } }
  return (r.stdout:gsub("%s+$", ""))
end

local function is_root()
  local r = proc.run { argv = { "id", "-u" } }
  return r.stdout:match("^0%s") ~= nil
end

local function exists(path) return fs.exists(path) end

--- Start sshd under `dir`. Returns {host = "mkworker", config = path to a
--- client config for ssh -F, port, stop = function, handle} or nil, why.
function M.sshd(dir)
  if not exists("/usr/sbin/sshd") then return nil, "sshd is not installed (scripts/packages/workers.txt)" end
  fs.mkdirs(dir)
  dir = fs.realpath(dir)
  if is_root() then fs.mkdirs("/run/sshd") end
  local ok, out = sh(string.format("ssh-keygen -q -t ed25519 -N '' -f %s/host_key && ssh-keygen -q -t ed25519 -N '' " ..
    "-f %s/id_key && cp %s/id_key.pub %s/authorized_keys", dir, dir, dir, dir))
  if not ok then return nil, "ssh-keygen failed: " .. out end
  local port = free_port()
  fs.write(dir .. "/sshd_config", table.concat({
    "Port " .. port, "ListenAddress 127.0.0.1", "HostKey " .. dir .. "/host_key",
    "AuthorizedKeysFile " .. dir .. "/authorized_keys", "PidFile " .. dir .. "/sshd.pid", "UsePAM no",
    "StrictModes no", "PasswordAuthentication no", "KbdInteractiveAuthentication no",
    "PermitRootLogin prohibit-password", "LogLevel ERROR", "" }, "\n"))
  fs.write(dir .. "/known_hosts", "[127.0.0.1]:" .. port .. " " .. fs.read(dir .. "/host_key.pub"))
  fs.write(dir .. "/ssh_config", table.concat({
    "Host mkworker", "  HostName 127.0.0.1", "  Port " .. port, "  User " .. whoami(),
    "  IdentityFile " .. dir .. "/id_key", "  IdentitiesOnly yes", "  UserKnownHostsFile " .. dir .. "/known_hosts",
    "  StrictHostKeyChecking yes", "" }, "\n"))
  local h, err = proc.spawn { argv = { "/usr/sbin/sshd", "-f", dir .. "/sshd_config", "-D", "-e" } }
  if not h then return nil, err.message end
  local s = { host = "mkworker", config = dir .. "/ssh_config", port = port, handle = h, dir = dir }
  function s.stop()
    if h:running() then h:kill() end
    return h:wait()
  end
  for _ = 1, 100 do
    local up = sh("ssh -F " .. s.config .. " -o BatchMode=yes -o ConnectTimeout=2 mkworker true")
    if up then return s end
    if not h:running() then return nil, "sshd exited: " .. h:stderr() end
    task.sleep(0.1)
  end
  s.stop()
  return nil, "sshd did not answer: " .. h:stderr()
end

--- Start munged, slurmctld and slurmd under `dir` (root only). Returns
--- {conf = slurm.conf path, partition = "mkq", env = {SLURM_CONF = ...},
--- stop = function} or nil, why.
function M.slurm(dir)
  for _, b in ipairs { "/usr/sbin/munged", "/usr/sbin/slurmctld", "/usr/sbin/slurmd", "/usr/bin/salloc" } do
    if not exists(b) then return nil, b .. " is not installed (scripts/packages/workers.txt)" end
  end
  if not is_root() then return nil, "a Slurm cluster needs root (slurmd)" end
  if not exists("/etc/munge/munge.key") then return nil, "no /etc/munge/munge.key" end
  fs.mkdirs(dir)
  dir = fs.realpath(dir)
  for _, d in ipairs { "munge", "state", "spool", "log" } do fs.mkdirs(dir .. "/" .. d) end
  -- munged wants its directory owned by munge and reachable by all
  local ok, out = sh("chown munge:munge " .. dir .. "/munge && chmod 755 " .. dir .. "/munge " .. dir)
  if not ok then return nil, out end
  local m = dir .. "/munge"
  local handles = {}
  local function start(argv)
    local h, err = proc.spawn { argv = argv }
    if not h then return nil, err.message end
    handles[#handles + 1] = h
    return h
  end
  local function stop()
    for i = #handles, 1, -1 do
      local h = handles[i]
      if h:running() then h:kill() end
      h:wait()
    end
    handles = {}
  end
  local h, err = start { "runuser", "-u", "munge", "--", "/usr/sbin/munged", "--foreground", "--socket=" .. m .. "/sock",
    "--key-file=/etc/munge/munge.key", "--pid-file=" .. m .. "/pid", "--log-file=" .. m .. "/log",
    "--seed-file=" .. m .. "/seed" }
  if not h then return nil, err end
  for _ = 1, 100 do
    if exists(m .. "/sock") then break end
    task.sleep(0.05)
  end
  local host = (proc.run { argv = { "hostname", "-s" } }.stdout:gsub("%s+$", ""))
  local conf = dir .. "/slurm.conf"
  fs.write(conf, table.concat({
    "ClusterName=mkwk", "SlurmctldHost=" .. host, "SlurmctldPort=" .. free_port(), "SlurmdPort=" .. free_port(),
    "AuthType=auth/munge", "AuthInfo=socket=" .. m .. "/sock", "CredType=cred/munge",
    "ProctrackType=proctrack/linuxproc", "TaskPlugin=task/none", "SelectType=select/cons_tres",
    "SelectTypeParameters=CR_Core", "SlurmUser=root", "SlurmdUser=root", "StateSaveLocation=" .. dir .. "/state",
    "SlurmdSpoolDir=" .. dir .. "/spool", "SlurmctldPidFile=" .. dir .. "/slurmctld.pid",
    "SlurmdPidFile=" .. dir .. "/slurmd.pid", "SlurmctldLogFile=" .. dir .. "/log/slurmctld.log",
    "SlurmdLogFile=" .. dir .. "/log/slurmd.log", "ReturnToService=2", "MpiDefault=none",
    "JobAcctGatherType=jobacct_gather/none", "AccountingStorageType=accounting_storage/none",
    "NodeName=" .. host .. " CPUs=2 RealMemory=4000 State=UNKNOWN",
    "PartitionName=mkq Nodes=" .. host .. " Default=YES MaxTime=INFINITE State=UP", "" }, "\n"))
  if not start { "/usr/sbin/slurmctld", "-D", "-f", conf } or not start { "/usr/sbin/slurmd", "-D", "-f", conf } then
    stop()
    return nil, "cannot start slurmctld/slurmd"
  end
  local env = { SLURM_CONF = conf }
  for _ = 1, 200 do
    local r = proc.run { argv = { "sinfo", "-h", "-o", "%t" }, env = env, timeout = 10 }
    if r.code == 0 and r.stdout:find("idle") then
      return { conf = conf, partition = "mkq", env = env, stop = stop, dir = dir }
    end
    task.sleep(0.1)
  end
  stop()
  return nil, "the Slurm node did not become idle: " .. tostring(fs.read(dir .. "/log/slurmctld.log"))
end

--- Jobs in the cluster's queue (squeue), as a list of job ids.
function M.squeue(s)
  local r = proc.run { argv = { "squeue", "-h", "-o", "%i" }, env = s.env, timeout = 10 }
  local ids = {}
  for id in r.stdout:gmatch("%d+") do ids[#ids + 1] = id end
  return ids
end

return M
