--- Beam's menu of ideas for the shell target.
return {
  "use shell arithmetic instead of spawning a process per number",
  "hand the whole input to one awk program",
}
