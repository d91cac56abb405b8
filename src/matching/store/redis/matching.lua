-- tower-waiting-room: matching (queues of people waiting to be put in groups), atomically inside
-- Redis/Valkey. The semantics are exactly those of the embedded MemoryMatchStore
-- (src/matching/store/memory.rs, rules in src/matching/store/mod.rs); a conformance suite and a
-- differential test run against both.
--
-- Sent after a `#!lua` line and the shared reader of stored numbers
-- (src/store/redis/script/stored.lua), as src/matching/store/redis/mod.rs assembles it. The
-- `#!lua` line (Redis 7+, Valkey): the server checks memory before the script starts (an OOM
-- refuses the whole call, never half of it) and refuses keys of two slots in one call.
--
-- One script, two kinds of call, by the keys they are given:
--
-- A. THE USER'S POINTER, one key `{<prefix>:mu:<hex of the user id>}` (its own slot): which queue
--    the user was last sent to, as a CLAIM `<queue key>|<claim ms>|<nonce>` (the claim's value is
--    also its token: unique, as the nonce is 64 random bits). The rule "one place per user across
--    all queues" crosses slots, so it is kept by this pointer and the queue's `used` set together
--    (the argument is in src/matching/store/redis/mod.rs).
--   KEYS: 1 pointer  string  the claim, with a TTL that outlives the user's membership
--   ARGV: 1 op
--     claim: 2 now in ms (0: the server's TIME), 3 the expected value ('' = absent), 4 queue key,
--            5 nonce, 6 TTL in ms. Sets a new claim if the pointer holds the expected value.
--            Reply {1, claim} set; {0, current value ('' = absent)} not set.
--     read:  2 unused (0), 3 TTL in ms. The current value, its TTL renewed if there is one.
--            Reply {1, current value ('' = absent)}.
--     drop:  2 expected value. Deletes the pointer if it holds it. Reply {1} deleted, {0} not.
--     touch: 2 expected value, 3 TTL in ms. Renews the TTL if the pointer holds it. Reply {1}|{0}.
--
-- B. ONE QUEUE (a topic and a size), eight keys sharing the hash tag `{<prefix>:m:<queue key>}`,
--    so a Redis Cluster keeps a queue in one slot:
--   KEYS:
--   1 meta      hash  seq: the last waiter sequence number; formed: the last group number
--   2 line      zset  waiters, member = user id, score = sequence number (oldest first; the
--                     position is ZRANK + 1, O(log n))
--   3 expiry    zset  waiters' timeouts, member = the sequence number zero-padded to 20 digits
--                     followed by the user id (ties in time fall to the older waiter, as in the
--                     embedded store), score = when the wait times out, in ms
--   4 users     hash  everyone in the queue: user id -> `w\n<seq>\n<joined ms>\n<expires ms>\n
--                     <claim>` (waiting) or `g\n<group number>\n<claim>` (in a group); the claim
--                     is the pointer value the user joined under
--   5 groups    hash  group number -> `<expires ms>\n<app id, '' while pending>` followed by
--                     `\n<seq>\n<joined ms>\n<user id>` per member, oldest first (a user id holds
--                     no control character, so a newline separates safely)
--   6 pending   zset  pending groups, member = number zero-padded to 20 digits, score = when it
--                     is undone unless confirmed (ms)
--   7 confirmed zset  confirmed groups, same members, score = when the record is dropped (ms)
--   8 used      zset  the claims that joined a user to this queue, score = the claim's time: a
--                     claim joins at most once; kept until it is `used_keep` old (by then it is
--                     past `grace` and refused anyway)
--   ARGV:
--   1 op: enter | leave | confirm | tick
--   2 now in ms, or 0 (NOW_FROM_SERVER) to use the server's TIME (shared by every process)
--   3 the queue's group size   4 fallback_after ms   5 timeout ms   6 confirm_ttl ms
--   7 keep_confirmed ms        8 the most expiries and groups per step (MAX_MATCH_WORK_PER_CALL)
--   9 grace ms: a claim joins only while younger than this
--  10 used_keep ms: how long a used claim is remembered (more than grace)
--  11.. the operation's own: enter, leave: 11 user id, 12 the claim read from the pointer;
--       confirm: 11 group number, 12 the application's id
--
-- Every queue call first settles a user's queue only if the user is in it (as the embedded store
-- settles only the queue a user is in), then:
--   enter: ENSURES the claim: the user is in the queue (settled: present), or the claim already
--          joined (done) or is too old (expired), or the user joins now under it (joined). The
--          process that made the claim, and any process that finds it in flight (a join of the
--          same user elsewhere, a status, a leave), call the same enter: whoever comes first
--          completes the join, so a claim in flight is never answered as idle.
--   leave: enter's ensure, then the user leaves; the state is the one before leaving.
--   confirm: the housekeeping, then the group is confirmed (or not).
--   tick: the housekeeping and formation.
-- Reply: {code, n, user_1, claim_1, ..., user_n, claim_n, state...}: the n users who went back
-- to the line from an undone group (their pointers' TTLs are renewed by the caller), then:
--   codes 1 present under this claim, 2 present under another claim, 3 joined now, 4 done (the
--   claim joined before and the user has gone), 5 expired (the claim is older than grace and
--   never joined): enter's state is the user's now, leave's the one before leaving;
--   6 confirmed, 7 confirmed before with another id (state: the group), 8 unknown (no state);
--   9 tick (state: the number of groups formed).
-- State: {'i'} idle | {'w', position, waiting, waited ms, expires in ms} |
--        {'m', group number, expires in ms, app id ('' while pending), member, member, ...}
-- Numbers are written with %d (never tostring, whose %.14g would round large values); the crate
-- keeps every duration below 2^50 ms, so sums stay exact in Lua's doubles.
--
-- Damage: every number read back from a key is read strictly (stored.lua: 'inf', 'nan', '2.5',
-- '0x10', '' or out of range read as missing), and repaired where it is read:
--   - meta's seq or formed damaged: set past every number in use (the line's last score; the
--     groups' numbers) before it is counted on, so no waiter goes ahead of the line and no
--     group number is handed out twice;
--   - a waiter's record with a damaged field: its sequence number taken from its place in line
--     (without one, the record is dropped: the user is idle), its join time as now, its timeout
--     now + timeout; a group member's record whose group number is damaged is dropped (idle:
--     in no group, so never in two);
--   - a group record with a damaged expiry: the expiry its pending or confirmed entry holds; a
--     member's damaged sequence number or join time: a new number (the back of the line) and
--     now, should the group be undone;
--   - a pending or confirmed entry whose time is no finite number: due, when a call about its
--     group or one of its members finds it; a member that is no padded number: removed;
--   - a timeout entry whose sequence number is not its user's: removed alone.

