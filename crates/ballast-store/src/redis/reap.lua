-- Deletes the records among KEYS (one SCAN batch) that are past their retention but still present: Redis
-- expires every record itself at its retention end, so these are stragglers whose expiry was removed (PERSIST,
-- a restore without TTLs). Keys of another type are left alone. Reply: how many were deleted.
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local deleted = 0
for _, key in ipairs(KEYS) do
  local exp = redis.pcall('HGET', key, 'exp')
  if type(exp) == 'string' and tonumber(exp) and tonumber(exp) <= now then
    redis.call('DEL', key)
    deleted = deleted + 1
  end
end
return deleted
