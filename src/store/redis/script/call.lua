-- The call: its arguments as sent and as main reads them, its replies, and `setup`, which
-- makes the call's state R from them.
--
-- ARGV (few and packed: Redis makes a string of each, and Lua another, on every call, which
-- cost a short call more than a command; main reads them unpacked, `F.unpacked`, in the
-- numbering of the long list after this one):
--   1 op   2 session id   3 now (as below)
--   4 '<max_queue_len>:<queue_ttl_ms>:<abandon_after_ms>', the numbers the fast path needs; a
--     window holds for the calls that send this same string (and schedule)
--   5 '<capacity>:<rate>:<active_ttl_ms>:<grant_ttl_ms>:<max promotions>:<max sweep>:
--     <bucket ms>:<buckets>:<minute buckets>:<five minute buckets>' (no spaces)
--   6 silence excused (0|1)   7.. the operation's own   last: the schedule, if any
-- ARGV as main reads them, unpacked:
--   1 op (enter | join | poll | heartbeat | release | stats | configure | admit_next | ban |
--     sync; join is read as enter: see OPS)
--   2 session id, 16 raw bytes ('' for stats, configure, admit_next); sync: the sessions the
--     gateway saw waiting since its last sync and looks up, their ids' 16 raw bytes
--     concatenated (their Bloom offsets in 23)
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
--   18.. the operation's own (ARGV 7.. as sent): configure: 18 capacity (0 = unchanged), 19 rate (-1 = unchanged,
--      0 = none), 20 paused (-1 = unchanged, 0, 1), 21 open (-1 = unchanged, 0, 1), 22 end
--      slots on closing (0|1); admit_next: 18 count; ban: 18 end of the ban in ms; stats: 18
--      minutes of admissions history; sync: 18 the sessions this gateway already found in
--      line this abandon epoch, by their two Bloom offsets (see Liveness) as decimal text,
--      '<x> <y> ' each, whose bits are set without a lookup, in both rings; 19 and 20 the epochs (as sync's reply names them) of
--      the turn ring and the abandon ring in which this gateway's own syncs set the bits of
--      the sessions of 21 and 22 already ('' for none); 21 sessions as 18 whose bits are set in
--      the abandon ring's epoch of 20: written into the turn ring, and into the abandon ring
--      only if its current epoch is not 20's; 22 sessions whose bits are set in both: written
--      into a ring only if its current epoch is not the one named; 23 the Bloom offsets of the
--      sessions of 2, in their order, as 18 (18 to 23 always sent, maybe empty;
--      src/store/redis/checked_in.rs says why a set bit needs no second write); then the
--      sessions behind the gateway's turn horizon (see Liveness: the turn horizon), which get
--      no turn check-in: 24 those found in line and not set in the abandon ring's epoch of 20,
--      written into the abandon ring; 25 those set there, written into it only if its current
--      epoch is not 20's; 26 '<n> <horizon>', the horizon a whole number >= 0 and n the
--      sessions of 2 ahead of it (the first n; the others are behind it), or '' for no
--      horizon (24 to 26 always sent, maybe empty). Decimal text,
--      not binary: a BITFIELD argument made from a Lua number is formatted by Redis (about a
--      microsecond per bit and ring), a string is taken as it is
--   last, only for a room with a schedule (any operation): the string
--      'schedule:<opens_at_ms>:<closes_at_ms, 0 = none>:<keep line after close 0|1>:<draw>',
--      the draw being the session's keyed draw in 0 .. 2^52 - 1 (0 without a session); the
--      gateway computes it, so the draw key never reaches Redis
-- Reply: {code, a, b, ...}
--   {1, expires_at_ms, 0} admitted
--   {2, position, waiting, paused (0|1), place} waiting (enter, poll), place being the waiter's
--    sequence number, or -1 for a registrant with a draw score; no admission counts and no
--    pace (the ring read is the costly part: the gateway has them from its snapshot)
--   {3, 0, waiting} full               {0, 0, 0} unknown
--   {6, 0, 0} closed                   {7, 0, 0} banned
--   {4, released (0|1), 0} release
--   {5, admitted, granted, waiting, last_minute, last_five_minutes, capacity, rate, paused,
--    open, oldest wait in ms (-1 = nobody waits), admissions of each of the last
--    history_minutes minutes, oldest first ..., pace...} stats, where pace is: admissions in
--    the current bucket, ms into it, ms since the room was first seen, capacity, skipped in the
--    last minute, skipped in five, skipped in the current bucket, capacity before its last
--    change, ms since that change (-1: never), ms since the last ended pause began and ended
--    (-1, -1: none), admissions in each of the last five minutes (most recent first), waiters
--    not alive by the turn rule (estimated, see Sync; 0 while silence is excused), queue_ttl,
--    ms since the room's first movement (-1: not yet), the live admission rate per second (0:
--    unlimited)
--   {8, capacity, rate, paused, open, and the same four before the change} configure
--   {9, admitted} admit_next            {10, had a place or slot (0|1)} ban
--   {11, opens_at_ms, 0} scheduled: registered in the pre-queue (or already), not open yet
--   {12, now_ms, waiting, paused, open, before_opening, line_closed (each 0|1), head,
--    last_minute, last_five_minutes, pace... (as in stats, 20 numbers), n, then n checkpoints
--    as rank, score, then the ids (16 bytes each, concatenated) of the listed sessions that
--    have no place, then the current epoch of the turn ring and of the abandon ring, each
--    '<epoch>:<width ms>:<bitmap bits>:<server run id>' (the check-ins' epochs)} sync: the
--    room's snapshot. head and every checkpoint's score are strings
--    ('%.17g', '' for no head): a registrant's score is no integer, and Redis truncates the
--    numbers of a Lua reply to integers
--   an error reply `WRSETTINGS ...` when the settings key holds another version (see below)

-- The arguments as sent (see above) in the numbering main reads: op, session, now, the
-- 13 numbers of ARGV 4 and 5 as ARGV 4 to 16, silence excused as 17, then the operation's own
-- from 18 (and the schedule last). nil when ARGV 4 or 5 is not as the crate sends it.
function F.unpacked(args)
  local max_queue, queue_ttl, abandon = string.match(args[4] or '', FAST_NUMBERS)
  local c, r, active, grant, promote, sweep, bucket, ring, minute, five =
    string.match(args[5] or '', MAIN_NUMBERS)
  if not max_queue or not c or (args[6] ~= '0' and args[6] ~= '1') then return nil end
  local op = args[1] == 'join' and 'enter' or args[1]
  local a = {op, args[2], args[3], c, r, active, grant, queue_ttl, max_queue, promote, sweep,
    bucket, ring, minute, five, abandon, args[6]}
  for i = 7, #args do a[i + 11] = args[i] end
  return a
end

-- One call's state, from its keys and arguments: R is made anew by every FCALL (the functions
-- are defined once, when the library is loaded), in ONE table constructor, so that its hash
-- part is sized once instead of growing field by field (the nil ones are set later in the
-- call: the constructor still sizes the table for them). Returns an error reply for arguments
-- that cannot be read, else nil.
function F.setup(keys, sent)
  local args = F.unpacked(sent)
  if not args then return redis.error_reply('ERR malformed waiting room arguments') end
  local capacity, rate = tonumber(args[4]), tonumber(args[5])
  local queue_ttl = tonumber(args[8])
  R = {
    keys = keys, argv = args, fast_numbers = sent[4],
    k_seq = keys[1], k_line = keys[2], k_active = keys[3], k_granted = keys[4],
    k_bucket = keys[5], k_admitted = keys[6], k_settings = keys[7], k_arrivals = keys[8],
    k_banned = keys[9], k_fast = keys[K_FAST],
    op = args[1], s = args[2], now = tonumber(args[3]),
    default_capacity = capacity, default_rate = rate,
    -- The live settings, read by `load_settings` at the start of every run, and when the
    -- room was first seen.
    capacity = capacity, rate = rate, paused = false, open = true, born = 0,
    -- The room's first movement (nil: not yet).
    moved = nil,
    -- The capacity before its last change, and when that was (nil: never changed).
    cap_before = nil, cap_at = nil,
    -- When the current pause began, and the last pause that ended (nil: none).
    paused_at = nil, pause_start = nil, pause_end = nil,
    -- Housekeeping's next due time, the sweep's cursor, the end of every ban, the last arrival
    -- note's second (nil: not known, so look).
    due = nil, cursor = '-inf', bans = nil, noted = nil,
    active_ttl = tonumber(args[6]), grant_ttl = tonumber(args[7]), queue_ttl = queue_ttl,
    max_queue = tonumber(args[9]), max_promote = tonumber(args[10]),
    max_sweep = tonumber(args[11]),
    -- The crate sends every argument (src/store/redis/protocol.rs), so no default is
    -- repeated here.
    bucket_ms = tonumber(args[12]), ring = tonumber(args[13]),
    minute_buckets = tonumber(args[14]), five_minute_buckets = tonumber(args[15]),
    abandon = math.max(tonumber(args[16]), queue_ttl),
    excused = args[17] == '1',
    -- The schedule (schedule.lua): nil for a room without one.
    opens_at = nil, closes_at = nil, keep_line = true, draw_score = nil, scheduled_call = false,
    -- Set by apply_schedule, below.
    before_opening = false, check_in_at = 0, after_closing = false, line_closed = false,
    -- The liveness rings, the Bloom size, the ticket key (release and ban).
    turn = nil, gone_ring = nil, rings = nil, bloom_bits = 0, bloom_bytes = 0, run_id = nil,
    k_ticket = nil,
    SETTINGS_FIELDS = nil,
    current_bucket = 0,
    -- The promotion budget, shared by both runs of a repaired call.
    promotions_left = 0,
    -- Whether this call released something: kept outside `main`, so that a second, repaired
    -- run still reports what the first one removed.
    released = 0,
    -- Sync's listed sessions without a place.
    unknown = nil,
  }
  local last = args[#args]
  if string.sub(last, 1, 9) == 'schedule:' then
    local o, c, k, d = string.match(last, '^schedule:(%d+):(%d+):([01]):(%d+)$')
    if not o then
      -- Never read as "no schedule": that would open a room that is not open yet.
      return redis.error_reply('ERR malformed schedule argument')
    end
    R.opens_at, R.closes_at, R.keep_line = tonumber(o), tonumber(c), k == '1'
    if R.closes_at == 0 then R.closes_at = nil end
    R.draw_score = string.format('%.17g', tonumber(d) / 4503599627370496 - 1)
    -- This call came with the schedule (else it may follow the one the settings key kept).
    R.scheduled_call = true
  end
  if R.now == 0 then
    local t = redis.call('TIME')
    R.now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
  end
  F.apply_schedule()
  local turn = F.make_ring('turn', 10, TURN_EPOCHS, queue_ttl)
  local gone = F.make_ring('abandon', 10 + turn.len, ABANDON_EPOCHS, R.abandon)
  R.turn, R.gone_ring, R.rings = turn, gone, {turn, gone}
  R.bloom_bits = F.bloom_bits(R.max_queue)
  -- A bitmap's length: its M bits and the sentinel, bit M.
  R.bloom_bytes = math.floor(R.bloom_bits / 8) + 1
  R.k_ticket = keys[K_TICKET]
  R.SETTINGS_FIELDS = {'v', 'capacity', 'rate', 'paused', 'open', 'born', 'moved', 'opens_at',
    'closes_at', 'keep_line', 'due', 'bans', 'noted',
    RING_FIELDS.turn[turn.current % turn.len], RING_FIELDS.abandon[gone.current % gone.len],
    FROM_FIELDS.turn[turn.current % turn.len], FROM_FIELDS.abandon[gone.current % gone.len]}
  R.current_bucket = math.floor(R.now / R.bucket_ms)
  R.promotions_left = R.max_promote
  return nil
end
