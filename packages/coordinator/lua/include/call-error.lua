-- call-error.lua: included by the batch scripts (`-- @include call-error`).
--
-- Each call of a batch runs under pcall: a Redis error in one call (a key of another type, out of memory) answers
-- that call alone with {7, message} — the client fails just that call on this node (NodeCallError) — and the
-- batch goes on. Writes the failed call made before the error stay, as they would without a batch.

local function call_error(err)
  if type(err) == 'table' and err.err ~= nil then
    return {7, err.err}
  end
  return {7, tostring(err)}
end