local op = ARGV[1]
local now = tonumber(ARGV[2])
if now == 0 then
  local t = redis.call('TIME')
  now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end

local function int(n) return string.format('%d', n) end

-- A. The pointer.
if op == 'claim' then
  local current = redis.call('GET', KEYS[1]) or ''
  if current ~= ARGV[3] then return {0, current} end
  local claim = ARGV[4] .. '|' .. int(now) .. '|' .. ARGV[5]
  redis.call('SET', KEYS[1], claim, 'PX', ARGV[6])
  return {1, claim}
elseif op == 'read' then
  -- The current claim, its time to live renewed: a status or a leave reads it before the
  -- queue's step, and a pointer in use must outlive its user's membership. (Renewing a claim
  -- that turns out finished is harmless: the caller then drops it by compare-and-set.)
  local current = redis.call('GET', KEYS[1])
  if not current then return {1, ''} end
  redis.call('PEXPIRE', KEYS[1], ARGV[3])
  return {1, current}
elseif op == 'drop' then
  if redis.call('GET', KEYS[1]) ~= ARGV[2] then return {0} end
  redis.call('DEL', KEYS[1])
  return {1}
elseif op == 'touch' then
  if redis.call('GET', KEYS[1]) ~= ARGV[2] then return {0} end
  redis.call('PEXPIRE', KEYS[1], ARGV[3])
  return {1}
end

-- B. A queue.
local k_meta, k_line, k_expiry, k_users = KEYS[1], KEYS[2], KEYS[3], KEYS[4]
local k_groups, k_pending, k_confirmed, k_used = KEYS[5], KEYS[6], KEYS[7], KEYS[8]
local size = tonumber(ARGV[3])
local fallback_after = tonumber(ARGV[4])
local timeout = tonumber(ARGV[5])
local confirm_ttl = tonumber(ARGV[6])
local keep_confirmed = tonumber(ARGV[7])
local max_work = tonumber(ARGV[8])
local grace = tonumber(ARGV[9])
local used_keep = tonumber(ARGV[10])

-- Users who went back to the line from an undone group, with their claims: {user, claim, ...}.
local requeued = {}

local function pad(n) return string.format('%020d', n) end
-- The number a padded member (pad) holds, read strictly; nil if it holds none.
local function unpad(m)
  return stored_integer(string.match(m or '', '^0*(%d+)$'), 0, STORED_MAX)
