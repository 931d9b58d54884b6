-- Defers the operation of a scope whose record its owner holds, in one step with the record (after
-- defer_common.lua). ARGV from 3: storage key, owner (hex), ttl ms, record grace ms, retention ms, tool,
-- priority, max attempts, request, due in ms, principal, route, key, then the last answer's status ('' for
-- none), headers and body, then the operation's own owner token (hex).
-- The record goes back to `claimed` under the operation's own token (the old holder's late renewal or release
-- is refused from then on), its lease stretched to the ttl plus the grace (its retention
-- moves with it, as a renewal's does); the operation replaces any of the scope's, queued under a new sequence
-- number (its place among equals). Reply: the operation (see `operation`), or 0 when the owner does not hold the
-- record.
local sk, owner = ARGV[3], ARGV[4]
local ttl, grace, retention = tonumber(ARGV[5]), tonumber(ARGV[6]), tonumber(ARGV[7])
local tool, priority = ARGV[8], tonumber(ARGV[9])
local record = RECORDS .. sk
if not held(record, owner) then return 0 end
local exp = tonumber(redis.call('HGET', record, 'exp'))
local lease_until = now + ttl + grace
local expires = math.max(exp, lease_until + retention)
local fresh = ARGV[19]
redis.call('HSET', record, 'state', 'claimed', 'owner', fresh, 'lease', int(lease_until), 'exp', int(expires))
redis.call('PEXPIREAT', record, int(expires))

local key = QUEUE .. 'op:' .. sk
local old = redis.call('HMGET', key, 'tool', 'member')
if old[1] and old[2] then unindex(old[1], old[2]) end
redis.call('DEL', key)
local member = string.format('%016.0f', redis.call('INCR', QUEUE .. 'seq')) .. ':' .. sk
local ends = now + ttl
local due = math.min(now + tonumber(ARGV[12]), ends)
local first = score(priority, due)
redis.call('HSET', key, 'principal', ARGV[13], 'route', ARGV[14], 'key', ARGV[15], 'tool', tool,
  'prio', ARGV[9], 'state', 'queued', 'attempts', '0', 'max', ARGV[10], 'request', ARGV[11],
  'deferred', int(now), 'due', int(due), 'expires', int(ends), 'owner', fresh, 'member', member,
  'score', int(first), 'sent', '0')
if ARGV[16] ~= '' then
  redis.call('HSET', key, 'l_status', ARGV[16], 'l_headers', ARGV[17], 'l_body', ARGV[18])
end
redis.call('ZADD', queued_key(tool), int(first), member)
redis.call('ZADD', all_key(tool), int((255 - priority) * SPAN + now), member)
redis.call('ZADD', ends_key(tool), int(ends), member)
redis.call('SADD', TOOLS, tool)
return operation(key, 0)
