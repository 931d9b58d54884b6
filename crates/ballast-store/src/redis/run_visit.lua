-- Visits the run KEYS[1] on the server's clock, in one step. The run is one hash: `dl` (its deadline, Unix ms),
-- `calls`, `taken`. ARGV: the offered deadline in ms from now ('' for none), ttl ms.
-- The run keeps the earlier of its deadline and the offer, and is kept ttl from now (then Redis deletes it, and
-- the next visit finds a fresh run).
-- Reply: {deadline in ms from now (may be negative) | nil, calls, taken}.
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local r = redis.call('HMGET', KEYS[1], 'dl', 'calls', 'taken')
local dl = tonumber(r[1])
if ARGV[1] ~= '' then
  local offered = now + tonumber(ARGV[1])
  if not dl or offered < dl then
    dl = offered
    redis.call('HSET', KEYS[1], 'dl', string.format('%.0f', dl))
  end
end
-- A visit keeps the run even without a deadline (a hash needs a field to exist).
redis.call('HSETNX', KEYS[1], 'calls', '0')
redis.call('PEXPIRE', KEYS[1], ARGV[2])
local left = false
if dl then left = dl - now end
return {left, tonumber(r[2]) or 0, tonumber(r[3]) or 0}
