-- decimal-token.lua: included by the scripts that read or compare fencing tokens (`-- @include decimal-token`).
--
-- Tokens are canonical decimal strings (no sign, no leading zeros, at most 19 digits: 1 ..= 2^63-1). A whole token
-- is never passed through tonumber: Lua numbers are doubles and lose precision above 2^53 (parts of ten digits or
-- fewer are exact, which `greater` uses).

-- (`%d` is C's isdigit, 0-9 in every locale, and cheaper to match than a set: this runs in every acquire.)
local function is_token(s)
  return type(s) == 'string' and #s <= 19 and string.find(s, '^[1-9]%d*$') ~= nil
end

-- a > b for canonical decimal strings: longer is larger; at equal length, the leading digits and then the last nine
-- compared as numbers (no part is longer than ten digits, so below 2^53, where tonumber is exact). Not Lua's string
-- `>`, which uses strcoll and so depends on the server's locale; and not a loop over the digits, which costs a call
-- per digit: this runs in every acquire.
local function greater(a, b)
  local n = #a
  if n ~= #b then
    return n > #b
  end
  if n <= 10 then
    return tonumber(a) > tonumber(b)
  end
  local head_a, head_b = string.sub(a, 1, n - 9), string.sub(b, 1, n - 9)
  if head_a ~= head_b then
    return tonumber(head_a) > tonumber(head_b)
  end
  return tonumber(string.sub(a, n - 8)) > tonumber(string.sub(b, n - 8))
end

-- The node's floor (`<prefix>:node:floor`) as a decimal string: '0' when absent (or holding '0', what a Cluster slot's
-- initialization writes so that its floor key is present, include/node-state.lua), nil when it holds anything else
-- but a token (then the node must not vote: CORRUPT).
local function read_floor(floor_key)
  local floor = redis.call('GET', floor_key)
  if floor == false or floor == '0' then
    return '0'
  end
  if is_token(floor) then
    return floor
  end
  return nil
end

-- The larger of two canonical decimal strings ('0' included).
local function max_token(a, b)
  if greater(b, a) then
    return b
  end
  return a
end

-- The register at `key` as a decimal string: **a node never answers below its floor** (DESIGN §3). An absent
-- register reads as the floor, and a present one as max(register, floor): registers of idle resources are folded
-- into the floor (fold.lua), and a repair raises the floor of a node that lost its state (repair-raise.lua), so the
-- floor is at least every value this node promised for a resource whose register is gone or was never brought back.
-- A register left below the floor — by a repair attempt that stopped after copying part of a source, before the
-- sources folded (F27) — is therefore never an answer. nil when the register or the floor holds anything but a
-- token — then the node must not vote (CORRUPT), never treat it as 0. `floor_read`, when given, is what read_floor
-- returned for `floor_key` earlier in the same call with nothing written to it since (acquire.lua reads it once per
-- batch); a nil one is read again.
local function read_register(key, floor_key, floor_read)
  local floor = floor_read or read_floor(floor_key)
  if floor == nil then
    return nil
  end
  if key == floor_key then
    return floor
  end
  local cur = redis.call('GET', key)
  if cur == false then
    return floor
  end
  if not is_token(cur) then
    return nil
  end
  return max_token(cur, floor)
end
