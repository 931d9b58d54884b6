-- A holder's state change on KEYS[1], applied only while the record is live, carries the holder's owner token
-- and is in one of the allowed states (compare-and-set in one atomic script, on the server's clock).
-- ARGV: owner (hex), allowed states (comma-separated), new state ('' = delete the record),
--       retention ms ('' = keep the record's expiry; else the record finishes now and is kept this long),
--       then field/value pairs to set. Reply: 1 applied, 0 not held.
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local function int(x) return string.format('%.0f', x) end

local r = redis.call('HMGET', KEYS[1], 'owner', 'state', 'exp')
local exp = tonumber(r[3])
if r[1] ~= ARGV[1] or not r[2] or not exp or exp <= now then return 0 end
if not string.find(',' .. ARGV[2] .. ',', ',' .. r[2] .. ',', 1, true) then return 0 end
if ARGV[3] == '' then
  redis.call('DEL', KEYS[1])
  return 1
end
redis.call('HSET', KEYS[1], 'state', ARGV[3], unpack(ARGV, 5))
if ARGV[4] ~= '' then
  local expires = now + tonumber(ARGV[4])
  redis.call('HSET', KEYS[1], 'lease', int(now), 'exp', int(expires))
  redis.call('PEXPIREAT', KEYS[1], int(expires))
end
return 1
