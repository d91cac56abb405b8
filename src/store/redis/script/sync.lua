-- Sync: a gateway's check-ins of the sessions it saw waiting, answered with the room's
-- snapshot.
--
-- Sync: checks in the listed sessions that have a place (ZMSCORE, 500 at a time, with the
-- Bloom offsets the gateway sent; others are ignored, nothing is created), does the housekeeping, sweeps, promotes, and answers the
-- snapshot: the head's score, and for each rank of checkpoint_ranks(waiting) (every rank below
-- EXACT_RANKS, then each the last plus 1 / CHECKPOINT_GAP of it, and the last) that waiter's
-- score, by ZRANGE (one for the exact ranks, one per rank above: about 1 100 for two million).
-- The pace's silent waiters are estimated from the checkpoint waiters it reads anyway: silent
-- among them / their number * waiting, rounded (exact for a line of at most EXACT_RANKS).

-- Checks in the sessions of sync's first list (ARGV 2) that have a place in line, and answers
-- back those without: their ids' 16 bytes each, their two Bloom offsets in ARGV 23 (the
-- gateway computes them for this room's M, so the script only looks the ids up). Then sets the
-- bits of the lists of sessions already found (ARGV 18, 21, 22, 24, 25: two offsets each):
-- sessions this gateway already found in line this abandon epoch, not looked up again (one
-- that left since only looks alive, as for a Bloom false positive, until its next epoch).
-- With a turn horizon (ARGV 26), the sessions behind it get no turn check-in, and the turn
-- ring's current epoch counts everyone behind it (lower_first_number); a looked-up session
-- whose score in line is not behind it gets its turn check-in whatever the gateway said.
function F.check_in_seen(list)
  -- Anew in each run (a repaired second run checks in again).
  R.unknown = {}
  local ahead, horizon = string.match(F.sync_list(26)[1], '^(%d+) (%d+)$')
  ahead, horizon = tonumber(ahead), tonumber(horizon)
  -- Their offsets (ARGV 23), in the ids' order, as decimal text: Redis takes a BITFIELD
  -- argument made from a Lua number by formatting it (about a microsecond, for each bit of
  -- each ring), from a string as it is.
  local next_offset = string.gmatch(F.sync_list(23)[1], '%d+')
  local abandon_ring = {R.gone_ring}
  for from = 1, #list, 16 * CHUNK do
    local ids, offsets = {}, {}
    for at = from, math.min(#list, from + 16 * CHUNK - 1) - 15, 16 do
      ids[#ids + 1] = string.sub(list, at, at + 15)
      offsets[#offsets + 1] = next_offset()
      offsets[#offsets + 1] = next_offset()
    end
    if #ids > 0 then
      local scores = redis.call('ZMSCORE', R.k_line, unpack(ids))
      local placed, placed_offsets = {{}, {}}, {{}, {}}
      local first = (from - 1) / 16
      for j = 1, #ids do
        if scores[j] then
          -- 1: both rings; 2: behind the horizon, the abandon ring only.
          local n = 1
          if horizon and first + j > ahead and tonumber(scores[j]) > horizon then n = 2 end
          local p, o = placed[n], placed_offsets[n]
          p[#p + 1] = ids[j]
          o[#o + 1], o[#o + 2] = offsets[2 * j - 1], offsets[2 * j]
        else
          -- No place (skipped, swept, never in line): answered back, so the gateway asks the
          -- store at their next poll instead of placing them by an old cookie.
          R.unknown[#R.unknown + 1] = ids[j]
        end
      end
      F.check_in(placed[1], placed_offsets[1])
      F.check_in(placed[2], placed_offsets[2], abandon_ring)
    end
  end
  -- The sessions found in line, by what the gateway set already in the epochs it names (its
  -- copy, src/store/redis/checked_in.rs): ARGV 18 in neither ring, 21 in the abandon ring's
  -- named epoch, 22 in both rings' named epochs; behind the horizon, 24 in neither and 25 in
  -- the abandon ring's. A list goes into a ring unless the gateway set it there in the ring's
  -- current epoch, on this server, in the key that still holds that epoch (epoch_holds); so a
  -- stale name costs only writes.
  local both, turn_only, neither = F.sync_list(18), F.sync_list(21), F.sync_list(22)
  local abandon_only, behind_set = F.sync_list(24), F.sync_list(25)
  local current = {}
  for n, rg in ipairs(R.rings) do current[n] = F.epoch_holds(rg, R.argv[18 + n]) end
  local turn_lists = {both, turn_only}
  if not current[1] then turn_lists[3] = neither end
  local abandon_lists = {both, abandon_only}
  if not current[2] then
    abandon_lists[3], abandon_lists[4], abandon_lists[5] = turn_only, neither, behind_set
  end
  for n, lists in ipairs({turn_lists, abandon_lists}) do
    local out = {}
    for _, list in ipairs(lists) do
      if list[0] > 0 then
        if not list.chunks then list.chunks = F.offset_chunks(list[1]) end
        out[#out + 1] = list.chunks
      end
    end
    if #out > 0 then F.set_bits_in(R.rings[n], out) end
  end
  if horizon then F.lower_first_number(horizon) end
end

-- Sync's list at ARGV `i` (unpacked numbering) of sessions' Bloom offsets, as decimal text
-- ('<x> <y> ' per session), in a table {text} whose chunks are made once when a ring needs
-- them; '' when absent (or the schedule, last, in its place).
function F.sync_list(i)
  local text = R.argv[i] or ''
  if string.sub(text, 1, 9) == 'schedule:' then text = '' end
  return {text, [0] = #text}
end

-- The BITFIELD chunks (new_chunks) of a list of Bloom offsets as decimal text (sync_list).
function F.offset_chunks(text)
  local chunks = F.new_chunks()
  local next_offset = string.gmatch(text, '%d+')
  while true do
    local x, y = next_offset(), next_offset()
    if y == nil then break end
    F.add_bits(chunks, x, y)
  end
  return chunks
end
