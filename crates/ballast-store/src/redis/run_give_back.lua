-- Gives back one retry of the run KEYS[1] (never below 0). A run that is gone stays gone (no key without an
-- expiry is created), and the run's expiry is left as it is.
-- Reply: 1 given back, 0 nothing to give back.
local taken = tonumber(redis.call('HGET', KEYS[1], 'taken'))
if taken and taken > 0 then
  redis.call('HINCRBY', KEYS[1], 'taken', -1)
  return 1
end
return 0
