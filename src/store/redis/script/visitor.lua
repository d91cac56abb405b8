-- The visitors' operations: enter (and join), poll, heartbeat, release. Each is a function of
-- its own (register.lua); the header above each body gives its KEYS, ARGV and reply. KEYS are
-- the room's 20 (keys.lua) for all; ARGV 1 to 4 are the call's (call.lua), the same for all.

-- <LIBRARY>_enter: a visitor's enter: a slot holder claims or extends their slot, a waiter is
-- checked in and told where they stand, a newcomer is let in (a free slot, nobody waiting, the
-- rate allowing) or joins the line. Answered by the fast path when it can (fast_path.lua).
-- Runs: register.lua's room call (fast path first), then line.lua F.claim_or_extend, F.touch,
--   F.banned, F.slots, F.lower_due, F.note_pre_arrival, F.next_seq; pace.lua F.take,
--   F.count_admission, F.waiting_reply; liveness.lua F.open_epochs, F.joined_since;
--   check_in.lua F.check_in.
-- KEYS: the room's 20 (keys.lua)
-- ARGV:
--   1 now
--   2 line_numbers
--   3 room_numbers
--   4 excused
--   5 session         the visitor's id, 16 raw bytes
--   6 schedule        optional (call.lua), its draw the session's
-- Reply: {1, expires_at_ms, 0} admitted; {2, position, waiting, paused (0|1), place} waiting,
-- place being the waiter's sequence number, or -1 for a registrant with a draw score (no
-- admission counts and no pace: the ring read is the costly part, and the gateway has them
-- from its snapshot; with them a poll would cost 2.4 times as much, a fast join 6 times at 2M,
-- bench: docs/benchmarks.md#each-shortcut-measured); {3, 0, waiting} full; {6, 0, 0} closed;
-- {7, 0, 0} banned; {11, opens_at_ms, 0} scheduled: registered in the pre-queue (or already),
-- not open yet.
--
-- <LIBRARY>_join: an enter by a visitor whose cookie has no place (the gateway knows of
-- none): the fast path takes their number first and looks for their place only when the
-- number finds one; main answers it as enter.
-- Runs: enter's, the fast path's join first (fast_path.lua F.fast_enter).
-- KEYS: the room's 20 (keys.lua)
-- ARGV:
--   1 now
--   2 line_numbers
--   3 room_numbers
--   4 excused
--   5 session         the visitor's id, 16 raw bytes
--   6 schedule        optional (call.lua), its draw the session's
-- Reply: as enter's.
function OPERATIONS.enter()
  local r = F.claim_or_extend()
  if r then return r end
  local score = redis.call('ZSCORE', R.k_line, R.s)
  if score then return F.touch(score) end
  if not R.open or R.after_closing then return {REPLY.closed, 0, 0} end
  if F.banned(R.s) then return {REPLY.banned, 0, 0} end
  local waiting = redis.call('ZCARD', R.k_line)
  if R.before_opening then
    if waiting >= R.max_queue then return {REPLY.full, 0, waiting} end
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
    return {REPLY.scheduled, R.opens_at, 0}
  end
  if not R.paused and waiting == 0 and R.capacity - F.slots() > 0 and F.take() then
    redis.call('ZADD', R.k_active, R.now + R.active_ttl, R.s)
    F.lower_due(R.now + R.active_ttl)
    F.count_admission()
    return {REPLY.admitted, R.now + R.active_ttl, 0}
  end
  if waiting >= R.max_queue then return {REPLY.full, 0, waiting} end
  -- The join is the newcomer's check-in: alive by it (joined since) when the epochs were
  -- opened before their number was taken, else (a seq that went back) by their bits.
  F.open_epochs()
  local seq = F.next_seq()
  redis.call('ZADD', R.k_line, seq, R.s)
  if not F.joined_since(seq) then F.check_in({R.s}) end
  return F.waiting_reply(waiting + 1, waiting + 1, seq)
end

-- <LIBRARY>_poll: a waiter's check-in: told where they stand, or that their slot is granted.
-- Runs: register.lua's room call, then line.lua F.has_slot, F.touch, F.banned.
-- KEYS: the room's 20 (keys.lua)
-- ARGV:
--   1 now
--   2 line_numbers
--   3 room_numbers
--   4 excused
--   5 session         the visitor's id, 16 raw bytes
--   6 schedule        optional, for a room with a schedule (call.lua)
-- Reply: as enter's, and {0, 0, 0} for a session with no place and no slot.
function OPERATIONS.poll()
  local exp = F.has_slot(R.s)
  if exp then return {REPLY.admitted, tonumber(exp), 0} end
  local score = redis.call('ZSCORE', R.k_line, R.s)
  if score then return F.touch(score) end
  if F.banned(R.s) then return {REPLY.banned, 0, 0} end
  if not R.open or R.after_closing then return {REPLY.closed, 0, 0} end
  return {REPLY.unknown, 0, 0}
end

-- <LIBRARY>_heartbeat: a slot holder's claim or extension of their slot.
-- Runs: register.lua's room call, then line.lua F.claim_or_extend, F.reclaim.
-- KEYS: the room's 20 (keys.lua)
-- ARGV:
--   1 now
--   2 line_numbers
--   3 room_numbers
--   4 excused
--   5 session         the visitor's id, 16 raw bytes
--   6 schedule        optional, for a room with a schedule (call.lua)
-- Reply: {1, expires_at_ms, 0} admitted (a slot held, or claimed again while the slots are
-- rebuilt: main.lua, Bad days), {6, 0, 0} closed, {0, 0, 0} no slot.
function OPERATIONS.heartbeat()
  return F.claim_or_extend() or F.reclaim() or {REPLY.unknown, 0, 0}
end

-- <LIBRARY>_release: frees the session's slot, or else its place, and ends its ticket record.
-- Runs: register.lua's room call, then line.lua F.free_session.
-- KEYS: the room's 20 (keys.lua), then 21 ticket (keys.lua)
-- ARGV:
--   1 now
--   2 line_numbers
--   3 room_numbers
--   4 excused
--   5 session         the visitor's id, 16 raw bytes
--   6 schedule        optional, for a room with a schedule (call.lua)
-- Reply: {4, released (0|1), 0}.
function OPERATIONS.release()
  F.free_session()
  return {REPLY.released, R.released, 0}
end
