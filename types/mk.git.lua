---@meta mk.git
-- engine/git.c: libgit2 objects, refs, diffs (docs/api/git.md). Synchronous.

---@class mk.git
local git = {}

---@class mk.git.repo
local repo = {}
---@param o {files: table<string, string>, parents: string[]?, message: string?, ref: string?, time: integer?, author: string?, email: string?}
---@return string|nil oid
---@return mk.err|nil err
function repo:commit(o) end
---@return string|nil oid
---@return mk.err|nil err
function repo:set_ref(name, rev, log_message) end
---@return true|nil
---@return mk.err|nil err
function repo:delete_ref(name) end
---@return string|nil oid
---@return mk.err|nil err
function repo:ref(name) end
---@param glob string|nil
---@return {name: string, oid: string}[]
function repo:refs(glob) end
---@return true|nil
---@return mk.err|nil err
function repo:symref(name, target) end
---@return string|nil data
---@return mk.err|nil err
function repo:read(rev, path) end
---@return string[]|nil
---@return mk.err|nil err
function repo:ls(rev) end
---@return {oid: string, tree: string, parents: string[], message: string, time: integer, author: string}|nil
---@return mk.err|nil err
function repo:info(rev) end
---@param oid string
---@return boolean
function repo:exists(oid) end
--- The patch text (as `git diff`) and its stat.
---@param opts {context: integer?}|nil
---@return string|nil patch
---@return {files: {path: string, status: string, insertions: integer, deletions: integer}[], changed: integer, insertions: integer, deletions: integer, text: string}|mk.err stat
function repo:diff(a, b, opts) end
function repo:pack_refs() end
---@return string
function repo:path() end
function repo:close() end

---@param path string
---@return mk.git.repo|nil
---@return mk.err|nil err
function git.init(path) end
---@param path string
---@return mk.git.repo|nil
---@return mk.err|nil err
function git.open(path) end
---@param on boolean
function git.fsync(on) end
---@return string
function git.version() end

return git
