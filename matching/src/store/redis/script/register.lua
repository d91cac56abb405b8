-- The registered functions, one per operation, `<LIBRARY>_<op>` (each one's KEYS, ARGV and
-- reply in the header above its body: pointer.lua, operations.lua). No flags: not `no-writes`
-- and not `allow-oom`, so with `maxmemory` exhausted Redis refuses the whole call with OOM
-- before it starts, never half-run.

-- The library's name, as library.lua's first line gives it to Redis (which reads that line
-- as it is, so the name is written twice; a unit test holds the two equal, and to
-- src/matching/store/redis/calls.rs's LIBRARY): every function is named from it.
local LIBRARY = 'twr_match_v1'

-- Registers `<LIBRARY>_<name>`, which runs `body` with its keys and arguments once it was given
-- `nkeys` keys and `nargs` arguments.
local function register(name, body, nkeys, nargs)
  redis.register_function{
    function_name = LIBRARY .. '_' .. name,
    callback = function(keys, args)
      if #keys ~= nkeys or #args ~= nargs then
        return redis.error_reply('ERR malformed matching arguments')
      end
      return body(keys, args)
    end,
    flags = {},
  }
end

register('claim', POINTER.claim, 1, 5)
register('read', POINTER.read, 1, 1)
register('drop', POINTER.drop, 1, 1)
register('touch', POINTER.touch, 1, 2)
register('enter', QUEUE.enter, QUEUE_KEYS, QUEUE_ARGS + 2)
register('leave', QUEUE.leave, QUEUE_KEYS, QUEUE_ARGS + 2)
register('confirm', QUEUE.confirm, QUEUE_KEYS, QUEUE_ARGS + 2)
register('tick', QUEUE.tick, QUEUE_KEYS, QUEUE_ARGS)
