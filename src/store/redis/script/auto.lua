-- The capacity controller: one decision for all the gateways of a room whose capacity follows
-- the app, three functions of their own (register.lua), each with its KEYS, ARGV and reply in
-- the header above its body. A report and a switch run on the controller's record alone (not
-- the room's call, not main); an apply is a room call, which writes the capacity as configure
-- does (operator.lua).
--
-- The semantics are exactly those of the embedded MemoryStore's (src/store/memory/auto.rs),
-- and the rules are src/store/auto.rs's; the conformance suite runs against both. Every gateway
-- adds the counts it measured into the room's one window on the store's clock; one holds the
-- lease, renewed by each of its reports, and it alone is handed the window once it has lasted
-- the window's length; its decision is written only while it holds the lease and the capacity
-- is the one it last wrote.
--
-- The record (KEYS 1 of a report and a switch, KEYS 21 of an apply, in the room's hash tag, so
-- a Redis Cluster keeps it in the room's slot): `{prefix}:{room}:auto`, a hash, no TTL (an
-- operator's switch must outlast any quiet spell):
--   off       why the controller is off: 'set_by_hand' or 'changed_elsewhere'; missing: on
--   holder    the lease holder's gateway id (16 lowercase hex digits, never all zero)
--   ends      when its lease ends, in ms
--   since     when the window began, in ms; missing: at the next report
--   ok, errors, timeouts   the window's counts so far
--   load      the highest load reported in the window (0 .. 100); missing: none
--   l0 .. l128             the window's latency buckets (src/auto/histogram.rs) that counted
--                          something; missing: 0
--   cap       the capacity the controller last wrote; missing: any capacity is accepted next
--   status    the status the decider last wrote, at most AUTO_STATUS_MAX bytes
--   terms     the terms an operator set while the room runs, at most AUTO_STATUS_MAX bytes
--             (src/auto/mod.rs writes them); missing: none, each gateway decides by its own
-- Every number is written with '%d' and read with stored.lua's reader. Damage: a key of another
-- type is deleted and read as a new record; a field that is not one as these functions write it
-- (a number out of its range or of another form, an off reason not one of the two, a gateway id
-- of another shape, a status too long) reads as missing and is deleted. A lost or damaged
-- record thus reads as on, no lease, an empty window, no capacity written: the capacity is only
-- ever written within the operator's bounds, and nothing here lets anyone in.

-- The latency buckets a report may name, 0 .. AUTO_BUCKETS - 1 (src/auto/histogram.rs: the
-- last also takes everything slower).
local AUTO_BUCKETS = 129
-- The longest window or lease a report may name: an hour, in ms.
local AUTO_TERM_MAX = 3600000
-- The most bytes of a decision's status (src/store/auto.rs, MAX_AUTO_STATUS).
local AUTO_STATUS_MAX = 200
-- Why the controller is off, as the record keeps it (src/store/auto.rs, AutoOff::as_str).
local AUTO_OFF = {set_by_hand = true, changed_elsewhere = true}
-- The record's numbers, each read within its range.
local AUTO_NUMBERS = {ends = {0, STORED_MAX}, since = {0, STORED_MAX}, ok = {0, STORED_MAX},
  errors = {0, STORED_MAX}, timeouts = {0, STORED_MAX}, load = {0, 100}, cap = {1, U32_MAX}}
-- Each latency bucket's field, by its index.
local AUTO_LATENCY_FIELDS = {}
for i = 0, AUTO_BUCKETS - 1 do AUTO_LATENCY_FIELDS[i] = 'l' .. i end

-- Whether `id` is a gateway's id as GatewayId writes it (src/store/auto.rs): 16 lowercase hex
-- digits, not all zero.
function F.auto_gateway(id)
  return type(id) == 'string' and #id == 16 and string.find(id, '^[0-9a-f]+$') ~= nil
    and id ~= '0000000000000000'
end

-- The latency buckets of a report: `text` as the crate sends it, '<index> <count> ' for each
-- bucket that counted something, each once, index 0 .. AUTO_BUCKETS - 1, count at least 1
-- (nothing for none). A table of count by index, or nil for text of any other shape.
function F.auto_latencies(text)
  if type(text) ~= 'string' or string.gsub(text, '%d+ %d+ ', '') ~= '' then return nil end
  local out = {}
  for i, n in string.gmatch(text, '(%d+) (%d+) ') do
    i, n = stored_integer(i, 0, AUTO_BUCKETS - 1), stored_integer(n, 1, STORED_MAX)
    if not i or not n or out[i] then return nil end
    out[i] = n
  end
  return out
end

-- The record under `key`, a hash or nothing: one of another type is deleted (it reads as new).
-- Whether one is there.
function F.auto_key(key)
  local kind = redis.call('TYPE', key)['ok']
  if kind == 'hash' then return true end
  if kind ~= 'none' then redis.call('DEL', key) end
  return false
end

-- The record under `key`, read as the header says: a table of its fields (each number read in
-- its range, the latency buckets in `lat`, by index), each damaged field missing, and deleted.
function F.auto_read(key)
  local rec, damaged = {lat = {}}, {}
  if not F.auto_key(key) then return rec end
  local flat = redis.call('HGETALL', key)
  for at = 1, #flat, 2 do
    local field, value = flat[at], flat[at + 1]
    local range, bucket = AUTO_NUMBERS[field], string.match(field, '^l(%d+)$')
    -- As the buckets' fields are written: 'l7', never 'l007' (another field, left alone).
    bucket = bucket and stored_integer(bucket, 0, AUTO_BUCKETS - 1)
    local read
    if range then
      read = stored_integer(value, range[1], range[2])
      rec[field] = read
    elseif bucket then
      read = stored_integer(value, 1, STORED_MAX)
      rec.lat[bucket] = read
    elseif field == 'off' then
      read = AUTO_OFF[value] and value
      rec.off = read or nil
    elseif field == 'holder' then
      read = F.auto_gateway(value) and value
      rec.holder = read or nil
    elseif field == 'status' or field == 'terms' then
      read = #value <= AUTO_STATUS_MAX and value
      rec[field] = read or nil
    else
      -- Not one of this version's fields (a newer one's): left as it is.
      read = true
    end
    if not read then damaged[#damaged + 1] = field end
  end
  if #damaged > 0 then redis.call('HDEL', key, unpack(damaged)) end
  return rec
end

-- The first fields of a report's reply (see auto_report): off, deciding, status, terms.
function F.auto_state(rec, deciding)
  return rec.off or '', deciding and 1 or 0, {rec.status}, {rec.terms}
end

-- <LIBRARY>_auto_report: a gateway's counts added to the room's window, the lease taken or
-- renewed when it is free or the reporter's, and the window handed to the lease holder once it
-- has lasted window_ms.
-- Runs: F.auto_gateway, F.auto_latencies, F.auto_read (F.auto_key), F.auto_state; call.lua
--   F.refuse; time.lua's clock and stored.lua's reader; nothing of register.lua's room call.
-- KEYS: 1 auto (the record, above)
-- ARGV:
--   1 now         the time, as a room call's (time.lua): 0 for the server's TIME, a gateway's
--                 clock within a second of it, or a manual clock's 'm<ms>'
--   2 gateway     the reporter's id, 16 lowercase hex digits, not all zero
--   3 window_ms   how long a window lasts, 1 .. 3600000
--   4 lease_ms    how long a lease lasts from the report that takes or renews it, 1 .. 3600000
--   5 ok          requests answered in time since the reporter's last report
--   6 errors      requests failed
--   7 timeouts    requests timed out (each count a whole number, 0 .. 2^53)
--   8 load        the highest load the app reported, 0 .. 100; -1 for none
--   9 latencies   the latency buckets that counted something, '<index> <count> ' each (each
--                 index once, up to 128; each count at least 1); empty for none
-- Reply: {'report', off, deciding, {status}, {terms}}, or, to the lease holder once the window
-- is over, {'window', off, deciding, {status}, {terms}, start_ms, end_ms, ok, errors, timeouts,
-- load (-1: none), {index, count, ...}}; off is '' (on), 'set_by_hand' or 'changed_elsewhere' (a
-- report of a controller that is off is counted all the same); deciding 1 when the reporter
-- holds the lease, else 0; {status} the decider's last status, {terms} the operator's terms,
-- {} for none. The lease: the holder's
-- while it ends after now and no further than lease_ms from now (one further was taken on a
-- clock since gone back: run out). The window begins at the first report after the last one
-- handed over (or ever), or now if it would begin in the future (a clock gone back).
-- Arguments of any other shape are refused (WRARGS, or WRCLOCK for the time) before the record
-- is read.
function F.auto_report(keys, args)
  local gateway, lat = args[2], F.auto_latencies(args[9])
  local window_ms = stored_integer(args[3], 1, AUTO_TERM_MAX)
  local lease_ms = stored_integer(args[4], 1, AUTO_TERM_MAX)
  local counts = {stored_integer(args[5], 0, STORED_MAX), stored_integer(args[6], 0, STORED_MAX),
    stored_integer(args[7], 0, STORED_MAX)}
  local load = stored_integer(args[8], -1, 100)
  if #args ~= 9 then
    return F.refuse('a report of another number of arguments')
  elseif not F.auto_gateway(gateway) then
    return F.refuse('a report without a gateway id of 16 lowercase hex digits')
  elseif not window_ms or not lease_ms then
    return F.refuse('a window or lease outside 1 ms to an hour')
  elseif not counts[1] or not counts[2] or not counts[3] or not load then
    return F.refuse('counts or a load that are no whole numbers in range')
  elseif not lat then
    return F.refuse('latency buckets not as pairs of a bucket and a count')
  end
  local now, refused = call_time_or_refusal(args[1])
  if not now then return refused end
  local key = keys[1]
  local rec = F.auto_read(key)
  local live = rec.holder and rec.ends and now < rec.ends and rec.ends <= now + lease_ms
  local deciding = not live or rec.holder == gateway
  local write = {}
  local function set(field, n)
    write[#write + 1], write[#write + 2] = field, string.format('%d', n)
  end
  if deciding then
    write[1], write[2] = 'holder', gateway
    set('ends', now + lease_ms)
  end
  local since = rec.since
  if since == nil or since > now then since = now end
  local sums = {}
  for i, field in ipairs({'ok', 'errors', 'timeouts'}) do
    sums[i] = math.min((rec[field] or 0) + counts[i], STORED_MAX)
  end
  if load >= 0 and (rec.load == nil or load > rec.load) then rec.load = load end
  for i, n in pairs(lat) do rec.lat[i] = math.min((rec.lat[i] or 0) + n, STORED_MAX) end
  local off, decides, status, terms = F.auto_state(rec, deciding)
  if deciding and now - since >= window_ms then
    -- Handed over: the next window begins now, empty.
    local buckets, gone = {}, {'load'}
    for i = 0, AUTO_BUCKETS - 1 do
      if rec.lat[i] then
        buckets[#buckets + 1], buckets[#buckets + 2] = i, rec.lat[i]
        gone[#gone + 1] = AUTO_LATENCY_FIELDS[i]
      end
    end
    redis.call('HDEL', key, unpack(gone))
    set('since', now)
    set('ok', 0)
    set('errors', 0)
    set('timeouts', 0)
    redis.call('HSET', key, unpack(write))
    return {'window', off, decides, status, terms, since, now, sums[1], sums[2], sums[3],
      rec.load or -1, buckets}
  end
  set('since', since)
  set('ok', sums[1])
  set('errors', sums[2])
  set('timeouts', sums[3])
  if rec.load then set('load', rec.load) end
  for i in pairs(lat) do set(AUTO_LATENCY_FIELDS[i], rec.lat[i]) end
  redis.call('HSET', key, unpack(write))
  return {'report', off, decides, status, terms}
end

-- An apply's own arguments (its gateway id and status), checked with call.lua's check_own
-- before anything is read; its capacity is in OWN_LIMITS. An error reply, or nil.
function F.check_auto_apply()
  if not F.auto_gateway(R.args[5]) then
    return F.refuse('auto_apply gateway id not 16 lowercase hex digits')
  end
  if R.args[7] == '0' then
    return F.refuse('auto_apply rate of 0 (-1 leaves it as it is)')
  end
  if #R.args[8] > AUTO_STATUS_MAX then
    return F.refuse('auto_apply status longer than ' .. AUTO_STATUS_MAX .. ' bytes')
  end
  return nil
end

-- <LIBRARY>_auto_apply: the decider's capacity, written as configure writes one, if it holds
-- the lease, the controller is on and the room's capacity is the one the controller last
-- wrote.
-- Runs: register.lua's room call (its own arguments checked by call.lua's check_own, with
--   auto.lua F.check_auto_apply), then F.auto_read (F.auto_key); operator.lua F.write_capacity,
--   F.write_settings; line.lua F.promote.
-- KEYS: the room's 20 (keys.lua), then 21 auto (the record, above)
-- ARGV:
--   1 now
--   2 line_numbers
--   3 room_numbers
--   4 excused
--   5 gateway         the decider's id, 16 lowercase hex digits, not all zero
--   6 capacity        1 .. 2^32 - 1
--   7 rate            the admission rate to write with it, 1 .. 2^32 - 1; -1 leaves it
--   8 status          what every gateway shows, at most 200 bytes
--   9 schedule        optional, for a room with a schedule (call.lua)
-- Reply: {13, capacity before} applied (the capacity before it remembered for the wait
-- estimate, a raise promoting at once, as configure); {14} not deciding: the caller does not
-- hold a live lease; {15, off} the controller is off ('set_by_hand' or 'changed_elsewhere');
-- {16, capacity} the room's capacity is not the one the controller last wrote: it is now off
-- (changed_elsewhere). Of the record, nothing is written but an applied decision and that
-- switch (and, as on every read, a damaged field deleted).
function OPERATIONS.auto_apply()
  local key, capacity, rate = R.keys[K_AUTO], tonumber(R.args[6]), tonumber(R.args[7])
  local rec = F.auto_read(key)
  if rec.off then return {REPLY.auto_off, rec.off} end
  if rec.holder ~= R.args[5] or not rec.ends or R.now >= rec.ends then
    return {REPLY.auto_not_deciding}
  end
  local before = R.capacity
  if rec.cap and rec.cap ~= before then
    -- Someone else wrote the capacity since (an operator, an older gateway): theirs stands.
    redis.call('HSET', key, 'off', 'changed_elsewhere')
    return {REPLY.auto_changed, before}
  end
  local new_rate = rate >= 1 and rate ~= R.rate
  if capacity ~= before or new_rate then
    if capacity ~= before then F.write_capacity(capacity) end
    if new_rate then R.rate = rate end
    F.write_settings()
    -- A raised capacity lets people in now, not at the next call.
    F.promote()
  end
  redis.call('HSET', key, 'cap', string.format('%d', capacity), 'status', R.args[8])
  return {REPLY.auto_applied, before}
end

-- <LIBRARY>_auto_switch: the controller on or off, for every gateway.
-- Runs: F.auto_key; call.lua F.refuse; nothing of register.lua's room call.
-- KEYS: 1 auto (the record, above)
-- ARGV:
--   1 off         '' to switch it on, or why it is off: 'set_by_hand' or 'changed_elsewhere'
--   2 terms       't' and the terms to keep (at most AUTO_STATUS_MAX bytes after the 't'), or
--                 '' to keep those kept
-- Reply: {'on'} (off and cap deleted: the capacity the room has is accepted by the next
-- decision), or {'off', off} (off set; the rest kept, reports still counted); the terms
-- written first, either way.
function F.auto_switch(keys, args)
  local off, terms = args[1], args[2]
  if #args ~= 2 or (off ~= '' and not AUTO_OFF[off]) then
    return F.refuse('an off reason that is neither empty, set_by_hand nor changed_elsewhere')
  end
  if terms ~= '' and (string.sub(terms, 1, 1) ~= 't' or #terms > AUTO_STATUS_MAX + 1) then
    return F.refuse('terms not a t and at most ' .. AUTO_STATUS_MAX .. ' bytes')
  end
  local key = keys[1]
  F.auto_key(key)
  if terms ~= '' then redis.call('HSET', key, 'terms', string.sub(terms, 2)) end
  if off == '' then
    redis.call('HDEL', key, 'off', 'cap')
    return {'on'}
  end
  redis.call('HSET', key, 'off', off)
  return {'off', off}
end
