-- A worker renews its hold on an operation (after defer_common.lua): its lease runs from now. Applied while the
-- operation is in progress under this worker, even if the lease ran out, as long as no other worker took it.
-- ARGV from 3: storage key, worker (hex), lease ms. Reply: 1 applied, 0 not held.
local key = QUEUE .. 'op:' .. ARGV[3]
local op = holding(key, ARGV[4])
if not op then return 0 end
local lease_until = now + tonumber(ARGV[5])
redis.call('HSET', key, 'wlease', int(lease_until))
redis.call('ZADD', taken_key(op.tool), int(lease_until), op.member)
return 1
