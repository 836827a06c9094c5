/* test_kb.c: mk.kb unit tests: tokenizer (identifiers whole and split),
 * markdown chunking edge cases, BM25 ranking with known answers, staleness
 * by file times, and the shipped corpus answering the block-shape query.
 * Each case is a Lua chunk run against a bare state with mk.kb loaded; a
 * case fails when it raises. */
#include "mk.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int luaopen_mk_kb(lua_State *L);

static int passed, failed;

static void run(lua_State *L, const char *name, const char *code) {
  int top = lua_gettop(L);
  if (luaL_loadbuffer(L, code, strlen(code), name) != LUA_OK || lua_pcall(L, 0, 0, 0) != LUA_OK) {
    failed++;
    printf("FAIL kb/%s\n  %s\n", name, lua_tostring(L, -1));
  } else {
    passed++;
    printf("ok   kb/%s\n", name);
  }
  lua_settop(L, top);
}

/* Helpers every case may use: eq(got, want, msg), has(list, value),
 * tmpdir() -> fresh directory, write(path, text). */
static const char *prelude =
    "kb = require 'mk.kb'\n"
    "function eq(got, want, msg) if got ~= want then error((msg or '') .. ': expected ' .. tostring(want) .. ', got ' "
    ".. tostring(got), 2) end end\n"
    "function has(list, v) for _, x in ipairs(list) do if x == v then return true end end return false end\n"
    "function tmpdir() local p = os.tmpname(); os.remove(p); assert(os.execute('mkdir -p ' .. p)); return p end\n"
    "function write(path, text) local f = assert(io.open(path, 'wb')); f:write(text); f:close() end\n";

/* kb.tokens: identifiers whole and in parts, stop words, stems */
static void tokens_cases(lua_State *L) {
  run(L, "tokens/identifiers_kept_whole_and_split",
      "local t = kb.tokens('pltpu.VMEM BlockSpec vmem_limit_bytes')\n"
      "for _, w in ipairs{'pltpu.vmem', 'pltpu', 'vmem', 'blockspec', 'block', 'spec', 'vmem_limit_bytes', 'limit', "
      "'byte'} do\n"
      "  assert(has(t, w), 'missing token ' .. w .. ' in ' .. table.concat(t, ' ')) end\n");
  run(L, "tokens/camel_case_acronyms_and_nested_parts",
      "local t = kb.tokens('pltpu.PrefetchScalarGridSpec VMEMRef')\n"
      "for _, w in ipairs{'pltpu.prefetchscalargridspec', 'prefetchscalargridspec', 'prefetch', 'scalar', 'grid', "
      "'spec', 'vmemref', 'vmem', 'ref'} do\n"
      "  assert(has(t, w), 'missing token ' .. w .. ' in ' .. table.concat(t, ' ')) end\n");
  run(L, "tokens/lower_case_and_stop_words_dropped",
      "eq(table.concat(kb.tokens('The of THE are does these Kernel'), ' '), 'kernel')\n");
  run(L, "tokens/inflections_and_us_uk_spellings_fold_to_one_term",
      "local classes = {\n"
      "  {'shape', 'shapes', 'Shaped'}, {'entry', 'entries'}, {'buffer', 'buffers', 'buffered', 'buffering'},\n"
      "  {'estimate', 'estimating', 'estimated'}, {'pad', 'padded', 'padding'}, {'compile', 'compiled', 'compiling'},\n"
      "  {'vectorize', 'vectorise', 'vectorized', 'vectorising', 'vectorizes'}, {'behavior', 'behaviour'},\n"
      "  {'analyze', 'analyse'}, {'size', 'sizes'}, {'call', 'called', 'calling'}}\n"
      "for _, c in ipairs(classes) do\n"
      "  local first = kb.tokens(c[1])[1]\n"
      "  for _, w in ipairs(c) do eq(kb.tokens(w)[1], first, w .. ' vs ' .. c[1]) end\n"
      "end\n"
      "for _, w in ipairs{'string', 'four', 'hour', 'thing', 'need', 'speed', 'bias', 'axis', 'class'} do\n"
      "  eq(kb.tokens(w)[1], w, 'left alone') end\n"
      "assert(kb.tokens('vmem_limit_bytes')[1] == 'vmem_limit_bytes', 'identifiers are not stemmed')\n");
  run(L, "tokens/numbers_kept_and_punctuation_split",
      "local t = kb.tokens('(8, 128) tiles; 1.8x faster')\n"
      "eq(table.concat(t, ' '), '8 128 tile 1.8x 1 8x faster')\n");
  run(L, "tokens/non_ascii_and_invalid_bytes_do_not_break_words",
      "local t = kb.tokens('caf\\xc3\\xa9 \\xff\\xfe vmem')\n"
      "assert(has(t, 'caf\\xc3\\xa9') and has(t, 'vmem'))\n");
}

