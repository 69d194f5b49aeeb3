-- lease-value.lua: included by the scripts that read a lease key (`-- @include lease-value`).
--
-- A lease record holds `<leaseId>|<token>`: the lease id (base64url, never contains '|') and the decimal token of the
-- grant. A value without '|' is a bare lease id (no token): what a lease key holds in the 'redlock' key layout
-- (redlock/keys.ts), where the record is a separate key.

-- The lease id part of a lease value.
local function lease_holder(value)
  local sep = string.find(value, '|', 1, true)
  return sep and string.sub(value, 1, sep - 1) or value
end

-- The token part of a lease value ('' when it carries none).
local function lease_token(value)
  local sep = string.find(value, '|', 1, true)
  return sep and string.sub(value, sep + 1) or ''
end
