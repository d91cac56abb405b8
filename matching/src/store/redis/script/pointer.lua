-- The user's pointer: one key `{<prefix>:mu:<hex of the user id>}` (its own slot), a string
-- holding which queue the user was last sent to, as a CLAIM `<queue key>|<claim ms>|<nonce>`
-- (the claim's value is also its token: unique, as the nonce is 64 random bits), with a TTL that
-- outlives the user's membership. Each change is a compare-and-set on the value read.

local POINTER = {}

-- Whether `key` is a queue's key as the crate makes one (Queue::key): its topic's bytes in
-- lowercase hex (at most 64 bytes), a dot and its group size. No '|' then, which separates a
-- claim's parts.
local function is_queue_key(key)
  return #key <= 131 and string.match(key, '^[0-9a-f]+%.[2-8]$') ~= nil
end

-- twr_match_v1_claim: sets a new claim for a queue if the pointer holds the expected value.
-- KEYS: 1 pointer
-- ARGV:
--   1 now        the time: 0 for the server's TIME, a process's clock within a second of
--                it, or a manual clock's 'm<ms>' (time.lua)
--   2 expected   the value read ('' = absent)
--   3 queue      the queue's key
--   4 nonce      the claim's nonce
--   5 ttl        the pointer's TTL in ms
-- Reply: {1, claim} set; {0, current value ('' = absent)} not set.
function POINTER.claim(keys, args)
  local now, refused = call_time_or_refusal(args[1])
  if not now then return refused end
  local ttl = stored_integer(args[5], 1, MAX_TTL)
  if not ttl or not string.match(args[4], '^' .. string.rep('[0-9a-f]', 16) .. '$')
      or not is_queue_key(args[3]) then
    return refuse('a claim the crate never makes')
  end
  local current = redis.call('GET', keys[1]) or ''
  if current ~= args[2] then return {0, current} end
  local claim = args[3] .. '|' .. int(now) .. '|' .. args[4]
  redis.call('SET', keys[1], claim, 'PX', int(ttl))
  return {1, claim}
end

-- twr_match_v1_read: the current claim, its TTL renewed if there is one: a status or a leave
-- reads it before the queue's step, and a pointer in use must outlive its user's membership.
-- (Renewing a claim that turns out finished is harmless: the caller then drops it by
-- compare-and-set.)
-- KEYS: 1 pointer
-- ARGV:
--   1 ttl        the pointer's TTL in ms
-- Reply: {1, current value ('' = absent)}.
function POINTER.read(keys, args)
  if not stored_integer(args[1], 1, MAX_TTL) then return refuse('a TTL out of bounds') end
  local current = redis.call('GET', keys[1])
  if not current then return {1, ''} end
  redis.call('PEXPIRE', keys[1], args[1])
  return {1, current}
end

-- twr_match_v1_drop: deletes the pointer if it holds the expected claim.
-- KEYS: 1 pointer
-- ARGV:
--   1 expected   the claim
-- Reply: {1} deleted; {0} not.
function POINTER.drop(keys, args)
  if redis.call('GET', keys[1]) ~= args[1] then return {0} end
  redis.call('DEL', keys[1])
  return {1}
end

-- twr_match_v1_touch: renews the pointer's TTL if it holds the expected claim.
-- KEYS: 1 pointer
-- ARGV:
--   1 expected   the claim
--   2 ttl        the pointer's TTL in ms
-- Reply: {1} renewed; {0} not.
function POINTER.touch(keys, args)
  if not stored_integer(args[2], 1, MAX_TTL) then return refuse('a TTL out of bounds') end
  if redis.call('GET', keys[1]) ~= args[1] then return {0} end
  redis.call('PEXPIRE', keys[1], args[2])
  return {1}
end
