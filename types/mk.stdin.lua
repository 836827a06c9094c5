---@meta mk.stdin
-- mk.stdin: lines of the engine's standard input, read through the loop
-- (engine/stdin.c): the calling task waits, the engine does not.
local stdin = {}

--- The next line without its newline; nil at the end of input; nil, err
--- when fd 0 is neither a terminal nor a pipe ({kind = "unsupported"}).
---@return string|nil
---@return mk.err|nil err
function stdin.read_line() end

--- What fd 0 is.
---@return "tty"|"pipe"|"file"|"none"
function stdin.kind() end

return stdin
