-- Main: every operation read from the call's state, and the repair of a bad day's keys.
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
