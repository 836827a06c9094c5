---@meta
-- Types shared by every module.

--- What an expected runtime failure returns beside `nil` (`return nil, err`).
--- Switch on `kind`; `message` is for people.
---@class mk.err
---@field kind string e.g. "io", "timeout", "not_found", "budget", "spawn", "http", "rate_limit", "bad_task"
---@field message string one human line
