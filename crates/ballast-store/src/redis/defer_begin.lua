-- A worker is about to send an attempt (after defer_common.lua): the operation remembers it (a worker that dies
-- from here leaves it interrupted) and its record becomes `dispatched`, if it still carries the operation's owner.
-- ARGV from 3: storage key, worker (hex). Reply: 1 applied, 0 not held.
local key = QUEUE .. 'op:' .. ARGV[3]
local op = holding(key, ARGV[4])
if not op then return 0 end
redis.call('HSET', key, 'sent', '1')
local record = record_key(op.member)
local mine, state = held(record, op.owner)
if mine and state == 'claimed' then redis.call('HSET', record, 'state', 'dispatched') end
return 1
