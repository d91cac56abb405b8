-- The visitors' operations: enter (and join), poll, heartbeat, release. Each is a function of
-- its own (register.lua); the header above each body gives its KEYS, ARGV and reply. KEYS are
-- the room's 20 (keys.lua) for all; ARGV 1 to 4 are the call's (call.lua), the same for all.

-- twr_room_v8_enter: a visitor's enter: a slot holder claims or extends their slot, a waiter is
-- checked in and told where they stand, a newcomer is let in (a free slot, nobody waiting, the
-- rate allowing) or joins the line. Answered by the fast path when it can (fast_path.lua).
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
-- twr_room_v8_join: an enter by a visitor whose cookie has no place (the gateway knows of
-- none): the fast path takes their number first and looks for their place only when the
-- number finds one; main answers it as enter.
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
end

-- twr_room_v8_poll: a waiter's check-in: told where they stand, or that their slot is granted.
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
  if exp then return {1, tonumber(exp), 0} end
  local score = redis.call('ZSCORE', R.k_line, R.s)
  if score then return F.touch(score) end
  if F.banned(R.s) then return {7, 0, 0} end
  if not R.open or R.after_closing then return {6, 0, 0} end
  return {0, 0, 0}
end

-- twr_room_v8_heartbeat: a slot holder's claim or extension of their slot.
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
  return F.claim_or_extend() or F.reclaim() or {0, 0, 0}
end

-- twr_room_v8_release: frees the session's slot, or else its place, and ends its ticket record.
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
  return {4, R.released, 0}
end
