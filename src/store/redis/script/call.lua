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
-- Replies start with their code (src/store/redis/protocol.rs, `reply`); besides each
-- operation's own, any may answer {11, opens_at_ms, 0} (scheduled: registered in the pre-queue,
-- or already, not open yet), {6, 0, 0} (closed) or an error reply `WRSETTINGS ...` when the
-- settings key holds another version (settings.lua).

-- How many arguments every function takes first (above).
local CALL_ARGS = 4

-- One call's state, from its keys and arguments: R is made anew by every FCALL (the functions
-- are defined once, when the library is loaded), in ONE table constructor, so that its hash
-- part is sized once instead of growing field by field (the nil ones are set later in the
-- call: the constructor still sizes the table for them: 5 % of a heartbeat, 3 % of a poll
-- at 2M; bench: docs/benchmarks.md#each-shortcut-measured). `op` is the operation, `own` how
-- many arguments of its own it takes after the call's, the first of them its session (or
-- sync's list of sessions) when `has_session`. Returns an error reply for arguments that
-- cannot be read, else nil.
function F.setup(op, keys, args, own, has_session)
  local max_queue, queue_ttl, abandon = string.match(args[2] or '', FAST_NUMBERS)
  local capacity, rate, active, grant, promote, sweep, bucket, ring, minute, five =
    string.match(args[3] or '', MAIN_NUMBERS)
  if not max_queue or not capacity or (args[4] ~= '0' and args[4] ~= '1')
    or #args < CALL_ARGS + own or #args > CALL_ARGS + own + 1 then
    return redis.error_reply('ERR malformed waiting room arguments')
  end
  capacity, rate, queue_ttl = tonumber(capacity), tonumber(rate), tonumber(queue_ttl)
  R = {
    keys = keys, args = args, fast_numbers = args[2], schedule_arg = args[CALL_ARGS + own + 1],
    k_seq = keys[1], k_line = keys[2], k_active = keys[3], k_granted = keys[4],
    k_bucket = keys[5], k_admitted = keys[6], k_settings = keys[7], k_arrivals = keys[8],
    k_banned = keys[9], k_fast = keys[K_FAST],
    op = op, s = has_session and args[CALL_ARGS + 1] or '', now = tonumber(args[1]),
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
    active_ttl = tonumber(active), grant_ttl = tonumber(grant), queue_ttl = queue_ttl,
    max_queue = tonumber(max_queue), max_promote = tonumber(promote),
    max_sweep = tonumber(sweep),
    -- The crate sends every argument (src/store/redis/protocol.rs), so no default is
    -- repeated here.
    bucket_ms = tonumber(bucket), ring = tonumber(ring),
    minute_buckets = tonumber(minute), five_minute_buckets = tonumber(five),
    abandon = math.max(tonumber(abandon), queue_ttl),
    excused = args[4] == '1',
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
  local schedule = R.schedule_arg
  if schedule then
    local o, c, k, d = string.match(schedule, '^schedule:(%d+):(%d+):([01]):(%d+)$')
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
