---@meta mk.httpd
-- mk.httpd: an HTTP server for tasks (engine/httpd.c, GNU libmicrohttpd on
-- the engine's libuv loop). Used by the run viewer (lua/mk/ui/server.lua).
local httpd = {}

---@class mk.httpd.request
---@field method string
---@field path string the URL path (not decoded)
---@field headers table<string, string> names in lower case
---@field query table<string, string>
---@field body string (at most 1 MiB; larger requests get 413 before a task sees them)
local req = {}
--- Answer; false when the client went away. Raises if already answered.
---@param status integer
---@param body string|nil
---@param headers table<string, string>|nil
---@return boolean
function req:respond(status, body, headers) end
--- Start a streamed reply (chunked, e.g. Server-Sent Events).
---@return boolean
function req:stream(status, headers) end
--- Append to a stream; false once the client went away. With within_s > 0
--- the text may wait that long, to go out in one write with later sends
--- (of this stream or another: one timer resumes them all).
---@param text string
---@param within_s number|nil 0..60 (default 0: at once)
---@return boolean
function req:send(text, within_s) end
--- End a stream.
function req:close() end
--- Whether the stream's client is still there.
---@return boolean
function req:open() end

---@class mk.httpd.server
local srv = {}
--- The next complete request (waits); nil once the server is closed.
---@return mk.httpd.request|nil
function srv:next() end
---@return integer port the bound port (useful with port = 0)
function srv:port() end
function srv:close() end
---@return {requests: integer, cpu_s: number} requests alive; CPU seconds spent in the HTTP library
function srv:stats() end

--- Listen (default 127.0.0.1, port 0 = a free one).
---@param opts {host: string?, port: integer?}
---@return mk.httpd.server|nil
---@return mk.err|nil err {kind = "listen"|"bad_address"}
function httpd.listen(opts) end

return httpd
