-- Adds calls to the run KEYS[1] and takes one retry if its allowance has one left, in one step.
-- ARGV: calls to add, base, share (the rule: base + floor(share x calls) retries in all; share at least 0),
-- ttl ms. The limit stops at 2^53 (Lua counts in doubles; no run comes near).
-- Reply: {1 taken | 0 not, calls, taken} after the decision.
local calls = redis.call('HINCRBY', KEYS[1], 'calls', ARGV[1])
local taken = tonumber(redis.call('HGET', KEYS[1], 'taken')) or 0
local limit = math.min(tonumber(ARGV[2]) + math.floor(tonumber(ARGV[3]) * calls), 9007199254740992)
local took = 0
if taken < limit then
  taken = redis.call('HINCRBY', KEYS[1], 'taken', 1)
  took = 1
end
redis.call('PEXPIRE', KEYS[1], ARGV[4])
return {took, calls, taken}
