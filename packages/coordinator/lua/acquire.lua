-- acquire.lua: Redlock votes plus the folded-in token promises (DESIGN §2 and §3), for a batch of n >= 1
-- acquires on this node in one round trip. The coordinator combines the acquires issued together; each item is
-- decided exactly as if it ran alone, in order.
--
-- KEYS[1]      incarnation key  `<prefix>:node:incarnation` (absent = this node restarted empty)
-- KEYS[2]      floor            `<prefix>:node:floor` (what an absent register reads as; absent = 0)
-- KEYS[3]      seal epoch       `<prefix>:node:seal` (absent = '')
-- KEYS[4]      settings         `<prefix>:node:settings` (hash; maxTtlMs bounds the ttl, nodeCount and keyLayout must
--                                 match the caller's, each when present: include/node-state.lua)
-- KEYS[3i+2]   lease key        layout 'fenced': `<prefix>:{<resource>}:lease`; 'redlock' (or 'fenced' with
--                                 holdRedlockKey, node-redlock's key): the resource name                     (i = 1 .. n)
-- KEYS[3i+3]   lease record     `<leaseId>|<token>`: the lease key itself ('fenced') or a key beside it
-- KEYS[3i+4]   token register   `<prefix>:{<resource>}:token` (or beside the lease key), `cur` as a decimal string
--              (absent = floor; read as max(register, floor); on a stamped Cluster slot the promise goes to the floor,
--              the slot's one register: include/node-state.lua)
-- (keys/key-layout.ts: a lease key that is not the record holds exactly the lease id, as node-redlock's does.)
-- ARGV[4i-3]   lease id (base64url, never contains '|')
-- ARGV[4i-2]   ttl in milliseconds (integer)
-- ARGV[4i-1]   proposed token t (canonical decimal string, 1 ..= 2^63-1)
-- ARGV[4i]     the seal epoch the caller last saw for this node ('' for none)
-- ARGV[4n+1]   the number of nodes the caller counts its quorum over (decimal)
-- The key layout of item i is the one its record is in (include/lease-value.lua, key_layout): 'fenced' when KEYS[3i+3]
-- is KEYS[3i+2] or ends with its hash tag `}:lease`, else 'redlock'. An item is granted only where both its lease key
-- and its record are absent or this lease's: a Coordinator holds the record, node-redlock the resource name.
--
-- Returns an array of n replies, the i-th for the i-th acquire:
--   {1, 1}          GRANTED and PROMISED: the record now holds `<leaseId>|<t>` for ttl ms (and a separate lease
--                   key the lease id, for ttl ms too) and cur is now t
--                   (the client knows t, so it is not sent back).
--   {1, 0, cur}     GRANTED, promise REFUSED: t <= cur, cur unchanged (decimal string).
--   {2, pttl, cur}  HELD: another lease holds the key; pttl is its remaining ttl in ms (-1: no expiry).
--   {3}             NOT_INITIALIZED: the incarnation key is missing, or this Cluster slot cannot prove it holds what it
--                   promised (include/node-state.lua); this node must not vote.
--   {4}             CORRUPT: the token register or the floor does not hold a decimal token; no vote.
--   {7, message}    CALL_ERROR: this call raised a Redis error (see include/call-error.lua); no vote.
--   {13, epoch}     SEALED: ARGV[4i] is not the node's seal epoch (a repair read this node since the caller
--                   last looked); nothing written. The caller remembers `epoch` for its next round.
--   {14, max}       TTL_ABOVE_MAX: the ttl exceeds the cluster's maxTtlMs recorded on this node; nothing written.
--   {15, field, v}  SETTINGS_MISMATCH: the caller's nodeCount or key layout is not the one recorded on this node
--                   (`v`); nothing written. The caller re-reads the cluster's settings before its next round.
-- An argument count that does not match KEYS is an error reply (a caller bug, never a vote).
--
-- The record's token (what extend.lua and inspect.lua report, so the HTTP extend by lease id and `inspect()`): the
-- proposal, except that a record already holding this lease keeps its token when that is higher. Without that, a
-- duplicated acquire message of the same lease id (a network duplicate, or one delivered late) sets a record that
-- promise.lua fixed to the grant's token t back to the refused first guess g < t — which may be another grant's token —
-- and an extend or inspect whose majority holds only such records reports g (docs/design.md, "The lease record's
-- token"). Why this keeps every promise:
-- - The register is written exactly as before (only `greater(proposal, cur)` sets it), so uniqueness and monotonicity
--   of tokens (G2), and with them G1, G3, G4, G5, rest on nothing this changes; the lease key, its ttl and the
--   ownership checks are as before, so lease exclusion is unchanged too.
-- - A kept token is one already in this lease's own record on this node: never another lease's (the record is another
--   holder's => the proposal is written, and the call is HELD anyway), and never above what this node holds as cur:
--   every record token is a proposal this node promised (= cur then) or refused (<= cur then), and cur only grows.
--   So promise.lua, which writes only t > cur, still only raises a record's token.
-- - One lease id's proposals only grow (tokens/proposal.ts), so the kept token is the highest proposal of the lease
--   that reached this node: at most the grant's token, never above it.
-- Tests that fail without it: test/integration/coordinator/record-token.test.ts (a duplicated acquire on real nodes),
-- test/unit/coordinator/protocol/lease-retries.test.ts (the simulation's `record-token-off` control).
--
-- How a batch runs (issue 37, "the lean scripts": an item makes no Redis call the script before it (44e2b59) did not,
-- fewer in the common cases below, and where it moves one it reports the error the earlier order reported, so that
-- every case, errors included, gets the same reply and leaves the same keys;
-- test/integration/coordinator/scripts/lean-scripts.test.ts runs both on redis-server):
-- - Read once per batch: the incarnation, the seal epoch, the settings, and the floor (at the first item that reads a
--   register; again after an item wrote the floor key: a promise on a stamped slot, or a resource named as the floor).
--   A ttl string is compared with maxTtlMs once, for the items that carry the same one.
-- - In the 'fenced' layout an absent lease key (the record) is written by one SET NX, with the proposal as its token;
--   only a present one is read, for the record's kept token and the ownership check, as before. The 'redlock' layout
--   (a record beside the lease key) makes the calls it made before.
-- - Each item runs under pcall, and a Redis error of one item is its reply {7, message}: where the earlier script read
--   a 'fenced' record before its SET NX, a SET NX that fails (a ttl SET refuses, maxmemory) is followed by that read,
--   whose error (a key of another type) is the one reported, as before. A Lua error inside an item (only a caller bug:
--   a ttl or proposal that is not a number) names this script's line in its message.
--
-- Tokens are compared as decimal strings (length, then two parts of at most ten digits, include/decimal-token.lua):
-- Lua numbers are doubles and lose precision above 2^53, so a whole token is never passed through tonumber.

-- @include decimal-token
-- @include lease-value
-- @include seal
-- @include node-state
-- @include settings-check
-- @include call-error

-- The token part of the record this acquire writes (the header's "The record's token"): the proposal, unless the
-- record already holds this lease with a higher token — a duplicated or retried acquire never sets it back.
local function record_token(record_key, lease_id, proposal)
  local current = redis.call('GET', record_key)
  if current == false or lease_holder(current) ~= lease_id then
    return proposal
  end
  local kept = lease_token(current)
  if is_token(kept) and greater(kept, proposal) then
    return kept
  end
  return proposal
end

local n = (#KEYS - 4) / 3
if n < 1 or n % 1 ~= 0 or #ARGV ~= 4 * n + 1 then
  return redis.error_reply('ERR fenced acquire: expected 4 + 3n keys and 4n + 1 arguments')
end

-- A stamped Cluster slot records every promise in its floor (include/node-state.lua, promise_key).
local initialized, stamped = node_may_vote(KEYS[1], {KEYS[2], KEYS[3], KEYS[4]})
local epoch = seal_epoch(KEYS[3])
local recorded = recorded_settings(KEYS[4])
local max_ttl = recorded.max_ttl
local node_count = ARGV[4 * n + 1]
local floor_key = KEYS[2]
-- The floor as read_floor read it, for every item of the batch: read at the first item that needs it, and read again
-- after an item wrote the floor key (a promise on a stamped slot, or an item key that is the floor key).
local floor, floor_read = nil, false
local GRANTED = {1, 1}
-- The last ttl string compared with max_ttl, and whether it was above.
local checked_ttl, ttl_above = nil, false

local function acquire_one(lease_key, record_key, token_key, lease_id, ttl, proposal, caller_epoch)
  if not initialized then
    return {3}
  end
  local mismatch = settings_mismatch(recorded, node_count, key_layout(lease_key, record_key))
  if mismatch ~= nil then
    return mismatch
  end
  -- The seal: a round that began before a repair read this node records nothing here (nodes/repair.ts).
  if caller_epoch ~= epoch then
    return {13, epoch}
  end
  if max_ttl ~= nil then
    -- The ttl is converted once for the items that carry the same string (a batch's usually do).
    if ttl ~= checked_ttl then
      ttl_above = tonumber(ttl) > max_ttl
      checked_ttl = ttl
    end
    if ttl_above then
      return {14, max_ttl}
    end
  end
  if not floor_read then
    floor, floor_read = read_floor(floor_key), true
  end
  local cur = read_register(token_key, floor_key, floor)
  if cur == nil then
    return {4}
  end
  if lease_key == floor_key or record_key == floor_key then
    floor_read = false -- this item may write the floor key (a resource name that is the floor's key)
  end
  -- Ownership check: the lease key is written only if absent (NX); a key holding our own id is a vote for us (an
  -- earlier attempt of this same acquire reached this node), so retries never block themselves and renew it; any
  -- other value belongs to someone else (in the 'redlock' layout also a key another program set, e.g. node-redlock
  -- itself). Script time stands still, so a key present for NX is still present for the GET.
  local separate = record_key ~= lease_key
  local set = false
  if not separate then
    -- 'fenced': the lease key is the record. An absent one is written here, by one SET NX, with the proposal (what
    -- record_token gives for an absent record); only a present one is read, below.
    set = redis.pcall('SET', lease_key, lease_id .. '|' .. proposal, 'NX', 'PX', ttl)
    if set ~= false and set.err ~= nil then
      -- The script before this one read the record (record_token) before its SET NX: an error of that read or of
      -- its token's comparison is reported first, as then; else the SET's (a ttl SET refuses, maxmemory).
      record_token(record_key, lease_id, proposal)
      return call_error(set)
    end
  end
  if set == false then
    local record = lease_id .. '|' .. record_token(record_key, lease_id, proposal)
    local value = separate and lease_id or record
    -- A record of its own is held too (keys/key-layout.ts): with node-redlock's key beside a 'fenced' record, a
    -- Coordinator holds only the record, so it is checked before the lease key is taken.
    if separate then
      local other = redis.call('GET', record_key)
      if other ~= false and lease_holder(other) ~= lease_id then
        return {2, redis.call('PTTL', record_key), cur}
      end
      set = redis.call('SET', lease_key, value, 'NX', 'PX', ttl)
    end
    if not set then
      local held = redis.call('GET', lease_key)
      if held ~= false and lease_holder(held) ~= lease_id then
        return {2, redis.call('PTTL', lease_key), cur}
      end
      redis.call('SET', lease_key, value, 'PX', ttl)
    end
    if separate then
      redis.call('SET', record_key, record, 'PX', ttl)
    end
  end
  -- The promise: only above everything this node ever promised for the resource (cur, or the floor).
  if greater(proposal, cur) then
    local key = promise_key(stamped, token_key, floor_key)
    if key == floor_key then
      floor_read = false
    end
    redis.call('SET', key, proposal)
    return GRANTED
  end
  return {1, 0, cur}
end

local replies = {}
for i = 1, n do
  local ok, reply = pcall(acquire_one, KEYS[3 * i + 2], KEYS[3 * i + 3], KEYS[3 * i + 4], ARGV[4 * i - 3], ARGV[4 * i - 2],
    ARGV[4 * i - 1], ARGV[4 * i])
  replies[i] = ok and reply or call_error(reply)
end
return replies
