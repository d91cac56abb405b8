-- The algorithm of the closest open-source peer, a Next.js waiting room with one Redis script,
-- written for this benchmark from its description; not their code.
--
-- Used only by examples/bench.rs (bench_parts/redis_scale.rs) to compare costs side by side with
-- our room script on the same redis-server. What it does on EVERY call, whoever calls:
--   1. reads the whole active hash (HGETALL) and deletes the expired entries (HDEL): O(capacity);
--   2. drops stale waiters, those who joined longer than queue_ttl ago (ZREMRANGEBYSCORE);
--   3. checks the caller (HGET), counts the active (HLEN), reads the head (ZRANGE 0 0) and the
--      line's length (ZCARD);
--   4. lets the caller in (HSET, expiry = now + active_ttl) if a slot is free and they are the
--      head or nobody waits; otherwise puts them in line with their join time (ZADD NX) and
--      answers their rank (ZRANK).
--
-- KEYS: 1 active   hash  session -> expiry in ms
--       2 waiting  zset  session, score = join time in ms
-- ARGV: 1 session id (the same bytes our script gets, for a like-for-like memory comparison)
--       2 capacity   3 active_ttl_ms   4 queue_ttl_ms
-- Reply: {1, expiry_ms} active           {2, position (1-based)} waiting
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local k_active, k_waiting = KEYS[1], KEYS[2]
local s = ARGV[1]
local capacity = tonumber(ARGV[2])
local active_ttl = tonumber(ARGV[3])
local queue_ttl = tonumber(ARGV[4])

local all = redis.call('HGETALL', k_active)
for i = 1, #all, 2 do
  if tonumber(all[i + 1]) <= now then
    redis.call('HDEL', k_active, all[i])
  end
end
redis.call('ZREMRANGEBYSCORE', k_waiting, '-inf', '(' .. (now - queue_ttl))

local mine = redis.call('HGET', k_active, s)
local count = redis.call('HLEN', k_active)
local head = redis.call('ZRANGE', k_waiting, 0, 0)
local waiting = redis.call('ZCARD', k_waiting)
if mine then
  return {1, tonumber(mine)}
end
if count < capacity and (waiting == 0 or head[1] == s) then
  if head[1] == s then
    redis.call('ZREM', k_waiting, s)
  end
  local expiry = now + active_ttl
  redis.call('HSET', k_active, s, expiry)
  return {1, expiry}
end
redis.call('ZADD', k_waiting, 'NX', now, s)
return {2, redis.call('ZRANK', k_waiting, s) + 1}
