---@meta mk.kb
-- engine/kb.c: markdown chunks and BM25 (docs/api/kb.md).

---@class mk.kb
local kb = {}

---@class mk.kb.hit
---@field file string
---@field name string
---@field title string
---@field text string
---@field line integer
---@field score number
---@field chunk integer

---@class mk.kb.index
local index = {}
---@param query string
---@param k integer|nil default 5
---@return mk.kb.hit[]
function index:search(query, k) end
---@param name string
---@param markdown string
---@return integer chunks
function index:add(name, markdown) end
---@param dir string
---@return true|nil
---@return mk.err|nil err
function index:add_dir(dir) end
---@return {files: integer, chunks: integer, terms: integer, tokens: integer, bytes: integer}
function index:stats() end
---@return boolean
function index:stale() end
function index:close() end

---@param opts {dirs: string[], skip: string[]?, max_chunk: integer?}
---@return mk.kb.index|nil
---@return mk.err|nil err
function kb.open(opts) end

---@param opts {max_chunk: integer?}|nil
---@return mk.kb.index
function kb.new(opts) end

---@param markdown string
---@param opts {max_chunk: integer?}|nil
---@return {title: string, text: string, line: integer}[]
function kb.chunks(markdown, opts) end

---@param text string
---@return string[]
function kb.tokens(text) end

return kb