/* kb.chunks: markdown headings, fences, sizes, bytes */
static void chunk_cases(lua_State *L) {
  run(L, "chunks/split_at_headings_with_heading_path_titles",
      "local c = kb.chunks('intro text\\n# Top\\nbody one\\n## Sub\\nbody two\\n### Deep\\nthree\\n## Sib\\nfour\\n# "
      "Next ##\\nfive\\n')\n"
      "eq(#c, 6, 'chunks')\n"
      "eq(c[1].title, '') eq(c[1].text, 'intro text')\n"
      "eq(c[2].title, 'Top') eq(c[2].text, 'body one') eq(c[2].line, 3)\n"
      "eq(c[3].title, 'Top > Sub')\n"
      "eq(c[4].title, 'Top > Sub > Deep') eq(c[4].text, 'three')\n"
      "eq(c[5].title, 'Top > Sib')\n"
      "eq(c[6].title, 'Next') eq(c[6].text, 'five')\n");
  run(L, "chunks/hash_lines_inside_code_fences_are_not_headings",
      "local c = kb.chunks('# Kernel\\n```python\\n# a comment\\nx = 1\\n## not a heading\\n```\\nafter\\n~~~\\n# "
      "tilde fence\\n~~~\\n')\n"
      "eq(#c, 1, 'chunks') eq(c[1].title, 'Kernel')\n"
      "assert(c[1].text:find('# a comment', 1, true) and c[1].text:find('after', 1, true) and c[1].text:find('# tilde "
      "fence', 1, true))\n");
  run(L, "chunks/empty_heading_adds_no_title_part",
      "local c = kb.chunks('# A\\n#\\nx\\n# B\\n##\\ny\\n')\n"
      "eq(#c, 2) eq(c[1].title, '') eq(c[1].text, 'x') eq(c[2].title, 'B') eq(c[2].text, 'y')\n");
  run(L, "chunks/setext_headings_but_not_rules_lists_or_paragraph_ends",
      "local c = kb.chunks('Title\\n=====\\nintro\\n\\nPart two\\n--------\\nbody\\n\\n---\\n\\nafter rule\\n\\n- "
      "item\\n---\\n\\n"
      "a long paragraph\\nwhose last line\\n---\\nend\\n```\\ncode\\n---\\n```\\n')\n"
      "eq(#c, 2, 'chunks') eq(c[1].title, 'Title') eq(c[1].text, 'intro') eq(c[1].line, 3)\n"
      "eq(c[2].title, 'Title > Part two')\n"
      "assert(c[2].text:find('after rule', 1, true) and c[2].text:find('- item\\n---', 1, true))\n"
      "assert(c[2].text:find('whose last line\\n---\\nend', 1, true), 'second line of a paragraph is not a heading')\n"
      "assert(c[2].text:find('code\\n---', 1, true))\n");
  run(L, "chunks/hashtag_without_space_is_text",
      "local c = kb.chunks('#notaheading\\n####### seven\\ntext')\n"
      "eq(#c, 1) eq(c[1].title, '')\n");
  run(L, "chunks/file_without_headings_is_one_chunk",
      "local c = kb.chunks('just a paragraph\\n\\nand another one\\n')\n"
      "eq(#c, 1) eq(c[1].title, '') eq(c[1].text, 'just a paragraph\\n\\nand another one')\n");
  run(L, "chunks/empty_and_blank_files_give_no_chunks",
      "eq(#kb.chunks(''), 0) eq(#kb.chunks('\\n\\n   \\n'), 0) eq(#kb.chunks('# Only a heading\\n'), 0)\n");
  run(L, "chunks/non_utf8_bytes_replaced_crlf_normalised",
      "local c = kb.chunks('# T\\r\\nbad \\xff\\xc0\\x80 byte\\r\\nok\\0end')\n"
      "eq(#c, 1) eq(c[1].title, 'T')\n"
      "assert(utf8.len(c[1].text), 'text is valid UTF-8')\n"
      "eq(c[1].text, 'bad \\u{FFFD}\\u{FFFD}\\u{FFFD} byte\\nok\\u{FFFD}end')\n");
  run(L, "chunks/long_sections_split_at_paragraphs_not_inside_fences",
      "local para = string.rep('word ', 60) .. '\\n'\n"
      "local fence = '```\\n' .. string.rep('code line\\n\\n', 30) .. '```\\n'\n"
      "local md = '# Long\\n' .. string.rep(para .. '\\n', 10) .. fence .. string.rep(para .. '\\n', 10)\n"
      "local c = kb.chunks(md, {max_chunk = 1000})\n"
      "assert(#c >= 6, 'split into pieces, got ' .. #c)\n"
      "local total = 0\n"
      "for _, x in ipairs(c) do eq(x.title, 'Long'); assert(#x.text <= 1000, 'piece too long: ' .. #x.text); total = "
      "total + select(2, x.text:gsub('word', ''))\n"
      "  local _, fences = x.text:gsub('```', ''); assert(fences % 2 == 0 or #fence > 1000, 'fence split: ' .. x.text) "
      "end\n"
      "eq(total, 60 * 20, 'no words lost')\n");
  run(L, "chunks/giant_line_is_cut_on_utf8_boundaries",
      "local c = kb.chunks(string.rep('\\xc3\\xa9', 2000), {max_chunk = 999})\n"
      "assert(#c >= 4) for _, x in ipairs(c) do assert(utf8.len(x.text), 'valid utf-8 piece') end\n");

  run(L, "chunks/random_markdown_like_bytes_never_lose_text_or_break_utf8",
      "local seed = 7\n"
      "local function rand(n) seed = (seed * 1103515245 + 12345) % 2147483648; return seed % n + 1 end\n"
      "local alphabet = {'#', '# ', '## ', '`', '```', '~~~', '\\n', '\\n\\n', ' ', 'a', 'Z', '_', '.', '-', '\\xff', "
      "'\\xc3', '\\xa9', '\\0', '\\r', 'word', 'pltpu.VMEM', 'x9'}\n"
      "for round = 1, 300 do\n"
      "  local parts = {}\n"
      "  for i = 1, rand(400) do parts[i] = alphabet[rand(#alphabet)] end\n"
      "  local md = table.concat(parts)\n"
      "  local ok, c = pcall(kb.chunks, md, {max_chunk = 200 + rand(300)})\n"
      "  assert(ok, 'chunks raised: ' .. tostring(c))\n"
      "  local words = 0\n"
      "  for _, x in ipairs(c) do\n"
      "    assert(utf8.len(x.text) and utf8.len(x.title), 'invalid utf-8 in round ' .. round)\n"
      "    assert(#x.text > 0 and x.line >= 1)\n"
      "    words = words + select(2, x.text:gsub('word', ''))\n"
      "  end\n"
      "  local _, inmd = md:gsub('word', '')\n"
      "  local inhead, lines = 0, {}\n"
      "  for line in (md:gsub('\\r\\n', '\\n') .. '\\n'):gmatch('([^\\n]*)\\n') do lines[#lines + 1] = line end\n"
      "  for j, line in ipairs(lines) do\n"
      "    local under = lines[j + 1] and (lines[j + 1]:match('^ ? ? ?=+[ \\t]*$') or lines[j + 1]:match('^ ? ? ?%-+[ "
      "\\t]*$'))\n"
      "    if line:match('^ ? ? ?#') or under then inhead = inhead + select(2, line:gsub('word', '')) end\n"
      "  end\n"
      "  assert(words <= inmd and words >= inmd - inhead, string.format('round %d: %d words of %d', round, words, "
      "inmd))\n"
      "  assert(type(kb.tokens(md)) == 'table')\n"
      "end\n");
}

