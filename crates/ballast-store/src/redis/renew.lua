-- A live holder renews its lease on KEYS[1]: applied only while the record is live, carries the holder's owner
-- token and is `claimed` or `dispatched` (compare-and-set in one atomic script, on the server's clock).
-- ARGV: owner (hex), lease ms, retention ms. The lease runs from now; the retention never ends before it.
-- Reply: 1 applied, 0 not held.
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local function int(x) return string.format('%.0f', x) end

local r = redis.call('HMGET', KEYS[1], 'owner', 'state', 'exp')
local exp = tonumber(r[3])
if r[1] ~= ARGV[1] or not exp or exp <= now then return 0 end
if r[2] ~= 'claimed' and r[2] ~= 'dispatched' then return 0 end
local lease_until = now + tonumber(ARGV[2])
local expires = math.max(exp, lease_until + tonumber(ARGV[3]))
redis.call('HSET', KEYS[1], 'lease', int(lease_until), 'exp', int(expires))
redis.call('PEXPIREAT', KEYS[1], int(expires))
return 1
