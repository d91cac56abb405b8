#!lua name=twr_room_v11
-- The library's name, as the line above gives it to Redis (which reads that line as it is, so
-- the name is written twice; a unit test holds the two equal, and to src/store/redis/calls.rs's
-- LIBRARY): every function registers as `<LIBRARY>_<op>` (register.lua).
local LIBRARY = 'twr_room_v11'
-- tower-waiting-room: the whole state machine of one room, atomically inside Redis/Valkey.
--
-- A Redis Functions library (Redis 7.0+, Valkey 7.2+), loaded with `FUNCTION LOAD REPLACE`,
-- one function per operation, each called as `FCALL <LIBRARY>_<op> <numkeys> KEYS... ARGV...`
-- (register.lua): the library's top level defines the functions once, at load; each call only
-- runs its registered function (with EVALSHA, Lua ran the whole top level, ~40 function
-- definitions, on every call: most of a short call's cost). The library's name carries its
-- version (LIBRARY, above), and so does each function's: a changed library is loaded under a new
-- name, or replaces the old one by REPLACE, never mixed with it, and a gateway of another
-- version never calls a function with arguments it does not read.
--
-- The library is this file and the others of src/store/redis/script/, one chunk assembled in
-- src/store/redis/protocol.rs (SCRIPT), each file on one concern: this one the keys and the
-- constants every other file shares (top-level locals of the one chunk).
--
-- The functions have no flags: not `no-writes` and not `allow-oom`, so the server checks memory
-- before it starts: with `maxmemory` exhausted the whole call is refused with OOM, never
-- half-run.
--
-- The semantics are exactly those of the embedded MemoryStore (src/store/memory/, laid out in the same files as this script); the
-- conformance suite runs against both. Waiting visitors are answered by
-- their gateway from a snapshot (`sync`, once a second per gateway), so the script keeps no
-- record per waiter but their place in `line`, and a waiter's liveness lives in shared bitmaps.
--
-- A session is the member of every zset as its id's first MEMBER_BYTES raw bytes (14 of 16), in
-- a room of settings version 6 or newer; in a room of version 5 (made by an earlier library)
-- as its whole 16 bytes, kept so while that room lives, so that gateways of both share it
-- (see Settings: members). Any string works: the script never looks inside but for the
-- liveness bits, made from the id's first 8 bytes.
--
-- KEYS (all share the room's hash tag, so a Redis Cluster keeps them in one slot):
--   1 seq      string  last sequence number handed out (INCR)
--   2 line     zset    waiters, score = sequence number (FIFO; ZRANK is O(log n)), or a
--                      registrant's draw score in [-1, 0) (see Schedule)
--   3 active   zset    claimed slots, score = expiry in ms
--   4 granted  zset    granted but unclaimed slots, score = expiry in ms
--   5 bucket   hash    admission-rate budget: milli (thousandths of an admission), last (ms)
--   6 admitted hash    admission counts, a ring of time buckets: slot i holds t<i> (the bucket's
--                      number, now // bucket_ms), n<i> (its admissions) and k<i> (waiters
--                      skipped as silent at their turn); at most 3 * ring fields
--   7 settings hash    the live settings: v (SETTINGS_VERSION; vmin, from a newer version
--                      this one reads: settings.lua), capacity, rate (0 = none),
--                      paused (0|1), open (0|1); written from room_numbers when missing; and born
--                      (ms), when the room was first seen, for the wait estimate's window;
--                      cap_before and cap_at, the capacity before its last change and when;
--                      paused_at, pause_start and pause_end, the current and the last pause;
--                      early, the admissions since born until the first movement, and moved
--                      (ms), that movement: the first admission beyond the opening's capacity;
--                      opens_at, closes_at (0 = none) and keep_line (0|1), the last schedule a
--                      call came with (schedule.lua); and the bookkeeping that keeps the
--                      hot path short, all read by the one HMGET every call makes:
--                      due (ms), the earliest expiry among active and granted (see
--                      Housekeeping); cursor, the score the last sweep stopped after ('-inf':
--                      at the head); bans (ms), no ban lasts beyond it (no ZSCORE of banned
--                      before then; missing: look); noted, the second of the last arrival note;
--                      turn0 .. turn5 and abandon0 .. abandon3, the epoch each liveness bitmap
--                      holds, and turn0from .. abandon3from, the value of seq when it began
--                      (see Liveness: joined since), the turn ring's lowered to a sync's turn
--                      horizon, and turn0first .. turn5first, the turn ring's as it began;
--                      rebuild (ms), the end of a rebuild of the slots after a damaged active
--                      or granted (main.lua, Bad days); far, a long line's far checkpoints
--                      as a sync read them, for the syncs just after it (checkpoints.lua);
--                      whole ('1'), in a room of version 5 only: its members were found whole
--                      under this key (see Settings: members)
--   8 arrivals zset    the first arrival of each second: member = its time in ms, score = its
--                      sequence number; entries before the head's are trimmed (oldest wait)
--   9 banned   zset    banned sessions, score = the end of the ban in ms
--  10 .. 15 turn0 .. turn5        string  the turn ring: TURN_EPOCHS + 2 liveness bitmaps
--  16 .. 19 abandon0 .. abandon3  string  the abandon ring: ABANDON_EPOCHS + 2 liveness bitmaps
--  20 fast     string  the fast path's window (see The fast path): '<since>:<from>:<till>:<for>',
--                      with a TTL that ends it before till; absent: closed
--  21 ticket   string  release and ban only: the session's single-use ticket record
--                      (tickets.lua's record), ended with the slot in free_session
--  21 auto     hash    auto_apply only: the capacity controller's record (auto.lua)

-- The call's state and the functions live in two tables: R, made anew by every call (`setup`),
-- and F, defined once at load. (When this was an EVALSHA script, each call defined them all
-- anew: 17 us of an enter's 41.)
local R, F = nil, {}
local SETTINGS_VERSION = 6
-- The last settings version whose rooms keep a session as its id's whole 16 bytes (see
-- Settings: members); this library reads such a room as it is, and keeps it so.
local WIDE_VERSION = 5
-- A session's member in a room of SETTINGS_VERSION: its id's first 14 bytes. Redis keeps a
-- member up to 14 bytes long in 16 bytes of the allocator (its string's header, the bytes and
-- a NUL), a 16-byte id in 32: 16 bytes a waiter of the line's 126 (measured: 109.7 against
-- 125.7 bytes a member of a sorted set of two million). 112 random bits: two of ten million
-- waiters' ids share them with a chance of about 1 in 10^19.
local MEMBER_BYTES = 14
-- A session id's length: every call's session is refused (WRARGS) unless of this length, so no
-- argument makes a member of another length than the room keeps (see Settings: members).
local ID_BYTES = 16
-- How far under its allocator's size class each liveness bitmap's size is (see Liveness,
-- bloom_bits): the bitmap's string is M / 8 + 1 bytes (the sentinel is bit M), and Redis
-- allocates it with up to 9 bytes of header and a NUL. At M = C exactly that is 11 bytes over
-- C / 8, and the allocator's next size class is larger (5 MiB for each 4 MiB bitmap of a line of
-- two million, measured); 128 bits under it, it fits C / 8 with 5 bytes to spare.
local BLOOM_SLACK = 128
-- The end of the fast path's window's `for` (see F.window_key): the settings version whose
-- members the room keeps, so that a call answered from the window looks its session up as main
-- did (a window of WIDE_VERSION is one an earlier library's main may have opened too: the same
-- data).
local WINDOW_VERSION, WIDE_WINDOW_VERSION = '#' .. SETTINGS_VERSION, '#' .. WIDE_VERSION
-- The operations' bodies by name, read by main after its common steps (main.lua), each written
-- under its function's header (visitor.lua, sync.lua, operator.lua).
local OPERATIONS = {}
-- The reply codes, the first element of every reply of the room's operations, by name: the
-- numbers are the wire's, and src/store/redis/protocol.rs (`reply`) names each the same, upper
-- case (a unit test holds the two tables equal). Each reply's fields are in its function's
-- header.
local REPLY = {
  unknown = 0,
  admitted = 1,
  waiting = 2,
  full = 3,
  released = 4,
  stats = 5,
  closed = 6,
  banned = 7,
  settings = 8,
  admitted_next = 9,
  banned_now = 10,
  scheduled = 11,
  snapshot = 12,
  auto_applied = 13,
  auto_not_deciding = 14,
  auto_off = 15,
  auto_changed = 16,
  placed = 17,
  -- No code: a waiting reply's place for a registrant (a draw score, not a sequence number).
  drawn = -1,
}
-- src/store/snapshot.rs: TURN_EPOCHS, ABANDON_EPOCHS, EXACT_RANKS, CHECKPOINT_GAP_DIVISOR.
local TURN_EPOCHS, ABANDON_EPOCHS = 4, 2
local EXACT_RANKS, CHECKPOINT_GAP = 100, 100
-- src/store/redis/protocol.rs: EARLY_WINDOW. A sync's early check-ins go into the abandon
-- ring's next epoch in the last 1 / EARLY_WINDOW of its current one (liveness.lua).
local EARLY_WINDOW = 2

-- Constant across calls, so made once here at load: the chunk size, the "no expiry" due time,
-- each ring's settings field names.
-- Redis refuses more arguments in one command than it is wise to send: BITFIELD and ZMSCORE
-- take at most this many sessions at a time (two bits each).
local CHUNK = 500
local NO_DUE = 9007199254740992
local RING_FIELDS = {turn = {}, abandon = {}}
for i = 0, TURN_EPOCHS + 1 do RING_FIELDS.turn[i] = 'turn' .. i end
for i = 0, ABANDON_EPOCHS + 1 do RING_FIELDS.abandon[i] = 'abandon' .. i end
-- Each bitmap's epoch's first sequence number field (see Liveness: joined since).
local FROM_FIELDS = {turn = {}, abandon = {}}
for i = 0, TURN_EPOCHS + 1 do FROM_FIELDS.turn[i] = 'turn' .. i .. 'from' end
for i = 0, ABANDON_EPOCHS + 1 do FROM_FIELDS.abandon[i] = 'abandon' .. i .. 'from' end
-- The turn ring's epochs' first sequence numbers as made, before a turn horizon lowered them
-- (see Liveness: the turn horizon): for the pace's silent estimate only.
local FIRST_FIELDS = {}
for i = 0, TURN_EPOCHS + 1 do FIRST_FIELDS[i] = 'turn' .. i .. 'first' end
-- The settings fields every call reads (one HMGET), in order, then the bitmaps' epoch fields
-- of now's epochs (at RING_FIELD_AT and after), and now's epochs' first sequence numbers (at
-- FROM_FIELD_AT); the rest (the pace's history, the sweep's
-- cursor, the other bitmaps' epochs) only when a call needs them (`load_more`, `load_ring`).
local RING_FIELD_AT = 14
local FROM_FIELD_AT = 16
-- And after them `rebuild` (18) and `whole` (19).
local WHOLE_FIELD_AT = 19
-- The rings as the fast path sees them: the first key, the keys, the epochs per TTL, and
-- whether the TTL is abandon_after (else queue_ttl; each at least queue_ttl), as F.make_ring.
local FAST_RINGS = {
  {name = 'turn', first = 10, len = TURN_EPOCHS + 2, epochs = TURN_EPOCHS, abandon = false},
  {name = 'abandon', first = 10 + TURN_EPOCHS + 2, len = ABANDON_EPOCHS + 2,
    epochs = ABANDON_EPOCHS, abandon = true},
}
-- The window's key (KEYS[20]), the ticket's (KEYS[21], release and ban) and the controller's
-- record (KEYS[21], auto_apply).
local K_FAST, K_TICKET, K_AUTO = 20, 21, 21
-- line_numbers as sent (call.lua), for the fast path, which reads it without F.read_numbers.
local FAST_NUMBERS = '^(%d+):(%d+):(%d+)$'
-- The window's value: since, from, till, what it holds for (whose first number is the line's
-- bound). What may follow a NUL is not read: `twr_room_v7`, which shares the window, writes a
-- small room's slot holders there.
local WINDOW = '^(%d+):(%d+):(%d+):((%d+):[^%z]*)'
