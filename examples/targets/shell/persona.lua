--- What the sub-agents tell a model about the shell target.
return {
  target_desc = "a POSIX shell (dash), one process per call",
  lang = "sh",
  rules = "Rules: a POSIX sh script; read the numbers on stdin, print the one-line result on stdout; "
    .. "no files, no network, no background processes.",
  tune_syntax = "(the shell target has no tunables)",
}
