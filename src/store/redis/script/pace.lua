-- The pace: the admission-rate budget, the admission counts, and what the wait estimate reads
-- (pace, history, silent waiters; the checkpoints are checkpoints.lua's).

-- The admission-rate budget: a token bucket of one second's admissions, in thousandths. A
-- missing or damaged field counts as a full bucket.
function F.take()
  if R.rate == 0 then return true end
  local max = R.rate * 1000
  local b = redis.call('HMGET', R.k_bucket, 'milli', 'last')
  local milli, last = stored_integer(b[1], 0, STORED_MAX), stored_integer(b[2], 0, STORED_MAX)
  if milli == nil or last == nil then
    milli = max
  else
    local elapsed = R.now - last
    if elapsed < 0 then elapsed = 0 end
    milli = math.min(max, milli + elapsed * R.rate)
  end
  local ok = milli >= 1000
  if ok then milli = milli - 1000 end
  redis.call('HSET', R.k_bucket, 'milli', milli, 'last', R.now)
  return ok
end

-- Admission counts: one more in the current bucket; a slot still holding an older bucket (or
-- something that is not a number) is reset first, so the ring never grows and never adds stale
-- counts. HSET of the computed count rather than HINCRBY, which fails on a damaged value.
-- `field` is n (admissions) or k (waiters skipped as silent at their turn: the line moved
-- without an admission, which the wait estimate counts as movement).
function F.count_in_ring(field)
  local slot = R.current_bucket % R.ring
  local v = redis.call('HMGET', R.k_admitted, 't' .. slot, field .. slot)
  local t, n = stored_integer(v[1], 0, STORED_MAX), stored_integer(v[2], 0, STORED_MAX)
  if t ~= R.current_bucket or n == nil then
    if field == 'n' then
      redis.call('HSET', R.k_admitted, 't' .. slot, R.current_bucket, 'n' .. slot, 1, 'k' .. slot, 0)
    elseif t ~= R.current_bucket then
      redis.call('HSET', R.k_admitted, 't' .. slot, R.current_bucket, 'n' .. slot, 0, 'k' .. slot, 1)
    else
      redis.call('HSET', R.k_admitted, 'k' .. slot, 1)
    end
  else
    redis.call('HSET', R.k_admitted, field .. slot, n + 1)
  end
end

function F.count_admission()
  F.count_in_ring('n')
  if R.moved == nil then
    -- Until the first movement: counted, and the first admission beyond the opening's
    -- capacity noted (a damaged count restarts).
    local early = stored_integer(redis.call('HGET', R.k_settings, 'early'), 0, STORED_MAX) or 0
    early = early + 1
    if early > R.capacity then
      R.moved = R.now
      redis.call('HSET', R.k_settings, 'moved', R.now)
    else
      redis.call('HSET', R.k_settings, 'early', early)
    end
  end
end
function F.count_skip() F.count_in_ring('k') end

-- The room's pace beyond the complete buckets: {admissions in the current bucket, ms into it,
-- ms since the room was first seen, capacity}.
function F.pace()
  local slot = R.current_bucket % R.ring
  local v = redis.call('HMGET', R.k_admitted, 't' .. slot, 'n' .. slot, 'k' .. slot)
  local current, skipped = 0, 0
  if stored_integer(v[1], 0, STORED_MAX) == R.current_bucket then
    current = stored_integer(v[2], 0, STORED_MAX) or 0
    skipped = stored_integer(v[3], 0, STORED_MAX) or 0
  end
  local ago = -1
  if R.cap_at then ago = math.max(0, R.now - R.cap_at) end
  local ps, pe = -1, -1
  if R.pause_start and R.pause_end then
    ps, pe = math.max(0, R.now - R.pause_start), math.max(0, R.now - R.pause_end)
  end
  -- A scheduled room is measured from its opening: nobody could be let in before it.
  local since = R.born
  if R.opens_at and R.opens_at > since then since = R.opens_at end
  return {current, R.now - R.current_bucket * R.bucket_ms, math.max(0, R.now - since), R.capacity, skipped,
    R.cap_before or R.capacity, ago, ps, pe}
end

