-- A worker gives an operation back to its queue (after defer_common.lua), due again `due in` from now (capped at
-- its ttl's end); its record goes back to `claimed` if it still carries the operation's owner.
-- ARGV from 3: storage key, worker (hex), due in ms, attempted ('1' counts an attempt), then the last answer's
-- status ('' keeps the last one), headers and body. Reply: 1 applied, 0 not held.
local key = QUEUE .. 'op:' .. ARGV[3]
local op = holding(key, ARGV[4])
if not op then return 0 end
local due = math.min(now + tonumber(ARGV[5]), op.expires)
local again = score(op.prio, due)
if ARGV[6] == '1' then redis.call('HINCRBY', key, 'attempts', 1) end
redis.call('HSET', key, 'state', 'queued', 'due', int(due), 'score', int(again), 'sent', '0')
redis.call('HDEL', key, 'worker', 'wlease')
if ARGV[7] ~= '' then
  redis.call('HSET', key, 'l_status', ARGV[7], 'l_headers', ARGV[8], 'l_body', ARGV[9])
end
redis.call('ZREM', taken_key(op.tool), op.member)
redis.call('ZADD', queued_key(op.tool), int(again), op.member)
local record = record_key(op.member)
if held(record, op.owner) then redis.call('HSET', record, 'state', 'claimed') end
return 1
