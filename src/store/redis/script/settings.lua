-- The live settings: read by every call (one HMGET), upgraded in place from older versions.
--
-- Settings: the operator's live values, read by every call in the same step as the admission
-- they govern. Paused: no promotion, no direct admission. Closed: {6} for everyone without a
-- slot (a waiter's check-in is still recorded: they keep their place for a reopening), no
-- promotion, claimed slots not extended (a granted one is still claimed). A settings key of
-- another version is refused with an error (a newer crate's fields may change who is admitted;
-- guessing is worse than stopping); a damaged field is rewritten with its default. Version 2
-- keeps members as 16 raw bytes (version 1 had hex and a `seen` zset): a room of version 1 is
-- refused; upgrade between sales, or use a new key prefix. Version 3 (`twr_room_v3`): a
-- newcomer's join sets no liveness bits (see Liveness: joined since), which version 2's
-- library would read as silence. Version 4 (libraries `twr_room_v4` and `twr_room_v5`,
-- whose sync takes the check-ins a gateway already made apart: the data are the same): the fast path's
-- window lives in its own key (KEYS[20]) instead of settings fields, which version 3's main
-- would neither move nor close. Version 5 (libraries `twr_room_v6`, `twr_room_v7`, whose sync
-- takes a turn horizon, and this one, `twr_room_v8`, one function per operation: the data are
-- the same, see Liveness): each liveness bitmap
-- is BLOOM_SLACK bits under the power of two it was (see Liveness), so every session's bits sit
-- at other offsets, which version 4's library would read as silence. So a room of version 2, 3
-- or 4 is upgraded in place by its first call here (version 3's window fields deleted, and
-- every epoch a ring field names marked lost: everyone counts as seen in the older bitmaps
-- until each ring comes round, and nobody is skipped or swept for them), and from then on the
-- older libraries (loaded under their own names) refuse it: in a rolling deploy the gateways
-- not yet upgraded answer by their fail policy, never sweeping anyone and never answering from
-- a window they do not keep.

-- Every epoch the rings' fields name, marked lost (-e), for a room of an older version (see
-- Settings): its bitmaps are of another size, so their bits sit at other offsets than this
-- version reads. Everyone then counts as seen in those epochs (nobody skipped or swept for
-- them), and each bitmap is made again at this version's size when its ring comes round.
-- `v` is the one HMGET's reply, whose current epochs' fields are brought up to it.
function F.mark_rings_lost(v)
  for n, rg in ipairs(R.rings) do
    local fields, lost = {}, {}
    for i = 0, rg.len - 1 do fields[i + 1] = RING_FIELDS[rg.name][i] end
    local held = redis.call('HMGET', R.k_settings, unpack(fields))
    for i = 1, rg.len do
      local e = tonumber(held[i])
      if e and e > 0 then
        lost[#lost + 1], lost[#lost + 2] = fields[i], string.format('%d', -e)
      end
    end
    if #lost > 0 then redis.call('HSET', R.k_settings, unpack(lost)) end
    local current = tonumber(v[RING_FIELD_AT + n - 1])
    if current and current > 0 then v[RING_FIELD_AT + n - 1] = string.format('%d', -current) end
  end
end

-- Reads the live settings, writing the defaults for a missing key or field. Returns an error
-- reply for a key of another version, else nil.
function F.load_settings()
  local v = redis.call('HMGET', R.k_settings, unpack(R.SETTINGS_FIELDS))
  local ver = tonumber(v[1])
  if ver == 2 or ver == 3 or ver == 4 then
    -- Versions 2 to 4 (see Settings): upgraded in place. Their fields are all read the same;
    -- version 2's epochs have no first sequence number, so until each is made again its joins
    -- set bits; version 3's window fields go (the window is the `fast` key's now, closed); and
    -- all their bitmaps are of the older size: their epochs are marked lost.
    redis.call('HDEL', R.k_settings, 'fast_from', 'fast_until', 'fast_for', 'fast_seq')
    F.mark_rings_lost(v)
    redis.call('HSET', R.k_settings, 'v', SETTINGS_VERSION)
    ver = SETTINGS_VERSION
  end
  if v[1] and ver ~= SETTINGS_VERSION then
    return redis.error_reply('WRSETTINGS room settings of version ' .. tostring(v[1]) ..
      ', this crate reads version ' .. SETTINGS_VERSION)
  end
  local c, r = tonumber(v[2]), tonumber(v[3])
  local p, o = tonumber(v[4]), tonumber(v[5])
  if ver == nil or c == nil or c < 1 or r == nil or r < 0 or (p ~= 0 and p ~= 1)
      or (o ~= 0 and o ~= 1) then
    -- A new room, a lost key, or a damaged field: the defaults where nothing valid is held.
    if c == nil or c < 1 then c = R.default_capacity end
    if r == nil or r < 0 then r = R.default_rate end
    if p ~= 0 and p ~= 1 then p = 0 end
    if o ~= 0 and o ~= 1 then o = 1 end
    redis.call('HSET', R.k_settings, 'v', SETTINGS_VERSION, 'capacity', c, 'rate', r,
      'paused', p, 'open', o)
  end
  R.capacity, R.rate, R.paused, R.open = c, r, p == 1, o == 1
  R.born, R.moved = tonumber(v[6]), tonumber(v[7])
  R.due, R.bans, R.noted = tonumber(v[11]), tonumber(v[12]), tonumber(v[13])
  for n, rg in ipairs(R.rings) do
    local i = rg.current % rg.len
    rg.held[i], rg.known[i] = tonumber(v[RING_FIELD_AT + n - 1]), true
    rg.from[i] = tonumber(v[FROM_FIELD_AT + n - 1])
  end
  if not v[1] then F.mark_orphan_bitmaps_lost() end
  if R.bans == nil then
    -- Not known (a new room, or the field lost): the latest end of any ban, looked up once.
    R.bans = tonumber(redis.call('ZRANGE', R.k_banned, -1, -1, 'WITHSCORES')[2]) or 0
    redis.call('HSET', R.k_settings, 'bans', string.format('%d', R.bans))
  end
  if R.born == nil or R.born > R.now then
    -- When the room was first seen (or its settings key was lost): what its pace is measured
    -- over. A clock that went back counts the room as born now, its first movement to come.
    R.born, R.moved = R.now, nil
    redis.call('HSET', R.k_settings, 'born', R.born)
    redis.call('HDEL', R.k_settings, 'early', 'moved')
  end
  -- The schedule: kept from the calls that come with it (written only when it changes), and
  -- followed by a call without one while the kept opening is ahead.
  local kept_opens, kept_closes, kept_keep = tonumber(v[8]), tonumber(v[9]), v[10]
  if R.scheduled_call then
    if kept_opens ~= R.opens_at or kept_closes ~= (R.closes_at or 0)
        or kept_keep ~= (R.keep_line and '1' or '0') then
      redis.call('HSET', R.k_settings, 'opens_at', R.opens_at, 'closes_at', R.closes_at or 0,
        'keep_line', R.keep_line and 1 or 0)
    end
  elseif kept_opens and kept_opens > R.now then
    R.opens_at, R.keep_line = kept_opens, kept_keep ~= '0'
    R.closes_at = kept_closes
    if R.closes_at == 0 then R.closes_at = nil end
    F.apply_schedule()
  end
  return nil
