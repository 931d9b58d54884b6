-- Deletes the ended operations among KEYS (one SCAN batch) whose retention passed but that are still present:
-- Redis expires every ended operation itself, so these are stragglers that lost their expiry (PERSIST, a restore
-- without TTLs). Unfinished operations and keys of another type are left alone. Reply: how many were deleted.
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local deleted = 0
for _, key in ipairs(KEYS) do
  local keep = redis.pcall('HGET', key, 'keep')
  if type(keep) == 'string' and tonumber(keep) and tonumber(keep) <= now then
    redis.call('DEL', key)
    deleted = deleted + 1
  end
end
return deleted
