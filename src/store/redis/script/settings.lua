-- The live settings: read by every call (one HMGET), upgraded in place from older versions.
--
-- Settings: the operator's live values, read by every call in the same step as the admission
-- they govern. Paused: no promotion, no direct admission. Closed: {6} for everyone without a
-- slot (a waiter's check-in is still recorded: they keep their place for a reopening), no
-- promotion, claimed slots not extended (a granted one is still claimed). Every field is read
-- as a stored integer in its range (stored.lua): capacity 1 .. 2^32 - 1, rate 0 .. 2^32 - 1,
-- paused and open 0 or 1, times, epochs and sequence numbers whole numbers within 2^53; a
-- damaged field (not such a number: 'inf', 'nan', '2.5', '0x10', '', out of range) reads as
-- missing, and the four settings are then rewritten with their defaults. A damaged `v` is a
-- lost key's (see mark_orphan_bitmaps_lost). A settings key of a version this library cannot
-- read (1, or newer than SETTINGS_VERSION without `vmin`, below) is refused with the error
-- WRSETTINGS, before any write: a newer crate's fields may change who is admitted, so guessing
-- is worse than stopping (the crate answers it as a busy store: nobody is let in by it, and
-- nobody loses their place). Newer versions whose changes are additive (new fields only, every
-- field this version knows kept in its meaning) say so with `vmin`, the oldest settings
-- version that reads their key: a key of version v > SETTINGS_VERSION with vmin <=
-- SETTINGS_VERSION is read as this version's, its other fields left alone and its `v` never
-- lowered (written back as found). This version's own changes are additive, so it writes no
-- `vmin` (a reader of version 5 reads it). Version 2
-- keeps members as 16 raw bytes (version 1 had hex and a `seen` zset): a room of version 1 is
-- refused; upgrade between sales, or use a new key prefix. Version 3 (`twr_room_v3`): a
-- newcomer's join sets no liveness bits (see Liveness: joined since), which version 2's
-- library would read as silence. Version 4 (libraries `twr_room_v4` and `twr_room_v5`,
-- whose sync takes the check-ins a gateway already made apart: the data are the same): the fast path's
-- window lives in its own key (KEYS[20]) instead of settings fields, which version 3's main
-- would neither move nor close. Version 5 (libraries `twr_room_v6`, `twr_room_v7`, whose sync
-- takes a turn horizon, `twr_room_v8`, one function per operation, `twr_room_v9`, with the
-- capacity controller's functions and its record, a key of its own, auto.lua, and
-- `twr_room_v10`, whose sync says which checkpoint waiters are silent: the settings' data
-- are the same, see Liveness; this one reads it too, see Settings: members): each liveness bitmap
-- is BLOOM_SLACK bits under the power of two it was (see Liveness), so every session's bits sit
-- at other offsets, which version 4's library would read as silence. So a room of version 2, 3
-- or 4 is upgraded in place to version 5 by its first call here (version 3's window fields deleted, and
-- every epoch a ring field names marked lost: everyone counts as seen in the older bitmaps
-- until each ring comes round, and nobody is skipped or swept for them), and from then on the
-- older libraries (loaded under their own names) refuse it: in a rolling deploy the gateways
-- not yet upgraded answer by their fail policy, never sweeping anyone and never answering from
-- a window they do not keep.
--
-- Settings: members. Version 6 (this library, `twr_room_v11`) keeps a session in line, among
-- the slots and the bans as its id's first MEMBER_BYTES bytes (keys.lua), where version 5 kept
-- its whole 16: Redis holds the shorter member in half the memory (16 bytes less for each
-- waiter, about an eighth of a waiter's). A room's members are not rewritten: a room of
-- version 5 (or 2 to 4, upgraded in place to 5) keeps its whole ids and its version, and this
-- library reads it as it is (R.wide), so gateways of version 5's libraries share it with this
-- one; a room this library makes is of version 6, which version 5's libraries refuse. A key
-- found without its version, or saying 2 to 5, is taken for what the room holds (held_members:
-- whole ids are version 5, short ones 6, and a room that holds nobody keeps the version its
-- key says, 6 for none): a settings key lost from a room of version 6 and written again by an
-- earlier library (with its own version and no look at the members) is taken back by the next
-- call here, and that library's gateways refused again. Until then they answer from the room
-- as theirs (a waiter not found, placed again by their whole id: a place that, granted, is
-- never claimed and holds a slot for a grant's time; never a slot beyond capacity, which
-- counts members), and so may this library's fast path from a window such a gateway opened.
-- A newer version's key is read with whole ids if its `vmin` names version 5 (a reader of
-- version 5 reads it), with short ones if it names 6. The fast path's window names the
-- version whose members the room keeps, so that a call answered from it looks its session up
-- as main keeps it.

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
      local e = stored_integer(held[i], -STORED_MAX, STORED_MAX)
      if e and e > 0 then
        lost[#lost + 1], lost[#lost + 2] = fields[i], string.format('%d', -e)
      end
    end
    if #lost > 0 then redis.call('HSET', R.k_settings, unpack(lost)) end
    local current = stored_integer(v[RING_FIELD_AT + n - 1], -STORED_MAX, STORED_MAX)
    if current and current > 0 then v[RING_FIELD_AT + n - 1] = string.format('%d', -current) end
  end
end

-- The refusal of a settings key of version `ver`, which this library cannot read.
function F.settings_refused(ver)
  return redis.error_reply('WRSETTINGS room settings of version ' .. string.format('%d', ver)
    .. ', this crate reads versions ' .. WIDE_VERSION .. ' and ' .. SETTINGS_VERSION
    .. ' (and a newer one whose vmin names one)')
end

-- A session's member in a room's sorted sets (see Settings: members): its id's first
-- MEMBER_BYTES bytes, or the whole id in a room that keeps them whole (`wide`).
function F.member(id, wide)
  if wide then return id end
  return string.sub(id, 1, MEMBER_BYTES)
end

-- The members a room holds, by the first and the last of the line, the slots and the bans:
-- 'short' if one is short (no earlier library writes one: the room is of version 6, whatever
-- whole ids an earlier library placed since), else 'whole' (longer than MEMBER_BYTES: whole
-- ids), or nil when it holds nobody. Read for a room whose key says version 5 or older (until
-- the key says its members were found whole) or says none (see load_settings): at most eight
-- ZRANGEs of one member. An earlier library places its newcomers at an end (the line's tail, the
-- slots' latest expiry), so the members of a room relabelled by it are told by their ends.
function F.held_members()
  local whole = false
  for _, key in ipairs({R.k_line, R.k_active, R.k_granted, R.k_banned}) do
    for _, at in ipairs({0, -1}) do
      local member = redis.call('ZRANGE', key, at, at)[1]
      if member then
        if #member <= MEMBER_BYTES then return 'short' end
        whole = true
      end
    end
  end
  return whole and 'whole' or nil
end

-- Reads the live settings, writing the defaults for a missing or damaged key or field. Returns
-- an error reply for a key of a version this library cannot read, else nil.
function F.load_settings()
  local v = redis.call('HMGET', R.k_settings, unpack(R.SETTINGS_FIELDS))
  local ver = stored_integer(v[1], 1, STORED_MAX)
  -- The version written back with the settings: this one's, version 5's (a room whose members
  -- are whole ids, kept so), or a newer one's that this version reads (never lowered); and
  -- whether the room keeps its members whole (see Settings: members).
  R.version, R.wide = SETTINGS_VERSION, false
  if ver == nil or (ver >= 2 and ver <= WIDE_VERSION) then
    -- A new room, a lost (or damaged) key, or one of version 2 to 5: the members the room
    -- holds decide, whatever the key says. A settings key lost from a room of this version and
    -- written again by an earlier library (with its own version) is thus taken back, and its
    -- gateways refused again, before a whole id is looked for where short ones are kept. An
    -- older key of a room that holds nobody keeps its version.
    -- A key of version 5 that says its members were found whole keeps them so: only the loss
    -- of the key (and the field with it) relabels a room, and no call of this library makes a
    -- short member in a room it reads as whole.
    local held = (ver == WIDE_VERSION and v[WHOLE_FIELD_AT] == '1') and 'whole'
      or F.held_members()
    R.wide = held == 'whole' or (held == nil and ver ~= nil)
    if R.wide then R.version = WIDE_VERSION end
    if held == 'whole' and v[WHOLE_FIELD_AT] ~= '1' then
      redis.call('HSET', R.k_settings, 'whole', '1')
    end
    if ver and ver < WIDE_VERSION then
      -- Versions 2 to 4 (see Settings): upgraded in place. Their fields are all read the
      -- same; version 2's epochs have no first sequence number, so until each is made again
      -- its joins set bits; version 3's window fields go (the window is the `fast` key's now,
      -- closed); and all their bitmaps are of the older size: their epochs are marked lost.
      redis.call('HDEL', R.k_settings, 'fast_from', 'fast_until', 'fast_for', 'fast_seq')
      F.mark_rings_lost(v)
    end
    if ver and ver ~= R.version then
      -- A `vmin` left over names readers of another version's members.
      redis.call('HSET', R.k_settings, 'v', R.version)
      redis.call('HDEL', R.k_settings, 'vmin')
    end
  elseif ver > SETTINGS_VERSION then
    -- A newer version's key read by a version 5 reader keeps its members whole.
    local vmin = stored_integer(redis.call('HGET', R.k_settings, 'vmin'), 1, SETTINGS_VERSION)
    if not vmin then return F.settings_refused(ver) end
    R.version, R.wide = ver, vmin <= WIDE_VERSION
  elseif ver ~= SETTINGS_VERSION then
    return F.settings_refused(ver)
  end
  if not R.wide and R.op ~= 'sync' then R.s = F.member(R.s) end
  local c, r = stored_integer(v[2], 1, U32_MAX), stored_integer(v[3], 0, U32_MAX)
  local p, o = stored_integer(v[4], 0, 1), stored_integer(v[5], 0, 1)
  if ver == nil or c == nil or r == nil or p == nil or o == nil then
    -- A new room, a lost key, or a damaged field: the defaults where nothing valid is held.
    c, r, p, o = c or R.default_capacity, r or R.default_rate, p or 0, o or 1
    redis.call('HSET', R.k_settings, 'v', R.version, 'capacity', c, 'rate', r, 'paused', p,
      'open', o)
    -- Without a version, a `vmin` left over is no newer version's.
    if ver == nil then redis.call('HDEL', R.k_settings, 'vmin') end
  end
  R.capacity, R.rate, R.paused, R.open = c, r, p == 1, o == 1
  R.born, R.moved = stored_integer(v[6], 0, STORED_MAX), stored_integer(v[7], 0, STORED_MAX)
  R.due, R.bans = stored_integer(v[11], 0, STORED_MAX), stored_integer(v[12], 0, STORED_MAX)
  R.noted = stored_integer(v[13], 0, STORED_MAX)
  -- A rebuild of the slots under way (main.lua, Bad days); one past is over. One that cannot
  -- be read, or later than any could run (damage), may be one under way whose holders are
  -- still inside on their tokens: it starts again now, never ends early (ending it would hand
  -- their capacity to the line).
  R.rebuild = stored_integer(v[18], 0, STORED_MAX)
  if R.rebuild and R.rebuild <= R.now then
    R.rebuild = nil
    redis.call('HDEL', R.k_settings, 'rebuild')
  elseif v[18] and (not R.rebuild or R.rebuild > R.now + LIMIT_TTL) then
    R.rebuild = R.now + math.max(R.active_ttl, R.grant_ttl)
    redis.call('HSET', R.k_settings, 'rebuild', string.format('%d', R.rebuild))
  end
  for n, rg in ipairs(R.rings) do
    F.read_epoch(rg, rg.current % rg.len,
      stored_integer(v[RING_FIELD_AT + n - 1], -STORED_MAX, STORED_MAX),
      stored_integer(v[FROM_FIELD_AT + n - 1], 0, STORED_MAX))
  end
  if ver == nil then F.mark_orphan_bitmaps_lost() end
  if R.bans == nil then
    -- Not known (a new room, or the field lost): the latest end of any ban, looked up once (a
    -- score of 'inf', or beyond 2^53 ms, as the end of time).
    local top = redis.call('ZRANGE', R.k_banned, -1, -1, 'WITHSCORES')[2]
    R.bans = 0
    if top then
      R.bans = math.max(0, math.min(math.ceil(stored_score(top) or STORED_MAX), STORED_MAX))
    end
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
  local kept_opens = stored_integer(v[8], 0, STORED_MAX)
  local kept_closes, kept_keep = stored_integer(v[9], 0, STORED_MAX), v[10]
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
  R.cap_before, R.cap_at = stored_integer(v[1], 1, U32_MAX), stored_integer(v[2], 0, STORED_MAX)
  R.paused_at = stored_integer(v[3], 0, STORED_MAX)
  R.pause_start = stored_integer(v[4], 0, STORED_MAX)
  R.pause_end = stored_integer(v[5], 0, STORED_MAX)
  -- A score in line as Redis wrote it, or '-inf' (at the head); anything else starts at the head.
  R.cursor = v[6]
  if R.cursor ~= '-inf' and stored_score(R.cursor) == nil then R.cursor = '-inf' end
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
        -- The abandon ring's next epoch's key may hold that epoch already, written early (see
        -- Liveness: early check-ins) and counted on by the gateways that wrote it: taken as
        -- that epoch, lost, it is kept and written into then, never deleted.
        if rg == R.gone_ring and i == (last + 1) % rg.len then e = last + 1 end
        lost[#lost + 1], lost[#lost + 2] = RING_FIELDS[rg.name][i], string.format('%d', -e)
        rg.held[i], rg.from[i], rg.known[i] = -e, nil, true
        if rg == R.turn then rg.first_made[i] = nil end
      end
    end
    if #lost > 0 then redis.call('HSET', R.k_settings, unpack(lost)) end
  end
end
