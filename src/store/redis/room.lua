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
--                      number, now // bucket_ms), n<i> (its admissions) and k<i> (waiters
--                      skipped as silent at their turn); at most 3 * ring fields
--   8 settings hash    the live settings: v (SETTINGS_VERSION), capacity, rate (0 = none),
--                      paused (0|1), open (0|1); written from ARGV 4-5 when missing; and born
--                      (ms), when the room was first seen, for the wait estimate's window;
--                      cap_before and cap_at, the capacity before its last change and when;
--                      paused_at, pause_start and pause_end, the current and the last pause;
--                      early, the admissions since born until the first movement, and moved
--                      (ms), that movement: the first admission beyond the opening's capacity;
--                      opens_at, closes_at (0 = none) and keep_line (0|1), the last schedule a
--                      call came with (see Schedule below)
--   9 arrivals zset    the first arrival of each second: member = its time in ms, score = its
--                      sequence number; entries before the head's are trimmed (oldest wait)
--  10 banned   zset    banned sessions, score = the end of the ban in ms
--  11 ticket   string  release and ban only: the session's single-use ticket record
--                      (tickets.lua's KEYS[1]), ended with the slot in free_session
-- (A scheduled room's pre-queue lives in `line` too: a registrant's score is draw / 2^52 - 1, in
-- [-1, 0), ahead of every sequence number; see Schedule below.)
-- ARGV:
--   1 op (enter | poll | heartbeat | release | stats)
--   2 session id ('' for stats)
--   3 now in ms, or 0 (NOW_FROM_SERVER) to use the server's TIME (shared by every gateway)
--   4 capacity   5 admission rate per second (0 = none): the defaults for the settings key only;
--     the room's live values are the ones in it
--   6 active_ttl_ms   7 grant_ttl_ms   8 queue_ttl_ms   9 max_queue_len
--   10 max promotions per call   11 max sweep per call
--   12 admission bucket width in ms   13 buckets in the ring
--   14 complete buckets in the "last minute" count   15 ... in the "last five minutes" count
--   16 abandon_after_ms (the script uses at least queue_ttl_ms)
--   17 1 if the calling gateway failed to reach the store within the last queue_ttl (an
--      outage: every check-in through it failed), else 0 or absent: silence is then excused
--   18.. the operation's own: configure: 18 capacity (0 = unchanged), 19 rate (-1 = unchanged,
--      0 = none), 20 paused (-1 = unchanged, 0, 1), 21 open (-1 = unchanged, 0, 1), 22 end
--      slots on closing (0|1); admit_next: 18 count; ban: 18 end of the ban in ms; stats: 18
--      minutes of admissions history
--   last, only for a room with a schedule (any operation): the string
--      'schedule:<opens_at_ms>:<closes_at_ms, 0 = none>:<keep line after close 0|1>:<draw>',
--      the draw being the session's keyed draw in 0 .. 2^52 - 1 (0 without a session); the
--      gateway computes it, so the draw key never reaches Redis
-- Reply: {code, a, b, ...}
--   {1, expires_at_ms, 0} admitted
--   {2, position, waiting, last_minute, last_five_minutes, paused (0|1), pace...} waiting, where
--    pace is: admissions in the current bucket, ms into it, ms since the room was first seen,
--    capacity, skipped in the last minute, skipped in five, skipped in the current bucket,
--    capacity before its last change, ms since that change (-1: never), ms since the last ended
--    pause began and ended (-1, -1: none), admissions in each of the last five minutes (most
--    recent first), waiters silent for longer than queue_ttl (to the second; 0 while silence is
--    excused), queue_ttl, ms since the room's first movement (-1: not yet), the live admission
--    rate per second (0: unlimited)
--   {3, 0, waiting} full               {0, 0, 0} unknown
--   {6, 0, 0} closed                   {7, 0, 0} banned
--   {4, released (0|1), 0} release
--   {5, admitted, granted, waiting, last_minute, last_five_minutes, capacity, rate, paused,
--    open, oldest wait in ms (-1 = nobody waits), admissions of each of the last
--    history_minutes minutes, oldest first ..., pace...} stats
--   {8, capacity, rate, paused, open, and the same four before the change} configure
--   {9, admitted} admit_next            {10, had a place or slot (0|1)} ban
--   {11, opens_at_ms, 0} scheduled: registered in the pre-queue (or already), not open yet
--   an error reply `WRSETTINGS ...` when the settings key holds another version (see below)
--
-- Settings: the operator's live values, read by every call in the same step as the admission
-- they govern. Paused: no promotion, no direct admission. Closed: {6} for everyone without a
-- slot (a waiter's check-in is still recorded: they keep their place for a reopening), no
-- promotion, claimed slots not extended (a granted one is still claimed). A settings key of another version is
-- refused with an error (a newer crate's fields may change who is admitted; guessing is worse
-- than stopping); a damaged field is rewritten with its default.
--
-- Schedule (the last ARGV, when present): before opens_at nobody is admitted (no promotion, no
-- direct admission, admit_next lets nobody in); a newcomer joins the pre-queue with the score
-- draw / 2^52 - 1 (exact in a double, and written with %.17g so Redis reads the same double) and
-- gets {11}; a waiter's check-in is recorded as opens_at, so silence counts from the opening.
-- The order of the pre-queue is thus fixed on arrival, and at the opening nothing moves: the
-- registrants are simply at the front of the line, later arrivals behind them by sequence
-- number. From closes_at newcomers get {6}; with keep line 0, everyone without a slot does and
-- nobody is promoted (as a close). The first registrant's arrival is noted at score -1 for the
-- oldest wait. The room's pace is measured from the opening (the "ms since the room was first
-- seen" of the pace counts from there), so a room that just opened is estimating, not stalled.
-- A malformed schedule argument is refused with an error (the gateway then answers as for a
-- store outage before the opening: scheduled), never read as no schedule. The schedule is kept
-- in the settings key, so a call without one (a gateway built without it, in a rolling deploy)
-- still admits nobody before a kept future opening; its newcomers have no draw and are
-- registered by sequence number, behind the drawn registrants. A pre-queue opened while waiters
-- with sequence numbers are in line (an earlier opening's line) registers newcomers by sequence
-- number too: a draw would put them ahead of people already waiting.
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
local k_settings, k_arrivals, k_banned = KEYS[8], KEYS[9], KEYS[10]
local SETTINGS_VERSION = 1
local op, s = ARGV[1], ARGV[2]
local now = tonumber(ARGV[3])
local default_capacity = tonumber(ARGV[4])
local default_rate = tonumber(ARGV[5])
-- The live settings, read by `load_settings` at the start of every run, and when the room was
-- first seen.
local capacity, rate, paused, open = default_capacity, default_rate, false, true
local born = 0
-- The room's first movement (nil: not yet).
local moved = nil
-- The capacity before its last change, and when that was (nil: never changed).
local cap_before, cap_at = nil, nil
-- When the current pause began, and the last pause that ended (nil: none).
local paused_at, pause_start, pause_end = nil, nil, nil
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
-- The schedule (see the header): nil for a room without one.
local opens_at, closes_at, keep_line, draw_score = nil, nil, true, nil
do
  local last = ARGV[#ARGV]
  if string.sub(last, 1, 9) == 'schedule:' then
    local o, c, k, d = string.match(last, '^schedule:(%d+):(%d+):([01]):(%d+)$')
    if not o then
      -- Never read as "no schedule": that would open a room that is not open yet.
      return redis.error_reply('ERR malformed schedule argument')
    end
    opens_at, closes_at, keep_line = tonumber(o), tonumber(c), k == '1'
    if closes_at == 0 then closes_at = nil end
    draw_score = string.format('%.17g', tonumber(d) / 4503599627370496 - 1)
  end
end
-- Whether this call came with the schedule (else it may follow the one the settings key kept).
local scheduled_call = opens_at ~= nil

if now == 0 then
  local t = redis.call('TIME')
  now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end
-- Before the opening: nobody admitted; check-ins count as of the opening. After the closing:
-- newcomers refused; `line_closed` when the line is not kept either.
local before_opening, check_in_at, after_closing, line_closed
local function apply_schedule()
  before_opening = opens_at ~= nil and now < opens_at
  check_in_at = before_opening and opens_at or now
  after_closing = closes_at ~= nil and now >= closes_at
  line_closed = after_closing and not keep_line
end
apply_schedule()
-- Silent since before `cutoff`: skipped at their turn. Before `abandoned`: swept from anywhere.
local cutoff = now - queue_ttl
if cutoff < 0 then cutoff = 0 end
local abandoned = now - abandon
if abandoned < 0 then abandoned = 0 end

-- Reads the live settings, writing the defaults for a missing key or field. Returns an error
-- reply for a key of another version, else nil.
local function load_settings()
  local v = redis.call('HMGET', k_settings, 'v', 'capacity', 'rate', 'paused', 'open', 'born',
    'cap_before', 'cap_at', 'paused_at', 'pause_start', 'pause_end', 'moved', 'opens_at',
    'closes_at', 'keep_line')
  local ver = tonumber(v[1])
  if v[1] and ver ~= SETTINGS_VERSION then
    return redis.error_reply('WRSETTINGS room settings of version ' .. tostring(v[1]) ..
      ', this crate reads version ' .. SETTINGS_VERSION)
  end
  local c, r = tonumber(v[2]), tonumber(v[3])
  local p, o = tonumber(v[4]), tonumber(v[5])
  if ver == nil or c == nil or c < 1 or r == nil or r < 0 or (p ~= 0 and p ~= 1)
      or (o ~= 0 and o ~= 1) then
    -- A new room, a lost key, or a damaged field: the defaults where nothing valid is held.
    if c == nil or c < 1 then c = default_capacity end
    if r == nil or r < 0 then r = default_rate end
    if p ~= 0 and p ~= 1 then p = 0 end
    if o ~= 0 and o ~= 1 then o = 1 end
    redis.call('HSET', k_settings, 'v', SETTINGS_VERSION, 'capacity', c, 'rate', r,
      'paused', p, 'open', o)
  end
  capacity, rate, paused, open = c, r, p == 1, o == 1
  cap_before, cap_at = tonumber(v[7]), tonumber(v[8])
  paused_at, pause_start, pause_end = tonumber(v[9]), tonumber(v[10]), tonumber(v[11])
  born, moved = tonumber(v[6]), tonumber(v[12])
  if born == nil or born > now then
    -- When the room was first seen (or its settings key was lost): what its pace is measured
    -- over. A clock that went back counts the room as born now, its first movement to come.
    born, moved = now, nil
    redis.call('HSET', k_settings, 'born', born)
    redis.call('HDEL', k_settings, 'early', 'moved')
  end
  -- The schedule: kept from the calls that come with it (written only when it changes), and
  -- followed by a call without one while the kept opening is ahead.
  local kept_opens, kept_closes, kept_keep = tonumber(v[13]), tonumber(v[14]), v[15]
  if scheduled_call then
    if kept_opens ~= opens_at or kept_closes ~= (closes_at or 0)
        or kept_keep ~= (keep_line and '1' or '0') then
      redis.call('HSET', k_settings, 'opens_at', opens_at, 'closes_at', closes_at or 0,
        'keep_line', keep_line and 1 or 0)
    end
  elseif kept_opens and kept_opens > now then
    opens_at, keep_line = kept_opens, kept_keep ~= '0'
    closes_at = kept_closes
    if closes_at == 0 then closes_at = nil end
    apply_schedule()
  end
  return nil
end

local function settings_reply(code)
  return {code, capacity, rate, paused and 1 or 0, open and 1 or 0}
end

local function banned(w)
  local until_ms = tonumber(redis.call('ZSCORE', k_banned, w))
  if until_ms == nil then return false end
  if until_ms > now then return true end
  redis.call('ZREM', k_banned, w)
  return false
end

-- Notes the first arrival of each second (sequence number and time), dropping notes before the
-- head's, for the oldest wait: at most one note per second of the line's age.
local function note_arrival(seq)
  local last = redis.call('ZRANGE', k_arrivals, -1, -1)[1]
  if last and math.floor((tonumber(last) or 0) / 1000) == math.floor(now / 1000) then return end
  local head = redis.call('ZRANGE', k_line, 0, 0, 'WITHSCORES')[2]
  if head then
    local before = redis.call('ZREVRANGEBYSCORE', k_arrivals, head, '-inf', 'WITHSCORES',
      'LIMIT', 0, 1)[2]
    if before then redis.call('ZREMRANGEBYSCORE', k_arrivals, '-inf', '(' .. before) end
  else
    redis.call('DEL', k_arrivals)
  end
  redis.call('ZADD', k_arrivals, seq, now)
end

-- How long the head of the line has waited (ms), from the last note at or before its
-- sequence number; -1 when nobody waits or no note covers the head.
local function oldest_wait()
  local head = redis.call('ZRANGE', k_line, 0, 0, 'WITHSCORES')[2]
  if not head then return -1 end
  local at = tonumber(redis.call('ZREVRANGEBYSCORE', k_arrivals, head, '-inf', 'LIMIT', 0, 1)[1])
  if at == nil then return -1 end
  return math.max(0, now - at)
end

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
-- `field` is n (admissions) or k (waiters skipped as silent at their turn: the line moved
-- without an admission, which the wait estimate counts as movement).
local function count_in_ring(field)
  local slot = current_bucket % ring
  local v = redis.call('HMGET', k_admitted, 't' .. slot, field .. slot)
  local n = tonumber(v[2])
  if tonumber(v[1]) ~= current_bucket or n == nil then
    if field == 'n' then
      redis.call('HSET', k_admitted, 't' .. slot, current_bucket, 'n' .. slot, 1, 'k' .. slot, 0)
    elseif tonumber(v[1]) ~= current_bucket then
      redis.call('HSET', k_admitted, 't' .. slot, current_bucket, 'n' .. slot, 0, 'k' .. slot, 1)
    else
      redis.call('HSET', k_admitted, 'k' .. slot, 1)
    end
  else
    redis.call('HSET', k_admitted, field .. slot, n + 1)
  end
end

local function count_admission()
  count_in_ring('n')
  if moved == nil then
    -- Until the first movement: counted, and the first admission beyond the opening's
    -- capacity noted (a damaged count restarts).
    local early = tonumber(redis.call('HGET', k_settings, 'early')) or 0
    early = early + 1
    if early > capacity then
      moved = now
      redis.call('HSET', k_settings, 'moved', now)
    else
      redis.call('HSET', k_settings, 'early', early)
    end
  end
end
local function count_skip() count_in_ring('k') end

-- The room's pace beyond the complete buckets: {admissions in the current bucket, ms into it,
-- ms since the room was first seen, capacity}.
local function pace()
  local slot = current_bucket % ring
  local v = redis.call('HMGET', k_admitted, 't' .. slot, 'n' .. slot, 'k' .. slot)
  local current, skipped = 0, 0
  if tonumber(v[1]) == current_bucket then
    current, skipped = tonumber(v[2]) or 0, tonumber(v[3]) or 0
  end
  local ago = -1
  if cap_at then ago = math.max(0, now - cap_at) end
  local ps, pe = -1, -1
  if pause_start and pause_end then
    ps, pe = math.max(0, now - pause_start), math.max(0, now - pause_end)
  end
  -- A scheduled room is measured from its opening: nobody could be let in before it.
  local since = born
  if opens_at and opens_at > since then since = opens_at end
  return {current, now - current_bucket * bucket_ms, math.max(0, now - since), capacity, skipped,
    cap_before or capacity, ago, ps, pe}
end

-- The counts of the complete buckets before the current one, in one read: admissions in the
-- last minute and the last five minutes, admissions in each of those five minutes (most recent
-- first), and waiters skipped as silent at their turn in the last minute and five.
local function recent()
  local per_minute = {}
  for m = 1, five_minute_buckets / minute_buckets do per_minute[m] = 0 end
  local n = math.min(five_minute_buckets, current_bucket)
  if n == 0 then return 0, 0, per_minute, 0, 0 end
  local fields = {}
  for back = 1, n do
    local slot = (current_bucket - back) % ring
    fields[#fields + 1] = 't' .. slot
    fields[#fields + 1] = 'n' .. slot
    fields[#fields + 1] = 'k' .. slot
  end
  local v = redis.call('HMGET', k_admitted, unpack(fields))
  local minute, five, skipped_minute, skipped_five = 0, 0, 0, 0
  for back = 1, n do
    if tonumber(v[3 * back - 2]) == current_bucket - back then
      local c, k = tonumber(v[3 * back - 1]) or 0, tonumber(v[3 * back]) or 0
      five, skipped_five = five + c, skipped_five + k
      if back <= minute_buckets then
        minute, skipped_minute = minute + c, skipped_minute + k
      end
      local m = math.floor((back - 1) / minute_buckets) + 1
      per_minute[m] = per_minute[m] + c
    end
  end
  return minute, five, per_minute, skipped_minute, skipped_five
end

-- Waiters in line silent since before `cutoff`, to the second (as the embedded store): they
-- are skipped at their turn unless they come back. None while silence is excused.
local function silent()
  if excused then return 0 end
  return redis.call('ZCOUNT', k_seen, '-inf', '(' .. (math.floor(cutoff / 1000) * 1000))
end

-- Appends the room's pace to `reply` (the wait estimate's input, in waiting and stats replies):
-- admissions in the current bucket, ms into it, ms since the room was first seen, capacity,
-- skipped in the last minute, in five, in the current bucket, capacity before its last change,
-- ms since that change (-1: never), ms since the last ended pause began and ended (-1, -1:
-- none), admissions in each of the last five minutes (most recent first), waiters silent for
-- longer than queue_ttl, queue_ttl, ms since the room's first movement (-1: not yet), the live
-- admission rate per second (0: unlimited). Returns the counts of the last minute and five.
local function append_pace(reply)
  local minute, five, per_minute, sm, sf = recent()
  local p = pace()
  for _, v in ipairs({p[1], p[2], p[3], p[4], sm, sf, p[5], p[6], p[7], p[8], p[9]}) do
    reply[#reply + 1] = v
  end
  for _, c in ipairs(per_minute) do reply[#reply + 1] = c end
  reply[#reply + 1] = silent()
  reply[#reply + 1] = queue_ttl
  reply[#reply + 1] = moved and math.max(0, now - moved) or -1
  reply[#reply + 1] = rate
  return minute, five
end

-- A waiting reply: {2, position, waiting, last minute, five, paused, pace...}.
local function waiting_reply(position, waiting)
  local reply = {2, position, waiting, 0, 0, paused and 1 or 0}
  reply[4], reply[5] = append_pace(reply)
  return reply
end

local function remove_waiter(w)
  redis.call('ZREM', k_line, w)
  redis.call('ZREM', k_seen, w)
end

-- Grant free slots to the head of the line, skipping waiters silent at their turn; bounded
-- work: at most max_promote promotions and skips per call, however often promote runs in it.
local promotions_left = max_promote
local function promote()
  if paused or not open or before_opening or line_closed then return end
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
        count_skip()
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
  local exp = has_slot(s)
  if exp and not open then
    -- Closed: claimed slots run out, not extended. A granted slot is still claimed: its visitor
    -- was let in before the close, or by an operator's release.
    local active = redis.call('ZSCORE', k_active, s)
    if active then return {1, tonumber(active), 0} end
  end
  if exp then
    redis.call('ZREM', k_granted, s)
    redis.call('ZADD', k_active, now + active_ttl, s)
    return {1, now + active_ttl, 0}
  end
  return nil
end

local function touch()
  redis.call('ZADD', k_seen, check_in_at, s)
  if not open then return {6, 0, 0} end
  if before_opening then return {11, opens_at, 0} end
  if line_closed then return {6, 0, 0} end
  local rank = redis.call('ZRANK', k_line, s)
  return waiting_reply(rank + 1, redis.call('ZCARD', k_line))
end

-- Notes the pre-queue's first arrival, once, at score -1 (ahead of every registrant's score):
-- the oldest wait of a registrant counts from then.
local function note_pre_arrival()
  if #redis.call('ZRANGEBYSCORE', k_line, -1, '(0', 'LIMIT', 0, 1) == 0 then
    -- The first registrant of a pre-queue (an earlier one emptied, or never was): its note
    -- replaces any older one, as the embedded store starts its pre-queue's time anew.
    redis.call('ZREMRANGEBYSCORE', k_arrivals, -1, -1)
    redis.call('ZADD', k_arrivals, -1, now)
  elseif #redis.call('ZRANGEBYSCORE', k_arrivals, -1, -1, 'LIMIT', 0, 1) == 0 then
    redis.call('ZADD', k_arrivals, -1, now)
  end
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
  note_arrival(seq)
  return seq
end

-- Admissions per minute over the last history_minutes complete minutes, oldest first.
local function history(history_minutes)
  local fields = {}
  local n = math.min(history_minutes * minute_buckets, current_bucket)
  if n == 0 then
    local zeros = {}
    for i = 1, history_minutes do zeros[i] = 0 end
    return zeros
  end
  for back = 1, n do
    local slot = (current_bucket - back) % ring
    fields[#fields + 1] = 't' .. slot
    fields[#fields + 1] = 'n' .. slot
  end
  local v = redis.call('HMGET', k_admitted, unpack(fields))
  local out = {}
  for i = 1, history_minutes do out[i] = 0 end
  for back = 1, n do
    if tonumber(v[2 * back - 1]) == current_bucket - back then
      local i = history_minutes - math.floor((back - 1) / minute_buckets)
      out[i] = out[i] + (tonumber(v[2 * back]) or 0)
    end
  end
  return out
end

-- Whether this call released something: kept outside `main`, so that a second, repaired run
-- still reports what the first one removed.
local released = 0

-- Frees the session's slot, or else its place, and promotes into what was freed (release, ban).
local function free_session()
  -- The session's single-use ticket record (KEYS[11], sent by release and ban only) ends with
  -- its slot, in this same step: its state `n`/`u` upper-cased in place (SETRANGE keeps the
  -- TTL), so it never passes again and the next admission's mint replaces it (tickets.lua).
  local k_ticket = KEYS[11]
  if k_ticket and redis.call('TYPE', k_ticket)['ok'] == 'string' then
    local state = string.sub(redis.call('GET', k_ticket), 1, 1)
    if state == 'n' or state == 'u' then
      redis.call('SETRANGE', k_ticket, 0, string.upper(state))
    end
  end
  local n = redis.call('ZREM', k_active, s) + redis.call('ZREM', k_granted, s)
  if n == 0 then
    n = redis.call('ZREM', k_line, s)
    redis.call('ZREM', k_seen, s)
  end
  if n > 0 then released = 1 end
  if released == 1 then promote() end
end

local function main()
  local refused = load_settings()
  if refused then return refused end
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
    if not open or after_closing then return {6, 0, 0} end
    if banned(s) then return {7, 0, 0} end
    local waiting = redis.call('ZCARD', k_line)
    if before_opening then
      if waiting >= max_queue then return {3, 0, waiting} end
      -- Drawn ahead of every sequence number, unless some waiter holds one (an earlier
      -- opening's line: drawing would jump it) or the call brought no draw (a kept schedule).
      local tail = tonumber(redis.call('ZRANGE', k_line, -1, -1, 'WITHSCORES')[2])
      if draw_score and not (tail and tail >= 1) then
        note_pre_arrival()
        redis.call('ZADD', k_line, draw_score, s)
      else
        redis.call('ZADD', k_line, next_seq(), s)
      end
      redis.call('ZADD', k_seen, check_in_at, s)
      return {11, opens_at, 0}
    end
    if not paused and waiting == 0 and capacity - slots() > 0 and take() then
      redis.call('ZADD', k_active, now + active_ttl, s)
      count_admission()
      return {1, now + active_ttl, 0}
    end
    if waiting >= max_queue then return {3, 0, waiting} end
    redis.call('ZADD', k_line, next_seq(), s)
    redis.call('ZADD', k_seen, now, s)
    return waiting_reply(waiting + 1, waiting + 1)
  elseif op == 'poll' then
    local exp = has_slot(s)
    if exp then return {1, tonumber(exp), 0} end
    if redis.call('ZSCORE', k_line, s) then return touch() end
    -- No place: a check-in without one is damage; drop it (only on this rare path).
    redis.call('ZREM', k_seen, s)
    if banned(s) then return {7, 0, 0} end
    if not open or after_closing then return {6, 0, 0} end
    return {0, 0, 0}
  elseif op == 'heartbeat' then
    return claim_or_extend() or {0, 0, 0}
  elseif op == 'release' then
    free_session()
    return {4, released, 0}
  elseif op == 'stats' then
    local out = {5, redis.call('ZCARD', k_active), redis.call('ZCARD', k_granted),
      redis.call('ZCARD', k_line), 0, 0, capacity, rate, paused and 1 or 0,
      open and 1 or 0, oldest_wait()}
    for _, n in ipairs(history(tonumber(ARGV[18]))) do out[#out + 1] = n end
    out[5], out[6] = append_pace(out)
    return out
  elseif op == 'configure' then
    local c, r = tonumber(ARGV[18]), tonumber(ARGV[19])
    local p, o = tonumber(ARGV[20]), tonumber(ARGV[21])
    local before = settings_reply(8)
    if c > 0 and c ~= capacity then
      -- Remembered for the wait estimate: the pace measured before the change was at the old
      -- capacity.
      redis.call('HSET', k_settings, 'cap_before', capacity, 'cap_at', now)
      capacity = c
    end
    if r >= 0 then rate = r end
    if p >= 0 then
      -- Remembered for the wait estimate: a pause is no measure of the line's pace.
      if p == 1 and not paused then
        redis.call('HSET', k_settings, 'paused_at', now)
      elseif p == 0 and paused then
        redis.call('HSET', k_settings, 'pause_start', paused_at or now, 'pause_end', now)
      end
      paused = p == 1
    end
    if o >= 0 then open = o == 1 end
    redis.call('HSET', k_settings, 'v', SETTINGS_VERSION, 'capacity', capacity, 'rate', rate,
      'paused', paused and 1 or 0, 'open', open and 1 or 0)
    if o == 0 and ARGV[22] == '1' then
      redis.call('DEL', k_active, k_granted)
    end
    -- A raised capacity or a resume lets people in now, not at the next call.
    promote()
    local out = settings_reply(8)
    for i = 2, 5 do out[#out + 1] = before[i] end
    return out
  elseif op == 'admit_next' then
    local want = tonumber(ARGV[18])
    -- Nobody is admitted before the opening, not even by an operator.
    if before_opening then want = 0 end
    local admitted, steps = 0, 0
    while admitted < want and steps < 2 * want do
      local head = redis.call('ZRANGE', k_line, 0, 0)[1]
      if not head then break end
      steps = steps + 1
      local seen_at = tonumber(redis.call('ZSCORE', k_seen, head))
      local holder = has_slot(head)
      remove_waiter(head)
      -- A slot holder's stray place, or a waiter silent at their turn: skipped.
      if not holder and seen_at and seen_at < cutoff then count_skip() end
      if not holder and not (seen_at and seen_at < cutoff) then
        redis.call('ZADD', k_granted, now + grant_ttl, head)
        count_admission()
        admitted = admitted + 1
      end
    end
    return {9, admitted}
  elseif op == 'ban' then
    local until_ms = tonumber(ARGV[18])
    redis.call('ZREMRANGEBYSCORE', k_banned, '-inf', now)
    if until_ms > now then redis.call('ZADD', k_banned, until_ms, s) end
    free_session()
    return {10, released}
  end
  return redis.error_reply('ERR unknown waiting room operation')
end

-- Deletes every key of the wrong type, and a seq that INCR cannot count on.
local function repair()
  local want = {
    {k_seq, 'string'}, {k_line, 'zset'}, {k_seen, 'zset'}, {k_active, 'zset'},
    {k_granted, 'zset'}, {k_bucket, 'hash'}, {k_admitted, 'hash'}, {k_settings, 'hash'},
    {k_arrivals, 'zset'}, {k_banned, 'zset'},
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
