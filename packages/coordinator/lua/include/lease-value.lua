-- lease-value.lua: included by the scripts that read a lease key (`-- @include lease-value`).
--
-- A lease record holds `<leaseId>|<token>`: the lease id (base64url, never contains '|') and the decimal token of the
-- grant. A value without '|' is a bare lease id (no token): what a lease key holds in the 'redlock' key layout
-- (keys/key-layout.ts), where the record is a separate key.

-- The lease id part of a lease value.
local function lease_holder(value)
  local sep = string.find(value, '|', 1, true)
  return sep and string.sub(value, 1, sep - 1) or value
end

-- The key layout a call's lease key and record are in (keys/key-layout.ts, keyLayoutOf: the same rule), told by where the
-- record, and so the token register, lives: 'fenced' when the record is the lease key, or ends with its hash tag
-- (`<prefix>:{<resource>}:lease`, also when the lease key beside it is node-redlock's, the resource name:
-- `holdRedlockKey`); else 'redlock', whose record `<prefix>:{<slot tag>}:<resource>:lease` ends with the encoded
-- resource name, which never holds '}'.
local function key_layout(lease_key, record_key)
  if record_key == lease_key or string.sub(record_key, -7) == '}:lease' then
    return 'fenced'
  end
  return 'redlock'
end

-- The token part of a lease value ('' when it carries none).
local function lease_token(value)
  local sep = string.find(value, '|', 1, true)
  return sep and string.sub(value, sep + 1) or ''
end
