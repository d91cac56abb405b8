-- The operator's operations and the gateways' figures: stats, configure, admit_next, ban.
-- Each is a function of its own (register.lua); the header above each body gives its KEYS,
-- ARGV and reply. KEYS are the room's 20 (keys.lua); ARGV 1 to 4 are the call's (call.lua).

-- <LIBRARY>_stats: the room's counts and pace, for the operator and the wait estimate.
-- Runs: register.lua's room call, then line.lua F.oldest_wait; pace.lua F.history,
--   F.silent_among, F.append_pace; checkpoints.lua F.checkpoints.
-- KEYS: the room's 20 (keys.lua)
-- ARGV:
--   1 now
--   2 line_numbers
--   3 room_numbers
--   4 excused
--   5 history_minutes minutes of admissions history in the reply
--   6 schedule        optional, for a room with a schedule (call.lua)
-- Reply: {5, admitted, granted, waiting, last_minute, last_five_minutes, capacity, rate, paused,
-- open, oldest wait in ms (-1 = nobody waits), admissions of each of the last history_minutes
-- minutes, oldest first ..., pace...}, where pace (append_pace, pace.lua) is: admissions in the
-- current bucket, ms into it, ms since the room was first seen, capacity, skipped in the last
-- minute, skipped in five, skipped in the current bucket, capacity before its last change, ms
-- since that change (-1: never), ms since the last ended pause began and ended (-1, -1: none),
-- admissions in each of the last five minutes (most recent first), waiters not alive by the
-- turn rule (estimated, see sync.lua; 0 while silence is excused), queue_ttl, ms since the
-- room's first movement (-1: not yet), the live admission rate per second (0: unlimited), the
-- slots held (claimed and granted: people inside, for the wait after a cut).
function OPERATIONS.stats()
  local waiting = redis.call('ZCARD', R.k_line)
  local out = {REPLY.stats, redis.call('ZCARD', R.k_active), redis.call('ZCARD', R.k_granted),
    waiting, 0, 0, R.capacity, R.rate, R.paused and 1 or 0,
    R.open and 1 or 0, F.oldest_wait()}
  for _, n in ipairs(F.history(tonumber(R.args[5]))) do out[#out + 1] = n end
  out[5], out[6] = F.append_pace(out, F.silent_among(F.checkpoints(waiting), waiting))
  return out
end

-- The live capacity set to `c` (configure's, and the controller's apply, auto.lua), written
-- with F.write_settings: the capacity before it, and when, remembered for the wait estimate
-- (the pace measured before the change was at the old capacity).
function F.write_capacity(c)
  if c ~= R.capacity then
    redis.call('HSET', R.k_settings, 'cap_before', R.capacity, 'cap_at', R.now)
    R.capacity = c
  end
end

-- The live settings written back as they now are (R's), with the version they are read by.
function F.write_settings()
  redis.call('HSET', R.k_settings, 'v', R.version, 'capacity', R.capacity, 'rate', R.rate,
    'paused', R.paused and 1 or 0, 'open', R.open and 1 or 0)
end

-- <LIBRARY>_configure: the operator's change of the live settings.
-- Runs: register.lua's room call, then operator.lua F.write_capacity, F.write_settings;
--   line.lua F.settings_reply, F.promote.
-- KEYS: the room's 20 (keys.lua)
-- ARGV:
--   1 now
--   2 line_numbers
--   3 room_numbers
--   4 excused
--   5 capacity        0 = unchanged
--   6 rate            admissions per second, -1 = unchanged, 0 = none
--   7 paused          -1 = unchanged, 0, 1
--   8 open            -1 = unchanged, 0, 1
--   9 end_slots       on closing, end the slots too (0|1)
--   10 schedule        optional, for a room with a schedule (call.lua)
-- Reply: {8, capacity, rate, paused, open, and the same four before the change}.
function OPERATIONS.configure()
  local c, r = tonumber(R.args[5]), tonumber(R.args[6])
  local p, o = tonumber(R.args[7]), tonumber(R.args[8])
  local before = F.settings_reply(REPLY.settings)
  if c > 0 then F.write_capacity(c) end
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
  F.write_settings()
  if o == 0 and R.args[9] == '1' then
    redis.call('DEL', R.k_active, R.k_granted)
  end
  -- A raised capacity or a resume lets people in now, not at the next call.
  F.promote()
  local out = F.settings_reply(REPLY.settings)
  for i = 2, 5 do out[#out + 1] = before[i] end
  return out
end

-- <LIBRARY>_admit_next: the operator lets the next waiters in, skipping the silent.
-- Runs: register.lua's room call, then line.lua F.is_place, F.replace_in_line, F.has_slot,
--   F.lower_due; liveness.lua F.alive; pace.lua F.count_skip, F.count_admission.
-- KEYS: the room's 20 (keys.lua)
-- ARGV:
--   1 now
--   2 line_numbers
--   3 room_numbers
--   4 excused
--   5 count           how many to let in
--   6 schedule        optional, for a room with a schedule (call.lua)
-- Reply: {9, admitted}.
function OPERATIONS.admit_next()
  local want = tonumber(R.args[5])
  -- Nobody is admitted before the opening, not even by an operator.
  if R.before_opening then want = 0 end
  local admitted, steps = 0, 0
  while admitted < want and steps < 2 * want do
    local at = redis.call('ZRANGE', R.k_line, 0, 0, 'WITHSCORES')
    local head = at[1]
    if not head then break end
    steps = steps + 1
    if not F.is_place(at[2]) then
      -- Damage: no one's turn (see F.promote); its waiter goes to the back.
      F.replace_in_line(head)
    else
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
  end
  return {REPLY.admitted_next, admitted}
end

-- <LIBRARY>_ban: bans the session until a time, freeing its slot or place and ending its
-- ticket record.
-- Runs: register.lua's room call, then line.lua F.free_session.
-- KEYS: the room's 20 (keys.lua), then 21 ticket (keys.lua)
-- ARGV:
--   1 now
--   2 line_numbers
--   3 room_numbers
--   4 excused
--   5 session         the visitor's id, 16 raw bytes
--   6 until_ms        the end of the ban in ms
--   7 schedule        optional, for a room with a schedule (call.lua)
-- Reply: {10, had a place or slot (0|1)}.
function OPERATIONS.ban()
  local until_ms = tonumber(R.args[6])
  redis.call('ZREMRANGEBYSCORE', R.k_banned, '-inf', R.now)
  if until_ms > R.now then
    redis.call('ZADD', R.k_banned, until_ms, R.s)
    if R.bans == nil or until_ms > R.bans then
      R.bans = until_ms
      redis.call('HSET', R.k_settings, 'bans', string.format('%d', until_ms))
    end
  end
  F.free_session()
  return {REPLY.banned_now, R.released}
end
