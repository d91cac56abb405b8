-- The queue's operations: enter, leave, confirm, tick. Each is a function of its own
-- (register.lua); the header above each body gives its KEYS, ARGV and reply. KEYS are the
-- queue's eight (queue.lua) for all; ARGV 1 to 9 are the queue's (queue.lua), the same for all.
--
-- Every reply is {code, n, user_1, claim_1, ..., user_n, claim_n, state...}: the n users who
-- went back to the line from an undone group (their pointers' TTLs are renewed by the caller),
-- then the code's own. The codes:
--   1 present under this claim, 2 present under another claim, 3 joined now, 4 done (the claim
--   joined before and the user has gone), 5 expired (the claim is older than grace and never
--   joined): a user's state follows;
--   6 confirmed, 7 confirmed before with another id: the group's state follows; 8 unknown
--   (nothing follows);
--   9 tick: the number of groups formed follows.
-- A state: {'i'} idle | {'w', position, waiting, waited ms, expires in ms} |
--          {'m', group number, expires in ms, app id ('' while pending), member, member, ...}

local function group_state(number, g)
  local out = {'m', number, until_(g.expires), g.app}
  for _, m in ipairs(g.members) do out[#out + 1] = m.user end
  return out
end

local function state(u)
  local p = place(u)
  if p == nil then return {'i'} end
  if p.kind == 'w' then
    local rank = redis.call('ZRANK', k_line, u)
    if not rank then return {'i'} end
    return {'w', rank + 1, redis.call('ZCARD', k_line), since(p.joined), until_(p.expires)}
  end
  local g = group(p.number)
  if not g then return {'i'} end
  return group_state(p.number, g)
end

-- The user `u` under `claim`: 1 present under it, 2 present under another, 3 joined now,
-- 4 done, 5 expired (see the header). With `form_now`, groups form before the answer (a join,
-- a status); a leave forms them after the leaver left, so nobody is grouped by their own leave.
local function ensure(u, claim, form_now)
  if redis.call('HEXISTS', k_users, u) == 1 then
    housekeep_user(u)
    if form_now then form() end
    local p = place(u)
    if p ~= nil then
      if p.claim == claim then return 1 end
      return 2
    end
  end
  if redis.call('ZSCORE', k_used, claim) then return 4 end
  local claim_ms = stored_ms(string.match(claim, '|(%d+)|'))
  if claim_ms == nil or now - claim_ms >= grace then return 5 end
  local seq = next_number('seq', last_seq)
  add_waiter(u, seq, now, now + timeout, claim)
  redis.call('ZADD', k_used, int(claim_ms), claim)
  settle()
  return 3
end

local function reply(code, tail)
  local out = {code, #requeued / 2}
  for _, v in ipairs(requeued) do out[#out + 1] = v end
  for _, v in ipairs(tail) do out[#out + 1] = v end
  return out
end

local QUEUE = {}

-- twr_match_v1_enter: ENSURES the claim: the user is in the queue (settled first, only if the
-- user is in it, as the embedded store settles only the queue a user is in: present), or the
-- claim already joined (done) or is too old (expired), or the user joins now under it (joined).
-- The process that made the claim, and any process that finds it in flight (a join of the same
-- user elsewhere, a status, a leave), call the same enter: whoever comes first completes the
-- join, so a claim in flight is never answered as idle.
-- KEYS: the queue's 8 (queue.lua)
-- ARGV:
--   1 now
--   2 size
--   3 fallback_after
--   4 timeout
--   5 confirm_ttl
--   6 keep_confirmed
--   7 max_work
--   8 grace
--   9 used_keep
--  10 user           the user's id
--  11 claim          the claim read from the user's pointer
-- Reply: code 1 to 5, then the user's state now.
function QUEUE.enter(keys, args)
  local refused = begin(keys, args)
  if refused then return refused end
  local u = args[QUEUE_ARGS + 1]
  if not is_id(u) then return refuse('a user id the crate never sends') end
  local code = ensure(u, args[QUEUE_ARGS + 2], true)
  return reply(code, state(u))
end

-- twr_match_v1_leave: enter's ensure, then the user leaves (a pending group of theirs is
-- undone, the others back at the front); groups form after the leaver left, so nobody is
-- grouped by their own leave.
-- KEYS: the queue's 8 (queue.lua)
-- ARGV:
--   1 now
--   2 size
--   3 fallback_after
--   4 timeout
--   5 confirm_ttl
--   6 keep_confirmed
--   7 max_work
--   8 grace
--   9 used_keep
--  10 user           the user's id
--  11 claim          the claim read from the user's pointer
-- Reply: code 1 to 5, then the user's state before leaving ({'i'} for 4 and 5).
function QUEUE.leave(keys, args)
  local refused = begin(keys, args)
  if refused then return refused end
  local u = args[QUEUE_ARGS + 1]
  if not is_id(u) then return refuse('a user id the crate never sends') end
  local code = ensure(u, args[QUEUE_ARGS + 2], false)
  if code > 3 then
    form()
    return reply(code, {'i'})
  end
  local before = state(u)
  local p = place(u)
  if p.kind == 'w' then
    remove_waiter(u, p)
    redis.call('HDEL', k_users, u)
  elseif redis.call('ZSCORE', k_pending, pad(p.number)) then
    dissolve(p.number, u)
  else
    redis.call('HDEL', k_users, u)
  end
  form()
  return reply(code, before)
end

-- twr_match_v1_confirm: the housekeeping, then the group is confirmed (or not).
-- KEYS: the queue's 8 (queue.lua)
-- ARGV:
--   1 now
--   2 size
--   3 fallback_after
--   4 timeout
--   5 confirm_ttl
--   6 keep_confirmed
--   7 max_work
--   8 grace
--   9 used_keep
--  10 number         the group's number (0 names none)
--  11 app            the application's id for the group
-- Reply: code 6 (confirmed now, or before with this id) or 7 (before, with another id), then
-- the group's state; 8 unknown (no pending or confirmed group of that number).
function QUEUE.confirm(keys, args)
  local refused = begin(keys, args)
  if refused then return refused end
  local number, app = stored_integer(args[QUEUE_ARGS + 1], 0, MAX_DURATION), args[QUEUE_ARGS + 2]
  if not number or not is_id(app) then
    return refuse('a group number or an application id the crate never sends')
  end
  expire_group(number)
  settle()
  local g = group(number)
  if g and redis.call('ZSCORE', k_pending, pad(number)) then
    g.app = app
    g.expires = now + keep_confirmed
    save_group(number, g)
    redis.call('ZREM', k_pending, pad(number))
    redis.call('ZADD', k_confirmed, int(g.expires), pad(number))
    return reply(6, group_state(number, g))
  end
  if g == nil or not redis.call('ZSCORE', k_confirmed, pad(number)) then return reply(8, {}) end
  if g.app == app then return reply(6, group_state(number, g)) end
  return reply(7, group_state(number, g))
end

-- twr_match_v1_tick: the housekeeping and formation.
-- KEYS: the queue's 8 (queue.lua)
-- ARGV:
--   1 now
--   2 size
--   3 fallback_after
--   4 timeout
--   5 confirm_ttl
--   6 keep_confirmed
--   7 max_work
--   8 grace
--   9 used_keep
-- Reply: code 9, then the number of groups formed.
function QUEUE.tick(keys, args)
  local refused = begin(keys, args)
  if refused then return refused end
  return reply(9, {settle()})
end
