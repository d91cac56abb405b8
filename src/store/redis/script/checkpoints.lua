-- Checkpoints: the waiters a sync's snapshot names with their rank (snapshot.rs,
-- checkpoint_ranks), read from the line or, far back in a long line, shared between syncs.
--
-- Every rank below EXACT_RANKS comes from one ZRANGE, fresh in every sync: the head, the turns
-- about to come, the places a visitor reads one by one. Above it, one ZRANGE per rank (about
-- 1 200 at ten million, each a walk down the skiplist and a call from Lua), paid by every
-- gateway's sync each second although the answer is the same for all.
-- So in a line of at least SHARED_FROM waiters, a sync that reads them keeps them (with each
-- one's silence, silent_among) in the settings' `far` field, and a sync within SHARED_MS of it
-- takes them from there instead, moved forward by the places the line moved since: the
-- fresh waiter at rank EXACT_RANKS - 1 is looked up among the kept ones (its rank then, between
-- two of them, in proportion to its score) and everyone kept moves up by the difference
-- (`moved`). What is not seen that way: waiters who left from the middle of the line within
-- SHARED_MS (each makes the places behind it one too high, within the 1 % a checkpoint's gap
-- already allows far back) and newcomers (at the back: the fresh last waiter closes the list).
-- Forty gateways thus read the far ranks about twice a second instead of forty times.
--
-- `far` is cmsgpack of {at, score at EXACT_RANKS - 1, then rank, score, silent (0|1) for each
-- checkpoint from EXACT_RANKS on} (no member: a shared checkpoint's silence is kept, not read
-- again); anything else in it (damaged, another version's, older than SHARED_MS, ahead of
-- now: a clock that went back) is not used and is written anew.
-- Nothing in it decides who goes in: turns, grants and the head come from the fresh ranks.

-- The far ranks shared from a line of at least this many waiters, for this long (ms).
local SHARED_FROM, SHARED_MS = 10000, 500

-- The snapshot's checkpoints: for each rank of checkpoint_ranks(waiting) (snapshot.rs), the
-- waiter there, {rank, member, score as Redis wrote it, silent (see silent_among), shared}:
-- `shared` true for those taken from `far` (their silence as kept), and the list's `fresh_from`
-- the index of its first far checkpoint read now (to keep in `far`), if any.
function F.checkpoints(waiting)
  local out = {}
  if waiting == 0 then return out end
  local last = waiting - 1
  local exact = redis.call('ZRANGE', R.k_line, 0, math.min(last, EXACT_RANKS - 1), 'WITHSCORES')
  for j = 1, #exact, 2 do out[#out + 1] = {(j - 1) / 2, exact[j], exact[j + 1], false, false} end
  if last < EXACT_RANKS then return out end
  if waiting >= SHARED_FROM then
    if F.shared_checkpoints(out, last) then return out end
    out.fresh_from = #out + 1
  end
  local r = EXACT_RANKS - 1
  while r < last do
    local step = 1
    if r >= EXACT_RANKS then step = math.max(1, math.floor(r / CHECKPOINT_GAP)) end
    r = math.min(r + step, last)
    local at = redis.call('ZRANGE', R.k_line, r, r, 'WITHSCORES')
    if at[1] then out[#out + 1] = {r, at[1], at[2], false, false} end
  end
  return out
end

-- Appends to `out` (the fresh ranks below EXACT_RANKS, the last of them at EXACT_RANKS - 1) the
-- far checkpoints kept in `far`, moved, then the line's last waiter; false if `far` cannot
-- serve (see the header), and then nothing is appended.
function F.shared_checkpoints(out, last)
  local far = redis.call('HGET', R.k_settings, 'far')
  if not far then return false end
  local kept = F.far_decoded(far)
  if not kept or kept.at > R.now or R.now - kept.at >= SHARED_MS then return false end
  local ranks, scores, before = kept.ranks, kept.scores, kept.before
  -- Where the fresh waiter at EXACT_RANKS - 1 stood then: at EXACT_RANKS - 1 if it has the
  -- same score, else between two kept ones, in proportion to its score.
  local score = tonumber(out[#out][3])
  local moved
  if score == before then
    moved = 0
  elseif score > before then
    local prev_rank, prev_score = EXACT_RANKS - 1, before
    for i = 1, #ranks do
      if scores[i] >= score then
        local r = prev_rank + (ranks[i] - prev_rank) * (score - prev_score) / (scores[i] - prev_score)
        moved = math.floor(r + 0.5) - (EXACT_RANKS - 1)
        break
      end
      prev_rank, prev_score = ranks[i], scores[i]
    end
  end
  -- Not found among them: the line moved past them all, or someone went ahead of the head.
  if moved == nil then return false end
  local upto = EXACT_RANKS - 1
  for i = 1, #ranks do
    local r = ranks[i] - moved
    if r >= last then break end
    if r > upto and scores[i] > score then
      out[#out + 1] = {r, nil, kept.texts[i], kept.silent[i], true}
      upto = r
    end
  end
  local tail = redis.call('ZRANGE', R.k_line, last, last, 'WITHSCORES')
  if tail[1] and last > upto then out[#out + 1] = {last, tail[1], tail[2], false, false} end
  return true
end

-- The last `far` decoded (F.far_decoded): its text, and what it decoded to.
local far_last = {}

-- `far` decoded and checked: {at, before (the score at EXACT_RANKS - 1), ranks, scores (as
-- numbers), texts (the scores as kept), silent (booleans)}, each rank and score above the one
-- before; nil if it is damaged or another version's. The syncs of half a second read the same
-- text (about twenty of them for each write, with forty gateways), and decoding it is most of
-- what a shared checkpoint costs: the last text decoded is kept with its result (in this Lua
-- state, until another text comes) and the same text is not decoded again. The same text
-- decodes to the same, so nothing but the text is compared (Lua keeps one copy of each
-- string: once the reply is a Lua string, the compare is of two pointers); its age is checked
-- by the caller every time.
function F.far_decoded(far)
  if far_last.text == far then return far_last.kept end
  local ok, kept = pcall(cmsgpack.unpack, far)
  local out = nil
  if ok and type(kept) == 'table' and #kept >= 5 and (#kept - 2) % 3 == 0 then
    out = {at = tonumber(kept[1]), before = tonumber(kept[2]), ranks = {}, scores = {},
      texts = {}, silent = {}}
    local prev_rank, prev_score = EXACT_RANKS - 1, out.before
    if out.at == nil or prev_score == nil then out = nil end
    for j = 3, out and #kept or 0, 3 do
      local r, s = tonumber(kept[j]), kept[j + 1]
      local n = type(s) == 'string' and tonumber(s)
      if r == nil or not n or r <= prev_rank or n <= prev_score then
        out = nil
        break
      end
      local i = #out.ranks + 1
      out.ranks[i], out.scores[i], out.texts[i], out.silent[i] = r, n, s, kept[j + 2] == 1
      prev_rank, prev_score = r, n
    end
  end
  far_last.text, far_last.kept = far, out
  return out
end

-- Keeps the far checkpoints read by this sync (`fresh_from` on, with their silence) in `far`
-- for the syncs after it (see the header). None while silence is excused: the silence it
-- would keep is not the rule's.
function F.share_checkpoints(cps)
  local from = cps.fresh_from
  if from == nil or R.excused or #cps < from + 1 then return end
  local kept = {R.now, cps[from - 1][3]}
  for j = from, #cps do
    local cp = cps[j]
    kept[#kept + 1], kept[#kept + 2], kept[#kept + 3] = cp[1], cp[3], cp[4] and 1 or 0
  end
  redis.call('HSET', R.k_settings, 'far', cmsgpack.pack(kept))
end
