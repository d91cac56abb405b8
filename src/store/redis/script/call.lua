-- The call: the arguments every operation's function takes first, and `setup`, which makes the
-- call's state R from them. Each operation is a function of its own (register.lua), whose
-- header above its body (visitor.lua, sync.lua, operator.lua) gives its KEYS, ARGV and reply.
--
-- ARGV (few and packed: Redis makes a string of each, and Lua another, on every call, which
-- cost a short call more than a command: 10 % of a fast join, 8 % of a heartbeat at 2M;
-- bench: docs/benchmarks.md#each-shortcut-measured), first in every function:
--   1 now           the time in ms, or 0 (NOW_FROM_SERVER) to use the server's TIME (shared by
--                   every gateway)
--   2 line_numbers  '<max_queue_len>:<queue_ttl_ms>:<abandon_after_ms>', the numbers the fast
--                   path needs; a window holds for the calls that send this same string (and
--                   schedule). abandon_after_ms is used as at least queue_ttl_ms
--   3 room_numbers  '<capacity>:<rate>:<active_ttl_ms>:<grant_ttl_ms>:<max promotions>:
--                   <max sweep>:<bucket ms>:<buckets>:<minute buckets>:<five minute buckets>'
--                   (no spaces): capacity and rate (per second, 0 = none) are the defaults for
--                   the settings key only, the room's live values are the ones in it; the
--                   promotions and the sweep per call; the admission counts' bucket width, the
--                   buckets in their ring, and the complete buckets in the "last minute" and
--                   "last five minutes" counts
--   4 excused       1 if the calling gateway failed to reach the store within the last
--                   queue_ttl (an outage: every check-in through it failed), else 0: silence
--                   is then excused
-- then the operation's own, then, only for a room with a schedule (any operation):
--   schedule        'schedule:<opens_at_ms>:<closes_at_ms, 0 = none>:<keep line after close
--                   0|1>:<draw>', the draw being the session's keyed draw in 0 .. 2^52 - 1 (0
--                   but for enter and join); the gateway computes it, so the draw key never
--                   reaches Redis (schedule.lua)
-- Replies start with their code (keys.lua's REPLY; src/store/redis/protocol.rs, `reply`);
-- besides each operation's own, any may answer {11, opens_at_ms, 0} (scheduled: registered in
-- the pre-queue, or already, not open yet), {6, 0, 0} (closed) or an error reply
-- `WRSETTINGS ...` when the settings key holds another version (settings.lua).

-- How many arguments every function takes first (above).
local CALL_ARGS = 4

-- What a caller may send. Every number of the call is read as strictly as a stored one
-- (stored.lua: Redis's integer grammar, within its range), and a call with one outside its
-- bounds is refused with an error reply (`WRARGS`, or `WRCLOCK` for the time) before anything
-- is read or written: an old or misbehaving gateway is refused, never obeyed into emptying the
-- room or growing memory without bound. The crate refuses the same settings at build
-- (src/config/validate.rs, against src/store/mod.rs's MAX_QUEUE_LEN_LIMIT and MAX_STORED_TTL_MS;
-- docs/redis.md lists them).
--   the line's bound: 1 .. 2^24 waiters (each liveness bitmap at most 32 MiB, see Liveness);
--   the four lifetimes (queue_ttl, abandon_after, active_ttl, grant_ttl): 1 ms .. 7 days (a
--   bitmap's lifetime is a ring of epochs of these; a slot's is one of them);
--   capacity 1 .. 2^32 - 1, rate 0 .. 2^32 - 1, the crate's constants (promotions and the sweep
--   per call, the admission counts' buckets) within the ranges below;
--   the time: as time.lua reads it (the server's, a gateway's within a second of it, or a
--   manual clock's).
local LIMIT_QUEUE, LIMIT_TTL = 16777216, 604800000

-- The packed numbers of `text` (split at ':'), each read within its bounds `limits` ({min,
-- max} pairs, one per number); nil unless there are exactly as many, each in range.
function F.read_numbers(text, limits)
  local out, i = {}, 0
  for part in string.gmatch((text or '') .. ':', '([^:]*):') do
    i = i + 1
    local limit = limits[i]
    if not limit then return nil end
    out[i] = stored_integer(part, limit[1], limit[2])
    if out[i] == nil then return nil end
  end
  if i ~= #limits then return nil end
  return out
end

local LINE_LIMITS = {{1, LIMIT_QUEUE}, {1, LIMIT_TTL}, {1, LIMIT_TTL}}
-- capacity, rate, active_ttl, grant_ttl, promotions, sweep, bucket ms, buckets, minute
-- buckets, five minute buckets.
local ROOM_LIMITS = {{1, U32_MAX}, {0, U32_MAX}, {1, LIMIT_TTL}, {1, LIMIT_TTL},
  {1, 100000}, {1, 100000}, {1, 3600000}, {1, 100000}, {1, 100000}, {1, 100000}}

-- A refused call's error reply.
function F.refuse(what)
  return redis.error_reply('WRARGS refused: ' .. what)
end

-- Each operation's own numbers (their ARGV index after the call's: {min, max}), read by
-- `check_own` before anything runs: a stats history beyond the admission counts' ring (it
-- would read past them; `inf` looped for ever), a configure's capacity of 'inf' or '2.5', an
-- admit_next of more than a call may do at once are refused.
local OWN_LIMITS = {
  stats = {[5] = {0, 100000}},
  configure = {[5] = {0, U32_MAX}, [6] = {-1, U32_MAX}, [7] = {-1, 1}, [8] = {-1, 1},
    [9] = {0, 1}},
  admit_next = {[5] = {0, 100000}},
  ban = {[6] = {-STORED_MAX, STORED_MAX}},
  auto_apply = {[6] = {1, U32_MAX}, [7] = {-1, U32_MAX}},
}

