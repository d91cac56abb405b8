-- One queue (a topic and a size): its keys, the arguments every queue function takes first, the
-- call's state, and the queue's records (a user's place, a group).
--
-- KEYS (eight, sharing the hash tag `{<prefix>:m:<queue key>}`, so a Redis Cluster keeps a
-- queue in one slot):
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
--
-- ARGV, first in every queue function (then the operation's own, in its header):
--   1 now             the time: 0 (NOW_FROM_SERVER) for the server's TIME (shared by every
--                     process), a process's clock within a second of it, or a manual
--                     clock's 'm<ms>' (time.lua)
--   2 size            the queue's group size
--   3 fallback_after  ms a waiter waits before a smaller group may form
--   4 timeout         ms a waiter waits at most
--   5 confirm_ttl     ms a pending group waits for its confirmation
--   6 keep_confirmed  ms a confirmed group's record is kept
--   7 max_work        the most expiries and groups per step (MAX_MATCH_WORK_PER_CALL)
--   8 grace           ms: a claim joins only while younger than this
--   9 used_keep       ms a used claim is remembered (more than grace)
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

-- How many keys a queue has, and how many arguments every queue function takes first.
local QUEUE_KEYS, QUEUE_ARGS = 8, 9

-- The call's state: locals of the chunk that every helper reads, every one of them set by
-- `begin` when a queue function starts (Redis runs one call at a time, so a call never sees
-- another's).
local now, size, fallback_after, timeout, confirm_ttl, keep_confirmed, max_work, grace, used_keep
local k_meta, k_line, k_expiry, k_users, k_groups, k_pending, k_confirmed, k_used
-- Users who went back to the line from an undone group, with their claims: {user, claim, ...}.
local requeued

-- Sets the call's state from a queue function's keys and arguments; the error reply that
-- refuses the call instead for arguments out of bounds (library.lua), before anything is read.
local function begin(keys, args)
  local refused
  now, refused = call_time_or_refusal(args[1])
  if not now then return refused end
  size = stored_integer(args[2], 2, 8)
  fallback_after = stored_integer(args[3], 0, MAX_DURATION)
  timeout = stored_integer(args[4], 0, MAX_DURATION)
  confirm_ttl = stored_integer(args[5], 0, MAX_DURATION)
  keep_confirmed = stored_integer(args[6], 0, MAX_DURATION)
  max_work = stored_integer(args[7], 1, 10000)
  grace = stored_integer(args[8], 0, MAX_DURATION)
  used_keep = stored_integer(args[9], 0, MAX_DURATION)
  if not (size and fallback_after and timeout and confirm_ttl and keep_confirmed and max_work
      and grace and used_keep) then
    return refuse('a queue number that is no whole number within its bounds')
  end
  k_meta, k_line, k_expiry, k_users = keys[1], keys[2], keys[3], keys[4]
  k_groups, k_pending, k_confirmed, k_used = keys[5], keys[6], keys[7], keys[8]
  requeued = {}
  return nil
end

-- Whether `id` is a user's or an application's id as the crate sends one: 1 to 128 bytes, no
-- control character (a newline separates the fields of a user's and a group's record).
local function is_id(id)
  return type(id) == 'string' and #id >= 1 and #id <= 128 and not string.find(id, '%c')
end

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
