-- Counts the unfinished operations of every tool per class (after defer_common.lua), with the oldest one's age.
-- A tool's `all` index scores each unfinished operation (255 - priority) * SPAN + its deferral ms, so a class's
-- first member is its oldest and ZCOUNT its size; its in-progress ones (few: one per busy worker) are counted
-- one by one. Reply: {tool, priority, queued, in progress, oldest age ms} for each class, flattened.
local reply = {}
for _, tool in ipairs(redis.call('SMEMBERS', TOOLS)) do
  local busy = {}
  for _, member in ipairs(redis.call('ZRANGE', taken_key(tool), 0, -1)) do
    local priority = tonumber(redis.call('HGET', op_key(member), 'prio'))
    if priority then busy[priority] = (busy[priority] or 0) + 1 end
  end
  local lo = '-inf'
  while true do
    local r = redis.call('ZRANGEBYSCORE', all_key(tool), lo, '+inf', 'WITHSCORES', 'LIMIT', 0, 1)
    if #r == 0 then break end
    local s = tonumber(r[2])
    local class = math.floor(s / SPAN)
    local priority = 255 - class
    local count = redis.call('ZCOUNT', all_key(tool), int(class * SPAN), '(' .. int((class + 1) * SPAN))
    local in_progress = math.min(busy[priority] or 0, count)
    for _, v in ipairs({tool, priority, count - in_progress, in_progress, math.max(now - (s - class * SPAN), 0)}) do
      reply[#reply + 1] = v
    end
    lo = int((class + 1) * SPAN)
  end
end
return reply
