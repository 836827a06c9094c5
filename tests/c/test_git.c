/* test_git.c: unit tests of mk.git (engine/git.c) driven through its Lua
 * API in a bare lua_State: commits from file tables, merges, refs, reads,
 * diffs, error kinds and messages, and interop with the git command line. */
#include "mk.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int luaopen_mk_git(lua_State *L);

static int passed, failed;

/* Run one Lua chunk as a test case; it fails by raising. The chunk sees
 * `git` (the module) and `D` (a fresh temp directory). */
static void run(lua_State *L, const char *name, const char *code) {
  char prelude[512];
  snprintf(prelude, sizeof prelude,
           "local git = require 'mk.git'\n"
           "local D = os.tmpname(); os.remove(D); os.execute('mkdir -p ' .. D)\n");
  size_t n = strlen(prelude) + strlen(code) + 1;
  char *src = malloc(n);
  snprintf(src, n, "%s%s", prelude, code);
  int rc = luaL_loadbuffer(L, src, strlen(src), name);
  free(src);
  if (rc == LUA_OK) rc = lua_pcall(L, 0, 0, 0);
  if (rc == LUA_OK) {
    passed++;
    printf("ok   %s\n", name);
  } else {
    failed++;
    printf("FAIL %s: %s\n", name, lua_tostring(L, -1));
    lua_pop(L, 1);
  }
}

