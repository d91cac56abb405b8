-- Joins in batches: the newcomers a gateway gathered while its previous join call for the room
-- was in flight (src/store/redis/batch.rs), placed by one call in the order the gateway
-- received them. A call's fixed cost (parsing, dispatch, entering Lua, the reply) is most of a
-- single join's; a batch pays it once.

-- The most newcomers one batch may carry: what a caller may send (the crate sends at most
-- src/store/redis/batch.rs's MAX_JOIN_BATCH, which a unit test holds within it).
local LIMIT_BATCH = 256

-- <LIBRARY>_join_batch: the joins (<LIBRARY>_join, visitor.lua) of a batch of newcomers, in
-- their order, exactly as that many calls of join one after the other would place them, in one
-- atomic call. In the fast path's window (fast_path.lua) a batch of distinct newcomers who hold
-- no slot and no place, all alive by their join and all fitting in the line, is placed by
-- F.fast_join_batch with one command of each kind; anything else goes through join's own
-- call (register.lua's F.room_call) for each newcomer in turn, answered each on its own (a
-- ban, a full line, a slot free for one of them).
-- Runs: call.lua F.refuse (a batch not as the crate sends it); batch.lua F.fast_join_batch;
--   else register.lua's F.room_call of join, for each newcomer.
-- KEYS: the room's 20 (keys.lua)
-- ARGV:
--   1 now
--   2 line_numbers
--   3 room_numbers
--   4 excused
--   5 sessions        the newcomers' ids, 16 raw bytes each, in the gateway's order (1 to
--                     LIMIT_BATCH of them)
--   6 schedule        never: a room with a schedule draws each newcomer's place, and its
--                     gateway sends its joins one by one; a batch with it is refused
-- Reply: {17, first, waiting} when the batch's fast path placed them all: the i-th newcomer
-- (from 1) at place first + i - 1, its position and the line's length waiting + i (join's
-- waiting reply {2, waiting + i, waiting + i, 0, first + i - 1}, which 64 of would cost the
-- call more than its commands); else join's reply for each newcomer, in their order ({{2, 7,
-- 7, 0, 41}, {1, ...}, ...}); fewer replies than newcomers when a join after the first ended
-- in an error (the rest are the gateway's to send one by one, where each gets that error on
-- its own); an error reply when the first one's did, or the call is refused (`WRARGS`),
-- before anything is written.
function F.join_batch(keys, args)
  local sessions = args[CALL_ARGS + 1]
  local len = type(sessions) == 'string' and string.len(sessions) or 0
  if #args ~= CALL_ARGS + 1 or len == 0 or len % 16 ~= 0 or len > 16 * LIMIT_BATCH then
    return F.refuse('a batch of joins: 1 to ' .. LIMIT_BATCH .. ' ids of 16 bytes, no schedule')
  end
  local n = len / 16
  local ok, placed = pcall(F.fast_join_batch, keys, args, n)
  if ok and placed then return placed end
  local replies = {}
  for i = 1, n do
    local one = {args[1], args[2], args[3], args[4], string.sub(sessions, 16 * i - 15, 16 * i)}
    local done, reply = pcall(F.room_call, 'enter', 1, true, 'join', keys, one)
    if not done or (type(reply) == 'table' and reply.err) then
      if i > 1 then return replies end
      if done then return reply end
      error(reply)
    end
    replies[i] = reply
  end
  return replies
end

-- The batch's fast path: the common batch (newcomers joining a long line while the room is
-- full) placed with GET, three ZMSCORE, ZCARD, INCRBY, ZCOUNT and one ZADD, whatever its size.
-- It answers only when every newcomer's join, made one after the other, would be answered by
-- the fast path as a newcomer alive by the join (fast_path.lua, F.fast_enter): the window open
-- for these line numbers and no schedule, the newcomers distinct, none holding a slot (active,
-- granted) or a place (line), all fitting under the line's bound, their numbers above the
-- window's `since` and above every number in line (else seq went back: main's). Then join i
-- would have taken number first + i - 1 and stood at waiting + i: the same writes (seq moved by
-- n, the n members added) and, in one short reply, the same answers. Returns nil, having
-- written nothing (numbers taken are given back), whenever one of these does not hold.
function F.fast_join_batch(keys, args, n)
  if args[4] ~= '0' and args[4] ~= '1' then return nil end
  local since, _, _, max_queue, wide = F.open_window(keys, args, nil)
  if not since then return nil end
  local sessions, seen = {}, {}
  for i = 1, n do
    local s = F.member(string.sub(args[CALL_ARGS + 1], 16 * i - 15, 16 * i), wide)
    if seen[s] then return nil end
    seen[s], sessions[i] = true, s
  end
  -- active, granted, line: nobody of the batch holds a slot or a place.
  for _, key in ipairs({keys[3], keys[4], keys[2]}) do
    local scores = redis.call('ZMSCORE', key, unpack(sessions))
    for i = 1, n do
      if scores[i] then return nil end
    end
  end
  local k_seq, k_line = keys[1], keys[2]
  local waiting = redis.call('ZCARD', k_line)
  if waiting + n > max_queue then return nil end
  local first = redis.call('INCRBY', k_seq, n) - n + 1
  if first <= since or redis.call('ZCOUNT', k_line, string.format('%d', first), '+inf') > 0 then
    -- Given back as F.give_back gives back one: seq is then as it was.
    if first == 1 then redis.call('DEL', k_seq) else redis.call('DECRBY', k_seq, n) end
    return nil
  end
  local members = {}
  for i = 1, n do
    members[2 * i - 1], members[2 * i] = string.format('%d', first + i - 1), sessions[i]
  end
  redis.call('ZADD', k_line, 'NX', unpack(members))
  return {REPLY.placed, first, waiting}
end
