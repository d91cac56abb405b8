#!lua name=twr_room_v7
-- tower-waiting-room: the whole state machine of one room, atomically inside Redis/Valkey.
--
-- A Redis Functions library (Redis 7.0+, Valkey 7.2+), loaded with `FUNCTION LOAD REPLACE` and
-- called as `FCALL twr_room_v7 <numkeys> KEYS... ARGV...`: the library's top level defines the
-- functions once, at load; each call only runs the registered function (with EVALSHA, Lua ran
-- the whole top level, ~40 function definitions, on every call: most of a short call's cost).
-- The library's name carries its version (`twr_room_v7`): a changed library is loaded under a
-- new name, or replaces the old one by REPLACE, never mixed with it.
--
-- The function has no flags: not `no-writes` and not `allow-oom`, so the server checks memory
-- before it starts: with `maxmemory` exhausted the whole call is refused with OOM, never
-- half-run.
--
-- The semantics are exactly those of the embedded MemoryStore (src/store/memory.rs); the
-- conformance suite runs against both. Store v2 (issue 14): waiting visitors are answered by
-- their gateway from a snapshot (`sync`, once a second per gateway), so the script keeps no
-- record per waiter but their place in `line`, and a waiter's liveness lives in shared bitmaps.
--
-- A session is the member of every zset as its id's 16 raw bytes (any string works: the script
-- never looks inside but for the liveness bits).
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
--   7 settings hash    the live settings: v (SETTINGS_VERSION), capacity, rate (0 = none),
--                      paused (0|1), open (0|1); written from ARGV 4-5 when missing; and born
--                      (ms), when the room was first seen, for the wait estimate's window;
--                      cap_before and cap_at, the capacity before its last change and when;
--                      paused_at, pause_start and pause_end, the current and the last pause;
--                      early, the admissions since born until the first movement, and moved
--                      (ms), that movement: the first admission beyond the opening's capacity;
--                      opens_at, closes_at (0 = none) and keep_line (0|1), the last schedule a
--                      call came with (see Schedule below); and the bookkeeping that keeps the
--                      hot path short, all read by the one HMGET every call makes:
--                      due (ms), the earliest expiry among active and granted (see
--                      Housekeeping); cursor, the score the last sweep stopped after ('-inf':
--                      at the head); bans (ms), no ban lasts beyond it (no ZSCORE of banned
--                      before then; missing: look); noted, the second of the last arrival note;
--                      turn0 .. turn5 and abandon0 .. abandon3, the epoch each liveness bitmap
--                      holds, and turn0from .. abandon3from, the value of seq when it began
--                      (see Liveness: joined since), the turn ring's lowered to a sync's turn
--                      horizon, and turn0first .. turn5first, the turn ring's as it began
--   8 arrivals zset    the first arrival of each second: member = its time in ms, score = its
--                      sequence number; entries before the head's are trimmed (oldest wait)
--   9 banned   zset    banned sessions, score = the end of the ban in ms
--  10 .. 15 turn0 .. turn5        string  the turn ring: TURN_EPOCHS + 2 liveness bitmaps
--  16 .. 19 abandon0 .. abandon3  string  the abandon ring: ABANDON_EPOCHS + 2 liveness bitmaps
--  20 fast     string  the fast path's window (see The fast path): '<since>:<from>:<till>:<for>',
--                      then, in a small room, a NUL and the slot holders' ids; with a TTL that
--                      ends it before till; absent: closed
--  21 ticket   string  release and ban only: the session's single-use ticket record
--                      (tickets.lua's R.keys[1]), ended with the slot in free_session
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
--
-- Settings: the operator's live values, read by every call in the same step as the admission
-- they govern. Paused: no promotion, no direct admission. Closed: {6} for everyone without a
-- slot (a waiter's check-in is still recorded: they keep their place for a reopening), no
-- promotion, claimed slots not extended (a granted one is still claimed). A settings key of
-- another version is refused with an error (a newer crate's fields may change who is admitted;
-- guessing is worse than stopping); a damaged field is rewritten with its default. Version 2
-- keeps members as 16 raw bytes (version 1 had hex and a `seen` zset): a room of version 1 is
-- refused; upgrade between sales, or use a new key prefix. Version 3 (`twr_room_v3`): a
-- newcomer's join sets no liveness bits (see Liveness: joined since), which version 2's
-- library would read as silence. Version 4 (libraries `twr_room_v4` and `twr_room_v5`,
-- whose sync takes the check-ins a gateway already made apart: the data are the same): the fast path's
-- window lives in its own key (KEYS[20]) instead of settings fields, which version 3's main
-- would neither move nor close. Version 5 (libraries `twr_room_v6` and this one, `twr_room_v7`,
-- whose sync takes a turn horizon: the data are the same, see Liveness): each liveness bitmap
-- is BLOOM_SLACK bits under the power of two it was (see Liveness), so every session's bits sit
-- at other offsets, which version 4's library would read as silence. So a room of version 2, 3
-- or 4 is upgraded in place by its first call here (version 3's window fields deleted, and
-- every epoch a ring field names marked lost: everyone counts as seen in the older bitmaps
-- until each ring comes round, and nobody is skipped or swept for them), and from then on the
-- older libraries (loaded under their own names) refuse it: in a rolling deploy the gateways
-- not yet upgraded answer by their fail policy, never sweeping anyone and never answering from
-- a window they do not keep.
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
-- store outage before the opening: scheduled), never read as no schedule, and before any write.
-- The schedule is kept in the settings key, so a call without one (a gateway built without it,
-- in a rolling deploy) still admits nobody before a kept future opening; its newcomers have no
-- draw and are registered by sequence number, behind the drawn registrants. A pre-queue opened
-- while waiters with sequence numbers are in line (an earlier opening's line) registers
-- newcomers by sequence number too: a draw would put them ahead of people already waiting.
--
-- Housekeeping, only when due: `due` is the earliest expiry among active and granted as of the
-- last housekeeping, lowered whenever a slot or grant with an earlier expiry is added. A call
-- with now >= due expires both (ZREMRANGEBYSCORE) and reads the new earliest (ZRANGE 0 0 of
-- each); any other call looks at nothing. A slot thus frees exactly when it expires (at the
-- first call from then), and a lost `due` (settings lost) just means housekeeping now.
--
-- Liveness (src/store/snapshot.rs, LivenessRule): a check-in (a join, an enter or poll of a
-- waiter, or the session in a sync's list while it has a place) marks the epoch of check_in_at
-- (now, or opens_at before a scheduled opening) in two rings of bitmaps: the turn ring (epochs
-- of queue_ttl / TURN_EPOCHS) and the abandon ring (epochs of abandon_after / ABANDON_EPOCHS).
-- Joined since: a newcomer's join is a check-in too, but it sets no bits. Each epoch's first
-- sequence number (`<ring><i>from`: seq as it was when the epoch's bitmap was made, before
-- anyone joined in it) tells who joined in or after it: a waiter whose number is above the
-- first number of an epoch that counts is alive by the rule, as if their bits were set in it.
-- Main makes both current epochs (`open_epochs`) before a newcomer's number is taken, so the
-- number is above both first numbers; when it is not (seq went back: lost or reset), the join
-- sets bits as any check-in does. A registrant's score (< 0) is never above a first number: a
-- registrant's check-ins are bits. A lost first number (the settings key lost) is no harm: the
-- epoch's bitmap is then marked lost (`mark_orphan_bitmaps_lost`, `ring_key_for`), and
-- everyone counts as seen in it. A
-- lost or reset seq recorded as a first number only makes more waiters look joined since:
-- alive longer, as for a Bloom false positive.
-- Ring key i holds the epoch e with e mod ring length == i (which one: the settings field); a
-- key found holding an older epoch is DELeted before the first write of the new one, and gets a
-- PEXPIRE to the end of its ring (ring length * width after its epoch began), so a dead room's
-- bitmaps vanish. Each key is a Bloom filter of M bits, M = P - BLOOM_SLACK, P the power of two
-- >= 16 * max_queue_len in [2^16, 2^32] (under P so that the string, with the sentinel bit M,
-- Redis's header and NUL, fits the allocator's size class P / 8 bytes); a session sets 2 bits,
-- the big-endian u32 of its id's bytes 1-4 and 5-8, each mod M (one BITFIELD per key and up to
-- 500 sessions). A waiter is alive by a rule if both bits are set in a key whose epoch still
-- counts (epoch + keep >= now's epoch).
-- The turn horizon: a sync may name one (ARGV 26), a sequence number behind which its gateway
-- sent no turn check-ins (their turn cannot come while one would count; the gateway's reason,
-- src/store/snapshot.rs). The turn ring's current epoch's first number is then lowered to it
-- (`lower_first_number`): everyone behind it counts as joined since in that epoch, seen or
-- not, so a waiter left out is never skipped while the epoch counts. The epoch's first number
-- as it was made is kept apart (`<ring><i>first`, the turn ring's only) for the pace's silent
-- estimate (silent_among). Libraries of version 5 before this one read a lowered first number
-- the same way (it only makes more waiters look joined since), so gateways of both can share a
-- room in a rolling deploy.
-- A false positive (another session's bits) only makes a silent waiter look alive: granted at
-- their turn, then the grant expires unclaimed, or kept in line until a later sweep finds them
-- silent. It never admits anyone out of order, never over capacity. A key whose epoch field is
-- newer than the one written (a clock that went back) is written into: alive longer, as above.
-- Lost bitmaps: every write also sets bit M (the sentinel) and reads it back in the same
-- BITFIELD; a key its field says holds this epoch but whose sentinel was clear was lost since
-- (evicted: the ring keys are the room's only keys with a TTL; deleted; repaired) and the
-- write is making it again without its check-ins: the field becomes -epoch ("lost"), and while
-- that epoch counts everyone is alive by the rule, as for a key that counts and is gone.
-- Bitmaps of another size: a key that counts but is not exactly M / 8 + 1 bytes long was made
-- with another M (by an older version, whose epochs the upgrade marks lost unless the settings
-- key is lost too; or by a gateway with another max_queue_len), so its bits sit at other
-- offsets: a liveness read (alive_many, one STRLEN per key) then counts everyone as alive, as
-- for a lost bitmap. A shorter one is also caught when written (its sentinel reads 0).
--   - at their turn (promotion, admit_next): a waiter not alive by the turn rule is skipped
--     (unless silence is excused, ARGV 17): seen within queue_ttl, never skipped; silent for
--     longer than 5/4 queue_ttl, skipped;
--   - the sweep, in sync only: from the cursor on, at most max_sweep waiters are looked at per
--     call (a line of at most max_sweep is looked at whole), and those not alive by the abandon
--     rule are dropped; the cursor wraps to the head at the end of the line. None while silence
--     is excused.
--
-- Sync: checks in the listed sessions that have a place (ZMSCORE, 500 at a time, with the
-- Bloom offsets the gateway sent; others are ignored, nothing is created), does the housekeeping, sweeps, promotes, and answers the
-- snapshot: the head's score, and for each rank of checkpoint_ranks(waiting) (every rank below
-- EXACT_RANKS, then each the last plus 1 / CHECKPOINT_GAP of it, and the last) that waiter's
-- score, by ZRANGE (one for the exact ranks, one per rank above: about 1 100 for two million).
-- The pace's silent waiters are estimated from the checkpoint waiters it reads anyway: silent
-- among them / their number * waiting, rounded (exact for a line of at most EXACT_RANKS).
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
--   - a lost liveness bitmap (its settings field says it holds an epoch that counts, and it is
--     gone): everyone counts as seen in that epoch, so nobody is skipped or swept for it; a lost
--     settings key leaves bitmaps whose epochs no field names, and the first numbers that stood
--     for bits are lost with it (newcomers, waiters behind a turn horizon): the first call that
--     finds the key gone, whatever it is, marks each of them lost as the latest epoch its index
--     can hold (`mark_orphan_bitmaps_lost`), so everyone counts as seen in it while that epoch
--     counts, and a write in that epoch keeps it: never deleted, since it may hold the current
--     epoch's check-ins (a field alone lost is found when written, `ring_key_for`);
--   - a slot holder who also has a place in line: the slot wins, the place is dropped when it
--     reaches the head (never a second slot);
--   - a budget with a missing or non-numeric field: counts as full (at most one second's worth
--     of admissions above the rate, once);
--   - a non-numeric admission count or tag: counts as zero, and is overwritten;
--   - a lost `due`, `cursor`, `bans` or `noted`: housekeeping runs, the sweep starts at the
--     head, bans are looked up, the arrival is noted (each the safe way).
--
-- The fast path: the common enter (a newcomer joining a long line while the room is full, or
-- a waiter's enter) skips `setup` and main, which read and build far more than it needs (a
-- measured two thirds of main's cost is Lua: the call's state, the settings' 17 fields, the
-- rings). Main, at the end of every run that answered, keeps a window in the `fast` key
-- (KEYS[20]): '<since>:<from>:<till>:<for>', with a TTL that ends the key at till - 1 ms
-- (Redis expires a key by its own clock, the one TIME reads, and judges expiry at a script's
-- start), or deletes it. `for` is ARGV 4 as main's call sent it, then '|' and the schedule
-- without the draw for a room with one, then '#' and the settings version (`F.window_key`): a
-- call that sends other liveness TTLs, another line bound or another schedule, or that finds
-- a window of another version, is main's. The window is the time in which everything
-- main would look at but the slots and the caller's own place is settled (`F.window`): the
-- room open, not paused, not before its opening or after its closing, no ban in force,
-- housekeeping not due, the arrival of this second noted, and both liveness rings writing the
-- current epoch into a key that holds it (or held it and was lost). It ends at the first of:
-- the end of the second, the due time, either epoch's end, the closing. Anything that changes
-- one of these runs main (configure, ban, a sync's sweep, an expiry), which closes or moves the
-- window in the same step; a run of main that raises twice closes it. The window holds only
-- while the room is full by its slots (main would promote nobody): only main adds or frees a
-- slot, and every run of it moves or closes the window, and an expiry ends it (`due`). A lost
-- slots key (a bad day) is thus seen by main at the end of the window, at most a second later,
-- a newcomer meanwhile joining the line rather than being let in; a lost `fast` key is a closed
-- window. `since` is the larger of the two current epochs' first sequence numbers (see
-- Liveness: joined since); `from`, when main opened it.
-- In the window, an enter reads the window (GET) and answers here only when main would answer
-- the same from the same reads: the caller holding no slot (else main claims or extends it),
-- told by ZSCORE of active and granted, or, in a room with at most HOLDERS_IN_WINDOW slots
-- taken, by the holders' ids that main wrote into the window (the holders change only by main,
-- which writes the window again whenever it runs).
-- An `enter` looks for the caller's place (ZSCORE line); a `join` (the gateway knows of no
-- place: see OPS) does not, first. A newcomer takes the next number (INCR) and joins with it
-- (ZADD NX) when nobody in line has that number or a later one (one ZCOUNT: main's tail check;
-- otherwise seq went back, and main places them after the last waiter), and is alive by the
-- join when the number is above `since`, as main decides it: for a join GET, ZSCORE active and
-- granted, ZCARD line, INCR, ZCOUNT, ZADD (7 redis.calls, 5 in a small room; no TIME: the
-- key's expiry is the window's end, and nothing a newcomer's join writes depends on the time).
-- In a full line (ZCARD at the bound) nobody takes a number: a newcomer gets {3}, a waiter is
-- found by ZSCORE. A join by a waiter (a reply lost, another gateway) adds nothing by its ZADD
-- NX: the number is given back (DECR, or DEL when it was the first: seq is then as it was, as
-- main leaves it), and their place looked up. A waiter is checked in (TIME, the BITFIELD of each
-- ring's current key, whose numbers go as strings: Lua's own number to string conversion,
-- %.17g, costs more than the commands) and told their rank (ZRANK). A server clock that went
-- back before the window's `from` is main's for a
-- waiter (their bits go by the time); a newcomer's join does not read the clock. With an
-- injected clock (ARGV 3 not 0: tests) the window is judged by that clock, from <= now < till,
-- not by the key's expiry. A lost bitmap is seen by its sentinel as main sees it, marked, and
-- closes the window. Everything else (a claim, a room with free slots, a call before the
-- opening, a damaged key) is main's, as before; an unknown operation is refused
-- before either runs. tests/redis_fast_path.rs holds the two to the same answers and writes.
-- An older library (which does not keep this window) never runs on a room this one keeps one
-- for: it refuses the room's settings version (see Settings).

-- The call's state and the functions live in two tables: R, made anew by every call (`setup`),
-- and F, defined once at load. (When this was an EVALSHA script, each call defined them all
-- anew: 17 us of an enter's 41.)
local R, F = nil, {}
local SETTINGS_VERSION = 5
-- How far under its power of two each liveness bitmap's size is (see Liveness): the bitmap's
-- string is M / 8 + 1 bytes (the sentinel is bit M), and Redis allocates it with up to 9 bytes
-- of header and a NUL. At M = P exactly that is 11 bytes over P / 8, and the allocator's next
-- size class is a quarter larger (5 MiB for each 4 MiB bitmap of a line of two million,
-- measured); 128 bits under it, it fits P / 8 with 5 bytes to spare.
local BLOOM_SLACK = 128
-- The end of the fast path's window's `for` (see F.window_key).
local WINDOW_VERSION = '#' .. SETTINGS_VERSION
-- The operations (ARGV 1): anything else is refused before any read or write. `join` is an
-- enter by a visitor whose cookie has no place (the gateway knows of none): the fast path takes
-- their number first; main answers it as `enter`.
local OPS = {enter = true, join = true, poll = true, heartbeat = true, release = true, stats = true,
  configure = true, admit_next = true, ban = true, sync = true}
-- src/store/snapshot.rs: TURN_EPOCHS, ABANDON_EPOCHS, EXACT_RANKS, CHECKPOINT_GAP_DIVISOR.
local TURN_EPOCHS, ABANDON_EPOCHS = 4, 2
local EXACT_RANKS, CHECKPOINT_GAP = 100, 100

-- Before the opening: nobody admitted; check-ins count as of the opening. After the closing:
-- newcomers refused; `line_closed` when the line is not kept either.
function F.apply_schedule()
  R.before_opening = R.opens_at ~= nil and R.now < R.opens_at
  R.check_in_at = R.before_opening and R.opens_at or R.now
  R.after_closing = R.closes_at ~= nil and R.now >= R.closes_at
  R.line_closed = R.after_closing and not R.keep_line
end


-- The liveness rings (see Liveness in the header): their keys, epoch widths, the epochs that
-- still count, and which epoch each key holds (`held`, from the settings; nil: not known).
function F.make_ring(name, first, epochs, ttl)
  local r = {name = name, first = first, len = epochs + 2, keep = epochs,
    width = math.max(1, math.floor(ttl / epochs)), held = {}, from = {}, first_made = {},
    known = {}, all = false, since = nil, first_min = nil}
  r.current = math.floor(R.now / r.width)
  return r
end

-- Constant across calls, so made once here at load: the chunk size, the "no expiry" due time,
-- each ring's settings field names, and the Bloom size of each max_queue_len seen (memo).
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
local BLOOM_BITS = {}
-- The rings as the fast path sees them: the first key, the keys, the epochs per TTL, and
-- whether the TTL is abandon_after (else queue_ttl; each at least queue_ttl), as F.make_ring.
local FAST_RINGS = {
  {name = 'turn', first = 10, len = TURN_EPOCHS + 2, epochs = TURN_EPOCHS, abandon = false},
  {name = 'abandon', first = 10 + TURN_EPOCHS + 2, len = ABANDON_EPOCHS + 2,
    epochs = ABANDON_EPOCHS, abandon = true},
}
-- The window's key (KEYS[20]) and the ticket's (KEYS[21], release and ban).
local K_FAST, K_TICKET = 20, 21
-- ARGV 4 and 5 as sent (see the header).
local FAST_NUMBERS = '^(%d+):(%d+):(%d+)$'
local MAIN_NUMBERS = '^(%d+):(%d+):(%d+):(%d+):(%d+):(%d+):(%d+):(%d+):(%d+):(%d+)$'
-- The window's value: since, from, till, what it holds for (whose first number is the line's
-- bound), then nothing, or a NUL and the slot holders' ids (16 bytes each) of a small room.
local WINDOW = '^(%d+):(%d+):(%d+):((%d+):[^%z]*)(.*)$'
-- A room with at most this many slots taken has its holders in the window: a newcomer is then
-- told from a holder without the two slot lookups.
local HOLDERS_IN_WINDOW = 16

-- The Bloom filter's size in bits for a line of at most `max_queue`: BLOOM_SLACK under the
-- power of two >= 16 * max_queue, in [2^16, 2^32] (memoized: a room's bound rarely changes).
function F.bloom_bits(max_queue)
  local bits = BLOOM_BITS[max_queue]
  if not bits then
    bits = 65536
    while bits < 16 * max_queue and bits < 4294967296 do bits = bits * 2 end
    bits = bits - BLOOM_SLACK
    BLOOM_BITS[max_queue] = bits
  end
  return bits
end

-- Every epoch the rings' fields name, marked lost (-e), for a room of an older version (see
-- Settings): its bitmaps are of another size, so their bits sit at other offsets than this
-- version reads. Everyone then counts as seen in those epochs (nobody skipped or swept for
-- them), and each bitmap is made again at this version's size when its ring comes round.
-- `v` is the one HMGET's reply, whose current epochs' fields are brought up to it.
function F.mark_rings_lost(v)
  for n, rg in ipairs(R.rings) do
    local fields, lost = {}, {}
    for i = 0, rg.len - 1 do fields[i + 1] = RING_FIELDS[rg.name][i] end
    local held = redis.call('HMGET', R.k_settings, unpack(fields))
    for i = 1, rg.len do
      local e = tonumber(held[i])
      if e and e > 0 then
        lost[#lost + 1], lost[#lost + 2] = fields[i], string.format('%d', -e)
      end
    end
    if #lost > 0 then redis.call('HSET', R.k_settings, unpack(lost)) end
    local current = tonumber(v[RING_FIELD_AT + n - 1])
    if current and current > 0 then v[RING_FIELD_AT + n - 1] = string.format('%d', -current) end
  end
end

-- The arguments as sent (see the header) in the numbering main reads: op, session, now, the
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
    -- The schedule (see the header): nil for a room without one.
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

-- Reads the live settings, writing the defaults for a missing key or field. Returns an error
-- reply for a key of another version, else nil.
function F.load_settings()
  local v = redis.call('HMGET', R.k_settings, unpack(R.SETTINGS_FIELDS))
  local ver = tonumber(v[1])
  if ver == 2 or ver == 3 or ver == 4 then
    -- Versions 2 to 4 (see Settings): upgraded in place. Their fields are all read the same;
    -- version 2's epochs have no first sequence number, so until each is made again its joins
    -- set bits; version 3's window fields go (the window is the `fast` key's now, closed); and
    -- all their bitmaps are of the older size: their epochs are marked lost.
    redis.call('HDEL', R.k_settings, 'fast_from', 'fast_until', 'fast_for', 'fast_seq')
    F.mark_rings_lost(v)
    redis.call('HSET', R.k_settings, 'v', SETTINGS_VERSION)
    ver = SETTINGS_VERSION
  end
  if v[1] and ver ~= SETTINGS_VERSION then
    return redis.error_reply('WRSETTINGS room settings of version ' .. tostring(v[1]) ..
      ', this crate reads version ' .. SETTINGS_VERSION)
  end
  local c, r = tonumber(v[2]), tonumber(v[3])
  local p, o = tonumber(v[4]), tonumber(v[5])
  if ver == nil or c == nil or c < 1 or r == nil or r < 0 or (p ~= 0 and p ~= 1)
      or (o ~= 0 and o ~= 1) then
    -- A new room, a lost key, or a damaged field: the defaults where nothing valid is held.
    if c == nil or c < 1 then c = R.default_capacity end
    if r == nil or r < 0 then r = R.default_rate end
    if p ~= 0 and p ~= 1 then p = 0 end
    if o ~= 0 and o ~= 1 then o = 1 end
    redis.call('HSET', R.k_settings, 'v', SETTINGS_VERSION, 'capacity', c, 'rate', r,
      'paused', p, 'open', o)
  end
  R.capacity, R.rate, R.paused, R.open = c, r, p == 1, o == 1
  R.born, R.moved = tonumber(v[6]), tonumber(v[7])
  R.due, R.bans, R.noted = tonumber(v[11]), tonumber(v[12]), tonumber(v[13])
  for n, rg in ipairs(R.rings) do
    local i = rg.current % rg.len
    rg.held[i], rg.known[i] = tonumber(v[RING_FIELD_AT + n - 1]), true
    rg.from[i] = tonumber(v[FROM_FIELD_AT + n - 1])
  end
  if not v[1] then F.mark_orphan_bitmaps_lost() end
  if R.bans == nil then
    -- Not known (a new room, or the field lost): the latest end of any ban, looked up once.
    R.bans = tonumber(redis.call('ZRANGE', R.k_banned, -1, -1, 'WITHSCORES')[2]) or 0
    redis.call('HSET', R.k_settings, 'bans', string.format('%d', R.bans))
  end
  if R.born == nil or R.born > R.now then
    -- When the room was first seen (or its settings key was lost): what its pace is measured
    -- over. A clock that went back counts the room as born now, its first movement to come.
    R.born, R.moved = R.now, nil
    redis.call('HSET', R.k_settings, 'born', R.born)
    redis.call('HDEL', R.k_settings, 'early', 'moved')
  end
  -- The schedule: kept from the calls that come with it (written only when it changes), and
  -- followed by a call without one while the kept opening is ahead.
  local kept_opens, kept_closes, kept_keep = tonumber(v[8]), tonumber(v[9]), v[10]
  if R.scheduled_call then
    if kept_opens ~= R.opens_at or kept_closes ~= (R.closes_at or 0)
        or kept_keep ~= (R.keep_line and '1' or '0') then
      redis.call('HSET', R.k_settings, 'opens_at', R.opens_at, 'closes_at', R.closes_at or 0,
        'keep_line', R.keep_line and 1 or 0)
    end
  elseif kept_opens and kept_opens > R.now then
    R.opens_at, R.keep_line = kept_opens, kept_keep ~= '0'
    R.closes_at = kept_closes
    if R.closes_at == 0 then R.closes_at = nil end
    F.apply_schedule()
  end
  return nil
end

-- The settings only the pace, the sweep and configure need: the capacity's last change, the
-- pauses, the sweep's cursor.
function F.load_more()
  local v = redis.call('HMGET', R.k_settings, 'cap_before', 'cap_at', 'paused_at', 'pause_start',
    'pause_end', 'cursor')
  R.cap_before, R.cap_at = tonumber(v[1]), tonumber(v[2])
  R.paused_at, R.pause_start, R.pause_end = tonumber(v[3]), tonumber(v[4]), tonumber(v[5])
  R.cursor = v[6]
  if R.cursor ~= '-inf' and tonumber(R.cursor) == nil then R.cursor = '-inf' end
end

-- The settings key found without its version: lost (evicted, deleted, repaired) or a new room.
-- Every ring key that exists then holds check-ins of an epoch that no field names any more, and
-- the first numbers that vouched for the waiters without bits in it (newcomers who joined
-- since, waiters behind a sync's turn horizon) are gone with the key; its bits alone would have
-- them skipped or swept, and a promotion or a sweep may come before any write (which would
-- mark it lost, ring_key_for). So each is marked lost now, as the latest epoch its index can
-- hold by check_in_at (-e): everyone counts as seen in it while that epoch counts, and written
-- into in that epoch it is kept (it may hold that epoch's check-ins). A new room has no ring
-- keys: nothing to mark.
function F.mark_orphan_bitmaps_lost()
  for _, rg in ipairs(R.rings) do
    local last = math.floor(R.check_in_at / rg.width)
    local lost = {}
    for i = 0, rg.len - 1 do
      if redis.call('EXISTS', R.keys[rg.first + i]) == 1 then
        local e = last - (last - i) % rg.len
        lost[#lost + 1], lost[#lost + 2] = RING_FIELDS[rg.name][i], string.format('%d', -e)
        rg.held[i], rg.from[i], rg.known[i] = -e, nil, true
        if rg == R.turn then rg.first_made[i] = nil end
      end
    end
    if #lost > 0 then redis.call('HSET', R.k_settings, unpack(lost)) end
  end
end

-- Every epoch field of `rg` not read yet (a liveness test reads the whole ring).
function F.load_ring(rg)
  if rg.all then return end
  local fields = {}
  for i = 0, rg.len - 1 do
    fields[2 * i + 1], fields[2 * i + 2] = RING_FIELDS[rg.name][i], FROM_FIELDS[rg.name][i]
  end
  if rg == R.turn then
    for i = 0, rg.len - 1 do fields[2 * rg.len + i + 1] = FIRST_FIELDS[i] end
  end
  local v = redis.call('HMGET', R.k_settings, unpack(fields))
  for i = 0, rg.len - 1 do
    if not rg.known[i] then
      rg.held[i], rg.from[i], rg.known[i] = tonumber(v[2 * i + 1]), tonumber(v[2 * i + 2]), true
    end
    if rg.first_made[i] == nil then rg.first_made[i] = tonumber(v[2 * rg.len + i + 1]) end
  end
  rg.all = true
end

-- The two bits of a session in a bitmap of bloom_bits bits: the big-endian u32 of the id's
-- bytes 1-4 and 5-8 (missing bytes count as 0), each mod bloom_bits.
function F.bloom_offsets(id)
  local b1, b2, b3, b4, b5, b6, b7, b8 = string.byte(id, 1, 8)
  local x = (((b1 or 0) * 256 + (b2 or 0)) * 256 + (b3 or 0)) * 256 + (b4 or 0)
  local y = (((b5 or 0) * 256 + (b6 or 0)) * 256 + (b7 or 0)) * 256 + (b8 or 0)
  return x % R.bloom_bits, y % R.bloom_bits
end

-- The key of `rg` holding epoch `e`, ready to be written, and its lifetime (to the end of the
-- ring after `e`, for the caller to set once written), and whether the key is new: a key
-- holding an older epoch is DELeted first and its field set. A field holding -e says epoch
-- e's bitmap was lost (see check_in): it stays the key of e.
--
-- A key whose epoch is not known (its field missing) but which exists: the settings key was
-- lost, and the bitmap may hold this very epoch's check-ins (a gateway sends each waiter's
-- once per epoch: deleting them would have the sweep drop waiters who are polling). It is
-- kept and written into, and marked lost (-e): everyone counts as seen in e, and the bits of
-- an older epoch it may hold only make silent waiters look alive longer. A missing field and
-- no key is a room's first use of it.
function F.ring_key_for(rg, e)
  local i = e % rg.len
  local key = R.keys[rg.first + i]
  if not rg.known[i] then F.load_ring(rg) end
  local held = rg.held[i]
  local lifetime = math.max(1, (e + rg.len) * rg.width - R.now)
  if held and math.abs(held) >= e then return key, lifetime, false end
  if held == nil and redis.call('EXISTS', key) == 1 then
    F.mark_lost(R.k_settings, rg.name, rg.len, e)
    -- Who joined since is not known either: nobody is alive by their join in e.
    redis.call('HDEL', R.k_settings, FROM_FIELDS[rg.name][i])
    if rg == R.turn then redis.call('HDEL', R.k_settings, FIRST_FIELDS[i]) end
    rg.held[i], rg.from[i], rg.first_made[i] = -e, nil, nil
    return key, lifetime, true
  end
  redis.call('DEL', key)
  -- The epoch's first sequence number (see Liveness: joined since): seq as it is now, before
  -- anyone joins in e. A lost seq reads 0: everyone looks joined since, alive longer.
  local from = tonumber(redis.call('GET', R.k_seq)) or 0
  local number = string.format('%d', from)
  if rg == R.turn then
    redis.call('HSET', R.k_settings, RING_FIELDS[rg.name][i], e, FROM_FIELDS[rg.name][i],
      number, FIRST_FIELDS[i], number)
  else
    redis.call('HSET', R.k_settings, RING_FIELDS[rg.name][i], e, FROM_FIELDS[rg.name][i],
      number)
  end
  rg.held[i], rg.from[i], rg.first_made[i] = e, from, from
  return key, lifetime, true
end

-- Makes sure the current epoch (of check_in_at) of each ring has its bitmap and its first
-- sequence number, before a newcomer's sequence number is taken: a new one gets its sentinel
-- and lifetime and nothing else (no check-in).
function F.open_epochs()
  for _, rg in ipairs(R.rings) do F.open_epoch(rg) end
end

-- The current epoch of `rg`, made if new (see open_epochs); returns its index in the ring.
function F.open_epoch(rg)
  local e = math.floor(R.check_in_at / rg.width)
  local key, lifetime, new = F.ring_key_for(rg, e)
  if new then
    redis.call('BITFIELD', key, 'SET', 'u1', R.bloom_bits, '1')
    F.set_bitmap_lifetime(key, lifetime)
  end
  return e % rg.len
end

-- A sync's turn horizon (see Liveness: the turn horizon): the turn ring's current epoch's
-- first number is lowered to it, so that everyone behind it counts as joined since in that
-- epoch (whose turn check-ins the gateway did not send). Never raised: the lowest horizon of
-- the epoch's syncs holds for all of them.
function F.lower_first_number(horizon)
  local rg = R.turn
  local i = F.open_epoch(rg)
  local from = rg.from[i]
  if from == nil or horizon < from then
    redis.call('HSET', R.k_settings, FROM_FIELDS.turn[i], string.format('%d', horizon))
    rg.from[i] = horizon
  end
end

-- Whether a newcomer given sequence number `seq` now is alive by its join in both rings'
-- current epochs (opened by open_epochs): then it needs no bits.
function F.joined_since(seq)
  for _, rg in ipairs(R.rings) do
    local from = rg.from[math.floor(R.check_in_at / rg.width) % rg.len]
    if from == nil or seq <= from then return false end
  end
  return true
end

-- Checks in every session of `ids` (a list) at check_in_at, in both rings. `offsets`, when
-- given, holds each session's two bits, flat (session j's at 2j - 1 and 2j, as decimal strings,
-- as sync's lists bring them); else they are computed here.
--
-- Every write also sets the bitmap's sentinel, bit M (past the Bloom bits), and reads what it
-- was, in the same BITFIELD: a bitmap that its field says holds this epoch but whose sentinel
-- was clear was lost since its first write (evicted: the ring keys are the room's only keys
-- with a TTL; deleted; repaired) and is being made again by this write, without the
-- check-ins it had. Its field is then set to -e: epoch e's bitmap is lost, and until the epoch
-- stops counting everyone counts as seen in it (see alive_many), as for a bitmap that is gone.
-- A bitmap made again gets its lifetime again, so it still expires.
-- `rings`, when given, is the list of rings written (else both).
function F.check_in(ids, offsets, rings)
  if #ids == 0 then return end
  local chunks = F.new_chunks()
  for j = 1, #ids do
    local x, y
    if offsets then
      x, y = offsets[2 * j - 1], offsets[2 * j]
    else
      x, y = F.bloom_offsets(ids[j])
    end
    F.add_bits(chunks, x, y)
  end
  for _, rg in ipairs(rings or R.rings) do F.set_bits_in(rg, {chunks}) end
end

-- The BITFIELD arguments of a check-in, in chunks of at most CHUNK sessions: the same bits in
-- every ring (one M), so they are made once; the first chunk led by the sentinel.
function F.new_chunks()
  return {{'SET', 'u1', R.bloom_bits, '1'}, n = 0}
end

function F.add_bits(chunks, x, y)
  if chunks.n == CHUNK then
    chunks[#chunks + 1] = {}
    chunks.n = 0
  end
  local args = chunks[#chunks]
  local n = #args
  args[n + 1], args[n + 2], args[n + 3], args[n + 4] = 'SET', 'u1', x, '1'
  args[n + 5], args[n + 6], args[n + 7], args[n + 8] = 'SET', 'u1', y, '1'
  chunks.n = chunks.n + 1
end

-- Writes the bits of every chunk list of `lists` (each made by new_chunks) into the current
-- epoch of the ring `rg`; the sentinel read back is the first BITFIELD's.
function F.set_bits_in(rg, lists)
  local e = math.floor(R.check_in_at / rg.width)
  local key, lifetime, new = F.ring_key_for(rg, e)
  local had
  for _, chunks in ipairs(lists) do
    for c = 1, #chunks do
      local r = redis.call('BITFIELD', key, unpack(chunks[c]))
      if had == nil then had = r[1] end
    end
  end
  if had == 0 and not new and rg.held[e % rg.len] == e then
    rg.held[e % rg.len] = -e
    F.mark_lost(R.k_settings, rg.name, rg.len, e)
  end
  -- A new bitmap, or one made again: its lifetime (an existing one has it already).
  if new or had == 0 then F.set_bitmap_lifetime(key, lifetime) end
end

-- The ring's current epoch as sync answers it and a gateway names it back:
-- '<epoch>:<width ms>:<bitmap bits>:<server run id>'. The run id (INFO server) tells this
-- server process from another: a failover or a restart may have lost writes it acknowledged,
-- and then no gateway's copy of the bits it set holds (src/store/redis/checked_in.rs). A server
-- that does not tell it (INFO refused) names epochs no gateway can hold ('-' for the run id:
-- see epoch_holds).
function F.epoch_name(rg)
  if R.run_id == nil then
    local info = redis.pcall('INFO', 'server')
    R.run_id = type(info) == 'string' and string.match(info, 'run_id:(%x+)') or '-'
  end
  return string.format('%d:%d:%d:%s', math.floor(R.check_in_at / rg.width), rg.width,
    R.bloom_bits, R.run_id)
end

-- Whether a gateway that names `name` as the ring's epoch in which it set its sessions' bits
-- may skip writing them again: it is the current epoch of this server, and the ring's key still
-- holds that epoch (its field, lost or not). Another caller's epochs of another width (a rolling
-- change of queue_ttl or abandon_after, or of the schedule) may have taken the key since: its
-- field then names their epoch, and the bits are written again.
function F.epoch_holds(rg, name)
  if name ~= F.epoch_name(rg) or R.run_id == '-' then return false end
  local e = math.floor(R.check_in_at / rg.width)
  local i = e % rg.len
  if not rg.known[i] then F.load_ring(rg) end
  local held = rg.held[i]
  return held ~= nil and math.abs(held) == e
end

-- A liveness bitmap's lifetime, `ms` from now: the one TTL the room's keys get (check.rs,
-- ROOM_KEYS_HAVE_TTL).
function F.set_bitmap_lifetime(key, ms)
  redis.call('PEXPIRE', key, string.format('%d', math.max(1, ms)))
end

-- Epoch `e`'s bitmap of the ring `name` (of `len` keys) was lost: its field says so (-e).
function F.mark_lost(k_settings, name, len, e)
  redis.call('HSET', k_settings, name .. (e % len), string.format('%d', -e))
end

-- Whether each session of `ids` is alive by `rg`'s rule: a list of booleans. `scores`, each
-- session's score in line, as a number or a string: one above the first sequence number of an
-- epoch that counts joined since, and is alive without a look at the bits. Keys are then read
-- newest epoch first, only for the sessions not yet found; a key of unknown epoch (its field
-- lost) counts as current. A key whose epoch counts but which is gone (lost) makes everyone
-- alive: its check-ins cannot be told apart.
function F.alive_many(ids, rg, scores)
  local found, left = {}, {}
  for j = 1, #ids do found[j] = false end
  if #ids == 0 then return found end
  F.load_ring(rg)
  rg.since, rg.first_min = nil, nil
  local counting, since = {}, nil
  for back = 0, rg.len - 1 do
    local i = (rg.current - back) % rg.len
    local held = rg.held[i]
    if held ~= nil and held < 0 and -held + rg.keep >= rg.current then
      -- An epoch that counts lost its bitmap (check_in): its check-ins cannot be told apart.
      for j = 1, #ids do found[j] = true end
      return found
    end
    if held == nil or held + rg.keep >= rg.current then
      counting[#counting + 1] = {R.keys[rg.first + i], held}
      local from = rg.from[i]
      if held ~= nil and from ~= nil and (since == nil or from < since) then since = from end
      local first = held ~= nil and (rg.first_made[i] or from)
      if first and (rg.first_min == nil or first < rg.first_min) then rg.first_min = first end
    end
  end
  -- For silent_among: behind `since` everyone is alive by their join (or a turn horizon).
  rg.since = since
  for j = 1, #ids do
    local score = since and tonumber(scores[j])
    if score and score > since then found[j] = true else left[#left + 1] = j end
  end
  if #left > 0 then
    for _, kh in ipairs(counting) do
      -- A bitmap of another size holds its bits at other offsets (an older version's, whose
      -- epoch a lost settings key no longer names as lost; or one a gateway with another
      -- max_queue_len made): its check-ins cannot be told apart either, as for a lost one.
      -- Each of this size is exactly bloom_bytes long (the sentinel is its last bit); a
      -- missing one reads 0 (see below). One that was shorter is caught by the sentinel
      -- when written (check_in).
      local len = redis.call('STRLEN', kh[1])
      if len ~= 0 and len ~= R.bloom_bytes then
        for j = 1, #ids do found[j] = true end
        return found
      end
    end
  end
  for _, kh in ipairs(counting) do
    if #left == 0 then break end
    local still = {}
    for from = 1, #left, CHUNK do
      local args, which = {}, {}
      for n = from, math.min(#left, from + CHUNK - 1) do
        local j = left[n]
        local x, y = F.bloom_offsets(ids[j])
        args[#args + 1] = 'GET'; args[#args + 1] = 'u1'; args[#args + 1] = x
        args[#args + 1] = 'GET'; args[#args + 1] = 'u1'; args[#args + 1] = y
        which[#which + 1] = j
      end
      local bits = redis.call('BITFIELD', kh[1], unpack(args))
      for n, j in ipairs(which) do
        if bits[2 * n - 1] == 1 and bits[2 * n] == 1 then
          found[j] = true
        else
          still[#still + 1] = j
        end
      end
    end
    left = still
  end
  if #left > 0 then
    for _, kh in ipairs(counting) do
      if kh[2] ~= nil and redis.call('EXISTS', kh[1]) == 0 then
        -- A bitmap that counts is gone: its check-ins are lost with it.
        for _, j in ipairs(left) do found[j] = true end
        break
      end
    end
  end
  return found
end

function F.alive(id, rg, score) return F.alive_many({id}, rg, {score})[1] end

-- Housekeeping when due: expire slots and grants, and note the next expiry.
function F.housekeep()
  if R.due and R.now < R.due then return end
  redis.call('ZREMRANGEBYSCORE', R.k_active, '-inf', R.now)
  redis.call('ZREMRANGEBYSCORE', R.k_granted, '-inf', R.now)
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
  -- No ban lasts beyond `bans`: no lookup (the hot path) until a ban is made again.
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
  if last and math.floor((tonumber(last) or 0) / 1000) == second then return end
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
  local at = tonumber(redis.call('ZREVRANGEBYSCORE', R.k_arrivals, head, '-inf', 'LIMIT', 0, 1)[1])
  if at == nil then return -1 end
  return math.max(0, R.now - at)
end

-- Slots taken (claimed and granted); a room already full by its claimed slots alone is not
-- asked for its grants (the hot path: a full room).
function F.slots()
  local a = redis.call('ZCARD', R.k_active)
  if a >= R.capacity then return a end
  return a + redis.call('ZCARD', R.k_granted)
end

function F.has_slot(w)
  return redis.call('ZSCORE', R.k_active, w) or redis.call('ZSCORE', R.k_granted, w)
end

-- The admission-rate budget: a token bucket of one second's admissions, in thousandths. A
-- missing or damaged field counts as a full bucket.
function F.take()
  if R.rate == 0 then return true end
  local max = R.rate * 1000
  local b = redis.call('HMGET', R.k_bucket, 'milli', 'last')
  local milli, last = tonumber(b[1]), tonumber(b[2])
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
  local n = tonumber(v[2])
  if tonumber(v[1]) ~= R.current_bucket or n == nil then
    if field == 'n' then
      redis.call('HSET', R.k_admitted, 't' .. slot, R.current_bucket, 'n' .. slot, 1, 'k' .. slot, 0)
    elseif tonumber(v[1]) ~= R.current_bucket then
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
    local early = tonumber(redis.call('HGET', R.k_settings, 'early')) or 0
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
  if tonumber(v[1]) == R.current_bucket then
    current, skipped = tonumber(v[2]) or 0, tonumber(v[3]) or 0
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
    if tonumber(v[3 * back - 2]) == R.current_bucket - back then
      local c, k = tonumber(v[3 * back - 1]) or 0, tonumber(v[3 * back]) or 0
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

-- The snapshot's checkpoints: for each rank of checkpoint_ranks(waiting) (snapshot.rs), the
-- waiter there, {rank, member, score as Redis wrote it}. Every rank below EXACT_RANKS in one
-- ZRANGE, then one per rank.
function F.checkpoints(waiting)
  local out = {}
  if waiting == 0 then return out end
  local last = waiting - 1
  local exact = redis.call('ZRANGE', R.k_line, 0, math.min(last, EXACT_RANKS - 1), 'WITHSCORES')
  for j = 1, #exact, 2 do out[#out + 1] = {(j - 1) / 2, exact[j], exact[j + 1]} end
  local r = EXACT_RANKS - 1
  while r < last do
    local step = 1
    if r >= EXACT_RANKS then step = math.max(1, math.floor(r / CHECKPOINT_GAP)) end
    r = math.min(r + step, last)
    local at = redis.call('ZRANGE', R.k_line, r, r, 'WITHSCORES')
    if at[1] then out[#out + 1] = {r, at[1], at[2]} end
  end
  return out
end

-- Waiters not alive by the turn rule (0 while silence is excused), estimated from the
-- checkpoint waiters; exact for a line of at most EXACT_RANKS (then every waiter is a
-- checkpoint). Everyone behind the turn epochs' lowest first number counts as alive by the
-- rule: the newcomers since, who are, and (behind a sync's turn horizon, see Liveness) waiters
-- whose check-ins were not sent, who may not be. So the share of silent waiters is taken from
-- the checkpoint waiters ahead of it, and applied to everyone ahead of the epochs' first
-- numbers as made (the newcomers since are not silent): silent among the sample / its size *
-- the rank of the first checkpoint behind those first numbers (or waiting), rounded.
function F.silent_among(cps, waiting)
  if R.excused or #cps == 0 then return 0 end
  local ids, scores = {}, {}
  for j, cp in ipairs(cps) do ids[j], scores[j] = cp[2], cp[3] end
  local alive = F.alive_many(ids, R.turn, scores)
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
-- live admission rate per second (0: unlimited). Returns the counts of the last minute and five.
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
  return minute, five
end

-- A waiting reply: {2, position, waiting, paused, place}; place is the sequence number, or -1
-- for a registrant's draw score.
function F.waiting_reply(position, waiting, score)
  local place = tonumber(score)
  if place < 0 then place = -1 end
  return {2, position, waiting, R.paused and 1 or 0, place}
end

-- A score as a reply carries it: Redis truncates a Lua number to an integer.
function F.score_string(score)
  return string.format('%.17g', tonumber(score))
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
    if F.has_slot(head) then
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
    if active then return {1, tonumber(active), 0} end
  end
  if exp then
    redis.call('ZREM', R.k_granted, R.s)
    redis.call('ZADD', R.k_active, R.now + R.active_ttl, R.s)
    F.lower_due(R.now + R.active_ttl)
    return {1, R.now + R.active_ttl, 0}
  end
  return nil
end

-- A waiter's enter or poll: checked in, and told where they stand.
function F.touch(score)
  F.check_in({R.s})
  if not R.open then return {6, 0, 0} end
  if R.before_opening then return {11, R.opens_at, 0} end
  if R.line_closed then return {6, 0, 0} end
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

-- INCR of seq, after the line's last waiter (a lost or reset seq is set past it).
function F.seq_after_tail(k_seq, k_line)
  local seq = redis.call('INCR', k_seq)
  local tail = tonumber(redis.call('ZRANGE', k_line, '-1', '-1', 'WITHSCORES')[2])
  if tail and seq <= tail then
    seq = tail + 1
    redis.call('SET', k_seq, string.format('%d', seq))
  end
  return seq
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
    if tonumber(v[2 * back - 1]) == R.current_bucket - back then
      local i = history_minutes - math.floor((back - 1) / R.minute_buckets)
      out[i] = out[i] + (tonumber(v[2 * back]) or 0)
    end
  end
  return out
end

-- Whether this call released something: kept outside `main`, so that a second, repaired run
-- still reports what the first one removed.

-- Frees the session's slot, or else its place, and promotes into what was freed (release, ban).
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
  local n = redis.call('ZREM', R.k_active, R.s) + redis.call('ZREM', R.k_granted, R.s)
  if n == 0 then n = redis.call('ZREM', R.k_line, R.s) end
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

-- Checks in the sessions of sync's first list (ARGV 2) that have a place in line, and answers
-- back those without: their ids' 16 bytes each, their two Bloom offsets in ARGV 23 (the
-- gateway computes them for this room's M, so the script only looks the ids up). Then sets the
-- bits of the lists of sessions already found (ARGV 18, 21, 22, 24, 25: two offsets each):
-- sessions this gateway already found in line this abandon epoch, not looked up again (one
-- that left since only looks alive, as for a Bloom false positive, until its next epoch).
-- With a turn horizon (ARGV 26), the sessions behind it get no turn check-in, and the turn
-- ring's current epoch counts everyone behind it (lower_first_number); a looked-up session
-- whose score in line is not behind it gets its turn check-in whatever the gateway said.
function F.check_in_seen(list)
  -- Anew in each run (a repaired second run checks in again).
  R.unknown = {}
  local ahead, horizon = string.match(F.sync_list(26)[1], '^(%d+) (%d+)$')
  ahead, horizon = tonumber(ahead), tonumber(horizon)
  -- Their offsets (ARGV 23), in the ids' order, as decimal text: Redis takes a BITFIELD
  -- argument made from a Lua number by formatting it (about a microsecond, for each bit of
  -- each ring), from a string as it is.
  local next_offset = string.gmatch(F.sync_list(23)[1], '%d+')
  local abandon_ring = {R.gone_ring}
  for from = 1, #list, 16 * CHUNK do
    local ids, offsets = {}, {}
    for at = from, math.min(#list, from + 16 * CHUNK - 1) - 15, 16 do
      ids[#ids + 1] = string.sub(list, at, at + 15)
      offsets[#offsets + 1] = next_offset()
      offsets[#offsets + 1] = next_offset()
    end
    if #ids > 0 then
      local scores = redis.call('ZMSCORE', R.k_line, unpack(ids))
      local placed, placed_offsets = {{}, {}}, {{}, {}}
      local first = (from - 1) / 16
      for j = 1, #ids do
        if scores[j] then
          -- 1: both rings; 2: behind the horizon, the abandon ring only.
          local n = 1
          if horizon and first + j > ahead and tonumber(scores[j]) > horizon then n = 2 end
          local p, o = placed[n], placed_offsets[n]
          p[#p + 1] = ids[j]
          o[#o + 1], o[#o + 2] = offsets[2 * j - 1], offsets[2 * j]
        else
          -- No place (skipped, swept, never in line): answered back, so the gateway asks the
          -- store at their next poll instead of placing them by an old cookie.
          R.unknown[#R.unknown + 1] = ids[j]
        end
      end
      F.check_in(placed[1], placed_offsets[1])
      F.check_in(placed[2], placed_offsets[2], abandon_ring)
    end
  end
  -- The sessions found in line, by what the gateway set already in the epochs it names (its
  -- copy, src/store/redis/checked_in.rs): ARGV 18 in neither ring, 21 in the abandon ring's
  -- named epoch, 22 in both rings' named epochs; behind the horizon, 24 in neither and 25 in
  -- the abandon ring's. A list goes into a ring unless the gateway set it there in the ring's
  -- current epoch, on this server, in the key that still holds that epoch (epoch_holds); so a
  -- stale name costs only writes.
  local both, turn_only, neither = F.sync_list(18), F.sync_list(21), F.sync_list(22)
  local abandon_only, behind_set = F.sync_list(24), F.sync_list(25)
  local current = {}
  for n, rg in ipairs(R.rings) do current[n] = F.epoch_holds(rg, R.argv[18 + n]) end
  local turn_lists = {both, turn_only}
  if not current[1] then turn_lists[3] = neither end
  local abandon_lists = {both, abandon_only}
  if not current[2] then
    abandon_lists[3], abandon_lists[4], abandon_lists[5] = turn_only, neither, behind_set
  end
  for n, lists in ipairs({turn_lists, abandon_lists}) do
    local out = {}
    for _, list in ipairs(lists) do
      if list[0] > 0 then
        if not list.chunks then list.chunks = F.offset_chunks(list[1]) end
        out[#out + 1] = list.chunks
      end
    end
    if #out > 0 then F.set_bits_in(R.rings[n], out) end
  end
  if horizon then F.lower_first_number(horizon) end
end

-- Sync's list at ARGV `i` (unpacked numbering) of sessions' Bloom offsets, as decimal text
-- ('<x> <y> ' per session), in a table {text} whose chunks are made once when a ring needs
-- them; '' when absent (or the schedule, last, in its place).
function F.sync_list(i)
  local text = R.argv[i] or ''
  if string.sub(text, 1, 9) == 'schedule:' then text = '' end
  return {text, [0] = #text}
end

-- The BITFIELD chunks (new_chunks) of a list of Bloom offsets as decimal text (sync_list).
function F.offset_chunks(text)
  local chunks = F.new_chunks()
  local next_offset = string.gmatch(text, '%d+')
  while true do
    local x, y = next_offset(), next_offset()
    if y == nil then break end
    F.add_bits(chunks, x, y)
  end
  return chunks
end

function F.main()
  local refused = F.load_settings()
  if refused then return refused end
  if R.op == 'sync' or R.op == 'stats' or R.op == 'configure' then F.load_more() end
  if R.op == 'sync' then F.check_in_seen(R.s) end
  -- Housekeeping before every answer: expire slots when due, sweep (sync only), promote.
  F.housekeep()
  if R.op == 'sync' then F.sweep() end
  F.promote()

  if R.op == 'enter' then
    local r = F.claim_or_extend()
    if r then return r end
    local score = redis.call('ZSCORE', R.k_line, R.s)
    if score then return F.touch(score) end
    if not R.open or R.after_closing then return {6, 0, 0} end
    if F.banned(R.s) then return {7, 0, 0} end
    local waiting = redis.call('ZCARD', R.k_line)
    if R.before_opening then
      if waiting >= R.max_queue then return {3, 0, waiting} end
      -- Drawn ahead of every sequence number, unless some waiter holds one (an earlier
      -- opening's line: drawing would jump it) or the call brought no draw (a kept schedule).
      local tail = tonumber(redis.call('ZRANGE', R.k_line, -1, -1, 'WITHSCORES')[2])
      if R.draw_score and not (tail and tail >= 1) then
        F.note_pre_arrival()
        redis.call('ZADD', R.k_line, R.draw_score, R.s)
      else
        redis.call('ZADD', R.k_line, F.next_seq(), R.s)
      end
      F.check_in({R.s})
      return {11, R.opens_at, 0}
    end
    if not R.paused and waiting == 0 and R.capacity - F.slots() > 0 and F.take() then
      redis.call('ZADD', R.k_active, R.now + R.active_ttl, R.s)
      F.lower_due(R.now + R.active_ttl)
      F.count_admission()
      return {1, R.now + R.active_ttl, 0}
    end
    if waiting >= R.max_queue then return {3, 0, waiting} end
    -- The join is the newcomer's check-in: alive by it (joined since) when the epochs were
    -- opened before their number was taken, else (a seq that went back) by their bits.
    F.open_epochs()
    local seq = F.next_seq()
    redis.call('ZADD', R.k_line, seq, R.s)
    if not F.joined_since(seq) then F.check_in({R.s}) end
    return F.waiting_reply(waiting + 1, waiting + 1, seq)
  elseif R.op == 'poll' then
    local exp = F.has_slot(R.s)
    if exp then return {1, tonumber(exp), 0} end
    local score = redis.call('ZSCORE', R.k_line, R.s)
    if score then return F.touch(score) end
    if F.banned(R.s) then return {7, 0, 0} end
    if not R.open or R.after_closing then return {6, 0, 0} end
    return {0, 0, 0}
  elseif R.op == 'heartbeat' then
    return F.claim_or_extend() or {0, 0, 0}
  elseif R.op == 'release' then
    F.free_session()
    return {4, R.released, 0}
  elseif R.op == 'sync' then
    local waiting = redis.call('ZCARD', R.k_line)
    local cps = F.checkpoints(waiting)
    local head = ''
    if cps[1] then head = F.score_string(cps[1][3]) end
    local out = {12, R.now, waiting, R.paused and 1 or 0, R.open and 1 or 0,
      R.before_opening and 1 or 0, R.line_closed and 1 or 0, head, 0, 0}
    out[9], out[10] = F.append_pace(out, F.silent_among(cps, waiting))
    out[#out + 1] = #cps
    for _, cp in ipairs(cps) do
      out[#out + 1] = cp[1]
      out[#out + 1] = F.score_string(cp[3])
    end
    out[#out + 1] = table.concat(R.unknown)
    out[#out + 1] = F.epoch_name(R.rings[1])
    out[#out + 1] = F.epoch_name(R.rings[2])
    return out
  elseif R.op == 'stats' then
    local waiting = redis.call('ZCARD', R.k_line)
    local out = {5, redis.call('ZCARD', R.k_active), redis.call('ZCARD', R.k_granted),
      waiting, 0, 0, R.capacity, R.rate, R.paused and 1 or 0,
      R.open and 1 or 0, F.oldest_wait()}
    for _, n in ipairs(F.history(tonumber(R.argv[18]))) do out[#out + 1] = n end
    out[5], out[6] = F.append_pace(out, F.silent_among(F.checkpoints(waiting), waiting))
    return out
  elseif R.op == 'configure' then
    local c, r = tonumber(R.argv[18]), tonumber(R.argv[19])
    local p, o = tonumber(R.argv[20]), tonumber(R.argv[21])
    local before = F.settings_reply(8)
    if c > 0 and c ~= R.capacity then
      -- Remembered for the wait estimate: the pace measured before the change was at the old
      -- capacity.
      redis.call('HSET', R.k_settings, 'cap_before', R.capacity, 'cap_at', R.now)
      R.capacity = c
    end
    if r >= 0 then R.rate = r end
    if p >= 0 then
      -- Remembered for the wait estimate: a pause is no measure of the line's pace.
      if p == 1 and not R.paused then
        redis.call('HSET', R.k_settings, 'paused_at', R.now)
      elseif p == 0 and R.paused then
        redis.call('HSET', R.k_settings, 'pause_start', R.paused_at or R.now, 'pause_end', R.now)
      end
      R.paused = p == 1
    end
    if o >= 0 then R.open = o == 1 end
    redis.call('HSET', R.k_settings, 'v', SETTINGS_VERSION, 'capacity', R.capacity, 'rate', R.rate,
      'paused', R.paused and 1 or 0, 'open', R.open and 1 or 0)
    if o == 0 and R.argv[22] == '1' then
      redis.call('DEL', R.k_active, R.k_granted)
    end
    -- A raised capacity or a resume lets people in now, not at the next call.
    F.promote()
    local out = F.settings_reply(8)
    for i = 2, 5 do out[#out + 1] = before[i] end
    return out
  elseif R.op == 'admit_next' then
    local want = tonumber(R.argv[18])
    -- Nobody is admitted before the opening, not even by an operator.
    if R.before_opening then want = 0 end
    local admitted, steps = 0, 0
    while admitted < want and steps < 2 * want do
      local at = redis.call('ZRANGE', R.k_line, 0, 0, 'WITHSCORES')
      local head = at[1]
      if not head then break end
      steps = steps + 1
      local holder = F.has_slot(head)
      local silent = not holder and not F.alive(head, R.turn, at[2])
      redis.call('ZREM', R.k_line, head)
      -- A slot holder's stray place, or a waiter silent at their turn: skipped.
      if silent then F.count_skip() end
      if not holder and not silent then
        redis.call('ZADD', R.k_granted, R.now + R.grant_ttl, head)
        F.lower_due(R.now + R.grant_ttl)
        F.count_admission()
        admitted = admitted + 1
      end
    end
    return {9, admitted}
  elseif R.op == 'ban' then
    local until_ms = tonumber(R.argv[18])
    redis.call('ZREMRANGEBYSCORE', R.k_banned, '-inf', R.now)
    if until_ms > R.now then
      redis.call('ZADD', R.k_banned, until_ms, R.s)
      if R.bans == nil or until_ms > R.bans then
        R.bans = until_ms
        redis.call('HSET', R.k_settings, 'bans', string.format('%d', until_ms))
      end
    end
    F.free_session()
    return {10, R.released}
  end
  return redis.error_reply('ERR unknown waiting room operation')
end

-- Deletes every key of the wrong type, and a seq that INCR cannot count on.
function F.repair()
  local want = {
    {R.k_seq, 'string'}, {R.k_line, 'zset'}, {R.k_active, 'zset'}, {R.k_granted, 'zset'},
    {R.k_bucket, 'hash'}, {R.k_admitted, 'hash'}, {R.k_settings, 'hash'}, {R.k_arrivals, 'zset'},
    {R.k_banned, 'zset'},
  }
  for _, rg in ipairs(R.rings) do
    for i = 0, rg.len - 1 do want[#want + 1] = {R.keys[rg.first + i], 'string'} end
  end
  for _, kt in ipairs(want) do
    local t = redis.call('TYPE', kt[1])
    if type(t) == 'table' then t = t.ok end
    if t ~= 'none' and t ~= kt[2] then redis.call('DEL', kt[1]) end
  end
  local seq = tonumber(redis.call('GET', R.k_seq))
  if redis.call('EXISTS', R.k_seq) == 1 and (seq == nil or seq ~= math.floor(seq)) then
    redis.call('DEL', R.k_seq)
  end
end

-- The fast path's window as of this call (see The fast path): the end of the time in which an
-- enter without a schedule argument, by a session holding no slot, into a room full by its
-- slots, does exactly what main would do with the reads the fast path makes; nil when there is
-- no such time now.
function F.window()
  if not R.open or R.paused or R.before_opening or R.after_closing or R.line_closed then
    return nil
  end
  if R.bans == nil or R.bans > R.now or R.due == nil or R.due <= R.now then return nil end
  local second = math.floor(R.now / 1000)
  if R.noted ~= second then return nil end
  local till = math.min(R.due, (second + 1) * 1000)
  local since = 0
  for _, rg in ipairs(R.rings) do
    -- The key holds this epoch (or held it and was lost: -epoch, written into as main does),
    -- and its first sequence number is known.
    local held, from = rg.held[rg.current % rg.len], rg.from[rg.current % rg.len]
    if (held ~= rg.current and held ~= -rg.current) or from == nil then return nil end
    till = math.min(till, (rg.current + 1) * rg.width)
    since = math.max(since, from)
  end
  if R.closes_at then till = math.min(till, R.closes_at) end
  -- Full by its slots (last: it is the one read). Only main adds or frees a slot, and every
  -- run of it moves or closes the window; an expiry ends it (due).
  if F.slots() < R.capacity then return nil end
  return till, since
end

-- What a window holds for: ARGV 4 as sent (the line's bound and the liveness TTLs, which set
-- the rings' epoch widths, so a gateway with other TTLs, in a rolling change of them, never
-- writes into a key of another width's epoch), then, for a call with a schedule, '|' and the
-- schedule argument without the session's draw (a room with a schedule sends it on every
-- call, and main follows a call's schedule), then '#' and the settings version: a window that
-- main of another version opened is never answered from (version 4's fast path would set
-- its check-ins' bits at version 4's offsets, which this version does not read, see
-- Settings), nor the other way round (an older window names no version). Made of the
-- argument strings as they came: no number is formatted. nil for a schedule argument that is
-- not one.
function F.window_key(numbers, schedule)
  if not schedule then return numbers .. WINDOW_VERSION end
  local kept = string.match(schedule, '^(schedule:%d+:%d+:[01]):%d+$')
  if not kept then return nil end
  return numbers .. '|' .. kept .. WINDOW_VERSION
end

-- Opens, moves or closes the fast path's window after a run of main that answered: one SET
-- (with the TTL that ends it at till - 1 ms, so the key is gone from till on) or one DEL. Not
-- after an error reply: the only one main gives is for a settings key of another version,
-- which is not ours to write.
function F.keep_window(reply)
  if type(reply) == 'table' and reply.err then return end
  local till, since = F.window()
  local key = till and F.window_key(R.fast_numbers,
    R.scheduled_call and R.argv[#R.argv] or nil)
  if key and till - 1 > R.now then
    -- The window holds only while the room is full by its slots (F.window), and every slot
    -- added or freed is main's, which writes the window again: so the holders it lists stay
    -- the holders while it lasts.
    local holders = ''
    if R.capacity <= HOLDERS_IN_WINDOW then
      local a = redis.call('ZRANGE', R.k_active, 0, HOLDERS_IN_WINDOW)
      local g = redis.call('ZRANGE', R.k_granted, 0, HOLDERS_IN_WINDOW)
      if #a + #g <= HOLDERS_IN_WINDOW then
        holders = '\0' .. table.concat(a) .. table.concat(g)
      end
    end
    redis.call('SET', R.k_fast, string.format('%d:%d:%d:', since, R.now, till) .. key .. holders,
      'PX', string.format('%d', till - 1 - R.now))
  else
    F.close_window(R.k_fast)
  end
end

function F.close_window(k_fast)
  redis.call('DEL', k_fast)
end

-- A number the fast path took but does not use, given back: seq is then as it was (a seq that
-- was missing, or 0, is missing again; INCR makes 1 of either).
function F.give_back(k_seq, seq)
  if seq == 1 then redis.call('DEL', k_seq) else redis.call('DECR', k_seq) end
end

-- The time of a fast enter that writes liveness bits: ARGV 3, or the server's TIME; nil when it
-- is not in the window (before its `from`: a clock that went back; at or after its `till`: the
-- script began in the window's last millisecond, and the bits would go to the next epoch's key,
-- which main makes first). Either is main's.
function F.fast_now(args, from, till)
  local now = tonumber(args[3])
  if now == 0 then
    local t = redis.call('TIME')
    now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
  end
  if now < from or now >= till then return nil end
  return now
end

-- The fast path (see the header): an enter in the settled state, with nothing built but what
-- it reads. Returns nil whenever main must answer instead, having written nothing (a number
-- taken is given back first); the writes it makes (INCR seq, ZADD line, the liveness bits) are
-- those main's enter makes, so a call that fails after one (a key of the wrong type) is
-- answered by main, repaired, as before.
function F.fast_enter(keys, args)
  -- Exactly an enter's arguments as the crate sends them (then the schedule, when the room has
  -- one); anything else is main's, which reads it or refuses it.
  local n = #args
  if (n ~= 6 and n ~= 7) or (args[6] ~= '0' and args[6] ~= '1') then return nil end
  local window = redis.call('GET', keys[K_FAST])
  if not window then return nil end
  local since, from, till, held_for, max_queue, holders = string.match(window, WINDOW)
  if not since or held_for ~= F.window_key(args[4], args[7]) then return nil end
  from, till = tonumber(from), tonumber(till)
  if args[3] ~= '0' then
    -- An injected clock: the window by that clock (the key's expiry is the server's).
    local now = tonumber(args[3])
    if not now or now < from or now >= till then return nil end
  end
  since = tonumber(since)
  -- The window holds only while the room is full by its slots (F.window): main would
  -- promote nobody.
  local s = args[2]
  -- A slot to claim or extend: main's. A small room's window names its holders (an id found
  -- across two of them is a false alarm: main's too).
  if holders == '' then
    if redis.call('ZSCORE', keys[3], s) or redis.call('ZSCORE', keys[4], s) then return nil end
  elseif string.find(holders, s, 2, true) then
    return nil
  end
  local k_seq, k_line = keys[1], keys[2]
  local waiting = redis.call('ZCARD', k_line)
  local now, place, position
  local full = waiting >= tonumber(max_queue)
  if full or args[1] ~= 'join' then
    -- An enter looks for the caller's place first; so does anyone in a full line, where a
    -- newcomer gets {3} and a waiter their place, as main answers.
    place = redis.call('ZSCORE', k_line, s)
    if not place and full then return {3, 0, waiting} end
  end
  if not place then
    -- A newcomer (or a join, which looks for the place only if the number finds one).
    local seq = redis.call('INCR', k_seq)
    local number = string.format('%d', seq)
    if redis.call('ZCOUNT', k_line, number, '+inf') > 0 then
      -- Someone in line has this number or a later one: seq went back (lost or reset), and
      -- main places a newcomer after the last waiter.
      F.give_back(k_seq, seq)
      return nil
    end
    if seq <= since then
      -- Not alive by the join (seq went back below an epoch's first number): the join sets
      -- bits, as main's, by the time; read before the join, so that nil still writes nothing.
      now = F.fast_now(args, from, till)
      if not now then
        F.give_back(k_seq, seq)
        return nil
      end
    end
    if redis.call('ZADD', k_line, 'NX', number, s) == 1 then
      waiting = waiting + 1
      -- Alive by the join (joined since both epochs' first numbers), as main decides it.
      if seq > since then return {2, waiting, waiting, 0, seq} end
      place, position = seq, waiting
    else
      -- A join by a waiter: the number given back.
      F.give_back(k_seq, seq)
      place = redis.call('ZSCORE', k_line, s)
    end
  end
  if not position then
    -- A waiter: checked in by the time, told their rank.
    now = now or F.fast_now(args, from, till)
    if not now then return nil end
    place = tonumber(place)
    position = redis.call('ZRANK', k_line, s) + 1
  end
  -- The check-in, into the current epoch of both rings, as F.set_bits makes it (the window
  -- ends with either epoch, so each key holds it).
  local _, queue_ttl, abandon = string.match(args[4], FAST_NUMBERS)
  queue_ttl, abandon = tonumber(queue_ttl), tonumber(abandon)
  local bits = F.bloom_bits(tonumber(max_queue))
  local b1, b2, b3, b4, b5, b6, b7, b8 = string.byte(s, 1, 8)
  local x = ((((b1 or 0) * 256 + (b2 or 0)) * 256 + (b3 or 0)) * 256 + (b4 or 0)) % bits
  local y = ((((b5 or 0) * 256 + (b6 or 0)) * 256 + (b7 or 0)) * 256 + (b8 or 0)) % bits
  local m, xs, ys = string.format('%d', bits), string.format('%d', x), string.format('%d', y)
  for _, ring in ipairs(FAST_RINGS) do
    local width = math.max(1, math.floor(math.max(ring.abandon and abandon or queue_ttl,
      queue_ttl) / ring.epochs))
    local e = math.floor(now / width)
    local key = keys[ring.first + e % ring.len]
    local had = redis.call('BITFIELD', key, 'SET', 'u1', m, '1', 'SET', 'u1', xs, '1',
      'SET', 'u1', ys, '1')[1]
    if had == 0 then
      -- Lost since its first write (see Lost bitmaps): marked (again, if it was: the same
      -- value), given its lifetime again, as main's check-in does; and the window closed.
      F.mark_lost(keys[7], ring.name, ring.len, e)
      F.set_bitmap_lifetime(key, (e + ring.len) * width - now)
      F.close_window(keys[K_FAST])
    end
  end
  if place < 0 then place = -1 end
  return {2, position, waiting, 0, place}
end

-- The registered function: the fast path for an enter when it can answer; else the call's
-- state, then main, repaired and run again once if it raised (see Bad days), and the fast
-- path's window kept. No flags: not `no-writes` and not `allow-oom`, so with `maxmemory`
-- exhausted Redis refuses the whole call with OOM before it starts, never half-run.
redis.register_function{
  function_name = 'twr_room_v7',
  callback = function(keys, args)
    if not OPS[args[1]] then return redis.error_reply('ERR unknown waiting room operation') end
    if args[1] == 'enter' or args[1] == 'join' then
      local ok, reply = pcall(F.fast_enter, keys, args)
      if ok and reply then return reply end
    end
    local refused = F.setup(keys, args)
    if refused then return refused end
    local ok, reply = pcall(F.main)
    if not ok then
      F.repair()
      ok, reply = pcall(F.main)
      if not ok then
        -- Whatever the failed runs wrote, the fast path must not go on from it.
        F.close_window(R.k_fast)
        error(reply)
      end
    end
    F.keep_window(reply)
    return reply
  end,
  flags = {},
}
