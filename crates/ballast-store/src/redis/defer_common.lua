-- The start of every deferred-queue script (prepended to each): the server's clock, the key layout, the reply of
-- an operation, and the record writes the queue makes. ARGV[1] is the records' prefix, ARGV[2] the queue's
-- (`{base}defer:`); each script's own arguments follow from ARGV[3]. Keys are built here from those prefixes
-- (the operation a take picks, the queues of a replaced operation are known only inside): one server, not
-- Cluster, as the shared state's reservations already require.
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local function int(x) return string.format('%.0f', x) end
local RECORDS, QUEUE = ARGV[1], ARGV[2]
-- A class's span of scores: score = (255 - priority) * SPAN + due ms (capped below SPAN, the year 2248), so a
-- queue sorts by class, then due time, exactly (at most 2^51, within a double's exact integers); members of one
-- score sort by their text, which starts with the deferral's sequence number.
local SPAN = 8796093022208
local TOOLS = QUEUE .. 'tools'
local function op_key(member) return QUEUE .. 'op:' .. string.sub(member, 18) end
local function record_key(member) return RECORDS .. string.sub(member, 18) end
local function queued_key(tool) return QUEUE .. 'queued:' .. tool end
local function taken_key(tool) return QUEUE .. 'taken:' .. tool end
local function all_key(tool) return QUEUE .. 'all:' .. tool end
local function ends_key(tool) return QUEUE .. 'ends:' .. tool end
local function score(priority, due) return (255 - priority) * SPAN + math.min(due, SPAN - 1) end

-- The fields an operation is answered with, in this order after the server's time and the interrupted flag.
local FIELDS = {'principal', 'route', 'key', 'tool', 'prio', 'state', 'attempts', 'max', 'request', 'deferred',
  'due', 'expires', 'finished', 'l_status', 'l_headers', 'l_body'}
local function operation(key, interrupted)
  local reply = {now, interrupted}
  local r = redis.call('HMGET', key, unpack(FIELDS))
  for i = 1, #FIELDS do reply[i + 2] = r[i] end
  return reply
end

-- Takes `member` out of its tool's indexes, and the tool out of the set of tools once it has nothing left.
local function unindex(tool, member)
  redis.call('ZREM', queued_key(tool), member)
  redis.call('ZREM', taken_key(tool), member)
  redis.call('ZREM', all_key(tool), member)
  redis.call('ZREM', ends_key(tool), member)
  if redis.call('EXISTS', all_key(tool)) == 0 then redis.call('SREM', TOOLS, tool) end
end

-- Whether the record at `key` is live and carries `owner` in `claimed` or `dispatched`: the queue writes a
-- record only then (a live request that took it over keeps what it made).
local function held(key, owner)
  local r = redis.call('HMGET', key, 'owner', 'state', 'exp')
  local exp = tonumber(r[3])
  return owner and r[1] == owner and exp and exp > now and (r[2] == 'claimed' or r[2] == 'dispatched'), r[2], exp
end

-- The worker's hold on the operation at `key`: its fields when it is `in_progress` under `worker`, else nil.
local function holding(key, worker)
  local r = redis.call('HMGET', key, 'state', 'worker', 'member', 'tool', 'owner', 'prio', 'expires', 'attempts')
  if r[1] ~= 'in_progress' or r[2] ~= worker or not r[3] then return nil end
  return {member = r[3], tool = r[4], owner = r[5], prio = tonumber(r[6]), expires = tonumber(r[7]),
    attempts = tonumber(r[8]) or 0}
end

-- Ends the operation at `key` (`op`: its member, tool and record token) in `state`, one attempt more if
-- `attempted`, with `answer` ({status, headers, body}, or nil for none) as its last: it leaves the indexes and is
-- kept `retention` ms from now (then Redis deletes it: its key expires). Its record, if it still carries the
-- operation's token, becomes what `record_end` says ('completed': the answer | 'release': deleted | 'unknown':
-- outcome_unknown under the `retired` token) and is kept as long.
local function end_operation(key, op, state, attempted, retention, record_end, answer, retired)
  local keep = now + retention
  if attempted then redis.call('HINCRBY', key, 'attempts', 1) end
  redis.call('HSET', key, 'state', state, 'finished', int(now), 'keep', int(keep), 'sent', '0')
  redis.call('HDEL', key, 'worker', 'wlease', 'l_status', 'l_headers', 'l_body')
  if answer then
    redis.call('HSET', key, 'l_status', answer[1], 'l_headers', answer[2], 'l_body', answer[3])
  end
  redis.call('PEXPIREAT', key, int(keep))
  unindex(op.tool, op.member)

  local record = record_key(op.member)
  if not held(record, op.owner) then return end
  if record_end == 'release' then
    redis.call('DEL', record)
    return
  end
  if record_end == 'completed' then
    redis.call('HSET', record, 'state', 'completed', 'status', answer[1], 'headers', answer[2], 'body', answer[3])
  else
    redis.call('HSET', record, 'state', 'outcome_unknown', 'owner', retired)
  end
  redis.call('HSET', record, 'lease', int(now), 'exp', int(keep))
  redis.call('PEXPIREAT', record, int(keep))
end
