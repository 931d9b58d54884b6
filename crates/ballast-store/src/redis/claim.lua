-- Claims KEYS[1] (one hash per record) — the same decision as decide.rs `claim_step`, made atomically inside
-- Redis on the server's clock, so two gateways racing on one key see one winner.
-- ARGV: fingerprint (32 bytes), owner (hex), lease ms, retention ms, expired dispatch ('unknown' | 'takeover').
-- Reply: {'acquired'} | {'took_over', was} | {'unknown'} | {'mismatch'} | {'in_progress', state, lease_left_ms}
--      | {'completed', status, headers, body} | {'corrupt', what}.
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local lease_until = now + tonumber(ARGV[3])
local retention = tonumber(ARGV[4])
local function int(x) return string.format('%.0f', x) end

-- Hands the record to the claimer as `claimed`, kept until its lease plus the retention (then Redis deletes it).
local function hold()
  local expires = lease_until + retention
  redis.call('HSET', KEYS[1], 'state', 'claimed', 'fp', ARGV[1], 'owner', ARGV[2],
    'lease', int(lease_until), 'exp', int(expires))
  redis.call('PEXPIREAT', KEYS[1], int(expires))
end

local r = redis.call('HMGET', KEYS[1], 'state', 'fp', 'owner', 'lease', 'exp', 'status', 'headers', 'body')
local state, exp, lease = r[1], tonumber(r[5]), tonumber(r[4])
if state and not exp then return {'corrupt', 'exp'} end
if not state or exp <= now then
  -- absent, or past its retention and not yet expired by Redis: a fresh record (no stale response fields)
  redis.call('DEL', KEYS[1])
  hold()
  return {'acquired'}
end
if r[2] ~= ARGV[1] then return {'mismatch'} end
if state == 'completed' then return {'completed', r[6], r[7], r[8]} end
if state == 'outcome_unknown' then return {'unknown'} end
if state ~= 'claimed' and state ~= 'dispatched' then return {'corrupt', 'state'} end
if not lease then return {'corrupt', 'lease'} end
if lease > now then return {'in_progress', state, lease - now} end
if state == 'dispatched' and ARGV[5] == 'unknown' then
  -- sent, then its holder vanished, and the upstream cannot deduplicate: final
  local expires = now + retention
  redis.call('HSET', KEYS[1], 'state', 'outcome_unknown', 'exp', int(expires))
  redis.call('PEXPIREAT', KEYS[1], int(expires))
  return {'unknown'}
end
hold()
return {'took_over', state}
