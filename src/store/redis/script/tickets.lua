-- Tickets: one session's single-use checkout ticket, two functions of their own
-- (register.lua), each with its KEYS, ARGV and reply in the header above its body. They run on
-- the ticket's record alone: not the room's call (call.lua), not main.
--
-- The semantics are exactly those of the embedded MemoryStore's tickets
-- (src/store/memory/tickets.rs); the conformance suite runs against both. One call is one
-- function, so a ticket redeemed through any number of gateways at once is accepted exactly
-- once: Redis runs one function at a time, and the first to find the record unused marks it
-- used.
--
-- The record (both functions' KEYS 1, in the room's hash tag, so a Redis Cluster keeps it in
-- the room's slot): `{prefix}:{room}:tk:<session>`, a string `<state>:<nonce>:<expires_at_ms>`,
-- state `n` (unused) or `u` (used), or `N` or `U` once the slot it came with was released or
-- banned (line.lua's free_session upper-cases it: such a ticket never passes again, and the next
-- mint replaces the record), with a TTL that ends it at its expiry (on the server's clock; the
-- expiry in the value is the one that counts).
--
-- Damage heals as in the room's functions: a key of another type, or a value these functions
-- did not write (its expiry included: a stored integer, stored.lua), counts as no record and is
-- dropped. A record past its expiry counts as none (the TTL may not have fired yet, or a gateway
-- sends its own clock).

-- The time of a ticket call: `arg` in ms, or the server's TIME (shared by every gateway) when
-- it is 0 or no number.
function F.ticket_now(arg)
  local now = tonumber(arg)
  if not now or now == 0 then
    local t = redis.call('TIME')
    now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
  end
  return now
end

-- The live record under `key` at `now`: state, nonce and expiry (in ms); nil if there is none.
function F.ticket_live(key, now)
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

-- Writes the record under `key`, ending at `exp` (a number later than `now`).
function F.ticket_store(key, now, state, n, exp)
  redis.call('SET', key, state .. ':' .. n .. ':' .. string.format('%d', exp), 'PX', exp - now)
end

-- twr_room_v8_ticket_mint: the session's ticket, made or kept.
-- KEYS: 1 ticket (the record, above)
-- ARGV:
--   1 nonce       the fresh one (32 lowercase hex digits), stored if there is no live record
--   2 now         ms, or 0 (NOW_FROM_SERVER) to use the server's TIME
--   3 expires_at  the record's expiry in ms (the slot's expiry)
-- Reply: {'ticket', nonce, expires_at_ms} the live unused record's (or the new one's), or
-- {'used'}. A live record (not ended) is kept, its expiry moved to expires_at if that is later
-- (never earlier): the room mints again whenever it extends the slot, so the record lives as
-- long as the slot. Without one (none, expired, or ended) a new record is made with nonce.
function F.ticket_mint(keys, args)
  local key, nonce = keys[1], args[1]
  local now = F.ticket_now(args[2])
  local state, n, exp = F.ticket_live(key, now)
  local want = tonumber(args[3])
  if state == 'n' or state == 'u' then
    if want and want > exp then
      exp = want
      F.ticket_store(key, now, state, n, exp)
    end
    if state == 'u' then
      return {'used'}
    end
    return {'ticket', n, string.format('%d', exp)}
  end
  if want and want > now then
    F.ticket_store(key, now, 'n', nonce, want)
  end
  -- An expiry already past: nothing is stored, as the record would be gone at once.
  return {'ticket', nonce, args[3]}
end

-- twr_room_v8_ticket_redeem: the ticket's one use.
-- KEYS: 1 ticket (the record, above), 2 active (the room's claimed slots by expiry, keys.lua;
-- only read: a ticket is used only while its session holds its slot)
-- ARGV:
--   1 nonce       the one the ticket names
--   2 now         ms, or 0 (NOW_FROM_SERVER) to use the server's TIME
--   3 session     the session id, 16 raw bytes (the member the room's functions keep in their
--                 zsets)
-- Reply: {'accepted'} (the record is now used, and lives at least as long as the slot),
-- {'used'}, {'unknown'} (no live record of that nonce), or {'slot_ended'} (unused, but the
-- session holds no claimed slot, or the record ended with its slot: the record is left as it
-- is).
function F.ticket_redeem(keys, args)
  local key, nonce = keys[1], args[1]
  local now = F.ticket_now(args[2])
  local state, n, exp = F.ticket_live(key, now)
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
  local slot = stored_score(redis.call('ZSCORE', keys[2], args[3]))
  if not slot or slot <= now or slot > STORED_MAX then
    return {'slot_ended'}
  end
  -- Kept, used, until the ticket's own expiry or the slot's, whichever is later: a replay is
  -- told "used", not "unknown", and no mint of this admission finds the record gone.
  F.ticket_store(key, now, 'u', n, math.max(exp, slot))
  return {'accepted'}
end
