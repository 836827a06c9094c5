-- Sum the integers on stdin (the shell target's example task).
return {
  target = "shell",
  name = "sum",
  description = "Print the sum of the integers given one per line on stdin.",
  seed = 7,
}
