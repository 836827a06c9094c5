std = "lua54"
max_line_length = 160
codes = true
files["tests/lua"] = { globals = { "arg" } }
files["examples"] = { globals = { "arg" } }
files["bench"] = { globals = { "arg" } }
-- mk.services.task wraps coroutine.resume/wrap so engine waits pass through user coroutines
files["lua/mk/services/task.lua"] = { globals = { "coroutine" } }
