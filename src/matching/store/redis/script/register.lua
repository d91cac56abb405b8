-- The registered functions, one per operation, `twr_match_v1_<op>` (each one's KEYS, ARGV and
-- reply in the header above its body: pointer.lua, operations.lua). No flags: not `no-writes`
-- and not `allow-oom`, so with `maxmemory` exhausted Redis refuses the whole call with OOM
-- before it starts, never half-run.

-- Registers `name`, which runs `body` with its keys and arguments once it was given `nkeys` keys
-- and `nargs` arguments.
local function register(name, body, nkeys, nargs)
  redis.register_function{
    function_name = name,
    callback = function(keys, args)
      if #keys ~= nkeys or #args ~= nargs then
        return redis.error_reply('ERR malformed matching arguments')
      end
      return body(keys, args)
    end,
    flags = {},
  }
end

register('twr_match_v1_claim', POINTER.claim, 1, 5)
register('twr_match_v1_read', POINTER.read, 1, 1)
register('twr_match_v1_drop', POINTER.drop, 1, 1)
register('twr_match_v1_touch', POINTER.touch, 1, 2)
register('twr_match_v1_enter', QUEUE.enter, QUEUE_KEYS, QUEUE_ARGS + 2)
register('twr_match_v1_leave', QUEUE.leave, QUEUE_KEYS, QUEUE_ARGS + 2)
register('twr_match_v1_confirm', QUEUE.confirm, QUEUE_KEYS, QUEUE_ARGS + 2)
register('twr_match_v1_tick', QUEUE.tick, QUEUE_KEYS, QUEUE_ARGS)
