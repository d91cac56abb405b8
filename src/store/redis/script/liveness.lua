-- Liveness: the two rings of Bloom-filter bitmaps that record check-ins, and the rules that
-- read them.
--
-- Liveness (src/store/snapshot.rs, LivenessRule): a check-in (a join, an enter or poll of a
-- waiter, or the session in a sync's list while it has a place) marks the epoch of check_in_at
-- (now, or opens_at before a scheduled opening) in two rings of bitmaps: the turn ring (epochs
-- of queue_ttl / TURN_EPOCHS) and the abandon ring (epochs of abandon_after / ABANDON_EPOCHS).
-- Joined since: a newcomer's join is a check-in too, but it sets no bits. Each epoch's first
-- sequence number (`<ring><i>from`: seq as it was when the epoch's bitmap was made, before
-- anyone joined in it) tells who joined in or after it: a waiter whose number is above the
-- first number of an epoch that counts is alive by the rule, as if their bits were set in it.
-- Main makes both current epochs (`open_epochs`) before a newcomer's number is taken, so the
-- number is above both first numbers; when it is not (seq went back: lost or reset), the join
-- sets bits as any check-in does. A registrant's score (< 0) is never above a first number: a
-- registrant's check-ins are bits. A lost first number (the settings key lost) is no harm: the
-- epoch's bitmap is then marked lost (`mark_orphan_bitmaps_lost`, `ring_key_for`), and
-- everyone counts as seen in it. A
-- lost or reset seq recorded as a first number only makes more waiters look joined since:
-- alive longer, as for a Bloom false positive.
-- Ring key i holds the epoch e with e mod ring length == i (which one: the settings field); a
-- key found holding an older epoch is DELeted before the first write of the new one, and gets a
-- PEXPIRE to the end of its ring (ring length * width after its epoch began), so a dead room's
-- bitmaps vanish. Each key is a Bloom filter of M bits, M = C - BLOOM_SLACK, C the allocator's
-- size class (in bits) >= 16 * max_queue_len in [2^16, 2^32] (bloom_bits; under C so that the
-- string, with the sentinel bit M, Redis's header and NUL, fits the class); a session sets 2 bits,
-- the big-endian u32 of its id's bytes 1-4 and 5-8, each mod M (one BITFIELD per key and up to
-- 500 sessions). A waiter is alive by a rule if both bits are set in a key whose epoch still
-- counts (epoch + keep >= now's epoch).
-- The turn horizon: a sync may name one (`horizon`), a sequence number behind which its gateway
-- sent no turn check-ins (their turn cannot come while one would count; the gateway's reason,
-- src/store/snapshot.rs). The turn ring's current epoch's first number is then lowered to it
-- (`lower_first_number`): everyone behind it counts as joined since in that epoch, seen or
-- not, so a waiter left out is never skipped while the epoch counts. The epoch's first number
-- as it was made is kept apart (`<ring><i>first`, the turn ring's only) for the pace's silent
-- estimate (silent_among). Libraries of version 5 before this one read a lowered first number
-- the same way (it only makes more waiters look joined since), so gateways of both can share a
-- room in a rolling deploy.
-- Early check-ins: in the last 1 / EARLY_WINDOW of an abandon epoch a sync may also write
-- sessions into the ring's next epoch (`early`, sync.lua), each at a moment of its own that its
-- gateway draws (src/store/redis/checked_in.rs), so that when the epoch begins their bits are
-- set already. With one boundary for the whole line, every sync of the poll interval after it
-- wrote all of its sessions again (at ten million waiters, a saturated Redis for that
-- minute). The next epoch's key is made then (ring_key_for: the key of e + 1 holds e + 1 - len,
-- which no longer counts), its first number the seq of that moment: those who join between
-- then and the epoch's start count as joined since in it. Either way a waiter counts as seen
-- up to half an epoch longer than by a check-in in the current one: a silent waiter is swept
-- within abandon_after * 7 / 4 of silence rather than 3 / 2, and never before abandon_after.
-- The turn ring's epochs are short and its check-ins few (the turn horizon): none early.
-- A false positive (another session's bits) only makes a silent waiter look alive: granted at
-- their turn, then the grant expires unclaimed, or kept in line until a later sweep finds them
-- silent. It never admits anyone out of order, never over capacity. A key whose epoch field is
-- newer than the one written (a clock that went back) is written into: alive longer, as above.
-- Lost bitmaps: every write also sets bit M (the sentinel) and reads it back in the same
-- BITFIELD; a key its field says holds this epoch but whose sentinel was clear was lost since
-- (evicted: the ring keys are the room's only keys with a TTL; deleted; repaired) and the
-- write is making it again without its check-ins: the field becomes -epoch ("lost"), and while
-- that epoch counts everyone is alive by the rule, as for a key that counts and is gone.
-- Bitmaps of another size: a key that counts but is not exactly M / 8 + 1 bytes long was made
-- with another M (by an older version, whose epochs the upgrade marks lost unless the settings
-- key is lost too; or by a gateway with another max_queue_len), so its bits sit at other
-- offsets: a liveness read (alive_many, one STRLEN per key) then counts everyone as alive, as
-- for a lost bitmap. A shorter one is also caught when written (its sentinel reads 0).
--   - at their turn (promotion, admit_next): a waiter not alive by the turn rule is skipped
--     (unless silence is excused, `excused`): seen within queue_ttl, never skipped; silent for
--     longer than 5/4 queue_ttl, skipped;
--   - the sweep, in sync only: from the cursor on, at most max_sweep waiters are looked at per
--     call (a line of at most max_sweep is looked at whole), and those not alive by the abandon
--     rule are dropped; the cursor wraps to the head at the end of the line. None while silence
--     is excused.

-- The liveness rings (see above): their keys, epoch widths, the epochs that
-- still count, and which epoch each key holds (`held`, from the settings; nil: not known).
function F.make_ring(name, first, epochs, ttl)
  local r = {name = name, first = first, len = epochs + 2, keep = epochs,
    width = math.max(1, math.floor(ttl / epochs)), held = {}, from = {}, first_made = {},
    known = {}, all = false, since = nil, first_min = nil}
  r.current = math.floor(R.now / r.width)
  return r
end

-- Every epoch field of `rg` not read yet (a liveness test reads the whole ring).
function F.load_ring(rg)
  if rg.all then return end
  local fields = {}
  for i = 0, rg.len - 1 do
    fields[2 * i + 1], fields[2 * i + 2] = RING_FIELDS[rg.name][i], FROM_FIELDS[rg.name][i]
  end
  if rg == R.turn then
    for i = 0, rg.len - 1 do fields[2 * rg.len + i + 1] = FIRST_FIELDS[i] end
  end
  local v = redis.call('HMGET', R.k_settings, unpack(fields))
  for i = 0, rg.len - 1 do
    if not rg.known[i] then
      F.read_epoch(rg, i, stored_integer(v[2 * i + 1], -STORED_MAX, STORED_MAX),
        stored_integer(v[2 * i + 2], 0, STORED_MAX))
    end
    if rg.first_made[i] == nil then
      rg.first_made[i] = stored_integer(v[2 * rg.len + i + 1], 0, STORED_MAX)
    end
  end
  rg.all = true
end

-- Ring key i's epoch and its first sequence number, as read from their settings fields (each a
-- stored integer, stored.lua; nil: missing or damaged). An epoch that began (held > 0) without a
-- first number it can be read by is taken as lost, and so marked (-e): who joined since it
-- began, of whom its bitmap holds no bits, is not known, so everyone counts as seen in it while
-- it counts (as for a bitmap found without its field, ring_key_for).
function F.read_epoch(rg, i, held, from)
  if held and held > 0 and from == nil then
    F.mark_lost(R.k_settings, rg.name, rg.len, held)
    held = -held
  end
  rg.held[i], rg.from[i], rg.known[i] = held, from, true
end

-- The key of `rg` holding epoch `e`, ready to be written, and its lifetime (to the end of the
-- ring after `e`, for the caller to set once written), and whether the key is new: a key
-- holding an older epoch is DELeted first and its field set. A field holding -e says epoch
-- e's bitmap was lost (see check_in): it stays the key of e.
--
-- A key whose epoch is not known (its field missing) but which exists: the settings key was
-- lost, and the bitmap may hold this very epoch's check-ins (a gateway sends each waiter's
-- once per epoch: deleting them would have the sweep drop waiters who are polling). It is
-- kept and written into, and marked lost (-e): everyone counts as seen in e, and the bits of
-- an older epoch it may hold only make silent waiters look alive longer. A missing field and
-- no key is a room's first use of it.
function F.ring_key_for(rg, e)
  local i = e % rg.len
  local key = R.keys[rg.first + i]
  if not rg.known[i] then F.load_ring(rg) end
  local held = rg.held[i]
  local lifetime = math.max(1, (e + rg.len) * rg.width - R.now)
  if held and math.abs(held) >= e then return key, lifetime, false end
  if held == nil and redis.call('EXISTS', key) == 1 then
    F.mark_lost(R.k_settings, rg.name, rg.len, e)
    -- Who joined since is not known either: nobody is alive by their join in e.
    redis.call('HDEL', R.k_settings, FROM_FIELDS[rg.name][i])
    if rg == R.turn then redis.call('HDEL', R.k_settings, FIRST_FIELDS[i]) end
    rg.held[i], rg.from[i], rg.first_made[i] = -e, nil, nil
    return key, lifetime, true
  end
  redis.call('DEL', key)
  -- The epoch's first sequence number (see Liveness: joined since): seq as it is now, before
  -- anyone joins in e. A lost seq reads 0: everyone looks joined since, alive longer.
  local from = stored_integer(redis.call('GET', R.k_seq), 0, STORED_MAX) or 0
  local number = string.format('%d', from)
  if rg == R.turn then
    redis.call('HSET', R.k_settings, RING_FIELDS[rg.name][i], e, FROM_FIELDS[rg.name][i],
      number, FIRST_FIELDS[i], number)
  else
    redis.call('HSET', R.k_settings, RING_FIELDS[rg.name][i], e, FROM_FIELDS[rg.name][i],
      number)
  end
  rg.held[i], rg.from[i], rg.first_made[i] = e, from, from
  return key, lifetime, true
end

-- Makes sure the current epoch (of check_in_at) of each ring has its bitmap and its first
-- sequence number, before a newcomer's sequence number is taken: a new one gets its sentinel
-- and lifetime and nothing else (no check-in).
function F.open_epochs()
  for _, rg in ipairs(R.rings) do F.open_epoch(rg) end
end

-- The current epoch of `rg`, made if new (see open_epochs); returns its index in the ring.
function F.open_epoch(rg)
  local e = math.floor(R.check_in_at / rg.width)
  local key, lifetime, new = F.ring_key_for(rg, e)
  if new then
    redis.call('BITFIELD', key, 'SET', 'u1', R.bloom_bits, '1')
    F.set_bitmap_lifetime(key, lifetime)
  end
  return e % rg.len
end

-- A sync's turn horizon (see Liveness: the turn horizon): the turn ring's current epoch's
-- first number is lowered to it, so that everyone behind it counts as joined since in that
-- epoch (whose turn check-ins the gateway did not send). Never raised: the lowest horizon of
-- the epoch's syncs holds for all of them.
function F.lower_first_number(horizon)
  local rg = R.turn
  local i = F.open_epoch(rg)
  local from = rg.from[i]
  if from == nil or horizon < from then
    redis.call('HSET', R.k_settings, FROM_FIELDS.turn[i], string.format('%d', horizon))
    rg.from[i] = horizon
  end
end

-- Whether a newcomer given sequence number `seq` now is alive by its join in both rings'
-- current epochs (opened by open_epochs): then it needs no bits.
function F.joined_since(seq)
  for _, rg in ipairs(R.rings) do
    local from = rg.from[math.floor(R.check_in_at / rg.width) % rg.len]
    if from == nil or seq <= from then return false end
  end
  return true
end

-- The ring's current epoch as sync answers it and a gateway names it back:
-- '<epoch>:<width ms>:<bitmap bits>:<server run id>'. The run id (INFO server) tells this
-- server process from another: a failover or a restart may have lost writes it acknowledged,
-- and then no gateway's copy of the bits it set holds (src/store/redis/checked_in.rs). A server
-- that does not tell it (INFO refused) names epochs no gateway can hold ('-' for the run id:
-- see epoch_holds).
-- `e`, when given, names that epoch instead (a sync's early check-ins' next epoch).
function F.epoch_name(rg, e)
  if R.run_id == nil then
    local info = redis.pcall('INFO', 'server')
    R.run_id = type(info) == 'string' and string.match(info, 'run_id:(%x+)') or '-'
  end
  return string.format('%d:%d:%d:%s', e or math.floor(R.check_in_at / rg.width), rg.width,
    R.bloom_bits, R.run_id)
end

-- The abandon ring's next epoch, if check_in_at is within the last 1 / EARLY_WINDOW of its
-- current one (see Liveness: early check-ins); else nil.
function F.early_epoch()
  local rg = R.gone_ring
  local e = math.floor(R.check_in_at / rg.width)
  if rg.width >= EARLY_WINDOW and (e + 1) * rg.width - R.check_in_at <= rg.width / EARLY_WINDOW
  then
    return e + 1
  end
  return nil
end

-- Whether a gateway that names `name` as the ring's epoch in which it set its sessions' bits
-- may skip writing them again: it is the current epoch of this server, and the ring's key still
-- holds that epoch (its field, lost or not). Another caller's epochs of another width (a rolling
-- change of queue_ttl or abandon_after, or of the schedule) may have taken the key since: its
-- field then names their epoch, and the bits are written again.
function F.epoch_holds(rg, name)
  if name ~= F.epoch_name(rg) or R.run_id == '-' then return false end
  local e = math.floor(R.check_in_at / rg.width)
  local i = e % rg.len
  if not rg.known[i] then F.load_ring(rg) end
  local held = rg.held[i]
  return held ~= nil and math.abs(held) == e
end

-- A liveness bitmap's lifetime, `ms` from now: the one TTL the room's keys get (check.rs,
-- ROOM_KEYS_HAVE_TTL).
function F.set_bitmap_lifetime(key, ms)
  redis.call('PEXPIRE', key, string.format('%d', math.max(1, ms)))
end

-- Epoch `e`'s bitmap of the ring `name` (of `len` keys) was lost: its field says so (-e).
function F.mark_lost(k_settings, name, len, e)
  redis.call('HSET', k_settings, name .. (e % len), string.format('%d', -e))
end

-- Whether each session of `ids` is alive by `rg`'s rule: a list of booleans. `scores`, each
-- session's score in line, as a number or a string: one above the first sequence number of an
-- epoch that counts joined since, and is alive without a look at the bits. Keys are then read
-- newest epoch first, only for the sessions not yet found; a key of unknown epoch (its field
-- lost) counts as current. A key whose epoch counts but which is gone (lost) makes everyone
-- alive: its check-ins cannot be told apart.
function F.alive_many(ids, rg, scores)
  local found, left = {}, {}
  for j = 1, #ids do found[j] = false end
  if #ids == 0 then return found end
  F.load_ring(rg)
  rg.since, rg.first_min = nil, nil
  local counting, since = {}, nil
  for back = 0, rg.len - 1 do
    local i = (rg.current - back) % rg.len
    local held = rg.held[i]
    if held ~= nil and held < 0 and -held + rg.keep >= rg.current then
      -- An epoch that counts lost its bitmap (check_in): its check-ins cannot be told apart.
      for j = 1, #ids do found[j] = true end
      return found
    end
    if held == nil or held + rg.keep >= rg.current then
      counting[#counting + 1] = {R.keys[rg.first + i], held}
      local from = rg.from[i]
      if held ~= nil and from ~= nil and (since == nil or from < since) then since = from end
      local first = held ~= nil and (rg.first_made[i] or from)
      if first and (rg.first_min == nil or first < rg.first_min) then rg.first_min = first end
    end
  end
  -- For silent_among: behind `since` everyone is alive by their join (or a turn horizon).
  rg.since = since
  for j = 1, #ids do
    local score = since and tonumber(scores[j])
    if score and score > since then found[j] = true else left[#left + 1] = j end
  end
  if #left > 0 then
    for _, kh in ipairs(counting) do
      -- A bitmap of another size holds its bits at other offsets (an older version's, whose
      -- epoch a lost settings key no longer names as lost; or one a gateway with another
      -- max_queue_len made): its check-ins cannot be told apart either, as for a lost one.
      -- Each of this size is exactly bloom_bytes long (the sentinel is its last bit); a
      -- missing one reads 0 (see below). One that was shorter is caught by the sentinel
      -- when written (check_in).
      local len = redis.call('STRLEN', kh[1])
      if len ~= 0 and len ~= R.bloom_bytes then
        for j = 1, #ids do found[j] = true end
        return found
      end
    end
  end
  for _, kh in ipairs(counting) do
    if #left == 0 then break end
    local still = {}
    for from = 1, #left, CHUNK do
      local args, which = {}, {}
      for n = from, math.min(#left, from + CHUNK - 1) do
        local j = left[n]
        local x, y = F.bloom_offsets(ids[j])
        args[#args + 1] = 'GET'; args[#args + 1] = 'u1'; args[#args + 1] = x
        args[#args + 1] = 'GET'; args[#args + 1] = 'u1'; args[#args + 1] = y
        which[#which + 1] = j
      end
      local bits = redis.call('BITFIELD', kh[1], unpack(args))
      for n, j in ipairs(which) do
        if bits[2 * n - 1] == 1 and bits[2 * n] == 1 then
          found[j] = true
        else
          still[#still + 1] = j
        end
      end
    end
    left = still
  end
  if #left > 0 then
    for _, kh in ipairs(counting) do
      if kh[2] ~= nil and redis.call('EXISTS', kh[1]) == 0 then
        -- A bitmap that counts is gone: its check-ins are lost with it.
        for _, j in ipairs(left) do found[j] = true end
        break
      end
    end
  end
  return found
end

function F.alive(id, rg, score) return F.alive_many({id}, rg, {score})[1] end
