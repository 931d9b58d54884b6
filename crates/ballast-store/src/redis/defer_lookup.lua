-- Reads the operation of a scope with the server's clock (after defer_common.lua). ARGV from 3: storage key.
-- Reply: the operation (see `operation`; state nil = none), and its `keep` (the end of an ended one's retention).
local key = QUEUE .. 'op:' .. ARGV[3]
local reply = operation(key, 0)
reply[#FIELDS + 3] = redis.call('HGET', key, 'keep')
return reply
