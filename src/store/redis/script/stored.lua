-- Stored numbers, read strictly: the one reader of every number a script reads back from a key,
-- shared by every script of the crate: this library (the tickets' functions included) and
-- matching's, each assembled with it (src/store/redis/protocol.rs,
-- matching/src/store/redis/calls.rs).
--
-- A stored number may have been damaged behind the scripts' backs (a hand edit, another
-- program, a half-applied bug), and Lua's tonumber reads far more than a script ever writes:
-- 'inf', '-inf', 'nan', '1e999', '2.5', '0x10', ' 7'. Used as read, a capacity of 'inf' lets
-- everyone in. So a stored integer is read only as the scripts write one (string.format('%d'),
-- INCR, HINCRBY), which is Redis's own integer grammar: '0', or an optional '-' and digits
-- without a leading zero (not '01', '007', '00' or '-0', which INCR refuses: a seq kept in such
-- a form would fail every join), nothing else, within the caller's range (and 2^53); anything
-- else reads as nil, which every caller takes for a missing value and repairs (its default, or
-- the safe way named where it is read). The arguments a caller sends are read by the same rule
-- (call.lua's `argument_integer`). A sorted set's scores are doubles that
-- Redis checked (never text, never 'nan'): read with tonumber, or stored_score where 'inf'
-- matters.

-- 2^53: the largest range in which a double holds every integer (a time in ms, a sequence
-- number, an epoch); no stored integer lies beyond it.
local STORED_MAX = 9007199254740992
-- The largest capacity and rate (the crate's u32s).
local U32_MAX = 4294967295

-- The integer the string `value` holds, if it is written as above and lies in [min, max]
-- (both within 2^53); else nil. The text is looked at last, once tonumber and the range passed
-- it: every call reads some fifteen settings fields through here.
local function stored_integer(value, min, max)
  local n = tonumber(value)
  -- What tonumber reads besides digits: '0x10', '1e3', ' 7', '+7', '7.0'; and 'nan', which
  -- no comparison passes.
  if n and n >= min and n <= max and (string.find(value, '^%-?[1-9]%d*$') or value == '0') then
    return n
  end
  return nil
end

-- A stored score (a sorted set's, as Redis formats it with %.17g, or one a script kept): the
-- finite number `value` writes in decimal, else nil ('inf', 'nan', '0x10', '1e999' are not one).
local function stored_score(value)
  if type(value) ~= 'string' or not (string.find(value, '^%-?%d+%.?%d*$')
      or string.find(value, '^%-?%d+%.?%d*e[-+]%d+$')) then
    return nil
  end
  local n = tonumber(value)
  if n == nil or n ~= n or n == math.huge or n == -math.huge then return nil end
  return n
end
