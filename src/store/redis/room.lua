#!lua
-- tower-waiting-room: the whole state machine of one room, atomically inside Redis/Valkey.
--
-- The `#!lua` line (Redis 7+, Valkey) makes the server check memory before the script starts:
-- with `maxmemory` exhausted the whole call is refused with OOM, never half-run (without it, Redis
-- checks only a script's first write command).
--
-- The semantics are exactly those of the embedded MemoryStore (src/store/memory.rs); the
-- conformance suite runs against both.
--
-- KEYS (all share the room's hash tag, so a Redis Cluster keeps them in one slot):
--   1 seq      string  last sequence number handed out (INCR)
--   2 line     zset    waiters, score = sequence number (FIFO; ZRANK is O(log n))
--   3 seen     zset    waiters, score = last check-in in ms (for the bounded sweep)
--   4 active   zset    claimed slots, score = expiry in ms
--   5 granted  zset    granted but unclaimed slots, score = expiry in ms
--   6 bucket   hash    admission-rate budget: milli (thousandths of an admission), last (ms)
--   7 admitted hash    admission counts, a ring of time buckets: slot i holds t<i> (the bucket's
--                      number, now // bucket_ms) and n<i> (its count); at most 2 * ring fields
-- ARGV:
--   1 op (enter | poll | heartbeat | release | stats)
--   2 session id ('' for stats)
--   3 now in ms, or 0 (NOW_FROM_SERVER) to use the server's TIME (shared by every gateway)
--   4 capacity   5 admission rate per second (0 = none)
--   6 active_ttl_ms   7 grant_ttl_ms   8 queue_ttl_ms   9 max_queue_len
--   10 max promotions per call   11 max sweep per call
--   12 admission bucket width in ms   13 buckets in the ring
--   14 complete buckets in the "last minute" count   15 ... in the "last five minutes" count
--   16 abandon_after_ms (the script uses at least queue_ttl_ms)
--   17 1 if the calling gateway failed to reach the store within the last queue_ttl (an
--      outage: every check-in through it failed), else 0 or absent: silence is then excused
-- Reply: {code, a, b, ...}
--   {1, expires_at_ms, 0} admitted     {2, position, waiting, last_minute, last_five_minutes} waiting
--   {3, 0, waiting} full               {0, 0, 0} unknown
--   {4, released (0|1), 0} release
--   {5, admitted, granted, waiting, last_minute, last_five_minutes} stats
--
-- Absence: a waiter silent for longer than queue_ttl keeps their place until their turn comes
-- (a slot is free and they are at the head), and is skipped then; one silent for longer than
-- abandon_after is swept from anywhere in the line (at most max_sweep per call), so positions do
-- not count people long gone. Silence during an outage is not held against anyone: a call from
-- a gateway that could not reach the store within the last queue_ttl (ARGV 17) skips nobody for
-- silence and sweeps nobody; a silent head is granted instead, and the grant expires unclaimed.
--
-- Bad days: the keys are the room's own, and a lost or damaged one (eviction, a stray DEL, a hand
-- edit) must never make the room fail on every call. The script repairs or skips, and answers:
--   - a missing key is an empty one (Redis semantics);
--   - a key of the wrong type, or a seq that is not an integer: the first command that trips on
--     it raises; the whole run is caught (pcall), `repair()` deletes every key of the wrong type
--     and a non-integer seq, and the run starts again once (no cost on the normal path). The
--     first run's writes stay, but every step is idempotent (housekeeping, "ensure" writes) and
--     the promotion budget is shared by both runs, so the work stays bounded;
--   - a lost or reset seq: a newcomer is placed after the last waiter, never ahead of the line;
--   - a waiter in line without a check-in in seen: counted as seen now (re-added) when their turn
--     comes, so they keep their place (a poll checks them in again anyway);
--   - a check-in in seen without a place in line: removed when that session polls, or with the
--     abandoned waiters' sweep;
--   - a slot holder who also has a place in line: the slot wins, the place is dropped when it
--     reaches the head (never a second slot);
--   - a budget with a missing or non-numeric field: counts as full (at most one second's worth
--     of admissions above the rate, once);
--   - a non-numeric admission count or tag: counts as zero, and is overwritten.

local k_seq, k_line, k_seen, k_active, k_granted, k_bucket, k_admitted =
  KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5], KEYS[6], KEYS[7]
local op, s = ARGV[1], ARGV[2]
local now = tonumber(ARGV[3])
local capacity = tonumber(ARGV[4])
local rate = tonumber(ARGV[5])
local active_ttl = tonumber(ARGV[6])
local grant_ttl = tonumber(ARGV[7])
local queue_ttl = tonumber(ARGV[8])
local max_queue = tonumber(ARGV[9])
local max_promote = tonumber(ARGV[10])
local max_sweep = tonumber(ARGV[11])
-- The crate sends every argument (src/store/redis/protocol.rs), so no default is repeated here.
local bucket_ms = tonumber(ARGV[12])
local ring = tonumber(ARGV[13])
local minute_buckets = tonumber(ARGV[14])
local five_minute_buckets = tonumber(ARGV[15])
local abandon = tonumber(ARGV[16])
if abandon < queue_ttl then abandon = queue_ttl end
local excused = ARGV[17] == '1'

if now == 0 then
  local t = redis.call('TIME')
  now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end
-- Silent since before `cutoff`: skipped at their turn. Before `abandoned`: swept from anywhere.
local cutoff = now - queue_ttl
if cutoff < 0 then cutoff = 0 end
local abandoned = now - abandon
if abandoned < 0 then abandoned = 0 end

local function slots()
  return redis.call('ZCARD', k_active) + redis.call('ZCARD', k_granted)
end

local function has_slot(w)
  return redis.call('ZSCORE', k_active, w) or redis.call('ZSCORE', k_granted, w)
end

-- The admission-rate budget: a token bucket of one second's admissions, in thousandths. A
-- missing or damaged field counts as a full bucket.
local function take()
  if rate == 0 then return true end
  local max = rate * 1000
  local b = redis.call('HMGET', k_bucket, 'milli', 'last')
  local milli, last = tonumber(b[1]), tonumber(b[2])
  if milli == nil or last == nil then
    milli = max
  else
    local elapsed = now - last
    if elapsed < 0 then elapsed = 0 end
    milli = math.min(max, milli + elapsed * rate)
  end
  local ok = milli >= 1000
  if ok then milli = milli - 1000 end
  redis.call('HSET', k_bucket, 'milli', milli, 'last', now)
  return ok
end

-- Admission counts: one more in the current bucket; a slot still holding an older bucket (or
-- something that is not a number) is reset first, so the ring never grows and never adds stale
-- counts. HSET of the computed count rather than HINCRBY, which fails on a damaged value.
local current_bucket = math.floor(now / bucket_ms)
local function count_admission()
  local slot = current_bucket % ring
  local v = redis.call('HMGET', k_admitted, 't' .. slot, 'n' .. slot)
  local n = tonumber(v[2])
  if tonumber(v[1]) ~= current_bucket or n == nil then
    redis.call('HSET', k_admitted, 't' .. slot, current_bucket, 'n' .. slot, 1)
  else
    redis.call('HSET', k_admitted, 'n' .. slot, n + 1)
  end
end

-- The counts of the complete buckets before the current one: {last minute, last five minutes}.
local function recent()
  local fields = {}
  local n = math.min(five_minute_buckets, current_bucket)
  for back = 1, n do
    local slot = (current_bucket - back) % ring
    fields[#fields + 1] = 't' .. slot
    fields[#fields + 1] = 'n' .. slot
  end
  if n == 0 then return 0, 0 end
  local v = redis.call('HMGET', k_admitted, unpack(fields))
  local minute, five = 0, 0
  for back = 1, n do
    if tonumber(v[2 * back - 1]) == current_bucket - back then
      local c = tonumber(v[2 * back]) or 0
      five = five + c
      if back <= minute_buckets then minute = minute + c end
    end
  end
  return minute, five
end

local function remove_waiter(w)
  redis.call('ZREM', k_line, w)
  redis.call('ZREM', k_seen, w)
end

-- Grant free slots to the head of the line, skipping waiters silent at their turn; bounded
-- work: at most max_promote promotions and skips per call, however often promote runs in it.
local promotions_left = max_promote
local function promote()
  while promotions_left > 0 do
    if capacity - slots() <= 0 then return end
    local head = redis.call('ZRANGE', k_line, 0, 0)[1]
    if not head then return end
    if has_slot(head) then
      -- Damage: a slot holder with a place too. The slot wins; no second slot.
      remove_waiter(head)
    else
      local seen_at = tonumber(redis.call('ZSCORE', k_seen, head))
      if seen_at == nil then
        -- Damage: a place without a check-in. Counted as seen now, so they keep their turn.
        seen_at = now
        redis.call('ZADD', k_seen, now, head)
      end
      if seen_at < cutoff and not excused then
        remove_waiter(head)
      else
        if not take() then return end
        remove_waiter(head)
        redis.call('ZADD', k_granted, now + grant_ttl, head)
        count_admission()
      end
    end
    promotions_left = promotions_left - 1
  end
end

local function claim_or_extend()
  if has_slot(s) then
    redis.call('ZREM', k_granted, s)
    redis.call('ZADD', k_active, now + active_ttl, s)
    return {1, now + active_ttl, 0}
  end
  return nil
end

local function touch()
  redis.call('ZADD', k_seen, now, s)
  local rank = redis.call('ZRANK', k_line, s)
  local minute, five = recent()
  return {2, rank + 1, redis.call('ZCARD', k_line), minute, five}
end

-- The next sequence number: after the last waiter's even if seq was lost or reset, so a
-- newcomer never goes ahead of the line.
local function next_seq()
  local seq = redis.call('INCR', k_seq)
  local tail = redis.call('ZRANGE', k_line, -1, -1, 'WITHSCORES')[2]
  if tail and seq <= tonumber(tail) then
    seq = tonumber(tail) + 1
    redis.call('SET', k_seq, seq)
  end
  return seq
end

-- Whether this call released something: kept outside `main`, so that a second, repaired run
-- still reports what the first one removed.
local released = 0

local function main()
  -- Housekeeping before every answer: expire slots, sweep abandoned waiters, promote.
  redis.call('ZREMRANGEBYSCORE', k_active, '-inf', now)
  redis.call('ZREMRANGEBYSCORE', k_granted, '-inf', now)
  if not excused then
    local gone = redis.call('ZRANGEBYSCORE', k_seen, '-inf', '(' .. abandoned, 'LIMIT', 0, max_sweep)
    for _, w in ipairs(gone) do
      remove_waiter(w)
    end
  end
  promote()

  if op == 'enter' then
    local r = claim_or_extend()
    if r then return r end
    if redis.call('ZSCORE', k_line, s) then return touch() end
    local waiting = redis.call('ZCARD', k_line)
    if waiting == 0 and capacity - slots() > 0 and take() then
      redis.call('ZADD', k_active, now + active_ttl, s)
      count_admission()
      return {1, now + active_ttl, 0}
    end
    if waiting >= max_queue then return {3, 0, waiting} end
    redis.call('ZADD', k_line, next_seq(), s)
    redis.call('ZADD', k_seen, now, s)
    local minute, five = recent()
    return {2, waiting + 1, waiting + 1, minute, five}
  elseif op == 'poll' then
    local exp = has_slot(s)
    if exp then return {1, tonumber(exp), 0} end
    if redis.call('ZSCORE', k_line, s) then return touch() end
    -- No place: a check-in without one is damage; drop it (only on this rare path).
    redis.call('ZREM', k_seen, s)
    return {0, 0, 0}
  elseif op == 'heartbeat' then
    return claim_or_extend() or {0, 0, 0}
  elseif op == 'release' then
    local n = redis.call('ZREM', k_active, s) + redis.call('ZREM', k_granted, s)
    if n == 0 then
      n = redis.call('ZREM', k_line, s)
      redis.call('ZREM', k_seen, s)
    end
    if n > 0 then released = 1 end
    if released == 1 then promote() end
    return {4, released, 0}
  elseif op == 'stats' then
    local minute, five = recent()
    return {5, redis.call('ZCARD', k_active), redis.call('ZCARD', k_granted),
      redis.call('ZCARD', k_line), minute, five}
  end
  return redis.error_reply('ERR unknown waiting room operation')
end

-- Deletes every key of the wrong type, and a seq that INCR cannot count on.
local function repair()
  local want = {
    {k_seq, 'string'}, {k_line, 'zset'}, {k_seen, 'zset'}, {k_active, 'zset'},
    {k_granted, 'zset'}, {k_bucket, 'hash'}, {k_admitted, 'hash'},
  }
  for _, kt in ipairs(want) do
    local t = redis.call('TYPE', kt[1])
    if type(t) == 'table' then t = t.ok end
    if t ~= 'none' and t ~= kt[2] then redis.call('DEL', kt[1]) end
  end
  local seq = tonumber(redis.call('GET', k_seq))
  if redis.call('EXISTS', k_seq) == 1 and (seq == nil or seq ~= math.floor(seq)) then
    redis.call('DEL', k_seq)
  end
end

local ok, reply = pcall(main)
if ok then return reply end
repair()
return main()
