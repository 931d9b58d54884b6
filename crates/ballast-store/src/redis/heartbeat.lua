-- Says that instance ARGV[1] is alive for ARGV[2] ms from now, in one step on the server's clock. KEYS[1] is the
-- sorted set of live instances, each scored with the Unix ms its liveness ends (each instance's own ttl);
-- members whose end passed are removed, and the set itself expires with its last member.
-- Reply: how many instances are alive, this one included.
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
redis.call('ZADD', KEYS[1], string.format('%.0f', now + tonumber(ARGV[2])), ARGV[1])
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', string.format('%.0f', now))
local last = redis.call('ZRANGE', KEYS[1], -1, -1, 'WITHSCORES')
if last[2] then redis.call('PEXPIREAT', KEYS[1], string.format('%.0f', tonumber(last[2]))) end
return redis.call('ZCARD', KEYS[1])
