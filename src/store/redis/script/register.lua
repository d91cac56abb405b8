-- The registered functions, one per operation, `twr_room_v8_<op>` (each one's KEYS, ARGV and
-- reply in the header above its body: visitor.lua, sync.lua, operator.lua, tickets.lua). Each
-- of the room's (`register`) runs the fast path for an enter or join when it can answer; else
-- the call's state, then main, repaired and run again once if it raised (see Bad days,
-- main.lua), and the fast path's window kept. No flags: not `no-writes` and not `allow-oom`, so
-- with `maxmemory` exhausted Redis refuses the whole call with OOM before it starts, never
-- half-run.

-- Registers `name` for the operation `op`, which takes `own` arguments after the call's, the
-- first of them its session (or sync's sessions) when `has_session`; `fast`: nil, or 'enter'
-- or 'join' for the fast path's two kinds of enter.
local function register(name, op, own, has_session, fast)
  redis.register_function{
    function_name = name,
    callback = function(keys, args)
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
    end,
    flags = {},
  }
end

register('twr_room_v8_enter', 'enter', 1, true, 'enter')
register('twr_room_v8_join', 'enter', 1, true, 'join')
register('twr_room_v8_poll', 'poll', 1, true)
register('twr_room_v8_heartbeat', 'heartbeat', 1, true)
register('twr_room_v8_release', 'release', 1, true)
register('twr_room_v8_sync', 'sync', 10, true)
register('twr_room_v8_stats', 'stats', 1, false)
register('twr_room_v8_configure', 'configure', 5, false)
register('twr_room_v8_admit_next', 'admit_next', 1, false)
register('twr_room_v8_ban', 'ban', 2, true)

-- The tickets' operations (tickets.lua): each runs on the session's ticket record alone, with
-- no flags either.
local function register_ticket(name, callback)
  redis.register_function{function_name = name, callback = callback, flags = {}}
end

register_ticket('twr_room_v8_ticket_mint', F.ticket_mint)
register_ticket('twr_room_v8_ticket_redeem', F.ticket_redeem)
