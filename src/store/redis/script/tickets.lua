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
-- banned (line.lua's free_session upper-cases it: such a ticket never passes again, and the
-- next admission's first mint replaces the record), with a TTL that ends it at its expiry (on
-- the server's clock; the expiry in the value is the one that counts).
--
-- A record these functions did not write (a key of another type, a state, nonce or expiry of
-- another shape: its expiry is a stored integer, stored.lua) cannot be read, and is never taken
-- for no record: it may have been a ticket already used, and "no record" would mint a fresh one
-- for the same admission. So it reads as used: a mint answers "used" and writes it back as a
-- used record of no known nonce (`u:0:<expiry>`, with the mint's expiry), so that the answer
-- sticks; a redeem answers "used" and writes it back the same way, with the slot's expiry.
-- Once no admission of the session goes on (the expiry given is past, or the session holds no
-- slot), it is dropped instead: the session's next admission may have a new ticket, as after a
-- record's expiry. A record past its expiry counts as none (the TTL may not have fired yet, or
-- a gateway sends its own clock).
--
-- A lost record (evicted, deleted) leaves nothing to read, so the mint is told which mint it is
-- (ARGV 4): the admission's first one makes a new record, but one of an admission that goes on
-- (a heartbeat, the status endpoint) knows its ticket was minted, so it answers "used" and
-- writes the used record of no known nonce: no second ticket for the same admission.

-- The nonce of a used record whose own nonce is not known (written for a damaged or lost
-- one): no ticket names it (a ticket's nonce is 32 hex digits), and it reads as used for every
-- ticket of the session.
local LOST_NONCE = '0'

-- What F.ticket_live answers for a record it cannot read.
local DAMAGED = 'damaged'

-- The time of a ticket call, its nonce checked first (ARGV 1 and 2 of both functions), as a
-- room call's arguments are (call.lua): a nonce is 32 lowercase hex digits, as a mint writes
-- it; the time is held to the server's (time.lua). nil and the error reply for a call
-- refused before the record is read.
function F.ticket_call(args)
  if not string.match(args[1] or '', '^' .. string.rep('[0-9a-f]', 32) .. '$') then
    return nil, F.refuse('a nonce that is not 32 lowercase hex digits')
  end
  return call_time_or_refusal(args[2])
end

-- The live record under `key` at `now`: state, nonce and expiry (in ms); nil if there is none
-- (a record past its expiry is dropped); DAMAGED if it cannot be read (kept: see above).
function F.ticket_live(key, now)
  local kind = redis.call('TYPE', key)['ok']
  if kind == 'none' then
    return nil
  end
  if kind ~= 'string' then
    return DAMAGED
  end
  local state, n, exp = string.match(redis.call('GET', key), '^([nuNU]):([0-9a-f]+):(%d+)$')
  exp = stored_integer(exp, 0, STORED_MAX)
  if not state or not exp then
    return DAMAGED
  end
  -- A nonce as a mint stores it, or the lost one's mark on a used record.
  if #n ~= 32 and not (n == LOST_NONCE and (state == 'u' or state == 'U')) then
    return DAMAGED
  end
  if exp <= now then
    redis.call('DEL', key)
    return nil
  end
  return state, n, exp
end

-- Writes the record under `key`, ending at `exp` (a number later than `now`).
function F.ticket_store(key, now, state, n, exp)
  redis.call('SET', key, state .. ':' .. n .. ':' .. string.format('%d', exp), 'PX', exp - now)
end

-- Writes a used record of no known nonce under `key` in place of one that is damaged or lost,
-- ending at `exp`; or, when `exp` is no time after `now` (no admission of the session goes on),
-- drops what is there.
function F.ticket_keep_used(key, now, exp)
  if exp and exp > now then
    F.ticket_store(key, now, 'u', LOST_NONCE, exp)
  else
    redis.call('DEL', key)
  end
end

-- <LIBRARY>_ticket_mint: the session's ticket, made or kept.
-- Runs: F.ticket_call, F.ticket_live, F.ticket_store, F.ticket_keep_used; call.lua F.refuse;
--   time.lua's clock and stored.lua's reader; nothing of register.lua's room call.
-- KEYS: 1 ticket (the record, above)
-- ARGV:
--   1 nonce       the fresh one (32 lowercase hex digits), stored if there is no live record
--                 and this is the admission's first mint
--   2 now         the time, as a room call's (time.lua): 0 for the server's TIME,
--                 a gateway's clock within a second of it, or a manual clock's 'm<ms>'; any
--                 other is refused (WRCLOCK) before the record is read
--   3 expires_at  the record's expiry in ms (the slot's expiry), at most 7 days ahead
--                 (WRARGS beyond: no slot lasts longer)
--   4 renewal     1 when the admission goes on (a heartbeat, the status endpoint): it had its
--                 ticket, so a record missing or ended reads as used; 0 at its first mint
-- Reply: {'ticket', nonce, expires_at_ms} the live unused record's (or the new one's), or
-- {'used'}. A live record (not ended) is kept, its expiry moved to expires_at if that is later
-- (never earlier): the room mints again whenever it extends the slot, so the record lives as
-- long as the slot. Without one (none, expired, or ended), the first mint makes a new record
-- with nonce; a renewal answers {'used'}, writing a used record of no known nonce in place of
-- a missing one (an ended one is kept). A damaged record is {'used'}, written back as used.
function F.ticket_mint(keys, args)
  local key, nonce = keys[1], args[1]
  local now, refused = F.ticket_call(args)
  if not now then return refused end
  -- No slot lasts longer than a lifetime a room call may name (call.lua, LIMIT_TTL).
  local want = stored_integer(args[3], 0, now + LIMIT_TTL + CLOCK_SKEW)
  if not want then return F.refuse('an expiry that is no time within 7 days') end
  if args[4] ~= '0' and args[4] ~= '1' then return F.refuse('a renewal that is not 0 or 1') end
  local state, n, exp = F.ticket_live(key, now)
  if state == DAMAGED then
    F.ticket_keep_used(key, now, want)
    return {'used'}
  end
  if state == 'n' or state == 'u' then
    if want > exp then
      exp = want
      F.ticket_store(key, now, state, n, exp)
    end
    if state == 'u' then
      return {'used'}
    end
    return {'ticket', n, string.format('%d', exp)}
  end
  if args[4] == '1' then
    -- The admission goes on and its ticket was minted: a missing record was lost, and an
    -- ended one is no ticket of an admission that goes on. Never a second ticket.
    if not state then
      F.ticket_keep_used(key, now, want)
    end
    return {'used'}
  end
  if want > now then
    F.ticket_store(key, now, 'n', nonce, want)
  end
  -- An expiry already past: nothing is stored, as the record would be gone at once.
  return {'ticket', nonce, string.format('%d', want)}
