-- Takes the best due operation of the tools named, for a worker, in one step (after defer_common.lua): so two
-- workers never hold one operation. ARGV from 3: worker (hex), lease ms, then the tools.
-- Candidates: queued operations due by now, and in-progress ones whose worker's lease ended; the best has the
-- lowest score (class, then due time), then the lowest member (the earliest deferral). A queue is read one class
-- at a time: the first member of each class present shows whether that class has anything due.
-- A taken operation that was in progress with an attempt begun was interrupted: that attempt counts.
-- Reply: the operation (see `operation`, with the interrupted flag), or nil when nothing is due.
local worker, lease = ARGV[3], tonumber(ARGV[4])

local function first_due(tool)
  local lo = '-inf'
  while true do
    local r = redis.call('ZRANGEBYSCORE', queued_key(tool), lo, '+inf', 'WITHSCORES', 'LIMIT', 0, 1)
    if #r == 0 then return nil end
    local s = tonumber(r[2])
    local class = math.floor(s / SPAN)
    if s - class * SPAN <= now then return r[1], s end
    lo = int((class + 1) * SPAN)
  end
end

local function better(member, s, best)
  return not best or s < best.score or (s == best.score and member < best.member)
end

local function pick()
  local best
  for i = 5, #ARGV do
    local tool = ARGV[i]
    local member, s = first_due(tool)
    if member and better(member, s, best) then best = {member = member, score = s, tool = tool} end
    for _, ended in ipairs(redis.call('ZRANGEBYSCORE', taken_key(tool), '-inf', int(now))) do
      local es = tonumber(redis.call('HGET', op_key(ended), 'score'))
      if not es then
        unindex(tool, ended)
      elseif better(ended, es, best) then
        best = {member = ended, score = es, tool = tool}
      end
    end
  end
  return best
end

while true do
  local best = pick()
  if not best then return false end
  local key = op_key(best.member)
  local r = redis.call('HMGET', key, 'state', 'sent', 'member', 'tool')
  if (r[1] == 'queued' or r[1] == 'in_progress') and r[3] == best.member and r[4] == best.tool then
    local interrupted = 0
    if r[1] == 'in_progress' and r[2] == '1' then
      redis.call('HINCRBY', key, 'attempts', 1)
      interrupted = 1
    end
    local lease_until = now + lease
    redis.call('HSET', key, 'state', 'in_progress', 'worker', worker, 'wlease', int(lease_until), 'sent', '0')
    redis.call('ZREM', queued_key(best.tool), best.member)
    redis.call('ZADD', taken_key(best.tool), int(lease_until), best.member)
    return operation(key, interrupted)
  end
  -- an index entry whose operation is gone or moved on (deleted by hand, replaced): dropped, and look again
  unindex(best.tool, best.member)
end
