---@meta mk.http
-- engine/http.c (docs/api/http.md). Waits: call inside a task.

---@class mk.http
---@field version string libcurl's version text
local http = {}

---@class mk.http.opts
---@field url string
---@field method string|nil
---@field headers table<string, string>|nil
---@field body string|nil
---@field timeout number|nil
---@field connect_timeout number|nil
---@field stall_timeout number|nil
---@field on_line fun(line: string)|nil

---@class mk.http.response
---@field status integer
---@field headers table<string, string>
---@field body string
---@field time_s number
---@field new_connections integer

---@param opts mk.http.opts
---@return mk.http.response|nil
---@return mk.err|nil err
function http.request(opts) end

---@class mk.http.request
local req = {}
---@return string[]|nil lines
function req:next_lines() end
---@return mk.http.response|nil
---@return mk.err|nil err
function req:wait() end
---@return integer|nil
function req:status() end
function req:close() end

--- The lower level under request: a transfer whose lines are read as they arrive.
---@param opts mk.http.opts
---@return mk.http.request
function http.open(opts) end

--- Transfers allocated and in flight (for leak checks).
---@return integer allocated
---@return integer in_flight
function http.live() end

return http
