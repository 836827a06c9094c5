---@meta mk.hash
-- engine/hash.c over engine/digest.c, OpenSSL libcrypto (docs/api/hash.md).

---@class mk.hash
local hash = {}

--- 64 lower-case hex digits.
---@param data string
---@return string
function hash.sha256(data) end

---@param path string
---@return string|nil hex
---@return mk.err|nil err kind "io"
function hash.sha256_file(path) end

return hash
