-- The fast path: an enter answered without main while the room is settled.
--
-- The fast path: the common enter (a newcomer joining a long line while the room is full, or
-- a waiter's enter) skips `setup` and main, which read and build far more than it needs (a
-- measured two thirds of main's cost is Lua: the call's state, the settings' 17 fields, the
-- rings). Main, at the end of every run that answered, keeps a window in the `fast` key
-- (KEYS[20]): '<since>:<from>:<till>:<for>', with a TTL that ends the key at till - 1 ms
-- (Redis expires a key by its own clock, the one TIME reads, and judges expiry at a script's
-- start), or deletes it. `for` is line_numbers (call.lua) as main's call sent it, then '|'
-- and the schedule without the draw for a room with one, then '#' and the settings version (`F.window_key`): a
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
-- told by ZSCORE of active and granted.
-- An `enter` looks for the caller's place (ZSCORE line); a `join` (the gateway knows of no
-- place: <LIBRARY>_join, visitor.lua) does not, first. A newcomer takes the next number
-- (INCR) and joins with it (ZADD NX) when nobody in line has that number or a later one (one ZCOUNT: main's tail check;
-- otherwise seq went back, and main places them after the last waiter), and is alive by the
-- join when the number is above `since`, as main decides it: for a join GET, ZSCORE active and
-- granted, ZCARD line, INCR, ZCOUNT, ZADD (7 redis.calls; no TIME: the
-- key's expiry is the window's end, and nothing a newcomer's join writes depends on the time).
-- In a full line (ZCARD at the bound) nobody takes a number: a newcomer gets {3}, a waiter is
-- found by ZSCORE. A join by a waiter (a reply lost, another gateway) adds nothing by its ZADD
-- NX: the number is given back (DECR, or DEL when it was the first: seq is then as it was, as
-- main leaves it), and their place looked up. A waiter is checked in (TIME, the BITFIELD of each
-- ring's current key, whose numbers go as strings: Lua's own number to string conversion,
-- %.17g, costs more than the commands, 15 % of a waiter's fast enter at 2M,
-- bench: docs/benchmarks.md#each-shortcut-measured) and told their rank (ZRANK). A server
-- clock that went back before the window's `from` is main's for a waiter (their bits go by
-- the time); a newcomer's join does not read the clock. With an
-- injected clock (`now` not 0: tests) the window is judged by that clock, from <= now < till,
-- not by the key's expiry. A lost bitmap is seen by its sentinel as main sees it, marked, and
-- closes the window. Everything else (a claim, a room with free slots, a call before the
-- opening, a damaged key, arguments not as the crate sends them) is main's, which reads or
-- refuses them. tests/redis/redis_fast_path.rs holds the two to the same answers and writes.
-- An older library (which does not keep this window) never runs on a room this one keeps one
-- for: it refuses the room's settings version (see Settings).

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

-- What a window holds for: line_numbers as sent (the line's bound and the liveness TTLs, which set
-- the rings' epoch widths, so a gateway with other TTLs, in a rolling change of them, never
-- writes into a key of another width's epoch), then, for a call with a schedule, '|' and the
-- schedule argument without the session's draw (a room with a schedule sends it on every
-- call, and main follows a call's schedule), then `tag`: '#' and the settings version whose
-- members the room keeps (WINDOW_VERSION, or WIDE_WINDOW_VERSION for a room that keeps whole
-- ids, see Settings: members). A window that main of another version opened is never answered
-- from (version 4's fast path would set its check-ins' bits at version 4's offsets, which this
-- version does not read, see Settings), nor the other way round (an older window names no
-- version); and one answered from looks its session up as main keeps it. Made of the argument
-- strings as they came: no number is formatted. nil for a schedule argument that is not one.
function F.window_key(numbers, schedule, tag)
  if not schedule then return numbers .. tag end
  local kept = string.match(schedule, '^(schedule:%d+:%d+:[01]):%d+$')
  if not kept then return nil end
  return numbers .. '|' .. kept .. tag
end

-- Opens, moves or closes the fast path's window after a run of main that answered: one SET
-- (with the TTL that ends it at till - 1 ms, so the key is gone from till on) or one DEL. Not
-- after an error reply: the only one main gives is for a settings key of another version,
-- which is not ours to write.
function F.keep_window(reply)
  if type(reply) == 'table' and reply.err then return end
  local till, since = F.window()
  local key = till and F.window_key(R.fast_numbers,
    R.scheduled_call and R.schedule_arg or nil, R.wide and WIDE_WINDOW_VERSION or WINDOW_VERSION)
  if key and till - 1 > R.now then
    redis.call('SET', R.k_fast, string.format('%d:%d:%d:', since, R.now, till) .. key,
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

-- The time of a fast enter that writes liveness bits: `now` (ARGV 1), or the server's TIME;
-- nil when it is not in the window (before its `from`: a clock that went back; at or after its `till`: the
-- script began in the window's last millisecond, and the bits would go to the next epoch's key,
-- which main makes first). Either is main's.
function F.fast_now(args, from, till)
  local now = call_time(args[1])
  if not now or now < from or now >= till then return nil end
  return now
end

-- The window as a call with `args` (and `schedule`, its schedule argument or nil) finds it:
-- since, from, till, the caller's line bound and whether the room keeps whole ids (see
-- Settings: members), or nil when there is none, or it is not for this call's line numbers,
-- schedule or version, or a number in it is beyond 2^53, or an injected clock is outside it.
-- The fast enter's and the batch's (batch.lua).
function F.open_window(keys, args, schedule)
  local window = redis.call('GET', keys[K_FAST])
  if not window then return nil end
  local since, from, till, held_for, max_queue = string.match(window, WINDOW)
  if not since then return nil end
  local wide = false
  if held_for ~= F.window_key(args[2], schedule, WINDOW_VERSION) then
    if held_for ~= F.window_key(args[2], schedule, WIDE_WINDOW_VERSION) then return nil end
    wide = true
  end
  -- Stored numbers, read by stored.lua's rule inline (the hottest call: a call of its reader
  -- per number would cost more than the window saves): the pattern takes digits only, and a
  -- number beyond 2^53 makes the window main's, which replaces it. max_queue is the caller's
  -- own, as held_for names it.
  since, from, till = tonumber(since), tonumber(from), tonumber(till)
  if since > STORED_MAX or from > STORED_MAX or till > STORED_MAX then return nil end
  if args[1] ~= '0' then
    -- An injected clock: the window by that clock (the key's expiry is the server's); one
    -- the call may not send (call.lua) is main's, which refuses it.
    local now = call_time(args[1])
    if not now or now < from or now >= till then return nil end
  end
  return since, from, till, tonumber(max_queue), wide
end

-- The fast path (see above): an enter in the settled state, with nothing built but what
-- it reads. Returns nil whenever main must answer instead, having written nothing (a number
-- taken is given back first); the writes it makes (INCR seq, ZADD line, the liveness bits) are
-- those main's enter makes, so a call that fails after one (a key of the wrong type) is
-- answered by main, repaired, as before. `args` are enter's (visitor.lua); `join`, whether the
-- call is a join.
function F.fast_enter(keys, args, join)
  -- Exactly an enter's arguments as the crate sends them (then the schedule, when the room has
  -- one); anything else is main's, which reads it or refuses it.
  local n = #args
  if (n ~= 5 and n ~= 6) or (args[4] ~= '0' and args[4] ~= '1') or #args[5] ~= ID_BYTES then
    return nil
  end
  local since, from, till, max_queue, wide = F.open_window(keys, args, args[6])
  if not since then return nil end
  -- The window holds only while the room is full by its slots (F.window): main would
  -- promote nobody.
  local s = F.member(args[5], wide)
  -- A slot to claim or extend: main's.
  if redis.call('ZSCORE', keys[3], s) or redis.call('ZSCORE', keys[4], s) then return nil end
  local k_seq, k_line = keys[1], keys[2]
  local waiting = redis.call('ZCARD', k_line)
  local now, place, position
  local full = waiting >= max_queue
  if full or not join then
    -- An enter looks for the caller's place first; so does anyone in a full line, where a
    -- newcomer gets {3} and a waiter their place, as main answers.
    place = redis.call('ZSCORE', k_line, s)
    if not place and full then return {REPLY.full, 0, waiting} end
  end
  if not place then
    -- A newcomer (or a join, which looks for the place only if the number finds one).
    local seq = redis.call('INCR', k_seq)
    -- Formatted once for ZCOUNT and ZADD: about 3 % of a fast join at 2M
    -- (bench: docs/benchmarks.md#each-shortcut-measured).
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
      if seq > since then return {REPLY.waiting, waiting, waiting, 0, seq} end
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
    -- A score that is no place (damage) is main's, which moves its waiter to the back.
    if not now or not F.is_place(place) then return nil end
    place = tonumber(place)
    position = redis.call('ZRANK', k_line, s) + 1
  end
  -- The check-in, into the current epoch of both rings, as F.set_bits makes it (the window
  -- ends with either epoch, so each key holds it).
  local _, queue_ttl, abandon = string.match(args[2], FAST_NUMBERS)
  queue_ttl, abandon = tonumber(queue_ttl), tonumber(abandon)
  local bits = F.bloom_bits(max_queue)
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
  if place < 0 then place = REPLY.drawn end
  return {REPLY.waiting, position, waiting, 0, place}
end
