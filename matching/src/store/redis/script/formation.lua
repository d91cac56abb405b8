-- A queue's upkeep: groups formed from the oldest waiters, timeouts, and groups undone (pending
-- past confirm_ttl: the members back at the front) or dropped (confirmed, past keep_confirmed),
-- each step's work bounded by max_work.

-- Undoes pending group `number`: its members (but `leaving`) go back to the line with their
-- sequence numbers (so at the front, in their order) and a fresh timeout. Unless it is undone
-- more than timeout + confirm_ttl after it expired (no step touched the queue meanwhile): a
-- member's pointer outlives the group only that long (the store's docs), so one may since
-- have expired and its user joined elsewhere; put back here, they would hold two places. Then
-- its members are dropped (their next status answers idle).
local function dissolve(number, leaving)
  if not redis.call('ZSCORE', k_pending, pad(number)) then return end
  local g = group(number)
  redis.call('ZREM', k_pending, pad(number))
  redis.call('HDEL', k_groups, int(number))
  if not g then return end
  local stale = now >= g.expires + timeout + confirm_ttl
  for _, m in ipairs(g.members) do
    if m.user == leaving then
      redis.call('HDEL', k_users, m.user)
    else
      local p = place(m.user)
      if p ~= nil and p.kind == 'g' and p.number == number and stale then
        redis.call('HDEL', k_users, m.user)
      elseif p ~= nil and p.kind == 'g' and p.number == number then
        -- A damaged sequence number: a new one, at the back (see Damage).
        local seq = m.seq or next_number('seq', last_seq)
        add_waiter(m.user, seq, m.joined, now + timeout, p.claim)
        requeued[#requeued + 1] = m.user
        requeued[#requeued + 1] = p.claim
      end
    end
  end
end

-- Forms groups from the oldest waiters: full ones, then a fallback one. Answers how many.
local function form()
  local formed = 0
  for _ = 1, max_work do
    local waiting = redis.call('ZCARD', k_line)
    local take
    if waiting >= size then
      take = size
    elseif size > 2 and waiting >= 2 then
      local oldest = place(redis.call('ZRANGE', k_line, 0, 0)[1])
      if oldest == nil or oldest.kind ~= 'w' or since(oldest.joined) < fallback_after then
        break
      end
      take = waiting
    else
      break
    end
    local members = {}
    for _, u in ipairs(redis.call('ZRANGE', k_line, 0, take - 1)) do
      local p = place(u)
      if p == nil or p.kind ~= 'w' then
        -- A place in line without a waiter's record (damage): no waiter; the step looks again.
        redis.call('ZREM', k_line, u)
        members = nil
        break
      end
      members[#members + 1] = {u, p}
    end
    if members then
      local number = next_number('formed', last_group)
      local g = {expires = now + confirm_ttl, app = '', members = {}}
      for _, m in ipairs(members) do
        local u, p = m[1], m[2]
        remove_waiter(u, p)
        g.members[#g.members + 1] = {seq = p.seq, joined = p.joined, user = u}
        redis.call('HSET', k_users, u, 'g\n' .. int(number) .. '\n' .. p.claim)
      end
      save_group(number, g)
      redis.call('ZADD', k_pending, int(g.expires), pad(number))
      formed = formed + 1
    end
  end
  return formed
end

-- Drops confirmed group `number`'s record: its members are idle.
local function drop_confirmed(number)
  local g = group(number)
  redis.call('ZREM', k_confirmed, pad(number))
  redis.call('HDEL', k_groups, int(number))
  if g then
    for _, m in ipairs(g.members) do
      if in_group(m.user, number) then redis.call('HDEL', k_users, m.user) end
    end
  end
end

-- Timeouts, undone and expired groups: at most max_work of each, oldest first.
local function housekeep()
  for _, m in ipairs(redis.call('ZRANGEBYSCORE', k_expiry, '-inf', int(now), 'LIMIT', 0,
      max_work)) do
    local u = string.sub(m, 21)
    redis.call('ZREM', k_expiry, m)
    -- Only the user's own timeout: an entry of another number is a stray (see Damage).
    local p = place(u)
    if p ~= nil and p.kind == 'w' and pad(p.seq) == string.sub(m, 1, 20) then
      remove_waiter(u, p)
      redis.call('HDEL', k_users, u)
    end
  end
  for _, n in ipairs(redis.call('ZRANGEBYSCORE', k_pending, '-inf', int(now), 'LIMIT', 0,
      max_work)) do
    local number = unpad(n)
    if number then dissolve(number, nil) else redis.call('ZREM', k_pending, n) end
  end
  for _, n in ipairs(redis.call('ZRANGEBYSCORE', k_confirmed, '-inf', int(now), 'LIMIT', 0,
      max_work)) do
    local number = unpad(n)
    if number then drop_confirmed(number) else redis.call('ZREM', k_confirmed, n) end
  end
  -- Claims past remembering: bounded too.
  local old = redis.call('ZRANGEBYSCORE', k_used, '-inf', int(now - used_keep), 'LIMIT', 0,
    max_work)
  if #old > 0 then redis.call('ZREM', k_used, unpack(old)) end
end

-- The housekeeping, then formation. Answers the groups formed.
local function settle()
  housekeep()
  return form()
end

-- Group `number`, if its time is up: undone (pending) or dropped (confirmed). What a call is
-- about comes first, so its timings hold exactly however much else is due (the bounded
-- housekeeping may not reach it in this call).
local function expire_group(number)
  -- A time that is no finite number is due (see Damage).
  local pending = redis.call('ZSCORE', k_pending, pad(number))
  if pending then
    if (stored_score(pending) or now) <= now then dissolve(number, nil) end
    return
  end
  local confirmed = redis.call('ZSCORE', k_confirmed, pad(number))
  if confirmed and (stored_score(confirmed) or now) <= now then drop_confirmed(number) end
end

-- The user's own expiry (their wait, or their group's), then the housekeeping.
local function housekeep_user(u)
  local p = place(u)
  if p ~= nil and p.kind == 'w' and p.expires <= now then
    remove_waiter(u, p)
    redis.call('HDEL', k_users, u)
  elseif p ~= nil and p.kind == 'g' then
    expire_group(p.number)
  end
  housekeep()
end
