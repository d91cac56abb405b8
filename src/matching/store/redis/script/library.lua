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
-- The library is this file, the crate's reader of stored numbers
-- (src/store/redis/script/stored.lua) and the other files of
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

-- The time in ms the argument `arg` gives, or, for 0 (NOW_FROM_SERVER), the server's TIME
-- (shared by every process).
local function clock(arg)
  local now = tonumber(arg)
  if now == 0 then
    local t = redis.call('TIME')
    now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
  end
  return now
end

local function int(n) return string.format('%d', n) end
