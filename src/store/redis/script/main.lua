-- Main: the steps every operation takes, and the repair of a bad day's keys.
--
-- Bad days: the keys are the room's own, and a lost or damaged one (eviction, a stray DEL, a hand
-- edit) must never make the room fail on every call. The script repairs or skips, and answers:
--   - a missing key is an empty one (Redis semantics);
--   - a key of the wrong type, or a seq that is not a stored integer: the first command that
--     trips on it raises; the whole run is caught (pcall), `repair()` deletes every key of the
--     wrong type and a damaged seq, and the run starts again once (no cost on the normal
--     path). The first run's writes stay, but every step is idempotent (housekeeping, "ensure"
--     writes) and the promotion budget is shared by both runs, so the work stays bounded;
--   - `active` or `granted` of the wrong type (damaged, not lost: a lost key cannot be told
--     from an empty one) held slots whose holders may be inside with their admission tokens:
--     their capacity is not handed to the line. For the longest lifetime of a slot or grant
--     (`rebuild`, a settings field) the room counts as full: nobody is promoted or let in
--     directly, and a heartbeat that finds no slot (a holder's: the gateway sends one only
--     for a valid admission token) claims one again while fewer than capacity are held. The
--     slots are thus rebuilt from their holders' own check-ins; a holder who does not come
--     back within the window frees their capacity when it ends;
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
--   - a number that is not one as the scripts write it ('inf', 'nan', '2.5', '0x10', '', out
--     of its range: stored.lua) reads as missing, never as what Lua's tonumber makes of it;
--   - a budget with a missing or damaged field: counts as full (at most one second's worth
--     of admissions above the rate, once);
--   - a damaged admission count or tag: counts as zero, and is overwritten;
--   - a slot whose expiry lies beyond 2^53 ms ('inf'): dropped as expired (it would never free
--     itself);
--   - a lost `due`, `cursor`, `bans` or `noted`: housekeeping runs, the sweep starts at the
--     head, bans are looked up, the arrival is noted (each the safe way).

-- A run of the call's operation: the settings read, the steps every operation takes first
-- (housekeeping before every answer: slots expired when due, the sweep (sync only), the
-- promotions), then the operation's body (OPERATIONS, each under its function's header).
function F.main()
  local refused = F.load_settings()
  if refused then return refused end
  if R.op == 'sync' or R.op == 'stats' or R.op == 'configure' then F.load_more() end
  if R.op == 'sync' then
    F.repair_places()
    local refused = F.check_in_seen(R.s)
    if refused then return refused end
  end
  F.housekeep()
  if R.op == 'sync' then F.sweep() end
  F.promote()
  return OPERATIONS[R.op]()
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
  local slots_lost = false
  for _, kt in ipairs(want) do
    local t = redis.call('TYPE', kt[1])
    if type(t) == 'table' then t = t.ok end
    if t ~= 'none' and t ~= kt[2] then
      redis.call('DEL', kt[1])
      if kt[1] == R.k_active or kt[1] == R.k_granted then slots_lost = true end
    end
  end
  if slots_lost then
    -- Read by the repaired run's load_settings (see Bad days: the slots rebuilt).
    redis.call('HSET', R.k_settings, 'rebuild',
      string.format('%d', R.now + math.max(R.active_ttl, R.grant_ttl)))
  end
  if redis.call('EXISTS', R.k_seq) == 1
      and stored_integer(redis.call('GET', R.k_seq), 0, STORED_MAX) == nil then
    redis.call('DEL', R.k_seq)
  end
end
