/* test_proc.c: mk.proc seen from C, so that the sanitizer build (which runs
 * C tests only) covers proc.c: every path of a run (normal, spawn failure,
 * timeout, cancel, stdin, truncated and large output, many at once) ends
 * with its op freed and no handle left open on the loop. */
#include <stdio.h>
#include <string.h>

#include "mk.h"

#include "check.h"

static int run(const char *src) {
  mk_runtime *rt = mk_runtime_new();
  lua_State *L = mk_runtime_state(rt);
  if (luaL_loadstring(L, src) != LUA_OK) {
    fprintf(stderr, "%s\n", lua_tostring(L, -1));
    mk_runtime_free(rt);
    return -1;
  }
  int code = mk_runtime_run_main(rt, 0);
  mk_runtime_free(rt);
  return code;
}

#define PRELUDE "local proc = require 'mk.proc'\nlocal task = require 'mk.services.task'\n"

int main(void) {
  int code = run(PRELUDE "local r = proc.run{argv = {'sh', '-c', 'echo hi; exit 4'}}\n"
                         "return (r.status == 'exited' and r.code == 4 and r.stdout == 'hi\\n') and 0 or 10\n");
  CHECK(code == 0, "proc/a run returns its exit code and output");
  CHECK(mk_op_live() == 0, "proc/the op of a finished run is freed");

  code = run(PRELUDE "local r, e = proc.run{argv = {'no-such-program-mk'}}\n"
                     "return (r == nil and e.kind == 'spawn') and 0 or 11\n");
  CHECK(code == 0, "proc/a missing program is a spawn error");

  code = run(PRELUDE "local r = proc.run{argv = {'sleep', '100'}, timeout = 0.2}\n"
                     "return r.status == 'timeout' and 0 or 12\n");
  CHECK(code == 0, "proc/a timeout kills the child");
  CHECK(mk_op_live() == 0, "proc/the op of a timed-out run is freed");

  code = run(PRELUDE "local ok = task.timeout(0.2, proc.run, {argv = {'sleep', '100'}})\n"
                     "if ok ~= nil then return 13 end\n"
                     "for _ = 1, 200 do\n"
                     "  if task.stats().ops == 0 then return 0 end\n"
                     "  task.sleep(0.01)\n"
                     "end\n"
                     "return 23\n");
  CHECK(code == 0, "proc/cancelling the waiting task ends the wait, then the op finishes");
  CHECK(mk_op_live() == 0, "proc/a cancelled run's op is freed once the process is gone");

  code = run(PRELUDE "local r = proc.run{argv = {'wc', '-c'}, stdin = string.rep('z', 3000000)}\n"
                     "local r2 = proc.run{argv = {'true'}, stdin = string.rep('z', 3000000)}\n"
                     "return (r.stdout:match('%d+') == '3000000' and r2.code == 0) and 0 or 14\n");
  CHECK(code == 0, "proc/stdin is delivered, or dropped when the child does not read it");

  code = run(PRELUDE "local r = proc.run{argv = {'head', '-c', '5000000', '/dev/zero'}, max_output = 1000}\n"
                     "local r2 = proc.run{argv = {'head', '-c', '5000000', '/dev/zero'}}\n"
                     "return (#r.stdout == 1000 and r.truncated and #r2.stdout == 5000000) and 0 or 15\n");
  CHECK(code == 0, "proc/output is truncated at max_output, kept whole below it");

  code = run(PRELUDE "local hs = {}\n"
                     "for i = 1, 20 do hs[i] = task.spawn(proc.run, {argv = {'sh', '-c', 'echo ' .. i}}) end\n"
                     "for i = 1, 20 do if task.await(hs[i]).stdout ~= i .. '\\n' then return 16 end end\n"
                     "return 0\n");
  CHECK(code == 0, "proc/20 concurrent runs each get their own output");

  code = run(PRELUDE "local h = assert(proc.spawn{argv = {'cat'}})\n"
                     "h:write('one\\ntwo\\n'); h:write('thr'); h:write('ee')\n"
                     "if h:read_line() ~= 'one' or h:read_line() ~= 'two' then return 30 end\n"
                     "h:close()\n"
                     "if h:read_line() ~= 'three' or h:read_line() ~= nil then return 31 end\n"
                     "local r = h:wait()\n"
                     "return (r.status == 'exited' and r.code == 0) and 0 or 32\n");
  CHECK(code == 0, "proc/spawn: lines written come back, a last partial line, then EOF and the exit");
  CHECK(mk_op_live() == 0, "proc/spawn: no op left after a child finished");

  code = run(PRELUDE "local h = assert(proc.spawn{argv = {'sh', '-c', 'sleep 100 & sleep 100'}})\n"
                     "local ok = task.timeout(0.2, h.read_line, h)\n"
                     "if ok ~= nil then return 33 end\n"
                     "for _ = 1, 400 do\n"
                     "  if task.stats().ops == 0 then break end\n"
                     "  task.sleep(0.01)\n"
                     "end\n"
                     "local r = h:wait()\n"
                     "return (r.status == 'signaled' and not h:running()) and 0 or 34\n");
  CHECK(code == 0, "proc/spawn: cancelling a read_line kills the tree; the op ends after exit and EOF");
  CHECK(mk_op_live() == 0, "proc/spawn: the cancelled read's op is freed");

  code = run(PRELUDE "local h = assert(proc.spawn{argv = {'sleep', '100'}})\n"
                     "h = nil; collectgarbage(); collectgarbage()\n"
                     "task.sleep(0.05)\n"
                     "return 0\n");
  CHECK(code == 0, "proc/spawn: a collected handle kills its child and frees it");

  code = run(PRELUDE "local h = assert(proc.spawn{argv = {'sleep', '100'}})\n"
                     "return 0\n");
  CHECK(code == 0, "proc/spawn: a child still running at shutdown is killed, nothing leaks");

  code = run(PRELUDE "local h = assert(proc.spawn{argv = {'sh', '-c', 'head -c 20000000 /dev/zero | tr \"\\\\0\" x; "
                     "echo; echo end'}})\n"
                     "local l = h:read_line()\n"
                     "if #l ~= 20000000 or h:read_line() ~= 'end' or h:read_line() ~= nil then return 35 end\n"
                     "return h:wait().code == 0 and 0 or 36\n");
  CHECK(code == 0, "proc/spawn: a 20 MB line comes back whole");

  code = run(PRELUDE "local r, e = proc.spawn{argv = {'no-such-program-mk'}}\n"
                     "return (r == nil and e.kind == 'spawn') and 0 or 37\n");
  CHECK(code == 0, "proc/spawn: a missing program is a spawn error");

  CHECK(mk_op_live() == 0, "proc/no op left alive");

  printf("%d passed, %d failed\n", passed, failed);
  return failed ? 1 : 0;
}