end

-- The settings only the pace, the sweep and configure need: the capacity's last change, the
-- pauses, the sweep's cursor.
function F.load_more()
  local v = redis.call('HMGET', R.k_settings, 'cap_before', 'cap_at', 'paused_at', 'pause_start',
    'pause_end', 'cursor')
  R.cap_before, R.cap_at = tonumber(v[1]), tonumber(v[2])
  R.paused_at, R.pause_start, R.pause_end = tonumber(v[3]), tonumber(v[4]), tonumber(v[5])
  R.cursor = v[6]
  if R.cursor ~= '-inf' and tonumber(R.cursor) == nil then R.cursor = '-inf' end
end

-- The settings key found without its version: lost (evicted, deleted, repaired) or a new room.
-- Every ring key that exists then holds check-ins of an epoch that no field names any more, and
-- the first numbers that vouched for the waiters without bits in it (newcomers who joined
-- since, waiters behind a sync's turn horizon) are gone with the key; its bits alone would have
-- them skipped or swept, and a promotion or a sweep may come before any write (which would
-- mark it lost, ring_key_for). So each is marked lost now, as the latest epoch its index can
-- hold by check_in_at (-e): everyone counts as seen in it while that epoch counts, and written
-- into in that epoch it is kept (it may hold that epoch's check-ins). A new room has no ring
-- keys: nothing to mark.
function F.mark_orphan_bitmaps_lost()
  for _, rg in ipairs(R.rings) do
    local last = math.floor(R.check_in_at / rg.width)
    local lost = {}
    for i = 0, rg.len - 1 do
      if redis.call('EXISTS', R.keys[rg.first + i]) == 1 then
        local e = last - (last - i) % rg.len
        lost[#lost + 1], lost[#lost + 2] = RING_FIELDS[rg.name][i], string.format('%d', -e)
        rg.held[i], rg.from[i], rg.known[i] = -e, nil, true
        if rg == R.turn then rg.first_made[i] = nil end
      end
    end
    if #lost > 0 then redis.call('HSET', R.k_settings, unpack(lost)) end
  end
end
