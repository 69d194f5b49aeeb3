-- seal.lua: included by every script that can record a promise or a lease vote (`-- @include seal`).
--
-- The node's seal epoch (DESIGN §3, the sealed repair; nodes/repair.ts holds the argument): a random id that a
-- repair's first read of this node replaces (repair-read.lua). A promise-recording call carries the epoch its caller
-- last saw for this node and is refused, with the current epoch, when they differ: a round that began before the
-- seal can no longer record anything here, so the repair's read of this node is final for every such round.
-- An absent key reads as the empty epoch '' (a cluster initialized before seals existed, and a new cluster).

local function seal_epoch(seal_key)
  local epoch = redis.call('GET', seal_key)
  if epoch == false then
    return ''
  end
  return epoch
end
