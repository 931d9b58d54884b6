-- Corrects the limit KEYS[1] by delta units, in one step: ballast-core's `Gcra::correct` on the server's clock
-- (a refund never moves the TAT before now, nor before where it was when that was already past).
-- ARGV: interval µs, tolerance µs, delta units, how long a TAT is kept past itself plus the tolerance, µs.
-- A limit that is gone (idle past its keep) is left alone: its TAT was long past, and a debt is forgiven.
-- Reply: 1 corrected, 0 gone.
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
local tat = tonumber(redis.call('GET', KEYS[1]))
if not tat then return 0 end
local interval, tolerance, delta, keep = tonumber(ARGV[1]), tonumber(ARGV[2]), tonumber(ARGV[3]), tonumber(ARGV[4])
local moved = tat + delta * interval
if delta < 0 then moved = math.max(moved, math.min(tat, now)) end
redis.call('SET', KEYS[1], string.format('%.17g', moved))
-- an expiry already past deletes the key: the limit is idle, as an absent one is
redis.call('PEXPIREAT', KEYS[1], string.format('%.0f', math.min(math.ceil((moved + tolerance + keep) / 1000), 1e13)))
return 1
