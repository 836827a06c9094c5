-- The reply corpus of tests/lua/replies_test.lua: each reply file
-- (NN-name.txt) with the language and entry the extraction is asked for
-- and the expected code (NN-name.expected; none = no code). changed = the
-- one-line "what I changed" expected from the reply.
return {
  { "01-prose-kernel-usage", "c", "kernel" },
  { "02-python3-fence", "python", "computation" },
  { "03-Python-capital", "python", "computation" },
  { "04-cpp-fence", "c", "kernel" },
  { "05-tilde-fence", "c", "kernel" },
  { "06-truncated", "c", "kernel" },
  { "07-indented", "c", "kernel" },
  { "08-diff-then-full", "c", "kernel" },
  { "09-json-wrapped", "c", "kernel", changed = "added the epsilon" },
  { "10-helper-then-kernel", "c", "kernel" },
  { "11-no-code", "c", "kernel", none = true },
  { "12-bash-and-c", "c", "kernel" },
  { "13-pallas-usage-after", "python", "computation" },
  { "14-unlabelled-python-with-c-lang-mismatch", "c", "kernel" },
  { "15-bare-code", "c", "kernel" },
  { "16-changed-line-and-crlf", "c", "kernel", changed = "moved the reciprocal square root out of the inner loop." },
  { "17-four-backtick-nested", "c", "kernel" },
  { "18-py-inline-fence-info", "python", "computation" },
}
