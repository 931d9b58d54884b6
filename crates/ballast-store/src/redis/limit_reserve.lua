-- Reserves every limit of KEYS together or none: ballast-core's `reserve_all`, on the server's clock, with the
-- same double arithmetic in the same order. Each key holds one number, the limit's TAT in µs (absent: 0).
-- ARGV: [1] max wait µs, [2] how long a TAT is kept past itself plus the tolerance, µs; then for key i,
-- ARGV[3i], ARGV[3i+1], ARGV[3i+2]: its interval µs, tolerance µs and the units charged.
-- Granted: every key gets its new TAT and an expiry (the limit, once idle, vanishes). Refused: nothing written.
-- Reply: {'granted' | 'refused', wait µs as text} (text: Redis would truncate a Lua number to an integer).
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
local function text(x) return string.format('%.17g', x) end
local max_wait, keep = tonumber(ARGV[1]), tonumber(ARGV[2])
local tats, wait = {}, 0
for i = 1, #KEYS do
  local tat = tonumber(redis.call('GET', KEYS[i])) or 0
  local tolerance = tonumber(ARGV[3 * i + 1])
  tats[i] = tat
  wait = math.max(wait, math.max(tat - tolerance - now, 0))
end
if wait > math.max(max_wait, 0) then return {'refused', text(wait)} end
local send = now + wait
for i = 1, #KEYS do
  local interval, tolerance, cost = tonumber(ARGV[3 * i]), tonumber(ARGV[3 * i + 1]), tonumber(ARGV[3 * i + 2])
  local tat = math.max(tats[i], send) + math.max(cost, 0) * interval
  redis.call('SET', KEYS[i], text(tat))
  -- ms, at most 1e13 (the year 2286): a TAT pushed absurdly far still gets an expiry Redis accepts
  redis.call('PEXPIREAT', KEYS[i], string.format('%.0f', math.min(math.ceil((tat + tolerance + keep) / 1000), 1e13)))
end
return {'granted', text(wait)}