int main(void) {
  lua_State *L = luaL_newstate();
  luaL_openlibs(L);
  luaL_requiref(L, "mk.git", luaopen_mk_git, 0);
  lua_pop(L, 1);

  run(L, "git/commit_roundtrips_files_including_subdirectories",
      "local r = assert(git.init(D .. '/g.git'))\n"
      "local oid = assert(r:commit{files = {['kernel.c'] = 'int x;\\n', ['sub/dir/a.txt'] = 'A', ['bin'] = "
      "'\\0\\1\\2'}, message = 'm'})\n"
      "assert(#oid == 40 and oid:match('^%x+$'), oid)\n"
      "assert(r:read(oid, 'kernel.c') == 'int x;\\n')\n"
      "assert(r:read(oid, 'sub/dir/a.txt') == 'A')\n"
      "assert(r:read(oid, 'bin') == '\\0\\1\\2')\n"
      "local ls = r:ls(oid)\n"
      "assert(#ls == 3 and ls[1] == 'bin' and ls[2] == 'kernel.c' and ls[3] == 'sub/dir/a.txt', table.concat(ls, "
      "','))\n");

  run(L, "git/commit_is_deterministic_for_same_content_parents_and_time",
      "local r = assert(git.init(D .. '/g.git'))\n"
      "local a = r:commit{files = {x = '1'}, message = 'a', time = 1000}\n"
      "local b = r:commit{files = {x = '1'}, message = 'a', time = 1000}\n"
      "assert(a == b)\n");

  run(L, "git/commit_with_several_parents_records_them_in_order",
      "local r = assert(git.init(D .. '/g.git'))\n"
      "local a = r:commit{files = {x = '1'}, message = 'a'}\n"
      "local b = r:commit{files = {x = '2'}, message = 'b'}\n"
      "local c = r:commit{files = {x = '3'}, parents = {a, b}, message = 'c\\n'}\n"
      "local info = r:info(c)\n"
      "assert(#info.parents == 2 and info.parents[1] == a and info.parents[2] == b)\n"
      "assert(info.message == 'c\\n' and info.author == 'mkengine' and info.oid == c)\n");

  run(L, "git/commit_updates_ref_and_refs_lists_sorted",
      "local r = assert(git.init(D .. '/g.git'))\n"
      "local a = r:commit{files = {x = '1'}, ref = 'refs/nodes/n0002'}\n"
      "local b = r:commit{files = {x = '2'}, ref = 'refs/nodes/n0001', parents = {'refs/nodes/n0002'}}\n"
      "assert(r:ref('refs/nodes/n0002') == a and r:ref('refs/nodes/n0001') == b)\n"
      "assert(r:ref('refs/nodes/none') == nil)\n"
      "local refs = r:refs('refs/nodes/*')\n"
      "assert(#refs == 2 and refs[1].name == 'refs/nodes/n0001' and refs[1].oid == b and refs[2].oid == a)\n"
      "assert(r:set_ref('refs/heads/best', a) == a)\n"
      "assert(r:set_ref('refs/heads/best', b) == b)\n"
      "assert(r:ref('HEAD') == b, 'HEAD follows best')\n"
      "assert(r:delete_ref('refs/heads/best'))\n"
      "assert(r:ref('refs/heads/best') == nil)\n"
      "assert(r:pack_refs())\n"
      "assert(#r:refs('refs/nodes/*') == 2 and r:ref('refs/nodes/n0001') == b)\n");

  run(L, "git/read_missing_file_returns_not_found_with_libgit2_message",
      "local r = assert(git.init(D .. '/g.git'))\n"
      "local a = r:commit{files = {x = '1'}}\n"
      "local v, err = r:read(a, 'nope.c')\n"
      "assert(v == nil and err.kind == 'not_found', tostring(err and err.kind))\n"
      "assert(err.message:find('nope.c', 1, true), err.message)\n"
      "local v2, err2 = r:read(('0'):rep(40), 'x')\n"
      "assert(v2 == nil and err2.kind == 'not_found', err2.message)\n");

  run(L, "git/unknown_parent_fails_without_writing_objects",
      "local r = assert(git.init(D .. '/g.git'))\n"
      "local v, err = r:commit{files = {x = '1'}, parents = {'deadbeef'}}\n"
      "assert(v == nil and err.kind == 'not_found' and err.message:find('parent'), err and err.message)\n"
      "local p = io.popen('find ' .. D .. '/g.git/objects -type f | wc -l')\n"
      "local count = tonumber(p:read('a')); p:close()\n"
      "assert(count == 0, 'objects written: ' .. count)\n");

  run(L, "git/bad_arguments_raise",
      "local r = assert(git.init(D .. '/g.git'))\n"
      "assert(not pcall(r.commit, r, {files = {['../x'] = 'a'}}))\n"
      "assert(not pcall(r.commit, r, {files = {['/abs'] = 'a'}}))\n"
      "assert(not pcall(r.commit, r, {files = {['a//b'] = 'a'}}))\n"
      "assert(not pcall(r.commit, r, {files = {x = 1}}))\n"
      "assert(not pcall(r.commit, r, {}))\n"
      "r:close()\n"
      "local ok, e = pcall(r.read, r, 'HEAD', 'x')\n"
      "assert(not ok and tostring(e):find('closed'), e)\n");

  run(L, "git/open_missing_or_non_repository_returns_error",
      "local r, err = git.open(D .. '/none')\n"
      "assert(r == nil and err.kind == 'not_found' and #err.message > 0, err and err.kind)\n"
      "local r2, err2 = git.open(D)\n"
      "assert(r2 == nil and err2.message:find('repository'), err2 and err2.message)\n"
      "assert(git.init(D .. '/g.git')):close()\n"
      "assert(git.open(D .. '/g.git'))\n");

  run(L, "git/diff_gives_patch_and_stat",
      "local r = assert(git.init(D .. '/g.git'))\n"
      "local a = r:commit{files = {['k.c'] = 'a\\nb\\nc\\n', ['gone.txt'] = 'x\\n'}}\n"
      "local b = r:commit{files = {['k.c'] = 'a\\nB\\nc\\nd\\n', ['new.txt'] = 'n\\n'}, parents = {a}}\n"
      "local patch, st = r:diff(a, b)\n"
      "assert(patch:find('-b\\n+B\\n', 1, true), patch)\n"
      "assert(patch:find('diff --git a/k.c b/k.c', 1, true), patch)\n"
      "assert(st.changed == 3 and st.insertions == 3 and st.deletions == 2, st.text)\n"
      "local by = {}; for _, f in ipairs(st.files) do by[f.path] = f end\n"
      "assert(by['gone.txt'].status == 'deleted' and by['new.txt'].status == 'added')\n"
      "assert(by['k.c'].status == 'modified' and by['k.c'].insertions == 2 and by['k.c'].deletions == 1)\n"
      "assert(st.text:find('3 files changed', 1, true), st.text)\n"
      "local p0 = r:diff(a, b, {context = 0})\n"
      "assert(not p0:find('\\n c\\n', 1, true) and p0:find('@@ -2 +2 @@', 1, true), p0)\n");

  run(L, "git/repository_passes_git_fsck_and_log",
      "local r = assert(git.init(D .. '/g.git'))\n"
      "local a = r:commit{files = {x = '1'}, message = 'n0001 root ok', ref = 'refs/nodes/n0001'}\n"
      "local b = r:commit{files = {x = '2'}, message = 'n0002 implement ok', ref = 'refs/nodes/n0002', parents = {a}}\n"
      "r:set_ref('refs/heads/best', b)\n"
      "assert(os.execute('git --git-dir ' .. D .. '/g.git fsck --strict --no-dangling >/dev/null 2>&1'), 'fsck "
      "failed')\n"
      "local p = io.popen('git --git-dir ' .. D .. '/g.git log --format=%s')\n"
      "local out = p:read('a'); p:close()\n"
      "assert(out == 'n0002 implement ok\\nn0001 root ok\\n', out)\n");

  run(L, "git/two_thousand_chained_commits_have_distinct_ids",
      "local r = assert(git.init(D .. '/g.git'))\n"
      "local seen, prev = {}, nil\n"
      "for i = 1, 2000 do\n"
      "  local o = assert(r:commit{files = {x = tostring(i)}, parents = {prev}})\n"
      "  assert(not seen[o]); seen[o] = true; prev = o\n"
      "end\n");

  lua_close(L);
  printf("%d passed, %d failed\n", passed, failed);
  return failed ? 1 : 0;
}
