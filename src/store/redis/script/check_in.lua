-- Check-ins: the bits a session sets in the liveness bitmaps (liveness.lua's rings), and the
-- bitmaps' size. A session sets two bits in each ring's current epoch (bloom_offsets), written
-- by BITFIELD in chunks of at most CHUNK sessions, each write with the sentinel read back;
-- bloom_bits sizes the bitmaps by the allocator's classes (src/store/redis/protocol.rs's
-- bloom_bits computes the same).

-- The Bloom filter's size in bits for a line of at most `max_queue`: BLOOM_SLACK under the
-- allocator's size class >= 16 * max_queue, in [2^16, 2^32]. jemalloc's classes (Redis's own
-- allocator) are four to each power of two, P / 2 + j * P / 8 for j = 1 to 4: a class rather
-- than the power of two P itself takes at most a quarter more than the need instead of twice
-- (a line of ten million: 20 MiB bitmaps, not 32).
function F.bloom_bits(max_queue)
  local need = math.min(math.max(16 * max_queue, 65536), 4294967296)
  local p = 65536
  while p < need do p = p * 2 end
  local class = p
  if p > 65536 then class = math.ceil(need / (p / 8)) * (p / 8) end
  return class - BLOOM_SLACK
end

-- The two bits of a session in a bitmap of bloom_bits bits: the big-endian u32 of the id's
-- bytes 1-4 and 5-8 (missing bytes count as 0), each mod bloom_bits.
function F.bloom_offsets(id)
  local b1, b2, b3, b4, b5, b6, b7, b8 = string.byte(id, 1, 8)
  local x = (((b1 or 0) * 256 + (b2 or 0)) * 256 + (b3 or 0)) * 256 + (b4 or 0)
  local y = (((b5 or 0) * 256 + (b6 or 0)) * 256 + (b7 or 0)) * 256 + (b8 or 0)
  return x % R.bloom_bits, y % R.bloom_bits
end

-- Checks in every session of `ids` (a list) at check_in_at, in both rings. `offsets`, when
-- given, holds each session's two bits, flat (session j's at 2j - 1 and 2j, as decimal strings,
-- as sync's lists bring them); else they are computed here.
--
-- Every write also sets the bitmap's sentinel, bit M (past the Bloom bits), and reads what it
-- was, in the same BITFIELD: a bitmap that its field says holds this epoch but whose sentinel
-- was clear was lost since its first write (evicted: the ring keys are the room's only keys
-- with a TTL; deleted; repaired) and is being made again by this write, without the
-- check-ins it had. Its field is then set to -e: epoch e's bitmap is lost, and until the epoch
-- stops counting everyone counts as seen in it (see alive_many), as for a bitmap that is gone.
-- A bitmap made again gets its lifetime again, so it still expires.
-- `rings`, when given, is the list of rings written (else both).
function F.check_in(ids, offsets, rings)
  if #ids == 0 then return end
  local chunks = F.new_chunks()
  for j = 1, #ids do
    local x, y
    if offsets then
      x, y = offsets[2 * j - 1], offsets[2 * j]
    else
      x, y = F.bloom_offsets(ids[j])
    end
    F.add_bits(chunks, x, y)
  end
  for _, rg in ipairs(rings or R.rings) do F.set_bits_in(rg, {chunks}) end
end

-- The BITFIELD arguments of a check-in, in chunks of at most CHUNK sessions: the same bits in
-- every ring (one M), so they are made once; the first chunk led by the sentinel.
function F.new_chunks()
  return {{'SET', 'u1', R.bloom_bits, '1'}, n = 0}
end

function F.add_bits(chunks, x, y)
  if chunks.n == CHUNK then
    chunks[#chunks + 1] = {}
    chunks.n = 0
  end
  local args = chunks[#chunks]
  local n = #args
  args[n + 1], args[n + 2], args[n + 3], args[n + 4] = 'SET', 'u1', x, '1'
  args[n + 5], args[n + 6], args[n + 7], args[n + 8] = 'SET', 'u1', y, '1'
  chunks.n = chunks.n + 1
end

-- Writes the bits of every chunk list of `lists` (each made by new_chunks) into the current
-- epoch of the ring `rg`, or into epoch `e` when given (a sync's early check-ins, sync.lua);
-- the sentinel read back is the first BITFIELD's.
function F.set_bits_in(rg, lists, e)
  e = e or math.floor(R.check_in_at / rg.width)
  local key, lifetime, new = F.ring_key_for(rg, e)
  local had
  for _, chunks in ipairs(lists) do
    for c = 1, #chunks do
      local r = redis.call('BITFIELD', key, unpack(chunks[c]))
      if had == nil then had = r[1] end
    end
  end
  if had == 0 and not new and rg.held[e % rg.len] == e then
    rg.held[e % rg.len] = -e
    F.mark_lost(R.k_settings, rg.name, rg.len, e)
  end
  -- A new bitmap, or one made again: its lifetime (an existing one has it already).
  if new or had == 0 then F.set_bitmap_lifetime(key, lifetime) end
end