end

-- <LIBRARY>_ticket_redeem: the ticket's one use.
-- Runs: F.ticket_call, F.ticket_live, F.ticket_keep_used, F.ticket_store; settings.lua
--   F.member; as the mint's, nothing of register.lua's room call.
-- KEYS: 1 ticket (the record, above), 2 active (the room's claimed slots by expiry, keys.lua;
-- only read: a ticket is used only while its session holds its slot)
-- ARGV:
--   1 nonce       the one the ticket names
--   2 now         as the mint's
--   3 session     the session id, 16 raw bytes (the room's functions keep its first
--                 MEMBER_BYTES in their zsets, or all 16 in a room of WIDE_VERSION, see
--                 Settings: members; both are looked up, as the settings are not read here)
-- Reply: {'accepted'} (the record is now used, and lives at least as long as the slot),
-- {'used'} (also for a used record of no known nonce, and for a damaged one, written back as
-- used), {'unknown'} (no live record of that nonce), or {'slot_ended'} (unused, but the
-- session holds no claimed slot, or the record ended with its slot: the record is left as it
-- is).
function F.ticket_redeem(keys, args)
  local key, nonce = keys[1], args[1]
  local now, refused = F.ticket_call(args)
  if not now then return refused end
  local state, n, exp = F.ticket_live(key, now)
  -- Expired slots are dropped by the room's own calls; one past its time counts as gone here.
  -- A slot expiry beyond 2^53 ms ('inf' by hand) is none: the room's housekeeping drops it.
  local slots = redis.call('ZMSCORE', keys[2], F.member(args[3]), args[3])
  local slot = stored_score(slots[1] or slots[2])
  if not slot or slot <= now or slot > STORED_MAX then
    slot = nil
  end
  if state == DAMAGED then
    F.ticket_keep_used(key, now, slot)
    return {'used'}
  elseif not state then
    return {'unknown'}
  elseif n == LOST_NONCE then
    return {'used'}
  elseif n ~= nonce then
    return {'unknown'}
  elseif state == 'u' or state == 'U' then
    return {'used'}
  elseif state == 'N' or not slot then
    -- No slot held, or the record ended with its slot (a slot held now is a later admission's,
    -- not this ticket's): refused, and left unused.
    return {'slot_ended'}
  end
  -- Kept, used, until the ticket's own expiry or the slot's, whichever is later: a replay is
  -- told "used", not "unknown", and no mint of this admission finds the record gone.
  F.ticket_store(key, now, 'u', n, math.max(exp, slot))
  return {'accepted'}
end
