-- The registered functions, one per operation, `<LIBRARY>_<op>` (keys.lua's LIBRARY, the
-- library's name: each one's KEYS, ARGV and reply in the header above its body: visitor.lua,
-- sync.lua, operator.lua, tickets.lua, auto.lua, batch.lua). Each of the room's (`register`) runs the fast
-- path for an enter or join when it can answer; else the call's state, then main, repaired and
-- run again once if it raised (see Bad days, main.lua), and the fast path's window kept. No
-- flags: not `no-writes` and not `allow-oom`, so with `maxmemory` exhausted Redis refuses the
-- whole call with OOM before it starts, never half-run.

-- The room's call of the operation `op`, which takes `own` arguments after the call's, the
-- first of them its session (or sync's sessions) when `has_session`; `fast`: nil, or 'enter' or
-- 'join' for the fast path's two kinds of enter. Every room function's callback, and each
-- newcomer's join in a batch (batch.lua).
-- Runs: fast_path.lua F.fast_enter (enter and join only); call.lua F.setup, which reads
--   time.lua's clock and schedule.lua's schedule and makes liveness.lua's rings; main.lua
--   F.main (and F.repair), whose steps run in settings.lua, line.lua, liveness.lua and pace.lua
--   (sync.lua too for a sync); the operation's body (its header's Runs line); fast_path.lua
--   F.keep_window, F.close_window.
function F.room_call(op, own, has_session, fast, keys, args)
  if fast then
    local ok, reply = pcall(F.fast_enter, keys, args, fast == 'join')
    if ok and reply then return reply end
  end
  local refused = F.setup(op, keys, args, own, has_session)
  if refused then return refused end
  local ok, reply = pcall(F.main)
  if not ok then
    F.repair()
    ok, reply = pcall(F.main)
    if not ok then
      -- Whatever the failed runs wrote, the fast path must not go on from it.
      F.close_window(R.k_fast)
      error(reply)
    end
  end
  F.keep_window(reply)
  return reply
end

-- Registers `<LIBRARY>_<name>` for the operation `op`, its arguments as F.room_call takes them.
local function register(name, op, own, has_session, fast)
  redis.register_function{
    function_name = LIBRARY .. '_' .. name,
    callback = function(keys, args)
      return F.room_call(op, own, has_session, fast, keys, args)
    end,
    flags = {},
  }
end

register('enter', 'enter', 1, true, 'enter')
register('join', 'enter', 1, true, 'join')
register('poll', 'poll', 1, true)
register('heartbeat', 'heartbeat', 1, true)
register('release', 'release', 1, true)
register('sync', 'sync', 11, true)
register('stats', 'stats', 1, false)
register('configure', 'configure', 5, false)
register('admit_next', 'admit_next', 1, false)
register('ban', 'ban', 2, true)
register('auto_apply', 'auto_apply', 4, false)

-- The batch of joins (batch.lua): the room's call of join for each newcomer, in one call; with
-- no flags either.
local function register_batch(name, callback)
  redis.register_function{function_name = LIBRARY .. '_' .. name, callback = callback, flags = {}}
end

register_batch('join_batch', F.join_batch)

-- The operations on a record alone, `<LIBRARY>_<name>`: the tickets' (tickets.lua), each on the
-- session's ticket record, and the capacity controller's report and switch (auto.lua), on the
-- room's controller record; with no flags either.
local function register_record(name, callback)
  redis.register_function{function_name = LIBRARY .. '_' .. name, callback = callback, flags = {}}
end

register_record('ticket_mint', F.ticket_mint)
register_record('ticket_redeem', F.ticket_redeem)
register_record('auto_report', F.auto_report)
register_record('auto_switch', F.auto_switch)
