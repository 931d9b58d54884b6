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
