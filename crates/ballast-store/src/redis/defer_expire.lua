-- Ends the unfinished operations nobody works (after defer_common.lua; `DeferredQueue::expire_abandoned`),
-- whatever their tool: those whose ttl ended at least the grace ago (the first members of each tool's `ends`
-- index, by ttl end; the tools from the set of tools) and that no worker holds (queued, or in progress with the
-- worker's lease run out) — at most the batch of them, so the script stays short. One an attempt of which had
-- begun ends `outcome_unknown`, the attempt counted, its record too; any other ends `expired` and its record is
-- released — each as defer_finish.lua ends it (`end_operation`). One a live worker holds is left to it.
-- ARGV from 3: grace ms, batch, retention ms, the retired token (hex). Reply: how many ended.
local grace, batch, retention, retired = tonumber(ARGV[3]), tonumber(ARGV[4]), tonumber(ARGV[5]), ARGV[6]
local cutoff = int(now - grace)
local ended, seen = 0, 0
for _, tool in ipairs(redis.call('SMEMBERS', TOOLS)) do
  if seen >= batch then break end
  for _, member in ipairs(redis.call('ZRANGEBYSCORE', ends_key(tool), '-inf', cutoff, 'LIMIT', 0, batch - seen)) do
    seen = seen + 1
    local key = op_key(member)
    local r = redis.call('HMGET', key, 'state', 'member', 'tool', 'owner', 'wlease', 'sent')
    local state = r[1]
    if r[2] ~= member or r[3] ~= tool or (state ~= 'queued' and state ~= 'in_progress') then
      -- an index entry whose operation is gone (deleted by hand) or moved on: dropped, as a take drops it
      unindex(tool, member)
    elseif state == 'queued' or (tonumber(r[5]) or 0) <= now then
      local op = {member = member, tool = tool, owner = r[4]}
      if state == 'in_progress' and r[6] == '1' then
        end_operation(key, op, 'outcome_unknown', true, retention, 'unknown', nil, retired)
      else
        end_operation(key, op, 'expired', false, retention, 'release', nil, retired)
      end
      ended = ended + 1
    end
  end
end
return ended
