-- tower-waiting-room: one session's single-use checkout ticket, atomically inside Redis/Valkey.
-- Sent after the `#!lua` line and the shared reader of stored numbers (script/stored.lua), as
-- src/store/redis/tickets.rs assembles it.
--
-- The semantics are exactly those of the embedded MemoryStore's tickets
-- (src/store/memory/tickets.rs); the conformance suite runs against both. One call is one
-- script, so a ticket redeemed through any number of gateways at once is accepted exactly once:
-- Redis runs one script at a time, and the first to find the record unused marks it used.
--
-- KEYS (they share the room's hash tag, so a Redis Cluster keeps them in the room's slot):
--   1 ticket   string  `{prefix}:{room}:tk:<session>`, value `<state>:<nonce>:<expires_at_ms>`,
--                      state `n` (unused) or `u` (used), or `N` or `U` once the slot it came
--                      with was released or banned (line.lua's free_session upper-cases it:
--                      such a ticket never passes again, and the next mint replaces the
--                      record), with a TTL that ends it at its expiry (on the server's clock;
--                      the expiry in the value is the one that counts)
--   2 active   zset    redeem only: the room's claimed slots by expiry (the room's KEYS[3],
--                      script/keys.lua), only read: a ticket is used only while its session
--                      holds its slot
-- One script, two operations, told by ARGV 1 (an EVALSHA script: its top level, which EVALSHA
-- runs on every call, is two small functions, not the room's forty):
--
-- mint: the session's ticket, made or kept.
-- KEYS: 1 ticket
-- ARGV:
--   1 op          'mint'
--   2 nonce       the fresh one (32 lowercase hex digits), stored if there is no live record
--   3 now         ms, or 0 to use the server's TIME (shared by every gateway)
--   4 expires_at  the record's expiry in ms (the slot's expiry)
-- Reply: {'ticket', nonce, expires_at_ms} the live unused record's (or the new one's), or
-- {'used'}. A live record (not ended) is kept, its expiry moved to expires_at if that is later
-- (never earlier): the room mints again whenever it extends the slot, so the record lives as
-- long as the slot. Without one (none, expired, or ended) a new record is made with nonce.
--
-- redeem: the ticket's one use.
-- KEYS: 1 ticket, 2 active
-- ARGV:
--   1 op          'redeem'
--   2 nonce       the one the ticket names
--   3 now         ms, or 0 to use the server's TIME
--   4 session     the session id (its 16 raw bytes, the member the room's script keeps in its
--                 zsets)
-- Reply: {'accepted'} (the record is now used, and lives at least as long as the slot),
-- {'used'}, {'unknown'} (no live record of that nonce), or {'slot_ended'} (unused, but the
-- session holds no claimed slot, or the record ended with its slot: the record is left as it
-- is).
--
-- Damage heals as in the room's script: a key of another type, or a value this script did not
-- write (its expiry included: a stored integer, stored.lua), counts as no record and is
-- dropped. A record past its expiry counts as none (the TTL
-- may not have fired yet, or a gateway sends its own clock).

local key = KEYS[1]
local op, nonce = ARGV[1], ARGV[2]
local now = tonumber(ARGV[3])
if not now or now == 0 then
  local t = redis.call('TIME')
  now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end

-- The live record: state, nonce and expiry (in ms); nil if there is none.
local function live()
  local kind = redis.call('TYPE', key)['ok']
  if kind == 'none' then
    return nil
  end
  if kind ~= 'string' then
    redis.call('DEL', key)
    return nil
  end
  local state, n, exp = string.match(redis.call('GET', key), '^([nuNU]):(%x+):(%d+)$')
  exp = stored_integer(exp, 0, STORED_MAX)
  if not state or not exp or exp <= now then
    redis.call('DEL', key)
    return nil
  end
  return state, n, exp
end

-- Writes the record, ending at `exp` (a number later than now).
local function store(state, n, exp)
  redis.call('SET', key, state .. ':' .. n .. ':' .. string.format('%d', exp), 'PX', exp - now)
end

if op == 'mint' then
  local state, n, exp = live()
  local want = tonumber(ARGV[4])
  if state == 'n' or state == 'u' then
    if want and want > exp then
      exp = want
      store(state, n, exp)
    end
    if state == 'u' then
      return {'used'}
    end
    return {'ticket', n, string.format('%d', exp)}
  end
  if want and want > now then
    store('n', nonce, want)
  end
  -- An expiry already past: nothing is stored, as the record would be gone at once.
  return {'ticket', nonce, ARGV[4]}
elseif op == 'redeem' then
  local state, n, exp = live()
  if not state or n ~= nonce then
    return {'unknown'}
  elseif state == 'u' or state == 'U' then
    return {'used'}
  elseif state == 'N' then
    -- Ended with its slot: a slot held now is a later admission's, not this ticket's.
    return {'slot_ended'}
  end
  -- Expired slots are dropped by the room's own calls; one past its time counts as gone here.
  -- A slot expiry beyond 2^53 ms ('inf' by hand) is none: the room's housekeeping drops it.
  local slot = stored_score(redis.call('ZSCORE', KEYS[2], ARGV[4]))
  if not slot or slot <= now or slot > STORED_MAX then
    return {'slot_ended'}
  end
  -- Kept, used, until the ticket's own expiry or the slot's, whichever is later: a replay is
  -- told "used", not "unknown", and no mint of this admission finds the record gone.
  store('u', n, math.max(exp, slot))
  return {'accepted'}
end
return redis.error_reply('ERR tower-waiting-room tickets: unknown operation')
