---@meta mk.fs
-- engine/fs.c: synchronous file primitives (docs/api/fs.md).

---@class mk.fs
local fs = {}

---@param path string
---@return string|nil data
---@return mk.err|nil err
function fs.read(path) end

---@param path string
---@param data string
---@param opts {atomic: boolean?, sync: boolean?, mode: integer?}|nil
---@return true|nil ok
---@return mk.err|nil err
function fs.write(path, data, opts) end

---@param path string
---@param data string
---@param sync boolean|nil
---@return true|nil ok
---@return mk.err|nil err
function fs.append(path, data, sync) end

---@param path string
---@param mode integer|nil
---@return true|nil ok
---@return mk.err|nil err
function fs.mkdirs(path, mode) end

---@param dir string
---@return string[]|nil names sorted, without . and ..
---@return mk.err|nil err
function fs.list(dir) end

---@param path string
---@return {type: "file"|"dir"|"link"|"other", size: integer, mtime: number, mode: integer}|nil
---@return mk.err|nil err
function fs.stat(path) end

---@param path string
---@return boolean
function fs.exists(path) end

---@param path string
---@return boolean
function fs.isdir(path) end

---@param path string
---@return string|nil
---@return mk.err|nil err
function fs.realpath(path) end

---@return string
function fs.cwd() end

---@param path string refuses "" and "/"
---@return true|nil ok
---@return mk.err|nil err
function fs.rm_rf(path) end

---@param path string
---@return true|nil ok
---@return mk.err|nil err
function fs.remove(path) end

---@param from string
---@param to string
---@return true|nil ok
---@return mk.err|nil err
function fs.rename(from, to) end

---@param path string
---@param mode integer
---@return true|nil ok
---@return mk.err|nil err
function fs.chmod(path, mode) end

--- A new private directory under $TMPDIR or /tmp.
---@param prefix string|nil
---@return string|nil
---@return mk.err|nil err
function fs.tmpdir(prefix) end

---@class mk.fs.lock
local lock = {}
function lock:unlock() end

--- A lock held until :unlock(), the end of its `<close>` scope or the process dies; nil, {kind = "locked"} when another process holds it.
---@param path string
---@return mk.fs.lock|nil
---@return mk.err|nil err
function fs.lock(path) end

return fs
