std = "lua54"
max_line_length = 160
codes = true
files["tests/lua"] = { globals = { "arg" } }
files["examples"] = { globals = { "arg" } }
files["bench"] = { globals = { "arg" } }
-- mk.task wraps coroutine.resume/wrap so engine waits pass through user coroutines
files["lua/mk/task.lua"] = { globals = { "coroutine" } }
