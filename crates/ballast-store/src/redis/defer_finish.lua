-- A worker ends an operation and settles its record with it, in one step (after defer_common.lua). The ended
-- operation leaves the queue and is kept the retention from now (then Redis deletes it: its key expires).
-- ARGV from 3: storage key, worker (hex), end state, attempted ('1' counts an attempt), retention ms, what the
-- record becomes ('completed': the answer that follows | 'release': deleted | 'unknown': outcome_unknown under
-- the retired token, ARGV[12]), then the answer's status ('' for none), headers and body, then the retired token.
-- The record is written only if it still carries the operation's owner. Reply: 1 applied, 0 not held.
local key = QUEUE .. 'op:' .. ARGV[3]
local op = holding(key, ARGV[4])
if not op then return 0 end
local retention, record_end = tonumber(ARGV[7]), ARGV[8]
local keep = now + retention
if ARGV[6] == '1' then redis.call('HINCRBY', key, 'attempts', 1) end
redis.call('HSET', key, 'state', ARGV[5], 'finished', int(now), 'keep', int(keep), 'sent', '0')
redis.call('HDEL', key, 'worker', 'wlease', 'l_status', 'l_headers', 'l_body')
if ARGV[9] ~= '' then
  redis.call('HSET', key, 'l_status', ARGV[9], 'l_headers', ARGV[10], 'l_body', ARGV[11])
end
redis.call('PEXPIREAT', key, int(keep))
unindex(op.tool, op.member)

local record = record_key(op.member)
if held(record, op.owner) then
  if record_end == 'release' then
    redis.call('DEL', record)
  else
    if record_end == 'completed' then
      redis.call('HSET', record, 'state', 'completed', 'status', ARGV[9], 'headers', ARGV[10], 'body', ARGV[11])
    else
      redis.call('HSET', record, 'state', 'outcome_unknown', 'owner', ARGV[12])
    end
    redis.call('HSET', record, 'lease', int(now), 'exp', int(keep))
    redis.call('PEXPIREAT', record, int(keep))
  end
end
return 1
