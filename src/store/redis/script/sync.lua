-- Sync: a gateway's check-ins of the sessions it saw waiting, answered with the room's
-- snapshot.
--
-- Sync: checks in the listed sessions that have a place (ZMSCORE, 500 at a time, with the
-- Bloom offsets the gateway sent; others are ignored, nothing is created), does the housekeeping, sweeps, promotes, and answers the
-- snapshot: the head's score, and for each rank of checkpoint_ranks(waiting) (every rank below
-- EXACT_RANKS, then each the last plus 1 / CHECKPOINT_GAP of it, and the last) that waiter's
-- score, by ZRANGE (one for the exact ranks, one per rank above: about 1 100 for two million;
-- in a long line those above shared by the syncs within half a second, checkpoints.lua).
-- The pace's silent waiters are estimated from the checkpoint waiters it reads anyway: silent
-- among them / their number * waiting, rounded (exact for a line of at most EXACT_RANKS); and
-- each checkpoint says whether its waiter is silent (the wait estimate counts those ahead).

-- <LIBRARY>_sync: a gateway's sync, once a second: checks in the sessions it saw waiting,
-- does the housekeeping and the sweep, promotes, and answers the room's snapshot.
-- Runs: register.lua's room call, whose main takes sync's own steps too (sync.lua
--   F.check_in_seen, line.lua F.repair_places, F.sweep); then checkpoints.lua F.checkpoints,
--   F.share_checkpoints; pace.lua F.silent_among, F.append_pace; liveness.lua F.epoch_name.
-- KEYS: the room's 20 (keys.lua)
-- ARGV (the lists of offsets are two Bloom offsets per session, decimal text, '<x> <y> ' each,
-- maybe empty: a BITFIELD argument made from a Lua number is formatted by Redis, about a
-- microsecond per bit and ring, a string is taken as it is; checked_in.rs says why a set bit
-- needs no second write):
--   1 now
--   2 line_numbers
--   3 room_numbers
--   4 excused
--   5 sessions        the sessions the gateway saw waiting since its last sync and looks up,
--                     their ids' 16 raw bytes concatenated (their offsets in 11)
--   6 both            the sessions this gateway already found in line this abandon epoch,
--                     whose bits are set without a lookup, in both rings
--   7 turn_epoch      the turn ring's epoch (as this reply names it) in which this gateway's
--                     own syncs set the bits of 9 and 10 already ('' for none)
--   8 abandon_epoch   the same of the abandon ring
--   9 turn_only       as 6, set in the abandon ring's epoch of 8: written into the turn ring,
--                     and into the abandon ring only if its current epoch is not 8's
--   10 neither        as 6, set in both: written into a ring only if its current epoch is not
--                     the one named
--   11 offsets        the offsets of the sessions of 5, in their order
--   12 abandon_only   behind the turn horizon (liveness.lua), which get no turn check-in:
--                     those found in line and not set in the abandon ring's epoch of 8,
--                     written into the abandon ring
--   13 behind_set     behind it, those set there: written into it only if its current epoch
--                     is not 8's
--   14 horizon        '<n> <horizon> <m>', the horizon a whole number >= 0, n the sessions of 5
--                     ahead of it (the first n; the others are behind it) and m of those
--                     behind it, the last m of 5, whose bits in the abandon ring's epoch of 8
--                     this gateway set already: looked up only, their offsets not in 11 but
--                     with the found ones' (13, or 12), or '<n> <horizon>' (m = 0), or '' for
--                     none
--   15 early          found in line, to be written early into the abandon ring's next epoch
--                     (liveness.lua, early check-ins): written only within the window at
--                     the current one's end (EARLY_WINDOW), else not read
--   16 schedule       optional, for a room with a schedule (call.lua)
-- Reply: {12, now_ms, waiting, paused, open, before_opening, line_closed (each 0|1), head,
-- last_minute, last_five_minutes, pace... (as stats', operator.lua: 21 numbers), n, then n
-- checkpoints as rank, score, silent (1 if not alive by the turn rule, silent_among; else 0),
-- then the ids (16 bytes each, concatenated) of the listed sessions
-- that have no place, then the current epoch of the turn ring and of the abandon ring, each
-- '<epoch>:<width ms>:<bitmap bits>:<server run id>' (the check-ins' epochs), then the abandon
-- ring's next epoch so named if `early` was written into it, else ''}. head and every
-- checkpoint's score are strings ('' for no head), as ZRANGE answered them (the text of the
-- double, which reads back as the same double): a registrant's score is no integer, and
-- Redis truncates the numbers of a Lua reply to integers. Passed on as they came, not parsed
-- and formatted again: about 1 200 checkpoints a sync at ten million.
function OPERATIONS.sync()
  local waiting = redis.call('ZCARD', R.k_line)
  local cps = F.checkpoints(waiting)
  local head = ''
  if cps[1] then head = cps[1][3] end
  local out = {REPLY.snapshot, R.now, waiting, R.paused and 1 or 0, R.open and 1 or 0,
    R.before_opening and 1 or 0, R.line_closed and 1 or 0, head, 0, 0}
  out[9], out[10] = F.append_pace(out, F.silent_among(cps, waiting))
  F.share_checkpoints(cps)
  out[#out + 1] = #cps
  for _, cp in ipairs(cps) do
    out[#out + 1] = cp[1]
    out[#out + 1] = cp[3]
    out[#out + 1] = cp[4] and 1 or 0
  end
  out[#out + 1] = table.concat(R.unknown)
  out[#out + 1] = F.epoch_name(R.rings[1])
  out[#out + 1] = F.epoch_name(R.rings[2])
  out[#out + 1] = R.early_written and F.epoch_name(R.rings[2], R.early_written) or ''
  return out
end

-- Checks in the sessions of sync's first list (`sessions`) that have a place in line, and
-- answers back those without: their ids' 16 bytes each, their two Bloom offsets in `offsets`
-- (the gateway computes them for this room's M, so the script only looks the ids up). Then sets
-- the bits of the lists of sessions already found (both, turn_only, neither, abandon_only,
-- behind_set: two offsets each):
-- sessions this gateway already found in line this abandon epoch, not looked up again (one
-- that left since only looks alive, as for a Bloom false positive, until its next epoch).
-- With a turn horizon (`horizon`), the sessions behind it get no turn check-in, and the turn
-- ring's current epoch counts everyone behind it (lower_first_number); a looked-up session
-- whose score in line is not behind it gets its turn check-in whatever the gateway said.
-- Behind it, the gateway may send last those looked up whose bits it set in the abandon
-- ring's named epoch (the `m` of `horizon`): most looked up in a steady sync are sessions
-- whose own abandon epoch turned while the ring's did not (src/store/redis/found.rs). They are
-- looked up only; their bits come with the found ones', written if that epoch has ended.
function F.check_in_seen(list)
  -- Anew in each run (a repaired second run checks in again).
  R.unknown, R.early_written = {}, nil
  -- (Its form is checked by call.lua's setup.)
  local ahead, horizon, only = string.match(F.sync_list(14)[1], '^(%d+) (%d+) ?(%d*)$')
  ahead, horizon, only = tonumber(ahead), tonumber(horizon), tonumber(only) or 0
  -- The sessions looked up only (the last `only`): behind the horizon, so never more than
  -- those behind it.
  local sessions = #list / 16
  if only > 0 and (not ahead or only > sessions - ahead) then
    return F.refuse('sync sessions looked up only beyond those behind the horizon')
  end
  -- The sessions found in line, by what the gateway set already in the epochs it names (its
  -- copy, src/store/redis/checked_in.rs): `both` in neither ring, `turn_only` in the abandon
  -- ring's named epoch, `neither` in both rings' named epochs; behind the horizon,
  -- `abandon_only` in neither and `behind_set` in the abandon ring's. A list goes into a ring
  -- unless the gateway set it there in the ring's current epoch, on this server, in the key
  -- that still holds that epoch (epoch_holds, asked before anything here is written); so a
  -- stale name costs only writes.
  local both, turn_only, neither = F.sync_list(6), F.sync_list(9), F.sync_list(10)
  local abandon_only, behind_set = F.sync_list(12), F.sync_list(13)
  local current = {}
  for n, rg in ipairs(R.rings) do current[n] = F.epoch_holds(rg, R.args[6 + n]) end
  local turn_lists = {both, turn_only}
  if not current[1] then turn_lists[3] = neither end
  local abandon_lists = {both, abandon_only}
  if not current[2] then
    abandon_lists[3], abandon_lists[4], abandon_lists[5] = turn_only, neither, behind_set
  end
  -- Every list that will be written is checked first (digits and spaces only, each offset
  -- below the bitmaps' size: one beyond would grow a bitmap to it), and only those: a list
  -- the epoch already holds is never read (most of a steady sync's check-ins, behind_set:
  -- reading them all was most of a sync's own time at ten million waiters).
  local writes = {}
  for n, lists in ipairs({turn_lists, abandon_lists}) do
    local out = {}
    for _, l in ipairs(lists) do
      if l[0] > 0 then
        if not l.chunks then
          if string.find(l[1], '[^%d ]') then return F.refuse('sync offsets not numbers') end
          l.chunks = F.offset_chunks(l[1])
        end
        if not l.chunks then return F.refuse('sync offset beyond the liveness bitmaps') end
        out[#out + 1] = l.chunks
      end
    end
    writes[n] = out
  end
  -- The early check-ins, read only within the window (early_epoch), checked as the others.
  local early, early_epoch = F.sync_list(15), F.early_epoch()
  local early_chunks
  if early[0] > 0 and early_epoch then
    if string.find(early[1], '[^%d ]') then return F.refuse('sync offsets not numbers') end
    early_chunks = F.offset_chunks(early[1])
    if not early_chunks then return F.refuse('sync offset beyond the liveness bitmaps') end
  end
  -- The looked-up sessions' offsets (`offsets`), in the ids' order, two each.
  local text, offsets = F.sync_list(11)[1], {}
  if string.find(text, '[^%d ]') then return F.refuse('sync offsets not numbers') end
  for o in string.gmatch(text, '%d+') do
    if not F.below_bloom_bits(o) then
      return F.refuse('sync offset beyond the liveness bitmaps')
    end
    offsets[#offsets + 1] = o
  end
  if #offsets ~= 2 * (sessions - only) then
    return F.refuse('sync offsets not two per session')
  end
  local abandon_ring = {R.gone_ring}
  -- Each id looked up as the room keeps its member (see Settings: members), and checked in by
  -- it (its bits are made from its first 8 bytes); one without a place is answered back whole,
  -- cut from the list again (rare: one string per session is made, not two).
  local width = R.wide and 16 or MEMBER_BYTES
  for from = 1, #list, 16 * CHUNK do
    local ids, first = {}, (from - 1) / 16
    for at = from, math.min(#list, from + 16 * CHUNK - 1) - 15, 16 do
      ids[#ids + 1] = string.sub(list, at, at + width - 1)
    end
    if #ids > 0 then
      local scores = redis.call('ZMSCORE', R.k_line, unpack(ids))
      local placed, placed_offsets = {{}, {}}, {{}, {}}
      for j = 1, #ids do
        if scores[j] then
          -- 1: both rings; 2: behind the horizon, the abandon ring only; 3: behind it and
          -- looked up only, nothing written here.
          local n, g = 1, first + j
          if horizon and g > ahead and tonumber(scores[j]) > horizon then
            n = 2
            if g > sessions - only then n = 3 end
          end
          if n < 3 then
            local p, o = placed[n], placed_offsets[n]
            p[#p + 1] = ids[j]
            if g > sessions - only then
              -- Sent behind the horizon and found ahead of it: its turn check-in, as for any
              -- looked-up session, its offsets made from its id (rare: the offsets are those
              -- the gateway computes, bloom_offsets).
              o[#o + 1], o[#o + 2] = F.bloom_offsets(ids[j])
            else
              o[#o + 1], o[#o + 2] = offsets[2 * g - 1], offsets[2 * g]
            end
          end
        else
          -- No place (skipped, swept, never in line): answered back, so the gateway asks the
          -- store at their next poll instead of placing them by an old cookie.
          R.unknown[#R.unknown + 1] = string.sub(list, 16 * (first + j) - 15, 16 * (first + j))
        end
      end
      F.check_in(placed[1], placed_offsets[1])
      F.check_in(placed[2], placed_offsets[2], abandon_ring)
    end
  end
  for n, out in ipairs(writes) do
    if #out > 0 then F.set_bits_in(R.rings[n], out) end
  end
  if early_chunks then
    F.set_bits_in(R.gone_ring, {early_chunks}, early_epoch)
    R.early_written = early_epoch
  end
  if horizon then F.lower_first_number(horizon) end
  return nil
end

-- Sync's list at ARGV `i` of sessions' Bloom offsets, as decimal text ('<x> <y> ' per
-- session), in a table {text} whose chunks are made once when a ring needs them.
function F.sync_list(i)
  local text = R.args[i]
  return {text, [0] = #text}
end

-- The BITFIELD chunks (new_chunks) of a list of Bloom offsets as decimal text (sync_list);
-- nil if an offset is not below the bitmaps' size.
function F.offset_chunks(text)
  local chunks = F.new_chunks()
  local next_offset = string.gmatch(text, '%d+')
  while true do
    local x, y = next_offset(), next_offset()
    if y == nil then break end
    if not (F.below_bloom_bits(x) and F.below_bloom_bits(y)) then return nil end
    F.add_bits(chunks, x, y)
  end
  return chunks
end

-- Whether `digits` (a string of decimal digits, as a sync's lists bring them) is below the
-- bitmaps' size: fewer digits, or as many and less as text (leading zeros, which the crate
-- never sends, are taken as more digits). No number is parsed.
function F.below_bloom_bits(digits)
  local bits = R.bloom_bits_text
  if not bits then
    bits = string.format('%d', R.bloom_bits)
    R.bloom_bits_text = bits
  end
  return #digits < #bits or (#digits == #bits and digits < bits)
end
