-- source-keys.lua: included by the repair's read scripts (`-- @include source-keys`; needs decimal-token).
--
-- Sorts keys read from a source into what the repair copies: each token register holding a decimal token above the
-- source's `floor` as (key, value) pairs appended to `registers`, and each live lease record as (key, value,
-- remaining ttl in ms) triples appended to `leases`. Other keys (node state, channels, a record that expired) are
-- skipped, and so is a register at or below the floor: the source answers max(register, floor) for it
-- (include/decimal-token.lua, read_register), and the floor is sent with the batch.
local function collect_source_keys(keys, floor, registers, leases)
  for _, key in ipairs(keys) do
    local suffix = string.sub(key, -6)
    if suffix == ':token' then
      local value = redis.call('GET', key)
      if is_token(value) and greater(value, floor) then
        registers[#registers + 1] = key
        registers[#registers + 1] = value
      end
    elseif suffix == ':lease' then
      local value = redis.call('GET', key)
      local pttl = redis.call('PTTL', key)
      if value ~= false and pttl > 0 then
        leases[#leases + 1] = key
        leases[#leases + 1] = value
        leases[#leases + 1] = pttl
      end
    end
  end
end