-- The counts of the complete buckets before the current one, in one read: admissions in the
-- last minute and the last five minutes, admissions in each of those five minutes (most recent
-- first), and waiters skipped as silent at their turn in the last minute and five.
function F.recent()
  local per_minute = {}
  for m = 1, R.five_minute_buckets / R.minute_buckets do per_minute[m] = 0 end
  local n = math.min(R.five_minute_buckets, R.current_bucket)
  if n == 0 then return 0, 0, per_minute, 0, 0 end
  local fields = {}
  for back = 1, n do
    local slot = (R.current_bucket - back) % R.ring
    fields[#fields + 1] = 't' .. slot
    fields[#fields + 1] = 'n' .. slot
    fields[#fields + 1] = 'k' .. slot
  end
  local v = redis.call('HMGET', R.k_admitted, unpack(fields))
  local minute, five, skipped_minute, skipped_five = 0, 0, 0, 0
  for back = 1, n do
    if stored_integer(v[3 * back - 2], 0, STORED_MAX) == R.current_bucket - back then
      local c = stored_integer(v[3 * back - 1], 0, STORED_MAX) or 0
      local k = stored_integer(v[3 * back], 0, STORED_MAX) or 0
      five, skipped_five = five + c, skipped_five + k
      if back <= R.minute_buckets then
        minute, skipped_minute = minute + c, skipped_minute + k
      end
      local m = math.floor((back - 1) / R.minute_buckets) + 1
      per_minute[m] = per_minute[m] + c
    end
  end
  return minute, five, per_minute, skipped_minute, skipped_five
end

-- Waiters not alive by the turn rule (0 while silence is excused), estimated from the
-- checkpoint waiters; exact for a line of at most EXACT_RANKS (then every waiter is a
-- checkpoint). Everyone behind the turn epochs' lowest first number counts as alive by the
-- rule: the newcomers since, who are, and (behind a sync's turn horizon, see Liveness) waiters
-- whose check-ins were not sent, who may not be. So the share of silent waiters is taken from
-- the checkpoint waiters ahead of it, and applied to everyone ahead of the epochs' first
-- numbers as made (the newcomers since are not silent): silent among the sample / its size *
-- the rank of the first checkpoint behind those first numbers (or waiting), rounded. Each
-- checkpoint's own word is left in it, cp[4]: true if not alive by the rule (the snapshot's
-- per-checkpoint silence: none while silence is excused, and those behind the first numbers
-- alive, as the rule counts them).
function F.silent_among(cps, waiting)
  if R.excused or #cps == 0 then
    for _, cp in ipairs(cps) do cp[4] = false end
    return 0
  end
  -- Those shared from an earlier sync (checkpoints.lua) keep the word they were kept with.
  local ids, scores, at = {}, {}, {}
  for j, cp in ipairs(cps) do
    if not cp[5] then ids[#ids + 1], scores[#scores + 1], at[#at + 1] = cp[2], cp[3], j end
  end
  local fresh = F.alive_many(ids, R.turn, scores)
  local alive = {}
  for j, cp in ipairs(cps) do alive[j] = not cp[4] end
  for k, j in ipairs(at) do
    alive[j] = fresh[k]
    cps[j][4] = not fresh[k]
  end
  local since, first = R.turn.since, R.turn.first_min
  if #cps >= waiting or since == nil then
    local silent = 0
    for _, a in ipairs(alive) do
      if not a then silent = silent + 1 end
    end
    return math.floor(silent / #cps * waiting + 0.5)
  end
  if first == nil or first < since then first = since end
  local sample, silent, upto = 0, 0, waiting
  for j, cp in ipairs(cps) do
    local score = tonumber(cp[3])
    if score <= since then
      sample = sample + 1
      if not alive[j] then silent = silent + 1 end
    elseif score > first then
      upto = cp[1]
      break
    end
  end
  if sample == 0 then return 0 end
  return math.floor(silent / sample * upto + 0.5)
end

-- Appends the room's pace to `reply` (the wait estimate's input, in sync and stats replies):
-- admissions in the current bucket, ms into it, ms since the room was first seen, capacity,
-- skipped in the last minute, in five, in the current bucket, capacity before its last change,
-- ms since that change (-1: never), ms since the last ended pause began and ended (-1, -1:
-- none), admissions in each of the last five minutes (most recent first), waiters not alive by
-- the turn rule (`silent`), queue_ttl, ms since the room's first movement (-1: not yet), the
-- live admission rate per second (0: unlimited), the slots held (claimed and granted). Returns
-- the counts of the last minute and five.
function F.append_pace(reply, silent)
  local minute, five, per_minute, sm, sf = F.recent()
  local p = F.pace()
  for _, v in ipairs({p[1], p[2], p[3], p[4], sm, sf, p[5], p[6], p[7], p[8], p[9]}) do
    reply[#reply + 1] = v
  end
  for _, c in ipairs(per_minute) do reply[#reply + 1] = c end
  reply[#reply + 1] = silent
  reply[#reply + 1] = R.queue_ttl
  reply[#reply + 1] = R.moved and math.max(0, R.now - R.moved) or -1
  reply[#reply + 1] = R.rate
  reply[#reply + 1] = redis.call('ZCARD', R.k_active) + redis.call('ZCARD', R.k_granted)
  return minute, five
end

-- A waiting reply: {2, position, waiting, paused, place}; place is the sequence number, or -1
-- for a registrant's draw score.
function F.waiting_reply(position, waiting, score)
  local place = tonumber(score)
  if place < 0 then place = REPLY.drawn end
  return {REPLY.waiting, position, waiting, R.paused and 1 or 0, place}
end

-- Admissions per minute over the last history_minutes complete minutes, oldest first.
function F.history(history_minutes)
  local fields = {}
  local n = math.min(history_minutes * R.minute_buckets, R.current_bucket)
  if n == 0 then
    local zeros = {}
    for i = 1, history_minutes do zeros[i] = 0 end
    return zeros
  end
  for back = 1, n do
    local slot = (R.current_bucket - back) % R.ring
    fields[#fields + 1] = 't' .. slot
    fields[#fields + 1] = 'n' .. slot
  end
  local v = redis.call('HMGET', R.k_admitted, unpack(fields))
  local out = {}
  for i = 1, history_minutes do out[i] = 0 end
  for back = 1, n do
    if stored_integer(v[2 * back - 1], 0, STORED_MAX) == R.current_bucket - back then
      local i = history_minutes - math.floor((back - 1) / R.minute_buckets)
      out[i] = out[i] + (stored_integer(v[2 * back], 0, STORED_MAX) or 0)
    end
  end
  return out
end