/* kb.open and search: ranking, walking directories, staleness, the shipped corpus */
static void index_cases(lua_State *L) {
  run(L, "search/bm25_prefers_exact_identifier_and_title",
      "local ix = kb.new()\n"
      "ix:add('a.md', '# Memory\\nUse pltpu.VMEM for scratch buffers in fast memory.\\n# Other\\nvmem is mentioned "
      "here and there, vmem vmem.\\n')\n"
      "ix:add('b.md', '# Blocks\\nA BlockSpec maps grid indices to blocks.\\n# Specs\\nThe block of a spec.\\n')\n"
      "local r = ix:search('pltpu.VMEM', 2)\n"
      "eq(r[1].title, 'Memory') eq(r[1].file, 'a.md') assert(r[1].score > r[2].score)\n"
      "r = ix:search('BlockSpec')\n"
      "eq(r[1].title, 'Blocks') eq(r[1].text, 'A BlockSpec maps grid indices to blocks.')\n"
      "eq(#ix:search('zzzunknown'), 0) eq(#ix:search('the of and'), 0) eq(#ix:search(''), 0)\n"
      "local s = ix:stats() eq(s.files, 2) eq(s.chunks, 4)\n");
  run(L, "search/k_limits_results_and_ties_are_stable",
      "local ix = kb.new()\n"
      "for i = 1, 10 do ix:add('f' .. i .. '.md', '# S' .. i .. '\\nsame words here\\n') end\n"
      "local r = ix:search('same words', 3) eq(#r, 3)\n"
      "eq(r[1].file, 'f1.md') eq(r[2].file, 'f2.md')\n"
      "assert(not pcall(ix.search, ix, 'x', 0), 'k = 0 raises')\n"
      "assert(not pcall(ix.search, ix, nil), 'missing query raises')\n");
  run(L, "open/walks_dirs_recursively_sorted_and_skips_hidden",
      "local d = tmpdir()\n"
      "os.execute('mkdir -p ' .. d .. '/sub ' .. d .. '/.hidden')\n"
      "write(d .. '/b.md', '# B\\nbeta text\\n') write(d .. '/sub/a.md', 'alpha text without heading\\n')\n"
      "write(d .. '/.hidden/x.md', '# X\\nalpha\\n') write(d .. '/notes.txt', 'alpha')\n"
      "local ix = assert(kb.open{dirs = {d .. '/'}})\n"
      "eq(ix:stats().files, 2)\n"
      "local r = ix:search('alpha') eq(#r, 1) eq(r[1].name, 'sub/a.md') eq(r[1].file, d .. '/sub/a.md') eq(r[1].title, "
      "'a')\n"
      "os.execute('rm -rf ' .. d)\n");
  run(L, "open/skip_leaves_out_named_subdirectories_also_for_stale",
      "local d = tmpdir()\n"
      "os.execute('mkdir -p ' .. d .. '/learned ' .. d .. '/sub/learned')\n"
      "write(d .. '/a.md', '# A\\nalpha\\n') write(d .. '/learned/l.md', '# L\\nalpha\\n') write(d .. "
      "'/sub/learned/x.md', '# X\\nalpha\\n')\n"
      "local ix = assert(kb.open{dirs = {d}, skip = {'learned/'}})\n"
      "eq(ix:stats().files, 2, 'only the top-level learned/ is skipped')\n"
      "write(d .. '/learned/m.md', '# M\\nbeta\\n') eq(ix:stale(), false, 'changes in skipped dirs do not matter')\n"
      "eq(assert(kb.open{dirs = {d}}):stats().files, 4)\n"
      "assert(not pcall(kb.open, {dirs = {d}, skip = 'learned'}))\n"
      "os.execute('rm -rf ' .. d)\n");
  run(L, "open/missing_dir_returns_not_found",
      "local ix, err = kb.open{dirs = {'/nonexistent/kb/dir'}}\n"
      "eq(ix, nil) eq(err.kind, 'not_found') assert(err.message:find('/nonexistent/kb/dir', 1, true))\n"
      "assert(not pcall(kb.open, {dirs = 'x'}), 'dirs must be a list')\n"
      "assert(not pcall(kb.open, {dirs = {}, max_chunk = 10}), 'max_chunk too small')\n");
  run(L, "stale/detects_added_changed_and_removed_files",
      "local d = tmpdir()\n"
      "write(d .. '/a.md', '# A\\none\\n')\n"
      "local ix = assert(kb.open{dirs = {d}}) ix:add('mem.md', '# M\\nin memory\\n')\n"
      "eq(ix:stale(), false, 'fresh')\n"
      "write(d .. '/b.md', '# B\\ntwo\\n') eq(ix:stale(), true, 'added')\n"
      "ix = assert(kb.open{dirs = {d}}) eq(ix:stale(), false)\n"
      "write(d .. '/a.md', '# A\\none changed\\n') eq(ix:stale(), true, 'changed size')\n"
      "ix = assert(kb.open{dirs = {d}}) os.remove(d .. '/b.md') eq(ix:stale(), true, 'removed')\n"
      "os.execute('rm -rf ' .. d)\n");
  run(L, "index/close_is_idempotent_and_use_after_close_raises",
      "local ix = kb.new() ix:add('a.md', 'x') ix:close() ix:close()\n"
      "assert(not pcall(ix.search, ix, 'x'))\n"
      "assert(tostring(ix):find('closed'))\n");
  run(L, "corpus/block_shape_rule_query_finds_the_rule_first",
      "local ix = assert(kb.open{dirs = {HOME .. '/kb', HOME .. '/targets/pallas/kb'}, skip = {'learned'}})\n"
      "local r = ix:search('block shape must be divisible by 8 and 128', 3)\n"
      "assert(r[1], 'no results')\n"
      "assert(r[1].text:find('128', 1, true) and r[1].text:find('divisible', 1, true), 'first: ' .. r[1].title)\n"
      "eq(r[1].name, 'pallas-blockspec.md', 'file of first hit')\n"
      "assert(r[1].title:find('Block-shape rule', 1, true), 'title: ' .. r[1].title)\n");
}

int main(void) {
  lua_State *L = luaL_newstate();
  luaL_openlibs(L);
  luaL_requiref(L, "mk.kb", luaopen_mk_kb, 0);
  lua_pop(L, 1);
  if (luaL_dostring(L, prelude) != LUA_OK) {
    printf("prelude: %s\n", lua_tostring(L, -1));
    return 1;
  }
  const char *home = getenv("MKENGINE_HOME");
  lua_pushstring(L, home ? home : ".");
  lua_setglobal(L, "HOME");

  tokens_cases(L);
  chunk_cases(L);
  index_cases(L);

  lua_close(L);
  printf("%d passed, %d failed\n", passed, failed);
  return failed ? 1 : 0;
}
