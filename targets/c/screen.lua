--- targets/c/screen.lua: what a candidate may not do, found before it
--- runs: calls a kernel has no business making, in its source (screen),
--- and code that would run when its shared object is loaded
--- (load_time_code). The runner's seccomp filter enforces the same at run
--- time; these give the clear message first.
local _, M = ...
local proc = require("mk.proc")

-- Calls a kernel has no business making. Caught here for a clear message;
-- the runner's seccomp filter enforces the same at run time.
local FORBIDDEN = {
  { "file I/O", { "fopen", "freopen", "fdopen", "open", "openat", "creat", "opendir", "tmpfile", "remove", "unlink",
    "rename", "mkdir", "rmdir", "truncate", "ftruncate", "chmod", "symlink", "link", "fwrite", "fread" } },
  { "process control", { "fork", "vfork", "execl", "execlp", "execle", "execv", "execvp", "execve", "system", "popen",
    "posix_spawn", "posix_spawnp", "clone", "kill", "exit", "_exit", "_Exit", "quick_exit", "pthread_create",
    "thrd_create", "signal", "sigaction", "ptrace", "prctl", "setrlimit" } },
  { "dynamic loading", { "dlopen", "dlsym", "dlmopen", "dlvsym" } },
  { "raw system calls", { "syscall", "mprotect", "mmap", "munmap", "ioctl" } },
  { "timers", { "clock_gettime", "gettimeofday", "clock", "time", "times", "__rdtsc", "__rdtscp", "_rdtsc", "rdtsc",
    "omp_get_wtime", "getrusage" } },
  { "network", { "socket", "connect", "bind", "listen", "accept", "send", "recv", "sendto", "recvfrom" } },
  { "environment", { "getenv", "setenv", "putenv" } },
}

local function strip_comments_and_strings(s)
  s = s:gsub("/%*.-%*/", " ")
  s = s:gsub("//[^\n]*", "")
  s = s:gsub('"[^"\n]*"', '""')
  return s
end

--- Reasons a source is rejected before compiling, or nil.
function M.screen(source)
  local raw = source
  local s = strip_comments_and_strings(source)
  for _, group in ipairs(FORBIDDEN) do
    for _, fn in ipairs(group[2]) do
      if s:find("%f[%w_]" .. fn:gsub("_", "%%_") .. "%s*%(") then
        return string.format("calls %s() (%s): kernels must only compute on their arguments; "
          .. "file I/O, processes, threads other than OpenMP, dynamic loading, system calls, timers "
          .. "and the network are not allowed", fn, group[1])
      end
    end
  end
  if s:find("constructor") or s:find("destructor") or s:find("init_array") or s:find("fini_array") then
    return "uses constructors/destructors or init sections: code may only run when the entry is called"
  end
  if s:find("%f[%w_]mk_[%w_]*") then
    return "uses an identifier starting with mk_: that prefix is reserved for the harness"
  end
  for inc in raw:gmatch("#%s*include%s*([^\n]*)") do
    if inc:match('^"') then
      return "includes " .. inc .. ": a candidate is one self-contained file; include only system headers (<...>)"
    end
  end
  if raw:find("#%s*embed") or s:find("incbin") then return "embeds external files" end
  return nil
end

--- Code that would run when the shared object is loaded, before the
--- runner's strictest filter: constructors/destructors beyond the
--- compiler's own single entry, or IFUNC resolvers. Returns a reason or nil.
function M.load_time_code(so)
  local r = proc.run { argv = { "readelf", "-SW", "--dyn-syms", so }, timeout = 30, max_output = 4 << 20 }
  if not r or r.status ~= "exited" or r.code ~= 0 then return nil end -- no binutils: the screen still applies
  for _, sec in ipairs { "init_array", "fini_array", "ctors", "dtors", "preinit_array" } do
    local size = r.stdout:match("%s%." .. sec .. "%s+%S+%s+%x+%s+%x+%s+(%x+)")
    if size and tonumber(size, 16) > 8 then
      return "defines code that runs when it is loaded (." .. sec .. "): only the entry may run"
    end
  end
  for line in r.stdout:gmatch("[^\n]+") do
    if line:find("%sIFUNC%s") and not line:find("%sUND%s") then
      return "defines an IFUNC resolver (code that runs when it is loaded): only the entry may run"
    end
  end
  return nil
end
