-- Reads KEYS[1] with the server's clock, in one step. Reply: {now_ms, state, fp, owner, lease, exp, status,
-- headers, body} (missing fields nil; state nil = no record).
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local r = redis.call('HMGET', KEYS[1], 'state', 'fp', 'owner', 'lease', 'exp', 'status', 'headers', 'body')
return {now, r[1], r[2], r[3], r[4], r[5], r[6], r[7], r[8]}
