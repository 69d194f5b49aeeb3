-- release.lua: compare-and-delete (DESIGN §2.5), then wake the waiters (§2.7), for a batch of n >= 1 releases
-- on this node in one round trip (the coordinator combines the releases issued together).
--
-- KEYS[2i-1]   lease key        layout 'fenced': `<prefix>:{<resource>}:lease`; 'redlock' (or 'fenced' with
--                                 holdRedlockKey, node-redlock's key): the resource name             (i = 1 .. n)
-- KEYS[2i]     lease record     `<leaseId>|<token>`: KEYS[2i-1] itself ('fenced') or a key beside it (deleted when it
--                                 holds the lease id, whatever the lease key holds)
-- ARGV[2i-1]   lease id
-- ARGV[2i]     pub/sub channel  `<prefix>:{<resource>}:released`
--
-- Returns an array of n replies, the i-th for the i-th release:
--   {1}  RELEASED: the key held the lease id; it is deleted (with the record, when that is this lease's) and the lease id was published on the channel
--        (waiters count one release once, however many nodes announce it).
--   {2}  NOT_HELD: the key is absent (already expired or released) or holds another lease: nothing changed.
--   {7, message}  CALL_ERROR: this call raised a Redis error (see include/call-error.lua).
-- An argument count that does not match KEYS is an error reply (a caller bug).
--
-- Release does not check the incarnation key: deleting our own lease is always safe, and a node that
-- restarted empty holds nothing of ours anyway.
--
-- Each item runs under pcall (a Redis error is that item's {7, message}); its calls are GET, DEL and PUBLISH (and a
-- record's GET and DEL beside its lease key), the fewest for the check and the wake-up. The reply {1} is built once
-- per batch (issue 37, "the lean scripts").

-- @include lease-value
-- @include call-error

local n = #KEYS / 2
if n < 1 or n % 1 ~= 0 or #ARGV ~= 2 * n then
  return redis.error_reply('ERR fenced release: expected 2n keys and 2n arguments')
end

-- RELEASED, the reply of most items, built once per batch and returned by every item that answers it.
local function released()
  return {1}
end
local RELEASED = released()

local function release_one(lease_key, record_key, lease_id, channel)
  if record_key ~= lease_key then
    local record = redis.call('GET', record_key)
    if record ~= false and lease_holder(record) == lease_id then
      redis.call('DEL', record_key)
    end
  end
  local value = redis.call('GET', lease_key)
  if value == false then
    return {2}
  end
  -- Ownership check: a late release must never delete a successor's lease (F11).
  if lease_holder(value) ~= lease_id then
    return {2}
  end
  redis.call('DEL', lease_key)
  redis.call('PUBLISH', channel, lease_id)
  return RELEASED
end

local replies = {}
for i = 1, n do
  local ok, reply = pcall(release_one, KEYS[2 * i - 1], KEYS[2 * i], ARGV[2 * i - 1], ARGV[2 * i])
  replies[i] = ok and reply or call_error(reply)
end
return replies