end
local function stored_ms(v) return stored_integer(v, 0, STORED_MAX) end
local function since(t) if now > t then return now - t end return 0 end
local function until_(t) if t > now then return t - now end return 0 end

local function split(s)
  local out = {}
  for part in string.gmatch(s .. '\n', '([^\n]*)\n') do out[#out + 1] = part end
  return out
end

-- Where `u` is in this queue: nil, {kind = 'w', seq, joined, expires, claim} or
-- {kind = 'g', number, claim}. A damaged record is repaired here (see Damage, above).
local function place(u)
  local raw = redis.call('HGET', k_users, u)
  if not raw then return nil end
  local f = split(raw)
  if f[1] == 'w' and f[5] then
    local p = {kind = 'w', seq = stored_ms(f[2]), joined = stored_ms(f[3]),
      expires = stored_ms(f[4]), claim = f[5]}
    if p.seq and p.joined and p.expires then return p end
    local in_line = stored_score(redis.call('ZSCORE', k_line, u))
    if p.seq == nil and in_line and in_line == math.floor(in_line) and in_line >= 0
        and in_line <= STORED_MAX then
      p.seq = in_line
    end
    if p.seq == nil then
      redis.call('ZREM', k_line, u)
      redis.call('HDEL', k_users, u)
      return nil
    end
    p.joined, p.expires = p.joined or now, p.expires or now + timeout
    redis.call('ZADD', k_line, int(p.seq), u)
    redis.call('ZADD', k_expiry, int(p.expires), pad(p.seq) .. u)
    redis.call('HSET', k_users, u, 'w\n' .. int(p.seq) .. '\n' .. int(p.joined) .. '\n' ..
      int(p.expires) .. '\n' .. p.claim)
    return p
  end
  local number = f[1] == 'g' and f[3] and stored_ms(f[2])
  if not number then
    redis.call('HDEL', k_users, u)
    return nil
  end
  return {kind = 'g', number = number, claim = f[3]}
end

local function in_group(u, number)
  local p = place(u)
  return p ~= nil and p.kind == 'g' and p.number == number
end

-- A group record: {expires, app, members = {{seq, joined, user}, ...}}, or nil.
local function group(number)
  local raw = redis.call('HGET', k_groups, int(number))
  if not raw then return nil end
  local f = split(raw)
  local g = {expires = stored_ms(f[1]), app = f[2] or '', members = {}}
  if g.expires == nil then
    local at = stored_score(redis.call('ZSCORE', k_pending, pad(number)))
      or stored_score(redis.call('ZSCORE', k_confirmed, pad(number)))
    g.expires = math.min(math.max(math.floor(at or now), 0), STORED_MAX)
  end
  for i = 3, #f - 2, 3 do
    g.members[#g.members + 1] = {seq = stored_ms(f[i]), joined = stored_ms(f[i + 1]) or now,
      user = f[i + 2]}
  end
  return g
end

local function save_group(number, g)
  local parts = {int(g.expires), g.app}
  for _, m in ipairs(g.members) do
    parts[#parts + 1] = int(m.seq)
    parts[#parts + 1] = int(m.joined)
    parts[#parts + 1] = m.user
  end
  redis.call('HSET', k_groups, int(number), table.concat(parts, '\n'))
end

-- The next number of meta's `field` (seq: a waiter's; formed: a group's). A missing or damaged
-- one is first set to `floor_of()`, the last number in use, so none is handed out twice and no
-- waiter goes ahead of the line.
local function next_number(field, floor_of)
  if stored_ms(redis.call('HGET', k_meta, field)) == nil then
    redis.call('HSET', k_meta, field, int(floor_of()))
  end
  return redis.call('HINCRBY', k_meta, field, 1)
end

-- The last waiter's sequence number (0: none that is one).
local function last_seq()
  local tail = stored_score(redis.call('ZRANGE', k_line, -1, -1, 'WITHSCORES')[2])
  if tail and tail >= 0 and tail <= STORED_MAX then return math.floor(tail) end
  return 0
end

-- The largest group number in use (0: none).
local function last_group()
  local last = 0
  for _, n in ipairs(redis.call('HKEYS', k_groups)) do
    local number = stored_ms(n)
    if number and number > last then last = number end
  end
  return last
end

local function add_waiter(u, seq, joined, expires, claim)
  redis.call('ZADD', k_line, int(seq), u)
  redis.call('ZADD', k_expiry, int(expires), pad(seq) .. u)
  redis.call('HSET', k_users, u, 'w\n' .. int(seq) .. '\n' .. int(joined) .. '\n' ..
    int(expires) .. '\n' .. claim)
end

local function remove_waiter(u, p)
  redis.call('ZREM', k_line, u)
  redis.call('ZREM', k_expiry, pad(p.seq) .. u)
end

-- Undoes pending group `number`: its members (but `leaving`) go back to the line with their
-- sequence numbers (so at the front, in their order) and a fresh timeout.
local function dissolve(number, leaving)
  if not redis.call('ZSCORE', k_pending, pad(number)) then return end
  local g = group(number)
  redis.call('ZREM', k_pending, pad(number))
  redis.call('HDEL', k_groups, int(number))
  if not g then return end
  for _, m in ipairs(g.members) do
    if m.user == leaving then
      redis.call('HDEL', k_users, m.user)
    else
      local p = place(m.user)
      if p ~= nil and p.kind == 'g' and p.number == number then
        -- A damaged sequence number: a new one, at the back (see Damage).
        local seq = m.seq or next_number('seq', last_seq)
        add_waiter(m.user, seq, m.joined, now + timeout, p.claim)
        requeued[#requeued + 1] = m.user
        requeued[#requeued + 1] = p.claim
      end
    end
  end
end

-- Forms groups from the oldest waiters: full ones, then a fallback one. Answers how many.
local function form()
  local formed = 0
  for _ = 1, max_work do
    local waiting = redis.call('ZCARD', k_line)
    local take
    if waiting >= size then
      take = size
    elseif size > 2 and waiting >= 2 then
      local oldest = place(redis.call('ZRANGE', k_line, 0, 0)[1])
      if oldest == nil or oldest.kind ~= 'w' or since(oldest.joined) < fallback_after then
        break
      end
      take = waiting
    else
      break
    end
    local members = {}
    for _, u in ipairs(redis.call('ZRANGE', k_line, 0, take - 1)) do
      local p = place(u)
      if p == nil or p.kind ~= 'w' then
        -- A place in line without a waiter's record (damage): no waiter; the step looks again.
        redis.call('ZREM', k_line, u)
        members = nil
        break
      end
      members[#members + 1] = {u, p}
    end
    if members then
      local number = next_number('formed', last_group)
      local g = {expires = now + confirm_ttl, app = '', members = {}}
      for _, m in ipairs(members) do
        local u, p = m[1], m[2]
        remove_waiter(u, p)
        g.members[#g.members + 1] = {seq = p.seq, joined = p.joined, user = u}
        redis.call('HSET', k_users, u, 'g\n' .. int(number) .. '\n' .. p.claim)
      end
      save_group(number, g)
      redis.call('ZADD', k_pending, int(g.expires), pad(number))
      formed = formed + 1
    end
  end
  return formed
end

-- Drops confirmed group `number`'s record: its members are idle.
local function drop_confirmed(number)
  local g = group(number)
  redis.call('ZREM', k_confirmed, pad(number))
  redis.call('HDEL', k_groups, int(number))
  if g then
    for _, m in ipairs(g.members) do
      if in_group(m.user, number) then redis.call('HDEL', k_users, m.user) end
    end
  end
end

-- Timeouts, undone and expired groups: at most max_work of each, oldest first.
local function housekeep()
  for _, m in ipairs(redis.call('ZRANGEBYSCORE', k_expiry, '-inf', int(now), 'LIMIT', 0,
      max_work)) do
    local u = string.sub(m, 21)
    redis.call('ZREM', k_expiry, m)
    -- Only the user's own timeout: an entry of another number is a stray (see Damage).
    local p = place(u)
    if p ~= nil and p.kind == 'w' and pad(p.seq) == string.sub(m, 1, 20) then
      remove_waiter(u, p)
      redis.call('HDEL', k_users, u)
    end
  end
  for _, n in ipairs(redis.call('ZRANGEBYSCORE', k_pending, '-inf', int(now), 'LIMIT', 0,
      max_work)) do
    local number = unpad(n)
    if number then dissolve(number, nil) else redis.call('ZREM', k_pending, n) end
  end
  for _, n in ipairs(redis.call('ZRANGEBYSCORE', k_confirmed, '-inf', int(now), 'LIMIT', 0,
      max_work)) do
    local number = unpad(n)
    if number then drop_confirmed(number) else redis.call('ZREM', k_confirmed, n) end
  end
  -- Claims past remembering: bounded too.
  local old = redis.call('ZRANGEBYSCORE', k_used, '-inf', int(now - used_keep), 'LIMIT', 0,
    max_work)
  if #old > 0 then redis.call('ZREM', k_used, unpack(old)) end
end

-- The housekeeping, then formation. Answers the groups formed.
local function settle()
  housekeep()
  return form()
end

-- Group `number`, if its time is up: undone (pending) or dropped (confirmed). What a call is
-- about comes first, so its timings hold exactly however much else is due (the bounded
-- housekeeping may not reach it in this call).
local function expire_group(number)
  -- A time that is no finite number is due (see Damage).
  local pending = redis.call('ZSCORE', k_pending, pad(number))
  if pending then
    if (stored_score(pending) or now) <= now then dissolve(number, nil) end
    return
  end
  local confirmed = redis.call('ZSCORE', k_confirmed, pad(number))
  if confirmed and (stored_score(confirmed) or now) <= now then drop_confirmed(number) end
end

-- The user's own expiry (their wait, or their group's), then the housekeeping.
local function housekeep_user(u)
  local p = place(u)
  if p ~= nil and p.kind == 'w' and p.expires <= now then
    remove_waiter(u, p)
    redis.call('HDEL', k_users, u)
  elseif p ~= nil and p.kind == 'g' then
    expire_group(p.number)
  end
  housekeep()
end

local function group_state(number, g)
  local out = {'m', number, until_(g.expires), g.app}
  for _, m in ipairs(g.members) do out[#out + 1] = m.user end
  return out
end

local function state(u)
  local p = place(u)
  if p == nil then return {'i'} end
  if p.kind == 'w' then
    local rank = redis.call('ZRANK', k_line, u)
    if not rank then return {'i'} end
    return {'w', rank + 1, redis.call('ZCARD', k_line), since(p.joined), until_(p.expires)}
  end
  local g = group(p.number)
  if not g then return {'i'} end
  return group_state(p.number, g)
end

-- The user `u` under `claim`: 1 present under it, 2 present under another, 3 joined now,
-- 4 done, 5 expired (see the header). With `form_now`, groups form before the answer (a join,
-- a status); a leave forms them after the leaver left, so nobody is grouped by their own leave.
local function ensure(u, claim, form_now)
  if redis.call('HEXISTS', k_users, u) == 1 then
    housekeep_user(u)
    if form_now then form() end
    local p = place(u)
    if p ~= nil then
      if p.claim == claim then return 1 end
      return 2
    end
  end
  if redis.call('ZSCORE', k_used, claim) then return 4 end
  local claim_ms = stored_ms(string.match(claim, '|(%d+)|'))
  if claim_ms == nil or now - claim_ms >= grace then return 5 end
  local seq = next_number('seq', last_seq)
  add_waiter(u, seq, now, now + timeout, claim)
  redis.call('ZADD', k_used, int(claim_ms), claim)
  settle()
  return 3
end

local function reply(code, tail)
  local out = {code, #requeued / 2}
  for _, v in ipairs(requeued) do out[#out + 1] = v end
  for _, v in ipairs(tail) do out[#out + 1] = v end
  return out
end

if op == 'enter' then
  local u = ARGV[11]
  local code = ensure(u, ARGV[12], true)
  return reply(code, state(u))
elseif op == 'leave' then
  local u = ARGV[11]
  local code = ensure(u, ARGV[12], false)
  if code > 3 then
    form()
    return reply(code, {'i'})
  end
  local before = state(u)
  local p = place(u)
  if p.kind == 'w' then
    remove_waiter(u, p)
    redis.call('HDEL', k_users, u)
  elseif redis.call('ZSCORE', k_pending, pad(p.number)) then
    dissolve(p.number, u)
  else
    redis.call('HDEL', k_users, u)
  end
  form()
  return reply(code, before)
elseif op == 'confirm' then
  local number, app = tonumber(ARGV[11]), ARGV[12]
  expire_group(number)
  settle()
  local g = group(number)
  if g and redis.call('ZSCORE', k_pending, pad(number)) then
    g.app = app
    g.expires = now + keep_confirmed
    save_group(number, g)
    redis.call('ZREM', k_pending, pad(number))
    redis.call('ZADD', k_confirmed, int(g.expires), pad(number))
    return reply(6, group_state(number, g))
  end
  if g == nil or not redis.call('ZSCORE', k_confirmed, pad(number)) then return reply(8, {}) end
  if g.app == app then return reply(6, group_state(number, g)) end
  return reply(7, group_state(number, g))
elseif op == 'tick' then
  return reply(9, {settle()})
end
return redis.error_reply('ERR matching.lua: unknown operation ' .. tostring(op))
