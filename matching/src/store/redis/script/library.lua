#!lua name=twr_match_v1
-- tower-waiting-room: matching (queues of people waiting to be put in groups), atomically inside
-- Redis/Valkey. The semantics are exactly those of the embedded MemoryMatchStore
-- (src/matching/store/memory.rs, rules in src/matching/store/mod.rs); a conformance suite and a
-- differential test run against both.
--
-- A Redis Functions library (Redis 7.0+, Valkey 7.2+) of its own, versioned apart from the
-- room's (matching is a product beside the room): loaded with `FUNCTION LOAD REPLACE` when a
-- server answers that it has no such function, one function per operation, each called as
-- `FCALL twr_match_v1_<op> <numkeys> KEYS... ARGV...` (register.lua). A changed protocol gets a
-- new name, never mixed with the old one.
--
-- The library is this file, the crate's readers of stored numbers and of a call's time
-- (src/store/redis/script/stored.lua, time.lua) and the other files of
-- src/matching/store/redis/script/, one chunk assembled in src/matching/store/redis/calls.rs
-- (SCRIPT), each file on one concern: this one the helpers every other file shares.
--
-- The functions have no flags: not `no-writes` and not `allow-oom`, so the server checks memory
-- before one starts (an OOM refuses the whole call, never half of it), and refuses keys of two
-- slots in one call.
--
-- Two kinds of function, by the keys they are given:
--   - the user's pointer (pointer.lua): one key, which queue the user was last sent to;
--   - one queue (queue.lua, formation.lua, operations.lua): the queue's eight keys.
-- The rule "one place per user across all queues" crosses slots, so it is kept by the pointer
-- and the queue's `used` set together (the argument is in src/matching/store/redis/mod.rs).
--
-- The keys, the values stored in them and the replies are those of the EVALSHA script that
-- came before this library (`matching.lua`, its operation told by ARGV 1): a gateway still
-- running that script and one running these functions share a queue during a rolling upgrade.
--
-- Numbers are written with %d (never tostring, whose %.14g would round large values); the crate
-- keeps every duration below 2^50 ms, so sums stay exact in Lua's doubles.

-- What a caller may send is read as strictly as a stored number (stored.lua) and held to
-- bounds, and a call with an argument outside them is refused with an error reply before
-- anything is read or written (`WRCLOCK` for the time, time.lua; `WRARGS` for the rest): an
-- old or misbehaving process is refused, never obeyed (a clock far ahead would time out every
-- waiter and undo every group). The bounds: every duration 0 .. 2^50 ms (the crate caps its
-- own there), a group size 2 .. 8, max_work 1 .. 10000, a pointer's TTL 1 ms .. 2^53 ms, a
-- user's and an application's id 1 to 128 bytes without a control character, a claim's nonce
-- 16 lowercase hex digits and its queue's key as Queue::key writes one.
local MAX_DURATION, MAX_TTL = 1125899906842624, 9007199254740992

-- A refused call's error reply.
local function refuse(what)
  return redis.error_reply('WRARGS refused: ' .. what)
end

local function int(n) return string.format('%d', n) end
