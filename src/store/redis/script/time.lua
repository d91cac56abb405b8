-- The time a call names, read as strictly as a stored number (stored.lua), and held to the
-- server's: shared by every script of the crate, this library (the tickets' functions
-- included) and matching's, each assembled with it (src/store/redis/protocol.rs,
-- matching/src/store/redis/calls.rs).
--
-- A call names its time as one argument: '0' (NOW_FROM_SERVER) for the server's TIME, shared
-- by every gateway; or the gateway's own clock in ms (RedisStoreBuilder::clock), taken only
-- within CLOCK_SKEW ms of the server's TIME: a clock far ahead would expire every slot, place
-- and ticket record, one far behind would hand out slots that end early (and so let in more
-- than capacity while their holders' tokens still run); or 'm<ms>', a manual clock that tests
-- move by hand (RedisStoreBuilder::manual_clock, of the `testing` feature), taken as it is.
-- Anything else is refused, with an error reply `WRCLOCK`, before anything is read.

-- How far a gateway's clock may be from the server's, in ms.
local CLOCK_SKEW = 1000

-- The server's time in ms.
local function server_now()
  local t = redis.call('TIME')
  return tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end

-- The time `arg` names (above), in ms; nil and the reason for one it may not name.
local function call_time(arg)
  if arg == '0' then return server_now() end
  local manual = string.match(arg or '', '^m(%d+)$')
  if manual then
    local now = stored_integer(manual, 1, STORED_MAX)
    if now then return now end
    return nil, 'a manual clock that is no time'
  end
  local now = stored_integer(arg, 1, STORED_MAX)
  if not now then return nil, 'a time that is no number of ms' end
  local server = server_now()
  if math.abs(now - server) > CLOCK_SKEW then
    return nil, 'a clock ' .. string.format('%d', now - server) .. ' ms from the server\'s'
  end
  return now
end

-- The time `arg` names, or nil and the `WRCLOCK` error reply that refuses the call.
local function call_time_or_refusal(arg)
  local now, why = call_time(arg)
  if not now then return nil, redis.error_reply('WRCLOCK refused: ' .. why) end
  return now
end
