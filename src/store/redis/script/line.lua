-- The line and the slots: housekeeping, promotion, claims, places, release and the sweep.
--
-- Housekeeping, only when due: `due` is the earliest expiry among active and granted as of the
-- last housekeeping, lowered whenever a slot or grant with an earlier expiry is added. A call
-- with now >= due expires both (ZREMRANGEBYSCORE) and reads the new earliest (ZRANGE 0 0 of
-- each); any other call looks at nothing. A slot thus frees exactly when it expires (at the
-- first call from then), and a lost `due` (settings lost) just means housekeeping now.
-- Saves 18 % of a heartbeat, 13 % of a poll at 2M
-- (bench: docs/benchmarks.md#each-shortcut-measured).

-- Housekeeping when due: expire slots and grants, and note the next expiry. A `due` later than
-- any slot this call could give (a year ahead, '9e15': damage) is none: housekeeping runs, and
-- writes the real one. NO_DUE (no slot, as housekeeping wrote it: an empty room, a pre-queue)
-- holds while there is no slot, two ZCARDs instead of the whole housekeeping.
function F.housekeep()
  if R.due and R.now < R.due then
    if R.due <= R.now + math.max(R.active_ttl, R.grant_ttl) then return end
    if R.due == NO_DUE and redis.call('ZCARD', R.k_active) == 0
        and redis.call('ZCARD', R.k_granted) == 0 then
      return
    end
  end
  -- An expiry beyond the longest lifetime any call may give a slot (LIMIT_TTL, call.lua; 'inf'
  -- or a year ahead written by hand) is no expiry: such a slot would never free itself, so it
  -- goes with the expired ones.
  local beyond = '(' .. string.format('%d', R.now + LIMIT_TTL)
  redis.call('ZREMRANGEBYSCORE', R.k_active, '-inf', R.now)
  redis.call('ZREMRANGEBYSCORE', R.k_active, beyond, '+inf')
  redis.call('ZREMRANGEBYSCORE', R.k_granted, '-inf', R.now)
  redis.call('ZREMRANGEBYSCORE', R.k_granted, beyond, '+inf')
  local a = tonumber(redis.call('ZRANGE', R.k_active, 0, 0, 'WITHSCORES')[2])
  local g = tonumber(redis.call('ZRANGE', R.k_granted, 0, 0, 'WITHSCORES')[2])
  local d = math.min(a or NO_DUE, g or NO_DUE)
  redis.call('HSET', R.k_settings, 'due', string.format('%d', d))
  R.due = d
end

-- A slot or grant expiring at `at` was added: housekeeping is due by then.
function F.lower_due(at)
  if R.due == nil or at < R.due then
    R.due = at
    redis.call('HSET', R.k_settings, 'due', string.format('%d', at))
  end
end

function F.settings_reply(code)
  return {code, R.capacity, R.rate, R.paused and 1 or 0, R.open and 1 or 0}
end

function F.banned(w)
  -- No ban lasts beyond `bans`: no lookup (the hot path) until a ban is made again. With the
  -- window's own check (F.window) it saves 1.5 % of a heartbeat or a poll at 2M, and stays
  -- because twr_room_v7 reads it in a rolling deploy
  -- (bench: docs/benchmarks.md#each-shortcut-measured).
  if R.bans and R.now >= R.bans then return false end
  local until_ms = tonumber(redis.call('ZSCORE', R.k_banned, w))
  if until_ms == nil then return false end
  if until_ms > R.now then return true end
  redis.call('ZREM', R.k_banned, w)
  return false
end

-- Notes the first arrival of each second (sequence number and time), dropping notes before the
-- head's, for the oldest wait: at most one note per second of the line's age.
function F.note_arrival(seq)
  local second = math.floor(R.now / 1000)
  if R.noted == second then return end
  local last = redis.call('ZRANGE', R.k_arrivals, -1, -1)[1]
  R.noted = second
  redis.call('HSET', R.k_settings, 'noted', second)
  if last and math.floor((stored_integer(last, 0, STORED_MAX) or 0) / 1000) == second then
    return
  end
  local head = redis.call('ZRANGE', R.k_line, 0, 0, 'WITHSCORES')[2]
  if head then
    local before = redis.call('ZREVRANGEBYSCORE', R.k_arrivals, head, '-inf', 'WITHSCORES',
      'LIMIT', 0, 1)[2]
    if before then redis.call('ZREMRANGEBYSCORE', R.k_arrivals, '-inf', '(' .. before) end
  else
    redis.call('DEL', R.k_arrivals)
  end
  redis.call('ZADD', R.k_arrivals, seq, R.now)
end

-- How long the head of the line has waited (ms), from the last note at or before its
-- sequence number; -1 when nobody waits or no note covers the head.
function F.oldest_wait()
  local head = redis.call('ZRANGE', R.k_line, 0, 0, 'WITHSCORES')[2]
  if not head then return -1 end
  local at = stored_integer(
    redis.call('ZREVRANGEBYSCORE', R.k_arrivals, head, '-inf', 'LIMIT', 0, 1)[1], 0, STORED_MAX)
  if at == nil then return -1 end
  return math.max(0, R.now - at)
end

-- Slots taken (claimed and granted); a room already full by its claimed slots alone is not
-- asked for its grants (the hot path: a full room).
function F.slots()
  local a = redis.call('ZCARD', R.k_active)
  if a >= R.capacity then return a end
  local n = a + redis.call('ZCARD', R.k_granted)
  -- Full while the slots are rebuilt (main.lua, Bad days).
  if R.rebuild then return math.max(n, R.capacity) end
  return n
end

-- A heartbeat that finds no slot while the slots are rebuilt (main.lua, Bad days): the holder
-- claims one again while fewer than capacity are held (not an admission: counted when it was
-- one). nil when that is not the case.
function F.reclaim()
  if not R.rebuild or not R.open or F.banned(R.s) then return nil end
  if redis.call('ZCARD', R.k_active) + redis.call('ZCARD', R.k_granted) >= R.capacity then
    return nil
  end
  redis.call('ZADD', R.k_active, R.now + R.active_ttl, R.s)
  F.lower_due(R.now + R.active_ttl)
  return {REPLY.admitted, R.now + R.active_ttl, 0}
end

function F.has_slot(w)
  return redis.call('ZSCORE', R.k_active, w) or redis.call('ZSCORE', R.k_granted, w)
end

-- Grant free slots to the head of the line, skipping waiters silent at their turn; bounded
-- work: at most max_promote promotions and skips per call, however often promote runs in it.
function F.promote()
  if R.paused or not R.open or R.before_opening or R.line_closed then return end
  if R.promotions_left <= 0 then return end
  local taken = F.slots()
  while R.promotions_left > 0 do
    if R.capacity - taken <= 0 then return end
    local at = redis.call('ZRANGE', R.k_line, 0, 0, 'WITHSCORES')
    local head = at[1]
    if not head then return end
    if not F.is_place(at[2]) then
      -- Damage: a score that is no place ('-inf') sorts first, but is no one's turn. Its
      -- waiter goes to the back, as its own poll would move it.
      F.replace_in_line(head)
    elseif F.has_slot(head) then
      -- Damage: a slot holder with a place too. The slot wins; no second slot.
      redis.call('ZREM', R.k_line, head)
    elseif not R.excused and not F.alive(head, R.turn, at[2]) then
      redis.call('ZREM', R.k_line, head)
      F.count_skip()
    else
      if not F.take() then return end
      redis.call('ZREM', R.k_line, head)
      redis.call('ZADD', R.k_granted, R.now + R.grant_ttl, head)
      F.lower_due(R.now + R.grant_ttl)
      taken = taken + 1
      F.count_admission()
    end
    R.promotions_left = R.promotions_left - 1
  end
end

function F.claim_or_extend()
  local exp = F.has_slot(R.s)
  if exp and not R.open then
    -- Closed: claimed slots run out, not extended. A granted slot is still claimed: its visitor
    -- was let in before the close, or by an operator's release.
    local active = redis.call('ZSCORE', R.k_active, R.s)
    if active then return {REPLY.admitted, tonumber(active), 0} end
  end
  if exp then
    redis.call('ZREM', R.k_granted, R.s)
    redis.call('ZADD', R.k_active, R.now + R.active_ttl, R.s)
    F.lower_due(R.now + R.active_ttl)
    return {REPLY.admitted, R.now + R.active_ttl, 0}
  end
  return nil
end

-- Whether a score in line is a place: a registrant's draw in [-1, 0) or a sequence number,
-- a whole number from 1 to 2^53. Anything else was written behind the scripts' backs: a reply
-- cannot carry '1e300', 'inf' or '-inf' (Redis truncates a Lua number beyond 2^63), 2.5 would
-- be answered as the place 2 (another waiter's), and 0 is neither.
function F.is_place(score)
  local n = stored_score(score)
  if n == nil then return false end
  if n < 0 then return n >= -1 end
  return n >= 1 and n <= STORED_MAX and n == math.floor(n)
end

-- The waiter `w`, whose score is no place, moved to the back of the line with a fresh number
-- (never out of it, never ahead of anyone who waits properly); their new score.
function F.replace_in_line(w)
  local seq = F.next_seq()
  redis.call('ZADD', R.k_line, seq, w)
  return seq
end

-- Every waiter at either end of the line whose score is no place (F.is_place), moved to the back
-- with a fresh number, at most CHUNK a call: run by sync (once a second per gateway), so that
-- the snapshot's head and checkpoints are places.
function F.repair_places()
  local bad = redis.call('ZRANGEBYSCORE', R.k_line, '-inf', '(-1', 'LIMIT', 0, CHUNK)
  local high = redis.call('ZRANGEBYSCORE', R.k_line, '(' .. string.format('%d', STORED_MAX),
    '+inf', 'LIMIT', 0, CHUNK)
  for _, w in ipairs(high) do bad[#bad + 1] = w end
  for _, w in ipairs(bad) do F.replace_in_line(w) end
end

-- A waiter's enter or poll: checked in, and told where they stand.
function F.touch(score)
  if not F.is_place(score) then score = F.replace_in_line(R.s) end
  F.check_in({R.s})
  if not R.open then return {REPLY.closed, 0, 0} end
  if R.before_opening then return {REPLY.scheduled, R.opens_at, 0} end
  if R.line_closed then return {REPLY.closed, 0, 0} end
  local rank = redis.call('ZRANK', R.k_line, R.s)
  return F.waiting_reply(rank + 1, redis.call('ZCARD', R.k_line), score)
end

-- Notes the pre-queue's first arrival, once, at score -1 (ahead of every registrant's score):
-- the oldest wait of a registrant counts from then.
function F.note_pre_arrival()
  if #redis.call('ZRANGEBYSCORE', R.k_line, -1, '(0', 'LIMIT', 0, 1) == 0 then
    -- The first registrant of a pre-queue (an earlier one emptied, or never was): its note
    -- replaces any older one, as the embedded store starts its pre-queue's time anew.
    redis.call('ZREMRANGEBYSCORE', R.k_arrivals, -1, -1)
    redis.call('ZADD', R.k_arrivals, -1, R.now)
  elseif #redis.call('ZRANGEBYSCORE', R.k_arrivals, -1, -1, 'LIMIT', 0, 1) == 0 then
    redis.call('ZADD', R.k_arrivals, -1, R.now)
  end
end

-- The next sequence number: after the last waiter's even if seq was lost or reset, so a
-- newcomer never goes ahead of the line.
function F.next_seq()
  local seq = F.seq_after_tail(R.k_seq, R.k_line)
  F.note_arrival(seq)
  return seq
end

-- INCR of seq, after the line's last waiter (a lost or reset seq is set past it; so is one
-- beyond 2^53, where doubles would give two newcomers one number). A last waiter's score that is
-- no finite number within 2^53 (written by hand) is no sequence number: a newcomer goes ahead of
-- that waiter, who stays at the very back.
function F.seq_after_tail(k_seq, k_line)
  local seq = redis.call('INCR', k_seq)
  local tail = stored_score(redis.call('ZRANGE', k_line, '-1', '-1', 'WITHSCORES')[2])
  if tail and tail > STORED_MAX then tail = nil end
  if (tail and seq <= tail) or seq > STORED_MAX then
    seq = math.floor(math.max(tail or 0, 0)) + 1
    redis.call('SET', k_seq, string.format('%d', seq))
  end
  return seq
end


-- Whether this call released something: kept outside `main`, so that a second, repaired run
-- still reports what the first one removed.

-- Frees the session's slot and its place, and promotes into what was freed (release, ban).
function F.free_session()
  -- The session's single-use ticket record (R.keys[21], sent by release and ban only) ends with
  -- its slot, in this same step: its state `n`/`u` upper-cased in place (SETRANGE keeps the
  -- TTL), so it never passes again and the next admission's mint replaces it (tickets.lua).
  if R.k_ticket and redis.call('TYPE', R.k_ticket)['ok'] == 'string' then
    local state = string.sub(redis.call('GET', R.k_ticket), 1, 1)
    if state == 'n' or state == 'u' then
      redis.call('SETRANGE', R.k_ticket, 0, string.upper(state))
    end
  end
  -- The place too, whether or not a slot was freed: a slot holder with a stray place (damage)
  -- would otherwise be granted a slot again from it by the promotion below.
  local n = redis.call('ZREM', R.k_active, R.s) + redis.call('ZREM', R.k_granted, R.s)
    + redis.call('ZREM', R.k_line, R.s)
  if n > 0 then R.released = 1 end
  if R.released == 1 then F.promote() end
end

-- Drops the waiters not alive by the abandon rule, looking at most max_sweep of them from the
-- cursor on (the whole line when it is no longer), and moves the cursor (to the head again at
-- the end of the line).
function F.sweep()
  if R.excused then return end
  local batch, next_cursor
  if redis.call('ZCARD', R.k_line) <= R.max_sweep then
    batch, next_cursor = redis.call('ZRANGE', R.k_line, 0, -1, 'WITHSCORES'), '-inf'
  else
    local from = R.cursor == '-inf' and '-inf' or '(' .. R.cursor
    batch = redis.call('ZRANGEBYSCORE', R.k_line, from, '+inf', 'WITHSCORES', 'LIMIT', 0, R.max_sweep)
    next_cursor = '-inf'
    if #batch / 2 >= R.max_sweep then next_cursor = batch[#batch] end
  end
  local ids, scores = {}, {}
  for j = 1, #batch, 2 do ids[#ids + 1], scores[#scores + 1] = batch[j], batch[j + 1] end
  local gone = {}
  for j, a in ipairs(F.alive_many(ids, R.gone_ring, scores)) do
    if not a then gone[#gone + 1] = ids[j] end
  end
  for from = 1, #gone, CHUNK do
    redis.call('ZREM', R.k_line, unpack(gone, from, math.min(#gone, from + CHUNK - 1)))
  end
  if next_cursor ~= R.cursor then
    R.cursor = next_cursor
    redis.call('HSET', R.k_settings, 'cursor', R.cursor)
  end
end