-- Refuses the call's own arguments that are not in their bounds (OWN_LIMITS, sync's horizon;
-- sync's lists of offsets are sync.lua's to check, each list it writes before it writes;
-- auto_apply's gateway id and status, auto.lua); nil when they are.
-- After R is made.
function F.check_own(op)
  for i, limit in pairs(OWN_LIMITS[op] or {}) do
    if stored_integer(R.args[i], limit[1], limit[2]) == nil then
      return F.refuse(op .. ' argument ' .. i .. ' out of bounds')
    end
  end
  if op == 'auto_apply' then return F.check_auto_apply() end
  if op == 'stats' and tonumber(R.args[5]) * R.minute_buckets > R.ring then
    return F.refuse('stats history longer than the admission counts kept')
  end
  if op == 'sync' then
    -- The lists of offsets are checked where they are parsed, before anything is written
    -- (sync.lua, check_in_seen): a list a ring's epoch already holds is never parsed.
    local horizon = R.args[14]
    if horizon ~= '' and not string.find(horizon, '^%d+ %d+$')
        and not string.find(horizon, '^%d+ %d+ %d+$') then
      return F.refuse('sync horizon malformed')
    end
    -- The early check-ins: digits and spaces, whether read or not (a list is sent only within
    -- the window, so this is no cost outside it), so that a sync of one argument fewer and a
    -- schedule (an earlier build's) is refused, never read as one without a schedule.
    if string.find(R.args[15], '[^%d ]') then return F.refuse('sync early list malformed') end
  end
  return nil
end

-- One call's state, from its keys and arguments: R is made anew by every FCALL (the functions
-- are defined once, when the library is loaded), in ONE table constructor, so that its hash
-- part is sized once instead of growing field by field (the nil ones are set later in the
-- call: the constructor still sizes the table for them: 5 % of a heartbeat, 3 % of a poll
-- at 2M; bench: docs/benchmarks.md#each-shortcut-measured). `op` is the operation, `own` how
-- many arguments of its own it takes after the call's, the first of them its session (or
-- sync's list of sessions) when `has_session`. Returns an error reply for arguments that
-- cannot be read, else nil.
function F.setup(op, keys, args, own, has_session)
  local line, room = F.read_numbers(args[2], LINE_LIMITS), F.read_numbers(args[3], ROOM_LIMITS)
  if not line or not room or (args[4] ~= '0' and args[4] ~= '1')
    or #args < CALL_ARGS + own or #args > CALL_ARGS + own + 1 then
    return F.refuse('malformed waiting room arguments, or numbers out of bounds')
  end
  if has_session and op ~= 'sync' and #args[CALL_ARGS + 1] ~= ID_BYTES then
    return F.refuse('a session id is ' .. ID_BYTES .. ' bytes')
  end
  local now, refused = call_time_or_refusal(args[1])
  if not now then return refused end
  -- In the order the crate packs them (src/store/redis/calls.rs, `Number`: a unit test holds
  -- these names to it).
  local max_queue, queue_ttl, abandon = unpack(line)
  local capacity, rate, active, grant, promote, sweep, bucket, ring, minute, five =
    unpack(room)
  if minute > ring or five > ring then
    return F.refuse('more buckets counted than the ring holds')
  end
  R = {
    keys = keys, args = args, fast_numbers = args[2], schedule_arg = args[CALL_ARGS + own + 1],
    k_seq = keys[1], k_line = keys[2], k_active = keys[3], k_granted = keys[4],
    k_bucket = keys[5], k_admitted = keys[6], k_settings = keys[7], k_arrivals = keys[8],
    k_banned = keys[9], k_fast = keys[K_FAST],
    op = op, s = has_session and args[CALL_ARGS + 1] or '', now = now,
    default_capacity = capacity, default_rate = rate,
    -- The live settings, read by `load_settings` at the start of every run, and when the
    -- room was first seen.
    capacity = capacity, rate = rate, paused = false, open = true, born = 0,
    -- The settings version written back (load_settings: this one's, or a newer one's read).
    version = SETTINGS_VERSION,
    -- The room's first movement (nil: not yet).
    moved = nil,
    -- The capacity before its last change, and when that was (nil: never changed).
    cap_before = nil, cap_at = nil,
    -- When the current pause began, and the last pause that ended (nil: none).
    paused_at = nil, pause_start = nil, pause_end = nil,
    -- Housekeeping's next due time, the sweep's cursor, the end of every ban, the last arrival
    -- note's second (nil: not known, so look).
    due = nil, cursor = '-inf', bans = nil, noted = nil,
    active_ttl = active, grant_ttl = grant, queue_ttl = queue_ttl,
    max_queue = max_queue, max_promote = promote, max_sweep = sweep,
    -- The crate sends every argument (src/store/redis/protocol.rs), so no default is
    -- repeated here.
    bucket_ms = bucket, ring = ring, minute_buckets = minute, five_minute_buckets = five,
    abandon = math.max(abandon, queue_ttl),
    excused = args[4] == '1',
    -- The schedule (schedule.lua): nil for a room without one.
    opens_at = nil, closes_at = nil, keep_line = true, draw_score = nil, scheduled_call = false,
    -- Set by apply_schedule, below.
    before_opening = false, check_in_at = 0, after_closing = false, line_closed = false,
    -- The liveness rings, the Bloom size, the ticket key (release and ban).
    turn = nil, gone_ring = nil, rings = nil, bloom_bits = 0, bloom_bits_text = nil,
    bloom_bytes = 0, run_id = nil,
    k_ticket = nil,
    SETTINGS_FIELDS = nil,
    current_bucket = 0,
    -- The promotion budget, shared by both runs of a repaired call.
    promotions_left = 0,
    -- Whether this call released something: kept outside `main`, so that a second, repaired
    -- run still reports what the first one removed.
    released = 0,
    -- Sync's listed sessions without a place, and the epoch its early check-ins went into.
    unknown = nil, early_written = nil,
    -- Until when the slots are being rebuilt after a damaged `active` or `granted` (nil:
    -- not): see main.lua's Bad days.
    rebuild = nil,
  }
  local schedule = R.schedule_arg
  if schedule then
    local o, c, k, d = string.match(schedule, '^schedule:(%d+):(%d+):([01]):(%d+)$')
    o, c = stored_integer(o, 0, STORED_MAX), stored_integer(c, 0, STORED_MAX)
    d = stored_integer(d, 0, 4503599627370495)
    if not o or not c or not d then
      -- Never read as "no schedule": that would open a room that is not open yet.
      return F.refuse('malformed schedule argument')
    end
    R.opens_at, R.closes_at, R.keep_line = o, c, k == '1'
    if R.closes_at == 0 then R.closes_at = nil end
    R.draw_score = string.format('%.17g', d / 4503599627370496 - 1)
    -- This call came with the schedule (else it may follow the one the settings key kept).
    R.scheduled_call = true
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
    FROM_FIELDS.turn[turn.current % turn.len], FROM_FIELDS.abandon[gone.current % gone.len],
    'rebuild', 'whole'}
  R.current_bucket = math.floor(R.now / R.bucket_ms)
  R.promotions_left = R.max_promote
  return F.check_own(op)
end
