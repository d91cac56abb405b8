-- The registered function: the fast path for an enter when it can answer; else the call's
-- state, then main, repaired and run again once if it raised (see Bad days), and the fast
-- path's window kept. No flags: not `no-writes` and not `allow-oom`, so with `maxmemory`
-- exhausted Redis refuses the whole call with OOM before it starts, never half-run.
redis.register_function{
  function_name = 'twr_room_v7',
  callback = function(keys, args)
    if not OPS[args[1]] then return redis.error_reply('ERR unknown waiting room operation') end
    if args[1] == 'enter' or args[1] == 'join' then
      local ok, reply = pcall(F.fast_enter, keys, args)
      if ok and reply then return reply end
    end
    local refused = F.setup(keys, args)
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
